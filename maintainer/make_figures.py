"""Regenerate the images in figures/ that come from the library's plotting code.

For every widget of the course (each Explorer subclass in attention_course.widgets.nbNN), the
static figure of its default setting, in both languages: figures/widget_nbNN_<Name>_<lang>.png.
(The benchmark plot comes from `make bench`, the browser screenshots from `make test-browser`.)

Usage: python maintainer/make_figures.py [nbNN ...]    (only those notebooks' widgets; default: all)

Notebook 07's explorer trains its four default models first (a few seconds).
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

from matplotlib import pyplot as plt  # noqa: E402

import attention_course.widgets as widgets  # noqa: E402
from attention_course.widgets import Explorer  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "figures"


def explorers():
    for info in sorted(pkgutil.iter_modules(widgets.__path__), key=lambda m: m.name):
        if not info.name.startswith("nb"):
            continue
        module = importlib.import_module(f"attention_course.widgets.{info.name}")
        for name, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, Explorer) and cls is not Explorer and cls.__module__ == module.__name__:
                yield info.name, name, cls


def main(argv=None) -> int:
    only = set(sys.argv[1:] if argv is None else argv)
    OUT.mkdir(exist_ok=True)
    written = []
    for module, name, cls in explorers():
        if only and module not in only:
            continue
        takes_lang = "lang" in inspect.signature(cls).parameters
        for lang in ("zh", "en") if takes_lang else ("en",):
            explorer = cls(lang=lang) if takes_lang else cls()
            fig = explorer.figure()
            path = OUT / f"widget_{module}_{name}_{lang}.png"
            fig.savefig(path, dpi=72, bbox_inches="tight")
            plt.close(fig)
            written.append(path)
    for p in written:
        print(p.relative_to(ROOT))
    print(f"{len(written)} figures")
    return 0


if __name__ == "__main__":
    sys.exit(main())
