"""Reading the course notebooks in tests: which exist, their pairs, their code skeletons."""

from __future__ import annotations

import io
import json
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
    for name in ("FSTRING_START", "FSTRING_MIDDLE", "FSTRING_END"):
        if hasattr(tokenize, name):
            skipped.add(getattr(tokenize, name))
    tokens = tokenize.generate_tokens(io.StringIO("\n".join(lines) + "\n").readline)
    return [(t.type, t.string) for t in tokens if t.type not in skipped]


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
    for src in solution_cells(lang, name):
        exec(compile(src, f"{lang}/{name}:solution", "exec"), namespace)
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
