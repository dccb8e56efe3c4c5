import os
import subprocess
import sys
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")
# Built here, outside any test: on a fresh machine matplotlib's first font scan may run fc-list.
import matplotlib.font_manager  # noqa: E402,F401

sys.path.insert(0, str(Path(__file__).parent))
os.environ.setdefault("PYTHONHASHSEED", "0")

# pytest -n 2 (every make target) runs two test processes on two cores: with a BLAS of two threads
# in each, four threads share two cores, and OpenBLAS's threads spin while they wait for each
# other (the unit tier took about 10 % longer so). One BLAS thread per test process; the programs a
# test starts inherit it. The course's own thread pools (fast_attention's num_threads) are threads
# of their own and still run as many as they are asked for.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ["OPENBLAS_NUM_THREADS"] = os.environ["OMP_NUM_THREADS"] = "1"
    import numpy  # noqa: E402,F401  (its BLAS loaded, for the limit below to reach it)
    from threadpoolctl import threadpool_limits  # noqa: E402

    threadpool_limits(limits=1, user_api="blas")

# The tiers. A unit test (no marker) runs in the test's process alone: no subprocess, hence no
# nbgrader, no notebook kernel, no pip. A test that needs one is marked slow (it only takes long)
# or integration (it drives the course's tools end to end); make test-fast deselects both.
OUTSIDE_THE_UNIT_TIER = ("slow", "integration", "browser")


def is_unit(item) -> bool:
    return not any(item.get_closest_marker(m) for m in OUTSIDE_THE_UNIT_TIER)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    return (yield from _no_process_in_unit_tests(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    return (yield from _no_process_in_unit_tests(item))


def _no_process_in_unit_tests(item):
    """While a unit test's fixtures (of any scope) and body run, starting a process fails with a
    message that names the test and the marker it needs."""
    if not is_unit(item):
        return (yield)
    original = subprocess.Popen.__init__

    def refuse(self, *args, **kwargs):
        command = args[0] if args else kwargs.get("args")
        raise RuntimeError(f"{item.nodeid} starts a process ({command!r}): a unit test runs in the"
                           " test's process alone; mark it @pytest.mark.slow or @pytest.mark.integration")

    subprocess.Popen.__init__ = refuse
    try:
        return (yield)
    finally:
        subprocess.Popen.__init__ = original


@pytest.fixture(autouse=True)
def checks_in_english():
    """Every test starts with English check messages, whatever a previous test set."""
    from attention_course import checks

    checks.set_language("en")
    yield
    checks.set_language("en")


def pytest_configure(config):
    """The test tiers' markers (also in pyproject.toml once the tiers land there; twice is harmless)."""
    config.addinivalue_line("markers", "slow: takes long (a subprocess, a build, nbgrader)")
    config.addinivalue_line("markers", "integration: runs another program (a fresh interpreter, nbgrader)")
    # make test switches EncodingWarning on with PYTHONWARNDEFAULTENCODING=1, which pytest-xdist's
    # workers inherit (-X warn_default_encoding does not reach them); pyproject.toml's filterwarnings
    # make it an error in the project's code. The programs a test starts are not given it: their
    # third-party code would print warnings into the stderr that tests read. The controller of -n
    # keeps it until it has started its workers.
    if hasattr(config, "workerinput") or not config.getoption("numprocesses", None):
        os.environ.pop("PYTHONWARNDEFAULTENCODING", None)


# ---------------------------------------------------------------------- notebook 09's model, once
# Loading SmolLM2-135M dequantizes 93 MB and a forward pass with every layer's weights takes a
# good part of a second on 2 cores; a test process pays both once.
@pytest.fixture(scope="session")
def course_model():
    """The installed model of notebook 09, loaded once per test process. A test that changes its
    weights puts them back (try/finally), as tests/test_pretrained_reference.py does."""
    from attention_course import pretrained

    return pretrained.load()


class ForwardOnce:
    """The model with each distinct forward pass computed once (a copy of the stored result each
    time): for tests of what is drawn from its outputs, which build the same explorer in each
    language and in more than one test. Everything else is the model's own."""

    def __init__(self, model):
        self._model, self._seen = model, {}

    def __getattr__(self, name):
        return getattr(self._model, name)

    def forward(self, ids, **kwargs):
        key = (tuple(int(i) for i in ids),
               tuple(sorted((k, repr(v)) for k, v in kwargs.items())))
        if key not in self._seen:
            self._seen[key] = self._model.forward(ids, **kwargs)
        out = self._seen[key]
        return tuple(a.copy() for a in out) if isinstance(out, tuple) else out.copy()


@pytest.fixture(scope="session")
def course_model_forward_once(course_model):
    """:class:`ForwardOnce` around :func:`course_model`."""
    return ForwardOnce(course_model)


@pytest.fixture
def explorer_kwargs(request):
    """``explorer_kwargs(cls)``: what a test passes to a course explorer besides ``lang``: no
    throttling (``rate``), and the real model loaded once, each forward pass run once (``model``)."""
    def kwargs_for(cls) -> dict:
        import inspect

        parameters = inspect.signature(cls).parameters
        kwargs = {"rate": 1e10} if "rate" in parameters else {}
        if "model" in parameters:
            kwargs["model"] = request.getfixturevalue("course_model_forward_once")
        return kwargs
    return kwargs_for


# The modules that take longest (each minutes of subprocesses on 2 cores), longest first. make test
# hands whole files to two workers in collection order (--dist loadfile --no-loadscope-reorder):
# started first, they run beside the many short files instead of after them, at the end, alone.
LONGEST_FIRST = ("test_term_route.py", "test_handout.py", "test_grading.py", "test_packaging.py",
                 "test_student_build.py", "test_fetched_anywhere.py")


# Tiers that run only when their marker is asked for (make test-browser, make test-book): a plain
# pytest run, make test's included, deselects them.
ONLY_WHEN_ASKED = ("browser", "book")


def pytest_collection_modifyitems(config, items):
    """The browser and book tiers left out unless ``-m`` names them; then the longest modules first
    (LONGEST_FIRST). With pytest-xdist's --dist loadgroup (make test-fast, make test-pythons), the
    tests of a module that share a module-scoped fixture (a loaded model, a built hand-out) run in
    one worker, so the fixture is made once; every other test goes to whichever worker is free."""
    asked = config.getoption("markexpr") or ""
    for marker in ONLY_WHEN_ASKED:
        if marker in asked:         # "-m browser" selects them; "-m 'not browser'" dropped them already
            continue
        dropped = [item for item in items if item.get_closest_marker(marker)]
        if dropped:
            items[:] = [item for item in items if not item.get_closest_marker(marker)]
            config.hook.pytest_deselected(items=dropped)

    def rank(item) -> int:
        name = Path(str(item.fspath)).name
        return LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST)

    items.sort(key=rank)       # stable: each module keeps its own order
    if not config.pluginmanager.hasplugin("xdist"):
        return
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        if info is None or item.get_closest_marker("xdist_group"):
            continue
        # The tests of one explorer class (both languages, every convention, its frames): what its
        # default data costs (a training run, the real model) is paid once, in one worker.
        cls = getattr(getattr(item, "callspec", None), "params", {}).get("cls")
        if isinstance(cls, type) and cls.__module__.startswith("attention_course.widgets."):
            item.add_marker(pytest.mark.xdist_group(f"explorer-{cls.__name__}"))
            continue
        if any(defs and defs[-1].scope == "module" for defs in info.name2fixturedefs.values()):
            item.add_marker(pytest.mark.xdist_group(item.module.__name__))


# make test-reference installs torch and transformers and sets REQUIRE_TORCH: there a test skipped
# for want of either (or of RUN_LIVE_REFERENCE) is a failure, so the live comparisons cannot pass
# by not running.
LIVE_SKIP_WORDS = ("torch", "PyTorch", "transformers", "RUN_LIVE_REFERENCE")


def _skipped_for_want_of_torch(report) -> bool:
    return (os.environ.get("REQUIRE_TORCH") == "1" and report.skipped
            and any(word in str(report.longrepr) for word in LIVE_SKIP_WORDS))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if _skipped_for_want_of_torch(report):
        report.outcome, report.longrepr = "failed", f"skipped under REQUIRE_TORCH=1: {report.longrepr}"
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector):
    report = yield
    if _skipped_for_want_of_torch(report):
        report.outcome, report.longrepr = "failed", f"skipped under REQUIRE_TORCH=1: {report.longrepr}"
    return report
