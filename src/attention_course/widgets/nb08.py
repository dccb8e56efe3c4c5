"""Widget of notebook 08: the induction circuit forming, checkpoint by checkpoint.

The explorer of notebook 07 (:class:`.nb07.TrainingExplorer`) with notebook 08's runs: the
two-layer model on the repeat task, the one-layer control with two heads, and the one- and
two-head models of the two-token task. The slider moves in steps of 1 % of training, fine enough
to stop on either side of the two-layer model's phase change.

The repeat task's maps are 20 × 20, the two-token task's 10 × 10: their cells fill the same axes,
and the loss panel takes each run's limits, so choosing another task draws one more frame of the
same figure (how: :mod:`.nb07`).
"""

from __future__ import annotations

from functools import lru_cache, partial

from ..tasks import previous_two_batch, repeat_batch
from ..tiny_model import repeat_model, train, two_token_model
from .nb07 import TrainingExplorer

# repeat_model and two_token_model live in tiny_model; the notebook reaches them from here too.
__all__ = ["InductionExplorer", "TASKS", "TASK_NAMES", "default_runs", "repeat_model", "two_token_model"]

#: The tasks the explorer offers, in the notebook's order.
TASKS = ("repeat", "control", "one_head", "two_heads")

TASK_NAMES = {
    "repeat": {"zh": "接着重复（2 层，每层 1 个头）", "en": "continue the repeat (2 layers, 1 head each)"},
    "control": {"zh": "接着重复（1 层 2 个头，对照）",
                "en": "continue the repeat (1 layer, 2 heads: control)"},
    "one_head": {"zh": "前两个词（1 个头）", "en": "two tokens back (1 head)"},
    "two_heads": {"zh": "前两个词（2 个头）", "en": "two tokens back (2 heads)"},
}


@lru_cache(maxsize=2)
def default_runs(seed: int = 0) -> dict:
    """Notebook 08's runs for one seed, with its settings (several seconds on 2 cores)."""
    rep_eval = repeat_batch(1, 256, length=20)
    two_eval = previous_two_batch(1, 512, length=10)
    rep = partial(repeat_batch, batch_size=16, length=20)
    two = partial(previous_two_batch, batch_size=32, length=10)
    return {
        "repeat": train(repeat_model("2 layers", seed), rep, 600, lr=1e-2, seed=seed,
                        eval_batch=rep_eval, n_checkpoints=61),
        "control": train(repeat_model("1 layer", seed), rep, 1200, lr=1e-2, seed=seed,
                         eval_batch=rep_eval, n_checkpoints=61),
        "one_head": train(two_token_model(1, seed), two, 150, lr=1e-2, seed=seed,
                          eval_batch=two_eval, n_checkpoints=31),
        "two_heads": train(two_token_model(2, seed), two, 150, lr=1e-2, seed=seed,
                           eval_batch=two_eval, n_checkpoints=31),
    }


class InductionExplorer(TrainingExplorer):
    """Checkpoint slider, task and head for notebook 08's runs (see :class:`.nb07.TrainingExplorer`).

    Examples
    --------
    >>> run = train(repeat_model("2 layers"), partial(repeat_batch, batch_size=4, length=20), 10,
    ...             eval_batch=repeat_batch(1, 8, length=20))
    >>> ex = InductionExplorer(lang="en", runs={"repeat": run}, head=1)
    >>> ex.data["layer"], ex.data["head"], ex.data["map"].shape
    (1, 0, (20, 20))
    """

    TASKS, TASK_NAMES = TASKS, TASK_NAMES
    SLIDER_STEP = 1

    @staticmethod
    def default_runs() -> dict:
        return default_runs()

    def __init__(self, lang: str = "en", runs: dict | None = None, task: str = "repeat",
                 head: int = 1, progress: int = 15):
        # By default: layer 1's head at 15 % of training, around the phase change.
        super().__init__(lang=lang, runs=runs, task=task, head=head, progress=progress)
