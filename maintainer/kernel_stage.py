"""The kernel stage: nbval again under other BLAS kernels and NumPy code paths (make test-kernels).

A compared output of a notebook must not depend on which kernel the learner's CPU runs. OpenBLAS
picks its kernel from the CPU (OPENBLAS_CORETYPE overrides it), and NumPy picks its SIMD code paths
(NPY_DISABLE_CPU_FEATURES switches some off). `make test` runs nbval on the default kernel, with
OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset; this stage runs it again under:

- Sandybridge (AVX): every notebook of both languages;
- Prescott (SSE3), Haswell (AVX2), SkylakeX (AVX-512) and NumPy without its AVX-512 paths: the
  notebooks that train or run a real model (07, 08, 09), where rounding is amplified.

Under each kernel, and first under the default one, it also trains 07's and 08's models on the
notebooks' own seeds and fails if a value behind a compared claim lies closer to its threshold than
the claim's margin (python -m attention_course.sweep --notebook-seeds): a claim that barely holds
here would flip on a computer whose rounding differs a little more.

A kernel the CPU cannot run is skipped with a message, and so is the CPU's own default kernel, which
make test's nbval has just run; under CI=true at least two must run. Each run
first asks, in a process with the same environment, which kernel and which NumPy paths it got, and
fails if the switch did not take effect. These variables are set here alone: never in a notebook,
the library or another test.

    python maintainer/kernel_stage.py            # every kernel this CPU runs
    python maintainer/kernel_stage.py --plan     # only say which would run
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted(str(p.relative_to(ROOT)) for p in ROOT.glob("notebooks/*/*.ipynb"))
TRAINED = [nb for nb in NOTEBOOKS if Path(nb).name[:2] in ("07", "08", "09")]
# Variables that choose a kernel: unset for every run, then set by the run that wants one.
KERNEL_VARS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "NPY_DISABLE_CPU_FEATURES", "NPY_ENABLE_CPU_FEATURES")
# NumPy 2.4's names; older names are ignored without a word, so every run checks that they took effect.
NUMPY_AVX512 = ("X86_V4", "AVX512_ICL", "AVX512_SPR")
MIN_UNDER_CI = 2

PROBE = r"""
import json
from numpy._core._multiarray_umath import __cpu_features__ as features
from threadpoolctl import threadpool_info
blas = [(i.get("internal_api"), i.get("architecture"))
        for i in threadpool_info() if i.get("user_api") == "blas"]
print(json.dumps({"blas": blas, "features": {k: bool(v) for k, v in features.items()}}))
"""


@dataclass
class Kernel:
    name: str
    env: dict
    notebooks: list
    needs: tuple                  # NumPy CPU features the CPU must have
    blas: tuple = ()              # OpenBLAS core names that show the switch took effect
    numpy_off: tuple = ()         # NumPy features that must read False when it did
    skipped: str = field(default="")


def kernels() -> list[Kernel]:
    return [
        Kernel("OpenBLAS Sandybridge", {"OPENBLAS_CORETYPE": "Sandybridge"}, NOTEBOOKS, ("AVX",),
               blas=("Sandybridge",)),
        # OpenBLAS reports its Prescott kernel under the older core name it shares (Katmai).
        Kernel("OpenBLAS Prescott", {"OPENBLAS_CORETYPE": "Prescott"}, TRAINED, ("SSE3",),
               blas=("Prescott", "Katmai")),
        Kernel("OpenBLAS Haswell", {"OPENBLAS_CORETYPE": "Haswell"}, TRAINED, ("AVX2",),
               blas=("Haswell",)),
        Kernel("OpenBLAS SkylakeX", {"OPENBLAS_CORETYPE": "SkylakeX"}, TRAINED, ("AVX512_SKX",),
               blas=("SkylakeX",)),
        Kernel("NumPy without AVX-512", {"NPY_DISABLE_CPU_FEATURES": " ".join(NUMPY_AVX512)}, TRAINED,
               ("AVX512_SKX",), numpy_off=NUMPY_AVX512),
    ]


def clean_env(extra: dict) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in KERNEL_VARS}
    # two notebooks at a time on two cores: one BLAS thread each (as make test does)
    env.update(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", **extra)
    return env


def probe(python: str, extra: dict) -> dict:
    out = subprocess.run([python, "-c", PROBE], env=clean_env(extra), capture_output=True, text=True,
                         encoding="utf-8", check=True)
    return json.loads(out.stdout)


def describe(seen: dict) -> str:
    blas = ", ".join(f"{api} {arch}" for api, arch in seen["blas"]) or "no BLAS found"
    off = [k for k in NUMPY_AVX512 if k in seen["features"] and not seen["features"][k]]
    return f"BLAS {blas}; NumPy's AVX-512 paths {'off: ' + ' '.join(off) if off else 'as the CPU allows'}"


def plan(default: dict, candidates: list[Kernel]) -> list[Kernel]:
    """Mark each kernel the CPU (or the BLAS) cannot run as skipped, with the reason."""
    features = default["features"]
    openblas = any(api == "openblas" for api, _ in default["blas"])
    for k in candidates:
        missing = [f for f in k.needs if not features.get(f, False)]
        if missing:
            k.skipped = f"this CPU lacks {', '.join(missing)}"
        elif k.blas and not openblas:
            k.skipped = "NumPy's BLAS here is not OpenBLAS"
        elif any(arch in k.blas for _, arch in default["blas"]):
            k.skipped = "it is this CPU's default kernel, which make test's nbval ran"
    return candidates


def took_effect(k: Kernel, seen: dict) -> str:
    """'' when the run got what it asked for, else what it got instead."""
    if k.blas and not any(arch in k.blas for _, arch in seen["blas"]):
        return f"asked for {k.name}, got {describe(seen)}"
    still_on = [f for f in k.numpy_off if seen["features"].get(f, True)]
    if still_on:
        return f"asked NumPy to switch off {' '.join(k.numpy_off)}, but {' '.join(still_on)} still on"
    return ""


def margins(python: str, name: str, extra: dict) -> bool:
    """Train the notebooks' seeds under one kernel; True when every value is clear of its threshold."""
    start = time.monotonic()
    run = subprocess.run([python, "-m", "attention_course.sweep", "--notebook-seeds"], env=clean_env(extra),
                         cwd=ROOT)
    print(f"kernel stage: {name}: margins {'kept' if run.returncode == 0 else 'NOT kept'} "
          f"in {time.monotonic() - start:.0f} s", flush=True)
    return run.returncode == 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plan", action="store_true", help="only print which kernels would run")
    parser.add_argument("--python", default=sys.executable)
    args = parser.parse_args(argv)
    default = probe(args.python, {})
    print(f"kernel stage: the default kernel (make test's nbval): {describe(default)}", flush=True)
    todo = plan(default, kernels())
    for k in todo:
        if k.skipped:
            print(f"kernel stage: skipped {k.name}: {k.skipped}")
    runnable = [k for k in todo if not k.skipped]
    if os.environ.get("CI") == "true" and len(runnable) < MIN_UNDER_CI:
        print(f"kernel stage: FAILED: under CI at least {MIN_UNDER_CI} kernels besides the default must run, "
              f"this CPU runs {len(runnable)}")
        return 1
    if args.plan:
        for k in runnable:
            print(f"kernel stage: would run {k.name} on {len(k.notebooks)} notebooks")
        return 0
    failed = []
    if not margins(args.python, "the default kernel", {}):
        failed.append("margins on the default kernel")
    for k in runnable:
        seen = probe(args.python, k.env)
        wrong = took_effect(k, seen)
        if wrong:
            print(f"kernel stage: FAILED: {wrong}")
            failed.append(k.name)
            continue
        print(f"kernel stage: {k.name}: {describe(seen)}; nbval on {len(k.notebooks)} notebooks", flush=True)
        start = time.monotonic()
        run = subprocess.run([args.python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2",
                              "--dist", "loadfile", "--nbval", "--nbval-current-env", *k.notebooks],
                             env=clean_env(k.env), cwd=ROOT)
        print(f"kernel stage: {k.name}: {'passed' if run.returncode == 0 else 'FAILED'} "
              f"in {time.monotonic() - start:.0f} s", flush=True)
        if run.returncode != 0:
            failed.append(k.name)
        if not margins(args.python, k.name, k.env):
            failed.append(f"margins under {k.name}")
    ran = [k.name for k in runnable]
    print(f"kernel stage: ran {', '.join(ran) or 'none'}; "
          f"{'failed: ' + ', '.join(failed) if failed else 'every compared output the same'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
