"""Checks for the exercises of notebook 05 (positional encoding).

Each check compares the learner's function with the library on several inputs, with the
library's own position functions forbidden (watched while the learner's function runs). When it
fails, it also tries the learner's answer against the slips learners most often make (sin and
cos swapped, the exponent i/d for 2i/d, a rotation turned the wrong way, a permutation read
backwards, the sign of a penalty) and, if one of them explains the result, says so.
"""

from __future__ import annotations

import numpy as np

from ..attention import scaled_dot_product_attention
from ..positional import (
    alibi_bias,
    apply_rotary,
    position_shift_matrix,
    sinusoidal_positional_encoding,
)
from . import forbidden
from .cases import Case, check_function
from .language import CheckFailed, fail, get_language
from .language import label as _t
from .watcher import run_learner

__all__ = [
    "check_alibi",
    "check_permutation_matrix",
    "check_positional_encoding",
    "check_rope",
    "check_shift_matrix",
]


def _same(got, expected) -> bool:
    try:
        got = np.asarray(got, dtype=float)
    except (TypeError, ValueError):
        return False
    return got.shape == expected.shape and bool(np.allclose(got, expected, rtol=1e-4, atol=1e-4))


def _with_diagnosis(run_check, learner, probe, slips, lang):
    """Run ``run_check``; on failure add the hint of the first slip that explains ``probe``.

    ``slips`` is a list of ``(wrong_reference, {"zh": ..., "en": ...})``: when the learner's
    answer on ``probe`` equals ``wrong_reference(*probe)``, that slip's text names the mistake.
    """
    try:
        run_check()
    except CheckFailed as failure:
        lang = get_language(lang)
        try:
            got = run_learner(learner, *probe, name="", label="")
        except Exception:  # the first failure already says what went wrong
            raise failure from None
        for wrong, text in slips:
            if _same(got, wrong(*probe)):
                label = {"zh": "\n可能的原因：", "en": "\nLikely cause: "}[lang]
                raise CheckFailed(f"{failure}{label}{text[lang]}") from None
        raise failure from None


def _angle_atol(arrays, largest_angle: float, scale: float = 1.0) -> float:
    """Absolute tolerance for sines and cosines of angles up to ``largest_angle``.

    An angle x held in a floating type of machine epsilon eps is only known to about x·eps, so
    its sine is too: a float32 answer at position 2000 is honestly off by ~1e-4, a float64 one by
    ~1e-12. The least precise floating dtype among ``arrays`` (the inputs, the answer and the
    expected result) decides, together with the size of the angles.
    """
    eps = np.finfo(np.float64).eps
    for a in arrays:
        try:
            dtype = np.asarray(a).dtype
        except (TypeError, ValueError):
            continue
        if dtype.kind == "f":
            eps = max(eps, float(np.finfo(dtype).eps))
    return float(16 * eps * (1.0 + largest_angle) * max(1.0, scale))


def _angle_tolerance(angle_of):
    """``check_function``'s ``tolerance`` for sines and cosines: it grows with each case's angles."""
    def tolerance(case, got, expected):
        largest, scale = angle_of(case)
        return 0.0, _angle_atol((got, expected, *case.args), largest, scale)
    return tolerance


# ---------------------------------------------------------------- exercise 1: the encoding

def _pe_swapped(P, D, base=10000.0):
    pe = sinusoidal_positional_encoding(P, D, base)
    return pe[:, [j ^ 1 for j in range(D)]]           # swap columns 2i <-> 2i+1


def _pe_exponent_i(P, D, base=10000.0):
    angles = np.arange(P)[:, None] * base ** (-np.arange(D // 2) / D)[None, :]   # (P, D/2)
    pe = np.empty((P, D))
    pe[:, 0::2], pe[:, 1::2] = np.sin(angles), np.cos(angles)
    return pe


def _pe_from_one(P, D, base=10000.0):
    return sinusoidal_positional_encoding(P + 1, D, base)[1:]


def _pe_halves(P, D, base=10000.0):
    pe = sinusoidal_positional_encoding(P, D, base)
    return np.concatenate([pe[:, 0::2], pe[:, 1::2]], axis=1)


def check_positional_encoding(fn, lang=None) -> None:
    """Check ``fn(num_positions, d_model, base=10000.0) -> (P, D)`` against the library.

    Seven cases (one position, an odd number of pairs, another base, the empty sequence, far
    positions); the library's position functions are forbidden and loops are refused. The
    tolerance follows the dtype of the answer and the size of the angles, so a float32 answer
    passes.
    """
    cases = [
        Case(_t("P=4, d_model=4", "P=4, d_model=4"), (4, 4)),
        Case(_t("P=50, d_model=16", "P=50, d_model=16"), (50, 16)),
        Case(_t("P=1, d_model=2（只有位置 0 和一对维度）",
                "P=1, d_model=2 (position 0 only, one pair)"), (1, 2)),
        Case(_t("P=7, d_model=6（维度对的个数是奇数）",
                "P=7, d_model=6 (an odd number of pairs)"), (7, 6)),
        Case(_t("P=10, d_model=8, base=100", "P=10, d_model=8, base=100"), (10, 8), {"base": 100.0}),
        Case(_t("P=0, d_model=8（空序列）", "P=0, d_model=8 (empty sequence)"), (0, 8)),
        Case(_t("P=2000, d_model=32（很远的位置）", "P=2000, d_model=32 (far positions)"), (2000, 32)),
    ]
    name = {"zh": "正弦位置编码", "en": "sinusoidal encoding"}
    hint = _t("偶数列放 sin，奇数列放 cos；第 i 对的频率由指数 2i/d_model 决定；"
              "位置从 0 开始数；返回形状 (P, d_model)。",
              "even columns hold sines, odd columns cosines; the frequency of pair i comes from the "
              "exponent 2i/d_model; positions count from 0; return shape (P, d_model).")
    slips = [
        (_pe_swapped, _t("sin 和 cos 放反了：偶数列（0, 2, 4…）是 sin，奇数列是 cos。",
                         "sin and cos are swapped: even columns (0, 2, 4...) hold sin, odd "
                         "columns cos.")),
        (_pe_exponent_i, _t("指数写成了 i/d_model；应该是 2i/d_model（i 是维度对的编号）。",
                            "the exponent is i/d_model; it must be 2i/d_model (i numbers the "
                            "pairs).")),
        (_pe_from_one, _t("位置从 1 开始数了；第一行应是位置 0：[0, 1, 0, 1, …]。",
                          "positions start at 1; the first row is position 0: [0, 1, 0, 1, ...].")),
        (_pe_halves, _t("sin 全放在前半、cos 全放在后半了；这里要求两者交错：列 2i 是 sin，列 2i+1 是 cos。",
                        "all sines first and all cosines after; here they interleave: column "
                        "2i is sin, column 2i+1 cos.")),
    ]

    def angles(case):
        return max(case.args[0] - 1, 0), 1.0           # pos·ω_0 = pos is the largest angle

    _with_diagnosis(
        lambda: check_function(fn, sinusoidal_positional_encoding, cases, name=name, hint=hint,
                               lang=lang, forbidden=forbidden.of("positional"), no_loops=True,
                               tolerance=_angle_tolerance(angles)),
        fn, (6, 8), slips, lang)


# ---------------------------------------------------------------- exercise 2: the shift matrix

def _shift_transposed(k, D, base=10000.0):
    return position_shift_matrix(k, D, base).T


def _shift_raw_angle(k, D, base=10000.0):
    M = np.zeros((D, D))
    c, s = np.cos(k), np.sin(k)
    for i in range(D // 2):
        M[2 * i:2 * i + 2, 2 * i:2 * i + 2] = [[c, -s], [s, c]]
    return M


def check_shift_matrix(fn, lang=None) -> None:
    """Check ``fn(k, d_model, base=10000.0) -> (D, D)`` with ``PE[pos + k] = PE[pos] @ M``.

    Six cases: k = 0 (the identity), negative k, a single pair, another base. The library's shift
    matrix and rotary encoding are forbidden (``frequencies`` is allowed); loops are allowed.
    """
    cases = [
        Case(_t("k=1, d_model=4", "k=1, d_model=4"), (1, 4)),
        Case(_t("k=0, d_model=4（不移动：应是单位矩阵）", "k=0, d_model=4 (no shift: the identity)"),
             (0, 4)),
        Case(_t("k=5, d_model=8", "k=5, d_model=8"), (5, 8)),
        Case(_t("k=-3, d_model=8（往回移）", "k=-3, d_model=8 (a shift backwards)"), (-3, 8)),
        Case(_t("k=7, d_model=2（只有一对）", "k=7, d_model=2 (a single pair)"), (7, 2)),
        Case(_t("k=12, d_model=16, base=100", "k=12, d_model=16, base=100"), (12, 16), {"base": 100.0}),
    ]
    name = {"zh": "平移矩阵 M_k", "en": "shift matrix M_k"}
    hint = _t("每个维度对占对角线上的一个 2×2 块，其余为 0；第 i 块转过的角度和 ω_i 有关。"
              "行向量约定：一个位置的 (sin, cos) 乘上这个块，要得到往后挪 k 格的 (sin, cos)。",
              "each pair owns a 2×2 block on the diagonal, zeros elsewhere; block i turns by an "
              "angle that involves ω_i. Row-vector convention: the (sin, cos) of a position times "
              "the block must give the (sin, cos) of the position k steps on.")
    slips = [
        (_shift_transposed, _t("旋转方向反了（你的矩阵是正确答案的转置，也就是 M_{-k}）："
                               "它把编码往回移了 k 个位置。",
                               "the rotation turns the wrong way (your matrix is the transpose of "
                               "the answer, i.e. M_{-k}): it moves the encoding k positions back.")),
        (_shift_raw_angle, _t("每一对都转了同一个角度 k；第 i 对应该转 k·ω_i。",
                              "every pair is turned by the angle k; pair i must turn by k·ω_i.")),
    ]
    _with_diagnosis(
        lambda: check_function(fn, position_shift_matrix, cases, name=name, hint=hint, lang=lang,
                               forbidden=forbidden.of("rotary")),
        fn, (3, 8), slips, lang)


# ---------------------------------------------------------------- exercise 3: a permutation

def _permutation_reference(perm):
    perm = np.asarray(perm, dtype=int)
    out = np.zeros((perm.size, perm.size))
    out[np.arange(perm.size), perm] = 1.0
    return out


def check_permutation_matrix(fn, lang=None) -> None:
    """Check ``fn(perm) -> P`` (n, n) with ``P @ X == X[perm]`` for every X with n rows.

    Six permutations, among them a cycle (not its own inverse), one word, and a NumPy array.
    """
    cases = [
        Case(_t("perm=[0, 1, 2]（不动）", "perm=[0, 1, 2] (nothing moves)"), ([0, 1, 2],)),
        Case(_t("perm=[2, 1, 0]（狗咬人 → 人咬狗）", "perm=[2, 1, 0] (dog bites man → man bites dog)"),
             ([2, 1, 0],)),
        Case(_t("perm=[1, 2, 0]（轮换，不是自己的逆）", "perm=[1, 2, 0] (a cycle: not its own inverse)"),
             ([1, 2, 0],)),
        Case(_t("perm=[3, 0, 4, 1, 2]", "perm=[3, 0, 4, 1, 2]"), ([3, 0, 4, 1, 2],)),
        Case(_t("perm=[0]（一个词）", "perm=[0] (one word)"), ([0],)),
        Case(_t("perm=np.array([1, 0, 3, 2])（NumPy 数组）", "perm=np.array([1, 0, 3, 2]) (a NumPy array)"),
             (np.array([1, 0, 3, 2]),)),
    ]
    name = {"zh": "置换矩阵", "en": "permutation matrix"}
    hint = _t("P @ X 的第 i 行要等于 X 的第 perm[i] 行：想一想 P 的第 i 行该在哪一列放 1。",
              "row i of P @ X must be row perm[i] of X: think about which column of row i of P "
              "holds the 1.")
    slips = [
        (lambda perm: _permutation_reference(perm).T,
         _t("你的矩阵是转置（逆置换）：它把 X 的第 i 行送到了第 perm[i] 行，而不是从第 perm[i] 行取来。",
            "your matrix is the transpose (the inverse permutation): it sends row i of X to "
            "row perm[i] instead of fetching row perm[i].")),
    ]
    _with_diagnosis(
        lambda: check_function(fn, _permutation_reference, cases, name=name, hint=hint, lang=lang),
        fn, ([1, 2, 0],), slips, lang)


# ---------------------------------------------------------------- exercise 4: ALiBi

def check_alibi(fn, lang=None) -> None:
    """Check ``fn(positions, slope) -> B`` (n, n), the ALiBi penalty added to the scores.

    First the property the exercise is about: with the learner's matrix as a float mask, the
    attention weights of a sentence and of the same sentence shifted by 50 positions must be
    equal. Then six cases against the library: positions with gaps (so that positions, not row
    numbers, must be used), a shifted sentence, one word, float32 positions. Loops are refused and
    the library's position functions forbidden.
    """
    lang = get_language(lang)
    name = {"zh": "ALiBi 偏置", "en": "ALiBi bias"}
    hint = _t("B[i, j] 只取决于第 i、j 个词的位置之差有多大，距离越远罚得越多；"
              "用的是传入的 positions，不是行号。",
              "B[i, j] depends only on how far apart the positions of words i and j are, and the "
              "farther, the larger the penalty; use the positions passed in, not the row numbers.")
    rng = np.random.default_rng(5)
    q, k, v = rng.normal(size=(3, 5, 4))
    pos = np.array([0, 1, 3, 4, 7])
    label = _t("positions=[0, 1, 3, 4, 7] 与整体后移 50 的 [50, 51, 53, 54, 57]，slope=0.5",
               "positions=[0, 1, 3, 4, 7] and the same shifted by 50, [50, 51, 53, 54, 57], slope=0.5")
    weights = []
    for p in (pos, pos + 50):
        bias = run_learner(fn, p.copy(), 0.5, name=name, label=label, forbidden=forbidden.of("positional"),
                           hint=hint, lang=lang)
        try:
            bias = np.asarray(bias, dtype=np.float64)
            _, w = scaled_dot_product_attention(q, k, v, attn_mask=bias, return_weights=True)
        except (TypeError, ValueError) as exc:
            fail(name, label, _t(f"你的矩阵不能作为 attn_mask 使用：{exc}",
                                 f"your matrix cannot be used as attn_mask: {exc}"), hint=hint, lang=lang)
        weights.append(w)
    if not np.allclose(weights[0], weights[1], atol=1e-6):
        worst = float(np.abs(weights[0] - weights[1]).max())
        fail(name, label, _t(f"整句后移之后，注意力权重变了（最多差 {worst:.3g}，容差 1e-06）："
                             "偏置用到了绝对位置，而不只是位置之差",
                             f"shifting the whole sentence changed the attention weights (by up to "
                             f"{worst:.3g}, tolerance 1e-06): the bias uses absolute positions, not only "
                             "their differences"), hint=hint, lang=lang)
    cases = [
        Case(_t("positions=[0, 1, 2, 3]，slope=0.5", "positions=[0, 1, 2, 3], slope=0.5"),
             (np.arange(4), 0.5)),
        Case(_t("positions=[0, 1, 4, 9]（位置之间有空档），slope=1",
                "positions=[0, 1, 4, 9] (gaps between positions), slope=1"),
             (np.array([0, 1, 4, 9]), 1.0)),
        Case(_t("positions=[100, …, 104]（整句后移），slope=0.25",
                "positions=[100, ..., 104] (a shifted sentence), slope=0.25"),
             (np.arange(100, 105), 0.25)),
        Case(_t("positions=[3]（一个词），slope=2", "positions=[3] (one word), slope=2"),
             (np.array([3]), 2.0)),
        Case(_t("positions=[0, 2, 3, 8, 9, 10]，slope=0.125",
                "positions=[0, 2, 3, 8, 9, 10], slope=0.125"),
             (np.array([0, 2, 3, 8, 9, 10]), 0.125)),
        Case(_t("float32 的 positions=[0, 1.5, 4]，slope=0.5",
                "float32 positions=[0, 1.5, 4], slope=0.5"),
             (np.array([0.0, 1.5, 4.0], dtype=np.float32), 0.5)),
    ]
    slips = [
        (lambda p, s: -alibi_bias(p, slope=s),
         _t("符号反了：距离越远，分数应该被罚得越多（B 是负数），而不是奖励。",
            "the sign is flipped: distance must lower the scores (B is negative), not raise them.")),
        (lambda p, s: -s * (np.asarray(p)[:, None] - np.asarray(p)[None, :]),
         _t("用了带符号的位置差；这里的惩罚只看距离的大小，前后对称。",
            "you used the signed difference of positions; the penalty here depends only on the "
            "size of the distance, the same before and after.")),
        (lambda p, s: alibi_bias(np.arange(len(p)), slope=s),
         _t("用了行号 0, 1, 2…，而不是传入的 positions。",
            "you used the row numbers 0, 1, 2..., not the positions passed in.")),
        (lambda p, s: alibi_bias(p, slope=1.0),
         _t("没有乘上 slope。", "the slope is missing.")),
    ]
    _with_diagnosis(
        lambda: check_function(fn, lambda p, s: alibi_bias(p, slope=s), cases, name=name, hint=hint,
                               lang=lang, forbidden=forbidden.of("positional"), no_loops=True),
        fn, (np.array([0, 1, 4, 9]), 0.5), slips, lang)


# ---------------------------------------------------------------- exercise 5: RoPE

def _rope_wrong_way(x, positions):
    return apply_rotary(x, -np.asarray(positions))


def _rope_halves(x, positions):
    # the pairs (x_i, x_{i + D/2}) instead of (x_{2i}, x_{2i+1})
    x = np.asarray(x, dtype=np.float64)
    D = x.shape[-1]
    order = np.arange(D).reshape(2, D // 2).T.ravel()           # 0, D/2, 1, D/2+1, ...
    back = np.argsort(order)
    return apply_rotary(x[..., order], positions)[..., back]


def _rope_exponent_i(x, positions):
    x = np.asarray(x, dtype=np.float64)
    D = x.shape[-1]
    angles = np.asarray(positions)[:, None] * 10000.0 ** (-np.arange(D // 2) / D)[None, :]
    c, s = np.cos(angles), np.sin(angles)
    out = np.empty_like(x)
    out[..., 0::2] = x[..., 0::2] * c - x[..., 1::2] * s
    out[..., 1::2] = x[..., 0::2] * s + x[..., 1::2] * c
    return out


def check_rope(fn, lang=None) -> None:
    """Check ``fn(x, positions) -> (n, d_k)``: each pair of x's row turned by its position's angles.

    Six cases against the library: positions that do not start at 0, a single pair, far
    positions, float32, position 0 (nothing turns). The library's rotary encoding and shift matrix
    are forbidden (``frequencies`` and the sinusoidal table are allowed); loops are allowed. The
    tolerance follows the dtype of the answer and the size of the angles.
    """
    rng = np.random.default_rng(6)
    cases = [
        Case(_t("x 形状 (3, 4)，positions=[0, 1, 2]", "x of shape (3, 4), positions=[0, 1, 2]"),
             (rng.normal(size=(3, 4)), np.array([0, 1, 2]))),
        Case(_t("x 形状 (4, 8)，positions=[5, 6, 7, 8]（不从 0 开始）",
                "x of shape (4, 8), positions=[5, 6, 7, 8] (not starting at 0)"),
             (rng.normal(size=(4, 8)), np.array([5, 6, 7, 8]))),
        Case(_t("x 形状 (2, 2)，positions=[0, 3]（只有一对）",
                "x of shape (2, 2), positions=[0, 3] (a single pair)"),
             (rng.normal(size=(2, 2)), np.array([0, 3]))),
        Case(_t("x 形状 (5, 16)，positions=[0, 10, 100, 1000, 7]（很远的位置）",
                "x of shape (5, 16), positions=[0, 10, 100, 1000, 7] (far positions)"),
             (rng.normal(size=(5, 16)), np.array([0, 10, 100, 1000, 7]))),
        Case(_t("float32 的 x，形状 (4, 8)，positions=[1, 2, 3, 4]",
                "float32 x of shape (4, 8), positions=[1, 2, 3, 4]"),
             (rng.normal(size=(4, 8)).astype(np.float32), np.array([1, 2, 3, 4]))),
        Case(_t("x 形状 (1, 6)，positions=[0]（什么都不转）",
                "x of shape (1, 6), positions=[0] (nothing turns)"),
             (rng.normal(size=(1, 6)), np.array([0]))),
    ]
    name = {"zh": "旋转位置编码 RoPE", "en": "rotary encoding RoPE"}
    hint = _t("第 i 对是 x 的第 2i、2i+1 列，每一行按自己的位置转，角度里的 ω_i 和正弦编码的相同；"
              "旋转方向照练习里写的；别在算完第二个分量之前改写 x。",
              "pair i is columns 2i and 2i+1 of x, each row turned by the angle of its own position, "
              "with the ω_i of the sinusoidal encoding; turn in the direction the exercise gives; do "
              "not overwrite x before the second component is computed.")
    slips = [
        (_rope_wrong_way, _t("转反了方向：第一个分量是 a·cos − b·sin，第二个是 a·sin + b·cos。",
                             "it turns the wrong way: the first component is a·cos − b·sin, the "
                             "second a·sin + b·cos.")),
        (_rope_halves, _t("把 (x_i, x_{i+d_k/2}) 当成了一对；这里的一对是相邻的 (x_{2i}, x_{2i+1})。",
                          "you paired (x_i, x_{i+d_k/2}); here a pair is the neighbours "
                          "(x_{2i}, x_{2i+1}).")),
        (_rope_exponent_i, _t("指数写成了 i/d_k；应该是 2i/d_k，和正弦编码一样。",
                              "the exponent is i/d_k; it must be 2i/d_k, as in the sinusoidal "
                              "encoding.")),
        (lambda x, p: apply_rotary(x), _t("用了行号 0, 1, 2…，而不是传入的 positions。",
                                          "you used the row numbers 0, 1, 2..., not the positions "
                                          "passed in.")),
    ]

    def angles(case):
        x, positions = case.args
        return float(np.abs(positions).max()), float(np.abs(x).max())

    probe_x = np.random.default_rng(7).normal(size=(3, 6))
    _with_diagnosis(
        lambda: check_function(fn, apply_rotary, cases, name=name, hint=hint, lang=lang,
                               forbidden=forbidden.of("rotary"), tolerance=_angle_tolerance(angles)),
        fn, (probe_x, np.array([2, 5, 9])), slips, lang)


from .fresh import fresh_on_call  # noqa: E402 - last, once the module is complete

fresh_on_call(__name__)
