"""Exercise checks, one module per notebook (``nb01`` ... ``nb07``).

A check calls the learner's function on several inputs, edge cases included, compares with the
library, and either prints one short line or raises :class:`CheckFailed` naming the input, what
was expected, what came back, and a hint in the notebook's language (``set_language``). The shared
machinery (tolerances that follow the dtype, forbidden calls, loops, the loop over cases
:func:`check_function`, the bilingual :func:`label`) is in ``_core``; the library functions an
exercise may forbid, in named categories, are in :mod:`.forbidden`.

A notebook's check cell, ``nbNN_checks.check_x(answer)``, gets its check from a fresh copy of the
installed file at every call (``fresh_on_call`` at the end of each module), so an answer cell that
replaces or patches a check does not reach it. This is best effort: code in the same process can
always reach further. The guarantee is the instructor's re-check in a fresh interpreter
(``instructor/recheck.py``, run by ``make grade``).
"""

from ._core import (
    Case,
    CheckFailed,
    assert_no_loops,
    check_function,
    check_value,
    compare,
    describe,
    fail,
    get_language,
    label,
    run_learner,
    set_language,
    tolerance_for,
    watch_calls,
)

__all__ = [
    "Case", "CheckFailed", "assert_no_loops", "check_function", "check_value", "compare", "describe",
    "fail", "get_language", "label", "run_learner", "set_language", "tolerance_for", "watch_calls",
]
