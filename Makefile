# `make run` and `make test` do all set-up on a fresh machine; `make setup` is the install alone.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: setup run test lint bench clean

setup: $(STAMP)

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

run: setup
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python manage.py collectstatic --noinput -v 0
	$(BIN)/uvicorn chatsite.asgi:application --host $(HOST) --port $(PORT)

test: setup
	$(BIN)/ruff check .
	$(BIN)/python -m pytest

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# BENCH_ARGS=--quick for a short run; results in bench/results/ (docs/bench.md).
bench: setup
	$(BIN)/pip install -q -e '.[bench]'
	$(BIN)/python -m bench $(BENCH_ARGS)

clean:
	rm -rf $(VENV) staticfiles db.sqlite3
