"""Exercise checks, one module per notebook (``nb01`` ... ``nb06``).

A check calls the learner's function on several inputs, edge cases included, compares with the
library, and either prints one short line or raises :class:`CheckFailed` naming the input, what
was expected, what came back, and a hint in the notebook's language (``set_language``).
"""

from ._core import Case, CheckFailed, check_function, check_value, get_language, set_language

__all__ = ["Case", "CheckFailed", "check_function", "check_value", "get_language", "set_language"]
