# Two commands set everything up on a fresh machine:
#   make run   - install, build the frontend, serve samples/ on http://127.0.0.1:6006/#pytorch_profiler
#   make test  - install dev dependencies (Python, npm, Chromium) and run every test (pytest and npm test)
#   make test-fast - the edit-test loop: the Python unit tests and the frontend's unit tests (no browser, no lint;
#                    the tests marked slow, 40-110 s each or a real torch training job, run in make test only)
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

# pytest runs in worker processes (pytest-xdist), one per core ("auto"; PYTEST_WORKERS=1 runs in one process).
# --dist loadfile keeps a test file on one worker, so its module fixtures (a loaded trace, a TensorBoard, an
# emulator) are built once; session fixtures (Chromium, the sample TensorBoards) start once per worker that needs them.
# --no-loadscope-reorder: files are handed out in collection order, the slowest first (tests/conftest.py).
PYTEST_WORKERS ?= auto
# The suite starts well over a hundred Python processes that import tb_plugin (TensorBoards, loader processes, the
# CLI, capture jobs) and rewrites the asserts of every test module in each worker: with PYTHONDONTWRITEBYTECODE set
# (as on the shared development machine) each of them compiled everything again (about 1 s of CPU a process, 10 s
# of collection a worker). Bytecode goes to the git-ignored __pycache__ folders.
unexport PYTHONDONTWRITEBYTECODE
PYTEST := $(PY) -m pytest -q -p no:cacheprovider -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder
# Runs a command and says how long it took, passed or failed (make test and make test-fast end with it).
TIMED = ./scripts/timed.sh

.PHONY: run test test-fast install install-dev build lint typecheck pytest jstest unittest screenshots clean

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
# The installs are stamped: a second make test does not ask pip again until setup.py or the pins change.
$(VENV)/.installed: $(PY) setup.py pyproject.toml
	PYTHONWARNINGS=ignore TB_PLUGIN_SKIP_FRONTEND=1 $(PY) -m pip install --quiet -e .
	@touch $@

$(VENV)/.installed-dev: $(VENV)/.installed requirements-dev.txt
	$(PY) -m pip install --quiet -r requirements-dev.txt
	@touch $@

install: $(VENV)/.installed build

install-dev: install $(VENV)/.installed-dev
	cd tests/remote && (test node_modules/.package-lock.json -nt package-lock.json || npm ci --no-audit --no-fund)
	@command -v chromium >/dev/null 2>&1 || test -x /usr/bin/chromium || sh scripts/install-chromium.sh

run: install
	@echo "pytorch-tb-profiler: serving $(LOGDIR) at http://$(HOST):$(PORT)/#pytorch_profiler (Ctrl+C stops)"
	$(VENV)/bin/tensorboard --logdir $(LOGDIR) --host $(HOST) --port $(PORT)

# The frontend's checks (eslint with type-aware rules, the import rules, tsc) take ~45 s together and depend only on
# these files: they are stamped, so a second make test runs them again only when one of these changed. ruff and
# mypy keep their own caches (.ruff_cache, .mypy_cache: a second mypy --strict takes about a second).
FRONTEND_CHECKED := $(shell find frontend -path frontend/node_modules -prune -o -path frontend/src/generated -prune \
	-o -name '.*' -prune -o -type f -print 2>/dev/null) docs/api/openapi.yaml frontend/node_modules/.package-lock.json
STAMPS := frontend/.checked

$(STAMPS)/lint: $(FRONTEND_CHECKED)
	cd frontend && npm run lint && node scripts/check-imports.mjs
	@mkdir -p $(STAMPS) && touch $@

$(STAMPS)/typecheck: $(FRONTEND_CHECKED)
	cd frontend && npm run typecheck
	@mkdir -p $(STAMPS) && touch $@

lint: install-dev
	$(VENV)/bin/ruff check tb_plugin tests benchmarks
	@$(MAKE) --no-print-directory $(STAMPS)/lint

typecheck: install-dev
	$(VENV)/bin/mypy
	@$(MAKE) --no-print-directory $(STAMPS)/typecheck

pytest: install-dev
	$(PYTEST) tests

unittest: install-dev
	$(PYTEST) -m "not slow" tests/unit

# the frontend's unit tests (frontend/test/*.test.ts) under node's built-in test runner
jstest: install-dev
	cd frontend && npm test

test:
	@$(TIMED) "make test" $(MAKE) --no-print-directory lint typecheck pytest jstest

test-fast:
	@$(TIMED) "make test-fast" $(MAKE) --no-print-directory unittest jstest

screenshots: install-dev
	$(PY) -m pytest -q -p no:cacheprovider -s -o python_files='shots_*.py' -o python_functions='shot_*' tests/browser

clean:
	rm -rf $(VENV) frontend/node_modules tb_plugin/static build dist *.egg-info
