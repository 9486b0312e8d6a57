"""The two reference recommenders of specification §5: chronological and uniform random."""

from __future__ import annotations

import numpy as np

from socialgym.recommenders.base import EMPTY, FeedRequest, Recommender, top_k_excluding_own
from socialgym.rowops import first_per_row, repeats_in_rows

# Above this many (viewer, candidate) cells the random recommender samples by rejection
# instead of drawing a random key for every cell.
_DENSE_CELLS = 4_000_000


class Chronological(Recommender):
    """Newest first; ties (same round) broken by id, larger first — i.e. id descending."""

    name = "chronological"

    def recommend(self, request: FeedRequest, rng: np.random.Generator) -> np.ndarray:
        ranked = request.candidates[::-1]
        return top_k_excluding_own(ranked, request.viewers, request.content.column("author"), request.k)


class RandomFeed(Recommender):
    """Uniform without replacement over the pool minus the viewer's own items."""

    name = "random"

    def recommend(self, request: FeedRequest, rng: np.random.Generator) -> np.ndarray:
        viewers, pool, k = request.viewers, request.candidates, request.k
        out = np.full((len(viewers), k), EMPTY, dtype=np.int64)
        if len(pool) == 0 or len(viewers) == 0:
            return out
        pool_authors = request.content.column("author")[pool]
        if len(viewers) * len(pool) <= _DENSE_CELLS:
            return _dense_sample(viewers, pool, pool_authors, k, rng, out)
        # Rejection sampling: draw 2k positions per viewer, drop own items and repeats.
        draws = rng.integers(0, len(pool), size=(len(viewers), 2 * k))
        own = pool_authors[draws] == viewers[:, None]
        keep = ~own & ~repeats_in_rows(draws)
        rows, cols, pos = first_per_row(keep, k)
        out[rows, pos] = pool[draws[rows, cols]]
        short = np.flatnonzero(keep.sum(axis=1) < k)
        if len(short):  # rare: redo exactly for those viewers
            _dense_sample(viewers[short], pool, pool_authors, k, rng, out, rows=short)
        return out


def _dense_sample(viewers, pool, pool_authors, k, rng, out, rows=None):
    rows = np.arange(len(viewers)) if rows is None else rows
    for start in range(0, len(viewers), max(1, _DENSE_CELLS // len(pool))):
        chunk = slice(start, start + max(1, _DENSE_CELLS // len(pool)))
        v = viewers[chunk]
        keys = rng.random((len(v), len(pool)))
        keys[pool_authors[None, :] == v[:, None]] = np.inf          # never one's own items
        kk = min(k, len(pool))
        part = np.argpartition(keys, kk - 1, axis=1)[:, :kk]
        part_keys = np.take_along_axis(keys, part, axis=1)
        order = np.argsort(part_keys, axis=1)
        chosen = np.take_along_axis(part, order, axis=1)
        ids = np.where(np.isfinite(np.take_along_axis(part_keys, order, axis=1)), pool[chosen], EMPTY)
        out[rows[chunk], :kk] = ids
    return out
