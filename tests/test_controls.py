"""attention_course.controls: the stored controls of 09 are what the functions compute, here, now."""

from __future__ import annotations

import numpy as np
import pytest

from attention_course import controls, pretrained


@pytest.fixture(scope="module")
def model():
    return pretrained.load()


@pytest.fixture(scope="module")
def data():
    return controls.stored()


def test_the_stored_heads_and_draws_are_those_the_functions_choose(model, data):
    top, scores = controls.induction_heads(model)
    assert top == data["top"]
    assert controls.same_layer_heads(top, scores) == data["same_layer"]
    draws = controls.random_draws(top, model.config.n_layers, model.config.H)
    assert draws == data["draws"] and len(draws) == controls.N_DRAWS
    assert all(not set(d) & set(top) and len(set(d)) == controls.N_HEADS for d in draws)


def test_stored_losses_are_recomputed_live(model, data):
    held = controls.trials(controls.HELD_OUT_SEEDS)
    # the same numbers on this machine's kernel, within what differs between BLAS kernels
    assert np.allclose(controls.second_copy_losses(model, held), data["intact"], atol=0.01)
    means = controls.head_means(model)
    worst = int(np.argmax(np.array(data["zero_draws"]).max(axis=1)))
    live = controls.second_copy_losses(model, held, controls.zero_ablation(data["draws"][worst]))
    assert np.allclose(live, data["zero_draws"][worst], atol=0.01)
    live = controls.second_copy_losses(model, held, controls.mean_ablation(data["top"], means))
    assert np.allclose(live, data["mean_top"], atol=0.01)


def test_the_ablation_hooks_do_what_they_say(model):
    ids = controls.trials([3])[:, :24]
    zero = model.run_with_hooks(ids, fwd_hooks=controls.zero_ablation([(5, 2)]))
    assert np.array_equal(zero[0], model.forward(ids[0], ablate=[(5, 2)]))
    means = controls.head_means(model)
    assert means.shape == (model.config.n_layers, model.config.H, model.config.d_k)
    _, cache = model.run_with_cache(ids, fwd_hooks=controls.mean_ablation([(5, 2)], means),
                                    names_filter="blocks.5.attn.hook_z")
    assert np.allclose(cache["z", 5][0, :, 2], means[5, 2])


def test_the_next_heads_are_the_next_by_score(model, data):
    top, scores = controls.induction_heads(model)
    assert controls.next_heads(top, scores) == data["next"]
    assert min(scores[p] for p in data["next"]) > max(scores[p] for p in data["same_layer"])
