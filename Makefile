# The two commands of the README: `make synth` and `make test`. Both install what they need
# from the pinned files in this repository, so they work on a fresh clone.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: install install-dev synth test bench bench-models image cost clean

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)

# Stamps make installs idempotent: reinstall only when a pin file changes.
$(VENV)/.runtime: requirements.txt pyproject.toml | $(VENV)/bin/python
	$(PY) -m pip install --quiet -r requirements.txt
	$(PY) -m pip install --quiet --no-deps -e .
	touch $@

$(VENV)/.dev: $(VENV)/.runtime requirements-dev.txt
	$(PY) -m pip install --quiet -r requirements-dev.txt
	touch $@

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

install: $(VENV)/.runtime node_modules/.installed
install-dev: $(VENV)/.dev node_modules/.installed

## Synthesize every stack into cdk.out/ and every reviewable Kubernetes manifest into dist/k8s/.
synth: install
	npx cdk synth --quiet
	$(PY) -m ml_platform.k8s_charts.workloads --out dist/k8s

## On-demand cost of the synthesized stacks in cdk.out/ (run `make synth` first).
cost: install
	$(VENV)/bin/mlp cost

## Run the whole test suite.
test: install-dev
	$(PY) -m pytest

## Median synth time (wall and CPU) of the whole app against the floor, alone and via npx cdk synth.
bench: install node_modules/.installed
	$(PY) scripts/bench_synth.py

## Package, upload, list 10/100/1,000 archives against a local moto server (started by the script).
bench-models: install-dev
	$(PY) scripts/bench_models.py

## Build the training image and push it to the stack's ECR repository (needs Docker and AWS credentials).
image: install
	bash ml_platform/training/image.sh

clean:
	rm -rf cdk.out dist .pytest_cache
