# `make run` and `make test` do all set-up on a fresh machine; `make setup` is the install alone.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: setup run test lint bench clean nginx

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

test: setup nginx
	$(BIN)/ruff check .
	$(BIN)/python -m pytest

# The proxy tests run a real nginx (Debian's package); installed only when it is missing.
nginx:
	@command -v nginx >/dev/null || test -x /usr/sbin/nginx || \
		{ apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q nginx-light; }

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

clean:
	rm -rf $(VENV) staticfiles db.sqlite3
