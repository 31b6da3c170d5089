# The course in two commands:  `make lab`  (set up, open JupyterLab)  and  `make test`  (set up, run every test).
# Set-up installs torch==2.13.0 first (a CPU wheel here; where the registry serves CUDA builds you get one),
# then the package with all its extras, into .venv. Override with e.g. `make test TORCH="torch==2.5.1"`.
PYTHON ?= python3
VENV   ?= .venv
TORCH  ?= torch==2.13.0
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip --disable-pip-version-check -q

.PHONY: setup lab test lint unit floors notebooks colab-cells execute train train-quick train-cpu figures readme bench bench-gpu gpu-check site site-check clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install "$(TORCH)"
	$(PIP) install -e ".[all]"
	touch $@

lab: setup
	$(VENV)/bin/jupyter lab notebooks/

# Unit tests, and strict nbval over every notebook, each alone in a fresh copy of the tree
# (tests/test_notebooks_alone.py), in quick mode: what CI runs. One torch/OpenMP thread per process: on a CPU
# shared with other work, torch's spinning worker threads slow every test several times over.
TEST_ENV := DQN_COURSE_QUICK=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1

test: setup lint
	$(TEST_ENV) $(PY) -m pytest tests

# ruff's settings and the import contracts (import-linter: which module may import which) are in pyproject.toml;
# make test runs this first.
lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports --no-cache

unit: setup
	$(PY) -m pytest tests --deselect tests/test_notebooks_alone.py::test_the_notebook_runs_alone_in_a_fresh_copy_of_the_tree

# The dependency floors, tested: a second venv with every dependency at the lowest version pyproject.toml allows
# (tests/floors.txt), then the unit tests there. Heavy and not part of `make test`: torch's floor comes from PyPI as
# its CUDA build (about 3 GB with its libraries; it runs on a CPU). A failure means a floor to raise, there and in
# tests/floors.txt and environment.yml (tests/test_packaging.py keeps the three in step).
FLOORS_VENV ?= .venv-floors
floors:
	$(PYTHON) -m venv $(FLOORS_VENV)
	$(FLOORS_VENV)/bin/python -m pip --disable-pip-version-check -q install -c tests/floors.txt -r tests/floors.txt -e ".[all]"
	$(TEST_ENV) $(FLOORS_VENV)/bin/python -m pytest tests -p no:cacheprovider \
		--deselect tests/test_notebooks_alone.py::test_the_notebook_runs_alone_in_a_fresh_copy_of_the_tree

# The notebooks only, each alone in a fresh copy of the tree (in place: pytest --nbval notebooks)
notebooks: setup
	$(TEST_ENV) $(PY) -m pytest tests/test_notebooks_alone.py

# Every notebook's first code cell (Colab set-up) from its template and pyproject.toml's repository address
colab-cells:
	$(PYTHON) data/make_colab_cells.py

# Re-execute notebooks in default mode, one at a time, on a quiet machine, recording each execution in
# data/executions.json (refuses while another execution or other heavy work runs). `make execute NB="07 06b"` for some.
execute: setup
	$(PY) data/execute_notebooks.py $(NB)

# The full Breakout run (Nature/CleanRL learning settings, 10M steps, fast path): meant for a GPU machine.
train: setup
	$(PY) -m dqn_course.train --preset breakout-fast

train-quick: setup
	$(PY) -m dqn_course.train --preset quick

# Learns Breakout on a 2-core CPU in a few hours; Ctrl-C saves, and the printed --resume command carries on.
train-cpu: setup
	$(PY) -m dqn_course.train --preset breakout-cpu

figures: setup
	$(PY) data/make_figures.py

# README's generated blocks: the curriculum table from the notebooks' committed outputs, the benchmark tables from
# data/bench/*.json, the module tables from each module's docstring (reads the files, imports nothing: no set-up
# needed). Run it after re-executing a notebook or a benchmark; tests/test_readme_tables.py fails until you do.
readme:
	$(PYTHON) data/make_readme.py

bench: setup
	$(PY) benchmarks/memory_ladder.py
	$(PY) benchmarks/sampling.py
	$(PY) data/make_readme.py

# On a GPU machine, one command (<= 8 minutes): does the GPU path work here and how fast (dqn_course/gpu_check.py);
# everything lands in OUT (default gpu-check/). `make gpu-check DEVICE=cpu` rehearses it on the CPU.
OUT    ?= gpu-check
DEVICE ?= cuda
gpu-check: setup
	$(PY) -m dqn_course.gpu_check $(OUT) --device $(DEVICE)

# On a GPU machine: the CUDA-only tests (graph == eager), then plain vs fast at 8/16/32 envs, saved, and a profile.
bench-gpu: setup
	$(PY) -m pytest tests/test_learner.py -k cuda
	$(PY) benchmarks/throughput.py --device cuda --num-envs 8,16,32 --save data/bench/throughput-gpu.json
	$(PY) benchmarks/throughput.py --device cuda --num-envs 16 --window 20000 --profile data/bench/throughput-gpu-profile.txt

# The course as a website, into build/site/html (git-ignored): README as the landing page, a page per notebook with
# its committed outputs (nothing runs), the recorded runs' and benchmarks' READMEs, the API from the docstrings
# (site/build.py says how). Installs the `site` extra (Sphinx, myst-nb, the book theme, Playwright) on first use.
# tests/test_site.py checks the HTML of the last build; `make site-check` opens it in headless Chromium (Debian's
# `chromium` package; it says what to install when it is missing).
SITE_DEPS := $(VENV)/.site-installed
$(SITE_DEPS): $(VENV)/.installed
	$(PIP) install -e ".[all,site]"
	touch $@

site: $(SITE_DEPS)
	$(PY) site/build.py

site-check: $(SITE_DEPS)
	$(PY) site/check_browser.py

clean:
	rm -rf $(VENV) runs .pytest_cache .hypothesis build
