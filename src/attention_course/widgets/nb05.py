"""Widget of notebook 05: where one position sits on one sine/cosine circle.

Each pair of dimensions ``(2i, 2i+1)`` of the sinusoidal encoding is a point
``(sin(pos·ω_i), cos(pos·ω_i))`` on the unit circle: a clock hand that turns by ``ω_i`` per
position. Pair 0 is the fast hand (one turn every 2π ≈ 6.3 positions), the last pair a hand so
slow that it hardly moves over a whole sentence.
"""

from __future__ import annotations

import ipywidgets as w
import numpy as np

from ..positional import frequencies
from .renderer import Explorer, check_lang

_TEXT = {
    "zh": {
        "position": "位置 pos",
        "pair": "维度对 i",
        "circle": "维度对 i={pair}：ω={omega:.4g}，波长 {wavelength:.4g}",
        "waves": "第 {a}、{b} 维随位置的变化",
        "pos_axis": "位置 pos",
        "now": "pos={pos}：角度 {angle:.2f} rad",
        "trail": "位置 0…pos 走过的点",
    },
    "en": {
        "position": "position",
        "pair": "pair i",
        "circle": "pair i={pair}: ω={omega:.4g}, wavelength {wavelength:.4g}",
        "waves": "dimensions {a} and {b} along the positions",
        "pos_axis": "position pos",
        "now": "pos={pos}: angle {angle:.2f} rad",
        "trail": "points of positions 0…pos",
    },
}


class PositionExplorer(Explorer):
    """Pick a position and a dimension pair; see the (sin, cos) point on its circle and its waves.

    Parameters
    ----------
    d_model : int
        D, even: the pairs are ``0 .. D/2 - 1``.
    max_position : int
        Largest position on the slider, and the end of the wave plot.
    position, pair : int
        Starting values of the two sliders.
    base : float
        10000 in Vaswani et al. (2017).
    lang : {"zh", "en"}
        Language of the labels.

    Attributes
    ----------
    data : dict
        ``position``, ``pair``, ``dims`` (2i, 2i+1), ``omega``, ``wavelength`` (2π/ω),
        ``angle`` (pos·ω, radians), ``angle_wrapped`` (in [0, 2π)), ``point`` = (sin, cos) of the
        angle, i.e. ``PE[pos, 2i:2i+2]``; ``trail``: shape (pos+1, 2), the points of positions
        0..pos; ``grid``, ``sin``, ``cos``: the two waves over 0..max_position.

    Examples
    --------
    >>> ex = PositionExplorer(d_model=8, position=3, pair=0)
    >>> ex.data["point"].round(3), round(ex.data["angle"], 3)
    (array([ 0.141, -0.99 ]), 3.0)
    >>> round(ex.compute(position=3, pair=1)["omega"], 3)
    0.1
    """

    def __init__(self, d_model: int = 64, max_position: int = 100, position: int = 7,
                 pair: int = 0, base: float = 10000.0, lang: str = "en"):
        check_lang(lang)
        self.omegas = frequencies(d_model, base)            # validates d_model and base
        if not (isinstance(max_position, (int, np.integer)) and max_position >= 1):
            raise ValueError(f"max_position must be an int >= 1; got {max_position!r}")
        self.d_model, self.base, self.lang = d_model, base, lang
        self.max_position = int(max_position)
        text = _TEXT[lang]
        style = {"description_width": "initial"}
        controls = {
            "position": w.IntSlider(value=position, min=0, max=self.max_position,
                                    description=text["position"], style=style),
            "pair": w.IntSlider(value=pair, min=0, max=self.omegas.size - 1,
                                description=text["pair"], style=style),
        }
        super().__init__(controls, columns=2)

    def compute(self, position: int, pair: int) -> dict:
        omega = float(self.omegas[pair])
        angle = position * omega
        trail_angles = np.arange(position + 1) * omega           # (pos+1,)
        grid = np.linspace(0, self.max_position, 20 * self.max_position + 1)
        return {
            "position": int(position),
            "pair": int(pair),
            "dims": (2 * pair, 2 * pair + 1),
            "omega": omega,
            "wavelength": 2 * np.pi / omega,
            "angle": angle,
            "angle_wrapped": float(np.mod(angle, 2 * np.pi)),
            "point": np.array([np.sin(angle), np.cos(angle)]),
            "trail": np.stack([np.sin(trail_angles), np.cos(trail_angles)], axis=1),  # (pos+1, 2)
            "grid": grid,
            "sin": np.sin(grid * omega),
            "cos": np.cos(grid * omega),
        }

    figsize = (9.5, 3.6)

    def build(self, fig, data: dict) -> dict:
        text = _TEXT[self.lang]
        ax_c, ax_w = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1, 1.9]})
        t = np.linspace(0, 2 * np.pi, 200)
        ax_c.plot(np.sin(t), np.cos(t), color="0.8", lw=1, zorder=0.5)    # under the trail
        art = {"circle": ax_c, "waves": ax_w}
        art["trail"] = ax_c.scatter([0], [1], s=10, color="tab:blue", alpha=0.35,
                                    label=text["trail"])
        (art["hand"],) = ax_c.plot([0, 0], [0, 1], color="tab:red", lw=1.5)
        art["point"] = ax_c.scatter([0], [1], s=60, color="tab:red", zorder=3, label=" ")
        ax_c.set_xlim(-1.3, 1.3)
        ax_c.set_ylim(-1.3, 1.6)
        ax_c.set_aspect("equal")
        ax_c.set_xlabel("PE[pos, 0] = sin")
        ax_c.set_ylabel("PE[pos, 1] = cos")
        art["circle_legend"] = ax_c.legend(loc="upper center", fontsize=7, frameon=False, ncol=1)
        ax_c.set_title(" ", fontsize=9)

        (art["sin"],) = ax_w.plot(data["grid"], data["sin"], color="tab:blue", label=" ")
        (art["cos"],) = ax_w.plot(data["grid"], data["cos"], color="tab:orange", label=" ")
        art["now"] = ax_w.axvline(0, color="tab:red", lw=1, ls="--")
        art["marks"] = ax_w.scatter([0, 0], [0, 1], color="tab:red", zorder=3)
        ax_w.set_xlim(-0.05 * self.max_position, 1.05 * self.max_position)
        ax_w.set_ylim(-1.15, 1.5)
        ax_w.set_xlabel(text["pos_axis"])
        ax_w.set_title(" ", fontsize=9)
        art["waves_legend"] = ax_w.legend(loc="upper right", fontsize=7, ncol=2, frameon=False)
        fig.tight_layout()
        return art

    def update(self, art: dict, data: dict) -> list:
        text = _TEXT[self.lang]
        a, b = data["dims"]
        x, y = data["point"]
        ax_c, ax_w = art["circle"], art["waves"]
        art["trail"].set_offsets(data["trail"])
        art["hand"].set_data([0, x], [0, y])
        art["point"].set_offsets([[x, y]])
        ax_c.set_xlabel(f"PE[pos, {a}] = sin")
        ax_c.set_ylabel(f"PE[pos, {b}] = cos")
        ax_c.title.set_text(text["circle"].format(pair=data["pair"], omega=data["omega"],
                                                  wavelength=data["wavelength"]))
        art["circle_legend"].get_texts()[1].set_text(
            text["now"].format(pos=data["position"], angle=data["angle"]))
        art["sin"].set_ydata(data["sin"])
        art["cos"].set_ydata(data["cos"])
        art["now"].set_xdata([data["position"]] * 2)
        art["marks"].set_offsets([[data["position"], x], [data["position"], y]])
        ax_w.title.set_text(text["waves"].format(a=a, b=b))
        sin_label, cos_label = art["waves_legend"].get_texts()
        sin_label.set_text(f"PE[pos, {a}] = sin")
        cos_label.set_text(f"PE[pos, {b}] = cos")
        return [art["trail"], art["hand"], art["point"], ax_c.xaxis.label, ax_c.yaxis.label,
                ax_c.title, art["circle_legend"], art["sin"], art["cos"], art["now"],
                art["marks"], ax_w.title, art["waves_legend"]]
