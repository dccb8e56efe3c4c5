"""Tiny attention-only models, trained with Adam in NumPy in a few seconds (notebooks 07 and 08).

Two models, both composed of the forward/backward pairs of :mod:`attention_course.backprop`
(nothing here differentiates anything by itself):

- :class:`LibraryModel` - notebook 01's library, learned: a query attends over a shelf of books
  (each book's embedding is its key's plus its value's) and the value it reads out is
  classified. One layer, one head, cross-attention (L = 1, S = number of books).
- :class:`AttentionOnlyModel` - token embedding, optional positional encoding (none, learned or
  sinusoidal), ``n_layers`` residual blocks ``x + MultiHead(x)`` with a causal mask, and a
  linear read-out. The 1/√d_k scale can be switched off and the embeddings' initial size set,
  for notebook 07's experiment on why √d_k matters.

:class:`AttentionOnlyModel` can also be read head by head for notebook 08: silence heads
(``ablate``), take one head's weights (:meth:`~AttentionOnlyModel.head_weights`), its query-key
table and the K-composition table of two heads. :func:`repeat_model` and :func:`two_token_model`
build notebook 08's models, each pair of the same size.

:func:`train` runs Adam on fresh seeded batches and records the loss at every step and, at a few
checkpoints, the accuracy and the attention weights on a fixed probe example: the data behind
notebook 07's checkpoint slider. :func:`train_many` runs independent trainings side by side, one
worker process per core (notebook 08's seeds).

Everything is float32 (the activations stay float32: scales are Python floats, never NumPy
float64 scalars, which would promote the arrays).

Notation: W_Q, W_K, W_V are ``(d_model, h·d_k)``, W_O is ``(h·d_k, d_model)``, as in the course's
table of symbols (x @ W). The backprop functions take torch's ``(out, in)`` layout, hence the
transposes.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
from threadpoolctl import ThreadpoolController, threadpool_limits

from . import backprop as bp
from ._validate import assume_finite
from .hooks import ActivationCache, Hooks, zero_ablate_head
from .multihead import merge_heads, split_heads
from .optim import Adam
from .positional import sinusoidal_positional_encoding
from .progress import ProgressLine
from .softmax import softmax
from .tasks import LibraryBatch, SequenceBatch
from .workers import WorkerPool

__all__ = ["AttentionOnlyModel", "LibraryModel", "TrainingRun", "repeat_model", "start_workers", "train",
           "train_many", "two_token_model"]

POSITIONAL = ("none", "learned", "sinusoidal")

# A forward pass with no hook to run and nothing to keep: each hook point returns at once.
_NO_HOOKS = Hooks()


def _batch_of(tokens):
    """tokens (n,) as a batch of one (1, n), as TransformerLens's methods read them."""
    tokens = np.asarray(tokens)
    return tokens[None] if tokens.ndim == 1 else tokens


_blas = []


def _one_blas_thread(method):
    """Run an evaluation method on one BLAS thread, as :func:`train` runs by default.

    Its products are as small as a training step's (a few thousand rows of width 32 at most).
    One controller, made on first use, keeps each call cheap.
    """
    @functools.wraps(method)
    def single(*args, **kwargs):
        if not _blas:
            _blas.append(ThreadpoolController())
        with _blas[0].limit(limits=1, user_api="blas"):
            return method(*args, **kwargs)
    return single


def _linear(x, W):
    """x @ W through the backprop pair; W in the course's (in, out) orientation."""
    return bp.linear_forward(x, W.T)


def _linear_back(dy, cache):
    dx, dWt, _ = bp.linear_backward(dy, cache)
    return dx, dWt.T


class _Model:
    """What :func:`train` needs: params, loss_and_grads, loss, evaluate."""

    params: dict
    dtype: type

    def _normal(self, rng, shape, std):
        return (rng.standard_normal(shape) * std).astype(self.dtype)

    def _attn_scale(self, d_k: int):
        # A Python float: multiplying float32 scores by it keeps them float32.
        return None if self.scale else 1.0

    def n_parameters(self) -> int:
        return int(sum(p.size for p in self.params.values()))


class LibraryModel(_Model):
    """A query attends over a shelf of books and reads out the matching book's value.

    Parameters
    ----------
    n_keys, n_values : int
        Vocabulary sizes of the keys (spine labels, also the queries) and of the values.
    d_model : int
        Width of the embeddings.
    d_k : int
        Width of the head's queries, keys and values.
    scale : bool
        Multiply the scores by 1/√d_k (True) or not at all.
    embed_std : float
        Standard deviation of the initial embeddings.
    seed : int

    Attributes
    ----------
    params : dict of float32 arrays
        ``key_embed`` (n_keys, d_model), ``value_embed`` (n_values, d_model), ``W_Q``, ``W_K``,
        ``W_V`` (d_model, d_k), ``W_U`` (d_k, n_values).
    """

    def __init__(self, n_keys: int = 16, n_values: int = 16, d_model: int = 32, d_k: int = 16,
                 scale: bool = True, embed_std: float = 1.0, seed: int = 0, dtype=np.float32):
        rng = np.random.default_rng(seed)
        self.dtype, self.scale, self.d_k = dtype, bool(scale), int(d_k)
        self.n_keys, self.n_values = int(n_keys), int(n_values)
        self.params = {
            "key_embed": self._normal(rng, (n_keys, d_model), embed_std),
            "value_embed": self._normal(rng, (n_values, d_model), embed_std),
            "W_Q": self._normal(rng, (d_model, d_k), d_model ** -0.5),
            "W_K": self._normal(rng, (d_model, d_k), d_model ** -0.5),
            "W_V": self._normal(rng, (d_model, d_k), d_model ** -0.5),
            "W_U": self._normal(rng, (d_k, n_values), d_k ** -0.5),
        }

    def forward(self, batch: LibraryBatch):
        """Logits (B, n_values), attention weights (B, 1, n_books) and the cache for backward."""
        P = self.params
        N = batch.keys.shape[1]
        # The books' keys and the query share one table: one lookup for both.
        labels = np.concatenate([batch.keys, batch.query[:, None]], axis=1)   # (B, N + 1)
        kq, c_kq = bp.embedding_forward(labels, P["key_embed"])              # (B, N + 1, d_model)
        vb, c_vb = bp.embedding_forward(batch.values, P["value_embed"])      # (B, N, d_model)
        books = kq[:, :N] + vb                                               # key and content
        xq = kq[:, N:]                                                       # (B, 1, d_model)
        q, c_q = _linear(xq, P["W_Q"])                                       # (B, 1, d_k)
        k, c_k = _linear(books, P["W_K"])                                    # (B, N, d_k)
        v, c_v = _linear(books, P["W_V"])                                    # (B, N, d_k)
        out, weights, c_att = bp.attention_forward(q, k, v, scale=self._attn_scale(self.d_k))
        logits, c_u = _linear(out[:, 0], P["W_U"])                           # (B, n_values)
        return logits, weights, (c_kq, c_vb, c_q, c_k, c_v, c_att, c_u)

    def backward(self, dlogits, cache) -> dict:
        """Gradients of every weight from the gradient of the logits, by name."""
        c_kq, c_vb, c_q, c_k, c_v, c_att, c_u = cache
        g = {}
        dout, g["W_U"] = _linear_back(dlogits, c_u)
        dq, dk, dv = bp.attention_backward(dout[:, None], c_att)
        dxq, g["W_Q"] = _linear_back(dq, c_q)
        dbooks_k, g["W_K"] = _linear_back(dk, c_k)
        dbooks_v, g["W_V"] = _linear_back(dv, c_v)
        dbooks = dbooks_k + dbooks_v
        g["key_embed"] = bp.embedding_backward(np.concatenate([dbooks, dxq], axis=1), c_kq)
        g["value_embed"] = bp.embedding_backward(dbooks, c_vb)
        return g

    def loss_and_grads(self, batch: LibraryBatch):
        """Mean cross-entropy on ``batch`` and the gradients of every weight."""
        logits, _, cache = self.forward(batch)
        loss, dlogits = bp.softmax_cross_entropy(logits, batch.targets)
        return loss, self.backward(dlogits, cache)

    @_one_blas_thread
    def loss(self, batch: LibraryBatch) -> float:
        """Mean cross-entropy on ``batch``."""
        logits, _, _ = self.forward(batch)
        return float(bp.softmax_cross_entropy(logits, batch.targets)[0])

    @_one_blas_thread
    def accuracy(self, batch: LibraryBatch) -> float:
        """Share of the queries whose top logit is the right book."""
        logits, _, _ = self.forward(batch)
        return float((logits.argmax(-1) == batch.targets).mean())

    @_one_blas_thread
    def attention_maps(self, batch: LibraryBatch) -> np.ndarray:
        """Weights of the one head, shape (n_layers=1, B, h=1, L=1, S=n_books)."""
        return self.forward(batch)[1][None, :, None]

    @_one_blas_thread
    def evaluate(self, batch: LibraryBatch):
        """Accuracy on ``batch`` and the weights for its first shelf, shape (1, 1, 1, n_books)."""
        logits, weights, _ = self.forward(batch)
        return float((logits.argmax(-1) == batch.targets).mean()), weights[0][None, None]

    @_one_blas_thread
    def right_book_gradient(self, batch: LibraryBatch) -> np.ndarray:
        """|∂ℓ/∂z| for the score z of each shelf's matching book, from that shelf's own loss.

        Notebook 07 builds it by hand: a score deep in softmax's flat tail gets almost no
        gradient, which is how an unscaled dot product stalls training.

        Returns
        -------
        ndarray, shape (B,)

        Examples
        --------
        >>> from attention_course.tasks import library_batch
        >>> LibraryModel(seed=0).right_book_gradient(library_batch(0, 4)).shape
        (4,)
        """
        P = self.params
        logits, A, _ = self.forward(batch)                                  # A: (B, 1, n_books)
        _, dlogits = bp.softmax_cross_entropy(logits, batch.targets)        # of the mean over B
        dout = len(logits) * dlogits @ P["W_U"].T                           # (B, d_k): own loss each
        v = (P["key_embed"][batch.keys] + P["value_embed"][batch.values]) @ P["W_V"]   # (B, n_books, d_k)
        dA = np.einsum("bd,bnd->bn", dout, v)                               # dA = dO Vᵀ
        dZ = A[:, 0] * (dA - (dA * A[:, 0]).sum(axis=-1, keepdims=True))   # softmax's backward
        return np.abs(dZ[np.arange(len(logits)), batch.answer_book])

    @_one_blas_thread
    def scores(self, batch: LibraryBatch) -> np.ndarray:
        """The scores the softmax receives: q·k of each shelf's query with each of its books,
        divided by √d_k when the model scales.

        Returns
        -------
        ndarray, shape (B, n_books)

        Examples
        --------
        >>> from attention_course.tasks import library_batch
        >>> model, batch = LibraryModel(seed=0), library_batch(0, 4)
        >>> bool(np.allclose(softmax(model.scores(batch)), model.forward(batch)[1][:, 0], atol=1e-6))
        True
        """
        P = self.params
        q = P["key_embed"][batch.query] @ P["W_Q"]                                      # (B, d_k)
        k = (P["key_embed"][batch.keys] + P["value_embed"][batch.values]) @ P["W_K"]   # (B, n_books, d_k)
        z = np.einsum("bd,bnd->bn", q, k)
        return z * float(self.d_k) ** -0.5 if self.scale else z

    def query_key_table(self) -> np.ndarray:
        """(key_embed W_Q)(key_embed W_K)ᵀ: row i, the score query key i gives a book with key j.

        Only the keys' part of a book's embedding enters; its value part adds a row-independent
        term after training (checked in the notebook by the accuracy, not assumed here).

        Returns
        -------
        ndarray, shape (n_keys, n_keys)
        """
        E = self.params["key_embed"]
        return (E @ self.params["W_Q"]) @ (E @ self.params["W_K"]).T


class AttentionOnlyModel(_Model):
    """Embedding (+ positional encoding), ``n_layers`` × ``x + MultiHead(x)``, linear read-out.

    Parameters
    ----------
    vocab : int
        Number of different input tokens.
    n_classes : int, optional
        Number of outputs per position (default ``vocab``).
    d_model : int
    n_layers, n_heads : int
    d_k : int, optional
        Width of each head's queries, keys and values (default ``d_model // n_heads``).
    max_len : int
        Longest sequence (rows of the positional encoding).
    positional : {"none", "learned", "sinusoidal"}
        "learned": a trained table added to the embeddings; "sinusoidal": the fixed encoding of
        notebook 05 times ``pe_amplitude``.
    causal : bool
        Each position attends only to itself and earlier positions.
    scale : bool
        Multiply the scores by 1/√d_k (True) or not at all.
    embed_std : float
        Standard deviation of the initial token embeddings (and of a learned positional table).
    pe_amplitude : float
        Factor on the sinusoidal encoding.
    seed : int

    Attributes
    ----------
    params : dict of float32 arrays
        ``embed`` (vocab, d_model), ``pos`` (max_len, d_model) if learned, per layer ``l``:
        ``{l}.W_QKV`` (d_model, 3·h·d_k), which is W_Q, W_K and W_V side by side (see
        :meth:`projections`), and ``{l}.W_O`` (h·d_k, d_model); ``W_U`` (d_model, n_classes).
    pe : ndarray (max_len, d_model) or None
        The fixed sinusoidal encoding, if used.
    """

    def __init__(self, vocab: int, n_classes: int | None = None, d_model: int = 32,
                 n_layers: int = 1, n_heads: int = 1, d_k: int | None = None, max_len: int = 32,
                 positional: str = "learned", causal: bool = True, scale: bool = True,
                 embed_std: float = 1.0, pe_amplitude: float = 1.0, seed: int = 0,
                 dtype=np.float32):
        if positional not in POSITIONAL:
            raise ValueError(f"positional must be one of {POSITIONAL}; got {positional!r}")
        rng = np.random.default_rng(seed)
        self.dtype = dtype
        self.vocab, self.n_classes = int(vocab), int(n_classes or vocab)
        self.n_layers, self.n_heads = int(n_layers), int(n_heads)
        self.d_k = int(d_k or d_model // n_heads)
        self.max_len, self.positional = int(max_len), positional
        self.causal, self.scale = bool(causal), bool(scale)
        hd = self.n_heads * self.d_k
        P = {"embed": self._normal(rng, (vocab, d_model), embed_std)}
        if positional == "learned":
            P["pos"] = self._normal(rng, (max_len, d_model), embed_std)
        for layer in range(self.n_layers):
            # W_Q, W_K and W_V side by side: one product instead of three (as in_proj_weight).
            P[f"{layer}.W_QKV"] = self._normal(rng, (d_model, 3 * hd), d_model ** -0.5)
            P[f"{layer}.W_O"] = self._normal(rng, (hd, d_model), hd ** -0.5)
        P["W_U"] = self._normal(rng, (d_model, self.n_classes), d_model ** -0.5)
        self.params = P
        self.pe = None
        if positional == "sinusoidal":
            self.pe = (pe_amplitude * sinusoidal_positional_encoding(max_len, d_model)).astype(dtype)

    def forward(self, tokens, ablate=()):
        """Logits (B, n, n_classes), the attention weights of every layer, and the cache.

        Parameters
        ----------
        tokens : ndarray of int, shape (B, n), n <= max_len
        ablate : iterable of (layer, head), optional
            Heads whose output is set to zero before W_O, so that they write nothing into the
            residual stream (counted from 0): :func:`~attention_course.hooks.zero_ablate_head`
            at their ``hook_z``. For measuring only: :meth:`backward` does not know about it.

        Returns
        -------
        logits : ndarray, shape (B, n, n_classes)
        weights : list of ndarray, one (B, h, n, n) per layer
        cache : tuple
            What :meth:`backward` needs.
        """
        off = self._check_heads(ablate)
        hooks = _NO_HOOKS if not off else Hooks(
            [(f"blocks.{layer}.attn.hook_z", zero_ablate_head(head)) for layer, head in off])
        return self._forward(tokens, hooks)

    def hook_names(self) -> list[str]:
        """Every hook point of this model, in the order a forward pass reaches them
        (:mod:`attention_course.hooks`)."""
        names = ["hook_embed"] + (["hook_pos_embed"] if self.positional != "none" else [])
        for layer in range(self.n_layers):
            names += [f"blocks.{layer}.hook_resid_pre"]
            names += [f"blocks.{layer}.attn.hook_{n}" for n in ("q", "k", "v", "attn_scores", "pattern", "z")]
            names += [f"blocks.{layer}.hook_attn_out", f"blocks.{layer}.hook_resid_post"]
        return names

    def run_with_cache(self, tokens, names_filter=None, remove_batch_dim: bool = False, fwd_hooks=()):
        """Logits (B, n, n_classes) and an :class:`~attention_course.hooks.ActivationCache` of
        every hook point (or of those ``names_filter`` keeps), as TransformerLens's method.

        ``fwd_hooks`` run first, as under TransformerLens's ``with model.hooks(fwd_hooks):``.
        ``tokens`` (n,) is read as a batch of one.
        """
        hooks = Hooks(fwd_hooks, names_filter, cache=True, known=self.hook_names())
        logits, _, _ = self._forward(_batch_of(tokens), hooks)
        cache = ActivationCache(hooks.cache, n_layers=self.n_layers)
        return logits, cache.remove_batch_dim() if remove_batch_dim else cache

    def run_with_hooks(self, tokens, fwd_hooks=()) -> np.ndarray:
        """Logits (B, n, n_classes) with ``fn(activation, hook)`` run at each ``(name, fn)`` of
        ``fwd_hooks`` (:mod:`attention_course.hooks`)."""
        logits, _, _ = self._forward(_batch_of(tokens), Hooks(fwd_hooks, known=self.hook_names()))
        return logits

    def _forward(self, tokens, hooks):
        tokens = np.asarray(tokens)
        if tokens.ndim != 2 or tokens.shape[1] > self.max_len or tokens.dtype.kind not in "iu":
            raise ValueError(f"tokens must be ints of shape (B, n) with n <= max_len={self.max_len}; "
                             f"got shape {tokens.shape}, dtype {tokens.dtype}")
        P, h = self.params, self.n_heads
        x, c_emb = bp.embedding_forward(tokens, P["embed"])                  # (B, n, d_model)
        x = hooks("hook_embed", x)
        c_pos = None
        if self.positional != "none":
            table = P["pos"] if self.positional == "learned" else self.pe
            if hooks.wants("hook_pos_embed"):
                pos = np.broadcast_to(table[:x.shape[1]].astype(x.dtype), x.shape).copy()
                x = x + hooks("hook_pos_embed", pos)                         # no backward through here
            else:
                x, c_pos = bp.positional_forward(x, table)
        layers, weights = [], []
        for layer in range(self.n_layers):
            at = f"blocks.{layer}."
            x = hooks(at + "hook_resid_pre", x)
            qkv, c_qkv = _linear(x, P[f"{layer}.W_QKV"])                     # (B, n, 3·h·d_k)
            B, n, _ = qkv.shape
            q, k, v = qkv.reshape(B, n, 3, h, self.d_k).transpose(2, 0, 3, 1, 4)   # each (B, h, n, d_k)
            q, k, v = (hooks.heads(at + "attn.hook_" + name, a)
                       for name, a in zip("qkv", (q, k, v), strict=True))
            o, w, c_att = self._attend(q, k, v, hooks, at + "attn.")
            o = hooks.heads(at + "attn.hook_z", o)                           # (B, h, n, d_k)
            y, c_o = _linear(merge_heads(o), P[f"{layer}.W_O"])              # (B, n, d_model)
            y = hooks(at + "hook_attn_out", y)
            x, c_res = bp.residual_forward(x, y)
            x = hooks(at + "hook_resid_post", x)
            layers.append((c_qkv, c_att, c_o, c_res))
            weights.append(w)                                                # (B, h, n, n)
        logits, c_u = _linear(x, P["W_U"])                                   # (B, n, n_classes)
        return logits, weights, (c_emb, c_pos, layers, c_u)

    def _attend(self, q, k, v, hooks, at):
        """Attention of one layer: (out (B, h, n, d_k), weights (B, h, n, n), backward cache).

        Step by step, through ``hook_attn_scores`` and ``hook_pattern``, when a hook changes them
        or the scores are kept; else :func:`~attention_course.backprop.attention_forward`.
        """
        if not (hooks.changes(at + "hook_pattern") or hooks.wants(at + "hook_attn_scores")):
            o, w, c_att = bp.attention_forward(q, k, v, is_causal=self.causal,
                                               scale=self._attn_scale(self.d_k))
            return o, hooks(at + "hook_pattern", w), c_att
        scale = self._attn_scale(self.d_k) or self.d_k ** -0.5
        scores = q @ k.swapaxes(-1, -2) * scale                              # (B, h, n, n)
        if self.causal:
            n = scores.shape[-1]
            scores = np.where(np.tri(n, dtype=bool), scores, -np.inf).astype(q.dtype)
        scores = hooks(at + "hook_attn_scores", scores)
        w = hooks(at + "hook_pattern", softmax(scores, axis=-1))
        return w @ v, w, None                                               # no backward through here

    def backward(self, dlogits, cache) -> dict:
        """Gradients of every weight from the gradient of the logits, by name."""
        c_emb, c_pos, layers, c_u = cache
        h, g = self.n_heads, {}
        dx, g["W_U"] = _linear_back(dlogits, c_u)
        for layer in reversed(range(self.n_layers)):
            c_qkv, c_att, c_o, c_res = layers[layer]
            dx, dy = bp.residual_backward(dx, c_res)
            do, g[f"{layer}.W_O"] = _linear_back(dy, c_o)
            dq, dk, dv = bp.attention_backward(split_heads(do, h), c_att)
            B, _, n, d = dq.shape
            # (B, n, 3, h, d) -> (B, n, 3·h·d): the layout of W_QKV's columns, filled in place
            dqkv = np.empty((B, n, 3, h, d), dtype=dq.dtype)
            for i, part in enumerate((dq, dk, dv)):
                dqkv[:, :, i] = part.transpose(0, 2, 1, 3)                   # (B, h, n, d) -> (B, n, h, d)
            dqkv = dqkv.reshape(B, n, 3 * h * d)
            dx_qkv, g[f"{layer}.W_QKV"] = _linear_back(dqkv, c_qkv)
            dx = dx + dx_qkv
        if self.positional != "none":
            dx, dpe = bp.positional_backward(dx, c_pos)
            if self.positional == "learned":
                g["pos"] = dpe
        g["embed"] = bp.embedding_backward(dx, c_emb)
        return g

    def loss_and_grads(self, batch: SequenceBatch):
        """Mean cross-entropy over the counted positions and the gradients of every weight."""
        logits, _, cache = self.forward(batch.tokens)
        loss, dlogits = bp.softmax_cross_entropy(logits, batch.targets, mask=batch.mask)
        return loss, self.backward(dlogits, cache)

    @_one_blas_thread
    def loss(self, batch: SequenceBatch) -> float:
        """Mean cross-entropy over the counted positions of ``batch`` (``batch.mask``)."""
        logits, _, _ = self.forward(batch.tokens)
        return float(bp.softmax_cross_entropy(logits, batch.targets, mask=batch.mask)[0])

    @_one_blas_thread
    def accuracy(self, batch: SequenceBatch, ablate=()) -> float:
        """Share of the counted positions (``batch.mask``) where the top logit is the target.

        ``ablate``: heads (layer, head) silenced as in :meth:`forward`.
        """
        logits, _, _ = self.forward(batch.tokens, ablate=ablate)
        right = (logits.argmax(-1) == batch.targets)[batch.mask]
        return float(right.mean())

    @_one_blas_thread
    def accuracy_by_position(self, batch: SequenceBatch) -> np.ndarray:
        """Accuracy at each position t, shape (n,); NaN where no position counts."""
        logits, _, _ = self.forward(batch.tokens)
        right = (logits.argmax(-1) == batch.targets) & batch.mask
        counted = batch.mask.sum(0)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(counted > 0, right.sum(0) / counted, np.nan)

    @_one_blas_thread
    def attention_maps(self, batch: SequenceBatch) -> np.ndarray:
        """Every head's weights, shape (n_layers, B, h, n, n)."""
        return np.stack(self.forward(batch.tokens)[1])

    def projections(self, layer: int = 0) -> dict:
        """W_Q, W_K, W_V (d_model, h·d_k) and W_O (h·d_k, d_model) of one layer (views)."""
        W_Q, W_K, W_V = np.split(self.params[f"{layer}.W_QKV"], 3, axis=-1)
        return {"W_Q": W_Q, "W_K": W_K, "W_V": W_V, "W_O": self.params[f"{layer}.W_O"]}

    def _check_heads(self, heads) -> list:
        pairs = []
        for pair in heads:
            try:
                layer, head = (int(i) for i in pair)
            except (TypeError, ValueError):
                raise ValueError(f"heads must be (layer, head) pairs; got {pair!r}") from None
            if not (0 <= layer < self.n_layers and 0 <= head < self.n_heads):
                raise ValueError(f"no head (layer={layer}, head={head}): the model has layers "
                                 f"0..{self.n_layers - 1} and heads 0..{self.n_heads - 1}")
            pairs.append((layer, head))
        return pairs

    def head_weights(self, layer: int, head: int) -> dict:
        """One head's W_Q, W_K, W_V (d_model, d_k) and its rows of W_O (d_k, d_model).

        A head's output enters the residual stream as ``o_head @ W_O[rows of that head]``: the
        concatenation followed by W_O is the sum of these per-head products.
        """
        (layer, head), = self._check_heads([(layer, head)])
        cols = slice(head * self.d_k, (head + 1) * self.d_k)
        W = self.projections(layer)
        return {"W_Q": W["W_Q"][:, cols], "W_K": W["W_K"][:, cols], "W_V": W["W_V"][:, cols],
                "W_O": W["W_O"][cols]}

    def query_key_table(self, layer: int = 0, head: int = 0) -> np.ndarray:
        """(E W_Q)(E W_K)ᵀ of one head, E the token embeddings: notebook 07's table.

        Entry (i, j): the part of the score that a query at a token i gives a key at a token j
        through the tokens' own embeddings (positions and earlier layers left out).

        Returns
        -------
        ndarray, shape (vocab, vocab)
        """
        W, E = self.head_weights(layer, head), self.params["embed"]
        return (E @ W["W_Q"]) @ (E @ W["W_K"]).T

    def k_composition_table(self, query=(1, 0), writer=(0, 0)) -> np.ndarray:
        """(E W_Q^(1))(E W_V^(0) W_O^(0) W_K^(1))ᵀ: K-composition of two heads (Elhage et al. 2021).

        The writer head (layer 0) copies a token's embedding, through its W_V and W_O, into
        another position of the residual stream; the query head (a later layer) then reads that
        copy with its W_K. Entry (i, j): the part of the score that a query at token i gives a
        position into which the writer copied token j.

        Parameters
        ----------
        query, writer : (layer, head)
            The reading head and the writing head, counted from 0; the writer's layer must come
            first.

        Returns
        -------
        ndarray, shape (vocab, vocab)
        """
        (lq, hq), (lw, hw) = self._check_heads([query, writer])
        if lw >= lq:
            raise ValueError(f"the writer's layer must come before the query's; got "
                             f"query={query!r}, writer={writer!r}")
        Wq, Ww, E = self.head_weights(lq, hq), self.head_weights(lw, hw), self.params["embed"]
        return (E @ Wq["W_Q"]) @ (E @ Ww["W_V"] @ Ww["W_O"] @ Wq["W_K"]).T

    @_one_blas_thread
    def evaluate(self, batch: SequenceBatch):
        """Accuracy on ``batch`` and every head's weights for its first example, one forward.

        Returns
        -------
        accuracy : float
        maps : ndarray, shape (n_layers, h, n, n)
        """
        logits, weights, _ = self.forward(batch.tokens)
        right = (logits.argmax(-1) == batch.targets)[batch.mask]
        return float(right.mean()), np.stack([w[0] for w in weights])


@dataclass
class TrainingRun:
    """What :func:`train` recorded.

    Attributes
    ----------
    model : LibraryModel or AttentionOnlyModel
        The trained model (its params after the last step).
    loss : ndarray, shape (steps + 1,)
        ``loss[s]``: the loss on a fresh batch with the parameters after ``s`` updates.
    checkpoint_steps : ndarray of int, shape (C,)
        Steps at which the rest was recorded, from 0 (before training) to ``steps``.
    accuracy : ndarray, shape (C,)
        Accuracy on the fixed evaluation batch at each checkpoint.
    maps : ndarray, shape (C, n_layers, h, L, S)
        Attention weights of the probe example (the evaluation batch's first) at each checkpoint.
    seconds : float
        Wall time of the training loop.
    eval_batch : batch
        The fixed batch behind ``accuracy`` and ``maps`` (the probe is its first example).
    """

    model: object
    loss: np.ndarray
    checkpoint_steps: np.ndarray
    accuracy: np.ndarray
    maps: np.ndarray
    seconds: float
    eval_batch: object = None

    @property
    def steps(self) -> int:
        """How many training steps were taken."""
        return len(self.loss) - 1


def train(model, make_batch: Callable, steps: int, *, lr: float = 3e-3, seed: int = 0,
          eval_batch=None, n_checkpoints: int = 21, progress: bool | str = False,
          threads: int | None = 1) -> TrainingRun:
    """Adam on a fresh batch each step; record the loss and checkpoints.

    Parameters
    ----------
    model : LibraryModel or AttentionOnlyModel
        Trained in place.
    make_batch : callable
        ``make_batch(rng) -> batch``; called once per step with one seeded generator.
    steps : int
        Number of Adam updates.
    lr : float
        Adam's learning rate.
    seed : int
        Seeds the batches (the model has its own seed).
    eval_batch : batch, optional
        Fixed batch for accuracy and attention maps (default: ``make_batch`` with seed
        ``seed + 10_000``).
    n_checkpoints : int
        How many evenly spaced checkpoints, the first at step 0 and the last at ``steps``.
    progress : bool or str
        Show a progress line; a string is its label.
    threads : int or None
        BLAS threads during training (None: leave as is). With matrices this small one thread
        is usually faster than two (``benchmarks/training.py`` measures both).

    Returns
    -------
    TrainingRun
    """
    steps = int(steps)
    if steps < 1:
        raise ValueError(f"steps must be >= 1; got {steps!r}")
    rng = np.random.default_rng(seed)
    if eval_batch is None:
        eval_batch = make_batch(np.random.default_rng(seed + 10_000))
    checkpoints = np.unique(np.linspace(0, steps, n_checkpoints).round().astype(int))
    optimizer = Adam(model.params, lr=lr)
    losses = np.empty(steps + 1)
    accuracy, maps = [], []

    def record():
        acc, m = model.evaluate(eval_batch)
        accuracy.append(acc)
        maps.append(m)

    label = progress if isinstance(progress, str) else ""
    start = time.perf_counter()
    limit = (threadpool_limits(threads, user_api="blas") if threads else contextlib.nullcontext())
    # The first step runs the checked passes, which validate the batch, the parameters and every
    # array made from them; later steps repeat the same arithmetic on arrays of the same kind
    # inside backprop.unchecked(), which saves about half of a step's time. No NaN
    # scan per call either (assume_finite): one finiteness test of the loss per step instead.
    # The optimiser's flat step updates the parameters as one array (views of it stand in the
    # model's params during the loop; the model's own arrays get the values back at the end).
    # A model of another class (train needs only params, loss_and_grads, loss and evaluate) is
    # called as it is on every step, and its params stay its own arrays (it may hold them
    # elsewhere too).
    fast = isinstance(model, _Model)
    update = optimizer.step
    packed = optimizer._packed() if fast else contextlib.nullcontext()
    with (limit, assume_finite(), packed as flat_step, contextlib.ExitStack() as later_steps,
          ProgressLine(steps, label, enabled=bool(progress)) as bar):
        for step in range(steps + 1):
            if step in checkpoints:
                record()
            batch = make_batch(rng)
            if step == steps:
                losses[step] = model.loss(batch)
                break
            loss, grads = model.loss_and_grads(batch)
            if not np.isfinite(loss):
                raise FloatingPointError(f"the loss became {loss} at step {step}; try a smaller lr "
                                         f"(got lr={lr})")
            losses[step] = loss
            update(grads)
            if fast and update is not flat_step:
                later_steps.enter_context(bp.unchecked())
                update = flat_step
            bar.update(step + 1, loss)
    seconds = time.perf_counter() - start
    return TrainingRun(model=model, loss=losses, checkpoint_steps=checkpoints,
                       accuracy=np.array(accuracy), maps=np.stack(maps), seconds=seconds,
                       eval_batch=eval_batch)


_pool: list = []     # [WorkerPool]: made on first use, kept for the next call


def _train_job(job: dict) -> TrainingRun:
    return train(**job)


def start_workers(processes: int | None = None) -> None:
    """Start :func:`train_many`'s worker processes now, without waiting for them.

    A worker takes a moment to start (a fresh Python that imports this library); a notebook
    that calls this in its first cell has them ready by the time it trains.

    Examples
    --------
    >>> start_workers(processes=1)        # one process: train_many then trains here, no workers
    """
    processes = _worker_count(processes, None)
    if processes > 1:
        _workers(processes)


def _worker_count(processes, n_jobs) -> int:
    if processes is None:
        from .fast.thread_pool import available_cpus

        processes = available_cpus()
    if isinstance(processes, bool) or not isinstance(processes, int) or processes < 1:
        raise ValueError(f"processes must be an int >= 1 or None; got {processes!r}")
    return processes if n_jobs is None else min(processes, n_jobs)


def _workers(processes: int) -> WorkerPool:
    if not _pool or len(_pool[0].workers) != processes or not _pool[0].alive:
        while _pool:
            _pool.pop().close()
        _pool.append(WorkerPool(processes))
    return _pool[0]


def train_many(jobs: Mapping, *, processes: int | None = None) -> dict:
    """Independent :func:`train` runs side by side, one worker process per core.

    A run is a Python loop over small products: a second BLAS thread does not make it faster,
    but independent runs (other seeds, other models) can go side by side, each in a process of
    its own.

    Parameters
    ----------
    jobs : mapping of key to dict
        Each value is ``train``'s arguments by name: ``model``, ``make_batch``, ``steps`` and
        any of its keywords but ``progress`` (a worker process has no screen).
    processes : int, optional
        How many worker processes (default: one per available core, at most one per job).
        ``1`` runs the jobs here, one after another. The workers are started once and kept
        for the next call with as many; an Interrupt, or a run that fails, ends them (the
        next call starts new ones). They ignore a kernel's Interrupt and its shutdown, and
        end when this process does (see :mod:`attention_course.workers.pool`).

    Returns
    -------
    dict of key to TrainingRun
        In the order of ``jobs``; each run equals bit for bit what ``train`` gives with the
        same arguments (each is seeded by its own). The models in ``jobs`` stay untrained:
        each run's ``model`` is a trained copy.

    Examples
    --------
    >>> from functools import partial
    >>> from attention_course.tasks import library_batch
    >>> jobs = {seed: dict(model=LibraryModel(seed=seed), make_batch=partial(library_batch,
    ...         batch_size=8), steps=3, seed=seed, n_checkpoints=2) for seed in (0, 1)}
    >>> runs = train_many(jobs, processes=1)
    >>> list(runs), runs[1].steps
    ([0, 1], 3)
    """
    if not isinstance(jobs, Mapping) or not jobs:
        raise ValueError(f"jobs must be a non-empty mapping of key to train's arguments; got "
                         f"{type(jobs).__name__} {jobs!r:.80}")
    for key, job in jobs.items():
        if not isinstance(job, Mapping) or not {"model", "make_batch", "steps"} <= set(job):
            raise ValueError(f"jobs[{key!r}] must be a dict with model, make_batch and steps "
                             f"(train's arguments by name); got {job!r:.120}")
        if job.get("progress"):
            raise ValueError(f"jobs[{key!r}] asks for progress=...: a worker process has no "
                             "screen to show it on; leave it out")
    processes = _worker_count(processes, len(jobs))
    # A copy of each model, also here: the result does not depend on the number of processes.
    work = {key: dict(job, model=copy.deepcopy(job["model"])) for key, job in jobs.items()}
    if processes == 1:
        return {key: _train_job(job) for key, job in work.items()}
    pool = _workers(processes)
    # the longest runs first (by steps): the last one to start is then a short one
    longest_first = sorted(work, key=lambda key: -int(work[key]["steps"]))
    try:
        runs = pool.run(_train_job, {key: (work[key],) for key in longest_first})
    except BaseException:          # an Interrupt, or a run that failed: those workers are gone
        _pool.clear()
        raise
    return {key: runs[key] for key in work}


def repeat_model(kind: str, seed: int = 0) -> AttentionOnlyModel:
    """Notebook 08's two models of the repeat task, the same size (9,856 weights).

    ``"2 layers"``: two layers of one head each; ``"1 layer"``: one layer of two heads. Every
    head is d_k = 32 wide.
    """
    if kind not in ("2 layers", "1 layer"):
        raise ValueError(f"kind must be '2 layers' or '1 layer'; got {kind!r}")
    layers, heads = (2, 1) if kind == "2 layers" else (1, 2)
    return AttentionOnlyModel(16, d_model=32, n_layers=layers, n_heads=heads, d_k=32,
                              positional="learned", max_len=20, seed=seed)


def two_token_model(n_heads: int, seed: int = 0) -> AttentionOnlyModel:
    """The two-token task's model with ``n_heads`` heads sharing 32 dimensions (the same size)."""
    return AttentionOnlyModel(8, n_classes=64, d_model=32, n_heads=n_heads, d_k=32 // n_heads,
                              positional="learned", max_len=10, seed=seed)
