"""Checks for the exercises of notebook 05 (positional encoding).

Each check compares the learner's function with the library on several inputs. When it fails,
it also tries the learner's answer against the slips learners most often make (sin and cos
swapped, the exponent i/d for 2i/d, a rotation turned the wrong way, a permutation read
backwards) and, if one of them explains the result, says so.
"""

from __future__ import annotations

import numpy as np

from ..positional import position_shift_matrix, sinusoidal_positional_encoding
from ._core import Case, CheckFailed, check_function, get_language


def _t(zh: str, en: str) -> dict:
    return {"zh": zh, "en": en}


def _same(got, expected) -> bool:
    try:
        got = np.asarray(got, dtype=float)
    except (TypeError, ValueError):
        return False
    return got.shape == expected.shape and bool(np.allclose(got, expected, atol=1e-8))


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
            with np.errstate(all="ignore"):
                got = learner(*probe)
        except Exception:  # the first failure already says what went wrong
            raise failure from None
        for wrong, text in slips:
            if _same(got, wrong(*probe)):
                label = {"zh": "\n可能的原因：", "en": "\nLikely cause: "}[lang]
                raise CheckFailed(f"{failure}{label}{text[lang]}") from None
        raise failure from None


def _omega(d_model, base):
    return base ** (-np.arange(0, d_model, 2) / d_model)


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

    Examples
    --------
    >>> check_positional_encoding(sinusoidal_positional_encoding, lang="en")
    ✓ sinusoidal encoding: all 7 cases pass
    """
    cases = [
        Case(_t("P=4, d_model=4",
                "P=4, d_model=4"),
             (4, 4)),
        Case(_t("P=50, d_model=16",
                "P=50, d_model=16"),
             (50, 16)),
        Case(_t("P=1, d_model=2（只有位置 0 和一对维度）",
                "P=1, d_model=2 (position 0 only, one pair)"),
             (1, 2)),
        Case(_t("P=7, d_model=6（维度对的个数是奇数）",
                "P=7, d_model=6 (an odd number of pairs)"),
             (7, 6)),
        Case(_t("P=10, d_model=8, base=100",
                "P=10, d_model=8, base=100"),
             (10, 8), {"base": 100.0}),
        Case(_t("P=0, d_model=8（空序列）",
                "P=0, d_model=8 (empty sequence)"),
             (0, 8)),
        Case(_t("P=2000, d_model=32（很远的位置）",
                "P=2000, d_model=32 (far positions)"),
             (2000, 32)),
    ]
    name = {"zh": "正弦位置编码", "en": "sinusoidal encoding"}
    hint = {"zh": "PE[pos, 2i] = sin(pos·ω_i)，PE[pos, 2i+1] = cos(pos·ω_i)，"
                  "ω_i = base^(-2i/d_model)；pos 从 0 开始；返回形状 (P, d_model)。",
            "en": "PE[pos, 2i] = sin(pos·ω_i), PE[pos, 2i+1] = cos(pos·ω_i) with "
                  "ω_i = base^(-2i/d_model); pos starts at 0; return shape (P, d_model)."}
    slips = [
        (_pe_swapped, {"zh": "sin 和 cos 放反了：偶数列（0, 2, 4…）是 sin，奇数列是 cos。",
                       "en": "sin and cos are swapped: even columns (0, 2, 4...) hold sin, odd "
                             "columns cos."}),
        (_pe_exponent_i, {"zh": "指数写成了 i/d_model；应该是 2i/d_model（i 是维度对的编号）。",
                          "en": "the exponent is i/d_model; it must be 2i/d_model (i numbers the "
                                "pairs)."}),
        (_pe_from_one, _t("位置从 1 开始数了；第一行应是位置 0：[0, 1, 0, 1, …]。",
                          "positions start at 1; the first row is position 0: "
                          "[0, 1, 0, 1, ...].")),
        (_pe_halves, _t("sin 全放在前半、cos 全放在后半了；"
                        "这里要求两者交错：列 2i 是 sin，列 2i+1 是 cos。",
                        "all sines first and all cosines after; here they interleave: column "
                        "2i is sin, column 2i+1 cos.")),
    ]
    _with_diagnosis(
        lambda: check_function(fn, sinusoidal_positional_encoding, cases, name=name, hint=hint,
                               lang=lang, rtol=1e-6, atol=1e-8),
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

    Examples
    --------
    >>> check_shift_matrix(position_shift_matrix, lang="en")
    ✓ shift matrix M_k: all 6 cases pass
    """
    cases = [
        Case(_t("k=1, d_model=4",
                "k=1, d_model=4"),
             (1, 4)),
        Case(_t("k=0, d_model=4（不移动：应是单位矩阵）",
                "k=0, d_model=4 (no shift: the identity)"),
             (0, 4)),
        Case(_t("k=5, d_model=8",
                "k=5, d_model=8"),
             (5, 8)),
        Case(_t("k=-3, d_model=8（往回移）",
                "k=-3, d_model=8 (a shift backwards)"),
             (-3, 8)),
        Case(_t("k=7, d_model=2（只有一对）",
                "k=7, d_model=2 (a single pair)"),
             (7, 2)),
        Case(_t("k=12, d_model=16, base=100",
                "k=12, d_model=16, base=100"),
             (12, 16), {"base": 100.0}),
    ]
    name = {"zh": "平移矩阵 M_k", "en": "shift matrix M_k"}
    hint = {"zh": "每个维度对一个 2×2 块，放在对角线上第 2i、2i+1 行和列："
                  "[[cos(kω_i), -sin(kω_i)], [sin(kω_i), cos(kω_i)]]；其余为 0。"
                  "行向量约定：[sin a, cos a] @ 块 = [sin(a+kω), cos(a+kω)]。",
            "en": "one 2×2 block per pair, on the diagonal at rows/columns 2i, 2i+1: "
                  "[[cos(kω_i), -sin(kω_i)], [sin(kω_i), cos(kω_i)]]; zeros elsewhere. "
                  "Row-vector convention: [sin a, cos a] @ block = [sin(a+kω), cos(a+kω)]."}
    slips = [
        (_shift_transposed, {"zh": "旋转方向反了（你的矩阵是正确答案的转置，也就是 M_{-k}）："
                                   "它把编码往回移了 k 个位置。",
                             "en": "the rotation turns the wrong way (your matrix is the "
                                   "transpose of the answer, i.e. M_{-k}): it moves the encoding "
                                   "k positions back."}),
        (_shift_raw_angle, {"zh": "每一对都转了同一个角度 k；第 i 对应该转 k·ω_i。",
                            "en": "every pair is turned by the angle k; pair i must turn by "
                                  "k·ω_i."}),
    ]
    _with_diagnosis(
        lambda: check_function(fn, position_shift_matrix, cases, name=name, hint=hint, lang=lang,
                               rtol=1e-6, atol=1e-9),
        fn, (3, 8), slips, lang)


# ---------------------------------------------------------------- exercise 3: a permutation

def _permutation_reference(perm):
    perm = np.asarray(perm, dtype=int)
    return np.eye(perm.size)[perm]                     # row i is e_{perm[i]}


def check_permutation_matrix(fn, lang=None) -> None:
    """Check ``fn(perm) -> P`` (n, n) with ``P @ X == X[perm]`` for every X with n rows.

    Examples
    --------
    >>> check_permutation_matrix(lambda perm: np.eye(len(perm))[perm], lang="en")
    ✓ permutation matrix: all 6 cases pass
    """
    cases = [
        Case(_t("perm=[0, 1, 2]（不动）",
                "perm=[0, 1, 2] (nothing moves)"),
             ([0, 1, 2],)),
        Case(_t("perm=[2, 1, 0]（狗咬人 → 人咬狗）",
                "perm=[2, 1, 0] (dog bites man → man bites dog)"),
             ([2, 1, 0],)),
        Case(_t("perm=[1, 2, 0]（轮换，不是自己的逆）",
                "perm=[1, 2, 0] (a cycle: not its own inverse)"),
             ([1, 2, 0],)),
        Case(_t("perm=[3, 0, 4, 1, 2]",
                "perm=[3, 0, 4, 1, 2]"),
             ([3, 0, 4, 1, 2],)),
        Case(_t("perm=[0]（一个词）",
                "perm=[0] (one word)"),
             ([0],)),
        Case(_t("perm=np.array([1, 0, 3, 2])（NumPy 数组）",
                "perm=np.array([1, 0, 3, 2]) (a NumPy array)"),
             (np.array([1, 0, 3, 2]),)),
    ]
    name = {"zh": "置换矩阵", "en": "permutation matrix"}
    hint = _t("P @ X 的第 i 行要等于 X 的第 perm[i] 行，"
              "所以 P 的第 i 行在第 perm[i] 列是 1，其余是 0。",
              "row i of P @ X must be row perm[i] of X, so row i of P has its 1 in column "
              "perm[i] and zeros elsewhere.")
    slips = [
        (lambda perm: _permutation_reference(perm).T,
         _t("你的矩阵是转置（逆置换）：它把 X 的第 i 行送到了第 perm[i] 行，"
            "而不是从第 perm[i] 行取来。",
            "your matrix is the transpose (the inverse permutation): it sends row i of X to "
            "row perm[i] instead of fetching row perm[i].")),
    ]
    _with_diagnosis(
        lambda: check_function(lambda perm: np.asarray(fn(perm), dtype=float),
                               _permutation_reference, cases, name=name, hint=hint, lang=lang),
        fn, ([1, 2, 0],), slips, lang)
