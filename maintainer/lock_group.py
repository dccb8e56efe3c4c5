"""Print the exact versions of one dependency group, resolved on top of the learner's lock.

Used by ``make lock``: ``python maintainer/lock_group.py GROUP PYTHON > locks/GROUP.txt``. PYTHON is
the lock venv's interpreter (pip >= 25.1, for ``--group``). pip resolves the group with the learner's
exact versions as constraints and reports what it would install, without installing or downloading
the packages themselves; the packages already pinned in requirements-lock.txt are left out, so
``pip install -r requirements-lock.txt -r locks/GROUP.txt`` installs the learner's set and the group.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def main(group: str, python: str) -> int:
    lock = ROOT / "requirements-lock.txt"
    learner = {canonical(line.split("==")[0]) for line in lock.read_text(encoding="utf-8").splitlines()
               if "==" in line and not line.startswith("#")}
    run = subprocess.run([python, "-m", "pip", "install", "--disable-pip-version-check", "--dry-run",
                          "--ignore-installed", "--quiet", "--report", "-", "-c", str(lock),
                          "--group", f"{ROOT / 'pyproject.toml'}:{group}"],
                         capture_output=True, text=True, encoding="utf-8", cwd=ROOT)
    if run.returncode != 0:
        sys.stderr.write(run.stderr)
        return run.returncode
    report = json.loads(run.stdout)
    pins = sorted((item["metadata"]["name"], item["metadata"]["version"]) for item in report["install"]
                  if canonical(item["metadata"]["name"]) not in learner)
    print(f"# Dependency group {group} (pyproject.toml), exact versions on top of requirements-lock.txt")
    print(f"# (make lock). Install with: pip install -r requirements-lock.txt -r locks/{group}.txt")
    for name, version in pins:
        print(f"{name}=={version}")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
