# attnio — two entry points: `make reproduce` (the study) and `make test` (the suite).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: venv test preflight integration coverage estimate-check reproduce lint format clean

venv: $(STAMP)

# torch==2.13.0 installs from the machine's local CPU build; triton is pinned to the release
# torch 2.13.0's CUDA wheels require, so a GPU user's install agrees with this one.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[pipeline,test]'
	touch $@

# The suite on the CPU; tests marked gpu (tests/test_gpu.py) run on a GPU machine with
# `pytest -m gpu` (scripts/gpu_study.sh does).
# It prints its wall time (lint and suite, the environment's installation not counted): the
# budget is 5 minutes on the development machine (docs/testing.md).
test: venv
	@started=$$(date +%s); \
	$(MAKE) --no-print-directory lint && \
	$(BIN)/python -m pytest -n 2 -q --durations=15 -m "not gpu and not preflight and not integration"; \
	status=$$?; \
	echo "make test: lint and suite took $$(( $$(date +%s) - started )) s (budget: 300 s, docs/testing.md)"; \
	exit $$status

# Before a GPU session, and in CI after `make test`; not part of `make test` (it compiles the
# GPU study preset's ~280 distinct variants for sm_90: minutes of two cores while Triton's
# cache is empty, seconds once it holds them): every launch of the GPU study fits the GPU it
# runs on (tests/test_preflight.py), and the kernels' builds for sm_80 and sm_90 (test_build.py,
# test_inference_build.py, two backward builds): every test marked preflight.
preflight: venv
	$(BIN)/python -m pytest -n 2 -q -p no:cacheprovider -m preflight

# In CI after `make test`; not part of `make test`: the tests that wait on a service beside the
# suite or run a workflow of their own (marker integration): a small study through a one-node
# SLURM cluster on loopback (tests/test_slurm.py; .ci/run installs SLURM), the GPU machine's
# wheelhouse made from the package index (tests/test_wheels.py), the budget rule's plan of
# the ci study (tests/test_workflow.py), and the tests that run a study, a damaged copy or a
# broken worker of their own (docs/testing.md, issue 64). Each is skipped, saying why, where
# its service is missing.
integration: venv
	$(BIN)/python -m pytest -n 2 -q -p no:cacheprovider --durations=5 -m integration

# A benchmark run, not part of `make test`: the suite under coverage, every Python subprocess
# measured (pyproject.toml, [tool.coverage]); the line coverage of kernels/, reports/ and
# workflow/scripts/ that docs/testing.md holds against its previous figure.
coverage: lint
	rm -rf .coverage-data && mkdir .coverage-data
	ATTNIO_COVERAGE_DATA=$(CURDIR)/.coverage-data/.coverage $(BIN)/python -m pytest -n 2 -q \
	  --durations=15 -m "not gpu" --cov --cov-config=pyproject.toml --cov-report=
	ATTNIO_COVERAGE_DATA=$(CURDIR)/.coverage-data/.coverage $(BIN)/coverage report | tail -1

# A benchmark, not part of `make test`: the ci study run alone in a scratch copy of the
# checkout, and the budget rule's estimate of it held to a factor of 1.5 (scripts/estimate_check.py).
# Run it on an idle machine: it says so when the machine was busy.
estimate-check: venv
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python scripts/estimate_check.py

# The whole study with the default config (config/config.yaml); results land in results/.
# Rule shells call `python`, so the environment's bin folder goes first on PATH.
# A lock left by a run that was killed (kill -9) is removed first, but only when no Snakemake
# process works in this folder.
reproduce: venv
	$(BIN)/python workflow/scripts/unlock_if_stale.py .
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/snakemake --cores all
	@echo "reports: results/index.html (links every report); tables: results/metrics.csv, results/stages.csv"

# Style is a tool's job (ruff, snakefmt); the layers of kernels/ are import-linter contracts
# (pyproject.toml). `make format` applies what `make lint` checks.
lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/snakefmt --check Snakefile workflow
	$(BIN)/lint-imports

format: venv
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .
	$(BIN)/snakefmt Snakefile workflow

clean:
	rm -rf $(VENV) results .cache .pytest_cache .ruff_cache
