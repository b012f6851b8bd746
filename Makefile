# How Many GPUs? -- build and test. `make` (or `make help`) lists the targets.
#
# Everything runs from the project venv .venv, created from requirements.txt on
# first use. Only the package registries are needed (PyPI for Python, npm
# registry for the MathJax bundle); the built site itself is fully offline.

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help
.DELETE_ON_ERROR:
MAKEFLAGS += --no-builtin-rules

PYTHON      ?= python3
VENV        := .venv
PY          := $(VENV)/bin/python
STAMP       := $(VENV)/.requirements-stamp
MVENV       := .venv-measure
MSTAMP      := $(MVENV)/.measure-stamp
TORCH_SPEC  := torch==2.13.0
HF_SPEC     := transformers==5.24.0
PEFT_SPEC   := peft==0.21.2
BNB_SPEC    := bitsandbytes==0.50.2
ASSET_STAMP := $(foreach p,mathjax thebe requirejs,_vendor_cache/static/vendor/$(p)/.version)
PYTEST_ARGS ?=

# MPLBACKEND=Agg (or any non-inline backend) silently drops every figure from
# the notebooks: never let it reach a kernel.
unexport MPLBACKEND

.PHONY: help
help: ## Show this help
	@echo "How Many GPUs? -- make targets:"
	@grep -hE '^[a-zA-Z_.-]+:.*?## ' $(MAKEFILE_LIST) | \
	  awk 'BEGIN {FS = ":.*?## "}; {printf "  \033[36m%-12s\033[0m %s\n", $$1, $$2}'

# --- environment -------------------------------------------------------------

# The requirements go in with uv (from PyPI, put into the venv by the venv's pip): it fetches and unpacks the
# ~165 wheels in parallel and hard-links them from its cache, where pip installs them one at a time (fast33, a
# quiet machine, fresh clones: `make venv` 13 s wall and 12 s CPU instead of 48 s and 38 s with empty
# caches; 11 s and 10 s instead of 55 s and 40 s with warm ones; the same versions as pip, `pip freeze`
# compared). Neither byte-compiles (uv by default, pip with --no-compile): `make test` imports about a third
# of the ~7,800 modules, and Python writes their __pycache__ on first import instead (fast31; fast33: uv's
# --compile-bytecode costs 16 s more here and saves about as much at the first collection). The venv keeps
# its own pip (`make check-live` installs playwright with it). If uv cannot be installed, pip installs the
# requirements as before, and so it does if uv cannot reach the index (uv reads no pip.conf).
# --disable-pip-version-check: no query for a newer pip.
PIP_INSTALL := $(PY) -m pip install --quiet --no-compile --disable-pip-version-check
UV_SPEC     := uv>=0.5
$(STAMP): requirements.txt pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	if $(PIP_INSTALL) "$(UV_SPEC)" && $(VENV)/bin/uv pip install --quiet --python $(PY) -r requirements.txt; \
	then :; else \
	  echo "uv could not install the requirements: pip installs them"; \
	  $(PIP_INSTALL) -r requirements.txt; \
	fi
	@touch $@

.PHONY: venv
venv: $(STAMP) ## Create/refresh .venv from requirements.txt (re-runs when it or pyproject.toml changes)

$(ASSET_STAMP): tools/fetch_assets.py
	$(PYTHON) tools/fetch_assets.py

.PHONY: assets
assets: $(ASSET_STAMP) ## Fetch MathJax and thebe from the npm registry into _vendor_cache/ (for the offline site)

# --- the book ----------------------------------------------------------------

.PHONY: book
book: $(STAMP) $(ASSET_STAMP) ## Build the site into _build/html (+ the JupyterLite copy in lite/), warnings are errors
	env -u LLMSIZING_SPECULATE $(VENV)/bin/jupyter-book build . --all -W -n --keep-going
	$(PY) tools/build_lite.py
	$(PY) tools/check_site.py --static

# On every core (pytest-xdist, TEST_WORKERS=auto: one worker per core). --dist loadgroup as tests/conftest.py
# schedules it: a notebook's cells run in order in one kernel on one worker, the slowest tests start first.
# TEST_WORKERS=0 runs everything in this one process.
# Python's bytecode cache stays on (env -u PYTHONDONTWRITEBYTECODE: some shells and CI images set it): each
# worker and each notebook's kernel then loads pandas, matplotlib and the library compiled instead of compiling
# them again, and pytest keeps the test files' rewritten asserts; the caches are __pycache__/ (git-ignored).
# env -u LLMSIZING_SPECULATE (here, in book and in outputs): a terminal of `make lab` has it set, and the
# kernels these start would inherit it and start chapters 12 and 17's speculation workers as they build the
# widgets (tests/test_speculate.py sets it where it tests them).
# -p tests.lazy_iri (before the installed plugins): jsonschema's IRI parsers are built on first use, never here,
# instead of at import in every process (about 2.5 s CPU each; tests/lazy_iri.py).
# -p tests.kernel_forks: each worker's notebook kernels are forked from one process that has imported ipykernel,
# pandas, matplotlib and llmsizing once (tests/fork_kernel.py; a normal kernel if it cannot start).
TEST_WORKERS ?= auto
.PHONY: test
test: $(STAMP) ## Run unit tests (tests/) and strict nbval over every notebook in book/, on every core
	env -u PYTHONDONTWRITEBYTECODE -u LLMSIZING_SPECULATE $(PY) -m pytest tests book --ignore=tests/browser \
	  --nbval --nbval-current-env \
	  --nbval-cell-timeout=300 -p no:cacheprovider -p tests.lazy_iri -p tests.kernel_forks \
	  -o console_output_style=classic -n $(TEST_WORKERS) --dist loadgroup $(PYTEST_ARGS)

# Every fuzz file (tests/test_fuzz*.py: the library, serving, edge values and invariants, the command line and
# config files) and the fuzz tests kept beside their chapters' tests.
FUZZ_EXAMPLES ?= 2000
FUZZ_TESTS := $(sort $(wildcard tests/test_fuzz*.py)) tests/test_ch7_data_parallel.py::test_fuzz_ch7 \
  tests/test_ch11_cost.py::test_fuzz_ch11
.PHONY: fuzz
fuzz: $(STAMP) ## Fuzz every public function longer than CI does (FUZZ_EXAMPLES per function; prints the call count)
	LLMSIZING_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(PY) -m pytest $(FUZZ_TESTS) -p no:cacheprovider -q -v \
	  -o console_output_style=classic

.PHONY: outputs
outputs: $(STAMP) ## Re-execute all notebooks in place to refresh their stored outputs (for nbval)
	env -u LLMSIZING_SPECULATE $(PY) tools/refresh_outputs.py

# tools/lab/jupyter_server_config.py: a pre-save hook strips widget state, widget-view outputs, cell timing
# and kernel versions (tools/refresh_outputs.py's normalise), so autosave never dirties book/*.ipynb.
# tools/lab/config/labconfig/page_config.json disables JupyterLab 4's announcements plugin (the "notified
# about official Jupyter news?" pop-up, which --LabApp.news_url=None alone does not stop); JUPYTER_CONFIG_PATH
# adds it for this server only (nothing is written to ~/.jupyter or the venv). The same config opens a workspace
# not saved yet with the file browser folded (tools/lab/default_workspace.json) and keeps JupyterLite's Pyodide
# kernel extension (installed for the lite build) out of the lab's page, where it only logged an error.
# LAB_DIR: the folder JupyterLab opens (tests/browser serves a copy of book/ this way); LAB_ARGS: more flags.
LAB_DIR ?= book/
.PHONY: lab
# LLMSIZING_SPECULATE=1: the widgets of chapters 12 and 17 work out a reader's next searches in a worker
# process, for a reader on a machine of their own (llmsizing.widgets.speculate); LLMSIZING_SPECULATE=0
# make lab turns it off.
lab: $(STAMP) ## Open JupyterLab on book/ for a live workshop (offline once set up)
	JUPYTER_CONFIG_PATH="$(CURDIR)/tools/lab/config$${JUPYTER_CONFIG_PATH:+:$$JUPYTER_CONFIG_PATH}" \
	LLMSIZING_SPECULATE=$${LLMSIZING_SPECULATE-1} \
	$(VENV)/bin/jupyter lab $(LAB_DIR) --ServerApp.ip=127.0.0.1 \
	  --config="$(CURDIR)/tools/lab/jupyter_server_config.py" \
	  --LabApp.news_url=None \
	  --LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate \
	  --LabApp.extension_manager=readonly \
	  $(if $(filter 0,$(shell id -u)),--allow-root) $(LAB_ARGS)

# Live routes (README "Running a workshop"); both bind to 127.0.0.1 only. serve-live's Jupyter server takes its
# token from the environment (not shown by ps) and culls idle kernels (tools/live/); `make app` runs Voila on
# book/ with tools/voila/config/voila.py (the chapters' MyST prose with the kernel's numbers).
.PHONY: serve-live
# Both are for one reader on their own machine, so chapters 12 and 17 speculate as under `make lab`
# (LLMSIZING_SPECULATE=0 turns it off); a shared server (JupyterHub, Binder) does not set it.
serve-live: $(STAMP) ## Serve _build/html with a "Live code" button backed by a local Jupyter server (PORT=8000)
	@test -f _build/html/index.html || { echo "no _build/html: run 'make book' first" >&2; exit 1; }
	LLMSIZING_SPECULATE=$${LLMSIZING_SPECULATE-1} $(PY) tools/serve_live.py

CH ?=
.PHONY: app
app: $(STAMP) ## Open one chapter as a Voila app on 127.0.0.1: make app CH=07 (or CH=07_data_parallelism)
	LLMSIZING_SPECULATE=$${LLMSIZING_SPECULATE-1} $(PY) tools/serve_live.py app "$(CH)"

# Playwright from PyPI drives Debian's /usr/bin/chromium (no browser download);
# tools/check_site.py apt-get installs chromium if it is missing.
PW_STAMP := $(VENV)/.playwright-stamp
$(PW_STAMP): $(STAMP)
	$(PY) -m pip install --quiet playwright
	@touch $@

.PHONY: check-site
check-site: $(PW_STAMP) ## Load every built page in headless Chromium: offline? math typeset? screenshots
	@test -f _build/html/index.html || { echo "no _build/html: run 'make book' first" >&2; exit 1; }
	$(PY) tools/check_site.py

# tests/browser: the workshop notebooks in a real JupyterLab (started through `make lab`, on a copy of book/)
# and the built site, in headless Chromium. Tests skip, saying why, when Chromium cannot be found or launched;
# the site tests skip when there is no _build/html (run `make book` first). `make test` does not collect them.
# On LIVE_WORKERS pytest-xdist workers (2: most of a browser test is waiting for a kernel, a page or a server,
# so two run side by side on two cores), --dist loadgroup as tests/conftest.py schedules it: every test of one
# notebook in the lab on one worker (the notebook is opened and run once), every Voila test of one chapter on
# one worker (one page). Each worker starts its own JupyterLab and Voila. LIVE_WORKERS=0: one process.
LIVE_WORKERS ?= 2
.PHONY: check-live
check-live: $(PW_STAMP) ## Browser tests (tests/browser): notebooks in JupyterLab, then the built site
	$(PY) -m pytest tests/browser -p no:cacheprovider -o console_output_style=classic -rfEs \
	  -n $(LIVE_WORKERS) --dist loadgroup $(PYTEST_ARGS)

# --- optional extras ---------------------------------------------------------

# torch is a heavy optional extra (hundreds of MB), kept out of .venv on purpose. transformers is installed in
# the same pip command with torch pinned, so pip never resolves another (CUDA) torch for it; so are peft (the
# `peft` and `lora` measurements) and bitsandbytes (`nf4`: it quantises on the CPU since its multi-backend
# release; it warns that the optional `kernels` package for a faster CPU 4-bit matmul is missing, harmless).
$(MSTAMP): pyproject.toml
	@test -x $(MVENV)/bin/python || $(PYTHON) -m venv $(MVENV)
	$(MVENV)/bin/python -m pip install --quiet "$(TORCH_SPEC)" "$(HF_SPEC)" "$(PEFT_SPEC)" "$(BNB_SPEC)" -e .
	@touch $@

.PHONY: measure
measure: $(MSTAMP) ## Measure real memory with PyTorch + HF transformers (optional; own venv .venv-measure, heavy)
	$(MVENV)/bin/python tools/measure_memory.py all

# Not part of `make test` or .ci/run: it needs PyPI and minutes, and builds no image (no Docker here).
.PHONY: check-binder
check-binder: ## repo2docker --no-build on a clean clone of HEAD, its steps replayed in a venv, lab + load test
	$(PYTHON) tools/check_binder.py $(BINDER_ARGS)

.PHONY: bench
bench: $(STAMP) ## Run the benchmarks (benchmarks/bench.py)
	$(PY) benchmarks/bench.py

.PHONY: clean
clean: ## Remove _build/ and the fetched asset cache _vendor_cache/ (MathJax, thebe, lite wheels)
	rm -rf _build _vendor_cache
