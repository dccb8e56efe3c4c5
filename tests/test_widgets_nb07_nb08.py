"""Notebooks 07 and 08's explorers: another task is one more frame of the same figure, and that
frame shows what the task's training run recorded.

The speed itself is measured by benchmarks/widgets.py, not here: these tests only hold what the
speed-up must not change (the numbers, labels, limits and colour scale shown) and how it is had
(no new figure).
"""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest
from matplotlib.figure import Figure

import widget_tools
from attention_course import tasks
from attention_course.tiny_model import train
from attention_course.widgets import nb07, nb08
from widget_tools import frame_differs, same_picture, shown

KEYS = {"index", "step", "steps", "map", "layer", "head", "n_maps", "loss_at", "accuracy", "loss",
        "task", "rows", "cols"}


@pytest.fixture(scope="module")
def runs07():
    return widget_tools.small_runs07()


@pytest.fixture(scope="module")
def runs08():
    rep = partial(tasks.repeat_batch, batch_size=4, length=20)
    two = partial(tasks.previous_two_batch, batch_size=4, length=10)
    rep_eval = tasks.repeat_batch(1, 8, length=20)
    two_eval = tasks.previous_two_batch(1, 8, length=10)
    return {
        "repeat": train(nb08.repeat_model("2 layers"), rep, 20, eval_batch=rep_eval),
        "control": train(nb08.repeat_model("1 layer"), rep, 30, eval_batch=rep_eval),
        "two_heads": train(nb08.two_token_model(2), two, 10, eval_batch=two_eval),
    }


@pytest.fixture(params=["nb07", "nb08"])
def case(request, runs07, runs08):
    """(explorer class, runs, starting task)."""
    if request.param == "nb07":
        return nb07.TrainingExplorer, runs07, "previous"
    return nb08.InductionExplorer, runs08, "repeat"


def tasks_of(explorer) -> list[str]:
    return [value for _, value in explorer.controls["task"].options]


def expected(run, task: str, progress: int, head: int, lang: str) -> dict:
    """What the explorer showed before its layout was shared by every task, from the run itself."""
    index = int(np.argmin(np.abs(run.checkpoint_steps - progress / 100 * run.steps)))
    _, n_layers, n_heads = run.maps.shape[:3]
    layer, h = divmod(min(head, n_layers * n_heads - 1), n_heads)
    step = int(run.checkpoint_steps[index])
    batch = run.eval_batch
    if task == "library":
        find = {"en": "find {}", "zh": "查 {}"}[lang]
        rows = [find.format(chr(ord("A") + int(batch.query[0])))]
        cols = [f"{chr(ord('A') + int(k))}:{v}" for k, v in zip(batch.keys[0], batch.values[0],
                                                                strict=True)]
    else:
        rows = cols = [str(t) for t in batch.tokens[0]]
    return {"index": index, "step": step, "steps": run.steps, "map": run.maps[index, layer, h],
            "layer": layer, "head": h, "n_maps": n_layers * n_heads, "loss_at": run.loss[step],
            "accuracy": run.accuracy[index], "loss": run.loss, "task": task, "rows": rows,
            "cols": cols}


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_compute_gives_every_tasks_recorded_numbers_and_labels(case, lang):
    cls, runs, _ = case
    e = cls(lang=lang, runs=runs)
    for task in tasks_of(e):
        for progress in (0, 15, 50, 100):
            for head in (0, 1):
                data = e.compute(progress=progress, task=task, head=head)
                want = expected(runs[task], task, progress, head, lang)
                assert set(data) == KEYS
                for key, value in want.items():
                    if isinstance(value, np.ndarray):
                        np.testing.assert_array_equal(data[key], value, err_msg=key)
                    else:
                        assert data[key] == value, (task, key)


def loss_panel_of_old(loss, step, loss_at, position) -> dict:
    """The loss panel as the explorer drew it before (its own axes, autoscaled), at ``position``:
    its limits and the ticks its axes drew."""
    fig = Figure(figsize=nb07.TrainingExplorer.figsize, dpi=100)
    ax = fig.add_axes(position)
    ax.plot(np.arange(len(loss)), loss, color="tab:blue", lw=1)
    ax.plot([step], [loss_at], "o", ms=10, mfc="none", mec="black", mew=1.8)
    ax.axvline(step, color="black", lw=0.6, ls=":")
    ax.set_ylim(0, max(float(np.max(loss)) * 1.05, 0.1))
    lo, hi = ax.get_xlim()
    x = [(t.get_position()[0], t.get_text()) for t in ax.get_xticklabels()
         if lo <= t.get_position()[0] <= hi]
    lo, hi = ax.get_ylim()
    y = [(t.get_position()[1], t.get_text()) for t in ax.get_yticklabels()
         if lo <= t.get_position()[1] <= hi]
    return {"xlim": ax.get_xlim(), "ylim": ax.get_ylim(), "x": x, "y": y}


def shown_ticks(ticks) -> list:
    which = 0 if ticks.which == "x" else 1
    return [(t.get_position()[which], t.get_text()) for t in ticks.labels if t.get_text()]


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_choosing_another_task_redraws_the_same_figure(case, lang):
    cls, runs, start = case
    e = shown(cls(lang=lang, runs=runs, task=start))
    names = tasks_of(e)
    keys = {e.layout_key(e.compute(progress=p, task=t, head=h))
            for t in names for p in (0, 100) for h in (0, 1)}
    assert len(keys) == 1
    fig, art = e._live[0], e._live[1]
    builds = []
    real_build = e.build
    e.build = lambda *a: builds.append(1) or real_build(*a)
    control = e.controls["task"]
    for task in [*names[1:], *reversed(names)]:
        control.value = task
        assert e._live[0] is fig and e._live[1] is art and not builds
        data = e.data
        assert data["task"] == task
        # the map: this task's numbers on the 0-1 scale, its labels and no other's
        np.testing.assert_array_equal(art["image"].get_array(), data["map"])
        assert art["image"].get_clim() == (0, 1)
        for ticks, labels in ((art["keys"], data["cols"]), (art["queries"], data["rows"])):
            shown_labels = [t.get_text() for t in ticks.labels]
            assert shown_labels[:len(labels)] == labels and not any(shown_labels[len(labels):])
            centres = (np.arange(len(labels)) + 0.5) / len(labels)
            np.testing.assert_allclose([p for p, _ in shown_ticks(ticks)], centres)
        # the loss panel: this task's curve, limits and ticks, as its own autoscaled axes had them
        ax = art["loss_axes"]
        np.testing.assert_array_equal(art["curve"].get_ydata(), runs[task].loss)
        old = loss_panel_of_old(data["loss"], data["step"], data["loss_at"], ax.get_position())
        np.testing.assert_allclose(ax.get_xlim(), old["xlim"])
        np.testing.assert_allclose(ax.get_ylim(), old["ylim"])
        assert shown_ticks(art["steps"]) == old["x"] and shown_ticks(art["losses"]) == old["y"]
        assert art["name"].get_text() == cls.TASK_NAMES[task][lang]


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_each_tasks_frame_is_its_static_figure(case, lang):
    # from task to task and back: no label, tick or curve of another task is left over, none is
    # missing, up to the rounding of blended glyph edges
    cls, runs, start = case
    e = shown(cls(lang=lang, runs=runs, task=start))
    names = tasks_of(e)
    for task in [*names[1:], *reversed(names)]:
        e.controls["task"].value = task
        assert same_picture(frame_differs(e)), task
