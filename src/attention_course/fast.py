"""Fast exact attention in plain NumPy: the textbook formula's numbers, faster and lighter.

:func:`~attention_course.attention.scaled_dot_product_attention` is written to be read: it builds
the whole (L, S) score matrix, then the whole weight matrix, then multiplies. :func:`fast_attention`
computes the same numbers (to float32 rounding) in an order a CPU likes. Every trick is a
rearrangement of the same formula, never an approximation; the Notes of :func:`fast_attention`
go through them one by one.
"""

from __future__ import annotations

import math
import os
import threading
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext

import numpy as np

from ._validate import compute_dtype, positive_int
from .attention import prepare_attention_inputs

try:  # listed in requirements.txt; without it everything still works, only slower
    from threadpoolctl import ThreadpoolController
except ImportError:  # pragma: no cover
    ThreadpoolController = None

LOG2E = 1.0 / math.log(2.0)
# Base-2 scores no larger than this in size need no max-shift: 2**±32 is far from float32's
# overflow (2**128) and underflow (2**-126), even after a sum over millions of keys.
SAFE_EXPONENT = 32.0
# Below this many scores in all, starting threads costs more than it saves.
SMALL_PROBLEM = 1 << 16
# One block of scores should stay in the processor's caches (a few MiB of L2 and L3); larger
# blocks also make each matrix product bigger, and BLAS runs big products closer to its peak.
BLOCK_BYTES = 2 << 20
MAX_BLOCK_Q = 256

_controller = None


def _blas_single_thread():
    """Context manager holding BLAS to one thread (threadpoolctl) - from the main thread only.

    OpenBLAS may ignore a thread count set from any other thread, so that restoring the
    original count from there can fail and leave the whole process on one thread. A call
    made from another thread therefore leaves BLAS as it is (correct, possibly slower).
    """
    global _controller
    if ThreadpoolController is None or threading.current_thread() is not threading.main_thread():
        return nullcontext()
    if _controller is None:
        # Finding the loaded BLAS libraries takes ~0.3 ms: once per process is enough.
        _controller = ThreadpoolController()
    return _controller.limit(limits=1, user_api="blas")


def available_cpus() -> int:
    """Number of CPU cores this process may run on.

    Returns
    -------
    int

    Examples
    --------
    >>> available_cpus() >= 1
    True
    """
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def default_block_q(S: int, itemsize: int = 4) -> int:
    """Queries per block, so that one (S, block_q) score buffer takes at most about 2 MiB.

    Parameters
    ----------
    S : int
        Number of keys.
    itemsize : int
        Bytes per number (4 for float32, 8 for float64).

    Returns
    -------
    int
        A multiple of 16 between 16 and 256.

    Examples
    --------
    >>> default_block_q(4096), default_block_q(16384), default_block_q(4096, itemsize=8)
    (128, 32, 64)
    """
    rows = BLOCK_BYTES // max(1, S * itemsize)
    return int(min(MAX_BLOCK_Q, max(16, rows // 16 * 16)))


def fast_attention(q, k, v, attn_mask=None, is_causal: bool = False,
                   scale: float | None = None, *, block_q: int | None = None,
                   num_threads: int | None = None) -> np.ndarray:
    """Exact attention, softmax(q kᵀ · scale + mask) v, arranged for speed and little memory.

    Same arguments, same result and same edge cases as
    :func:`~attention_course.attention.scaled_dot_product_attention`, which stays the readable
    reference: only the order of the work differs.

    Parameters
    ----------
    q : ndarray, shape (..., L, E)
        Queries.
    k : ndarray, shape (..., S, E)
        Keys.
    v : ndarray, shape (..., S, Ev)
        Values; Ev may differ from E. Leading (batch, head) axes of q, k, v broadcast.
    attn_mask : ndarray of bool or float, broadcastable to (..., L, S), optional
        Boolean: True means the key takes part. Floating: added to the scaled scores.
    is_causal : bool
        Top-left causal triangle; keys after a block's last query are never computed.
    scale : float, optional
        Default ``1 / sqrt(E)``.
    block_q : int, optional
        Queries per block (default :func:`default_block_q`: at most about 2 MiB of scores).
    num_threads : int, optional
        Python threads sharing the blocks. Default: the available cores, or just the calling
        thread for small inputs (under 65536 scores), where threads cost more than they save.

    Returns
    -------
    ndarray, shape (..., L, Ev), dtype of q
        A query that may see no key gets a row of zeros, never NaN.

    Notes
    -----
    Attention is dominated by two matrix products, 4·L·S·E operations, which a BLAS library runs
    near the processor's peak. What slows the textbook formula down is everything around them:
    (L, S) arrays are written to main memory and read back several times, and NumPy's
    element-wise functions (``exp``, ``max``, ``-``) use one core only. Here the work is
    rearranged:

    1. **Query blocks.** Queries are taken ``block_q`` at a time. The scores of one block, an
       (S, block_q) buffer of at most about 2 MiB, stay in the processor's caches while ``exp``
       and the sum go over them; working memory is that buffer instead of L·S numbers.
    2. **In place.** Each thread allocates its buffer once, and every step writes into it
       (``out=``): no temporary (L, S) array is ever created.
    3. **Constants go to the small side.** ``scale`` multiplies q, (L, E) numbers, instead of
       the (L, S) scores. It also carries ``log2(e)``, so that the cheaper ``exp2`` replaces
       ``exp`` (``exp(x) = 2 ** (x · log2 e)``). The division by each row's sum is done on the
       (L, Ev) output instead of the (L, S) weights: ``(p / l) @ v == (p @ v) / l``.
    4. **No max-shift when none is needed.** Softmax subtracts each row's maximum only to keep
       ``exp`` from overflowing, and the result does not depend on it. Before any score exists,
       Cauchy-Schwarz bounds them all: ``|q · k| <= |q| · |k|``. When that bound is small (for
       most inputs it is), the shift is skipped; otherwise each row's maximum is subtracted as
       usual. Either way the weights are the same, up to rounding.
    5. **Threads.** NumPy's element-wise functions run on one core, so the blocks are shared
       out to one Python thread per core (``concurrent.futures``). NumPy releases the GIL
       inside its loops, so the threads really run side by side; BLAS is held to one thread
       (threadpoolctl), or its threads and ours would fight over the same cores.
    6. **Layout.** Scores are kept as (keys, queries): for these shapes ``k @ qᵀ`` runs faster
       in BLAS than ``q @ kᵀ``, and the row sums become one product ``ones @ p``.
    7. **Pitfalls avoided.** ``matmul``, not ``einsum`` (slower here, and it may allocate more);
       and no ``/ np.sqrt(E)``: under NumPy 2 a NumPy float64 scalar turns float32 arrays into
       float64, twice the memory and half the speed.

    Except for small inputs, BLAS is limited to one thread for the whole process while this
    function runs, and restored afterwards. That is done only when it is called from the main
    thread (OpenBLAS may ignore the setting from other threads); called from another thread,
    it leaves BLAS alone and gives the same result, possibly more slowly.

    Examples
    --------
    >>> from attention_course.attention import scaled_dot_product_attention
    >>> rng = np.random.default_rng(0)
    >>> q, k, v = (rng.normal(size=(2, 300, 16)).astype(np.float32) for _ in range(3))
    >>> out = fast_attention(q, k, v, is_causal=True, block_q=32)
    >>> out.dtype, out.shape
    (dtype('float32'), (2, 300, 16))
    >>> bool(np.allclose(out, scaled_dot_product_attention(q, k, v, is_causal=True), atol=1e-6))
    True
    """
    q, k, v, mask, scale, dtype, batch = prepare_attention_inputs(
        q, k, v, attn_mask, is_causal, scale
    )
    cdtype = compute_dtype(dtype)
    L, S, E, Ev = q.shape[-2], k.shape[-2], q.shape[-1], v.shape[-1]
    if block_q is None:
        bq = default_block_q(S, cdtype.itemsize)
    else:
        bq = positive_int(block_q, "block_q")
    threads = available_cpus() if num_threads is None else positive_int(
        num_threads, "num_threads")
    out = np.zeros(batch + (L, Ev), dtype=cdtype)
    if out.size == 0 or S == 0:
        # Nothing to compute (an empty batch, L = 0 or Ev = 0), or no key to look at: zeros,
        # as the reference gives.
        return out.astype(dtype, copy=False)
    # Broadcast views: nothing is copied; each head is indexed out of them.
    q = np.broadcast_to(q.astype(cdtype, copy=False), batch + (L, E))
    k = np.broadcast_to(k.astype(cdtype, copy=False), batch + (S, E))
    v = np.broadcast_to(v.astype(cdtype, copy=False), batch + (S, Ev))
    if mask is not None:
        mask = np.broadcast_to(mask, batch + (L, S))
    heads = list(np.ndindex(*batch))             # [()] when there are no leading axes
    blocks = [(h, i0, min(i0 + bq, L)) for h in heads for i0 in range(0, L, bq)]
    if is_causal:
        # Late query blocks see more keys: hand them out first so the threads finish together.
        blocks.sort(key=lambda b: -min(S, b[2]))
    job = _Job(q, k, v, mask, is_causal, scale, out, bq)
    todo = deque(blocks)                         # popleft() is atomic: a shared work queue

    small = num_threads is None and L * S * len(heads) < SMALL_PROBLEM
    threads = min(threads, len(blocks))
    if small:
        job.run(todo)
    else:
        with _blas_single_thread():
            if threads == 1:
                job.run(todo)
            else:
                with ThreadPoolExecutor(max_workers=threads - 1) as pool:
                    helpers = [pool.submit(job.run, todo) for _ in range(threads - 1)]
                    job.run(todo)                # the calling thread works too
                    for f in helpers:
                        f.result()               # re-raises an error from a helper here
    return out.astype(dtype, copy=False)


class _Job:
    """What every thread shares: inputs, output, constants and the per-head bounds."""

    def __init__(self, q, k, v, mask, is_causal, scale, out, bq):
        self.q, self.k, self.v, self.mask, self.out = q, k, v, mask, out
        self.is_causal, self.bq = is_causal, bq
        dt = out.dtype
        self.float_mask = mask is not None and mask.dtype != np.bool_
        # NumPy scalars of the compute dtype: a float32 array times them stays float32.
        # Scale and the base change are folded into q. A floating mask is added in natural
        # units, as the direct formula adds it: a mask of finfo.min times log2(e) would
        # overflow to -inf and turn a fully masked row (which the formula averages) into zeros.
        # The base change then comes after the max-shift, when every score is <= 0.
        self.alpha = dt.type(scale if self.float_mask else scale * LOG2E)
        self.log2e = dt.type(LOG2E)
        self.neg_inf = dt.type(-np.inf)
        self.limit = float(np.finfo(dt).max) / 4
        # Keys j > query i in a (keys, queries) tile on the diagonal: blocked by causality.
        self.after = np.tri(bq, bq, -1, dtype=bool) if is_causal else None
        self.bounds = {}

    def head_bounds(self, h):
        """Largest key norm and largest |value| of head h (computed once, shared)."""
        found = self.bounds.get(h)
        if found is None:      # two threads may both compute it: same value, no harm
            kh, vh = self.k[h], self.v[h]
            # Squared row norms without an (S, E) temporary.
            k_norm = math.sqrt(float(np.einsum("se,se->s", kh, kh).max()))
            found = self.bounds[h] = (k_norm, float(np.abs(vh).max()))
        return found

    def run(self, todo):
        """Take blocks from the shared queue until it is empty."""
        S, E = self.k.shape[-2], self.k.shape[-1]
        dt = self.out.dtype
        buffer = np.empty(S * self.bq, dt)       # this thread's score buffer, reused
        q_block = np.empty((self.bq, E), dt)
        ones = np.ones(S, dt)
        while True:
            try:
                h, i0, i1 = todo.popleft()
            except IndexError:
                return
            self.block(h, i0, i1, buffer, q_block, ones)

    def block(self, h, i0, i1, buffer, q_block, ones):
        """Queries i0:i1 of head h, written into the output."""
        nq = i1 - i0
        S = self.k.shape[-2]
        s_end = min(S, i1) if self.is_causal else S          # keys this block may see
        qs = np.multiply(self.q[h][i0:i1], self.alpha, out=q_block[:nq])      # (nq, E)
        p = buffer[: s_end * nq].reshape(s_end, nq)           # (keys, queries), contiguous
        np.matmul(self.k[h][:s_end], qs.T, out=p)             # base-2 scores
        if self.is_causal and i0 < s_end:
            np.copyto(p[i0:s_end], self.neg_inf, where=self.after[: s_end - i0, :nq])
        elif self.mask is not None:
            tile = self.mask[h][i0:i1].T                      # (S, nq) view
            if self.float_mask:
                np.add(p, tile, out=p)
            else:
                np.copyto(p, self.neg_inf, where=~tile)
        k_norm, v_max = self.head_bounds(h)
        q_norm = math.sqrt(float(np.einsum("qe,qe->q", qs, qs).max()))
        no_shift_needed = (not self.float_mask and q_norm * k_norm <= SAFE_EXPONENT
                           and v_max * s_end * 2.0**SAFE_EXPONENT < self.limit)
        if not no_shift_needed:
            top = p.max(axis=0)                               # (nq,) each query's maximum
            top[~np.isfinite(top)] = 0      # a query with no allowed key: 2**(-inf - 0) = 0
            np.subtract(p, top, out=p)
        if self.float_mask:
            # A blocked score near finfo.min becomes -inf here: weight 0, as in the formula.
            with np.errstate(over="ignore"):
                np.multiply(p, self.log2e, out=p)
        np.exp2(p, out=p)                                     # unnormalised weights
        row_sum = ones[:s_end] @ p                            # (nq,)
        row_sum[row_sum == 0] = 1           # its numerator is 0 as well: the row stays 0
        o = self.out[h][i0:i1]                                # (nq, Ev) view of the output
        if v_max * s_end < self.limit:
            np.matmul(p.T, self.v[h][:s_end], out=o)
            np.divide(o, row_sum[:, None], out=o)             # (nq, Ev) divisions, not (S, nq)
        else:   # values so large that a sum of them could overflow: normalise first
            np.divide(p, row_sum, out=p)
            np.matmul(p.T, self.v[h][:s_end], out=o)
