# Two commands set everything up on a fresh machine:
#   make run   - install, build the frontend, serve samples/ on http://127.0.0.1:6006/#pytorch_profiler
#   make test  - install dev dependencies (Python, npm, Chromium) and run every test (pytest and npm test)
#   make screenshots - regenerate docs/images/*.png from the samples in headless Chromium (not a test)
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
HOST ?= 127.0.0.1
PORT ?= 6006
LOGDIR ?= samples
BUNDLE := tb_plugin/static/index.js
# the API types in frontend/src/generated/ are generated from docs/api/openapi.yaml by the build
FRONTEND_SRC := $(shell find frontend/src -type f -not -path 'frontend/src/generated/*' 2>/dev/null) \
	frontend/build.mjs frontend/scripts/generate-api.mjs frontend/package.json docs/api/openapi.yaml

.PHONY: run test install install-dev build lint typecheck pytest jstest screenshots clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

frontend/node_modules/.package-lock.json: frontend/package-lock.json
	cd frontend && npm ci --no-audit --no-fund
	@touch $@

$(BUNDLE): frontend/node_modules/.package-lock.json $(FRONTEND_SRC)
	cd frontend && npm run --silent build

build: $(BUNDLE)

# PYTHONWARNINGS: setuptools' build-time notices (editable mode) are not for the person running make
install: $(PY) build
	PYTHONWARNINGS=ignore TB_PLUGIN_SKIP_FRONTEND=1 $(PY) -m pip install --quiet -e .

install-dev: install
	$(PY) -m pip install --quiet -r requirements-dev.txt
	cd tests/remote && (test node_modules/.package-lock.json -nt package-lock.json || npm ci --no-audit --no-fund)
	@command -v chromium >/dev/null 2>&1 || test -x /usr/bin/chromium || sh scripts/install-chromium.sh

run: install
	@echo "pytorch-tb-profiler: serving $(LOGDIR) at http://$(HOST):$(PORT)/#pytorch_profiler (Ctrl+C stops)"
	$(VENV)/bin/tensorboard --logdir $(LOGDIR) --host $(HOST) --port $(PORT)

lint: install-dev
	$(VENV)/bin/ruff check tb_plugin tests benchmarks
	cd frontend && npm run lint

typecheck: install-dev
	$(VENV)/bin/mypy
	cd frontend && npm run typecheck

pytest: install-dev
	$(PY) -m pytest -q -p no:cacheprovider tests

# the frontend's unit tests (frontend/test/*.test.ts) under node's built-in test runner
jstest: install-dev
	cd frontend && npm test

test: lint typecheck pytest jstest

screenshots: install-dev
	$(PY) -m pytest -q -p no:cacheprovider -s -o python_files='shots_*.py' -o python_functions='shot_*' tests/browser

clean:
	rm -rf $(VENV) frontend/node_modules tb_plugin/static build dist *.egg-info
