"""One course, one set of conventions, checked where learners read them.

- Heads, layers, positions and steps count from 0: no "head 1 of 3"-style label (第 1 个头 in
  Chinese) in any widget's controls or figures, or in any notebook's stored outputs.
- Attention-weight heatmaps drawn by the plotting helpers run from 0 to 1, unless their colour
  bar says in words what else they show.
- What learners read shows measurements, not project goals: no "target", "met / NOT met",
  "(≤ 0.8)" next to a ratio, 目标 or 达标 in the tables under figures/, the README, or the outputs
  of the notebook cells that show bench results. (The bench's console output is where goals go.)

Known failures in files these tests do not own are listed, by file and cell, in KNOWN below:
each is an xfail to remove once that file is fixed (strict: a fixed case fails until removed).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import matplotlib
import nbformat
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from matplotlib import pyplot as plt
from matplotlib.figure import Figure
from matplotlib.image import AxesImage

import attention_course.widgets as widgets_pkg
from attention_course import plots
from attention_course.softmax import softmax
from attention_course.widgets import Explorer

matplotlib.use("Agg")

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*/*.ipynb"))

# ------------------------------------------------------------------------------ known cases
#: (test, file relative to the repository, cell index or None) -> why it fails today.
#: Only files another part of the work owns; each is a strict xfail.
KNOWN: dict = {}


def case(test: str, path: Path | str, cell: int | None = None):
    rel = str(Path(path).resolve().relative_to(ROOT)) if Path(path).is_absolute() else str(path)
    name = rel if cell is None else f"{rel}#cell{cell}"
    why = KNOWN.get((test, rel, cell))
    marks = [pytest.mark.xfail(reason=f"known, to fix in that file: {why}", strict=True)] \
        if why else []
    return pytest.param(rel, cell, id=name, marks=marks)


# ------------------------------------------------------------------------------ counting from 0
ONE_BASED = [
    # "head 1 of 3", "layer 2 of 2", "step 5 of 60": a count that reads from 1
    re.compile(r"\b(heads?|layers?|positions?|steps?)\s+\d+\s+of\s+\d+\b", re.I),
    # 第 1 个头, 第 2 层: a Chinese ordinal of a head or layer counts from 1 (a step or a position
    # named by its index, 第 56 步 beside "step 56", is left alone)
    re.compile(r"第\s*\d+\s*(个)?\s*(头|层)"),
    # 头 1（共 3 个）: the Chinese "of 3"
    re.compile(r"(头|层|位置|步)\s*\d+\s*[（(]\s*共\s*\d+"),
]


def one_based_labels(text: str) -> list[str]:
    return [m.group(0) for rx in ONE_BASED for m in rx.finditer(text)]


@pytest.mark.parametrize("text, found", [
    ("head 1 of 3: pronoun", ["head 1 of 3"]), ("Layer 2 of 2", ["Layer 2 of 2"]),
    ("第 1 个头", ["第 1 个头"]), ("第2层", ["第2层"]), ("头 1（共 3 个）", ["头 1（共 3"]),
    ("head 1 (heads 0–2)", []), ("头 1（编号 0–2）", []), ("layer 0, head 1", []),
    ("one of 3 heads", []), ("把第 56 步的状态换成 0", []),
])
def test_the_one_based_scan_finds_what_it_should(text, found):
    assert one_based_labels(text) == found


#: Widgets of another part of the work that fail a check today: (id, lang, test) -> why.
KNOWN_WIDGETS: dict = {}


def course_explorers(test: str):
    for info in sorted(pkgutil.iter_modules(widgets_pkg.__path__), key=lambda m: m.name):
        if info.name.startswith("nb"):
            module = importlib.import_module(f"attention_course.widgets.{info.name}")
            for name, cls in inspect.getmembers(module, inspect.isclass):
                if issubclass(cls, Explorer) and cls.__module__ == module.__name__:
                    for lang in ("zh", "en"):
                        key = f"{info.name}.{name}"
                        why = KNOWN_WIDGETS.get((key, lang, test))
                        marks = [pytest.mark.xfail(reason=f"known, to fix in that file: {why}",
                                                   strict=True)] if why else []
                        yield pytest.param(cls, lang, id=f"{key}-{lang}", marks=marks)


_BUILT: dict = {}


def build(cls, lang, request):
    """One explorer per class and language in a test process, shared by the tests below, made
    with the test arguments of every explorer test (``explorer_kwargs`` in conftest.py)."""
    if (cls, lang) not in _BUILT:
        _BUILT[cls, lang] = cls(lang=lang, **request.getfixturevalue("explorer_kwargs")(cls))
    return _BUILT[cls, lang]


def control_labels(explorer) -> list[str]:
    out = []
    for c in explorer.controls.values():
        out.append(str(getattr(c, "description", "")))
        for o in getattr(c, "options", ()) or ():
            out.append(str(o[0] if isinstance(o, tuple) else o))
    return out


def figure_texts(fig) -> list[str]:
    return [t.get_text() for t in fig.findobj(matplotlib.text.Text) if t.get_text()]


def settings_of(explorer, n: int = 3):
    """The default setting and a few others: each slider or list at its ends and middle."""
    yield {}
    for name, c in explorer.controls.items():
        options = getattr(c, "options", None)
        if options:
            values = [o[1] if isinstance(o, tuple) else o for o in options]
            yield from ({name: values[i]} for i in (0, len(values) // 2, -1)[:n])
        elif hasattr(c, "max") and not isinstance(c.value, bool):
            yield from ({name: v} for v in (c.min, c.max))


def figures_over_settings(explorer, n: int = 3):
    """The explorer's figure at each of ``settings_of``, as the live widget keeps it: built once per
    layout, then updated (no drawing; a test reads it before the next setting changes it)."""
    built: dict = {}
    for setting in settings_of(explorer, n):
        for name, value in setting.items():
            explorer.controls[name].value = value
        if explorer._legacy:            # an explorer that only draws whole figures
            fig = explorer.figure()
            yield fig
            plt.close(fig)
            continue
        data = explorer.data            # what the controls' observer computed for these values
        key = explorer.layout_key(data)
        if key not in built:
            fig = Figure(figsize=explorer.figsize, dpi=explorer.dpi)
            built[key] = fig, explorer.build(fig, data)
        fig, art = built[key]
        explorer.update(art, data)
        yield fig


@pytest.mark.parametrize("cls, lang", list(course_explorers("inside")))
def test_every_text_of_a_widget_frame_lies_inside_the_frame(cls, lang, request):
    """The live widget sends its canvas as it is, with no tight bounding box as a notebook's static
    figure gets: a title wider than the frame is cut off there (09's grid title once was). The
    frame of the starting setting, laid out by a full draw as the widget makes it."""
    explorer = build(cls, lang, request)
    if explorer._legacy:
        pytest.skip("draws whole figures only")
    fig = explorer._build_live(explorer.data, explorer.layout_key(explorer.data))[0]
    renderer, frame = fig.canvas.get_renderer(), fig.bbox
    # An axis keeps Text objects for ticks beyond its limits too, and does not draw them.
    undrawn = set()
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            drawn = set(axis._update_ticks())
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                if tick not in drawn:
                    undrawn.update((id(tick.label1), id(tick.label2)))
    cut = []
    for text in fig.findobj(matplotlib.text.Text):
        if not text.get_text().strip() or not text.get_visible() or id(text) in undrawn:
            continue
        box = text.get_window_extent(renderer)
        if (box.x0 < frame.x0 - 1 or box.x1 > frame.x1 + 1
                or box.y0 < frame.y0 - 1 or box.y1 > frame.y1 + 1):
            cut.append(text.get_text())
    assert not cut, f"texts reaching past the frame's edge: {cut}"


@pytest.mark.parametrize("cls, lang", list(course_explorers("one_based")))
def test_widget_labels_count_from_zero(cls, lang, request):
    explorer = build(cls, lang, request)
    found = one_based_labels(" | ".join(control_labels(explorer)))
    for fig in figures_over_settings(explorer):
        found += one_based_labels(" | ".join(figure_texts(fig)))
    assert not found, f"1-based labels: {sorted(set(found))}"


def test_the_head_explorer_names_the_head_it_shows():
    from attention_course.widgets import nb04

    for lang in ("zh", "en"):
        explorer = nb04.HeadExplorer(lang=lang, num_heads=3, head=0)
        fig = explorer.figure()
        title = fig.axes[0].get_title()
        plt.close(fig)
        # head 0 is the first: its number in the title is 0, and the last one's is 2
        assert re.match(r"(head|头) 0\b", title) and "0–2" in title, title


def output_texts(cell) -> str:
    parts = []
    for out in cell.get("outputs", []):
        if "text" in out:
            parts.append(out["text"])
        for mime, value in out.get("data", {}).items():
            if mime.startswith("text/"):
                parts.append(value if isinstance(value, str) else "".join(value))
        if out.get("output_type") == "error":
            parts.append(f"{out.get('ename')}: {out.get('evalue')}")
    return "\n".join(parts)


@pytest.mark.parametrize("path, cell", [case("one_based", p) for p in NOTEBOOKS]
                         or [pytest.param(None, None)])
def test_notebook_outputs_count_from_zero(path, cell):
    if path is None:
        pytest.skip("no notebooks")
    nb = nbformat.read(ROOT / path, as_version=4)
    found = [(i, hit) for i, cell in enumerate(nb.cells) if cell.cell_type == "code"
             for hit in one_based_labels(output_texts(cell))]
    assert not found, f"1-based labels in stored outputs (cell, text): {found}"


# ------------------------------------------------------------------------------ one colour scale
def weight_images(fig):
    return [im for im in fig.findobj(AxesImage)]


def colour_bar_words(im) -> str:
    cbar = getattr(im, "colorbar", None)
    if cbar is None:
        return ""
    return (cbar.ax.get_ylabel() or cbar.ax.get_xlabel() or "").strip()


def assert_on_the_weight_scale(im, where: str):
    data = np.asarray(im.get_array(), dtype=float)
    if data.size == 0 or np.nanmin(data) < 0:
        return                      # signed values are not weights (a diverging map, see plots)
    assert im.get_clim() == (0.0, 1.0) or colour_bar_words(im), (
        f"{where}: a heatmap of non-negative values runs {im.get_clim()} with no words on its "
        "colour bar")


weights_strategy = st.tuples(st.integers(1, 9), st.integers(1, 9), st.integers(0, 2**32 - 1),
                             st.sampled_from([0.05, 1.0, 5.0])).map(
    lambda t: softmax(np.random.default_rng(t[2]).normal(size=(t[0], t[1])) / t[3], axis=-1))


# The helpers fix the scale whatever the values: a few shapes and temperatures show it.
@settings(max_examples=10, deadline=None)
@given(weights=weights_strategy)
def test_every_weight_heatmap_of_the_helpers_runs_0_to_1(weights):
    ax = plots.heatmap(weights)
    assert ax.images[0].get_clim() == (0.0, 1.0)
    plt.close(ax.figure)
    fig = plots.heatmaps([weights, weights * 0.5])
    assert [im.get_clim() for im in weight_images(fig)] == [(0.0, 1.0)] * 2
    plt.close(fig)
    ax = plots.heatmap(weights, vmax=0.5, cbar_label="weight, scale stretched to 0.5")
    assert_on_the_weight_scale(ax.images[0], "a stretched scale that says so")
    plt.close(ax.figure)


def test_the_weight_scale_check_catches_a_stretched_scale():
    ax = plots.heatmap(np.full((3, 3), 1 / 3), vmax=0.4)
    with pytest.raises(AssertionError, match="no words on its colour bar"):
        assert_on_the_weight_scale(ax.images[0], "stretched")
    plt.close(ax.figure)


@pytest.mark.parametrize("cls, lang", list(course_explorers("weight_range")))
def test_every_widget_heatmap_runs_0_to_1_or_says_what_it_shows(cls, lang, request):
    explorer = build(cls, lang, request)
    for fig in figures_over_settings(explorer, n=2):
        for im in weight_images(fig):
            assert_on_the_weight_scale(im, f"{cls.__name__} at {explorer.values()}")


HEATMAP_CALLS = {"heatmap", "heatmaps"}


def off_scale_heatmap_calls(source: str) -> list[str]:
    """heatmap(...) calls of a cell whose range is set away from 0-1 with no colour-bar words.

    Signed ranges (a negative ``vmin``) and diverging maps are not weights and are let pass.
    """
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = getattr(node.func, "attr", None) or getattr(node.func, "id", None)
        if name not in HEATMAP_CALLS:
            continue
        kw = {k.arg: k.value for k in node.keywords if k.arg}
        if "cbar_label" in kw or "vmax" not in kw:
            continue
        vmax = kw["vmax"]
        if isinstance(vmax, ast.Constant) and vmax.value == 1:
            continue
        vmin = kw.get("vmin")
        if vmin is not None and isinstance(vmin, ast.UnaryOp) and isinstance(vmin.op, ast.USub):
            continue
        if isinstance(kw.get("diverging"), ast.Constant) and kw["diverging"].value:
            continue
        found.append(ast.get_source_segment(source, node) or name)
    return found


def weight_range_cases():
    for p in NOTEBOOKS:
        nb = nbformat.read(p, as_version=4)
        for i, cell in enumerate(nb.cells):
            if cell.cell_type == "code" and off_scale_heatmap_calls(cell.source):
                yield case("weight_range", p, i)
    yield pytest.param("(all other cells)", None, id="all-other-cells")


@pytest.mark.parametrize("path, cell", list(weight_range_cases()))
def test_notebook_heatmaps_run_0_to_1_or_say_what_they_show(path, cell):
    if cell is None:
        return      # every cell not listed passes the scan
    nb = nbformat.read(ROOT / path, as_version=4)
    assert not off_scale_heatmap_calls(nb.cells[cell].source)


def test_the_heatmap_call_scan_finds_a_stretched_range():
    assert off_scale_heatmap_calls("heatmap(w, vmax=top)") == ["heatmap(w, vmax=top)"]
    assert not off_scale_heatmap_calls("heatmap(w, vmax=1.0)")
    assert not off_scale_heatmap_calls("heatmap(pe, vmin=-1, vmax=1.5)")
    assert not off_scale_heatmap_calls("heatmap(d, vmax=3, cbar_label='distance')")


# ------------------------------------------------------------------------------ no goals
GOALS = [
    re.compile(r"\btargets?\b(?=\s*[≤≥<>=:(]|\s+line|\s*\))", re.I),   # "target ≤ 32 MiB", "target)"
    re.compile(r"\(\s*target\b", re.I),                                   # "(target ≥ 1.8)"
    re.compile(r"NOT met"),
    re.compile(r"\bmet\)"),
    re.compile(r"[—–-]\s*met\b"),                                         # "… — met"
    re.compile(r"\d\s*[(（]\s*[≤≥<>]\s*[\d.]+\s*%?\s*[)）]"),               # "1.61 (≤ 1.25)"
    re.compile(r"目标"),
    re.compile(r"达标"),
]


def goal_words(text: str) -> list[str]:
    return sorted({m.group(0) for rx in GOALS for m in rx.finditer(text)})


@pytest.mark.parametrize("text, found", [
    ("1.79 (target ≥ 1.8) — NOT met", ["(target", "NOT met", "target"]),
    ("n = 256: 1.61 (≤ 1.25); n = 512", ["1 (≤ 1.25)"]),
    ("12.2 MiB (target ≤ 32 MiB) — met", ["(target", "target", "— met"]),
    ("1.61（≤ 1.25），未达标", ["1（≤ 1.25）", "达标"]), ("这几个目标", ["目标"]),
    ("each row of targets is one token", []), ("the targets of the task", []),
    ("accuracy ≥ 0.95: True", []), ("0.48 of the 24 GiB limit", []),
])
def test_the_goal_scan_finds_what_it_should(text, found):
    assert goal_words(text) == sorted(found)


def goal_files():
    files = sorted((ROOT / "figures").glob("*.md")) + sorted(ROOT.glob("README*.md"))
    files += sorted((ROOT / "src" / "attention_course" / "data").glob("*.md"))   # the stored bench
    if (ROOT / "benchmarks" / "README.md").exists():
        files.append(ROOT / "benchmarks" / "README.md")
    return [case("goal_words", f) for f in files]


@pytest.mark.parametrize("path, cell", goal_files())
def test_no_goal_words_in_what_learners_read(path, cell):
    found = goal_words((ROOT / path).read_text(encoding="utf-8"))
    assert not found, f"{path}: {found}"


def bench_cells():
    """Code cells that show bench results: they read a stored bench file or run the bench."""
    for p in NOTEBOOKS:
        nb = nbformat.read(p, as_version=4)
        for i, cell in enumerate(nb.cells):
            if cell.cell_type == "code" and re.search(r"bench_|make bench|benchmarks/", cell.source):
                yield case("goal_words", p, i)


@pytest.mark.parametrize("path, cell", list(bench_cells()) or [pytest.param(None, None)])
def test_no_goal_words_in_notebook_bench_outputs(path, cell):
    if path is None:
        pytest.skip("no notebook cell shows bench results")
    nb = nbformat.read(ROOT / path, as_version=4)
    found = goal_words(output_texts(nb.cells[cell]))
    assert not found, f"{path} cell {cell}: {found}"
