"""The attention bench's timing method: every timed call meets the state a call of its own kind
left behind (threads, memory), whatever pair the rotation put before it."""

from __future__ import annotations

import importlib.util

import pytest

from notebook_tools import ROOT


def load_bench():
    spec = importlib.util.spec_from_file_location("bench_run_method", ROOT / "benchmarks" / "run.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def calls_in_order(monkeypatch, bench, short_call_s):
    """What measure_times calls, in order, between "timed" and "done" for a timed call (the
    GEMM and exp calls are not recorded: an empty "timed", "done")."""
    order, faults = [], iter(range(10**6))

    def make_call(variant, q, k, v, mask="none"):
        return lambda: order.append((variant, mask))

    def minor_faults():
        i = next(faults)                     # read before a timed call, then after it
        order.append("timed" if i % 2 == 0 else "done")
        return i

    monkeypatch.setattr(bench, "make_call", make_call)
    monkeypatch.setattr(bench, "minor_faults", minor_faults)
    monkeypatch.setattr(bench, "SHORT_CALL_S", short_call_s)
    monkeypatch.setattr(bench, "SETTLE_S", 0.002)
    monkeypatch.setattr(bench, "fast_threads", lambda: 1)
    times, _, _ = bench.measure_times((32,), ["direct", "fast"], bench.MASKS, lambda n: 4, 32,
                                      log=lambda *a: None)
    assert set(times) == {(32, v, m) for v in ("direct", "fast") for m in bench.MASKS}
    return order


@pytest.mark.parametrize("short_call_s", [0.0, 60.0], ids=["long calls", "short calls"])
def test_every_timed_call_follows_a_call_of_the_same_pair(monkeypatch, short_call_s):
    bench = load_bench()
    order = calls_in_order(monkeypatch, bench, short_call_s)
    timed = [i for i, x in enumerate(order) if x == "timed" and order[i + 1] != "done"]
    assert len(timed) == 6 * 4 * (1 if short_call_s == 0 else bench.SHORT_PER_ROUND)
    last_call = [next(x for x in reversed(order[:i]) if isinstance(x, tuple)) for i in timed]
    assert [order[i + 1] for i in timed] == last_call, order[:40]

