"""One course in two languages: the glossary both READMEs show, one name for the "try it" section,
Chinese comments in the Chinese notebooks' code, and an English edition that stands on its own.

The glossary's "not used" words are the ones ``test_zh_style`` bans, so the table a reader sees
and the rule the tests hold are the same list.
"""

from __future__ import annotations

import io
import re
import tokenize

import pytest
from test_zh_style import glossary

from notebook_tools import (
    CJK,
    ROOT,
    code_cells,
    is_references,
    markdown_cells,
    notebook_names,
    prose,
)

NOTEBOOKS = notebook_names()
READMES = {"en": ROOT / "README.md", "zh": ROOT / "README.zh-CN.md"}
GLOSSARY_HEADING = {"en": "## Glossary", "zh": "## 术语表"}
# Concepts the course names one way only: (English term, 中文 term), each a row of the glossary.
REQUIRED_TERMS = [
    ("learned position embeddings", "可学习的位置嵌入"),
    ("width, dimension", "维度"),
    ("previous-token head", "前一个词头"),
    ("Try it (the section with an explorer)", "动手试"),
    ("notebook 07 (a cross-reference)", "第 7 本"),
]
TRY_IT = {"en": re.compile(r"^## \d+\. Try it: "), "zh": re.compile(r"^## \d+\. 动手试：")}
# An English phrase in a comment: two words in a row, the second in lower case ("keys and values",
# "once untimed"); shapes and symbols ("(B, n, n)", "x @ W", "d = d_model") are not phrases.
ENGLISH_PHRASE = re.compile(r"\b[A-Za-z]{2,}\s+[a-z]{2,}\b")
NBGRADER_MARKER = re.compile(r"^#+\s*(BEGIN|END) (SOLUTION|HIDDEN TESTS)")
# Prose that leans on a text the reader has not got: the source article is named once, in the
# references, and its ideas are stated where they are used.
LEANS_ON_ARTICLE = {"en": re.compile(r"\barticles?\b", re.I), "zh": re.compile(r"文章|原文")}


def glossary_rows(lang: str) -> list[tuple[str, str, str]]:
    """The glossary table of a README: ``(English, 中文, not used)`` per row."""
    text = READMES[lang].read_text(encoding="utf-8")
    start = text.index(GLOSSARY_HEADING[lang] + "\n")
    rows = []
    for line in text[start:].split("\n")[1:]:
        if line.startswith("## "):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) == 3 and not set(cells[0]) <= set("-: "):
            rows.append(tuple(cells))
    return rows[1:]   # the header row


def not_used(cell: str) -> list[str]:
    return [w.strip() for w in re.split(r"[,，、;；]", cell) if w.strip() not in ("", "—", "-")]


def english_comments(code: str) -> list[str]:
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(code).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return []
    return [t.string for t in tokens if t.type == tokenize.COMMENT and not CJK.search(t.string)
            and not NBGRADER_MARKER.match(t.string) and ENGLISH_PHRASE.search(t.string)]


# --- the glossary -------------------------------------------------------------------------------

def test_both_readmes_show_one_glossary():
    en, zh = glossary_rows("en"), glossary_rows("zh")
    assert len(en) >= 20, en
    assert en == zh, "README.md and README.zh-CN.md show different glossaries"


@pytest.mark.parametrize("english, chinese", REQUIRED_TERMS)
def test_the_glossary_names_each_concept_once(english, chinese):
    rows = glossary_rows("en")
    assert (english, chinese) in [(e, c) for e, c, _ in rows], f"no glossary row {english} | {chinese}"
    assert sum(chinese in c.split(" / ") or c == chinese for _, c, _ in rows) == 1


def test_every_word_the_glossary_rules_out_is_banned():
    for english, chinese, words in glossary_rows("zh"):
        for word in not_used(words):
            assert glossary(word, "glossary"), (
                f"the glossary rules out {word!r} ({english} | {chinese}), test_zh_style does not ban it")
        assert not glossary(chinese, "glossary"), f"the glossary's own term {chinese!r} is banned"


# --- one name for the "try it" section ------------------------------------------------------------

@pytest.mark.parametrize("name", NOTEBOOKS)
def test_try_it_sections_have_one_name_in_both_languages(name):
    where = {lang: [i for i, src in markdown_cells(lang, name)
                    for line in src.split("\n") if TRY_IT[lang].match(line)] for lang in ("en", "zh")}
    assert where["en"] == where["zh"], (f"{name}: 'Try it:' in cells {where['en']}, "
                                        f"'动手试：' in {where['zh']}")
    if name >= "03":   # from 03 on, every notebook has an explorer to try
        assert len(where["en"]) == 1, f"{name}: {len(where['en'])} sections named 'Try it: …'"


# --- Chinese comments in the Chinese notebooks ----------------------------------------------------

@pytest.mark.parametrize("name", NOTEBOOKS)
def test_comments_in_zh_code_are_chinese(name):
    found = [f"cell {i}: {c}" for i, src in code_cells("zh", name) for c in english_comments(src)]
    assert not found, f"zh/{name}: comments in English:\n  " + "\n  ".join(found)


def test_english_comments_are_found_and_shapes_pass():
    assert english_comments("x = 1  # keys and values, float32\n")
    assert english_comments("# once untimed\nf()\n")
    assert not english_comments("x = 1  # (B, n, n)\ny = x @ w  # x @ W layout\n")
    assert not english_comments("    ### BEGIN SOLUTION\n    x = 1\n    ### END SOLUTION\n")
    assert not english_comments("x = 1  # 键和值，float32\n")


# --- the English edition stands on its own --------------------------------------------------------

@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("name", NOTEBOOKS)
def test_prose_states_ideas_instead_of_pointing_at_the_article(name, lang):
    found = [f"cell {i}: …{prose(src)[max(0, m.start() - 30):m.end() + 30]}…".replace("\n", " ")
             for i, src in markdown_cells(lang, name) if not is_references(src)
             for m in LEANS_ON_ARTICLE[lang].finditer(prose(src))]
    assert not found, f"{lang}/{name} points at an article the reader cannot see:\n  " + "\n  ".join(found)
