"""Widget of notebook 07: watch attention form while a tiny model trains.

A slider runs over the checkpoints a training run recorded (``tiny_model.train``): the left panel
redraws the chosen head's attention weights on a fixed probe example at that moment, the right
panel marks the moment on the loss curve. A dropdown picks the task (and with it the trained
model), another the head, where the model has more than one. Layers and heads are counted from 0.
Notebook 08's explorer (:mod:`.nb08`) is the same class with its own tasks.

The figure's layout is the same for every task of an explorer, so choosing another task is one
more frame, not a new figure (a new figure, laid out and drawn in full, took 0.2-0.3 s). The map's
cells fill the same axes whatever their number; the loss panel takes each task's limits; the tick
marks and labels of both panels, the loss curve and the task's name are artists that the update
sets. Invisible tick labels as wide as the widest label of any of the explorer's tasks keep the
room those labels need.
"""

from __future__ import annotations

import re
from functools import lru_cache, partial

import ipywidgets as w
import numpy as np
from matplotlib import rcParams
from matplotlib.backends.backend_agg import RendererAgg
from matplotlib.font_manager import FontProperties
from matplotlib.lines import Line2D
from matplotlib.markers import TICKDOWN, TICKLEFT
from matplotlib.ticker import AutoLocator, ScalarFormatter
from matplotlib.transforms import offset_copy

from .. import plots
from ..tasks import library_batch, previous_token_batch
from ..tiny_model import AttentionOnlyModel, LibraryModel, TrainingRun, train
from .renderer import Explorer, check_lang

#: The tasks the explorer offers, in the notebook's order.
TASKS = ("library", "previous")

TASK_NAMES = {
    "library": {"zh": "图书馆查书（1 层 1 头）", "en": "library lookup (1 layer, 1 head)"},
    "previous": {"zh": "前一个词（可学习的位置嵌入）", "en": "previous token (learned position embeddings)"},
}

TEXT = {
    "zh": {
        "progress": "训练进度 %",
        "task": "任务",
        "head": "头",
        "query": "查询（提问的词）",
        "key": "键（被看的词）",
        "loss": "损失（每步一批）",
        "step": "步",
        "layer_head": "层 {layer} 头 {head}",
        "map_title": "{where}，第 {step} 步",
        "curve_title": "第 {step}/{steps} 步：损失 {loss:.2f}，准确率 {acc:.1%}",
        "book": "书",
        "query_label": "查 {key}",
    },
    "en": {
        "progress": "training %",
        "task": "task",
        "head": "head",
        "query": "query (word asking)",
        "key": "key (word looked at)",
        "loss": "loss (one batch per step)",
        "step": "step",
        "layer_head": "layer {layer}, head {head}",
        "map_title": "{where}, step {step}",
        "curve_title": "step {step}/{steps}: loss {loss:.2f}, accuracy {acc:.1%}",
        "book": "book",
        "query_label": "find {key}",
    },
}

#: Font size (points) of the task's name above the panels.
TITLE_SIZE = 11

#: Key names of the library task: the letters A, B, C, ... (16 keys).
KEY_NAMES = tuple(chr(ord("A") + i) for i in range(26))


def heads_of(run: TrainingRun) -> list[tuple[int, int]]:
    """(layer, head) of every attention map a run recorded, layer by layer."""
    _, n_layers, n_heads = run.maps.shape[:3]
    return [(layer, head) for layer in range(n_layers) for head in range(n_heads)]


def probe_labels(run: TrainingRun, lang: str) -> tuple[list[str], list[str]]:
    """Row (query) and column (key) labels of the probe example's attention map."""
    text = TEXT[check_lang(lang)]
    batch = run.eval_batch
    if hasattr(batch, "query"):                       # the library: one query, a shelf of books
        keys, values = batch.keys[0], batch.values[0]
        cols = [f"{KEY_NAMES[k]}:{v}" for k, v in zip(keys, values, strict=True)]
        return [text["query_label"].format(key=KEY_NAMES[batch.query[0]])], cols
    tokens = [str(t) for t in batch.tokens[0]]
    return tokens, tokens


def checkpoint_view(run: TrainingRun, progress: int, head: int = 0) -> dict:
    """What the explorer draws for one run at one point of its training.

    Parameters
    ----------
    run : TrainingRun
    progress : int
        Percent of the training, 0-100; the nearest recorded checkpoint is shown.
    head : int
        Index into :func:`heads_of` (clamped to the heads the run has).

    Returns
    -------
    dict
        ``index`` (checkpoint), ``step``, ``steps``, ``map`` (L, S), ``layer``/``head``
        (counted from 0), ``n_maps``, ``loss_at`` (the loss at that step), ``accuracy``, ``loss``
        (the whole curve).
    """
    n = len(run.checkpoint_steps)
    target = progress / 100 * run.steps
    index = int(np.argmin(np.abs(run.checkpoint_steps - target)))
    index = min(max(index, 0), n - 1)
    where = heads_of(run)
    head = min(max(int(head), 0), len(where) - 1)
    layer_i, head_i = where[head]
    step = int(run.checkpoint_steps[index])
    return {"index": index, "step": step, "steps": run.steps,
            "map": np.asarray(run.maps[index, layer_i, head_i], dtype=float),
            "layer": layer_i, "head": head_i, "n_maps": len(where),
            "loss_at": float(run.loss[step]), "accuracy": float(run.accuracy[index]),
            "loss": run.loss}


@lru_cache(maxsize=2)
def default_runs(seed: int = 0) -> dict:
    """The two training runs of notebook 07 with its settings (under a second on 2 cores)."""
    lib = train(LibraryModel(seed=seed), partial(library_batch, batch_size=64), 60, lr=1e-2,
                seed=seed, eval_batch=library_batch(seed + 1, 512))
    prev = train(AttentionOnlyModel(16, d_model=32, positional="learned", max_len=10, seed=seed),
                 partial(previous_token_batch, batch_size=32, length=10), 100, lr=1e-2,
                 seed=seed, eval_batch=previous_token_batch(seed + 1, 512, length=10))
    return {"library": lib, "previous": prev}


_CJK = re.compile(r"[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uff00-\uffef]")


@lru_cache(maxsize=1)
def _measure() -> RendererAgg:
    """One small Agg renderer that measures every label (one per label cost more than measuring)."""
    return RendererAgg(1, 1, 72)


@lru_cache(maxsize=4096)
def _text_size(text: str, points: float) -> tuple[float, float, float]:
    """Width, height and descent in points of one line of text as Agg lays it out."""
    return _measure().get_text_width_height_descent(text, FontProperties(size=points), ismath=False)


def _points(size) -> float:
    return FontProperties(size=size).get_size_in_points()


def _widest(labels, size) -> str:
    points = _points(size)
    return max(labels, key=lambda s: (_text_size(s, points)[0], s))


def _key_rotation(labels) -> int:
    # as plots.heatmap turns its column labels: Chinese upright, long Latin labels on a wide map 90°
    labels = [str(s) for s in labels]
    if any(_CJK.search(s) for s in labels):
        return 0
    return 90 if len(labels) > 6 and max(map(len, labels)) > 4 else 0


def _centres(n: int) -> np.ndarray:
    """Centres of n cells that fill the axes' (0, 1)."""
    return (np.arange(n) + 0.5) / n


def _keep_room(ax, which: str, room: str, at: float, rotation: float = 0) -> None:
    """One tick on the axis, drawn in no colour, its label ``room``: the axis label and
    tight_layout keep the room of the widest label to come. ``at`` must lie in every view the
    axes take, or the axis leaves the tick out."""
    if which == "x":
        ax.set_xticks([at], labels=[room], rotation=rotation)
    else:
        ax.set_yticks([at], labels=[room])
    ax.tick_params(axis=which, color="none", labelcolor="none")


class _Ticks:
    """Tick marks and labels along one axis, as artists an update sets: placed, sized and coloured
    as the axis places its own (ticks pointing out, labels ``pad`` points beyond them)."""

    def __init__(self, ax, which: str, slots: int):
        fig = ax.get_figure()
        size, width = rcParams[f"{which}tick.major.size"], rcParams[f"{which}tick.major.width"]
        offset = size + rcParams[f"{which}tick.major.pad"]
        colour = rcParams[f"{which}tick.color"]
        label_colour = rcParams[f"{which}tick.labelcolor"]
        label_colour = colour if label_colour == "inherit" else label_colour
        if which == "x":
            along = ax.get_xaxis_transform()
            place = offset_copy(along, fig=fig, y=-offset, units="points")
            marker, align = TICKDOWN, {"ha": "center", "va": "top"}
        else:
            along = ax.get_yaxis_transform()
            place = offset_copy(along, fig=fig, x=-offset, units="points")
            marker, align = TICKLEFT, {"ha": "right", "va": "center_baseline"}
        self.which = which
        self.marks = Line2D([], [], transform=along, marker=marker, linestyle="none",
                            markersize=size, markeredgewidth=width, color=colour, clip_on=False)
        ax.add_artist(self.marks)
        self.labels = [ax.text(0.0, 0.0, "", transform=place, fontsize=rcParams[f"{which}tick.labelsize"],
                               color=label_colour, clip_on=False, in_layout=False, **align)
                       for _ in range(slots)]

    def set(self, positions, labels, rotation: float = 0) -> list:
        """Ticks at ``positions`` (along the axis, in data units) with these labels; the label
        places beyond them left empty. Returns the artists."""
        n = len(positions)
        if n > len(self.labels) or len(labels) != n:
            raise ValueError(f"{n} positions, {len(labels)} labels, {len(self.labels)} places")
        along, across = np.asarray(positions, dtype=float), np.zeros(n)
        self.marks.set_data((along, across) if self.which == "x" else (across, along))
        for i, text in enumerate(self.labels):
            label, at = (str(labels[i]), along[i]) if i < n else ("", 0.0)
            text.set_text(label)
            if self.which == "x":
                text.set_x(at)
                text.set_rotation(rotation)
            else:
                text.set_y(at)
        return [self.marks, *self.labels]


def _loss_view(ax, loss) -> dict:
    """The limits and ticks the loss panel takes for one curve: those autoscaling and matplotlib's
    default locator and formatter gave it (set on ``ax`` to lay out the ticks on its length).

    ``xlim``, ``ylim``; ``x``, ``y``: lists of (position, label) of the ticks within the limits.
    """
    x0, x1 = AutoLocator().nonsingular(0.0, float(len(loss) - 1))    # as autoscaling does
    margin = rcParams["axes.xmargin"] * (x1 - x0)
    view = {"xlim": (x0 - margin, x1 + margin),
            "ylim": (0.0, max(float(np.max(loss)) * 1.05, 0.1))}
    ax.set_xlim(*view["xlim"])
    ax.set_ylim(*view["ylim"])
    for which, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
        locator, formatter = AutoLocator(), ScalarFormatter()
        locator.set_axis(axis)
        formatter.set_axis(axis)
        locs = locator()
        labels = formatter.format_ticks(locs)
        lo, hi = view[f"{which}lim"]
        slack = (hi - lo) * 1e-10          # as the axis keeps a tick on the limit
        view[which] = [(float(at), label) for at, label in zip(locs, labels, strict=True)
                       if lo - slack <= at <= hi + slack]
    return view


class TrainingExplorer(Explorer):
    """Checkpoint slider, task and head: the attention map sharpening as training goes on.

    Parameters
    ----------
    lang : {"zh", "en"}
    runs : dict of str to TrainingRun, optional
        One run per task name of ``TASKS`` (any subset, in any order); default
        ``default_runs()``, the notebook's settings.
    task : str
        Starting task.
    head : int
        Starting head, an index into :func:`heads_of` (0-based).
    progress : int
        Starting point, percent of training.

    Attributes
    ----------
    data : dict
        :func:`checkpoint_view` of the current setting plus ``task``, ``rows``, ``cols``.

    Examples
    --------
    >>> run = train(LibraryModel(seed=0), partial(library_batch, batch_size=16), 10,
    ...             eval_batch=library_batch(1, 32))
    >>> ex = TrainingExplorer(lang="en", runs={"library": run})
    >>> ex.data["step"], ex.data["map"].shape
    (10, (1, 6))
    >>> ex.compute(progress=0, task="library", head=0)["step"]
    0
    """

    TASKS, TASK_NAMES = TASKS, TASK_NAMES
    #: Percent of training per slider notch.
    SLIDER_STEP = 5

    @staticmethod
    def default_runs() -> dict:
        return default_runs()

    def __init__(self, lang: str = "en", runs: dict | None = None, task: str = "previous",
                 head: int = 0, progress: int = 100):
        check_lang(lang)
        tasks = self.TASKS
        runs = dict(self.default_runs() if runs is None else runs)
        unknown = set(runs) - set(tasks)
        if not runs or unknown:
            raise ValueError(f"runs must map task names {tasks} to TrainingRun; "
                             f"got keys {sorted(runs)!r}")
        if task not in runs:
            task = next(t for t in tasks if t in runs)
        self.lang, self.runs = lang, runs
        # One layout for every task: as many label places as the largest map needs, as much room
        # as the widest label takes (the columns turned when any task's are), the tallest name.
        labels = [probe_labels(run, lang) for run in runs.values()]
        rows = [label for r, _ in labels for label in r]
        cols = [label for _, c in labels for label in c]
        self._layout = {
            "rows": max(len(r) for r, _ in labels), "cols": max(len(c) for _, c in labels),
            "row_room": _widest(rows, rcParams["ytick.labelsize"]),
            "col_room": _widest(cols, rcParams["xtick.labelsize"]),
            "col_rotation": max(_key_rotation(c) for _, c in labels),
            "name": max((self.TASK_NAMES[t][lang] for t in runs),
                        key=lambda s: _text_size(s, _points(TITLE_SIZE))[1:]),
        }
        text = TEXT[lang]
        options = [(self.TASK_NAMES[t][lang], t) for t in tasks if t in runs]
        controls = {
            "progress": w.IntSlider(value=int(progress), min=0, max=100, step=self.SLIDER_STEP,
                                    description=text["progress"], continuous_update=False,
                                    style={"description_width": "initial"}),
            "task": w.Dropdown(options=options, value=task, description=text["task"],
                               layout=w.Layout(width="330px")),
            "head": w.Dropdown(options=self._head_options(runs[task]),
                               value=min(max(int(head), 0), len(heads_of(runs[task])) - 1),
                               description=text["head"], layout=w.Layout(width="230px")),
        }
        super().__init__(controls)
        self._sync_head_control()

    def _head_options(self, run) -> list:
        text = TEXT[self.lang]
        return [(text["layer_head"].format(layer=layer, head=head), i)
                for i, (layer, head) in enumerate(heads_of(run))]

    def _sync_head_control(self) -> None:
        # Each model names its own heads; a model with one attention map has none to pick.
        run, control = self.runs[self.controls["task"].value], self.controls["head"]
        options = self._head_options(run)
        if list(control.options) != options:
            value = min(control.value, len(options) - 1)
            self._syncing = True          # new options reset the value: one refresh, at the end
            try:
                control.options = options
                control.value = value
            finally:
                self._syncing = False
        control.disabled = len(options) < 2

    def _on_change(self, change) -> None:
        if getattr(self, "_syncing", False):
            return
        self._sync_head_control()
        super()._on_change(change)

    def compute(self, progress: int, task: str, head: int) -> dict:
        run = self.runs[task]
        data = checkpoint_view(run, progress, head)
        rows, cols = probe_labels(run, self.lang)
        data.update(task=task, rows=rows, cols=cols)
        return data

    figsize = (11.0, 4.2)

    def build(self, fig, data: dict) -> dict:
        # The same layout for every task (no layout_key): the map's cells fill the same axes
        # whatever their number, the loss panel takes each task's limits in update(), and the
        # ticks of both are artists that update() sets.
        text, layout = TEXT[self.lang], self._layout
        ax_map, ax_loss = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1.15, 1]})
        plots.heatmap(data["map"], ax=ax_map, vmin=0, vmax=1, annotate=False,
                      xlabel=text["key"], ylabel=text["query"], title=" ")
        image = ax_map.images[0]
        image.set_extent((0.0, 1.0, 1.0, 0.0))
        ax_map.set_xlim(0.0, 1.0)
        ax_map.set_ylim(1.0, 0.0)
        _keep_room(ax_map, "x", layout["col_room"], 0.5, layout["col_rotation"])
        _keep_room(ax_map, "y", layout["row_room"], 0.5)
        loss = data["loss"]
        (curve,) = ax_loss.plot(np.arange(len(loss)), loss, color="tab:blue", lw=1)
        (marker,) = ax_loss.plot([data["step"]], [data["loss_at"]], "o", ms=10, mfc="none",
                                 mec="black", mew=1.8)
        line = ax_loss.axvline(data["step"], color="black", lw=0.6, ls=":")
        ax_loss.set_xlabel(text["step"])
        ax_loss.set_ylabel(text["loss"])
        ax_loss.set_title(" ")
        # 0 lies in every task's limits: the tick that keeps the room is always drawn
        views = [_loss_view(ax_loss, run.loss) for run in self.runs.values()]
        for which in ("x", "y"):
            _keep_room(ax_loss, which, _widest([label for v in views for _, label in v[which]],
                                               rcParams[f"{which}tick.labelsize"]), 0.0)
        name = fig.suptitle(layout["name"], fontsize=TITLE_SIZE)
        fig.tight_layout()
        # the ticks again, on the loss panel's final length
        views = {task: _loss_view(ax_loss, run.loss) for task, run in self.runs.items()}
        return {"image": image, "map_title": ax_map.title, "curve": curve, "marker": marker,
                "line": line, "curve_title": ax_loss.title, "name": name, "views": views,
                "loss_axes": ax_loss,
                "keys": _Ticks(ax_map, "x", layout["cols"]),
                "queries": _Ticks(ax_map, "y", layout["rows"]),
                "steps": _Ticks(ax_loss, "x", max(len(v["x"]) for v in views.values())),
                "losses": _Ticks(ax_loss, "y", max(len(v["y"]) for v in views.values()))}

    def update(self, art: dict, data: dict) -> list:
        text = TEXT[self.lang]
        L, S = data["map"].shape
        art["image"].set_data(data["map"])
        keys = art["keys"].set(_centres(S), data["cols"], _key_rotation(data["cols"]))
        queries = art["queries"].set(_centres(L), data["rows"])
        where = text["layer_head"].format(layer=data["layer"], head=data["head"])
        art["map_title"].set_text(text["map_title"].format(where=where, step=data["step"]))
        view, loss = art["views"][data["task"]], data["loss"]
        art["loss_axes"].set_xlim(*view["xlim"])
        art["loss_axes"].set_ylim(*view["ylim"])
        art["curve"].set_data(np.arange(len(loss)), loss)
        art["marker"].set_data([data["step"]], [data["loss_at"]])
        art["line"].set_xdata([data["step"], data["step"]])
        steps = art["steps"].set(*zip(*view["x"], strict=True))
        losses = art["losses"].set(*zip(*view["y"], strict=True))
        art["curve_title"].set_text(text["curve_title"].format(
            step=data["step"], steps=data["steps"], loss=data["loss_at"], acc=data["accuracy"]))
        art["name"].set_text(self.TASK_NAMES[data["task"]][self.lang])
        # in the order a full draw gives artists of one zorder: the order they were made in
        return [art["image"], *keys, *queries, art["map_title"], art["curve"], art["marker"],
                art["line"], *steps, *losses, art["curve_title"], art["name"]]
