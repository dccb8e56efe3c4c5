"""Load benchmark: N students log in at once and each runs notebook 01 in their own server's kernel.

Run by ``make bench-classroom`` as root (not by CI: it takes minutes and most of the machine)::

    /opt/attention-classroom/venv/bin/python classroom/bench_load.py [--students 10 20 30]

For each N: N throwaway Unix users, a fresh hub from ``classroom/jupyterhub_config.py`` on
loopback; then, all at once, each student logs in through the login form, starts their server
through the hub's REST API and, once it is ready, runs every code cell of notebook 01 (the
instructor's version, solutions filled in; zh for even-numbered students, en for odd) in a kernel
of their own server, over the kernel WebSocket, as JupyterLab does. Measured:

- time to all servers ready: from the first login to the last server the hub reports ready;
- time to all notebooks executed: from the first login to the last notebook's last cell;
- memory: the machine's used memory (``MemTotal - MemAvailable``) above what it was before the hub
  started, at its peak (sampled every 0.5 s); and the proportional set size (PSS: shared pages
  split between the processes that share them) of the students' processes, at its peak, divided by
  N: the memory one more student costs;
- failures: servers that did not start, and notebooks with a cell that raised.

The machine's load (``uptime``) before and after each round is printed with it: other work on the
machine slows every figure but memory. Users and hub are removed after each round, passed or failed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import psutil  # noqa: E402
from hub_client import ROOT, Hub, Learner, Users, new_prefix, parallel, require_root  # noqa: E402

NOTEBOOK = "01_library_analogy.ipynb"
GIB = 1024 ** 3


def code_cells(lang: str) -> list[str]:
    nb = json.loads((ROOT / "notebooks" / lang / NOTEBOOK).read_text(encoding="utf-8"))
    return ["".join(c["source"]) if isinstance(c["source"], list) else c["source"]
            for c in nb["cells"] if c["cell_type"] == "code"]


def used_bytes() -> int:
    m = psutil.virtual_memory()
    return m.total - m.available


class Sampler(threading.Thread):
    """Peak machine memory and peak summed PSS of the given users' processes, every ``every`` s."""

    def __init__(self, uids: set[int], every: float = 0.5):
        super().__init__(daemon=True)
        self.uids, self.every = uids, every
        self.peak_used = 0
        self.peak_pss = 0
        self._halt = threading.Event()

    def run(self):
        while not self._halt.is_set():
            self.peak_used = max(self.peak_used, used_bytes())
            pss = 0
            for p in psutil.process_iter(["uids"]):
                try:
                    if p.info["uids"] and p.info["uids"].real in self.uids:
                        pss += p.memory_full_info().pss
                except psutil.Error:
                    pass
            self.peak_pss = max(self.peak_pss, pss)
            self._halt.wait(self.every)

    def stop(self):
        self._halt.set()
        self.join()


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, encoding="utf-8").stdout.strip()


def seconds(s: float | None) -> str:
    return "—" if s is None else f"{s:.0f} s"


def one_minute(uptime_line: str) -> str:
    """The 1-minute load average of an ``uptime`` line."""
    return uptime_line.split("load average:")[-1].strip().split(",")[0]


def one_round(n: int, cells: dict[str, list[str]]) -> dict:
    users = Users(new_prefix("bch"))
    hub = None
    learners = []
    try:
        names = [users.add(f"s{i:02d}") for i in range(n)]
        uids = {int(subprocess.run(["id", "-u", u], capture_output=True, text=True, encoding="utf-8",
                                   check=True).stdout)
                for u in names}
        teacher = users.add("teach")   # the hub's admin; not logged in
        for i, name in enumerate(names):   # the notebook each student runs, in their home
            lang = "zh" if i % 2 == 0 else "en"
            dest = Path(f"/home/{name}") / NOTEBOOK
            shutil.copy2(ROOT / "notebooks" / lang / NOTEBOOK, dest)
            shutil.chown(dest, name, name)
        load_before = uptime()
        baseline = used_bytes()
        hub = Hub(teacher, names)
        hub.start()
        sampler = Sampler(uids)
        sampler.start()

        t0 = time.monotonic()
        ready_at: dict[str, float] = {}
        done_at: dict[str, float] = {}

        def student(i: int):
            name = names[i]
            who = Learner(hub, name)
            learners.append(who)
            r = who.login()
            if r.status_code != 302:
                raise RuntimeError(f"login answered {r.status_code}")
            who.make_token()
            who.start_server()
            who.wait_ready(timeout=600)
            ready_at[name] = time.monotonic() - t0
            for source in cells["zh" if i % 2 == 0 else "en"]:
                _, err = who.run(source, timeout=600)
                if err:
                    raise RuntimeError(f"a cell raised {err}")
            done_at[name] = time.monotonic() - t0

        results = parallel(student, list(range(n)))
        sampler.stop()
        failures = [f"{names[i]}: {r}" for i, r in enumerate(results) if isinstance(r, Exception)]
        return dict(
            n=n, failures=failures,
            all_ready_s=max(ready_at.values()) if len(ready_at) == n else None,
            all_done_s=max(done_at.values()) if len(done_at) == n else None,
            executed=len(done_at), last_executed_s=max(done_at.values()) if done_at else None,
            peak_machine_gib=(sampler.peak_used - baseline) / GIB,
            peak_students_pss_gib=sampler.peak_pss / GIB,
            per_student_mib=sampler.peak_pss / n / 2 ** 20,
            load_before=load_before, load_after=uptime())
    finally:
        for who in learners:
            who.close()
        if hub is not None:
            hub.stop()
        users.remove()


def main() -> int:
    require_root()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, nargs="+", default=[10, 20, 30])
    parser.add_argument("--machine-gib", type=float, default=24.0,
                        help="memory of the machine to size for (default 24)")
    parser.add_argument("--reserve-gib", type=float, default=2.0,
                        help="memory kept for the system, the hub and the proxy (default 2)")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    print(f"{os.cpu_count()} cores, {psutil.virtual_memory().total / GIB:.1f} GiB; notebook 01, zh and en"
          " alternating", flush=True)
    # Read once, next to the library install.sh just made: notebook and library of the same moment.
    cells = {lang: code_cells(lang) for lang in ("zh", "en")}
    rows = []
    for n in args.students:
        free = psutil.virtual_memory().available / GIB
        print(f"\n--- {n} students (machine has {free:.1f} GiB available)", flush=True)
        row = one_round(n, cells)
        rows.append(row)
        print(json.dumps(row, indent=1), flush=True)
        if row["failures"] and len(row["failures"]) == n:
            print("every student failed: larger rounds skipped")
            break
    print("\n| students at once | all servers ready | all notebooks executed | peak memory, machine |"
          " students' PSS at peak | per student | failures | load (uptime) before → after |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        executed = (seconds(r["all_done_s"]) if r["executed"] == r["n"]
                    else f"{r['executed']} of {r['n']}, last at {seconds(r['last_executed_s'])}")
        print(f"| {r['n']} | {seconds(r['all_ready_s'])} | {executed}"
              f" | {r['peak_machine_gib']:.1f} GiB | {r['peak_students_pss_gib']:.1f} GiB"
              f" | {r['per_student_mib']:.0f} MiB | {len(r['failures'])}"
              f" | {one_minute(r['load_before'])} → {one_minute(r['load_after'])} |")
    worst = max(r["per_student_mib"] for r in rows)
    fits = int((args.machine_gib - args.reserve_gib) * 1024 // worst)
    print(f"\nper student at most {worst:.0f} MiB (peak PSS / N, server + kernel running notebook 01):"
          f" one {args.machine_gib:g} GiB machine, {args.reserve_gib:g} GiB kept for the system and the hub,"
          f" holds {fits} such students in memory")
    if args.json:
        Path(args.json).write_text(json.dumps(dict(rows=rows, per_student_mib=worst, fits=fits), indent=1),
                                   encoding="utf-8")
    return 1 if any(r["failures"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
