"""How long `make grade` takes for a class: 3 students × every notebook of one language, re-check included.

    python benchmarks/grading.py                 # 3 students, every notebook of en
    python benchmarks/grading.py --lang zh --students 3
    python benchmarks/grading.py --notebooks 1   # the first notebook only: the small case the tests run
    python benchmarks/grading.py --recheck-only  # the re-check alone, 3 rounds, without nbgrader

The students: one returns the instructor's notebooks (every exercise right), one the blank
hand-out (every check fails on its stub), one the hand-out with every locked check cell wrapped in
``try/except`` (nbgrader restores them). Grading runs ``instructor/grade.py`` exactly as
``make grade`` does (nbgrader's generate_assignment, autograde and generate_feedback, then the
re-check, a grader and a worker process per notebook), in a new course folder.

The output gives the wall time of the whole run and of the re-check alone (timed again on the
same notebooks afterwards), the machine (CPU model, cores, BLAS) and the load average before and
after, and the budget line: a class of 3 × all notebooks must grade in 8 minutes on 2 cores.

With ``--recheck-only`` nbgrader does not run: the re-check alone goes over the returned notebooks
(make grade's input layout) one at a time, in rounds, and the median round is the figure to compare
between two versions of the re-check.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from machine import cpu_kind, load_text

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "instructor"))
BUDGET_S = 8 * 60


def wrapped(nb: dict) -> dict:
    for cell in nb["cells"]:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("grade") and cell["cell_type"] == "code":
            src = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            cell["source"] = "try:\n" + "\n".join("    " + line for line in src.splitlines()) + \
                             "\nexcept Exception:\n    pass"
    return nb


def make_class(lang: str, students: int, notebooks: list[str], folder: Path) -> Path:
    from build_student import release

    every = sorted(p.name for p in (ROOT / "notebooks" / lang).glob("*.ipynb"))
    # nbgrader takes one notebook id, or none for all of them
    blank_dir = release(lang, folder / "release-course",
                        None if notebooks == every else [n.removesuffix(".ipynb") for n in notebooks[:1]])
    submitted = folder / "returned"
    kinds = ["correct", "blank", "wrapped"]
    for i in range(students):
        kind = kinds[i % len(kinds)]
        dest = submitted / f"{kind}{i // len(kinds) or ''}"
        dest.mkdir(parents=True)
        for name in notebooks:
            if kind == "correct":
                shutil.copy(ROOT / "notebooks" / lang / name, dest / name)
            else:
                nb = json.loads((blank_dir / name).read_text(encoding="utf-8"))
                (dest / name).write_text(json.dumps(wrapped(nb) if kind == "wrapped" else nb),
                                         encoding="utf-8")
    return submitted


def recheck_rounds(submitted: Path, lang: str, rounds: int) -> list[float]:
    """Re-check every returned notebook one at a time, ``rounds`` times; print each round and the median."""
    import statistics

    import recheck

    paths = sorted(submitted.glob("*/*.ipynb"))
    times, scores = [], {}
    for r in range(rounds):
        start = time.perf_counter()
        for path in paths:
            result = recheck.recheck(path, lang)
            scores[(path.parent.name, path.name)] = result.score
        times.append(time.perf_counter() - start)
        print(f"round {r}: the re-check of {len(paths)} notebooks took {times[-1]:.1f} s")
    print(f"the re-check alone, median of {rounds} rounds: {statistics.median(times):.1f} s")
    for kind in sorted({s for s, _ in scores}):
        total = sum(v for (s, _), v in scores.items() if s == kind and v is not None)
        print(f"  {kind}: {total:g} points")
    return times


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lang", default="en", choices=("zh", "en"))
    parser.add_argument("--students", type=int, default=3)
    parser.add_argument("--notebooks", type=int, default=0, help="1: only the first notebook; 0: all")
    parser.add_argument("--keep", help="grade into this folder and keep it (default: a temporary one)")
    parser.add_argument("--recheck-only", action="store_true",
                        help="time only the re-check of the returned notebooks, in rounds (no nbgrader)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of --recheck-only (default 3)")
    args = parser.parse_args(argv)
    names = sorted(p.name for p in (ROOT / "notebooks" / args.lang).glob("*.ipynb"))
    if args.notebooks not in (0, 1):
        parser.error("--notebooks is 1 (the first notebook) or 0 (all of them)")
    names = names[:args.notebooks] if args.notebooks else names
    folder = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="grading-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    print(f"machine: {cpu_kind()}")
    print(f"python {platform.python_version()}; load average before: {load_text()}")
    submitted = make_class(args.lang, args.students, names, folder)
    print(f"class: {args.students} students × {len(names)} notebooks ({args.lang})")
    if args.recheck_only:
        recheck_rounds(submitted, args.lang, args.rounds)
        print(f"load average after: {load_text()}")
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)
        return 0
    start = time.perf_counter()
    run = subprocess.run([sys.executable, str(ROOT / "instructor" / "grade.py"), str(submitted),
                          "--out", str(folder / "course")], capture_output=True, text=True, encoding="utf-8")
    total = time.perf_counter() - start
    print(run.stdout.strip())
    if run.returncode not in (0, 1):
        print(run.stderr, file=sys.stderr)
        return run.returncode
    import recheck

    start = time.perf_counter()
    for student in sorted(p for p in (folder / "course" / "submitted").iterdir() if p.is_dir()):
        for path in sorted(student.glob(f"*-{args.lang}/*.ipynb")):   # submitted/<student>/NN-lang/
            recheck.recheck(path, args.lang)
    again = time.perf_counter() - start
    print(f"\nmake grade, re-check included: {total:.1f} s")
    print(f"the re-check alone, run again one notebook at a time: {again:.1f} s")
    print(f"load average after: {load_text()}")
    if args.students == 3 and not args.notebooks:
        print(f"budget (3 students × all notebooks ≤ {BUDGET_S // 60} min on 2 cores): {total <= BUDGET_S}")
    if not args.keep:
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
