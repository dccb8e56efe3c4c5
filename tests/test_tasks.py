"""The tasks of notebooks 07 and 08: every target follows from the tokens, every run is reproduced
by its seed."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_course import tasks

seeds = st.integers(0, 2**32 - 1)


@settings(max_examples=40, deadline=None)
@given(seed=seeds, n_books=st.integers(1, 8), B=st.integers(1, 6))
def test_library_target_is_the_value_of_the_book_with_the_query_key(seed, n_books, B):
    b = tasks.library_batch(seed, B, n_books=n_books, n_keys=10, n_values=5)
    assert b.keys.shape == b.values.shape == (B, n_books)
    for row in range(B):
        assert len(set(b.keys[row])) == n_books                      # keys differ on a shelf
        assert b.query[row] in b.keys[row]
        (book,) = np.nonzero(b.keys[row] == b.query[row])[0]
        assert b.targets[row] == b.values[row, book] and b.answer_book[row] == book
    assert b.keys.max() < 10 and b.values.max() < 5


@settings(max_examples=40, deadline=None)
@given(seed=seeds, n=st.integers(2, 12), vocab=st.integers(2, 20))
def test_previous_token_target_is_the_token_before(seed, n, vocab):
    b = tasks.previous_token_batch(seed, 3, length=n, vocab=vocab)
    assert (b.targets[:, 1:] == b.tokens[:, :-1]).all()
    assert not b.mask[:, 0].any() and b.mask[:, 1:].all()
    assert b.n_classes == vocab and b.tokens.max() < vocab


@settings(max_examples=40, deadline=None)
@given(seed=seeds, n=st.integers(3, 12), vocab=st.integers(2, 9))
def test_previous_two_target_decodes_to_the_two_tokens_before_in_order(seed, n, vocab):
    b = tasks.previous_two_batch(seed, 2, length=n, vocab=vocab)
    t = np.arange(2, n)
    assert (b.targets[:, t] // vocab == b.tokens[:, t - 1]).all()
    assert (b.targets[:, t] % vocab == b.tokens[:, t - 2]).all()
    assert b.n_classes == vocab * vocab and not b.mask[:, :2].any() and b.mask[:, 2:].all()


@settings(max_examples=40, deadline=None)
@given(seed=seeds, n=st.integers(3, 12), vocab=st.integers(2, 9))
def test_first_and_previous_target_decodes_to_token_0_and_the_token_before(seed, n, vocab):
    b = tasks.first_and_previous_batch(seed, 3, length=n, vocab=vocab)
    t = np.arange(2, n)
    assert (b.targets[:, t] // vocab == b.tokens[:, :1]).all()
    assert (b.targets[:, t] % vocab == b.tokens[:, t - 1]).all()
    assert b.n_classes == vocab * vocab and not b.mask[:, :2].any() and b.mask[:, 2:].all()


@settings(max_examples=40, deadline=None)
@given(seed=seeds, n=st.integers(9, 30))
def test_repeat_is_periodic_with_distinct_tokens_and_counts_only_predictable_positions(seed, n):
    b = tasks.repeat_batch(seed, 16, length=n, vocab=16, periods=(4, 8))
    assert ((b.period >= 4) & (b.period <= 8)).all()
    for row in range(16):
        P, tok = int(b.period[row]), b.tokens[row]
        assert len(set(tok[:P])) == P                                # distinct within a period
        assert (tok[P:] == tok[:-P]).all()                           # then repeated
        assert (b.targets[row, :-1] == tok[1:]).all()
        counted = np.nonzero(b.mask[row])[0]
        assert counted.tolist() == list(range(P, n - 1))
        # a counted position's token appeared before, and what followed it then is the target
        for t in counted:
            assert tok[t - P] == tok[t] and tok[t - P + 1] == b.targets[row, t]


def test_repeat_periods_vary_from_sequence_to_sequence():
    # With one fixed period a single layer could look a fixed distance back.
    periods = tasks.repeat_batch(0, 200).period
    assert set(periods.tolist()) == {4, 5, 6, 7, 8}


@pytest.mark.parametrize("make", [
    lambda rng: tasks.library_batch(rng, 4),
    lambda rng: tasks.previous_token_batch(rng, 4),
    lambda rng: tasks.previous_two_batch(rng, 4),
    lambda rng: tasks.first_and_previous_batch(rng, 4),
    lambda rng: tasks.repeat_batch(rng, 4),
])
def test_seeded_same_seed_same_batch_other_seed_other_batch(make):
    a, b, c = make(5), make(np.random.default_rng(5)), make(6)
    first = a.keys if hasattr(a, "keys") else a.tokens
    assert np.array_equal(first, b.keys if hasattr(b, "keys") else b.tokens)
    assert not np.array_equal(first, c.keys if hasattr(c, "keys") else c.tokens)


@pytest.mark.parametrize("call, words", [
    (lambda: tasks.library_batch(0, 2, n_books=9, n_keys=8), ["n_books", "n_keys"]),
    (lambda: tasks.library_batch(0, 0), ["batch_size", ">= 1", "0"]),
    (lambda: tasks.previous_token_batch(0, 2, length=1), ["length", ">= 2"]),
    (lambda: tasks.repeat_batch(0, 2, length=8, periods=(4, 8)), ["periods", "length=8"]),
    (lambda: tasks.repeat_batch(0, 2, vocab=6, periods=(4, 8)), ["periods", "vocab=6"]),
    (lambda: tasks.previous_two_batch(0, 2, vocab=1.5), ["vocab", "1.5"]),
    (lambda: tasks.first_and_previous_batch(0, 2, length=2), ["length", ">= 3"]),
])
def test_bad_arguments_are_named(call, words):
    with pytest.raises(ValueError) as info:
        call()
    for word in words:
        assert word in str(info.value)
