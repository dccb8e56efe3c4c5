"""SmolLM2-135M: the course's NumPy forward pass next to transformers on PyTorch, same weights.

    python benchmarks/pretrained.py              # 16, 64, 256 tokens; 1 and 2 threads; 5 rounds
    python benchmarks/pretrained.py --rounds 3 --sizes 16 64

Needs the dependency group `reference` (pyproject.toml) on top of the course's.

Method
------
* Both sides run the same GGUF file: ``attention_course.pretrained.load()`` and transformers'
  ``LlamaForCausalLM.from_pretrained(..., gguf_file=...)`` (float32, eager attention, no grad),
  on the same random token ids, logits of every position, no attention weights returned.
* Each thread count runs in a fresh child process, with OPENBLAS_NUM_THREADS, OMP_NUM_THREADS and
  MKL_NUM_THREADS set before NumPy is imported and ``torch.set_num_threads`` to match.
* In each round every (side, size) pair is timed once, after one untimed call, in an order that
  rotates from round to round so that a disturbance hits both sides alike. The table shows
  medians over the rounds; the ratio is NumPy's median over torch's, from the same run.
* Load: a fresh process per run, the file already in the page cache (one warm-up run first),
  median of 3. Memory: a fresh process, peak resident memory after ``load()`` plus one 256-token
  forward with every attention weight returned, minus the resident memory before ``load()``.
* The header names the CPU, NumPy's BLAS and its kernel, and torch's build.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

from machine import cpu_kind, load_text, torch_description

ROOT = Path(__file__).resolve().parent.parent
TARGET_RATIO = 1.5           # at 64 tokens and above, each side at its better thread count
TARGET_LOAD_S = 3.0
TARGET_FORWARD_64_S = 0.2
TARGET_RSS_GIB = 1.0




def child(threads: int, sizes, rounds: int) -> None:
    """Time both sides at one thread count; print one JSON line."""
    import numpy as np
    import torch
    from transformers import LlamaForCausalLM

    from attention_course import pretrained

    torch.set_num_threads(threads)
    model = pretrained.load()
    folder, name = os.path.split(model.path)
    hf = LlamaForCausalLM.from_pretrained(folder, gguf_file=name, torch_dtype=torch.float32,
                                          attn_implementation="eager").eval()
    rng = np.random.default_rng(0)
    inputs = {n: rng.integers(100, 40000, n) for n in sizes}

    def numpy_side(n):
        model.forward(inputs[n])

    def torch_side(n):
        with torch.no_grad():
            hf(torch.from_numpy(inputs[n])[None])

    pairs = [(side, n) for n in sizes for side in ("numpy", "torch")]
    times = {f"{side}/{n}": [] for side, n in pairs}
    check = {}
    for n in sizes:
        with torch.no_grad():
            ref = hf(torch.from_numpy(inputs[n])[None]).logits[0].numpy()
        check[n] = float(np.abs(model.forward(inputs[n]) - ref).max())
    for r in range(rounds):
        order = pairs[r % len(pairs):] + pairs[:r % len(pairs)]
        for side, n in order:
            fn = numpy_side if side == "numpy" else torch_side
            fn(n)                                           # untimed: caches, thread pools
            start = time.perf_counter()
            fn(n)
            times[f"{side}/{n}"].append(time.perf_counter() - start)
    print(json.dumps({"threads": threads, "times": times, "max_abs_logit_diff": check,
                      "torch": torch_description()["en"]}))


def load_time() -> float:
    code = ("import time; t = time.perf_counter(); from attention_course import pretrained; "
            "pretrained.load(); print(time.perf_counter() - t)")
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return float(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                                text=True, encoding="utf-8", env=env).stdout)


def rss_growth() -> float:
    code = ("import resource, numpy as np\n"
            "def rss():\n"
            "    with open('/proc/self/status', encoding='utf-8') as f:\n"
            "        return next(int(l.split()[1]) for l in f if l.startswith('VmRSS')) * 1024\n"
            "before = rss()\n"
            "from attention_course import pretrained\n"
            "m = pretrained.load()\n"
            "m.forward(np.arange(1000, 1256), return_weights=True)\n"
            "peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024\n"
            "print((peak - before) / 2**30)\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return float(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                                text=True, encoding="utf-8", env=env).stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[16, 64, 256])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.sizes, args.rounds)
        return
    if args.rounds < 3:
        ap.error("--rounds must be at least 3 (medians)")
    import numpy as np

    print(f"CPU: {cpu_kind()}; load average {load_text()}")
    print(f"NumPy {np.__version__}; Python {platform.python_version()}")
    results = []
    for threads in args.threads:
        env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads),
                   MKL_NUM_THREADS=str(threads),
                   PYTHONPATH=str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
        out = subprocess.run([sys.executable, __file__, "--child", str(threads), "--rounds",
                              str(args.rounds), "--sizes", *map(str, args.sizes)],
                             check=True, capture_output=True, text=True, encoding="utf-8", env=env).stdout
        results.append(json.loads(out.strip().splitlines()[-1]))
    for res in results:
        print(f"{res['threads']}-thread run: {res['torch']}")
    print(f"\nforward pass, logits of every position, median of {args.rounds} rounds (ms)")
    print(f"{'threads':>7} {'T':>5} {'NumPy':>9} {'torch':>9} {'NumPy/torch':>12} {'max |Δ logit|':>14}")
    best = {}
    for res in results:
        for n in args.sizes:
            a = statistics.median(res["times"][f"numpy/{n}"])
            b = statistics.median(res["times"][f"torch/{n}"])
            best.setdefault(n, [float("inf"), float("inf")])
            best[n] = [min(best[n][0], a), min(best[n][1], b)]
            print(f"{res['threads']:7d} {n:5d} {1000 * a:9.1f} {1000 * b:9.1f} {a / b:12.2f} "
                  f"{res['max_abs_logit_diff'][str(n)]:14.1e}")
    print("\neach side at its better thread count:")
    for n in args.sizes:
        ratio = best[n][0] / best[n][1]
        met = "met" if ratio <= TARGET_RATIO else "NOT met"
        verdict = "" if n < 64 else f"   target ≤ {TARGET_RATIO}×: {met}"
        print(f"  T = {n:4d}: NumPy {1000 * best[n][0]:.1f} ms, torch {1000 * best[n][1]:.1f} ms, "
              f"ratio {ratio:.2f}{verdict}")
    if 64 in best:
        print(f"  forward of 64 tokens {best[64][0]:.3f} s   target ≤ {TARGET_FORWARD_64_S} s: "
              f"{'met' if best[64][0] <= TARGET_FORWARD_64_S else 'NOT met'}")
    load_time()                                             # warm the page cache
    loads = [load_time() for _ in range(3)]
    t_load = statistics.median(loads)
    print(f"\nload in a fresh process, median of 3: {t_load:.2f} s ({', '.join(f'{x:.2f}' for x in loads)})"
          f"   target ≤ {TARGET_LOAD_S} s: {'met' if t_load <= TARGET_LOAD_S else 'NOT met'}")
    gib = rss_growth()
    print(f"peak RSS growth, load + one 256-token forward with all weights: {gib:.2f} GiB"
          f"   target ≤ {TARGET_RSS_GIB} GiB: {'met' if gib <= TARGET_RSS_GIB else 'NOT met'}")


if __name__ == "__main__":
    main()
