# Everyday targets. `make demo` and `make test` do all set-up on a fresh machine:
# they create .venv and install optsched with its development tools into it.
VENV ?= .venv
VENV_PY := $(VENV)/bin/python
INSTALLED := $(VENV)/.installed

.PHONY: demo test lint unit install

## Create the virtual environment and install optsched (editable) with its dev tools.
install: $(INSTALLED)

$(INSTALLED): pyproject.toml
	python3 -m venv $(VENV)
	$(VENV_PY) -m pip install --quiet --upgrade pip
	$(VENV_PY) -m pip install --quiet -e '.[dev]'
	touch $@

## Plan the bundled example cluster (a dry run: nothing is written anywhere).
demo: $(INSTALLED)
	$(VENV)/bin/optsched plan --snapshot examples/cluster-small.yaml

## Lint, types, layering, then the fast unit tests (no cluster).
test: lint unit

lint: $(INSTALLED)
	$(VENV)/bin/ruff check optsched tests e2e
	$(VENV)/bin/ruff format --check optsched tests e2e
	$(VENV)/bin/mypy optsched
	$(VENV)/bin/lint-imports

unit: $(INSTALLED)
	$(VENV_PY) -m pytest -q tests

# e2e targets: a real Kubernetes + Kueue + KWOK control plane built from source.
# See e2e/README.md.  Variables: PYTHON, E2E_PROFILE (small|large|path), PYTEST_ARGS.
PYTHON ?= $(VENV_PY)
E2E_PROFILE ?= small
PYTEST_ARGS ?=

.PHONY: e2e e2e-build e2e-up e2e-down e2e-status e2e-test e2e-logs

## Build (or reuse from the cache) every control-plane binary.
e2e-build: $(INSTALLED)
	$(PYTHON) -m e2e.build

## Start a cluster (reuses a healthy running one).
e2e-up: e2e-build
	$(PYTHON) -m e2e.cluster up --profile $(E2E_PROFILE)

## Stop every component of the cluster.
e2e-down:
	$(PYTHON) -m e2e.cluster down

e2e-status:
	$(PYTHON) -m e2e.cluster status

e2e-logs:
	$(PYTHON) -m e2e.cluster logs

## Run the suite against the running (or an external, OPTSCHED_E2E_EXTERNAL=1) cluster.
e2e-test: $(INSTALLED)
	$(PYTHON) -m pytest e2e $(PYTEST_ARGS)

## CI: build if needed, fresh cluster, suite, always down.
e2e: $(INSTALLED)
	$(PYTHON) -m e2e.run --profile $(E2E_PROFILE) -- $(PYTEST_ARGS)
