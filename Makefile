# The two commands a newcomer runs (see README.md):
#   make synth   synthesize the default platform into cdk.out/ (no AWS account needed)
#   make test    run every test and quality gate
# Both install what they need on first run: a virtual environment in .venv,
# and the CDK CLI with Node 22 in node_modules (from the npm registry).

PYTHON ?= python3
CONFIG ?= platform.yaml
OUT ?= cdk.out
VENV := .venv
BIN := $(CURDIR)/$(VENV)/bin
NODE_BIN := $(CURDIR)/node_modules/.bin
export PATH := $(NODE_BIN):$(BIN):$(PATH)
export JSII_SILENCE_WARNING_UNTESTED_NODE_VERSION := 1
PYTEST_ARGS ?=

.PHONY: synth test install benchmarks mutation clean

# Synthesize into a fresh folder and swap it in only on success: a failing synth
# (a config error, a bug) leaves the previous good cdk.out/ as it was.
synth: install
	rm -rf $(OUT).new
	cdk synth --quiet -c config=$(CONFIG) -o $(OUT).new > /dev/null || { rm -rf $(OUT).new; echo "make synth: failed; $(OUT)/ is unchanged" >&2; exit 2; }
	rm -rf $(OUT) && mv $(OUT).new $(OUT)
	gpu-share summary $(OUT)

test: install
	ruff check src tests
	mypy
	python -m pytest -n 2 $(PYTEST_ARGS)

install: $(VENV)/.installed node_modules/.installed

$(VENV)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	@node --version | grep -q '^v22\.' || { echo "node_modules/.bin/node is not Node 22; remove node_modules and retry" >&2; exit 1; }
	touch $@

benchmarks: install
	python benchmarks/synth.py
	python benchmarks/planner.py
	python benchmarks/policy.py

# Mutation score of core/config.py, core/mig.py and core/reclaim.py (slow; not part of
# `make test`). One worker, low priority: the machine is shared. MUTATION_ARGS=config etc.
MUTATION_ARGS ?=
mutation: install
	nice -n 15 python tools/mutation.py $(MUTATION_ARGS)

clean:
	rm -rf cdk.out .pytest_cache mutants
