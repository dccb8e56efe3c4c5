"""The learner's workbook: the course's notebooks with the exercises to do (make lab opens it).

``notebooks/`` holds the source: every exercise solved, for readers and instructors. The workbook,
``workbook/`` at the course's root (not tracked, and outside ``build/``, which ``make clean``
empties), holds the same notebooks with each exercise as a stub, its check beside it, and its
hints and solution on request (:mod:`.build`). ``python -m attention_course.workbook`` makes it and
keeps it in step with ``notebooks/`` without losing the learner's work (:mod:`.sync`). The stubs
come from the same stripping as the instructor's hand-out (:mod:`.stubs`).
"""

from .build import help_cell, hints, with_hints, workbook_notebook
from .stubs import STUB, exercise_id, is_solution, solution_code, stub_source
from .sync import Report, sync

__all__ = ["STUB", "Report", "exercise_id", "help_cell", "hints", "is_solution", "solution_code",
           "stub_source", "sync", "with_hints", "workbook_notebook"]
