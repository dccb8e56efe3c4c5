"""fast_attention must give the direct formula's numbers, edge cases included.

Correctness only: how fast it is, is what `make bench` reports.
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attention_course.attention import causal_mask, scaled_dot_product_attention
from attention_course.fast import default_block_q, fast_attention
from attention_course.multihead import split_heads

TOL = {np.float16: (2e-3, 2e-3), np.float32: (2e-5, 2e-5), np.float64: (1e-12, 1e-12)}
# float16 is computed in float32, so its scores carry float32 rounding.
EPS = {np.float16: 2.0**-23, np.float32: 2.0**-23, np.float64: 2.0**-52}


def largest_score(q, k, attn_mask=None, scale=None, **_):
    """max |q·k · scale + mask| over finite entries: how far exp amplifies rounding."""
    q64, k64 = q.astype(np.float64), k.astype(np.float64)
    scale = 1 / np.sqrt(q.shape[-1]) if scale is None else scale
    s = np.abs(q64 @ np.swapaxes(k64, -1, -2)).max(initial=0.0) * scale
    if attn_mask is not None and attn_mask.dtype != np.bool_:
        s += np.abs(attn_mask[np.isfinite(attn_mask)]).max(initial=0.0)
    return s


def assert_matches_direct(q, k, v, **kw):
    """fast_attention (with any block size or thread count) equals the direct formula.

    Both round every score to the working precision, an error of about eps · |score| that
    exp turns into a relative error of the weights: the tolerance grows with the largest score.
    """
    fast_kw = {key: kw.pop(key) for key in ("block_q", "num_threads") if key in kw}
    got = fast_attention(q, k, v, **kw, **fast_kw)
    want = scaled_dot_product_attention(q, k, v, **kw)
    assert got.dtype == want.dtype == q.dtype
    assert got.shape == want.shape
    rtol, atol = TOL[q.dtype.type]
    atol += 8 * EPS[q.dtype.type] * largest_score(q, k, **kw)
    # The output is a weighted mean of the rows of v: its error scales with their size.
    size = max(1.0, float(np.abs(v).max())) if v.size else 1.0
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                               rtol=rtol, atol=atol * size)
    return got


@st.composite
def attention_case(draw):
    dtype = draw(st.sampled_from([np.float16, np.float32, np.float64]))
    lead = draw(st.lists(st.integers(1, 3), min_size=0, max_size=2))
    # Each of q, k, v may have 1 on some leading axis: they must broadcast.
    def lead_of():
        return tuple(n if draw(st.booleans()) else 1 for n in lead)
    L, S = draw(st.integers(1, 40)), draw(st.integers(1, 40))
    E, Ev = draw(st.integers(1, 12)), draw(st.integers(1, 12))
    seed = draw(st.integers(0, 2**32 - 1))
    # Big magnitudes push the scores past the range where the max-shift may be skipped.
    size = draw(st.sampled_from([0.1, 1.0, 3.0, 10.0]))
    rng = np.random.default_rng(seed)
    q = (rng.normal(size=lead_of() + (L, E)) * size).astype(dtype)
    k = (rng.normal(size=lead_of() + (S, E)) * size).astype(dtype)
    v = rng.normal(size=lead_of() + (S, Ev)).astype(dtype)
    kw = {
        "block_q": draw(st.integers(1, 45)),
        "num_threads": draw(st.integers(1, 3)),
        "scale": draw(st.one_of(st.none(), st.floats(0.01, 2.0))),
    }
    kind = draw(st.sampled_from(["none", "causal", "bool", "float"]))
    batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    mask_shape = draw(st.sampled_from([(L, S), batch + (L, S), batch + (1, S)]))
    if kind == "causal":
        kw["is_causal"] = True
    elif kind == "bool":
        # About one row in three fully masked, to exercise the zero rows.
        kw["attn_mask"] = rng.random(mask_shape) < draw(st.sampled_from([0.0, 0.3, 0.8, 1.0]))
    elif kind == "float":
        m = rng.normal(size=mask_shape).astype(dtype) * 3
        m[rng.random(mask_shape) < 0.3] = -np.inf
        kw["attn_mask"] = m
    return q, k, v, kw


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(attention_case())
def test_equals_direct_formula(case):
    q, k, v, kw = case
    assert_matches_direct(q, k, v, **kw)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_output_dtype_follows_input(dtype):
    rng = np.random.default_rng(0)
    q, k, v = (rng.normal(size=(2, 33, 8)).astype(dtype) for _ in range(3))
    got = assert_matches_direct(q, k, v, is_causal=True, block_q=8, num_threads=2)
    assert got.dtype == dtype


def test_large_input_default_settings_use_threads_and_blocks():
    # Above the small-input threshold the default path splits blocks over threads.
    rng = np.random.default_rng(1)
    q, k, v = (rng.normal(size=(2, 300, 16)).astype(np.float32) for _ in range(3))
    assert_matches_direct(q, k, v)
    assert_matches_direct(q, k, v, is_causal=True)


def test_causal_when_L_differs_from_S():
    rng = np.random.default_rng(2)
    for L, S in [(5, 12), (12, 5), (1, 7), (7, 1)]:
        q = rng.normal(size=(2, L, 4)).astype(np.float32)
        k = rng.normal(size=(2, S, 4)).astype(np.float32)
        v = rng.normal(size=(2, S, 3)).astype(np.float32)
        for bq in (1, 2, 3, 16):
            assert_matches_direct(q, k, v, is_causal=True, block_q=bq, num_threads=2)
        # Top-left alignment: query 0 sees key 0 only.
        out = fast_attention(q, k, v, is_causal=True)
        np.testing.assert_allclose(out[:, 0], v[:, 0], rtol=1e-6)


def test_fully_masked_rows_are_zero_for_bool_and_float_masks():
    rng = np.random.default_rng(3)
    q, k, v = (rng.normal(size=(6, 4)).astype(np.float32) for _ in range(3))
    keep = causal_mask(6)
    keep[2] = False
    for mask in (keep, np.where(keep, 0.0, -np.inf).astype(np.float32)):
        out = assert_matches_direct(q, k, v, attn_mask=mask, block_q=4, num_threads=2)
        assert np.all(out[2] == 0)
        assert np.isfinite(out).all()


def test_empty_sequences_give_empty_or_zero_output():
    q = np.zeros((2, 3, 4), np.float32)
    k = np.zeros((2, 0, 4), np.float32)
    v = np.zeros((2, 0, 5), np.float32)
    out = fast_attention(q, k, v)
    assert out.shape == (2, 3, 5) and np.all(out == 0)
    assert fast_attention(q[:, :0], q, q).shape == (2, 0, 4)


def test_large_logits_take_the_max_shift_path():
    # Scores near 1e4: without subtracting the row maximum, exp would overflow.
    q = np.array([[100.0, 0.0], [100.0, 100.0]], np.float32)
    k = np.array([[100.0, 0.0], [99.0, 1.0], [0.0, 100.0]], np.float32)
    v = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], np.float32)
    out = assert_matches_direct(q, k, v, scale=1.0)
    # Query 0 prefers key 0 by 100 (one-hot); query 1 scores 1e4 on all three keys (a tie).
    np.testing.assert_allclose(out, [[1.0, 2.0], [3.0, 4.0]], atol=1e-6)


def test_huge_values_do_not_overflow_when_the_shift_is_skipped():
    # Scores just inside the no-shift range give unnormalised weights near 2**30; with values
    # near float32's limit, p @ v would overflow unless the shift is taken after all.
    a = np.sqrt(30 / np.log2(np.e))
    q = np.array([[a]], np.float32)
    k = np.array([[a], [-a]], np.float32)
    v = np.array([[1e36, -1e36], [3e35, 1.0]], np.float32)
    out = assert_matches_direct(q, k, v, scale=1.0)
    assert np.isfinite(out).all()
    rng = np.random.default_rng(4)
    q, k = (rng.normal(size=(2, 50, 8)).astype(np.float32) for _ in range(2))
    v = (rng.normal(size=(2, 50, 8)) * 1e36).astype(np.float32)
    out = assert_matches_direct(q, k, v, num_threads=2, block_q=16)
    assert np.isfinite(out).all()
    # Equal scores over 1000 keys of 1e36: their plain sum overflows, their mean does not.
    q = np.zeros((3, 4), np.float32)
    k = rng.normal(size=(1000, 4)).astype(np.float32)
    v = np.full((1000, 2), 1e36, np.float32)
    out = assert_matches_direct(q, k, v, num_threads=2, block_q=2)
    np.testing.assert_allclose(out, 1e36, rtol=1e-4)


def test_float32_is_never_upcast():
    # Under NumPy 2, `x / np.sqrt(d)` would silently compute in float64: not here.
    rng = np.random.default_rng(5)
    q, k, v = (rng.normal(size=(2, 40, 9)).astype(np.float32) for _ in range(3))
    for kw in ({}, {"scale": np.float64(0.3)}, {"attn_mask": np.zeros((40, 40))}):
        assert fast_attention(q, k, v, num_threads=2, block_q=8, **kw).dtype == np.float32


def test_views_and_heads_from_split_heads():
    # Non-contiguous inputs (per-head views of one embedding) work without a copy by the caller.
    rng = np.random.default_rng(6)
    x = rng.normal(size=(2, 30, 24)).astype(np.float32)
    heads = split_heads(x, 3)                                   # (2, 3, 30, 8), a view
    kt = np.ascontiguousarray(np.swapaxes(heads, -1, -2))
    k = np.swapaxes(kt, -1, -2)                                 # column-major per head
    assert_matches_direct(heads, k, heads[..., ::-1], is_causal=True, block_q=7, num_threads=2)


def test_blas_thread_limit_is_restored():
    threadpoolctl = pytest.importorskip("threadpoolctl")
    before = [i["num_threads"] for i in threadpoolctl.threadpool_info()]
    rng = np.random.default_rng(7)
    q = rng.normal(size=(4, 64, 16)).astype(np.float32)
    fast_attention(q, q, q, num_threads=2)
    assert [i["num_threads"] for i in threadpoolctl.threadpool_info()] == before


@pytest.mark.parametrize("kw, err, fragment", [
    ({"block_q": 0}, ValueError, "block_q"),
    ({"num_threads": 0}, ValueError, "num_threads"),
    ({"block_q": 2.5}, TypeError, "block_q"),
    ({"is_causal": True, "attn_mask": np.ones((3, 3), bool)}, ValueError, "is_causal"),
    ({"attn_mask": np.ones((2, 3), bool)}, ValueError, "attn_mask"),
    ({"attn_mask": np.ones((3, 3), int)}, TypeError, "attn_mask"),
])
def test_bad_arguments_are_named(kw, err, fragment):
    q = np.zeros((3, 4), np.float32)
    with pytest.raises(err, match=fragment):
        fast_attention(q, q, q, **kw)


def test_same_input_checks_as_the_reference():
    q = np.zeros((3, 4), np.float32)
    for args in [(q, q[:, :3], q), (q.astype(int), q, q), (q, q, q.astype(np.float64)),
                 (np.full((3, 4), np.nan, np.float32), q, q), (q[0], q, q)]:
        with pytest.raises((TypeError, ValueError)) as ref:
            scaled_dot_product_attention(*args)
        with pytest.raises(ref.type, match=str(ref.value)[:25].replace("(", r"\(")):
            fast_attention(*args)


def test_default_block_q_keeps_the_score_buffer_within_a_few_mib():
    for S in (1, 100, 1024, 4096, 10_000, 100_000):
        for itemsize in (4, 8):
            bq = default_block_q(S, itemsize)
            assert 16 <= bq <= 256 and bq % 16 == 0
            if bq > 16:
                assert bq * S * itemsize <= 2 * 2**20


# ---------------------------------------------------------------- the benchmark script

def load_bench():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "benchmarks" / "run.py"
    spec = importlib.util.spec_from_file_location("bench_run", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fake_times(bench, sizes, per_variant):
    """Times for every (n, variant, mask): seconds per variant, causal half, padding 3/4."""
    factor = {"none": 1.0, "causal": 0.5, "padding": 0.75}
    return {(n, name, mask): t * factor[mask] * n / 4096 for n in sizes
            for name, t in per_variant.items() for mask in bench.MASKS}


def test_bench_table_ratios_floor_and_both_languages():
    bench = load_bench()
    sizes = (1024, 4096)
    times = fake_times(bench, sizes, {"direct": 4.0, "fast": 0.9, "online": 3.0, "torch": 1.0})
    times[4096, "fast", "causal"] = 0.9 / 1.7          # causal 1.7 times faster than no mask
    # At n = 4096 the two products take 0.4 s at the GEMM rate, the exps 0.35 s: a floor of
    # 0.75 s without a mask, 0.75 · 4097 / 8192 s causal, 0.75 · 3/4 s with padding.
    gemm_rate = bench.flops(4096) / 0.4
    exp_rate = bench.BATCH * bench.HEADS * 4096**2 / 0.35
    mib = {(n, name): 10.0 for n in sizes for name in bench.VARIANTS}
    rows = bench.build_rows(sizes, list(bench.VARIANTS), bench.MASKS, times, gemm_rate, mib,
                            exp_rate)
    table = bench.markdown_table(rows, bench.MASKS, with_torch=True)
    # no mask: 900 ms, 0.90 × torch, 1.20 × floor; causal: 529.4 ms, 1.41 × its floor;
    # padding: 675 ms, 1.20 × its floor; no mask / causal 1.70
    assert ("| 4096 | fast_attention | 900.0 | 0.90 | 1.20 | 529.4 | 1.06 | 1.41 | 675.0 | 0.90 "
            "| 1.20 | 1.70 |") in table
    assert "| 4096 | floor | 750.0 | 0.75 | 1.00 | 375.1 | 0.75 | 1.00 | 562.5 | 0.75 | 1.00 |" in table
    assert "| 44 % | 10.0 |" in table                   # 0.4 s at the GEMM rate, 0.9 s taken
    assert bench.floor_seconds(4096, "causal", gemm_rate, exp_rate) == pytest.approx(
        0.75 * 4097 / 8192)
    targets = "\n".join(bench.target_lines(rows, bench.MASKS, "NumPy SIMD X, BLAS Y"))
    assert "fast_attention ÷ floor, no mask, on NumPy SIMD X, BLAS Y: n = 1024: " in targets
    assert "n = 4096: 1.20 (target ≤ 1.1) — NOT met" in targets
    zh = bench.markdown_table(rows, bench.MASKS, with_torch=True, lang="zh")
    assert "因果掩码（毫秒）" in zh and "直接公式（NumPy）" in zh and "× 下限" in zh
    assert "no mask" not in zh and "floor" not in zh
    compact = bench.compact_table(rows, bench.MASKS, True, lang="zh")
    assert "| 4096 | 900.0 | 0.90 | 1.20 |" in compact and "实现" not in compact
    no_torch = [v for v in bench.VARIANTS if v != "torch"]
    rows = bench.build_rows(sizes, no_torch, bench.MASKS, times, gemm_rate, mib, exp_rate)
    table = bench.markdown_table(rows, bench.MASKS, with_torch=False)
    assert "torch" not in table and "PyTorch" not in table and "× floor" in table


def test_bench_stored_files_hold_measurements_and_no_goals(tmp_path):
    # Goals belong to the console: the stored tables and figures show measurements only.
    bench = load_bench()
    sizes = (256, 1024)
    times = fake_times(bench, sizes, {"fast": 0.9, "torch": 1.0})
    rows = bench.build_rows(sizes, ["fast", "torch"], bench.MASKS, times, 1e11, {}, 1e9)
    header = [{"en": "CPU: test", "zh": "CPU：测试"}]
    for lang in ("en", "zh"):
        path = tmp_path / f"{lang}.md"
        bench.write_markdown(path, rows, bench.MASKS, header, True, 2048, lang)
        text = path.read_text(encoding="utf-8")
        for word in ("target", "met", "≤", "目标", "达标", "goal"):
            assert word not in text, (lang, word)
    source = "\n".join(str(v) for v in bench.PLOT_TEXT["en"].values())
    assert "target" not in source and "目标" not in "".join(bench.PLOT_TEXT["zh"].values())


def test_bench_times_only_the_variants_asked_for(tmp_path, monkeypatch):
    bench = load_bench()
    monkeypatch.setenv("BENCH_NO_TORCH", "1")
    code = bench.main(["--sizes", "64", "--repeats", "1", "--no-memory", "--no-notebooks",
                       "--variants", "fast", "--out", str(tmp_path)])
    assert code == 0
    text = (tmp_path / "bench_attention_en.md").read_text(encoding="utf-8")
    assert "| 64 | fast_attention |" in text and "| 64 | floor |" in text
    assert "| 64 | direct NumPy |" not in text and "| 64 | online softmax |" not in text


def test_bench_prints_numpys_simd_extensions():
    bench = load_bench()
    simd = bench.numpy_simd()
    assert bench.simd_line()["en"].startswith(f"NumPy SIMD level: {simd['level']} (baseline ")


def test_bench_leaves_slow_variants_out_of_long_sequences():
    bench = load_bench()
    assert bench.runs("fast", 8192) and bench.runs("torch", 8192)
    assert not bench.runs("direct", 8192) and bench.runs("direct", 4096)
    keep = bench.padding_keep(16)
    assert keep.shape == (1, 1, 1, 16) and keep.sum() == 12 and keep[..., :12].all()


def test_bench_runs_end_to_end_without_torch(tmp_path, monkeypatch, capsys):
    bench = load_bench()
    monkeypatch.setenv("BENCH_NO_TORCH", "1")
    code = bench.main(["--sizes", "64", "--repeats", "1", "--no-memory", "--no-notebooks",
                       "--out", str(tmp_path)])
    assert code == 0
    text = (tmp_path / "bench_attention_en.md").read_text(encoding="utf-8")
    assert "| 64 | fast_attention |" in text and "Without PyTorch" in text
    zh = (tmp_path / "bench_attention_zh.md").read_text(encoding="utf-8")
    assert "| 64 | fast_attention |" in zh and "没有 PyTorch" in zh and "Without" not in zh
    for lang in ("en", "zh"):
        assert (tmp_path / f"bench_attention_{lang}.png").stat().st_size > 10_000
    assert "× floor" in text and "exp rate" in text and "NumPy SIMD level" in text
    out = capsys.readouterr().out
    assert "BLAS:" in out and "not measured (no n of 256 or more)" in out


def test_calls_from_other_threads_agree_and_leave_blas_alone():
    # Only the main thread changes the BLAS thread count (OpenBLAS may ignore it from others).
    threadpoolctl = pytest.importorskip("threadpoolctl")
    from concurrent.futures import ThreadPoolExecutor

    before = [i["num_threads"] for i in threadpoolctl.threadpool_info()]
    rng = np.random.default_rng(8)
    cases = [tuple(rng.normal(size=(3, 90 + 10 * i, 8)).astype(np.float32) for _ in range(3))
             for i in range(6)]
    with ThreadPoolExecutor(max_workers=3) as pool:
        outs = list(pool.map(lambda c: fast_attention(*c, num_threads=2, block_q=16), cases))
    for (q, k, v), out in zip(cases, outs, strict=True):
        np.testing.assert_allclose(out, scaled_dot_product_attention(q, k, v), atol=2e-5)
    assert [i["num_threads"] for i in threadpoolctl.threadpool_info()] == before


# ---------------------------------------------------------------- regressions

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("fill", ["min", "-0.7max", "-1e9"])
def test_huge_negative_finite_mask_blocks_like_the_direct_formula(dtype, fill):
    # HuggingFace masks with finfo(dtype).min, keras and jax with -0.7·finfo.max. Times log2(e)
    # such a number overflowed to -inf, and the fully masked row came out as zeros instead of
    # the mean of v that the direct formula (and PyTorch) gives.
    value = {"min": np.finfo(dtype).min, "-0.7max": -0.7 * np.finfo(dtype).max,
             "-1e9": -1e9}[fill]
    rng = np.random.default_rng(9)
    q, k = rng.normal(size=(4, 8)).astype(dtype), rng.normal(size=(5, 8)).astype(dtype)
    v = rng.normal(size=(5, 6)).astype(dtype)
    m = np.zeros((4, 5), dtype)
    m[1] = value                         # a fully masked row
    m[2, :3] = value                     # a partly masked row
    for kw in ({}, {"num_threads": 2, "block_q": 1}):
        out = fast_attention(q, k, v, attn_mask=m, **kw)   # no overflow warning (an error here)
        want = scaled_dot_product_attention(q, k, v, attn_mask=m)
        if fill != "-1e9" or dtype == np.float32:
            # The score is lost against the mask in the working precision: uniform weights.
            np.testing.assert_allclose(out[1], v.mean(0), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(out[2], scaled_dot_product_attention(q[2:3], k[3:], v[3:])[0],
                                   rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("num_threads", [None, 1, 2])
def test_empty_batch_gives_an_empty_output(num_threads):
    q = np.zeros((0, 3, 5, 8), np.float32)
    out = fast_attention(q, q, q, num_threads=num_threads)
    assert out.shape == (0, 3, 5, 8) and out.dtype == np.float32
    assert fast_attention(q, q, q[..., :2], is_causal=True, num_threads=2).shape == (0, 3, 5, 2)


# ---------------------------------------------------------------- key padding, helper threads

@pytest.mark.parametrize("layout", ["suffix", "scattered", "empty_head", "all_real"])
@pytest.mark.parametrize("kind", ["bool", "-inf", "finfo.min", "bias"])
def test_key_padding_masks_drop_keys_and_keep_the_answer(layout, kind):
    # A mask of shape (..., 1, S) blocks a key for every query: such keys are dropped before
    # any score is computed (views for padding at the end, a gather otherwise).
    rng = np.random.default_rng(10)
    B, H, L, S, E = 3, 2, 37, 29, 8
    q = rng.normal(size=(B, H, L, E)).astype(np.float32)
    k, v = (rng.normal(size=(B, H, S, E)).astype(np.float32) for _ in range(2))
    real = np.ones((B, 1, 1, S), bool)
    if layout == "suffix":
        real[0, ..., 20:] = False
        real[1, ..., 1:] = False
    elif layout == "scattered":
        real[..., ::3] = False
    elif layout == "empty_head":
        real[1] = False                      # every key of sequence 1 blocked
    if kind == "bool":
        mask = real
    elif kind == "bias":
        mask = np.where(real, rng.normal(size=real.shape), -np.inf).astype(np.float32)
    else:
        blocked = -np.inf if kind == "-inf" else np.finfo(np.float32).min
        mask = np.where(real, 0.0, blocked).astype(np.float32)
    for kw in ({}, {"num_threads": 2, "block_q": 8}, {"num_threads": 1, "block_q": 5}):
        out = assert_matches_direct(q, k, v, attn_mask=mask, **kw)
        if layout == "empty_head" and kind in ("bool", "-inf"):
            assert np.all(out[1] == 0)
        if layout == "empty_head" and kind == "finfo.min":
            np.testing.assert_allclose(out[1], np.broadcast_to(v[1].mean(-2, keepdims=True),
                                                               out[1].shape), atol=1e-6)


def test_helper_threads_are_started_once_and_survive_an_error(monkeypatch):
    import threading

    import attention_course.fast.kernel as fast

    rng = np.random.default_rng(11)
    q, k, v = (rng.normal(size=(4, 64, 16)).astype(np.float32) for _ in range(3))
    fast_attention(q, k, v, num_threads=3, block_q=8)
    started = threading.active_count()
    for _ in range(5):
        fast_attention(q, k, v, num_threads=3, block_q=8)
    assert threading.active_count() == started              # no new threads per call

    calls = []
    original = fast._Job.block

    def failing(self, h, i0, *args):
        calls.append(i0)
        if len(calls) == 5:
            raise RuntimeError("a block failed")
        return original(self, h, i0, *args)

    monkeypatch.setattr(fast._Job, "block", failing)
    with pytest.raises(RuntimeError, match="a block failed"):
        fast_attention(q, k, v, num_threads=3, block_q=8)
    monkeypatch.undo()
    assert_matches_direct(q, k, v, num_threads=3, block_q=8)  # the helpers still work


@pytest.mark.parametrize("where", ["q", "k", "v"])
@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_nan_or_inf_anywhere_is_refused_even_where_no_score_reads_it(where, bad):
    # fast_attention reads NaN and inf off the norms it computes per head; the values must be
    # caught even in keys a causal block never reaches and in heads a padding mask empties.
    rng = np.random.default_rng(12)
    q = rng.normal(size=(2, 3, 8)).astype(np.float32)
    k, v = (rng.normal(size=(2, 9, 8)).astype(np.float32) for _ in range(2))
    arrays = {"q": q, "k": k, "v": v}
    arrays[where][1, -1, -1] = bad                     # key 8: after every query (causal)
    name = "NaN" if np.isnan(bad) else "inf"
    keep = np.ones((2, 1, 9), bool)
    keep[1] = False                                    # sequence 1 entirely padding
    for kw in ({"is_causal": True}, {"attn_mask": keep}, {"num_threads": 2, "block_q": 1}):
        with pytest.raises(ValueError, match=f"{where} contains {name}"):
            fast_attention(q, k, v, **kw)


def test_huge_finite_inputs_whose_squares_overflow_are_not_refused():
    q = np.full((2, 4), 1e20, np.float32)               # |q|² overflows float32, q does not
    k = np.array([[1e-20, 0, 0, 0], [0, 1e-20, 0, 0]], np.float32)
    v = np.eye(2, dtype=np.float32)
    assert_matches_direct(q, k, v)


@pytest.mark.slow   # runs a notebook kernel
def test_bench_notebook_timing_keeps_the_kernel_tcp_warning_out(tmp_path, capfd):
    # The kernel's process writes to this process's stderr unless the bench redirects it:
    # capfd sees both, so the warning would show here if it were let through.
    import nbformat

    bench = load_bench()
    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_code_cell("import sys; print('to stderr', file=sys.stderr)"))
    path = tmp_path / "tiny.ipynb"
    nbformat.write(nb, path)
    logged = []
    seconds = bench.time_notebook(path, timeout=120, log=logged.append)
    assert seconds > 0
    assert not any(bench.KERNEL_WARNING in line for line in logged), logged
    captured = capfd.readouterr()
    assert bench.KERNEL_WARNING not in captured.err + captured.out


def test_a_helper_that_never_gets_a_core_is_not_waited_for(monkeypatch):
    # On a busy machine a helper thread may start late; the caller, done with every block,
    # cancels its part instead of waiting. Here the helper never starts at all.
    import queue

    import attention_course.fast.thread_pool as pool

    stuck = queue.SimpleQueue()                  # an inbox nobody reads
    monkeypatch.setattr(pool._helpers, "inboxes", lambda n: [stuck] * n)
    rng = np.random.default_rng(13)
    q, k, v = (rng.normal(size=(3, 40, 8)).astype(np.float32) for _ in range(3))
    assert_matches_direct(q, k, v, num_threads=2, block_q=8)
    _, _, ticket, _ = stuck.get_nowait()
    assert ticket.cancelled and not ticket.started


@pytest.mark.parametrize("is_causal", [False, True])
def test_small_blocks_of_several_heads_give_the_same_numbers(is_causal):
    # Short sequences: several heads share one block (one call into NumPy for all of them).
    import attention_course.fast.kernel as fast

    rng = np.random.default_rng(14)
    q, k, v = (rng.normal(size=(2, 4, 48, 16)).astype(np.float32) for _ in range(3))
    job = fast._Job(q, k, v, None, is_causal, 0.25, (2, 4), 16, 2)
    assert job.group > 1 and isinstance(job.blocks[0][0], slice)
    assert_matches_direct(q, k, v, is_causal=is_causal, num_threads=2, block_q=16)
    # Heads whose query norms differ: one needs the max-shift, the group takes it for all.
    q[1, 2] *= 40
    assert_matches_direct(q, k, v, is_causal=is_causal, num_threads=2, block_q=16)
    # A view that cannot be flattened without a copy keeps one head per block.
    qt = np.swapaxes(np.swapaxes(q, 0, 1).copy(), 0, 1)
    assert fast._Job(qt, k, v, None, is_causal, 0.25, (2, 4), 16, 2).group == 1
    assert_matches_direct(qt, k, v, is_causal=is_causal, num_threads=2, block_q=16)


def test_blas_runs_on_one_thread_inside_the_blocks(monkeypatch):
    threadpoolctl = pytest.importorskip("threadpoolctl")
    import attention_course.fast.kernel as fast

    seen = []
    original = fast._Job.block

    def watching(self, *args):
        seen.append([i["num_threads"] for i in threadpoolctl.threadpool_info()
                     if i["user_api"] == "blas"])
        return original(self, *args)

    monkeypatch.setattr(fast._Job, "block", watching)
    before = [i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"]
    q = np.random.default_rng(15).normal(size=(4, 64, 16)).astype(np.float32)
    fast_attention(q, q, q, num_threads=2, block_q=16)
    assert seen and all(counts == [1] * len(before) for counts in seen)
    assert [i["num_threads"] for i in threadpoolctl.threadpool_info()
            if i["user_api"] == "blas"] == before


def test_buffers_kept_between_calls_do_not_leak_numbers():
    # Each thread keeps its score buffer from one call to the next: a second call with other
    # shapes and dtypes must not see what the first one left there.
    rng = np.random.default_rng(16)
    big = [rng.normal(size=(2, 100, 8)).astype(np.float64) * 5 for _ in range(3)]
    small = [rng.normal(size=(3, 7, 4)).astype(np.float32) for _ in range(3)]
    for _ in range(2):
        assert_matches_direct(*big, num_threads=2, block_q=32)
        assert_matches_direct(*small, num_threads=2, block_q=3, is_causal=True)
        assert_matches_direct(*small, num_threads=1)


@pytest.mark.parametrize("layout", ["suffix", "scattered"])
@pytest.mark.parametrize("kind", ["bool", "-inf", "finfo.min", "bias"])
def test_a_padding_row_shared_by_every_head_drops_keys_once_and_groups_heads(layout, kind):
    # A mask of shape (1, 1, 1, S) blocks the same keys in every head: they leave k and v
    # before the blocks are made, so short sequences can still take several heads per block.
    import attention_course.fast.kernel as fast

    rng = np.random.default_rng(17)
    q, k, v = (rng.normal(size=(2, 4, 48, 16)).astype(np.float32) for _ in range(3))
    real = np.ones((1, 1, 1, 48), bool)
    if layout == "suffix":
        real[..., 36:] = False
    else:
        real[..., ::4] = False
    if kind == "bool":
        mask = real
    elif kind == "bias":
        mask = np.where(real, rng.normal(size=real.shape), -np.inf).astype(np.float32)
    else:
        blocked = -np.inf if kind == "-inf" else np.finfo(np.float32).min
        mask = np.where(real, 0.0, blocked).astype(np.float32)
    job = fast._Job(q, k, v, mask, False, 0.25, (2, 4), 16, 2)
    kept = 48 if kind == "finfo.min" else 36          # finfo.min is a weight, not a block
    assert job.k.shape[-2] == job.v.shape[-2] == kept
    assert job.group > 1 and isinstance(job.blocks[0][0], slice)
    assert (job.bias is not None) == (kind in ("bias", "finfo.min"))
    for kw in ({}, {"num_threads": 2, "block_q": 16}, {"num_threads": 1, "block_q": 7}):
        assert_matches_direct(q, k, v, attn_mask=mask, **kw)
    none_real = np.zeros((1, 48), bool)                # no key at all: every row is zero
    assert np.all(fast_attention(q, k, v, attn_mask=none_real) == 0)


@pytest.mark.parametrize("where", ["k", "v"])
def test_nan_in_a_key_that_a_shared_padding_row_drops_is_refused(where):
    rng = np.random.default_rng(18)
    q = rng.normal(size=(2, 3, 8)).astype(np.float32)
    k, v = (rng.normal(size=(2, 9, 8)).astype(np.float32) for _ in range(2))
    {"k": k, "v": v}[where][1, -1, 0] = np.nan
    keep = np.ones(9, bool)
    keep[-1] = False                                   # the same for both heads: dropped once
    with pytest.raises(ValueError, match=f"{where} contains NaN"):
        fast_attention(q, k, v, attn_mask=keep)
