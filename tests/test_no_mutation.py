"""No library function changes the arrays it is given, unless its docstring says that it does.

Each test draws valid inputs (shapes down to one position, one head, d_k = 1 and a batch of one,
and empty axes where the function accepts them; C-ordered, Fortran-ordered and strided arrays,
since whether a function writes through to its input can depend on the layout), keeps a copy of
every argument, calls the function and compares every argument with its copy, bit for bit. A layer
or a model that is called, or passed in, is an argument too: its weights are compared the same way.

At the end, every public function and class of these modules is either checked here (``@covers``)
or left out by name with the reason (``LEFT_OUT``); what may write into its arguments is named in
``WRITES`` with the words of its docstring that say so.
"""

from __future__ import annotations

import importlib
import inspect

import matplotlib.pyplot as plt
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from attention_course import backprop as bp
from attention_course import plots
from attention_course.attention import (
    check_finite,
    padding_mask,
    prepare_attention_inputs,
    scaled_dot_product_attention,
)
from attention_course.chunked import online_softmax_attention
from attention_course.decoding import (
    KVCache,
    attend_one,
    decode_causal,
    merge_softmax_states,
    softmax_state,
    state_output,
)
from attention_course.examples import meaning_embeddings, toy_embeddings
from attention_course.fast import fast_attention
from attention_course.gradcheck import check_gradient, numerical_gradient, relative_error
from attention_course.grouped import GroupedQueryAttention, grouped_query_attention, repeat_kv
from attention_course.head_patterns import MAX_LEN, PATTERNS, hand_made_embeddings, hand_set_heads
from attention_course.multihead import (
    MultiHeadAttention,
    check_layer_inputs,
    from_torch_mha_mask,
    merge_heads,
    multi_head_attention_reference,
    split_heads,
)
from attention_course.optim import Adam
from attention_course.positional import alibi_bias, apply_rotary
from attention_course.pretrained import (
    first_token_scores,
    induction_scores,
    previous_token_scores,
    token_losses,
)
from attention_course.projections import cosine_similarity, project_qkv
from attention_course.softmax import softmax
from attention_course.tasks import library_batch
from attention_course.tiny_model import AttentionOnlyModel, LibraryModel

# The modules whose names the package also gives to functions of theirs.
attention = importlib.import_module("attention_course.attention")
positional = importlib.import_module("attention_course.positional")
softmax_module = importlib.import_module("attention_course.softmax")

FEW = settings(max_examples=30, deadline=None, derandomize=True, database=None)

SEEDS = st.integers(0, 2**32 - 1)
FLOATS = st.sampled_from([np.float32, np.float64])               # what every function accepts
ANY_FLOAT = st.sampled_from([np.float16, np.float32, np.float64])
LAYOUTS = st.sampled_from(["C", "F", "strided"])
SIZE = st.integers(1, 3)                                          # an axis that must not be empty
SIZE0 = st.integers(0, 3)                                         # an axis that may be empty
BATCH = st.lists(st.integers(1, 2), max_size=2).map(tuple)       # no batch, a batch of one, ...
BATCH0 = st.lists(st.integers(0, 2), max_size=2).map(tuple)      # ... or an empty batch


# ---- the check ----------------------------------------------------------------------------------

def _frozen(obj):
    """A copy of ``obj`` to compare with later: arrays copied; dicts, lists, tuples and the
    attributes of the library's own objects (layers, models, caches, batches) walked."""
    if isinstance(obj, np.ndarray):
        return obj.copy()
    if isinstance(obj, dict):
        return {key: _frozen(value) for key, value in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_frozen(value) for value in obj]
    if _library_object(obj):
        return _frozen(vars(obj))
    return obj


def _assert_same(before, now, where: str) -> None:
    if isinstance(before, np.ndarray):
        assert isinstance(now, np.ndarray), f"{where} is no longer an array"
        assert (now.dtype, now.shape) == (before.dtype, before.shape), \
            f"{where} changed from {before.dtype} {before.shape} to {now.dtype} {now.shape}"
        # bytes: -0.0 against 0.0 and one NaN against another count as changes too
        assert now.tobytes() == before.tobytes(), f"{where} was written:\nbefore {before!r}\nafter  {now!r}"
    elif isinstance(before, dict):
        now = now if isinstance(now, dict) else vars(now)
        assert now.keys() == before.keys(), f"{where} changed its keys"
        for key in before:
            _assert_same(before[key], now[key], f"{where}[{key!r}]")
    elif isinstance(before, list):
        now = list(now)
        assert len(now) == len(before), f"{where} changed its length"
        for i, (b, n) in enumerate(zip(before, now, strict=True)):
            _assert_same(b, n, f"{where}[{i}]")
    else:
        assert now is before or now == before, f"{where} changed from {before!r} to {now!r}"


def _library_object(obj) -> bool:
    return type(obj).__module__.startswith("attention_course")


def call(fn, *args, owner_unchanged: bool = True, **kwargs):
    """``fn(*args, **kwargs)``, asserting afterwards that no argument changed, nor the layer or
    model that is called or whose method ``fn`` is (unless ``owner_unchanged=False``: a method
    documented to change it)."""
    given_ = dict(inspect.signature(fn).bind(*args, **kwargs).arguments)
    owner = fn if _library_object(fn) else getattr(fn, "__self__", None)
    if owner_unchanged and owner is not None and _library_object(owner):
        given_["(the object itself)"] = owner
    before = _frozen(given_)
    result = fn(*args, **kwargs)
    name = getattr(fn, "__qualname__", type(fn).__qualname__)
    for arg in given_:
        _assert_same(before[arg], given_[arg], f"{name}: {arg}")
    return result


def array(rng, shape, dtype=np.float64, layout="C"):
    """Standard normal numbers of ``shape`` and ``dtype``, laid out as ``layout`` says."""
    a = np.asarray(rng.standard_normal(shape), dtype=dtype)
    if layout == "F" and a.ndim > 1:                               # asfortranarray makes a 0-d array 1-d
        return np.asfortranarray(a)
    if layout == "strided" and a.ndim:
        wide = np.zeros(a.shape[:-1] + (2 * a.shape[-1],), dtype)
        wide[..., ::2] = a
        return wide[..., ::2]                                      # every other column of a wider array
    return a


COVERED: set[str] = set()


def covers(*names: str):
    """Record which functions a test checks (``module.name``), for the list of the last test."""
    def mark(test):
        COVERED.update(names)
        return test
    return mark


def test_the_check_sees_a_write():
    def scale_in_place(x, factor):
        x *= factor
        return x

    with pytest.raises(AssertionError, match="scale_in_place: x was written"):
        call(scale_in_place, np.ones((1, 2)), 2.0)
    with pytest.raises(AssertionError, match="x was written"):
        call(scale_in_place, np.zeros(3), -1.0)                  # 0.0 became -0.0
    call(scale_in_place, np.ones(3), 1.0)                         # the same bits: no change
    cache = KVCache(n_layers=1, num_kv_heads=1, head_dim=1)
    with pytest.raises(AssertionError, match=r"append: \(the object itself\)"):
        call(cache.append, 0, np.ones((1, 1, 1), np.float32), np.ones((1, 1, 1), np.float32))


# ---- softmax and attention ----------------------------------------------------------------------

@covers("softmax.softmax")
@FEW
@given(seed=SEEDS, shape=st.lists(SIZE0, min_size=1, max_size=3).map(tuple), dtype=ANY_FLOAT,
       layout=LAYOUTS, blocked=st.sampled_from([0.0, 0.3, 1.0]), temperature=st.sampled_from([1.0, 0.5]),
       data=st.data())
def test_softmax(seed, shape, dtype, layout, blocked, temperature, data):
    rng = np.random.default_rng(seed)
    x = array(rng, shape, dtype, layout)
    x[rng.random(shape) < blocked] = -np.inf
    axis = data.draw(st.integers(-len(shape), len(shape) - 1), label="axis")
    assert call(softmax, x, axis=axis, temperature=temperature).shape == shape


@covers("softmax.softmax_rows")
@FEW
@given(seed=SEEDS, shape=st.lists(SIZE, min_size=1, max_size=3).map(tuple), dtype=FLOATS,
       layout=LAYOUTS, blocked=st.sampled_from([0.0, 0.3, 1.0]), check=st.booleans())
def test_softmax_rows(seed, shape, dtype, layout, blocked, check):
    rng = np.random.default_rng(seed)
    x = array(rng, shape, dtype, layout)
    x[rng.random(shape) < blocked] = -np.inf
    # inplace=True writes the weights over the scores, as its docstring says: not checked
    call(softmax_module.softmax_rows, x, -1, check=check)


@covers("attention.padding_mask")
@FEW
@given(seed=SEEDS, B=SIZE0, S=SIZE0)
def test_padding_mask(seed, B, S):
    lengths = np.random.default_rng(seed).integers(0, S + 1, size=B)
    assert call(padding_mask, lengths, S).shape == (B, 1, S)


@st.composite
def attention_inputs(draw, dtypes=ANY_FLOAT, sizes=SIZE0, batches=BATCH0):
    """q (..., L, E), k (..., S, E), v (..., S, Ev) and one of the masks (or none)."""
    rng = np.random.default_rng(draw(SEEDS))
    batch = draw(batches)
    L, S, E, Ev = draw(sizes), draw(sizes), draw(SIZE), draw(sizes)
    dtype, layout = draw(dtypes), draw(LAYOUTS)
    q, k, v = (array(rng, batch + shape, dtype, layout) for shape in ((L, E), (S, E), (S, Ev)))
    kind = draw(st.sampled_from(["none", "causal", "bool", "batch bool", "float"]))
    mask = None
    if kind == "bool":
        mask = rng.random((L, S)) < 0.6
    elif kind == "batch bool":
        mask = rng.random(batch + (L, S)) < 0.6
    elif kind == "float":
        mask = np.where(rng.random((L, S)) < 0.6, rng.standard_normal((L, S)), -np.inf).astype(dtype)
    return {"q": q, "k": k, "v": v, "attn_mask": mask, "is_causal": kind == "causal",
            "scale": draw(st.sampled_from([None, 0.5]))}


@covers("attention.scaled_dot_product_attention", "attention.prepare_attention_inputs",
        "attention.check_finite", "attention.attend_prepared")
@FEW
@given(inputs=attention_inputs())
def test_scaled_dot_product_attention(inputs):
    out, w = call(scaled_dot_product_attention, **inputs, return_weights=True)
    assert out.shape[-2:] == inputs["q"].shape[-2:-1] + inputs["v"].shape[-1:]
    q, k, v, mask, scale, dtype, _ = call(prepare_attention_inputs, *inputs.values())
    call(check_finite, q=inputs["q"], k=inputs["k"], v=inputs["v"])
    if dtype != np.float16:
        # normalise, its own softmax, writes over the scores it made, nothing that it was given
        call(attention.attend_prepared, q, k, v, mask, scale)


@covers("chunked.online_softmax_attention")
@FEW
@given(inputs=attention_inputs(), block_q=SIZE, block_k=SIZE)
def test_online_softmax_attention(inputs, block_q, block_k):
    call(online_softmax_attention, **inputs, block_q=block_q, block_k=block_k)


@covers("fast.kernel.fast_attention")
@FEW
@given(inputs=attention_inputs(), block_q=st.sampled_from([None, 1, 2]))
def test_fast_attention(inputs, block_q):
    call(fast_attention, **inputs, block_q=block_q)


# ---- multi-head and grouped-query attention ------------------------------------------------------

@covers("multihead.split_heads", "multihead.merge_heads")
@FEW
@given(seed=SEEDS, batch=BATCH0, H=SIZE, L=SIZE0, d=SIZE, dtype=ANY_FLOAT, layout=LAYOUTS)
def test_split_and_merge_heads(seed, batch, H, L, d, dtype, layout):
    rng = np.random.default_rng(seed)
    assert call(split_heads, array(rng, batch + (L, H * d), dtype, layout), H).shape == batch + (H, L, d)
    assert call(merge_heads, array(rng, batch + (H, L, d), dtype, layout)).shape == batch + (L, H * d)


@covers("multihead.from_torch_mha_mask")
@FEW
@given(seed=SEEDS, shape=st.lists(SIZE0, max_size=3).map(tuple), boolean=st.booleans())
def test_from_torch_mha_mask(seed, shape, boolean):
    rng = np.random.default_rng(seed)
    mask = rng.random(shape) < 0.5
    if not boolean:
        mask = np.where(mask, -np.inf, rng.standard_normal(shape))
    call(from_torch_mha_mask, mask)


@st.composite
def layer_inputs(draw, E):
    """query (..., L, E) and key, value (..., S, E) or None (self-attention)."""
    rng = np.random.default_rng(draw(SEEDS))
    batch, L, S = draw(BATCH0), draw(SIZE0), draw(SIZE0)
    dtype, layout = draw(FLOATS), draw(LAYOUTS)
    query = array(rng, batch + (L, E), dtype, layout)
    if draw(st.booleans()):
        return {"query": query, "key": None, "value": None}, batch, L, L
    key, value = (array(rng, batch + (S, E), dtype, layout) for _ in range(2))
    return {"query": query, "key": key, "value": value}, batch, L, S


@covers("multihead.MultiHeadAttention", "multihead.multi_head_attention_reference",
        "multihead.check_layer_inputs")
@FEW
@given(data=st.data(), H=SIZE, d=SIZE, bias=st.booleans(),
       kind=st.sampled_from(["none", "causal", "bool", "float", "padding", "causal padding"]),
       need_weights=st.booleans(), average=st.booleans())
def test_multi_head_attention(data, H, d, bias, kind, need_weights, average):
    E = H * d
    mha = MultiHeadAttention(E, H, bias=bias, seed=0)
    inputs, batch, L, S = data.draw(layer_inputs(E))
    rng = np.random.default_rng(0)
    masks = {"is_causal": kind.startswith("causal")}
    if kind == "bool":
        masks["attn_mask"] = rng.random((L, S)) < 0.6
    elif kind == "float":
        masks["attn_mask"] = np.where(rng.random((L, S)) < 0.6, 0.0, -np.inf)
    elif kind.endswith("padding"):
        masks["key_padding_mask"] = rng.random(batch + (S,)) < 0.6
    call(mha, **inputs, **masks, need_weights=need_weights, average_attn_weights=average)
    if "key_padding_mask" not in masks:
        call(multi_head_attention_reference, mha, **inputs, **masks)
    call(check_layer_inputs, *inputs.values(), E)


@covers("grouped.repeat_kv")
@FEW
@given(seed=SEEDS, batch=BATCH0, G=SIZE, per_group=SIZE, S=SIZE0, d=SIZE, layout=LAYOUTS)
def test_repeat_kv(seed, batch, G, per_group, S, d, layout):
    x = array(np.random.default_rng(seed), batch + (G, S, d), np.float64, layout)
    assert call(repeat_kv, x, G * per_group).shape == batch + (G * per_group, S, d)


@covers("grouped.grouped_query_attention")
@FEW
@given(seed=SEEDS, batch=BATCH0, G=SIZE, per_group=SIZE, L=SIZE0, S=SIZE0, d=SIZE, dv=SIZE,
       dtype=ANY_FLOAT, layout=LAYOUTS,
       kind=st.sampled_from(["none", "causal", "(L, S)", "(1, L, S)", "(H, L, S)"]))
def test_grouped_query_attention(seed, batch, G, per_group, L, S, d, dv, dtype, layout, kind):
    rng = np.random.default_rng(seed)
    H = G * per_group
    q, k, v = (array(rng, batch + shape, dtype, layout) for shape in ((H, L, d), (G, S, d), (G, S, dv)))
    mask_shapes = {"(L, S)": (L, S), "(1, L, S)": (1, L, S), "(H, L, S)": (H, L, S)}
    mask = rng.random(mask_shapes[kind]) < 0.6 if kind in mask_shapes else None
    call(grouped_query_attention, q, k, v, attn_mask=mask, is_causal=kind == "causal",
         return_weights=True)


@covers("grouped.GroupedQueryAttention")
@FEW
@given(data=st.data(), G=SIZE, per_group=SIZE, d=SIZE, bias=st.booleans(), causal=st.booleans())
def test_grouped_query_attention_layer(data, G, per_group, d, bias, causal):
    H = G * per_group
    gqa = GroupedQueryAttention(H * d, H, G, bias=bias, seed=0)
    inputs, *_ = data.draw(layer_inputs(H * d))
    call(gqa, **inputs, is_causal=causal, average_attn_weights=False)
    call(GroupedQueryAttention.from_multi_head, MultiHeadAttention(H * d, H, bias=bias, seed=1))


# ---- positions ----------------------------------------------------------------------------------

@covers("positional.apply_rotary", "positional.rotary_tables", "positional.rotate_pairs")
@FEW
@given(seed=SEEDS, batch=BATCH0, L=SIZE0, pairs=SIZE, dtype=ANY_FLOAT, layout=LAYOUTS,
       given_positions=st.booleans())
# One position of one pair: the halves of x that the rotation takes apart are contiguous already,
# the one layout in which they are not copied unless the rotation copies them itself.
@example(seed=0, batch=(), L=1, pairs=1, dtype=np.float64, layout="C", given_positions=True)
def test_apply_rotary(seed, batch, L, pairs, dtype, layout, given_positions):
    rng = np.random.default_rng(seed)
    x = array(rng, batch + (L, 2 * pairs), dtype, layout)
    positions = rng.integers(0, 50, size=L) if given_positions else None
    assert call(apply_rotary, x, positions).dtype == dtype
    angles = np.arange(L) if positions is None else positions
    tables = call(positional.rotary_tables, angles, 2 * pairs, 10000.0, dtype)
    call(positional.rotate_pairs, x, *tables)


@covers("positional.alibi_bias")
@FEW
@given(seed=SEEDS, L=SIZE0, S=SIZE0, integer=st.booleans(), own_keys=st.booleans())
def test_alibi_bias(seed, L, S, integer, own_keys):
    rng = np.random.default_rng(seed)
    draw = (lambda n: rng.integers(-5, 50, size=n)) if integer else (lambda n: rng.uniform(-5, 50, n))
    call(alibi_bias, draw(L), draw(S) if own_keys else None, slope=0.25)


# ---- projections, decoding ----------------------------------------------------------------------

@covers("projections.project_qkv", "projections.cosine_similarity")
@FEW
@given(seed=SEEDS, batch=BATCH0, n=SIZE0, d_model=SIZE, d_k=SIZE, d_v=SIZE, dtype=ANY_FLOAT,
       layout=LAYOUTS, zero_rows=st.booleans())
def test_projections(seed, batch, n, d_model, d_k, d_v, dtype, layout, zero_rows):
    rng = np.random.default_rng(seed)
    x = array(rng, batch + (n, d_model), dtype, layout)
    W_q, W_k, W_v = (array(rng, (d_model, w), dtype, layout) for w in (d_k, d_k, d_v))
    call(project_qkv, x, W_q, W_k, W_v)
    a, b = array(rng, batch + (n, d_model), dtype, layout), array(rng, (n, d_model), dtype, layout)
    if zero_rows:
        b[..., :1, :] = 0.0                                       # cosine 0 for a zero vector
    call(cosine_similarity, a, b)


@covers("decoding.softmax_state", "decoding.merge_softmax_states", "decoding.state_output",
        "decoding.attend_one")
@FEW
@given(seed=SEEDS, batch=BATCH0, t=SIZE0, split=SIZE0, d=SIZE, dv=SIZE, dtype=FLOATS, layout=LAYOUTS)
def test_softmax_states(seed, batch, t, split, d, dv, dtype, layout):
    rng = np.random.default_rng(seed)
    q, k, v = (array(rng, batch + shape, dtype, layout) for shape in ((d,), (t, d), (t, dv)))
    cut = min(split, t)
    a = call(softmax_state, q, k[..., :cut, :], v[..., :cut, :])
    b = call(softmax_state, q, k[..., cut:, :], v[..., cut:, :], scale=0.5)
    call(state_output, call(merge_softmax_states, a, b))
    call(attend_one, q, k, v)


@covers("decoding.decode_causal")
@FEW
@given(seed=SEEDS, batch=BATCH0, n=SIZE0, d=SIZE, dv=SIZE, dtype=FLOATS, layout=LAYOUTS)
def test_decode_causal(seed, batch, n, d, dv, dtype, layout):
    rng = np.random.default_rng(seed)
    q, k, v = (array(rng, batch + shape, dtype, layout) for shape in ((n, d), (n, d), (n, dv)))
    assert call(decode_causal, q, k, v).shape == batch + (n, dv)


@covers("decoding.KVCache")
@FEW
@given(seed=SEEDS, G=SIZE, per_group=SIZE, d=SIZE, steps=st.lists(SIZE0, min_size=1, max_size=3),
       layout=LAYOUTS)
def test_kv_cache(seed, G, per_group, d, steps, layout):
    rng = np.random.default_rng(seed)
    cache = KVCache(n_layers=2, num_kv_heads=G, head_dim=d, dtype=np.float64)
    for new in steps:
        k, v = (array(rng, (G, new, d), np.float64, layout) for _ in range(2))
        # append adds to the cache, as its docstring says; the keys and values it is given stay
        call(cache.append, 1, k, v, owner_unchanged=False)
    if cache.values(1).shape[1]:
        call(cache.attend, 1, array(rng, (G * per_group, d), np.float64, layout))


# ---- backprop -----------------------------------------------------------------------------------

@covers("backprop.softmax_forward", "backprop.softmax_backward")
@FEW
@given(seed=SEEDS, shape=st.lists(SIZE, min_size=1, max_size=3).map(tuple), dtype=FLOATS,
       layout=LAYOUTS, kind=st.sampled_from(["none", "bool", "float", "-inf"]))
def test_softmax_pair(seed, shape, dtype, layout, kind):
    rng = np.random.default_rng(seed)
    x = array(rng, shape, dtype, layout)
    mask = None
    if kind == "bool":
        mask = rng.random(shape[-1:]) < 0.6
    elif kind == "float":
        mask = np.where(rng.random(shape) < 0.6, 0.0, -np.inf).astype(dtype)
    elif kind == "-inf":
        x[rng.random(shape) < 0.4] = -np.inf
    y, cache = call(bp.softmax_forward, x, mask)
    call(bp.softmax_backward, array(rng, shape, dtype, layout), cache)


@covers("backprop.attention_forward", "backprop.attention_backward")
@FEW
@given(inputs=attention_inputs(dtypes=FLOATS), layout=LAYOUTS, seed=SEEDS)
def test_attention_pair(inputs, layout, seed):
    out, _, cache = call(bp.attention_forward, **inputs)
    call(bp.attention_backward, array(np.random.default_rng(seed), out.shape, out.dtype, layout), cache)


@covers("backprop.linear_forward", "backprop.linear_backward")
@FEW
@given(seed=SEEDS, batch=BATCH0, n_in=SIZE, n_out=SIZE, bias=st.booleans(), dtype=FLOATS, layout=LAYOUTS)
def test_linear_pair(seed, batch, n_in, n_out, bias, dtype, layout):
    rng = np.random.default_rng(seed)
    x, W = array(rng, batch + (n_in,), dtype, layout), array(rng, (n_out, n_in), dtype, layout)
    y, cache = call(bp.linear_forward, x, W, array(rng, (n_out,), dtype) if bias else None)
    call(bp.linear_backward, array(rng, y.shape, dtype, layout), cache)


@covers("backprop.mha_forward", "backprop.mha_backward")
@FEW
@given(data=st.data(), H=SIZE, d=SIZE, bias=st.booleans(),
       kind=st.sampled_from(["none", "causal", "bool", "padding", "causal padding"]))
def test_mha_pair(data, H, d, bias, kind):
    E = H * d
    mha = MultiHeadAttention(E, H, bias=bias, seed=0)
    inputs, batch, L, S = data.draw(layer_inputs(E))
    dtype = inputs["query"].dtype
    params = {name: None if getattr(mha, name) is None else getattr(mha, name).astype(dtype)
              for name in ("in_proj_weight", "in_proj_bias", "out_proj_weight", "out_proj_bias")}
    query = inputs["query"]
    key = query if inputs["key"] is None else inputs["key"]
    value = query if inputs["value"] is None else inputs["value"]
    rng = np.random.default_rng(0)
    masks = {"is_causal": kind.startswith("causal")}
    if kind == "bool":
        masks["attn_mask"] = rng.random((L, S)) < 0.6
    elif kind.endswith("padding"):
        masks["key_padding_mask"] = rng.random(batch + (S,)) < 0.6
    out, _, cache = call(bp.mha_forward, query, key, value, params, H, **masks)
    call(bp.mha_backward, array(rng, out.shape, dtype, "strided"), cache)


@covers("backprop.embedding_forward", "backprop.embedding_backward")
@FEW
@given(seed=SEEDS, shape=st.lists(SIZE0, max_size=2).map(tuple), vocab=SIZE, E=SIZE, dtype=FLOATS,
       layout=LAYOUTS)
def test_embedding_pair(seed, shape, vocab, E, dtype, layout):
    rng = np.random.default_rng(seed)
    tokens = rng.integers(0, vocab, size=shape)
    x, cache = call(bp.embedding_forward, tokens, array(rng, (vocab, E), dtype, layout))
    call(bp.embedding_backward, array(rng, x.shape, dtype, layout), cache)


@covers("backprop.positional_forward", "backprop.positional_backward",
        "backprop.residual_forward", "backprop.residual_backward")
@FEW
# n = 0 is left out: positional_backward cannot reshape an empty (B, 0, E) gradient.
@given(seed=SEEDS, batch=BATCH0, n=SIZE, extra=SIZE0, E=SIZE, dtype=FLOATS, layout=LAYOUTS)
def test_positional_and_residual_pairs(seed, batch, n, extra, E, dtype, layout):
    rng = np.random.default_rng(seed)
    x = array(rng, batch + (n, E), dtype, layout)
    y, cache = call(bp.positional_forward, x, array(rng, (n + extra, E), np.float64, layout))
    call(bp.positional_backward, array(rng, y.shape, dtype, layout), cache)
    y, cache = call(bp.residual_forward, x, array(rng, x.shape, dtype, layout))
    call(bp.residual_backward, array(rng, y.shape, dtype, layout), cache)


@covers("backprop.layernorm_forward", "backprop.layernorm_backward")
@FEW
@given(seed=SEEDS, batch=BATCH0, E=SIZE, dtype=FLOATS, layout=LAYOUTS)
def test_layernorm_pair(seed, batch, E, dtype, layout):
    rng = np.random.default_rng(seed)
    x, gamma, beta = array(rng, batch + (E,), dtype, layout), array(rng, (E,), dtype), array(rng, (E,), dtype)
    y, cache = call(bp.layernorm_forward, x, gamma, beta)
    call(bp.layernorm_backward, array(rng, y.shape, dtype, layout), cache)


@covers("backprop.softmax_cross_entropy")
@FEW
@given(seed=SEEDS, shape=st.lists(SIZE0, max_size=2).map(tuple), C=SIZE, dtype=FLOATS, layout=LAYOUTS,
       masked=st.booleans())
def test_softmax_cross_entropy(seed, shape, C, dtype, layout, masked):
    rng = np.random.default_rng(seed)
    logits, targets = array(rng, shape + (C,), dtype, layout), rng.integers(0, C, size=shape)
    call(bp.softmax_cross_entropy, logits, targets, rng.random(shape) < 0.6 if masked else None)


# ---- models, optimiser, gradient check ----------------------------------------------------------

@covers("tiny_model.AttentionOnlyModel")
@FEW
@given(seed=SEEDS, B=SIZE, n=SIZE, vocab=SIZE, layers=st.integers(1, 2), heads=SIZE,
       positional=st.sampled_from(["none", "learned", "sinusoidal"]), causal=st.booleans(),
       ablate=st.booleans())
def test_attention_only_model(seed, B, n, vocab, layers, heads, positional, causal, ablate):
    rng = np.random.default_rng(seed)
    model = AttentionOnlyModel(vocab, d_model=4 * heads, n_layers=layers, n_heads=heads, max_len=4,
                               positional=positional, causal=causal, seed=seed % 100)
    tokens = rng.integers(0, vocab, size=(B, n))
    logits, _, cache = call(model.forward, tokens, ablate=[(0, 0)] if ablate else ())
    call(model.backward, array(rng, logits.shape, np.float32, "F"), cache)


@covers("tiny_model.LibraryModel")
@settings(FEW, max_examples=5)
@given(seed=SEEDS, B=SIZE, books=SIZE)
def test_library_model(seed, B, books):
    model = LibraryModel(n_keys=4, n_values=4, d_model=8, d_k=4, seed=seed % 100)
    call(model.loss_and_grads, library_batch(seed, B, n_books=books, n_keys=4, n_values=4))


@covers("optim.Adam")
@FEW
@given(seed=SEEDS, shapes=st.lists(st.lists(SIZE0, max_size=2).map(tuple), min_size=1, max_size=3),
       dtype=FLOATS, weight_decay=st.sampled_from([0.0, 0.1]))
def test_adam(seed, shapes, dtype, weight_decay):
    rng = np.random.default_rng(seed)
    params = {f"p{i}": array(rng, shape, dtype) for i, shape in enumerate(shapes)}
    opt = call(Adam, params, lr=0.1, weight_decay=weight_decay)
    grads = {name: array(rng, p.shape, np.float64, "F") for name, p in params.items()}
    # step updates the parameters in place, as its docstring says; the gradients it reads stay
    call(opt.step, grads, owner_unchanged=False)


@covers("gradcheck.numerical_gradient", "gradcheck.check_gradient", "gradcheck.relative_error")
@FEW
@given(seed=SEEDS, shape=st.lists(SIZE0, max_size=2).map(tuple), layout=LAYOUTS)
def test_gradcheck(seed, shape, layout):
    rng = np.random.default_rng(seed)
    x = array(rng, shape, np.float64, layout)
    # x is nudged in place, one entry at a time, and (as the docstring says) restored exactly
    g = call(numerical_gradient, lambda: float(np.sin(x).sum()), x)
    call(check_gradient, lambda: float(np.sin(x).sum()), x, np.cos(x))
    call(relative_error, g, array(rng, shape, np.float32, layout))


# ---- what the notebooks build on ----------------------------------------------------------------

@covers("pretrained.induction_scores", "pretrained.previous_token_scores",
        "pretrained.first_token_scores", "pretrained.token_losses")
@FEW
@given(seed=SEEDS, batch=BATCH, period=SIZE, V=SIZE, dtype=FLOATS, layout=LAYOUTS)
def test_real_model_scores(seed, batch, period, V, dtype, layout):
    rng = np.random.default_rng(seed)
    T = 2 * period
    weights = array(rng, batch + (T, T), dtype, layout)
    call(induction_scores, weights, period)
    call(previous_token_scores, weights)
    call(first_token_scores, weights)
    call(token_losses, array(rng, (T, V), dtype, layout), rng.integers(0, V, size=T))


@covers("head_patterns.hand_made_embeddings", "head_patterns.hand_set_heads",
        "examples.toy_embeddings", "examples.meaning_embeddings")
@FEW
@given(seed=SEEDS, L=st.integers(2, MAX_LEN), n_patterns=st.integers(1, 3))
def test_hand_made_embeddings_and_heads(seed, L, n_patterns):
    rng = np.random.default_rng(seed)
    tokens = [f"w{i}" for i in rng.integers(0, 5, size=L)]
    pronoun, antecedent = rng.choice(L, size=2, replace=False)
    roles = {"pronoun": int(pronoun), "antecedent": int(antecedent), "nouns": (int(antecedent),)}
    call(hand_made_embeddings, tokens, roles, d_model=24)
    call(hand_set_heads, tokens, roles, patterns=PATTERNS[:n_patterns], d_model=20 * n_patterns)
    call(toy_embeddings, tokens, 3)
    call(meaning_embeddings, ["the", "bank", "lent", "money"][:L])


@covers("plots.heatmap", "plots.set_heatmap", "plots.heatmaps", "plots.weight_bars", "plots.bar_artists",
        "plots.set_bars")
@settings(FEW, max_examples=4)
@given(seed=SEEDS, L=SIZE, S=SIZE, signed=st.booleans())
def test_plots(seed, L, S, signed):
    rng = np.random.default_rng(seed)
    w = array(rng, (L, S), np.float64, "F") if signed else rng.random((L, S))
    try:
        ax = call(plots.heatmap, w)
        call(plots.set_heatmap, ax, w[::-1].copy())
        call(plots.heatmaps, [w, w.T.copy()])
        row = np.ascontiguousarray(np.abs(w[0]))
        bar_ax = call(plots.weight_bars, row, [f"k{j}" for j in range(S)])
        bars, labels = call(plots.bar_artists, bar_ax)
        call(plots.set_bars, bars, labels, row[::-1].copy())
    finally:
        plt.close("all")


# ---- what is checked, what is not ---------------------------------------------------------------

MODULES = ("softmax", "attention", "multihead", "positional", "grouped", "chunked", "fast.kernel", "backprop",
           "projections", "cost", "decoding", "head_patterns", "gradcheck", "optim", "examples",
           "tiny_model", "pretrained", "plots", "tasks")

NUMBERS_ONLY = "takes no array, only numbers (sizes, an angle, a dtype)"
LEFT_OUT = {
    "attention.causal_mask": NUMBERS_ONLY,
    "attention.sliding_window_mask": NUMBERS_ONLY,
    "positional.frequencies": NUMBERS_ONLY,
    "positional.sinusoidal_positional_encoding": NUMBERS_ONLY,
    "positional.position_shift_matrix": NUMBERS_ONLY,
    "fast.kernel.default_block_q": NUMBERS_ONLY,
    "projections.plane_rotation": NUMBERS_ONLY,
    "head_patterns.head_gain": NUMBERS_ONLY,
    "head_patterns.layer_patterns": NUMBERS_ONLY,
    "cost.attention_flops": NUMBERS_ONLY,
    "cost.attention_memory_bytes": NUMBERS_ONLY,
    "cost.max_length_for_memory": NUMBERS_ONLY,
    "cost.recurrent_flops": NUMBERS_ONLY,
    "cost.layer_complexity": NUMBERS_ONLY,
    "cost.windowed_pairs": NUMBERS_ONLY,
    "cost.windowed_attention_flops": NUMBERS_ONLY,
    "cost.windowed_attention_memory_bytes": NUMBERS_ONLY,
    "cost.chunked_attention_memory_bytes": NUMBERS_ONLY,
    "cost.stored_bench": "takes a language code; reads a stored file",
    "cost.StoredBench": "a record of a stored benchmark run",
    "tiny_model.TrainingRun": "a record of a training run",
    "tiny_model.repeat_model": NUMBERS_ONLY,
    "tiny_model.two_token_model": NUMBERS_ONLY,
    # its docstring says so: the model it is given is trained in place
    "tiny_model.train": "writes into its argument: trains the model in place",
    "tiny_model.train_many": "starts worker processes, which the unit tier does not (conftest.py)",
    "tiny_model.start_workers": "starts worker processes, which the unit tier does not (conftest.py)",
    "pretrained.load": "loads the installed model (seconds); takes a path",
    "pretrained.default_model_path": "takes no argument",
    "pretrained.Config": "a record of the model's sizes",
    "pretrained.PretrainedModel": "needs the loaded model (seconds to load); its methods take token ids",
    "pretrained.TransformersSample": "a record of stored reference outputs",
    "pretrained.transformers_sample": "takes no argument; reads a stored file",
    "pretrained.repeated_random_tokens": NUMBERS_ONLY,
    "pretrained.forward_flops": "takes the model's Config and a length",
    "backprop.unchecked": "takes no argument; a context in which the passes skip their checks",
    "plots.cjk_font_path": "takes no argument",
    "plots.use_cjk_font": "takes no argument; sets matplotlib's font",
    "tasks.LibraryBatch": "a record of arrays, made by library_batch",
    "tasks.SequenceBatch": "a record of arrays, made by the *_batch functions",
    # the generator each of these takes is advanced, as a generator is for; no array goes in
    "tasks.library_batch": "takes a random generator, which it advances, and numbers",
    "tasks.previous_token_batch": "takes a random generator, which it advances, and numbers",
    "tasks.previous_two_batch": "takes a random generator, which it advances, and numbers",
    "tasks.first_and_previous_batch": "takes a random generator, which it advances, and numbers",
    "tasks.repeat_batch": "takes a random generator, which it advances, and numbers",
}

# Functions whose docstrings say that they write into what they are given (the words that say it),
# not checked for that write; what else they are given is checked above.
WRITES = {
    "optim.Adam.step": "update every parameter in place",        # the parameters given to Adam()
    "decoding.KVCache.append": "Add the keys and values",         # the cache itself
    "softmax.softmax_rows": "Write the weights over",             # its scores, with inplace=True
    "tiny_model.train": "Trained in place",                       # the model
}


def _public(module_name: str) -> set[str]:
    module = importlib.import_module(f"attention_course.{module_name}")
    return {f"{module_name}.{name}" for name, obj in vars(module).items()
            if not name.startswith("_") and (inspect.isfunction(obj) or inspect.isclass(obj))
            and obj.__module__ == module.__name__}


def test_every_public_function_is_checked_or_left_out_with_its_reason():
    public = set().union(*(_public(m) for m in MODULES))
    unaccounted = sorted(public - COVERED - set(LEFT_OUT))
    assert not unaccounted, ("check these in a test of this file (@covers), or add them to LEFT_OUT "
                             f"with the reason: {unaccounted}")
    assert not sorted((COVERED | set(LEFT_OUT)) - public), "names here that are no longer public"
    assert not sorted(COVERED & set(LEFT_OUT)), "names both checked and left out"


def test_what_writes_into_its_arguments_says_so():
    for name, words in WRITES.items():
        module_name, *path = name.split(".")
        obj = importlib.import_module(f"attention_course.{module_name}")
        for part in path:
            obj = getattr(obj, part)
        assert words in inspect.getdoc(obj), f"the docstring of {name} no longer says {words!r}"
