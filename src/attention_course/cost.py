"""The cost model of attention: how many operations and how much memory it needs."""

from __future__ import annotations

from importlib import resources
from typing import NamedTuple

import numpy as np

from ._validate import nonnegative_int, positive_int


def attention_flops(L: int, d: int, S: int | None = None, d_v: int | None = None,
                    num_heads: int = 1, batch: int = 1) -> int:
    """Floating-point operations of scaled dot-product attention (the two matrix products).

    ``q @ kᵀ`` costs 2·L·S·d (one multiply and one add per term) and ``weights @ v`` costs
    2·L·S·d_v, so with S = L = n and d_v = d one head costs **4·n²·d**. The softmax and the
    scale add O(L·S), a lower order, and are left out.

    Parameters
    ----------
    L : int
        Queries (n).
    d : int
        Query/key width per head.
    S : int, optional
        Keys (default L).
    d_v : int, optional
        Value width per head (default d).
    num_heads, batch : int

    Returns
    -------
    int

    Examples
    --------
    >>> attention_flops(1024, 64)
    268435456
    >>> attention_flops(2048, 64) // attention_flops(1024, 64)
    4
    """
    L = positive_int(L, "L")
    d = positive_int(d, "d")
    S = L if S is None else positive_int(S, "S")
    d_v = d if d_v is None else positive_int(d_v, "d_v")
    H = positive_int(num_heads, "num_heads")
    B = positive_int(batch, "batch")
    return 2 * B * H * L * S * (d + d_v)


def attention_memory_bytes(L: int, S: int | None = None, num_heads: int = 1, batch: int = 1,
                           dtype=np.float32) -> int:
    """Bytes of the score (= weight) matrices that the direct formula holds at once.

    Parameters
    ----------
    L : int
        Queries.
    S : int, optional
        Keys (default L).
    num_heads, batch : int
    dtype : numpy dtype
        Element type (default float32, 4 bytes).

    Returns
    -------
    int
        ``batch · num_heads · L · S · itemsize``.

    Examples
    --------
    >>> attention_memory_bytes(4096) / 2**20      # one head, float32: MiB
    64.0
    """
    L = positive_int(L, "L")
    S = L if S is None else positive_int(S, "S")
    H = positive_int(num_heads, "num_heads")
    B = positive_int(batch, "batch")
    return B * H * L * S * np.dtype(dtype).itemsize


def max_length_for_memory(budget_bytes: float, num_heads: int = 1, batch: int = 1,
                          dtype=np.float32) -> int:
    """Largest n whose n×n score matrices fit in ``budget_bytes``.

    Examples
    --------
    >>> max_length_for_memory(24 * 2**30)        # one float32 head in 24 GiB
    80264
    """
    H = positive_int(num_heads, "num_heads")
    B = positive_int(batch, "batch")
    if not (np.isscalar(budget_bytes) and budget_bytes > 0):
        raise ValueError(f"budget_bytes must be a positive number; got {budget_bytes!r}")
    per_entry = B * H * np.dtype(dtype).itemsize
    n = int(np.sqrt(budget_bytes / per_entry))
    while (n + 1) ** 2 * per_entry <= budget_bytes:  # guard sqrt's rounding on both sides
        n += 1
    while n * n * per_entry > budget_bytes:
        n -= 1
    return n


# ---------------------------------------------------------------------------------------------
# Beside the other layers, and the cheaper variants (notebook 06)
# ---------------------------------------------------------------------------------------------


def recurrent_flops(n: int, d: int, batch: int = 1) -> int:
    """Floating-point operations of a plain recurrent layer over n steps of width d.

    Each step computes ``h_t = tanh(h_{t-1} W_h + x_t W_x)``: two (d,) × (d, d) products, each
    2·d² operations (a multiply and an add per term), so the layer costs **4·n·d²**. The steps
    run one after another: n sequential operations, against one for attention.

    Parameters
    ----------
    n : int
        Sequence length (steps).
    d : int
        Width of the hidden state and of the input.
    batch : int

    Returns
    -------
    int

    Examples
    --------
    >>> recurrent_flops(512, 512) == attention_flops(512, 512)   # equal at n = d
    True
    >>> recurrent_flops(100, 512) > attention_flops(100, 512)    # n < d: attention is cheaper
    True
    """
    n = positive_int(n, "n")
    d = positive_int(d, "d")
    B = positive_int(batch, "batch")
    return 4 * B * n * d * d


def layer_complexity(n: int, d: int, kernel: int = 3, window: int = 16) -> dict:
    """Table 1 of Vaswani et al. (2017) with numbers in it: how four layer types grow.

    The table gives orders of growth; here each order is evaluated with its constant set to 1,
    so the numbers compare how the layers grow, not exact operation counts (for those see
    :func:`attention_flops` and :func:`recurrent_flops`, whose constant is 4 for both).

    Parameters
    ----------
    n : int
        Sequence length.
    d : int
        Representation width.
    kernel : int
        k, the kernel width of the convolutional layer (at least 2).
    window : int
        r, the neighbourhood of restricted self-attention.

    Returns
    -------
    dict
        ``{layer: {"per_layer": ..., "sequential": ..., "max_path": ...}}`` for the layers
        ``"self_attention"`` (n²·d, 1, 1), ``"recurrent"`` (n·d², n, n), ``"convolutional"``
        (k·n·d², 1, ⌈log_k n⌉ with dilated convolutions) and ``"restricted"`` (r·n·d, 1, ⌈n/r⌉).

    Examples
    --------
    >>> t = layer_complexity(n=100, d=512)
    >>> t["self_attention"]["per_layer"] < t["recurrent"]["per_layer"]   # n < d
    True
    >>> t["recurrent"]["sequential"], t["convolutional"]["max_path"], t["restricted"]["max_path"]
    (100, 5, 7)
    """
    n = positive_int(n, "n")
    d = positive_int(d, "d")
    k = positive_int(kernel, "kernel")
    r = positive_int(window, "window")
    if k < 2:
        raise ValueError(f"kernel must be at least 2 to widen the view; got kernel={k}")
    # ⌈log_k n⌉ in integers: float logs misround at exact powers (log(1000, 10) < 3).
    levels, reach = 0, 1
    while reach < n:
        levels, reach = levels + 1, reach * k
    return {
        "self_attention": {"per_layer": n * n * d, "sequential": 1, "max_path": 1},
        "recurrent": {"per_layer": n * d * d, "sequential": n, "max_path": n},
        "convolutional": {"per_layer": k * n * d * d, "sequential": 1, "max_path": levels},
        "restricted": {"per_layer": r * n * d, "sequential": 1, "max_path": -(-n // r)},
    }


def windowed_pairs(L: int, window: int, S: int | None = None, causal: bool = False) -> int:
    """How many (query, key) pairs a sliding window keeps: the True entries of
    :func:`~attention_course.attention.sliding_window_mask`, counted without building it.

    Parameters
    ----------
    L : int
        Queries.
    window : int
        r, neighbours on each side (0: each query sees only its own position).
    S : int, optional
        Keys (default L).
    causal : bool
        Keep only the left side.

    Returns
    -------
    int
        At most ``L·(2r+1)`` (``L·(r+1)`` causal): O(n·r) instead of L·S.

    Examples
    --------
    >>> windowed_pairs(4, 1)            # rows keep 2, 3, 3, 2 keys
    10
    >>> round(windowed_pairs(4096, 128) / 4096**2, 5)
    0.06176
    """
    L = positive_int(L, "L")
    S = L if S is None else positive_int(S, "S")
    r = nonnegative_int(window, "window")
    right = 0 if causal else r
    # Count by diagonal, not by row: offset o = j - i holds min(L, S - o) - max(0, -o) pairs,
    # and only offsets that exist in an (L, S) matrix are visited, so the cost is O(min(r, n)).
    o = np.arange(max(-r, -(L - 1)), min(right, S - 1) + 1, dtype=np.int64)
    return int((np.minimum(L, S - o) - np.maximum(0, -o)).sum())


def windowed_attention_flops(L: int, d: int, window: int, S: int | None = None,
                             d_v: int | None = None, num_heads: int = 1, batch: int = 1,
                             causal: bool = False) -> int:
    """Operations of sliding-window attention when only the kept pairs are computed.

    Each kept (query, key) pair costs 2·d for its score and 2·d_v for its share of the output,
    as in :func:`attention_flops`; a banded kernel skips the rest.

    Examples
    --------
    >>> windowed_attention_flops(4096, 64, 4096) == attention_flops(4096, 64)   # r >= n: full
    True
    >>> attention_flops(4096, 64) // windowed_attention_flops(4096, 64, 128)
    16
    """
    d = positive_int(d, "d")
    d_v = d if d_v is None else positive_int(d_v, "d_v")
    H = positive_int(num_heads, "num_heads")
    B = positive_int(batch, "batch")
    return 2 * B * H * windowed_pairs(L, window, S, causal) * (d + d_v)


def windowed_attention_memory_bytes(L: int, window: int, S: int | None = None,
                                    num_heads: int = 1, batch: int = 1, causal: bool = False,
                                    dtype=np.float32) -> int:
    """Bytes of the scores a banded kernel keeps: one per kept pair.

    Examples
    --------
    >>> round(windowed_attention_memory_bytes(4096, 128) / 2**20, 2)     # MiB, one float32 head
    3.95
    """
    H = positive_int(num_heads, "num_heads")
    B = positive_int(batch, "batch")
    return B * H * windowed_pairs(L, window, S, causal) * np.dtype(dtype).itemsize


def chunked_attention_memory_bytes(block_q: int = 128, block_k: int = 128, L: int | None = None,
                                   S: int | None = None, num_heads: int = 1, batch: int = 1,
                                   dtype=np.float32) -> int:
    """Bytes of the one score tile that exact chunked attention holds at a time.

    :func:`~attention_course.chunked.online_softmax_attention` visits the (L, S) scores one
    (block_q, block_k) tile at a time, so this does not grow with n (tiles are cut to L and S
    when the sequence is shorter than a block).

    Examples
    --------
    >>> chunked_attention_memory_bytes() / 2**10                          # KiB
    64.0
    >>> chunked_attention_memory_bytes(L=4096) == chunked_attention_memory_bytes(L=65536)
    True
    """
    bq = positive_int(block_q, "block_q")
    bk = positive_int(block_k, "block_k")
    if L is not None:
        bq = min(bq, positive_int(L, "L"))
    if S is not None or L is not None:
        bk = min(bk, positive_int(L if S is None else S, "S"))
    H = positive_int(num_heads, "num_heads")
    B = positive_int(batch, "batch")
    return B * H * bq * bk * np.dtype(dtype).itemsize


# ---------------------------------------------------------------------------------------------
# The stored benchmark run (notebook 06)
# ---------------------------------------------------------------------------------------------

BENCH_LANGS = ("en", "zh")


class StoredBench(NamedTuple):
    """One stored ``make bench`` run, as ``benchmarks/run.py`` wrote it."""

    name: str
    """File name of the table inside the package, e.g. ``bench_attention_en.md``."""
    text: str
    """The Markdown: what ran where, the table, how it was measured."""
    png: bytes
    """The figure (PNG bytes)."""


def stored_bench(lang: str = "en") -> StoredBench:
    """The benchmark run that ships inside the library: its table and its figure.

    The files are package data (``attention_course/data/bench_attention_{lang}.{md,png}``),
    read through :mod:`importlib.resources`, so a notebook finds them wherever it was copied
    or fetched to, with nothing but the installed library.

    Parameters
    ----------
    lang : {"en", "zh"}
        Language of the table's text and of the figure's labels.

    Returns
    -------
    StoredBench
        ``(name, text, png)``.

    Raises
    ------
    ValueError
        If ``lang`` is not one of ``"en"``, ``"zh"``.

    Examples
    --------
    >>> run = stored_bench("en")
    >>> run.name, run.text.startswith("# Attention"), run.png[:4] == b"\\x89PNG"
    ('bench_attention_en.md', True, True)
    """
    if lang not in BENCH_LANGS:
        raise ValueError(f"lang must be one of {BENCH_LANGS}; got {lang!r}")
    data = resources.files("attention_course") / "data"
    name = f"bench_attention_{lang}.md"
    return StoredBench(name, (data / name).read_text(encoding="utf-8"),
                       (data / f"bench_attention_{lang}.png").read_bytes())
