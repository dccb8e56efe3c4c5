"""The one pattern every widget follows: controls -> compute() -> data -> a figure built once.

How to write an explorer
========================

Subclass :class:`Explorer` and write four things::

    class GainExplorer(Explorer):
        figsize = (6, 3)                          # inches; the live picture is drawn at `dpi`

        def __init__(self, lang="en"):
            self.lang = check_lang(lang)
            super().__init__({"gain": w.FloatSlider(value=1.0, min=0, max=3, step=0.1,
                                                    description="gain")})

        def compute(self, gain):                  # pure: numbers in, numbers out
            x = np.linspace(0, 1, 50)
            return {"x": x, "y": gain * x, "gain": gain}

        def build(self, fig, data):               # once: axes, fixed limits, every artist
            ax = fig.subplots()
            (line,) = ax.plot(data["x"], data["y"])
            ax.set_ylim(0, 3)                     # fixed: the axes are not redrawn on a change
            title = ax.set_title("")
            fig.tight_layout()
            return {"line": line, "title": title}

        def update(self, art, data):              # every change: set data, return what changed
            art["line"].set_ydata(data["y"])
            art["title"].set_text(f"gain {data['gain']:.1f}")
            return [art["line"], art["title"]]

The rules:

1. ``compute(**values) -> dict`` takes one keyword per control and returns plain data (arrays,
   numbers, strings). No widgets, no plotting: tests call it directly.
2. ``build(fig, data) -> dict`` lays out the axes on ``fig`` (use ``fig.subplots``, never
   ``plt.subplots``: the live figure is not a pyplot figure) and creates every artist a change
   may touch, with limits, ticks and colour bars that hold for *every* setting of the controls
   (compute fixed ranges in ``__init__`` or ``compute``, as 02 and 04 do). Return the artists
   ``update`` needs, by name.
3. ``update(art, data) -> list`` sets new data on those artists (``set_data``, ``set_ydata``,
   ``set_height``, ``set_text``, ``set_color`` ...) and returns the artists it may have changed.
   Return the same ones every time: they are drawn on every frame over a cached picture of
   everything else (blitting), and anything not returned is never redrawn.
4. When a change needs another layout (another number of panels, another matrix shape, another
   tick set), override ``layout_key(data)`` to return something that differs between layouts;
   the figure is then built again for that frame.

Everything else is done here: the live figure is built once when the widget is first shown; on a
change ``compute`` runs, ``update`` sets the artists, only those are drawn onto the cached
background, and the frame goes to the page as PNG bytes (fast compression) in an
``ipywidgets.Image``, which keeps showing the last frame until the next one replaces it.
``figure()`` builds the same figure as an ordinary pyplot figure for the static copy stored in
the notebooks (``explorer.figure(); plt.show()``), which readers on GitHub see.

Sliders may use ``continuous_update=True``: a frame costs a few tens of milliseconds, so the
picture follows the handle. Frames are rendered one at a time (a lock), each from the controls'
values at that moment, so the last frame shown is always the one of the final values.

An explorer written the older way (``draw(data)`` returning a whole new figure) still works: each
change then draws and encodes the whole figure.
"""

from __future__ import annotations

import io
import threading

import ipywidgets as w
import numpy as np
from IPython.display import display
from matplotlib import pyplot as plt
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from .. import plots  # noqa: F401  (registers the CJK font before any figure is drawn)

LANGS = ("zh", "en")


def check_lang(lang: str) -> str:
    """Every widget speaks the notebook's language; anything else is a clear error."""
    if lang not in LANGS:
        raise ValueError(f"lang must be 'zh' or 'en'; got {lang!r}")
    return lang


def encode_png(rgba: np.ndarray, compress_level: int = 1) -> bytes:
    """PNG bytes of an (H, W, 4) uint8 picture, alpha dropped, with fast compression.

    Level 1 of zlib is several times faster than matplotlib's default level 6, at files about a
    third larger: for a picture sent on every move of a slider, the time matters more.
    """
    from PIL import Image  # Pillow is a dependency of matplotlib

    rgb = np.ascontiguousarray(np.asarray(rgba)[..., :3])
    buffer = io.BytesIO()
    Image.fromarray(rgb, "RGB").save(buffer, format="PNG", compress_level=compress_level)
    return buffer.getvalue()


class Explorer:
    """Controls plus a figure that is built once and updated in place whenever a control changes.

    Subclasses define ``compute(**values) -> dict`` (pure: no plotting, no widgets),
    ``build(fig, data) -> dict`` and ``update(art, data) -> list`` (see the module's docstring),
    and pass their controls to ``__init__``.

    Attributes
    ----------
    controls : dict[str, ipywidgets.ValueWidget]
        By name; each one's ``.value`` feeds ``compute``.
    data : dict
        What ``compute`` returned for the current values: the numbers behind the figure.
    image : ipywidgets.Image
        Shows the current frame (PNG bytes); empty until the widget is shown.
    widget : ipywidgets.VBox
        The controls above the image, ready to display.
    redraws : int
        How many times a change of the controls was computed (and, once shown, drawn).
    frames : int
        How many frames were sent to the page.
    """

    figsize: tuple[float, float] = (8.0, 3.0)
    dpi: int = 100

    def __init__(self, controls: dict, *, columns: int = 3):
        self.controls = dict(controls)
        width, height = (round(s * self.dpi) for s in self.figsize)
        self.image = w.Image(format="png", layout=w.Layout(width=f"{width}px",
                                                           max_width="100%", height="auto"))
        self.output = self.image      # the name older code used for the figure's place
        rows = [w.HBox(list(self.controls.values())[i:i + columns])
                for i in range(0, len(self.controls), columns)]
        self.widget = w.VBox([*rows, self.image])
        self.redraws = 0
        self.frames = 0
        self._shown = False
        self._lock = threading.RLock()
        self._live = None           # (fig, art, animated artists, background, layout key)
        self._values = self.values()
        self.data = self.compute(**self._values)
        for control in self.controls.values():
            control.observe(self._on_change, names="value")

    # -- to write in a subclass ------------------------------------------------------------
    def compute(self, **values) -> dict:  # pragma: no cover - abstract
        raise NotImplementedError

    def build(self, fig: Figure, data: dict) -> dict:  # pragma: no cover - abstract
        raise NotImplementedError

    def update(self, art: dict, data: dict) -> list:  # pragma: no cover - abstract
        raise NotImplementedError

    def layout_key(self, data: dict):
        """Whatever decides the layout; the figure is built again when it changes."""
        return None

    # -- used by notebooks and tests -------------------------------------------------------
    def values(self) -> dict:
        return {name: c.value for name, c in self.controls.items()}

    def figure(self):
        """A static pyplot figure of the current setting (for readers who cannot run the widget)."""
        data = self.compute(**self.values())
        if self._legacy:
            return self.draw(data)
        fig = plt.figure(figsize=self.figsize)
        art = self.build(fig, data)
        self.update(art, data)
        return fig

    def show(self) -> None:
        self._shown = True
        self.refresh(force=True)
        display(self._mimebundle(), raw=True)

    def _ipython_display_(self) -> None:
        self.show()

    # -- the machinery ---------------------------------------------------------------------
    @property
    def _legacy(self) -> bool:
        return type(self).build is Explorer.build and hasattr(self, "draw")

    def _on_change(self, _change) -> None:
        self.refresh()

    def refresh(self, force: bool = False) -> None:
        """Recompute from the controls' current values and, once shown, send the new frame."""
        # One frame at a time: ipykernel may run a second widget message's observers on another
        # thread meanwhile. Each frame reads the values when it starts, so the frame rendered
        # last is the one of the latest values.
        with self._lock:
            values = self.values()
            if values == self._values and not force:
                return          # e.g. a slider clamped by another control: nothing new
            self._values = values
            self.data = self.compute(**values)
            self.redraws += 0 if force else 1
            if self._shown:
                self._send(self._render(self.data))

    def _send(self, png: bytes) -> None:
        if png != self.image.value:     # the same picture again sends nothing
            self.image.value = png
            self.frames += 1

    def _render(self, data: dict) -> bytes:
        if self._legacy:
            with plt.ioff():
                fig = self.draw(data)
            try:
                fig.canvas.draw()
                return encode_png(np.asarray(fig.canvas.buffer_rgba()))
            finally:
                plt.close(fig)
        key = self.layout_key(data)
        if self._live is None or self._live[4] != key:
            self._live = self._build_live(data, key)
        fig, art, animated, background, _ = self._live
        changed = list(self.update(art, data))
        if not set(changed) <= animated:
            # An artist not seen before: it joins the animated ones and the background is
            # captured again without it.
            animated |= set(changed)
            for a in changed:
                a.set_animated(True)
            background = self._capture(fig)
            self._live = (fig, art, animated, background, key)
        canvas = fig.canvas
        canvas.restore_region(background)
        for a in sorted(animated, key=lambda a: a.get_zorder()):
            fig.draw_artist(a)
        return encode_png(np.asarray(canvas.buffer_rgba()))

    def _build_live(self, data: dict, key):
        if self._live is not None:
            self._live[0].clear()
        fig = Figure(figsize=self.figsize, dpi=self.dpi)
        FigureCanvasAgg(fig)    # an Agg canvas of its own: not a pyplot figure, never shown twice
        art = self.build(fig, data)
        animated = set(self.update(art, data))
        for a in animated:
            a.set_animated(True)
        return fig, art, animated, self._capture(fig), key

    @staticmethod
    def _capture(fig: Figure):
        fig.canvas.draw()       # everything but the animated artists
        return fig.canvas.copy_from_bbox(fig.bbox)

    def _mimebundle(self) -> dict:
        # The plain-text stand-in stored with the notebook is the explorer and its values, not
        # the repr of every nested widget (with a frame's bytes in it).
        bundle = self.widget._repr_mimebundle_()
        if isinstance(bundle, tuple):
            bundle = bundle[0]
        args = ", ".join(f"{k}={v!r}" for k, v in self.values().items())
        bundle["text/plain"] = f"{type(self).__name__}({args})"
        return bundle
