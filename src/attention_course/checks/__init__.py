"""Exercise checks, one module per notebook (``nb01`` ... ``nb09``).

A check calls the learner's function on several inputs, edge cases included, compares with the
library, and either prints one short line or raises :class:`CheckFailed` naming the input, what
was expected, what came back, and a hint in the notebook's language (``set_language``). The shared
machinery has one module per concern: :mod:`.language` (the session's language, the bilingual
texts and :func:`label`, :class:`CheckFailed` and :func:`fail`), :mod:`.comparison` (tolerances that
follow the dtype and :func:`compare`, the grader's side), :mod:`.watcher` (runs the learner's
function and watches it for forbidden calls), :mod:`.loops` (:func:`assert_no_loops`),
:mod:`.cases` (the loop over cases :func:`check_function`, :func:`check_value`), :mod:`.fresh`
(the fresh copies below), :mod:`.plain` (plain data across a process boundary, read without
running code) and :mod:`.submission` (what a re-check reads of a notebook). The library functions
an exercise may forbid, in named categories, are in :mod:`.forbidden`.

A notebook's check cell, ``nbNN_checks.check_x(answer)``, gets its check from a fresh copy of the
installed file at every call (``fresh_on_call`` at the end of each module), so an answer cell that
replaces or patches a check does not reach it. This is best effort: code in the same process can
always reach further. The guarantee is the instructor's re-check, each answer in a worker process
of its own and every comparison in the grader (:mod:`.isolated`; ``instructor/recheck.py``, run
by ``make grade``).
"""

from .cases import Case, check_function, check_value
from .comparison import compare, describe, tolerance_for
from .language import (
    CheckFailed,
    answered,
    fail,
    get_language,
    in_workbook,
    label,
    set_language,
    set_workbook,
)
from .loops import assert_no_loops
from .watcher import run_learner, watch_calls

__all__ = [
    "Case", "CheckFailed", "answered", "assert_no_loops", "check_function", "check_value", "compare",
    "describe", "fail", "get_language", "in_workbook", "label", "run_learner", "set_language", "set_workbook",
    "tolerance_for", "watch_calls",
]
