"""Build the student copies of the course with nbgrader.

The notebooks in notebooks/ are the instructor version (solutions filled in, executed). This
writes build/student/{zh,en}/ where every solution between ``### BEGIN SOLUTION`` and
``### END SOLUTION`` is replaced by ``raise NotImplementedError()``, hidden tests are removed,
check cells are locked, and outputs are cleared. figures/ is copied beside the copies so that
relative image links keep working.

Usage: python .ci/build_student.py [--out build/student]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LANGS = ("zh", "en")


def build(out: Path) -> list[Path]:
    out = out.resolve()
    nbgrader = Path(sys.executable).with_name("nbgrader")
    written = []
    with tempfile.TemporaryDirectory() as tmp:
        course = Path(tmp)
        for lang in LANGS:
            shutil.copytree(ROOT / "notebooks" / lang, course / "source" / lang,
                            ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
            subprocess.run(
                [str(nbgrader), "generate_assignment", lang, "--no-db", "--force",
                 f"--CourseDirectory.root={course}", "--log-level=WARN"],
                check=True, cwd=course,
            )
            target = out / lang
            if target.exists():
                shutil.rmtree(target)
            shutil.copytree(course / "release" / lang, target)
            written += sorted(target.glob("*.ipynb"))
    # Notebooks link images as ../../figures/...: keep that path valid from out/<lang>/.
    figures = out.parent / "figures"
    if (ROOT / "figures").exists() and figures.resolve() != (ROOT / "figures").resolve():
        shutil.copytree(ROOT / "figures", figures, dirs_exist_ok=True)
    return written


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "build" / "student"),
                        help="folder that receives zh/ and en/ (default build/student)")
    args = parser.parse_args()
    written = build(Path(args.out))
    for p in written:
        print(p.relative_to(Path(args.out).resolve().parent))
    print(f"{len(written)} student notebooks in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
