# Gymwright: `make run` sets up and starts everything; `make test` sets up and runs the tests.
PYTHON ?= python3.11
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: setup run serve test bench clean migrate editor-validator

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "need $(PYTHON) on PATH"; exit 1; }
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	@touch $(STAMP)

# The project's bytecode, compiled ahead (pip does this for installed packages, not for an editable
# install's sources): every process that starts — a CLI command, a pack build's renderer, a dry run's
# bounded child — then loads it instead of compiling ~0.1 s of sources, even where PYTHONDONTWRITEBYTECODE
# is set. Incremental: only changed files are compiled again.
APPS := authoring grading gymwright packs review sandbox
setup: $(STAMP)
	@$(PY) -m compileall -q $(APPS) >/dev/null

migrate: setup
	$(PY) manage.py migrate --noinput

run: setup
	$(PY) -m gymwright.devserver

# Production web server: DEBUG off, static files collected and served by the app (WhiteNoise).
serve: migrate
	$(PY) manage.py collectstatic --noinput -v 0
	$(VENV)/bin/gunicorn --config python:gymwright.gunicorn_conf

# Four pytest-xdist workers on the machine's two cores: the suite waits on servers, browsers, sandboxes and
# image builds as much as it computes (a full run with four was ahead of one with two at the same point).
# Each has its own test database and data directory (gymwright/pytest_workers.py); --dist load: loadfile
# and loadscope drop the schemathesis operations. PYTEST_WORKERS=0 runs it in this process.
PYTEST_WORKERS ?= 4
test: setup lint
	$(PY) -m pytest -n $(PYTEST_WORKERS) --dist load $(PYTEST_ARGS)

# ruff, configured in pyproject.toml, and ESLint for static/js, configured in eslint.config.mjs (pinned in
# package.json and package-lock.json): `make lint` checks, `make format` rewrites.
.PHONY: lint format
ESLINT_STAMP := node_modules/.installed
$(ESLINT_STAMP): package.json package-lock.json
	@command -v npm >/dev/null 2>&1 || { echo "need node and npm for ESLint (apt-get install nodejs npm)"; exit 1; }
	npm ci --silent --no-audit --no-fund
	@touch $@

lint: setup $(ESLINT_STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	node_modules/.bin/eslint static/js

format: setup $(ESLINT_STAMP)
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .
	node_modules/.bin/eslint --fix static/js

# Every benchmark, against this machine's PostgreSQL and Redis (each benchmark makes databases of its own on
# BENCH_DATABASE_URL's server) and Label Studio in a virtualenv of its own; rewrites BENCHMARKS.md's latest run.
BENCH_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/gymwright_bench
BENCH_BROKER_URL   ?= redis://127.0.0.1:6379/14
bench: setup labelstudio-venv
	DATABASE_URL=$(BENCH_DATABASE_URL) CELERY_BROKER_URL=$(BENCH_BROKER_URL) $(PY) bench/run_all.py $(BENCH_ARGS)

# Mutation testing of the cores with cosmic-ray (docs/testing.md, "Mutation testing"): a documented subset of
# grading/engine, sandbox/runtime, review/services and the pack verifier, one mutant at a time under nice, on a copy of
# the work tree under var/mutate/. Slow: not part of `make test` or CI. MUTATE_ARGS="scoring --whole", "--list", ...
COSMIC_RAY_STAMP := $(VENV)/.cosmic-ray-8.7.0
$(COSMIC_RAY_STAMP): $(STAMP)
	$(PY) -m pip install -q "cosmic-ray==8.7.0"
	@touch $@
.PHONY: mutate
mutate: setup $(COSMIC_RAY_STAMP)
	nice -n 19 $(PY) tools/mutate.py $(MUTATE_ARGS)

# Label Studio, which bench_vs_labelstudio.py runs beside Gymwright (not a dependency of Gymwright).
LABELSTUDIO_VENV := var/labelstudio-venv
.PHONY: labelstudio-venv
# It runs under gunicorn on PostgreSQL, as its deployment runs it (a WSGI server of processes, not `label-studio start`).
labelstudio-venv: $(LABELSTUDIO_VENV)/.installed $(LABELSTUDIO_VENV)/.gunicorn-27.0.1
$(LABELSTUDIO_VENV)/.installed:
	@test -x $(LABELSTUDIO_VENV)/bin/python || $(PYTHON) -m venv $(LABELSTUDIO_VENV)
	$(LABELSTUDIO_VENV)/bin/pip install -q label-studio==1.23.2
	@touch $@
$(LABELSTUDIO_VENV)/.gunicorn-27.0.1: $(LABELSTUDIO_VENV)/.installed
	$(LABELSTUDIO_VENV)/bin/pip install -q gunicorn==27.0.1
	@touch $@

clean:
	rm -rf $(VENV) var node_modules

# Harbor (`harbor lint` on exported pack tasks) needs Python >= 3.12, in its own virtualenv.
# harbor 0.25.0 pins a certifi newer than the registry serves: install 0.24.0's deps, then 0.25.0 alone.
HARBOR_PYTHON ?= $(shell command -v pyenv >/dev/null 2>&1 && echo $$(pyenv root)/versions/3.12.1/bin/python || command -v python3.12)
HARBOR_VENV   := var/harbor-venv
.PHONY: harbor-venv grader-venv inspect-venv trainers-venv openenv-venv
harbor-venv: $(HARBOR_VENV)/.installed
$(HARBOR_VENV)/.installed:
	@test -n "$(HARBOR_PYTHON)" || { echo "need Python 3.12 (pyenv or python3.12) for harbor"; exit 1; }
	@test -x $(HARBOR_VENV)/bin/python || $(HARBOR_PYTHON) -m venv $(HARBOR_VENV)
	$(HARBOR_VENV)/bin/pip install -q harbor==0.24.0
	$(HARBOR_VENV)/bin/pip install -q --no-deps harbor==0.25.0
	@touch $@

# The bundled grader's requirements.txt (what a pack ships), which the virtualenvs below install.
.PHONY: grader-requirements
grader-requirements: $(STAMP)
	@$(PY) -c "from packs.archive.grader import grader_files, grader_requirements; print(grader_requirements(grader_files()), end='')"

# Inspect (inspect_ai) with the bundled grader's requirements, to run a pack's inspect_task.py as labs do.
INSPECT_VENV := var/inspect-venv
inspect-venv: $(INSPECT_VENV)/.installed
$(INSPECT_VENV)/.installed: $(STAMP) packs/archive/grader.py
	@test -x $(INSPECT_VENV)/bin/python || $(PYTHON) -m venv $(INSPECT_VENV)
	$(MAKE) -s --no-print-directory grader-requirements > $(INSPECT_VENV)/requirements.txt
	$(INSPECT_VENV)/bin/pip install -q inspect_ai==0.3.285 openai -r $(INSPECT_VENV)/requirements.txt
	@touch $@

# A clean virtualenv with only the bundled pack grader's requirements (no Django, no Gymwright),
# for the stand-alone reward tests.
GRADER_VENV := var/grader-venv
grader-venv: $(GRADER_VENV)/.installed
$(GRADER_VENV)/.installed: $(STAMP) packs/archive/grader.py $(wildcard grading/engine/*.py)
	@test -x $(GRADER_VENV)/bin/python || $(PYTHON) -m venv $(GRADER_VENV)
	$(MAKE) -s --no-print-directory grader-requirements > $(GRADER_VENV)/requirements.txt
	$(GRADER_VENV)/bin/pip install -q -r $(GRADER_VENV)/requirements.txt
	@touch $@

# verl and TRL with PyTorch on the CPU and the bundled grader's requirements, to load a pack as labs do
# (tests/packs/test_trainers.py). torch 2.13.0 is the CPU build this machine keeps on disk; cachetools, fastapi
# and uvicorn are imported by verl 0.9.1's trainer and agent loop, which its package does not require.
TRAINERS_VENV := var/trainers-venv
# jmespath: TRL 1.16 parses tool calls (environment_factory) with transformers' legacy response_schema below 5.13.
TRAINERS_PINS := torch==2.13.0 verl==0.9.1 trl==1.16.0 cachetools==8.0.2 fastapi==0.165.0 uvicorn==0.54.0 jmespath==1.0.1
trainers-venv: $(TRAINERS_VENV)/.installed
$(TRAINERS_VENV)/.installed: $(STAMP) packs/archive/grader.py Makefile
	@test -x $(TRAINERS_VENV)/bin/python || $(PYTHON) -m venv $(TRAINERS_VENV)
	$(MAKE) -s --no-print-directory grader-requirements > $(TRAINERS_VENV)/requirements.txt
	$(TRAINERS_VENV)/bin/pip install -q $(TRAINERS_PINS) -r $(TRAINERS_VENV)/requirements.txt
	@touch $@

# What a pack's env/requirements.txt pins (the bundled grader's and runtime's imports, and openenv-core for
# `python -m env serve`), which the OpenEnv virtualenv below installs.
.PHONY: env-requirements
env-requirements: $(STAMP)
	@$(PY) -c "from packs.archive.envdir import env_files, env_requirements; from packs.archive.grader import grader_files; print(env_requirements(grader_files(), env_files()), end='')"

# A clean virtualenv with only a pack's env/requirements.txt: `python -m env serve` and OpenEnv's own client
# (openenv-core), as a lab runs them (tests/packs/test_env_server.py, bench/bench_env.py).
OPENENV_VENV := var/openenv-venv
openenv-venv: $(OPENENV_VENV)/.installed
$(OPENENV_VENV)/.installed: $(STAMP) packs/archive/grader.py packs/archive/envdir.py
	@test -x $(OPENENV_VENV)/bin/python || $(PYTHON) -m venv $(OPENENV_VENV)
	$(MAKE) -s --no-print-directory env-requirements > $(OPENENV_VENV)/requirements.txt
	$(OPENENV_VENV)/bin/pip install -q -r $(OPENENV_VENV)/requirements.txt
	@touch $@

# What a pack's env/requirements-verifiers.txt pins: verifiers 0.4.0 and every distribution its wrapper's path
# imports, closed under dependencies, for `pip install --no-deps` (packs/archive/envdir.py says why).
.PHONY: verifiers-requirements verifiers-venv
verifiers-requirements: $(STAMP)
	@$(PY) -c "from packs.archive.envdir import env_files, verifiers_requirements; from packs.archive.grader import grader_files; print(verifiers_requirements(grader_files(), env_files()), end='')"

# A clean virtualenv with only a pack's env/requirements-verifiers.txt, installed as the pack's README says:
# `vf-eval env` on the pack (tests/packs/test_env_verifiers.py, the parity test).
VERIFIERS_VENV := var/verifiers-venv
verifiers-venv: $(VERIFIERS_VENV)/.installed
$(VERIFIERS_VENV)/.installed: $(STAMP) packs/archive/grader.py packs/archive/envdir.py
	@test -x $(VERIFIERS_VENV)/bin/python || $(PYTHON) -m venv $(VERIFIERS_VENV)
	$(MAKE) -s --no-print-directory verifiers-requirements > $(VERIFIERS_VENV)/requirements.txt
	$(VERIFIERS_VENV)/bin/pip install -q --no-deps -r $(VERIFIERS_VENV)/requirements.txt
	@touch $@

# The rubric editor validates in the browser with the rubric schema compiled ahead of time (Ajv standalone
# code), so no page needs CSP 'unsafe-eval'. Rebuild it whenever the rubric schema changes (a test says so).
AJV_VERSION := 8.17.1
NODE_PREFIX := var/node
EDITOR_VALIDATOR := static/js/rubric_editor/schema_validator.js
editor-validator: setup
	@command -v npm >/dev/null 2>&1 || { echo "need node and npm to rebuild $(EDITOR_VALIDATOR)"; exit 1; }
	@test -f $(NODE_PREFIX)/node_modules/ajv/package.json || npm install --silent --no-audit --no-fund --prefix $(NODE_PREFIX) ajv@$(AJV_VERSION)
	$(PY) -m grading.engine schema rubric > var/rubric.schema.json
	AJV_PREFIX=$(abspath $(NODE_PREFIX)) node tools/build_editor_validator.mjs $$(sha256sum var/rubric.schema.json | cut -d' ' -f1) < var/rubric.schema.json > $(EDITOR_VALIDATOR).tmp
	mv $(EDITOR_VALIDATOR).tmp $(EDITOR_VALIDATOR)
