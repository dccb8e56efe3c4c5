"""The cost model of attention: how many operations and how much memory it needs."""

from __future__ import annotations

import numpy as np

from ._validate import positive_int


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
