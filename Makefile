# Two entry points (see README):
#   make demo   set up .venv and run the OLS demo on the NumPy backend
#   make test   set up .venv (dev + spark + db extras, GNU Octave, PostgreSQL) and run the
#               whole test suite
PYTHON ?= python3
VENV   ?= .venv
PY      = $(VENV)/bin/python
STAMP   = $(VENV)/.installed-$(EXTRAS)

.PHONY: demo test venv octave postgres lint bench clean
EXTRAS ?= dev,spark,bench,db

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

venv: $(VENV)/bin/python
	$(PY) -m pip install --quiet -e ".[$(EXTRAS)]"

# GNU Octave runs the conformance tests; it comes from Debian's packages.
octave:
	@command -v octave-cli >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq octave >/dev/null; }

# PostgreSQL (15 or later) runs the tests of linview run --source; Debian keeps initdb off
# PATH, under /usr/lib/postgresql/VERSION/bin.
postgres:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq postgresql >/dev/null; }

demo: venv
	$(VENV)/bin/linview demo

test: venv octave postgres
	$(PY) -m pytest -q --durations=15

lint: venv
	$(VENV)/bin/ruff check linview backends tests bench examples

bench:
	$(MAKE) venv EXTRAS=$(EXTRAS),peers
	$(PY) bench/run_all.py

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .hypothesis
