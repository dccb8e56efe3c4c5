"""Worker processes for :func:`~attention_course.tiny_model.train_many`, and why they look so.

* **A worker is a plain Python process** started with :mod:`subprocess`: the same on Linux,
  macOS and Windows, a fresh interpreter and never a forked copy of a kernel and its threads.
  It reads ``(function, arguments)`` pickles on its stdin and writes one ``("ok", result)`` or
  ``("error", exception)`` pickle per job; what a job prints goes to stderr.
* **Not :mod:`multiprocessing`.** Its pools start a resource-tracker process that ignores
  SIGTERM. A Jupyter kernel, when it shuts down or restarts, ends the processes of its group
  and waits for them: with that tracker among them it waited seconds, then was killed.
* **Each worker has a session of its own** (POSIX): a kernel's Interrupt and its shutdown
  signals reach the kernel's process group only. A worker ends when its stdin closes, that is
  when the process that started it stops or closes the pool.
* **One BLAS thread per worker:** one worker per core.
* **An interrupted or failed call ends the workers** it was waiting for; the next call starts
  new ones.
"""

from __future__ import annotations

import os
import pickle
import queue
import subprocess
import sys
import threading
from collections import deque

_ONE_THREAD = {name: "1" for name in (
    "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "VECLIB_MAXIMUM_THREADS")}


class WorkerPool:
    """``processes`` worker processes, started once and kept for the next :meth:`run`."""

    def __init__(self, processes: int):
        env = dict(os.environ, **_ONE_THREAD)
        command = [sys.executable, "-c", "from attention_course.workers.pool import _serve; _serve()"]
        self.workers = [subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         env=env, start_new_session=True)
                        for _ in range(processes)]

    @property
    def alive(self) -> bool:
        return all(w.poll() is None for w in self.workers)

    def run(self, function, jobs: dict) -> dict:
        """``{key: function(*args)}`` for ``jobs = {key: args}``, started in the order given."""
        todo, done = deque(jobs.items()), queue.Queue()

        def feed(worker):
            while True:
                try:
                    key, args = todo.popleft()          # popleft() is atomic: a shared queue
                except IndexError:
                    return
                try:
                    pickle.dump((function, args), worker.stdin, pickle.HIGHEST_PROTOCOL)
                    worker.stdin.flush()
                    status, value = pickle.load(worker.stdout)
                except (OSError, EOFError, pickle.UnpicklingError) as exc:
                    done.put((key, "lost", exc))
                    return
                done.put((key, status, value))
                if status != "ok":
                    return

        threads = [threading.Thread(target=feed, args=(w,), daemon=True) for w in self.workers]
        for t in threads:
            t.start()
        results = {}
        try:
            while len(results) < len(jobs):
                key, status, value = done.get()
                if status == "error":
                    raise value
                if status == "lost":
                    raise RuntimeError(f"a worker process stopped while it ran job {key!r} "
                                       f"({value!r})")
                results[key] = value
        except BaseException:
            self.close()
            raise
        return {key: results[key] for key in jobs}

    def close(self) -> None:
        for w in self.workers:
            if w.poll() is None:
                w.kill()
            w.wait()
            for stream in (w.stdin, w.stdout):
                try:
                    stream.close()
                except OSError:
                    pass


def _raise(exc):
    raise exc


def _serve() -> None:
    """A worker's loop: one job from stdin, its result to stdout, until stdin closes."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    jobs = sys.stdin.buffer
    # the results get the pipe on a descriptor of their own; descriptor 1, where a job's prints
    # (or a C library's) go, is pointed at stderr, so nothing else can mix with them
    results = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    while True:
        try:
            function, args = pickle.load(jobs)
        except EOFError:
            return
        except Exception as exc:  # noqa: BLE001 - e.g. a function this process cannot import
            function, args = _raise, (exc,)
        try:
            reply = ("ok", function(*args))
        except Exception as exc:  # noqa: BLE001 - handed to the caller, which raises it
            reply = ("error", exc)
        try:
            data = pickle.dumps(reply, pickle.HIGHEST_PROTOCOL)
        except Exception as exc:  # noqa: BLE001
            data = pickle.dumps(("error", RuntimeError(f"{reply[1]!r} (not picklable: {exc})")))
        results.write(data)
        results.flush()
