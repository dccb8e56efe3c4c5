"""Plain data across a process boundary (attention_course.checks.plain): what goes in comes out,
exactly; what is not plain data is refused, by name; and a message, whoever wrote it, holds data
and nothing that runs."""

from __future__ import annotations

import io
import json
import math
import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from attention_course.checks.plain import MAX_DEPTH, NotPlain, decode, encode, is_plain

DTYPES = st.sampled_from([np.bool_, np.int8, np.int32, np.int64, np.uint8, np.uint64, np.float16,
                          np.float32, np.float64, np.complex64, np.complex128])
arrays = DTYPES.flatmap(lambda d: hnp.arrays(d, hnp.array_shapes(min_dims=0, max_dims=4, min_side=0,
                                                                  max_side=4)))
scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True),
                    st.complex_numbers(allow_nan=True), st.text(max_size=8),
                    arrays.filter(lambda a: a.ndim == 0).map(lambda a: a[()]))
hashable = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=5),
                     st.tuples(st.integers(), st.text(max_size=3)))
plain = st.recursive(
    st.one_of(scalars, arrays),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.lists(inner, max_size=3).map(tuple),
                            st.dictionaries(hashable, inner, max_size=3),
                            st.sets(hashable, max_size=3), st.frozensets(hashable, max_size=3)),
    max_leaves=12)


def same(a, b) -> bool:
    """Equal in value and in type, down to every array's dtype; NaN equals NaN."""
    if type(a) is not type(b):
        return False
    if isinstance(a, np.ndarray):
        nan = a.dtype.kind in "fc"
        return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b, equal_nan=nan)
    if isinstance(a, np.generic):
        return a.dtype == b.dtype and same(np.asarray(a), np.asarray(b))
    if isinstance(a, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, complex):
        return same(a.real, b.real) and same(a.imag, b.imag)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return a == b


@settings(max_examples=300, deadline=None)
@given(plain)
def test_what_goes_in_comes_out_exactly(value):
    assert is_plain(value)
    assert same(decode(encode(value)), value)


@given(arrays)
def test_arrays_come_back_as_base_ndarrays_that_own_their_data(a):
    b = decode(encode(a))
    assert type(b) is np.ndarray and b.dtype == a.dtype and b.shape == a.shape
    assert not np.shares_memory(a, b)


def test_views_and_non_contiguous_arrays_are_sent_as_their_values():
    a = np.arange(24.0).reshape(4, 6)[::2, ::-3]
    assert np.array_equal(decode(encode(a)), a)
    assert np.array_equal(decode(encode(np.asfortranarray(a))), a)


class Lying(np.ndarray):
    def __eq__(self, other):
        return np.ones(self.shape, dtype=bool)


@pytest.mark.parametrize(("value", "path", "what"), [
    (np.array([None]), "the value", "dtype object"),
    (np.zeros(2).view(Lying), "the value", "subclass of ndarray"),
    (np.ma.masked_array([1.0, 2.0]), "the value", "subclass of ndarray"),
    ([1, (2, object())], "the value[1][1]", "type object"),
    ({"w": lambda: 0}, "the value['w']", "function"),
    (np.array(["a"]), "the value", "dtype <U1"),
    (np.zeros(2, dtype=[("x", "f4")]), "the value", "dtype"),
    (np.datetime64("2026-01-01"), "the value", "datetime64"),
    (b"bytes", "the value", "type bytes"),
    (range(3), "the value", "type range"),
    (type("Float", (float,), {})(1.0), "the value", "Float"),
])
def test_what_is_not_plain_is_refused_by_name_and_place(value, path, what):
    assert not is_plain(value)
    with pytest.raises(NotPlain) as caught:
        encode(value)
    assert caught.value.path == path and what in caught.value.what
    assert "only plain data" in str(caught.value)


def test_nesting_has_a_limit():
    deep = []
    for _ in range(MAX_DEPTH + 5):
        deep = [deep]
    with pytest.raises(NotPlain, match="nested more than"):
        encode(deep)
    ok = []
    for _ in range(MAX_DEPTH - 1):
        ok = [ok]
    assert decode(encode(ok)) == ok


def test_a_recursive_list_is_refused_not_a_crash():
    loop: list = []
    loop.append(loop)
    with pytest.raises(NotPlain, match="nested more than"):
        encode(loop)


def message(header, blobs=()) -> bytes:
    head = json.dumps(header).encode()
    parts = [len(head).to_bytes(8, "little"), head]
    for b in blobs:
        parts += [len(b).to_bytes(8, "little"), b]
    return b"".join(parts)


def npy(a, allow_pickle=False) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, a, allow_pickle=allow_pickle)
    return buffer.getvalue()


class Boom:
    ran = False

    def __reduce__(self):
        return (Boom.mark, ())

    @staticmethod
    def mark():
        Boom.ran = True
        return "ran"


@pytest.mark.parametrize("forged", [
    message({"array": 0}, [npy(np.array([Boom()], dtype=object), allow_pickle=True)]),
    pickle.dumps(Boom()),
    message({"array": 3}, [npy(np.zeros(2))]),
    message({"scalar": 0}, [npy(np.zeros(2))]),
    message({"object": "os.system"}),
    message([1, 2]),
    message({"array": 0}, [npy(np.array(["text"]))]),
    message({"int": "1"})[:-3],
    b"",
])
def test_a_forged_message_is_refused_and_runs_nothing(forged):
    Boom.ran = False
    with pytest.raises(ValueError):
        decode(forged)
    assert not Boom.ran


def test_decode_takes_only_bytes():
    with pytest.raises(ValueError, match="bytes"):
        decode("text")
