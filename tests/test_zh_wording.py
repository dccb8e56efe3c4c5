"""Chinese that says what it means, in every zh notebook (what ZH_STYLE.md's rules on wording hold).

Four rules a test can hold:

- multiples said as they are meant: 变成原来的 4 倍, never 翻四倍 (is that ×4, ×5 or ×16?), nor
  少了 N 倍 or 高约 N 倍, in the course's own sentences: the Markdown, the comments and strings of
  the code, and what the cells print. 翻一倍 / 翻倍 (twice as much) are clear and stay. A
  quotation of an article, marked with “ ”, keeps the article's words;
- no "vs" in what a zh notebook prints: 和, 对, 与 say it in Chinese;
- no bare True or False answering a Chinese question: a printed line whose question (？, 吗, 是否,
  能否, 是不是, 有没有, 会不会) is answered by a Python boolean gets its answer in words. A
  statement followed by its truth value ("与库一致： True") is a claim the cell checks, and stays;
- a cross-reference says what it points at: 第 N 节 is section N of the same notebook, 第 N 本 is
  notebook N (第 3 节 in notebook 09, meaning notebook 03, sends a reader to 09's own section 3).
  The English Markdown cell at the same place says which one it means ("section 4", "Section 7's";
  "notebook 06", "03's", "(04)").

Every failure names the notebook, the cell and the offending text.
"""

from __future__ import annotations

import re

import pytest

from notebook_tools import (
    NOTEBOOK_DIR,
    code_cells,
    code_literals,
    markdown_cells,
    notebook_names,
    printed_outputs,
    prose,
)

NUMBER = r"[0-9一二两三四五六七八九十百千万几数]+"
# 翻 + a number other than one + 倍; 少了 / 低了 / 小了 N 倍; 高约 / 大约高 N 倍
MULTIPLE = re.compile(
    rf"翻\s*了?\s*(?![一1]\s*倍)(?:{NUMBER})\s*倍"
    rf"|[少低小]了\s*(?:约|大约)?\s*{NUMBER}(?:\.\d+)?\s*倍"
    rf"|高\s*(?:约|了约|了大约)\s*{NUMBER}(?:\.\d+)?\s*倍"
)
QUOTED = re.compile(r"“[^”]*”")
VS = re.compile(r"(?<![A-Za-z])vs\.?(?![A-Za-z])", re.I)
QUESTION_ANSWERED = re.compile(
    r"(？|\?|吗|是否|能否|是不是|有没有|会不会)[^\n？?]{0,12}?[：:]?\s*(True|False)\b")

# 第 4 节, and lists: 第 4、5 节, 第 2 和 3 本
SECTION_ZH = re.compile(r"第\s*(\d+(?:\s*[、和]\s*\d+)*)\s*节")
NOTEBOOK_ZH = re.compile(r"第\s*(\d+(?:\s*[、和]\s*\d+)*)\s*本")


def names_section(en: str, n: str) -> bool:
    """Does this English text refer to section n ("section 4", "Sections 2 and 3", "§4")?"""
    return bool(re.search(rf"\b[Ss]ections?\b[^.;:]*?\b{n}\b|§\s*{n}\b", en))


def names_notebook(en: str, n: str) -> bool:
    """Does this English text refer to notebook n ("notebook 06", "Notebooks 03 and 4", "03's")?"""
    return bool(re.search(rf"\b[Nn]otebooks?\s+(?:[\d, ]*(?:and|or)?\s*)?0?{n}\b|(?<![\d.])0{n}\b", en))


ZH_NOTEBOOKS = [name for name in notebook_names() if (NOTEBOOK_DIR / "zh" / name).exists()]


def _own_text(text: str) -> str:
    """The text with the quotations (“…”) blanked: an article's words may stay as it wrote them."""
    return QUOTED.sub("“”", text)


def _snippet(text: str, start: int, end: int) -> str:
    return text[max(0, start - 20):end + 20].replace("\n", " ")


def _sentences(name: str) -> list[tuple[str, str]]:
    """``(where, text)`` of the course's own Chinese: Markdown prose, code strings and comments,
    printed text."""
    found = [(f"cell {i} (Markdown)", prose(src)) for i, src in markdown_cells("zh", name)]
    for i, src in code_cells("zh", name):
        found += [(f"cell {i} (string on line {line})", s) for line, s in code_literals(src)]
        found += [(f"cell {i} (comment)", line.split("#", 1)[1])
                  for line in src.splitlines() if "#" in line]
    found += [(f"cell {i} (output)", text) for i, text in printed_outputs("zh", name)]
    return found


@pytest.mark.parametrize("name", ZH_NOTEBOOKS)
def test_multiples_are_said_as_they_are_meant(name):
    bad = [f"{where}: …{_snippet(own, m.start(), m.end())}…"
           for where, text in _sentences(name)
           for own in [_own_text(text)] for m in MULTIPLE.finditer(own)]
    assert not bad, (f"zh/{name}: say 变成原来的 N 倍 (or 是……的 N 倍), not 翻四倍 / 少了 N 倍 / "
                     "高约 N 倍:\n" + "\n".join(bad))


@pytest.mark.parametrize("name", ZH_NOTEBOOKS)
def test_no_vs_in_what_the_chinese_notebook_prints(name):
    bad = [f"cell {i}: …{_snippet(text, m.start(), m.end())}…"
           for i, text in printed_outputs("zh", name) for m in VS.finditer(text)]
    assert not bad, f"zh/{name}: 'vs' printed in Chinese output (say 和, 对 or 与):\n" + "\n".join(bad)


@pytest.mark.parametrize("name", ZH_NOTEBOOKS)
def test_no_bare_boolean_answers_a_chinese_question(name):
    bad = [f"cell {i}: {line.strip()}"
           for i, text in printed_outputs("zh", name) for line in text.splitlines()
           if QUESTION_ANSWERED.search(line)]
    assert not bad, (f"zh/{name}: a Chinese question answered by a Python boolean; answer it in "
                     "words:\n" + "\n".join(bad))


@pytest.mark.parametrize("name", ZH_NOTEBOOKS)
def test_a_cross_reference_says_whether_it_means_a_section_or_a_notebook(name):
    en = dict(markdown_cells("en", name))
    bad = []
    for i, text in markdown_cells("zh", name):
        bad += [f"cell {i}: …{_snippet(text, m.start(), m.end())}… (the English cell names no "
                f"section {n})" for m in SECTION_ZH.finditer(text) for n in re.findall(r"\d+", m.group(1))
                if not names_section(en.get(i, ""), n)]
        bad += [f"cell {i}: …{_snippet(text, m.start(), m.end())}… (the English cell names no "
                f"notebook {n})" for m in NOTEBOOK_ZH.finditer(text) for n in re.findall(r"\d+", m.group(1))
                if not names_notebook(en.get(i, ""), n)]
    assert not bad, (f"zh/{name}: 第 N 节 is a section of this notebook, 第 N 本 is notebook N:\n"
                     + "\n".join(bad))


# --- the rules themselves ------------------------------------------------------------------

@pytest.mark.parametrize("text", ["内存翻四倍", "翻 4 倍", "计算量翻了四倍", "少了 3 倍", "高约 3 倍",
                                  "低了约 2.5 倍"])
def test_the_multiple_rule_catches(text):
    assert MULTIPLE.search(_own_text(text))


@pytest.mark.parametrize("text", ["文本翻一倍", "翻倍", "n 翻 1 倍", "变成原来的 4 倍", "是灰线的约 3 倍",
                                  "文章说“文本翻一倍，计算量和内存大约翻四倍”"])
def test_the_multiple_rule_lets_clear_wording_and_quotations_pass(text):
    assert not MULTIPLE.search(_own_text(text))


@pytest.mark.parametrize("line, caught", [
    ("完整注意力放得下 24 GiB 吗？True", True),
    ("权重矩阵对称吗？ False", True),
    ("“它”的输出和完整注意力相同吗？ False", True),
    ("与库的 softmax 一致： True", False),
    ("斜率在 1.5 到 2.5 之间： True", False),
    ("权重矩阵 不对称", False),
])
def test_the_question_rule(line, caught):
    assert bool(QUESTION_ANSWERED.search(line)) is caught


@pytest.mark.parametrize("en, n, section, notebook", [
    ("Section 7's explorer shows the heads", "7", True, False),
    ("For L = S the result is section 4's mask.", "4", True, False),
    ("in sections 2 and 3", "3", True, False),
    ("With the KV cache (notebook 06) the prompt", "6", False, True),
    ("its raw scores spread far more than 03's unit variance", "3", False, True),
    ("read by 3 consecutive query heads (04).", "4", False, True),
    ("Notebooks 03 and 4 showed", "4", False, True),
    ("It costs 0.03 s for 3 layers", "3", False, False),
])
def test_the_cross_reference_rule(en, n, section, notebook):
    assert names_section(en, n) is section
    assert names_notebook(en, n) is notebook


def test_the_cross_reference_rule_reads_lists():
    text = "换成第 4、5 节的记号，见第 2 和 3 节"
    found = [re.findall(r"\d+", m.group(1)) for m in SECTION_ZH.finditer(text)]
    assert found == [["4", "5"], ["2", "3"]]
    assert [m.group(1) for m in NOTEBOOK_ZH.finditer("见第 7 本")] == ["7"]
