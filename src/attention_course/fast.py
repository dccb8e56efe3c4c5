"""Fast exact attention in plain NumPy: the textbook formula's numbers, faster and lighter.

:func:`~attention_course.attention.scaled_dot_product_attention` is written to be read: it builds
the whole (L, S) score matrix, then the whole weight matrix, then multiplies. :func:`fast_attention`
computes the same numbers (to float32 rounding) in an order a CPU likes. Every trick is a
rearrangement of the same formula, never an approximation; the Notes of :func:`fast_attention`
go through them one by one.
"""

from __future__ import annotations

import functools
import math
import os
import queue
import threading
import time
from collections import deque
from contextlib import nullcontext

import numpy as np

from ._validate import compute_dtype, positive_int
from .attention import check_finite, prepare_attention_inputs

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
# After a job, a helper thread keeps asking for the next one for this long before it sleeps
# (waking a sleeping thread takes a while on a busy machine); the caller waits for its helpers
# the same way.
SPIN_S = 0.002

_blas_libraries = None


class _BlasOneThread:
    """Context manager: the BLAS libraries held to one thread, their counts restored after.

    threadpoolctl's own ``limit`` does the same with more bookkeeping (about 10 µs a call,
    which counts at n = 256); here it is two calls into each library.
    """

    __slots__ = ("libraries", "before")

    def __init__(self, libraries):
        self.libraries = libraries
        self.before = ()

    def __enter__(self):
        self.before = [lib.get_num_threads() for lib in self.libraries]
        for lib, n in zip(self.libraries, self.before, strict=True):
            if n is not None and n != 1:
                lib.set_num_threads(1)
        return self

    def __exit__(self, *exc_info):
        for lib, n in zip(self.libraries, self.before, strict=True):
            if n is not None and n != 1:
                lib.set_num_threads(n)
        return False


def _blas_single_thread():
    """Context manager holding BLAS to one thread (threadpoolctl) - from the main thread only.

    OpenBLAS may ignore a thread count set from any other thread, so that restoring the
    original count from there can fail and leave the whole process on one thread. A call
    made from another thread therefore leaves BLAS as it is (correct, possibly slower).
    """
    global _blas_libraries
    if ThreadpoolController is None or threading.current_thread() is not threading.main_thread():
        return nullcontext()
    if _blas_libraries is None:
        # Finding the loaded BLAS libraries takes ~0.3 ms: once per process is enough.
        _blas_libraries = [lib for lib in ThreadpoolController().lib_controllers
                           if lib.user_api == "blas"]
    return _BlasOneThread(_blas_libraries)


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
        Queries per block (default :func:`default_block_q`: at most about 2 MiB of scores;
        with ``is_causal``, at most L / 8 and at least 64).
    num_threads : int, optional
        Threads sharing the blocks. Default: the available cores, or just the calling thread
        for small inputs (under 65536 scores), where handing out work costs more than it saves.

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
    2. **In place.** Each thread keeps one score buffer (from one call to the next: fresh
       memory costs a page fault per 4 KiB), and every step writes into it (``out=``): no
       temporary (L, S) array is ever created.
    3. **Constants go to the small side.** ``scale`` multiplies q, (L, E) numbers, instead of
       the (L, S) scores. It also carries ``log2(e)``, so that the cheaper
       ``exp2`` replaces ``exp`` (``exp(x) = 2 ** (x · log2 e)``). The division by each row's
       sum is done on the (L, Ev) output instead of the (L, S) weights:
       ``(p / l) @ v == (p @ v) / l``. A floating mask is the exception: it is added in natural
       units, as the formula adds it, and the base change follows the max-shift (a mask of
       ``finfo.min`` times ``log2(e)`` would overflow).
    4. **No max-shift when none is needed.** Softmax subtracts each row's maximum only to keep
       ``exp`` from overflowing, and the result does not depend on it. Before any score exists,
       Cauchy-Schwarz bounds them all: ``|q · k| <= |q| · |k|``. When that bound is small (for
       most inputs it is), the shift is skipped; otherwise each row's maximum is subtracted as
       usual. Either way the weights are the same, up to rounding. The same norms, and the
       largest ``|v|``, show a NaN or inf in the inputs, so no separate pass looks for them.
    5. **Work that cannot matter is skipped.** Under ``is_causal`` a query block never computes
       the keys after its last query (about half the work). Keys that a key-padding mask (one
       that does not depend on the query, shape (..., 1, S)) blocks for every query are
       dropped before any score is computed: padding costs nothing.
    6. **Threads.** NumPy's element-wise functions run on one core, so the blocks are shared
       out to one thread per core. The helper threads are started once and then wait for
       work (starting threads costs more than a whole call at n = 256); for 2 ms after a job
       they keep asking for the next one before they sleep, as BLAS and OpenMP threads do,
       because waking a sleeping thread is slow on a busy machine. NumPy releases the GIL
       inside its loops, so the threads really run side by side; BLAS is held to one thread
       (threadpoolctl), or its threads and ours would fight over the same cores. When blocks
       are small, one block takes several heads at once: each call into NumPy holds the GIL
       for a moment, and fewer, larger calls leave the threads less to wait for.
    7. **Layout.** Scores are kept as (keys, queries): for these shapes ``k @ qᵀ`` runs faster
       in BLAS than ``q @ kᵀ``, and the row sums become one product ``ones @ p``.
    8. **Pitfalls avoided.** ``matmul``, not ``einsum`` (slower here, and it may allocate more);
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
        q, k, v, attn_mask, is_causal, scale, check_finite=False
    )
    cdtype = compute_dtype(dtype)
    L, S = q.shape[-2], k.shape[-2]
    if block_q is None:
        bq = default_block_q(S, cdtype.itemsize)
        if is_causal:
            # Smaller blocks follow the triangle more closely (less of each diagonal tile is
            # computed for nothing), at the price of more, smaller products: L/8 measured best.
            bq = min(bq, max(64, L // 8 // 16 * 16))
    else:
        bq = positive_int(block_q, "block_q")
    threads = available_cpus() if num_threads is None else positive_int(
        num_threads, "num_threads")
    q, k, v = (a.astype(cdtype, copy=False) for a in (q, k, v))
    job = _Job(q, k, v, mask, is_causal, scale, batch, bq, threads)   # raises for NaN/inf
    if not job.blocks:
        # Nothing to compute (an empty batch, L = 0 or Ev = 0), or no key to look at: zeros,
        # as the reference gives.
        return job.out.astype(dtype, copy=False)
    todo = deque(job.blocks)                     # popleft() is atomic: a shared work queue
    threads = min(threads, len(job.blocks))
    if num_threads is None and L * S * len(job.heads) < SMALL_PROBLEM:
        job.run(todo)
    else:
        with _blas_single_thread():
            if threads == 1:
                job.run(todo)
            else:
                _run_with_helpers(job, todo, threads - 1)
    return job.out.astype(dtype, copy=False)


def _run_with_helpers(job, todo, n_helpers):
    """The calling thread and ``n_helpers`` waiting threads take blocks until none is left.

    A helper that has not started by the time the calling thread has run out of blocks (on a
    busy machine it may not get a core for milliseconds) is told to skip the job instead of
    being waited for: what it would have done is already done.
    """
    done = queue.SimpleQueue()
    tickets = [_Ticket() for _ in range(n_helpers)]
    for inbox, ticket in zip(_helpers.inboxes(n_helpers), tickets, strict=True):
        inbox.put((job, todo, ticket, done))
    error = None
    try:
        job.run(todo)                            # the calling thread works too
    except BaseException as exc:
        todo.clear()                             # the helpers stop after their current block
        error = exc
    started = 0
    for ticket in tickets:
        with ticket.lock:
            if ticket.started:
                started += 1
            else:
                ticket.cancelled = True
    for _ in range(started):                     # every helper that started is done with it
        failed = _poll(done, SPIN_S)
        error = error or failed
    if error is not None:
        raise error


class _Ticket:
    """One helper's part in one job: started by the helper, or cancelled by the caller."""

    __slots__ = ("lock", "started", "cancelled")

    def __init__(self):
        self.lock = threading.Lock()
        self.started = self.cancelled = False


class _Helpers:
    """Helper threads started once per process; each waits on its own inbox for a job."""

    def __init__(self):
        self._lock = threading.Lock()
        self._pid = None
        self._inboxes = []

    def inboxes(self, n):
        with self._lock:
            if self._pid != os.getpid():         # after a fork, the parent's threads are gone
                self._pid, self._inboxes = os.getpid(), []
            while len(self._inboxes) < n:
                inbox = queue.SimpleQueue()
                threading.Thread(target=_serve, args=(inbox,), daemon=True,
                                 name=f"fast_attention-{len(self._inboxes) + 1}").start()
                self._inboxes.append(inbox)
            return self._inboxes[:n]


def _poll(q, seconds):
    """An item of queue q, waiting for it first by yielding the core, then by sleeping."""
    deadline = time.perf_counter() + seconds
    while True:
        try:
            return q.get_nowait()
        except queue.Empty:
            if time.perf_counter() > deadline:
                return q.get()
            time.sleep(0)          # yields the core (and the GIL) but stays ready to run


def _serve(inbox):
    """A helper thread's life: run the blocks of each job it is handed, report, wait again."""
    while True:
        job, todo, ticket, done = _poll(inbox, SPIN_S)
        with ticket.lock:
            if ticket.cancelled:
                continue
            ticket.started = True
        try:
            job.run(todo)
        except BaseException as exc:   # handed to the caller, which raises it
            done.put(exc)
        else:
            done.put(None)


_helpers = _Helpers()


@functools.lru_cache(maxsize=16)
def _causal_tiles(bq, dtype):
    """For a (keys, queries) tile on the diagonal: keys after the query, and 0/1 weights."""
    after = np.tri(bq, bq, -1, dtype=bool)      # key j > query i: blocked by causality
    below = (~after).astype(dtype)
    after.flags.writeable = below.flags.writeable = False
    return after, below


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


class _Job:
    """What every thread shares: inputs, output, constants, per-head bounds and the blocks."""

    def __init__(self, q, k, v, mask, is_causal, scale, batch, bq, threads=1):
        L, S, Ev = q.shape[-2], k.shape[-2], v.shape[-1]
        self.max_keys_hint = S
        dt = q.dtype
        self.is_causal, self.bq = is_causal, bq
        self.neg_inf, self.log2e = dt.type(-np.inf), dt.type(LOG2E)
        limit = float(np.finfo(dt).max) / 4

        self.limit = limit
        # Keys blocked for every query of a head (a key-padding mask) are dropped up front.
        self.keys = None
        self.blocked = self.additive = None
        natural = mask is not None and mask.dtype != np.bool_
        if mask is not None and (mask.ndim < 2 or mask.shape[-2] == 1):
            self.keys, natural = self._select_keys(k, v, mask, batch)
        elif mask is not None and mask.dtype == np.bool_:
            self.blocked = np.broadcast_to(np.logical_not(mask), batch + (L, S))
        elif mask is not None:
            self.additive = np.broadcast_to(mask, batch + (L, S))
        self.masked = self.blocked is not None or self.additive is not None
        # Scale and the base change, folded into q (a float mask: natural units, see 3.).
        self.alpha = dt.type(scale if natural else scale * LOG2E)
        self.natural = natural
        self.q = _broadcast(q, batch)
        self.k = _broadcast(k, batch)
        self.v = _broadcast(v, batch)
        self.states = {}                         # per head: (shift, normalise_first)
        if is_causal:
            self.after, self.below = _causal_tiles(bq, dt)
        # float32's smallest normal power of two, 2**-126: exp2 of it is exact and fast. (For
        # float64 exp2 of -inf is not slow, so nothing is raised.)
        self.floor = dt.type(-126) if dt == np.float32 else None
        self.tiny = dt.type(2.0**-126)

        heads = list(np.ndindex(*batch))         # [()] when there are no leading axes
        if self.keys is not None:
            for h in heads:
                if self.keys[h] is None:         # no block reads this head: check it here
                    check_finite(q=self.q[h], k=self.k[h], v=self.v[h])
            heads = [h for h in heads if self.keys[h] is not None]
        self.heads = heads
        if S == 0 or Ev == 0:
            check_finite(q=q, k=k, v=v)
            heads = []
        # Blocks write every row of their heads (a row that sees no key: zeros); other heads
        # must start at zero.
        every_head = len(heads) == math.prod(batch)
        self.out = (np.empty if every_head else np.zeros)(batch + (L, Ev), dtype=dt)
        self.group = 1
        if heads and self.keys is None and not self.masked:
            self._group_heads(q, k, v, batch, len(heads) * -(-L // bq), threads)
        if self.group > 1:
            H, g = len(heads), self.group
            heads = [slice(h0, min(h0 + g, H)) for h0 in range(0, H, g)]
        self.blocks = [(h, i0, min(i0 + bq, L)) for h in heads for i0 in range(0, L, bq)]
        if is_causal:
            # Late query blocks see more keys: hand them out first so the threads finish together.
            self.blocks.sort(key=lambda b: -min(S, b[2]))
        self.max_keys = S

    def _group_heads(self, q, k, v, batch, n_blocks, threads):
        """Several heads per block when blocks are small: fewer, larger calls into NumPy.

        Each call holds Python's lock (the GIL) for a moment; with small blocks the threads
        would spend their time waiting for it. Heads are grouped while a group's scores stay
        within BLOCK_BYTES and there are still two blocks per thread. It needs q, k and v
        with all their leading axes (no broadcasting), seen as (heads, rows, width) without
        a copy.
        """
        H = math.prod(batch)
        per_head = self.max_keys_hint * self.bq * self.out.itemsize
        g = min(H, BLOCK_BYTES // max(1, per_head), n_blocks // (2 * threads))
        if g < 2:
            return
        flat = []
        for a in (q, k, v, self.out):
            if a.shape[:-2] != batch:
                return
            try:
                flat.append(a.reshape((H,) + a.shape[-2:], copy=False))
            except ValueError:                    # would need a copy
                return
        self.qf, self.kf, self.vf, self.outf = flat
        self.group = g

    def head_state(self, key, qh, kh, vh):
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
                v_max = max(float(vh.max()), -float(vh.min()))
            if not (math.isfinite(q_norm) and math.isfinite(k_norm) and math.isfinite(v_max)):
                check_finite(q=qh, k=kh, v=vh)   # raises, unless a square merely overflowed
            S = kh.shape[-2]
            # One group, one decision: the largest norms of its heads bound every head's scores.
            bound = q_norm * abs(float(self.alpha)) * k_norm
            shift = self.natural or not (bound <= SAFE_EXPONENT
                                         and v_max * S * 2.0**SAFE_EXPONENT < self.limit)
            state = self.states[key] = (shift, not v_max * S < self.limit)
        return state

    def _select_keys(self, k, v, mask, batch):
        """Per head: the keys and values some query may see, and their additive bias."""
        S = k.shape[-2]
        rows = np.broadcast_to(mask, batch + (1, S))
        ks, vs = _broadcast(k, batch), _broadcast(v, batch)
        keys, natural = {}, False
        for h in np.ndindex(*batch):
            row = rows[h][0]
            keep = row if row.dtype == np.bool_ else row > -np.inf
            n = int(np.count_nonzero(keep))
            if n == 0:
                keys[h] = None                   # every query blocked: its rows stay zero
                continue
            if n == S:
                kh, vh, sel = ks[h], vs[h], slice(None)
            elif keep[:n].all():                 # padding at the end: views, no copy
                kh, vh, sel = ks[h][:n], vs[h][:n], slice(0, n)
            else:
                sel = np.flatnonzero(keep)
                kh, vh = ks[h][sel], vs[h][sel]
            bias = None
            if row.dtype != np.bool_:
                kept = row[sel]
                if np.any(kept != 0):
                    bias = np.ascontiguousarray(kept)[:, None]    # (keys, 1)
                    natural = True
            keys[h] = (kh, vh, bias)
        return keys, natural

    def run(self, todo):
        """Take blocks from the shared queue until it is empty."""
        dt = self.out.dtype
        g = self.group
        # This thread's buffers, reused by every block: scores, scaled queries, a row of ones.
        buffer = _scratch("scores", g * self.max_keys * self.bq, dt)
        q_block = _scratch("queries", g * self.bq * self.q.shape[-1], dt)
        ones = _scratch("ones", self.max_keys, dt, fill=1)
        while True:
            try:
                h, i0, i1 = todo.popleft()
            except IndexError:
                return
            self.block(h, i0, i1, buffer, q_block, ones)

    def block(self, h, i0, i1, buffer, q_block, ones):
        """Queries i0:i1 of head h (or of the group of heads h, a slice), into the output.

        Every array here has a leading axis of heads, of length 1 for a single head.
        """
        nq = i1 - i0
        bias = blocked = additive = None
        if isinstance(h, slice):                 # a group of heads (no mask but causality)
            qh, kh, vh, out = self.qf[h], self.kf[h], self.vf[h], self.outf[h]
            shift, normalise_first = self.head_state(h.start, qh, kh, vh)
        else:
            qh, out = self.q[h][None], self.out[h][None]
            if self.keys is None:
                kh, vh = self.k[h][None], self.v[h][None]
            else:
                kh, vh, bias = self.keys[h]
                kh, vh = kh[None], vh[None]
            shift, normalise_first = self.head_state(h, qh[0], self.k[h], self.v[h])
            if self.blocked is not None:
                blocked = self.blocked[h][i0:i1].T[None]      # (1, S, nq) view
            elif self.additive is not None:
                additive = self.additive[h][i0:i1].T[None]
        g, S, E = kh.shape[0], kh.shape[1], qh.shape[-1]
        s_end = min(S, i1) if self.is_causal else S           # keys this block may see
        qs = np.multiply(qh[:, i0:i1], self.alpha, out=q_block[: g * nq * E].reshape(g, nq, E))
        p = buffer[: g * s_end * nq].reshape(g, s_end, nq)    # (heads, keys, queries)
        np.matmul(kh[:, :s_end], qs.transpose(0, 2, 1), out=p)   # scores (base 2 or natural)
        # Blocked scores: -inf before the max-shift, which must not see them; without a shift
        # they are zeroed after exp2 instead, because exp2 of -inf (or of anything that
        # underflows) takes a slow path in NumPy, ten times slower than for other numbers.
        diag = p[:, i0:s_end] if self.is_causal and i0 < s_end else None   # diagonal tiles
        very_negative = None                      # the part of p that may hold -inf
        if diag is not None and shift:
            np.copyto(diag, self.neg_inf, where=self.after[: s_end - i0, :nq])
            very_negative = diag
        elif blocked is not None and shift:
            np.copyto(p, self.neg_inf, where=blocked)
            very_negative = p
        elif additive is not None:
            np.add(p, additive, out=p)
            very_negative = p
        if bias is not None:
            np.add(p, bias, out=p)
            very_negative = p
        if shift:
            top = p.max(axis=1, keepdims=True)                # (g, 1, nq) each query's maximum
            if self.masked:
                top[~np.isfinite(top)] = 0  # a query with no allowed key: 2**(-inf - 0) = 0
            np.subtract(p, top, out=p)
            if self.natural:
                # A blocked score near finfo.min becomes -inf here: weight 0, as in the formula.
                with np.errstate(over="ignore"):
                    np.multiply(p, self.log2e, out=p)
        if very_negative is not None and self.floor is not None:
            # Raised to the smallest normal power of two, exp2 stays fast; subtracting that
            # power afterwards turns exactly those entries back into 0 (and moves no weight
            # that matters: the largest one of each row is 1).
            np.maximum(very_negative, self.floor, out=very_negative)
            np.exp2(p, out=p)                                 # unnormalised weights
            np.subtract(very_negative, self.tiny, out=very_negative)
        else:
            np.exp2(p, out=p)                                 # unnormalised weights
        if diag is not None and not shift:
            np.multiply(diag, self.below[: s_end - i0, :nq], out=diag)    # causal: 0 or 1
        elif blocked is not None and not shift:
            np.copyto(p, 0, where=blocked)
        row_sum = np.matmul(ones[:s_end], p)                  # (g, nq)
        if self.masked:
            row_sum[row_sum == 0] = 1       # its numerator is 0 as well: the row stays 0
        o = out[:, i0:i1]                                     # (g, nq, Ev) view of the output
        pt = p.transpose(0, 2, 1)                             # (g, nq, keys)
        if normalise_first:             # values so large that a sum of them could overflow
            np.divide(p, row_sum[:, None, :], out=p)
            np.matmul(pt, vh[:, :s_end], out=o)
        else:
            np.matmul(pt, vh[:, :s_end], out=o)
            np.divide(o, row_sum[:, :, None], out=o)          # (nq, Ev) divisions, not (S, nq)
