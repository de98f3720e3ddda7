# `make demo`: set up .venv and run the quickstart pipeline.  `make test`: set up, check the import
# layers (import-linter contracts in pyproject.toml) and run the suite.
VENV    ?= .venv
PYTHON  ?= python3
PY      := $(VENV)/bin/python
STAMP   := $(VENV)/.raypress-installed
EXTRAS  ?= dev,text,perplexity,curation,images,webdataset,hf,torch,quality,purify,moe,kernels,reasoning

.PHONY: demo test bench setup clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install -q -e ".[$(EXTRAS)]"
	touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/raypress run pipelines/quickstart.yaml

test: $(STAMP)
	$(VENV)/bin/lint-imports
	$(PY) -m pytest

bench: $(STAMP)
	$(PY) bench/engine_overhead.py

clean:
	rm -rf runs .pytest_cache
