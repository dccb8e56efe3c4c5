"""The seed sweep: how a claim is judged, and (slow) 07's and 08's claims on ten held-out seeds."""

from __future__ import annotations

import math

import numpy as np
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


def test_a_value_is_clear_of_the_threshold_on_either_side_or_not_at_all():
    low = Claim("08", 14, "v", "<=", 0.15, "≤ 0.15")
    assert low.clear(0.09) and low.clear(0.21)            # held, and broken, by more than 0.05
    assert not low.clear(0.12) and not low.clear(0.18)    # either side, too close to flip safely
    count = Claim("08", 21, "v", ">=", 14, "≥ 14 rows", unit=False)
    assert count.clear(16) and count.clear(0) and not count.clear(15)


def test_the_summary_counts_seeds_that_hold_and_those_clear_of_the_threshold():
    result = {"seeds": [0, 1, 2], "values": {c.value: [0.0, 0.0, 0.0] for c in CLAIMS}}
    result["values"]["one_back_10_19"] = [0.05, 0.17, 0.3]      # clear, held without margin, broken clearly
    row = next(r for r in sweep.summary(result) if r["value"] == "one_back_10_19")
    assert (row["holds"], row["clear"], row["seeds"]) == (2, 2, 3)
    assert row["low"] == 0.05 and row["high"] == 0.3 and row["margin"] == pytest.approx(-0.1)
    close = [line.split(":")[0] for line in sweep.not_clear(result) if "10..19" in line]
    assert close == ["08 cell 14, seed 1"]


def test_only_the_notebooks_own_seeds_are_judged_when_asked():
    result = {"seeds": [0, 3, 100], "values": {c.value: [c.threshold] * 3 for c in CLAIMS}}    # none clear
    judged = {line.split(":")[0].split(", seed ")[1] for line in sweep.not_clear(result, notebook_seeds=True)}
    assert judged == {"0", "3"}      # seed 3: only 07's library claims, trained on 0-4; never 100
    assert "100" in {line.split(":")[0].split(", seed ")[1] for line in sweep.not_clear(result)}


def test_every_claim_names_a_notebook_cell_and_a_sensible_bound():
    assert {c.notebook for c in CLAIMS} == {"07", "08"}
    assert all(c.op in (">=", "<=", ">", "<") and 0 < c.at_least <= len(HELD_OUT) for c in CLAIMS)
    assert not set(HELD_OUT) & set(range(5)), "the notebooks train seeds 0-4"
    assert {c.text for c in CLAIMS} == set(sweep.CLAIMS_ZH), "every claim has its Chinese wording"


def test_the_stored_sweep_measured_every_claim_on_held_out_seeds_clear_of_its_threshold():
    stored = sweep.stored()
    assert len(stored["seeds"]) >= 10 and not set(stored["seeds"]) & set(range(5))
    assert {c.value for c in CLAIMS} <= set(stored["values"])
    assert all(len(xs) == len(stored["seeds"]) for xs in stored["values"].values())
    assert stored["kernel"], "the sweep names the BLAS kernel it ran on"
    assert sweep.not_clear(stored) == []
    for row in sweep.summary(stored):
        assert row["holds"] >= row["at_least"], row["text"]


def test_the_tables_print_every_claim_in_both_languages():
    for notebook in ("07", "08"):
        en, zh = sweep.table(notebook, "en").splitlines(), sweep.table(notebook, "zh").splitlines()
        assert len(en) == len(zh) == 1 + (2 if notebook == "08" else 0) + sum(c.notebook == notebook
                                                                              for c in CLAIMS)
        assert [line[:9] for line in en[1:]] == [line[:9] for line in zh[1:]]
    circuit, other = sweep.table("08").splitlines()[1:3]
    assert circuit.split()[0] == str(len(sweep.circuit_seeds(sweep.stored())))
    assert int(circuit.split()[0]) + int(other.split()[0]) == len(sweep.stored()["seeds"])
    with pytest.raises(ValueError, match="notebook must be one of"):
        sweep.table("06")
    with pytest.raises(ValueError, match="lang must be"):
        sweep.table("08", "fr")


def test_the_stored_other_solution_is_what_08_says_it_is():
    from attention_course.tasks import repeat_batch

    model, info = sweep.other_solution()
    assert info["seed"] not in range(5) and info["kernel"] and info["steps"] == 600
    batch = repeat_batch(1, 256, length=20)
    assert not sweep.has_circuit(model, batch)
    assert model.accuracy(batch) >= 0.95                       # periods 4-8: solved, like the circuit
    by_period = [model.accuracy(repeat_batch(2, 256, length=20, periods=(P, P))) for P in (9, 10)]
    assert max(by_period) <= 0.6                              # 08 prints "≥ 0.7 at every period": False
    assert (model.k_composition_table().argmax(axis=1) == np.arange(16)).sum() <= 4


def test_the_rule_tells_a_circuit_from_the_other_solution():
    from functools import partial

    from attention_course.tasks import repeat_batch
    from attention_course.tiny_model import repeat_model, train

    batch = repeat_batch(1, 256, length=20)
    assert not sweep.has_circuit(repeat_model("2 layers", 0), batch)       # untrained: no previous-token head
    circuit = train(repeat_model("2 layers", 0), partial(repeat_batch, batch_size=16, length=20), steps=600,
                    lr=1e-2, seed=0, n_checkpoints=2).model                # 08's seed 0
    assert sweep.has_circuit(circuit, batch)
    assert not sweep.has_circuit(sweep.other_solution()[0], batch)


def test_adams_factor_is_read_where_the_spread_first_reaches_the_target():
    quadratic = [0.01 * f ** 2 for f in sweep.ADAM_FACTORS]           # a spread that grows like factor²
    assert sweep._adam_factor(0.05, quadratic) == pytest.approx(5 ** 0.5)   # between two factors: exact
    assert sweep._adam_factor(0.001, quadratic) == 1.0                 # reached at the first factor
    assert sweep._adam_factor(1.0, quadratic) == math.inf              # never reached up to 8
    bumpy = [1.0, 3.0, 2.0, 4.0] + [5.0] * (len(sweep.ADAM_FACTORS) - 4)
    assert sweep._adam_factor(2.5, bumpy) < sweep.ADAM_FACTORS[1]      # the first crossing, not a later one
    assert sweep.ADAM_FACTORS[0] == 1 and sweep.ADAM_FACTORS[-1] == 8
    assert sweep.ADAM_BOUNDS == pytest.approx((8 ** 0.25, 8 ** 0.5))


def test_the_sweep_measures_adams_factor_as_07_does():
    # 07's cell: train 10 steps, spread of model.scores, straight line through the logarithms
    from functools import partial

    from attention_course import softmax
    from attention_course.tasks import library_batch
    from attention_course.tiny_model import train, train_many

    lib_eval = library_batch(1, 512)
    jobs = {key: dict(job, eval_batch=lib_eval, n_checkpoints=2)
            for key, job in sweep._library_jobs(0).items() if key[0] == "spread"}
    runs = train_many(jobs, processes=1)
    spread = {key[1:]: sweep._score_spread(run.model, lib_eval) for key, run in runs.items()}
    factor = sweep._adam_factor(spread[False, 1.0], [spread[True, f] for f in sweep.ADAM_FACTORS])

    factors = np.array([2 ** (k / 4) for k in range(13)])
    assert np.array_equal(factors, sweep.ADAM_FACTORS)

    def spread_after(scale, lr):
        model = sweep.LibraryModel(d_model=64, d_k=64, scale=scale, embed_std=0.02, seed=0)
        train(model, partial(library_batch, batch_size=64), steps=10, lr=lr, seed=0, eval_batch=lib_eval,
              n_checkpoints=2)
        return model, model.scores(lib_eval).std(axis=-1).mean()

    model, target = spread_after(False, 1e-2)
    spreads = np.array([spread_after(True, 1e-2 * f)[1] for f in factors])
    assert (np.diff(spreads) > 0).all()
    assert np.exp(np.interp(np.log(target), np.log(spreads), np.log(factors))) == pytest.approx(factor)
    assert sweep.ADAM_BOUNDS[0] * 1.1 < factor < sweep.ADAM_BOUNDS[1] * 0.9      # 07's claim, with a margin
    # the scores are what the softmax receives: they give the model's attention weights
    assert np.allclose(softmax(model.scores(lib_eval)), model.forward(lib_eval)[1][:, 0], atol=1e-6)


@pytest.mark.slow
def test_on_the_held_out_seeds_every_claim_holds_as_often_as_the_notebooks_say():
    result = sweep.run(HELD_OUT)
    assert result["seeds"] == list(HELD_OUT)
    failures = []
    for row in sweep.summary(result):
        assert all(math.isfinite(x) for x in result["values"][row["value"]]), row["value"]
        if row["holds"] < row["at_least"]:
            failures.append(f"{row['notebook']} cell {row['cell']}: {row['text']}: holds on {row['holds']}"
                            f" of {row['seeds']} seeds (stated: at least {row['at_least']}); values "
                            f"{row['low']:.3f}..{row['high']:.3f}")
    assert failures == []
