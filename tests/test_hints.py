"""The learner's workbook: hints for every exercise, shown on request before the solution.

``src/attention_course/data/hints.json`` maps each exercise id (``nb03-ex1``: the nbgrader
``grade_id`` of its solution cell without ``-solution``) to ``{"en": [...], "zh": [...]}``, one to
three short Markdown paragraphs per language, the same number in both. The tests hold:

- coverage: every exercise of the notebooks (both languages) has hints, in the notebooks' order,
  and the file has no id that is not an exercise;
- no solution in a hint: no line of the solution (whitespace ignored), no run of
  :data:`TOKEN_RUN` consecutive tokens of the solution's code, nothing that
  ``test_check_docstrings.find_code`` calls code (the rules the checks' own hints follow), and no
  function the exercise forbids named as code;
- nothing generic: each hint names something of its own exercise (its function, a parameter or a
  name of its statement), no two hints are the same, none uses a stock phrase ("check your
  shapes", “检查形状”);
- form: one paragraph, at most three sentences, English in ``en``, Chinese in ``zh`` following the
  course's Chinese conventions (``test_zh_style``).

The last section proves the scanners strict: a solution line pasted into a hint, a run of solution
tokens, a stock phrase and a hint about nothing in particular all fail.
"""

from __future__ import annotations

import ast
import io
import json
import re
import textwrap
import tokenize
from functools import cache
from pathlib import Path

import pytest
from test_check_docstrings import find_code
from test_zh_style import CODE, MATH, ascii_punctuation, glossary, quotes, unrendered_bold

from notebook_tools import CJK, ROOT, english_words, load, nbgrader_meta, notebook_names, prose, source

HINTS_PATH = ROOT / "src" / "attention_course" / "data" / "hints.json"
CHECKS = ROOT / "src" / "attention_course" / "checks"
LANGS = ("en", "zh")
MAX_HINTS = 3
MAX_SENTENCES = 3
MAX_EN_WORDS = 80
MAX_ZH_CHARS = 160

# A hint holding this many consecutive tokens of its exercise's solution gives code away; five or
# fewer are names and short shapes that a statement says too (``tokens[j - 1]``, ``(L, S)``).
TOKEN_RUN = 6
# A solution line shorter than this (whitespace left out) is too common to flag: ``n = len(perm)``
# is 11 characters, ``return W_Q, W_K`` 14 (and trivial, see TRIVIAL_LINE).
MIN_LINE = 12
TRIVIAL_LINE = re.compile(r"(return|yield)\s+[\w.,\s]+|[\w.]+\s*=\s*[\w.]+|def \w+\(.*\):|(else|try):")

GENERIC = {
    "en": ["check your shapes", "check the shapes", "check the shape", "print the shapes",
           "check your code", "read the statement again", "read the exercise again", "re-read",
           "think carefully", "think about it", "look at the documentation", "read the documentation",
           "see the docs", "try again", "debug your code", "use numpy", "be careful"],
    "zh": ["检查形状", "检查一下形状", "检查你的形状", "打印形状", "检查你的代码", "检查代码", "再读一遍",
           "仔细阅读", "仔细想想", "好好想想", "查看文档", "看看文档", "再试一次", "多试几次", "调试"],
}

# names a statement uses that say nothing about its exercise
NOT_SPECIFIC = {"np", "numpy", "attention_course", "None", "True", "False", "float", "float32",
                "float64", "int", "lang", "model", "in", "out", "for", "with", "and", "or"}


# --- the exercises ------------------------------------------------------------------------------

def _solution_code(cell_source: str) -> str:
    """The code between ``### BEGIN SOLUTION`` and ``### END SOLUTION``, dedented."""
    lines = cell_source.splitlines()
    begin = next(i for i, line in enumerate(lines) if line.strip() == "### BEGIN SOLUTION")
    end = next(i for i, line in enumerate(lines) if line.strip() == "### END SOLUTION")
    return textwrap.dedent("\n".join(lines[begin + 1:end])) + "\n"


def _exercise_paragraphs(markdown: str) -> str:
    """A statement without the notebook's general paragraph on exercises that may precede it."""
    m = re.search(r"^\*\*(Exercise|练习)\s*\d", markdown, re.M)
    return markdown[m.start():] if m else markdown


@cache
def exercises(lang: str) -> dict[str, dict]:
    """Exercise id -> its statement, solution, function, parameters and check call, in order."""
    found = {}
    for name in notebook_names():
        cells = load(lang, name)["cells"]
        for i, cell in enumerate(cells):
            meta = nbgrader_meta(cell)
            if cell["cell_type"] != "code" or not meta.get("solution"):
                continue
            grade_id = meta["grade_id"]
            assert grade_id.endswith("-solution"), (lang, name, grade_id)
            src = source(cell)
            func = ast.parse(src).body[0]
            assert isinstance(func, ast.FunctionDef), (lang, name, grade_id)
            statement = source(cells[i - 1])
            check = source(cells[i + 1]) if i + 1 < len(cells) else ""
            found[grade_id.removesuffix("-solution")] = {
                "notebook": name, "statement": _exercise_paragraphs(statement),
                "solution": _solution_code(src), "function": func.name,
                "parameters": [a.arg for a in func.args.args], "check": check,
            }
    return found


@cache
def hints() -> dict:
    return json.loads(HINTS_PATH.read_text(encoding="utf-8"))


EXERCISE_IDS = list(exercises("en"))


def _each_hint():
    for ex_id, by_lang in hints().items():
        for lang in LANGS:
            for n, text in enumerate(by_lang.get(lang, []), start=1):
                yield ex_id, lang, n, text


# --- tokens and lines of code -------------------------------------------------------------------

_SKIPPED = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
            tokenize.ENDMARKER, tokenize.ENCODING}
_REGEX_TOKEN = re.compile(r"""
    [A-Za-z_][A-Za-z0-9_]*
  | \d+(?:\.\d*)?(?:[eE][-+]?\d+)? | \.\d+(?:[eE][-+]?\d+)?
  | "[^"\n]*" | '[^'\n]*'
  | \*\*=? | //=? | >>=? | <<=? | -> | := | \.\.\. | [-+*/%&|^@<>!=]=
  | \S
""", re.X)
_CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.S)


def code_tokens(text: str) -> list[str]:
    """The tokens of ``text`` read as Python (``tokenize``), comments and layout left out; text that
    is not Python (prose, ``√d_k``) is cut by a regex into the same kinds of tokens."""
    # U+2212 is prose's minus; Python 3.12's tokenizer reads it as an operator, earlier ones as an error
    text = text.replace("−", "-")
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        tokens = None
    if tokens is None or any(t.type == tokenize.ERRORTOKEN for t in tokens):
        return _REGEX_TOKEN.findall(text)
    return [t.string for t in tokens if t.type not in _SKIPPED]


def longest_common_run(a: list[str], b: list[str]) -> tuple[int, list[str]]:
    """The longest run of consecutive tokens found in both ``a`` and ``b``."""
    best, end = 0, 0
    previous = [0] * (len(b) + 1)
    for i in range(1, len(a) + 1):
        current = [0] * (len(b) + 1)
        for j in range(1, len(b) + 1):
            if a[i - 1] == b[j - 1]:
                current[j] = previous[j - 1] + 1
                if current[j] > best:
                    best, end = current[j], i
        previous = current
    return best, a[end - best:end]


def solution_lines(code: str) -> list[str]:
    """The solution's lines without comments or surrounding spaces, trivial and short ones left out."""
    lines = code.splitlines()
    for t in tokenize.generate_tokens(io.StringIO(code).readline):
        if t.type == tokenize.COMMENT:
            row, col = t.start
            lines[row - 1] = lines[row - 1][:col]
    kept = []
    for line in (raw.strip() for raw in lines):
        if len(_squeeze(line)) >= MIN_LINE and not TRIVIAL_LINE.fullmatch(line):
            kept.append(line)
    return kept


def _squeeze(text: str) -> str:
    """``text`` without whitespace or backticks, with the Unicode minus read as ``-``."""
    return re.sub(r"[\s`]+", "", text).replace("−", "-")


def ngrams(tokens: list[str], n: int = TOKEN_RUN) -> set[tuple[str, ...]]:
    return {tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1)}


def solution_leaks(hint: str, solution: str, statement: str = "") -> list[str]:
    """What of ``solution`` appears in ``hint``: whole lines, or a run of TOKEN_RUN tokens (in a code
    span, or anywhere in the text once the backticks are dropped) that the statement does not
    itself contain (a shape such as ``(B, n, n)`` it gives is no leak)."""
    found = []
    squeezed = _squeeze(hint)
    found += [f"solution line {line!r}" for line in solution_lines(solution) if _squeeze(line) in squeezed]
    sol_tokens = code_tokens(solution)
    leaking = ngrams(sol_tokens) - ngrams(code_tokens(statement.replace("`", " ")))
    pieces = [m.group(2) for m in _CODE_SPAN.finditer(hint)] + [hint.replace("`", " ")]
    for piece in pieces:
        tokens = code_tokens(piece)
        if ngrams(tokens) & leaking:
            n, run = longest_common_run(tokens, sol_tokens)
            message = f"{n} solution tokens in a row: {' '.join(run)!r}"
            if message not in found:
                found.append(message)
    return found


# --- what makes a hint specific, what an exercise forbids ---------------------------------------

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def specific_names(ex: dict) -> set[str]:
    """The names that belong to this exercise: its function and parameters, the names in the code
    spans and the maths of its statement (LaTeX commands left out), and the names its prose writes
    as code would (``K_cache``, the ``acc`` of ``(m, l, acc)``)."""
    statement = ex["statement"]
    pieces = [m.group(2) for m in _CODE_SPAN.finditer(statement)]
    # maths: d_\text{model} is d_model, \texttt{dout} is dout, \sqrt and \top are nothing
    pieces += [re.sub(r"\\[A-Za-z]+|[{}]", "", m) for m in re.findall(r"\$([^$]+)\$", statement)]
    names = {ex["function"], *ex["parameters"]}
    names.update(n for piece in pieces for n in _NAME.findall(piece))
    # a tuple of bare names in the prose: (m, l, acc)
    for group in re.findall(r"\(([^()]*,[^()]*)\)", statement):
        members = [m.strip() for m in group.split(",")]
        names.update(m for m in members if _NAME.fullmatch(m))
    names.update(n for n in _NAME.findall(statement) if "_" in n.strip("_"))
    return {n for n in names if len(n) >= 2 and n not in NOT_SPECIFIC and n == n.strip("_")}


def mentions(text: str, names: set[str]) -> list[str]:
    return sorted(n for n in names if re.search(rf"(?<![A-Za-z0-9_]){re.escape(n)}(?![A-Za-z0-9_])", text))


def generic_phrases(text: str, lang: str) -> list[str]:
    low = text.lower()
    return [p for p in GENERIC[lang] if p in low]


@cache
def _check_module(module: str) -> ast.Module:
    return ast.parse((CHECKS / f"{module}.py").read_text(encoding="utf-8"))


def forbidden_names(check_call: str) -> set[str]:
    """Names of the library functions the exercise's check forbids: the categories it passes to
    ``forbidden.of`` (in the check function or a helper of its module that it calls) and the
    callables it lists itself."""
    from attention_course.checks import forbidden

    m = re.search(r"\b(nb\d\d)_checks\.(\w+)\(", check_call)
    assert m, check_call
    tree = _check_module(m.group(1))
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    constants = {t.id: node.value for node in tree.body if isinstance(node, ast.Assign)
                 for t in node.targets if isinstance(t, ast.Name)}
    categories, names, todo, seen = set(), set(), [m.group(2)], set()
    while todo:
        name = todo.pop()
        if name in seen or name not in functions:
            continue
        seen.add(name)
        for node in ast.walk(functions[name]):
            if not isinstance(node, ast.Call):
                continue
            if isinstance(node.func, ast.Name):
                todo.append(node.func.id)
            if isinstance(node.func, ast.Attribute) and node.func.attr == "of":
                for arg in node.args:
                    if isinstance(arg, ast.Starred) and isinstance(arg.value, ast.Name):
                        arg = constants.get(arg.value.id, arg)
                    categories.update(c.value for c in ast.walk(arg)
                                      if isinstance(c, ast.Constant) and isinstance(c.value, str))
            for kw in node.keywords:
                if kw.arg == "forbidden" and isinstance(kw.value, (ast.Tuple, ast.List)):
                    names.update(e.attr for e in kw.value.elts if isinstance(e, ast.Attribute))
    for category in categories:
        names.update(getattr(f, "__name__", "") for f in forbidden.CATEGORIES[category])
    return names - {""}


def sentences(text: str, lang: str) -> int:
    plain = prose(text, code="x", math="x")
    if lang == "zh":
        return len(re.findall(r"[。？！]", plain)) + (not re.search(r"[。？！]\s*$", plain))
    return len(re.findall(r"[.?!](?=\s|$)", plain)) + (not re.search(r"[.?!]\s*$", plain))


# --- the file and its coverage ------------------------------------------------------------------

def test_hints_file_is_json_written_the_course_way():
    raw = HINTS_PATH.read_text(encoding="utf-8")
    assert raw.endswith("}\n") and not raw.endswith("\n\n")
    assert raw == json.dumps(json.loads(raw), ensure_ascii=False, indent=1) + "\n"


def test_both_languages_have_the_same_exercises():
    assert EXERCISE_IDS and list(exercises("zh")) == EXERCISE_IDS
    for ex_id in EXERCISE_IDS:
        en, zh = exercises("en")[ex_id], exercises("zh")[ex_id]
        assert (en["notebook"], en["function"], en["parameters"]) == (zh["notebook"], zh["function"],
                                                                       zh["parameters"]), ex_id


def test_every_exercise_has_hints_and_no_other_id():
    assert list(hints()) == EXERCISE_IDS, (
        f"missing: {sorted(set(EXERCISE_IDS) - set(hints()))}; "
        f"not an exercise: {sorted(set(hints()) - set(EXERCISE_IDS))} (order: the notebooks')")


@pytest.mark.parametrize("ex_id", EXERCISE_IDS)
def test_one_to_three_hints_in_both_languages(ex_id):
    entry = hints().get(ex_id, {})
    assert set(entry) == set(LANGS), entry.keys()
    counts = {lang: len(entry[lang]) for lang in LANGS}
    assert 1 <= counts["en"] <= MAX_HINTS and counts["en"] == counts["zh"], counts
    assert all(isinstance(h, str) and h.strip() == h and h for lang in LANGS for h in entry[lang])


# --- no solution ----------------------------------------------------------------------------------

@pytest.mark.parametrize("ex_id", EXERCISE_IDS)
def test_no_solution_code_in_hints(ex_id):
    found = []
    for lang in LANGS:
        ex = exercises(lang)[ex_id]
        for n, text in enumerate(hints()[ex_id][lang], start=1):
            leaks = solution_leaks(text, ex["solution"], ex["statement"])
            found += [f"{lang} hint {n}: {what}" for what in leaks]
            found += [f"{lang} hint {n}: {rule}: {snippet!r}" for rule, snippet in find_code(text)]
    assert not found, "a hint guides, it does not give the code:\n" + "\n".join(found)


@pytest.mark.parametrize("ex_id", EXERCISE_IDS)
def test_hints_suggest_nothing_the_exercise_forbids(ex_id):
    banned = forbidden_names(exercises("en")[ex_id]["check"])
    found = []
    for lang in LANGS:
        for n, text in enumerate(hints()[ex_id][lang], start=1):
            spans = " ".join(m.group(2) for m in _CODE_SPAN.finditer(text))
            found += [f"{lang} hint {n}: `{name}`" for name in mentions(spans, banned)]
    assert not found, "hints name a function the check refuses:\n" + "\n".join(found)


def test_the_forbidden_functions_are_read_from_the_checks():
    ex = exercises("en")
    assert {"softmax", "scaled_dot_product_attention"} <= forbidden_names(ex["nb03-ex1"]["check"])
    assert {"repeat_kv", "grouped_query_attention"} <= forbidden_names(ex["nb04-ex2"]["check"])
    assert "apply_rotary" in forbidden_names(ex["nb09-ex1"]["check"])
    assert "k_composition_table" in forbidden_names(ex["nb08-ex2"]["check"])
    assert "scaled_dot_product_attention" in forbidden_names(ex["nb06-ex1"]["check"])
    assert "softmax" not in forbidden_names(ex["nb07-ex1"]["check"])


# --- nothing generic ------------------------------------------------------------------------------

@pytest.mark.parametrize("ex_id", EXERCISE_IDS)
def test_each_hint_names_something_of_its_exercise(ex_id):
    found = []
    for lang in LANGS:
        names = specific_names(exercises(lang)[ex_id])
        for n, text in enumerate(hints()[ex_id][lang], start=1):
            if not mentions(text, names):
                found.append(f"{lang} hint {n} names none of {sorted(names)}: {text!r}")
            found += [f"{lang} hint {n}: stock phrase {p!r}" for p in generic_phrases(text, lang)]
    assert not found, "\n".join(found)


def test_no_two_hints_are_the_same():
    seen = {}
    for ex_id, lang, n, text in _each_hint():
        key = " ".join(text.lower().split())
        assert key not in seen, f"{ex_id} {lang} hint {n} repeats {seen[key]}"
        seen[key] = f"{ex_id} {lang} hint {n}"


# --- form -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("ex_id", EXERCISE_IDS)
def test_hints_are_short_paragraphs_in_their_language(ex_id):
    found = []
    for lang in LANGS:
        for n, text in enumerate(hints()[ex_id][lang], start=1):
            where = f"{lang} hint {n}"
            plain = prose(text)
            if "\n" in text:
                found.append(f"{where}: more than one line")
            if not 1 <= sentences(text, lang) <= MAX_SENTENCES:
                found.append(f"{where}: {sentences(text, lang)} sentences")
            if lang == "en" and (CJK.search(text) or english_words(plain) > MAX_EN_WORDS):
                found.append(f"{where}: Chinese in English, or {english_words(plain)} words")
            if lang == "zh" and not 10 <= len(CJK.findall(plain)) <= MAX_ZH_CHARS:
                found.append(f"{where}: {len(CJK.findall(plain))} Chinese characters")
            if text.count("`") % 2 or text.count("$") % 2:
                found.append(f"{where}: an unclosed code span or formula")
    assert not found, "\n".join(found)


@pytest.mark.parametrize("ex_id", EXERCISE_IDS)
def test_chinese_hints_follow_the_course_conventions(ex_id):
    found = []
    for n, text in enumerate(hints()[ex_id]["zh"], start=1):
        where = f"{ex_id} zh hint {n}"
        plain = prose(text, code=CODE, math=MATH)
        found += ascii_punctuation(plain, where) + quotes(plain, where) + glossary(text, where)
        found += unrendered_bold(text, where)
    assert not found, "\n".join(map(str, found))


# --- the scanners themselves --------------------------------------------------------------------

def _longest_line(ex_id: str) -> str:
    return max(solution_lines(exercises("en")[ex_id]["solution"]), key=len)


@pytest.mark.parametrize("ex_id", EXERCISE_IDS)
def test_a_pasted_solution_line_is_caught(ex_id):
    line = _longest_line(ex_id)
    good = hints()[ex_id]["en"][0]
    ex = exercises("en")[ex_id]
    solution, statement = ex["solution"], ex["statement"]
    assert not solution_leaks(good, solution, statement)
    assert solution_leaks(f"{good} In short: `{line}`.", solution, statement)
    # respaced and without backticks, inside prose: still the solution
    assert solution_leaks(f"{good} In short, {' '.join(code_tokens(line))} and you are done.", solution,
                          statement)


@pytest.mark.parametrize("ex_id", EXERCISE_IDS)
def test_a_run_of_solution_tokens_is_caught(ex_id):
    solution = exercises("en")[ex_id]["solution"]
    tokens = code_tokens(solution)
    # the run of TOKEN_RUN tokens at the heart of the solution's longest line
    line_tokens = code_tokens(_longest_line(ex_id))
    run = line_tokens[len(line_tokens) // 2 - TOKEN_RUN // 2:][:TOKEN_RUN]
    assert len(run) == TOKEN_RUN and longest_common_run(run, tokens)[0] == TOKEN_RUN
    assert solution_leaks(f"Compute `{' '.join(run)}` first.", solution)
    shorter = solution_leaks(f"Compute `{' '.join(run[:TOKEN_RUN - 1])}` first.", solution)
    assert not any("solution tokens" in what for what in shorter), shorter


def test_scanners_on_a_deliberately_bad_hint():
    ex = exercises("en")["nb05-ex4"]
    bad = "Return `-slope * np.abs(p[:, None] - p[None, :])`: check your shapes."
    assert solution_leaks(bad, ex["solution"])
    assert find_code(bad)
    assert generic_phrases(bad, "en") and generic_phrases("先检查形状，再运行。", "zh")
    assert not mentions("Check your shapes and try again.", specific_names(ex))
    assert mentions("B depends on the `positions`, not on the row numbers.", specific_names(ex))


def test_tokens_of_code_and_of_prose_agree():
    assert code_tokens("x[:, None] ** 2  # a comment\n") == ["x", "[", ":", ",", "None", "]", "**", "2"]
    assert code_tokens("divide by √d_k (the keys' width)")[:5] == ["divide", "by", "√", "d_k", "("]
    assert code_tokens("a // b <= 1e-6") == ["a", "//", "b", "<=", "1e-6"]
    assert code_tokens("S − L + i") == ["S", "-", "L", "+", "i"]
    assert longest_common_run(list("abcdef"), list("xxcdeyy")) == (3, ["c", "d", "e"])


def test_solution_lines_leave_out_comments_and_trivia():
    code = "x = np.asarray(x)  # a copy\nreturn out\nn = len(perm)\nscores = q @ k.T / np.sqrt(d)\n"
    assert solution_lines(code) == ["x = np.asarray(x)", "scores = q @ k.T / np.sqrt(d)"]


def test_the_exercises_are_the_ones_of_the_notebooks():
    assert len(EXERCISE_IDS) >= 30 and EXERCISE_IDS[0] == "nb01-ex1"
    assert all(re.fullmatch(r"nb\d\d-ex\d+", e) for e in EXERCISE_IDS)
    ex = exercises("zh")["nb03-ex1"]
    assert ex["function"] == "my_attention" and "练习 1" in ex["statement"]
    assert "BEGIN SOLUTION" not in ex["solution"] and "def my_attention" not in ex["solution"]
    assert {"my_attention", "mask", "scaled_dot_product_attention"} <= specific_names(ex)
    assert Path(HINTS_PATH).is_file()
