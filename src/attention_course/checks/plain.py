"""Plain data across a process boundary: encoded so that reading it can run no code.

The grade of record runs a learner's answer in a worker process and compares in the grader. What
crosses between the two is *plain data*, and only that:

- ndarrays of bool, integer, floating or complex dtype, re-created as base ``ndarray`` (never a
  subclass, never object dtype);
- NumPy scalars of those dtypes, Python numbers, bools, strings and None;
- tuples, lists, dicts, sets and frozensets of these.

A message is one ``bytes``: an 8-byte header length, a JSON header (the structure, with each array
and NumPy scalar as a reference), then each array as ``.npy`` bytes. An input that is not data (a
function a check hands to the answer) may travel as a name both sides know, when the caller gives
:func:`encode` a ``refer`` and :func:`decode` a ``resolve`` function. :func:`decode` reads JSON with
the standard parser and arrays with ``np.load(..., allow_pickle=False)``, so a message, whoever
wrote it, can hold data and nothing that runs. :func:`encode` refuses anything else with
:class:`NotPlain`, whose message says what was found and where, in words a learner can act on.
"""

from __future__ import annotations

import io
import json

import numpy as np

__all__ = ["MAX_BYTES", "MAX_DEPTH", "NotPlain", "decode", "encode", "is_plain", "require_plain"]

#: Deepest nesting of containers that a message may hold.
MAX_DEPTH = 32
#: Largest message :func:`decode` reads (and :func:`encode` writes), in bytes.
MAX_BYTES = 512 * 2**20

_KINDS = "biufc"                      # bool, signed and unsigned integer, floating, complex
_HEADER = 8


class NotPlain(TypeError):
    """A value that is not plain data, with where it was found (``path``) and what it was."""

    def __init__(self, what: str, path: str):
        self.what, self.path = what, path
        super().__init__(f"{path} is {what}; only plain data can be compared: arrays of numbers or "
                         "booleans, numbers, strings, None, and tuples, lists, dicts and sets of them")


def _describe(x) -> str:
    kind = type(x)
    name = kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"
    if isinstance(x, np.ndarray):
        if type(x) is not np.ndarray:
            return f"an instance of {name}, a subclass of ndarray (return np.asarray(...) of it)"
        return f"an array of dtype {x.dtype}"
    return f"an object of type {name}"


def encode(value, *, refer=None) -> bytes:
    """``value`` as one message of plain data; :class:`NotPlain` if any part of it is not.

    Examples
    --------
    >>> message = encode({"w": np.arange(3, dtype=np.float32), "n": (1, 2.5, None)})
    >>> out = decode(message)
    >>> out["w"], out["n"]
    (array([0., 1., 2.], dtype=float32), (1, 2.5, None))
    >>> try:
    ...     encode([1.0, np.array([None])])
    ... except NotPlain as exc:
    ...     print(exc.path, "is", exc.what)
    the value[1] is an array of dtype object

    ``refer(obj)`` may give a string for an object that is not plain data (it then travels as that
    string, for :func:`decode`'s ``resolve`` to turn back into an object), or None.
    """
    arrays: list[np.ndarray] = []
    header = _encode(value, arrays, "the value", 0, refer)
    head = json.dumps(header, allow_nan=True).encode("utf-8")
    parts = [len(head).to_bytes(_HEADER, "little"), head]
    for a in arrays:
        buffer = io.BytesIO()
        np.save(buffer, a, allow_pickle=False)
        blob = buffer.getvalue()
        parts += [len(blob).to_bytes(_HEADER, "little"), blob]
    message = b"".join(parts)
    if len(message) > MAX_BYTES:
        raise NotPlain(f"{len(message):,} bytes when encoded, more than the {MAX_BYTES:,} allowed",
                       "the value")
    return message


def _encode(x, arrays: list, path: str, depth: int, refer=None):
    if depth > MAX_DEPTH:
        raise NotPlain(f"nested more than {MAX_DEPTH} containers deep", path)
    kind = type(x)
    if x is None or kind in (bool, str):
        return x
    if kind is int:
        return {"int": str(x)}                 # exact, whatever its size
    if kind is float:
        return {"float": x.hex()}              # exact, NaN and infinities included
    if kind is complex:
        return {"complex": [x.real.hex(), x.imag.hex()]}
    if isinstance(x, np.generic) and kind.__module__ == "numpy":
        if np.dtype(kind).kind not in _KINDS:
            raise NotPlain(f"a NumPy scalar of dtype {np.dtype(kind)}", path)
        arrays.append(np.asarray(x))
        return {"scalar": len(arrays) - 1}
    if kind is np.ndarray:
        if x.dtype.kind not in _KINDS or x.dtype.fields is not None:
            raise NotPlain(_describe(x), path)
        arrays.append(np.ascontiguousarray(x) if x.ndim else x)
        return {"array": len(arrays) - 1}
    if kind in (list, tuple, set, frozenset):
        items = sorted(x, key=_order) if kind in (set, frozenset) else x
        return {kind.__name__: [_encode(v, arrays, f"{path}[{i}]", depth + 1, refer)
                                for i, v in enumerate(items)]}
    if kind is dict:
        return {"dict": [[_encode(k, arrays, f"a key of {path}", depth + 1, refer),
                          _encode(v, arrays, f"{path}[{k!r:.40}]", depth + 1, refer)] for k, v in x.items()]}
    name = refer(x) if refer is not None else None
    if isinstance(name, str):
        return {"ref": name}
    raise NotPlain(_describe(x), path)


def _order(v):
    # Sets have no order; sorting by type and text gives each set one encoding.
    return (type(v).__name__, repr(v))


def decode(message: bytes, *, resolve=None):
    """The value of a message made by :func:`encode`; ``ValueError`` for anything else.

    Arrays come back as base ``ndarray`` of the dtype sent (bool, integer, floating or complex),
    read without pickle; containers, numbers and strings as the types sent. A name that
    :func:`encode`'s ``refer`` gave becomes ``resolve(name)``; without ``resolve`` it is refused.
    """
    if not isinstance(message, (bytes, bytearray, memoryview)):
        raise ValueError(f"a message is bytes; got {type(message).__name__}")
    message = bytes(message)
    if len(message) > MAX_BYTES:
        raise ValueError(f"a message of {len(message):,} bytes is over the {MAX_BYTES:,} allowed")
    blobs, at = [], 0
    while at < len(message):
        if at + _HEADER > len(message):
            raise ValueError("a message ends inside a length")
        size = int.from_bytes(message[at:at + _HEADER], "little")
        at += _HEADER
        if at + size > len(message):
            raise ValueError("a message ends inside a part")
        blobs.append(message[at:at + size])
        at += size
    if not blobs:
        raise ValueError("an empty message")
    header = json.loads(blobs[0].decode("utf-8"))
    arrays = []
    for blob in blobs[1:]:
        a = np.load(io.BytesIO(blob), allow_pickle=False)
        if type(a) is not np.ndarray or a.dtype.kind not in _KINDS or a.dtype.fields is not None:
            raise ValueError(f"a message holds an array of dtype {a.dtype}, which is not plain data")
        arrays.append(a)
    return _decode(header, arrays, 0, resolve)


def _decode(node, arrays: list, depth: int, resolve=None):
    if depth > MAX_DEPTH + 1:
        raise ValueError("a message nests too deep")
    if node is None or type(node) in (bool, str):
        return node
    if type(node) is not dict or len(node) != 1:
        raise ValueError(f"a message holds {type(node).__name__} {node!r:.60} where a tagged value belongs")
    (tag, v), = node.items()
    if tag == "int":
        return int(v)
    if tag == "float":
        return float.fromhex(v)
    if tag == "complex":
        return complex(float.fromhex(v[0]), float.fromhex(v[1]))
    if tag in ("array", "scalar"):
        if type(v) is not int or not 0 <= v < len(arrays):
            raise ValueError(f"a message refers to array {v!r}, which it does not hold")
        a = arrays[v]
        if tag == "scalar":
            if a.ndim:
                raise ValueError("a message's scalar is not 0-dimensional")
            return a[()]
        return a
    if tag in ("list", "tuple", "set", "frozenset"):
        items = [_decode(x, arrays, depth + 1, resolve) for x in v]
        return {"list": list, "tuple": tuple, "set": set, "frozenset": frozenset}[tag](items)
    if tag == "dict":
        return {_decode(k, arrays, depth + 1, resolve): _decode(x, arrays, depth + 1, resolve) for k, x in v}
    if tag == "ref" and type(v) is str and resolve is not None:
        try:
            return resolve(v)
        except Exception as exc:
            raise ValueError(f"a message names {v!r:.60}, which cannot be resolved ({exc})") from None
    raise ValueError(f"a message holds an unknown tag {tag!r:.40}")


def require_plain(value) -> None:
    """Raise :class:`NotPlain`, saying what and where, unless ``value`` is plain data."""
    _encode(value, [], "the value", 0)


def is_plain(value) -> bool:
    """Whether ``value`` is plain data (see the module's docstring).

    >>> is_plain([np.float32(1.5), {"a": (1, None)}]), is_plain(np.ma.masked_array([1.0]))
    (True, False)
    """
    try:
        require_plain(value)
    except NotPlain:
        return False
    return True

