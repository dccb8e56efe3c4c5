"""The call watcher: runs the learner's function and fails it when it calls a forbidden function.

While the learner's function runs (:func:`run_learner`, :func:`watch_calls`), a profile function
watches which functions it calls, so an exercise can forbid the library function it asks the
learner to rebuild whatever name it is bound to: Python functions by their code object, C functions
by identity, NumPy ufuncs (called without a profile event) by the names the learner's own bytecode
loads, resolved in its frame. :func:`peak_memory` measures what a call allocates.
"""

from __future__ import annotations

import contextlib
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

import numpy as np

from .language import CheckFailed, fail, get_language, pick, say

__all__ = ["is_learner_code", "peak_memory", "run_learner", "unwrap_chain", "watch_calls"]


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


def run_learner(fn, *args, name, label, forbidden=(), hint=None, lang: str | None = None, **kwargs):
    """Call ``fn(*args, **kwargs)`` the way a check does and return its result.

    The call runs with NumPy warnings silenced (a wrong answer's overflow is reported by the
    comparison, not as a warning) and with ``forbidden`` functions watched (:func:`watch_calls`).
    ``NotImplementedError`` (the stub) is not caught; any other exception becomes
    :class:`CheckFailed` naming the input ``label``, as does ``fn`` being, or wrapping, a
    forbidden function.
    """
    lang = get_language(lang)
    if not callable(fn):
        raise CheckFailed(say("not_callable", lang, name=pick(name, lang), got=type(fn).__name__))
    spec = _Forbidden(forbidden)
    shown = spec.which(fn)
    if shown is not None:
        fail(name, label, say("forbidden_is", lang, what=shown), hint=hint, lang=lang)
    error = None
    with _watching(spec) as watcher:
        try:
            with np.errstate(all="ignore"):
                result = fn(*args, **kwargs)
        except NotImplementedError:
            raise
        except Exception as exc:
            error = exc
    if watcher.hit is not None:
        fail(name, label, say("forbidden", lang, what=watcher.hit), hint=hint, lang=lang)
    if error is not None:
        fail(name, label, say("raised", lang, name=type(error).__name__, error=error), hint=hint, lang=lang)
    return result
