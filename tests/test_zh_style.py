"""The Chinese conventions of the course (the course's ZH_STYLE guide), held by tests.

Where Chinese appears: the Markdown and the code of the zh notebooks (string literals), what they
print, the Chinese string literals of the library's widgets, checks, figures and examples, and
the Chinese pages (README.zh-CN.md, the guides in docs/, the hand-out's README). The rules:

- one paragraph, one line: no newline between two Chinese characters inside Markdown prose
  (Markdown shows it as a stray space);
- full-width punctuation: no ASCII ``, : ; ? ! ( )`` next to a Chinese character;
- quotes “ ” (inner ‘ ’) only: no 「」『』, no ASCII quotes around Chinese text (a Python repr in
  an output, such as ``['它', '是']``, keeps its ASCII quotes);
- the glossary's words only: none of its "do not use" variants, none of the translationese.

Every failure names the file, the cell (or line) and the offending text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from notebook_tools import (
    CJK,
    CJK_IDEOGRAPH,
    CJK_TEXT,
    ROOT,
    chinese_strings,
    cjk_count,
    code_cells,
    code_literals,
    english_words,
    load,
    markdown_cells,
    notebook_names,
    printed_outputs,
    prose,
    snippet,
)

SRC = ROOT / "src" / "attention_course"
SRC_FILES = sorted([*(SRC / "widgets").glob("*.py"), *(SRC / "checks").glob("*.py"),
                    SRC / "plots.py", SRC / "examples.py"])
# The pages written in Chinese: each one is README.zh-CN.md or <name>.zh-CN.md.
ZH_PAGES = sorted([ROOT / "README.zh-CN.md", *(ROOT / "docs").glob("*.zh-CN.md"),
                   *(ROOT / "handout").glob("*.zh-CN.md")])
NOTEBOOKS = notebook_names()

ASCII_NEXT_TO_CJK = re.compile(rf"[{CJK_IDEOGRAPH}][,:;?!()]|[,:;?!()][{CJK_IDEOGRAPH}]")
# inside a Chinese sentence, an ASCII , ; : straight before a word: 都是 0,softmax / W_Q :S
ASCII_GLUED = re.compile(rf"[,;:](?=[A-Za-z⟨{CJK_IDEOGRAPH}])")
# what stands in Markdown prose for a code span and for math, so that the rules skip their insides
CODE, MATH = "⟨code⟩", "⟨math⟩"
NEWLINE_IN_PARAGRAPH = re.compile(rf"[{CJK_TEXT}]\n(?=[{CJK_TEXT}])")
OTHER_QUOTES = re.compile("「[^「」\n]{0,40}」|『[^『』\n]{0,40}』|[「」『』＂〝〞]")
# ASCII quotes around Chinese: the quoted text starts or ends with Chinese
ASCII_QUOTED = re.compile(rf"""(["'])(?:[{CJK_TEXT}][^"'\n]{{0,60}}?|[^"'\n]{{0,60}}?[{CJK_TEXT}])\1""")

# The glossary's "do not use" column and the translationese of the style guide and the review.
BANNED = [
    ("(?<!查)询问", "查询"), ("关键字(?!参数)", "键"),
    ("数值（Value）|数值\\(Value\\)|键[和与、/]数值|数值向量", "值"),
    ("得分", "分数"), ("注意力分数", "注意力权重 (weights) / 分数 (scores)"), ("自我注意力", "自注意力"),
    ("词向量", "嵌入"), ("正弦位置嵌入|位置嵌入（sin|位置嵌入\\(sin", "位置编码"),
    ("挡住", "屏蔽 / 掩码"), ("遮住", "屏蔽 / 掩码"), ("习题", "练习"),
    ("发问的词", "查询（提问的词）"), ("被查的词", "键（被看的词）"),
    ("[A-Z][A-Za-z-]+ 等(?=\\s*[（(]\\s*\\d{4})", "Vaswani 等人（2017）"),
    ("说清楚", "a direct sentence"), ("诚实地说", "a direct sentence"), ("再诚实一点", "a direct sentence"),
    ("保命的技巧", "a plain name"), ("旋钮", "参数 / 滑块"), ("升格", "类型提升"),
    ("同时握着.{0,12}表", "a plain sentence"), ("三段列", "a plain name"),
    # one term each (the READMEs' glossary): the model's width, learned positions, the
    # previous-token head, the "try it" section, a cross-reference to another notebook
    ("宽度|宽为|每个宽|\\$ 宽", "维度"),
    ("学出来的位置(?:编码|嵌入)|可学习的?位置编码|可学习位置|可学习的绝对位置", "可学习的位置嵌入"),
    ("前一词头", "前一个词头"), ("动手调|动手看|自己试试|看它学|看它形成", "动手试"),
    ("见 ?0[1-9](?!\\d)|（0[1-9]）|第 ?0[1-9] 本", "第 N 本"),
]
BANNED_RE = [(re.compile(p), p, use) for p, use in BANNED]
#: The README's glossary, whose last column shows the banned words.
GLOSSARY_SECTION = "## 术语表"


@dataclass(frozen=True)
class Finding:
    where: str
    rule: str
    text: str

    def __str__(self):
        return f"{self.where}: {self.rule}: {self.text!r}"


def _hits(pattern: re.Pattern, text: str, where: str, rule: str) -> list[Finding]:
    return [Finding(where, rule, snippet(text, m.start(), m.end())) for m in pattern.finditer(text)]


def _is_repr(text: str, m: re.Match) -> bool:
    """A quoted string in a Python repr or JSON: ``['它', '是']``, ``{'猫': 1}``, ``("它",)``."""
    before = text[:m.start()].rstrip(" ")[-1:]
    after = text[m.end():m.end() + 1]
    return before in ("[", "(", "{", ",", ":", "=") and after in ("]", ")", "}", ",", ":")


# --- rules --------------------------------------------------------------------------------------

def newline_breaks(markdown: str, where: str, line_numbers: bool = False) -> list[Finding]:
    # an HTML tag ends a line of its own (<summary>提示</summary> then the text below it)
    text = prose(markdown, code=CODE, math=MATH, html="⟨html⟩")
    lines = text.split("\n")
    found = []
    for m in NEWLINE_IN_PARAGRAPH.finditer(text):
        line_no = text.count("\n", 0, m.start())
        previous = lines[line_no].lstrip()
        if previous.startswith(("#", "|")):         # a heading or a table row ends at its newline
            continue
        found.append(Finding(f"{where}:{line_no + 1}" if line_numbers else where,
                             "newline inside a paragraph", snippet(text, m.start(), m.end())))
    return found


def ascii_punctuation(text: str, where: str) -> list[Finding]:
    text = text.replace("**", "").replace("__", "")
    found = _hits(ASCII_NEXT_TO_CJK, text, where, "ASCII punctuation next to Chinese")
    for line_start, line in _lines(text):
        if CJK.search(line):
            found += [Finding(where, "ASCII punctuation in a Chinese sentence",
                              snippet(text, line_start + m.start(), line_start + m.end()))
                      for m in ASCII_GLUED.finditer(line) if not ASCII_NEXT_TO_CJK.search(
                          text, max(0, line_start + m.start() - 1), line_start + m.end() + 1)]
    return found


def _lines(text: str):
    start = 0
    for line in text.split("\n"):
        yield start, line
        start += len(line) + 1


def quotes(text: str, where: str, reprs_allowed: bool = False) -> list[Finding]:
    found = _hits(OTHER_QUOTES, text, where, "quotes other than “ ”")
    for m in ASCII_QUOTED.finditer(text):
        if reprs_allowed and _is_repr(text, m):
            continue
        found.append(Finding(where, "ASCII quotes around Chinese (use “ ”)",
                             snippet(text, m.start(), m.end())))
    return found


# CommonMark: "**" closes only when it is right-flanking, so "**练习 1：**写" (punctuation, then a
# letter) shows its asterisks; the same for "字**“…" opening after a letter before punctuation
FULL_WIDTH_PUNCT = "\u3000-\u303f\uff01-\uff0f\uff1a-\uff20\uff3b-\uff40\uff5b-\uff65“”‘’…—"
LETTER = re.compile(rf"[{CJK_IDEOGRAPH}A-Za-z0-9]")
PUNCT = re.compile(f"[{FULL_WIDTH_PUNCT}]")


def unrendered_bold(markdown: str, where: str) -> list[Finding]:
    text = prose(markdown, code=CODE, math=MATH)
    found = []
    for _, line in _lines(text):
        marks = [m.start() for m in re.finditer(r"(?<!\*)\*\*(?!\*)", line)]
        for n, at in enumerate(marks):
            before, after = line[at - 1:at], line[at + 2:at + 3]
            closing = n % 2 == 1
            if (closing and PUNCT.match(before) and LETTER.match(after)) or (
                    not closing and LETTER.match(before) and PUNCT.match(after)):
                found.append(Finding(where, "bold that does not render (move the full-width punctuation "
                                            "outside the **)", snippet(line, at, at + 2)))
    return found


def glossary(text: str, where: str) -> list[Finding]:
    found = []
    for pattern, shown, use in BANNED_RE:
        found += _hits(pattern, text, where, f"banned {shown!r} (use {use})")
    return found


# --- where the Chinese is -------------------------------------------------------------------------

FORMAT_FIELD = re.compile(r"\{[^{}\n]*\}")


def _cell_strings(code: str) -> list[str]:
    """Chinese string literals of a notebook code cell, format fields shown as ``{}``."""
    return [FORMAT_FIELD.sub("{}", s) for _, s in code_literals(code) if CJK.search(s)]


def notebook_findings(name: str) -> dict[str, list[Finding]]:
    """Every finding in one zh notebook, by rule family."""
    found = {"newline": [], "punctuation": [], "quotes": [], "glossary": [], "bold": []}
    for i, src in markdown_cells("zh", name):
        where = f"zh/{name} cell {i}"
        found["bold"] += unrendered_bold(src, where)
        text = prose(src, code=CODE, math=MATH)
        found["newline"] += newline_breaks(src, where)
        found["punctuation"] += ascii_punctuation(text, where)
        found["quotes"] += quotes(text, where)
        found["glossary"] += glossary(src, where)
    for i, src in code_cells("zh", name):
        where = f"zh/{name} cell {i} (code)"
        for s in _cell_strings(src):
            found["punctuation"] += ascii_punctuation(s, where)
            found["quotes"] += quotes(s, where)
        found["glossary"] += glossary(src, where)
    for i, text in printed_outputs("zh", name):
        where = f"zh/{name} cell {i} (output)"
        found["punctuation"] += ascii_punctuation(text, where)
        found["quotes"] += quotes(text, where, reprs_allowed=True)
        found["glossary"] += glossary(text, where)
    return found


def source_findings(path: Path) -> dict[str, list[Finding]]:
    found = {"punctuation": [], "quotes": [], "glossary": []}
    for line, s in chinese_strings(path):
        s = FORMAT_FIELD.sub("{}", s)
        where = f"{path.relative_to(ROOT)}:{line}"
        found["punctuation"] += ascii_punctuation(s, where)
        found["quotes"] += quotes(s, where)
        found["glossary"] += glossary(s, where)
    return found


def page_findings(path: Path) -> dict[str, list[Finding]]:
    raw = path.read_text(encoding="utf-8")
    text = prose(raw, code=CODE, math=MATH)
    name = str(path.relative_to(ROOT))
    found = {"newline": newline_breaks(raw, name, line_numbers=True),
             "punctuation": [], "quotes": [], "glossary": [], "bold": unrendered_bold(raw, name)}
    section = ""
    for n, line in enumerate(text.split("\n"), start=1):
        if line.startswith("## "):
            section = line
        if not CJK.search(line):
            continue
        where = f"{name}:{n}"
        found["punctuation"] += ascii_punctuation(line, where)
        found["quotes"] += quotes(line, where)
        if section == GLOSSARY_SECTION and line.startswith("|"):
            line = line.rstrip(" |").rsplit("|", 1)[0]   # the glossary's last column: the words not used
        found["glossary"] += glossary(line, where)
    return found


def _report(findings: list[Finding], limit: int = 60) -> str:
    lines = [str(f) for f in findings[:limit]]
    if len(findings) > limit:
        lines.append(f"... and {len(findings) - limit} more")
    return f"{len(findings)} finding(s):\n" + "\n".join(lines)


# --- the tests ------------------------------------------------------------------------------------

@pytest.mark.parametrize("rule", ["newline", "punctuation", "quotes", "glossary", "bold"])
@pytest.mark.parametrize("name", NOTEBOOKS)
def test_zh_notebook(name, rule):
    findings = notebook_findings(name)[rule]
    assert not findings, _report(findings)


@pytest.mark.parametrize("rule", ["punctuation", "quotes", "glossary"])
@pytest.mark.parametrize("path", SRC_FILES, ids=[str(p.relative_to(SRC)) for p in SRC_FILES])
def test_chinese_strings_in_the_library(path, rule):
    findings = source_findings(path)[rule]
    assert not findings, _report(findings)


@pytest.mark.parametrize("rule", ["newline", "punctuation", "quotes", "glossary", "bold"])
@pytest.mark.parametrize("path", ZH_PAGES, ids=[str(p.relative_to(ROOT)) for p in ZH_PAGES])
def test_chinese_page(path, rule):
    findings = page_findings(path)[rule]
    assert not findings, _report(findings)


def test_every_chinese_page_is_read():
    # the pages are found by name: a Chinese page under another name would escape the rules
    assert ROOT / "README.zh-CN.md" in ZH_PAGES and ROOT / "docs" / "instructors.zh-CN.md" in ZH_PAGES
    for path in [*ROOT.glob("*.md"), *(ROOT / "docs").glob("*.md"), *(ROOT / "handout").glob("*.md")]:
        # the English README's glossary gives each term's Chinese: it is not prose
        raw = re.sub(r"\n## Glossary\n.*?(?=\n## )", "\n", path.read_text(encoding="utf-8"), flags=re.S)
        text = prose(raw)
        if path not in ZH_PAGES:   # an English page may quote a word or two of Chinese
            assert cjk_count(text) < english_words(text) / 10, (
                f"{path.relative_to(ROOT)} is mostly Chinese: name it <name>.zh-CN.md")


def test_every_zh_notebook_is_read():
    assert NOTEBOOKS and all((ROOT / "notebooks" / "zh" / n).exists() for n in NOTEBOOKS)
    assert load("zh", NOTEBOOKS[0])["cells"]


# --- the rules themselves --------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "Key ≠ Value:外卖菜单", "都是 0,softmax", "W_Q :S 的形状 (4, 4)", "查询(Query)", "对吗?", "好!",
    "**小结**:这里", "形状（4, 6）,所以",
])
def test_ascii_punctuation_is_found(text):
    assert ascii_punctuation(text, "t")


@pytest.mark.parametrize("text", [
    "查询（Query）", "形状 (4, 6)，所以", "第 3 行：d_k = 64", "softmax(x) 的输出", "（运算量相同），分块",
    "a, b: c; d? e! (f)", "['它', '是']",
])
def test_full_width_and_spaced_text_passes(text):
    assert not ascii_punctuation(text, "t")


@pytest.mark.parametrize("text, bad", [
    ("**练习 1：**写一个函数", True), ("**练习 1：** 写一个函数", False), ("**练习 1**：写一个函数", False),
    ("看**“它”**这一行", True), ("看 **“它”** 这一行", False), ("**小结**", False),
    ("`**：**写` 里的代码", False), ("**Try it:** pick", False),
])
def test_unrendered_bold_is_found(text, bad):
    assert bool(unrendered_bold(text, "t")) == bad


def test_newline_rule_sees_paragraphs_not_code_headings_or_tables():
    assert newline_breaks("第一行\n第二行", "t")
    assert newline_breaks("分块（运算量相同），\n分块", "t")
    assert not newline_breaks("第一段。\n\n第二段。", "t")
    assert not newline_breaks("# 小结\n这一节", "t")
    assert not newline_breaks("| 查询 | 键 |\n| --- | --- |\n| 一 | 二 |", "t")
    assert not newline_breaks("```python\n# 注释\n# 注释\n```", "t")
    assert not newline_breaks("文字 `代码\n代码` 文字", "t")
    assert not newline_breaks("- 第一项\n- 第二项", "t")
    assert not newline_breaks("<details><summary>提示</summary>\n看看哪一维</details>", "t")


@pytest.mark.parametrize("text", ["「猫」和「一只」", '词 "猫" 的权重', "'猫' 3.0", "『内』", '看"它"'])
def test_other_quotes_are_found(text):
    assert quotes(text, "t")


@pytest.mark.parametrize("text, reprs", [
    ("“猫”和‘一只’", False), ("it's the model's view of 猫", False), ("['它', '是']", True),
    ("{'猫': 0.5, '狗': 0.2}", True), ('("它",)', True), ('title="x" 中文', False),
])
def test_curly_quotes_and_reprs_pass(text, reprs):
    assert not quotes(text, "t", reprs_allowed=reprs)


def test_repr_quotes_are_flagged_in_prose():
    assert quotes("['它', '是']", "t", reprs_allowed=False)


@pytest.mark.parametrize("text", [
    "询问", "关键字", "得分", "注意力分数", "自我注意力", "词向量", "挡住", "遮住", "习题", "发问的词",
    "被查的词",
    "Vaswani 等（2017）", "先说清楚", "要说清楚的是", "诚实地说", "再诚实一点", "保命的技巧", "旋钮", "升格",
    "同时握着三张表", "三段列", "键和数值", "模型的宽度", "学出来的位置编码", "可学习位置", "前一词头",
    "动手调：d_k", "见 02", "（07）", "第 07 本",
])
def test_banned_words_are_found(text):
    assert glossary(text, "t")


@pytest.mark.parametrize("text", ["查询、键、值", "Vaswani 等人（2017）", "关键字参数", "数值稳定", "分数",
                                  "位置编码", "LLaMA 等许多近年的模型", "它的查询问的是当前的词",
                                  "可学习的位置嵌入", "前一个词头", "第 7 本", "01–07 的零件", "动手试：d_k",
                                  "模型的维度"])
def test_glossary_words_pass(text):
    assert not glossary(text, "t")
