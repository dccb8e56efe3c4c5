"""apply_rotary rotates the pairs (x[0], x[1]), (x[2], x[3]), ... — not the two halves.

The real model of notebook 09 depends on it: the GGUF file stores the rows of W_Q and W_K in the
pair order (tests/test_pretrained_reference.py shows that the halves order gives wrong weights).
"""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_course import apply_rotary


def test_pairs_0_1_and_2_3_rotate_by_hand_computed_angles():
    # D = 4, base 100: pair 0 turns by pos·1, pair 1 by pos·100^(-2/4) = pos/10.
    x = np.array([[1.0, 2.0, 3.0, 4.0]])
    pos = 3
    a0, a1 = 3.0, 0.3
    expected = np.array([[
        1.0 * np.cos(a0) - 2.0 * np.sin(a0), 1.0 * np.sin(a0) + 2.0 * np.cos(a0),
        3.0 * np.cos(a1) - 4.0 * np.sin(a1), 3.0 * np.sin(a1) + 4.0 * np.cos(a1),
    ]])
    got = apply_rotary(x, [pos], base=100.0)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)


def test_halves_convention_would_give_something_else():
    x = np.array([[1.0, 2.0, 3.0, 4.0]])
    a0, a1 = 3.0, 0.3
    # rotate_half: pairs (x[0], x[2]) and (x[1], x[3])
    halves = np.array([[1 * np.cos(a0) - 3 * np.sin(a0), 2 * np.cos(a1) - 4 * np.sin(a1),
                        1 * np.sin(a0) + 3 * np.cos(a0), 2 * np.sin(a1) + 4 * np.cos(a1)]])
    assert np.abs(apply_rotary(x, [3], base=100.0) - halves).max() > 0.5


@settings(max_examples=30, deadline=None)
@given(pos=st.integers(-50, 50), i=st.integers(0, 3))
def test_each_pair_keeps_its_length_and_moves_only_itself(pos, i):
    x = np.zeros((1, 8))
    x[0, 2 * i], x[0, 2 * i + 1] = 0.6, -0.8
    y = apply_rotary(x, [pos], base=10000.0)
    other = np.delete(y[0], [2 * i, 2 * i + 1])
    assert np.allclose(other, 0.0)
    assert np.isclose(np.hypot(y[0, 2 * i], y[0, 2 * i + 1]), 1.0)
