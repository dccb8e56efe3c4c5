"""Widget of notebook 08: the induction circuit forming, checkpoint by checkpoint.

The explorer of notebook 07 (:class:`.nb07.TrainingExplorer`) with notebook 08's runs: the
two-layer model on the repeat task, the one-layer control with two heads, and the one- and
two-head models of the two-token task. The slider moves in steps of 1 % of training, fine enough
to stop on either side of the two-layer model's phase change.
"""

from __future__ import annotations

from functools import lru_cache, partial

from ..tasks import previous_two_batch, repeat_batch
from ..tiny_model import AttentionOnlyModel, train
from .nb07 import TrainingExplorer

__all__ = ["InductionExplorer", "TASKS", "TASK_NAMES", "default_runs"]

#: The tasks the explorer offers, in the notebook's order.
TASKS = ("repeat", "control", "one_head", "two_heads")

TASK_NAMES = {
    "repeat": {"zh": "接着重复（2 层，每层 1 个头）", "en": "continue the repeat (2 layers, 1 head each)"},
    "control": {"zh": "接着重复（1 层 2 个头，对照）",
                "en": "continue the repeat (1 layer, 2 heads: control)"},
    "one_head": {"zh": "前两个词（1 个头）", "en": "two tokens back (1 head)"},
    "two_heads": {"zh": "前两个词（2 个头）", "en": "two tokens back (2 heads)"},
}


def repeat_model(kind: str, seed: int = 0) -> AttentionOnlyModel:
    """Notebook 08's two models of the repeat task, the same size (9,856 weights).

    ``"2 layers"``: two layers of one head each; ``"1 layer"``: one layer of two heads. Every
    head is d_k = 32 wide.
    """
    if kind not in ("2 layers", "1 layer"):
        raise ValueError(f"kind must be '2 layers' or '1 layer'; got {kind!r}")
    layers, heads = (2, 1) if kind == "2 layers" else (1, 2)
    return AttentionOnlyModel(16, d_model=32, n_layers=layers, n_heads=heads, d_k=32,
                              positional="learned", max_len=20, seed=seed)


def two_token_model(n_heads: int, seed: int = 0) -> AttentionOnlyModel:
    """The two-token task's model with ``n_heads`` heads sharing 32 dimensions (the same size)."""
    return AttentionOnlyModel(8, n_classes=64, d_model=32, n_heads=n_heads, d_k=32 // n_heads,
                              positional="learned", max_len=10, seed=seed)


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
