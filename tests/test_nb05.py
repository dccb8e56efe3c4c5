"""Notebook 05 (positional encoding): its exercise checks, its widget, its solutions' properties."""

import matplotlib
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from matplotlib import pyplot as plt

from attention_course import (
    position_shift_matrix,
    project_qkv,
    scaled_dot_product_attention,
    sinusoidal_positional_encoding,
)
from attention_course.checks import CheckFailed
from attention_course.checks import nb05 as checks
from attention_course.positional import frequencies
from attention_course.widgets import nb05 as widgets
from notebook_tools import load_solutions, stub

NAME = "05_positional_encoding.ipynb"


@pytest.fixture(scope="module")
def solutions():
    return load_solutions(NAME)


def test_the_notebook_defines_the_three_exercise_functions(solutions):
    assert {"positional_encoding", "shift_matrix", "permutation_matrix"} <= set(solutions)


# --------------------------------------------------------------------- exercise 1: the encoding

def _pe(P, D, base, *, swap=False, exponent_i=False, start=0):
    """A hand-written encoding with one of the usual slips switched on."""
    i = np.arange(D // 2)
    omega = base ** (-(i if exponent_i else 2 * i) / D)
    angles = np.arange(start, start + P)[:, None] * omega[None, :]      # (P, D/2)
    first, second = (np.cos, np.sin) if swap else (np.sin, np.cos)
    pe = np.empty((P, D))
    pe[:, 0::2], pe[:, 1::2] = first(angles), second(angles)
    return pe


def test_encoding_check_passes_the_solution(solutions, capsys):
    checks.check_positional_encoding(solutions["positional_encoding"], lang="en")
    assert "all 7 cases pass" in capsys.readouterr().out


def test_encoding_check_lets_the_stub_fail():
    with pytest.raises(NotImplementedError):
        checks.check_positional_encoding(stub, lang="en")


@pytest.mark.parametrize("wrong, fragments", [
    (lambda P, D, base=10000.0: _pe(P, D, base, swap=True),
     ["P=4, d_model=4", "sin and cos are swapped"]),
    (lambda P, D, base=10000.0: _pe(P, D, base, exponent_i=True),
     ["P=4, d_model=4", "i/d_model"]),
    (lambda P, D, base=10000.0: _pe(P, D, base, start=1),
     ["P=4, d_model=4", "positions start at 1"]),
    (lambda P, D, base=10000.0: _pe(P, D, 10000.0),            # ignores base
     ["base=100", "expected"]),
])
def test_encoding_check_catches_typical_mistakes(wrong, fragments):
    with pytest.raises(CheckFailed) as err:
        checks.check_positional_encoding(wrong, lang="en")
    for fragment in fragments:
        assert fragment in str(err.value)


def test_encoding_check_speaks_chinese():
    with pytest.raises(CheckFailed) as err:
        checks.check_positional_encoding(
            lambda P, D, base=10000.0: _pe(P, D, base, swap=True), lang="zh")
    message = str(err.value)
    assert "正弦位置编码 未通过" in message and "sin 和 cos 放反了" in message


def test_encoding_check_reports_a_crash_with_its_case():
    def breaks_on_empty(P, D, base=10000.0):
        if P == 0:
            raise ValueError("no positions")
        return sinusoidal_positional_encoding(P, D, base)

    with pytest.raises(CheckFailed, match=r"P=0, d_model=8 \(empty sequence\).*ValueError"):
        checks.check_positional_encoding(breaks_on_empty, lang="en")


# --------------------------------------------------------------------- exercise 2: shift matrix

def test_shift_check_passes_the_solution(solutions, capsys):
    checks.check_shift_matrix(solutions["shift_matrix"], lang="en")
    assert "all 6 cases pass" in capsys.readouterr().out


def test_shift_check_lets_the_stub_fail():
    with pytest.raises(NotImplementedError):
        checks.check_shift_matrix(stub, lang="en")


def _raw_angle(k, D, base=10000.0):
    M = np.zeros((D, D))
    for i in range(D // 2):
        M[2 * i:2 * i + 2, 2 * i:2 * i + 2] = [[np.cos(k), -np.sin(k)], [np.sin(k), np.cos(k)]]
    return M


@pytest.mark.parametrize("wrong, fragments", [
    (lambda k, D, base=10000.0: position_shift_matrix(k, D, base).T,     # turns the wrong way
     ["k=1, d_model=4", "wrong way"]),
    (_raw_angle, ["k=1, d_model=4", "k·ω_i"]),
    (lambda k, D, base=10000.0: position_shift_matrix(abs(k), D, base),  # forgets the sign
     ["k=-3, d_model=8"]),
])
def test_shift_check_catches_typical_mistakes(wrong, fragments):
    with pytest.raises(CheckFailed) as err:
        checks.check_shift_matrix(wrong, lang="en")
    for fragment in fragments:
        assert fragment in str(err.value)


def test_shift_check_speaks_chinese():
    with pytest.raises(CheckFailed) as err:
        checks.check_shift_matrix(lambda k, D, base=10000.0: position_shift_matrix(k, D, base).T,
                                  lang="zh")
    assert "旋转方向反了" in str(err.value) and "k=1, d_model=4" in str(err.value)


# --------------------------------------------------------------------- exercise 3: permutation

def test_permutation_check_passes_the_solution(solutions, capsys):
    checks.check_permutation_matrix(solutions["permutation_matrix"], lang="en")
    assert "all 6 cases pass" in capsys.readouterr().out


def test_permutation_check_lets_the_stub_fail():
    with pytest.raises(NotImplementedError):
        checks.check_permutation_matrix(stub, lang="en")


def test_permutation_check_catches_the_transposed_matrix():
    # [0, 1, 2] and [2, 1, 0] are their own inverses, so the cycle is the first case to fail.
    with pytest.raises(CheckFailed) as err:
        checks.check_permutation_matrix(lambda perm: np.eye(len(perm))[:, perm], lang="en")
    message = str(err.value)
    assert "perm=[1, 2, 0] (a cycle" in message and "inverse permutation" in message


def test_permutation_check_catches_a_matrix_of_the_wrong_size():
    with pytest.raises(CheckFailed, match=r"perm=\[0, 1, 2\].*shape \(4, 4\)"):
        checks.check_permutation_matrix(lambda perm: np.eye(len(perm) + 1), lang="en")


def test_permutation_check_speaks_chinese():
    with pytest.raises(CheckFailed) as err:
        checks.check_permutation_matrix(lambda perm: np.eye(len(perm))[:, perm], lang="zh")
    assert "perm=[1, 2, 0]（轮换" in str(err.value) and "逆置换" in str(err.value)


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
