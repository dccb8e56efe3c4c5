"""Notebook 06 widget: what full, chunked and windowed attention would cost at a length you pick.

The projections come from the cost model (:mod:`attention_course.cost`): operations and bytes are
counted exactly, and time is operations divided by one rate measured on this machine (or passed
in), so the curves say how the cost grows, not how a particular kernel would perform.
"""

from __future__ import annotations

import time

import ipywidgets as w
import numpy as np
from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullLocator

from ..attention import scaled_dot_product_attention
from ..cost import (
    attention_flops,
    attention_memory_bytes,
    chunked_attention_memory_bytes,
    max_length_for_memory,
    windowed_attention_flops,
    windowed_attention_memory_bytes,
)
from .renderer import Explorer, check_lang

KINDS = ("full", "chunked", "windowed")
GIB = 2**30
#: Time ticks a reader can say aloud: 1 µs, 100 µs, 10 ms, 1 s, 1 min, 1 h, 1 day.
TIME_TICKS = [1e-6, 1e-4, 1e-2, 1.0, 60.0, 3600.0, 86400.0]
#: Lengths the curves are drawn at: 256 ... 262144, two points per doubling.
CURVE_LENGTHS = np.unique(np.round(2.0 ** np.arange(8, 18.01, 0.5)).astype(np.int64))

TEXT = {
    "zh": {
        "n": "序列长度 n", "d": "每个头的维度 d_k", "heads": "头数", "window": "窗口 r",
        "full": "完整注意力", "chunked": "分块（在线 softmax）", "windowed": "滑动窗口",
        "measured": "实测（d_k = 64，1 个头）", "model_measured": "模型（d_k = 64，1 个头）",
        "time": "预计时间", "memory": "分数矩阵的内存",
        "budget": "{gib:g} GiB 显存", "wall": "内存墙 n = {n:,}", "xlabel": "序列长度 n",
        "title_time": "n = {n:,} 时：完整 {full} · 分块 {chunked} · 窗口 {windowed}",
        "title_mem": "完整 {full} · 分块 {chunked} · 窗口 {windowed}",
        "too_big": "（放不下！）",
    },
    "en": {
        "n": "length n", "d": "width per head d_k", "heads": "heads", "window": "window r",
        "full": "full attention", "chunked": "chunked (online softmax)",
        "windowed": "sliding window",
        "measured": "measured (d_k = 64, 1 head)", "model_measured": "model (d_k = 64, 1 head)",
        "time": "projected time", "memory": "score memory",
        "budget": "{gib:g} GiB card", "wall": "memory wall n = {n:,}",
        "xlabel": "sequence length n",
        "title_time": "n = {n:,}: full {full} · chunked {chunked} · window {windowed}",
        "title_mem": "full {full} · chunked {chunked} · window {windowed}",
        "too_big": " (does not fit!)",
    },
}


def measure_rate(n: int = 1024, d: int = 64, repeats: int = 3, seed: int = 0,
                 min_seconds: float = 0.02) -> float:
    """Effective operations per second of :func:`scaled_dot_product_attention` on this machine.

    One float32 head of length ``n`` is timed (the shortest of ``repeats`` runs) on one BLAS
    thread when threadpoolctl is available, with ``time.process_time`` so that moments when the
    machine runs other programs are not counted; the result is ``attention_flops(n, d) /
    seconds``, softmax time included. Each run repeats the call until ``min_seconds`` of CPU time
    have passed and divides by the number of calls: ``process_time`` can tick as coarsely as
    about 16 ms (Windows), and one short call would read as 0.

    Examples
    --------
    >>> measure_rate(n=64, d=8, repeats=1) > 0
    True
    """
    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal((n, d), dtype=np.float32) for _ in range(3))
    try:
        from threadpoolctl import threadpool_limits
        limits = threadpool_limits(limits=1)
    except ImportError:  # pragma: no cover - threadpoolctl ships with the course's requirements
        limits = None
    try:
        scaled_dot_product_attention(q, k, v)        # warm up: first-call costs are not the rate
        best = np.inf
        for _ in range(repeats):
            calls, start = 0, time.process_time()
            while True:
                scaled_dot_product_attention(q, k, v)
                calls += 1
                elapsed = time.process_time() - start
                if elapsed >= min_seconds:
                    break
            best = min(best, elapsed / calls)
    finally:
        if limits is not None:
            limits.restore_original_limits()
    return attention_flops(n, d) / best


def project(n: int, d: int, heads: int, window: int, rate: float, block: int = 128,
            dtype=np.float32) -> dict:
    """Operations, seconds and score bytes of the three variants at length ``n``.

    Parameters
    ----------
    n, d, heads, window : int
        Length, width per head, number of heads, sliding-window radius r.
    rate : float
        Operations per second used to turn operations into seconds.
    block : int
        Tile size (queries and keys) of the chunked variant.

    Returns
    -------
    dict
        ``{kind: {"flops": int, "seconds": float, "bytes": int}}`` for ``"full"``,
        ``"chunked"`` (same operations as full, one tile of memory) and ``"windowed"``.

    Examples
    --------
    >>> p = project(4096, 64, 8, 128, rate=1e10)
    >>> p["chunked"]["flops"] == p["full"]["flops"], p["full"]["bytes"] // 2**20
    (True, 512)
    """
    flops = {
        "full": attention_flops(n, d, num_heads=heads),
        "chunked": attention_flops(n, d, num_heads=heads),
        "windowed": windowed_attention_flops(n, d, window, num_heads=heads),
    }
    nbytes = {
        "full": attention_memory_bytes(n, num_heads=heads, dtype=dtype),
        "chunked": chunked_attention_memory_bytes(block, block, L=n, num_heads=heads, dtype=dtype),
        "windowed": windowed_attention_memory_bytes(n, window, num_heads=heads, dtype=dtype),
    }
    return {kind: {"flops": flops[kind], "seconds": flops[kind] / rate, "bytes": nbytes[kind]}
            for kind in KINDS}


def _fmt_seconds(s: float) -> str:
    for unit, size in (("d", 86400.0), ("h", 3600.0), ("min", 60.0), ("s", 1.0), ("ms", 1e-3)):
        if s >= size:
            return f"{s / size:.3g} {unit}"
    return f"{s * 1e6:.3g} µs"


def _fmt_bytes(b: float) -> str:
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if b >= size:
            return f"{b / size:.3g} {unit}"
    return f"{b:.3g} B"


class CostExplorer(Explorer):
    """Pick n, d, heads and a window; see projected time and score memory of three variants.

    Parameters
    ----------
    lang : {"zh", "en"}
    rate : float, optional
        Operations per second for the time projection; measured once with
        :func:`measure_rate` when omitted.
    measured : dict, optional
        Points to draw beside the curves: ``{"n": [...], "seconds": [...], "peak_bytes": [...]}``
        (one float32 head, d = 64, as the notebook measures them).
    budget_gib : float
        The memory of the card the wall is drawn for.

    Attributes
    ----------
    data : dict
        ``n, d, heads, window, rate``; ``at`` (the projection at n, see :func:`project`);
        ``curves`` (``{"n": lengths, kind: {"seconds": ..., "bytes": ...}}``); ``wall`` (the
        longest n whose full score matrices fit in the budget) and ``fits`` (per kind, whether
        they fit at n); ``reference`` (full attention at d = 64, one head: the setting of the
        measured points).

    Examples
    --------
    >>> ex = CostExplorer(lang="en", rate=1e10)
    >>> data = ex.compute(n=8192, d=64, heads=8, window=128)
    >>> data["at"]["full"]["bytes"] // 2**20        # 8 heads of 8192² float32 scores, MiB
    2048
    """

    def __init__(self, lang: str = "en", rate: float | None = None, measured: dict | None = None,
                 budget_gib: float = 24, block: int = 128):
        self.lang = check_lang(lang)
        self.text = TEXT[lang]
        self.rate = float(measure_rate() if rate is None else rate)
        if not self.rate > 0:
            raise ValueError(
                f"rate must be a positive number of operations per second; got {rate!r}")
        self.measured = measured
        self.budget = budget_gib * GIB
        self.budget_gib = budget_gib
        self.block = block
        t = self.text
        style = {"description_width": "initial"}
        controls = {
            "n": w.SelectionSlider(options=[int(2**p) for p in range(9, 19)], value=16384,
                                   description=t["n"], style=style, continuous_update=True),
            "d": w.Dropdown(options=[32, 64, 128, 256], value=64, description=t["d"], style=style),
            "heads": w.IntSlider(value=8, min=1, max=32, description=t["heads"], style=style,
                                 continuous_update=True),
            "window": w.Dropdown(options=[32, 64, 128, 256, 512], value=128,
                                 description=t["window"], style=style),
        }
        super().__init__(controls, columns=2)

    def compute(self, n: int, d: int, heads: int, window: int) -> dict:
        at = project(n, d, heads, window, self.rate, self.block)
        curves = {"n": CURVE_LENGTHS}
        per_length = [project(int(m), d, heads, window, self.rate, self.block)
                      for m in CURVE_LENGTHS]
        for kind in KINDS:
            curves[kind] = {
                "seconds": np.array([p[kind]["seconds"] for p in per_length]),
                "bytes": np.array([p[kind]["bytes"] for p in per_length], dtype=np.float64),
            }
        return {
            "n": n, "d": d, "heads": heads, "window": window, "rate": self.rate,
            "at": at, "curves": curves,
            "wall": max_length_for_memory(self.budget, num_heads=heads),
            "fits": {kind: at[kind]["bytes"] <= self.budget for kind in KINDS},
            "reference": {
                "seconds": np.array([attention_flops(int(m), 64) for m in CURVE_LENGTHS])
                / self.rate,
                "bytes": np.array([attention_memory_bytes(int(m)) for m in CURVE_LENGTHS],
                                  dtype=np.float64),
            },
        }

    figsize = (10, 3.8)

    def _extremes(self) -> dict:
        """Time and memory ranges that hold for every setting of the controls (fixed axes)."""
        c = self.controls
        settings = [(min(c["d"].options), c["heads"].min, min(c["window"].options)),
                    (max(c["d"].options), c["heads"].max, max(c["window"].options))]
        seconds, mib = [], []
        for d, heads, window in settings:
            for m in (int(CURVE_LENGTHS[0]), int(CURVE_LENGTHS[-1])):
                p = project(m, d, heads, window, self.rate, self.block)
                seconds += [p[k]["seconds"] for k in KINDS]
                mib += [p[k]["bytes"] / 2**20 for k in KINDS]
        for m in (int(CURVE_LENGTHS[0]), int(CURVE_LENGTHS[-1])):
            seconds.append(attention_flops(m, 64) / self.rate)
            mib.append(attention_memory_bytes(m) / 2**20)
        if self.measured:
            seconds += list(np.asarray(self.measured["seconds"], dtype=float))
            mib += list(np.asarray(self.measured.get("peak_bytes", [1.0]), dtype=float) / 2**20)
        mib.append(self.budget / 2**20 * 3)                       # room for the budget's label
        return {"seconds": (min(seconds) / 3, max(seconds) * 3), "mib": (min(mib) / 3, max(mib) * 3)}

    def build(self, fig, data: dict) -> dict:
        t = self.text
        ax_t, ax_m = fig.subplots(1, 2)
        ns = data["curves"]["n"]
        # three colours and three dashes, never red against green: colour-blind readers tell them apart
        styles = {"full": ("tab:red", "-"), "chunked": ("tab:blue", "--"),
                  "windowed": ("tab:purple", "-.")}
        art = {"time": ax_t, "memory": ax_m, "curves": {}, "points": {}}
        for kind in KINDS:
            color, ls = styles[kind]
            curve = data["curves"][kind]
            (lt,) = ax_t.loglog(ns, curve["seconds"], ls, color=color, label=t[kind])
            (lm,) = ax_m.loglog(ns, curve["bytes"] / 2**20, ls, color=color, label=t[kind])
            size = 9 if kind == "full" else 6      # full under chunked stays visible
            (pt,) = ax_t.plot([data["n"]], [1.0], "o", color=color, ms=size)
            (pm,) = ax_m.plot([data["n"]], [1.0], "o", color=color, ms=size)
            art["curves"][kind] = (lt, lm)
            art["points"][kind] = (pt, pm)
        if self.measured:
            m = self.measured
            # The measured points are one head of width 64: draw the model at that setting too,
            # so the points are compared with the line they should follow.
            ref = data["reference"]
            ax_t.loglog(ns, ref["seconds"], color="gray", lw=0.8, label=t["model_measured"])
            ax_m.loglog(ns, ref["bytes"] / 2**20, color="gray", lw=0.8, label=t["model_measured"])
            ax_t.loglog(m["n"], m["seconds"], "k^", ms=5, label=t["measured"])
            if "peak_bytes" in m:
                ax_m.loglog(m["n"], np.asarray(m["peak_bytes"]) / 2**20, "k^", ms=5,
                            label=t["measured"])
        ax_m.axhline(self.budget / 2**20, color="gray", lw=1, ls=":")
        ax_m.text(ns[0], self.budget / 2**20 * 1.4, t["budget"].format(gib=self.budget_gib),
                  fontsize=8, color="gray")
        art["wall"] = ax_m.axvline(ns[-1], color="tab:red", lw=1, ls=":")
        art["wall_text"] = ax_m.text(ns[-1], 0.2, " ", fontsize=8, color="tab:red",
                                     va="bottom", transform=ax_m.get_xaxis_transform())
        formats = {ax_t: lambda s, _: _fmt_seconds(s), ax_m: lambda m, _: _fmt_bytes(m * 2**20)}
        art["now"] = []
        for ax in (ax_t, ax_m):
            # Ten decades of minor ticks and mathtext labels cost a second of layout; plain
            # units (ms, GiB) read better anyway.
            for axis in (ax.xaxis, ax.yaxis):
                axis.set_major_locator(LogLocator(numticks=7))
                axis.set_minor_locator(NullLocator())
            ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
            ax.yaxis.set_major_formatter(FuncFormatter(formats[ax]))
            art["now"].append(ax.axvline(data["n"], color="black", lw=0.8, alpha=0.4))
            ax.set_xlabel(t["xlabel"])
            ax.grid(True, which="major", alpha=0.3)
            ax.set_xlim(ns[0] / 1.3, ns[-1] * 1.3)
        # Fixed ranges that hold for every setting: the axes are drawn once.
        limits = self._extremes()
        ax_t.set_ylim(*limits["seconds"])
        ax_m.set_ylim(*limits["mib"])
        ax_m.yaxis.set_major_locator(LogLocator(base=32, numticks=9))  # 1 MiB, 32 MiB, 1 GiB ...
        ax_t.yaxis.set_major_locator(FixedLocator(TIME_TICKS))
        ax_t.set_ylabel(t["time"])
        ax_m.set_ylabel(t["memory"])
        ax_t.set_title(" ", fontsize=9)
        ax_m.set_title(" ", fontsize=9)
        ax_t.legend(fontsize=7, loc="upper left")
        fig.tight_layout()
        return art

    def update(self, art: dict, data: dict) -> list:
        t = self.text
        changed = []
        for kind in KINDS:
            lt, lm = art["curves"][kind]
            lt.set_ydata(data["curves"][kind]["seconds"])
            lm.set_ydata(data["curves"][kind]["bytes"] / 2**20)
            pt, pm = art["points"][kind]
            pt.set_data([data["n"]], [data["at"][kind]["seconds"]])
            pm.set_data([data["n"]], [data["at"][kind]["bytes"] / 2**20])
            changed += [lt, lm, pt, pm]
        shown = data["wall"] <= data["curves"]["n"][-1]
        art["wall"].set_xdata([data["wall"]] * 2)
        art["wall"].set_visible(shown)
        art["wall_text"].set_x(data["wall"] * 1.15)
        art["wall_text"].set_text(t["wall"].format(n=data["wall"]) if shown else "")
        for line in art["now"]:
            line.set_xdata([data["n"]] * 2)
        at = data["at"]
        art["time"].title.set_text(t["title_time"].format(
            n=data["n"], **{k: _fmt_seconds(at[k]["seconds"]) for k in KINDS}))
        sizes = {k: _fmt_bytes(at[k]["bytes"]) + ("" if data["fits"][k] else t["too_big"])
                 for k in KINDS}
        art["memory"].title.set_text(t["title_mem"].format(**sizes))
        return [*changed, art["wall"], art["wall_text"], *art["now"], art["time"].title,
                art["memory"].title]
