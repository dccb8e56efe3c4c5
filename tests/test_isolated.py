"""The worker of the grade of record (attention_course.checks.isolated), piece by piece."""

from __future__ import annotations

import sys
import time

import numpy as np
import pytest

from attention_course.checks import isolated, nb07
from attention_course.checks.plain import decode, encode

pytestmark = pytest.mark.integration

CODE = [
    "import numpy as np",
    "def echo(x):\n    return x",
    "def spin(x):\n    while True:\n        pass",
    "def leave(x):\n    import os\n    os._exit(3)",
    "def ahead(x):\n    import os, secrets\n"
    "    from attention_course.checks.plain import encode\n"
    "    forged = encode({'id': secrets.token_hex(16), 'status': 'ok', 'result': 0.0,\n"
    "                     'inputs_after': ((x,), {})})\n"
    "    for fd in range(3, 32):\n"
    "        try:\n"
    "            os.write(fd, len(forged).to_bytes(8, 'little') + forged)\n"
    "        except OSError:\n"
    "            pass\n"
    "    return x + 1",
    "def mutate(x):\n    x[0] = 99\n    return x.sum()",
    "def grab(x):\n    return np.ones(3 * 2**30 // 8)",
    "def scribble(x):\n    with open('notes.txt', 'w') as f:\n        f.write('a' * 100)\n    return 1",
    "def garbage(x):\n    import os, json\n"
    "    head = json.dumps({'set': [{'list': []}]}).encode()\n"
    "    bad = (len(head) + 8).to_bytes(8, 'little') + len(head).to_bytes(8, 'little') + head\n"
    "    for fd in range(3, 32):\n"
    "        try:\n"
    "            os.write(fd, bad)\n"
    "        except OSError:\n"
    "            pass\n"
    "    return 1",
]


def worker(**limits) -> isolated.Worker:
    job = dict(lang="en", folder=".", import_cell="", code=CODE,
               answers=["echo", "spin", "leave", "ahead", "mutate", "grab", "scribble", "garbage"])
    return isolated.Worker(job, **limits)


def test_a_value_goes_and_comes_back_exactly_and_the_inputs_come_back_as_left():
    w = worker()
    try:
        x = np.arange(5, dtype=np.float32)
        out = w.call("echo", ((x, {"a": (1, None)}),), {}, [], False)
        assert out.status == "ok" and out.result[1] == {"a": (1, None)}
        assert out.result[0].dtype == np.float32 and np.array_equal(out.result[0], x)
        out = w.call("mutate", (np.zeros(3),), {}, [], False)
        assert out.status == "ok" and out.inputs_after[0][0][0] == 99
        assert w.ready["answers"]["echo"] == {"callable": True, "type": "function", "parameters": ["x"]}
    finally:
        w.stop()


def test_a_reply_without_its_requests_id_counts_for_nothing():
    w = worker()
    try:
        out = w.call("ahead", (1.0,), {}, [], False)
        assert out.status == "ok" and out.result == 2.0          # the forged 0.0 was not read as the reply
        assert w.call("echo", (5,), {}, [], False).result == 5   # and is not read later either
    finally:
        w.stop()


def test_a_silent_worker_is_stopped_after_the_calls_time_and_the_notebooks_time_runs_out():
    w = worker(call_seconds=1.0, notebook_seconds=3.0)
    try:
        start = time.monotonic()
        out = w.call("spin", (0,), {}, [], False)
        assert out.status == "timed out" and out.detail == "1" and time.monotonic() - start < 10
        assert w.process is None                                  # stopped, with what it started
        assert w.call("echo", (7,), {}, [], False).result == 7   # a new worker for the next call
        w.spent = 3.0
        assert w.call("echo", (7,), {}, [], False).status == "timed out"
    finally:
        w.stop()


def test_an_exit_is_reported_and_the_next_check_gets_a_new_worker():
    w = worker()
    try:
        out = w.call("leave", (0,), {}, [], False)
        assert out.status == "exited" and out.detail == "exit code 3"
        w.fresh_start()
        assert w.call("echo", ("back",), {}, [], False).result == "back" and w.starts == 2
    finally:
        w.stop()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the address-space limit is Linux's")
def test_a_huge_allocation_exceeds_the_workers_memory():
    w = worker()
    try:
        out = w.call("grab", (0,), {}, [], False)
        assert out.status == "exceeded memory" and out.detail == "2 GiB"
        assert w.call("echo", (1,), {}, [], False).result == 1    # the worker lives on
    finally:
        w.stop()


def test_a_suspect_travels_as_its_recipe_and_is_made_again_on_the_other_side():
    suspect = nb07._suspect("dk_sign")
    message = encode((suspect, 3), refer=isolated._RECIPES.get)
    assert b"dk_sign" in message and b"backward" not in message
    made, n = decode(message, resolve=lambda recipe: nb07._suspect(*__import__("json").loads(recipe)[2]))
    assert n == 3 and made.__code__ is suspect.__code__ and made is not suspect


def test_the_suspects_tell_their_mistake_by_their_code_only():
    suspects = {bug: nb07._suspect(bug) for bug, _, _ in nb07.SUSPECTS}
    shown = {(f.__name__, f.__qualname__, f.__doc__, f.__defaults__, f.__kwdefaults__, f.__closure__,
              f.__module__, tuple(f.__dict__)) for f in suspects.values()}
    assert shown == {("backward", "backward", None, None, None, None, nb07.__name__, ())}
    assert len({f.__code__ for f in suspects.values()}) == len(suspects)
    held = [v for v in vars(nb07).values() if callable(v) and getattr(v, "__name__", "") == "backward"]
    assert held == []                                             # no table of them in the module


def test_a_forbidden_list_goes_by_name_and_comes_back_the_same():
    from attention_course.checks import forbidden

    calls = forbidden.of("attention", "softmax", "optimiser", "layers")
    names = forbidden.names_of(calls)
    assert all(n.startswith("attention_course.") for n in names)
    back = forbidden.from_names(names)
    assert len(back) == len(calls)
    for a, b in zip(calls, back, strict=True):
        assert a is b or getattr(a, "__func__", a) is getattr(b, "__func__", b)
    with pytest.raises(ValueError, match="not a callable of the course"):
        forbidden.from_names(["os:system"])


@pytest.mark.skipif(sys.platform == "win32", reason="the file-size limit is POSIX's")
def test_an_answer_can_grow_no_file():
    w = worker()
    try:
        out = w.call("scribble", (0,), {}, [], False)
        assert out.status == "raised" and out.detail == "OSError", out
    finally:
        w.stop()


def test_a_message_that_is_no_reply_stops_the_worker_and_the_grader_carries_on():
    w = worker()
    try:
        out = w.call("garbage", (0,), {}, [], False)
        assert out.status == "returned something else" and w.process is None
        assert w.call("echo", (2,), {}, [], False).result == 2
    finally:
        w.stop()
