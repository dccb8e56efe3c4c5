"""Re-check returned notebooks, each answer in a process of its own: the grade a student's code cannot reach.

Usage:
    python instructor/recheck.py SUBMITTED [--gradebook course/gradebook.db] [--csv FILE]
                                 [--assignment 03-en]

SUBMITTED is nbgrader's ``submitted/`` folder (``<student>/<assignment>/<notebook>.ipynb``, the
assignment being ``NN-lang``, such as ``03-en``) or make grade's input (``<student>/<notebook>.ipynb``).

For each returned notebook:

1. From every code cell the student wrote (the answer cells and any cell they added; never a
   locked cell, never a cell equal to one of the course's), only what correct answers use is
   taken, by its syntax tree: imports, function and class definitions, and names assigned a
   constant or a lambda. No other statement of the student's runs.
2. A grader process (this file with ``--grader``) loads each check and calls it with a stand-in
   for the student's function; a worker process (``attention_course.checks.isolated``) runs the
   course's import cell and what step 1 kept, and runs the student's function on each input the
   stand-in sends. Only plain data comes back; every comparison is the grader's. Its points are
   the re-check's score; what stopped an answer (timed out, exceeded memory, exited, returned
   something else) is each check's status (:data:`STOPPED`).
3. What looks like tampering, or a way round a forbidden function, is flagged for review, with
   the pattern that matched (:data:`PATTERNS`): read from the cells' syntax in the grader, and
   from the worker's audit events while the checks run (a file opened outside the student's
   folder, a thread or process started).

A function that needs a global name the re-check does not provide (a variable a demo cell
defined, say) is reported by name: its check then fails in the re-check, not in the notebook.

``make grade`` (instructor/grade.py) runs this after nbgrader's autograde and shows both scores.
For nbgrader's own term route, run it over ``course/submitted`` after ``nbgrader autograde``;
with ``--gradebook`` it compares with the gradebook's scores and lists every difference.

Exit status: 0 when every notebook was re-checked and agrees with the gradebook (if given) with no
flag; 1 when a score differs, a notebook is flagged, or a notebook could not be re-checked; 2 when
the input is unusable.
"""

from __future__ import annotations

import argparse
import ast
import csv
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import term  # noqa: E402  (beside this file; grade imports this module, so this one never imports grade)

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK_DIR = ROOT / "notebooks"
LANGS = ("zh", "en")
COURSE_PACKAGE = "attention_course"
#: How long one notebook's re-check may take, all its checks together.
TIMEOUT = 300
#: The statuses of a check whose answer did not come back as a result (``isolated.STATUSES``).
STOPPED = ("timed out", "exceeded memory", "exited", "returned something else")

#: The flags, by pattern name: what each one matches.
PATTERNS = {
    "course module attribute": "assignment to (or setattr/delattr on) an attribute of a course module",
    "sys.modules": "any use of sys.modules",
    "builtins": "the builtins module or __builtins__",
    "profiler or tracer": "sys.setprofile, sys.settrace, threading.setprofile/settrace (and *_all_threads)",
    "thread or process": "threading, _thread, multiprocessing, concurrent.futures, subprocess, os.fork, "
                         "os.system, os.popen, os.spawn*, os.exec*, os.posix_spawn",
    "file outside the folder": "open, Path, np.load/np.save ... of an absolute path, ~ or .., in the "
                               "code; or, while the checks run, any file opened outside the student's "
                               "folder (audit events)",
    "dynamic import or name": "importlib, __import__, eval, exec, compile, globals(), vars(), locals(), "
                              "__dict__, __getattribute__, or getattr/setattr/delattr/hasattr with a name "
                              "not written out: ways to reach a function without naming it",
    "forbidden function": "a function a check forbids, named in the answer or a helper it calls, however "
                          "it was imported (read from the syntax, in the grader)",
}
_DYNAMIC_CALLS = {"__import__", "eval", "exec", "compile", "globals", "vars", "locals"}
_DYNAMIC_ATTRS = {"__dict__", "__getattribute__", "__globals__", "__closure__", "__code__"}

_PROCESS_CALLS = {("os", "fork"), ("os", "forkpty"), ("os", "system"), ("os", "popen"),
                  ("os", "posix_spawn"), ("os", "posix_spawnp")}
_PROCESS_PREFIXES = (("os", "spawn"), ("os", "exec"))
_THREAD_MODULES = {"threading", "_thread", "multiprocessing", "concurrent", "concurrent.futures",
                   "subprocess"}
_PROFILERS = {("sys", "setprofile"), ("sys", "settrace"), ("threading", "setprofile"),
              ("threading", "settrace"), ("threading", "setprofile_all_threads"),
              ("threading", "settrace_all_threads")}
_FILE_CALLS = {"open", "Path", "PurePath", "load", "save", "savez", "loadtxt", "savetxt", "fromfile",
               "genfromtxt", "read_text", "write_text", "read_bytes", "write_bytes", "read_csv"}


# ---------------------------------------------------------------------------------------------
# Reading notebooks
# ---------------------------------------------------------------------------------------------

from attention_course.checks.submission import (  # noqa: E402 - after the path set-up above
    CourseNotebook,
    course_notebook_of,
    kept_code,
    read_notebook,
    student_cells,
)
from attention_course.checks.submission import parse_cell as _parse  # noqa: E402


def course_notebook(lang: str, name: str, notebook_dir: Path = NOTEBOOK_DIR) -> CourseNotebook:
    """The course's own notebook ``notebook_dir/<lang>/<name>``, as the re-check reads it."""
    return course_notebook_of(read_notebook(notebook_dir / lang / name), lang, name)


# ---------------------------------------------------------------------------------------------
# Flags
# ---------------------------------------------------------------------------------------------

def _chain(node) -> tuple[str, ...]:
    """``("np", "linalg", "norm")`` for ``np.linalg.norm``; () for anything else."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return (node.id, *reversed(parts))
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr"
            and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)):
        return (*_chain(node.args[0]), node.args[1].value, *reversed(parts))   # getattr(sys, "x") is sys.x
    if isinstance(node, ast.Call):                # Path("x").read_text: the call's own chain
        return _chain(node.func)
    return ()


def _aliases(trees) -> dict[str, str]:
    """Name in the notebook -> module it stands for (``np`` -> ``numpy``, ``nb01_checks`` -> ...)."""
    names = {"sys": "sys", "os": "os", "threading": "threading", "builtins": "builtins"}
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    names[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
            elif isinstance(node, ast.ImportFrom) and node.module:
                for a in node.names:
                    names[a.asname or a.name] = f"{node.module}.{a.name}"
    return names


def _resolved(chain: tuple[str, ...], aliases: dict[str, str]) -> tuple[str, ...]:
    if not chain:
        return ()
    root = aliases.get(chain[0], chain[0])
    return (*root.split("."), *chain[1:])


def _is_course(chain: tuple[str, ...], aliases) -> bool:
    full = _resolved(chain, aliases)
    return bool(full) and full[0] == COURSE_PACKAGE


def _outside_path(value: str) -> bool:
    return value.startswith(("/", "\\", "~")) or re.match(r"^[A-Za-z]:[\\/]", value) is not None \
        or ".." in re.split(r"[\\/]", value)


def flags_in(cells: list[tuple[int, str]], context: list[str] = ()) -> list[dict]:
    """The flags raised by the student's cells, read from their syntax.

    ``context`` is other code of the notebook (its import cell) whose imports give names their
    meaning. Each flag is ``{"cell": index, "pattern": name in PATTERNS, "code": the line}``.
    """
    parsed = [(i, src, _parse(src)) for i, src in cells]
    aliases = _aliases([t for _, _, t in parsed if t is not None]
                       + [t for t in map(_parse, context) if t is not None])
    found = []

    def flag(index, src, node, pattern):
        line = src.splitlines()[node.lineno - 1].strip() if hasattr(node, "lineno") else ""
        entry = {"cell": index, "pattern": pattern, "code": line}
        if entry not in found:
            found.append(entry)

    for index, src, tree in parsed:
        if tree is None:
            continue
        for node in ast.walk(tree):
            targets = []
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
                targets = [node.target]
            elif isinstance(node, ast.Delete):
                targets = node.targets
            for t in targets:
                for sub in ast.walk(t):
                    if isinstance(sub, ast.Attribute) and _is_course(_chain(sub.value), aliases):
                        flag(index, src, node, "course module attribute")
                    elif isinstance(sub, ast.Subscript) and _is_course(_chain(sub.value), aliases):
                        flag(index, src, node, "course module attribute")     # X.__dict__[...] = ...
            if isinstance(node, ast.Call):
                chain = _resolved(_chain(node.func), aliases)
                if len(chain) == 1 and chain[0] in _DYNAMIC_CALLS:
                    flag(index, src, node, "dynamic import or name")
                if (len(chain) == 1 and chain[0] in ("getattr", "setattr", "delattr", "hasattr")
                        and len(node.args) > 1 and not isinstance(node.args[1], ast.Constant)):
                    flag(index, src, node, "dynamic import or name")
                if chain and chain[-1] in ("setattr", "delattr") and len(chain) == 1 and node.args:
                    if _is_course(_chain(node.args[0]), aliases) or isinstance(node.args[0], ast.Call):
                        flag(index, src, node, "course module attribute")
                if chain[:2] in _PROFILERS:
                    flag(index, src, node, "profiler or tracer")
                if chain[:2] in _PROCESS_CALLS or any(
                        chain[:1] == p[:1] and len(chain) > 1 and chain[1].startswith(p[1])
                        for p in _PROCESS_PREFIXES):
                    flag(index, src, node, "thread or process")
                if chain and chain[-1] in _FILE_CALLS:
                    for arg in node.args[:1]:
                        if isinstance(arg, ast.Constant) and isinstance(arg.value, str) \
                                and _outside_path(arg.value):
                            flag(index, src, node, "file outside the folder")
                    base = node.func.value if isinstance(node.func, ast.Attribute) else None
                    if isinstance(base, ast.Call) and base.args and isinstance(base.args[0], ast.Constant) \
                            and isinstance(base.args[0].value, str) and _outside_path(base.args[0].value):
                        flag(index, src, node, "file outside the folder")
            if isinstance(node, ast.Attribute) and node.attr in _DYNAMIC_ATTRS:
                flag(index, src, node, "dynamic import or name")
            if isinstance(node, (ast.Attribute, ast.Name)):
                chain = _resolved(_chain(node), aliases)
                if chain[:1] == ("importlib",):
                    flag(index, src, node, "dynamic import or name")
                if chain[:2] == ("sys", "modules"):
                    flag(index, src, node, "sys.modules")
                if chain[:1] == ("builtins",) or chain[:1] == ("__builtins__",):
                    flag(index, src, node, "builtins")
                if chain[:2] in _PROFILERS:
                    flag(index, src, node, "profiler or tracer")
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                modules = ([a.name for a in node.names] if isinstance(node, ast.Import)
                           else [node.module or ""])
                if isinstance(node, ast.ImportFrom):
                    for a in node.names:
                        if (node.module, a.name) == ("sys", "modules"):
                            flag(index, src, node, "sys.modules")
                        if (node.module, a.name) in _PROFILERS:
                            flag(index, src, node, "profiler or tracer")
                for m in modules:
                    if m.split(".")[0] == "importlib":
                        flag(index, src, node, "dynamic import or name")
                    if m.split(".")[0] == "builtins":
                        flag(index, src, node, "builtins")
                    if m in _THREAD_MODULES or m.split(".")[0] in _THREAD_MODULES:
                        flag(index, src, node, "thread or process")
    return found


# ---------------------------------------------------------------------------------------------
# The grader (this file run with --grader): the checks here, each answer in a worker
# ---------------------------------------------------------------------------------------------

def _grader() -> None:
    """Read the job (JSON) from stdin, grade it (``isolated.grade``), write the results (JSON)."""
    from attention_course.checks import isolated

    _not_dumpable()
    job = json.loads(sys.stdin.read())
    limits, key = job.pop("limits"), bytes.fromhex(job.pop("key"))
    results = json.dumps(isolated.grade(job, call_seconds=limits["call"], notebook_seconds=limits["notebook"],
                                        memory_limit=limits["memory"]))
    sys.stdout.write(json.dumps({"results": results, "mac": _mac(key, results)}))


def _mac(key: bytes, text: str) -> str:
    import hashlib
    import hmac

    return hmac.new(key, text.encode("utf-8"), hashlib.sha256).hexdigest()


def _not_dumpable() -> None:
    """On Linux, keep other processes of the same user (the worker) out of this one's descriptors
    and memory under /proc (prctl PR_SET_DUMPABLE 0). Root is not kept out."""
    if sys.platform.startswith("linux"):
        import ctypes

        try:
            ctypes.CDLL(None, use_errno=True).prctl(4, 0)
        except (OSError, AttributeError):
            pass


def forbidden_flags(cells: list[tuple[int, str]], code: list[str], context: list[str],
                    forbidden: dict[str, list[str]]) -> list[dict]:
    """The flags of functions a check forbade that the answer or its helpers name, however imported.

    ``forbidden`` is ``{answer: names}`` as the grader collected it (``forbidden.names_of``); the
    names in the answer's definition and its helpers' (``loops.functions_in_source`` of ``code``)
    are resolved through the notebook's imports to objects of the course's library.
    """
    from attention_course.checks import forbidden as registry
    from attention_course.checks.loops import functions_in_source
    from attention_course.checks.watcher import unwrap_chain

    trees = [t for t in (_parse(src) for _, src in cells) if t is not None]
    aliases = _aliases(trees + [t for t in map(_parse, context) if t is not None])
    source = "\n".join(code)
    outside = {dotted for names in registry.OUTSIDE.values() for dotted in names}
    found = []
    for answer, names in forbidden.items():
        targets = {}
        for f in registry.from_names(names):
            for obj in unwrap_chain(f):
                targets[id(obj)] = (obj, f)
        for _, tree in functions_in_source(source, answer):
            if tree is None:
                continue
            for node in ast.walk(tree):
                if not isinstance(node, (ast.Name, ast.Attribute, ast.Call)):
                    continue
                chain = _resolved(_chain(node), aliases)
                if isinstance(node, ast.Call) and _chain(node.func) != ("getattr",):
                    continue
                hit = ".".join(chain) if ".".join(chain) in outside else None
                if hit is None and chain[:1] == (COURSE_PACKAGE,):
                    obj = _course_object(chain)
                    if obj is not None and any(id(o) in targets and targets[id(o)][0] is o
                                               for o in unwrap_chain(obj)):
                        hit = ".".join(chain)
                if hit is not None:
                    entry = {"cell": None, "pattern": "forbidden function",
                             "code": f"{answer} names {hit}, which its check forbids"}
                    if entry not in found:
                        found.append(entry)
    return found


def _course_object(chain: tuple[str, ...]):
    """The object of the course's library a dotted name reaches, or None."""
    import importlib

    for cut in range(len(chain), 0, -1):
        try:
            obj = importlib.import_module(".".join(chain[:cut]))
        except ImportError:
            continue
        for attr in chain[cut:]:
            obj = getattr(obj, attr, None)
        return obj
    return None


# ---------------------------------------------------------------------------------------------
# Re-checking one notebook, and a folder of them
# ---------------------------------------------------------------------------------------------

@dataclass
class Recheck:
    """The re-check of one returned notebook."""

    path: Path
    lang: str
    name: str
    score: float | None = None                 # None: could not be re-checked
    max_score: float = 0.0
    checks: dict = field(default_factory=dict)         # grade_id -> {"passed", "points", "message"}
    flags: list = field(default_factory=list)
    missing_globals: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)
    error: str | None = None

    def flag_text(self) -> str:
        return "; ".join(sorted({f["pattern"] for f in self.flags}))

    def status_text(self) -> str:
        """What stopped an answer, by check: ``nb03-ex1 timed out; nb03-ex2 exited`` (or "")."""
        return "; ".join(f"{grade_id} {c['status']}" for grade_id, c in self.checks.items()
                         if c.get("status") in STOPPED)


def recheck(path: Path, lang: str, course: CourseNotebook | None = None, timeout: float = TIMEOUT,
            python: str = sys.executable, call_timeout: float | None = None,
            memory_limit: int | None = None) -> Recheck:
    """Re-check one returned notebook of the ``lang`` course (its name says which notebook).

    The checks run in a grader process, each answer in a worker of its own
    (``attention_course.checks.isolated``): ``call_timeout`` seconds a call (default 60),
    ``timeout`` all of the notebook's calls, ``memory_limit`` bytes of address space (Linux).
    """
    from attention_course.checks import isolated

    course = course or course_notebook(lang, path.name)
    result = Recheck(path, lang, path.stem, max_score=course.max_score)
    try:
        nb = read_notebook(path)
    except ValueError as exc:
        result.error = str(exc)
        return result
    cells = student_cells(nb, course)
    code, result.notes = kept_code(cells)
    result.flags = flags_in(cells, [course.import_cell])
    import secrets
    import shutil
    import tempfile

    limits = dict(call=isolated.CALL_SECONDS if call_timeout is None else call_timeout, notebook=timeout,
                  memory=isolated.MEMORY_LIMIT if memory_limit is None else memory_limit)
    key = secrets.token_bytes(32)               # the grader signs its results: nothing else can
    homes = tempfile.mkdtemp(prefix="recheck-")  # the workers' working directories, removed below
    job = dict(folder=str(path.parent.resolve()), lang=lang, import_cell=course.import_cell, code=code,
               checks=[{k: c[k] for k in ("grade_id", "module", "function", "answer", "points")}
                       for c in course.checks], limits=limits, key=key.hex(), homes=homes)
    env = dict(os.environ, MPLBACKEND="Agg", PYTHONHASHSEED="0")
    try:
        # the grader's own work (the expected values) is not the student's time: a margin over it
        run = subprocess.run([python, str(Path(__file__).resolve()), "--grader"], input=json.dumps(job),
                             capture_output=True, text=True, encoding="utf-8", timeout=timeout + 120, env=env)
    except subprocess.TimeoutExpired:
        result.error = f"the re-check took longer than {timeout + 120:g} s"
        return result
    finally:
        shutil.rmtree(homes, ignore_errors=True)
    try:
        signed = json.loads(run.stdout)
        out = json.loads(signed["results"])
        import hmac

        genuine = run.returncode == 0 and hmac.compare_digest(signed["mac"], _mac(key, signed["results"]))
    except (json.JSONDecodeError, TypeError, KeyError):
        genuine = False
    if not genuine:
        last = (run.stderr.strip().splitlines() or [f"exit status {run.returncode}"])[-1]
        result.error = f"the re-check stopped ({last})"
        return result
    result.checks = out["checks"]
    result.flags += [dict(cell=None, **f) for f in out["flags"]]
    result.flags += forbidden_flags(cells, code, [course.import_cell], out["forbidden"])
    result.missing_globals = out["missing_globals"]
    result.notes += out["errors"]
    result.notes += [f"{fn} needs {', '.join(names)}, which the re-check does not provide"
                     for fn, names in out["missing_globals"].items()]
    result.score = sum(c["points"] for c in result.checks.values() if c["passed"])
    return result


def returned_notebooks(submitted: Path) -> list[tuple[str, str | None, Path]]:
    """``(student, assignment or None, path)`` for nbgrader's and make grade's layouts."""
    found = []
    for student in sorted(p for p in submitted.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))):
        for path in sorted(student.rglob("*.ipynb")):
            if ".ipynb_checkpoints" in path.parts:
                continue
            parent = path.parent.name
            known = parent in LANGS or (len(parent) == 5 and parent[2] == "-" and parent[3:] in LANGS)
            found.append((student.name, parent if known else None, path))
    return found


def gradebook_scores(db: Path) -> dict[tuple[str, str, str], float]:
    """``(student, assignment, notebook) -> score`` from nbgrader's gradebook (its Python API)."""
    from nbgrader.api import Gradebook

    scores = {}
    with Gradebook(f"sqlite:///{db}") as gb:
        for assignment in gb.assignments:
            for nb in assignment.notebooks:
                for sub in gb.notebook_submissions(nb.name, assignment.name):
                    scores[(sub.student.id, assignment.name, nb.name)] = sub.score
    return scores


def main(argv: list[str]) -> int:
    if argv[:1] == ["--grader"]:
        _grader()
        return 0
    parser = argparse.ArgumentParser(
        description="Re-check returned notebooks, each answer in a process of its own.")
    parser.add_argument("submitted", help="nbgrader's submitted/ folder, or make grade's input folder")
    parser.add_argument("--gradebook", help="nbgrader's gradebook.db, to compare with its scores")
    parser.add_argument("--csv", help="write one row per notebook here")
    parser.add_argument("--assignment", help="only this assignment of nbgrader's layout (03-en)")
    args = parser.parse_args(argv)
    submitted = Path(args.submitted)
    if not submitted.is_dir():
        print(f"error: {submitted} is not a folder", file=sys.stderr)
        return 2
    graded = gradebook_scores(Path(args.gradebook)) if args.gradebook else {}
    rows, attention = [], False
    for student, assignment, path in returned_notebooks(submitted):
        if args.assignment and assignment != args.assignment:
            continue
        lang = assignment[-2:] if assignment else term.language_of(path)
        if lang is None or not (NOTEBOOK_DIR / lang / path.name).exists():
            rows.append(dict(student=student, assignment=lang or "", notebook=path.stem, recheck="",
                             max_score="", notebook_score="", differs="", flags="", stopped="",
                             notes="unreadable, or not a notebook of the course"))
            attention = True
            continue
        r = recheck(path, lang)
        before = graded.get((student, assignment or lang, path.stem))
        differs = r.score is not None and before is not None and abs(before - r.score) > 1e-9
        attention |= bool(differs or r.flags or r.error)
        rows.append(dict(student=student, assignment=assignment or lang, notebook=path.stem,
                         recheck="error" if r.score is None else f"{r.score:g}", max_score=f"{r.max_score:g}",
                         notebook_score="" if before is None else f"{before:g}",
                         differs="yes" if differs else "", flags=r.flag_text(), stopped=r.status_text(),
                         notes="; ".join(([r.error] if r.error else []) + r.notes)))
    fields = ["student", "assignment", "notebook", "recheck", "max_score", "notebook_score", "differs",
              "flags", "stopped", "notes"]
    for row in rows:
        notes = f"  ({row['notes']})" if row["notes"] else ""
        print("  ".join(str(row[k]) for k in fields[:9] if row[k] != "") + notes)
    if args.csv:
        with open(args.csv, "w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=fields)
            writer.writeheader()
            writer.writerows(rows)
    return 1 if attention else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
