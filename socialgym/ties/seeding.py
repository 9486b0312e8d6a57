"""Seeding the tie graph: recagent's Soc-Strategy (friends with different interests)."""

from __future__ import annotations

from typing import Any

import numpy as np

from socialgym.platform.population import favourite_topics
from socialgym.rowops import first_per_row, repeats_in_rows


def different_interest_ties(interests: Any, m: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """For every agent, ``m`` distinct agents that share none of its interests, chosen uniformly.

    ``interests``: one label per agent (peers with another label), or an ``(n, K)`` boolean
    matrix of favourite topics (``platform.population.favourite_topics``: peers sharing none of
    them). Returns directed pairs (src, dst) in both directions (a friendship is mutual), without
    repeats. Agents with fewer than ``m`` such peers get all of them.
    """
    if m < 0:
        raise ValueError(f"m must be >= 0, got {m}")
    fav = np.asarray(interests)
    fav = (favourite_topics(fav, len(fav)) if fav.ndim == 1 else fav).astype(bool)   # labels: one favourite each
    n = len(fav)
    if m == 0 or n < 2:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    draws = rng.integers(0, n, size=(n, 4 * m + 8))
    ok = ~(fav[draws] & fav[:, None, :]).any(axis=2)
    src, col, _ = first_per_row(ok & ~repeats_in_rows(draws), m)
    dst = draws[src, col]
    short = np.flatnonzero(np.bincount(src, minlength=n) < m)
    if len(short):   # rare: few differently-minded agents; choose exactly among all of them
        extra_src, extra_dst = [], []
        for v in short.tolist():
            others = np.flatnonzero(~(fav & fav[v]).any(axis=1))
            chosen = rng.choice(others, size=min(m, len(others)), replace=False) if len(others) else []
            extra_src.append(np.full(len(chosen), v))
            extra_dst.append(np.asarray(chosen, np.int64))
        keep = ~np.isin(src, short)
        src = np.concatenate([src[keep], *extra_src])
        dst = np.concatenate([dst[keep], *extra_dst])
    keys = np.unique(np.concatenate([src * n + dst, dst * n + src]))
    return keys // n, keys % n
