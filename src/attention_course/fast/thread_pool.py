"""The threads that share out :func:`~attention_course.fast.fast_attention`'s blocks.

Why attention needs threads of its own, and why they look like this:

* **NumPy's element-wise functions use one core.** ``np.exp`` over a block of scores, the
  step that costs as much as the matrix products, runs on one core whatever BLAS does. With
  one thread per core, each taking whole blocks (its products, its ``exp``, its sums), every
  step runs on every core. NumPy releases the GIL inside its loops, so the threads really run
  side by side.
* **BLAS is held to one thread meanwhile** (:func:`blas_one_thread`), or its threads and ours
  would fight over the same cores. That is done from the main thread only: OpenBLAS may
  ignore a thread count set from another thread, and restoring it from there could leave the
  whole process on one thread.
* **Threads are started once and then wait** (:class:`_Helpers`): starting a thread costs
  more than a whole call at n = 256.
* **A waiting thread first keeps asking, then sleeps** (:func:`_poll`): for ``SPIN_S`` after
  a job it yields its core in a loop instead of sleeping, as BLAS and OpenMP threads do,
  because waking a sleeping thread takes a while on a busy machine.
* **A helper that starts late is not waited for** (:func:`run_shared`): on a busy machine a
  helper may not get a core for milliseconds. When the calling thread has taken the last
  block, a helper that has not started yet is told to skip the job: its part is done.

Example
-------
>>> from collections import deque
>>> todo, seen = deque(range(10)), []
>>> def work(todo):
...     while todo:
...         try:
...             seen.append(todo.popleft() ** 2)   # popleft() is atomic: a shared queue
...         except IndexError:
...             return
>>> run_shared(work, todo, threads=2)
>>> sorted(seen) == [i * i for i in range(10)]
True
"""

from __future__ import annotations

import os
import queue
import threading
import time
from contextlib import nullcontext

from threadpoolctl import ThreadpoolController

# After a job, a helper keeps asking for the next one for this long before it sleeps; the
# caller waits for its helpers the same way.
SPIN_S = 0.002

_blas_libraries = None


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


def blas_one_thread():
    """Context manager holding BLAS to one thread; called from another thread, it does nothing.

    Examples
    --------
    >>> import numpy as np
    >>> with blas_one_thread():
    ...     float((np.ones((2, 2)) @ np.ones((2, 2)))[0, 0])
    2.0
    """
    global _blas_libraries
    if threading.current_thread() is not threading.main_thread():
        return nullcontext()
    if _blas_libraries is None:
        # Finding the loaded BLAS libraries takes ~0.3 ms: once per process is enough.
        _blas_libraries = [lib for lib in ThreadpoolController().lib_controllers
                           if lib.user_api == "blas"]
    return _BlasOneThread(_blas_libraries)


def run_shared(work, todo, threads: int) -> None:
    """``work(todo)`` on the calling thread and on ``threads - 1`` waiting helpers.

    Parameters
    ----------
    work : callable
        Takes items from ``todo`` until it is empty.
    todo : collections.deque
        The shared work; ``popleft()`` is atomic, so no lock is needed around it.
    threads : int
        Threads in all, the calling one included.

    Raises
    ------
    BaseException
        The first error raised by ``work`` in any thread (the others stop after their item).
    """
    n_helpers = threads - 1
    if n_helpers < 1:
        work(todo)
        return
    done = queue.SimpleQueue()
    tickets = [_Ticket() for _ in range(n_helpers)]
    for inbox, ticket in zip(_helpers.inboxes(n_helpers), tickets, strict=True):
        inbox.put((work, todo, ticket, done))
    error = None
    try:
        work(todo)                               # the calling thread works too
    except BaseException as exc:
        todo.clear()                             # the helpers stop after their current item
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
                                 name=f"attention-helper-{len(self._inboxes) + 1}").start()
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
    """A helper thread's life: run its part of each job it is handed, report, wait again."""
    while True:
        work, todo, ticket, done = _poll(inbox, SPIN_S)
        with ticket.lock:
            if ticket.cancelled:
                continue
            ticket.started = True
        try:
            work(todo)
        except BaseException as exc:   # handed to the caller, which raises it
            done.put(exc)
        else:
            done.put(None)


_helpers = _Helpers()
