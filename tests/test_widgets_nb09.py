"""Notebook 09's explorer: a prepared sentence is one more frame of the same figure, and that frame
shows what a fresh forward pass gives; a new free text says that the model is computing.

The speed itself is measured by benchmarks/widgets.py, not here: these tests only hold what the
speed-up must not change (the numbers and labels shown) and how it is had (no new figure).
"""

from __future__ import annotations

import numpy as np
import pytest

from attention_course import pretrained
from attention_course.widgets import nb09
from widget_tools import frame_differs, same_picture, shown

PRESETS = [*nb09.SENTENCES, "repeat"]


def preset_ids(model, name: str) -> list[int]:
    if name == "repeat":
        return pretrained.repeated_random_tokens(12, seed=0).tolist()
    return model.encode(nb09.SENTENCES[name])


@pytest.fixture(scope="module")
def explorer(course_model):
    return nb09.RealModelExplorer(course_model, lang="en")


@pytest.mark.parametrize("name", PRESETS)
def test_a_prepared_sentence_shows_what_a_fresh_forward_pass_gives(explorer, course_model, name):
    ids = preset_ids(course_model, name)
    _, weights = course_model.forward(ids, return_weights=True)      # (n_layers, H, T, T)
    labels = [f"{i}:{p}" for i, p in enumerate(course_model.token_strings(ids))]
    grid = pretrained.previous_token_scores(weights)
    for layer, head in [(0, 0), (13, 8), (29, 4)]:
        data = explorer.compute(sentence=name, text="", layer=layer, head=head)
        assert data["tokens"] == labels
        assert (data["layer"], data["head"]) == (layer, head)
        np.testing.assert_allclose(data["weights"], weights[layer, head], rtol=0, atol=1e-6)
        np.testing.assert_allclose(data["grid"], grid, rtol=0, atol=1e-6)


def test_choosing_a_prepared_sentence_redraws_the_same_figure(explorer):
    # one layout for every prepared sentence: the figure built when shown is kept
    keys = {explorer.layout_key(explorer.compute(sentence=s, text="", layer=0, head=0))
            for s in PRESETS}
    assert len(keys) == 1
    e = shown(explorer)
    fig = e._live[0]
    control = e.controls["sentence"]
    for name in [*PRESETS, *reversed(PRESETS)]:
        control.value = name
        assert e._live[0] is fig
        art = e._live[1]
        np.testing.assert_array_equal(art["map"].get_array(), e.data["weights"])
        shown_labels = [t.get_text() for t in art["x_labels"]]
        T = len(e.data["tokens"])
        assert shown_labels[:T] == e.data["tokens"] and not any(shown_labels[T:])
        assert [t.get_text() for t in art["y_labels"]] == shown_labels


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_each_prepared_sentences_frame_is_its_static_figure(course_model, lang):
    # from the longest sentence to shorter ones and back: no label or tick of another sentence
    # is left over, none is missing, up to the rounding of blended glyph edges
    e = shown(nb09.RealModelExplorer(course_model, lang=lang, sentence="repeat", layer=11, head=1))
    for name in PRESETS:
        e.controls["sentence"].value = name
        assert same_picture(frame_differs(e)), name


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_a_new_free_text_says_the_model_is_computing(course_model, monkeypatch, lang):
    e = nb09.RealModelExplorer(course_model, lang=lang)
    assert any(e.status in getattr(box, "children", ()) for box in e.widget.children)
    seen = []
    real = e.model.forward
    monkeypatch.setattr(e.model, "forward",
                        lambda *a, **k: seen.append(e.status.value) or real(*a, **k))
    e.controls["text"].value = "A dog bites a man."
    assert not seen                                  # a prepared sentence is still shown
    e.controls["sentence"].value = "free"
    assert seen == [nb09._TEXT[lang]["computing"]] and seen[0]
    assert e.status.value == ""                      # cleared once the frame is there
    e.controls["layer"].value = 3                    # the same text: no forward pass, no note
    e.controls["sentence"].value = "bank (river)"
    e.controls["sentence"].value = "free"
    assert len(seen) == 1 and e.status.value == ""


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_the_menu_names_the_same_sentences_in_the_notebooks_language(course_model, lang):
    e = nb09.RealModelExplorer(course_model, lang=lang, sentence=nb09.SENTENCE_NAMES["bank (river)"][lang])
    options = e.controls["sentence"].options
    assert [key for _, key in options] == PRESETS + ["free"]        # the values: the same keys
    names = [name for name, _ in options]
    assert len(set(names)) == len(names)
    chinese = [bool(nb09._CJK.search(name)) for name in names]
    assert all(chinese) if lang == "zh" else not any(chinese)
    assert e.controls["sentence"].value == "bank (river)"           # a name starts on its sentence
    assert e.compute(sentence="bank (river)", text="", layer=0, head=0)["tokens"] == \
        explorer_tokens(course_model, "bank (river)")


def explorer_tokens(model, name: str) -> list[str]:
    return [f"{i}:{p}" for i, p in enumerate(model.token_strings(preset_ids(model, name)))]


def test_a_free_text_longer_than_every_prepared_sentence_shows_every_label(course_model):
    e = shown(nb09.RealModelExplorer(course_model, lang="en", sentence="free"))
    words = "one two three four five six seven eight nine ten eleven twelve thirteen fourteen"
    e.controls["text"].value = f"{words}, {words}."
    T = len(e.data["tokens"])
    assert T > max(len(preset_ids(course_model, s)) for s in PRESETS)
    art = e._live[1]
    assert [t.get_text() for t in art["x_labels"]] == e.data["tokens"]
    assert art["map"].get_array().shape == (T, T)
