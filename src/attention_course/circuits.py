r"""Standard measures of attention heads, as TransformerLens defines them (08, 09).

Each works on the tiny models of 07-08 and on the real model of 09 alike, through their
:meth:`run_with_cache` (:mod:`attention_course.hooks`):

- :func:`detection_pattern` and :func:`head_detector_scores`: how much of a head's attention
  follows a pattern — the previous token, an earlier copy of the same token (duplicate-token), or
  the token right after an earlier copy of the current one (induction, also called prefix
  matching). TransformerLens's ``head_detector`` with ``error_measure="mul"``: per sequence, the
  attention that lands where the pattern is 1, over all the attention (every query row sums to 1,
  so T in all), then the mean over the sequences;
- :func:`induction_attention` and :func:`offset_weights`: notebook 08's own measures of one head
  (its exercises 1 and 3 ask for them; a workbook cell uses these while an exercise is not answered
  yet);
- :func:`copying_scores`: whether a head's OV circuit copies, read from the eigenvalues of
  W_E · W_V · W_O · W_U (Elhage et al. 2021): the sum of the eigenvalues over the sum of their
  absolute values, +1 for a head that raises the logit of the token it attends to, -1 for one
  that lowers it;
- :func:`direct_logit_attribution`: how much each head's output, on its own, adds to the logit of
  the right next token, through the final norm's scale as the run computed it (TransformerLens's
  ``cache.stack_head_results`` then ``apply_ln_to_stack``).

Shapes: B sequences, T positions, n_layers layers, H heads per layer (query heads), V vocabulary.

Examples
--------
>>> tokens = np.array([[5, 6, 7, 5, 6, 7]])               # a period of 3, repeated
>>> detection_pattern(tokens, "induction")[0].astype(int)
array([[0, 0, 0, 0, 0, 0],
       [0, 0, 0, 0, 0, 0],
       [0, 0, 0, 0, 0, 0],
       [0, 1, 0, 0, 0, 0],
       [0, 0, 1, 0, 0, 0],
       [0, 0, 0, 1, 0, 0]])
"""

from __future__ import annotations

import numpy as np

from .hooks import ActivationCache

__all__ = ["HEAD_KINDS", "copying_scores", "detection_pattern", "direct_logit_attribution",
           "head_detector_scores", "induction_attention", "offset_weights"]

#: The patterns :func:`detection_pattern` knows, in TransformerLens's words.
HEAD_KINDS = ("previous_token", "duplicate_token", "induction")


def _tokens(tokens) -> np.ndarray:
    arr = np.asarray(tokens)
    if arr.ndim == 1:
        arr = arr[None]
    if arr.ndim != 2 or arr.shape[1] < 2 or (arr.size and arr.dtype.kind not in "iu"):
        raise ValueError(f"tokens must be ints of shape (T,) or (B, T) with T >= 2; got shape "
                         f"{arr.shape}, dtype {arr.dtype}")
    return arr


def detection_pattern(tokens, kind: str) -> np.ndarray:
    """Where a head of ``kind`` would attend: a bool (B, T, T), [sequence, query, key].

    - ``"previous_token"``: key t - 1;
    - ``"duplicate_token"``: every earlier key j < t with the same token as the query;
    - ``"induction"``: every key j ≤ t whose *previous* token equals the query's token (j - 1 is an
      earlier copy of it), that is where the token that followed it stands.
    """
    tok = _tokens(tokens)
    if kind not in HEAD_KINDS:
        raise ValueError(f"kind must be one of {HEAD_KINDS}; got {kind!r}")
    B, T = tok.shape
    below = np.tri(T, k=-1, dtype=bool)                                  # key j < query t
    if kind == "previous_token":
        return np.broadcast_to(np.eye(T, k=-1, dtype=bool), (B, T, T)).copy()
    same = (tok[:, :, None] == tok[:, None, :]) & below                  # (B, t, j): j < t, same token
    if kind == "duplicate_token":
        return same
    out = np.zeros((B, T, T), dtype=bool)
    out[:, :, 1:] = same[:, :, :-1]                                      # key j where j - 1 matches
    return out


def _patterns(patterns_or_cache) -> np.ndarray:
    """(n_layers, B, H, T, T) from a cache or from one array (B, H, T, T) or (n_layers, B, H, T, T)."""
    if isinstance(patterns_or_cache, ActivationCache):
        cache = patterns_or_cache
        if not cache.has_batch_dim:
            raise ValueError("give a cache with its batch axis (remove_batch_dim=False)")
        layers = sorted(int(k.split(".")[1]) for k in cache if k.endswith("attn.hook_pattern"))
        if not layers or layers != list(range(len(layers))) or (
                cache.n_layers is not None and len(layers) != cache.n_layers):
            raise ValueError(f"the cache must hold every layer's hook_pattern (row l of the scores is "
                             f"layer l); it holds layers {layers}: keep them all in run_with_cache")
        return np.stack([cache["pattern", layer] for layer in layers])
    w = np.asarray(patterns_or_cache)
    if w.ndim == 4:
        w = w[None]
    if w.ndim != 5 or w.shape[-1] != w.shape[-2] or w.dtype.kind != "f":
        raise ValueError(f"patterns must be float (B, H, T, T) or (n_layers, B, H, T, T) "
                         f"[batch, head, query, key]; got shape {w.shape}, dtype {w.dtype}")
    return w


def head_detector_scores(patterns, tokens, kind: str, *, exclude_bos: bool = False,
                         exclude_current_token: bool = False) -> np.ndarray:
    """Each head's share of attention on ``kind``'s :func:`detection_pattern`: (n_layers, H).

    Parameters
    ----------
    patterns : ActivationCache, or ndarray (B, H, T, T) or (n_layers, B, H, T, T)
        A cache from ``run_with_cache(tokens)`` (its ``hook_pattern`` of every layer), or patterns.
    tokens : ints, shape (T,) or (B, T)
    kind : {"previous_token", "duplicate_token", "induction"}
    exclude_bos, exclude_current_token : bool
        Leave the attention on key 0, or on the query's own position, out of both sums.

    Returns
    -------
    ndarray, float64, shape (n_layers, H), each in [0, 1]
        Per sequence Σ(pattern · detection) / Σ pattern, then the mean over the B sequences.

    Notes
    -----
    On ``period`` random tokens repeated twice (T = 2 · period), the induction score is
    :func:`~attention_course.pretrained.induction_scores` / 2: the same weights, over all T rows,
    where ``induction_scores`` averages the period rows of the second copy only.
    """
    w = _patterns(patterns).astype(np.float64)                           # (n_layers, B, H, T, T)
    det = detection_pattern(tokens, kind)                                # (B, T, T)
    if det.shape != w.shape[1:2] + w.shape[3:]:
        raise ValueError(f"tokens {det.shape[:2]} do not fit patterns of shape {w.shape}: "
                         f"(B, T) against (n_layers, B, H, T, T)")
    keep = np.ones(w.shape[-2:], dtype=bool)
    if exclude_bos:
        keep[:, 0] = False
    if exclude_current_token:
        np.fill_diagonal(keep, False)
    w = w * keep
    hit = (w * det[None, :, None]).sum(axis=(-1, -2))                    # (n_layers, B, H)
    total = w.sum(axis=(-1, -2))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, hit / total, 0.0).mean(axis=1)


def induction_attention(weights, tokens) -> float:
    """One head's weight on the keys of :func:`detection_pattern` ``"induction"``, averaged over the
    queries that have such a key (notebook 08's induction score).

    Parameters
    ----------
    weights : ndarray, shape (B, n, n)
        One head's attention weights [sequence, query, key].
    tokens : ints, shape (B, n)

    >>> w = np.zeros((1, 4, 4)); w[0, np.arange(4), [0, 0, 0, 1]] = 1.0      # query 3 looks at key 1
    >>> induction_attention(w, [[7, 8, 9, 7]])                              # key 1 follows the 7
    1.0
    """
    w = np.asarray(weights, dtype=np.float64)
    target = detection_pattern(tokens, "induction")
    if w.shape != target.shape:
        raise ValueError(f"weights must be (B, n, n) for tokens (B, n); got {w.shape} and tokens "
                         f"{target.shape[:2]}")
    counted = target.any(axis=-1)                                        # (B, n)
    if not counted.any():
        raise ValueError("no query's token came before in tokens: the score would be empty")
    return float((w * target).sum(axis=-1)[counted].mean())


def offset_weights(weights, offset: int) -> np.ndarray:
    """One head's weight on the key ``offset`` positions back, per query t = offset .. n-1, averaged
    over the sequences: shape (n - offset,) (notebook 08's weight on one offset).

    >>> w = np.broadcast_to(np.eye(3), (2, 3, 3))                           # every query on itself
    >>> offset_weights(w, 0), offset_weights(w, 1)
    (array([1., 1., 1.]), array([0., 0.]))
    """
    w = np.asarray(weights)
    if w.ndim != 3 or w.shape[1] != w.shape[2]:
        raise ValueError(f"weights must be one head's (B, n, n); got shape {w.shape}")
    offset = int(offset)
    if not 0 <= offset < w.shape[-1]:
        raise ValueError(f"offset must be in 0..{w.shape[-1] - 1}; got {offset}")
    t = np.arange(offset, w.shape[-1])
    return w[:, t, t - offset].mean(axis=0)


def _circuit_parts(model) -> dict:
    """The matrices every score below needs, in the x @ W layout, for either kind of model.

    ``W_V[l][h]`` (E, d) and ``W_O[l][h]`` (d, E) of query head h (its key/value head's W_V under
    grouped-query attention), W_E (V_in, E), ``unembed(ids)``: the columns ``ids`` of W_U (E, V_out),
    ``W_U_W_E``: W_U · W_E (E, E); the real model's RMSNorm weights folded in (``ln1`` into W_V,
    the final norm into W_U), as TransformerLens's ``fold_ln`` does. Nothing (V, ·) is copied.
    """
    if hasattr(model, "head_weights"):                                   # the tiny models
        heads = range(model.n_heads)
        each = [[model.head_weights(layer, h) for h in heads] for layer in range(model.n_layers)]
        W_V = [[w["W_V"] for w in row] for row in each]
        W_O = [[w["W_O"] for w in row] for row in each]
        W_E, W_U = model.params["embed"], model.params["W_U"]
        return {"W_E": W_E, "unembed": lambda ids: W_U[:, ids], "V_out": W_U.shape[1],
                "mean_unembed": lambda: W_U.mean(axis=1),
                "W_U_W_E": lambda: W_U.astype(np.float64) @ W_E.astype(np.float64),
                "W_V": W_V, "W_O": W_O, "n_layers": model.n_layers, "H": model.n_heads, "norm": False}
    c = model.config
    d, per = c.d_k, c.H // c.G
    W_V, W_O = [], []
    for p in model.layers:
        W_V.append([(p["W_v"][(h // per) * d:(h // per + 1) * d] * p["attn_norm"]).T for h in range(c.H)])
        W_O.append([p["W_o"][:, h * d:(h + 1) * d].T for h in range(c.H)])
    W_out, g = model.W_out, model.final_norm                              # (V, E), (E,)

    def unembed(ids):                                                    # (E, *ids.shape)
        return np.moveaxis(W_out[ids] * g, -1, 0)

    def gram():
        # float32 product (a 576 x 49,152 GEMM): the eigenvalues keep their signs to far below 1e-3
        return g.astype(np.float64)[:, None] * (W_out.T @ model.embedding).astype(np.float64)

    return {"W_E": model.embedding, "unembed": unembed, "V_out": W_out.shape[0], "W_U_W_E": gram,
            "mean_unembed": lambda: W_out.mean(axis=0) * g,
            "W_V": W_V, "W_O": W_O, "n_layers": c.n_layers, "H": c.H, "norm": True}


def copying_scores(model) -> np.ndarray:
    """Copying score of every head's OV circuit W_E W_V W_O W_U: (n_layers, H), each in [-1, 1].

    Σλ / Σ|λ| over the eigenvalues λ of the (V, V) circuit, real part (Elhage et al. 2021). Its
    nonzero eigenvalues are those of the (d, d) product W_O (W_U W_E) W_V, which is what is
    computed: the real model's 49,152 × 49,152 circuit is never formed. The model's input and output
    vocabularies must be the same size.
    """
    parts = _circuit_parts(model)
    if parts["W_E"].shape[0] != parts["V_out"]:
        raise ValueError(f"a copying score needs as many outputs as input tokens; this model reads "
                         f"{parts['W_E'].shape[0]} tokens and predicts {parts['V_out']} classes")
    middle = parts["W_U_W_E"]()                                          # (E, E)
    out = np.empty((parts["n_layers"], parts["H"]))
    for layer in range(parts["n_layers"]):
        for head in range(parts["H"]):
            small = parts["W_O"][layer][head] @ middle @ parts["W_V"][layer][head]    # (d, d)
            lam = np.linalg.eigvals(small)
            out[layer, head] = (lam.sum() / np.abs(lam).sum()).real if np.abs(lam).sum() > 0 else 0.0
    return out


def direct_logit_attribution(model, cache: ActivationCache, tokens, *, centred: bool = False) -> np.ndarray:
    """Each head's direct share of the logit of the right next token: (n_layers, H, B, T - 1).

    Entry [l, h, b, t]: head h of layer l's output at position t (its ``hook_z`` through its rows
    of W_O), divided by the final norm's scale at t as the run computed it, through the output
    layer, read at the logit of ``tokens[b, t + 1]``. What the rest of the model later does with
    that output is not counted: it is the head's *direct* path only.

    Parameters
    ----------
    model : the model that made ``cache``
    cache : ActivationCache
        From ``model.run_with_cache(tokens)``, with its batch axis; it must hold every layer's
        ``attn.hook_z`` (and, for the real model, ``ln_final.hook_scale``).
    tokens : ints, shape (T,) or (B, T)
    centred : bool
        Subtract the head's mean contribution over the whole vocabulary: the softmax ignores what
        a head adds to every logit alike, so the centred value is what changes the prediction (a
        head that lowers every logit has a negative raw value but may still favour the token).
    """
    if not isinstance(cache, ActivationCache) or not cache.has_batch_dim:
        raise TypeError("cache must be an ActivationCache with its batch axis, from "
                        "model.run_with_cache(tokens)")
    tok = _tokens(tokens)
    parts = _circuit_parts(model)
    target = tok[:, 1:]                                                  # (B, T - 1)
    W_U = parts["unembed"](target)                                       # (E, B, T - 1)
    if parts["norm"]:
        scale = cache["ln_final.hook_scale"][:, :-1]                     # (B, T - 1, 1)
    else:
        scale = 1.0
    mean_column = parts["mean_unembed"]() if centred else None          # (E,)
    out = np.empty((parts["n_layers"], parts["H"], *target.shape))
    for layer in range(parts["n_layers"]):
        z = cache["z", layer]                                            # (B, T, H, d)
        if z.shape[:2] != tok.shape:
            raise ValueError(f"tokens {tok.shape} do not fit the cache's activations {z.shape[:2]}")
        for head in range(parts["H"]):
            written = z[:, :-1, head] @ parts["W_O"][layer][head] / scale     # (B, T - 1, E)
            out[layer, head] = np.einsum("bte,ebt->bt", written, W_U)
            if centred:
                out[layer, head] -= written @ mean_column
    return out
