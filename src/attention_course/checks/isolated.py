"""The grade of record: the check runs in the grader, the answer in a worker process of its own.

:func:`grade` re-checks one notebook. It loads each check in the grader's process and calls it with
a stand-in for the learner's function (:class:`RemoteAnswer`). Each call of the stand-in sends the
inputs to the worker, which runs the answer (:func:`~.watcher.call_answer`, watched for forbidden
functions) and sends back the result and the inputs as the call left them. Everything else happens
in the grader: the expected values, the comparison and its tolerances, the rule that inputs stay
unchanged, the hints, the loop rule (read from the submitted source). What crosses is plain data
(:mod:`.plain`), one framed message per request or reply, each reply carrying its request's
random id: a message written ahead of its request counts for nothing. (A reply the answer forges
while it runs is no more than a result it could have returned: it is compared like one.)

The worker (:func:`serve`, ``python -m attention_course.checks.isolated``):

- is a fresh interpreter for each notebook, in a new empty working directory, with its channel on
  standard input and output and no other descriptor from the grader;
- has at most :data:`MEMORY_LIMIT` bytes of address space on Linux (the limit is not enforced on
  macOS or Windows); on POSIX it may grow no file and has a CPU-time limit, and on Linux it dies
  with the grader;
- has :data:`CALL_SECONDS` for each call and :data:`NOTEBOOK_SECONDS` for all of a notebook's
  calls and set-ups together.

A worker that exits, stays silent or sends anything but a reply is stopped. The call then fails
with what happened (``"timed out"``, ``"exited"``, ``"returned something else"``), and so do the
later calls of the same check; the next check starts a new worker. A result that is not plain data
(``"returned something else"``) or a ``MemoryError`` (``"exceeded memory"``) fails the call and
leaves the worker running. The grader counts only results it has read and compared itself; the
checks are loaded before the learner's code runs.

Inputs that are not data (notebook 07's suspect functions) are made on both sides by the course's
own code: a function marked :func:`rebuildable` makes them, and they travel as the name of that
call.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import inspect
import io
import json
import os
import queue
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import weakref

from . import forbidden as registry
from .language import CheckFailed
from .loops import functions_in_source
from .plain import MAX_BYTES, NotPlain, decode, encode
from .watcher import AnswerElsewhere, Outcome, call_answer

__all__ = ["CALL_SECONDS", "MEMORY_LIMIT", "NOTEBOOK_SECONDS", "STATUSES", "RemoteAnswer", "Worker",
           "grade", "rebuildable", "serve"]

#: Seconds one call of an answer may take in the worker.
CALL_SECONDS = 60.0
#: Seconds all of one notebook's calls (and the worker's set-ups) may take together.
NOTEBOOK_SECONDS = 300.0
#: Bytes of address space a worker may use (enforced on Linux only).
MEMORY_LIMIT = 2 * 2**30
#: What can become of a check in the grade of record, besides "passed" and "failed".
STATUSES = ("not defined", "not answered", "timed out", "exceeded memory", "exited",
            "returned something else")

_LENGTH = 8
_OUTCOMES = {"ok", "not implemented", "raised", "forbidden", "forbidden itself", "returned something else",
             "exceeded memory"}


# ---------------------------------------------------------------------------------------------
# Inputs that are not data: made on both sides by the same call
# ---------------------------------------------------------------------------------------------

_RECIPES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()     # object made -> its recipe


def rebuildable(factory):
    """Mark a function of the course's checks whose results a worker can make again.

    In the grader, each object the marked function returns is remembered with its recipe,
    ``[module, name, arguments, keyword arguments]`` (JSON: strings, numbers, None); an object
    equal to one made (a copy of a frozen dataclass) counts as made too. Before a call that hands
    it to the answer, the grader sends the recipe in a request of its own; the worker makes the
    object with the unmarked function, keeps it under a random name for that call only and
    forgets the recipe. The call then refers to it by that name.
    """
    @functools.wraps(factory)
    def make(*args, **kwargs):
        made = factory(*args, **kwargs)
        _RECIPES[made] = json.dumps([factory.__module__, factory.__name__, list(args), kwargs])
        return made

    make.__rebuildable__ = True
    return make


def _recipe(obj) -> str | None:
    try:
        return _RECIPES.get(obj)
    except TypeError:                       # not hashable, or no weak reference to it
        return None


def _make(recipe: str):
    """The object a recipe describes, made by the unmarked function (so not remembered here)."""
    module, name, args, kwargs = json.loads(recipe)
    if not (isinstance(module, str) and module.startswith(f"{__package__}.") and isinstance(args, list)
            and isinstance(kwargs, dict)):
        raise ValueError(f"{recipe:.80} is not a recipe of the course's checks")
    factory = getattr(importlib.import_module(module), name)
    if getattr(factory, "__rebuildable__", False) is not True:
        raise ValueError(f"{module}.{name} makes nothing for a worker")
    return factory.__wrapped__(*args, **kwargs)


def _made_in(value, found: dict) -> dict:
    """``{id: object}`` of the made objects (:func:`rebuildable`) inside ``value``'s containers."""
    if isinstance(value, (list, tuple, set, frozenset)):
        for v in value:
            _made_in(v, found)
    elif isinstance(value, dict):
        for v in value.values():
            _made_in(v, found)
    elif _recipe(value) is not None:
        found[id(value)] = value
    return found


# ---------------------------------------------------------------------------------------------
# The channel: one message a frame, its length first
# ---------------------------------------------------------------------------------------------

def _write(fd: int, message: bytes) -> None:
    view = memoryview(len(message).to_bytes(_LENGTH, "little") + message)
    while view:
        view = view[os.write(fd, view):]


def _write_or_note(fd: int, message: bytes, failed: list) -> None:
    try:
        _write(fd, message)
    except OSError as exc:
        failed.append(exc)


def _read_exactly(fd: int, n: int) -> bytes | None:
    parts, left = [], n
    while left:
        part = os.read(fd, min(left, 1 << 20))
        if not part:
            return None
        parts.append(part)
        left -= len(part)
    return b"".join(parts)


def _read(fd: int) -> bytes | None:
    """The next frame; None at the end of the stream; ``ValueError`` for a length over the limit."""
    head = _read_exactly(fd, _LENGTH)
    if head is None:
        return None
    size = int.from_bytes(head, "little")
    if size > MAX_BYTES:
        raise ValueError(f"a frame of {size:,} bytes is over the {MAX_BYTES:,} allowed")
    return _read_exactly(fd, size)


def _reader(stream, replies: queue.Queue) -> None:
    """The grader's thread that reads the worker's frames into ``replies``: ("frame", bytes),
    then ("end", None) or ("bad", why)."""
    fd = stream.fileno()
    try:
        while True:
            frame = _read(fd)
            if frame is None:
                replies.put(("end", None))
                return
            replies.put(("frame", frame))
    except (OSError, ValueError) as exc:
        replies.put(("bad", str(exc)))


# ---------------------------------------------------------------------------------------------
# The grader's side
# ---------------------------------------------------------------------------------------------

class Worker:
    """The grader's handle on the worker of one notebook: started when first needed, and again
    after a call that stopped it (timed out, exited, or a message that was no reply).

    ``job`` holds ``lang``, ``folder`` (the returned notebook's folder), ``import_cell`` (the
    course's), ``code`` (the statements of the learner's that run, as source) and ``answers`` (the
    names the checks call). :attr:`ready` is what the last set-up reported (``answers``,
    ``errors``, ``missing_globals``); :attr:`flags` what the worker saw while the checks ran.
    """

    def __init__(self, job: dict, *, python: str = sys.executable, call_seconds: float = CALL_SECONDS,
                 notebook_seconds: float = NOTEBOOK_SECONDS, memory_limit: int = MEMORY_LIMIT):
        self.job, self.python = job, python
        self.call_seconds, self.notebook_seconds = call_seconds, notebook_seconds
        self.memory_limit = memory_limit
        self.spent = 0.0
        self.process: subprocess.Popen | None = None
        self.home: str | None = None
        self.ready: dict | None = None
        self.broken: Outcome | None = None        # a set-up that failed: every later call fails alike
        self.flags: list[dict] = []
        self.starts = 0

    # -- starting and stopping

    def start(self) -> Outcome | None:
        """Start a worker and set it up; the :class:`Outcome` of a set-up that failed, else None."""
        self.stop()
        self.home = tempfile.mkdtemp(prefix="answer-", dir=self.job.get("homes"))
        env = dict(os.environ, MPLBACKEND="Agg", PYTHONHASHSEED="0", OPENBLAS_NUM_THREADS="1",
                   OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONIOENCODING="utf-8")
        group = ({"start_new_session": True} if os.name == "posix"
                 else {"creationflags": getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0)})
        self.process = subprocess.Popen([self.python, "-m", __name__, str(int(self.memory_limit)),
                                         str(int(self.notebook_seconds) + 60)],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL, cwd=self.home, env=env, close_fds=True,
                                        **group)
        self.replies: queue.Queue = queue.Queue()
        threading.Thread(target=_reader, args=(self.process.stdout, self.replies), daemon=True).start()
        self.starts += 1
        reply = self._exchange(dict(op="setup", **self.job))
        if isinstance(reply, Outcome):
            self.broken = reply
            return reply
        self.ready = {"answers": _answers(reply.get("answers")),
                      "errors": _strings(reply.get("errors")),
                      "missing_globals": {str(k): _strings(v) for k, v in missing.items()}
                      if type(missing := reply.get("missing_globals")) is dict else {}}
        return None

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is not None:
            if process.poll() is None:
                try:
                    if os.name == "posix":
                        os.killpg(process.pid, 9)            # the worker and whatever it started
                    else:
                        process.kill()
                except (ProcessLookupError, PermissionError, OSError):
                    process.kill()
            for stream in (process.stdin, process.stdout):
                with contextlib.suppress(OSError):
                    stream.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=10)
        if self.home:
            shutil.rmtree(self.home, ignore_errors=True)
            self.home = None

    # -- one request

    def _exchange(self, request: dict, refer=None, resolve=None) -> dict | Outcome:
        """Send ``request`` and wait for the reply with its id, within the call's and the
        notebook's time; an :class:`Outcome` saying what happened when none comes."""
        seconds = min(self.call_seconds, self.notebook_seconds - self.spent)
        if seconds <= 0:
            self.stop()
            return Outcome("timed out", detail=f"{self.notebook_seconds:g}")
        request["id"] = ident = secrets.token_hex(16)
        start = time.monotonic()
        message = encode(request, refer=refer)
        failed: list = []
        writer = threading.Thread(target=_write_or_note, args=(self.process.stdin.fileno(), message, failed),
                                  daemon=True)
        writer.start()
        writer.join(seconds)
        if writer.is_alive():              # a worker that does not read its requests
            self.spent += time.monotonic() - start
            self.stop()
            return Outcome("timed out", detail=f"{seconds:g}")
        if failed:
            return self._ended(start)
        while True:
            left = start + seconds - time.monotonic()
            try:
                kind, data = self.replies.get(timeout=max(left, 0.0))
            except queue.Empty:
                self.spent += time.monotonic() - start
                self.stop()
                return Outcome("timed out", detail=f"{seconds:g}")
            if kind == "end":
                return self._ended(start)
            try:
                if kind == "bad":
                    raise ValueError(data)
                reply = decode(data, resolve=resolve)
                ours = type(reply) is dict and type(reply.get("id")) is str and reply["id"] == ident
            except Exception:               # noqa: BLE001 - whatever the worker wrote, it is not a reply
                self.spent += time.monotonic() - start
                self.stop()
                return Outcome("returned something else", detail="a message that is not plain data")
            if ours:
                self.spent += time.monotonic() - start
                self.flags += [f for f in _flags(reply.get("flags")) if f not in self.flags]
                return reply
            # anything else (a frame written ahead of its request, say) is not this reply

    def _ended(self, start: float) -> Outcome:
        self.spent += time.monotonic() - start
        process = self.process
        code = None
        if process is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                code = process.wait(timeout=5)
        self.stop()
        how = ("exit code unknown" if code is None
               else f"signal {-code}" if code < 0 else f"exit code {code}")
        return Outcome("exited", detail=how)

    def fresh_start(self) -> None:
        """Before a check's first call: a worker an earlier check's answer left dead or silent is
        replaced, so that its death is not charged to the next check (the ping's time counts in
        the notebook's)."""
        if self.broken is not None or self.process is None:
            return
        if self.process.poll() is not None or isinstance(self._exchange({"op": "ping"}), Outcome):
            self.stop()

    def call(self, answer: str, args: tuple, kwargs: dict, forbidden_names: list, measure: bool) -> Outcome:
        """Run ``answer(*args, **kwargs)`` in the worker: an :class:`Outcome` whose result and
        inputs are what came back, decoded here."""
        if self.broken is not None:
            return self.broken
        if self.process is None:
            failed = self.start()
            if failed is not None:
                return failed
        made = _made_in((args, kwargs), {})
        names = {i: secrets.token_hex(8) for i in made}         # a random name for each, this call only
        if made:
            ready = self._exchange({"op": "make", "made": {names[i]: _recipe(made[i]) for i in made}})
            if isinstance(ready, Outcome):
                return ready
        back = {names[i]: made[i] for i in made}
        reply = self._exchange(dict(op="call", answer=answer, args=tuple(args), kwargs=dict(kwargs),
                                    forbidden=list(forbidden_names), measure=bool(measure)),
                               refer=lambda obj: names.get(id(obj)), resolve=back.__getitem__)
        if isinstance(reply, Outcome):
            return reply
        status = reply.get("status")
        after = reply.get("inputs_after")
        if type(status) is not str or status not in _OUTCOMES:
            return Outcome("returned something else", detail="a reply of no known kind")
        outcome = Outcome(status, detail=_text(reply.get("detail")), message=_text(reply.get("message")))
        if status == "ok":
            if not (type(after) is tuple and len(after) == 2 and type(after[0]) is tuple
                    and type(after[1]) is dict):
                return Outcome("returned something else", detail="a reply without the inputs")
            outcome.result, outcome.inputs_after = reply.get("result"), after
        peak = reply.get("peak")
        outcome.peak = peak if type(peak) is int else None
        if status == "exceeded memory":
            outcome.detail = f"{self.memory_limit / 2**30:g} GiB"
        return outcome


def _text(value, limit: int = 2000) -> str:
    return value[:limit] if isinstance(value, str) else ""


def _strings(value) -> list[str]:
    return [v[:500] for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _flags(value) -> list[dict]:
    if not isinstance(value, list):
        return []
    return [{"pattern": _text(f.get("pattern"), 100), "code": _text(f.get("code"), 300)}
            for f in value if type(f) is dict]


def _answers(value) -> dict:
    """``{name: {"callable": bool, "type": str, "parameters": [str]}}`` from the set-up's reply."""
    out = {}
    for name, about in (value or {}).items() if type(value) is dict else ():
        if type(name) is str and type(about) is dict:
            out[name] = {"callable": about.get("callable") is True, "type": _text(about.get("type"), 80),
                         "parameters": [p for p in _strings(about.get("parameters")) if p.isidentifier()]}
    return out


class RemoteAnswer(AnswerElsewhere):
    """The stand-in a check gets for the learner's function ``name`` in the grade of record.

    Each call runs in the worker (:meth:`Worker.call`). ``status`` keeps the first of
    :data:`STATUSES` that a call ended with; after a call that stopped the worker, the check's
    later calls fail the same way at once. ``forbidden`` collects what the check forbade, by name
    (:func:`~.forbidden.names_of`).
    """

    def __init__(self, worker: Worker, name: str, parameters: list[str], source: str):
        self.worker, self.name, self.source = worker, name, source
        self.__signature__ = inspect.Signature(
            [inspect.Parameter(p, inspect.Parameter.POSITIONAL_OR_KEYWORD) for p in parameters])
        self.status: str | None = None
        self.stopped: Outcome | None = None
        self.forbidden: list[str] = []
        self.called = False

    def call(self, args, kwargs, forbidden, measure) -> Outcome:
        if self.stopped is not None:
            return self.stopped
        if not self.called:
            self.called = True
            self.worker.fresh_start()
        names = registry.names_of(forbidden)
        self.forbidden += [n for n in names if n not in self.forbidden]
        outcome = self.worker.call(self.name, args, kwargs, names, measure)
        if outcome.status in STATUSES and self.status is None:
            self.status = outcome.status
        if outcome.status in STATUSES and self.worker.process is None:
            self.stopped = outcome              # the worker was stopped: the check's later calls fail alike
        return outcome

    def definitions(self) -> list:
        return functions_in_source(self.source, self.name)

    def __repr__(self) -> str:
        return f"<the answer {self.name}>"


def _stand_in(type_name: str):
    """An object of a class named like the learner's non-callable answer (for the check's message)."""
    name = type_name if type_name.isidentifier() else "object"
    return type(name, (), {})()


def grade(job: dict, *, python: str = sys.executable, call_seconds: float = CALL_SECONDS,
          notebook_seconds: float = NOTEBOOK_SECONDS, memory_limit: int = MEMORY_LIMIT) -> dict:
    """Re-check one notebook: every check of ``job["checks"]`` in this process, the answers in a
    worker (:class:`Worker`; ``job`` as there, with ``checks``: ``grade_id``, ``module``,
    ``function``, ``answer``, ``points``).

    Returns ``{"checks": {grade_id: {"passed", "points", "message", "status"}}, "errors",
    "missing_globals", "flags", "forbidden": {answer: [names]}, "starts"}``. ``status`` is
    "passed", "failed" or one of :data:`STATUSES`.
    """
    answers = sorted({c["answer"] for c in job["checks"]})
    # every check is loaded before any of the learner's code runs anywhere
    checks = [getattr(importlib.import_module(f"{__package__}.{c['module']}"), c["function"])
              for c in job["checks"]]
    worker = Worker(dict(lang=job["lang"], folder=job["folder"], import_cell=job["import_cell"],
                         code=list(job["code"]), answers=answers, homes=job.get("homes")),
                    python=python, call_seconds=call_seconds, notebook_seconds=notebook_seconds,
                    memory_limit=memory_limit)
    source = "\n".join(job["code"])
    results: dict = {"checks": {}, "errors": [], "missing_globals": {}, "flags": [], "forbidden": {}}
    try:
        failed = worker.start()
        ready = worker.ready or {"answers": {}, "errors": [], "missing_globals": {}}
        results["errors"], results["missing_globals"] = ready["errors"], ready["missing_globals"]
        for c, check in zip(job["checks"], checks, strict=True):
            entry = {"passed": False, "points": c["points"], "message": "", "status": "failed"}
            about = ready["answers"].get(c["answer"])
            if failed is not None:
                entry["status"] = failed.status
                entry["message"] = f"the worker could not be set up: {failed.status} ({failed.detail})"
            elif about is None:
                entry["status"], entry["message"] = "not defined", f"{c['answer']} is not defined"
            else:
                learner = (RemoteAnswer(worker, c["answer"], about["parameters"], source)
                           if about["callable"] else _stand_in(about["type"]))
                try:
                    with contextlib.redirect_stdout(io.StringIO()):
                        check(learner, lang=job["lang"])
                    entry["passed"], entry["status"] = True, "passed"
                except NotImplementedError:
                    entry["status"], entry["message"] = "not answered", "not answered (NotImplementedError)"
                except CheckFailed as exc:
                    entry["message"] = str(exc)
                    entry["status"] = getattr(learner, "status", None) or "failed"
                except Exception as exc:    # noqa: BLE001 - a reply the check could not judge
                    entry["message"] = f"the check could not judge the reply: {type(exc).__name__}: {exc}"
                    entry["status"] = getattr(learner, "status", None) or "returned something else"
                if isinstance(learner, RemoteAnswer):
                    results["forbidden"].setdefault(c["answer"], [])
                    results["forbidden"][c["answer"]] += [
                        n for n in learner.forbidden if n not in results["forbidden"][c["answer"]]]
            results["checks"][c["grade_id"]] = entry
    finally:
        worker.stop()
    results["flags"], results["starts"] = worker.flags, worker.starts
    return results


# ---------------------------------------------------------------------------------------------
# The worker's side
# ---------------------------------------------------------------------------------------------

def _set_up(job: dict, seen: list) -> tuple[dict, dict]:
    """Run the course's import cell and the learner's kept code; ``(namespace, reply)``."""
    import linecache

    namespace: dict = {"__name__": "__main__"}
    errors = []
    try:
        exec(compile(job["import_cell"], "<import cell>", "exec"), namespace)
    except BaseException as exc:               # noqa: BLE001 - reported; the checks still run
        errors.append(f"the course's import cell raised {type(exc).__name__}: {_safe_str(exc)}")
    course_names = set(namespace)
    for i, src in enumerate(job["code"]):
        filename = f"<answer {i}>"
        # the source stays readable, as a notebook cell's is
        linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
        try:
            exec(compile(src, filename, "exec"), namespace)
        except BaseException as exc:           # noqa: BLE001
            first = src.splitlines()[0] if src else ""
            errors.append(f"{first[:60]}: {type(exc).__name__}: {_safe_str(exc)}")
    answers = {}
    for name in job["answers"]:
        if name in namespace:
            fn = namespace[name]
            try:
                parameters = list(inspect.signature(fn).parameters) if callable(fn) else []
            except (TypeError, ValueError):
                parameters = []
            answers[name] = {"callable": callable(fn), "type": type(fn).__name__, "parameters": parameters}
    reply = {"status": "ready", "answers": answers, "errors": errors,
             "missing_globals": _missing_globals(namespace, course_names), "flags": list(seen)}
    return namespace, reply


def _missing_globals(namespace: dict, course_names: set) -> dict[str, list[str]]:
    """Functions the learner defined that read a global name nobody provides, by function."""
    import builtins
    import dis
    import types

    missing = {}
    for name, obj in list(namespace.items()):
        if name in course_names or not isinstance(obj, types.FunctionType):
            continue
        if not obj.__code__.co_filename.startswith("<answer"):
            continue
        needed, stack = set(), [obj.__code__]
        while stack:
            code = stack.pop()
            needed |= {ins.argval for ins in dis.get_instructions(code)
                       if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME") and isinstance(ins.argval, str)}
            stack += [c for c in code.co_consts if isinstance(c, types.CodeType)]
        absent = sorted(n for n in needed if n not in obj.__globals__ and not hasattr(builtins, n))
        if absent:
            missing[name] = absent
    return missing


def _safe_str(exc: BaseException) -> str:
    try:
        return str(exc)[:2000]
    except BaseException:                      # noqa: BLE001 - a __str__ that raises
        return "(its message could not be read)"


def _audit(folder: str, seen: list, watching: list):
    """An audit hook that notes, while ``watching[0]``, files opened outside the allowed folders
    and threads or processes started."""
    allowed = [os.path.realpath(p) for p in (folder, os.getcwd(), sys.prefix, sys.base_prefix, os.devnull,
                                            tempfile.gettempdir(), *[p for p in sys.path if p])]
    allowed += ["/dev/", "/proc/", "/sys/"]

    def inside(path: str) -> bool:
        return any(path == a or path.startswith(a.rstrip(os.sep) + os.sep)
                   or (a.endswith("/") and path.startswith(a)) for a in allowed)

    def hook(event, args):
        if not watching[0]:
            return
        entry = None
        if event == "open" and args and isinstance(args[0], (str, bytes, os.PathLike)):
            path = os.path.realpath(os.fsdecode(args[0]))
            if not inside(path):
                entry = {"pattern": "file outside the folder", "code": f"opened {path} while the checks ran"}
        elif event in ("os.system", "subprocess.Popen", "os.fork", "os.exec", "os.posix_spawn", "os.spawn",
                       "_thread.start_new_thread"):
            entry = {"pattern": "thread or process", "code": f"{event} while the checks ran"}
        if entry is not None and entry not in seen:
            seen.append(entry)
    return hook


def _reply_to_call(request: dict, namespace: dict, seen: list, watching: list, made: dict) -> bytes:
    ident = request["id"]
    fn = namespace.get(request["answer"])
    args, kwargs = tuple(request["args"]), dict(request["kwargs"])
    forbidden, measure = registry.from_names(request["forbidden"]), bool(request["measure"])
    request.clear()                 # the request's other parts are not left for the answer to read
    watching[0] = True
    try:
        outcome = call_answer(fn, args, kwargs, forbidden, measure=measure, catch=BaseException)
    finally:
        watching[0] = False
    status, detail = outcome.status, outcome.detail
    if status == "raised" and detail == "MemoryError":
        status = "exceeded memory"
    reply = {"id": ident, "status": status, "detail": detail, "message": outcome.message,
             "result": outcome.result, "peak": outcome.peak, "flags": list(seen),
             "inputs_after": outcome.inputs_after if status == "ok" else None}
    pairs = list(made.items())
    made.clear()                    # made for this call only

    def refer(obj):                 # the call worked on copies: an equal object of the same type
        return next((name for name, o in pairs if o is obj or (type(o) is type(obj) and o == obj)), None)
    try:
        return encode(reply, refer=refer)
    except NotPlain as exc:          # an input the call changed into something that is not data
        return encode({"id": ident, "status": "returned something else", "flags": list(seen),
                       "detail": f"it changed an input: {exc}"})


def _limit(memory_limit: int, cpu_seconds: int) -> None:
    """The worker's limits, set before any of the learner's code runs (POSIX; the address space on
    Linux only): no file may grow (an answer writes nothing, and cannot rewrite the course's
    files), at most ``cpu_seconds`` of CPU, and on Linux the worker dies with the grader."""
    if os.name != "posix":
        return
    import resource
    import signal

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)        # a write that would grow a file fails instead
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds))
    if sys.platform.startswith("linux"):
        if memory_limit > 0:
            resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))
        with contextlib.suppress(OSError, AttributeError):
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)   # PR_SET_PDEATHSIG


def serve(memory_limit: int = MEMORY_LIMIT, cpu_seconds: int = int(NOTEBOOK_SECONDS) + 60) -> None:
    """The worker's loop: the set-up request, then one reply per request (``ping``, ``make``,
    ``call``), until the end of the channel. Standard input and output become the channel's private
    descriptors and point to nowhere, so the learner's ``print`` goes nowhere (the learner's code
    can still find the channel: what it writes there is judged like a result, above)."""
    channel_in, channel_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)
    sys.stdin = open(os.devnull, encoding="utf-8")                      # noqa: SIM115 - for the process
    sys.stdout = sys.stderr = open(os.devnull, "w", encoding="utf-8")   # noqa: SIM115
    tempfile.gettempdir()           # found (by writing a file) before no file may grow
    _limit(memory_limit, cpu_seconds)
    frame = _read(channel_in)
    if frame is None:
        return
    job = decode(frame)
    seen: list = []
    watching = [False]
    sys.addaudithook(_audit(job["folder"], seen, watching))
    namespace, reply = _set_up(job, seen)
    reply["id"] = job["id"]
    _write(channel_out, encode(reply))
    del job, frame, reply
    made: dict = {}                 # random name -> object made for the next call
    while True:
        frame = _read(channel_in)
        if frame is None:
            return
        request = decode(frame, resolve=made.__getitem__)
        del frame
        if request.get("op") == "ping":
            _write(channel_out, encode({"id": request["id"], "status": "ready"}))
        elif request.get("op") == "make":
            made.update((name, _make(recipe)) for name, recipe in request["made"].items())
            _write(channel_out, encode({"id": request["id"], "status": "ready"}))
        else:
            _write(channel_out, _reply_to_call(request, namespace, seen, watching, made))
        request = None


if __name__ == "__main__":
    # the module under its own name, so that what the checks mark rebuildable and what the worker
    # makes share one registry
    from attention_course.checks.isolated import serve as _serve

    _serve(*(int(a) for a in sys.argv[1:3]))
