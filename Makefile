# The one entry point for people and CI. `make run` and `make test` need nothing installed
# beyond Python 3.11+: they create .venv, install everything, and (for run) start perdure dev.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PACKAGES := -e proto -e services/telemetry -e services/common -e services/history -e services/scheduler \
            -e services/gateway -e services/worker -e services/cli

.PHONY: install run demo bench chaos test pytest lint typecheck proto proto-check fmt clean

$(STAMP): pyproject.toml proto/pyproject.toml services/*/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade 'pip>=25.1'
	$(PY) -m pip install --quiet $(PACKAGES)
	$(PY) -m pip install --quiet --group dev
	touch $(STAMP)

install: $(STAMP)

run: install
	$(BIN)/perdure dev

# The research agent's walk-through on a fresh local cluster of its own (temporary data
# directory, free ports): approval, kill -9, durable retry, full restart, crash after notify.
demo: install
	$(PY) -m examples.research_agent.demo

# Perdure against the physical limit and its peers (DBOS, Temporal) on this machine: a table,
# bench-results/results.json and chart.png.
bench: install
	$(PY) -m pip install --quiet --group bench
	$(PY) -m bench

# Every fault-injection scenario and a long random schedule against a cluster behind a proxy
# (a few minutes); `make test` runs a short random schedule. PERDURE_CHAOS_SEED=N replays one.
chaos: install
	$(BIN)/pytest tests/chaos --chaos -s

test: install lint typecheck proto-check pytest

pytest: install
	$(BIN)/pytest

lint: install
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .
	cd proto && ../$(BIN)/buf lint

typecheck: install
	$(BIN)/mypy

fmt: install
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix --select I .

proto: install
	$(PY) tools/genproto.py

proto-check: proto
	git diff --exit-code -- proto/ || (echo "generated stubs are stale: run 'make proto' and commit" >&2; exit 1)

clean:
	rm -rf $(VENV) .perdure .pytest_cache .mypy_cache .ruff_cache bench-results
