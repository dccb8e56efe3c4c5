"""A whole class on one machine, end to end: JupyterHub, nbgrader's exchange and five Unix users.

Run by ``make test-classroom`` (as root, after ``classroom/install.sh``), with the classroom
environment's Python. What happens, every step through the hub:

1. throwaway Unix users: an instructor and four or five students (``useradd``, names
   ``clsXXXX-<role>``);
   the hub starts from ``classroom/jupyterhub_config.py`` on free loopback ports;
2. everyone logs in through the hub's login form and makes a token with that session; the
   servers start at once through the hub's REST API, each as its own Unix user;
3. week 1: the instructor, in a kernel of their own server, works in a clone of the course in their
   home (``~/attention-course``): ``instructor/term.py`` puts notebook 01 of each language in its
   own assignment's source folder, and ``instructor/grade.py``'s nbgrader set-up (the one ``make
   grade`` uses, settings from the repository's ``nbgrader_config.py``) generates ``01-en`` and
   ``01-zh`` and releases them to the exchange;
4. each student, in their own kernel, runs ``nbgrader fetch_assignment``, edits the notebook as a
   learner would, and runs ``nbgrader submit``: ``right`` the instructor's solutions (01-en),
   ``wrong`` a classic mistake in exercise 1 (01-zh), ``blank`` the copy as fetched (01-en),
   ``tamper`` the same answers as ``wrong`` with exercise 1's locked check cell replaced by ``pass``
   (01-zh); and, where Chromium and Playwright are installed (``.ci/run`` installs them; required
   when ``CI`` is set), ``browser`` in headless Chromium (``browser_student.py``): fetch and submit
   from JupyterLab's Assignments tab after running the notebook and moving a slider (01-en, stubs
   left: 0/4); the instructor collects, autogrades, generates and releases feedback (nbgrader's API);
5. week 2: the instructor releases ``06-en`` and ``09-zh``; ``right`` submits 06 with the
   instructor's solutions; ``blank`` runs both fetched notebooks in its home (the only stops are
   the unanswered exercises' NotImplementedError) and submits them as fetched. The instructor grades
   week 2 in the formgrader, through the hub: its pages and its JSON API (``/user/<instructor>/
   formgrader/api/...``) list the assignments and the submissions, collect, autograde, generate and
   release feedback; week 1's grades stay as they were; ``nbgrader export`` has every student and
   assignment; every student fetches their feedback;
6. what one student can and cannot reach of another's: servers (token and browser cookie), the
   exchange's inbound and feedback folders, homes; and what nbgrader's exchange does not prevent
   (a submission read by someone told its folder name, a submission made in another's name).

Everything is removed at the end, passed or failed: hub, servers, users and their homes, the
exchange folder of the course. Each stage's time is printed, then ``N passed, N failed``; the exit
status is 1 on any failure.

The exchange is the one ``nbgrader_config.py`` names (``/srv/nbgrader/exchange``); the test refuses
to run when that exchange already holds the course (a real class on this machine).
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import traceback
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))

from hub_client import HERE, ROOT, VENV, Hub, Learner, Users, new_prefix, parallel, require_root  # noqa: E402

COURSE_ID = "attention_course"
MARKER = ".made-by-test-classroom"
CLONE_NAME = "attention-course"   # where the classroom's nbgrader settings look for the instructor's clone

# What a single-user server logs when a kernel dies, restarts or fails to start.
KERNEL_LOG = r"(?i)died|restart|KernelRestarter|Traceback|Error|kernel_info|alive"
RESULTS: list[tuple[bool, str]] = []
SKIPPED: list[str] = []
STAGES: list[tuple[str, float]] = []


def check(ok: bool, name: str, detail: str = "") -> bool:
    RESULTS.append((bool(ok), name))
    print(f"{'PASS' if ok else 'FAIL'}  {name}" + ("" if ok or not detail else f"\n      {detail}"),
          flush=True)
    return bool(ok)


class Stage:
    """Times one stage of the run; the times are printed together at the end."""

    def __init__(self, name: str):
        self.name = name

    def __enter__(self):
        print(f"--- {self.name}", flush=True)
        self.t0 = time.monotonic()
        return self

    def __exit__(self, *exc):
        STAGES.append((self.name, time.monotonic() - self.t0))
        return False


def exchange_root() -> Path:
    """Exchange.root as the course's nbgrader settings give it (loaded exactly as nbgrader does)."""
    from traitlets.config.loader import PyFileConfigLoader
    config = PyFileConfigLoader("nbgrader_config.py", path=str(VENV / "etc" / "jupyter")).load_config()
    return Path(config.Exchange.root)


# --- The assignments and what each student does ----------------------------------------------------
def notebook_of(assignment: str) -> Path:
    """The instructor notebook an assignment id ("06-en") holds."""
    number, lang = assignment.split("-")
    found = sorted((ROOT / "notebooks" / lang).glob(f"{number}_*.ipynb"))
    assert len(found) == 1, (assignment, found)
    return found[0]


def cells_by_grade_id(path: Path) -> dict[str, str]:
    nb = json.loads(path.read_text(encoding="utf-8"))
    out = {}
    for cell in nb["cells"]:
        gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if gid:
            out[gid] = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
    return out


def max_score(assignment: str) -> float:
    nb = json.loads(notebook_of(assignment).read_text(encoding="utf-8"))
    return float(sum(c.get("metadata", {}).get("nbgrader", {}).get("points") or 0 for c in nb["cells"]))


def solutions(assignment: str) -> dict[str, str]:
    return {gid: src for gid, src in cells_by_grade_id(notebook_of(assignment)).items()
            if gid.endswith("-solution")}


NAIVE_SOFTMAX = '''def stable_softmax(x):
    e = np.exp(np.asarray(x, dtype=float))   # no shift by the row's maximum: overflows on large scores
    return e / e.sum(axis=-1, keepdims=True)
'''

WEEK1 = ("01-en", "01-zh")
WEEK2 = ("06-en", "09-zh")
ASSIGNMENTS = WEEK1 + WEEK2
# Each student's work, by assignment: "right" (the instructor's solutions), "wrong" (exercise 1 of
# notebook 01 without the shift by the maximum), "tamper" (wrong, and its check cell replaced),
# "blank" (as fetched), "run" (as fetched, after running the whole notebook in the student's home).
WORK = {
    "right": {"01-en": "right", "06-en": "right"},
    "wrong": {"01-zh": "wrong"},
    "blank": {"01-en": "blank", "06-en": "run", "09-zh": "run"},
    "tamper": {"01-zh": "tamper"},
    "browser": {"01-en": "browser"},   # in headless Chromium; stubs left as they were
}
SCORE_01 = {"right": 4, "wrong": 3, "blank": 0, "tamper": 3, "browser": 0}


def expected(role: str, assignment: str) -> float:
    kind = WORK[role][assignment]
    if kind == "right":
        return max_score(assignment)
    return float(SCORE_01[kind]) if assignment.startswith("01-") else 0.0


def edits(kind: str, assignment: str) -> dict[str, str]:
    """The cells a student of this kind replaces, by grade_id."""
    if kind == "right":
        return solutions(assignment)
    if kind in ("wrong", "tamper"):
        edit = dict(solutions(assignment), **{"nb01-ex1-solution": NAIVE_SOFTMAX})
        return dict(edit, **{"nb01-ex1-check": "pass  # checked by me\n"}) if kind == "tamper" else edit
    return {}


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
        _r = subprocess.run({["nbgrader", *args]!r}, capture_output=True, text=True, encoding="utf-8")
        print(_r.stdout + _r.stderr)
        assert _r.returncode == 0, "nbgrader {' '.join(args)} exited " + str(_r.returncode)
    """)


def fetched(assignment: str) -> str:
    """Where a student's fetched copy of the assignment's notebook is, from their home."""
    return f"~/{assignment}/{notebook_of(assignment).name}"


def edit_code(assignment: str, edits: dict[str, str]) -> str:
    """Kernel code: replace cells of the fetched notebook by grade_id, as a learner's typing would."""
    return textwrap.dedent(f"""
        import json, os
        _path = os.path.expanduser({fetched(assignment)!r})
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


def execute_code(assignment: str) -> str:
    """Kernel code: run every cell of the fetched notebook where it lies (a fresh kernel, the folder
    as working directory, errors recorded and passed over), print the errors' names; the file on
    disk stays as fetched."""
    return textwrap.dedent(f"""
        import json, os, time, nbformat
        from nbclient import NotebookClient
        _path = os.path.expanduser({fetched(assignment)!r})
        _nb = nbformat.read(_path, as_version=4)
        _t = time.monotonic()
        NotebookClient(_nb, timeout=120, allow_errors=True, kernel_name="python3",
                       resources={{"metadata": {{"path": os.path.dirname(_path)}}}}).execute()
        _errors = [o.get("ename") + ": " + str(o.get("evalue"))[:200] for c in _nb.cells
                   if c.cell_type == "code" for o in c.get("outputs", []) if o.get("output_type") == "error"]
        _ran = sum(1 for c in _nb.cells if c.cell_type == "code" and c.get("execution_count"))
        print("EXECUTED " + json.dumps(dict(errors=_errors, ran=_ran, seconds=time.monotonic() - _t)))
    """)


# --- The instructor's side -----------------------------------------------------------------------
def clone_course(home: Path, owner: str) -> Path:
    """The course as the instructor has it on the hub: a copy of the repository in their home, where
    the classroom's nbgrader settings look for it (~/attention-course)."""
    clone = home / CLONE_NAME
    clone.mkdir()
    shutil.copy2(ROOT / "nbgrader_config.py", clone)
    ignore = shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__")
    shutil.copytree(ROOT / "notebooks", clone / "notebooks", ignore=ignore)
    shutil.copytree(ROOT / "instructor", clone / "instructor", ignore=ignore)
    subprocess.run(["chown", "-R", f"{owner}:{owner}", str(clone)], check=True)
    return clone


def instructor_code(clone: Path, body: str) -> str:
    """Kernel code with ``api`` (the nbgrader API make grade uses, on the course directory
    clone/course) and ``term`` (the assignment layout: one source folder per notebook and language)."""
    return textwrap.dedent(f"""
        import os, sys, json
        from pathlib import Path
        os.chdir({str(clone)!r})
        sys.path.insert(0, {str(clone / "instructor")!r})
        import grade, term
        COURSE = Path({str(clone / "course")!r})   # nbgrader's course directory (gitignored)
        COURSE.mkdir(exist_ok=True)
        api = grade.nbgrader_api(COURSE)
        def ok(result, what):
            assert result["success"], what + " failed:\\n" + str(result.get("log")) + str(result.get("error"))
            return result.get("log", "")
    """) + textwrap.dedent(body)


def release_code(clone: Path, assignments: tuple[str, ...], outbound: Path) -> str:
    return instructor_code(clone, f"""
        wanted = {list(assignments)!r}
        made = []
        for lang in sorted({{a.split("-")[1] for a in wanted}}):
            numbers = sorted(a.split("-")[0] for a in wanted if a.endswith("-" + lang))
            made += term.prepare_source(COURSE, numbers=numbers, langs=(lang,))
        assert sorted(made) == sorted(wanted), made
        for a in wanted:
            ok(api.generate_assignment(a), "generate_assignment " + a)
            ok(api.release_assignment(a), "release_assignment " + a)
        print("RELEASED " + json.dumps(sorted(os.listdir({str(outbound)!r}))))
    """)


def result_line(out: str, tag: str):
    return next((json.loads(line[len(tag) + 1:]) for line in out.splitlines() if line.startswith(tag + " ")),
                None)


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
        stage = Stage("set-up: users, the instructor's clone, the hub")
        stage.__enter__()
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
        stage.__exit__()

        # --- log in through the form --------------------------------------------------------
        with Stage("log in, servers, isolation of servers"):
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

            # --- servers, at once -----------------------------------------------------------
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
            # The client's one retry, tried for real: a kernel shut down under a learner (as one that
            # died and could not be restarted is) is replaced, the code runs once, the loss is kept.
            lost = learners[student["blank"]]
            gone = lost.kernel_id
            requests.delete(lost.server_url(f"api/kernels/{gone}"), headers=lost.auth, timeout=60)
            again = lost.run("import getpass; print(getpass.getuser())")
            check(again[0].strip() == lost.name and lost.kernel_id != gone
                  and len(lost.kernel_losses) == 1 and gone in lost.kernel_losses[0],
                  "a kernel shut down under a student is replaced by a new one, which runs the code once",
                  f"{again} {lost.kernel_losses}")
            lost.kernel_losses.clear()   # planted: only the losses nobody planted are reported
            which = subprocess.run(["runuser", "-l", student["blank"], "-c", "command -v nbgrader alembic"],
                                   capture_output=True, text=True, encoding="utf-8")
            check(which.returncode == 0 and len(which.stdout.split()) == 2,
                  "nbgrader and alembic are on a student's PATH in a login shell outside the hub too",
                  which.stdout + which.stderr)

            # --- one student cannot reach another's server ----------------------------------
            sa, sb = learners[student["right"]], learners[student["wrong"]]
            r = requests_get(sb.server_url("api/status", user=sa.name), headers=sb.auth)
            check(r.status_code == 403, "a student's token is refused by another student's server (403)",
                  f"{r.status_code}")
            r = requests_get(sa.server_url("api/status"), headers=sa.auth)
            check(r.status_code == 200, "the same token opens its owner's server (200)", f"{r.status_code}")
            r = sb.session.get(sb.server_url("lab", user=sa.name), timeout=60)   # the browser's way: cookies
            check(r.status_code == 403, "a student's browser session is refused at another student's server"
                  " (403 after the hub's OAuth redirect)", f"{r.status_code} at {r.url}")
            r = sb.session.get(sb.server_url("lab"), timeout=60)
            check(r.status_code == 200 and "JupyterLab" in r.text,
                  "the same session opens its own JupyterLab", f"{r.status_code} at {r.url}")
            r = sb.hub_api("DELETE", f"/users/{sa.name}/server")
            check(r.status_code in (403, 404),
                  f"a student cannot stop another student's server through the hub ({r.status_code})")
            out, err = sb.run(f"import os\ntry:\n    os.listdir('/home/{teacher}')\n    print('listed')\n"
                             "except PermissionError:\n    print('denied')")
            check(out.strip() == "denied", "a student cannot read the instructor's home (the solutions)",
                  out + str(err))

        instr = learners[teacher]
        outbound = course_exchange / "outbound"
        inbound = course_exchange / "inbound"

        def do_student(role, week):
            who, log = learners[student[role]], []
            runs = {}
            for assignment in (a for a in WORK[role] if a in week):
                kind = WORK[role][assignment]
                steps = [run_nbgrader(["fetch_assignment", assignment])]
                steps += ([execute_code(assignment)] if kind == "run"
                          else [edit_code(assignment, edits(kind, assignment))])
                steps += [run_nbgrader(["submit", assignment])]
                for code in steps:
                    out, err = who.run(code, timeout=900)   # 09 takes minutes on a busy machine
                    log.append(out)
                    if err:
                        raise RuntimeError(f"{role} {assignment}: {err}\n{''.join(log)[-2000:]}")
                    if out and result_line(out, "EXECUTED") is not None:
                        runs[assignment] = result_line(out, "EXECUTED")
            return runs

        def do_browser(role):
            proc = subprocess.Popen([str(BROWSER_PYTHON), str(HERE / "browser_student.py"), "--hub", hub.url,
                                     "--user", student[role], "--password", hub.student_password,
                                     "--assignment", "01-en", "--shots", str(shots)],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                    encoding="utf-8", start_new_session=True)
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

        # --- week 1: 01-en and 01-zh ------------------------------------------------------------
        with Stage("week 1: release 01-en and 01-zh, students fetch, answer and submit"):
            out, err = instr.run(release_code(clone, WEEK1, outbound), timeout=300)
            released = result_line(out, "RELEASED") if not err else None
            check(released == sorted(WEEK1), "week 1: the instructor puts notebook 01 of each language in"
                  " its own assignment (instructor/term.py), generates (make grade's nbgrader set-up) and"
                  " releases 01-en and 01-zh", out[-2000:] + str(err))
            student_version = (outbound / "01-en" / notebook_of("01-en").name).read_text(encoding="utf-8")
            check("NotImplementedError" in student_version and "### BEGIN SOLUTION" not in student_version
                  and "e = np.exp(x - x.max(" not in student_version,
                  "the released notebook is the student version (no solution in it)")

            t0 = time.monotonic()
            kernel_roles = [r for r in roles if r != "browser"]
            done = parallel(lambda r: do_browser(r) if r == "browser" else do_student(r, WEEK1), roles)
            errors = [str(r) for role, r in zip(roles, done, strict=True)
                      if role != "browser" and isinstance(r, Exception)]
            check(not errors, f"{len(kernel_roles)} students fetch, answer and submit through their own"
                  f" servers' kernels ({time.monotonic() - t0:.1f} s)", "\n".join(errors))
            if "browser" in roles:
                b_result = done[roles.index("browser")]
                ok = isinstance(b_result, dict) and b_result.get("ok")
                check(ok, "in headless Chromium, a student logs in through the hub, fetches 01-en from the"
                      " Assignments tab, runs notebook 01, moves a slider (the kernel redraws the figure),"
                      f" saves and submits from the Assignments tab (screenshots in {shots})",
                      json.dumps(b_result if isinstance(b_result, dict) else str(b_result),
                                 ensure_ascii=False)[-2000:])
            owners = {p.name.split("+")[0]: p.owner() for p in inbound.iterdir()}
            check(owners == {s: s for s in student.values()},
                  "each submission in the exchange is owned by the student who made it", str(owners))
            names = [p.name.split("+") for p in inbound.iterdir()]
            check(all(len(n) == 4 and len(n[3]) >= 12 for n in names),
                  "each submission's folder name ends in a random string (student+assignment+time+random)",
                  str(names))
            if "browser" in roles:
                sub = next(p for p in inbound.iterdir() if p.name.startswith(student["browser"] + "+"))
                cells = json.loads((sub / notebook_of("01-en").name).read_text(encoding="utf-8"))["cells"]
                ran = sum(1 for c in cells if c["cell_type"] == "code" and c.get("execution_count"))
                check(ran >= 10, "the browser's submission is the notebook it ran and saved"
                      f" ({ran} code cells with outputs)")

        # --- week 2 is released; the instructor grades week 1 while the students work on week 2 --
        week2_roles = [r for r in roles if any(a in WEEK2 for a in WORK[r])]
        with Stage("week 2: release 06-en and 09-zh"):
            out, err = instr.run(release_code(clone, WEEK2, outbound), timeout=300)
            released = result_line(out, "RELEASED") if not err else None
            check(released == sorted(ASSIGNMENTS), "week 2: the instructor releases 06-en and 09-zh;"
                  " week 1's assignments stay released beside them", out[-2000:] + str(err))

        pairs = [(student[r], a) for r in roles for a in WORK[r] if a in WEEK1]
        grade_week1 = instructor_code(clone, f"""
            logs = {{}}
            for a in {list(WEEK1)!r}:
                logs["collect " + a] = ok(api.collect(a), "collect " + a)
            for s, a in {pairs!r}:
                logs["autograde " + s] = ok(api.autograde(a, s), "autograde " + s + " " + a)
            for a in {list(WEEK1)!r}:
                ok(api.generate_feedback(a), "generate_feedback " + a)
                logs["release_feedback " + a] = ok(api.release_feedback(a), "release_feedback " + a)
            from nbgrader.api import Gradebook
            scores = {{}}
            with Gradebook(api.coursedir.db_url) as gb:
                for s, a in {pairs!r}:
                    sub = gb.find_submission(a, s)
                    scores[s] = [sub.score, sub.max_score]
            print("RESULT " + json.dumps(dict(scores=scores, logs=logs)))
        """)

        def job(name):
            t0 = time.monotonic()
            result = instr.run(grade_week1, timeout=900) if name == "grade" else do_student(name, WEEK2)
            return result, time.monotonic() - t0

        with Stage("at once: the instructor grades week 1 (nbgrader's API); students fetch, run, answer"
                   " and submit week 2"):
            jobs = ["grade", *week2_roles]
            done = dict(zip(jobs, parallel(job, jobs), strict=True))
            graded = done.pop("grade")
            (out, err), seconds = graded if not isinstance(graded, Exception) else (("", str(graded)), 0)
            result = result_line(out, "RESULT")
            if not check(result is not None and not err, "week 1: the instructor collects, autogrades,"
                         f" generates and releases feedback ({seconds:.1f} s)", out[-3000:] + str(err)):
                raise RuntimeError("grading failed")
            for role in roles:
                got = result["scores"][student[role]]
                a = next(a for a in WORK[role] if a in WEEK1)
                check(got == [expected(role, a), max_score(a)],
                      f"{role} ({a}) scores {expected(role, a):g}/{max_score(a):g}", f"got {got}")
            check("checksum" in result["logs"][f"autograde {student['tamper']}"]
                  and "checksum" not in result["logs"][f"autograde {student['right']}"],
                  "autograde reports the tampered check cell (checksum changed) and restores it;"
                  " tamper scores the same as the same answers untouched")

            errors = [str(r) for r in done.values() if isinstance(r, Exception)]
            took = ", ".join(f"{r} {done[r][1]:.1f} s" for r in week2_roles
                             if not isinstance(done[r], Exception))
            check(not errors, f"week 2: {', '.join(week2_roles)} fetch and submit ({took})",
                  "\n".join(errors))
            blank = done.get("blank")
            runs = blank[0] if isinstance(blank, tuple) else {}
            for a in WEEK2:
                run = runs.get(a)
                stops = sorted({e.split(":")[0] for e in run["errors"]}) if run else None
                check(run is not None and stops == ["NotImplementedError"] and run["ran"] >= 10,
                      f"{a}, as fetched into the student's home (~/{a}/), runs there: every cell executes"
                      " and the only stops are the unanswered exercises' NotImplementedError"
                      + (f" ({run['ran']} code cells, {run['seconds']:.0f} s)" if run else ""),
                      json.dumps(run, ensure_ascii=False)[-1500:])

        # --- week 2: the instructor grades in the formgrader, through the hub -------------------
        with Stage("week 2: the formgrader (pages and API through the hub)"):
            def fg(method, path, **kw):
                return requests.request(method, instr.server_url("formgrader/" + path), headers=instr.auth,
                                        timeout=900, allow_redirects=False, **kw)

            def fg_json(method, path):
                r = fg(method, path)
                try:
                    return r.status_code, r.json()
                except ValueError:
                    return r.status_code, r.text[:500]

            r = instr.session.get(instr.server_url("formgrader/"), timeout=60)   # the browser's way
            check(r.status_code == 200 and r.url.rstrip("/").endswith("formgrader/manage_assignments")
                  and "Manage Assignments" in r.text,
                  "the instructor's browser session opens the formgrader through the hub"
                  f" (/user/{teacher}/formgrader/ leads to Manage Assignments)",
                  f"{r.status_code} at {r.url}")
            code_c = [fg_json("POST", f"api/assignment/{a}/collect") for a in WEEK2]
            check(all(c == 200 and isinstance(j, dict) and j.get("success") for c, j in code_c),
                  "the formgrader collects week 2 (api/assignment/<id>/collect)", str(code_c)[:1500])
            code, listed = fg_json("GET", "api/assignments")
            by_name = {x["name"]: x for x in listed} if code == 200 and isinstance(listed, list) else {}
            submitted = {a: sum(1 for r in roles if a in WORK[r]) for a in ASSIGNMENTS}
            check(sorted(by_name) == sorted(ASSIGNMENTS)
                  and all(by_name[a]["status"] == "released" for a in ASSIGNMENTS)
                  and {a: by_name[a]["num_submissions"] for a in ASSIGNMENTS} == submitted,
                  "formgrader api/assignments lists the four assignments, released, with the number of"
                  f" collected submissions of each ({submitted})",
                  f"{code} {[{k: x.get(k) for k in ('name', 'status', 'num_submissions')} for x in listed]}"
                  if by_name else f"{code} {str(listed)[:1500]}")
            wanted = {a: sorted(student[r] for r in roles if a in WORK[r]) for a in WEEK2}
            code, subs = fg_json("GET", "api/submissions/06-en")
            check(code == 200 and sorted(s["student"] for s in subs) == wanted["06-en"]
                  and not any(s["autograded"] for s in subs),
                  "formgrader api/submissions/06-en shows the collected submissions, not yet autograded",
                  f"{code} {str(subs)[:1500]}")
            graded = [fg_json("POST", f"api/submission/{a}/{s}/autograde") for a in WEEK2 for s in wanted[a]]
            check(all(c == 200 and isinstance(j, dict) and j.get("success") for c, j in graded),
                  "the formgrader autogrades each submission (api/submission/<id>/<student>/autograde)",
                  str(graded)[:2000])
            scores = {}
            for a in (*WEEK1, *WEEK2):
                code, subs = fg_json("GET", f"api/submissions/{a}")
                scores[a] = ({s["student"]: [s["score"], s["max_score"]] for s in subs}
                             if code == 200 else code)
            want = {a: {student[r]: [expected(r, a), max_score(a)] for r in roles if a in WORK[r]}
                    for a in ASSIGNMENTS}
            for a in WEEK2:
                listing = ", ".join(f"{r} {expected(r, a):g}/{max_score(a):g}" for r in roles if a in WORK[r])
                check(scores[a] == want[a], f"formgrader api/submissions/{a} has the scores ({listing})",
                      f"got {scores[a]}")
            check(all(scores[a] == want[a] for a in WEEK1), "week 1's scores stay as they were in the"
                  " formgrader (one assignment per notebook: week 2 changes no week-1 grade)",
                  str({a: scores[a] for a in WEEK1}))
            fb = [fg_json("POST", f"api/assignment/{a}/{step}") for a in WEEK2
                  for step in ("generate_feedback", "release_feedback")]
            check(all(c == 200 and isinstance(j, dict) and j.get("success") for c, j in fb),
                  "the formgrader generates and releases week 2's feedback"
                  " (api/assignment/<id>/generate_feedback, release_feedback)", str(fb)[:2000])

        # --- export, and every student's own feedback ---------------------------------------
        with Stage("export; students fetch their feedback"):
            out, err = instr.run(instructor_code(clone, """
                import subprocess
                r = subprocess.run(["nbgrader", "export", "--to=course/grades.csv"],
                                   capture_output=True, text=True, encoding="utf-8")
                assert r.returncode == 0, r.stdout + r.stderr
                print("RESULT " + json.dumps(open("course/grades.csv", encoding="utf-8").read()))
            """), timeout=300)
            grades = result_line(out, "RESULT")
            rows = list(csv.DictReader(io.StringIO(grades or "")))
            csv_scores = {(row["student_id"], row["assignment"]): float(row["score"]) for row in rows}
            want_csv = {(student[r], a): expected(r, a) if a in WORK[r] else 0.0
                        for r in roles for a in ASSIGNMENTS}
            check(grades is not None and len(rows) == len(want_csv) and csv_scores == want_csv,
                  "nbgrader export has one row per student and assignment, with the score (0 where nothing"
                  " was submitted)", str(csv_scores) + out[-1000:] + str(err))

            def fetch_feedback(role):
                who, found = learners[student[role]], {}
                for a in WORK[role]:
                    out, err = who.run(run_nbgrader(["fetch_feedback", a]) + textwrap.dedent(f"""
                        import glob
                        _files = glob.glob(os.path.expanduser("~/{a}/feedback/*/*.html"))
                        print("FEEDBACK " + json.dumps([open(_f, encoding="utf-8").read().split("(Score: ")[1]
                                                        .split(")")[0] for _f in _files]))
                    """).replace("import glob", "import glob, json"))
                    if err:
                        raise RuntimeError(f"{role} {a}: {err}\n{out[-1500:]}")
                    found[a] = result_line(out, "FEEDBACK")
                return found

            got = dict(zip(roles, parallel(fetch_feedback, roles), strict=True))
            for role in roles:
                want_fb = {a: [f"{expected(role, a)} / {max_score(a)}"] for a in WORK[role]}
                check(got[role] == want_fb, f"{role} fetches their own feedback, one page per assignment"
                      f" ({', '.join(f'{a}: {expected(role, a):g}/{max_score(a):g}' for a in WORK[role])})",
                      str(got[role])[-1500:])

        # --- the exchange: what it keeps from other students, and what it does not ----------
        with Stage("the exchange: what it keeps from other students"):
            out, err = sb.run(textwrap.dedent(f"""
                import os, glob
                for _d in ("inbound", "feedback"):
                    try:
                        os.listdir("{course_exchange}/" + _d)
                        print(_d, "listed")
                    except PermissionError:
                        print(_d, "denied")
                print("guess", glob.glob("{course_exchange}/inbound/{sa.name}+*"))
            """))
            check("inbound denied" in out and "feedback denied" in out and "guess []" in out,
                  "a student cannot list the exchange's inbound or feedback folders, nor find another's"
                  " submission by pattern", out + str(err))
            # The names are unguessable (timestamp + random string), but not protected: told a name,
            # anyone reads it. The guide says so; this keeps the guide true.
            a_sub = next(p for p in inbound.iterdir() if p.name.startswith(sa.name + "+01-en+"))
            out, err = sb.run(f"print(open({str(a_sub / notebook_of('01-en').name)!r}, encoding='utf-8')"
                              ".read()[:1])")
            check(out.strip() == "{", "documented limit: a student told the folder name of another's"
                  " submission can read it (files 0644 in a folder 0777)", out + str(err))
            # A submission made in another student's name: nbgrader records it under that name.
            out, err = sb.run(run_nbgrader(["submit", "01-zh", f"--student={sa.name}"]))
            check(err is None, "documented limit: a student can submit in another student's name"
                  " (nbgrader submit --student)", out[-1500:] + str(err))
            out, err = instr.run(instructor_code(clone, """
                print("RESULT " + json.dumps(ok(api.collect("01-zh"), "collect 01-zh")))
            """))
            log = result_line(out, "RESULT") or ""
            check(f"claims to be submitted by {sa.name} but is owned by {sb.name}" in log
                  and f"Collecting submission: {sa.name} 01-zh" in log,
                  "collect warns that the submission is owned by someone else (\"cheating attempt?\");"
                  " it still collects it", log[-1500:] + str(err))
    except BaseException as e:  # noqa: BLE001 (any failure, an interrupt too, is reported and cleaned up)
        check(False, f"the run stopped: {type(e).__name__}: {e}", traceback.format_exc()[-3000:])
        if hub is not None:
            print("--- hub log (last lines) ---\n" + hub.log_tail(), file=sys.stderr)
    finally:
        t0 = time.monotonic()
        for proc in children:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for learner in learners.values():
            learner.close()
        losses = [loss for learner in learners.values() for loss in learner.kernel_losses]
        if (losses or not all(ok for ok, _ in RESULTS)) and hub is not None:
            # A lost kernel is not a failure of the course (the code then ran in a new one, and its
            # checks held), but worth a look; so is what the servers logged of kernels on a failure.
            if losses:
                print("NOTE  kernels lost and replaced:\n      " + "\n      ".join(losses))
            print("      the servers' log on kernels:\n      " + "\n      ".join(hub.log_lines(KERNEL_LOG)))
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
        leftover = subprocess.run(["getent", "passwd"], capture_output=True, text=True,
                                  encoding="utf-8").stdout
        check(users.prefix not in leftover and not left, "clean-up: hub stopped, users and homes removed")
        STAGES.append(("clean-up", time.monotonic() - t0))

    load = os.getloadavg()
    print("stage times (s):")
    for name, seconds in STAGES:
        print(f"  {seconds:6.1f}  {name}")
    print(f"  {time.monotonic() - t_start:6.1f}  whole run (load average"
          f" {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, {os.cpu_count()} cores)")
    passed = sum(ok for ok, _ in RESULTS)
    failed = len(RESULTS) - passed
    print(f"{passed} passed, {failed} failed" + (f", {len(SKIPPED)} skipped" if SKIPPED else ""))
    return 1 if failed else 0


def requests_get(url, **kw):
    return requests.get(url, timeout=60, allow_redirects=False, **kw)


if __name__ == "__main__":
    sys.exit(main())
