"""benchmarks/widgets.py steps every control of every explorer, and its table says which median
misses the goal; run here without a kernel, on a small explorer and on the course's controls. No
time is asserted: the benchmark measures, the tests check what it measures."""

from __future__ import annotations

import importlib
import importlib.util

import ipywidgets as w
import pytest

import widget_tools
from attention_course.widgets import Explorer
from notebook_tools import ROOT

BENCH = ROOT / "benchmarks"


@pytest.fixture(scope="module")
def bench():
    """benchmarks/widgets.py as a module, its own folder first on sys.path as when it runs."""
    mp = pytest.MonkeyPatch()
    mp.syspath_prepend(str(BENCH))
    spec = importlib.util.spec_from_file_location("bench_widgets_steps", BENCH / "widgets.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    yield module
    mp.undo()


@pytest.fixture(scope="module")
def kernel(bench):
    """The functions the benchmark runs in its kernel, here in this process."""
    namespace: dict = {}
    exec(compile(bench.KERNEL_CODE, "<widgets benchmark kernel code>", "exec"), namespace)
    return namespace


class Panel(Explorer):
    """One control of each kind the benchmark steps, and one it must leave alone."""

    figsize = (2, 1)

    def __init__(self, lang="en"):
        self.lang = lang
        self.seen = []
        super().__init__({
            "size": w.IntSlider(value=2, min=0, max=10),
            "kind": w.Dropdown(options=[("a", "a"), ("b", "b"), ("c", "c"), ("many", "many")],
                               value="a"),
            "text": w.Text(value="start"),
            "on": w.Checkbox(value=True),
            "gain": w.FloatLogSlider(value=1.0, min=-1, max=1),
            "fixed": w.Dropdown(options=[0], value=0, disabled=True),
        })

    def compute(self, **values):
        self.seen.append(values)
        return dict(values)

    def build(self, fig, data):
        return {"title": fig.suptitle("")}

    def update(self, art, data):
        art["title"].set_text(str(data["size"]))
        return [art["title"]]


def test_every_control_is_stepped_from_the_starting_setting(kernel):
    e = Panel()
    e.show()
    start = e.values()
    rows = kernel["_measure_explorer"]("nb00 Panel", e, 5, setup={"text": {"kind": "many"}},
                                       skip={"kind": ["c"]}, texts=["one", "two"])
    assert [r["control"] for r in rows] == list(e.controls)
    by = {r["control"]: r for r in rows}
    for key in ("size", "kind", "text", "on", "gain"):
        assert len(by[key]["ms"]) == 5 and by[key]["median"] <= by[key]["worst"], key
    assert by["fixed"]["note"].startswith("disabled") and "ms" not in by["fixed"]
    assert e.values() == start                        # put back after each control
    kinds = [v["kind"] for v in e.seen]
    assert "c" not in kinds                           # a skipped value is never set
    # each text new, each under the setting the text box's setup asked for
    texts = [v["text"] for v in e.seen if v["text"] != "start" and v["kind"] == "many"]
    assert texts == ["one", "two", "one (2)", "two (3)", "one (4)"]


def test_the_steps_of_each_kind_of_control(kernel):
    steps = kernel["_steps"]
    assert steps(w.IntSlider(value=0, min=0, max=9), 4) == [2, 4, 5, 7]
    assert steps(w.Checkbox(value=False), 3) == [True, False, True]
    assert steps(w.Dropdown(options=["x", "y", "z"], value="y"), 4) == ["z", "x", "y", "z"]
    assert steps(w.Dropdown(options=["x", "y", "z"], value="y"), 2, skip=["x"]) == ["z", "y"]
    assert steps(w.Dropdown(options=["x"], value="x"), 3) == []
    values = steps(w.FloatLogSlider(value=1.0, min=-1, max=1), 3)
    assert all(0.1 <= v <= 10 for v in values) and len(set(values)) == 3


def course_explorers():
    for module, name, cls in widget_tools.course_explorers():
        yield pytest.param(f"{module} {name}", cls, id=f"{module}.{name}")


@pytest.mark.parametrize("label, cls", list(course_explorers()))
def test_each_control_of_the_course_gets_values_a_learner_could_set(bench, kernel, label, cls,
                                                                    explorer_kwargs):
    e = cls(lang="en", **explorer_kwargs(cls))
    setups, skips = bench.SETUP.get(label, {}), bench.SKIP.get(label, {})
    start = e.values()
    for key, control in e.controls.items():
        kernel["_set_all"](e, setups.get(key, {}))
        values = kernel["_steps"](control, 8, bench.TEXTS, skips.get(key, ()))
        if not control.disabled:                      # a disabled one is listed, not stepped
            assert len(values) == 8, (label, key)
            before = control.value
            for v in values:
                assert v != before, (label, key, values)
                control.value = v                     # refused if out of range or not an option
                assert control.value == v, (label, key, v)
                before = v
        kernel["_set_all"](e, start)


def test_the_table_marks_a_median_over_the_goal_and_lists_exempt_and_idle_controls(bench):
    exempt = next(iter(bench.EXEMPT))
    rows = [
        {"explorer": "nb00 A", "control": "fast", "ms": [10.0, 12.0, 30.0], "median": 12.0,
         "worst": 30.0},
        {"explorer": "nb00 A", "control": "slow", "ms": [150.0, 160.0], "median": 155.0,
         "worst": 160.0},
        {"explorer": exempt[0], "control": exempt[1], "ms": [400.0], "median": 400.0,
         "worst": 400.0},
        {"explorer": "nb00 A", "control": "fixed", "note": "disabled: not stepped"},
        {"explorer": "nb00 B", "control": "x", "error": "Traceback: boom\n"},
    ]
    lines = bench.table(rows)
    text = "\n".join(lines)
    row_of = {name: next(line for line in lines if f" {name} " in line)
              for name in ("fast", "slow", "fixed", exempt[1])}
    assert row_of["fast"].endswith("met") and "NOT" not in row_of["fast"]
    assert row_of["slow"].endswith("NOT met")
    assert row_of[exempt[1]].endswith(bench.EXEMPT[exempt])
    assert row_of["fixed"].endswith("disabled: not stepped")
    assert "could not be measured" in text and "boom" in text
    assert lines[-1] == "median ≤ 100 ms: met by 1 of the 2 controls held to it; NOT met by nb00 A slow"
