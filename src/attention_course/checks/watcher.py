"""The call watcher: runs the learner's function and fails it when it calls a forbidden function.

While the learner's function runs (:func:`run_learner`, :func:`watch_calls`), a profile function
watches which functions it calls, so an exercise can forbid the library function it asks the
learner to rebuild whatever name it is bound to: Python functions by their code object, C functions
by identity, NumPy ufuncs (called without a profile event) by the names the learner's own bytecode
loads, resolved in its frame. :func:`peak_memory` measures what a call allocates.

One call of an answer is :func:`call_answer`: on copies of the inputs, watched, and summed up in an
:class:`Outcome` (its result, or why there is none, and the inputs as the call left them). The
grade of record makes that call in another process: its answers are :class:`AnswerElsewhere`
objects, which :func:`run_learner` hands the call to (:mod:`.isolated`). Either way the same rules
judge the outcome here: the result must be plain data (:mod:`.plain`) and the inputs unchanged.
"""

from __future__ import annotations

import contextlib
import copy
import dis
import functools
import inspect
import itertools
import os
import sys
import sysconfig
import threading
import types
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .comparison import same_value
from .language import CheckFailed, fail, get_language, pick, say
from .plain import NotPlain, require_plain

__all__ = ["AnswerElsewhere", "Outcome", "call_answer", "changed_argument", "is_learner_code",
           "peak_memory", "run_learner", "unwrap_chain", "watch_calls"]


def unwrap_chain(obj, limit: int = 20) -> list:
    """``obj`` and everything it wraps: partial.func, __wrapped__, a bound method's function.

    Only attributes an object really holds are followed (its ``__dict__``), never computed ones:
    this runs on every call the profiler sees, and must neither be slow nor run learner code.
    """
    chain, seen = [], set()
    while obj is not None and id(obj) not in seen and len(chain) < limit:
        chain.append(obj)
        seen.add(id(obj))
        if isinstance(obj, functools.partial):
            obj = obj.func
        elif isinstance(obj, (types.MethodType, staticmethod, classmethod)):
            obj = obj.__func__
        else:
            try:
                namespace = object.__getattribute__(obj, "__dict__")
            except AttributeError:
                break
            obj = namespace.get("__wrapped__") if isinstance(namespace, dict) else None
    return chain


def _display(obj) -> str:
    name = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None) or repr(obj)
    module = getattr(obj, "__module__", None) or ""
    if isinstance(obj, np.ufunc) or module.split(".")[0] == "numpy":
        prefix = module.replace("numpy", "np", 1) if module.startswith("numpy.linalg") else "np"
        return f"{prefix}.{getattr(obj, '__name__', name)}"
    return str(name)


class _Forbidden:
    """What to watch for: code objects of Python functions, identities of the other callables."""

    def __init__(self, forbidden: Iterable):
        self.codes: dict = {}      # code object -> shown name
        self.objects: dict = {}    # id(callable) -> (callable, shown name)
        self.silent: dict = {}     # the same, for callables whose calls make no profile event
        self.method_names: set = set()   # names of forbidden methods of C types (ndarray.argsort)
        for f in forbidden:
            if isinstance(f, (types.MethodDescriptorType, types.WrapperDescriptorType)):
                self.method_names.add(f.__name__)
            shown = _display(f)
            chain = unwrap_chain(f)
            codes = []
            for obj in chain:
                self.objects[id(obj)] = (obj, shown)
                codes.append(getattr(obj, "__code__", None))
                if isinstance(obj, type):
                    codes += [getattr(obj.__dict__.get(attr), "__code__", None)
                              for attr in ("__init__", "__new__", "__call__", "forward")]
            codes = [c for c in codes if isinstance(c, types.CodeType)]
            self.codes.update((c, shown) for c in codes)
            if not codes:
                # a ufunc or a C function: only a reference in the learner's code can show it
                self.silent.update((id(obj), (obj, shown)) for obj in chain)

    def __bool__(self):
        return bool(self.objects)

    def which(self, obj, silent_only: bool = False) -> str | None:
        """The shown name if ``obj`` is, or wraps, a forbidden callable."""
        table = self.silent if silent_only else self.objects
        for o in unwrap_chain(obj):
            hit = table.get(id(o))
            if hit is not None and hit[0] is o:
                return hit[1]
        return None


def _library_dirs() -> tuple[str, ...]:
    dirs = {os.path.dirname(os.path.dirname(os.path.abspath(__file__)))}  # the attention_course package
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            dirs.add(os.path.abspath(path))
    dirs.add(os.path.dirname(os.path.dirname(os.path.abspath(np.__file__))))
    return tuple(d + os.sep for d in dirs)


# a fresh copy (fresh_copy) takes the directories from the module already loaded
_LIBRARY_DIRS = getattr(sys.modules.get(__name__), "_LIBRARY_DIRS", None) or _library_dirs()


@functools.lru_cache(maxsize=4096)
def is_learner_code(filename: str) -> bool:
    """Code written by the learner (a notebook cell, a test, a script), not by a library."""
    if filename.startswith("<frozen"):
        return False
    return not os.path.abspath(filename).startswith(_LIBRARY_DIRS) if filename[:1] != "<" else True


# Opcodes that push a name's value, by where the name is looked up, on Python 3.10 to 3.13:
# 3.12 adds LOAD_FAST_CHECK (a local that may be unbound, e.g. bound in a loop or a branch),
# LOAD_FAST_AND_CLEAR (inlined comprehensions) and LOAD_FROM_DICT_OR_* (class bodies) and drops
# LOAD_METHOD and LOAD_CLASSDEREF; 3.13 fuses two loads into LOAD_FAST_LOAD_FAST and a store and a
# load into STORE_FAST_LOAD_FAST, whose argval is a pair of names.
_LOCAL_LOADS = {"LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_FAST_AND_CLEAR", "LOAD_DEREF", "LOAD_CLASSDEREF",
                "LOAD_CLOSURE", "LOAD_FROM_DICT_OR_DEREF"}
_GLOBAL_LOADS = {"LOAD_GLOBAL", "LOAD_NAME", "LOAD_FROM_DICT_OR_GLOBALS"}
_LOADS = _LOCAL_LOADS | _GLOBAL_LOADS
_ATTRS = {"LOAD_ATTR", "LOAD_METHOD"}


def _loaded_names(ins) -> list[tuple[str, str]]:
    """``(kind, name)`` for each name the instruction pushes, kind ``"local"`` or ``"global"``."""
    if ins.opname in _LOADS and isinstance(ins.argval, str):
        return [("local" if ins.opname in _LOCAL_LOADS else "global", ins.argval)]
    if ins.opname == "LOAD_FAST_LOAD_FAST" and isinstance(ins.argval, tuple):
        return [("local", n) for n in ins.argval if isinstance(n, str)]
    if ins.opname == "STORE_FAST_LOAD_FAST" and isinstance(ins.argval, tuple) and len(ins.argval) == 2:
        return [("local", ins.argval[1])] if isinstance(ins.argval[1], str) else []
    return []


@functools.lru_cache(maxsize=4096)
def _name_chains(code: types.CodeType) -> tuple:
    """Dotted names the code loads, e.g. ``("global", ("np", "exp"))``, from its bytecode."""
    chains, current = [], None
    for ins in dis.get_instructions(code):
        loaded = _loaded_names(ins)
        if loaded:
            if current:
                chains.append((current[0], tuple(current[1])))
            # of two fused loads only the last can be followed by an attribute
            chains.extend((kind, (name,)) for kind, name in loaded[:-1])
            current = (loaded[-1][0], [loaded[-1][1]])
        elif ins.opname in _ATTRS and current is not None and isinstance(ins.argval, str):
            current[1].append(ins.argval)
        else:
            if current:
                chains.append((current[0], tuple(current[1])))
            current = None
    if current:
        chains.append((current[0], tuple(current[1])))
    return tuple(chains)


_MISSING = object()


def _resolve(frame, op: str, names: tuple):
    """The objects a chain of names reaches, following attributes of modules and classes only."""
    first = names[0]
    if op == "local":
        obj = frame.f_locals.get(first, _MISSING)
    else:
        obj = frame.f_globals.get(first, _MISSING)
        if obj is _MISSING:
            builtins = frame.f_builtins
            obj = builtins.get(first, _MISSING) if isinstance(builtins, dict) else _MISSING
    found = []
    if obj is _MISSING:
        return found
    found.append(obj)
    for attr in names[1:]:
        if not isinstance(obj, (types.ModuleType, type, np.ufunc)):
            break
        try:
            obj = inspect.getattr_static(obj, attr)
        except AttributeError:
            break
        if isinstance(obj, (staticmethod, classmethod)):
            obj = obj.__func__
        found.append(obj)
    return found


class _Watcher:
    """The profile function: the first forbidden function reached while it is installed."""

    def __init__(self, forbidden: _Forbidden):
        self.forbidden = forbidden
        self.hit: str | None = None
        self.done = False

    def __call__(self, frame, event, arg):
        if self.hit is not None or self.done:
            return
        if event == "call":
            code = frame.f_code
            shown = self.forbidden.codes.get(code)
            if shown is not None:
                self.hit = shown
            elif self.forbidden.silent and is_learner_code(code.co_filename):
                # NumPy's ufuncs (np.exp, np.matmul ...) and C functions behind NumPy's dispatch
                # (np.dot ...) are called without a profile event, so the learner's own code is
                # searched for a reference to them, resolved to objects, whatever the name.
                self._scan(frame, code, ("local", "global"))
        elif event == "return" and self.forbidden.silent and is_learner_code(frame.f_code.co_filename):
            # the locals bound while the function ran (at its call only the arguments were)
            self._scan(frame, frame.f_code, ("local",))
        elif event == "c_call":
            hit = self.forbidden.objects.get(id(arg))
            shown = hit[1] if hit is not None and hit[0] is arg else None
            if shown is None:
                owner = getattr(arg, "__self__", None)
                if isinstance(owner, np.ufunc):            # np.add.reduce when np.add is forbidden
                    shown = self.forbidden.which(owner)
                elif (owner is not None and not isinstance(owner, types.ModuleType)
                      and getattr(arg, "__name__", None) in self.forbidden.method_names):
                    # a method of a C type, e.g. x.argsort when np.ndarray.argsort is forbidden
                    method = inspect.getattr_static(type(owner), arg.__name__, None)
                    shown = self.forbidden.which(method) if method is not None else None
            if shown is not None:
                self.hit = shown


    def _scan(self, frame, code, kinds) -> None:
        for op, names in _name_chains(code):
            if op not in kinds:
                continue
            for obj in _resolve(frame, op, names):
                # a tuple, list or dict of functions counts with its items (for f in (np.exp,) ...)
                items = (obj.values() if isinstance(obj, dict) else obj
                         if isinstance(obj, (tuple, list, set, frozenset)) else ())
                for candidate in (obj, *itertools.islice(items, 64)):
                    shown = self.forbidden.which(candidate, silent_only=True)
                    if shown is not None:
                        self.hit = shown
                        return


@contextlib.contextmanager
def _watching(forbidden: _Forbidden):
    """Install the watcher on this thread, on threads started in the block and (Python 3.12+) on
    the threads already running; put the previous profilers back afterwards."""
    watcher = _Watcher(forbidden)
    if not forbidden:
        yield watcher
        return
    previous, previous_threads = sys.getprofile(), threading.getprofile()
    all_threads = getattr(threading, "setprofile_all_threads", None)     # Python 3.12+
    sys.setprofile(watcher)
    threading.setprofile(watcher)
    if all_threads is not None:
        all_threads(watcher)
    try:
        yield watcher
    finally:
        watcher.done = True              # a thread still running later finds a silent watcher
        if all_threads is not None:
            all_threads(previous_threads)
        threading.setprofile(previous_threads)
        sys.setprofile(previous)


@contextlib.contextmanager
def watch_calls(forbidden, *, name, lang: str | None = None):
    """Raise :class:`CheckFailed` if the code in the ``with`` block calls a forbidden function.

    ``forbidden`` is an iterable of callables: Python functions are recognised by their code
    object, C functions by identity, NumPy ufuncs and C-implemented NumPy functions by a
    reference to them in the learner's own code (notebook cells, not library modules), so the
    name they are bound to does not matter. The profiler that was installed before is put back,
    also when the block raises. ``NotImplementedError`` from the block passes through unchanged.
    """
    lang = get_language(lang)
    spec = _Forbidden(forbidden)
    raised = None
    with _watching(spec) as watcher:
        try:
            yield
        except NotImplementedError:
            raise
        except BaseException as exc:
            raised = exc
    if watcher.hit is not None:
        fail(name, None, say("forbidden", lang, what=watcher.hit), lang=lang)
    if raised is not None:
        raise raised


@contextlib.contextmanager
def peak_memory():
    """The peak of memory allocated while the block runs, in bytes: ``with peak_memory() as m: ...``
    then ``m["peak"]``. NumPy's arrays count (they are traced by ``tracemalloc``)."""
    import tracemalloc

    was_tracing = tracemalloc.is_tracing()
    if not was_tracing:
        tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    measured: dict = {}
    try:
        yield measured
    finally:
        measured["peak"] = max(0, tracemalloc.get_traced_memory()[1] - base)
        if not was_tracing:
            tracemalloc.stop()


@dataclass
class Outcome:
    """What one call of an answer gave.

    ``status`` is ``"ok"`` (``result`` holds the result), ``"not implemented"`` (the stub),
    ``"raised"`` (``detail`` is the exception's type, ``message`` its text), ``"forbidden"`` or
    ``"forbidden itself"`` (``detail``: the function, called or passed), ``"returned something
    else"`` (``detail``: what), or, for a call in another process, ``"timed out"``, ``"exceeded
    memory"`` or ``"exited"`` (``detail``: how). ``inputs_after`` is ``(args, kwargs)`` as the call
    left them; ``peak`` the bytes it allocated at most, when asked for.
    """

    status: str
    result: Any = None
    detail: str = ""
    message: str = ""
    inputs_after: tuple | None = None
    peak: int | None = None
    error: BaseException | None = None          # the exception itself, for a call made here


class AnswerElsewhere:
    """An answer that runs in another process (the grade of record, :mod:`.isolated`).

    :func:`run_learner` hands it the call with :meth:`call`; :func:`~.loops.assert_no_loops`
    reads its source with :meth:`definitions`. Its ``__signature__`` gives its parameters' names.
    """

    def call(self, args: tuple, kwargs: dict, forbidden, measure: bool) -> Outcome:
        raise NotImplementedError

    def definitions(self) -> list:
        """``[(name, syntax tree or None)]``: the answer's definition first, then its helpers'."""
        raise NotImplementedError

    def __call__(self, *args, **kwargs):
        outcome = self.call(args, kwargs, (), False)
        if outcome.status != "ok":
            raise RuntimeError(f"the answer's call ended with {outcome.status}: {outcome.detail}")
        return outcome.result


def call_answer(fn, args: tuple, kwargs: dict, forbidden=(), *, measure: bool = False,
                catch=Exception) -> Outcome:
    """Call ``fn`` on deep copies of ``args`` and ``kwargs``, watched for ``forbidden`` functions.

    What a check does with every answer, here or in the worker of the grade of record: NumPy's
    warnings are silenced, exceptions of the class ``catch`` become the outcome ``"raised"`` (the
    worker catches ``BaseException``: a ``SystemExit`` there is a wrong answer too), and a result
    that is not plain data becomes ``"returned something else"``. With ``measure``, ``peak`` is the
    most the call allocated (:func:`peak_memory`).
    """
    spec = _Forbidden(forbidden)
    shown = spec.which(fn)
    if shown is not None:
        return Outcome("forbidden itself", detail=shown)
    given = copy.deepcopy((tuple(args), dict(kwargs)))
    outcome = Outcome("ok", inputs_after=given)
    with contextlib.ExitStack() as stack:
        measured = stack.enter_context(peak_memory()) if measure else {}
        with _watching(spec) as watcher:
            try:
                with np.errstate(all="ignore"):
                    outcome.result = fn(*given[0], **given[1])
            except NotImplementedError as exc:
                outcome = Outcome("not implemented", message=str(exc), error=exc, inputs_after=given)
            except catch as exc:                # noqa: BLE001 - the answer's error is the outcome
                outcome = Outcome("raised", detail=type(exc).__name__, message=str(exc), error=exc,
                                  inputs_after=given)
    outcome.peak = measured.get("peak")
    if watcher.hit is not None and outcome.status != "not implemented":
        outcome.status, outcome.detail = "forbidden", watcher.hit
    elif outcome.status == "ok":
        try:
            require_plain(outcome.result)
        except NotPlain as exc:
            outcome.status, outcome.detail, outcome.result = "returned something else", str(exc), None
    return outcome


def changed_argument(fn, args: tuple, kwargs: dict, after: tuple) -> str | None:
    """The name of the first argument that ``after`` (the inputs as a call left them) changed."""
    try:
        names = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        names = []
    after_args, after_kwargs = after
    for i, before in enumerate(args):
        if i >= len(after_args) or not same_value(before, after_args[i]):
            return names[i] if i < len(names) else f"#{i}"
    for key in kwargs:
        if key not in after_kwargs or not same_value(kwargs[key], after_kwargs[key]):
            return key
    return None


def run_learner(fn, *args, name, label, forbidden=(), hint=None, lang: str | None = None,
                memory: dict | None = None, **kwargs):
    """Call ``fn(*args, **kwargs)`` the way a check does and return its result.

    The call (:func:`call_answer`) gets copies of the inputs and runs with NumPy warnings silenced
    and ``forbidden`` functions watched. ``NotImplementedError`` (the stub) is not caught; anything
    else that goes wrong becomes :class:`CheckFailed` naming the input ``label``: an exception, a
    forbidden function called or passed, a result that is not plain data (:mod:`.plain`), an input
    changed by the call (an answer returns new arrays and leaves its inputs as they were), and, for
    an answer run in another process (:class:`AnswerElsewhere`), a call that timed out, ran out
    of memory or ended its process. With ``memory`` (a dict), ``memory["peak"]`` is set to the most
    the call allocated, in bytes, measured where it ran.
    """
    lang = get_language(lang)
    if not callable(fn):
        raise CheckFailed(say("not_callable", lang, name=pick(name, lang), got=type(fn).__name__))
    if isinstance(fn, AnswerElsewhere):
        outcome = fn.call(args, kwargs, forbidden, memory is not None)
    else:
        outcome = call_answer(fn, args, kwargs, forbidden, measure=memory is not None)
    if memory is not None:
        memory["peak"] = outcome.peak
    status = outcome.status
    if status == "not implemented":
        if outcome.error is not None:
            raise outcome.error
        raise NotImplementedError(outcome.message)
    if status == "ok":
        which = changed_argument(fn, args, kwargs, outcome.inputs_after)
        if which is None:
            return outcome.result
        reason = say("changed", lang, which=which)
    elif status == "forbidden itself":
        reason = say("forbidden_is", lang, what=outcome.detail)
    elif status == "forbidden":
        reason = say("forbidden", lang, what=outcome.detail)
    elif status == "raised":
        reason = say("raised", lang, name=outcome.detail, error=outcome.message)
    elif status == "returned something else":
        reason = say(status, lang, what=outcome.detail)
    elif status == "timed out":
        reason = say(status, lang, seconds=float(outcome.detail or 0))
    elif status == "exceeded memory":
        reason = say(status, lang, limit=outcome.detail)
    else:
        reason = say("exited", lang, how=outcome.detail)
    fail(name, label, reason, hint=hint, lang=lang)
