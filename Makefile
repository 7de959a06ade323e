# Gymwright: `make run` sets up and starts everything; `make test` sets up and runs the tests.
PYTHON ?= python3.11
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: setup run serve test bench clean migrate

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "need $(PYTHON) on PATH"; exit 1; }
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	@touch $(STAMP)

setup: $(STAMP)

migrate: setup
	$(PY) manage.py migrate --noinput

run: setup
	$(PY) -m gymwright.devserver

# Production web server: DEBUG off, static files collected and served by the app (WhiteNoise).
serve: migrate
	$(PY) manage.py collectstatic --noinput -v 0
	$(VENV)/bin/gunicorn --config python:gymwright.gunicorn_conf

test: setup
	$(PY) -m pytest $(PYTEST_ARGS)

bench: setup
	$(PY) bench/run_all.py

clean:
	rm -rf $(VENV) var
