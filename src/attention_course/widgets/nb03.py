"""Widget of notebook 03: what the 1/√d_k scale does to the softmax.

Random queries and keys with independent, mean-0, variance-1 components (the setting of
Vaswani et al. 2017, footnote 4) are scored with and without the scale. The explorer shows how
spread out the scores are, how much of the budget the largest weight takes, and how large the
softmax's Jacobian ``diag(p) - p pᵀ`` still is: the derivative of the weights with respect to the
softmax's input only (not with respect to q or k; notebook 03 measures those separately).
"""

from __future__ import annotations

from functools import lru_cache

import ipywidgets as w
import numpy as np

from ..softmax import softmax
from .renderer import Explorer, check_lang

#: The key widths the slider offers (powers of two, as in real models).
D_K_OPTIONS = (4, 8, 16, 32, 64, 128, 256, 512, 1024)
#: Keys per query: a short sentence.
N_KEYS = 8
#: Queries averaged over; enough for two stable decimals, small enough to redraw at once.
N_QUERIES = 500

TEXT = {
    "zh": {
        "scale": "除以 √d_k",
        "key": "键 {}",
        "bars": "同一个查询的权重",
        "with": "除以 √d_k",
        "without": "不缩放",
        "largest": "最大权重（平均）",
        "jacobian": "对 softmax 输入的梯度 ‖∂p/∂x‖",
        "title": "d_k = {d}，{mode}：分数标准差 {std:.2f}，最大权重 {mw:.2f}，‖∂p/∂x‖ {jn:.3f}",
    },
    "en": {
        "scale": "divide by √d_k",
        "key": "k{}",
        "bars": "weights of one query",
        "with": "divided by √d_k",
        "without": "not scaled",
        "largest": "largest weight (mean)",
        "jacobian": "‖∂p/∂x‖, x = softmax input",
        "title": "d_k = {d}, {mode}: score std {std:.2f}, largest weight {mw:.2f}, "
                 "‖∂p/∂x‖ {jn:.3f}",
    },
}


def softmax_jacobian(p) -> np.ndarray:
    """Jacobian of the softmax at its output ``p``: ``diag(p) - p pᵀ``, one per row.

    Parameters
    ----------
    p : ndarray, shape (..., S)
        Softmax weights (each row sums to 1).

    Returns
    -------
    ndarray, shape (..., S, S)
        Entry ``[i, j]`` is ∂p_i / ∂x_j. Each row sums to 0: the weights keep summing to 1
        whatever the scores do.

    Examples
    --------
    >>> softmax_jacobian(np.array([0.5, 0.5]))
    array([[ 0.25, -0.25],
           [-0.25,  0.25]])
    """
    p = np.asarray(p)
    outer = p[..., :, None] * p[..., None, :]                  # (..., S, S)
    return p[..., :, None] * np.eye(p.shape[-1]) - outer


@lru_cache(maxsize=64)
def _stats(d_k: int, scale: bool, n_queries: int, n_keys: int, seed: int):
    # Seeded by d_k alone (not by the switch) so that both settings score the same vectors.
    rng = np.random.default_rng([seed, d_k])
    q = rng.standard_normal((n_queries, 1, d_k))
    k = rng.standard_normal((n_queries, n_keys, d_k))
    scores = (q @ np.swapaxes(k, -1, -2))[:, 0, :]             # (n_queries, n_keys)
    if scale:
        scores = scores / np.sqrt(d_k)
    p = softmax(scores, axis=-1)
    jac = np.linalg.norm(softmax_jacobian(p), axis=(-2, -1))   # (n_queries,)
    first = p[0].copy()
    first.flags.writeable = False                              # shared by the cache
    return float(scores.std()), float(p.max(-1).mean()), float(jac.mean()), first


def saturation_stats(d_k: int, scale: bool, *, n_queries: int = N_QUERIES,
                     n_keys: int = N_KEYS, seed: int = 0) -> dict:
    """Score spread, largest weight and Jacobian size for random q, k of width ``d_k``.

    Parameters
    ----------
    d_k : int
        Width of queries and keys.
    scale : bool
        Divide the scores by √d_k.
    n_queries, n_keys : int
        ``n_queries`` independent queries, each against its own ``n_keys`` keys.
    seed : int

    Returns
    -------
    dict
        ``score_std`` (std of all scores), ``max_weight`` (mean over queries of the largest
        weight), ``jacobian_norm`` (mean Frobenius norm of ``diag(p) - p pᵀ``) and
        ``weights`` (the first query's weights, shape (n_keys,)).

    Examples
    --------
    >>> s = saturation_stats(256, scale=False)
    >>> round(s["score_std"]), s["max_weight"] > 0.9
    (16, True)
    """
    std, largest, jac, first = _stats(int(d_k), bool(scale), int(n_queries), int(n_keys),
                                      int(seed))
    return {"score_std": std, "max_weight": largest, "jacobian_norm": jac,
            "weights": first.copy()}


class ScaleExplorer(Explorer):
    """d_k slider and a scale switch: watch the softmax saturate and its gradient vanish.

    Parameters
    ----------
    lang : {"zh", "en"}
    d_k : int
        Starting width, one of :data:`D_K_OPTIONS`.
    scale : bool
        Starting position of the switch.
    seed : int

    Attributes
    ----------
    data : dict
        ``d_k``, ``scale``, ``score_std``, ``max_weight``, ``jacobian_norm``, ``weights`` (one
        query's weights in the current setting), ``other_weights`` (the same query with the
        switch flipped) and ``curves``: for ``"scaled"`` and ``"unscaled"``, the
        ``max_weight`` and ``jacobian_norm`` at every width of ``curves["d_k"]``.

    Examples
    --------
    >>> ex = ScaleExplorer(lang="en", d_k=64, scale=True)
    >>> round(ex.data["score_std"])
    1
    >>> round(ex.compute(d_k=64, scale=False)["score_std"])    # the switch off: std √64
    8
    """

    def __init__(self, lang: str = "en", d_k: int = 64, scale: bool = True, seed: int = 0):
        check_lang(lang)
        if d_k not in D_K_OPTIONS:
            raise ValueError(f"d_k must be one of {D_K_OPTIONS}; got {d_k!r}")
        self.lang = lang
        self.seed = seed
        text = TEXT[lang]
        controls = {
            "d_k": w.SelectionSlider(options=list(D_K_OPTIONS), value=d_k, description="d_k",
                                     continuous_update=True),
            "scale": w.Checkbox(value=scale, description=text["scale"],
                                style={"description_width": "initial"}),
        }
        super().__init__(controls)

    def compute(self, d_k: int, scale: bool) -> dict:
        now = saturation_stats(d_k, scale, seed=self.seed)
        other = saturation_stats(d_k, not scale, seed=self.seed)
        curves = {"d_k": list(D_K_OPTIONS)}
        for name, flag in (("scaled", True), ("unscaled", False)):
            stats = [saturation_stats(d, flag, seed=self.seed) for d in D_K_OPTIONS]
            curves[name] = {key: [s[key] for s in stats] for key in ("max_weight", "jacobian_norm")}
        return {"d_k": d_k, "scale": bool(scale), "score_std": now["score_std"],
                "max_weight": now["max_weight"], "jacobian_norm": now["jacobian_norm"],
                "weights": now["weights"], "other_weights": other["weights"], "curves": curves}

    figsize = (11, 3.4)

    def build(self, fig, data: dict) -> dict:
        text = TEXT[self.lang]
        colors = {"scaled": "tab:blue", "unscaled": "tab:orange"}
        axes = fig.subplots(1, 3)

        ax = axes[0]
        S = len(data["weights"])
        x = np.arange(S)
        bars = {}
        for offset, name in ((-0.2, "scaled"), (0.2, "unscaled")):
            bars[name] = ax.bar(x + offset, np.zeros(S), width=0.4, color=colors[name],
                                label=text["with"] if name == "scaled" else text["without"])
        # keys counted from 0, as everywhere in the course
        ax.set_xticks(x, labels=[text["key"].format(j) for j in range(S)])
        ax.set_ylim(0, 1.05)
        ax.set_title(text["bars"])
        ax.legend(fontsize=8, loc="upper left")      # fixed: the bars change, the legend stays

        # The curves run over every width and do not depend on the controls: drawn once.
        curves = data["curves"]
        rings = {}
        for ax, key, title in ((axes[1], "max_weight", text["largest"]),
                               (axes[2], "jacobian_norm", text["jacobian"])):
            for name in ("scaled", "unscaled"):
                ax.plot(curves["d_k"], curves[name][key], "o-", ms=3, color=colors[name],
                        label=text["with"] if name == "scaled" else text["without"])
            (rings[key],) = ax.plot([data["d_k"]], [data[key]], "o", ms=10, mfc="none",
                                    mec="black", mew=1.5)
            ax.set_xscale("log", base=2)
            ax.set_xticks(curves["d_k"], labels=[str(d) for d in curves["d_k"]], fontsize=7)
            ax.set_xlabel("d_k")
            ax.set_ylim(0, 1.05 if key == "max_weight" else max(curves["scaled"][key]) * 1.2)
            ax.set_title(title)
            ax.legend(fontsize=8)
        sup = fig.suptitle(" ", fontsize=10)
        fig.tight_layout()
        return {"bars": bars, "rings": rings, "sup": sup}

    def update(self, art: dict, data: dict) -> list:
        text = TEXT[self.lang]
        now = "scaled" if data["scale"] else "unscaled"
        other = "unscaled" if data["scale"] else "scaled"
        changed = []
        for name, weights in ((now, data["weights"]), (other, data["other_weights"])):
            for bar, h in zip(art["bars"][name].patches, weights, strict=True):
                bar.set_height(h)
                bar.set_alpha(1.0 if name == now else 0.3)
                changed.append(bar)
        for key, ring in art["rings"].items():
            ring.set_data([data["d_k"]], [data[key]])
            changed.append(ring)
        art["sup"].set_text(text["title"].format(
            d=data["d_k"], mode=text["with"] if data["scale"] else text["without"],
            std=data["score_std"], mw=data["max_weight"], jn=data["jacobian_norm"]))
        return [*changed, art["sup"]]
