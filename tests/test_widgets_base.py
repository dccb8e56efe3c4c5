import inspect
import io
import threading

import ipywidgets as w
import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pytest
from PIL import Image

import widget_tools
from attention_course.widgets import Explorer
from attention_course.widgets.renderer import encode_png
from widget_tools import frame_differs, same_picture, shown


class Doubler(Explorer):
    figsize = (3, 2)

    def __init__(self):
        self.built = 0
        super().__init__({"x": w.IntSlider(value=2, min=0, max=10)})

    def compute(self, x):
        return {"double": 2 * x}

    def build(self, fig, data):
        self.built += 1
        ax = fig.subplots()
        bars = ax.bar([0], [data["double"]])
        ax.set_ylim(0, 20)
        return {"bar": bars.patches[0], "title": ax.set_title("")}

    def update(self, art, data):
        art["bar"].set_height(data["double"])
        art["title"].set_text(f"2x = {data['double']}")
        return [art["bar"], art["title"]]


class Legacy(Explorer):
    """Written the older way: draw() returns a whole new figure."""

    def __init__(self):
        super().__init__({"x": w.IntSlider(value=2, min=0, max=10)})

    def compute(self, x):
        return {"double": 2 * x}

    def draw(self, data):
        fig, ax = plt.subplots(figsize=(3, 2))
        ax.bar([0], [data["double"]])
        return fig


def pixels(png: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))


def fresh_frame(cls, values):
    e = cls()
    for name, v in values.items():
        e.controls[name].value = v
    return pixels(shown(e).image.value)


def test_setting_a_control_recomputes_the_data():
    e = Doubler()
    assert e.data == {"double": 4}
    e.controls["x"].value = 7
    assert e.data == {"double": 14} and e.redraws == 1
    assert e.built == 0 and e.frames == 0      # nothing is drawn before the widget is displayed


def test_the_figure_is_built_once_and_each_frame_is_that_of_the_values():
    e = shown(Doubler())
    assert e.built == 1 and e.frames == 1
    first = bytes(e.image.value)
    assert first.startswith(b"\x89PNG")
    for x in (5, 9, 0, 3):
        e.controls["x"].value = x
        assert (pixels(e.image.value) == fresh_frame(Doubler, {"x": x})).all()
    assert e.built == 1 and e.frames == 5
    e.controls["x"].value = 2
    assert bytes(e.image.value) == first                # the same values give the same bytes


def test_only_the_changed_artists_are_drawn_over_a_cached_background(monkeypatch):
    e = shown(Doubler())
    fig = e._live[0]
    full, single = [], []
    monkeypatch.setattr(fig.canvas, "draw", lambda *a, **k: full.append(1))
    real, paste = fig.draw_artist, e._sprites.draw
    monkeypatch.setattr(fig, "draw_artist", lambda a: (single.append(a), real(a)))
    monkeypatch.setattr(e._sprites, "draw", lambda a, *args: (single.append(a), paste(a, *args)))
    e.controls["x"].value = 6
    assert not full                              # no full draw of the figure
    art = e._live[1]
    # the bar and the title, and the frame of their axes, which a full draw puts above the bar
    assert set(single) == {art["bar"], art["title"], *fig.axes[0].spines.values()}
    assert len(single) == len(set(single)) == len(e._live[2])


def test_a_new_layout_key_builds_the_figure_again():
    class TwoLayouts(Doubler):
        def layout_key(self, data):
            return data["double"] > 10

    e = shown(TwoLayouts())
    e.controls["x"].value = 3
    assert e.built == 1
    e.controls["x"].value = 8
    assert e.built == 2
    assert (pixels(e.image.value) == fresh_frame(TwoLayouts, {"x": 8})).all()


def test_a_value_that_did_not_change_sends_no_frame():
    e = shown(Doubler())
    e.refresh()
    assert e.frames == 1 and e.redraws == 0


def test_frames_from_two_threads_end_on_the_final_values():
    e = shown(Doubler())
    slider = e.controls["x"]

    def move(values):
        for v in values:
            slider.value = v

    threads = [threading.Thread(target=move, args=(vs,)) for vs in ([1, 2, 3, 4], [9, 8, 7, 6])]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert (pixels(e.image.value) == fresh_frame(Doubler, {"x": slider.value})).all()


def test_static_figure_reflects_current_values():
    e = Doubler()
    e.controls["x"].value = 3
    fig = e.figure()
    assert fig.axes[0].patches[0].get_height() == 6
    assert fig.axes[0].get_title() == "2x = 6"
    assert not any(a.get_animated() for a in fig.axes[0].get_children())
    plt.close(fig)


def test_an_explorer_written_the_older_way_still_draws():
    e = shown(Legacy())
    e.controls["x"].value = 5
    assert e.frames == 2 and bytes(e.image.value).startswith(b"\x89PNG")
    fig = e.figure()
    assert fig.axes[0].patches[0].get_height() == 10
    plt.close(fig)


def test_widget_holds_controls_then_the_image():
    e = Doubler()
    assert e.widget.children[-1] is e.image
    assert isinstance(e.image, w.Image) and e.image.format == "png"
    assert e.controls["x"] in e.widget.children[0].children


def test_encode_png_round_trips():
    rgba = np.random.default_rng(0).integers(0, 256, size=(5, 7, 4), dtype=np.uint8)
    assert (pixels(encode_png(rgba)) == rgba[..., :3]).all()


def course_explorers():
    for _, _, cls in widget_tools.course_explorers():
        yield cls


def test_every_widget_refuses_an_unknown_language():
    classes = list(course_explorers())
    assert len(classes) >= 8
    for cls in classes:
        kwargs = {"rate": 1e9} if "rate" in inspect.signature(cls).parameters else {}
        with pytest.raises(ValueError, match="lang must be 'zh' or 'en'; got 'fr'"):
            cls(lang="fr", **kwargs)


def test_a_frame_looks_like_the_static_figure_of_the_same_values():
    # The texts are pasted from sprites and the rest blitted: the picture is the one a full
    # draw gives, up to the rounding of blending (a few levels of 255 at glyph edges).
    e = shown(Doubler())
    e.controls["x"].value = 7
    live = pixels(e.image.value).astype(int)
    fig = e.figure()
    fig.set_dpi(e.dpi)
    fig.canvas.draw()
    full = np.asarray(fig.canvas.buffer_rgba())[..., :3].astype(int)
    plt.close(fig)
    assert live.shape == full.shape
    assert np.abs(live - full).max() <= 24
    assert (np.abs(live - full).max(-1) > 8).mean() < 0.01


def test_text_sprites_are_reused_and_give_the_same_pixels():
    e = shown(Doubler())
    e.controls["x"].value = 4
    first = bytes(e.image.value)
    cached = len(e._sprites._cache)
    e.controls["x"].value = 5
    e.controls["x"].value = 4
    assert bytes(e.image.value) == first and len(e._sprites._cache) == cached + 1


def test_encode_png_refuses_what_is_not_an_8_bit_picture():
    with pytest.raises(ValueError, match=r"rgba must be a \(H, W, 3 or 4\) uint8 array; got float64"):
        encode_png(np.zeros((2, 2, 4)))
    rgb = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3)
    assert (pixels(encode_png(rgb)) == rgb).all()


def new_style_explorers():
    for cls in course_explorers():
        if cls.build is not Explorer.build:
            yield pytest.param(cls, id=cls.__name__)


@pytest.mark.parametrize("cls", list(new_style_explorers()))
def test_every_explorers_frames_are_its_static_figure(cls, explorer_kwargs):
    # Built once, then stepped through its first control: every frame must be what a full draw
    # of the same values gives (the blitting leaves nothing stale, hides nothing, misplaces no
    # text), up to the rounding of blended glyph edges.
    e = shown(cls(lang="zh", **explorer_kwargs(cls)))
    name, control = next(iter(e.controls.items()))
    options = getattr(control, "options", None)
    if options:
        values = [o[1] if isinstance(o, tuple) else o for o in options][-2:]
    else:
        values = [control.max, control.min]
    for v in values:
        control.value = v
    assert same_picture(frame_differs(e)), (name, e.values(), matplotlib.__version__)
