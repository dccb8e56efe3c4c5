"""The seed sweep: notebooks 07's and 08's claims about trained models, on seeds they never use.

A notebook trains its models on seeds 0, 1, 2 (07's library lookup on 0-4) and prints claims such
as "accuracy ≥ 0.95, every seed". Training amplifies rounding, so those seeds on one BLAS kernel
are one draw. The sweep trains the same models, with the notebooks' own settings, on seeds no
notebook uses, measures the value behind every claim, and says on how many seeds each holds and
how far the value stays from its threshold.

Each claim is a :class:`Claim`: the value it compares (one number per seed), the comparison, and
the threshold. A margin is the distance of the value from the threshold on the claim's side; a
claim *keeps its margin* when that distance is at least 0.05 on a 0-1 scale, or 10 % of the
threshold elsewhere.

``python -m attention_course.sweep --out build/sweep.json`` runs it (make sweep);
:func:`stored` reads the copy shipped with the package (make sweep-store), which the notebooks
print their fractions from.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass
from functools import partial
from importlib import resources

import numpy as np

from .tasks import (
    first_and_previous_batch,
    library_batch,
    previous_token_batch,
    previous_two_batch,
    repeat_batch,
)
from .tiny_model import AttentionOnlyModel, LibraryModel, repeat_model, train_many, two_token_model

#: Seeds no notebook trains on (the notebooks use 0-4).
HELD_OUT = tuple(range(100, 112))
#: 07 §4 measures Adam's factor: the scaled model (tiny embeddings) trains ADAM_STEPS steps at learning
#: rates 0.01 times each of ADAM_FACTORS (1 to 8, each 2^(1/4) times the one before), the unscaled one at
#: 0.01; the factor is where the scaled model's score spread reaches the unscaled one's
#: (:func:`_adam_factor`). 07 claims it lies between ADAM_BOUNDS, 8^(1/4) and √8: the factors that make
#: up for the scale 1/8 on a product of four weights that Adam moves, and on a product of two.
ADAM_FACTORS = tuple(2 ** (k / 4) for k in range(13))
ADAM_STEPS = 10
ADAM_BOUNDS = (8 ** 0.25, 8 ** 0.5)
#: The seeds a notebook trains its claims on: 0-2, and 0-4 for 07's library lookup (cell 16).
NOTEBOOK_SEEDS = (0, 1, 2)
LIBRARY_SEEDS = (0, 1, 2, 3, 4)


@dataclass(frozen=True)
class Claim:
    """One compared claim of a notebook about trained models.

    ``value`` names the measurement; the claim holds on a seed when ``value op threshold``.
    A value is *clear* of the threshold when it lies at least :attr:`needed` away from it, on
    either side: 0.05 when ``unit`` (a 0-1 scale), else 10 % of ``|threshold|``. A clear value
    does not flip when another computer's rounding moves it a little. ``at_least``: on how many of
    the held-out seeds the notebook says it holds (all of them unless stated); the sweep test asserts it.
    ``seeds``: the seeds the notebook trains it on.
    """

    notebook: str
    cell: int
    value: str
    op: str
    threshold: float
    text: str
    unit: bool = True
    at_least: int = len(HELD_OUT)
    seeds: tuple = NOTEBOOK_SEEDS

    def holds(self, x: float) -> bool:
        """Whether ``x`` is on the side of the threshold the claim asks for."""
        return {">=": x >= self.threshold, "<=": x <= self.threshold,
                ">": x > self.threshold, "<": x < self.threshold}[self.op]

    def margin(self, x: float) -> float:
        """Signed distance from the threshold, positive on the side the claim asks for."""
        return x - self.threshold if self.op in (">=", ">") else self.threshold - x

    @property
    def needed(self) -> float:
        """The margin a value must keep from the threshold to count as clear of it."""
        return 0.05 if self.unit else 0.1 * abs(self.threshold)

    def clear(self, x: float) -> bool:
        """Whether ``x`` lies at least :attr:`needed` from the threshold, held or not."""
        return abs(self.margin(x)) >= self.needed


def _c(notebook, cell, value, op, threshold, text, **kw):
    return Claim(notebook, cell, value, op, threshold, text, **kw)


CLAIMS = (
    # 07 §2: the library lookup, 60 steps (cell 16 repeats cell 13's accuracies on seeds 0-4)
    _c("07", 13, "lib_acc_before", "<=", 0.15, "accuracy before training ≤ 0.15", seeds=LIBRARY_SEEDS),
    _c("07", 13, "lib_acc_after", ">=", 0.9, "accuracy after 60 steps ≥ 0.9", seeds=LIBRARY_SEEDS),
    _c("07", 13, "lib_book_before", "<", 0.3, "weight on the matching book before < 0.3", seeds=(0,)),
    _c("07", 13, "lib_book_after", ">", 0.9, "weight on the matching book after > 0.9", seeds=(0,)),
    _c("07", 19, "lib_diagonal_rows", ">=", 14,
       "query-key table: the largest score on the diagonal in ≥ 14 of 16 rows", unit=False,
       seeds=LIBRARY_SEEDS),
    # 07 §3: the previous token, three positional encodings
    _c("07", 23, "prev_learned_acc", ">=", 0.9, "learned position embeddings: accuracy ≥ 0.9"),
    _c("07", 23, "prev_sinusoidal_acc", ">=", 0.9, "sinusoidal ×2: accuracy ≥ 0.9"),
    _c("07", 23, "prev_none_acc", "<=", 0.5, "no positions: accuracy ≤ 0.5"),
    _c("07", 23, "prev_none_acc", ">", 1 / 8, "no positions: accuracy > 2/16"),
    _c("07", 23, "prev_none_pos1", ">=", 0.9, "no positions: position 1 ≥ 0.9"),
    _c("07", 23, "prev_none_pos9", "<=", 0.4, "no positions: position 9 ≤ 0.4"),
    _c("07", 27, "prev_learned_one_back", ">=", 0.9,
       "learned position embeddings: weight on the previous token ≥ 0.9"),
    # 07 §4: the scale
    _c("07", 30, "start_unscaled", ">=", 0.8, "N(0, 1), unscaled: largest weight starts ≥ 0.8"),
    _c("07", 30, "start_scaled", "<=", 0.6, "N(0, 1), scaled: largest weight starts ≤ 0.6"),
    _c("07", 30, "loss_ratio_big", ">", 2, "N(0, 1): mean loss unscaled > 2 × scaled", unit=False),
    _c("07", 30, "start_tiny", "<=", 0.25, "tiny: largest weight starts ≤ 0.25 either way"),
    _c("07", 30, "tiny_acc", ">=", 0.9, "tiny: both reach accuracy ≥ 0.9"),
    _c("07", 30, "loss_ratio_tiny", ">=", 1, "tiny: mean loss scaled ≥ unscaled", unit=False),
    _c("07", 33, "flat_unscaled", ">=", 0.5, "unscaled: ≥ 50 % of shelves with |gradient| < 1e-3"),
    _c("07", 33, "flat_scaled", "<=", 0.1, "scaled: ≤ 10 % of shelves with |gradient| < 1e-3"),
    _c("07", 33, "grad_ratio", ">", 2, "‖dW_Q‖ unscaled > 2 × scaled", unit=False),
    _c("07", 36, "lr8_loss_ratio", ">", 3, "scaled at lr 0.08: mean loss > 3 × unscaled at lr 0.01",
       unit=False),
    _c("07", 36, "lr8_acc", "<=", 0.7, "scaled at lr 0.08: final accuracy ≤ 0.7"),
    _c("07", 36, "retuned_gap", "<=", 0.2, "scaled at lr 0.03 within 0.2 of unscaled at lr 0.01 (mean loss)",
       unit=False),
    _c("07", 36, "retuned_vs_scaled", "<", 1, "scaled at lr 0.03 below scaled at lr 0.01 (mean loss ratio)",
       unit=False),
    _c("07", 36, "retuned_end", ">", 2, "final loss: scaled at lr 0.03 > 2 × scaled at lr 0.01", unit=False),
    _c("07", 39, "adam_factor", ">", ADAM_BOUNDS[0], "Adam's factor > 8^(1/4) ≈ 1.68", unit=False),
    _c("07", 39, "adam_factor", "<", ADAM_BOUNDS[1], "Adam's factor < √8 ≈ 2.83", unit=False),
    # 08 §2-3: two layers against one
    _c("08", 6, "flat", "<", 0.03, "loss flat by the rule (|Δ| / step-0 loss < 0.03)", unit=False,
       at_least=10),
    _c("08", 6, "acc_2l", ">=", 0.9, "2 layers: accuracy ≥ 0.9", at_least=10),
    _c("08", 6, "acc_1l", "<=", 0.9, "1 layer: accuracy ≤ 0.9"),
    _c("08", 9, "periods_2l", ">=", 0.7, "2 layers: accuracy ≥ 0.7 at every period", at_least=10),
    _c("08", 9, "unseen_1l", "<=", 0.1, "1 layer: accuracy ≤ 0.1 at periods 9 and 10"),
    # 08 §4: the circuit
    _c("08", 14, "one_back_1_7", ">=", 0.5, "layer 0: weight one back ≥ 0.5 at positions 1..7", at_least=10),
    _c("08", 14, "one_back_9", "<=", 0.6, "layer 0: weight one back ≤ 0.6 at position 9"),
    _c("08", 14, "one_back_10_19", "<=", 0.2, "layer 0: weight one back ≤ 0.2 on average at 10..19"),
    _c("08", 14, "on_copies", ">=", 0.9, "layer 1: weight on earlier copies of the next token ≥ 0.9",
       at_least=10),
    _c("08", 19, "without_1", "<=", 0.15, "2 layers without layer 1's head: accuracy ≤ 0.15", at_least=10),
    _c("08", 19, "without_0", "<=", 0.4, "2 layers without layer 0's head: accuracy ≤ 0.4"),
    _c("08", 19, "control_kept", ">=", 0.4, "1 layer without either head: at least 40 % of its accuracy"),
    _c("08", 21, "k_diagonal_rows", ">=", 14,
       "K-composition: the largest score on the diagonal in ≥ 14 of 16 rows", unit=False, at_least=10),
    _c("08", 21, "direct_diagonal_rows", "<=", 4,
       "direct table: the largest score on the diagonal in ≤ 4 rows", unit=False),
    # 08 §5: the phase change
    _c("08", 24, "plateau", ">=", 2.0, "mean loss of steps 20-59 ≥ 2.0", unit=False),
    _c("08", 24, "fall_steps", "<=", 60, "from below 2.0 to below 0.5 within 60 steps", unit=False,
       at_least=10),
    # 08 §6: heads that specialise
    _c("08", 27, "two_acc_1h", ">=", 0.9, "two-token, 1 head: accuracy ≥ 0.9", at_least=10),
    _c("08", 27, "two_acc_2h", ">=", 0.9, "two-token, 2 heads: accuracy ≥ 0.9"),
    _c("08", 27, "two_1h_gap", ">", 0, "1 head: more weight 1 back than 2 back", at_least=6),
    _c("08", 27, "two_1h_low", ">=", 0.15, "1 head: ≥ 0.15 on each of 1 and 2 back"),
    _c("08", 27, "two_2h_split", ">=", 0.8, "2 heads: one head ≥ 0.8 on 1 back, the other on 2 back"),
    _c("08", 31, "fp_acc_2h", ">=", 0.5, "first and previous, 2 heads: accuracy ≥ 0.5"),
    _c("08", 31, "fp_acc_1h", "<", 0.5, "first and previous, 1 head: accuracy below 0.5", at_least=4),
    _c("08", 31, "fp_2h_split", ">=", 1.6, "2 heads: one on token 0, the other one back (sum ≥ 1.6)",
       unit=False),
)

#: 08's rule, fixed before the comparison: a two-layer model has the induction circuit when layer 0
#: puts at least this weight on the previous token at each of positions 1 to 7.
CIRCUIT_RULE = 0.5


#: The claims' wording in the Chinese notebooks.
CLAIMS_ZH = {
    'accuracy before training ≤ 0.15':
        '训练前准确率 ≤ 0.15',
    'accuracy after 60 steps ≥ 0.9':
        '训练 60 步后准确率 ≥ 0.9',
    'weight on the matching book before < 0.3':
        '训练前给对应那本书的权重 < 0.3',
    'weight on the matching book after > 0.9':
        '训练后给对应那本书的权重 > 0.9',
    'query-key table: the largest score on the diagonal in ≥ 14 of 16 rows':
        '查询-键表：16 行中至少 14 行的最大分数在对角线上',
    'learned position embeddings: accuracy ≥ 0.9':
        '可学习的位置嵌入：准确率 ≥ 0.9',
    'sinusoidal ×2: accuracy ≥ 0.9':
        '正弦位置编码 ×2：准确率 ≥ 0.9',
    'no positions: accuracy ≤ 0.5':
        '没有位置编码：准确率 ≤ 0.5',
    'no positions: accuracy > 2/16':
        '没有位置编码：准确率 > 2/16',
    'no positions: position 1 ≥ 0.9':
        '没有位置编码：位置 1 上 ≥ 0.9',
    'no positions: position 9 ≤ 0.4':
        '没有位置编码：位置 9 上 ≤ 0.4',
    'learned position embeddings: weight on the previous token ≥ 0.9':
        '可学习的位置嵌入：给前一个词的权重 ≥ 0.9',
    'N(0, 1), unscaled: largest weight starts ≥ 0.8':
        'N(0, 1)，不缩放：最大权重一开始就 ≥ 0.8',
    'N(0, 1), scaled: largest weight starts ≤ 0.6':
        'N(0, 1)，缩放：最大权重一开始 ≤ 0.6',
    'N(0, 1): mean loss unscaled > 2 × scaled':
        'N(0, 1)：不缩放的平均损失 > 缩放的 2 倍',
    'tiny: largest weight starts ≤ 0.25 either way':
        '很小的嵌入：缩放与否，最大权重一开始都 ≤ 0.25',
    'tiny: both reach accuracy ≥ 0.9':
        '很小的嵌入：两者准确率都达到 ≥ 0.9',
    'tiny: mean loss scaled ≥ unscaled':
        '很小的嵌入：缩放的平均损失 ≥ 不缩放的',
    'unscaled: ≥ 50 % of shelves with |gradient| < 1e-3':
        '不缩放：≥ 50% 的书架 |梯度| < 1e-3',
    'scaled: ≤ 10 % of shelves with |gradient| < 1e-3':
        '缩放：≤ 10% 的书架 |梯度| < 1e-3',
    '‖dW_Q‖ unscaled > 2 × scaled':
        '不缩放的 ‖dW_Q‖ > 缩放的 2 倍',
    'scaled at lr 0.08: mean loss > 3 × unscaled at lr 0.01':
        '缩放、学习率 0.08：平均损失 > 不缩放、学习率 0.01 的 3 倍',
    'scaled at lr 0.08: final accuracy ≤ 0.7':
        '缩放、学习率 0.08：最后的准确率 ≤ 0.7',
    'scaled at lr 0.03 within 0.2 of unscaled at lr 0.01 (mean loss)':
        '缩放、学习率 0.03 与不缩放、学习率 0.01 相差不到 0.2（平均损失）',
    'scaled at lr 0.03 below scaled at lr 0.01 (mean loss ratio)':
        '缩放、学习率 0.03 低于缩放、学习率 0.01（平均损失之比）',
    'final loss: scaled at lr 0.03 > 2 × scaled at lr 0.01':
        '最后的损失：缩放、学习率 0.03 > 缩放、学习率 0.01 的 2 倍',
    "Adam's factor > 8^(1/4) ≈ 1.68":
        'Adam 的倍数 > 8^(1/4) ≈ 1.68',
    "Adam's factor < √8 ≈ 2.83":
        'Adam 的倍数 < √8 ≈ 2.83',
    'loss flat by the rule (|Δ| / step-0 loss < 0.03)':
        '按规则损失已不再下降（|Δ| / 第 0 步损失 < 0.03）',
    '2 layers: accuracy ≥ 0.9':
        '两层：准确率 ≥ 0.9',
    '1 layer: accuracy ≤ 0.9':
        '一层：准确率 ≤ 0.9',
    '2 layers: accuracy ≥ 0.7 at every period':
        '两层：每个周期上准确率 ≥ 0.7',
    '1 layer: accuracy ≤ 0.1 at periods 9 and 10':
        '一层：周期 9 和 10 上准确率 ≤ 0.1',
    'layer 0: weight one back ≥ 0.5 at positions 1..7':
        '层 0：位置 1..7 上给前一个词的权重 ≥ 0.5',
    'layer 0: weight one back ≤ 0.6 at position 9':
        '层 0：位置 9 上给前一个词的权重 ≤ 0.6',
    'layer 0: weight one back ≤ 0.2 on average at 10..19':
        '层 0：位置 10..19 上给前一个词的权重平均 ≤ 0.2',
    'layer 1: weight on earlier copies of the next token ≥ 0.9':
        '层 1：给下一个词前面几次出现的权重 ≥ 0.9',
    "2 layers without layer 1's head: accuracy ≤ 0.15":
        '两层，去掉层 1 的头：准确率 ≤ 0.15',
    "2 layers without layer 0's head: accuracy ≤ 0.4":
        '两层，去掉层 0 的头：准确率 ≤ 0.4',
    '1 layer without either head: at least 40 % of its accuracy':
        '一层，去掉任一个头：至少保住 40% 的准确率',
    'K-composition: the largest score on the diagonal in ≥ 14 of 16 rows':
        'K 组合表：16 行中至少 14 行的最大分数在对角线上',
    'direct table: the largest score on the diagonal in ≤ 4 rows':
        '直接的表：最多 4 行的最大分数在对角线上',
    'mean loss of steps 20-59 ≥ 2.0':
        '第 20-59 步的平均损失 ≥ 2.0',
    'from below 2.0 to below 0.5 within 60 steps':
        '从低于 2.0 到低于 0.5 不超过 60 步',
    'two-token, 1 head: accuracy ≥ 0.9':
        '“前两个词”，一个头：准确率 ≥ 0.9',
    'two-token, 2 heads: accuracy ≥ 0.9':
        '“前两个词”，两个头：准确率 ≥ 0.9',
    '1 head: more weight 1 back than 2 back':
        '一个头：给前 1 个词的权重多于前 2 个',
    '1 head: ≥ 0.15 on each of 1 and 2 back':
        '一个头：前 1 个和前 2 个词各得 ≥ 0.15',
    '2 heads: one head ≥ 0.8 on 1 back, the other on 2 back':
        '两个头：一个头给前 1 个词 ≥ 0.8，另一个给前 2 个',
    'first and previous, 2 heads: accuracy ≥ 0.5':
        '“第一个词和前一个词”，两个头：准确率 ≥ 0.5',
    'first and previous, 1 head: accuracy below 0.5':
        '“第一个词和前一个词”，一个头：准确率低于 0.5',
    '2 heads: one on token 0, the other one back (sum ≥ 1.6)':
        '两个头：一个看第 0 个词，另一个看前一个词（和 ≥ 1.6）',
}


def _library_jobs(seed: int) -> dict:
    """07's jobs for one seed, with the notebook's settings."""
    lib = partial(library_batch, batch_size=64)
    jobs = {"lib": dict(model=LibraryModel(seed=seed), make_batch=lib, steps=60, lr=1e-2, seed=seed)}
    prev = partial(previous_token_batch, batch_size=32, length=10)
    for positional, amplitude in (("none", 1.0), ("learned", 1.0), ("sinusoidal", 2.0)):
        jobs["prev", positional] = dict(
            model=AttentionOnlyModel(vocab=16, d_model=32, positional=positional, pe_amplitude=amplitude,
                                     max_len=10, seed=seed), make_batch=prev, steps=100, lr=1e-2, seed=seed)
    for embed_std in (1.0, 0.02):
        for scale in (True, False):
            jobs["scale", embed_std, scale] = dict(
                model=LibraryModel(d_model=64, d_k=64, scale=scale, embed_std=embed_std, seed=seed),
                make_batch=lib, steps=100, lr=1e-2, seed=seed)
    tiny = partial(LibraryModel, d_model=64, d_k=64, embed_std=0.02, seed=seed)
    jobs["retuned"] = dict(model=tiny(scale=True), make_batch=lib, steps=100, lr=3e-2, seed=seed)
    jobs["lr8"] = dict(model=tiny(scale=True), make_batch=lib, steps=100, lr=8e-2, seed=seed)
    jobs["spread", False, 1.0] = dict(model=tiny(scale=False), make_batch=lib, steps=ADAM_STEPS, lr=1e-2,
                                      seed=seed)
    for factor in ADAM_FACTORS:
        jobs["spread", True, factor] = dict(model=tiny(scale=True), make_batch=lib, steps=ADAM_STEPS,
                                            lr=1e-2 * factor, seed=seed)
    return jobs


def _repeat_jobs(seed: int) -> dict:
    """08's jobs for one seed, with the notebook's settings."""
    rep = partial(repeat_batch, batch_size=16, length=20)
    jobs = {("rep", kind): dict(model=repeat_model(kind, seed), make_batch=rep,
                                steps=600 if kind == "2 layers" else 1200, lr=1e-2, seed=seed,
                                n_checkpoints=2)
            for kind in ("2 layers", "1 layer")}
    for task, make in (("two", previous_two_batch), ("fp", first_and_previous_batch)):
        for n_heads in (1, 2):
            jobs[task, n_heads] = dict(model=two_token_model(n_heads, seed),
                                       make_batch=partial(make, batch_size=32, length=10), steps=150,
                                       lr=1e-2, seed=seed, n_checkpoints=2)
    return jobs


def _measure(seed: int, runs: dict, evals: dict) -> dict:
    """Every claim's value for one seed, from its trained runs."""
    v = {}
    lib_eval, prev_eval, rep_eval = evals["lib"], evals["prev"], evals["rep"]
    # 07 §2
    untrained, lib = LibraryModel(seed=seed), runs["lib"].model
    shelf = np.arange(len(lib_eval.query))
    v["lib_acc_before"] = untrained.accuracy(lib_eval)
    v["lib_acc_after"] = lib.accuracy(lib_eval)
    v["lib_book_before"] = untrained.forward(lib_eval)[1][shelf, 0, lib_eval.answer_book].mean()
    v["lib_book_after"] = lib.forward(lib_eval)[1][shelf, 0, lib_eval.answer_book].mean()
    v["lib_diagonal_rows"] = (lib.query_key_table().argmax(axis=1) == np.arange(16)).sum()
    # 07 §3
    acc = {p: runs["prev", p].model.accuracy(prev_eval) for p in ("none", "learned", "sinusoidal")}
    by_position = runs["prev", "none"].model.accuracy_by_position(prev_eval)
    t = np.arange(1, 10)
    learned = runs["prev", "learned"].model.attention_maps(prev_eval)[0, :, 0]          # (B, n, n)
    v.update(prev_learned_acc=acc["learned"], prev_sinusoidal_acc=acc["sinusoidal"],
             prev_none_acc=acc["none"], prev_none_pos1=by_position[1], prev_none_pos9=by_position[9],
             prev_learned_one_back=learned[:, t, t - 1].mean())
    # 07 §4
    start = {(e, s): LibraryModel(d_model=64, d_k=64, scale=s, embed_std=e, seed=seed).forward(lib_eval)[1]
             .max(axis=-1).mean() for e in (1.0, 0.02) for s in (True, False)}
    loss = {key[1:]: run.loss.mean() for key, run in runs.items() if key[0] == "scale"}
    v.update(start_unscaled=start[1.0, False], start_scaled=start[1.0, True],
             loss_ratio_big=loss[1.0, False] / loss[1.0, True],
             start_tiny=max(start[0.02, True], start[0.02, False]),
             tiny_acc=min(runs["scale", 0.02, s].model.accuracy(lib_eval) for s in (True, False)),
             loss_ratio_tiny=loss[0.02, True] / loss[0.02, False])
    flat, norm = {}, {}
    for scale in (True, False):
        model = LibraryModel(d_model=64, d_k=64, scale=scale, seed=seed)
        flat[scale] = (model.right_book_gradient(lib_eval) < 1e-3).mean()
        norm[scale] = np.linalg.norm(model.loss_and_grads(lib_eval)[1]["W_Q"])
    v.update(flat_unscaled=flat[False], flat_scaled=flat[True], grad_ratio=norm[False] / norm[True])
    retuned, unscaled, scaled = runs["retuned"], runs["scale", 0.02, False], runs["scale", 0.02, True]
    v.update(retuned_gap=abs(retuned.loss.mean() - unscaled.loss.mean()),
             retuned_vs_scaled=retuned.loss.mean() / loss[0.02, True],
             retuned_end=retuned.model.loss(lib_eval) / scaled.model.loss(lib_eval),
             lr8_loss_ratio=runs["lr8"].loss.mean() / unscaled.loss.mean(),
             lr8_acc=runs["lr8"].model.accuracy(lib_eval),
             # not a claim: 07 counts the seeds on which the scaled model ends at least as accurate
             tiny_acc_scaled=scaled.model.accuracy(lib_eval),
             tiny_acc_unscaled=unscaled.model.accuracy(lib_eval))
    spread = {key[1:]: _score_spread(run.model, lib_eval) for key, run in runs.items() if key[0] == "spread"}
    v["adam_factor"] = _adam_factor(spread[False, 1.0], [spread[True, f] for f in ADAM_FACTORS])
    # 08 §2-3
    two, one = runs["rep", "2 layers"], runs["rep", "1 layer"]
    v["flat"] = max(abs(r.loss[-200:].mean() - r.loss[-400:-200].mean()) / r.loss[0] for r in (two, one))
    v["acc_2l"], v["acc_1l"] = two.model.accuracy(rep_eval), one.model.accuracy(rep_eval)
    unseen = evals["periods"]
    v["periods_2l"] = min(two.model.accuracy(b) for b in unseen.values())
    v["unseen_1l"] = max(one.model.accuracy(unseen[P]) for P in (9, 10))
    # 08 §4
    b, q = np.nonzero(rep_eval.mask)
    copies = rep_eval.tokens[b] == rep_eval.targets[b, q][:, None]
    w = two.model.attention_maps(rep_eval)[:, :, 0]                     # (layer, B, n, n)
    t = np.arange(1, 20)
    one_back = w[0][:, t, t - 1].mean(axis=0)
    v.update(one_back_1_7=one_back[:7].min(), one_back_9=one_back[8], one_back_10_19=one_back[9:].mean(),
             on_copies=(w[1, b, q] * copies).sum(axis=-1).mean())
    v["without_1"] = two.model.accuracy(rep_eval, ablate=[(1, 0)])
    v["without_0"] = two.model.accuracy(rep_eval, ablate=[(0, 0)])
    v["control_kept"] = min(one.model.accuracy(rep_eval, ablate=[h]) for h in ((0, 0), (0, 1))) / v["acc_1l"]
    v["k_diagonal_rows"] = (two.model.k_composition_table().argmax(axis=1) == np.arange(16)).sum()
    v["direct_diagonal_rows"] = (two.model.query_key_table(1, 0).argmax(axis=1) == np.arange(16)).sum()
    # 08 §5: the notebook's run of seed 0 records 31 checkpoints, the loss at every step either way
    smooth = np.convolve(two.loss, np.ones(5) / 5, mode="valid")
    v["plateau"] = smooth[20:60].mean()
    # a run that never falls below 0.5 counts as falling over all its steps
    below = [int(np.argmax(smooth < x)) if (smooth < x).any() else len(smooth) for x in (2.0, 0.5)]
    v["fall_steps"] = below[1] - below[0]
    # 08 §6
    t = np.arange(2, 10)
    two_eval, fp_eval = evals["two"], evals["fp"]
    maps = {n: runs["two", n].model.attention_maps(two_eval)[0] for n in (1, 2)}     # (B, h, n, n)
    back = {n: np.array([[maps[n][:, h, t, t - k].mean() for k in (1, 2)] for h in range(n)]) for n in (1, 2)}
    v["two_acc_1h"] = runs["two", 1].model.accuracy(two_eval)
    v["two_acc_2h"] = runs["two", 2].model.accuracy(two_eval)
    v["two_1h_gap"] = back[1][0, 0] - back[1][0, 1]
    v["two_1h_low"] = back[1][0].min()
    v["two_2h_split"] = max(min(back[2][0, 0], back[2][1, 1]), min(back[2][1, 0], back[2][0, 1]))
    fp = {n: runs["fp", n].model.attention_maps(fp_eval)[0] for n in (1, 2)}
    fpw = np.array([[fp[2][:, h, t, 0].mean(), fp[2][:, h, t, t - 1].mean()] for h in range(2)])
    v["fp_acc_1h"] = runs["fp", 1].model.accuracy(fp_eval)
    v["fp_acc_2h"] = runs["fp", 2].model.accuracy(fp_eval)
    v["fp_2h_split"] = max(fpw[0, 0] + fpw[1, 1], fpw[1, 0] + fpw[0, 1])
    return {k: float(x) for k, x in v.items()}


def _score_spread(model: LibraryModel, batch) -> float:
    """How far apart the scores of a shelf's books lie: the standard deviation of each shelf's
    scores (:meth:`LibraryModel.scores`), averaged over the shelves of ``batch``."""
    return float(model.scores(batch).std(axis=-1).mean())


def _adam_factor(target: float, spreads) -> float:
    """The factor of the learning rate at which the scaled model's score spread reaches ``target``.

    ``spreads``: the scaled model's spread after training at 0.01 times each of
    :data:`ADAM_FACTORS`; ``target``: the unscaled model's at 0.01. The factor is read off between
    the first factor whose spread reaches the target and the one before it, on a straight line
    through their logarithms; ``inf`` when no factor up to 8 reaches it.

    Examples
    --------
    >>> spreads = [0.01 * f ** 2 for f in ADAM_FACTORS]        # a spread that grows like factor²
    >>> round(_adam_factor(0.08, spreads), 3)                    # 8 times the spread at factor 1
    2.828
    """
    logs = np.log(np.asarray(spreads, dtype=float))
    reached = np.flatnonzero(logs >= np.log(target))
    if len(reached) == 0:
        return float("inf")
    i = int(reached[0])
    if i == 0:
        return ADAM_FACTORS[0]
    x = np.log(ADAM_FACTORS[i - 1:i + 1])
    return float(np.exp(np.interp(np.log(target), logs[i - 1:i + 1], x)))


def evaluation_batches() -> dict:
    """The notebooks' fixed evaluation batches (the same seeds and sizes as in 07 and 08)."""
    return {"lib": library_batch(1, 512), "prev": previous_token_batch(1, 512, length=10),
            "rep": repeat_batch(1, 256, length=20),
            "periods": {P: repeat_batch(2, 256, length=20, periods=(P, P)) for P in (3, 4, 8, 9, 10, 12, 15)},
            "two": previous_two_batch(1, 512, length=10), "fp": first_and_previous_batch(1, 512, length=10)}


def run(seeds=HELD_OUT, processes: int | None = None) -> dict:
    """Train every seed's models and measure every claim.

    Returns
    -------
    dict
        ``{"seeds": [...], "values": {value name: [one float per seed]}}``.
    """
    evals = evaluation_batches()
    jobs = {}
    for seed in seeds:
        for key, job in {**_library_jobs(seed), **_repeat_jobs(seed)}.items():
            eval_batch = {"lib": "lib", "prev": "prev", "scale": "lib", "retuned": "lib", "lr8": "lib",
                          "spread": "lib", "rep": "rep",
                          "two": "two", "fp": "fp"}[key if isinstance(key, str) else key[0]]
            key = key if isinstance(key, tuple) else (key,)
            jobs[(seed, *key)] = dict(job, eval_batch=evals[eval_batch])
    runs = train_many(jobs, processes=processes)
    values: dict = {}
    for seed in seeds:
        mine = {k[1:] if len(k) > 2 else k[1]: r for k, r in runs.items() if k[0] == seed}
        for name, x in _measure(seed, mine, evals).items():
            values.setdefault(name, []).append(x)
    return {"seeds": list(seeds), "values": values}


def summary(result: dict) -> list[dict]:
    """Per claim: on how many seeds it holds, on how many its value is clear of the threshold,
    the range of its value, and its smallest margin."""
    rows = []
    for c in CLAIMS:
        xs = result["values"][c.value]
        rows.append(dict(asdict(c), holds=sum(c.holds(x) for x in xs), seeds=len(xs), low=min(xs),
                         high=max(xs), margin=min(c.margin(x) for x in xs),
                         clear=sum(c.clear(x) for x in xs)))
    return rows


def not_clear(result: dict, notebook_seeds: bool = False) -> list[str]:
    """Every (claim, seed) whose value lies closer to its threshold than the claim's margin.

    ``notebook_seeds``: judge each claim on the seeds its notebook trains it on (``result`` must
    hold them, as :func:`run` on seeds 0-4 does), else on every seed of ``result``.
    """
    out = []
    for c in CLAIMS:
        for seed, x in zip(result["seeds"], result["values"][c.value], strict=True):
            if (seed in c.seeds or not notebook_seeds) and not c.clear(x):
                out.append(f"{c.notebook} cell {c.cell}, seed {seed}: {x:.3f} lies within {c.needed:.3g} of "
                           f"{c.threshold:g}: {c.text}")
    return out


def circuit_seeds(result: dict) -> list[int]:
    """The seeds whose two-layer model has the circuit by 08's rule (:data:`CIRCUIT_RULE`)."""
    values = result["values"]["one_back_1_7"]
    return [s for s, x in zip(result["seeds"], values, strict=True) if x >= CIRCUIT_RULE]


def has_circuit(model: AttentionOnlyModel, batch) -> bool:
    """08's rule: layer 0's mean weight on the previous token is ≥ :data:`CIRCUIT_RULE` at each
    of positions 1 to 7 of ``batch`` (a :class:`~attention_course.tasks.SequenceBatch`)."""
    t = np.arange(1, 8)
    w = model.attention_maps(batch)[0, :, 0]                            # layer 0, head 0: (B, n, n)
    return bool((w[:, t, t - 1].mean(axis=0) >= CIRCUIT_RULE).all())


def table(notebook: str, lang: str = "en", result: dict | None = None) -> str:
    """On how many held-out seeds each of a notebook's claims held, as lines to print.

    Parameters
    ----------
    notebook : str
        ``"07"`` or ``"08"``.
    lang : {"en", "zh"}
        The language of the lines (the Chinese wording is in :data:`CLAIMS_ZH`).
    result : dict, optional
        A sweep's result (default: the stored one, :func:`stored`).

    Examples
    --------
    >>> print(table("08").splitlines()[0])        # doctest: +ELLIPSIS
    On 12 seeds no notebook trains (100-111), with OpenBLAS's ... kernel:
    """
    if lang not in ("en", "zh"):
        raise ValueError(f"lang must be 'en' or 'zh'; got {lang!r}")
    mine = [c for c in CLAIMS if c.notebook == notebook]
    if not mine:
        raise ValueError(f"notebook must be one of {sorted({c.notebook for c in CLAIMS})}; got {notebook!r}")
    result = stored() if result is None else result
    seeds, kernel = result["seeds"], ", ".join(k.split()[-1] for k in result.get("kernel", []))
    span, n = f"{seeds[0]}-{seeds[-1]}", len(seeds)
    if lang == "zh":
        lines = [f"OpenBLAS {kernel} 内核，课程里没用过的 {n} 个种子（{span}）："]
    else:
        lines = [f"On {n} seeds no notebook trains ({span}), with OpenBLAS's {kernel} kernel:"]
    if notebook == "08":
        circuit = circuit_seeds(result)
        accuracy = dict(zip(seeds, result["values"]["acc_2l"], strict=True))
        solved = sum(accuracy[s] >= 0.9 for s in seeds if s not in circuit)
        if lang == "zh":
            sides = ("按规则有电路", f"按规则没有电路，其中 {solved} 个准确率 ≥ 0.9")
        else:
            sides = ("the circuit, by the rule",
                     f"no circuit by the rule; of these, {solved} reached accuracy ≥ 0.9")
        lines += [f"  {len(circuit):2d} / {n}  {sides[0]}", f"  {n - len(circuit):2d} / {n}  {sides[1]}"]
    for c in mine:
        held = sum(c.holds(x) for x in result["values"][c.value])
        text = CLAIMS_ZH[c.text] if lang == "zh" else c.text
        lines.append(f"  {held:2d} / {n}  {text}")
    return "\n".join(lines)


def other_solution() -> tuple[AttentionOnlyModel, dict]:
    """08's stored two-layer model that solves the repeat task without the circuit.

    Which seed lands on which solution changes with the BLAS kernel, so the model is stored
    (``data/other_solution.npz``, written by make other-solution under the kernel and seed it
    names, copied by make other-solution-store).

    Returns
    -------
    model : AttentionOnlyModel
        ``repeat_model("2 layers")`` with the stored weights.
    info : dict
        ``seed``, ``kernel``, ``steps``: how it was trained.
    """
    path = resources.files("attention_course").joinpath("data/other_solution.npz")
    with path.open("rb") as f, np.load(f) as data:
        info = json.loads(str(data["info"]))
        model = repeat_model("2 layers", info["seed"])
        model.params = {name: data[name] for name in model.params}
    return model, info


def stored() -> dict:
    """The sweep shipped with the package (written by make sweep, copied by make sweep-store)."""
    text = resources.files("attention_course").joinpath("data/sweep.json").read_text(encoding="utf-8")
    return json.loads(text)


def main(argv=None) -> int:
    """Command line of ``make sweep``: train on the held-out seeds and write the result as JSON."""
    parser = argparse.ArgumentParser(description="Train 07's and 08's models on held-out seeds.")
    parser.add_argument("--out", help="where to write the result (JSON)")
    parser.add_argument("--seeds", type=int, default=len(HELD_OUT), help="how many held-out seeds")
    parser.add_argument("--notebook-seeds", action="store_true",
                        help="train the notebooks' own seeds instead, and fail if a value is not clear "
                             "of its threshold (the kernel stage runs this under every kernel)")
    args = parser.parse_args(argv)
    from threadpoolctl import threadpool_info

    kernel = [f"{i.get('internal_api')} {i.get('architecture')}" for i in threadpool_info()
              if i.get("user_api") == "blas"]
    if args.notebook_seeds:
        result = run(LIBRARY_SEEDS)
        close = not_clear(result, notebook_seeds=True)
        for line in close:
            print(f"not clear: {line}")
        print(f"{', '.join(kernel)}: {len(CLAIMS)} claims on the notebooks' seeds, "
              f"{'every value clear of its threshold' if not close else f'{len(close)} values not clear'}")
        return 1 if close else 0
    if not args.out:
        parser.error("--out is required unless --notebook-seeds is given")
    result = run(HELD_OUT[:args.seeds])
    result["kernel"] = kernel
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)
    for row in summary(result):
        print(f"{row['notebook']} cell {row['cell']:2d}: holds on {row['holds']:2d}/{row['seeds']}, "
              f"clear on {row['clear']:2d}; values {row['low']:.3f}..{row['high']:.3f}: {row['text']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
