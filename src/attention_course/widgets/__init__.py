"""Live widgets of the course, one module per notebook (``nb01``, ``nb02``, ...).

Each widget is an :class:`Explorer`: ipywidgets controls, a pure ``compute()`` that turns the
controls' values into plain data, and a figure built once (``build``) whose artists are updated
in place (``update``) on every change; the frame goes to the page as PNG bytes. Tests set a
control's ``.value`` and read ``explorer.data``; no browser is needed for the logic. How to write
one: see :mod:`attention_course.widgets.renderer`, the machinery that draws them.
"""

from .renderer import Explorer, check_lang

__all__ = ["Explorer", "check_lang"]
