# Two commands for learners (make lab, make test); the rest for instructors and maintainers.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PY     := $(BIN)/python
LEARNER_STAMP := $(VENV)/.learner-installed
DEV_STAMP     := $(VENV)/.dev-installed
NOTEBOOKS := $(sort $(wildcard notebooks/zh/*.ipynb notebooks/en/*.ipynb))

.PHONY: setup lab test test-fast test-notebooks test-browser notebooks student grade figures bench lock clean

# The venv is created once; requirements are reinstalled only when a requirements file changes.
$(PY):
	$(PYTHON) -m venv $(VENV)

$(LEARNER_STAMP): requirements.txt pyproject.toml | $(PY)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt
	@touch $@

$(DEV_STAMP): requirements-dev.txt $(LEARNER_STAMP)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	@touch $@

setup: $(LEARNER_STAMP)

## make lab: open the course in JupyterLab (the token stays on: open the printed link).
## Jupyter refuses to start as root (Docker, many cloud machines) unless told; only then is it told.
lab: $(LEARNER_STAMP)
	$(BIN)/jupyter lab --ServerApp.root_dir=notebooks $(if $(filter 0,$(shell id -u)),--allow-root)

## make test: every test - unit, properties, doctests, exercises, student build, and nbval.
test: $(DEV_STAMP)
	$(BIN)/ruff check src tests benchmarks instructor maintainer classroom
	$(PY) -m pytest -n 2 --dist loadfile tests src
	$(PY) -m pytest -n 2 --dist loadfile --nbval --nbval-current-env $(NOTEBOOKS)

test-fast: $(DEV_STAMP)
	$(PY) -m pytest -n 2 tests src

test-notebooks: $(DEV_STAMP)
	$(PY) -m pytest -n 2 --dist loadfile --nbval --nbval-current-env $(NOTEBOOKS)

## make notebooks: re-execute every notebook from a clean kernel and store its outputs.
notebooks: $(DEV_STAMP)
	$(PY) maintainer/execute_notebooks.py $(NOTEBOOKS)

## make student: one self-contained hand-out per language in build/student/{zh,en}/: student
## notebooks (nbgrader: solutions removed, outputs cleared), figures, the library as a wheel.
student: $(DEV_STAMP)
	$(PY) instructor/build_student.py --out build/student

## make grade SUBMITTED=folder (one subfolder per student): nbgrader generate_assignment, autograde,
## generate_feedback in build/grade/; prints a table by student and notebook, writes build/grade/grades.csv.
grade: $(DEV_STAMP)
	$(PY) instructor/grade.py $(SUBMITTED)

## make figures: regenerate every image in figures/ from the library's plotting functions.
figures: $(DEV_STAMP)
	$(PY) maintainer/make_figures.py

## make bench: side-by-side attention benchmark (no mask, causal, key padding) against PyTorch
## SDPA, installed from benchmarks/requirements.txt, and notebook timings; then the training-step
## benchmark (benchmarks/training.py). It rewrites figures/bench_attention_{en,zh}.{md,png}:
## re-execute notebook 06 afterwards. OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are unset for these
## commands only, so that OpenBLAS runs the kernel this CPU would pick (the header names it).
bench: $(DEV_STAMP)
	$(PY) -m pip install --quiet --disable-pip-version-check -r benchmarks/requirements.txt
	env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE $(PY) benchmarks/run.py
	@if [ -f benchmarks/training.py ]; then \
		echo "env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE $(PY) benchmarks/training.py"; \
		env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE $(PY) benchmarks/training.py; \
	fi

## make test-browser: JupyterLab in headless Chromium, every notebook, every widget;
## it also rewrites the screenshots figures/screenshot_*.png.
test-browser: $(DEV_STAMP)
	$(PY) -m pytest tests/browser -m browser -p no:xdist

## make test-classroom (root): a whole class on one machine, end to end. Installs JupyterHub, nbgrader
## and the course into /opt/attention-classroom (classroom/install.sh), then an instructor and five
## throwaway student users (one in headless Chromium) release, fetch, submit, grade and return
## notebook 01 through the hub. Guide: classroom/README.md.
## make bench-classroom (root, not in CI): 10, 20, 30 students at once, each running notebook 01.
CLASSROOM_PY := /opt/attention-classroom/venv/bin/python
.PHONY: test-classroom bench-classroom
test-classroom:
	bash classroom/install.sh
	$(CLASSROOM_PY) classroom/test_classroom.py

bench-classroom:
	bash classroom/install.sh
	$(CLASSROOM_PY) classroom/bench_load.py $(BENCH_ARGS)

## make lock: record the exact versions of the learner's set, resolved in a fresh venv.
lock:
	rm -rf build/lock-venv
	$(PYTHON) -m venv build/lock-venv
	build/lock-venv/bin/python -m pip install --quiet --disable-pip-version-check -r requirements.txt
	( echo "# Exact versions last tested (make lock). Install with: pip install -r requirements-lock.txt -e ." ; \
	  build/lock-venv/bin/python -m pip freeze --exclude-editable --disable-pip-version-check ) \
		> requirements-lock.txt
	rm -rf build/lock-venv

clean:
	rm -rf build .pytest_cache
