"""Every notebook ends with its references: the Chinese article it follows, by title, and every
work its prose cites, each with authors, year, title, venue and a stable link.

The section is a Markdown cell headed ``## References`` (en) or ``## 参考文献`` (zh), the last cell
of the notebook. Its first paragraph names the source article, one of the three the course
mirrors, by its title in 《》; no other cell names it. Then one list item per work::

    - Vaswani, A., Shazeer, N., … Polosukhin, I. (2017). Attention is all you need. *NeurIPS 30*. https://arxiv.org/abs/1706.03762

The list is the same in both languages. A citation in the prose, "Clark et al. (2019)",
"Kingma and Ba (2015)", "Shazeer (2019)" or "Clark 等人（2019）", matches the entry whose first
author and year it names; a link is a DOI, an arXiv abstract or an ACL Anthology page (or, for
the Transformer Circuits thread, which has none of these, its own permanent page).
"""

from __future__ import annotations

import re

import pytest

from notebook_tools import (
    REFERENCES_HEADING,
    is_references,
    load,
    markdown_cells,
    notebook_names,
    prose,
    source,
)

NOTEBOOKS = notebook_names()
ARTICLES = (
    "《自注意力与多头注意力》",
    "《Transformer 由浅入深》",
    "《Transformer 的心脏是怎么算的？自注意力机制与多头注意力原理拆解》",
)
SOURCE_LINE = {"en": re.compile(r"^Source article \(in Chinese\): (《[^》]+》)"),
               "zh": re.compile(r"^本篇依据的文章：(《[^》]+》)")}
SURNAME = r"[A-Z][A-Za-z'’\-]+"
ENTRY = re.compile(
    rf"^- (?P<first>{SURNAME}(?: {SURNAME})?), [^()]+ \((?P<year>\d{{4}})\)\. (?P<title>[^*]+?[.?!]) "
    r"\*(?P<venue>[^*]+)\*\. (?P<link>https://(?:doi\.org/10\.\d{4,9}/\S+|arxiv\.org/abs/\d{4}\.\d{4,5}"
    r"|aclanthology\.org/[A-Za-z0-9.\-]+/?|transformer-circuits\.pub/\d{4}/[a-z0-9\-]+/index\.html))$")
# "Clark et al. (2019)" and, in brackets, "(Clark et al., 2019)"; "Clark 等人（2019）", "（Clark 等人，2019）"
CITATION = {
    "en": re.compile(rf"\b(?P<name>{SURNAME})(?: et al\.| and {SURNAME})?(?: \(|, )(?P<year>\d{{4}})[,;)]"),
    "zh": re.compile(rf"(?P<name>{SURNAME}) ?(?:等人|和 ?{SURNAME})?[（，](?P<year>\d{{4}})[，；）]"),
}


def references(lang: str, name: str) -> tuple[str, list[str]]:
    """The source paragraph and the list items of a notebook's references section."""
    cells = load(lang, name)["cells"]
    last = source(cells[-1]) if cells[-1]["cell_type"] == "markdown" else ""
    assert is_references(last), f"{lang}/{name}: the last cell is not headed {REFERENCES_HEADING[lang]!r}"
    paragraphs = [p.strip() for p in last.split("\n\n")[1:] if p.strip()]
    items = [line.strip() for p in paragraphs[1:] for line in p.split("\n") if line.strip()]
    return paragraphs[0] if paragraphs else "", items


def entries(items: list[str]) -> list[re.Match]:
    return [ENTRY.match(item) for item in items]


def citations(lang: str, name: str) -> set[tuple[str, str]]:
    return {(m["name"], m["year"]) for _, src in markdown_cells(lang, name) if not is_references(src)
            for m in CITATION[lang].finditer(prose(src))}


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("name", NOTEBOOKS)
def test_the_references_name_the_source_article_once(name, lang):
    first, _ = references(lang, name)
    m = SOURCE_LINE[lang].match(first)
    assert m and m[1] in ARTICLES, f"{lang}/{name}: the references start with {first[:80]!r}"
    elsewhere = [i for i, src in markdown_cells(lang, name) if m[1] in src and not is_references(src)]
    assert not elsewhere, f"{lang}/{name}: the article's title is in cells {elsewhere} too"


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_both_languages_list_the_same_works_and_the_same_article(name):
    (en_first, en_items), (zh_first, zh_items) = references("en", name), references("zh", name)
    assert en_items == zh_items
    assert SOURCE_LINE["en"].match(en_first)[1] == SOURCE_LINE["zh"].match(zh_first)[1]


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_every_entry_has_authors_year_title_venue_and_a_stable_link(name):
    _, items = references("en", name)
    bad = [item for item, m in zip(items, entries(items), strict=True) if m is None]
    assert not bad, f"{name}: entries not in the form 'Surname, I., … (year). Title. *Venue*. link':\n  " \
        + "\n  ".join(bad)
    keys = [(m["first"].split()[-1], m["year"]) for m in entries(items)]
    assert len(keys) == len(set(keys)), f"{name}: two entries share a first author and year: {keys}"


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("name", NOTEBOOKS)
def test_every_citation_in_the_prose_has_its_entry(name, lang):
    _, items = references(lang, name)
    listed = {(m["first"].split()[-1], m["year"]) for m in entries(items) if m}
    missing = sorted(citations(lang, name) - listed)
    assert not missing, f"{lang}/{name}: cited but not in the references: {missing}"


def test_the_patterns_read_what_they_should():
    entry = ("- Clark, K., Khandelwal, U., Levy, O., & Manning, C. D. (2019). What does BERT look at? An "
             "analysis of BERT's attention. *Proceedings of the 2019 ACL Workshop BlackboxNLP*. "
             "https://aclanthology.org/W19-4828/")
    m = ENTRY.match(entry)
    assert m and (m["first"], m["year"]) == ("Clark", "2019")
    assert not ENTRY.match(entry.replace("https://aclanthology.org/W19-4828/", "https://example.org/x"))
    assert not ENTRY.match(entry.replace(" (2019)", ""))
    assert ENTRY.match("- Elhage, N., Nanda, N., & Olah, C. (2021). A mathematical framework for transformer "
                       "circuits. *Transformer Circuits Thread*. "
                       "https://transformer-circuits.pub/2021/framework/index.html")
    text = ("Clark et al. (2019) and Kingma and Ba (2015, §2); Shazeer (2019) and Vaswani et al. "
            "(2017, §3.2.2); RoPE (Su et al., 2024) in 2017, 1936 words (n = 44)")
    assert {(m["name"], m["year"]) for m in CITATION["en"].finditer(text)} == {
        ("Clark", "2019"), ("Kingma", "2015"), ("Shazeer", "2019"), ("Vaswani", "2017"), ("Su", "2024")}
    zh = ("Clark 等人（2019）发现，Kingma 和 Ba（2015）提出，"
          "Vaswani 等人（2017，§3.2.2），RoPE（Su 等人，2024；LLaMA）")
    assert {(m["name"], m["year"]) for m in CITATION["zh"].finditer(zh)} == {
        ("Clark", "2019"), ("Kingma", "2015"), ("Vaswani", "2017"), ("Su", "2024")}
    assert REFERENCES_HEADING == {"en": "## References", "zh": "## 参考文献"}
