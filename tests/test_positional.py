import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_course import (
    alibi_bias,
    apply_rotary,
    position_shift_matrix,
    scaled_dot_product_attention,
    sinusoidal_positional_encoding,
)
from attention_course.positional import frequencies


def test_definition_sin_even_cos_odd():
    pe = sinusoidal_positional_encoding(7, 6)
    pos, i = 5, 1
    omega = 10000 ** (-2 * i / 6)
    assert pe[pos, 2 * i] == pytest.approx(np.sin(pos * omega))
    assert pe[pos, 2 * i + 1] == pytest.approx(np.cos(pos * omega))
    np.testing.assert_array_equal(pe[0, 0::2], 0.0)
    np.testing.assert_array_equal(pe[0, 1::2], 1.0)


def test_wavelengths_from_two_pi_towards_base_two_pi():
    lam = 2 * np.pi / frequencies(512)
    assert lam[0] == pytest.approx(2 * np.pi)
    assert 2 * np.pi * 10000 * 0.9 < lam[-1] < 2 * np.pi * 10000
    assert np.all(np.diff(lam) > 0)


@pytest.mark.parametrize("k", [-7, -1, 0, 1, 3, 50])
def test_shift_matrix_moves_every_position(k):
    d = 64
    pe = sinusoidal_positional_encoding(200, d)
    M = position_shift_matrix(k, d)
    lo, hi = max(0, -k), min(200, 200 - k)
    np.testing.assert_allclose(pe[lo:hi] @ M, pe[lo + k:hi + k], atol=1e-10)
    np.testing.assert_allclose(M @ M.T, np.eye(d), atol=1e-12)       # a rotation


def test_dot_product_depends_only_on_distance():
    pe = sinusoidal_positional_encoding(100, 32)
    np.testing.assert_allclose(pe[10] @ pe[17], pe[60] @ pe[67], atol=1e-10)


def test_rotary_scores_depend_on_offset_only():
    rng = np.random.default_rng(0)
    q, k = rng.standard_normal(8), rng.standard_normal(8)
    def score(m, n):
        return (apply_rotary(q[None], [m]) @ apply_rotary(k[None], [n]).T).item()
    assert score(3, 1) == pytest.approx(score(13, 11))
    assert score(3, 1) != pytest.approx(score(3, 2))
    x = rng.standard_normal((5, 8)).astype(np.float32)
    y = apply_rotary(x)
    assert y.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(y, axis=-1), np.linalg.norm(x, axis=-1), rtol=1e-5)


@pytest.mark.parametrize("call, err, fragment", [
    (lambda: sinusoidal_positional_encoding(4, 5), ValueError, "d_model must be even"),
    (lambda: sinusoidal_positional_encoding(4, 0), ValueError, "d_model must be positive"),
    (lambda: sinusoidal_positional_encoding(-1, 4), ValueError, "num_positions"),
    (lambda: sinusoidal_positional_encoding(4.0, 4), TypeError, "num_positions must be an int"),
    (lambda: position_shift_matrix(1.5, 4), TypeError, "k must be an int"),
    (lambda: sinusoidal_positional_encoding(4, 4, base=1.0), ValueError, "base"),
    (lambda: sinusoidal_positional_encoding(4, 4, base=True), ValueError,
     r"base must be a finite number > 1; got base=True"),
    (lambda: sinusoidal_positional_encoding(4, 4, base="10000"), ValueError,
     r"base must be a finite number > 1; got base='10000'"),
    (lambda: apply_rotary(np.ones((3, 4)), [0, 1]), ValueError, "positions has shape"),
])
def test_bad_input(call, err, fragment):
    with pytest.raises(err, match=fragment):
        call()


# --------------------------------------------------------------------- ALiBi

def test_alibi_bias_is_minus_slope_times_distance():
    B = alibi_bias([0, 1, 4, 9], slope=0.25)
    assert B.shape == (4, 4) and B.dtype == np.float64
    assert B[0, 3] == -0.25 * 9 and B[3, 1] == -0.25 * 8 and B[2, 2] == 0.0
    assert np.array_equal(B, B.T)
    cross = alibi_bias([5, 6], [0, 1, 2], slope=1.0)
    assert np.array_equal(cross, -np.array([[5, 4, 3], [6, 5, 4]], dtype=float))


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 9), st.integers(-1000, 1000), st.floats(0.01, 4.0), st.integers(0, 2**16))
def test_alibi_weights_do_not_change_when_the_sentence_shifts(n, shift, slope, seed):
    # The bias sees only differences of positions, so the attention weights cannot move.
    rng = np.random.default_rng(seed)
    q, k, v = rng.normal(size=(3, n, 4))
    pos = np.cumsum(rng.integers(1, 4, size=n))          # gaps allowed: packed or padded text
    _, w0 = scaled_dot_product_attention(q, k, v, attn_mask=alibi_bias(pos, slope=slope),
                                         return_weights=True)
    _, w1 = scaled_dot_product_attention(q, k, v, attn_mask=alibi_bias(pos + shift, slope=slope),
                                         return_weights=True)
    assert np.allclose(w0, w1)


def test_alibi_penalty_moves_weight_towards_near_keys():
    q = k = np.zeros((6, 4))                               # equal scores: only the bias speaks
    _, w = scaled_dot_product_attention(q, k, np.eye(6, 4), attn_mask=alibi_bias(np.arange(6)),
                                        return_weights=True)
    assert np.all(np.diff(w[0]) < 0)                       # farther keys get less weight
    assert w[2].argmax() == 2


@pytest.mark.parametrize("kwargs, match", [
    ({"query_positions": [[0, 1]]}, "query_positions must be a 1-D array"),
    ({"query_positions": [0, 1], "key_positions": ["a"]}, "key_positions must be a 1-D array"),
    ({"query_positions": [0, 1], "slope": 0}, "slope must be a finite number > 0"),
    ({"query_positions": [0, 1], "slope": True}, "slope must be a finite number > 0; got slope=True"),
    ({"query_positions": [0, 1], "slope": "a"}, "slope must be a finite number > 0; got slope='a'"),
    ({"query_positions": [0, 1], "slope": np.nan}, "slope must be a finite number > 0; got slope=nan"),
    ({"query_positions": [0, np.inf]}, "query_positions must be finite"),
])
def test_alibi_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        alibi_bias(**kwargs)
