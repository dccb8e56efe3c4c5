"""``python -m attention_course.workbook [--lang zh|en] [--into workbook] [--source notebooks]``:
make or update the learner's workbook (make lab runs this before it opens JupyterLab); with
``--progress``, re-check it and print every exercise's status instead (make progress)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .sync import LANGS, sync


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m attention_course.workbook",
                                     description="Make or update the learner's workbook from notebooks/.")
    parser.add_argument("--lang", choices=LANGS, help="one language only (default: both)")
    parser.add_argument("--into", default="workbook", help="the workbook's folder (default: workbook)")
    parser.add_argument("--source", default="notebooks", help="the source notebooks (default: notebooks)")
    parser.add_argument("--progress", action="store_true",
                        help="re-check every exercise of the workbook and print its status")
    args = parser.parse_args(argv)
    langs = (args.lang,) if args.lang else LANGS
    if args.progress:
        from .progress import progress, table

        for lang in langs:
            for line in table(progress(Path(args.into), Path(args.source), lang), lang):
                print(line)
        return 0
    report = sync(Path(args.into), Path(args.source), langs)
    for line in report.lines():
        print(line)
    print(f"workbook: {Path(args.into)}/ is ready ({len(report.unchanged)} notebook(s) as you left them)")
    return 1 if report.not_parsing else 0


if __name__ == "__main__":
    sys.exit(main())
