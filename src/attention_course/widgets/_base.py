"""The one pattern every widget follows: controls -> compute() -> data -> draw() -> figure."""

from __future__ import annotations

import ipywidgets as w
from IPython.display import display
from matplotlib import pyplot as plt

from .. import plots  # noqa: F401  (registers the CJK font before any figure is drawn)

LANGS = ("zh", "en")


def check_lang(lang: str) -> str:
    """Every widget speaks the notebook's language; anything else is a clear error."""
    if lang not in LANGS:
        raise ValueError(f"lang must be 'zh' or 'en'; got {lang!r}")
    return lang


class Explorer:
    """Controls plus a figure that is redrawn from plain data whenever a control changes.

    Subclasses define ``compute(**values) -> dict`` (pure: no plotting, no widgets) and
    ``draw(data) -> matplotlib Figure``, and pass their controls to ``__init__``.

    Attributes
    ----------
    controls : dict[str, ipywidgets.ValueWidget]
        By name; each one's ``.value`` feeds ``compute``.
    data : dict
        What ``compute`` returned for the current values: the numbers behind the figure.
    output : ipywidgets.Output
        Where the figure is drawn.
    widget : ipywidgets.VBox
        The controls above the output, ready to display.
    """

    def __init__(self, controls: dict, *, columns: int = 3):
        self.controls = dict(controls)
        self.output = w.Output()
        rows = [w.HBox(list(self.controls.values())[i:i + columns])
                for i in range(0, len(self.controls), columns)]
        self.widget = w.VBox([*rows, self.output])
        self.redraws = 0
        self._shown = False
        self.data = self.compute(**self.values())
        for control in self.controls.values():
            control.observe(self._on_change, names="value")

    def values(self) -> dict:
        return {name: c.value for name, c in self.controls.items()}

    def compute(self, **values) -> dict:  # pragma: no cover - abstract
        raise NotImplementedError

    def draw(self, data: dict):  # pragma: no cover - abstract
        raise NotImplementedError

    def figure(self):
        """A static figure of the current setting (for readers who cannot run the widget)."""
        return self.draw(self.compute(**self.values()))

    def _on_change(self, _change) -> None:
        self.refresh()

    def refresh(self) -> None:
        self.data = self.compute(**self.values())
        if self._shown:
            self._draw_into_output()
        self.redraws += 1

    def _draw_into_output(self) -> None:
        # Only once displayed: outside a front end there is nowhere to draw (tests read .data).
        with self.output:
            self.output.clear_output(wait=True)
            # ipykernel 7 may handle another widget message on a second thread meanwhile; with
            # interactive mode off, matplotlib's inline hook there does not show this figure.
            with plt.ioff():
                fig = self.draw(self.data)
            display(fig)
            plt.close(fig)       # else the inline backend shows it a second time

    def show(self) -> None:
        self._shown = True
        self.refresh()
        display(self.widget)

    def _ipython_display_(self) -> None:
        self.show()
