"""Attention side by side: direct NumPy, fast_attention, online softmax and PyTorch SDPA.

Each under three masks (none, causal, key padding), then the execution time of every course
notebook (both languages), the way a learner runs them.

    python benchmarks/run.py                 # the full run (what `make bench` calls), into build/bench/
    python benchmarks/run.py --quick         # n = 256, 512 and few repeats (or BENCH_QUICK=1)
    python benchmarks/run.py --variants fast torch   # only these two next to the floor
    python benchmarks/run.py --help          # sizes, repeats, output folder, skipping parts

`make bench` first installs what this compares against (dependency group bench) and runs
this script with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset, so that NumPy's OpenBLAS picks
the kernel a user's CPU would get; the header says which kernel it ran.

Method
------
* Every variant computes the same thing: float32, batch 1, 8 heads, d = 64. Masks: none;
  ``is_causal=True``; a boolean key-padding mask of shape (1, 1, 1, n) whose last quarter of
  keys is padding (torch gets the same boolean mask).
* Timing: for each n, every (variant, mask) pair is measured in rounds, the order rotating
  from round to round, so that a disturbance (another process, a frequency change) hits all of
  them alike; the tables show the median of each pair's timed calls, and the ratios are ratios
  of those medians, from the same run. A call under 0.3 s is first called untimed for 0.15 s,
  then timed three times in a row; a longer call is called once untimed, then timed once per
  round. The untimed calls matter: idle OpenBLAS threads keep spinning for about 0.1 s after a
  call, and OpenMP threads for a shorter while, slowing down whatever is timed next. They also
  put each variant in the steady state of a loop of calls, which is what a model running layer
  after layer sees: every timed call follows a call of the same variant, mask and n.
* Memory: the direct formula's n×n arrays (128 MiB each at n = 2048) come fresh from the
  operating system at every call, and the first write to each page costs a page fault. What a
  fault costs depends on what ran before: on the 2-core virtual machine of the stored run
  (other processes running, load 8), writing 128 MiB of fresh pages took a median of 60 ms
  when that much had been freed under half a second earlier, and 450–590 ms when it had been
  freed one to four seconds earlier, with the same 576 page faults. Without the untimed call,
  the pair that follows the small-memory ones in the rotation (always the same one: the direct
  formula without a mask) paid for that, and at n = 2048 was timed 3.2× slower than the causal
  call, which does more work. The console shows each pair's minor page faults per timed call
  (median).
* Effective GFLOP/s counts 4·n²·d operations per head (``attention_flops``) without a mask,
  whatever a variant really does. It is set against the rate of a large float32 NumPy matrix
  product (2048 × 2048, all cores) measured in the same rounds.
* The floor: the least time NumPy can take for the work a mask kind needs, from two rates
  measured in the same rounds. The GEMM rate is that of the 2048 × 2048 product; the exp rate
  is that of float32 ``np.exp`` on an in-cache block of 256 Ki elements on one thread, times
  the threads ``fast_attention`` uses (NumPy's ``exp`` runs on one core). Per head, a mask kind
  needs n² score entries without a mask, n(n+1)/2 causal, (¾n)·n with the padding mask; each
  entry costs 4·d operations of the two matrix products at the GEMM rate and one ``exp`` at
  the exp rate. × floor is a variant's time divided by the floor.
* Peak extra memory (no mask): each variant runs once in a fresh child process; the figure is
  the peak resident memory during that call minus the resident memory just before it (inputs,
  libraries and thread pools already in place). It includes the (1, 8, n, 64) output.
* The direct formula and the online softmax are left out above n = 4096 (their time and, for
  the direct formula, gigabytes of scores would dominate the run).
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

# machine.py sits next to this file; a test loads this file by its path, without that folder on
# sys.path
sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import cpu_kind, cpu_name, load_average, numpy_simd, torch_description  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
# The stored run ships inside the library (attention_course.cost.stored_bench reads it), so
# that notebook 06 finds it wherever the notebook is.
STORED = ROOT / "src" / "attention_course" / "data"
# A run writes here, never over the stored run: make bench-store copies it to STORED when it is
# to replace the stored one.
OUT = ROOT / "build" / "bench"
HEADS, D, BATCH = 8, 64, 1
FULL_SIZES = (256, 512, 1024, 2048, 4096, 8192)
QUICK_SIZES = (256, 512)
GEMM_N = 2048
# Calls shorter than SHORT_CALL_S are timed SHORT_PER_ROUND times per round, after SETTLE_S
# of untimed calls of the same variant; longer ones once per round, after one untimed call.
SHORT_CALL_S = 0.3
SETTLE_S = 0.15
SHORT_PER_ROUND = 3
VARIANTS = ("direct", "fast", "online", "torch")
MASKS = ("none", "causal", "padding")
PADDING = 0.25                      # share of the keys that are padding in the padding column
MAX_N = {"direct": 4096, "online": 4096}
LABELS = {
    "en": {"direct": "direct NumPy", "fast": "fast_attention", "online": "online softmax",
           "torch": "PyTorch SDPA", "floor": "floor"},
    "zh": {"direct": "直接公式（NumPy）", "fast": "fast_attention", "online": "在线 softmax",
           "torch": "PyTorch SDPA", "floor": "下限"},
}
MASK_LABELS = {
    "en": {"none": "no mask", "causal": "causal", "padding": "key padding"},
    "zh": {"none": "无掩码", "causal": "因果掩码", "padding": "填充掩码"},
}
EXP_BLOCK = 256 * 1024              # elements per thread for the exp rate: in cache
# Console only, never in the stored files: fast_attention's time ÷ the floor, the most it may
# take on the CPU kind measured (n ≥ 1024, and n = 256–512).
TARGET_FLOOR_LARGE, TARGET_FLOOR_SMALL = 1.1, 1.5
# Console only: the course's time budgets for executing the notebooks (both languages).
BUDGET_NOTEBOOKS_S = 140.0
BUDGET_NOTEBOOK_S = {"07": 12.0, "08": 15.0, "09": 20.0}
KERNEL_WARNING = "Kernel is running over TCP without encryption"


def target_floor_ratio(n: int) -> float | None:
    return TARGET_FLOOR_LARGE if n >= 1024 else (TARGET_FLOOR_SMALL if n >= 256 else None)


# ---------------------------------------------------------------- variants

def torch_available() -> bool:
    if os.environ.get("BENCH_NO_TORCH"):
        return False
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def make_inputs(n: int, seed: int = 0):
    """q, k, v of shape (BATCH, HEADS, n, D), float32, made without a float64 temporary."""
    rng = np.random.default_rng(seed)
    return tuple(rng.standard_normal((BATCH, HEADS, n, D), dtype=np.float32) for _ in range(3))


def padding_keep(n: int) -> np.ndarray:
    """(1, 1, 1, n) boolean key-padding mask: True for the real keys, the last quarter padding."""
    keep = np.ones((1, 1, 1, n), bool)
    keep[..., n - int(n * PADDING):] = False
    return keep


def mask_kwargs(mask: str, n: int) -> dict:
    if mask == "causal":
        return {"is_causal": True}
    if mask == "padding":
        return {"attn_mask": padding_keep(n)}
    return {}


def runs(variant: str, n: int) -> bool:
    return n <= MAX_N.get(variant, n)


def make_call(variant: str, q, k, v, mask: str = "none"):
    """A no-argument function that computes attention once with the given variant and mask."""
    kw = mask_kwargs(mask, q.shape[-2])
    if variant == "torch":
        import torch

        tq, tk, tv = (torch.from_numpy(a) for a in (q, k, v))   # shares memory, no copy
        tkw = {key: torch.from_numpy(val) if isinstance(val, np.ndarray) else val
               for key, val in kw.items()}
        sdpa = torch.nn.functional.scaled_dot_product_attention

        def call():
            with torch.inference_mode():
                return sdpa(tq, tk, tv, **tkw)
        return call
    from attention_course.attention import scaled_dot_product_attention
    from attention_course.chunked import online_softmax_attention
    from attention_course.fast import fast_attention

    fn = {"direct": scaled_dot_product_attention, "fast": fast_attention,
          "online": online_softmax_attention}[variant]
    return lambda: fn(q, k, v, **kw)


def flops(n: int) -> int:
    from attention_course.cost import attention_flops

    return attention_flops(n, D, num_heads=HEADS, batch=BATCH)


def least_entries(n: int, mask: str) -> float:
    """Score entries per head that a mask kind needs: n², n(n+1)/2 causal, (¾n)·n padding."""
    if mask == "causal":
        return n * (n + 1) / 2
    if mask == "padding":
        return (n - int(n * PADDING)) * n
    return float(n * n)


def floor_seconds(n: int, mask: str, gemm_rate: float, exp_rate: float) -> float:
    """The least work of a mask kind at the two measured rates: 4·d operations per entry of
    the two matrix products at the GEMM rate, one exp per entry at the exp rate."""
    entries = BATCH * HEADS * least_entries(n, mask)
    return entries * 4 * D / gemm_rate + entries / exp_rate


def fast_threads() -> int:
    from attention_course.fast.thread_pool import available_cpus

    return available_cpus()


# ---------------------------------------------------------------- timing

def minor_faults() -> int:
    """Minor page faults of this process so far (first touches of fresh memory)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def measure_times(sizes, variants, masks, repeats_for, gemm_n, log=print):
    """Median seconds per (n, variant, mask), the GEMM rate in FLOP/s and the exp rate in
    exps/s (all threads), from the same rounds. The log also shows each pair's median minor
    page faults per timed call."""
    rng = np.random.default_rng(1)
    a = rng.standard_normal((gemm_n, gemm_n), dtype=np.float32)
    b = rng.standard_normal((gemm_n, gemm_n), dtype=np.float32)
    calls_gemm = lambda: a @ b  # noqa: E731
    calls_gemm()
    # Scores of the size attention meets: standard normal, in place, one thread.
    x = rng.standard_normal(EXP_BLOCK, dtype=np.float32)
    y = np.empty_like(x)
    calls_exp = lambda: np.exp(x, out=y)  # noqa: E731
    gemm_samples, exp_samples = [], []
    times = {}
    for n in sizes:
        q, k, v = make_inputs(n)
        calls = {(name, mask): make_call(name, q, k, v, mask)
                 for name in variants if runs(name, n) for mask in masks}
        calls["gemm"] = calls_gemm
        calls["exp"] = calls_exp
        last = {}
        for key, call in calls.items():    # warm up: thread pools, BLAS buffers, page faults
            start = time.perf_counter()
            call()
            last[key] = time.perf_counter() - start
        samples = {key: [] for key in calls}
        faults = {key: [] for key in calls}
        keys = list(calls)
        for r in range(repeats_for(n)):
            shift = r % len(keys)
            for key in keys[shift:] + keys[:shift]:
                if last[key] < SHORT_CALL_S:
                    # Untimed calls of this pair for SETTLE_S first: meanwhile the previous
                    # pair's idle threads stop spinning, and this one reaches the steady state
                    # of a loop of calls. Then several timed calls in a row.
                    settle_until = time.perf_counter() + SETTLE_S
                    calls[key]()
                    while time.perf_counter() < settle_until:
                        calls[key]()
                    repeats = SHORT_PER_ROUND
                else:
                    # One untimed call first, so that the timed one meets the memory its own
                    # kind left behind, not that of the pair before it in the rotation (the
                    # pair after the small-memory ones would otherwise pay for fresh pages).
                    calls[key]()
                    repeats = 1
                for _ in range(repeats):
                    touched = minor_faults()
                    start = time.perf_counter()
                    calls[key]()
                    last[key] = time.perf_counter() - start
                    faults[key].append(minor_faults() - touched)
                    samples[key].append(last[key])
        for key in calls:
            if key not in ("gemm", "exp"):
                times[(n, *key)] = statistics.median(samples[key])
        gemm_samples += samples["gemm"]
        exp_samples += samples["exp"]
        for mask in masks:
            shown = "  ".join(f"{name} {times[n, name, mask] * 1e3:8.1f} ms "
                              f"({statistics.median(faults[name, mask]):.0f} faults)"
                              for name in variants if (n, name, mask) in times)
            log(f"  n = {n:5d}  {mask:8s} {shown}")
        del q, k, v, calls
    gemm_rate = 2 * gemm_n**3 / statistics.median(gemm_samples)
    exp_rate = EXP_BLOCK / statistics.median(exp_samples) * fast_threads()
    return times, gemm_rate, exp_rate


# ---------------------------------------------------------------- memory

def _current_rss_bytes() -> int | None:
    try:
        with open("/proc/self/statm", encoding="utf-8") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return None


def _peak_rss_bytes() -> int:
    try:
        with open("/proc/self/status", encoding="utf-8") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024   # bytes on macOS, KiB on Linux


def _reset_peak_rss() -> bool:
    """Linux can reset the peak-RSS mark to the current RSS (writing 5 to clear_refs)."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="utf-8") as f:
            f.write("5")
        return True
    except OSError:
        return False


def memory_child(variant: str, n: int) -> float:
    """Run in a fresh process: MiB of peak resident memory one call adds."""
    q, k, v = make_inputs(n)
    # Load the libraries and start their threads (n = 128 is above fast_attention's
    # single-thread size), so that only what the call itself needs is counted.
    make_call(variant, *make_inputs(128))()
    call = make_call(variant, q, k, v)
    if _reset_peak_rss():
        before = _current_rss_bytes()
    else:                                  # no reset: the peak so far is the baseline
        before = _peak_rss_bytes()
    out = call()
    peak = _peak_rss_bytes()
    del out
    return max(0, peak - before) / 2**20


def measure_memory(sizes, variants, log=print):
    mib = {}
    for n in sizes:
        for name in variants:
            if not runs(name, n):
                continue
            proc = subprocess.run(
                [sys.executable, str(Path(__file__).resolve()), "--memory-child", name, str(n)],
                capture_output=True, text=True, encoding="utf-8", check=False,
            )
            if proc.returncode != 0:
                log(f"  memory of {name} at n = {n} failed:\n{proc.stderr.strip()}")
                mib[n, name] = float("nan")
            else:
                mib[n, name] = float(proc.stdout.strip().splitlines()[-1])
        log(f"  n = {n:5d}  " + "  ".join(f"{name} {mib[n, name]:8.1f} MiB" for name in variants
                                          if (n, name) in mib))
    return mib


# ---------------------------------------------------------------- what ran where

def blas_description() -> list[dict]:
    """One line per native thread pool (BLAS, OpenMP) that threadpoolctl finds loaded."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return [{"en": "BLAS: unknown (threadpoolctl is not installed)",
                 "zh": "BLAS：未知（没有安装 threadpoolctl）"}]
    lines = []
    for info in threadpool_info():
        kind = "BLAS" if info.get("user_api") == "blas" else "OpenMP"
        en, zh = [], []
        if info.get("architecture"):
            en.append(f"kernel {info['architecture']}")
            zh.append(f"内核 {info['architecture']}")
        en.append(f"{info.get('num_threads')} threads")
        zh.append(f"{info.get('num_threads')} 个线程")
        if info.get("threading_layer"):
            en.append(f"threading {info['threading_layer']}")
            zh.append(f"线程实现 {info['threading_layer']}")
        version = f" {info['version']}" if info.get("version") else ""
        lib = f"{info.get('internal_api')}{version} [{info.get('prefix')}]"
        lines.append({"en": f"{kind}: {lib} ({', '.join(en)})",
                      "zh": f"{kind}：{lib}（{'，'.join(zh)}）"})
    return lines or [{"en": "BLAS: none found by threadpoolctl",
                      "zh": "BLAS：threadpoolctl 没有找到"}]


def simd_line() -> dict:
    simd = numpy_simd()
    names = {key: " ".join(simd[key]) or "-" for key in ("baseline", "found", "not_found")}
    en = f"baseline {names['baseline']}; found {names['found']}; not found {names['not_found']}"
    zh = f"编译基线 {names['baseline']}；检测到 {names['found']}；未检测到 {names['not_found']}"
    return {"en": f"NumPy SIMD level: {simd['level']} ({en})",
            "zh": f"NumPy 的 SIMD 级别：{simd['level']}（{zh}）"}




def environment_lines() -> list[dict]:
    lines = []
    for key in sorted(os.environ):
        if key.startswith("OPENBLAS_") or key in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            lines.append({"en": f"environment: {key}={os.environ[key]}",
                          "zh": f"环境变量：{key}={os.environ[key]}"})
    if "OPENBLAS_CORETYPE" not in os.environ:
        lines.append({"en": "environment: OPENBLAS_CORETYPE not set (OpenBLAS picks the kernel "
                            "for this CPU; `make bench` unsets it)",
                      "zh": "环境变量：没有设置 OPENBLAS_CORETYPE（OpenBLAS 按这台 CPU 选择内核；"
                            "`make bench` 会取消这个设置）"})
    return lines


# ---------------------------------------------------------------- report

def build_rows(sizes, variants, masks, times, gemm_rate, mib, exp_rate=None):
    """One row per (n, variant) that ran, and one for the floor: what the tables and plot show."""
    rows = []
    for n in sizes:
        names = [name for name in variants if (n, name, masks[0]) in times]
        if exp_rate and names:
            names.append("floor")
        for name in names:
            row = {"n": n, "variant": name, "ms": {}, "ratio": {}, "x_floor": {}}
            for mask in masks:
                floor = floor_seconds(n, mask, gemm_rate, exp_rate) if exp_rate else None
                t = floor if name == "floor" else times[n, name, mask]
                row["ms"][mask] = t * 1e3
                theirs = times.get((n, "torch", mask))
                row["ratio"][mask] = t / theirs if theirs else None
                row["x_floor"][mask] = t / floor if floor else None
            t0 = row["ms"].get("none")
            tc = row["ms"].get("causal")
            row["causal_speedup"] = t0 / tc if t0 and tc else None
            rate = flops(n) / (t0 / 1e3) if t0 else None
            row["gflops"] = rate / 1e9 if rate else None
            row["gemm_share"] = rate / gemm_rate if rate else None
            row["mib"] = mib.get((n, name), float("nan"))
            rows.append(row)
    return rows


HEAD = {
    "en": {"n": "n", "variant": "variant", "ms": "{mask} (ms)", "ratio": "× torch",
           "floor": "× floor", "speedup": "no mask / causal", "gflops": "GFLOP/s",
           "gemm": "% of GEMM", "mib": "peak extra (MiB)"},
    "zh": {"n": "n", "variant": "实现", "ms": "{mask}（毫秒）", "ratio": "× torch",
           "floor": "× 下限", "speedup": "无掩码 / 因果", "gflops": "GFLOP/s",
           "gemm": "占 GEMM 速度", "mib": "额外峰值内存（MiB）"},
}


def markdown_table(rows, masks, with_torch: bool, lang: str = "en") -> str:
    h = HEAD[lang]
    with_floor = any(r["x_floor"].get(masks[0]) is not None for r in rows)
    cols = [h["n"], h["variant"]]
    for mask in masks:
        cols.append(h["ms"].format(mask=MASK_LABELS[lang][mask]))
        if with_torch:
            cols.append(h["ratio"])
        if with_floor:
            cols.append(h["floor"])
    if "causal" in masks and "none" in masks:
        cols.append(h["speedup"])
    cols += [h["gflops"], h["gemm"], h["mib"]]
    lines = ["| " + " | ".join(cols) + " |",
             "|:---|:---|" + "---:|" * (len(cols) - 2)]

    def fmt(x, spec):
        return "—" if x is None or (isinstance(x, float) and not np.isfinite(x)) else format(x, spec)

    for r in rows:
        cells = [str(r["n"]), LABELS[lang][r["variant"]]]
        for mask in masks:
            cells.append(fmt(r["ms"].get(mask), ".1f"))
            if with_torch:
                cells.append(fmt(r["ratio"].get(mask), ".2f"))
            if with_floor:
                cells.append(fmt(r["x_floor"].get(mask), ".2f"))
        if "causal" in masks and "none" in masks:
            cells.append(fmt(r["causal_speedup"], ".2f"))
        share = None if r["gemm_share"] is None else 100 * r["gemm_share"]
        cells += [fmt(r["gflops"], ".1f"), fmt(share, ".0f") + (" %" if share else ""),
                  fmt(r["mib"], ".1f")]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def compact_table(rows, masks, with_torch: bool, lang: str = "en") -> str:
    """fast_attention alone, one row per n: times, ratios to PyTorch and to the floor, GEMM share."""
    keep = [r for r in rows if r["variant"] == "fast"]
    name = LABELS[lang]["fast"]
    h = HEAD[lang]
    return markdown_table(keep, masks, with_torch, lang).replace(f" | {name} |", " |").replace(
        f"| {h['n']} | {h['variant']} |", f"| {h['n']} |").replace("|:---|:---|", "|:---|")


def target_lines(rows, masks, kind: str) -> list[str]:
    """Console only: fast_attention ÷ floor against the most it may take, with a verdict."""
    fast = {r["n"]: r for r in rows if r["variant"] == "fast"}
    lines = []
    for mask in masks:
        parts, ok = [], True
        for n in sorted(fast):
            ratio, limit = fast[n]["x_floor"].get(mask), target_floor_ratio(n)
            if ratio is None or limit is None:
                continue
            ok &= ratio <= limit
            parts.append(f"n = {n}: {ratio:.2f} (target ≤ {limit})")
        if parts:
            lines.append(f"fast_attention ÷ floor, {MASK_LABELS['en'][mask]}, on {kind}: "
                         + "; ".join(parts) + " — " + ("met" if ok else "NOT met"))
    if not lines:
        lines.append("fast_attention ÷ floor: not measured (no n of 256 or more)")
    return lines


METHOD = {
    "en": ("Time: median of timed calls, in rounds in which every variant and mask runs in turn "
           "(a call under 0.3 s is timed three times in a row per round, after 0.15 s of untimed "
           "calls of the same variant, so that no thread of the previous one is still spinning; "
           "a longer call is timed once per round, after one untimed call of the same variant "
           "and mask, so that it meets the memory its own kind left behind: the direct formula's "
           "n×n arrays are fresh pages at every call, and what their page faults cost depends on "
           "what ran just before); "
           "× torch is the ratio of the two medians, from the same run. Masks: none; "
           "`is_causal=True`; a boolean key-padding mask (1, 1, 1, n) whose last quarter of keys "
           "is padding, the same for PyTorch. fast_attention drops keys that a key-padding mask "
           "blocks for every query before computing any score. Floor: the least time for the "
           "work a mask kind needs, at two rates measured in the same rounds; per head, n² score "
           "entries without a mask, n(n+1)/2 causal, (¾n)·n with the padding mask, each costing "
           "4·d operations of the two matrix products at the GEMM rate and one exp at the exp "
           "rate (both given above). × floor is a time divided by the floor of its n and mask. "
           "No mask / causal: how many times faster the causal call is. GFLOP/s counts 4·n²·d "
           "per head without a mask, for every variant; % of GEMM is that rate as a share of "
           "the GEMM rate, that of a {g} × {g} float32 NumPy matrix product (all cores). Peak "
           "extra memory (no mask): peak resident memory during one call, in a fresh process, "
           "minus what was resident just before; it includes the output. —: not run (the direct "
           "formula and the online softmax stop at n = 4096) or not defined."),
    "zh": ("时间：每种实现和每种掩码按轮次交替运行，取计时调用的中位数（短于 0.3 秒的调用，每轮先不"
           "计时地连续调用 0.15 秒，让上一个实现的线程停止空转，再连续计时三次；更长的调用每轮计时一次，"
           "之前先不计时地调用一次同一实现、同一掩码，让它遇到的是同类调用留下的内存：直接公式的 n×n "
           "数组每次调用都是新分配的内存页，缺页的代价取决于刚才运行的是什么）；× torch 是同一次运行"
           "中两个中位数之比。掩码：无；`is_causal=True`；形状为 (1, 1, 1, n) 的布尔填充掩码，最后四分之一"
           "的键是填充，PyTorch 用同一个掩码。fast_attention 在计算分数之前，先去掉填充掩码对所有查询都"
           "屏蔽的键。下限：按同一轮中测得的两个速度，完成这种掩码必需的工作所要的最短时间。每个头必需的"
           "分数个数：无掩码 n²，因果掩码 n(n+1)/2，填充掩码 (¾n)·n；每个分数要做两次矩阵乘法里的 "
           "4·d 次运算（按 GEMM 速度）和一次 exp（按 exp 速度），两个速度见上。× 下限是时间除以同一 n、"
           "同一掩码的下限。无掩码 / 因果：因果掩码的调用快多少倍。GFLOP/s 对每种实现都按无掩码时每个头 "
           "4·n²·d 次运算计算；占 GEMM 速度是它与 GEMM 速度之比，GEMM 速度即 {g} × {g} float32 NumPy "
           "矩阵乘法（全部核心）的速度。额外峰值内存（无掩码）：在新进程里调用一次时的常驻内存峰值减去"
           "调用前的常驻内存，含输出数组。—：未运行（直接公式和在线 softmax 只测到 n = 4096）或没有定义。"),
}
TITLE = {"en": "# Attention: NumPy next to PyTorch", "zh": "# 注意力：NumPy 与 PyTorch 对照"}


def write_markdown(path: Path, rows, masks, header: list[dict], with_torch: bool, gemm_n: int,
                   lang: str) -> None:
    """The stored run: what ran where, the table and how it was measured; measurements only."""
    text = [TITLE[lang], ""]
    text += [f"- {line[lang]}" for line in header]
    text += ["", markdown_table(rows, masks, with_torch, lang), "", METHOD[lang].format(g=gemm_n)]
    if not with_torch:
        text += ["", "没有 PyTorch（未安装或被排除）：表中没有它那一列。" if lang == "zh" else
                 "Without PyTorch (not installed, or left out): its column is skipped."]
    path.write_text("\n".join(text) + "\n", encoding="utf-8")


PLOT_TEXT = {
    "en": {"time": "Time without a mask (8 heads, d = 64, float32)", "ylabel_t": "ms per call",
           "ratio": "Time ÷ floor", "ylabel_r": "time ÷ floor (1: the floor)",
           "floor": "floor", "torch_floor": "PyTorch SDPA, no mask",
           "memory": "Peak extra memory (no mask)", "ylabel_m": "MiB",
           "xlabel": "n (sequence length)", "none": "not measured"},
    "zh": {"time": "无掩码时的耗时（8 个头，d = 64，float32）", "ylabel_t": "每次调用（毫秒）",
           "ratio": "时间 ÷ 下限", "ylabel_r": "时间 ÷ 下限（1 即下限）",
           "floor": "下限", "torch_floor": "PyTorch SDPA，无掩码",
           "memory": "额外峰值内存（无掩码）", "ylabel_m": "MiB",
           "xlabel": "n（序列长度）", "none": "未测量"},
}


def plot(path: Path, rows, variants, masks, lang: str) -> None:
    """Time without a mask, time ÷ floor for each mask, peak extra memory; measurements only."""
    import attention_course.plots  # noqa: F401, I001  (registers the CJK font first)
    from matplotlib import pyplot as plt

    plt.switch_backend("Agg")           # files only, no window
    tx = PLOT_TEXT[lang]
    sizes = sorted({r["n"] for r in rows})
    have_memory = any(np.isfinite(r["mib"]) and r["mib"] > 0 for r in rows)
    fig, (ax_t, ax_r, ax_m) = plt.subplots(1, 3, figsize=(15, 4.3))

    def of(name):
        return sorted((r for r in rows if r["variant"] == name), key=lambda r: r["n"])

    for name in variants:
        mine = of(name)
        if not mine:
            continue
        ax_t.plot([r["n"] for r in mine], [r["ms"]["none"] for r in mine], "o-",
                  label=LABELS[lang][name])
        if have_memory:
            ax_m.plot([r["n"] for r in mine], [r["mib"] for r in mine], "o-",
                      label=LABELS[lang][name])
    floor = of("floor")
    if floor and "none" in masks:
        ax_t.plot([r["n"] for r in floor], [r["ms"]["none"] for r in floor], "k--", lw=1,
                  label=tx["floor"])
    fast, torch = of("fast"), of("torch")
    if fast and floor:
        shown = []
        for mask in masks:
            shown += [r["x_floor"][mask] for r in fast]
            ax_r.plot([r["n"] for r in fast], [r["x_floor"][mask] for r in fast], "o-",
                      label=f"fast_attention, {MASK_LABELS[lang][mask]}" if lang == "en" else
                      f"fast_attention，{MASK_LABELS[lang][mask]}")
        if torch and "none" in masks:
            shown += [r["x_floor"]["none"] for r in torch]
            ax_r.plot([r["n"] for r in torch], [r["x_floor"]["none"] for r in torch], "s:",
                      color="0.4", label=tx["torch_floor"])
        ax_r.axhline(1.0, color="k", ls="--", lw=1, label=tx["floor"])
        ax_r.set_ylim(0, max(2.0, max(shown) * 1.1))
        ax_r.legend(fontsize=8)
    else:
        ax_r.text(0.5, 0.5, tx["none"], ha="center", va="center", transform=ax_r.transAxes)
    if not have_memory:
        ax_m.text(0.5, 0.5, tx["none"], ha="center", va="center", transform=ax_m.transAxes)
    for ax in (ax_t, ax_r, ax_m):
        ax.set_xscale("log", base=2)
        ax.set_xticks(sizes, [str(n) for n in sizes])
        ax.set_xlabel(tx["xlabel"])
        ax.grid(True, which="major", alpha=0.3)
    ax_t.set_yscale("log")
    if have_memory:
        ax_m.set_yscale("log")
    ax_t.set_title(tx["time"], fontsize=10)
    ax_t.set_ylabel(tx["ylabel_t"])
    ax_r.set_title(tx["ratio"], fontsize=10)
    ax_r.set_ylabel(tx["ylabel_r"])
    ax_m.set_title(tx["memory"], fontsize=10)
    ax_m.set_ylabel(tx["ylabel_m"])
    ax_t.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


# ---------------------------------------------------------------- notebooks

def notebook_paths() -> list[Path]:
    return sorted((ROOT / "notebooks").glob("*/*.ipynb"), key=lambda p: (p.name, p.parent.name))


def time_notebook(path: Path, timeout: int = 300, log=print) -> float:
    """Seconds to execute a notebook in a fresh kernel (kernel start included); not saved.

    The kernel's own log goes to a file and is shown afterwards without ipykernel's warning
    that it runs over TCP without encryption: the benchmark's kernels listen on this machine
    only, and the warning, once per notebook, would bury the timings.
    """
    import nbformat
    from nbclient import NotebookClient, output_widget

    # As in maintainer/execute_notebooks.py: nbclient echoes each Output widget's state back to the
    # kernel while waiting for a reply, now and then misses the reply and stalls until the
    # cell timeout (jupyter/nbclient#312); the kernel needs no echo.
    output_widget.OutputWidget.sync_state = lambda self: None
    nb = nbformat.read(path, as_version=4)
    os.environ.setdefault("PYTHONHASHSEED", "0")
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}},
                            store_widget_state=True)
    with tempfile.TemporaryFile("w+", encoding="utf-8") as kernel_log:
        start = time.perf_counter()
        try:
            client.execute(stderr=kernel_log)     # passed on to the kernel's process
        finally:
            elapsed = time.perf_counter() - start
            kernel_log.seek(0)
            for line in kernel_log.read().splitlines():
                if line.strip() and KERNEL_WARNING not in line:
                    log(f"    kernel: {line}")
    return elapsed


def time_notebooks(log=print) -> tuple[float, bool]:
    paths = notebook_paths()
    if not paths:
        log("  no notebooks yet")
        return 0.0, True
    total, ok = 0.0, True
    for path in paths:
        try:
            seconds = time_notebook(path, log=log)
        except Exception as exc:  # report every notebook, even after a failure
            ok = False
            log(f"  FAILED  {path.relative_to(ROOT)}: {type(exc).__name__}: "
                f"{str(exc).strip().splitlines()[-1] if str(exc).strip() else ''}")
            continue
        total += seconds
        note = ""
        budget = BUDGET_NOTEBOOK_S.get(path.name[:2])
        if budget is not None:
            note = f"  ({'within' if seconds <= budget else 'OVER'} the {budget:.0f} s budget)"
        log(f"  {seconds:6.1f} s  {path.relative_to(ROOT)}{note}")
    verdict = "within" if total <= BUDGET_NOTEBOOKS_S else "OVER"
    log(f"  {total:6.1f} s  total for {len(paths)} notebooks ({verdict} the "
        f"{BUDGET_NOTEBOOKS_S:.0f} s budget)")
    return total, ok


# ---------------------------------------------------------------- main

def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", default=bool(os.environ.get("BENCH_QUICK")),
                   help="n = 256, 512 and 3 rounds; writes files only with --out (BENCH_QUICK=1)")
    p.add_argument("--sizes", type=int, nargs="+", help="sequence lengths n")
    p.add_argument("--masks", nargs="+", choices=MASKS, default=list(MASKS),
                   help="mask kinds (default: all three)")
    p.add_argument("--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS),
                   help="what to time (default: all four; the floor is always measured)")
    p.add_argument("--repeats", type=int, help="rounds per n (default: more for small n)")
    p.add_argument("--out", type=Path, help="folder for bench_attention_{en,zh}.{md,png} "
                   "(default build/bench/ in a full run; make bench-store stores them)")
    p.add_argument("--no-torch", action="store_true", help="leave PyTorch out (BENCH_NO_TORCH=1)")
    p.add_argument("--no-memory", action="store_true", help="skip the child-process memory runs")
    p.add_argument("--no-attention", action="store_true", help="only time the notebooks")
    p.add_argument("--no-notebooks", action="store_true", help="do not time the notebooks")
    p.add_argument("--memory-child", nargs=2, metavar=("VARIANT", "N"), help=argparse.SUPPRESS)
    return p.parse_args(argv)


def default_repeats(n: int) -> int:
    return 7 if n <= 512 else (5 if n <= 4096 else 3)


def main(argv=None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.memory_child:
        print(f"{memory_child(args.memory_child[0], int(args.memory_child[1])):.2f}")
        return 0
    ok = True
    if not args.no_attention:
        sizes = tuple(args.sizes or (QUICK_SIZES if args.quick else FULL_SIZES))
        masks = tuple(m for m in MASKS if m in args.masks)
        repeats_for = (lambda n: args.repeats) if args.repeats else (
            (lambda n: 3) if args.quick else default_repeats)
        out_dir = args.out if args.out else (None if args.quick else OUT)
        with_torch = "torch" in args.variants and not args.no_torch and torch_available()
        variants = [v for v in VARIANTS if v in args.variants and (v != "torch" or with_torch)]
        import attention_course

        header = [
            {"en": f"float32, batch {BATCH}, {HEADS} heads, d = {D}; masks: "
                   + ", ".join(MASK_LABELS["en"][m] for m in masks)
                   + "; n = " + ", ".join(map(str, sizes)),
             "zh": f"float32，批大小 {BATCH}，{HEADS} 个头，d = {D}；掩码："
                   + "、".join(MASK_LABELS["zh"][m] for m in masks)
                   + "；n = " + ", ".join(map(str, sizes))},
            {"en": f"CPU: {cpu_name()}, {os.cpu_count()} cores; Python "
                   f"{platform.python_version()}, NumPy {np.__version__}, attention_course "
                   f"{attention_course.__version__}",
             "zh": f"CPU：{cpu_name()}，{os.cpu_count()} 个核心；Python "
                   f"{platform.python_version()}，NumPy {np.__version__}，attention_course "
                   f"{attention_course.__version__}"},
        ]
        header += blas_description()
        header.append(simd_line())
        if with_torch:
            header.append(torch_description())
        else:
            header.append({"en": "PyTorch: not installed, or left out; its column is skipped",
                           "zh": "PyTorch：没有安装或被排除，表中没有它那一列"})
        header += environment_lines()
        print("Attention benchmark")
        for line in header:
            print(f"  {line['en']}")
        print("Timing (median of interleaved calls):")
        gemm_n = 1024 if args.quick else GEMM_N
        load_before = load_average()
        times, gemm_rate, exp_rate = measure_times(sizes, variants, masks, repeats_for, gemm_n)
        load_after = load_average()
        threads = fast_threads()
        header.append({
            "en": f"GEMM rate: NumPy float32 matrix product {gemm_n} × {gemm_n}, all cores, "
                  f"{gemm_rate / 1e9:.1f} GFLOP/s (median of the same rounds)",
            "zh": f"GEMM 速度：NumPy float32 矩阵乘法 {gemm_n} × {gemm_n}，全部核心，"
                  f"{gemm_rate / 1e9:.1f} GFLOP/s（同一轮次的中位数）"})
        header.append({
            "en": f"exp rate: float32 np.exp on {EXP_BLOCK // 1024} Ki elements in cache, "
                  f"{exp_rate / threads / 1e9:.2f} G/s on one thread × {threads} threads = "
                  f"{exp_rate / 1e9:.2f} G/s (median of the same rounds)",
            "zh": f"exp 速度：float32 np.exp 作用于缓存里的 {EXP_BLOCK // 1024} Ki 个元素，"
                  f"单线程 {exp_rate / threads / 1e9:.2f} G/s × {threads} 个线程 = "
                  f"{exp_rate / 1e9:.2f} G/s（同一轮次的中位数）"})
        print(f"  {header[-2]['en']}")
        print(f"  {header[-1]['en']}")
        if load_before is not None:
            # The timing itself keeps the cores busy; a load well above their number means
            # other processes competed for them.
            header.append({
                "en": f"system load (1-minute average) before / after the timing: "
                      f"{load_before:.2f} / {load_after:.2f}",
                "zh": f"计时前 / 后的系统负载（1 分钟平均）：{load_before:.2f} / {load_after:.2f}"})
            print(f"  {header[-1]['en']}")
        mib = {}
        if not args.no_memory:
            print("Peak extra memory (one call in a fresh process, no mask):")
            mib = measure_memory(sizes, variants)
        rows = build_rows(sizes, variants, masks, times, gemm_rate, mib, exp_rate)
        print()
        print(markdown_table(rows, masks, with_torch))
        if not with_torch:
            print("\nWithout PyTorch (not installed, or left out): its column is skipped.")
        print()
        for line in target_lines(rows, masks, cpu_kind()):
            print(line)
        print("\nfast_attention alone (benchmarks/README.md's table):\n")
        print(compact_table(rows, masks, with_torch))
        if out_dir is not None:
            out_dir.mkdir(parents=True, exist_ok=True)
            written = []
            for lang in ("en", "zh"):
                md, png = out_dir / f"bench_attention_{lang}.md", out_dir / f"bench_attention_{lang}.png"
                write_markdown(md, rows, masks, header, with_torch, gemm_n, lang)
                plot(png, rows, variants, masks, lang)
                written += [md, png]
            shown = [p.relative_to(ROOT) if p.is_relative_to(ROOT) else p for p in written]
            print("wrote " + ", ".join(map(str, shown)))
    if not args.no_notebooks:
        print("\nNotebook execution (fresh kernel each, outputs not saved):")
        _, ok = time_notebooks()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "src"))      # runs from a fresh clone, installed or not
    sys.exit(main())
