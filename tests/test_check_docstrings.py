"""No answer in a check module's docstrings or hints.

A learner reads ``help(nb01_checks.check_weight_ratio)`` and the hint of a failed check: they say
what is checked and guide ("which axis is a row?"), never the code that solves the exercise. The
scan reads every ``src/attention_course/checks/nbNN.py`` (new notebooks included) with ``ast``:

- docstrings (module, functions, classes, private helpers too);
- hints: every string in a ``hint=`` argument, and every string assigned to a name with "hint"
  in it (``_SOFTMAX_HINT = ...``, ``hint = _t(...)``).

and flags code in them (``RULES``): doctest lines (``>>>``), ``lambda``, ``def``, ``return``, a
NumPy or ``math`` call, a transpose in code (``.T``), an assignment of a computed value
(``Q = x @ W_q``), a call whose arguments compute (``softmax(scores / T)``), a fancy index of a
constructed array (``np.eye(n)[perm]``), a matrix literal, a count formula (``2·L·S·d``).
A statement of what is checked stays allowed, maths included: ``P @ X == X[perm]``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

CHECKS = Path(__file__).resolve().parents[1] / "src" / "attention_course" / "checks"
MODULES = sorted(CHECKS.glob("nb*.py"))

OPERAND_END = r"[\w)\]}]"
OPERAND_START = r"[\w(\[{]"
# a binary operator of code: ** * / @ anywhere, + unspaced or spaced, - only spaced or next to a
# digit (a hyphen joins words: "dot-product" is prose)
OPERATOR = r"(\*\*|[*/@+]|\s-\s|(?<=\d)-|-(?=\d))"

# (rule, pattern); each pattern is something only code has. The text is a docstring or a hint.
RULES = [
    ("doctest line", re.compile(r"^\s*(>>>|\.\.\.\s)", re.M)),
    ("lambda", re.compile(r"\blambda\b[^:\n]{0,60}:")),
    ("function definition", re.compile(r"\bdef\s+\w+\s*\(")),
    ("return statement", re.compile(r"^\s*return\s+[\w(\[]+\s*(\*\*|[-+*/@(.\[,])", re.M)),
    ("NumPy or math call", re.compile(r"\b(np|numpy|math|scipy)\.[\w.]+\s*\(")),
    ("method call with a keyword argument", re.compile(r"\w\.\w+\([^()\n]*\b\w+=")),
    ("attribute indexed", re.compile(r"\w\.(shape|T|ndim|size)\[")),
    ("transpose in code", re.compile(r"\w\.T\b|@\s*\w+ᵀ")),
    ("matrix literal", re.compile(r"\[\s*\[[^\]\n]*\]\s*,\s*\[")),
    # a call whose arguments compute something: softmax(scores / T), exp(a - b)
    ("call that computes its argument",
     re.compile(rf"\b\w+\([^()\n]*?{OPERAND_END}\s*{OPERATOR}\s*{OPERAND_START}[^()\n]*\)")),
    # name = expression with an operator: scores = q @ kᵀ, d_k = q.shape[-1]
    ("assignment of a computed value",
     re.compile(rf"(?<![=!<>])\b[A-Za-z_]\w*\s*=(?!=)\s*[^=\n,;，；。]*?"
                rf"({OPERAND_END}\s*{OPERATOR}\s*{OPERAND_START}|ᵀ|\.\w+\[)")),
    ("fancy index of a constructed array", re.compile(r"\w\([^()\n]*\)\s*\[[^\]\n]+\]")),
    # a product of three or more symbols with a centred dot: the formula of a count, 4·L·S·d
    ("formula", re.compile(r"\b\w+(\s*·\s*\w+){2,}")),
]


def find_code(text: str) -> list[tuple[str, str]]:
    """``(rule, snippet)`` for every piece of code in ``text``."""
    found = []
    for rule, pattern in RULES:
        for m in pattern.finditer(text):
            start = text.rfind("\n", 0, m.start()) + 1
            end = text.find("\n", m.end())
            found.append((rule, text[start:end if end != -1 else len(text)].strip()))
    return found


def _strings(node: ast.AST, constants: dict) -> list[tuple[int, str]]:
    """Every string literal in an expression (dict values, ``_t(...)`` arguments, f-strings with
    ``{x}`` for each field), following names bound at module level."""
    if isinstance(node, ast.Constant):
        return [(node.lineno, node.value)] if isinstance(node.value, str) else []
    if isinstance(node, ast.JoinedStr):
        text = "".join(v.value if isinstance(v, ast.Constant) else "{x}" for v in node.values)
        return [(node.lineno, text)]
    if isinstance(node, ast.Name):
        return _strings(constants[node.id], {}) if node.id in constants else []
    return [found for child in ast.iter_child_nodes(node) for found in _strings(child, constants)]


def texts_of(path: Path) -> list[tuple[str, int, str]]:
    """``(what, line, text)``: the docstrings and hints of one check module."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    constants = {t.id: node.value for node in tree.body if isinstance(node, ast.Assign)
                 for t in node.targets if isinstance(t, ast.Name)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                name = getattr(node, "name", "module")
                found.append((f"docstring of {name}", node.body[0].lineno, doc))
        if isinstance(node, ast.Call):
            for kw in node.keywords:
                if kw.arg == "hint":
                    found += [("hint", line, s) for line, s in _strings(kw.value, constants)]
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and "hint" in t.id.lower() for t in targets) and node.value:
                found += [("hint", line, s) for line, s in _strings(node.value, {})]
    return found


def offences(path: Path, kind: str) -> list[str]:
    seen, out = set(), []
    for what, line, text in texts_of(path):
        if not what.startswith(kind):
            continue
        for rule, snippet in find_code(text):
            key = (what, snippet)
            if key not in seen:
                seen.add(key)
                out.append(f"{path.name}:{line} {what}: {rule}: {snippet!r}")
    return out


@pytest.mark.parametrize("path", MODULES, ids=[p.stem for p in MODULES])
def test_no_solution_in_docstrings(path):
    found = offences(path, "docstring")
    assert not found, "docstrings say what is checked, never the answer:\n" + "\n".join(found)


@pytest.mark.parametrize("path", MODULES, ids=[p.stem for p in MODULES])
def test_no_code_in_hints(path):
    found = offences(path, "hint")
    assert not found, "hints guide, they do not give the code:\n" + "\n".join(found)


def test_every_notebooks_checks_are_scanned():
    assert [p.stem for p in MODULES][:6] == ["nb01", "nb02", "nb03", "nb04", "nb05", "nb06"]


# --- the scanner itself ---------------------------------------------------------------------

KNOWN_ANSWERS = [
    ">>> import math\n>>> check_weight_ratio(lambda a, b: math.exp(a - b), lang=\"en\")",
    "check_weight_ratio(lambda a, b: math.exp(a - b))",
    "check_soft_lookup(lambda q, k, v: softmax(q @ k.T, axis=-1) @ v)",
    "the answer is softmax(q @ k.T, axis=-1) @ v",
    "check_permutation_matrix(lambda perm: np.eye(len(perm))[perm])",
    "P = eye(n)[perm]",
    "def weight_ratio(a, b):\n    return math.exp(a - b)",
    "temperature divides the scores: softmax(scores / T)",
    "分数是 q @ k.T 再除以 sqrt(d_k)",
    "scores = q @ kᵀ, then d_k = q.shape[-1]",
    "步骤：Q=x@W_q、K=x@W_k",
    "one 2×2 block: [[cos(kω), -sin(kω)], [sin(kω), cos(kω)]]",
    "Q @ Kᵀ is 2·L·S·d",
    "bytes per entry: np.dtype(dtype).itemsize",
    "return x - x.max(axis=-1, keepdims=True)",
]

DESCRIPTIONS = [
    "Check a learner's ``weight_ratio(score_a, score_b)``: how many times more weight a gets.",
    "``fn(score_a, score_b) -> float``: the ratio of the softmax weights of two words in the same row.",
    "``fn(queries, keys, values) -> ndarray`` with ``queries`` (L, E), ``keys`` (S, E), (L, Ev).",
    "On the first shelf where ``fn`` differs: one question alone (L = 1), a single book (S = 1), "
    "a seeded random shelf (L = 5, S = 6, E = 3, Ev = 2), scores of ±1e4.",
    "which axis is a row? Each row of the weights must sum to 1.",
    "the softmax denominator is the same for every word in a row; once it cancels, the ratio "
    "depends only on the difference of the two scores.",
    "每个问题在自己那一行的所有书上做 softmax，再用权重去混合值（不是键）。",
    "T = 0.5 (sharper), T = 2 (flatter); a 2×4 matrix; questions × 500; d_k = 64, n = 1024.",
    "fn(perm) -> P, (n, n), with P applied to X giving the rows of X in the order perm.",
    "Raises CheckFailed on the first case that differs; NotImplementedError is not caught.",
    "Checks for the exercises of notebook 03 (scaled dot-product attention, the math).",
    "Check ``fn(perm) -> P`` (n, n) with ``P @ X == X[perm]`` for every X with n rows.",
    "Check ``fn(k, d_model, base=10000.0) -> (D, D)`` with ``PE[pos + k] = PE[pos] @ M``.",
    "weights in the articles' layout (``x @ W``), no biases; h·d_v columns.",
    "P @ X 的第 i 行要等于 X 的第 perm[i] 行，所以 P 的第 i 行在第 perm[i] 列是 1，其余是 0。",
    "divide by √(E/H), not √E; L = S = n; T = 0.5",
    "return them in the order (Q, K, V); return 0 where a length is 0.",
]


@pytest.mark.parametrize("text", KNOWN_ANSWERS)
def test_scanner_finds_answers(text):
    assert find_code(text), text


@pytest.mark.parametrize("text", DESCRIPTIONS)
def test_scanner_leaves_descriptions_alone(text):
    assert not find_code(text), find_code(text)


def test_scanner_reads_hints_of_every_form(tmp_path):
    module = tmp_path / "nb99.py"
    module.write_text(
        '"""Checks for notebook 99."""\n'
        '_HINT = {"zh": "看看哪一维", "en": "use np.sum(w, axis=-1)"}\n'
        "def check_a(fn):\n"
        '    """Check ``fn(x) -> y``."""\n'
        '    hint = _t("用 x @ w.T", "which axis?")\n'
        '    check_function(fn, ref, [], name="a", hint={"zh": "先减", "en": f"softmax(x - {m})"})\n'
        '    check_function(fn, ref, [], name="a", hint=_HINT)\n',
        encoding="utf-8")
    found = "\n".join(offences(module, "hint"))
    assert "np.sum(w, axis=-1)" in found and "用 x @ w.T" in found and "softmax(x - " in found
    assert not offences(module, "docstring")
