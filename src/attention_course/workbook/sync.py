"""Keep the learner's workbook in step with ``notebooks/`` without ever losing the learner's work.

``workbook/<lang>/NN_*.ipynb`` is made from ``notebooks/<lang>/NN_*.ipynb`` (:mod:`.build`), and
``workbook/.built.json`` remembers, per notebook, a fingerprint of the version it made (source,
hints and stubs together) and of each cell as made. At every sync (``make lab`` runs one):

- a notebook not there yet (new, or deleted by the learner) is made;
- a notebook whose workbook version would not change is left exactly as it is;
- a notebook whose source (or hints) changed is made again, and the learner's answer cells, found by their
  exercise id, are carried into the new version. If the learner also edited or added any other
  cell, the old notebook is kept beside the new one as ``NN_*.<date>.ipynb``, and the sync says so;
- a notebook that no longer parses is left untouched, and the sync says so.
"""

from __future__ import annotations

import datetime
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from .build import hints, workbook_notebook

__all__ = ["LANGS", "STATE", "Report", "sync"]

LANGS = ("zh", "en")
STATE = ".built.json"


def _text(cell: dict) -> str:
    src = cell.get("source", "")
    return src if isinstance(src, str) else "".join(src)


def _fingerprint(cell: dict) -> str:
    return hashlib.sha256(f"{cell.get('cell_type')}\0{_text(cell)}".encode()).hexdigest()[:16]


def _answer_of(cell: dict) -> str | None:
    return cell.get("metadata", {}).get("workbook", {}).get("exercise")


def _write(path: Path, nb: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(path)                      # never a half-written notebook, even if interrupted


@dataclass
class Report:
    """What a sync did, notebook by notebook (paths relative to the workbook)."""

    made: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    kept_copies: list[str] = field(default_factory=list)
    not_parsing: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        out = []
        if self.made:
            out.append(f"workbook: made {len(self.made)} notebook(s)")
        if self.updated:
            out.append("workbook: updated from a changed source, your answers carried over: "
                       + ", ".join(self.updated))
        for copy in self.kept_copies:
            out.append(f"workbook: you had changed other cells too; your old version is kept as {copy}")
        for bad in self.not_parsing:
            out.append(f"workbook: {bad} does not parse as a notebook; left as it is "
                       "(move it away to get a fresh one)")
        return out


def sync(workbook: Path, source: Path, langs=LANGS, today: datetime.date | None = None) -> Report:
    """Bring ``workbook`` up to date with the notebooks under ``source`` (``source/<lang>/*.ipynb``)."""
    workbook, source = Path(workbook), Path(source)
    today = today or datetime.date.today()
    state_path = workbook / STATE
    try:
        state = json.loads(state_path.read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        state = {}
    report, all_hints = Report(), hints()
    for lang in langs:
        folder = source / lang
        if not folder.is_dir():
            raise FileNotFoundError(f"no notebooks in {folder}: run this from the course's folder")
        for src_path in sorted(folder.glob("*.ipynb")):
            rel = f"{lang}/{src_path.name}"
            target = workbook / rel
            built = workbook_notebook(json.loads(src_path.read_text(encoding="utf-8")), lang, all_hints)
            # what the workbook version would be: a new source, new hints or a new stub all count
            digest = hashlib.sha256(json.dumps(built, sort_keys=True).encode()).hexdigest()[:16]
            record = {"source": digest, "cells": {c.get("id", str(i)): _fingerprint(c)
                                                  for i, c in enumerate(built["cells"])}}
            if not target.exists():
                _write(target, built)
                state[rel] = record
                report.made.append(rel)
                continue
            try:
                mine = json.loads(target.read_text(encoding="utf-8"))
                cells = mine["cells"]
            except (ValueError, KeyError, TypeError, UnicodeDecodeError):
                report.not_parsing.append(rel)
                continue
            old = state.get(rel)
            if old is not None and old.get("source") == digest:
                report.unchanged.append(rel)
                continue
            made_before = (old or {}).get("cells", {})
            answers = {_answer_of(c): c for c in cells if _answer_of(c)}
            other_edits = [c for c in cells if not _answer_of(c)
                           and made_before.get(c.get("id")) != _fingerprint(c)]
            for cell in built["cells"]:
                mine_cell = answers.get(_answer_of(cell)) if _answer_of(cell) else None
                if mine_cell is not None:
                    for key, empty in (("source", ""), ("outputs", []), ("execution_count", None)):
                        cell[key] = mine_cell.get(key, empty)
            if other_edits:
                copy = target.with_name(f"{target.stem}.{today.isoformat()}.ipynb")
                n = 1
                while copy.exists():
                    n += 1
                    copy = target.with_name(f"{target.stem}.{today.isoformat()}-{n}.ipynb")
                copy.write_bytes(target.read_bytes())
                report.kept_copies.append(str(copy.relative_to(workbook)))
            _write(target, built)
            state[rel] = record
            report.updated.append(rel)
    workbook.mkdir(parents=True, exist_ok=True)
    state_path.write_text(json.dumps(state, indent=1) + "\n", encoding="utf-8")
    return report
