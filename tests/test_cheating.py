"""The cheating class: answers that try to get marks without computing the answer, graded the way
``make grade`` grades (``instructor/recheck.py``, the grade of record: each answer in a worker
process, every comparison in the grader).

Each test student hands in notebook 03 (07 for its exercise 4) with the course's answers, except
one answer that cheats. That check must score 0, and the others keep their points; what reaches a
forbidden function by a back door is flagged for review. Correct answers of other kinds pass.
"""

from __future__ import annotations

import json
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor

import pytest

from notebook_tools import ROOT, load_tool

recheck = load_tool("recheck")

pytestmark = pytest.mark.integration

NB03 = "03_scaled_dot_product.ipynb"
NB07 = "07_learned_attention.ipynb"
#: A short call time, so that the endless loop costs seconds here (60 s in a real grade).
CALL_SECONDS = 4.0

ZEROS = "np.zeros(q.shape[:-1] + (v.shape[-1],))"

#: answer -> source of the my_attention cell (03, exercise 1): each must score 0 on that check.
CHEATS_03 = {
    "frames": f"""
        import sys
        import numpy as np
        def my_attention(q, k, v, mask=None):
            # what the checker computed, read from its frames
            frame = sys._getframe(1)
            while frame is not None:
                for name in ("expected", "reference", "want"):
                    value = frame.f_locals.get(name)
                    if isinstance(value, np.ndarray):
                        return value
                frame = frame.f_back
            return {ZEROS}
        """,
    "globals": f"""
        import gc
        import numpy as np
        def my_attention(q, k, v, mask=None):
            # any array of the right shape the process holds, newest first
            shape = q.shape[:-1] + (v.shape[-1],)
            for obj in reversed(gc.get_objects()):
                if isinstance(obj, dict):
                    for value in obj.values():
                        if isinstance(value, np.ndarray) and value.shape == shape and value is not q:
                            return value.copy()
            return {ZEROS}
        """,
    "patch numpy": f"""
        import numpy as np
        def my_attention(q, k, v, mask=None):
            np.allclose = np.array_equal = lambda *a, **k: True
            np.isclose = lambda a, b, *r, **k: np.ones(np.broadcast(a, b).shape, bool)
            return {ZEROS}
        """,
    "patch the course": f"""
        import numpy as np
        def my_attention(q, k, v, mask=None):
            import attention_course.checks.comparison as comparison
            import attention_course.checks.cases as cases
            comparison.compare_within = comparison.compare = lambda *a, **k: None
            cases.compare_within = cases.compare = cases.precision_reason = lambda *a, **k: None
            return {ZEROS}
        """,
    "inherited descriptors": f"""
        import json, os
        import numpy as np
        def my_attention(q, k, v, mask=None):
            fake = json.dumps({{"checks": {{"nb03-ex1-check": {{"passed": True, "points": 1.0,
                                                            "message": "", "status": "passed"}}}}}}).encode()
            for fd in range(64):
                try:
                    os.write(fd, len(fake).to_bytes(8, "little") + fake)
                except OSError:
                    pass
            return {ZEROS}
        """,
    "exit before a result": """
        import os
        def my_attention(q, k, v, mask=None):
            os._exit(0)
        """,
    "exit after a result": f"""
        import os, sys
        import numpy as np
        def my_attention(q, k, v, mask=None):
            # a reply of its own, with the request's id read from the worker's frames, then exit
            from attention_course.checks import plain
            frame = sys._getframe(1)
            while frame is not None and "ident" not in frame.f_locals:
                frame = frame.f_back
            ident = frame.f_locals["ident"] if frame is not None else ""
            reply = plain.encode({{"id": ident, "status": "ok", "result": {ZEROS}, "detail": "",
                                  "message": "", "peak": None, "flags": [],
                                  "inputs_after": ((q, k, v, mask), {{}})}})
            for fd in range(3, 64):
                try:
                    os.write(fd, len(reply).to_bytes(8, "little") + reply)
                except OSError:
                    pass
            os._exit(0)
        """,
    "SystemExit": "def my_attention(q, k, v, mask=None):\n    raise SystemExit(0)\n",
    "KeyboardInterrupt": "def my_attention(q, k, v, mask=None):\n    raise KeyboardInterrupt\n",
    "GeneratorExit": "def my_attention(q, k, v, mask=None):\n    raise GeneratorExit\n",
    "lying subclass": f"""
        import numpy as np
        class Agreeable(np.ndarray):
            def __eq__(self, other):
                return np.ones(np.shape(other), bool)
            __ne__ = lambda self, other: np.zeros(np.shape(other), bool)
            def __array_ufunc__(self, *args, **kwargs):
                return True
        def my_attention(q, k, v, mask=None):
            return {ZEROS}.view(Agreeable)
        """,
    "object dtype": f"""
        import numpy as np
        def my_attention(q, k, v, mask=None):
            return {ZEROS}.astype(object)
        """,
    "endless loop": """
        def my_attention(q, k, v, mask=None):
            while True:
                pass
        """,
    "huge allocation": """
        import numpy as np
        def my_attention(q, k, v, mask=None):
            return np.ones((3 * 2**30) // 8)          # 3 GiB, over the worker's 2 GiB
        """,
    "input changed in place": """
        import numpy as np
        def my_attention(q, k, v, mask=None):
            d = q.shape[-1]
            s = q @ np.swapaxes(k, -1, -2) / np.sqrt(d)
            if mask is not None:
                s = np.where(mask, s, -np.inf)
            s = np.exp(s - s.max(axis=-1, keepdims=True))
            w = s / s.sum(axis=-1, keepdims=True)
            v[...] = np.nan_to_num(w @ v)    # right values, written into the caller's array
            return v
        """,
}

#: The statuses the grade of record reports for some of them.
STATUS = {"exit before a result": "exited",
          "lying subclass": "returned something else", "object dtype": "returned something else",
          "endless loop": "timed out"}
if sys.platform.startswith("linux"):
    STATUS["huge allocation"] = "exceeded memory"

#: Back doors to a forbidden function (03's attention forbids the library's attention and softmax):
#: each is flagged for review with the pattern given.
BACK_DOORS = {
    "importlib": ("dynamic import or name", """
        import importlib
        def my_attention(q, k, v, mask=None):
            module = importlib.import_module("attention_course.attention")
            return module.scaled_dot_product_attention(q, k, v, mask=mask)
        """),
    "name from strings": ("dynamic import or name", """
        import attention_course.attention as a
        def my_attention(q, k, v, mask=None):
            return getattr(a, "scaled_dot_" + "product_attention")(q, k, v, mask=mask)
        """),
    "thread": ("thread or process", """
        import threading
        def my_attention(q, k, v, mask=None):
            from attention_course.attention import scaled_dot_product_attention
            out = []
            t = threading.Thread(target=lambda: out.append(scaled_dot_product_attention(q, k, v, mask=mask)))
            t.start()
            t.join()
            return out[0]
        """),
    "profiler off": ("profiler or tracer", """
        import sys
        from attention_course.attention import scaled_dot_product_attention as sdpa
        def my_attention(q, k, v, mask=None):
            sys.setprofile(None)
            return sdpa(q, k, v, mask=mask)
        """),
    "plain import": ("forbidden function", """
        from attention_course.attention import scaled_dot_product_attention as sdpa
        def my_attention(q, k, v, mask=None):
            return sdpa(q, k, v, mask=mask)
        """),
}

#: Correct answers of other kinds (03): every check passes.
CORRECT_03 = {
    "nb03-ex1-solution": """
        import numpy as np
        AXIS = -1
        shifted = lambda s: s - np.where(np.isfinite(s.max(axis=AXIS, keepdims=True)),
                                         s.max(axis=AXIS, keepdims=True), 0)
        def _weights(s):
            e = np.exp(shifted(s))
            return e / np.maximum(e.sum(axis=AXIS, keepdims=True), np.finfo(e.dtype).tiny)
        def my_attention(q, k, v, mask=None):
            s = np.matmul(q, np.swapaxes(k, -1, -2)) / float(np.sqrt(q.shape[-1]))
            if mask is not None:
                s = np.where(mask, s, -np.inf)
            return _weights(s) @ v
        """,
    "nb03-ex2-solution": """
        import numpy as np
        def continuation_mask(L, S):
            return (np.arange(S)[None, :] <= (S - L + np.arange(L))[:, None]).tolist()
        """,
    "nb03-ex4-solution": """
        import numpy as np
        score_scale = lambda d_k, variance: np.float64(1.0) / (variance * np.sqrt(np.float64(d_k)))
        """,
}

#: 07's exercise 4: the suspect's closure once named its bug; now nothing but its code tells it.
CLOSURE_07 = """
    def find_bugs(backward):
        names = {"dq_scale": {"dq"}, "dk_sign": {"dk"}, "dv_unscaled_weights": {"dv"},
                 "diagonal": {"dq", "dk"}}
        for cell in backward.__closure__ or ():
            if cell.cell_contents in names:
                return names[cell.cell_contents]
        for value in (backward.__defaults__ or ()) + (backward.__name__, backward.__doc__ or ""):
            if value in names:
                return names[value]
        import json
        from attention_course.checks import isolated      # what the worker remembers of it
        for recipe in isolated._RECIPES.values():
            for value in json.loads(recipe)[2]:
                if value in names:
                    return names[value]
        return set()
    """

CORRECT_07 = """
    import numpy as np
    from attention_course.attention import scaled_dot_product_attention
    def find_bugs(backward):
        rng = np.random.default_rng(3)
        q, k, v, dout = (rng.normal(size=(3, 4)) for _ in range(4))
        grads = backward(dout, q, k, v)
        wrong = []
        for name, x, g in zip(("dq", "dk", "dv"), (q, k, v), grads):
            numeric = np.zeros_like(x)
            for i in np.ndindex(x.shape):
                up, down = x.copy(), x.copy()
                up[i] += 1e-6
                down[i] -= 1e-6
                args = {"q": q, "k": k, "v": v}
                f = lambda t: (scaled_dot_product_attention(**{**args, name[1]: t}) * dout).sum()
                numeric[i] = (f(up) - f(down)) / 2e-6
            if np.abs(numeric - g).max() > 1e-4 * max(1.0, np.abs(numeric).max()):
                wrong.append(name)
        return frozenset(wrong)
    """


def with_answer(notebook: str, grade_ids: dict[str, str]) -> dict:
    """The course's notebook with the solution cells ``grade_id -> source`` replaced."""
    nb = json.loads((ROOT / "notebooks" / "en" / notebook).read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if grade_id in grade_ids:
            cell["source"] = textwrap.dedent(grade_ids[grade_id]).lstrip()
    return nb


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Every test student graded once: name -> the re-check's result."""
    folder = tmp_path_factory.mktemp("cheats")
    students = {f"cheat {k}": (NB03, {"nb03-ex1-solution": v}) for k, v in CHEATS_03.items()}
    students |= {f"door {k}": (NB03, {"nb03-ex1-solution": v}) for k, (_, v) in BACK_DOORS.items()}
    students["correct 03"] = (NB03, CORRECT_03)
    students["closure 07"] = (NB07, {"nb07-ex4-solution": CLOSURE_07})
    students["correct 07"] = (NB07, {"nb07-ex4-solution": CORRECT_07})
    paths = {}
    for i, (name, (notebook, answers)) in enumerate(students.items()):
        path = folder / f"s{i:02d}" / notebook
        path.parent.mkdir()
        path.write_text(json.dumps(with_answer(notebook, answers)), encoding="utf-8")
        paths[name] = path
    with ThreadPoolExecutor(2) as pool:
        results = pool.map(lambda p: recheck.recheck(p, "en", call_timeout=CALL_SECONDS), paths.values())
        return dict(zip(paths, results, strict=True))


def points(result) -> dict[str, float]:
    return {k: (c["points"] if c["passed"] else 0.0) for k, c in result.checks.items()}


@pytest.mark.parametrize("kind", CHEATS_03)
def test_a_cheat_gets_nothing_for_its_check_and_the_other_checks_keep_their_points(graded, kind):
    result = graded[f"cheat {kind}"]
    assert result.error is None, result.error
    got = points(result)
    assert got.pop("nb03-ex1-check") == 0, result.checks["nb03-ex1-check"]
    assert all(v == 1.0 for v in got.values()), result.checks
    if kind in STATUS:
        assert result.checks["nb03-ex1-check"]["status"] == STATUS[kind], result.checks["nb03-ex1-check"]
        assert STATUS[kind] in result.status_text()


def test_the_rule_on_inputs_is_named_when_an_answer_changes_one(graded):
    message = graded["cheat input changed in place"].checks["nb03-ex1-check"]["message"]
    assert "changed its input v" in message and "leaves its inputs as they were" in message


@pytest.mark.parametrize("kind", BACK_DOORS)
def test_a_back_door_to_a_forbidden_function_is_flagged_for_review(graded, kind):
    pattern, _ = BACK_DOORS[kind]
    result = graded[f"door {kind}"]
    assert pattern in {f["pattern"] for f in result.flags}, result.flags
    if kind != "profiler off":           # the watcher is off then: the flag is what is left
        assert not result.checks["nb03-ex1-check"]["passed"], result.checks["nb03-ex1-check"]


def test_correct_answers_of_other_kinds_pass(graded):
    for name in ("correct 03", "correct 07"):
        result = graded[name]
        assert result.score == result.max_score > 0, (name, result.checks)
        assert result.flags == [], (name, result.flags)


def test_the_suspects_closure_gives_nothing_away(graded):
    result = graded["closure 07"]
    assert points(result)["nb07-ex4-check"] == 0 and result.score == result.max_score - 1
    assert "dynamic import or name" in {f["pattern"] for f in result.flags}


def test_the_term_routes_csv_names_what_stopped_an_answer(tmp_path):
    """recheck.py over a folder (the command the term route runs): a ``stopped`` column."""
    path = tmp_path / "submitted" / "odd" / "03-en" / NB03
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(with_answer(NB03, {"nb03-ex1-solution": CHEATS_03["object dtype"]})),
                    encoding="utf-8")
    status = recheck.main([str(tmp_path / "submitted"), "--csv", str(tmp_path / "out.csv")])
    text = (tmp_path / "out.csv").read_text(encoding="utf-8")
    assert status == 0 and "nb03-ex1-check returned something else" in text and ",stopped," in text


def test_the_grade_page_gives_each_checks_status_in_the_notebooks_language(graded, tmp_path):
    grade = load_tool("grade")
    page = grade.write_grade_page(tmp_path, graded["cheat endless loop"]).read_text(encoding="utf-8")
    assert "timed out" in page and "3 / 4" in page and '<html lang="en">' in page
    assert '<th scope="col">' in page and "<caption>" in page
