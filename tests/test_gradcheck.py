"""The gradient checker: right on known derivatives, and it catches the classic backward bugs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_course.backprop import (
    attention_backward,
    attention_forward,
    linear_backward,
    linear_forward,
    softmax_backward,
    softmax_forward,
)
from attention_course.gradcheck import check_gradient, numerical_gradient, relative_error

FEW = settings(max_examples=15, deadline=None, derandomize=True, database=None)


def test_numerical_gradient_of_known_functions_and_x_is_restored_bit_for_bit():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 4))
    before = x.copy()
    g = numerical_gradient(lambda: float(np.sum(x ** 3) + np.sin(x).prod()), x)
    expected = 3 * x ** 2 + np.cos(x) * np.sin(x).prod() / np.sin(x)
    np.testing.assert_allclose(g, expected, rtol=1e-7, atol=1e-9)
    assert np.array_equal(x, before)
    assert g.dtype == np.float64 and g.shape == x.shape


def test_x_is_restored_when_f_raises():
    x = np.array([1.0, 2.0])

    def f():
        if x[0] != 1.0:
            raise RuntimeError("boom")
        return float(x.sum())

    with pytest.raises(RuntimeError):
        numerical_gradient(f, x)
    assert x.tolist() == [1.0, 2.0]


@pytest.mark.parametrize("x, eps, error, words", [
    (np.ones(3, np.float32), 1e-6, TypeError, "got dtype float32"),
    ([1.0, 2.0], 1e-6, TypeError, "got list"),
    (np.ones(3), -1.0, ValueError, "eps must be a positive finite number; got -1.0"),
])
def test_bad_arguments_are_named(x, eps, error, words):
    with pytest.raises(error) as info:
        numerical_gradient(lambda: 0.0, x, eps=eps)
    assert words in str(info.value)


def test_f_must_be_callable_and_x_writeable():
    with pytest.raises(TypeError, match="f must be a function"):
        numerical_gradient(1.0, np.ones(2))
    x = np.ones(2)
    x.flags.writeable = False
    with pytest.raises(ValueError, match="x must be writeable"):
        numerical_gradient(lambda: 0.0, x)


@FEW
@given(a=st.lists(st.floats(1e-3, 1e3) | st.floats(-1e3, -1e-3), min_size=1, max_size=5),
       seed=st.integers(0, 99))
def test_relative_error_is_symmetric_bounded_and_zero_only_for_equal(a, seed):
    a = np.array(a)
    b = a + np.random.default_rng(seed).standard_normal(a.shape)
    e = relative_error(a, b)
    assert e == relative_error(b, a) and 0 < e <= 1
    assert relative_error(a, a) == 0.0
    assert relative_error(a, -a) == 1.0


def test_relative_error_floor_and_shapes():
    assert relative_error(np.array([1e-16]), np.zeros(1)) == pytest.approx(1e-4)
    assert relative_error(np.array([1e-16]), np.zeros(1), floor=1e-5) == pytest.approx(1e-11)
    assert relative_error(np.array([1.0, 2.0]), np.array([1.0, 2.0 + 2e-6])) == pytest.approx(5e-7, rel=1e-6)
    assert relative_error(np.zeros((0, 3)), np.zeros((0, 3))) == 0.0
    with pytest.raises(ValueError, match=r"a \(2,\) and b \(3,\)"):
        relative_error(np.ones(2), np.ones(3))
    with pytest.raises(ValueError, match="floor must be a positive"):
        relative_error(np.ones(2), np.ones(2), floor=0)


# ---- the checker finds planted bugs -------------------------------------------------------------

def linear_problem():
    rng = np.random.default_rng(1)
    x, W = rng.standard_normal((5, 4)), rng.standard_normal((4, 4))    # square W: a transpose fits
    R = rng.standard_normal((5, 4))
    _, cache = linear_forward(x, W)
    _, dW, _ = linear_backward(R, cache)
    return W, dW, lambda: float((linear_forward(x, W)[0] * R).sum())


def test_a_missing_transpose_in_dweight_is_caught():
    W, dW, loss = linear_problem()
    assert check_gradient(loss, W, dW) < 1e-6
    assert check_gradient(loss, W, dW.T) > 0.1           # x.T @ dy instead of dy.T @ x


def attention_problem():
    rng = np.random.default_rng(2)
    q, k, v = rng.standard_normal((4, 4)), rng.standard_normal((5, 4)), rng.standard_normal((5, 3))
    R = rng.standard_normal((4, 3))
    _, _, cache = attention_forward(q, k, v, is_causal=True)
    dq, dk, dv = attention_backward(R, cache)
    return q, k, dq, dk, lambda: float((attention_forward(q, k, v, is_causal=True)[0] * R).sum())


def test_a_dropped_scale_in_dq_and_dk_is_caught():
    q, k, dq, dk, loss = attention_problem()
    scale = 1 / np.sqrt(q.shape[-1])                      # 0.5 at d_k = 4
    assert check_gradient(loss, q, dq) < 1e-6 and check_gradient(loss, k, dk) < 1e-6
    assert check_gradient(loss, q, dq / scale) > 0.1      # 1/sqrt(d_k) forgotten in dq
    assert check_gradient(loss, k, dk / scale) > 0.1


def test_only_the_jacobians_diagonal_is_caught():
    rng = np.random.default_rng(3)
    x, R = rng.standard_normal((3, 5)), rng.standard_normal((3, 5))
    y, cache = softmax_forward(x)
    dx = softmax_backward(R, cache)

    def loss():
        return float((softmax_forward(x)[0] * R).sum())

    assert check_gradient(loss, x, dx) < 1e-6
    assert check_gradient(loss, x, y * (1 - y) * R) > 0.1  # diag(y) - diag(y)² only, no -y yᵀ


def test_check_gradient_names_a_shape_mismatch():
    W, dW, loss = linear_problem()
    with pytest.raises(ValueError, match=r"analytic has shape \(4, 3\)"):
        check_gradient(loss, W, dW[:, :3])
