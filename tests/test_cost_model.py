"""The cost model beyond full attention: recurrence, Table 1, sliding windows and chunks."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_course import attention_flops, attention_memory_bytes, sliding_window_mask
from attention_course.cost import (
    chunked_attention_memory_bytes,
    layer_complexity,
    recurrent_flops,
    windowed_attention_flops,
    windowed_attention_memory_bytes,
    windowed_pairs,
)

sizes = st.integers(min_value=1, max_value=40)
windows = st.integers(min_value=0, max_value=45)


# --------------------------------------------------------------------------- recurrence
def test_recurrent_layer_is_four_n_d_squared():
    assert recurrent_flops(10, 8) == 4 * 10 * 8 * 8
    assert recurrent_flops(10, 8, batch=3) == 3 * recurrent_flops(10, 8)
    # Linear in n, quadratic in d: the mirror image of attention.
    assert recurrent_flops(20, 8) == 2 * recurrent_flops(10, 8)
    assert recurrent_flops(10, 16) == 4 * recurrent_flops(10, 8)


@settings(deadline=None)
@given(n=st.integers(1, 3000), d=st.integers(1, 1024))
def test_attention_is_cheaper_than_recurrence_exactly_while_n_is_below_d(n, d):
    attention, recurrent = attention_flops(n, d), recurrent_flops(n, d)
    assert (attention < recurrent) == (n < d)
    assert (attention == recurrent) == (n == d)


# --------------------------------------------------------------------------- Table 1
def test_table_1_rows_for_a_sentence_shorter_than_d():
    t = layer_complexity(n=100, d=512, kernel=3, window=16)
    assert t["self_attention"] == {"per_layer": 100 * 100 * 512, "sequential": 1, "max_path": 1}
    assert t["recurrent"] == {"per_layer": 100 * 512 * 512, "sequential": 100, "max_path": 100}
    assert t["convolutional"] == {"per_layer": 3 * 100 * 512 * 512, "sequential": 1,
                                  "max_path": 5}      # 3**4 = 81 < 100 <= 3**5
    assert t["restricted"] == {"per_layer": 16 * 100 * 512, "sequential": 1, "max_path": 7}


@pytest.mark.parametrize(("n", "k", "levels"), [(1, 3, 0), (3, 3, 1), (4, 3, 2), (1000, 10, 3),
                                                (1001, 10, 4), (1024, 2, 10)])
def test_convolution_path_is_the_ceiling_of_log_k_n_even_at_exact_powers(n, k, levels):
    assert layer_complexity(n=n, d=8, kernel=k)["convolutional"]["max_path"] == levels


@settings(deadline=None)
@given(n=st.integers(1, 5000), d=st.integers(1, 2000))
def test_table_1_orders_cross_where_the_paper_says(n, d):
    t = layer_complexity(n=n, d=d)
    assert (t["self_attention"]["per_layer"] < t["recurrent"]["per_layer"]) == (n < d)
    assert t["restricted"]["per_layer"] <= t["self_attention"]["per_layer"] or n < 16


def test_table_1_bad_input():
    with pytest.raises(ValueError, match="kernel must be at least 2"):
        layer_complexity(10, 8, kernel=1)
    with pytest.raises(ValueError, match="n must be positive"):
        layer_complexity(0, 8)


# --------------------------------------------------------------------------- sliding window
@settings(max_examples=150, deadline=None)
@given(L=sizes, S=sizes, r=windows, causal=st.booleans())
def test_windowed_pairs_counts_the_true_entries_of_the_mask(L, S, r, causal):
    assert windowed_pairs(L, r, S, causal) == int(sliding_window_mask(L, r, S, causal).sum())


@settings(deadline=None)
@given(n=st.integers(1, 10**6), r=st.integers(0, 10**6))
def test_windowed_pairs_is_order_n_r_and_never_more_than_n_squared(n, r):
    kept = windowed_pairs(n, r)
    assert kept <= min(n * (2 * r + 1), n * n)
    if r < n:      # closed form when the window fits: every row keeps 2r+1 minus the edges
        assert kept == n * (2 * r + 1) - r * (r + 1)
    else:
        assert kept == n * n


def test_windowed_cost_falls_back_to_full_attention_when_the_window_covers_everything():
    assert windowed_attention_flops(300, 64, 299) == attention_flops(300, 64)
    assert windowed_attention_memory_bytes(300, 299) == attention_memory_bytes(300)
    assert windowed_attention_flops(4096, 64, 128) < attention_flops(4096, 64) // 16


def test_windowed_cost_counts_heads_batch_width_and_dtype():
    base = windowed_attention_flops(100, 8, 3)
    assert base == 2 * windowed_pairs(100, 3) * (8 + 8)
    assert windowed_attention_flops(100, 8, 3, d_v=4, num_heads=2, batch=3) == (
        2 * 3 * 2 * windowed_pairs(100, 3) * 12)
    assert windowed_attention_memory_bytes(100, 3, num_heads=2, batch=3, dtype=np.float16) == (
        3 * 2 * windowed_pairs(100, 3) * 2)
    causal_pairs = windowed_pairs(100, 3, causal=True)
    assert windowed_attention_flops(100, 8, 3, causal=True) == 2 * causal_pairs * 16


def test_windowed_bad_input():
    with pytest.raises(ValueError, match="window must be >= 0"):
        windowed_pairs(10, -1)
    with pytest.raises(TypeError, match="window must be an int"):
        windowed_pairs(10, 2.5)


# --------------------------------------------------------------------------- chunks
@given(n=st.integers(128, 10**6))
def test_chunked_memory_does_not_grow_with_n(n):
    assert chunked_attention_memory_bytes(L=n) == 128 * 128 * 4


def test_chunked_memory_is_one_tile_cut_to_short_sequences():
    assert chunked_attention_memory_bytes(64, 32, num_heads=8, batch=2, dtype=np.float16) == (
        2 * 8 * 64 * 32 * 2)
    assert chunked_attention_memory_bytes(128, 128, L=10) == 10 * 10 * 4
    assert chunked_attention_memory_bytes(128, 128, L=10, S=300) == 10 * 128 * 4
    assert chunked_attention_memory_bytes(L=20) < attention_memory_bytes(200)
