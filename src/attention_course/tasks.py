"""Small seeded tasks that tiny attention models learn in seconds (notebooks 07 and 08).

Each task is chosen so that one idea of the course is needed to solve it:

- :func:`library_batch` - look a book up by its key and return its value: notebook 01's library,
  to be learned instead of set by hand. One attention layer with one head suffices.
- :func:`previous_token_batch` - at every position, name the token just before it. Only order
  tells which token that is, so the model needs positional encoding (notebook 05).
- :func:`repeat_batch` - a random stretch of distinct tokens repeated over and over, its period
  drawn from 4-8 anew for every sequence; predict the next token. Continuing the repeat takes a
  previous-token head feeding a second layer's head (an induction head): one layer is not enough.
- :func:`previous_two_batch` - name the two tokens before this one, in order (one class per
  ordered pair): two relations of one kind (1 back, 2 back).
- :func:`first_and_previous_batch` - name the first token of the sequence and the token before
  this one (one class per ordered pair): two independent relations, one fixed, one relative.

Every function takes ``rng`` (a ``numpy.random.Generator`` or a seed) and returns plain arrays,
so that a run is reproduced by its seed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = [
    "LibraryBatch",
    "SequenceBatch",
    "first_and_previous_batch",
    "library_batch",
    "previous_token_batch",
    "previous_two_batch",
    "repeat_batch",
]


def _rng(rng) -> np.random.Generator:
    return rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)


def _positive(name: str, value, least: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < least:
        raise ValueError(f"{name} must be an integer >= {least}; got {value!r}")
    return int(value)


@dataclass(frozen=True)
class LibraryBatch:
    """Shelves of books and one query each.

    Attributes
    ----------
    keys : ndarray of int, shape (B, n_books)
        The spine label of every book on the shelf, all different within a shelf.
    values : ndarray of int, shape (B, n_books)
        What each book contains (values may repeat).
    query : ndarray of int, shape (B,)
        The key being looked for; always one of the shelf's keys.
    targets : ndarray of int, shape (B,)
        The value of the book whose key equals the query.
    n_keys, n_values : int
        Sizes of the key and value vocabularies.
    """

    keys: np.ndarray
    values: np.ndarray
    query: np.ndarray
    targets: np.ndarray
    n_keys: int
    n_values: int

    @property
    def answer_book(self) -> np.ndarray:
        """Index of the matching book on each shelf, shape (B,)."""
        return np.argmax(self.keys == self.query[:, None], axis=1)


@dataclass(frozen=True)
class SequenceBatch:
    """Token sequences with one target per position and the positions that count.

    Attributes
    ----------
    tokens : ndarray of int, shape (B, n)
    targets : ndarray of int, shape (B, n)
        What the model should output at each position (0 where ``mask`` is False).
    mask : ndarray of bool, shape (B, n)
        True where the target can be known from the tokens up to that position, and counts in
        the loss and the accuracy.
    n_classes : int
        Number of possible targets.
    period : ndarray of int, shape (B,), or None
        For :func:`repeat_batch`, each sequence's period.
    """

    tokens: np.ndarray
    targets: np.ndarray
    mask: np.ndarray
    n_classes: int
    period: np.ndarray | None = None


def library_batch(rng, batch_size: int, n_books: int = 6, n_keys: int = 16,
                  n_values: int = 16) -> LibraryBatch:
    """Shelves of ``n_books`` books with distinct random keys, random values and a query.

    Parameters
    ----------
    rng : numpy.random.Generator or int
    batch_size : int
        B, number of shelves.
    n_books : int
        Books per shelf (at most ``n_keys``).
    n_keys, n_values : int
        Vocabulary sizes.

    Returns
    -------
    LibraryBatch

    Examples
    --------
    >>> b = library_batch(0, batch_size=3, n_books=4)
    >>> b.keys.shape, b.query.shape
    ((3, 4), (3,))
    >>> bool((b.values[np.arange(3), b.answer_book] == b.targets).all())
    True
    """
    rng = _rng(rng)
    B = _positive("batch_size", batch_size)
    n_books = _positive("n_books", n_books)
    n_keys = _positive("n_keys", n_keys)
    n_values = _positive("n_values", n_values)
    if n_books > n_keys:
        raise ValueError(f"n_books must be <= n_keys (every book needs its own key); "
                         f"got n_books={n_books}, n_keys={n_keys}")
    keys = np.argsort(rng.random((B, n_keys)), axis=1)[:, :n_books]
    values = rng.integers(0, n_values, size=(B, n_books))
    book = rng.integers(0, n_books, size=B)
    rows = np.arange(B)
    return LibraryBatch(keys=keys, values=values, query=keys[rows, book].copy(),
                        targets=values[rows, book].copy(), n_keys=n_keys, n_values=n_values)


def previous_token_batch(rng, batch_size: int, length: int = 10, vocab: int = 16) -> SequenceBatch:
    """Random tokens; the target at position t is the token at t - 1 (position 0 has none).

    Parameters
    ----------
    rng : numpy.random.Generator or int
    batch_size, length, vocab : int
        B, n and the number of different tokens.

    Returns
    -------
    SequenceBatch
        tokens (B, n); targets (B, n) with ``targets[:, t] = tokens[:, t - 1]``; mask False at
        position 0 only.

    Examples
    --------
    >>> b = previous_token_batch(0, batch_size=2, length=5)
    >>> bool((b.targets[:, 1:] == b.tokens[:, :-1]).all()), b.mask[0].tolist()
    (True, [False, True, True, True, True])
    """
    rng = _rng(rng)
    B = _positive("batch_size", batch_size)
    n = _positive("length", length, 2)
    vocab = _positive("vocab", vocab, 2)
    tokens = rng.integers(0, vocab, size=(B, n))
    targets = np.zeros_like(tokens)
    targets[:, 1:] = tokens[:, :-1]
    mask = np.ones((B, n), dtype=bool)
    mask[:, 0] = False
    return SequenceBatch(tokens, targets, mask, vocab)


def previous_two_batch(rng, batch_size: int, length: int = 10, vocab: int = 8) -> SequenceBatch:
    """Random tokens; the target at position t is the ordered pair (token t - 1, token t - 2).

    The pair is one class out of ``vocab**2``: ``tokens[t - 1] * vocab + tokens[t - 2]``.

    Examples
    --------
    >>> b = previous_two_batch(0, batch_size=1, length=4, vocab=8)
    >>> t = b.tokens[0]
    >>> bool(b.targets[0, 3] == t[2] * 8 + t[1]), b.mask[0].tolist()
    (True, [False, False, True, True])
    """
    rng = _rng(rng)
    B = _positive("batch_size", batch_size)
    n = _positive("length", length, 3)
    vocab = _positive("vocab", vocab, 2)
    tokens = rng.integers(0, vocab, size=(B, n))
    targets = np.zeros_like(tokens)
    targets[:, 2:] = tokens[:, 1:-1] * vocab + tokens[:, :-2]
    mask = np.ones((B, n), dtype=bool)
    mask[:, :2] = False
    return SequenceBatch(tokens, targets, mask, vocab * vocab)


def first_and_previous_batch(rng, batch_size: int, length: int = 10, vocab: int = 8) -> SequenceBatch:
    """Random tokens; the target at position t is the pair (token 0, token t - 1).

    The pair is one class out of ``vocab**2``: ``tokens[0] * vocab + tokens[t - 1]``. Positions 0
    and 1 do not count (there, the two relations point at the same token or at none).

    Examples
    --------
    >>> b = first_and_previous_batch(0, batch_size=1, length=5, vocab=8)
    >>> t = b.tokens[0]
    >>> bool(b.targets[0, 4] == t[0] * 8 + t[3]), b.mask[0].tolist()
    (True, [False, False, True, True, True])
    """
    rng = _rng(rng)
    B = _positive("batch_size", batch_size)
    n = _positive("length", length, 3)
    vocab = _positive("vocab", vocab, 2)
    tokens = rng.integers(0, vocab, size=(B, n))
    targets = np.zeros_like(tokens)
    targets[:, 2:] = tokens[:, :1] * vocab + tokens[:, 1:-1]
    mask = np.ones((B, n), dtype=bool)
    mask[:, :2] = False
    return SequenceBatch(tokens, targets, mask, vocab * vocab)


def repeat_batch(rng, batch_size: int, length: int = 20, vocab: int = 16,
                 periods: tuple[int, int] = (4, 8)) -> SequenceBatch:
    """A stretch of distinct random tokens repeated to fill the sequence; predict the next token.

    Each sequence draws its own period P from ``periods`` (both ends included), so that no fixed
    look-back distance solves the task.

    Parameters
    ----------
    rng : numpy.random.Generator or int
    batch_size, length, vocab : int
        B, n and the number of different tokens (at least the longest period).
    periods : (int, int)
        Smallest and largest period.

    Returns
    -------
    SequenceBatch
        ``targets[:, t] = tokens[:, t + 1]``; mask True for P <= t <= n - 2, the positions
        where the current token has been seen before, so the repeat tells what comes next.

    Examples
    --------
    >>> b = repeat_batch(0, batch_size=2, length=12)
    >>> P = int(b.period[0])
    >>> bool((b.tokens[0, P:] == b.tokens[0, :-P]).all()), int(b.mask[0].argmax()) == P
    (True, True)
    """
    rng = _rng(rng)
    B = _positive("batch_size", batch_size)
    n = _positive("length", length, 3)
    vocab = _positive("vocab", vocab, 2)
    lo, hi = (int(p) for p in periods)
    if not 1 <= lo <= hi <= vocab or hi >= n:
        raise ValueError(f"periods must satisfy 1 <= low <= high <= vocab and high < length; "
                         f"got periods={periods!r}, vocab={vocab}, length={n}")
    period = rng.integers(lo, hi + 1, size=B)
    pattern = np.argsort(rng.random((B, vocab)), axis=1)          # distinct tokens per row
    t = np.arange(n)
    tokens = pattern[np.arange(B)[:, None], t[None, :] % period[:, None]]   # (B, n)
    targets = np.zeros_like(tokens)
    targets[:, :-1] = tokens[:, 1:]
    mask = (t[None, :] >= period[:, None]) & (t[None, :] <= n - 2)
    return SequenceBatch(tokens, targets, mask, vocab, period)
