"""Adam against torch.optim.Adam (stored steps always, live when torch imports) and its properties."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_course.optim import Adam

REF = np.load(Path(__file__).parent / "reference" / "backprop_reference.npz")


def adam_case():
    prefix = "adam_3_steps/"
    return {k[len(prefix):]: REF[k] for k in REF.files if k.startswith(prefix)}


def test_three_steps_match_torch_stored():
    c = adam_case()
    names = sorted(k[len("param_"):] for k in c if k.startswith("param_"))
    assert names == ["b", "w"]
    params = {n: c[f"param_{n}"].copy() for n in names}
    opt = Adam(params, lr=float(c["lr"]))
    for i in range(3):
        opt.step({n: c[f"grad{i}_{n}"] for n in names})
        for n in names:
            assert params[n].dtype == np.float32
            np.testing.assert_allclose(params[n], c[f"after{i}_{n}"], rtol=1e-6, atol=1e-7,
                                       err_msg=f"step {i + 1}, {n}")
    assert opt.t == 3


def load_generator():
    path = Path(__file__).parent / "reference" / "make_backprop_reference.py"
    spec = importlib.util.spec_from_file_location("make_backprop_reference", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("weight_decay", [0.0, 0.1])
def test_live_against_torch(weight_decay):
    pytest.importorskip("torch", reason="PyTorch not installed: the stored steps still ran")
    gen = load_generator()
    rng = np.random.default_rng(11)
    params = {"a": rng.standard_normal((4, 3)).astype(np.float32),
              "b": rng.standard_normal(5).astype(np.float32)}
    grads = [{k: rng.standard_normal(v.shape).astype(np.float32) for k, v in params.items()}
             for _ in range(5)]
    expected = gen.torch_adam(params, grads, lr=3e-3, betas=(0.8, 0.99), eps=1e-6,
                              weight_decay=weight_decay)
    ours = {k: v.copy() for k, v in params.items()}
    opt = Adam(ours, lr=3e-3, betas=(0.8, 0.99), eps=1e-6, weight_decay=weight_decay)
    for g, after in zip(grads, expected, strict=True):
        opt.step(g)
        for k in ours:
            np.testing.assert_allclose(ours[k], after[k], rtol=1e-6, atol=1e-7)


@settings(max_examples=20, deadline=None, derandomize=True, database=None)
@given(g=st.floats(1e-3, 1e3) | st.floats(-1e3, -1e-3), lr=st.floats(1e-4, 1e-1))
def test_bias_correction_makes_the_first_step_lr_in_the_direction_against_the_gradient(g, lr):
    # After one step m̂ = g and v̂ = g², so the step is lr · g / (|g| + eps): about lr, whatever |g|.
    # Without the bias correction it would be lr · 0.1 / sqrt(0.001) ≈ 3.2 · lr.
    p = {"x": np.zeros(1)}
    Adam(p, lr=lr, eps=0.0).step({"x": np.array([g])})
    assert p["x"][0] == pytest.approx(-np.sign(g) * lr, rel=1e-12)


def test_updates_in_place_keeps_dtype_and_minimises_a_quadratic():
    target = np.array([3.0, -2.0, 0.5], dtype=np.float32)
    x = np.zeros(3, dtype=np.float32)
    params = {"x": x}
    opt = Adam(params, lr=0.1)
    for _ in range(300):
        opt.step({"x": 2 * (params["x"] - target)})           # gradient of |x - target|²
    assert params["x"] is x and x.dtype == np.float32
    np.testing.assert_allclose(x, target, atol=1e-2)
    assert opt.m["x"].dtype == opt.v["x"].dtype == np.float32


def test_a_float64_gradient_does_not_upcast_a_float32_parameter():
    params = {"w": np.ones((2, 2), np.float32)}
    opt = Adam(params, lr=0.01)
    opt.step({"w": np.ones((2, 2))})
    assert params["w"].dtype == np.float32 and opt.m["w"].dtype == np.float32


def test_zero_gradient_does_not_move_a_fresh_parameter():
    params = {"w": np.array([1.0, 2.0])}
    Adam(params).step({"w": np.zeros(2)})
    np.testing.assert_array_equal(params["w"], [1.0, 2.0])


@pytest.mark.parametrize("grads, error, words", [
    ({"w": np.ones(2)}, KeyError, "missing ['b']"),
    ({"w": np.ones(2), "b": np.ones(1), "c": np.ones(1)}, KeyError, "unknown ['c']"),
    ({"w": np.ones(3), "b": np.ones(1)}, ValueError, "grads['w'] has shape (3,)"),
    ({"w": np.ones(2, int), "b": np.ones(1)}, TypeError, "grads['w'] must have a floating dtype"),
    ([np.ones(2)], TypeError, "grads must be a dict"),
])
def test_bad_gradients_are_named(grads, error, words):
    opt = Adam({"w": np.zeros(2), "b": np.zeros(1)})
    with pytest.raises(error) as info:
        opt.step(grads)
    assert words in str(info.value)
    assert opt.t == 0                   # a refused step counts for nothing


@pytest.mark.parametrize("kwargs, error, words", [
    (dict(params={"w": [1.0, 2.0]}), TypeError, "must be a NumPy array"),
    (dict(params={"w": np.ones(2, int)}), TypeError, "params['w'] must have a floating dtype"),
    (dict(params={"w": np.ones(2)}, lr=-1.0), ValueError, "lr must be a positive number"),
    (dict(params={"w": np.ones(2)}, betas=(0.9, 1.0)), ValueError, "betas must be two numbers"),
    (dict(params={}), TypeError, "non-empty dict"),
])
def test_bad_settings_are_named(kwargs, error, words):
    with pytest.raises(error) as info:
        Adam(**kwargs)
    assert words in str(info.value)
