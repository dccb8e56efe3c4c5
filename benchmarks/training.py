"""One training step of notebooks 07 and 08's models: NumPy (attention_course.backprop) next to PyTorch.

    python benchmarks/training.py            # writes build/bench/bench_training.md (make bench-store
                                             # copies it to figures/)
    python benchmarks/training.py --quick    # fewer rounds, prints only

Method
------
* The two models whose training takes longest to matter: (b) notebook 07's library model
  (one layer, one head, cross-attention over 6 books, batch 64) and (d) notebook 08's two-layer
  attention-only model on repeated sequences (n = 20, d_model = d_k = 32, batch 16, causal).
* A step is what ``tiny_model.train`` does per step after its first: forward, masked softmax
  cross-entropy, backward, one Adam update, without the per-call checks of the first step.
  NumPy runs the course's own code; PyTorch runs the same model (same parameters, copied)
  with autograd and ``torch.optim.Adam``. Batches are made beforehand, so neither side pays
  for them.
* Both at 1 and at 2 threads (BLAS via threadpoolctl for NumPy, ``torch.set_num_threads``):
  for matrices this small a second thread may cost more than it brings. The ratio of each
  side's better setting is the one that counts.
* Timing: rounds in which every (side, threads) setting runs ``STEPS`` steps after a few untimed
  ones; the order rotates from round to round, and the table shows the median per-step time.
* OpenBLAS tuning variables (OPENBLAS_CORETYPE, OPENBLAS_L2_SIZE) are removed from this
  process's own environment (it restarts itself without them) so that OpenBLAS picks its
  kernels by itself, as it does on a learner's machine.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# A run writes here, never over the stored table: make bench-store copies it to figures/.
OUT = ROOT / "build" / "bench" / "bench_training.md"
UNSET = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")

if any(k in os.environ for k in UNSET) and __name__ == "__main__":
    env = {k: v for k, v in os.environ.items() if k not in UNSET}
    env["BENCH_TRAINING_UNSET"] = ", ".join(f"{k}={os.environ[k]}" for k in UNSET if k in os.environ)
    os.execve(sys.executable, [sys.executable, *sys.argv], env)

import numpy as np  # noqa: E402
from machine import cpu_kind  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402

from attention_course import tasks  # noqa: E402
from attention_course.optim import Adam  # noqa: E402
from attention_course.tiny_model import LibraryModel, repeat_model  # noqa: E402

STEPS = 30
WARMUP = 5
THREADS = (1, 2)


def library_setup(seed: int = 0):
    model = LibraryModel(seed=seed)
    rng = np.random.default_rng(seed)
    batches = [tasks.library_batch(rng, 64) for _ in range(STEPS + WARMUP)]
    return model, batches


def repeat_setup(seed: int = 0):
    model = repeat_model("2 layers", seed=seed)
    rng = np.random.default_rng(seed)
    batches = [tasks.repeat_batch(rng, 16, length=20) for _ in range(STEPS + WARMUP)]
    return model, batches


MODELS = {
    "(b) library, 1 layer 1 head": library_setup,
    "(d) repeats, 2 layers": repeat_setup,
}


def numpy_stepper(model, lr=3e-3):
    """What ``tiny_model.train`` does after its first step: the passes inside
    ``backprop.unchecked()`` (the same arithmetic without the argument checks) and one Adam update
    on the parameters packed into one flat array. The packing is left open: the bench's model is
    its own."""
    from attention_course import backprop as bp

    flat_step = Adam(model.params, lr=lr)._packed().__enter__()

    def step(batch):
        with bp.unchecked():
            _, grads = model.loss_and_grads(batch)
        flat_step(grads)
    return step


def torch_stepper(model, lr=3e-3):
    """The same model in PyTorch: same parameters, autograd, torch.optim.Adam."""
    import torch
    import torch.nn.functional as F

    params = {k: torch.tensor(v, requires_grad=True) for k, v in model.params.items()}
    optimizer = torch.optim.Adam(params.values(), lr=lr)

    if isinstance(model, LibraryModel):
        def loss_fn(batch):
            keys, values = torch.from_numpy(batch.keys), torch.from_numpy(batch.values)
            books = params["key_embed"][keys] + params["value_embed"][values]     # (B, N, d)
            xq = params["key_embed"][torch.from_numpy(batch.query)][:, None]       # (B, 1, d)
            out = F.scaled_dot_product_attention(xq @ params["W_Q"], books @ params["W_K"],
                                                 books @ params["W_V"])
            logits = out[:, 0] @ params["W_U"]
            return F.cross_entropy(logits, torch.from_numpy(batch.targets))
    else:
        h, L = model.n_heads, model.n_layers

        def split(a):
            B, n, hd = a.shape
            return a.reshape(B, n, h, hd // h).transpose(1, 2)

        def loss_fn(batch):
            tokens = torch.from_numpy(batch.tokens)
            n = tokens.shape[1]
            x = params["embed"][tokens] + params["pos"][:n]
            for layer in range(L):
                q, k, v = (x @ params[f"{layer}.W_QKV"]).chunk(3, dim=-1)
                o = F.scaled_dot_product_attention(split(q), split(k), split(v), is_causal=True)
                x = x + o.transpose(1, 2).reshape(x.shape[0], n, -1) @ params[f"{layer}.W_O"]
            logits = x @ params["W_U"]
            losses = F.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                     torch.from_numpy(batch.targets).reshape(-1), reduction="none")
            mask = torch.from_numpy(batch.mask).reshape(-1).to(losses.dtype)
            return (losses * mask).sum() / mask.sum()

    def step(batch):
        optimizer.zero_grad()
        loss_fn(batch).backward()
        optimizer.step()
    return step, loss_fn


def same_loss(setup) -> bool:
    """Both sides compute the same loss on the same batch (so the same model is timed)."""
    model, batches = setup()
    np_loss = float(model.loss_and_grads(batches[0])[0])
    _, loss_fn = torch_stepper(model)
    return bool(np.isclose(np_loss, float(loss_fn(batches[0]).detach()), rtol=1e-4))


def time_setting(step, batches, threads: int, side: str) -> float:
    """Seconds per step for ``STEPS`` steps after ``WARMUP`` untimed ones."""
    if side == "torch":
        import torch

        torch.set_num_threads(threads)
        limit = threadpool_limits(1)          # torch does not use NumPy's BLAS here
    else:
        limit = threadpool_limits(threads)
    with limit:
        for b in batches[:WARMUP]:
            step(b)
        start = time.perf_counter()
        for b in batches[WARMUP:]:
            step(b)
        return (time.perf_counter() - start) / (len(batches) - WARMUP)


def measure(rounds: int, log=print) -> dict:
    import torch

    results = {}
    for name, setup in MODELS.items():
        settings = [(side, th) for side in ("numpy", "torch") for th in THREADS]
        samples = {s: [] for s in settings}
        steppers = {}
        for side, th in settings:
            model, batches = setup()
            step = numpy_stepper(model) if side == "numpy" else torch_stepper(model)[0]
            steppers[(side, th)] = (step, batches)
        for r in range(rounds):
            order = settings[r % len(settings):] + settings[:r % len(settings)]
            for s in order:
                step, batches = steppers[s]
                samples[s].append(time_setting(step, batches, s[1], s[0]))
        results[name] = {s: statistics.median(v) for s, v in samples.items()}
        log(f"  {name}: " + ", ".join(f"{side} {th} thr {1e3 * t:.2f} ms"
                                      for (side, th), t in results[name].items()))
    torch.set_num_threads(os.cpu_count() or 1)
    return results


def table(results) -> tuple[str, list[str]]:
    lines = ["| model | threads | NumPy (ms/step) | PyTorch (ms/step) | NumPy ÷ PyTorch |",
             "|:---|---:|---:|---:|---:|"]
    verdicts = []
    for name, r in results.items():
        for th in THREADS:
            n, t = r[("numpy", th)], r[("torch", th)]
            lines.append(f"| {name} | {th} | {1e3 * n:.2f} | {1e3 * t:.2f} | {n / t:.2f} |")
        n_best = min(THREADS, key=lambda th: r[("numpy", th)])
        t_best = min(THREADS, key=lambda th: r[("torch", th)])
        n, t = r[("numpy", n_best)], r[("torch", t_best)]
        lines.append(f"| {name}, each side's better | {n_best} / {t_best} | {1e3 * n:.2f} | "
                     f"{1e3 * t:.2f} | **{n / t:.2f}** |")
        verdicts.append(f"- {name}: NumPy ≤ 1.0 × PyTorch per step: {n / t <= 1.0} ({n / t:.2f})")
    return "\n".join(lines), verdicts


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="3 rounds, print only")
    parser.add_argument("--rounds", type=int, default=None, help="rounds (default 15)")
    args = parser.parse_args(argv)
    rounds = args.rounds or (3 if args.quick else 15)
    try:
        import torch
    except ImportError:
        print("PyTorch is not installed: nothing to compare with.")
        return 0
    import attention_course

    same = {name: same_loss(setup) for name, setup in MODELS.items()}
    load_before = os.getloadavg()[0]
    print("Training step: NumPy (attention_course) next to PyTorch autograd")
    results = measure(rounds)
    load_after = os.getloadavg()[0]
    header = [
        f"{rounds} rounds × {STEPS} steps per setting, median per-step time; float32",
        f"CPU: {cpu_kind()}",
        f"Python {platform.python_version()}, NumPy {np.__version__}, "
        f"PyTorch {torch.__version__}, attention_course {attention_course.__version__}",
        f"system load (1-minute average) before / after: {load_before:.2f} / {load_after:.2f}",
        "OpenBLAS tuning variables removed for this run: "
        + (os.environ.get("BENCH_TRAINING_UNSET") or "none were set"),
        "same loss on the first batch, NumPy and PyTorch: "
        + ", ".join(f"{name} {ok}" for name, ok in same.items()),
    ]
    body, verdicts = table(results)
    print("\n".join(f"  {h}" for h in header))
    print(body)
    print("\n".join(verdicts))
    if not args.quick:
        OUT.parent.mkdir(parents=True, exist_ok=True)
        OUT.write_text("# One training step: NumPy next to PyTorch · 一步训练：NumPy 与 PyTorch 对照\n\n"
                       + "\n".join(f"- {h}" for h in header) + "\n\n" + body + "\n\n"
                       + "\n".join(verdicts) + "\n", encoding="utf-8")
        print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
