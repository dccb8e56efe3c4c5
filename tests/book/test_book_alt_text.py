"""Alt text: every image of both books says what it shows, and it comes from the notebooks.

The convention: a code cell's metadata "alt" is a list of strings, one per image output of the
cell, in order, in the notebook's language; book/course_book.py makes each its image's alt. A
Markdown image carries its own, ![what it shows](file). Alt text is metadata, not Markdown, so the
word budgets never count it.
"""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.book

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*/[0-9][0-9]_*.ipynb"))
# what says nothing about a figure: a word for "figure", or a file's name or path
SAYS_NOTHING = {"figure", "image", "picture", "plot", "chart", "graph", "图", "图片", "图像", "插图"}
FILE_NAME = re.compile(r"^\S*\.(png|jpe?g|gif|svg|webp)$|^_images/", re.I)
MARKDOWN_IMAGE = re.compile(r"!\[([^\]]*)\]\(")
HAN = re.compile("[\u4e00-\u9fff]")


def says_something(alt: str | None) -> bool:
    alt = (alt or "").strip()
    return bool(alt) and alt.lower() not in SAYS_NOTHING and not FILE_NAME.search(alt)


def test_the_check_rejects_what_says_nothing():
    assert says_something("Heatmap of the attention weights: each query looks mostly at the key before it")
    assert says_something("热力图：每个查询主要看它前一个键")
    assert says_something("The two <pad> rows split their weight 0.50/0.50; each near 1/4")
    for alt in (None, "", "  ", "figure", "Image", "图", "_images/85d2fbad.png", "heatmap.png",
                "figures/screenshot_zh_01.png"):
        assert not says_something(alt), alt


def test_every_image_of_both_books_has_alt_text(page_tags):
    bad = {}
    for page, tags in page_tags.items():
        alts = [attrs.get("alt") for tag, attrs in tags if tag == "img"]
        if missing := [alt for alt in alts if not says_something(alt)]:
            bad[page] = f"{len(missing)} of {len(alts)} images, such as alt={missing[0]!r}"
    assert not bad, "images whose alt text does not say what they show:\n" + "\n".join(
        f"  {page}: {what}" for page, what in bad.items())


def image_outputs(cell: dict) -> int:
    return sum(1 for o in cell.get("outputs", []) if any(m.startswith("image/") for m in o.get("data", {})))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[f"{p.parent.name}/{p.stem}" for p in NOTEBOOKS])
def test_every_image_output_has_its_alt_text_in_the_cell_metadata(path):
    lang = path.parent.name
    problems = []
    for i, cell in enumerate(json.loads(path.read_text(encoding="utf-8"))["cells"]):
        source = "".join(cell["source"])
        if cell["cell_type"] == "markdown":
            problems += [f"cell {i}: Markdown image ![{alt}]" for alt in MARKDOWN_IMAGE.findall(source)
                         if not says_something(alt)]
            continue
        images, alts = image_outputs(cell), cell["metadata"].get("alt", [])
        if not isinstance(alts, list) or len(alts) != images:
            problems.append(f"cell {i}: {images} image outputs, metadata alt {alts!r}")
        else:
            problems += [f"cell {i}: alt {alt!r}" for alt in alts if not says_something(alt)
                         or (lang == "zh" and not HAN.search(alt))]
    assert not problems, f"{lang}/{path.name} (alt text in its language):\n  " + "\n  ".join(problems)


# -- the extension itself, on a notebook made here -------------------------------------------
PNG = base64.b64encode(bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
    "0000000d49444154789c6360f8cfc0f01f0005000201a5d7e5a20000000049454e44ae426082")).decode()


def a_notebook(cells: list[tuple[dict, list]]) -> dict:
    """A notebook: a title, then one code cell for each (metadata, outputs)."""
    return {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
        {"id": "title", "cell_type": "markdown", "metadata": {}, "source": "# 标题"},
        *[{"id": f"c{i}", "cell_type": "code", "metadata": meta, "source": "x", "execution_count": 1,
           "outputs": outs} for i, (meta, outs) in enumerate(cells)]]}


def image(n: int) -> dict:
    return {"output_type": "display_data", "metadata": {},
            "data": {"image/png": PNG, "text/plain": f"<Figure {n}>"}}


def test_the_book_puts_each_cells_alt_texts_on_its_images_in_order(tmp_path):
    from sphinx.application import Sphinx

    explorer = {"output_type": "display_data", "metadata": {},
                "data": {"text/plain": "VBox(children=(HBox(children=(IntSlider(value=7),)),))"}}
    notebook = a_notebook([({"alt": ["第一张：热力图", "第二张：柱状图"]}, [image(1), image(2)]),
                           ({}, [explorer]),
                           ({"alt": ["第三张：曲线"]}, [image(3)])])
    src = tmp_path / "src"
    src.mkdir()
    (src / "index.ipynb").write_text(json.dumps(notebook), encoding="utf-8")
    app = Sphinx(str(src), str(ROOT / "book"), str(tmp_path / "out"), str(tmp_path / "doctrees"), "html",
                 confoverrides={"language": "zh_CN"}, status=None, warning=None)
    app.build()
    html = (tmp_path / "out" / "index.html").read_text(encoding="utf-8")
    assert re.findall(r'<img alt="([^"]*)"', html) == ["第一张：热力图", "第二张：柱状图", "第三张：曲线"]
    assert "children=" not in html
    assert re.search(r'<p class="explorer-note">在 JupyterLab 里', html)
