# The two commands a newcomer runs (see README.md):
#   make synth   synthesize the default platform into cdk.out/ (no AWS account needed)
#   make test    run every test and quality gate
# and `make docs` builds the documentation site into site/ (strict: CI runs it after make test).
# Each installs what it needs on first run: a virtual environment in .venv,
# and the CDK CLI with Node 22 in node_modules (from the npm registry).
# `make synth` installs the runtime dependencies only; `make test`, `make benchmarks`
# and `make mutation` add the dev extra (test tools, linters, matplotlib) on top.

PYTHON ?= python3
CONFIG ?= platform.yaml
OUT ?= cdk.out
VENV := .venv
BIN := $(CURDIR)/$(VENV)/bin
NODE_BIN := $(CURDIR)/node_modules/.bin
export PATH := $(NODE_BIN):$(BIN):$(PATH)
export JSII_SILENCE_WARNING_UNTESTED_NODE_VERSION := 1
PYTEST_ARGS ?=

.PHONY: synth test docs install install-runtime install-dev benchmarks mutation clean

# One stamp per step, so each step reruns only when pyproject.toml changes and
# `make test` after `make synth` installs only what the dev extra adds.
RUNTIME_STAMP := $(VENV)/.installed-runtime
DEV_STAMP := $(VENV)/.installed-dev
DOCS_STAMP := $(VENV)/.installed-docs
NODE_STAMP := node_modules/.installed

# Synthesize into a fresh folder and swap it in only on success: a failing synth
# (a config error, a bug) leaves the previous good cdk.out/ as it was.
synth: install-runtime
	rm -rf $(OUT).new
	cdk synth --quiet -c config=$(CONFIG) -o $(OUT).new > /dev/null || { rm -rf $(OUT).new; echo "make synth: failed; $(OUT)/ is unchanged" >&2; exit 2; }
	rm -rf $(OUT) && mv $(OUT).new $(OUT)
	gpu-share summary $(OUT)

test: install-dev
	ruff check src tests
	mypy
	python -m pytest -n 2 $(PYTEST_ARGS)

install: install-dev
install-runtime: $(RUNTIME_STAMP) $(NODE_STAMP)
install-dev: $(DEV_STAMP) $(NODE_STAMP)

# The documentation site: a broken link, a missing page, an undocumented config field or CLI
# flag fails the build (--strict). Its tools are the `docs` extra, installed here only.
docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 mkdocs build --strict --site-dir site

$(DOCS_STAMP): $(RUNTIME_STAMP)
	$(BIN)/python -m pip install --quiet -e '.[docs]'
	touch $@

# aws-cdk-lib, constructs, cdk-nag, boto3, PyYAML and the package itself (editable).
$(RUNTIME_STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e .
	touch $@

# The dev extra on top; pip keeps every requirement already satisfied.
$(DEV_STAMP): $(RUNTIME_STAMP)
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@

$(NODE_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	@node --version | grep -q '^v22\.' || { echo "node_modules/.bin/node is not Node 22; remove node_modules and retry" >&2; exit 1; }
	touch $@

benchmarks: install-dev
	python benchmarks/synth.py
	python benchmarks/planner.py
	python benchmarks/policy.py

# Mutation score of core/configuration/parse.py, core/catalog/mig.py and core/policy/reclaim.py (slow; not part of
# `make test`). One worker, low priority: the machine is shared. MUTATION_ARGS=config etc.
MUTATION_ARGS ?=
mutation: install-dev
	nice -n 15 python tools/mutation.py $(MUTATION_ARGS)

clean:
	rm -rf cdk.out .pytest_cache mutants site
