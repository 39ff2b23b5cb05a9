# Uses the active virtualenv if there is one, else makes .venv; installs the pinned stack (constraints.txt).
VENV ?= .venv
ifdef VIRTUAL_ENV
PYTHON := $(VIRTUAL_ENV)/bin/python
else
PYTHON := $(VENV)/bin/python
endif
STAMP := $(dir $(PYTHON)).diffusers-patched-deps
OUT ?= dist/patches
CLI = $(PYTHON) -m tools.cli

.PHONY: wheels requirements publish refresh-releases install demo test test-releases test-stacks test-fast test-gpu gpu-bundle check-patches vendor export-patches verify-prs edit refresh rebase rebase-continue bench lint

$(PYTHON):
	python3 -m venv $(VENV)

$(STAMP): pyproject.toml constraints.txt | $(PYTHON)
	$(PYTHON) -m pip install --quiet --upgrade "pip>=24" "setuptools>=77" wheel
	$(PYTHON) -m pip install --quiet -c constraints.txt ".[dev]"
	touch $(STAMP)

# The package itself is reinstalled every time (non-editable, so its .pth file is installed too).
install: $(STAMP)
	$(PYTHON) -m pip install --quiet --no-deps --no-build-isolation --force-reinstall .

# dist/requirements-<release>.txt: that release's diffusers and diffusers-patched with their sha256, for --require-hashes.
requirements: wheels
	$(CLI) requirements --dist dist

# Uploads dist/'s wheels with twine to REPOSITORY_URL (default: PyPI; INDEX_URL: its simple index if not derivable),
# credentials from TWINE_USERNAME/TWINE_PASSWORD or ~/.pypirc. Refuses wheels this commit does not build, a commit
# whose per-release checks (`make test-releases`) did not pass, and a file already on the index with other bytes.
publish: wheels
	$(CLI) publish --dist dist $(if $(REPOSITORY_URL),--repository-url $(REPOSITORY_URL)) $(if $(INDEX_URL),--index-url $(INDEX_URL))

# UPSTREAM=X.Y.Z: the demo table on another supported release (its wheel over the verified stack, see tools/demo.py).
demo: install
	$(PYTHON) -m tools.demo $(if $(UPSTREAM),--release $(UPSTREAM))

# RELEASE=X.Y.Z (repeatable in tools.cli): only that release.
wheels: $(STAMP)
	$(CLI) wheels --out dist $(if $(RELEASE),--release $(RELEASE))

# The GPU tests (tests/gpu/, marker `gpu`) are skipped without a CUDA device; -rs prints how many, and why. The suite
# runs `make check-patches` itself (tests/test_series.py), on TEST_WORKERS pytest-xdist workers, a test file at a time,
# the longest first (tests/conftest.py); each interpreter it starts computes on one thread.
TEST_WORKERS ?= 2
test: install lint
	$(PYTHON) -m pytest -rs --durations=30 -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder tests

# Before publishing: the per-release checks whole (tests/conftest.py): the half `make test` runs, and each older
# release's upstream side of the scenarios and parity net and all of its carried tests; records the commit for
# `make publish`.
test-releases: install
	$(PYTHON) -m pytest -rs -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --release-checks \
		tests/test_releases.py tests/test_release_carried_tests.py

# The release check: every supported release on its floor and newest dependency stacks (constraints/), both sides,
# against the verified one; the release x stack table also goes to build/stacks.md. RELEASE=X.Y.Z: only that release.
test-stacks: install
	$(PYTHON) -m tools.stacks $(if $(RELEASE),--release $(RELEASE))

# For edit loops: every scenario once, patched side only (each patch shows in one at least); no upstream runs, no
# carried upstream tests, no lint. `make test` before pushing.
test-fast: install
	$(PYTHON) -m pytest -m "not upstream" tests/test_demo_scenarios.py

# Our own code follows upstream diffusers' ruff rules (pyproject.toml); no need to reinstall the package for it.
lint: $(STAMP)
	$(PYTHON) -m ruff check diffusers_patched tools tests setup.py
	$(PYTHON) -m ruff format --check diffusers_patched tools tests setup.py

# On a machine with a CUDA GPU: the GPU tests (every fix on CUDA, both sides) and the demo scenarios. Keeps the torch
# installed if it is a CUDA build, else installs the CUDA build of the version constraints.txt pins (tools/cuda_torch.py:
# TORCH_CUDA_INDEX_URL, or TORCH_CUDA_WHEELS for a folder of wheels on a machine without a package registry).
test-gpu: install
	$(PYTHON) -m tools.cuda_torch
	$(PYTHON) -m pytest -rs tests/gpu tests/test_demo_scenarios.py

# What a lent GPU machine (no network) lacks, into gpu-bundle/ (tools/gpu_bundle.py); there, with the tree and the
# bundle, the whole GPU check is `bash tools/gpu_check.sh`.
gpu-bundle: $(STAMP)
	$(PYTHON) -m tools.gpu_bundle --out gpu-bundle

check-patches: $(STAMP)
	$(CLI) check

vendor: $(STAMP)
	$(CLI) vendor

# UPSTREAM_REPO=/path/to/diffusers (a git clone) also runs upstream's utils/check_copies.py on the patched tree. The
# PRs' commits take their author from your git configuration (user.name, user.email); the DEP-3 trailers stay here.
export-patches: $(STAMP)
	$(CLI) export --out $(OUT) $(if $(UPSTREAM_REPO),--upstream-repo $(UPSTREAM_REPO))

# Each upstream PR of patches/prs.json on pristine upstream after its dependencies: git am, upstream's ruff (and with
# UPSTREAM_REPO its utils/check_copies.py), its tests failing before and passing after, on CPU, in upstream's idiom and
# all collected by `pytest -m <upstream's topic markers>`. Minutes: not in `test`.
verify-prs: $(STAMP)
	$(CLI) verify-prs $(if $(UPSTREAM_REPO),--upstream-repo $(UPSTREAM_REPO))

# RELEASE=X.Y.Z: another supported release (build/series-X.Y.Z), to write its backports. PR=NAME: an upstream PR of
# patches/prs.json (build/pr-NAME), to write the standalone copies of its patches that conflict without other PRs.
edit: $(STAMP)
	$(CLI) edit $(if $(RELEASE),--release $(RELEASE)) $(if $(PR),--pr $(PR))

refresh: $(STAMP)
	$(CLI) refresh $(if $(RELEASE),--release $(RELEASE)) $(if $(PR),--pr $(PR))

# After a patch was added or changed: every other release's record follows, or what it needs is listed.
refresh-releases: $(STAMP)
	$(CLI) refresh-releases

rebase: $(STAMP)
	@test -n "$(UPSTREAM)" || { echo "usage: make rebase UPSTREAM=X.Y.Z" >&2; exit 2; }
	$(CLI) rebase $(UPSTREAM)

bench: install
	$(PYTHON) -m tools.bench --out build/bench.md

rebase-continue: $(STAMP)
	$(CLI) rebase-continue
