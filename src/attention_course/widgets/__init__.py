"""Live widgets of the course, one module per notebook (``nb01`` ... ``nb06``).

Each widget is an :class:`Explorer`: ipywidgets controls, a ``compute()`` that turns the
controls' values into plain data, and a ``draw()`` that plots that data with matplotlib. Tests
set a control's ``.value`` and read ``explorer.data``; no browser is needed for the logic.
"""

from ._base import Explorer

__all__ = ["Explorer"]
