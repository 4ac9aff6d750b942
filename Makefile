# e2e targets: a real Kubernetes + Kueue + KWOK control plane built from source.
# See e2e/README.md.  Variables: PYTHON, E2E_PROFILE (small|large|path), PYTEST_ARGS.
PYTHON ?= python
E2E_PROFILE ?= small
PYTEST_ARGS ?=

.PHONY: e2e e2e-build e2e-up e2e-down e2e-status e2e-test e2e-logs

## Build (or reuse from the cache) every control-plane binary.
e2e-build:
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
e2e-test:
	$(PYTHON) -m pytest e2e $(PYTEST_ARGS)

## CI: build if needed, fresh cluster, suite, always down.
e2e:
	$(PYTHON) -m e2e.run --profile $(E2E_PROFILE) -- $(PYTEST_ARGS)
