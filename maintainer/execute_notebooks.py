"""Execute notebooks from a clean kernel, store their outputs, and report each one's time.

Widget state is not stored (GitHub cannot render it; the static figure after every widget is
what readers see there), and the widget-view bundle of a displayed widget is dropped, leaving
its plain-text stand-in.

Usage: python maintainer/execute_notebooks.py notebooks/zh/01_library_analogy.ipynb ...
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient, output_widget

# nbclient mirrors each ipywidgets Output widget and echoes its state back to the kernel on the
# shell channel while it is waiting there for the execute reply; now and then the reply is missed
# and the run stalls until the cell timeout (jupyter/nbclient#312). The kernel needs no echo.
output_widget.OutputWidget.sync_state = lambda self: None

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def strip_widget_state(nb) -> None:
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        cell.metadata.pop("execution", None)     # timestamps would change every stored run
        for out in cell.get("outputs", []):
            data = out.get("data")
            if data and WIDGET_VIEW in data:
                data.pop(WIDGET_VIEW)


def execute(path: Path, timeout: int = 120) -> float:
    nb = nbformat.read(path, as_version=4)
    os.environ.setdefault("PYTHONHASHSEED", "0")
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}},
                            record_timing=False,
                            store_widget_state=True)  # needed to run Output widgets; stripped below
    start = time.perf_counter()
    client.execute()
    elapsed = time.perf_counter() - start
    strip_widget_state(nb)
    nbformat.write(nb, path)
    return elapsed


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="maintainer/execute_notebooks.py",
        description="Execute notebooks from a clean kernel (the default kernel, python3), store "
                    "their outputs in place, and print each one's time.")
    parser.add_argument("notebooks", nargs="+", metavar="NOTEBOOK.ipynb",
                        help="the notebooks to execute, e.g. notebooks/en/02_qkv_projections.ipynb")
    parser.add_argument("--timeout", type=int, default=120, metavar="SECONDS",
                        help="the longest a cell may run (default: 120)")
    args = parser.parse_args(argv)
    missing = [p for p in args.notebooks if not Path(p).is_file()]
    if missing:
        parser.error(f"no such notebook: {', '.join(missing)}")
    total = 0.0
    for p in args.notebooks:
        t = execute(Path(p), args.timeout)
        total += t
        print(f"{t:6.1f} s  {p}")
    print(f"{total:6.1f} s  total")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
