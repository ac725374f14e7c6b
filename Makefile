# The two commands that matter: `make demo` and `make test`. Both set up what is missing.
VENV := .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?=

.PHONY: setup test test-fast demo bench clean

setup:
	@bash scripts/setup.sh

test: setup
	$(PY) -m pytest -q $(PYTEST_ARGS)

test-fast: setup
	$(PY) -m pytest -q -m "not slow" $(PYTEST_ARGS)

demo: setup
	$(VENV)/bin/moviemem demo --out out/demo --library out/library

bench: setup
	$(PY) bench/ingest_speed.py

clean:
	rm -rf out .pytest_cache
