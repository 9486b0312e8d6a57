"""Text metrics for synthetic discussions: ROUGE-L and the Diversity score.

Diversity is eq. 1 of the LLM-facilitators paper (after Ulmer et al., 2024):

    div(d) = 1 - 2 / (N (N - 1)) * sum_{i<j} R(c_i, c_j)

with R the ROUGE-L F1 between two comments. Low values flag degenerate discussions (agents
repeating each other); values near 1 flag a lack of interaction. The paper computed R with the
``rouge-score`` package; this module reimplements its default behaviour (tokenisation without
stemming, LCS-based F1) so that no extra dependency is needed.

Also here: comment lengths in words and per-turn means, the other per-discussion series the
paper plots.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Sequence

import numpy as np

__all__ = [
    "tokenize",
    "lcs_length",
    "rouge_l",
    "diversity",
    "comment_lengths",
    "mean_by_turn",
]

_TOKEN_RE = re.compile(r"[a-z0-9]+")


def tokenize(text: str) -> list[str]:
    """ROUGE's default tokenisation: lowercase, then keep the runs of ``[a-z0-9]``.

    Every other character (punctuation, whitespace, underscore, and also any non-ASCII letter
    such as ``é``) separates tokens, exactly as ``rouge-score``'s tokenizer does. No stemming is
    applied (``rouge-score``'s default ``use_stemmer=False``), so "run" and "running" differ.
    """
    return _TOKEN_RE.findall(text.lower())


def _position_masks(seq: Sequence[Hashable]) -> dict[Hashable, int]:
    """For each symbol, a bitmask of the positions where it occurs in ``seq`` (bit i = seq[i])."""
    masks: dict[Hashable, int] = {}
    for i, sym in enumerate(seq):
        masks[sym] = masks.get(sym, 0) | (1 << i)
    return masks


def _lcs_bits(masks: dict[Hashable, int], n: int, other: Sequence[Hashable]) -> int:
    """Bit-parallel LCS (Allison-Dix / Hyyroe 2004) of a length-``n`` sequence given by its
    position ``masks`` and ``other``.

    V holds one bit per position of the first sequence; a 0 bit marks a position where the
    LCS row value increases. Each symbol of ``other`` updates all positions at once with a
    few big-int operations, so the cost is O(len(other) * n / 64) machine words.
    """
    if n == 0:
        return 0
    full = (1 << n) - 1
    v = full
    get = masks.get
    for sym in other:
        m = get(sym)
        if m is None:  # a symbol absent from the first sequence leaves V unchanged
            continue
        u = v & m
        v = ((v + u) | (v - u)) & full  # the carry of v + u may spill past bit n: mask it off
    return n - v.bit_count()


def lcs_length(a: Sequence[Hashable], b: Sequence[Hashable]) -> int:
    """Length of the longest common subsequence of ``a`` and ``b`` (any hashable items)."""
    # Loop over the shorter sequence and pack the longer one into bits: the Python-level loop
    # is then as short as possible and each step works on a few machine words at a time.
    if len(a) < len(b):
        a, b = b, a
    return _lcs_bits(_position_masks(a), len(a), b)


def _f1(lcs: int, len_a: int, len_b: int) -> float:
    # 2PR/(P+R) with P = lcs/len_b and R = lcs/len_a simplifies to 2*lcs/(len_a + len_b).
    if lcs == 0:
        return 0.0
    return 2.0 * lcs / (len_a + len_b)


def rouge_l(a: str, b: str) -> float:
    """ROUGE-L F1 between two texts, on :func:`tokenize` tokens.

    P = LCS/len(b), R = LCS/len(a), F1 = 2PR/(P+R); symmetric in ``a`` and ``b``. Returns 0.0
    when either text has no tokens or they share none (as ``rouge-score`` does).
    """
    ta, tb = tokenize(a), tokenize(b)
    if not ta or not tb:
        return 0.0
    return _f1(lcs_length(ta, tb), len(ta), len(tb))


def diversity(comments: Sequence[str]) -> float:
    """Diversity of a discussion (paper eq. 1): 1 minus the mean pairwise ROUGE-L F1.

    Each comment is tokenised (and its position masks built) once; the N(N-1)/2 pairs then cost
    one bit-parallel LCS each. Returns ``nan`` for fewer than two comments: the mean over an
    empty set of pairs is undefined, and returning 1 would report a one-comment discussion as
    maximally diverse. Empty comments count as sharing nothing (R = 0) with every other one.
    """
    n = len(comments)
    if n < 2:
        return float("nan")
    tokens = [tokenize(c) for c in comments]
    masks = [_position_masks(t) for t in tokens]
    total = 0.0
    for i in range(n - 1):
        ti = tokens[i]
        for j in range(i + 1, n):
            tj = tokens[j]
            if not ti or not tj:
                continue
            # bits over the longer comment, loop over the shorter one (see lcs_length)
            if len(ti) >= len(tj):
                lcs = _lcs_bits(masks[i], len(ti), tj)
            else:
                lcs = _lcs_bits(masks[j], len(tj), ti)
            total += _f1(lcs, len(ti), len(tj))
    return 1.0 - 2.0 * total / (n * (n - 1))


def comment_lengths(comments: Sequence[str]) -> np.ndarray:
    """Length of each comment in whitespace-separated words (``str.split()``), as int64.

    Whitespace words rather than ROUGE tokens, because the paper reports lengths in words and
    "don't" is one word to a reader but two ROUGE tokens.
    """
    return np.fromiter((len(c.split()) for c in comments), dtype=np.int64, count=len(comments))


def mean_by_turn(
    values: Sequence[float] | np.ndarray, turns: Sequence[int] | np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean of ``values`` per dialogue turn, ignoring NaN values.

    Returns ``(turns_sorted, means, counts)``: the unique turns in ascending order, the mean of
    the non-NaN values at each, and how many non-NaN values went into it (int64). A turn whose
    values are all NaN is kept, with count 0 and mean NaN, so the turn axis stays complete for
    plotting.
    """
    v = np.asarray(values, dtype=float)
    t = np.asarray(turns)
    if v.ndim != 1 or t.ndim != 1 or v.shape != t.shape:
        raise ValueError(
            f"values and turns must be 1-D of equal length, got shapes {v.shape} and {t.shape}"
        )
    if t.dtype.kind == "f" and np.isnan(t).any():
        raise ValueError("turns contain NaN")
    uniq, inv = np.unique(t, return_inverse=True)
    inv = inv.reshape(-1)  # numpy 2.0.x returned the inverse with the input's shape
    ok = ~np.isnan(v)
    counts = np.bincount(inv[ok], minlength=uniq.size).astype(np.int64)
    sums = np.bincount(inv[ok], weights=v[ok], minlength=uniq.size)
    means = np.full(uniq.size, np.nan)
    np.divide(sums, counts, out=means, where=counts > 0)
    return uniq, means, counts
