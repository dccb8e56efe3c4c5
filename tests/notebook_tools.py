"""Reading the course notebooks in tests: which exist, their pairs, their code skeletons."""

from __future__ import annotations

import ast
import io
import json
import linecache
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK_DIR = ROOT / "notebooks"
LANGS = ("zh", "en")


def notebook_names() -> list[str]:
    names = {p.name for lang in LANGS for p in (NOTEBOOK_DIR / lang).glob("[0-9][0-9]_*.ipynb")}
    return sorted(names)


def load(lang: str, name: str) -> dict:
    return json.loads((NOTEBOOK_DIR / lang / name).read_text(encoding="utf-8"))


def source(cell) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def code_skeleton(code: str) -> list[tuple[int, str]]:
    """Tokens of a code cell with string literals and comments left out.

    zh and en code cells may differ only in what they say (strings, comments), never in
    what they do; comparing skeletons enforces that. IPython magics are kept as text.
    """
    lines = []
    for line in code.splitlines():
        stripped = line.lstrip()
        lines.append("pass  # magic" if stripped.startswith(("%", "!")) else line)
    skipped = {tokenize.COMMENT, tokenize.STRING, tokenize.NL, tokenize.NEWLINE,
               tokenize.ENCODING}
    # Since Python 3.12 (PEP 701) an f-string is FSTRING_START ... FSTRING_END with its fields'
    # tokens in between; before, it was one STRING token. A whole f-string, fields included, is
    # what a cell says, so it is left out on every version alike (a sentence may put its fields
    # in another order in the other language).
    start, end = getattr(tokenize, "FSTRING_START", None), getattr(tokenize, "FSTRING_END", None)
    tokens = tokenize.generate_tokens(io.StringIO("\n".join(lines) + "\n").readline)
    kept, depth = [], 0
    for t in tokens:
        if start is not None and t.type == start:
            depth += 1
        elif end is not None and t.type == end:
            depth -= 1
        elif depth == 0 and t.type not in skipped:
            kept.append((t.type, t.string))
    return kept


def nbgrader_meta(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def tags(cell) -> list[str]:
    return sorted(cell.get("metadata", {}).get("tags", []))


def solution_cells(lang: str, name: str) -> list[str]:
    """Sources of the exercise solution cells (nbgrader ``solution: true``), in order."""
    nb = load(lang, name)
    return [source(c) for c in nb["cells"]
            if c["cell_type"] == "code" and nbgrader_meta(c).get("solution")]


def load_solutions(name: str, lang: str = "en") -> dict:
    """Run a notebook's solution cells and return the functions they define, by name.

    Solution cells are self-contained: they may use ``np`` and the library's public names,
    nothing else from the notebook. This is how the tests get the real solution to check the
    checks against, without a copy of it in the tests.
    """
    import numpy as np

    import attention_course

    namespace = {"np": np, "attention_course": attention_course}
    namespace.update({k: getattr(attention_course, k) for k in attention_course.__all__})
    before = set(namespace)
    for k, src in enumerate(solution_cells(lang, name)):
        # one file name per cell, its text in linecache (as IPython does for a cell), so that
        # inspect.getsource works on the solutions: the no-loops check reads their source
        filename = f"<{lang}/{name}:solution {k}>"
        linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
        exec(compile(src, filename, "exec"), namespace)
    return {k: v for k, v in namespace.items() if k not in before and callable(v)}


def stub(*_args, **_kwargs):
    """What a student copy holds before the learner writes anything."""
    raise NotImplementedError()


def failure(check, fn, lang: str = "en") -> str:
    """The message with which ``check`` rejects ``fn`` (the test fails if it does not)."""
    import pytest

    from attention_course.checks import CheckFailed

    with pytest.raises(CheckFailed) as info:
        check(fn, lang=lang)
    return str(info.value)


# --- reading the prose and the printed text (Chinese conventions, word budget) ---------------

# Ideographs (the CJK unified blocks), and ideographs together with the full-width punctuation
# that stands next to them in Chinese text.
CJK_IDEOGRAPH = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
CJK = re.compile(f"[{CJK_IDEOGRAPH}]")
CJK_TEXT = f"{CJK_IDEOGRAPH}\u3000-\u303f\uff01-\uff0f\uff1a-\uff20\uff3b-\uff40\uff5b-\uff65“”‘’"

_FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.S | re.M)
_MATH_BLOCK = re.compile(r"\$\$.+?\$\$|\\\[.+?\\\]|\\begin\{(\w+\*?)\}.+?\\end\{\1\}", re.S)
_MATH_INLINE = re.compile(r"(?<![\\$])\$(?!\s)[^$\n]+?(?<![\s\\])\$(?!\d)")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.S)
_IMAGE = re.compile(r"!\[[^\]]*\]\([^)]*\)")
_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
_HTML = re.compile(r"<!--.*?-->|<[A-Za-z/][^>]*>", re.S)


def prose(markdown: str, code: str = " ", math: str = " ", html: str = "") -> str:
    """A Markdown text with its non-prose parts replaced: fenced code blocks and code spans by
    ``code``, math (``$...$``, ``$$...$$``, ``\\[...\\]``, environments) by ``math``, HTML tags
    by ``html`` (default: removed), images removed, links reduced to their text. Line breaks are
    kept, so that rules about them (and line-based positions) still work."""
    keep_lines = lambda m, by: by + "\n" * m.group(0).count("\n")  # noqa: E731
    text = _FENCE.sub(lambda m: keep_lines(m, code), markdown)
    text = _MATH_BLOCK.sub(lambda m: keep_lines(m, math), text)
    text = _CODE_SPAN.sub(lambda m: keep_lines(m, code), text)
    text = _MATH_INLINE.sub(math, text)
    text = _IMAGE.sub("", text)
    text = _LINK.sub(r"\1", text)
    return _HTML.sub(lambda m: html + "\n" * m.group(0).count("\n"), text)


#: The heading of the section that ends every notebook: its source article and the works it cites.
REFERENCES_HEADING = {"en": "## References", "zh": "## 参考文献"}


def is_references(markdown: str) -> bool:
    """Whether a Markdown cell is a notebook's references section (left out of the word budgets)."""
    return markdown.lstrip().split("\n", 1)[0].strip() in REFERENCES_HEADING.values()


def markdown_cells(lang: str, name: str) -> list[tuple[int, str]]:
    """``(cell index, source)`` of every Markdown cell of a notebook (indices count all cells)."""
    return [(i, source(c)) for i, c in enumerate(load(lang, name)["cells"]) if c["cell_type"] == "markdown"]


def code_cells(lang: str, name: str) -> list[tuple[int, str]]:
    return [(i, source(c)) for i, c in enumerate(load(lang, name)["cells"]) if c["cell_type"] == "code"]


def printed_text(cell) -> str:
    """What a code cell shows as text: its stream outputs and the text/plain of its results
    (errors, HTML and widget views left out)."""
    parts = []
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            parts.append(out.get("text", ""))
        elif out.get("output_type") in ("execute_result", "display_data"):
            parts.append(out.get("data", {}).get("text/plain", ""))
    return "".join("".join(p) if isinstance(p, list) else p for p in parts)


def printed_outputs(lang: str, name: str) -> list[tuple[int, str]]:
    """``(cell index, printed text)`` of every code cell that prints something."""
    cells = load(lang, name)["cells"]
    return [(i, t) for i, c in enumerate(cells) if c["cell_type"] == "code" and (t := printed_text(c))]


def string_literals(path: Path, docstrings: bool = True) -> list[tuple[int, str]]:
    """``(line, text)`` of every string literal in a Python file; an f-string is one text with
    ``{}`` where its fields are. Docstrings included unless ``docstrings=False``."""
    return code_literals(Path(path).read_text(encoding="utf-8"), docstrings)


def code_literals(code: str, docstrings: bool = True) -> list[tuple[int, str]]:
    """``(line, text)`` of every string literal in Python source (see :func:`string_literals`).
    IPython magics (lines starting with % or !) are blanked; unparsable code gives ``[]``."""
    lines = ["" if line.lstrip().startswith(("%", "!")) else line for line in code.splitlines()]
    try:
        tree = ast.parse("\n".join(lines))
    except SyntaxError:
        return []
    found, inside = [], set()
    for node in ast.walk(tree):
        if not docstrings and isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                                ast.AsyncFunctionDef)):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                inside.add(id(first.value))
        if isinstance(node, ast.JoinedStr):
            text = "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
            found.append((node.lineno, text))
            inside.update(id(v) for v in node.values)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in inside:
            found.append((node.lineno, node.value))
    return sorted(found)


def chinese_strings(path: Path, docstrings: bool = False) -> list[tuple[int, str]]:
    """The string literals of a Python file that hold Chinese (the zh halves of bilingual text),
    docstrings left out unless asked for."""
    return [(line, s) for line, s in string_literals(path, docstrings) if CJK.search(s)]


def cjk_count(text: str) -> int:
    """Number of Chinese characters (ideographs) in ``text``."""
    return len(CJK.findall(text))


_WORD = re.compile(r"[A-Za-z0-9]+(?:['’.\-][A-Za-z0-9]+)*")


def english_words(text: str) -> int:
    """Number of words in ``text``: runs of Latin letters and digits (``don't``, ``2.5``, ``self-attention``
    count once)."""
    return len(_WORD.findall(text))


def snippet(text: str, start: int, end: int, width: int = 12) -> str:
    """``text[start:end]`` with ``width`` characters either side, on one line."""
    return text[max(0, start - width):end + width].replace("\n", "⏎")


TOOL_DIRS = ("instructor", "maintainer")


def load_tool(name: str):
    """Import one of the scripts in instructor/ or maintainer/ (``name`` without ``.py``) as a module."""
    import importlib.util
    import sys

    path = next(ROOT / d / f"{name}.py" for d in TOOL_DIRS if (ROOT / d / f"{name}.py").exists())
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module      # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module
