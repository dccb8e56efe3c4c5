"""Colour that colour-blind readers can read: every colour map the figures and the explorers use
is a sequential map of one hue or a perceptually uniform one, or a diverging map whose two ends
are not red and green; and no module draws two things in red and green.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.book

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [ROOT / "src" / "attention_course" / "plots.py",
           *sorted((ROOT / "src" / "attention_course" / "widgets").glob("*.py"))]
# ColorBrewer's single-hue sequential maps, matplotlib's perceptually uniform ones, and diverging
# maps without red against green (a "_r" at the end only turns a map round)
SAFE = {"Blues", "Greys", "Oranges", "Purples", "Greens", "Reds", "viridis", "cividis", "magma",
        "inferno", "plasma", "RdBu", "PuOr", "BrBG", "PRGn", "coolwarm"}
# a colour map named in the code: cmap="X", cmap or "X", get_cmap("X"), colormaps["X"]
NAMED = re.compile(r"""(?:cmap\s*(?:=|or)\s*|get_cmap\(\s*|colormaps\[\s*)["']([A-Za-z_]+)["']""")
RED = {"red", "tab:red", "darkred", "crimson", "r"}
GREEN = {"green", "tab:green", "darkgreen", "lime", "limegreen", "g"}
# a colour given as a string to color=, or in a table of styles ("tab:red", "-")
COLOUR = re.compile(r"""(?:colou?rs?|edgecolor|facecolor)\s*=\s*["']([\w:]+)["']|\(\s*["'](tab:\w+)["']""")


def is_safe(name: str) -> bool:
    return name.removesuffix("_r") in SAFE


def test_the_check_refuses_rainbows_and_red_against_green():
    assert is_safe("RdBu_r") and is_safe("Blues") and is_safe("viridis")
    for name in ("jet", "rainbow", "hsv", "RdYlGn", "RdYlGn_r", "Spectral", "turbo", "gist_rainbow"):
        assert not is_safe(name), name
    code = 'ax.imshow(w, cmap="jet"); cmap = cmap or "RdBu_r"; plt.get_cmap("turbo")'
    assert NAMED.findall(code) == ["jet", "RdBu_r", "turbo"]
    assert COLOUR.findall('{"full": ("tab:red", "-")}; ax.plot(x, color="tab:green")') == [
        ("", "tab:red"), ("tab:green", "")]


def test_every_colour_map_in_the_figures_and_explorers_is_colour_blind_safe():
    used = {(path.name, name) for path in SOURCES for name in NAMED.findall(path.read_text(encoding="utf-8"))}
    assert ("plots.py", "Blues") in used and ("plots.py", "RdBu_r") in used, "the scan reads plots.heatmap"
    unsafe = sorted((module, name) for module, name in used if not is_safe(name))
    assert not unsafe, f"colour maps that colour-blind readers cannot read: {unsafe}"


def test_heatmaps_pick_a_safe_map_for_weights_and_for_signed_values():
    import matplotlib.pyplot as plt

    from attention_course import plots

    for values in (np.full((2, 2), 0.5), np.array([[-1.0, 1.0], [0.5, -0.5]])):
        ax = plots.heatmap(values)
        assert is_safe(ax.images[0].get_cmap().name), ax.images[0].get_cmap().name
        plt.close(ax.figure)


@pytest.mark.parametrize("path", SOURCES, ids=[p.name for p in SOURCES])
def test_no_module_draws_in_red_and_green(path):
    colours = {a or b for a, b in COLOUR.findall(path.read_text(encoding="utf-8"))}
    assert not (colours & RED and colours & GREEN), (
        f"{path.name} draws in {sorted(colours & RED)} and {sorted(colours & GREEN)}: for a reader who "
        "cannot tell red from green, give one of them another colour (tab:orange, tab:purple)")
