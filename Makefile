# `make demo` and `make test` each build .venv from nothing when it is missing.
# The demo needs only the base install (scripted model, real tools): no extras, so
# no llama-cpp-python to compile. `make test` installs every extra.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO_STAMP := $(VENV)/.installed-base
BFCL := bfcl-eval==2026.3.23

.PHONY: demo test lint bench clean system-deps sandbox-deps

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev,postgres,notebooks,draw,local,smollm2,dashboard,tracing,metrics,distributed,semantic,optimize,web,docs,mcp,a2a,eval,anthropic,ollama,agentdojo]'
	# BFCL's package pins numpy==1.26.4 and a dozen SDKs; its multi-turn data, APIs and
	# checker need none of them (aimegraph.eval.public.bfcl), so it comes without them
	$(BIN)/python -m pip install --quiet --no-deps '$(BFCL)'
	touch $(STAMP) $(DEMO_STAMP)

$(DEMO_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $(DEMO_STAMP)

# bubblewrap is the sandbox model-written code runs in (python, shell tools). As root it
# comes from Debian when missing (the package lists are fetched only if the first try
# fails); other users are told what to install.
sandbox-deps:
	@command -v bwrap >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then \
	    apt-get install -y -qq bubblewrap >/dev/null 2>&1 || \
	    { apt-get update -qq && apt-get install -y -qq bubblewrap >/dev/null; }; \
	  else echo "bubblewrap is missing: sudo apt-get install bubblewrap" \
	    "(or run code unconfined: aimegraph demo --sandbox none)" >&2; fi; }

# Graphviz's `dot` renders drawings offline; Chromium runs the dashboard's browser
# tests. Both come from Debian when missing.
system-deps: sandbox-deps
	@command -v dot >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq graphviz >/dev/null; \
	  else echo "graphviz is missing: sudo apt-get install graphviz" >&2; fi; }
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq chromium chromium-driver >/dev/null; \
	  else echo "chromium is missing: sudo apt-get install chromium chromium-driver" >&2; fi; }

demo: $(DEMO_STAMP) sandbox-deps
	$(BIN)/aimegraph demo

# The layering contracts first ([tool.importlinter] in pyproject.toml): an import that
# points up the layers fails the build before any test runs. The suite runs with
# LangGraph's strict checkpoint deserialisation: a checkpointed type nobody allowed fails
# the tests instead of logging "Deserializing unregistered type".
test: $(STAMP) system-deps
	$(BIN)/lint-imports
	LANGGRAPH_STRICT_MSGPACK=true $(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check src tests
	$(BIN)/mypy

# Every section: the dashboard's needs chromium, the distributed one Redis and Postgres
# on 127.0.0.1 (it says so and keeps its last results file when they are missing).
bench: $(STAMP) system-deps
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) .aimegraph
