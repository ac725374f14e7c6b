# The two commands that matter: `make demo` and `make test`. Both set up what is missing.
VENV := .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?=

.PHONY: setup test test-fast lint demo bench clean

setup:
	@bash scripts/setup.sh

# --rootdir=tests: the repository root is the package itself (it has __init__.py); as pytest's rootdir
# it would be collected as a package named after the checkout's folder, which fails for folder names
# that are not Python identifiers (a clone into `moviemem-main`, say)
test: setup lint
	$(PY) -m pytest -q --rootdir=tests --durations=25 $(PYTEST_ARGS)

# ruff (pyflakes, pycodestyle, imports, bugbear, naming) and mypy (strict on memory/, backbones/, agents/)
lint: setup
	$(VENV)/bin/ruff check .
	bash scripts/typecheck.sh

test-fast: setup
	$(PY) -m pytest -q --rootdir=tests -m "not slow" $(PYTEST_ARGS)

demo: setup
	$(VENV)/bin/moviemem demo --out out/demo --library out/library

bench: setup
	$(PY) bench/ingest_speed.py

clean:
	rm -rf out .pytest_cache
