"""Hand-set attention heads: each pattern does what its name says, in the real layer."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_course import examples, head_patterns, multi_head_attention_reference
from attention_course.head_patterns import (
    MAX_LEN,
    PATTERN_NAMES,
    PATTERNS,
    TROPHY_ROLES,
    hand_made_embeddings,
    hand_set_heads,
)


def weights_of(tokens, roles, patterns, **kwargs):
    x, mha = hand_set_heads(tokens, roles, patterns, **kwargs)
    return mha(x, average_attn_weights=False)[1]                 # (H, L, L)


def test_trophy_roles_point_at_the_right_words():
    zh, en = examples.TROPHY["zh"], examples.TROPHY["en"]
    assert zh[TROPHY_ROLES["zh"]["pronoun"]] == "它"
    assert zh[TROPHY_ROLES["zh"]["antecedent"]] == "奖杯"
    assert [zh[i] for i in TROPHY_ROLES["zh"]["nouns"]] == ["奖杯", "手提箱"]
    assert en[TROPHY_ROLES["en"]["pronoun"]] == "it"
    assert en[TROPHY_ROLES["en"]["antecedent"]] == "trophy"
    assert [en[i] for i in TROPHY_ROLES["en"]["nouns"]] == ["trophy", "suitcase"]


def test_every_pattern_has_a_name_in_both_languages():
    assert set(PATTERN_NAMES) == {*PATTERNS, head_patterns.SHARED}
    assert all(set(names) == {"zh", "en"} for names in PATTERN_NAMES.values())


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_each_pattern_on_the_trophy_sentence(lang):
    tokens, roles = examples.TROPHY[lang], TROPHY_ROLES[lang]
    L = len(tokens)
    w = weights_of(tokens, roles, PATTERNS)                      # all six heads
    prev, ante, unif, nxt, nouns, first = w
    assert prev.argmax(-1).tolist() == [0] + list(range(L - 1))
    expected_ante = list(range(L))
    expected_ante[roles["pronoun"]] = roles["antecedent"]
    assert ante.argmax(-1).tolist() == expected_ante
    np.testing.assert_allclose(unif, 1 / L)
    assert nxt.argmax(-1).tolist() == list(range(1, L)) + [L - 1]
    np.testing.assert_allclose(nouns[:, list(roles["nouns"])].sum(-1), 1, atol=0.01)
    assert (first.argmax(-1) == 0).all()
    # The chosen key gets nearly all the weight (sharpness 8).
    for head in (prev, ante, nxt, first):
        assert head.max(-1).min() > 0.99


def test_the_layer_is_an_ordinary_multi_head_attention():
    tokens, roles = examples.TROPHY["en"], TROPHY_ROLES["en"]
    x, mha = hand_set_heads(tokens, roles, PATTERNS[:3])
    out, w = mha(x, average_attn_weights=False)
    out_ref, w_ref = multi_head_attention_reference(mha, x)
    np.testing.assert_allclose(out, out_ref, atol=1e-12)
    np.testing.assert_allclose(w, w_ref, atol=1e-12)
    assert mha.num_parameters == 4 * 96 * 96 + 4 * 96
    # W_O is the identity and head h passes on slice h of x: the output is each head's blend
    # of its own slice.
    D = mha.head_dim
    for h in range(3):
        np.testing.assert_allclose(out[:, h * D:(h + 1) * D], w[h] @ x[:, h * D:(h + 1) * D],
                                   atol=1e-12)


def test_heads_ignore_the_words_themselves():
    # The referent is written into the flags by hand: "too small" changes nothing.
    tokens, roles = examples.TROPHY["zh"], TROPHY_ROLES["zh"]
    small = ["小" if t == "大" else t for t in tokens]
    assert np.array_equal(weights_of(tokens, roles, PATTERNS[:3]),
                          weights_of(small, roles, PATTERNS[:3]))


def test_sharpness_controls_how_peaked_the_heads_are():
    tokens, roles = examples.TROPHY["en"], TROPHY_ROLES["en"]
    soft = weights_of(tokens, roles, ("previous",), d_model=32, sharpness=1.0)
    sharp = weights_of(tokens, roles, ("previous",), d_model=32, sharpness=12.0)
    assert soft.max() < 0.5 < 0.999 < sharp[0, 1:].max(-1).min()


@given(L=st.integers(2, MAX_LEN), data=st.data())
@settings(max_examples=30, deadline=None)
def test_patterns_hold_for_any_sentence_length_and_roles(L, data):
    pronoun, antecedent = data.draw(st.lists(st.integers(0, L - 1), min_size=2, max_size=2,
                                             unique=True))
    roles = {"pronoun": pronoun, "antecedent": antecedent, "nouns": (antecedent,)}
    tokens = [f"w{i}" for i in range(L)]
    prev, ante, unif = weights_of(tokens, roles, PATTERNS[:3], d_model=48)
    assert prev.argmax(-1).tolist() == [0] + list(range(L - 1))
    assert ante[pronoun].argmax() == antecedent and ante[pronoun].max() > 0.99
    others = [i for i in range(L) if i != pronoun]
    assert ante[others].argmax(-1).tolist() == others
    np.testing.assert_allclose(unif, 1 / L)
    np.testing.assert_allclose(prev.sum(-1), 1)


def test_embeddings_hold_position_and_flags():
    x = hand_made_embeddings(["a", "b", "c"], {"pronoun": 2, "antecedent": 0, "nouns": (0, 1)},
                             d_model=24)
    np.testing.assert_array_equal(x[:, :3], np.eye(3))
    assert x[:, 3:MAX_LEN].sum() == 0
    assert x[:, MAX_LEN].tolist() == [0, 0, 1]                  # pronoun
    assert x[:, MAX_LEN + 1].tolist() == [1, 0, 0]              # antecedent
    assert x[:, MAX_LEN + 2].tolist() == [1, 1, 0]              # nouns
    assert x[:, MAX_LEN + 3].tolist() == [0, 0, 1]              # last word


@pytest.mark.parametrize("kwargs, match", [
    ({"patterns": ()}, "patterns is empty"),
    ({"patterns": ("previous", "syntax")}, "unknown pattern"),
    ({"patterns": PATTERNS[:4], "d_model": 90}, "not divisible"),
    ({"patterns": PATTERNS[:4], "d_model": 48}, "at least 15"),
    ({"sharpness": 0.0}, "sharpness"),
])
def test_bad_settings_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        hand_set_heads(examples.TROPHY["zh"], TROPHY_ROLES["zh"], **kwargs)


@pytest.mark.parametrize("tokens, roles, match", [
    (["w"] * (MAX_LEN + 1), {"pronoun": 0, "antecedent": 1, "nouns": ()}, "2 to 14 tokens"),
    (["a", "b"], {"pronoun": 0, "antecedent": 2, "nouns": ()}, "outside the sentence"),
    (["a", "b"], {"pronoun": 1, "antecedent": 1, "nouns": ()}, "must be different"),
    (["a", "b"], {"pronoun": 1}, "roles must be a dict"),
])
def test_bad_sentences_are_refused(tokens, roles, match):
    with pytest.raises(ValueError, match=match):
        hand_made_embeddings(tokens, roles)


def test_public_columns_hold_the_flags_the_notebook_writes_into_its_heads():
    roles = head_patterns.TROPHY_ROLES["en"]
    x = head_patterns.hand_made_embeddings(examples.TROPHY["en"], roles)
    assert np.flatnonzero(x[:, head_patterns.PRONOUN_COLUMN]).tolist() == [roles["pronoun"]]
    assert np.flatnonzero(x[:, head_patterns.ANTECEDENT_COLUMN]).tolist() == [roles["antecedent"]]
    assert np.flatnonzero(x[:, head_patterns.NOUN_COLUMN]).tolist() == list(roles["nouns"])
    assert np.flatnonzero(x[:, head_patterns.LAST_COLUMN]).tolist() == [len(x) - 1]


@pytest.mark.parametrize("head_dim, sharpness", [(16, 8.0), (32, 8.0), (96, 3.0)])
def test_head_gain_gives_the_scaled_score_of_one_match(head_dim, sharpness):
    gain = head_patterns.head_gain(head_dim, sharpness)
    assert gain * gain / np.sqrt(head_dim) == pytest.approx(sharpness)


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_one_head_shares_its_budget_between_both_relations(lang):
    tokens, roles = examples.TROPHY[lang], TROPHY_ROLES[lang]
    x, mha = head_patterns.hand_set_heads(tokens, roles, head_patterns.layer_patterns(1))
    _, w = mha(x, average_attn_weights=False)                        # (1, L, L)
    it = roles["pronoun"]
    np.testing.assert_allclose(w[0, it, [roles["antecedent"], it - 1]], [0.5, 0.5], atol=0.01)
    others = [i for i in range(1, len(tokens)) if i != it]
    assert (w[0, others, np.array(others) - 1] > 0.99).all()       # everyone else: the previous word
    assert head_patterns.layer_patterns(2) == PATTERNS[:2]
    with pytest.raises(ValueError, match="num_heads"):
        head_patterns.layer_patterns(0)
