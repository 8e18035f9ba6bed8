# `make demo` and `make test` each build .venv from nothing when it is missing.
# The demo needs only the base install (scripted model, real tools): no extras, so
# no llama-cpp-python to compile. `make test` installs every extra.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO_STAMP := $(VENV)/.installed-base

.PHONY: demo test lint bench clean system-deps

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev,postgres,notebooks,draw,local,dashboard,tracing,distributed,semantic,optimize,web,docs,eval]'
	touch $(STAMP) $(DEMO_STAMP)

$(DEMO_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $(DEMO_STAMP)

# Graphviz's `dot` renders drawings offline; Chromium runs the dashboard's browser
# tests. Both come from Debian when missing.
system-deps:
	@command -v dot >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq graphviz >/dev/null; \
	  else echo "graphviz is missing: sudo apt-get install graphviz" >&2; fi; }
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq chromium chromium-driver >/dev/null; \
	  else echo "chromium is missing: sudo apt-get install chromium chromium-driver" >&2; fi; }

demo: $(DEMO_STAMP)
	$(BIN)/aimegraph demo

test: $(STAMP) system-deps
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check src tests
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) .aimegraph
