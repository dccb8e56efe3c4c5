"""Generating one token at a time: attention against a cache of keys and values.

A decoder produces its text token by token. With a causal mask, the output of token t depends
only on its own query and on the keys and values of tokens 0..t, which never change once
computed. So they are kept in a *KV cache*: each new token appends its key and value and
attends once against the cache, O(t·d) work, instead of recomputing the whole (t, t) attention.

The cache can also be read in chunks, each summarised by a partial softmax state (the highest
score m, the sum l of exp(score - m), the sum acc of exp(score - m)·v); two states merge exactly
into the state of the two chunks together. This is the online softmax of
:mod:`attention_course.chunked`, written as a merge of two summaries (as split-key decoding
kernels do when they read the cache in parallel).
"""

from __future__ import annotations

import numpy as np

from ._validate import as_float_array, broadcast_batch

__all__ = ["KVCache", "attend_one", "decode_causal", "softmax_state", "merge_softmax_states",
           "state_output"]


def _check_cache(q, k_cache, v_cache):
    q = as_float_array(q, "q", min_ndim=1)
    k = as_float_array(k_cache, "k_cache", min_ndim=2)
    v = as_float_array(v_cache, "v_cache", min_ndim=2)
    if k.shape[-1] != q.shape[-1]:
        raise ValueError(f"k_cache has shape {k.shape}; its last axis must be d_k = {q.shape[-1]}, "
                         f"the width of q {q.shape}")
    if v.shape[-2] != k.shape[-2]:
        raise ValueError(f"v_cache has shape {v.shape}; it must hold as many rows as k_cache "
                         f"{k.shape} (one value per cached key)")
    broadcast_batch({"q": q.shape[:-1], "k_cache": k.shape[:-2], "v_cache": v.shape[:-2]})
    dtype = np.result_type(q, k, v)
    return q, k, v, dtype


def softmax_state(q, k_cache, v_cache, scale: float | None = None):
    """Summary of one query against a chunk of keys: ``(m, l, acc)``.

    Parameters
    ----------
    q : ndarray, shape (..., d_k)
        One query (per leading index).
    k_cache : ndarray, shape (..., t, d_k)
    v_cache : ndarray, shape (..., t, d_v)
        A chunk of t cached keys and values; t may be 0.
    scale : float, optional
        Default 1/sqrt(d_k).

    Returns
    -------
    m : ndarray, shape (...)
        Highest scaled score of the chunk (-inf when t = 0).
    l : ndarray, shape (...)
        Sum of exp(score - m).
    acc : ndarray, shape (..., d_v)
        Sum of exp(score - m) · value.
    """
    q, k, v, dtype = _check_cache(q, k_cache, v_cache)
    scale = 1.0 / np.sqrt(q.shape[-1]) if scale is None else float(scale)
    s = np.einsum("...d,...td->...t", q, k) * dtype.type(scale)           # (..., t)
    if s.shape[-1] == 0:
        m = np.full(s.shape[:-1], -np.inf, dtype)
        batch = np.broadcast_shapes(s.shape[:-1], v.shape[:-2])
        return (np.broadcast_to(m, batch).copy(), np.zeros(batch, dtype),
                np.zeros(batch + v.shape[-1:], dtype))
    m = s.max(axis=-1)                                                     # (...)
    p = np.exp(s - m[..., None])                                           # (..., t)
    return m, p.sum(axis=-1), np.einsum("...t,...tv->...v", p, v)


def merge_softmax_states(a, b):
    """The state of two chunks together, from the states of each: exact, no score is re-read.

    Both sums are moved onto the common baseline ``m = max(m_a, m_b)`` by ``exp(m_x - m)``
    before they are added. Two empty chunks (m = -inf) give an empty state, not NaN.

    Parameters
    ----------
    a, b : tuple (m, l, acc)
        States as returned by :func:`softmax_state` (shapes (...), (...), (..., d_v)).

    Returns
    -------
    tuple (m, l, acc)

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> q, k, v = rng.normal(size=4), rng.normal(size=(6, 4)), rng.normal(size=(6, 2))
    >>> whole = softmax_state(q, k, v)
    >>> merged = merge_softmax_states(softmax_state(q, k[:2], v[:2]), softmax_state(q, k[2:], v[2:]))
    >>> all(np.allclose(x, y) for x, y in zip(whole, merged))
    True
    """
    (ma, la, acc_a), (mb, lb, acc_b) = a, b
    m = np.maximum(ma, mb)
    # Where both chunks are empty m is -inf; shifting by 0 there keeps exp(-inf - 0) = 0.
    base = np.where(np.isfinite(m), m, 0)
    wa, wb = np.exp(ma - base), np.exp(mb - base)
    return m, la * wa + lb * wb, acc_a * wa[..., None] + acc_b * wb[..., None]


def state_output(state):
    """The attention output ``acc / l`` of a state; zeros where no key was seen (l = 0).

    Returns
    -------
    ndarray, shape (..., d_v)
    """
    _, total, acc = state
    total = total[..., None]
    return np.divide(acc, total, out=np.zeros_like(acc), where=total > 0)


def attend_one(q, k_cache, v_cache, scale: float | None = None) -> np.ndarray:
    """Output of one new token: its query against every cached key and value, O(t·d) work.

    The cache holds the keys and values of tokens 0..t-1, the new token's own included.
    Equals the last row of causal attention over those t tokens.

    Parameters
    ----------
    q : ndarray, shape (..., d_k)
    k_cache : ndarray, shape (..., t, d_k)
    v_cache : ndarray, shape (..., t, d_v)
    scale : float, optional
        Default 1/sqrt(d_k).

    Returns
    -------
    ndarray, shape (..., d_v)

    Examples
    --------
    >>> from attention_course.attention import scaled_dot_product_attention
    >>> rng = np.random.default_rng(1)
    >>> q, k, v = (rng.normal(size=(5, 4)) for _ in range(3))
    >>> full = scaled_dot_product_attention(q, k, v, is_causal=True)
    >>> bool(np.allclose(attend_one(q[4], k, v), full[4]))
    True
    """
    return state_output(softmax_state(q, k_cache, v_cache, scale))


def decode_causal(q, k, v, scale: float | None = None) -> np.ndarray:
    """Causal self-attention computed the way a decoder does: one token at a time, with a cache.

    Token t appends its key and value to the cache, then attends once against it.

    Parameters
    ----------
    q, k : ndarray, shape (..., n, d_k)
    v : ndarray, shape (..., n, d_v)

    Returns
    -------
    ndarray, shape (..., n, d_v)
        Equal (to rounding) to ``scaled_dot_product_attention(q, k, v, is_causal=True)``.
    """
    q = as_float_array(q, "q", min_ndim=2)
    k = as_float_array(k, "k", min_ndim=2)
    v = as_float_array(v, "v", min_ndim=2)
    if not q.shape[-2] == k.shape[-2] == v.shape[-2]:
        raise ValueError(f"q {q.shape}, k {k.shape} and v {v.shape} must hold the same number n "
                         "of tokens (axis -2) for causal self-attention")
    rows = [attend_one(q[..., t, :], k[..., :t + 1, :], v[..., :t + 1, :], scale)
            for t in range(q.shape[-2])]
    if not rows:
        batch = np.broadcast_shapes(q.shape[:-2], v.shape[:-2])
        return np.zeros(batch + (0, v.shape[-1]), np.result_type(q, k, v))
    return np.stack(rows, axis=-2)


class KVCache:
    """The keys and values a decoder keeps, per layer, for every token it has seen.

    Each layer appends the keys and values of its new tokens (:meth:`append`) and lets a new token
    attend against all of them (:meth:`attend`, built on :func:`attend_one`). With grouped-query
    attention only the G key/value heads are stored; the H query heads of a group read the same
    rows. Storage grows by doubling, so appending one token at a time costs O(1) amortised copies.

    Parameters
    ----------
    n_layers : int
        How many layers keep a cache.
    num_kv_heads : int
        G, key/value heads per layer.
    head_dim : int
        d_k (= d_v), the width of one head.
    dtype : numpy dtype

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> q, k, v = rng.normal(size=(4, 5, 8)), rng.normal(size=(2, 5, 8)), rng.normal(size=(2, 5, 8))
    >>> cache = KVCache(n_layers=1, num_kv_heads=2, head_dim=8, dtype=np.float64)
    >>> rows = []
    >>> for t in range(5):
    ...     cache.append(0, k[:, t:t + 1], v[:, t:t + 1])
    ...     rows.append(cache.attend(0, q[:, t]))            # (H, d_v)
    >>> from attention_course.grouped import grouped_query_attention
    >>> bool(np.allclose(np.stack(rows, axis=1), grouped_query_attention(q, k, v, is_causal=True)))
    True
    >>> cache.length, cache.nbytes
    (5, 1280)
    """

    def __init__(self, n_layers: int, num_kv_heads: int, head_dim: int, dtype=np.float32):
        from ._validate import positive_int

        self.n_layers = positive_int(n_layers, "n_layers")
        self.num_kv_heads = positive_int(num_kv_heads, "num_kv_heads")
        self.head_dim = positive_int(head_dim, "head_dim")
        self.dtype = np.dtype(dtype)
        self._k = [np.empty((self.num_kv_heads, 0, self.head_dim), self.dtype)] * self.n_layers
        self._v = list(self._k)
        self._len = [0] * self.n_layers

    def _layer(self, layer) -> int:
        if isinstance(layer, (bool, np.bool_)) or not isinstance(layer, (int, np.integer)) or \
                not 0 <= layer < self.n_layers:
            raise ValueError(f"layer must be an int in 0..{self.n_layers - 1}; got {layer!r}")
        return int(layer)

    @property
    def length(self) -> int:
        """Tokens held by layer 0 (every layer holds as many once a token has passed them all)."""
        return self._len[0]

    @property
    def nbytes(self) -> int:
        """Bytes of the keys and values held (not of the spare room)."""
        return 2 * sum(self._len) * self.num_kv_heads * self.head_dim * self.dtype.itemsize

    def append(self, layer: int, k, v) -> None:
        """Add the keys and values of new tokens to ``layer``.

        Parameters
        ----------
        k, v : ndarray, shape (G, t_new, d_k)
        """
        i = self._layer(layer)
        G, d = self.num_kv_heads, self.head_dim
        k = as_float_array(k, "k", min_ndim=3)
        v = as_float_array(v, "v", min_ndim=3)
        if k.ndim != 3 or k.shape[0] != G or k.shape[2] != d or v.shape != k.shape:
            raise ValueError(f"k and v must both have shape (G, t_new, d_k) = ({G}, t_new, {d}); "
                             f"got k {k.shape} and v {v.shape}")
        n, new = self._len[i], k.shape[1]
        if n + new > self._k[i].shape[1]:
            room = max(2 * (n + new), 16)
            for store in (self._k, self._v):
                grown = np.empty((G, room, d), self.dtype)
                grown[:, :n] = store[i][:, :n]
                store[i] = grown
        self._k[i][:, n:n + new] = k
        self._v[i][:, n:n + new] = v
        self._len[i] = n + new

    def keys(self, layer: int) -> np.ndarray:
        """The cached keys of ``layer``, shape (G, t, d_k) (a view)."""
        i = self._layer(layer)
        return self._k[i][:, :self._len[i]]

    def values(self, layer: int) -> np.ndarray:
        """The cached values of ``layer``, shape (G, t, d_v) (a view)."""
        i = self._layer(layer)
        return self._v[i][:, :self._len[i]]

    def attend(self, layer: int, q, scale: float | None = None) -> np.ndarray:
        """Output of one new token's H query heads against every cached key and value of ``layer``.

        Parameters
        ----------
        q : ndarray, shape (H, d_k)
            One query per head; H a multiple of G. The token's own key must already be appended.

        Returns
        -------
        ndarray, shape (H, d_v)
            Head ``h`` reads key/value head ``h // (H / G)``, as :func:`~attention_course.grouped.repeat_kv`.
        """
        q = as_float_array(q, "q", min_ndim=2)
        G = self.num_kv_heads
        if q.ndim != 2 or q.shape[0] % G or q.shape[1] != self.head_dim:
            raise ValueError(f"q must have shape (H, d_k) with H a multiple of G={G} and "
                             f"d_k={self.head_dim}; got {q.shape}")
        grouped = q.reshape(G, q.shape[0] // G, self.head_dim)                  # (G, H/G, d_k)
        k, v = self.keys(layer), self.values(layer)                             # (G, t, d)
        out = attend_one(grouped, k[:, None], v[:, None], scale)                # (G, H/G, d_v)
        return out.reshape(q.shape[0], -1)
