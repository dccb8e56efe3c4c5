"""Headings: one H1 and no level skipped (an H2 before any H3, an H3 before any H4), in every
notebook's Markdown here, on every page of both books in test_book_browser.py.

A screen reader's list of headings is how many readers find their way through a page; a skipped
level reads as a missing section.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.book

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*/[0-9][0-9]_*.ipynb"))


def heading_problems(headings: list[tuple[int, str]]) -> list[str]:
    """What is wrong with an outline of (level, where) pairs, in order."""
    h1 = [where for level, where in headings if level == 1]
    problems = [] if len(h1) == 1 else [f"{len(h1)} H1 headings {h1}, not one"]
    previous = 0
    for level, where in headings:
        if level > previous + 1:
            after = f"after H{previous}" if previous else "first"
            problems.append(f"H{level} {after}: {where}")
        previous = level
    return problems


def test_the_outline_check_finds_a_skipped_level_and_a_second_h1():
    assert heading_problems([(1, "a"), (2, "b"), (3, "c"), (2, "d"), (3, "e")]) == []
    assert heading_problems([(1, "a"), (3, "b")]) == ["H3 after H1: b"]
    assert heading_problems([(2, "a"), (1, "b")]) == ["H2 first: a"]
    assert heading_problems([(1, "a"), (2, "b"), (1, "c")]) == ["2 H1 headings ['a', 'c'], not one"]
    assert heading_problems([]) == ["0 H1 headings [], not one"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[f"{p.parent.name}/{p.stem}" for p in NOTEBOOKS])
def test_every_notebooks_markdown_has_one_h1_and_skips_no_level(path):
    from markdown_it import MarkdownIt  # the group book's (MyST's parser): imported where used

    md = MarkdownIt("commonmark")      # a "# comment" in a code block is no heading
    headings = []
    for i, cell in enumerate(json.loads(path.read_text(encoding="utf-8"))["cells"]):
        if cell["cell_type"] == "markdown":
            tokens = md.parse("".join(cell["source"]))
            headings += [(int(t.tag[1]), f"cell {i}: {tokens[k + 1].content!r}")
                         for k, t in enumerate(tokens) if t.type == "heading_open"]
    problems = heading_problems(headings)
    assert not problems, f"{path.parent.name}/{path.name}: " + "; ".join(problems)

