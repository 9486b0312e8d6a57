"""The lists each agent is shown: a recommender's feeds checked against specification §5, and the DM inbox.

Pure functions of arrays; :class:`socialgym.envs.feed.env.FeedEnv` calls them when it builds a
round's act-phase feeds and vote items (``check_feed``) and last round's DM inboxes
(``group_inbox``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from socialgym.platform.content import ContentStore
from socialgym.recommenders import EMPTY


def check_feed(feed: np.ndarray, pool: np.ndarray, k: int, phase: str, recommender: Any,
               content: ContentStore, n: int) -> np.ndarray:
    """Reject a recommender's output that breaks specification §5; compact it to fill from slot 0.

    ``feed``: what ``recommender`` returned for the ``n`` agents (as an array); ``pool``: the
    candidate ids, sorted ascending; ``k``: the list length of ``phase``. Returns an (n, k)
    int64 array, -1 in empty slots; a ValueError names the recommender and the broken rule."""
    name = getattr(recommender, "name", type(recommender).__name__)
    if feed.ndim != 2 or feed.shape[0] != n or feed.shape[1] > k or feed.dtype.kind not in "iu":
        raise ValueError(f"recommender {name!r} must return an integer array of shape ({n}, <= {k}), "
                         f"got shape {feed.shape} dtype {feed.dtype}")
    feed = feed.astype(np.int64, copy=False)
    present = feed >= 0
    if np.any(feed < EMPTY):
        raise ValueError(f"recommender {name!r} returned negative ids other than -1 (empty)")
    in_pool = np.zeros(len(content), dtype=bool)
    in_pool[pool] = True
    if np.any(feed >= len(content)) or not np.all(in_pool[feed[present]]):
        raise ValueError(f"recommender {name!r} returned ids outside the candidate pool ({phase} phase)")
    author = content.column("author")
    # an empty store (nothing valid was created yet, lenient mode) has no rows to index
    own = present & (author[np.maximum(feed, 0)] == np.arange(n)[:, None]) if len(author) else present
    if own.any():
        raise ValueError(f"recommender {name!r} showed agents their own items ({phase} phase)")
    srt = np.sort(feed, axis=1)
    if np.any((srt[:, 1:] == srt[:, :-1]) & (srt[:, 1:] >= 0)):
        raise ValueError(f"recommender {name!r} repeated an item within one list ({phase} phase)")
    out = np.full((n, k), EMPTY, dtype=np.int64)
    order = np.argsort(~present, axis=1, kind="stable")
    out[:, : feed.shape[1]] = np.take_along_axis(feed, order, axis=1)
    return out


def group_inbox(dm_ids: np.ndarray, recipients: np.ndarray, n: int,
                size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """DMs ``dm_ids`` (addressed to ``recipients``) grouped by recipient, newest first.

    Returns ``(inbox, inbox_ids, inbox_ptr)``: the (n, size) inbox the observations show (the
    ``size`` newest DMs of each agent, -1 in empty slots), every DM id in (recipient, newest
    first) order, and the (n + 1,) offsets of each recipient's DMs in that order."""
    order = np.lexsort((-dm_ids, recipients))
    inbox_ids = dm_ids[order]
    inbox_ptr = np.searchsorted(recipients[order], np.arange(n + 1))
    rank = np.arange(len(order)) - inbox_ptr[recipients[order]]
    keep = rank < size
    inbox = np.full((n, size), EMPTY, dtype=np.int64)
    inbox[recipients[order][keep], rank[keep]] = inbox_ids[keep]
    return inbox, inbox_ids, inbox_ptr
