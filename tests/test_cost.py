import numpy as np
import pytest

from attention_course import attention_flops, attention_memory_bytes, max_length_for_memory


def test_flops_are_four_n_squared_d_per_head_and_quadruple_when_n_doubles():
    assert attention_flops(100, 8) == 4 * 100**2 * 8
    assert attention_flops(200, 8) == 4 * attention_flops(100, 8)
    assert attention_flops(10, 8, S=20, d_v=4, num_heads=3, batch=2) == 2 * 2 * 3 * 10 * 20 * 12


def test_memory_of_the_score_matrix():
    assert attention_memory_bytes(1000) == 4_000_000
    assert attention_memory_bytes(1000, 10, num_heads=2, batch=3, dtype=np.float64) == 480_000


@pytest.mark.parametrize("budget", [24 * 2**30, 10**6, 1234567])
def test_max_length_is_the_largest_that_fits(budget):
    n = max_length_for_memory(budget)
    assert attention_memory_bytes(n) <= budget < attention_memory_bytes(n + 1)


def test_cost_bad_input():
    with pytest.raises(ValueError, match="L must be positive; got L=0"):
        attention_flops(0, 8)
    with pytest.raises(ValueError, match="budget_bytes"):
        max_length_for_memory(-1)
