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
5. Changing artists are drawn above everything static. If a full draw would put a static
   artist above one of them (a zero line over bars), return it from ``update`` too; the frame
   of the axes is taken care of. Give legends a fixed ``loc`` ("best" moves with the data).
   ``tests/test_widgets_base.py`` checks that every explorer's frame is its static figure.

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

import math
import re
import struct
import threading
import zlib
from collections import OrderedDict

import ipywidgets as w
import matplotlib
import numpy as np
from IPython.display import display
from matplotlib import pyplot as plt
from matplotlib.backends.backend_agg import FigureCanvasAgg, RendererAgg
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure
from matplotlib.text import Annotation, Text
from matplotlib.transforms import Affine2D, IdentityTransform

from .. import plots  # noqa: F401  (registers the CJK font before any figure is drawn)

LANGS = ("zh", "en")
#: One frame at a time across every explorer: matplotlib's fonts are shared and not thread-safe.
_RENDER_LOCK = threading.RLock()


def check_lang(lang: str) -> str:
    """Every widget speaks the notebook's language; anything else is a clear error."""
    if lang not in LANGS:
        raise ValueError(f"lang must be 'zh' or 'en'; got {lang!r}")
    return lang


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return (struct.pack(">I", len(data)) + kind + data
            + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))


def encode_png(rgba: np.ndarray, compress_level: int = 1) -> bytes:
    """PNG bytes of an (H, W, 4) uint8 picture, alpha dropped, with fast compression.

    Written directly (no row filters, zlib level 1): about twice as fast as a general PNG
    encoder at its fastest setting and not much larger, which matters for a picture sent on
    every move of a slider.
    """
    rgba = np.asarray(rgba)
    if rgba.ndim != 3 or rgba.shape[2] not in (3, 4) or rgba.dtype != np.uint8:
        raise ValueError(f"rgba must be a (H, W, 3 or 4) uint8 array; got {rgba.dtype} "
                         f"{rgba.shape}")
    H, W = rgba.shape[:2]
    rows = np.empty((H, 1 + 3 * W), dtype=np.uint8)
    rows[:, 0] = 0                                   # filter type 0 (none) on every row
    rows[:, 1:] = rgba[..., :3].reshape(H, 3 * W)
    header = struct.pack(">IIBBBBB", W, H, 8, 2, 0, 0, 0)    # 8-bit RGB
    return (b"\x89PNG\r\n\x1a\n" + _png_chunk(b"IHDR", header)
            + _png_chunk(b"IDAT", zlib.compress(rows.tobytes(), compress_level))
            + _png_chunk(b"IEND", b""))



# Numbers are pasted glyph by glyph only where that gives a whole-string draw's pixels. Under
# matplotlib 3.11 a string's measured width is a whole number of pixels and each glyph, placed by
# those widths, lands where the whole string puts it. Under 3.10 (what Python 3.10 installs) the
# widths are fractional ("." measures 3.62 px at 8 pt) and the glyphs landed up to a pixel off
# ("1.2" showed as "1. 2"), so before 3.11 a number is pasted whole, like any other text.
GLYPHS_BY_WIDTH = tuple(int(p) for p in matplotlib.__version__.split(".")[:2]) >= (3, 11)


def _linespacing(text) -> float:
    """A Text's line spacing: matplotlib 3.9 and 3.10 have no ``get_linespacing`` (3.11 has)."""
    getter = getattr(text, "get_linespacing", None)
    return getter() if getter else text._linespacing

class TextSprites:
    """Each text drawn once, then pasted: the same words at the same place cost a copy.

    Laying out and rasterising glyphs is most of the cost of a frame (a heatmap's numbers, the
    titles, the legends). A text's pixels depend only on its string, font, colour, angle,
    alignment and where its anchor falls within a pixel, so they are rendered once on a small
    transparent canvas and blended into the frame from then on: the same values always give the
    same pixels.
    """

    #: Numbers are pasted glyph by glyph (their digits recur from frame to frame even when the
    #: numbers do not), each glyph placed to 1/8 pixel.
    NUMBER = re.compile(r"^[-−+]?[0-9.,%]{2,}$")

    def __init__(self, size: int = 4000):
        self.size = size
        self._cache: OrderedDict = OrderedDict()
        self._widths: dict = {}

    @staticmethod
    def handles(artist) -> bool:
        if type(artist) not in (Text, Annotation) or artist.get_bbox_patch() is not None:
            return False
        if isinstance(artist, Annotation) and artist.arrow_patch is not None:
            return False
        return not (artist.get_clip_on() and (artist.get_clip_box() is not None
                                              or artist.get_clip_path() is not None))

    def draw(self, artist, renderer, pixels: np.ndarray) -> None:
        if not artist.get_visible() or not artist.get_text():
            return
        if isinstance(artist, Annotation):
            if not artist._check_xy(renderer):      # outside the axes: not drawn, as by Agg
                return
            artist.update_positions(renderer)
        x, y = artist.get_transform().transform(artist.get_unitless_position())
        if not (math.isfinite(x) and math.isfinite(y)):
            return
        if (GLYPHS_BY_WIDTH and self.NUMBER.match(artist.get_text()) and artist.get_rotation() == 0
                and artist.get_horizontalalignment() in ("left", "center", "right")):
            self._draw_by_glyph(artist, renderer, pixels, x, y)
            return
        ix, iy = math.floor(x), math.floor(y)
        key = (artist.get_text(), hash(artist.get_fontproperties()),
               to_rgba(artist.get_color(), artist.get_alpha()), artist.get_rotation(),
               artist.get_horizontalalignment(), artist.get_verticalalignment(),
               artist.get_rotation_mode(), _linespacing(artist), renderer.dpi,
               round(x - ix, 6), round(y - iy, 6))
        sprite = self._cache.get(key)
        if sprite is None:
            sprite = self._render(artist, renderer, ix, iy)
            self._cache[key] = sprite
            if len(self._cache) > self.size:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(key)
        dx, dy, rgb, alpha = sprite
        if alpha is None:
            return
        H, W = pixels.shape[:2]
        h, w = alpha.shape
        left, bottom = ix + dx, iy + dy                   # display pixels, y upwards
        top_row = H - (bottom + h)
        r0, c0 = max(top_row, 0), max(left, 0)
        r1, c1 = min(top_row + h, H), min(left + w, W)
        if r0 >= r1 or c0 >= c1:
            return
        a = alpha[r0 - top_row:r1 - top_row, c0 - left:c1 - left, None]
        patch = pixels[r0:r1, c0:c1, :3]
        patch[...] = (patch * (1.0 - a) + rgb * a + 0.5).astype(np.uint8)

    def _width(self, s: str, prop, renderer) -> float:
        key = (s, hash(prop), renderer.dpi)
        if key not in self._widths:
            self._widths[key] = renderer.get_text_width_height_descent(s, prop, False)[0]
        return self._widths[key]

    def _draw_by_glyph(self, artist, renderer, pixels, x: float, y: float) -> None:
        s, prop = artist.get_text(), artist.get_fontproperties()
        # a glyph's advance: how much wider a string gets when it is put in front
        advances = [self._width(c + "0", prop, renderer) - self._width("0", prop, renderer)
                    for c in s]
        total = sum(advances[:-1]) + self._width(s[-1], prop, renderer)
        start = x - {"left": 0.0, "center": total / 2, "right": total}[
            artist.get_horizontalalignment()]
        for c, advance in zip(s, advances, strict=True):
            piece = Text(round(start * 8) / 8, y, c, fontproperties=prop,
                         color=artist.get_color(), alpha=artist.get_alpha(),
                         horizontalalignment="left",
                         verticalalignment=artist.get_verticalalignment(),
                         transform=IdentityTransform())
            piece.set_figure(artist.get_figure(root=False))
            self.draw(piece, renderer, pixels)
            start += advance

    @staticmethod
    def _render(artist, renderer, ix: int, iy: int):
        box = artist.get_window_extent(renderer)
        pad = 2
        x0, y0 = math.floor(box.x0) - pad, math.floor(box.y0) - pad
        w = max(math.ceil(box.x1) + pad - x0, 1)
        h = max(math.ceil(box.y1) + pad - y0, 1)
        small = RendererAgg(w, h, renderer.dpi)
        transform = artist.get_transform()
        artist.set_transform(transform + Affine2D().translate(-x0, -y0))
        try:
            Text.draw(artist, small)                  # the text alone, on a transparent canvas
        finally:
            artist.set_transform(transform)
        rgba = np.asarray(small.buffer_rgba())
        alpha = rgba[..., 3].astype(np.float32) / 255.0
        if not alpha.any():
            return x0 - ix, y0 - iy, None, None
        rgb = np.array(to_rgba(artist.get_color())[:3], dtype=np.float32) * 255.0
        return x0 - ix, y0 - iy, rgb, alpha


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
        self._lock = _RENDER_LOCK
        self._live = None           # (fig, art, animated artists, background, layout key)
        self._pending = set()       # animated artists of a figure whose background is captured
        self._sprites = TextSprites()
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
        return self.draw(self.compute(**self.values()))

    def draw(self, data: dict):
        """A static pyplot figure of ``data``: built and updated once, nothing animated."""
        fig = plt.figure(figsize=self.figsize)
        art = self.build(fig, data)
        self.update(art, data)
        return fig

    def show(self) -> None:
        self._shown = True
        self.refresh(force=True)
        display(self.widget)

    def _ipython_display_(self) -> None:
        self.show()

    # -- the machinery ---------------------------------------------------------------------
    @property
    def _legacy(self) -> bool:
        return type(self).build is Explorer.build and type(self).draw is not Explorer.draw

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
        new = [a for a in changed if a not in animated]
        if new:
            # An artist not seen before: it joins the animated ones and the background is
            # captured again without it.
            animated.update(dict.fromkeys(new))
            for a in new:
                a.set_animated(True)
            self._pending = animated
            background = self._capture(fig)
            self._live = (fig, art, animated, background, key)
        canvas = fig.canvas
        canvas.restore_region(background)
        renderer = canvas.get_renderer()
        pixels = np.asarray(canvas.buffer_rgba())
        # in a fixed order (zorder, then the order update() gave): the same values always give
        # the same pixels
        for a in sorted(animated, key=lambda a: a.get_zorder()):
            if self._sprites.handles(a):
                self._sprites.draw(a, renderer, pixels)
            else:
                fig.draw_artist(a)
        return encode_png(pixels)

    def _build_live(self, data: dict, key):
        if self._live is not None:
            self._live[0].clear()
        fig = Figure(figsize=self.figsize, dpi=self.dpi)
        FigureCanvasAgg(fig)    # an Agg canvas of its own: not a pyplot figure, never shown twice
        art = self.build(fig, data)
        animated = dict.fromkeys(self.update(art, data))      # an ordered set
        # What a full draw puts above a changing artist must be drawn above it on every frame:
        # the frame of its axes (a heatmap's image lies under the spines).
        for a in list(animated):
            ax = getattr(a, "axes", None)
            if ax is not None and a.get_zorder() < min(sp.get_zorder() for sp in ax.spines.values()):
                animated.update(dict.fromkeys(ax.spines.values()))
        # One full draw first lays everything out as in the static figure; then the titles stay
        # where they are (an Axes places its titles on every draw, and a hidden title of the
        # background's draw would be placed wrongly).
        fig.canvas.draw()
        for ax in fig.axes:
            ax._autotitlepos = False
        for a in animated:
            a.set_animated(True)
        self._pending = animated
        return fig, art, animated, self._capture(fig), key

    def _capture(self, fig: Figure):
        # Everything but the animated artists. Axes leave animated children out by themselves,
        # but an axis draws its own label whatever: hide them all for this one draw.
        hidden = [a for a in self._pending if a.get_visible()]
        for a in hidden:
            a.set_visible(False)
        try:
            fig.canvas.draw()
        finally:
            for a in hidden:
                a.set_visible(True)
        return fig.canvas.copy_from_bbox(fig.bbox)
