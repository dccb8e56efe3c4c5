"""The out-of-process re-check: what it keeps of the student's code, what it flags, what it scores.

The syntax-tree parts are unit tests; the re-check itself starts a fresh interpreter, so those
tests are marked ``integration``.
"""

import json
import shutil
import sys

import pytest

from notebook_tools import ROOT, load_tool

recheck = load_tool("recheck")


def kept(src: str) -> list[str]:
    return recheck.kept_code([(0, src)])[0]


# --- what is kept ----------------------------------------------------------------------------

def test_imports_definitions_constants_and_lambdas_are_kept():
    src = '''
import numpy as np
from math import sqrt as root
SCALE = 20.0
SHAPE = (2, -3)
TABLE = {"a": 1, "b": [1.5, 2.5]}
square = lambda x: x * x
def helper(x):
    return x * SCALE
class Box:
    size = 3
async def later():
    return 1
'''
    kinds = [line.split()[0] for line in kept(src)]
    assert kinds == ["import", "from", "SCALE", "SHAPE", "TABLE", "square", "def", "class", "async"]


def test_other_top_level_statements_never_run():
    src = '''
import attention_course.checks.nb01 as m
setattr(m, "check_stable_softmax", print)
m.check_stable_softmax = print
x = np.ones(3)
for i in range(3):
    pass
print("hello")
W = compute()
a = b = 3
'''
    assert kept(src) == ["import attention_course.checks.nb01 as m", "a = b = 3"]


def test_a_cell_that_does_not_parse_is_named_and_magics_are_skipped():
    code, notes = recheck.kept_code([(4, "def f(:\n    pass"), (5, "%time\nX = 1\n!ls")])
    assert code == ["X = 1"] and notes == ["cell 4 is not valid Python; nothing of it is re-checked"]


# --- what is flagged -------------------------------------------------------------------------

CONTEXT = ["import sys\nfrom attention_course import checks\n"
           "from attention_course.checks import nb01 as nb01_checks"]

FLAGGED = [
    ("course module attribute", "nb01_checks.check_stable_softmax = print"),
    ("course module attribute", "import attention_course.checks.nb02 as m\nm.check_cosine = None"),
    ("course module attribute", "setattr(nb01_checks, 'check_scores_for', print)"),
    ("course module attribute", "delattr(checks, 'nb01')"),
    ("course module attribute", "checks.cases.check_function = print"),
    ("course module attribute", "nb01_checks.__dict__['check_scores_for'] = print"),
    ("course module attribute", "from attention_course import softmax as s\nimport attention_course\n"
                                "attention_course.softmax = s"),
    ("sys.modules", "sys.modules['attention_course.checks.nb01'] = None"),
    ("sys.modules", "from sys import modules"),
    ("builtins", "import builtins\nbuiltins.print = len"),
    ("builtins", "__builtins__.print = len"),
    ("profiler or tracer", "sys.setprofile(None)"),
    ("profiler or tracer", "sys.settrace(None)"),
    ("profiler or tracer", "import threading\nthreading.setprofile(None)"),
    ("profiler or tracer", "getattr(sys, 'setprofile')(None)"),
    ("thread or process", "import threading"),
    ("thread or process", "from concurrent.futures import ThreadPoolExecutor"),
    ("thread or process", "import multiprocessing as mp"),
    ("thread or process", "import subprocess"),
    ("thread or process", "import os\nos.system('ls')"),
    ("thread or process", "import os\nos.fork()"),
    ("thread or process", "import os\nos.execv('/bin/true', [])"),
    ("file outside the folder", "open('/etc/passwd').read()"),
    ("file outside the folder", "open('../alice/01_library_analogy.ipynb')"),
    ("file outside the folder", "from pathlib import Path\nPath('~/answers.txt').read_text()"),
    ("file outside the folder", "import numpy as np\nnp.load('/srv/solutions.npy')"),
    ("dynamic import or name", "import importlib\nm = importlib.import_module('attention_course.softmax')"),
    ("dynamic import or name", "from importlib import import_module"),
    ("dynamic import or name", "m = __import__('attention_course')"),
    ("dynamic import or name", "f = getattr(checks, 'soft' + 'max')"),
    ("dynamic import or name", "f = eval('print')"),
    ("dynamic import or name", "f = vars(checks)['softmax']"),
    ("dynamic import or name", "def f(x):\n    return f.__globals__['np']"),
]


@pytest.mark.parametrize(("pattern", "src"), FLAGGED, ids=[f"{p}: {s.splitlines()[-1]}" for p, s in FLAGGED])
def test_each_pattern_is_flagged(pattern, src):
    found = recheck.flags_in([(7, src)], CONTEXT)
    assert pattern in {f["pattern"] for f in found}, found
    assert all(f["cell"] == 7 for f in found)


def test_the_tests_enumerate_every_pattern():
    # "forbidden function" needs the checks' lists: tests/test_cheating.py grades notebooks for it
    assert {p for p, _ in FLAGGED} == set(recheck.PATTERNS) - {"forbidden function"}


@pytest.mark.parametrize("src", [
    "def f(x):\n    return np.exp(x) / np.exp(x).sum()",
    "import numpy as np\nfrom attention_course import softmax",
    "open('notes.txt', 'w').write('mine')",
    "x = nb01_checks.check_stable_softmax",             # reading is not tampering
    "setattr(obj, 'size', 3)",
    "import math\nvalue = math.sqrt(2)",
    "def f(config):\n    return getattr(config, 'H') * 2",
])
def test_ordinary_answers_are_not_flagged(src):
    assert recheck.flags_in([(0, src)], CONTEXT) == []


# --- the re-check itself, in a fresh interpreter ------------------------------------------------

NAME = "01_library_analogy.ipynb"


def solution_cells(nb):
    return [c for c in nb["cells"] if c.get("metadata", {}).get("nbgrader", {}).get("solution")]


@pytest.fixture(scope="module")
def returned(tmp_path_factory):
    """A correct student; one who switches every check off and answers None; one whose answers use
    module constants, lambdas and helpers; one whose answer needs a demo cell's variable."""
    folder = tmp_path_factory.mktemp("returned")
    course = json.loads((ROOT / "notebooks" / "en" / NAME).read_text(encoding="utf-8"))
    for student in ("correct", "cheat", "helpers", "globals"):
        (folder / student).mkdir()
    shutil.copy(ROOT / "notebooks" / "en" / NAME, folder / "correct" / NAME)

    cheat = json.loads(json.dumps(course))
    for i, cell in enumerate(solution_cells(cheat)):
        name = "".join(cell["source"]).split("def ")[1].split("(")[0]
        cell["source"] = f"def {name}(*args, **kwargs):\n    return None\n"
        if i == 0:
            cell["source"] = ("import attention_course.checks.nb01 as m\nfor n in dir(m):\n"
                              "    if n.startswith('check_'):\n"
                              "        setattr(m, n, lambda *a, **k: print('passed'))\n" + cell["source"])
    (folder / "cheat" / NAME).write_text(json.dumps(cheat), encoding="utf-8")

    helpers = json.loads(json.dumps(course))
    first = solution_cells(helpers)[0]
    first["source"] = ("import numpy as np\nAXIS = -1\n"
                       "shift = lambda x: x - x.max(axis=AXIS, keepdims=True)\n"
                       "def _normalise(e):\n    return e / e.sum(axis=AXIS, keepdims=True)\n"
                       "def stable_softmax(x):\n    x = np.asarray(x)\n"
                       "    x = x if np.issubdtype(x.dtype, np.floating) else x.astype(float)\n"
                       "    return _normalise(np.exp(shift(x)))\n")
    (folder / "helpers" / NAME).write_text(json.dumps(helpers), encoding="utf-8")

    needs = json.loads(json.dumps(course))
    solution_cells(needs)[0]["source"] = (
        "offset = compute_offset()\n"
        "def stable_softmax(x):\n    e = np.exp(x - x.max(axis=-1, keepdims=True) + offset)\n"
        "    return e / e.sum(axis=-1, keepdims=True)\n")
    (folder / "globals" / NAME).write_text(json.dumps(needs), encoding="utf-8")
    return folder


@pytest.mark.integration
def test_the_recheck_scores_correct_cheat_helpers_and_names_missing_globals(returned):
    results = {s: recheck.recheck(returned / s / NAME, "en")
               for s in ("correct", "cheat", "helpers", "globals")}
    full = results["correct"].max_score
    assert full > 0 and results["correct"].score == full and not results["correct"].flags
    assert results["cheat"].score == 0
    patterns = {f["pattern"] for f in results["cheat"].flags}
    assert patterns == {"course module attribute", "dynamic import or name"}
    assert results["helpers"].score == full, results["helpers"].checks
    assert results["globals"].score == full - 1
    assert results["globals"].missing_globals == {"stable_softmax": ["offset"]}
    assert any("stable_softmax needs offset" in n for n in results["globals"].notes)


@pytest.mark.integration
def test_an_unreadable_notebook_is_an_error_not_a_zero(tmp_path):
    (tmp_path / NAME).write_text("{not json", encoding="utf-8")
    r = recheck.recheck(tmp_path / NAME, "en")
    assert r.score is None and "not a readable notebook" in r.error


# --- the nbgrader route: what cannot be graded moves out of submitted/ ---------------------------

def test_quarantine_moves_unreadable_and_unknown_notebooks_and_nothing_else(tmp_path):
    quarantine = load_tool("quarantine")
    assignment = f"{NAME[:2]}-en"                       # one assignment per notebook and language
    folder = tmp_path / "submitted" / "alice" / assignment
    folder.mkdir(parents=True)
    shutil.copy(ROOT / "notebooks" / "en" / NAME, folder / NAME)
    others = sorted(p.name for p in (ROOT / "notebooks" / "en").glob("*.ipynb") if p.name != NAME)
    shutil.copy(ROOT / "notebooks" / "en" / others[1], folder / others[1])   # another week's notebook
    (folder / "scratch.ipynb").write_text(json.dumps({"cells": []}), encoding="utf-8")
    (folder / "data.csv").write_text("1,2\n", encoding="utf-8")
    week = tmp_path / "submitted" / "alice" / f"{others[0][:2]}-en"
    week.mkdir()
    (week / others[0]).write_text("{broken", encoding="utf-8")
    assert quarantine.main([str(tmp_path / "submitted")]) == 1
    assert sorted(p.name for p in folder.iterdir()) == sorted([NAME, "data.csv"])
    moved = tmp_path / "quarantine" / "alice" / assignment
    assert sorted(p.name for p in moved.iterdir()) == sorted([others[1], "scratch.ipynb"])
    assert [p.name for p in (tmp_path / "quarantine" / "alice" / week.name).iterdir()] == [others[0]]
    assert quarantine.main([str(tmp_path / "submitted")]) == 0


@pytest.mark.integration
@pytest.mark.skipif(sys.platform == "win32", reason="the stand-in program is a shell script")
def test_only_the_graders_signed_results_count(tmp_path):
    """A program that prints results in the grader's place (as a worker that reached the grader's
    output could) is not believed: the results carry the grader's signature, with a key it alone got."""
    import json as json_module

    fake = tmp_path / "fake-python"
    forged = json_module.dumps({"results": json_module.dumps({"checks": {}}), "mac": "0" * 64})
    fake.write_text(f"#!/bin/sh\ncat > /dev/null\necho '{forged}'\n", encoding="utf-8")
    fake.chmod(0o755)
    shutil.copy(ROOT / "notebooks" / "en" / NAME, tmp_path / NAME)
    r = recheck.recheck(tmp_path / NAME, "en", python=str(fake))
    assert r.score is None and "the re-check stopped" in r.error
