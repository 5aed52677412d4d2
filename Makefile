# virtualstac development tasks. `make demo` and `make test` work on a fresh machine with
# Python 3.12 and make: they create .venv and install what they need into it.

PYTHON ?= $(shell command -v python3.12 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test lint bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 12), "virtualstac needs Python >= 3.12, found " + sys.version'
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m virtualstac.demo

test: $(STAMP)
	$(PY) -m pytest -q

lint: $(STAMP)
	$(PY) -m ruff check src tests benchmarks
	$(PY) -m ruff format --check src tests benchmarks
	$(PY) -m mypy

# Writes benchmarks/results/ (results.md and the plots); `make bench BENCH_ARGS=--quick` for a
# smoke run (written to benchmarks/results/quick/).
bench: $(STAMP)
	$(PY) -m pip install --quiet -e '.[benchmarks]'
	$(PY) benchmarks/run_all.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) demo-output .pytest_cache .mypy_cache .ruff_cache
