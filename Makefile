# `make demo`: set up .venv and run the quickstart pipeline.  `make test`: set up, check the import
# layers (import-linter contracts in pyproject.toml) and run the suite.
VENV    ?= .venv
PYTHON  ?= python3
PY      := $(VENV)/bin/python
STAMP   := $(VENV)/.raypress-installed
EXTRAS  ?= dev,text,perplexity,curation,images,webdataset,hf,torch,quality,purify,moe,kernels,reasoning

.PHONY: demo test testdata bench setup clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install -q -e ".[$(EXTRAS)]"
	touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/raypress run pipelines/quickstart.yaml

# BridgePure's tests read real Fashion-MNIST from Debian's package (offline once installed), and the
# run page's browser test drives Debian's Chromium (never a downloaded browser build); where they
# cannot be installed (no root, no archive) those tests skip and say why.
testdata:
	@dpkg -s dataset-fashion-mnist >/dev/null 2>&1 || { \
	  echo "installing dataset-fashion-mnist (Fashion-MNIST for the BridgePure tests)"; \
	  (apt-get update -qq && apt-get install -y -qq dataset-fashion-mnist) >/dev/null 2>&1 || \
	  echo "could not install dataset-fashion-mnist: the BridgePure tests will skip"; }
	@{ dpkg -s chromium >/dev/null 2>&1 && dpkg -s chromium-driver >/dev/null 2>&1; } || { \
	  echo "installing chromium and chromium-driver (the run page's browser test)"; \
	  (apt-get update -qq && apt-get install -y -qq chromium chromium-driver) >/dev/null 2>&1 || \
	  echo "could not install chromium: the browser test will skip"; }

test: $(STAMP) testdata
	$(VENV)/bin/lint-imports
	$(PY) -m pytest

bench: $(STAMP)
	$(PY) bench/engine_overhead.py

clean:
	rm -rf runs .pytest_cache
