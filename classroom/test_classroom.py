"""A whole class on one machine, end to end: JupyterHub, nbgrader's exchange and five Unix users.

Run by ``make test-classroom`` (as root, after ``classroom/install.sh``), with the classroom
environment's Python. What happens, every step through the hub:

1. throwaway Unix users: an instructor and four or five students (``useradd``, names
   ``clsXXXX-<role>``);
   the hub starts from ``classroom/jupyterhub_config.py`` on free loopback ports;
2. everyone logs in through the hub's login form and makes a token with that session; the five
   servers start at once through the hub's REST API, each as its own Unix user;
3. the instructor, in a kernel of their own server, works in a clone of the course in their home:
   ``instructor/grade.py``'s nbgrader set-up (the one ``make grade`` uses, settings from the repository's
   ``nbgrader_config.py``) generates notebook 01 of each language as an assignment (``en``, ``zh``)
   and releases it to the exchange;
4. each student, in their own kernel, runs ``nbgrader fetch_assignment``, edits the notebook as a
   learner would, and runs ``nbgrader submit``: ``right`` the instructor's solutions (en), ``wrong``
   a classic mistake in exercise 1 (zh), ``blank`` the copy as fetched (en), ``tamper`` the same
   answers as ``wrong`` with exercise 1's locked check cell replaced by ``pass`` (zh); and, where
   Chromium and Playwright are installed (``.ci/run`` installs them; required when ``CI`` is set),
   ``browser`` in headless Chromium (``browser_student.py``): fetch and submit from JupyterLab's
   Assignments tab after running the notebook and moving a slider (en, stubs left: 0/4);
5. the instructor collects, autogrades, generates and releases feedback, exports the CSV; every
   student fetches their feedback;
6. what one student can and cannot reach of another's: servers (token and browser cookie), the
   exchange's inbound and feedback folders, homes; and what nbgrader's exchange does not prevent
   (a submission read by someone told its folder name, a submission made in another's name).

Everything is removed at the end, passed or failed: hub, servers, users and their homes, the
exchange folder of the course. The last line is ``N passed, N failed``; the exit status is 1 on any
failure.

The exchange is the one ``nbgrader_config.py`` names (``/srv/nbgrader/exchange``); the test refuses
to run when that exchange already holds the course (a real class on this machine).
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from hub_client import HERE, ROOT, VENV, Hub, Learner, Users, new_prefix, parallel, require_root  # noqa: E402

NOTEBOOK = "01_library_analogy"
COURSE_ID = "attention_course"
MARKER = ".made-by-test-classroom"

RESULTS: list[tuple[bool, str]] = []
SKIPPED: list[str] = []


def check(ok: bool, name: str, detail: str = "") -> bool:
    RESULTS.append((bool(ok), name))
    print(f"{'PASS' if ok else 'FAIL'}  {name}" + ("" if ok or not detail else f"\n      {detail}"),
          flush=True)
    return bool(ok)


def exchange_root() -> Path:
    """Exchange.root as the course's nbgrader settings give it (loaded exactly as nbgrader does)."""
    from traitlets.config.loader import PyFileConfigLoader
    config = PyFileConfigLoader("nbgrader_config.py", path=str(VENV / "etc" / "jupyter")).load_config()
    return Path(config.Exchange.root)


# --- What each student writes ------------------------------------------------------------------
def cells_by_grade_id(path: Path) -> dict[str, str]:
    nb = json.loads(path.read_text(encoding="utf-8"))
    out = {}
    for cell in nb["cells"]:
        gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if gid:
            out[gid] = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
    return out


NAIVE_SOFTMAX = '''def stable_softmax(x):
    e = np.exp(np.asarray(x, dtype=float))   # no shift by the row's maximum: overflows on large scores
    return e / e.sum(axis=-1, keepdims=True)
'''


def answers(lang: str) -> dict[str, dict[str, str]]:
    """The cells each student replaces, by grade_id, and the score each must get."""
    cells = cells_by_grade_id(ROOT / "notebooks" / lang / f"{NOTEBOOK}.ipynb")
    solutions = {gid: src for gid, src in cells.items() if gid.endswith("-solution")}
    wrong = dict(solutions, **{"nb01-ex1-solution": NAIVE_SOFTMAX})
    return {"right": solutions, "wrong": wrong, "blank": {},
            "tamper": dict(wrong, **{"nb01-ex1-check": "pass  # checked by me\n"})}


STUDENT_LANG = {"right": "en", "wrong": "zh", "blank": "en", "tamper": "zh", "browser": "en"}
EXPECT = {"right": 4, "wrong": 3, "blank": 0, "tamper": 3, "browser": 0}
BROWSER_PYTHON = ROOT / ".venv" / "bin" / "python"   # the course's dev environment has Playwright
CHROMIUM = Path("/usr/bin/chromium")


def browser_missing() -> str | None:
    """Why the browser student cannot run here, or None."""
    if not CHROMIUM.exists():
        return f"no {CHROMIUM} (bash .ci/browser_setup.sh installs it)"
    probe = [str(BROWSER_PYTHON), "-c", "import playwright.sync_api"]
    if not BROWSER_PYTHON.exists() or subprocess.run(probe, capture_output=True).returncode:
        return f"no Playwright in {BROWSER_PYTHON.parent.parent.name}/ (dependency group dev)"
    return None


def run_nbgrader(args: list[str]) -> str:
    """Kernel code: run one nbgrader command in the home folder, print its output, fail loudly."""
    return textwrap.dedent(f"""
        import os, subprocess
        os.chdir(os.path.expanduser("~"))
        _r = subprocess.run({["nbgrader", *args]!r}, capture_output=True, text=True)
        print(_r.stdout + _r.stderr)
        assert _r.returncode == 0, "nbgrader {' '.join(args)} exited " + str(_r.returncode)
    """)


def edit_code(lang: str, edits: dict[str, str]) -> str:
    """Kernel code: replace cells of the fetched notebook by grade_id, as a learner's typing would."""
    return textwrap.dedent(f"""
        import json, os
        _path = os.path.expanduser("~/{lang}/{NOTEBOOK}.ipynb")
        _nb = json.load(open(_path, encoding="utf-8"))
        _edits = {edits!r}
        _done = set()
        for _cell in _nb["cells"]:
            _gid = _cell.get("metadata", {{}}).get("nbgrader", {{}}).get("grade_id")
            if _gid in _edits:
                _cell["source"] = _edits[_gid]
                _done.add(_gid)
        assert _done == set(_edits), sorted(set(_edits) - _done)
        json.dump(_nb, open(_path, "w", encoding="utf-8"), ensure_ascii=False, indent=1)
        print("edited", sorted(_done))
    """)


# --- The instructor's side -----------------------------------------------------------------------
def clone_course(home: Path, owner: str) -> Path:
    """The course as the instructor has it on the hub: a copy of the repository in their home."""
    clone = home / "attention-course"
    clone.mkdir()
    shutil.copy2(ROOT / "nbgrader_config.py", clone)
    shutil.copytree(ROOT / "notebooks", clone / "notebooks",
                    ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
    shutil.copytree(ROOT / "figures", clone / "figures")
    (clone / "instructor").mkdir()
    shutil.copy2(ROOT / "instructor" / "grade.py", clone / "instructor")
    subprocess.run(["chown", "-R", f"{owner}:{owner}", str(clone)], check=True)
    return clone


def instructor_code(clone: Path, body: str) -> str:
    """Kernel code with ``api``: the nbgrader API make grade uses, on the course directory clone/course."""
    return textwrap.dedent(f"""
        import os, sys, json
        from pathlib import Path
        os.chdir({str(clone)!r})
        sys.path.insert(0, {str(clone / "instructor")!r})
        import grade
        Path({str(clone / "course")!r}).mkdir(exist_ok=True)   # nbgrader's course directory (gitignored)
        api = grade.nbgrader_api(Path({str(clone / "course")!r}))
        api.coursedir.notebook_id = {NOTEBOOK!r}
        def ok(result, what):
            assert result["success"], what + " failed:\\n" + str(result.get("log")) + str(result.get("error"))
            return result.get("log", "")
    """) + textwrap.dedent(body)


def main() -> int:
    require_root()
    t_start = time.monotonic()
    users = Users(new_prefix("cls"))
    hub = None
    exchange = exchange_root()
    made_exchange = False
    course_exchange = exchange / COURSE_ID
    learners: dict[str, Learner] = {}
    children: list[subprocess.Popen] = []   # the browser student's driver and its Chromium

    def on_signal(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)

    try:
        # --- set-up -------------------------------------------------------------------------
        if course_exchange.exists():
            if (course_exchange / MARKER).exists():   # left by a run that was killed outright
                shutil.rmtree(course_exchange)
            else:
                print(f"{course_exchange} exists and was not made by this test: a class may be using this"
                      " exchange; not touching it", file=sys.stderr)
                return 2
        if not exchange.exists():
            made_exchange = not exchange.parent.exists()
            exchange.mkdir(parents=True)
            exchange.chmod(0o777)   # what the guide tells the instructor to do once
        course_exchange.mkdir()
        (course_exchange / MARKER).touch()

        teacher = users.add("teach")
        shutil.chown(course_exchange, teacher, teacher)   # the instructor's release makes its folders
        roles = ["right", "wrong", "blank", "tamper"]
        why_not = browser_missing()
        if why_not and os.environ.get("CI"):
            check(False, f"the browser student can run: {why_not}")
        elif why_not:
            print(f"SKIP  the browser student: {why_not}")
            SKIPPED.append("browser")
        else:
            roles.append("browser")
        student = {role: users.add(role) for role in roles}
        clone = clone_course(Path(f"/home/{teacher}"), teacher)
        print(f"users: {teacher} (instructor), {', '.join(student.values())}; exchange {exchange}")
        shots = Path(os.environ.get("CLASSROOM_SHOTS", ROOT / "build" / "classroom"))

        hub = Hub(teacher, list(student.values()))
        t = hub.start()
        print(f"hub up on {hub.url} in {t:.1f} s")

        # --- log in through the form --------------------------------------------------------
        everyone = [teacher, *student.values()]
        for name in everyone:
            learners[name] = Learner(hub, name)
        logins = parallel(lambda n: learners[n].login(), everyone)
        check(all(not isinstance(r, Exception) and r.status_code == 302 and "jupyterhub-session-id" in
                  learners[n].session.cookies for n, r in zip(everyone, logins, strict=True)),
              "everyone logs in through the hub's login form",
              str([getattr(r, "status_code", r) for r in logins]))
        intruder = Learner(hub, student["right"])
        check(intruder.login(password="not-the-password").status_code == 403,
              "a wrong password is refused")
        outsider = Learner(hub, users.prefix + "nobody")
        check(outsider.login(password=hub.student_password).status_code == 403,
              "a name not on the roster is refused, even with the students' password")
        check(Learner(hub, teacher).login(password=hub.student_password).status_code == 403,
              "the instructor cannot log in with the students' password")
        for name in everyone:
            learners[name].make_token()

        # --- servers, at once ---------------------------------------------------------------
        t0 = time.monotonic()
        started = parallel(lambda n: (learners[n].start_server(), learners[n].wait_ready()), everyone)
        t_ready = time.monotonic() - t0
        errors = [f"{n}: {r}" for n, r in zip(everyone, started, strict=True) if isinstance(r, Exception)]
        if not check(not errors, f"{len(everyone)} servers started at once through the hub API"
                     f" ({t_ready:.1f} s until all ready)", "; ".join(errors)):
            raise RuntimeError("servers did not start:\n" + hub.log_tail())
        whoami = parallel(lambda n: learners[n].run("import getpass; print(getpass.getuser())"), everyone)
        check(all(not isinstance(r, Exception) and r[0].strip() == n
                  for n, r in zip(everyone, whoami, strict=True)),
              "each server's kernel runs as its own Unix user", str(whoami))
        which = subprocess.run(["runuser", "-l", student["blank"], "-c", "command -v nbgrader alembic"],
                               capture_output=True, text=True)
        check(which.returncode == 0 and len(which.stdout.split()) == 2,
              "nbgrader and alembic are on a student's PATH in a login shell outside the hub too",
              which.stdout + which.stderr)

        # --- one student cannot reach another's server --------------------------------------
        a, b = learners[student["right"]], learners[student["wrong"]]
        r = requests_get(b.server_url("api/status", user=a.name), headers=b.auth)
        check(r.status_code == 403, "a student's token is refused by another student's server (403)",
              f"{r.status_code}")
        r = requests_get(a.server_url("api/status"), headers=a.auth)
        check(r.status_code == 200, "the same token opens its owner's server (200)", f"{r.status_code}")
        r = b.session.get(b.server_url("lab", user=a.name), timeout=60)   # the browser's way: cookies
        check(r.status_code == 403, "a student's browser session is refused at another student's server"
              " (403 after the hub's OAuth redirect)", f"{r.status_code} at {r.url}")
        r = b.session.get(b.server_url("lab"), timeout=60)
        check(r.status_code == 200 and "JupyterLab" in r.text, "the same session opens its own JupyterLab",
              f"{r.status_code} at {r.url}")
        r = b.hub_api("DELETE", f"/users/{a.name}/server")
        check(r.status_code in (403, 404), "a student cannot stop another student's server through the hub"
              f" ({r.status_code})")
        out, err = b.run(f"import os\ntry:\n    os.listdir('/home/{teacher}')\n    print('listed')\n"
                         "except PermissionError:\n    print('denied')")
        check(out.strip() == "denied", "a student cannot read the instructor's home (the solutions)",
              out + str(err))

        # --- instructor: generate and release -----------------------------------------------
        instr = learners[teacher]
        out, err = instr.run(instructor_code(clone, """
            for lang in ("en", "zh"):
                ok(api.generate_assignment(lang), "generate_assignment " + lang)
                ok(api.release_assignment(lang), "release_assignment " + lang)
            print(json.dumps(sorted(os.listdir(OUTBOUND))))
        """.replace("OUTBOUND", repr(str(course_exchange / "outbound")))), timeout=300)
        released = json.loads(out.strip().splitlines()[-1]) if not err else None
        check(released == ["en", "zh"], "the instructor generates (make grade's nbgrader set-up) and releases"
              " notebook 01 in en and zh", out[-2000:] + str(err))
        outbound = course_exchange / "outbound"
        student_version = (outbound / "en" / f"{NOTEBOOK}.ipynb").read_text(encoding="utf-8")
        check("NotImplementedError" in student_version and "### BEGIN SOLUTION" not in student_version
              and "e = np.exp(x - x.max(" not in student_version,
              "the released notebook is the student version (no solution in it)")

        # --- students: fetch, answer, submit, all at once -----------------------------------
        given = {lang: answers(lang) for lang in ("en", "zh")}

        def do_student(role):
            lang, who = STUDENT_LANG[role], learners[student[role]]
            log = []
            for code in (run_nbgrader(["fetch_assignment", lang]), edit_code(lang, given[lang][role]),
                         run_nbgrader(["submit", lang])):
                out, err = who.run(code)
                log.append(out)
                if err:
                    raise RuntimeError(f"{role}: {err}\n{''.join(log)[-2000:]}")
            return "".join(log)

        def do_browser(role):
            proc = subprocess.Popen([str(BROWSER_PYTHON), str(HERE / "browser_student.py"), "--hub", hub.url,
                                     "--user", student[role], "--password", hub.student_password,
                                     "--lang", STUDENT_LANG[role], "--shots", str(shots)],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                    start_new_session=True)
            children.append(proc)
            try:
                stdout, stderr = proc.communicate(timeout=600)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                stdout, stderr = proc.communicate()
            lines = [line for line in stdout.splitlines() if line.startswith("{")]
            if not lines:
                return {"ok": False, "error": stdout[-1000:] + stderr[-2000:]}
            return json.loads(lines[-1])

        t0 = time.monotonic()
        kernel_roles = [r for r in roles if r != "browser"]
        done = parallel(lambda r: do_browser(r) if r == "browser" else do_student(r), roles)
        errors = [str(r) for role, r in zip(roles, done, strict=True)
                  if role != "browser" and isinstance(r, Exception)]
        check(not errors, f"{len(kernel_roles)} students fetch, answer and submit through their own"
              f" servers' kernels ({time.monotonic() - t0:.1f} s)", "\n".join(errors))
        if "browser" in roles:
            b_result = done[roles.index("browser")]
            ok = isinstance(b_result, dict) and b_result.get("ok")
            check(ok, "in headless Chromium, a student logs in through the hub, fetches from the Assignments"
                  " tab, runs notebook 01, moves a slider (the kernel redraws the figure), saves and"
                  f" submits from the Assignments tab (screenshots in {shots})", json.dumps(
                      b_result if isinstance(b_result, dict) else str(b_result), ensure_ascii=False)[-2000:])
        inbound = course_exchange / "inbound"
        owners = {p.name.split("+")[0]: p.owner() for p in inbound.iterdir()}
        check(owners == {s: s for s in student.values()},
              "each submission in the exchange is owned by the student who made it", str(owners))
        names = [p.name.split("+") for p in inbound.iterdir()]
        check(all(len(n) == 4 and len(n[3]) >= 12 for n in names),
              "each submission's folder name ends in a random string (student+assignment+time+random)",
              str(names))
        if "browser" in roles:
            sub = next(p for p in inbound.iterdir() if p.name.startswith(student["browser"] + "+"))
            cells = json.loads((sub / f"{NOTEBOOK}.ipynb").read_text(encoding="utf-8"))["cells"]
            ran = sum(1 for c in cells if c["cell_type"] == "code" and c.get("execution_count"))
            check(ran >= 10, f"the browser's submission is the notebook it ran and saved ({ran} code cells"
                  " with outputs)")

        # --- instructor: collect, autograde, feedback, export -------------------------------
        pairs = [(student[r], STUDENT_LANG[r]) for r in roles]
        out, err = instr.run(instructor_code(clone, f"""
            logs = {{}}
            for lang in ("en", "zh"):
                logs["collect " + lang] = ok(api.collect(lang), "collect " + lang)
            for s, lang in {pairs!r}:
                logs["autograde " + s] = ok(api.autograde(lang, s), "autograde " + s)
            for lang in ("en", "zh"):
                ok(api.generate_feedback(lang), "generate_feedback " + lang)
                logs["release_feedback " + lang] = ok(api.release_feedback(lang), "release_feedback " + lang)
            import subprocess
            r = subprocess.run(["nbgrader", "export", "--to=course/grades.csv"],
                               capture_output=True, text=True)
            assert r.returncode == 0, r.stdout + r.stderr
            from nbgrader.api import Gradebook
            scores = {{}}
            with Gradebook(api.coursedir.db_url) as gb:
                for s, lang in {pairs!r}:
                    sub = gb.find_submission(lang, s)
                    scores[s] = [sub.score, sub.max_score]
            grades = open("course/grades.csv").read()
            print("RESULT " + json.dumps(dict(scores=scores, logs=logs, csv=grades)))
        """), timeout=600)
        result = next((json.loads(line[7:]) for line in out.splitlines() if line.startswith("RESULT ")), None)
        if not check(result is not None and not err, "the instructor collects, autogrades, generates and"
                     " releases feedback, and exports the CSV", out[-3000:] + str(err)):
            raise RuntimeError("grading failed")
        scores = result["scores"]
        expect = EXPECT
        for role in roles:
            got = scores[student[role]]
            check(got == [expect[role], 4], f"{role} ({STUDENT_LANG[role]}) scores {expect[role]}/4",
                  f"got {got}")
        check("checksum" in result["logs"][f"autograde {student['tamper']}"]
              and "checksum" not in result["logs"][f"autograde {student['right']}"],
              "autograde reports the tampered check cell (checksum changed) and restores it; tamper scores"
              " the same as the same answers untouched")
        rows = list(csv.DictReader(io.StringIO(result["csv"])))
        csv_scores = {(row["student_id"], row["assignment"]): float(row["score"]) for row in rows}
        want = {(student[r], lang): float(expect[r]) if lang == STUDENT_LANG[r] else 0.0
                for r in roles for lang in ("en", "zh")}
        check(len(rows) == len(want) and csv_scores == want, "the exported CSV has one row per student and"
              " assignment, with the score (0 where nothing was submitted)", str(csv_scores))

        # --- students: their own feedback ---------------------------------------------------
        def fetch_feedback(role):
            lang, who = STUDENT_LANG[role], learners[student[role]]
            out, err = who.run(run_nbgrader(["fetch_feedback", lang]) + textwrap.dedent(f"""
                import glob
                _files = glob.glob(os.path.expanduser("~/{lang}/feedback/*/*.html"))
                print("FILES", len(_files))
                for _f in _files:
                    print("SCORE", open(_f, encoding="utf-8").read().split("(Score: ")[1].split(")")[0])
            """))
            if err:
                raise RuntimeError(f"{role}: {err}\n{out[-1500:]}")
            return out

        fb = dict(zip(roles, parallel(fetch_feedback, roles), strict=True))
        for role in roles:
            out = fb[role]
            score = re.findall(r"^SCORE (.*)$", str(out), re.M)
            check(not isinstance(out, Exception) and "FILES 1" in out
                  and score == [f"{float(expect[role])} / 4.0"],
                  f"{role} fetches their own feedback (one page, score {expect[role]}/4)", str(out)[-1500:])

        # --- the exchange: what it keeps from other students, and what it does not ----------
        out, err = b.run(textwrap.dedent(f"""
            import os, glob
            for _d in ("inbound", "feedback"):
                try:
                    os.listdir("{course_exchange}/" + _d)
                    print(_d, "listed")
                except PermissionError:
                    print(_d, "denied")
            print("guess", glob.glob("{course_exchange}/inbound/{a.name}+*"))
        """))
        check("inbound denied" in out and "feedback denied" in out and "guess []" in out,
              "a student cannot list the exchange's inbound or feedback folders, nor find another's"
              " submission by pattern", out + str(err))
        # The names are unguessable (timestamp + random string), but not protected: told a name,
        # anyone reads it. The guide says so; this keeps the guide true.
        a_sub = next(p for p in inbound.iterdir() if p.name.startswith(a.name + "+"))
        out, err = b.run(f"print(open({str(a_sub / NOTEBOOK) + '.ipynb'!r}).read()[:1])")
        check(out.strip() == "{", "documented limit: a student told the folder name of another's submission"
              " can read it (files 0644 in a folder 0777)", out + str(err))
        # A submission made in another student's name: nbgrader records it under that name.
        out, err = b.run(run_nbgrader(["submit", "zh", f"--student={a.name}"]))
        check(err is None, "documented limit: a student can submit in another student's name"
              " (nbgrader submit --student)", out[-1500:] + str(err))
        out, err = instr.run(instructor_code(clone, """
            print("RESULT " + json.dumps(ok(api.collect("zh"), "collect zh")))
        """))
        log = next((json.loads(line[7:]) for line in out.splitlines() if line.startswith("RESULT ")), "")
        check(f"claims to be submitted by {a.name} but is owned by {b.name}" in log
              and f"Collecting submission: {a.name} zh" in log,
              "collect warns that the submission is owned by someone else (\"cheating attempt?\"); it still"
              " collects it", log[-1500:] + str(err))

        print(f"whole run {time.monotonic() - t_start:.0f} s")
    except BaseException as e:  # noqa: BLE001 (any failure, an interrupt too, is reported and cleaned up)
        check(False, f"the run stopped: {type(e).__name__}: {e}", traceback.format_exc()[-3000:])
        if hub is not None:
            print("--- hub log (last lines) ---\n" + hub.log_tail(), file=sys.stderr)
    finally:
        for proc in children:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for learner in learners.values():
            learner.close()
        if hub is not None:
            hub.stop()
        users.remove()
        if (course_exchange / MARKER).exists():
            shutil.rmtree(course_exchange, ignore_errors=True)
        if made_exchange:   # /srv/nbgrader and its exchange, when this run made them and they are empty
            for folder in (exchange, exchange.parent):
                try:
                    folder.rmdir()
                except OSError:
                    pass
        left = [n for n in users.names]
        leftover = subprocess.run(["getent", "passwd"], capture_output=True, text=True).stdout
        check(users.prefix not in leftover and not left, "clean-up: hub stopped, users and homes removed")

    passed = sum(ok for ok, _ in RESULTS)
    failed = len(RESULTS) - passed
    print(f"{passed} passed, {failed} failed" + (f", {len(SKIPPED)} skipped" if SKIPPED else ""))
    return 1 if failed else 0


def requests_get(url, **kw):
    import requests
    return requests.get(url, timeout=60, allow_redirects=False, **kw)


if __name__ == "__main__":
    sys.exit(main())
