"""The tiny models of notebooks 07 and 08: gradients equal finite differences, training is seeded
and learns, heads can be read and silenced one by one."""

import os
import re
from functools import partial

import numpy as np
import pytest

from attention_course import checks, tasks
from attention_course.gradcheck import numerical_gradient, relative_error
from attention_course.progress import ProgressLine
from attention_course.tiny_model import AttentionOnlyModel, LibraryModel, repeat_model, train, train_many


def grad_errors(model, batch):
    """Relative error of every parameter's analytic gradient against central differences."""
    _, grads = model.loss_and_grads(batch)
    errors = {}
    for name, p in model.params.items():
        numeric = numerical_gradient(lambda: model.loss(batch), p)
        errors[name] = relative_error(grads[name], numeric)
    return errors


@pytest.mark.parametrize("kwargs", [
    dict(n_layers=1, n_heads=1, positional="learned"),
    dict(n_layers=2, n_heads=2, positional="learned"),
    dict(n_layers=1, n_heads=2, positional="sinusoidal", scale=False, embed_std=0.5),
    dict(n_layers=2, n_heads=1, positional="none", causal=False),
], ids=["1x1-learned", "2x2-learned", "1x2-sinusoidal-unscaled", "2x1-none-bidirectional"])
def test_attention_only_model_gradients_match_finite_differences(kwargs):
    model = AttentionOnlyModel(vocab=5, d_model=6, d_k=3, max_len=6, seed=1, dtype=np.float64,
                               **kwargs)
    batch = tasks.previous_token_batch(2, 3, length=5, vocab=5)
    errors = grad_errors(model, batch)
    assert set(errors) == set(model.params)
    # The elementwise relative error of an entry near 1e-4 is limited to about 1e-6 by the
    # rounding of the central difference (1e-16 · |loss| / eps); a real mistake gives 1e-2 or more.
    assert max(errors.values()) < 1e-5, errors


@pytest.mark.parametrize("scale", [True, False])
def test_library_model_gradients_match_finite_differences(scale):
    model = LibraryModel(n_keys=6, n_values=4, d_model=5, d_k=3, scale=scale, seed=2,
                         dtype=np.float64)
    batch = tasks.library_batch(3, 4, n_books=3, n_keys=6, n_values=4)
    errors = grad_errors(model, batch)
    assert max(errors.values()) < 1e-5, errors


def test_masked_positions_do_not_count_in_the_loss():
    model = AttentionOnlyModel(vocab=6, d_model=8, max_len=8, seed=0, dtype=np.float64)
    batch = tasks.repeat_batch(0, 4, length=8, vocab=6, periods=(2, 3))
    scrambled = tasks.SequenceBatch(batch.tokens, np.where(batch.mask, batch.targets, 5 - batch.targets),
                                    batch.mask, batch.n_classes)
    assert model.loss(batch) == model.loss(scrambled)


def test_float32_stays_float32():
    model = AttentionOnlyModel(vocab=8, d_model=8, n_layers=2, n_heads=2, max_len=8, scale=True)
    batch = tasks.previous_token_batch(0, 2, length=8, vocab=8)
    logits, weights, _ = model.forward(batch.tokens)
    _, grads = model.loss_and_grads(batch)
    assert logits.dtype == np.float32 and weights[0].dtype == np.float32
    assert {g.dtype for g in grads.values()} == {np.dtype(np.float32)}
    lib = LibraryModel(scale=False)
    assert lib.forward(tasks.library_batch(0, 2))[0].dtype == np.float32


def test_without_positions_and_mask_the_model_is_permutation_equivariant():
    # Notebook 05's property, and the reason the no-position model needs the causal mask.
    model = AttentionOnlyModel(vocab=10, d_model=8, positional="none", causal=False, seed=0,
                               dtype=np.float64)
    tokens = np.random.default_rng(0).integers(0, 10, size=(1, 7))
    perm = np.random.default_rng(1).permutation(7)
    assert np.allclose(model.forward(tokens[:, perm])[0], model.forward(tokens)[0][:, perm])
    model.causal = True
    assert not np.allclose(model.forward(tokens[:, perm])[0], model.forward(tokens)[0][:, perm])


def test_projections_are_views_of_the_stacked_weights():
    model = AttentionOnlyModel(vocab=4, d_model=6, n_heads=2, d_k=2, max_len=4)
    w = model.projections(0)
    assert w["W_Q"].shape == w["W_K"].shape == w["W_V"].shape == (6, 4)
    assert w["W_O"].shape == (4, 6)
    model.params["0.W_QKV"][:, 4:8] = 7.0
    assert (w["W_K"] == 7.0).all() and not (w["W_Q"] == 7.0).any()


def small_run(seed=0, steps=12, **kw):
    model = LibraryModel(seed=seed)
    return train(model, partial(tasks.library_batch, batch_size=16), steps, lr=1e-2, seed=seed,
                 eval_batch=tasks.library_batch(99, 64), n_checkpoints=5, **kw)


def test_training_is_reproduced_by_its_seeds():
    a, b, c = small_run(0), small_run(0), small_run(1)
    assert np.array_equal(a.loss, b.loss) and np.array_equal(a.maps, b.maps)
    assert not np.array_equal(a.loss, c.loss)


def test_checkpoints_run_from_step_0_to_the_last_step():
    run = small_run(steps=12)
    assert run.checkpoint_steps.tolist() == [0, 3, 6, 9, 12]
    assert run.loss.shape == (13,) and run.steps == 12
    assert run.maps.shape == (5, 1, 1, 1, 6) and run.accuracy.shape == (5,)
    assert np.allclose(run.maps.sum(-1), 1.0, atol=1e-5)
    # the first checkpoint is the untrained model
    fresh = LibraryModel(seed=0)
    assert np.allclose(run.maps[0, 0, 0, 0], fresh.forward(run.eval_batch)[1][0, 0])


def test_training_learns_the_library_lookup():
    model = LibraryModel(seed=0)
    run = train(model, partial(tasks.library_batch, batch_size=64), 60, lr=1e-2, seed=0,
                eval_batch=tasks.library_batch(1, 256))
    assert run.accuracy[0] < 0.2 and run.accuracy[-1] > 0.9
    assert run.loss[-5:].mean() < 0.5 * run.loss[:5].mean()


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="positional.*'rope'"):
        AttentionOnlyModel(vocab=4, positional="rope")
    model = AttentionOnlyModel(vocab=4, max_len=5)
    with pytest.raises(ValueError, match=r"max_len=5.*\(2, 6\)"):
        model.forward(np.zeros((2, 6), dtype=int))
    with pytest.raises(ValueError, match="steps must be >= 1; got 0"):
        small_run(steps=0)


def test_progress_line_counts_without_writing_to_stderr(capsys):
    with ProgressLine(10, "run", every=5, lang="en") as bar:
        for step in range(1, 11):
            bar.update(step, loss=1.0 / step)
    assert bar.text.startswith("run ") and "10/10" in bar.text and "loss 0.100" in bar.text
    captured = capsys.readouterr()
    assert captured.err == "" and captured.out == ""       # outside IPython nothing is shown
    silent = ProgressLine(4, enabled=False)
    with silent:
        silent.update(2)
    assert "2/4" in silent.text


def test_progress_line_speaks_the_notebook_language():
    line = ProgressLine(4, "训练", enabled=False, lang="zh")
    with line:
        line.update(4, loss=0.5)
    assert "损失 0.500" in line.text and " 秒" in line.text and "loss" not in line.text
    checks.set_language("zh")
    try:
        assert ProgressLine(4, enabled=False).words == ProgressLine(4, enabled=False, lang="zh").words
    finally:
        checks.set_language("en")
    assert "loss" in ProgressLine(4, enabled=False).words.values()


# --- reading a trained model head by head (notebook 08) --------------------------------------

def small(n_layers=2, n_heads=2, seed=0):
    return AttentionOnlyModel(vocab=6, d_model=8, n_layers=n_layers, n_heads=n_heads, d_k=4, max_len=7,
                              seed=seed, dtype=np.float64)


def test_a_layers_output_is_the_sum_of_its_heads_through_their_rows_of_W_O():
    model = small(n_layers=1)
    tokens = tasks.previous_token_batch(0, 3, length=7, vocab=6).tokens
    x = model.params["embed"][tokens] + model.params["pos"][:7]
    silent = model.forward(tokens, ablate=[(0, 0), (0, 1)])[0]
    np.testing.assert_allclose(silent, x @ model.params["W_U"], atol=1e-12)   # nothing but the stream
    weights = model.forward(tokens)[1][0]                                      # (B, h, n, n)
    total = x.copy()
    for head in range(2):
        W = model.head_weights(0, head)
        total += weights[:, head] @ (x @ W["W_V"]) @ W["W_O"]
    np.testing.assert_allclose(model.forward(tokens)[0], total @ model.params["W_U"], atol=1e-10)


def test_silencing_one_head_changes_the_output_and_leaves_training_untouched():
    model = small()
    tokens = tasks.repeat_batch(0, 2, length=7, vocab=6, periods=(2, 3)).tokens
    full = model.forward(tokens)[0]
    for head in [(0, 0), (0, 1), (1, 0), (1, 1)]:
        assert not np.allclose(model.forward(tokens, ablate=[head])[0], full)
    np.testing.assert_array_equal(model.forward(tokens)[0], full)               # nothing stays switched off
    batch = tasks.repeat_batch(1, 4, length=7, vocab=6, periods=(2, 3))
    assert model.accuracy(batch, ablate=[]) == model.accuracy(batch)


def test_query_key_and_k_composition_tables_follow_their_formulas():
    model = small()
    E = model.params["embed"]
    h0, h1 = model.head_weights(0, 1), model.head_weights(1, 0)
    np.testing.assert_allclose(model.query_key_table(1, 0), (E @ h1["W_Q"]) @ (E @ h1["W_K"]).T)
    np.testing.assert_allclose(model.k_composition_table(query=(1, 0), writer=(0, 1)),
                               (E @ h1["W_Q"]) @ (E @ h0["W_V"] @ h0["W_O"] @ h1["W_K"]).T)
    # the head's slices are the ones forward uses: its W_Q gives the scores of its map
    tokens = np.array([[0, 1, 2, 3]])
    x = E[tokens] + model.params["pos"][:4]
    W = model.head_weights(0, 1)
    scores = (x @ W["W_Q"]) @ np.swapaxes(x @ W["W_K"], -1, -2) / 2.0          # √d_k = 2
    scores = np.where(np.tril(np.ones((4, 4), bool)), scores, -np.inf)
    expected = np.exp(scores - scores.max(-1, keepdims=True))
    np.testing.assert_allclose(model.forward(tokens)[1][0][:, 1], expected / expected.sum(-1, keepdims=True),
                               atol=1e-12)


@pytest.mark.parametrize(("call", "words"), [
    (lambda m: m.forward(np.zeros((1, 3), int), ablate=[(2, 0)]), "no head (layer=2, head=0)"),
    (lambda m: m.accuracy(tasks.previous_token_batch(0, 1, length=4, vocab=6), ablate=[(0, 5)]),
     "heads 0..1"),
    (lambda m: m.forward(np.zeros((1, 3), int), ablate=[0]), "(layer, head) pairs"),
    (lambda m: m.head_weights(-1, 0), "layers 0..1"),
    (lambda m: m.k_composition_table(query=(0, 0), writer=(1, 0)), "writer's layer must come before"),
])
def test_bad_heads_are_named(call, words):
    with pytest.raises(ValueError, match=re.escape(words)):
        call(small())


def test_assume_finite_skips_only_the_nan_scan_and_only_inside_the_block():
    import threading

    from attention_course._validate import as_float_array, assume_finite

    def scans():
        try:
            as_float_array(bad, "x")
        except ValueError:
            return True
        return False

    bad = np.array([1.0, np.nan])
    with assume_finite():
        assert as_float_array(bad, "x") is bad
        with pytest.raises(TypeError, match="floating dtype"):
            as_float_array(np.array([1, 2]), "x")          # types are still checked
        other = []
        worker = threading.Thread(target=lambda: other.append(scans()))
        worker.start()
        worker.join()
        assert other == [True]                              # another thread still scans
    assert scans()


def test_training_that_diverges_stops_with_the_step_and_lr_named():
    model = LibraryModel(seed=0)
    real = model.loss_and_grads
    model.loss_and_grads = lambda batch: (float("nan"), real(batch)[1])    # as a diverged run would
    with pytest.raises(FloatingPointError, match=r"step 0.*lr=0\.01"):
        train(model, partial(tasks.library_batch, batch_size=8), 3, lr=0.01)


def checked_loop(model, make_batch, steps, lr, seed):
    """What train does, every step through the public, checked functions."""
    from attention_course.optim import Adam

    rng, optimizer, losses = np.random.default_rng(seed), Adam(model.params, lr=lr), []
    for step in range(steps + 1):
        batch = make_batch(rng)
        if step == steps:
            losses.append(model.loss(batch))
            break
        loss, grads = model.loss_and_grads(batch)
        losses.append(loss)
        optimizer.step(grads)
    return np.array(losses), model.params


@pytest.mark.parametrize("make", [
    lambda: (AttentionOnlyModel(16, d_model=16, n_layers=2, n_heads=1, d_k=16, max_len=12, seed=3),
             partial(tasks.repeat_batch, batch_size=8, length=12)),
    lambda: (AttentionOnlyModel(8, n_classes=64, d_model=16, n_heads=2, positional="sinusoidal",
                                max_len=10, seed=1), partial(tasks.previous_two_batch, batch_size=8)),
    lambda: (AttentionOnlyModel(16, d_model=16, positional="none", causal=False, scale=False, seed=2),
             partial(tasks.previous_token_batch, batch_size=8)),
    lambda: (LibraryModel(d_model=16, d_k=8, seed=4), partial(tasks.library_batch, batch_size=8)),
    lambda: (LibraryModel(d_model=16, d_k=8, scale=False, embed_std=0.1, seed=5),
             partial(tasks.library_batch, batch_size=8)),
])
def test_train_gives_the_numbers_of_the_checked_functions_bit_for_bit(make):
    # train checks the first step and runs the later ones unchecked with a flat Adam step: the
    # same arithmetic, so every loss and every weight must be equal, not just close.
    model, make_batch = make()
    original = dict(model.params)
    run = train(model, make_batch, 30, lr=1e-2, seed=7, n_checkpoints=4)
    reference, ref_params = checked_loop(make()[0], make_batch, 30, lr=1e-2, seed=7)
    assert np.array_equal(run.loss, reference)
    assert run.model.params.keys() == ref_params.keys()
    for name, p in run.model.params.items():
        assert p is original[name]                     # the model's own arrays, updated in place
        assert p.flags.c_contiguous and p.flags.writeable
        assert np.array_equal(p, ref_params[name]), name


@pytest.mark.parametrize("model, batch", [
    (AttentionOnlyModel(16, d_model=16, n_layers=2, n_heads=2, max_len=12, seed=0),
     tasks.repeat_batch(0, 8, length=12)),
    (AttentionOnlyModel(8, n_classes=64, d_model=16, n_heads=2, positional="sinusoidal", max_len=10,
                        causal=False, seed=1), tasks.previous_two_batch(1, 8)),
    (LibraryModel(d_model=16, d_k=8, scale=False, seed=4), tasks.library_batch(2, 8)),
])
def test_unchecked_passes_equal_the_checked_ones_on_one_step(model, batch):
    from attention_course import backprop as bp

    loss_c, grads_c = model.loss_and_grads(batch)
    with bp.unchecked():
        loss_u, grads_u = model.loss_and_grads(batch)
    assert loss_c == loss_u
    assert grads_c.keys() == grads_u.keys()
    assert all(np.array_equal(grads_c[n], grads_u[n]) and grads_u[n].dtype == np.float32 for n in grads_c)


def test_unchecked_is_left_when_training_ends_or_fails():
    from attention_course import backprop as bp
    from attention_course._validate import checking

    model = AttentionOnlyModel(16, d_model=16, max_len=12, seed=0)
    train(model, partial(tasks.repeat_batch, batch_size=4, length=12), 3, n_checkpoints=2)
    assert checking()
    with pytest.raises(ValueError, match="weight has shape"):
        bp.linear_forward(np.ones((2, 3)), np.ones((4, 5)))

    calls = []

    def failing(rng):                                      # fails on the third batch
        calls.append(1)
        if len(calls) > 2:
            raise RuntimeError("no more batches")
        return tasks.repeat_batch(rng, 4, length=12)

    with pytest.raises(RuntimeError, match="no more batches"):
        train(model, failing, 5, eval_batch=tasks.repeat_batch(1, 4, length=12))
    assert checking()


def test_a_failing_run_gives_the_model_its_own_arrays_back():
    model = AttentionOnlyModel(16, d_model=16, max_len=12, seed=0)
    original, calls = dict(model.params), []

    def make_batch(rng):                      # a batch maker that fails at step 5
        calls.append(1)
        if len(calls) > 5:
            raise RuntimeError("no more batches")
        return tasks.repeat_batch(rng, 4, length=12)

    with pytest.raises(RuntimeError, match="no more batches"):
        train(model, make_batch, 50, lr=1e-2, eval_batch=tasks.repeat_batch(1, 4, length=12))
    assert all(model.params[n] is original[n] for n in original)
    reference, ref_params = checked_loop(AttentionOnlyModel(16, d_model=16, max_len=12, seed=0),
                                         partial(tasks.repeat_batch, batch_size=4, length=12), 5, 1e-2, 0)
    assert all(np.array_equal(model.params[n], ref_params[n]) for n in original)   # after 5 steps


def test_a_model_of_another_class_keeps_its_own_arrays_while_it_trains():
    # train needs only params, loss_and_grads, loss and evaluate; such a model may read its
    # weights through references of its own, so they must be the arrays Adam updates.
    class Wrapped:
        def __init__(self):
            self.inner = LibraryModel(d_model=16, d_k=8, seed=0)
            self.params = self.inner.params
            self.own, self.seen = dict(self.params), []       # its references to its weights

        def loss_and_grads(self, batch):
            self.seen.append(all(self.params[n] is self.own[n] for n in self.params))
            return self.inner.loss_and_grads(batch)

        def loss(self, batch):
            return self.inner.loss(batch)

        def evaluate(self, batch):
            return self.inner.evaluate(batch)

    model = Wrapped()
    original = dict(model.params)
    run = train(model, partial(tasks.library_batch, batch_size=8), 10, lr=1e-2, seed=1, n_checkpoints=2)
    reference, ref_params = checked_loop(LibraryModel(d_model=16, d_k=8, seed=0),
                                         partial(tasks.library_batch, batch_size=8), 10, 1e-2, 1)
    assert all(model.seen) and all(model.params[n] is original[n] for n in original)
    assert np.array_equal(run.loss, reference)
    assert all(np.array_equal(model.params[n], ref_params[n]) for n in original)


# --- train_many: independent runs side by side ------------------------------------------------
def repeat_jobs():
    make = partial(tasks.repeat_batch, batch_size=4, length=20)
    return {(kind, seed): dict(model=repeat_model(kind, seed), make_batch=make, steps=6, lr=1e-2,
                               seed=seed, eval_batch=tasks.repeat_batch(1, 8, length=20),
                               n_checkpoints=3)
            for kind in ("2 layers", "1 layer") for seed in (0, 1)}


def assert_same_run(got, want):
    for name in ("loss", "checkpoint_steps", "accuracy", "maps"):
        np.testing.assert_array_equal(getattr(got, name), getattr(want, name), err_msg=name)
    for name, value in want.model.params.items():
        np.testing.assert_array_equal(got.model.params[name], value, err_msg=name)


def assert_train_many_is_train(processes):
    jobs = repeat_jobs()
    before = {key: {n: v.copy() for n, v in job["model"].params.items()} for key, job in jobs.items()}
    runs = train_many(jobs, processes=processes)
    assert list(runs) == list(jobs)
    for key, job in jobs.items():
        for name, value in before[key].items():       # the models handed in stay untrained
            np.testing.assert_array_equal(job["model"].params[name], value)
        alone = train(repeat_model(*key), job["make_batch"], job["steps"], lr=job["lr"],
                      seed=job["seed"], eval_batch=job["eval_batch"], n_checkpoints=3)
        assert_same_run(runs[key], alone)
    # a run must not be another job's: the seeds and the models differ
    assert not np.array_equal(runs["2 layers", 0].loss, runs["2 layers", 1].loss)


def test_train_many_in_this_process_is_train_bit_for_bit():
    assert_train_many_is_train(processes=1)


@pytest.mark.slow     # worker processes
def test_train_many_in_worker_processes_is_train_bit_for_bit():
    assert_train_many_is_train(processes=2)
    assert_train_many_is_train(processes=2)      # the kept workers, a second time


@pytest.mark.slow     # worker processes
def test_a_failed_run_raises_here_and_the_next_call_starts_new_workers():
    from attention_course import tiny_model

    runs = train_many(repeat_jobs(), processes=2)
    workers = tiny_model._pool[0].workers
    bad = repeat_jobs()
    bad["2 layers", 1] = dict(bad["2 layers", 1], make_batch=partial(tasks.repeat_batch,
                                                                     batch_size=-1))
    with pytest.raises(ValueError, match="batch_size must be"):   # raised in a worker, seen here
        train_many(bad, processes=2)
    assert all(w.poll() is not None for w in workers)          # ended, not left running
    again = train_many(repeat_jobs(), processes=2)
    assert tiny_model._pool[0].workers != workers
    assert_same_run(again["1 layer", 1], runs["1 layer", 1])


@pytest.mark.slow     # worker processes
def test_started_workers_are_the_ones_train_many_uses():
    from attention_course import tiny_model

    tiny_model.start_workers(processes=2)
    workers = tiny_model._pool[0].workers
    runs = train_many(repeat_jobs(), processes=2)
    assert tiny_model._pool[0].workers is workers
    assert_same_run(runs["2 layers", 1], train(**repeat_jobs()["2 layers", 1]))


def test_start_workers_names_what_is_wrong():
    from attention_course import tiny_model

    with pytest.raises(ValueError, match="processes must be an int >= 1"):
        tiny_model.start_workers(processes=0)


@pytest.mark.slow     # worker processes
@pytest.mark.skipif(not hasattr(os, "getpgid"), reason="process groups are POSIX")
def test_workers_are_outside_the_process_group_a_kernel_ends_at_shutdown():
    # ipykernel's shutdown signals the children in its own process group and waits until none
    # is left; a child that ignores SIGTERM (multiprocessing's resource tracker does) held it
    # for seconds
    psutil = pytest.importorskip("psutil")
    train_many(repeat_jobs(), processes=2)
    mine = os.getpgrp()
    children = psutil.Process().children(recursive=True)
    assert len(children) >= 2
    assert [c.pid for c in children if os.getpgid(c.pid) == mine] == []


@pytest.mark.parametrize(("jobs", "processes", "words"), [
    ({}, None, "jobs must be a non-empty mapping"),
    ([1, 2], None, "jobs must be a non-empty mapping"),
    ({"a": {"model": 1}}, None, "jobs['a'] must be a dict with model, make_batch and steps"),
    ({"a": {"model": 1, "make_batch": 2, "steps": 3, "progress": True}}, None, "no screen"),
    ({"a": {"model": 1, "make_batch": 2, "steps": 3}}, 0, "processes must be an int >= 1"),
    ({"a": {"model": 1, "make_batch": 2, "steps": 3}}, 1.5, "processes must be an int >= 1"),
])
def test_train_many_names_what_is_wrong(jobs, processes, words):
    with pytest.raises(ValueError, match=re.escape(words)):
        train_many(jobs, processes=processes)
