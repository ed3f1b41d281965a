# genlab: the README's commands. Every target creates .venv first if needed.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
OUT ?= runs
NB201_TABLE ?= $(firstword $(wildcard ../shared/data/nb201_accuracy.csv) $(GENLAB_NB201_TABLE))
export OMP_NUM_THREADS ?= 2

.PHONY: venv demo test test-slow bench lint deps check-base clean results

venv: $(STAMP)

# The test environment includes the optional extras (Ray sweeps, TensorBoard events, the
# official NB201 benchmark files' packages) so that their tests run here and in CI; without
# them those tests skip. constraints.txt pins the exact versions the project is tested with
# (pyproject.toml keeps ranges).
$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -c constraints.txt \
		-e '.[dev,ray,tensorboard,nb201,detect]'
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/genlab demo --out $(OUT)/demo $(if $(NB201_TABLE),--nb201-table $(NB201_TABLE),)

# Two worker processes (pytest-xdist), one file per worker at a time, one intra-op thread
# each: the suite's wall time on 2 cores is about half its CPU time. TEST_WORKERS=0 runs it
# in one process.
TEST_WORKERS ?= 2
test: $(STAMP)
	OMP_NUM_THREADS=1 $(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile

# The README's claims table and docs/results.md's generated tables, rewritten in place from
# the results files under docs/results (tests/core/test_results.py fails when they differ).
results: $(STAMP)
	$(PY) -m genlab.core.results

test-slow: $(STAMP)
	$(PY) -m pytest -q -m slow

# Every benchmark script (JSON into $(OUT)/bench). Long: the BER ablation and the gaze
# domain-gap study take tens of minutes on 2 cores; run single scripts as docs/results.md
# ("Speed") shows.
bench: $(STAMP)
	mkdir -p $(OUT)/bench
	for script in benchmarks/*.py; do $(PY) $$script --out $(OUT)/bench || exit 1; done

lint: deps
	$(VENV)/bin/ruff check src tests benchmarks experiments
	$(VENV)/bin/mypy

# Every package src/ imports is declared in pyproject.toml (base or an extra), every base
# dependency is used ([tool.deptry] says which names are exempt and why).
deps: $(STAMP)
	$(VENV)/bin/deptry src

# What a user of a GPU environment installs: the package without extras, in its own venv
# (the pinned stack; torch comes from the wheel store as for .venv), the CLI run from a
# folder outside the checkout. The venv holds a second copy of torch (about 6 GB with its CUDA
# libraries): a passing check removes it; a failing one leaves it to look into.
BASE_VENV := .venv-base
check-base:
	rm -rf $(BASE_VENV)
	$(PYTHON) -m venv $(BASE_VENV)
	$(BASE_VENV)/bin/pip install --quiet --disable-pip-version-check --no-cache-dir \
		-c constraints.txt .
	.ci/base_check.sh $(BASE_VENV)
	rm -rf $(BASE_VENV)

clean:
	rm -rf $(VENV) $(BASE_VENV) build src/*.egg-info .pytest_cache
