"""Every notebook's Markdown prose stays within its budget: ≤ 2,500 English words (en) and
≤ 3,600 Chinese characters (zh, ideographs counted). Code spans, fenced code, math, images and
HTML tags are not prose and are not counted; link text is. The references section that ends each
notebook is not counted either."""

import pytest

from notebook_tools import cjk_count, english_words, is_references, markdown_cells, notebook_names, prose

BUDGET = {"en": 2500, "zh": 3600}
UNIT = {"en": "English words", "zh": "Chinese characters"}


def prose_size(lang: str, name: str) -> tuple[int, list[tuple[int, int]]]:
    """Total prose size of a notebook and the size of each Markdown cell, ``(cell index, size)``."""
    count = english_words if lang == "en" else cjk_count
    sizes = [(i, count(prose(src))) for i, src in markdown_cells(lang, name) if not is_references(src)]
    return sum(n for _, n in sizes), sizes


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("name", notebook_names())
def test_prose_within_budget(name, lang):
    total, sizes = prose_size(lang, name)
    largest = ", ".join(f"cell {i}: {n}" for i, n in sorted(sizes, key=lambda s: -s[1])[:5])
    assert total <= BUDGET[lang], (f"{lang}/{name}: {total} {UNIT[lang]} of prose, budget {BUDGET[lang]} "
                                   f"({total - BUDGET[lang]} over); largest cells: {largest}")


def test_counting():
    text = "Self-attention costs n² · d: see `softmax(x)` and $QK^T$ <img src='a.png'> [the paper](http://x)."
    assert english_words(prose(text)) == 8          # Self-attention costs n d see and the paper
    assert cjk_count(prose("注意力（Attention）的代价：`代码不算` $公式$ 共 9 个字。")) == 9
    assert is_references("## 参考文献\n\n- Vaswani, A. (2017).") and is_references("\n## References\n")
    assert not is_references("## 小结\n见参考文献。") and not is_references("## Referenced works")
