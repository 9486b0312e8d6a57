"""The recommender seam (specification §5): what each agent sees of the public content.

The environment asks a recommender for two kinds of lists per round: the act-phase feed (pool:
public items of earlier rounds) and the vote-phase items (pool: public items of this round).
Either way the pool excludes nothing by author — the recommender must leave out the viewer's
own items, never return more than ``k`` ids, and never repeat one; the environment checks this.

Anyone can pass a :class:`Recommender` subclass, any object with a ``recommend`` method, or a
plain function ``f(request, rng) -> ids`` as ``parallel_env(recommender=...)``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from socialgym.platform.content import ContentStore
from socialgym.recommenders.params import check_keywords

EMPTY = -1  # padding of a feed slot with no item


@dataclass(frozen=True)
class FeedRequest:
    """One recommendation call for many viewers at once.

    viewers: agent indices (int array). candidates: content ids of the pool (sorted ascending).
    k: slots per viewer. phase: "act" (feed) or "vote" (vote items). round: 1-based round.
    content: the platform's content store (authors, topics, votes, rounds of every item).
    ties: a callable returning the current tie matrix (scipy.sparse, row = source).
    tie_lookup: ``tie_lookup(src, dst)`` -> tie weights W[src, dst] for arrays of pairs, without
    building the matrix (0 where no tie).

    The platform history is in ``content`` (every item's author, topic, round, target, net votes)
    and in the :class:`RoundBatch` that :meth:`Recommender.update` receives after each round:
    exposures (``feed``, ``vote_feed``), comments, DMs, votes.
    """

    viewers: np.ndarray
    candidates: np.ndarray
    k: int
    phase: str
    round: int
    content: ContentStore
    ties: Callable[[], Any]
    n_agents: int
    tie_lookup: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None

    def item_age(self, ids: np.ndarray) -> np.ndarray:
        """Rounds since each item was created (1 = last round's items in the act phase)."""
        return self.round - self.content.column("round")[ids]


class Recommender(ABC):
    """Base class: implement :meth:`recommend`; :meth:`update` is called after every round."""

    name = "base"

    @classmethod
    def check_params(cls, **kwargs: Any) -> None:
        """Raise what ``cls(**kwargs)`` would raise about its keyword parameters — a TypeError for
        an unknown or missing one, a ``ParamError`` (a ValueError naming it) for a bad value —
        without constructing anything. The keywords are declared per class in ``PARAMS``
        (``socialgym.recommenders.params``); a re-ranker's wrapped recommender is not one."""
        check_keywords(cls, kwargs)

    @abstractmethod
    def recommend(self, request: FeedRequest, rng: np.random.Generator) -> np.ndarray:
        """Return a (len(viewers), <= k) int array of content ids, ``EMPTY`` (-1) padded."""

    def update(self, content: ContentStore, batch: Any, rng: np.random.Generator) -> None:
        """Learn from the round just finished (exposures, votes, comments). Default: nothing."""

    def reset(self) -> None:
        """Forget everything learnt (called by ``env.reset``)."""

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass


class FunctionRecommender(Recommender):
    """Adapts a plain function ``f(request, rng) -> ids`` to the interface."""

    def __init__(self, fn: Callable[[FeedRequest, np.random.Generator], Any]) -> None:
        self.fn = fn
        self.name = getattr(fn, "__name__", "function")

    def recommend(self, request: FeedRequest, rng: np.random.Generator) -> np.ndarray:
        return np.asarray(self.fn(request, rng))


def as_recommender(spec: Any) -> Recommender:
    """An object with ``recommend`` as it is; a plain function ``f(request, rng) -> ids`` wrapped
    in a :class:`FunctionRecommender`. (Names are resolved by ``registry.make_recommender``.)"""
    if hasattr(spec, "recommend"):
        return spec
    if callable(spec):
        return FunctionRecommender(spec)
    raise TypeError(f"expected a built recommender (an object with recommend(request, rng)) or a function "
                    f"f(request, rng) -> ids; got {spec!r}")


def top_k_excluding_own(ranked: np.ndarray, viewers: np.ndarray, authors: np.ndarray, k: int) -> np.ndarray:
    """Per viewer, the first ``k`` ids of one global ranking that the viewer did not author.

    Vectorised: only a window of the ranking long enough to hold k items of every viewer is
    scanned, so the cost is O(viewers x (k + own items in the window)), not viewers x pool.
    """
    out = np.full((len(viewers), k), EMPTY, dtype=np.int64)
    if len(ranked) == 0 or len(viewers) == 0:
        return out
    window = min(len(ranked), k)
    while True:
        top_authors = authors[ranked[:window]]
        most_by_one = np.bincount(top_authors).max()
        need = min(len(ranked), k + int(most_by_one))
        if need <= window:
            break
        window = need
    ids = ranked[:window]
    # A viewer who authored nothing in the window gets its first k ids; only the few authors of
    # the window need the per-viewer scan (at 1M viewers this is a fill, not a 1M x window pass).
    special = np.flatnonzero(np.isin(viewers, top_authors))
    common = ids[:k]
    out[:, :len(common)] = common
    if len(special):
        mine = np.full((len(special), k), EMPTY, dtype=np.int64)
        keep = top_authors[None, :] != viewers[special][:, None]            # (authors of the window, window)
        position = np.cumsum(keep, axis=1) - 1
        take = keep & (position < k)
        rows, cols = np.nonzero(take)
        mine[rows, position[rows, cols]] = ids[cols]
        out[special] = mine
    return out
