"""The seed sweep: how a claim is judged, and (slow) 07's and 08's claims on ten held-out seeds."""

from __future__ import annotations

import math

import pytest

from attention_course import sweep
from attention_course.sweep import CLAIMS, HELD_OUT, Claim


def test_a_claim_holds_on_its_side_and_measures_its_margin_there():
    low = Claim("08", 14, "v", "<=", 0.15, "≤ 0.15")
    assert low.holds(0.15) and not low.holds(0.16)
    assert low.margin(0.05) == pytest.approx(0.10) and low.margin(0.2) < 0
    high = Claim("07", 30, "v", ">", 2, "> 2", unit=False)
    assert not high.holds(2) and high.holds(2.5)
    assert high.needed == pytest.approx(0.2) and low.needed == 0.05
    assert Claim("08", 21, "v", ">=", 16, "all rows", discrete=True).needed == 0


def test_the_summary_counts_seeds_that_hold_and_those_that_keep_the_margin():
    result = {"seeds": [0, 1, 2], "values": {c.value: [0.0, 0.0, 0.0] for c in CLAIMS}}
    result["values"]["one_back_10_19"] = [0.05, 0.12, 0.3]      # margin kept, held without it, broken
    row = next(r for r in sweep.summary(result) if r["value"] == "one_back_10_19")
    assert (row["holds"], row["keeps_margin"], row["seeds"]) == (2, 1, 3)
    assert row["low"] == 0.05 and row["high"] == 0.3 and row["margin"] == pytest.approx(-0.15)


def test_every_claim_names_a_notebook_cell_and_a_sensible_bound():
    assert {c.notebook for c in CLAIMS} == {"07", "08"}
    assert all(c.op in (">=", "<=", ">", "<") and 0 < c.at_least <= 1 for c in CLAIMS)
    assert not set(HELD_OUT) & set(range(5)), "the notebooks train seeds 0-4"


def test_the_stored_sweep_measured_every_claim_on_held_out_seeds():
    stored = sweep.stored()
    assert len(stored["seeds"]) >= 10 and not set(stored["seeds"]) & set(range(5))
    assert {c.value for c in CLAIMS} <= set(stored["values"])
    assert all(len(xs) == len(stored["seeds"]) for xs in stored["values"].values())
    assert stored["kernel"], "the sweep names the BLAS kernel it ran on"


@pytest.mark.slow
def test_on_ten_held_out_seeds_every_claim_holds_as_often_as_it_says():
    result = sweep.run(HELD_OUT[:10])
    assert result["seeds"] == list(HELD_OUT[:10])
    failures = []
    for row in sweep.summary(result):
        assert all(math.isfinite(x) for x in result["values"][row["value"]]), row["value"]
        claim = next(c for c in CLAIMS if c.value == row["value"] and c.text == row["text"])
        if row["holds"] < claim.at_least * row["seeds"]:
            failures.append(f"{row['notebook']} cell {row['cell']}: {row['text']}: holds on {row['holds']}"
                            f" of {row['seeds']} seeds (stated: at least {claim.at_least:.0%}); values "
                            f"{row['low']:.3f}..{row['high']:.3f}")
    assert failures == []
