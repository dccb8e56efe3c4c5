import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes, arrays

from attention_course import softmax

finite = st.floats(-1e4, 1e4, allow_nan=False, width=64)
logits = arrays(np.float64, array_shapes(min_dims=1, max_dims=3, max_side=6), elements=finite)


@given(logits)
def test_rows_are_a_budget_that_sums_to_one(x):
    w = softmax(x)
    assert w.shape == x.shape
    assert np.all(w >= 0)
    np.testing.assert_allclose(w.sum(-1), 1.0, rtol=1e-12)


@given(logits, st.floats(-1e3, 1e3))
def test_adding_a_constant_to_a_row_changes_nothing(x, c):
    np.testing.assert_allclose(softmax(x + c), softmax(x), atol=1e-12)


@given(logits)
def test_order_is_kept(x):
    # A larger score never gets a smaller weight (softmax is monotone within a row).
    w = softmax(x)
    larger = x[..., :, None] > x[..., None, :]
    assert np.all((w[..., :, None] >= w[..., None, :])[larger])


def test_exact_for_huge_logits():
    np.testing.assert_array_equal(softmax(np.array([1e4, 0.0, -1e4])), [1.0, 0.0, 0.0])
    np.testing.assert_allclose(softmax(np.array([1e4, 1e4])), [0.5, 0.5])
    np.testing.assert_allclose(softmax(np.array([-1e4, -1e4 + np.log(3)])), [0.25, 0.75])


def test_all_minus_inf_row_gives_zeros_not_nan():
    w = softmax(np.array([[-np.inf, -np.inf], [0.0, -np.inf]]))
    np.testing.assert_array_equal(w, [[0.0, 0.0], [1.0, 0.0]])


def test_the_articles_numbers():
    w = softmax(np.array([0.5, 0.3, 1.2, 3.0]))
    np.testing.assert_allclose(w, [0.0624, 0.0511, 0.1257, 0.7607], atol=1e-4)


def test_axis_and_temperature():
    x = np.array([[1.0, 2.0], [3.0, 5.0]])
    np.testing.assert_allclose(softmax(x, axis=0).sum(0), 1.0)
    assert softmax(x, temperature=0.1)[1, 1] > softmax(x)[1, 1] > softmax(x, temperature=10)[1, 1]
    np.testing.assert_allclose(softmax(x, temperature=2.0), softmax(x / 2.0))


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_dtype_follows_input(dtype):
    assert softmax(np.array([1.0, 2.0], dtype=dtype)).dtype == dtype


@pytest.mark.parametrize("bad, err, fragment", [
    (np.array([1, 2]), TypeError, "floating dtype"),
    (np.array([1.0, np.nan]), ValueError, "NaN"),
    (np.array([1.0, np.inf]), ValueError, "+inf"),
])
def test_bad_input(bad, err, fragment):
    with pytest.raises(err, match=fragment.replace("+", r"\+")):
        softmax(bad)


def test_bad_temperature():
    with pytest.raises(ValueError, match="temperature"):
        softmax(np.ones(3), temperature=0)
