"""Notebook 05 (positional encoding): its exercise checks, its widget, its solutions' properties.

For every check (the solution, the stub and the language: tests/test_every_check.py): it passes on
other correct answers (float32, lists, einsum, loops where allowed), lets the stub's NotImplementedError
through, fails on every classic mistake, and fails when the answer is or calls a forbidden
library function.
"""


import matplotlib
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from matplotlib import pyplot as plt

from attention_course import (
    alibi_bias,
    apply_rotary,
    position_shift_matrix,
    project_qkv,
    scaled_dot_product_attention,
    sinusoidal_positional_encoding,
)
from attention_course.checks import CheckFailed
from attention_course.checks import nb05 as checks
from attention_course.positional import frequencies
from attention_course.widgets import nb05 as widgets
from notebook_tools import failure, load_solutions

NAME = "05_positional_encoding.ipynb"


@pytest.fixture(scope="module", params=["en", "zh"])
def solutions(request):
    return load_solutions(NAME, request.param)


# --------------------------------------------------------------------- exercise 1: the encoding

def _pe(P, D, base, *, swap=False, exponent_i=False, start=0, dtype=np.float64):
    """A hand-written encoding with one of the usual slips switched on."""
    i = np.arange(D // 2, dtype=dtype)
    omega = (base ** (-(i if exponent_i else 2 * i) / D)).astype(dtype)
    angles = np.arange(start, start + P, dtype=dtype)[:, None] * omega[None, :]      # (P, D/2)
    first, second = (np.cos, np.sin) if swap else (np.sin, np.cos)
    pe = np.empty((P, D), dtype)
    pe[:, 0::2], pe[:, 1::2] = first(angles), second(angles)
    return pe


def pe_float32(P, D, base=10000.0):
    return _pe(P, D, base, dtype=np.float32)          # every step in float32


def pe_exp_log(P, D, base=10000.0):
    omega = np.exp(-np.arange(0, D, 2) * np.log(base) / D)          # another formula for ω
    angles = np.outer(np.arange(P), omega)
    return np.stack([np.sin(angles), np.cos(angles)], axis=-1).reshape(P, D)


def pe_with_loop(P, D, base=10000.0):
    out = np.zeros((P, D))
    for pos in range(P):
        out[pos] = _pe(1, D, base, start=pos)[0]
    return out


def pe_calls_library(P, D, base=10000.0):
    return sinusoidal_positional_encoding(P, D, base) + 0.0


def pe_uses_frequencies(P, D, base=10000.0):
    angles = np.arange(P)[:, None] * frequencies(D, base)[None, :]
    pe = np.empty((P, D))
    pe[:, 0::2], pe[:, 1::2] = np.sin(angles), np.cos(angles)
    return pe


@pytest.mark.parametrize("answer", [pe_float32, pe_exp_log])
def test_encoding_check_passes_other_correct_answers(answer, capsys):
    checks.check_positional_encoding(answer, lang="en")
    assert "all 7 cases pass" in capsys.readouterr().out


def test_a_float32_answer_really_is_float32_and_off_by_more_than_the_old_tolerance():
    got, expected = pe_float32(2000, 32), sinusoidal_positional_encoding(2000, 32)
    assert got.dtype == np.float32 and np.abs(got - expected).max() > 1e-6


@pytest.mark.parametrize("wrong, fragments", [
    (lambda P, D, base=10000.0: _pe(P, D, base, swap=True), ["P=4, d_model=4", "sin and cos are swapped"]),
    (lambda P, D, base=10000.0: _pe(P, D, base, exponent_i=True), ["P=4, d_model=4", "i/d_model"]),
    (lambda P, D, base=10000.0: _pe(P, D, base, start=1), ["P=4, d_model=4", "positions start at 1"]),
    (lambda P, D, base=10000.0: _pe(P, D, 10000.0), ["base=100", "expected"]),          # ignores base
    (lambda P, D, base=10000.0: np.concatenate([_pe(P, D, base)[:, 0::2], _pe(P, D, base)[:, 1::2]], 1),
     ["interleave"]),
    (lambda P, D, base=10000.0: _pe(P, D, base).T, ["P=4, d_model=4"]),           # transposed: (D, P)
    (pe_with_loop, ["for loop"]),
    (sinusoidal_positional_encoding, ["sinusoidal_positional_encoding itself"]),
    (pe_calls_library, ["calls sinusoidal_positional_encoding"]),
    (pe_uses_frequencies, ["calls frequencies"]),
])
def test_encoding_check_catches_typical_mistakes(wrong, fragments):
    message = failure(checks.check_positional_encoding, wrong)
    for fragment in fragments:
        assert fragment in message


def test_encoding_check_rejects_a_float32_answer_that_is_wrong_by_a_little():
    # one position off in float32 is a real mistake, not rounding
    with pytest.raises(CheckFailed, match="P=4, d_model=4"):
        checks.check_positional_encoding(lambda P, D, base=10000.0: _pe(P, D, base, start=1,
                                                                         dtype=np.float32), lang="en")


def test_encoding_check_speaks_chinese():
    message = failure(checks.check_positional_encoding,
                      lambda P, D, base=10000.0: _pe(P, D, base, swap=True), lang="zh")
    assert "正弦位置编码 未通过" in message and "sin 和 cos 放反了" in message


def test_encoding_check_reports_a_crash_with_its_case():
    def breaks_on_empty(P, D, base=10000.0):
        if P == 0:
            raise ValueError("no positions")
        return _pe(P, D, base)

    with pytest.raises(CheckFailed, match=r"P=0, d_model=8 \(empty sequence\).*ValueError"):
        checks.check_positional_encoding(breaks_on_empty, lang="en")


# --------------------------------------------------------------------- exercise 2: shift matrix

def _raw_angle(k, D, base=10000.0):
    M = np.zeros((D, D))
    for i in range(D // 2):
        M[2 * i:2 * i + 2, 2 * i:2 * i + 2] = [[np.cos(k), -np.sin(k)], [np.sin(k), np.cos(k)]]
    return M


def shift_vectorised(k, D, base=10000.0):
    c, s = np.cos(k * frequencies(D, base)), np.sin(k * frequencies(D, base))   # frequencies is allowed
    M = np.zeros((D, D), np.float32)
    idx = np.arange(0, D, 2)
    M[idx, idx], M[idx, idx + 1], M[idx + 1, idx], M[idx + 1, idx + 1] = c, -s, s, c
    return M                                              # float32, no loop


def shift_by_kron(k, D, base=10000.0):
    blocks = [np.array([[np.cos(k * w), -np.sin(k * w)], [np.sin(k * w), np.cos(k * w)]])
              for w in base ** (-np.arange(0, D, 2) / D)]
    out = np.zeros((D, D))
    for i, b in enumerate(blocks):
        out += np.kron(np.eye(D // 2)[i:i + 1].T @ np.eye(D // 2)[i:i + 1], b)
    return out.tolist()


@pytest.mark.parametrize("answer", [shift_vectorised, shift_by_kron])
def test_shift_check_passes_other_correct_answers(answer, capsys):
    checks.check_shift_matrix(answer, lang="en")
    assert "all 6 cases pass" in capsys.readouterr().out


@pytest.mark.parametrize("wrong, fragments", [
    (lambda k, D, base=10000.0: np.asarray(shift_vectorised(k, D, base)).T, ["k=1, d_model=4", "wrong way"]),
    (_raw_angle, ["k=1, d_model=4", "k·ω_i"]),
    (lambda k, D, base=10000.0: shift_vectorised(abs(k), D, base), ["k=-3, d_model=8"]),
    (lambda k, D, base=10000.0: shift_vectorised(k, D, 10000.0), ["base=100"]),
    (lambda k, D, base=10000.0: shift_vectorised(k, D, base)[::-1], ["k=1, d_model=4"]),      # rows reversed
    (position_shift_matrix, ["position_shift_matrix itself"]),
    (lambda k, D, base=10000.0: apply_rotary(np.eye(D), [-k] * D, base), ["calls apply_rotary"]),
])
def test_shift_check_catches_typical_mistakes(wrong, fragments):
    message = failure(checks.check_shift_matrix, wrong)
    for fragment in fragments:
        assert fragment in message


def test_shift_check_speaks_chinese():
    message = failure(checks.check_shift_matrix,
                      lambda k, D, base=10000.0: np.asarray(shift_vectorised(k, D, base)).T, lang="zh")
    assert "旋转方向反了" in message and "k=1, d_model=4" in message


# --------------------------------------------------------------------- exercise 3: permutation

def perm_by_loop(perm):
    P = [[0] * len(perm) for _ in perm]
    for i, j in enumerate(perm):
        P[i][j] = 1
    return P                                              # a list of ints


def perm_by_comparison(perm):
    perm = np.asarray(perm)
    return (np.arange(len(perm))[None, :] == perm[:, None]).astype(np.float32)


@pytest.mark.parametrize("answer", [perm_by_loop, perm_by_comparison])
def test_permutation_check_passes_other_correct_answers(answer, capsys):
    checks.check_permutation_matrix(answer, lang="en")
    assert "all 6 cases pass" in capsys.readouterr().out


def test_permutation_check_catches_the_transposed_matrix():
    # [0, 1, 2] and [2, 1, 0] are their own inverses, so the cycle is the first case to fail.
    message = failure(checks.check_permutation_matrix, lambda perm: np.eye(len(perm))[:, perm])
    assert "perm=[1, 2, 0] (a cycle" in message and "inverse permutation" in message


def test_permutation_check_catches_a_matrix_of_the_wrong_size():
    with pytest.raises(CheckFailed, match=r"perm=\[0, 1, 2\].*shape \(4, 4\)"):
        checks.check_permutation_matrix(lambda perm: np.eye(len(perm) + 1), lang="en")


def test_permutation_check_catches_the_identity():
    message = failure(checks.check_permutation_matrix, lambda perm: np.eye(len(perm)))
    assert "perm=[2, 1, 0]" in message


def test_permutation_check_speaks_chinese():
    message = failure(checks.check_permutation_matrix, lambda perm: np.eye(len(perm))[:, perm], lang="zh")
    assert "perm=[1, 2, 0]（轮换" in message and "逆置换" in message


# --------------------------------------------------------------------- exercise 4: ALiBi

def alibi_einsum_free(positions, slope):
    p = np.asarray(positions, dtype=np.float32)
    d = np.subtract.outer(p, p)
    return (-np.float32(slope) * np.sqrt(d * d)).tolist()    # float32 values, as a list


def alibi_with_loop(positions, slope):
    n = len(positions)
    B = np.zeros((n, n))
    for i in range(n):
        B[i] = -slope * np.abs(np.asarray(positions) - positions[i])
    return B


@pytest.mark.parametrize("answer", [alibi_einsum_free])
def test_alibi_check_passes_other_correct_answers(answer, capsys):
    checks.check_alibi(answer, lang="en")
    assert "all 6 cases pass" in capsys.readouterr().out


def alibi_normalised(p, s):
    # distance divided by the largest position: depends on where the sentence sits
    p = np.asarray(p, float)
    return -s * np.abs(p[:, None] - p[None, :]) / max(1.0, p.max())


def _rows(positions, slope):
    n = len(positions)
    return -slope * np.abs(np.arange(n)[:, None] - np.arange(n)[None, :]).astype(float)


@pytest.mark.parametrize("wrong, fragments", [
    (lambda p, s: slope_sign(p, s), ["sign is flipped"]),
    (lambda p, s: -s * np.subtract.outer(np.asarray(p, float), np.asarray(p, float)), ["signed difference"]),
    (_rows, ["row numbers"]),
    (lambda p, s: slope_sign(p, 1.0) * -1.0, ["slope is missing"]),
    (lambda p, s: -s * np.subtract.outer(np.asarray(p, float), np.asarray(p, float)) ** 2,
     ["positions=[0, 1, 2, 3]"]),                                       # squared distance
    (lambda p, s: -s * np.abs(np.asarray(p, float)), ["shape (4,), expected (4, 4)"]),   # one row only
    (alibi_normalised, ["shifting the whole sentence changed the attention weights"]),
    (alibi_with_loop, ["for loop"]),
    (alibi_bias, ["alibi_bias itself"]),
    (lambda p, s: alibi_bias(p, slope=s), ["calls alibi_bias"]),
])
def test_alibi_check_catches_typical_mistakes(wrong, fragments):
    message = failure(checks.check_alibi, wrong)
    for fragment in fragments:
        assert fragment in message


def slope_sign(p, s):
    p = np.asarray(p, float)
    return s * np.abs(p[:, None] - p[None, :])


def test_alibi_check_speaks_chinese():
    message = failure(checks.check_alibi, slope_sign, lang="zh")
    assert "ALiBi 偏置 未通过" in message and "符号反了" in message


# --------------------------------------------------------------------- exercise 5: RoPE

def rope_with_loop(x, positions):
    x = np.asarray(x)
    out = np.array(x, copy=True)
    D = x.shape[-1]
    for j, pos in enumerate(positions):
        for i in range(D // 2):
            theta = pos * 10000.0 ** (-2 * i / D)
            a, b = x[j, 2 * i], x[j, 2 * i + 1]
            c, s = np.cos(theta), np.sin(theta)
            out[j, 2 * i], out[j, 2 * i + 1] = a * c - b * s, a * s + b * c
    return out


def rope_from_the_sinusoid_table(x, positions):
    # the sinusoidal table holds the sin and cos of the same angles: allowed, and correct
    x = np.asarray(x)
    table = sinusoidal_positional_encoding(int(np.max(positions)) + 1, x.shape[-1])[np.asarray(positions)]
    sin, cos = table[:, 0::2], table[:, 1::2]
    pairs = x.reshape(len(x), -1, 2)                                    # (n, d_k/2, 2)
    first = np.einsum("npj,npj->np", pairs, np.stack([cos, -sin], -1))
    second = np.einsum("npj,npj->np", pairs, np.stack([sin, cos], -1))
    return np.stack([first, second], -1).reshape(x.shape)


def rope_complex(x, positions):
    x = np.asarray(x)
    D = x.shape[-1]
    z = x[:, 0::2] + 1j * x[:, 1::2]
    z = z * np.exp(1j * np.asarray(positions)[:, None] * frequencies(D)[None, :])
    out = np.empty_like(x)
    out[:, 0::2], out[:, 1::2] = z.real, z.imag
    return out


def rope_in_place(x, positions):
    x = np.array(x, copy=True)
    D = x.shape[-1]
    theta = np.asarray(positions)[:, None] * frequencies(D)[None, :]
    x[:, 0::2] = x[:, 0::2] * np.cos(theta) - x[:, 1::2] * np.sin(theta)
    x[:, 1::2] = x[:, 0::2] * np.sin(theta) + x[:, 1::2] * np.cos(theta)     # uses the new even half
    return x


@pytest.mark.parametrize("answer", [rope_with_loop, rope_from_the_sinusoid_table, rope_complex])
def test_rope_check_passes_other_correct_answers(answer, capsys):
    checks.check_rope(answer, lang="en")
    assert "all 6 cases pass" in capsys.readouterr().out


@pytest.mark.parametrize("wrong, fragments", [
    (lambda x, p: np.array(apply_rotary(x, -np.asarray(p))) + 0, ["calls apply_rotary"]),
    (lambda x, p: rope_complex(x, -np.asarray(p)), ["turns the wrong way"]),
    (lambda x, p: rope_complex(x, np.arange(len(p))), ["row numbers"]),
    (lambda x, p: rope_halves(x, p), ["x_{2i}, x_{2i+1}"]),
    (lambda x, p: rope_exponent_i(x, p), ["2i/d_k"]),
    (rope_in_place, ["positions=[0, 1, 2]"]),
    (apply_rotary, ["apply_rotary itself"]),
    (lambda x, p: x @ position_shift_matrix(-int(p[0]), x.shape[-1]), ["calls position_shift_matrix"]),
])
def test_rope_check_catches_typical_mistakes(wrong, fragments):
    message = failure(checks.check_rope, wrong)
    for fragment in fragments:
        assert fragment in message


def rope_halves(x, positions):
    x = np.asarray(x)
    D = x.shape[-1]
    a, b = x[:, :D // 2], x[:, D // 2:]
    theta = np.asarray(positions)[:, None] * frequencies(D)[None, :]
    return np.concatenate([a * np.cos(theta) - b * np.sin(theta), a * np.sin(theta) + b * np.cos(theta)], 1)


def rope_exponent_i(x, positions):
    x = np.asarray(x)
    D = x.shape[-1]
    theta = np.asarray(positions)[:, None] * 10000.0 ** (-np.arange(D // 2) / D)[None, :]
    out = np.empty_like(x)
    out[:, 0::2] = x[:, 0::2] * np.cos(theta) - x[:, 1::2] * np.sin(theta)
    out[:, 1::2] = x[:, 0::2] * np.sin(theta) + x[:, 1::2] * np.cos(theta)
    return out


def test_rope_check_speaks_chinese():
    message = failure(checks.check_rope, lambda x, p: rope_complex(x, -np.asarray(p)), lang="zh")
    assert "旋转位置编码 RoPE 未通过" in message and "转反了方向" in message


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2000), st.integers(-50, 50), st.integers(1, 8).map(lambda h: 2 * h),
       st.integers(0, 2**16))
def test_rope_solution_scores_depend_only_on_the_offset(solutions, m, offset, D, seed):
    rng = np.random.default_rng(seed)
    q, k = rng.normal(size=(2, 1, D))
    rope = solutions["rope"]
    base_score = (rope(q, [0]) @ rope(k, [offset + 60]).T).item()
    moved = (rope(q, [m]) @ rope(k, [m + offset + 60]).T).item()
    assert moved == pytest.approx(base_score, abs=1e-8)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(-100, 100), min_size=1, max_size=8), st.integers(-500, 500), st.floats(0.01, 3))
def test_alibi_solution_weights_ignore_a_shift(solutions, positions, shift, slope):
    rng = np.random.default_rng(len(positions))
    n = len(positions)
    q, k, v = rng.normal(size=(3, n, 4))
    p = np.array(positions)
    _, w0 = scaled_dot_product_attention(q, k, v, attn_mask=solutions["alibi"](p, slope), return_weights=True)
    _, w1 = scaled_dot_product_attention(q, k, v, attn_mask=solutions["alibi"](p + shift, slope),
                                         return_weights=True)
    assert np.allclose(w0, w1)
    assert np.allclose(solutions["alibi"](p, slope), alibi_bias(p, slope=slope))


# --------------------------------------------------------------------- the solutions' properties

@settings(max_examples=40, deadline=None)
@given(st.integers(1, 8).flatmap(lambda n: st.permutations(range(n))), st.integers(0, 2**16))
def test_permutation_matrix_reorders_rows_and_attention_follows(solutions, perm, seed):
    rng = np.random.default_rng(seed)
    n, d = len(perm), 4
    X = rng.normal(size=(n, d))
    W_q, W_k, W_v = rng.normal(size=(3, d, d))
    P = solutions["permutation_matrix"](perm)
    assert np.array_equal(P @ X, X[list(perm)])

    def attend(x):
        return scaled_dot_product_attention(*project_qkv(x, W_q, W_k, W_v))

    assert np.allclose(attend(P @ X), P @ attend(X))


@settings(max_examples=40, deadline=None)
@given(st.integers(-60, 60), st.integers(1, 16).map(lambda h: 2 * h))
def test_shift_matrix_moves_every_position_by_k(solutions, k, D):
    pe = sinusoidal_positional_encoding(200, D)
    M = solutions["shift_matrix"](k, D)
    src = np.arange(max(0, -k), min(200, 200 - k))
    assert np.allclose(pe[src] @ M, pe[src + k], atol=1e-10)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 300), st.integers(1, 32).map(lambda h: 2 * h), st.sampled_from([100.0, 1e4]))
def test_encoding_solution_matches_the_library(solutions, P, D, base):
    got = solutions["positional_encoding"](P, D, base=base)
    assert got.shape == (P, D)
    assert np.allclose(got, sinusoidal_positional_encoding(P, D, base))


# --------------------------------------------------------------------- the widget

def test_widget_moves_the_point_with_the_position_slider():
    ex = widgets.PositionExplorer(d_model=64, max_position=100, position=7, pair=0, lang="en")
    before = ex.redraws
    ex.controls["position"].value = 5
    assert ex.redraws == before + 1
    data = ex.data
    assert data["position"] == 5 and data["angle"] == pytest.approx(5.0)
    assert np.allclose(data["point"], [np.sin(5.0), np.cos(5.0)])
    assert np.allclose(data["point"], sinusoidal_positional_encoding(6, 64)[5, 0:2])
    assert data["trail"].shape == (6, 2)
    assert data["angle_wrapped"] == pytest.approx(5.0)


def test_widget_pair_slider_changes_the_frequency():
    ex = widgets.PositionExplorer(d_model=64, position=10, pair=0, lang="en")
    fast = ex.data["omega"]
    ex.controls["pair"].value = 31
    assert ex.data["dims"] == (62, 63)
    assert ex.data["omega"] == pytest.approx(frequencies(64)[31])
    assert ex.data["omega"] < fast / 1000                          # a very slow hand
    assert ex.data["wavelength"] == pytest.approx(2 * np.pi * 10000 ** (62 / 64))
    assert np.allclose(ex.data["point"], sinusoidal_positional_encoding(11, 64)[10, 62:64])
    assert ex.controls["pair"].max == 31


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 100), st.integers(0, 15))
def test_widget_point_is_the_encoding_on_the_unit_circle(position, pair):
    ex = _shared_explorer()
    data = ex.compute(position=position, pair=pair)
    a, b = data["dims"]
    row = sinusoidal_positional_encoding(position + 1, 32)[position]          # (32,)
    assert np.allclose(data["point"], row[a:b + 1])
    assert np.linalg.norm(data["point"]) == pytest.approx(1.0)
    assert 0.0 <= data["angle_wrapped"] < 2 * np.pi
    assert np.allclose(data["trail"][-1], data["point"])


_EXPLORER = {}


def _shared_explorer():
    if "ex" not in _EXPLORER:
        _EXPLORER["ex"] = widgets.PositionExplorer(d_model=32, lang="en")
    return _EXPLORER["ex"]


@pytest.mark.parametrize("lang, word", [("en", "position"), ("zh", "位置")])
def test_widget_draws_in_both_languages(lang, word):
    ex = widgets.PositionExplorer(d_model=16, position=4, pair=2, lang=lang)
    assert word in ex.controls["position"].description
    fig = ex.figure()
    try:
        assert isinstance(fig, matplotlib.figure.Figure)
        assert len(fig.axes) == 2
        circle, waves = fig.axes
        assert len(waves.get_lines()) >= 2                    # the sine and the cosine
        assert "PE[pos, 4]" in circle.get_xlabel() and "PE[pos, 5]" in circle.get_ylabel()
    finally:
        plt.close(fig)


@pytest.mark.parametrize("kwargs", [{"d_model": 7}, {"lang": "fr"}, {"max_position": 0}])
def test_widget_refuses_bad_settings(kwargs):
    with pytest.raises(ValueError):
        widgets.PositionExplorer(**kwargs)
