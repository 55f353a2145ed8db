# The one entry point for people and CI. `make run` and `make test` need nothing installed
# beyond Python 3.11+: they create .venv, install everything, and (for run) start perdure dev.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
SOURCES := proto services/telemetry services/common services/history services/scheduler \
           services/gateway services/worker services/cli
PACKAGES := $(addprefix -e ,$(SOURCES))

NODE_SDK := sdk/node

# What `buf breaking` compares the protos with: branch main of this repository, the local
# branch where there is one (a clone of main, a worktree), else origin/main (a clone of another
# branch). BUF_AGAINST=... compares with anything else buf reads.
BUF_MAIN := $(shell git rev-parse --verify -q refs/heads/main >/dev/null 2>&1 && echo main || \
	(git rev-parse --verify -q refs/remotes/origin/main >/dev/null 2>&1 && echo origin/main))
BUF_AGAINST ?= ..\#format=git,ref=$(BUF_MAIN),subdir=proto

.PHONY: install node-install run demo bench chaos fuzz k8s-check constraints test pytest lint typecheck proto proto-check fmt clean

$(STAMP): pyproject.toml proto/pyproject.toml services/*/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade 'pip>=25.1'
	$(PY) -m pip install --quiet $(PACKAGES)
	$(PY) -m pip install --quiet --group dev
	touch $(STAMP)

install: $(STAMP)

# The Node.js SDK's packages, for its tests and the Node.js examples. Without npm the Node.js
# tests say so and skip, unless PERDURE_REQUIRE_NODE is set (CI), where they fail.
node-install:
	@if command -v npm >/dev/null 2>&1; then \
		[ $(NODE_SDK)/node_modules/.package-lock.json -nt $(NODE_SDK)/package-lock.json ] || \
		(cd $(NODE_SDK) && npm ci --no-audit --no-fund --loglevel=error); \
	else \
		echo "npm not found: the Node.js SDK's tests will be skipped (install Node.js 20+)"; \
	fi

# `make run PORT=7500 DATA_DIR=/tmp/pd` runs a second cluster beside the first: the gateway on
# PORT (history, scheduler and the HTTP API on the ports perdure dev derives from it) and the
# database in DATA_DIR. RUN_FLAGS adds any other `perdure dev` flag (RUN_FLAGS=--insecure).
PORT ?= 7400
DATA_DIR ?= $(or $(PERDURE_DATA_DIR),.perdure)
RUN_FLAGS ?=
run: install
	$(BIN)/perdure dev --base-port $(PORT) --data-dir $(DATA_DIR) $(RUN_FLAGS)

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

# Generated and mutated requests at every public RPC and the worker protocol, 2,000 per RPC (a
# few minutes); `make test` sends 25 per RPC. A failure prints how to reproduce it.
fuzz: install
	PERDURE_FUZZ_EXAMPLES=2000 $(BIN)/pytest tests/fuzz

# The image recipe and deploy/k8s: the Dockerfile's rules and its install in a fresh virtual
# environment; every overlay rendered with `kubectl kustomize`, validated strictly against
# Kubernetes 1.30 and checked against the services' ports and settings (part of `make test`;
# without kubectl the manifest checks skip, unless PERDURE_REQUIRE_KUBECTL is set, as in CI).
k8s-check: install
	$(BIN)/pytest tests/deploy

# Pin the image's packages again (deploy/constraints.txt) from a fresh install of the services.
constraints: install
	rm -rf .constraints-venv && $(PYTHON) -m venv .constraints-venv
	.constraints-venv/bin/pip install --quiet $(addprefix ./,$(SOURCES))
	{ head -2 deploy/constraints.txt; .constraints-venv/bin/pip freeze | grep -v '^perdure'; } \
		> deploy/constraints.txt.new && mv deploy/constraints.txt.new deploy/constraints.txt
	rm -rf .constraints-venv services/*/build proto/build

# The type check runs beside the tests, which mostly wait on real services.
test: install lint proto-check
	$(MAKE) --no-print-directory -j2 typecheck pytest

pytest: install node-install
	$(BIN)/pytest

lint: install
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .
	cd proto && ../$(BIN)/buf lint
	@if [ -n "$(BUF_MAIN)" ] || [ "$(origin BUF_AGAINST)" != file ]; then \
		echo "buf breaking --against '$(BUF_AGAINST)'"; cd proto && ../$(BIN)/buf breaking --against '$(BUF_AGAINST)'; \
	else echo "no main branch to compare the protos with: buf breaking skipped"; fi
	@if command -v npm >/dev/null 2>&1; then $(MAKE) --no-print-directory node-install && cd $(NODE_SDK) && npm run lint; else echo "npm not found: the Node.js SDK's eslint and tsc are skipped"; fi

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
	rm -rf $(VENV) .perdure .pytest_cache .mypy_cache .ruff_cache .hypothesis bench-results \
		$(NODE_SDK)/node_modules
