"""Notebook 06: its exercise checks accept the solution and other correct answers, refuse the stub,
the classic slips and the forbidden library functions, and its widget's projections follow the
controls."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from matplotlib import pyplot as plt

from attention_course import (
    attend_one,
    attention_flops,
    causal_mask,
    max_length_for_memory,
    merge_softmax_states,
    scaled_dot_product_attention,
    sliding_window_mask,
    softmax,
    softmax_state,
)
from attention_course.checks import nb06 as nb06_checks
from attention_course.widgets import nb06
from notebook_tools import failure, load_solutions

NAME = "06_quadratic_cost.ipynb"
GIB = 2**30


@pytest.fixture(scope="module", params=["en", "zh"])
def solutions(request):
    return load_solutions(NAME, request.param)


# --------------------------------------------------------------------------- exercise 1: KV cache
def new_token_float32(q, K, V):
    q, K, V = (np.asarray(a, np.float32) for a in (q, K, V))
    s = K @ q * np.float32(1 / np.sqrt(q.shape[-1]))
    return softmax(s) @ V                                  # the library's softmax is allowed


def new_token_einsum_list(q, K, V):
    s = np.einsum("d,td->t", q, K) / math.sqrt(len(q))
    w = np.exp(s - s.max())
    return list(np.einsum("t,tv->v", w / w.sum(), V))     # a list


def new_token_loop(q, K, V):
    scores = [float(np.dot(q, k)) / math.sqrt(len(q)) for k in K]
    top = max(scores)
    weights = [math.exp(s - top) for s in scores]
    total = sum(weights)
    return sum(w / total * v for w, v in zip(weights, V, strict=True))


@pytest.mark.parametrize("answer", [new_token_einsum_list, new_token_loop])
def test_kv_check_passes_other_correct_answers(answer, capsys):
    nb06_checks.check_attend_new_token(answer, lang="en")
    assert "all 6 cases pass" in capsys.readouterr().out


def test_kv_check_refuses_float32_out_for_float64_in():
    assert "less precise than the inputs" in failure(nb06_checks.check_attend_new_token, new_token_float32)


def _weights(s):
    w = np.exp(s - s.max())
    return w / w.sum()


@pytest.mark.parametrize("wrong, fragment", [
    (lambda q, K, V: _weights(K @ q) @ V, "t = 5 tokens"),                                  # no scale
    (lambda q, K, V: _weights(K @ q / q.shape[-1]) @ V, "t = 5 tokens"),                    # / d_k
    (lambda q, K, V: _weights(K @ q / np.sqrt(len(K))) @ V, "t = 5 tokens"),                # / √t
    (lambda q, K, V: (np.exp(K @ q / np.sqrt(len(q))) / np.exp(K @ q / np.sqrt(len(q))).sum()) @ V,
     "exp overflows"),                                                                      # unstable
    (lambda q, K, V: _weights(K[:-1] @ q / np.sqrt(len(q))) @ V[:-1], "t = 5 tokens"),      # own key dropped
    (lambda q, K, V: _weights(K @ q / np.sqrt(len(q))) @ K, "t = 5 tokens"),                # mixes keys
    (lambda q, K, V: V.mean(axis=0), "t = 5 tokens"),                                       # no attention
    (lambda q, K, V: scaled_dot_product_attention(q[None], K, V)[0], "scaled_dot_product_attention"),
    (lambda q, K, V: scaled_dot_product_attention(np.tile(q, (len(K), 1)), K, V, is_causal=True)[-1],
     "scaled_dot_product_attention"),
    (attend_one, "attend_one itself"),
])
def test_kv_check_catches_classic_mistakes(wrong, fragment):
    assert fragment in failure(nb06_checks.check_attend_new_token, wrong)


def test_kv_check_speaks_chinese():
    msg = failure(nb06_checks.check_attend_new_token, lambda q, K, V: V.mean(axis=0), lang="zh")
    assert "用 KV 缓存算新词 未通过" in msg and "t = 5 个词" in msg


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 10), st.integers(1, 8), st.integers(1, 5), st.integers(0, 2**16))
def test_kv_solution_is_the_last_row_of_causal_attention(solutions, t, d_k, d_v, seed):
    rng = np.random.default_rng(seed)
    Q, K = rng.normal(size=(2, t, d_k))
    V = rng.normal(size=(t, d_v))
    full = scaled_dot_product_attention(Q, K, V, is_causal=True)
    assert np.allclose(solutions["attend_new_token"](Q[-1], K, V), full[-1])


# --------------------------------------------------------------------------- exercise 2: merge
def merge_other_baseline(a, b):
    # keeps a's baseline when a is not empty: a correct account on another baseline
    (ma, la, acc_a), (mb, lb, acc_b) = a, b
    if ma == -np.inf and mb == -np.inf:
        return ma, 0.0, acc_a * 0
    m = ma if ma > -np.inf else mb
    wa = 0.0 if ma == -np.inf else 1.0
    wb = np.exp(mb - m)
    return m, la * wa + lb * wb, acc_a * wa + acc_b * wb


def merge_float32(a, b):
    (ma, la, acc_a), (mb, lb, acc_b) = a, b
    m = np.float32(max(ma, mb))
    if not np.isfinite(m):
        return m, np.float32(0), np.zeros_like(acc_a, dtype=np.float32)
    wa, wb = np.exp(np.float32(ma) - m), np.exp(np.float32(mb) - m)
    return m, np.float32(la) * wa + np.float32(lb) * wb, (acc_a * wa + acc_b * wb).astype(np.float32)


def merge_as_lists(a, b):
    m, total, acc = merge_softmax_states_by_hand(a, b)
    return [m, total, list(acc)]


def merge_softmax_states_by_hand(a, b):
    (ma, la, acc_a), (mb, lb, acc_b) = a, b
    m = max(ma, mb)
    if m == -math.inf:
        return m, 0.0, np.zeros_like(acc_a)
    wa, wb = math.exp(ma - m), math.exp(mb - m)
    return m, la * wa + lb * wb, acc_a * wa + acc_b * wb


@pytest.mark.parametrize("answer", [merge_other_baseline, merge_as_lists, merge_softmax_states_by_hand])
def test_merge_check_passes_other_correct_answers(answer, capsys):
    nb06_checks.check_merge_states(answer, lang="en")
    assert "all 7 cases pass" in capsys.readouterr().out


def test_merge_check_refuses_float32_out_for_float64_in():
    assert "less precise than the inputs" in failure(nb06_checks.check_merge_states, merge_float32)


def merge_without_rescaling(a, b):
    (ma, la, acc_a), (mb, lb, acc_b) = a, b
    return max(ma, mb), la + lb, acc_a + acc_b


def merge_rescales_only_l(a, b):
    (ma, la, acc_a), (mb, lb, acc_b) = a, b
    m = max(ma, mb)
    return m, la * np.exp(ma - m) + lb * np.exp(mb - m), acc_a + acc_b


def merge_rescales_only_b(a, b):
    (ma, la, acc_a), (mb, lb, acc_b) = a, b
    m = max(ma, mb)
    return m, la + lb * np.exp(mb - m), acc_a + acc_b * np.exp(mb - m)


def merge_nan_when_empty(a, b):
    (ma, la, acc_a), (mb, lb, acc_b) = a, b
    m = max(ma, mb)
    wa, wb = np.exp(ma - m), np.exp(mb - m)                 # -inf - -inf = nan for two empty chunks
    return m, la * wa + lb * wb, acc_a * wa + acc_b * wb


def merge_returns_the_output(a, b):
    m, total, acc = merge_softmax_states_by_hand(a, b)
    return acc / total


def merge_in_absolute_sums(a, b):
    # e^m·l is the plain sum of exponentials: it overflows once the scores are large
    (ma, la, acc_a), (mb, lb, acc_b) = a, b
    total = la * np.exp(ma) + lb * np.exp(mb)
    acc = acc_a * np.exp(ma) + acc_b * np.exp(mb)
    return 0.0, total, acc


@pytest.mark.parametrize("wrong, fragment", [
    (merge_without_rescaling, "two chunks of 5 keys"),
    (merge_rescales_only_l, "acc (moved onto the baseline"),
    (merge_rescales_only_b, "l (moved onto the baseline"),
    (merge_nan_when_empty, "both chunks empty"),
    (merge_returns_the_output, "acc has shape ()"),
    (merge_in_absolute_sums, "scores up to 1000"),
    (merge_softmax_states, "merge_softmax_states itself"),
    (lambda a, b: merge_softmax_states(a, b), "calls merge_softmax_states"),
])
def test_merge_check_catches_classic_mistakes(wrong, fragment):
    assert fragment in failure(nb06_checks.check_merge_states, wrong)


def test_merge_check_speaks_chinese():
    msg = failure(nb06_checks.check_merge_states, merge_without_rescaling, lang="zh")
    assert "合并两本在线 softmax 的账 未通过" in msg and "两块各 5 个键" in msg


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 8), st.integers(0, 8), st.floats(-300, 300), st.integers(0, 2**16))
def test_merge_solution_equals_the_state_of_both_chunks(solutions, t1, t2, offset, seed):
    rng = np.random.default_rng(seed)
    q = rng.normal(size=4)
    k, v = rng.normal(size=(t1 + t2, 4)) + offset / 8, rng.normal(size=(t1 + t2, 3))
    a, b = softmax_state(q, k[:t1], v[:t1]), softmax_state(q, k[t1:], v[t1:])
    a, b = ((float(s[0]), float(s[1]), s[2]) for s in (a, b))
    m, total, acc = solutions["merge_states"](a, b)
    whole = softmax_state(q, k, v)
    assert not np.isnan(acc).any()
    if t1 + t2:
        assert np.allclose(np.asarray(acc) / total, attend_one(q, k, v))
        assert np.isclose(m, whole[0]) and np.isclose(total, whole[1])


# --------------------------------------------------------------------------- exercise 3
def window_by_tri(n, r):
    ones = np.ones((n, n), dtype=bool)
    return np.triu(ones, -r) & np.tril(ones, r)


def window_with_loop(n, r):
    m = np.zeros((n, n), dtype=bool)
    for i in range(n):
        m[i, max(0, i - r):i + r + 1] = True
    return m


def test_window_passes_another_formulation(capsys):
    nb06_checks.check_window_mask(window_by_tri, lang="en")
    assert "all 6 cases pass" in capsys.readouterr().out


@pytest.mark.parametrize("wrong, fragment", [
    (lambda n, r: np.abs(np.arange(n)[:, None] - np.arange(n)[None, :]) < r, "n = 6, r = 1"),   # off by one
    (lambda n, r: np.abs(np.arange(n)[:, None] - np.arange(n)[None, :]) <= r + 1, "n = 6, r = 1"),
    (lambda n, r: np.tril(np.triu(np.ones((n, n), bool), -r)), "n = 6, r = 1"),          # one-sided
    (lambda n, r: (np.abs(np.arange(n)[:, None] - np.arange(n)[None, :]) <= r).astype(int), "dtype"),
    (window_with_loop, "for loop"),
    (sliding_window_mask, "sliding_window_mask itself"),
    (lambda n, r: sliding_window_mask(n, r), "calls sliding_window_mask"),
    (lambda n, r: causal_mask(n) & causal_mask(n).T | np.eye(n, dtype=bool), "calls causal_mask"),
])
def test_window_catches_classic_mistakes(wrong, fragment):
    assert fragment in failure(nb06_checks.check_window_mask, wrong)


def test_window_catches_a_window_that_wraps_around_the_sentence():
    def wraps(n, r):
        offset = (np.arange(n)[None, :] - np.arange(n)[:, None]) % n
        return (offset <= r) | (offset >= n - r)
    msg = failure(nb06_checks.check_window_mask, wraps)
    assert "n = 6, r = 1" in msg


# --------------------------------------------------------------------------- the widget
@pytest.fixture
def explorer():
    measured = {"n": [256, 512], "seconds": [1e-3, 4e-3], "peak_bytes": [8e5, 3.2e6]}
    return nb06.CostExplorer(lang="en", rate=1e10, measured=measured)


def test_widget_doubling_n_quadruples_full_work_and_memory_but_not_the_tile(explorer):
    explorer.controls["n"].value = 4096
    before = explorer.data["at"]
    explorer.controls["n"].value = 8192
    after = explorer.data["at"]
    assert after["full"]["flops"] == 4 * before["full"]["flops"]
    assert after["full"]["bytes"] == 4 * before["full"]["bytes"]
    assert after["full"]["seconds"] == pytest.approx(4 * before["full"]["seconds"])
    assert after["chunked"]["bytes"] == before["chunked"]["bytes"] == 8 * 128 * 128 * 4
    assert after["chunked"]["flops"] == after["full"]["flops"]
    assert 1.9 < after["windowed"]["flops"] / before["windowed"]["flops"] < 2.1


def test_widget_heads_multiply_memory_and_move_the_wall(explorer):
    explorer.controls["heads"].value = 1
    one = explorer.data
    explorer.controls["heads"].value = 4
    four = explorer.data
    assert four["at"]["full"]["bytes"] == 4 * one["at"]["full"]["bytes"]
    assert one["wall"] == max_length_for_memory(24 * GIB) == 80264
    assert four["wall"] == max_length_for_memory(24 * GIB, num_heads=4)


def test_widget_width_and_window_change_the_projection(explorer):
    explorer.controls["d"].value = 128
    assert explorer.data["at"]["full"]["flops"] == attention_flops(16384, 128, num_heads=8)
    narrow = explorer.data["at"]["windowed"]["bytes"]
    explorer.controls["window"].value = 512
    assert explorer.data["at"]["windowed"]["bytes"] > 3.9 * narrow


def test_widget_time_is_work_over_the_rate(explorer):
    data = explorer.data
    for kind in ("full", "chunked", "windowed"):
        assert data["at"][kind]["seconds"] == pytest.approx(data["at"][kind]["flops"] / 1e10)
    curves = data["curves"]
    assert np.allclose(np.diff(np.log(curves["full"]["seconds"])) / np.diff(np.log(curves["n"])), 2)


def test_widget_says_when_full_attention_stops_fitting(explorer):
    explorer.controls["heads"].value = 8
    explorer.controls["n"].value = 16384
    assert explorer.data["fits"] == {"full": True, "chunked": True, "windowed": True}
    explorer.controls["n"].value = 32768            # beyond the 8-head wall of 28377
    assert explorer.data["fits"]["full"] is False and explorer.data["fits"]["chunked"] is True


def test_widget_figure_draws_in_both_languages(explorer):
    fig = explorer.figure()
    assert len(fig.axes) == 2
    assert "16,384" in fig.axes[0].get_title()
    plt.close(fig)
    zh = nb06.CostExplorer(lang="zh", rate=1e10)
    fig = zh.figure()
    assert "完整" in fig.axes[0].get_title()
    plt.close(fig)


def test_widget_refuses_a_rate_that_is_not_positive():
    with pytest.raises(ValueError, match="rate must be a positive"):
        nb06.CostExplorer(rate=0)


def test_measure_rate_gives_a_positive_rate():
    assert nb06.measure_rate(n=64, d=8, repeats=1) > 0


def test_measure_rate_survives_a_coarse_clock(monkeypatch):
    # A process_time that moves only in 16 ms steps (as on Windows): one short call reads as 0 s.
    fine = nb06.time.perf_counter
    monkeypatch.setattr(nb06.time, "process_time", lambda: (fine() // 0.016) * 0.016)
    rate = nb06.measure_rate(n=64, d=8, repeats=2)
    assert math.isfinite(rate) and rate > 0


@settings(deadline=None)
@given(n=st.sampled_from([2**p for p in range(9, 19)]), heads=st.integers(1, 32),
       window=st.sampled_from([32, 64, 128, 256, 512]))
def test_projection_never_ranks_windowed_above_full(n, heads, window):
    p = nb06.project(n, 64, heads, window, rate=1e9)
    assert p["windowed"]["flops"] <= p["full"]["flops"]
    assert p["windowed"]["bytes"] <= p["full"]["bytes"]
    assert p["chunked"]["bytes"] <= p["full"]["bytes"]


def test_widget_title_warns_when_full_attention_does_not_fit(explorer):
    data = explorer.compute(n=65536, d=64, heads=8, window=128)
    fig = explorer.draw(data)
    assert "does not fit" in fig.axes[1].get_title()
    plt.close(fig)
    fig = explorer.draw(explorer.compute(n=4096, d=64, heads=8, window=128))
    assert "does not fit" not in fig.axes[1].get_title()
    plt.close(fig)
