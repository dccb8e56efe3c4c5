"""Widget of notebook 07: watch attention form while a tiny model trains.

A slider runs over the checkpoints a training run recorded (``tiny_model.train``): the left panel
redraws the chosen head's attention weights on a fixed probe example at that moment, the right
panel marks the moment on the loss curve. A dropdown picks the task (and with it the trained
model), another the head, where the model has more than one. Layers and heads are counted from 0.
Notebook 08's explorer (:mod:`.nb08`) is the same class with its own tasks.
"""

from __future__ import annotations

from functools import lru_cache, partial

import ipywidgets as w
import numpy as np

from .. import plots
from ..tasks import library_batch, previous_token_batch
from ..tiny_model import AttentionOnlyModel, LibraryModel, TrainingRun, train
from .renderer import Explorer, check_lang

#: The tasks the explorer offers, in the notebook's order.
TASKS = ("library", "previous")

TASK_NAMES = {
    "library": {"zh": "图书馆查书（1 层 1 头）", "en": "library lookup (1 layer, 1 head)"},
    "previous": {"zh": "前一个词（学出来的位置编码）", "en": "previous token (learned positions)"},
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

    def layout_key(self, data: dict):
        # Another task (or another head's map of another shape) has other labels and limits.
        return data["task"], data["map"].shape

    def build(self, fig, data: dict) -> dict:
        text = TEXT[self.lang]
        L, S = data["map"].shape
        ax_map, ax_loss = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1.15, 1]})
        plots.heatmap(data["map"], data["rows"], data["cols"], ax=ax_map, vmin=0, vmax=1,
                      annotate=False, xlabel=text["key"], ylabel=text["query"], title=" ")
        loss = data["loss"]
        ax_loss.plot(np.arange(len(loss)), loss, color="tab:blue", lw=1)
        (marker,) = ax_loss.plot([data["step"]], [data["loss_at"]], "o", ms=10, mfc="none",
                                 mec="black", mew=1.8)
        line = ax_loss.axvline(data["step"], color="black", lw=0.6, ls=":")
        ax_loss.set_xlabel(text["step"])
        ax_loss.set_ylabel(text["loss"])
        ax_loss.set_ylim(0, max(float(np.max(loss)) * 1.05, 0.1))
        ax_loss.set_title(" ")
        fig.suptitle(self.TASK_NAMES[data["task"]][self.lang], fontsize=11)
        fig.tight_layout()
        return {"image": ax_map.images[0], "map_title": ax_map.title, "marker": marker,
                "line": line, "curve_title": ax_loss.title}

    def update(self, art: dict, data: dict) -> list:
        text = TEXT[self.lang]
        art["image"].set_data(data["map"])
        where = text["layer_head"].format(layer=data["layer"], head=data["head"])
        art["map_title"].set_text(text["map_title"].format(where=where, step=data["step"]))
        art["marker"].set_data([data["step"]], [data["loss_at"]])
        art["line"].set_xdata([data["step"], data["step"]])
        art["curve_title"].set_text(text["curve_title"].format(
            step=data["step"], steps=data["steps"], loss=data["loss_at"], acc=data["accuracy"]))
        return [art["image"], art["map_title"], art["marker"], art["line"], art["curve_title"]]
