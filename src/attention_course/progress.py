"""A one-line progress bar that updates in place in JupyterLab and in a stored notebook.

The line is a display with an id (``IPython.display.display(..., display_id=True)``): the front
end redraws it in place, and an executed notebook keeps only its last state. Nothing is written
to stderr, so a stored notebook has no stderr output. Outside IPython nothing is shown.
"""

from __future__ import annotations

import time

__all__ = ["ProgressLine"]

_WIDTH = 24

# The words of the line, in the notebook's language (a Chinese notebook prints no English words).
_WORDS = {"zh": {"seconds": "秒", "loss": "损失"}, "en": {"seconds": "s", "loss": "loss"}}


def _bar(done: int, total: int) -> str:
    filled = round(_WIDTH * done / total) if total else _WIDTH
    return "█" * filled + "·" * (_WIDTH - filled)


class ProgressLine:
    """``with ProgressLine(total, label) as bar: ... bar.update(step, loss)``.

    Parameters
    ----------
    total : int
        Number of steps.
    label : str
        Shown before the bar (in the notebook's language).
    every : int
        Redraw once every ``every`` steps (and at the end), so that drawing costs nothing.
    enabled : bool
        False: show nothing (tests, benchmarks).
    lang : {"zh", "en"}, optional
        Language of the words on the line; by default the session's language, the one the
        notebook sets with ``checks.set_language``.

    Attributes
    ----------
    text : str
        What the line says now.
    """

    def __init__(self, total: int, label: str = "", *, every: int | None = None,
                 enabled: bool = True, lang: str | None = None):
        from .checks.language import get_language

        self.words = _WORDS[get_language(lang)]
        self.total = int(total)
        self.label = label
        self.every = every or max(1, self.total // 20)
        self.enabled = enabled
        self.text = ""
        self._handle = None
        self._start = time.perf_counter()

    def _render(self, done: int, loss: float | None) -> str:
        seconds = time.perf_counter() - self._start
        w = self.words
        tail = f"  {w['loss']} {loss:.3f}" if loss is not None else ""
        bar = f"{_bar(done, self.total)} {done}/{self.total}"
        return f"{self.label} {bar}  {seconds:.1f} {w['seconds']}{tail}"

    def __enter__(self) -> ProgressLine:
        self._start = time.perf_counter()
        self.text = self._render(0, None)
        if self.enabled:
            try:
                from IPython import get_ipython
                from IPython.display import Pretty, display
            except ImportError:                      # pragma: no cover - IPython is installed
                return self
            if get_ipython() is not None:
                self._handle = display(Pretty(self.text), display_id=True)
        return self

    def update(self, done: int, loss: float | None = None) -> None:
        """Show ``done`` of the total steps and the loss, every ``every`` steps and at the last."""
        if done % self.every and done != self.total:
            return
        self.text = self._render(done, loss)
        if self._handle is not None:
            from IPython.display import Pretty

            self._handle.update(Pretty(self.text))

    def __exit__(self, *exc) -> None:
        return None
