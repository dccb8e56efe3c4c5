"""Loops in the learner's function: :func:`assert_no_loops` reads its source and its helpers'.

An exercise that asks for array operations refuses ``for``, ``while``, comprehensions, generator
expressions and the calls that hide a loop (``np.vectorize``, ``map`` ...), found in the source's
syntax tree rather than by running anything.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
import threading
import types

from .language import fail, get_language, say
from .watcher import AnswerElsewhere, is_learner_code, unwrap_chain

#: Held around every ``ast.parse`` of the checks and of the re-check: CPython 3.11's parser is not
#: safe in two threads at once (it can raise "SystemError: AST constructor recursion depth
#: mismatch"), and re-checks may run in threads.
PARSING = threading.Lock()

__all__ = ["assert_no_loops", "functions_in_source"]


_LOOP_WORDS = {
    "for": {"en": "a for loop", "zh": " for 循环"},
    "while": {"en": "a while loop", "zh": " while 循环"},
    "comprehension": {"en": "a comprehension", "zh": "推导式"},
    "generator": {"en": "a generator expression", "zh": "生成器表达式"},
    "call": {"en": "{call}, a loop in disguise", "zh": " {call}（换了个样子的循环）"},
}

_LOOP_CALLS = {"vectorize", "frompyfunc", "apply_along_axis", "apply_over_axes", "fromiter"}
_LOOP_BUILTINS = {"map", "filter"}


def _loop_in(tree: ast.AST):
    """``(kind, line, call)`` of the first loop in ``tree``, or ``None``."""
    nodes = sorted((n for n in ast.walk(tree) if hasattr(n, "lineno")),
                   key=lambda n: (n.lineno, n.col_offset))
    for node in nodes:
        if isinstance(node, (ast.For, ast.AsyncFor)):
            return "for", node.lineno, ""
        if isinstance(node, ast.While):
            return "while", node.lineno, ""
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp)):
            return "comprehension", node.lineno, ""
        if isinstance(node, ast.GeneratorExp):
            return "generator", node.lineno, ""
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id in _LOOP_BUILTINS | _LOOP_CALLS:
                return "call", node.lineno, func.id
            if isinstance(func, ast.Attribute) and func.attr in _LOOP_CALLS:
                return "call", node.lineno, ast.unparse(func)
            if (isinstance(func, ast.Attribute) and func.attr == "reduce"
                    and isinstance(func.value, ast.Name) and func.value.id == "functools"):
                return "call", node.lineno, "functools.reduce"
    return None


def _parse_piece(source: str) -> ast.AST | None:
    """Parse a piece of source that may be cut out of a longer statement (a lambda's line)."""
    source = textwrap.dedent(source)
    candidates = [source, source.strip()]
    stripped = source.strip()
    # a lambda inside a call or a list: drop a trailing ")", "," or "]" until it parses
    for cut in range(1, min(len(stripped), 40)):
        candidates.append(stripped[:-cut])
    for text in candidates:
        for attempt in (text, f"({text}\n)"):
            try:
                with PARSING:
                    return ast.parse(attempt)
            except SyntaxError:
                continue
    # a lambda in the middle of a line: start at the word lambda
    start = stripped.find("lambda")
    if start > 0:
        return _parse_piece(stripped[start:])
    return None


def _function_tree(fn):
    """The AST node of ``fn``'s own definition, or ``None`` if its source cannot be read."""
    try:
        source = inspect.getsource(fn)
    except (OSError, TypeError):
        return None
    tree = _parse_piece(source)
    if tree is None:
        return None
    code = fn.__code__
    if code.co_name == "<lambda>":
        lambdas = [n for n in ast.walk(tree) if isinstance(n, ast.Lambda)]
        for node in lambdas:
            try:
                compiled = compile(ast.Expression(node), "<lambda>", "eval")
            except (SyntaxError, ValueError):
                continue
            inner = next((c for c in compiled.co_consts if isinstance(c, types.CodeType)), None)
            if inner is not None and inner.co_code == code.co_code and inner.co_names == code.co_names:
                return node
        # several lambdas on one line that cannot be told apart: judge them all
        return ast.Module(body=[ast.Expr(n) for n in lambdas], type_ignores=[]) if lambdas else None
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == code.co_name:
            return node
    return tree


def _learner_functions(fn, depth: int = 3, seen=None) -> list:
    """``fn`` and the learner-written functions it calls by a global name (helpers), recursively."""
    seen = set() if seen is None else seen
    fn = next((o for o in unwrap_chain(fn) if isinstance(o, types.FunctionType)), fn)
    if not isinstance(fn, (types.FunctionType, type)):
        # an object with a __call__ written in Python: that method is the learner's function
        call = inspect.getattr_static(type(fn), "__call__", None)
        fn = call if isinstance(call, types.FunctionType) else fn
    if not isinstance(fn, types.FunctionType) or fn.__code__ in seen:
        return []
    seen.add(fn.__code__)
    found = [fn]
    if depth > 0:
        names: set = set()
        stack = [fn.__code__]
        while stack:
            code = stack.pop()
            names.update(code.co_names)
            stack.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
        for n in sorted(names):
            helper = fn.__globals__.get(n)
            if (isinstance(helper, types.FunctionType)
                    and is_learner_code(helper.__code__.co_filename)):
                found += _learner_functions(helper, depth - 1, seen)
    return found


def functions_in_source(source: str, name: str, depth: int = 3) -> list[tuple[str, ast.AST | None]]:
    r"""``[(name, syntax tree)]``: the definition of ``name`` in ``source`` (top-level statements, as
    a notebook's cells run in order) and those of the functions defined there that it names, and
    that they name, ``depth`` levels down.

    A class stands for its ``__call__`` method; a name bound by an import has no source here and
    gives ``[]``; a name not defined at all gives ``[(name, None)]``.

    >>> code = "def twice(x):\n    return [x, x]\nf = lambda x: twice(x)[0]"
    >>> [(n, type(t).__name__) for n, t in functions_in_source(code, "f")]
    [('f', 'Lambda'), ('twice', 'FunctionDef')]
    """
    try:
        with PARSING:
            module = ast.parse(source)
    except SyntaxError:
        return [(name, None)]
    defined: dict = {}
    for node in module.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            defined[node.name] = node
        elif isinstance(node, ast.ClassDef):
            call = next((n for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                         and n.name == "__call__"), node)
            defined[node.name] = call
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Name):
                    defined[t.id] = node.value if isinstance(node.value, ast.Lambda) else "other"
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for a in node.names:
                defined[a.asname or a.name.split(".")[0]] = "import"
    first = defined.get(name)
    if first == "import":
        return []
    if not isinstance(first, ast.AST):
        return [(name, None)]
    found, seen, level = [(name, first)], {id(first)}, [first]
    for _ in range(depth):
        following = []
        for tree in level:
            for n in sorted({n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}):
                helper = defined.get(n)
                if isinstance(helper, ast.AST) and id(helper) not in seen:
                    seen.add(id(helper))
                    found.append((n, helper))
                    following.append(helper)
        level = following
    return found


def assert_no_loops(fn, *, name, lang: str | None = None) -> None:
    """Raise :class:`CheckFailed` if ``fn`` (or a helper of the learner's it calls) loops.

    Looks at the source (AST): ``for``, ``while``, comprehensions, generator expressions, and calls
    to ``np.vectorize``, ``map``, ``filter``, ``np.frompyfunc``, ``np.apply_along_axis``,
    ``np.apply_over_axes``, ``np.fromiter`` and ``functools.reduce``. If the source cannot be read
    the check fails and says so, rather than pass without looking. An answer run in another
    process (:class:`~.watcher.AnswerElsewhere`) is judged by the source it was made from, here.
    """
    lang = get_language(lang)
    if isinstance(fn, AnswerElsewhere):
        trees = fn.definitions()
    else:
        functions = _learner_functions(fn)
        if not functions and callable(fn) and not _is_python(fn):
            return            # a NumPy or C function has no Python loop of the learner's
        trees = [(f.__name__, _function_tree(f)) for f in functions]
    if not trees:
        if isinstance(fn, AnswerElsewhere):
            return            # bound by an import: no source of the learner's
        fail(name, None, say("no_source", lang), lang=lang)
    for i, (helper, tree) in enumerate(trees):
        if tree is None:
            fail(name, None, say("no_source", lang), lang=lang)
        found = _loop_in(tree)
        if found is not None:
            kind, line, call = found
            if isinstance(fn, AnswerElsewhere):
                line = line - tree.lineno + 1          # counted from the definition, as a cell's is
            what = _LOOP_WORDS[kind][lang].format(call=call)
            where = say("your_function", lang) if i == 0 else say("helper", lang, helper=helper)
            fail(name, None, say("loop", lang, where=where, what=what, line=line), lang=lang)


def _is_python(fn) -> bool:
    return any(isinstance(o, types.FunctionType) for o in unwrap_chain(fn))
