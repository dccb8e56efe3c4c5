"""Plotting helpers shared by every notebook: one heatmap, one bar chart, and a CJK font.

Chinese labels must render on a machine with no CJK system font, so the Noto Sans SC font that
ships inside the ``zhplot`` package is registered with matplotlib as a fallback: Latin text keeps
DejaVu Sans, and any glyph DejaVu lacks is drawn from Noto Sans SC.
"""

from __future__ import annotations

import re
from importlib import resources

import matplotlib
import numpy as np
from matplotlib import font_manager
from matplotlib import pyplot as plt

CJK_FONT_FILE = "NotoSansSC-Regular.ttf"


def cjk_font_path() -> str:
    """Path of the bundled Noto Sans SC font file (from the ``zhplot`` package)."""
    return str(resources.files("zhplot").joinpath("fonts", CJK_FONT_FILE))


def use_cjk_font() -> str:
    """Register the bundled CJK font and put it behind DejaVu Sans in the fallback list.

    Idempotent; returns the font family name that was registered.
    """
    path = cjk_font_path()
    if path not in {f.fname for f in font_manager.fontManager.ttflist}:
        font_manager.fontManager.addfont(path)
    name = font_manager.FontProperties(fname=path).get_name()
    # A list of families (not the generic "sans-serif") is what turns on per-glyph fallback.
    matplotlib.rcParams["font.family"] = ["DejaVu Sans", name]
    return name


use_cjk_font()


_CJK = re.compile(r"[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uff00-\uffef]")


def _has_cjk(labels) -> bool:
    return any(_CJK.search(str(t)) for t in labels)


def _xtick_rotation(labels, rotation):
    """Chinese labels always stay upright (turned, each character would lie on its side); long
    Latin labels on a wide matrix are turned 90° so that they do not overlap."""
    if rotation is not None:
        return rotation
    labels = [str(t) for t in labels]
    if _has_cjk(labels):
        return 0
    return 90 if len(labels) > 6 and max(map(len, labels)) > 4 else 0


def heatmap(weights, row_labels=None, col_labels=None, *, ax=None, title=None,
            annotate: bool = True, cmap=None, vmin=None, vmax=None, diverging=None,
            xlabel=None, ylabel=None, fmt: str = "{:.2f}", xtick_rotation=None):
    """Draw a matrix (usually attention weights: one row per query) with labelled axes.

    Weights (never negative) are drawn from white to blue, starting at 0. Signed values (scores,
    differences) are drawn with a diverging map centred on 0: blue below 0, white at 0, red above,
    with a range symmetric about 0, so that a one-colour scale cannot make them read as "nothing".

    Parameters
    ----------
    weights : array_like, shape (L, S)
        Row ``i`` is what query ``i`` gives to each key.
    row_labels : sequence of str, length L, optional
    col_labels : sequence of str, length S, optional
    ax : matplotlib Axes, optional
        Drawn into a new figure when omitted.
    title, xlabel, ylabel : str, optional
    annotate : bool
        Write each value in its cell (skipped above 16×16, where it would be unreadable).
    cmap : str, optional
        Colour map; default ``"Blues"``, or ``"RdBu_r"`` when diverging.
    vmin, vmax : float, optional
        Colour range. Default: 0 to the largest value; when diverging, ``-m`` to ``m`` with ``m``
        the largest absolute value (or the largest of ``|vmin|``, ``|vmax|`` when given).
    diverging : bool, optional
        Force (True) or forbid (False) the diverging map; default: diverging whenever a value or
        ``vmin`` is below 0.
    fmt : str
        Number format of the annotations.
    xtick_rotation : float, optional
        Angle of the column labels; default: upright for Chinese labels, 90° only for long Latin
        labels on more than 6 columns.

    Returns
    -------
    matplotlib Axes
    """
    w = np.asarray(weights, dtype=float)
    if w.ndim != 2:
        raise ValueError(f"weights must be a 2-D matrix (L, S); got shape {w.shape}")
    L, S = w.shape
    for name, labels, n in (("row_labels", row_labels, L), ("col_labels", col_labels, S)):
        if labels is not None and len(labels) != n:
            raise ValueError(f"{name} has {len(labels)} labels; the matrix has {n}")
    if ax is None:
        _, ax = plt.subplots(figsize=(0.55 * S + 1.8, 0.5 * L + 1.2))
    finite = w[np.isfinite(w)]
    signed = bool(finite.size and finite.min() < 0) or (vmin is not None and vmin < 0)
    diverging = signed if diverging is None else bool(diverging)
    if diverging:
        m = max([abs(x) for x in (vmin, vmax) if x is not None]
                + [float(np.abs(finite).max()) if finite.size else 1.0]) or 1.0
        lo, hi = -m, m
        cmap = cmap or "RdBu_r"
    else:
        lo = 0.0 if vmin is None else vmin
        hi = (float(finite.max()) if finite.size else 1.0) if vmax is None else vmax
        cmap = cmap or "Blues"
    im = ax.imshow(w, cmap=cmap, vmin=lo, vmax=hi, aspect="auto")
    if row_labels is not None:
        ax.set_yticks(range(L), labels=list(row_labels))
    if col_labels is not None:
        ax.set_xticks(range(S), labels=list(col_labels),
                      rotation=_xtick_rotation(col_labels, xtick_rotation))
    if annotate and L <= 16 and S <= 16:
        for i in range(L):
            for j in range(S):
                # dark cells get white text: far from 0 when diverging, above the middle otherwise
                dark = (abs(w[i, j]) > 0.6 * hi) if diverging else (w[i, j] > (lo + hi) / 2)
                ax.text(j, i, fmt.format(w[i, j]), ha="center", va="center", fontsize=8,
                        color="white" if dark else "black")
    if title:
        ax.set_title(title)
    if xlabel:
        ax.set_xlabel(xlabel)
    if ylabel:
        ax.set_ylabel(ylabel)
    ax.figure.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
    return ax


def heatmaps(matrices, titles=None, row_labels=None, col_labels=None, *, ncols=None,
             suptitle=None, figsize=None, **kwargs):
    """Several heatmaps side by side (for example one per head), sharing one colour range.

    Signed matrices share one range symmetric about 0 (a diverging map, see :func:`heatmap`).

    Parameters
    ----------
    matrices : sequence of array_like, each shape (L, S)
    titles : sequence of str, optional
    row_labels, col_labels : sequence of str, optional
    ncols : int, optional
        Default: all in one row.
    suptitle : str, optional
    figsize : (float, float), optional
        Default: grows with the number of matrices and their size.
    **kwargs
        Passed on to :func:`heatmap`.

    Returns
    -------
    matplotlib Figure
    """
    mats = [np.asarray(m, dtype=float) for m in matrices]
    if not mats:
        raise ValueError("matrices is empty; pass at least one (L, S) matrix")
    n = len(mats)
    ncols = n if ncols is None else ncols
    nrows = -(-n // ncols)
    L, S = mats[0].shape
    if figsize is None:
        figsize = (ncols * (0.5 * S + 1.8), nrows * (0.45 * L + 1.3))
    fig, axes = plt.subplots(nrows, ncols, squeeze=False, figsize=figsize)
    if min(float(np.nanmin(m)) for m in mats) < 0 or kwargs.get("vmin", 0) < 0:
        # signed: one symmetric range about 0 for every panel
        lim = max(float(np.nanmax(np.abs(m))) for m in mats)
        kwargs.setdefault("vmax", lim)
        kwargs.setdefault("vmin", -lim)
    else:
        kwargs.setdefault("vmax", max(float(np.nanmax(m)) for m in mats))
    for idx, ax in enumerate(axes.flat):
        if idx >= n:
            ax.axis("off")
            continue
        heatmap(mats[idx], row_labels, col_labels, ax=ax,
                title=None if titles is None else titles[idx], **kwargs)
    if suptitle:
        fig.suptitle(suptitle)
    fig.tight_layout()
    return fig


def weight_bars(weights, labels, *, ax=None, title=None, color="tab:blue", ylim=(0, 1)):
    """Bar chart of one row of weights, each bar labelled with its value.

    Parameters
    ----------
    weights : array_like, shape (S,)
    labels : sequence of str, length S
    ax : matplotlib Axes, optional
    title : str, optional

    Returns
    -------
    matplotlib Axes
    """
    w = np.asarray(weights, dtype=float)
    if w.ndim != 1 or len(labels) != w.size:
        raise ValueError(
            f"weights must be 1-D with one label each; got shape {w.shape} and {len(labels)} labels"
        )
    if ax is None:
        _, ax = plt.subplots(figsize=(0.8 * w.size + 2, 2.8))
    bars = ax.bar(range(w.size), w, color=color)
    ax.set_xticks(range(w.size), labels=list(labels))
    ax.bar_label(bars, labels=[f"{x:.2f}" for x in w], fontsize=8)
    if ylim is not None:
        ax.set_ylim(*ylim)
    if title:
        ax.set_title(title)
    return ax


def bar_artists(ax, index: int = 0):
    """The bars of ``ax``'s ``index``-th bar chart and their value labels (from ``bar_label``).

    Returns
    -------
    bars : list of Rectangle
    labels : list of Annotation, one per bar
    """
    container = ax.containers[index]
    bars = list(container.patches)
    # bar_label anchors each annotation at the middle of its bar's end
    annotations = [t for t in ax.texts if hasattr(t, "xyann")]
    labels = []
    for bar in bars:
        centre = bar.get_x() + bar.get_width() / 2
        found = [t for t in annotations if np.isclose(t.xy[0], centre) and t not in labels]
        if not found:
            raise ValueError("these bars have no value labels (draw them with weight_bars or "
                             "ax.bar_label)")
        labels.append(found[0])
    return bars, labels


def set_bars(bars, labels, values, fmt: str = "{:.2f}", colors=None) -> list:
    """Give bars new heights (and colours), moving their value labels with them.

    ``bars`` and ``labels`` are what :func:`bar_artists` returns. A negative bar's label sits
    below its end, as ``bar_label`` puts it. Returns the artists that changed.
    """
    values = np.asarray(values, dtype=float)
    if values.shape != (len(bars),):
        raise ValueError(f"values must have one number per bar ({len(bars)}); "
                         f"got shape {values.shape}")
    for i, (bar, label, v) in enumerate(zip(bars, labels, values, strict=True)):
        bar.set_height(v)
        if colors is not None:
            bar.set_color(colors[i])
        label.xy = (bar.get_x() + bar.get_width() / 2, v)
        label.set_text(fmt.format(v))
        label.set_verticalalignment("top" if v < 0 else "bottom")
    return [*bars, *labels]
