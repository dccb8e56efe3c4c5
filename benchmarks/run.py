"""Attention side by side: direct NumPy, fast_attention, online softmax and PyTorch SDPA.

Then the execution time of every course notebook (both languages), the way a learner runs them.

    python benchmarks/run.py                 # the full run (what `make bench` calls)
    python benchmarks/run.py --quick         # n = 256, 512 and few repeats (or BENCH_QUICK=1)
    python benchmarks/run.py --help          # sizes, repeats, output folder, skipping parts

Method
------
* Every variant computes the same thing: float32, batch 1, 8 heads, d = 64, no mask.
* Timing: for each n, the variants are measured in rounds, the order rotating from round to
  round, so that a disturbance (another process, a frequency change) hits all of them alike;
  the table shows the median of each variant's timed calls. A variant whose call takes under
  0.3 s is first called untimed for 0.15 s, then timed three times in a row; longer calls are
  timed once per round. The untimed calls matter: idle OpenBLAS threads keep spinning for
  about 0.1 s after a call, and OpenMP threads for a shorter while, slowing down whatever is
  timed next (right after a multi-threaded NumPy matrix product, PyTorch at n = 1024 took more
  than twice as long). A plain pause would be unfair the other way: right after an idle pause
  of 0.15 s, ``fast_attention`` at n = 1024 ran about 25 % slower here, PyTorch did not.
  Untimed calls let the previous variant's threads fall asleep and put the next variant in the
  steady state of a loop of calls, which is what a model running layer after layer sees.
* Effective GFLOP/s counts 4·n²·d operations per head (``attention_flops``), whatever a variant
  really does, so it compares like with like. It is set against the rate of a large float32
  NumPy matrix product (2048 × 2048, all cores) measured in the same rounds.
* Peak extra memory: each variant runs once in a fresh child process; the figure is the peak
  resident memory during that call minus the resident memory just before it (inputs, libraries
  and thread pools already in place). It includes the (1, 8, n, 64) output.
* PyTorch is optional: without it its column is left out, with a note.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
HEADS, D, BATCH = 8, 64, 1
FULL_SIZES = (256, 512, 1024, 2048, 4096)
QUICK_SIZES = (256, 512)
GEMM_N = 2048
# Calls shorter than SHORT_CALL_S are timed SHORT_PER_ROUND times per round, after SETTLE_S
# of untimed calls of the same variant; longer ones once per round.
SHORT_CALL_S = 0.3
SETTLE_S = 0.15
SHORT_PER_ROUND = 3
VARIANTS = ("direct", "fast", "online", "torch")
LABELS = {
    "direct": "direct NumPy",
    "fast": "fast_attention",
    "online": "online softmax",
    "torch": "PyTorch SDPA",
}
# Targets for the fast path, from the course's benchmark issue.
TARGET_RATIO, TARGET_MEMORY_MIB, TARGET_GEMM_SHARE, TARGET_NOTEBOOK_S = 1.25, 32.0, 0.60, 60.0


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


def make_call(variant: str, q, k, v):
    """A no-argument function that computes attention once with the given variant."""
    if variant == "torch":
        import torch

        tq, tk, tv = (torch.from_numpy(a) for a in (q, k, v))   # shares memory, no copy
        sdpa = torch.nn.functional.scaled_dot_product_attention

        def call():
            with torch.inference_mode():
                return sdpa(tq, tk, tv)
        return call
    from attention_course.attention import scaled_dot_product_attention
    from attention_course.chunked import online_softmax_attention
    from attention_course.fast import fast_attention

    fn = {"direct": scaled_dot_product_attention, "fast": fast_attention,
          "online": online_softmax_attention}[variant]
    return lambda: fn(q, k, v)


def flops(n: int) -> int:
    from attention_course.cost import attention_flops

    return attention_flops(n, D, num_heads=HEADS, batch=BATCH)


# ---------------------------------------------------------------- timing

def measure_times(sizes, variants, repeats_for, gemm_n, log=print):
    """Median seconds per (n, variant), and the GEMM rate in FLOP/s, all from the same rounds."""
    rng = np.random.default_rng(1)
    a = rng.standard_normal((gemm_n, gemm_n), dtype=np.float32)
    b = rng.standard_normal((gemm_n, gemm_n), dtype=np.float32)
    calls_gemm = lambda: a @ b  # noqa: E731
    calls_gemm()
    gemm_samples = []
    times = {}
    for n in sizes:
        q, k, v = make_inputs(n)
        calls = {name: make_call(name, q, k, v) for name in variants}
        calls["gemm"] = calls_gemm
        last = {}
        for name, call in calls.items():   # warm up: thread pools, BLAS buffers, page faults
            start = time.perf_counter()
            call()
            last[name] = time.perf_counter() - start
        samples = {name: [] for name in calls}
        names = list(calls)
        for r in range(repeats_for(n)):
            shift = r % len(names)
            for name in names[shift:] + names[:shift]:
                if last[name] < SHORT_CALL_S:
                    # Untimed calls of this variant for SETTLE_S first: meanwhile the
                    # previous variant's idle threads stop spinning (OpenBLAS spins for about
                    # 0.1 s after a call), and this variant reaches the steady state of a
                    # loop of calls. Then several timed calls in a row.
                    settle_until = time.perf_counter() + SETTLE_S
                    calls[name]()
                    while time.perf_counter() < settle_until:
                        calls[name]()
                    repeats = SHORT_PER_ROUND
                else:
                    repeats = 1
                for _ in range(repeats):
                    start = time.perf_counter()
                    calls[name]()
                    last[name] = time.perf_counter() - start
                    samples[name].append(last[name])
        for name in variants:
            times[n, name] = statistics.median(samples[name])
        gemm_samples += samples["gemm"]
        shown = "  ".join(f"{name} {times[n, name] * 1e3:8.1f} ms ({len(samples[name])})"
                          for name in variants)
        log(f"  n = {n:5d}  {shown}")
        del q, k, v, calls
    gemm_rate = 2 * gemm_n**3 / statistics.median(gemm_samples)
    return times, gemm_rate


# ---------------------------------------------------------------- memory

def _current_rss_bytes() -> int | None:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return None


def _peak_rss_bytes() -> int:
    try:
        with open("/proc/self/status") as f:
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
        with open("/proc/self/clear_refs", "w") as f:
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
            proc = subprocess.run(
                [sys.executable, str(Path(__file__).resolve()), "--memory-child", name, str(n)],
                capture_output=True, text=True, check=False,
            )
            if proc.returncode != 0:
                log(f"  memory of {name} at n = {n} failed:\n{proc.stderr.strip()}")
                mib[n, name] = float("nan")
            else:
                mib[n, name] = float(proc.stdout.strip().splitlines()[-1])
        log(f"  n = {n:5d}  " + "  ".join(f"{name} {mib[n, name]:8.1f} MiB" for name in variants))
    return mib


# ---------------------------------------------------------------- report

def blas_description() -> list[str]:
    """One line per native thread pool (BLAS, OpenMP) that threadpoolctl finds loaded."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return ["BLAS: unknown (threadpoolctl is not installed)"]
    lines = []
    for info in threadpool_info():
        kind = "BLAS" if info.get("user_api") == "blas" else "OpenMP"
        details = [f"{info.get('num_threads')} threads"]
        details += [f"{key} {info[key]}" for key in ("architecture", "threading_layer")
                    if info.get(key)]
        version = f" {info['version']}" if info.get("version") else ""
        lines.append(f"{kind}: {info.get('internal_api')}{version} [{info.get('prefix')}] "
                     f"({', '.join(details)})")
    return lines or ["BLAS: none found by threadpoolctl"]


def load_average() -> float | None:
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):   # Windows
        return None


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def build_rows(sizes, variants, times, gemm_rate, mib):
    """One row per (n, variant): the numbers the table and the plot show."""
    rows = []
    for n in sizes:
        for name in variants:
            t = times[n, name]
            rate = flops(n) / t
            ratio = t / times[n, "torch"] if "torch" in variants else None
            rows.append({"n": n, "variant": name, "ms": t * 1e3, "ratio": ratio,
                         "gflops": rate / 1e9, "gemm_share": rate / gemm_rate,
                         "mib": mib.get((n, name), float("nan"))})
    return rows


def markdown_table(rows, with_torch: bool) -> str:
    head = "| n | variant | time (ms) |" + (" × torch |" if with_torch else "") + \
        " GFLOP/s | % of GEMM | peak extra (MiB) |"
    lines = [head, "|" + "---:|" * (head.count("|") - 1)]
    lines[1] = lines[1].replace("---:|", ":---|", 2)   # left-align n and variant
    for r in rows:
        cells = [f"{r['n']}", LABELS[r["variant"]], f"{r['ms']:.1f}"]
        if with_torch:
            cells.append(f"{r['ratio']:.2f}")
        cells += [f"{r['gflops']:.1f}", f"{100 * r['gemm_share']:.0f} %", f"{r['mib']:.1f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def target_lines(rows, with_torch: bool) -> list[str]:
    fast = {r["n"]: r for r in rows if r["variant"] == "fast"}
    lines = []
    big = [n for n in fast if 1024 <= n <= 4096]
    if with_torch and big:
        worst = max(fast[n]["ratio"] for n in big)
        ratios = ", ".join(f"{fast[n]['ratio']:.2f}" for n in big)
        lines.append(f"fast_attention / PyTorch SDPA time, n = {big[0]}…{big[-1]}: {ratios} "
                     f"(worst {worst:.2f}; target ≤ {TARGET_RATIO})")
    elif not with_torch:
        lines.append("fast_attention / PyTorch SDPA: not measured (no PyTorch)")
    if fast:
        n_max = max(fast)
        lines.append(f"fast_attention peak extra memory at n = {n_max}: "
                     f"{fast[n_max]['mib']:.1f} MiB (target ≤ {TARGET_MEMORY_MIB:.0f} MiB at "
                     "n = 4096)")
        shares = ", ".join(f"{100 * fast[n]['gemm_share']:.0f} %" for n in sorted(fast))
        lines.append(f"fast_attention share of the GEMM rate, n = {min(fast)}…{n_max}: {shares} "
                     f"(target ≥ {100 * TARGET_GEMM_SHARE:.0f} %)")
    return lines


def write_markdown(path: Path, rows, header: list[str], with_torch: bool, targets,
                   gemm_n: int) -> None:
    text = ["# Attention: NumPy next to PyTorch · 注意力:NumPy 与 PyTorch 对照", ""]
    text += [f"- {line}" for line in header]
    text += ["", markdown_table(rows, with_torch), ""]
    text += [
        "Time: median of timed calls, in rounds in which all variants run in turn (a call under "
        "0.3 s is timed three times in a row per round, after 0.15 s of untimed calls of the "
        "same variant, so that no thread of the previous variant is still spinning). "
        "GFLOP/s counts 4·n²·d "
        "per head for every variant. % of GEMM: that rate as a share of the rate of a "
        f"{gemm_n} × {gemm_n} float32 NumPy matrix product, measured in the same rounds (all "
        "cores). Peak extra memory: peak "
        "resident memory during one call, in a fresh process, minus what was resident just "
        "before; it includes the output.",
        "",
        "时间:所有变体按轮次交替运行,取计时调用的中位数(短于 0.3 秒的调用,每轮先不计时地"
        "连续调用 0.15 秒,让上一个变体的线程停止空转,再连续计时三次)。"
        "GFLOP/s 对每个变体都按每个头 4·n²·d 次运算计算;"
        f"% of GEMM 是它占同一次运行中 {gemm_n} × {gemm_n} float32 NumPy 矩阵乘法速度的比例。"
        "额外峰值内存:在新进程里调用一次时的常驻内存峰值减去调用前的常驻内存,含输出数组。",
        "",
    ]
    if not with_torch:
        text += ["Without PyTorch (not installed, or left out): its column is skipped. "
                 "没有 PyTorch(未安装或被排除):表中没有它那一列。", ""]
    text += [f"- {line}" for line in targets]
    path.write_text("\n".join(text) + "\n", encoding="utf-8")


def plot(path: Path, rows, variants, gemm_rate) -> None:
    import attention_course.plots  # noqa: F401, I001  (registers the CJK font first)
    from matplotlib import pyplot as plt

    plt.switch_backend("Agg")           # files only, no window

    sizes = sorted({r["n"] for r in rows})
    have_memory = any(np.isfinite(r["mib"]) and r["mib"] > 0 for r in rows)
    fig, (ax_t, ax_m) = plt.subplots(1, 2, figsize=(10, 4))
    for name in variants:
        mine = sorted((r for r in rows if r["variant"] == name), key=lambda r: r["n"])
        ax_t.plot([r["n"] for r in mine], [r["ms"] for r in mine], "o-", label=LABELS[name])
        if have_memory:
            ax_m.plot([r["n"] for r in mine], [r["mib"] for r in mine], "o-", label=LABELS[name])
    bound = [flops(n) / gemm_rate * 1e3 for n in sizes]
    ax_t.plot(sizes, bound, "k--", lw=1, label="4n²d at GEMM speed · 矩阵乘法速度下限")
    for ax in (ax_t, ax_m) if have_memory else (ax_t,):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(sizes, [str(n) for n in sizes])
        ax.grid(True, which="major", alpha=0.3)
    for ax in (ax_t, ax_m):
        ax.set_xlabel("n (sequence length · 序列长度)")
    if not have_memory:
        ax_m.text(0.5, 0.5, "not measured · 未测量", ha="center", va="center",
                  transform=ax_m.transAxes)
    ax_t.set_ylabel("time per call (ms) · 每次耗时")
    ax_t.set_title("Time · 时间 (8 heads, d = 64, float32)")
    ax_m.set_ylabel("peak extra memory (MiB) · 额外峰值内存")
    ax_m.set_title("Memory · 内存")
    ax_t.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


# ---------------------------------------------------------------- notebooks

def notebook_paths() -> list[Path]:
    return sorted((ROOT / "notebooks").glob("*/*.ipynb"), key=lambda p: (p.name, p.parent.name))


def time_notebook(path: Path, timeout: int = 300) -> float:
    """Seconds to execute a notebook in a fresh kernel (kernel start included); not saved."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    os.environ.setdefault("PYTHONHASHSEED", "0")
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})
    start = time.perf_counter()
    client.execute()
    return time.perf_counter() - start


def time_notebooks(log=print) -> tuple[float, bool]:
    paths = notebook_paths()
    if not paths:
        log("  no notebooks yet")
        return 0.0, True
    total, ok = 0.0, True
    for path in paths:
        try:
            seconds = time_notebook(path)
        except Exception as exc:  # report every notebook, even after a failure
            ok = False
            log(f"  FAILED  {path.relative_to(ROOT)}: {type(exc).__name__}: "
                f"{str(exc).strip().splitlines()[-1] if str(exc).strip() else ''}")
            continue
        total += seconds
        log(f"  {seconds:6.1f} s  {path.relative_to(ROOT)}")
    verdict = "within" if total <= TARGET_NOTEBOOK_S else "OVER"
    log(f"  {total:6.1f} s  total for {len(paths)} notebooks ({verdict} the "
        f"{TARGET_NOTEBOOK_S:.0f} s target)")
    return total, ok


# ---------------------------------------------------------------- main

def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", default=bool(os.environ.get("BENCH_QUICK")),
                   help="n = 256, 512 and 3 rounds; writes files only with --out (BENCH_QUICK=1)")
    p.add_argument("--sizes", type=int, nargs="+", help="sequence lengths n")
    p.add_argument("--repeats", type=int, help="rounds per n (default: more for small n)")
    p.add_argument("--out", type=Path, help="folder for bench_attention.md and .png "
                   "(default figures/ in a full run)")
    p.add_argument("--no-torch", action="store_true", help="leave PyTorch out (BENCH_NO_TORCH=1)")
    p.add_argument("--no-memory", action="store_true", help="skip the child-process memory runs")
    p.add_argument("--no-attention", action="store_true", help="only time the notebooks")
    p.add_argument("--no-notebooks", action="store_true", help="do not time the notebooks")
    p.add_argument("--memory-child", nargs=2, metavar=("VARIANT", "N"), help=argparse.SUPPRESS)
    return p.parse_args(argv)


def default_repeats(n: int) -> int:
    return 7 if n <= 512 else 5


def main(argv=None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.memory_child:
        print(f"{memory_child(args.memory_child[0], int(args.memory_child[1])):.2f}")
        return 0
    ok = True
    if not args.no_attention:
        sizes = tuple(args.sizes or (QUICK_SIZES if args.quick else FULL_SIZES))
        repeats_for = (lambda n: args.repeats) if args.repeats else (
            (lambda n: 3) if args.quick else default_repeats)
        out_dir = args.out if args.out else (None if args.quick else ROOT / "figures")
        with_torch = not args.no_torch and torch_available()
        variants = [v for v in VARIANTS if v != "torch" or with_torch]
        import attention_course

        header = [
            f"float32, batch {BATCH}, {HEADS} heads, d = {D}, no mask; n = "
            + ", ".join(map(str, sizes)),
            f"CPU: {cpu_name()}, {os.cpu_count()} cores; Python {platform.python_version()}, "
            f"NumPy {np.__version__}, attention_course {attention_course.__version__}",
        ]
        header += blas_description()
        if with_torch:
            import torch

            header.append(f"PyTorch {torch.__version__}, {torch.get_num_threads()} threads")
        else:
            header.append("PyTorch: not installed, or left out; its column is skipped")
        for key in sorted(os.environ):
            if key.startswith("OPENBLAS_") or key in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
                header.append(f"environment: {key}={os.environ[key]}")
        print("Attention benchmark")
        for line in header:
            print(f"  {line}")
        print("Timing (median of interleaved calls; number of timed calls in brackets):")
        gemm_n = 1024 if args.quick else GEMM_N
        load_before = load_average()
        times, gemm_rate = measure_times(sizes, variants, repeats_for, gemm_n)
        load_after = load_average()
        header.append(f"GEMM reference: NumPy float32 matrix product {gemm_n} × {gemm_n}, "
                      f"{gemm_rate / 1e9:.1f} GFLOP/s (median of the same rounds)")
        print(f"  GEMM reference: {gemm_rate / 1e9:.1f} GFLOP/s")
        if load_before is not None:
            # The timing itself keeps the cores busy; a load well above their number means
            # other processes competed for them.
            header.append(f"system load (1-minute average) before / after the timing: "
                          f"{load_before:.2f} / {load_after:.2f}")
            print(f"  {header[-1]}")
        mib = {}
        if not args.no_memory:
            print("Peak extra memory (one call in a fresh process):")
            mib = measure_memory(sizes, variants)
        rows = build_rows(sizes, variants, times, gemm_rate, mib)
        targets = target_lines(rows, with_torch)
        print()
        print(markdown_table(rows, with_torch))
        if not with_torch:
            print("\nWithout PyTorch (not installed, or left out): its column is skipped.")
        print()
        for line in targets:
            print(line)
        if out_dir is not None:
            out_dir.mkdir(parents=True, exist_ok=True)
            write_markdown(out_dir / "bench_attention.md", rows, header, with_torch, targets,
                           gemm_n)
            plot(out_dir / "bench_attention.png", rows, variants, gemm_rate)
            shown = out_dir.relative_to(ROOT) if out_dir.is_relative_to(ROOT) else out_dir
            print(f"wrote {shown / 'bench_attention.md'} and {shown / 'bench_attention.png'}")
    if not args.no_notebooks:
        print("\nNotebook execution (fresh kernel each, outputs not saved):")
        _, ok = time_notebooks()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "src"))      # runs from a fresh clone, installed or not
    sys.exit(main())
