import warnings

import matplotlib
import numpy as np
import pytest
from matplotlib import pyplot as plt

from attention_course import plots


def render(text):
    fig = plt.figure(figsize=(1, 1), dpi=50)
    fig.text(0.1, 0.3, text, fontsize=30)
    fig.canvas.draw()
    img = np.asarray(fig.canvas.buffer_rgba())[..., 0].copy()
    plt.close(fig)
    return img


def test_chinese_renders_with_the_bundled_font_and_no_missing_glyph_warning():
    name = plots.use_cjk_font()
    assert name in matplotlib.rcParams["font.family"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # "Glyph ... missing from font(s)" is a UserWarning
        cat, it = render("猫"), render("它")
    # Tofu boxes would look the same for every missing character.
    assert (cat < 128).sum() > 20 and not np.array_equal(cat, it)


def test_font_file_ships_with_a_package():
    path = plots.cjk_font_path()
    assert path.endswith(".ttf")
    with open(path, "rb") as fh:
        assert len(fh.read(1024)) == 1024


def test_heatmap_labels_and_shape_errors():
    ax = plots.heatmap(np.eye(2), ["它", "猫"], ["它", "猫"], title="t")
    assert [t.get_text() for t in ax.get_xticklabels()] == ["它", "猫"]
    assert len(ax.texts) == 4
    plt.close(ax.figure)
    with pytest.raises(ValueError, match="row_labels has 1 labels; the matrix has 2"):
        plots.heatmap(np.eye(2), ["a"])
    with pytest.raises(ValueError, match=r"weights must be a 2-D matrix \(L, S\); got shape \(3,\)"):
        plots.heatmap(np.ones(3))


def test_heatmaps_share_one_colour_range():
    fig = plots.heatmaps([np.eye(2) * 0.5, np.eye(2)], titles=["a", "b"])
    images = [ax.images[0] for ax in fig.axes if ax.images]
    assert len(images) == 2 and all(im.get_clim() == (0.0, 1.0) for im in images)
    plt.close(fig)


def test_weight_bars():
    ax = plots.weight_bars([0.2, 0.8], ["a", "b"])
    assert [round(p.get_height(), 2) for p in ax.patches] == [0.2, 0.8]
    plt.close(ax.figure)
    with pytest.raises(ValueError, match="one label each"):
        plots.weight_bars([0.2, 0.8], ["a"])
