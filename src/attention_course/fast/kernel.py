"""Fast exact attention in plain NumPy: the textbook formula's numbers, faster and lighter.

:func:`~attention_course.attention.scaled_dot_product_attention` is written to be read: it builds
the whole (L, S) score matrix, then the whole weight matrix, then multiplies. :func:`fast_attention`
computes the same numbers (to float32 rounding) in an order a CPU likes. Every trick is a
rearrangement of the same formula, never an approximation.

What a call costs
-----------------
Per head, attention needs two matrix products, 4·L·S·E operations, and L·S exponentials.
BLAS runs the products near the processor's peak; NumPy's ``exp`` runs at a fixed rate per
core. Those two rates set the least time a call can take (the *floor* that ``make bench``
measures). On a 2-core CPU with AVX2 and no AVX-512, one float32 ``exp`` takes as long as
about 140 operations of a large matrix product, against 4·E = 256 operations per score for
the products at E = 64: the exponentials are over a third of the floor. Everything else, each
extra pass over the scores, each conversion, each call into NumPy, is time on top of it, and
the code is arranged to avoid it.

The steps of one block
----------------------
Queries are taken ``block_q`` at a time (a *block*; for short sequences several heads at once).
:meth:`_Job.block` runs four steps, each a method of its own:

1. **Scores** (:meth:`_Job.scores`). ``p = k @ (q · scale)ᵀ``, an (S, block_q) buffer of at most
   about 2 MiB, so that it stays in the processor's caches for the steps that follow. The scale
   multiplies the (block_q, E) queries, not the (S, block_q) scores. The buffer is kept per
   thread from one call to the next (fresh memory costs a page fault per 4 KiB) and every
   step writes into it (``out=``): no (L, S) array is ever made. Keys come first, (keys,
   queries): for these shapes ``k @ qᵀ`` runs faster in BLAS than ``q @ kᵀ``, and the row sums
   become one product ``ones @ p``. Under ``is_causal``, keys after the block's last query are
   never computed (about half the work).
2. **Mask** (:meth:`_Job.mask`). Blocked scores become ``-inf`` (``exp`` of it is 0, and NumPy's
   ``exp`` takes it at full speed); a floating mask is added. Keys that a key-padding mask
   (shape (..., 1, S)) blocks for every query were dropped before any score was computed, so
   padding costs nothing here.
3. **Exponentials** (:meth:`_Job.exponentials`). Softmax subtracts each query's largest score
   only to keep ``exp`` from overflowing, and the result does not depend on it. Before any
   score exists, Cauchy-Schwarz bounds them all: ``|q · k| <= |q| · |k|``. When that bound is
   small (for most inputs it is), the two passes of the shift are skipped and ``exp`` runs
   alone; otherwise each query's maximum is subtracted first. Either way the weights are the
   same, up to rounding. The same norms, and the largest ``|v|``, show a NaN or inf in the
   inputs, so no separate pass looks for them.
4. **Accumulate** (:meth:`_Job.accumulate`). The row sums (``ones @ p``), the weighted values
   (``pᵀ @ v``), then the division by the sums, done on the (block_q, Ev) output instead of the
   (S, block_q) weights: ``(p / l) @ v == (p @ v) / l``.

The blocks are shared out to one thread per core (:mod:`~attention_course.fast.thread_pool`, which
gives its reasons), because NumPy's ``exp`` runs on one core. Two more pitfalls are avoided:
``matmul``, not ``einsum`` (slower here, and it may allocate more); and no ``/ np.sqrt(E)``:
under NumPy 2 a NumPy float64 scalar turns float32 arrays into float64, twice the memory and
half the speed.
"""

from __future__ import annotations

import functools
import math
import threading
from collections import deque

import numpy as np

from .._validate import compute_dtype, positive_int
from ..attention import check_finite, prepare_attention_inputs
from .thread_pool import available_cpus, blas_one_thread, run_shared

__all__ = ["available_cpus", "default_block_q", "fast_attention"]

# Scores no larger than this in size need no max-shift: e**±22 (about 2**±32) is far from
# float32's overflow (about e**88) and underflow (about e**-87), even summed over millions of keys.
SAFE_EXPONENT = 22.0
# Below this many scores in all, handing blocks to other threads costs more than it saves.
SMALL_PROBLEM = 1 << 16
# One block of scores should stay in the processor's caches (a few MiB of L2 and L3); larger
# blocks also make each matrix product bigger, and BLAS runs big products closer to its peak.
BLOCK_BYTES = 2 << 20
MAX_BLOCK_Q = 256
# Under is_causal, smaller blocks waste less of the triangle but make smaller, slower products.
CAUSAL_BLOCK_Q = 64


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
    reference: only the order of the work differs (the module's notes give it step by step).

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
        Queries per block (default :func:`default_block_q`: at most about 2 MiB of scores;
        with ``is_causal``, at most 64).
    num_threads : int, optional
        Threads sharing the blocks. Default: the available cores, or just the calling thread
        for small inputs (under 65536 scores), where handing out work costs more than it saves.

    Returns
    -------
    ndarray, shape (..., L, Ev), dtype of q
        A query that may see no key gets a row of zeros, never NaN.

    Notes
    -----
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
        q, k, v, attn_mask, is_causal, scale, check_finite=False
    )
    cdtype = compute_dtype(dtype)
    S = k.shape[-2]
    if block_q is None:
        bq = default_block_q(S, cdtype.itemsize)
        if is_causal:
            # Smaller blocks follow the triangle more closely: of each tile on the diagonal,
            # half is computed for nothing, n · block_q / 2 scores per head in all.
            bq = min(bq, CAUSAL_BLOCK_Q)
    else:
        bq = positive_int(block_q, "block_q")
    threads = available_cpus() if num_threads is None else positive_int(
        num_threads, "num_threads")
    q, k, v = (a.astype(cdtype, copy=False) for a in (q, k, v))
    job = _Job(q, k, v, mask, is_causal, scale, batch, bq, threads)   # raises for NaN/inf
    todo = deque(job.blocks)                     # popleft() is atomic: a shared work queue
    if not todo:
        pass  # nothing to compute (an empty batch, L, S or Ev, or no key to see): zeros
    elif num_threads is None and job.scores_total < SMALL_PROBLEM:
        job.run(todo)
    else:
        with blas_one_thread():
            run_shared(job.run, todo, min(threads, len(todo)))
    return job.out.astype(dtype, copy=False)


@functools.lru_cache(maxsize=16)
def _causal_after(bq):
    """For a (keys, queries) tile on the diagonal: True where the key comes after the query."""
    after = np.tri(bq, bq, -1, dtype=bool)
    after.flags.writeable = False
    return after


_local = threading.local()


def _scratch(name, n, dtype, fill=None):
    """n numbers of dtype from a buffer this thread keeps between calls (grown when too small).

    Fresh memory of a few hundred KiB costs a page fault per 4 KiB on first use, tens of
    microseconds that count at n = 256; a buffer kept from the previous call costs nothing.
    """
    key = (name, np.dtype(dtype).str)
    buffers = getattr(_local, "buffers", None)
    if buffers is None:
        buffers = _local.buffers = {}
    buf = buffers.get(key)
    if buf is None or buf.size < n:
        buf = buffers[key] = np.empty(max(n, 1), dtype)
        if fill is not None:
            buf.fill(fill)
    return buf[:n]


def _broadcast(a, batch):
    """``a`` of shape (..., n, m) seen with leading axes ``batch`` (a view; as is if it has them)."""
    shape = batch + a.shape[-2:]
    return a if a.shape == shape else np.broadcast_to(a, shape)


def _kept_keys(row):
    """Which keys a key-padding row lets through, and their additive bias.

    Parameters
    ----------
    row : ndarray, shape (S,), bool or float
        One key-padding mask row (True, or finite, = the key takes part).

    Returns
    -------
    sel : slice or ndarray of int
        The kept keys: a slice when they come first (padding at the end), so that no copy is
        made; their indices otherwise.
    n : int
        How many keys are kept.
    bias : ndarray, shape (n, 1), or None
        The mask's values on the kept keys, when some are not 0.
    """
    S = row.shape[0]
    keep = row if row.dtype == np.bool_ else row > -np.inf
    n = int(np.count_nonzero(keep))
    if n == S:
        sel = slice(None)
    elif keep[:n].all():
        sel = slice(0, n)
    else:
        sel = np.flatnonzero(keep)
    bias = None
    if row.dtype != np.bool_ and n:
        kept = row[sel]
        if np.any(kept != 0):
            bias = np.ascontiguousarray(kept)[:, None]
    return sel, n, bias


class _Head:
    """What one block reads: views with a leading axis of heads (1, or a group's size)."""

    __slots__ = ("q", "k", "v", "out", "bias", "blocked", "additive", "shift",
                 "normalise_first")


class _Job:
    """What every thread shares: inputs, output, per-head bounds and the list of blocks.

    A block is ``(h, i0, i1)``: queries i0:i1 of head h, an index tuple into the leading axes,
    or of the group of heads h, a slice of the heads seen as one flat axis.
    """

    def __init__(self, q, k, v, mask, is_causal, scale, batch, bq, threads=1):
        L, S, Ev = q.shape[-2], k.shape[-2], v.shape[-1]
        dt = q.dtype
        self.is_causal, self.bq, self.dtype = is_causal, bq, dt
        self.scale = dt.type(scale)
        self.limit = float(np.finfo(dt).max) / 4
        self.states = {}                         # per head or group: (shift, normalise_first)
        heads = list(np.ndindex(*batch))         # [()] when there are no leading axes
        self.q, self.k, self.v = (_broadcast(a, batch) for a in (q, k, v))

        # The mask, in one of four forms (see step 2 of the module's notes).
        self.bias = self.blocked = self.additive = self.keys = None
        self.shift_always = False                # a floating mask: scores have no bound
        if mask is not None and mask.ndim and mask.shape[-1] != S:
            # A key axis of 1 broadcasts over the S keys (S may be 0): a row that long from here on.
            mask = np.broadcast_to(mask, mask.shape[:-1] + (S,))
        if mask is not None and (mask.ndim < 2 or mask.shape[-2] == 1):
            if math.prod(mask.shape[:-2]) == 1:  # one padding row for every head
                self._drop_keys(mask.reshape(-1))
                S = self.k.shape[-2]
            else:                                # a padding row per head
                self.keys = self._keys_per_head(mask, batch)
                for h in heads:
                    if self.keys[h] is None:     # no block reads this head: check it here
                        check_finite(q=self.q[h], k=self.k[h], v=self.v[h])
                heads = [h for h in heads if self.keys[h] is not None]
        elif mask is not None and mask.dtype == np.bool_:
            self.blocked = np.broadcast_to(np.logical_not(mask), batch + (L, S))
        elif mask is not None:
            self.additive = np.broadcast_to(mask, batch + (L, S))
            self.shift_always = True
        # A query may see no key at all: its row sum is 0, and so is its output row.
        self.may_be_empty = self.blocked is not None or self.additive is not None
        if S == 0 or Ev == 0:
            check_finite(q=q, k=k, v=v)
            heads = []
        self.heads = heads
        # Blocks write every row of their heads; other heads must start at zero.
        every_head = len(heads) == math.prod(batch)
        self.out = (np.empty if every_head else np.zeros)(batch + (L, Ev), dtype=dt)
        self.max_keys = S
        self.scores_total = L * S * len(heads)

        self.group = 1
        if heads and self.keys is None and self.blocked is None and self.additive is None:
            self._group_heads(batch, len(heads) * -(-L // bq), threads)
        if self.group > 1:
            H, g = len(heads), self.group
            heads = [slice(h0, min(h0 + g, H)) for h0 in range(0, H, g)]
        self.blocks = [(h, i0, min(i0 + bq, L)) for h in heads for i0 in range(0, L, bq)]
        if is_causal:
            # Late query blocks see more keys: hand them out first so the threads finish together.
            self.blocks.sort(key=lambda b: -min(S, b[2]))

    # ------------------------------------------------------------ set-up

    def _drop_keys(self, row):
        """A key-padding row shared by every head: its blocked keys leave k and v up front."""
        sel, n, self.bias = _kept_keys(row)
        if n < row.shape[0]:
            dropped = np.ones(row.shape[0], bool)
            dropped[sel] = False
            # No score reads the dropped keys: check them here.
            check_finite(k=self.k[..., dropped, :], v=self.v[..., dropped, :])
            self.k, self.v = self.k[..., sel, :], self.v[..., sel, :]

    def _keys_per_head(self, mask, batch):
        """Per head: the keys and values some query may see, and their bias (None: no key)."""
        S = self.k.shape[-2]
        rows = np.broadcast_to(mask, batch + (1, S))
        keys = {}
        for h in np.ndindex(*batch):
            sel, n, bias = _kept_keys(rows[h][0])
            keys[h] = (self.k[h][sel], self.v[h][sel], bias) if n else None
        return keys

    def _group_heads(self, batch, n_blocks, threads):
        """Several heads per block when blocks are small: fewer, larger calls into NumPy.

        Each call holds Python's lock (the GIL) for a moment; with small blocks the threads
        would spend their time waiting for it. Heads are grouped while a group's scores stay
        within BLOCK_BYTES and there are still two blocks per thread. It needs q, k, v and
        the output seen as (heads, rows, width) without a copy; an input broadcast over heads
        may be seen so too (its heads then share memory, which is only read).
        """
        H = math.prod(batch)
        per_head = self.max_keys * self.bq * self.out.itemsize
        g = min(H, BLOCK_BYTES // max(1, per_head), n_blocks // (2 * threads))
        if g < 2:
            return
        flat = []
        for a in (self.q, self.k, self.v, self.out):
            try:
                flat.append(a.reshape((H,) + a.shape[-2:], copy=False))
            except ValueError:                    # would need a copy
                return
        self.qf, self.kf, self.vf, self.outf = flat
        self.group = g

    def head(self, h):
        """The views one block of head h (or of the group h) reads, and the head's bounds."""
        part = _Head()
        part.bias, part.blocked, part.additive = self.bias, None, None
        if isinstance(h, slice):
            part.q, part.k, part.v, part.out = self.qf[h], self.kf[h], self.vf[h], self.outf[h]
            key, full = h.start, (part.k, part.v)
        else:
            part.q, part.out = self.q[h][None], self.out[h][None]
            if self.keys is None:
                part.k, part.v = self.k[h][None], self.v[h][None]
            else:
                kh, vh, part.bias = self.keys[h]
                part.k, part.v = kh[None], vh[None]
            if self.blocked is not None:
                part.blocked = self.blocked[h][None]
            elif self.additive is not None:
                part.additive = self.additive[h][None]
            # The bounds and the NaN check see every key, also those a padding mask dropped.
            key, full = h, (self.k[h], self.v[h])
        part.shift, part.normalise_first = self.head_state(key, part.q, *full, part.bias)
        return part

    def head_state(self, key, qh, kh, vh, bias):
        """(shift, normalise_first) for one head or a group, measured by its first block.

        qh, kh, vh: (L, E), (S, E), (S, Ev), or the same with a leading axis of heads. Bounds
        of the whole head: its largest query norm (times the scale), key norm and |v|. A NaN
        or inf in an input shows in them (a square or a max of it is not finite), so they
        double as the input check; two threads may both measure a head, with one result.
        """
        state = self.states.get(key)
        if state is None:
            with np.errstate(over="ignore", invalid="ignore"):
                q_norm = float(np.sqrt(np.einsum("...le,...le->...l", qh, qh).max(initial=0.0)))
                k_norm = float(np.sqrt(np.einsum("...se,...se->...s", kh, kh).max(initial=0.0)))
                v_max = max(float(vh.max(initial=0.0)), -float(vh.min(initial=0.0)))
            if not (math.isfinite(q_norm) and math.isfinite(k_norm) and math.isfinite(v_max)):
                check_finite(q=qh, k=kh, v=vh)   # raises, unless a square merely overflowed
            S = kh.shape[-2]
            # One group, one decision: the largest norms of its heads bound every head's scores.
            bound = q_norm * abs(float(self.scale)) * k_norm
            if bias is not None:
                bound += float(np.abs(bias).max())
            shift = self.shift_always or not (
                bound <= SAFE_EXPONENT and v_max * S * math.exp(SAFE_EXPONENT) < self.limit)
            state = self.states[key] = (shift, not v_max * S < self.limit)
        return state

    # ------------------------------------------------------------ the blocks

    def run(self, todo):
        """Take blocks from the shared queue until it is empty."""
        dt, g, bq = self.dtype, self.group, self.bq
        # This thread's buffers, reused by every block: scores, scaled queries, a row of ones.
        scores = _scratch("scores", g * self.max_keys * bq, dt)
        queries = _scratch("queries", g * bq * self.q.shape[-1], dt)
        ones = _scratch("ones", self.max_keys, dt, fill=1)
        while True:
            try:
                h, i0, i1 = todo.popleft()
            except IndexError:
                return
            self.block(h, i0, i1, scores, queries, ones)

    def block(self, h, i0, i1, scores, queries, ones):
        """Queries i0:i1 of head h (or of the group h), into the output: the four steps."""
        part = self.head(h)
        # Keys this block may see: under causality, none after its last query.
        s_end = min(part.k.shape[1], i1) if self.is_causal else part.k.shape[1]
        p = self.scores(part, i0, i1, s_end, scores, queries)
        self.mask(part, p, i0, i1, s_end)
        self.exponentials(part, p)
        self.accumulate(part, p, i0, i1, s_end, ones)

    def scores(self, part, i0, i1, s_end, scores, queries):
        """Step 1: p = k qᵀ · scale, (heads, keys, queries), in this thread's score buffer."""
        g, nq, E = part.q.shape[0], i1 - i0, part.q.shape[-1]
        qs = np.multiply(part.q[:, i0:i1], self.scale, out=queries[: g * nq * E].reshape(g, nq, E))
        p = scores[: g * s_end * nq].reshape(g, s_end, nq)
        np.matmul(part.k[:, :s_end], qs.transpose(0, 2, 1), out=p)
        return p

    def mask(self, part, p, i0, i1, s_end):
        """Step 2: -inf where a key is blocked; a floating mask or a padding bias added."""
        nq = i1 - i0
        if self.is_causal and i0 < s_end:
            # Only the tile on the diagonal has keys after some of its queries.
            np.copyto(p[:, i0:s_end], -np.inf, where=_causal_after(self.bq)[: s_end - i0, :nq])
        if part.blocked is not None:
            np.copyto(p, -np.inf, where=part.blocked[:, i0:i1].transpose(0, 2, 1))
        elif part.additive is not None:
            np.add(p, part.additive[:, i0:i1].transpose(0, 2, 1), out=p)
        if part.bias is not None:
            np.add(p, part.bias, out=p)

    def exponentials(self, part, p):
        """Step 3: p = exp(p), after subtracting each query's largest score if it could overflow."""
        if part.shift:
            top = p.max(axis=1, keepdims=True)                # (g, 1, nq)
            if self.may_be_empty:
                top[~np.isfinite(top)] = 0    # a query with no key: exp(-inf - 0) = 0
            np.subtract(p, top, out=p)
        np.exp(p, out=p)

    def accumulate(self, part, p, i0, i1, s_end, ones):
        """Step 4: out = (pᵀ v) / row sums, for queries i0:i1."""
        row_sum = np.matmul(ones[:s_end], p)                  # (g, nq)
        if self.may_be_empty:
            row_sum[row_sum == 0] = 1          # its weights are all 0: the row stays 0
        o = part.out[:, i0:i1]                                # (g, nq, Ev), a view
        pt = p.transpose(0, 2, 1)                             # (g, nq, keys)
        if part.normalise_first:          # values so large that a sum of them could overflow
            np.divide(p, row_sum[:, None, :], out=p)
            np.matmul(pt, part.v[:, :s_end], out=o)
        else:
            np.matmul(pt, part.v[:, :s_end], out=o)
            np.divide(o, row_sum[:, :, None], out=o)          # (nq, Ev) divisions, not (S, nq)
