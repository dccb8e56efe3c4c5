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


def test_signed_values_get_a_diverging_map_centred_on_zero():
    ax = plots.heatmap(np.array([[-1.38, 0.2], [0.5, 1.43]]), ["a", "b"], ["c", "d"])
    im = ax.images[0]
    lo, hi = im.get_clim()
    assert lo == pytest.approx(-1.43) and hi == pytest.approx(1.43)      # symmetric about 0
    assert im.get_cmap().name == "RdBu_r"
    # 0 sits in the middle of the map: its colour is (nearly) white
    assert np.allclose(im.cmap(im.norm(0.0))[:3], 1.0, atol=0.06)
    plt.close(ax.figure)


def test_weights_keep_a_one_colour_map_from_zero_to_one():
    ax = plots.heatmap(np.array([[0.2, 0.8], [0.5, 0.5]]))
    assert ax.images[0].get_clim() == (0.0, 1.0) and ax.images[0].get_cmap().name == "Blues"
    plt.close(ax.figure)
    # flat weights stay pale: the scale does not stretch to their largest value
    ax = plots.heatmap(np.full((3, 3), 1 / 3))
    assert ax.images[0].get_clim() == (0.0, 1.0)
    plt.close(ax.figure)


def test_other_non_negative_numbers_run_to_their_largest_and_can_say_so():
    ax = plots.heatmap(np.array([[0.0, 2.5]]), cbar_label="distance")
    assert ax.images[0].get_clim() == (0.0, 2.5)
    assert ax.images[0].colorbar.ax.get_ylabel() == "distance"
    plt.close(ax.figure)


def test_set_heatmap_updates_values_and_annotations_in_place():
    ax = plots.heatmap(np.array([[0.2, 0.8], [0.5, 0.5]]))
    changed = plots.set_heatmap(ax, np.array([[0.9, 0.1], [0.3, 0.7]]))
    assert ax.images[0] in changed
    assert [t.get_text() for t in ax.texts] == ["0.90", "0.10", "0.30", "0.70"]
    assert [t.get_color() for t in ax.texts] == ["white", "black", "black", "white"]
    assert ax.images[0].get_clim() == (0.0, 1.0)
    with pytest.raises(ValueError, match=r"keep the heatmap's shape \(2, 2\); got \(3,\)"):
        plots.set_heatmap(ax, np.ones(3))
    plt.close(ax.figure)


def test_set_bars_moves_heights_and_labels():
    ax = plots.weight_bars([0.2, 0.8], ["a", "b"])
    bars, labels = plots.bar_artists(ax)
    plots.set_bars(bars, labels, [0.6, -0.1], colors=["red", "blue"])
    assert [round(b.get_height(), 2) for b in bars] == [0.6, -0.1]
    assert [t.get_text() for t in labels] == ["0.60", "-0.10"]
    assert labels[1].xy[1] == pytest.approx(-0.1) and labels[1].get_va() == "top"
    with pytest.raises(ValueError, match="one number per bar"):
        plots.set_bars(bars, labels, [1.0])
    plt.close(ax.figure)


def test_diverging_can_be_forced_or_refused():
    ax = plots.heatmap(np.array([[0.2, 0.8]]), diverging=True)
    assert ax.images[0].get_clim() == (-0.8, 0.8)
    plt.close(ax.figure)
    ax = plots.heatmap(np.array([[-0.2, 0.8]]), diverging=False, vmin=-0.2)
    assert ax.images[0].get_clim() == (-0.2, 1.0) and ax.images[0].get_cmap().name == "Blues"
    plt.close(ax.figure)


def test_heatmaps_of_signed_matrices_share_a_range_symmetric_about_zero():
    fig = plots.heatmaps([np.array([[-2.0, 1.0]]), np.array([[0.5, 0.3]])])
    assert all(ax.images[0].get_clim() == (-2.0, 2.0) for ax in fig.axes if ax.images)
    plt.close(fig)


def test_chinese_tick_labels_stay_upright_long_latin_ones_turn():
    labels_zh = ["奖杯", "没能", "塞进", "手提箱", "因为", "它", "太", "大", "了"]
    ax = plots.heatmap(np.eye(9), labels_zh, labels_zh)
    assert all(t.get_rotation() == 0 for t in ax.get_xticklabels())
    plt.close(ax.figure)
    labels_en = ["the", "trophy", "did", "not", "fit", "in", "the", "suitcase", "because"]
    ax = plots.heatmap(np.eye(9), labels_en, labels_en)
    assert all(t.get_rotation() == 90 for t in ax.get_xticklabels())
    plt.close(ax.figure)
    ax = plots.heatmap(np.eye(9), labels_zh, labels_zh, xtick_rotation=45)
    assert all(t.get_rotation() == 45 for t in ax.get_xticklabels())
    plt.close(ax.figure)
