# Uses the active virtualenv if there is one, else makes .venv; installs the pinned stack (constraints.txt).
VENV ?= .venv
ifdef VIRTUAL_ENV
PYTHON := $(VIRTUAL_ENV)/bin/python
else
PYTHON := $(VENV)/bin/python
endif
STAMP := $(dir $(PYTHON)).diffusers-patched-deps
OUT ?= dist/patches
CLI = $(PYTHON) -m diffusers_patched

.PHONY: install demo test check-patches vendor export-patches edit refresh rebase rebase-continue bench lint

$(PYTHON):
	python3 -m venv $(VENV)

$(STAMP): setup.py constraints.txt | $(PYTHON)
	$(PYTHON) -m pip install --quiet --upgrade "pip>=24" "setuptools>=70" wheel
	$(PYTHON) -m pip install --quiet -c constraints.txt ".[dev]"
	touch $(STAMP)

# The package itself is reinstalled every time (non-editable, so its .pth file is installed too).
install: $(STAMP)
	$(PYTHON) -m pip install --quiet --no-deps --no-build-isolation --force-reinstall .

demo: install
	$(PYTHON) -m diffusers_patched.demo

test: install check-patches lint
	$(PYTHON) -m pytest tests

# Our own code follows upstream diffusers' ruff rules.
RUFF_RULES = --line-length 119 --select C,E,F,I,W --ignore C901,E501 \
	--config lint.isort.lines-after-imports=2 --config 'lint.isort.known-first-party=["diffusers_patched"]'
lint: install
	$(PYTHON) -m ruff check $(RUFF_RULES) diffusers_patched tests setup.py --exclude diffusers_patched/_vendor
	$(PYTHON) -m ruff format --line-length 119 --check diffusers_patched tests setup.py --exclude diffusers_patched/_vendor

check-patches: install
	$(CLI) check

vendor: install
	$(CLI) vendor

export-patches: install
	$(CLI) export --out $(OUT)

edit: install
	$(CLI) edit

refresh: install
	$(CLI) refresh

rebase: install
	@test -n "$(UPSTREAM)" || { echo "usage: make rebase UPSTREAM=X.Y.Z" >&2; exit 2; }
	$(CLI) rebase $(UPSTREAM)

bench: install
	$(PYTHON) -m diffusers_patched.bench --out build/bench.md

rebase-continue: install
	$(CLI) rebase-continue
