"""Write 08's other solution: a two-layer model that solves the repeat task without the circuit.

Which seed lands on which solution changes with the BLAS kernel, so notebook 08 does not train
this model: it loads the stored one (attention_course.sweep.other_solution). This script trains
it again under the kernel and seed it is given, with 08's settings, checks that it is what 08
says (no circuit by the rule, the training periods solved), and writes its weights and how it
was made.

    python maintainer/other_solution.py --seed 154 --kernel Prescott --out build/other_solution.npz

make other-solution runs it with the seed and kernel of the stored model; make
other-solution-store copies the result into the package. The kernel is chosen through the
kernel stage's switches (maintainer/kernel_stage.py), in a child process of its own.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import kernel_stage  # noqa: E402

STEPS, BATCH, LR = 600, 16, 1e-2          # 08's two-layer runs


def kernel_named(name: str) -> kernel_stage.Kernel:
    known = {k.name.split()[-1]: k for k in kernel_stage.kernels() if k.blas}
    if name not in known:
        raise SystemExit(f"--kernel must be one of {sorted(known)}; got {name!r}")
    return known[name]


def train_and_write(seed: int, kernel: kernel_stage.Kernel, out: str) -> int:
    import numpy as np
    from threadpoolctl import threadpool_info

    from attention_course import sweep
    from attention_course.tasks import repeat_batch
    from attention_course.tiny_model import repeat_model, train

    got = [i.get("architecture") for i in threadpool_info() if i.get("user_api") == "blas"]
    if not any(arch in kernel.blas for arch in got):
        print(f"other solution: asked for {kernel.name}, got {got}")
        return 1
    run = train(repeat_model("2 layers", seed), partial(repeat_batch, batch_size=BATCH, length=20),
                steps=STEPS, lr=LR, seed=seed, n_checkpoints=2)
    model, batches = run.model, sweep.evaluation_batches()
    accuracy = model.accuracy(batches["rep"])
    unseen = {P: round(model.accuracy(b), 3) for P, b in batches["periods"].items()}
    circuit = sweep.has_circuit(model, batches["rep"])
    print(f"other solution: seed {seed} under {kernel.name} ({', '.join(got)}): circuit by the rule "
          f"{circuit}, accuracy on the training periods {accuracy:.3f}, by period {unseen}")
    if circuit or accuracy < 0.95:
        print("other solution: this seed does not give a model that solves the task without the circuit "
              "under this kernel; pick another (the sweep lists candidates)")
        return 1
    info = dict(seed=seed, kernel=kernel.name.split()[-1], steps=STEPS, batch_size=BATCH, lr=LR,
                numpy=np.__version__)
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out, info=json.dumps(info), **model.params)
    print(f"other solution: wrote {out} ({Path(out).stat().st_size / 1000:.0f} kB)")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--kernel", required=True, help="an OpenBLAS kernel of the stage, e.g. Prescott")
    parser.add_argument("--out", required=True)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    kernel = kernel_named(args.kernel)
    if args.child:
        return train_and_write(args.seed, kernel, args.out)
    default = kernel_stage.probe(sys.executable, {})
    [kernel] = kernel_stage.plan(default, [kernel])
    if kernel.skipped and "lacks" in kernel.skipped:
        print(f"other solution: cannot run {kernel.name} here: {kernel.skipped}")
        return 1
    return subprocess.run([sys.executable, __file__, "--child", "--seed", str(args.seed), "--kernel",
                           args.kernel, "--out", args.out], env=kernel_stage.clean_env(kernel.env)).returncode


if __name__ == "__main__":
    sys.exit(main())
