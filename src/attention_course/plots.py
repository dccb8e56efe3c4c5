"""Plotting helpers shared by every notebook: one heatmap, one bar chart, and a CJK font.

Chinese labels must render on a machine with no CJK system font, so the Noto Sans SC font that
ships inside the ``zhplot`` package is registered with matplotlib as a fallback: Latin text keeps
DejaVu Sans, and any glyph DejaVu lacks is drawn from Noto Sans SC.
"""

from __future__ import annotations

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


def heatmap(weights, row_labels=None, col_labels=None, *, ax=None, title=None,
            annotate: bool = True, cmap: str = "Blues", vmin: float = 0.0, vmax=None,
            xlabel=None, ylabel=None, fmt: str = "{:.2f}"):
    """Draw a matrix (usually attention weights: one row per query) with labelled axes.

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
    cmap, vmin, vmax, fmt
        Colour map, colour range (``vmax`` defaults to the largest value) and number format.

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
    top = float(np.nanmax(w)) if vmax is None and w.size else vmax
    im = ax.imshow(w, cmap=cmap, vmin=vmin, vmax=top, aspect="auto")
    if row_labels is not None:
        ax.set_yticks(range(L), labels=list(row_labels))
    if col_labels is not None:
        ax.set_xticks(range(S), labels=list(col_labels))
    if annotate and L <= 16 and S <= 16:
        mid = (vmin + (top if top is not None else 1.0)) / 2
        for i in range(L):
            for j in range(S):
                ax.text(j, i, fmt.format(w[i, j]), ha="center", va="center", fontsize=8,
                        color="white" if w[i, j] > mid else "black")
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
    kwargs.setdefault("vmax", max(float(m.max()) for m in mats))
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
