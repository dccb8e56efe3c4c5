"""attention_course.pretrained against transformers, on the vectors stored by
tests/reference/make_pretrained_reference.py (same GGUF file, independent dequantization,
tokenizer and forward pass)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from attention_course import pretrained

REF = Path(__file__).parent / "reference" / "pretrained_reference.npz"


@pytest.fixture(scope="module")
def ref():
    with np.load(REF) as data:
        return {k: data[k] for k in data.files}


@pytest.fixture(scope="module")
def model():
    return pretrained.load()


def _indices(ref, group):
    return sorted({int(k.split("/")[1]) for k in ref if k.startswith(group + "/")})


def test_token_ids_equal_transformers_tokenizer(model, ref):
    """Exactly transformers' ids, with the pre-tokenizer the model was trained with (numbers one
    character at a time). transformers' own pick for this file leaves that step out; on text whose
    only number characters are ASCII digits the two agree, and so do ours."""
    cases = _indices(ref, "ids")
    assert len(cases) >= 10
    differ = 0
    for i in cases:
        text = ref[f"ids/{i}/text"].tobytes().decode("utf-8")
        ids = model.encode(text)
        assert ids == ref[f"ids/{i}/ids_digits"].tolist(), text
        if not any(ch.isnumeric() and not ch.isascii() for ch in text):
            assert ids == ref[f"ids/{i}/ids"].tolist(), text
        differ += ids != ref[f"ids/{i}/ids"].tolist()
        # byte-level BPE loses nothing: decoding gives the text back
        assert model.decode(ids) == text
    assert differ <= 1


def test_logits_and_weights_equal_transformers(model, ref):
    for i in _indices(ref, "fwd"):
        ids = ref[f"fwd/{i}/ids"]
        layers = ref[f"fwd/{i}/layers"].tolist()
        logits, weights = model.forward(ids, return_weights=True, layers=layers)
        assert logits.shape == (ids.size, model.config.vocab_size)
        assert np.abs(logits[-1] - ref[f"fwd/{i}/last_logits"]).max() <= 1e-3
        assert np.abs(logits[:, ref[f"fwd/{i}/cols"]] - ref[f"fwd/{i}/logits_cols"]).max() <= 1e-3
        assert weights.shape == ref[f"fwd/{i}/weights"].shape
        assert np.abs(weights - ref[f"fwd/{i}/weights"]).max() <= 1e-4


def test_greedy_continuation_equals_transformers(model, ref):
    new = ref["gen/new"].tolist()
    assert model.generate(ref["gen/ids"], len(new)) == new
    assert model.generate(ref["gen/ids"], len(new), use_cache=False) == new


def test_the_rows_of_w_q_are_in_apply_rotarys_pair_order(model, ref):
    """Undo llama.cpp's interleaving (back to the halves convention) and the weights go wrong:
    the pair order of apply_rotary is what makes the file's W_Q and W_K right as stored."""
    c = model.config
    i = 0
    ids, w_ref = ref[f"fwd/{i}/ids"], ref[f"fwd/{i}/weights"]
    half = np.concatenate([np.arange(0, c.d_k, 2), np.arange(1, c.d_k, 2)])
    layer = model.layers[0]
    saved = layer["W_q"], layer["W_k"]
    try:
        layer["W_q"] = saved[0].reshape(c.H, c.d_k, -1)[:, half].reshape(saved[0].shape)
        layer["W_k"] = saved[1].reshape(c.G, c.d_k, -1)[:, half].reshape(saved[1].shape)
        _, w = model.forward(ids, return_weights=True, layers=[0])
    finally:
        layer["W_q"], layer["W_k"] = saved
    assert np.abs(w[0] - w_ref[0]).max() > 1e-2


def test_the_shipped_sample_is_a_slice_of_the_reference_and_the_model_agrees(model, ref):
    """The library's transformers_sample (notebook 09 compares with it) holds the reference's own
    numbers for the first forward sentence, and the forward pass meets the same limits on it."""
    sample = pretrained.transformers_sample()
    assert sample.ids.tolist() == ref["fwd/0/ids"].tolist() == model.encode(sample.text)
    assert np.array_equal(sample.cols, ref["fwd/0/cols"])
    assert np.array_equal(sample.logits, ref["fwd/0/logits_cols"])
    at = ref["fwd/0/layers"].tolist().index(sample.layer)
    assert np.array_equal(sample.weights, ref["fwd/0/weights"][at])
    assert sample.versions == ref["versions"].tobytes().decode("utf-8")
    T = len(sample.ids)
    assert sample.logits.shape == (T, sample.cols.size) and sample.weights.shape == (model.config.H, T, T)
    logits, weights = model.forward(sample.ids, return_weights=True, layers=[sample.layer])
    assert np.abs(logits[:, sample.cols] - sample.logits).max() <= 1e-3
    assert np.abs(weights[0] - sample.weights).max() <= 1e-4
