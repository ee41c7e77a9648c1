# turngym: `make demo` and `make test` work on a fresh machine from a clean clone.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.turngym-installed
PYTEST := $(PY) -m pytest
# Tests run on every core (pytest-xdist); CI machines have 2.
JOBS   ?= auto
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export PYTHONHASHSEED := 0
export TZ := UTC

.PHONY: install demo test test-slow test-docker test-gpu test-all bench clean

install: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip setuptools wheel
	@# The CPU build of torch 2.13.0 installs from a local file; any other version pulls GBs of CUDA.
	@$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q torch==2.13.0
	@# bubblewrap is the SWE sandbox's default backend.
	@if [ "$$(id -u)" = 0 ] && ! command -v bwrap >/dev/null 2>&1; then \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null) \
		|| echo "warning: could not install bubblewrap; the bwrap sandbox will be unavailable"; \
	fi
	$(PY) -m pip install -q -e ".[test]"
	@touch $(STAMP)

demo: install
	$(VENV)/bin/turngym demo

test: install
	$(PYTEST) -n $(JOBS) -m "not slow and not docker and not gpu"

test-slow: install
	$(PYTEST) -n $(JOBS) -m slow

test-docker: install
	$(PYTEST) -m docker

test-gpu: install
	$(PYTEST) -m gpu

test-all: install
	$(PYTEST) -n $(JOBS)

bench: install
	$(PY) bench/env_throughput.py
	$(PY) bench/alfworld_throughput.py

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
