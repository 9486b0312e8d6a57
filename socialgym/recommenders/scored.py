"""Personalised recommenders: a score per (viewer, candidate), then the top k per viewer.

Subclasses implement :meth:`ScoredRecommender.score`; this base class owns what is the same for
all of them — which candidates each viewer's scores are computed for, excluding the viewer's
own items and repeats, and the top-k selection — and keeps it vectorised and memory-bounded:

* **Exact** when viewers x pool fits in ``cell_budget`` cells: every viewer scores the whole
  pool (within ``window``), newest first, so equal scores go to the newer item.
* **Sampled** above that (e.g. 10,000 agents and a pool that grows by ~25,000 items a round):
  viewers are taken in blocks of ``sample_block``; each block scores ``max_candidates`` items
  drawn uniformly without replacement from the pool (one draw per block, so a score can be a
  single matrix product), plus each viewer's :meth:`extra_candidates` (the social
  recommender adds the items of the viewer's ties). This is the retrieve-then-rank design of
  production recommenders; with ~500 random candidates over a handful of topics the ranking
  still finds the viewer's preferred topics, which is what drives cocoons.
"""

from __future__ import annotations

from abc import abstractmethod

import numpy as np

from socialgym.recommenders.base import EMPTY, FeedRequest, Recommender
from socialgym.recommenders.params import Param, check_own, limited
from socialgym.rowops import repeats_in_rows


class ScoredRecommender(Recommender):
    """Base for recommenders defined by a per-(viewer, item) score.

    window: only items of the last ``window`` rounds are candidates in the act phase (None = the
        whole pool, specification §5). recency_half_life / recency_weight: ``score += recency_weight *
        2 ** (-(age - 1) / recency_half_life)`` — a freshness bonus, 0 by default except where a
        subclass says otherwise. max_candidates / cell_budget: see the module docstring.
    """

    PARAMS = {
        "window": limited("int", "window", 1, none_ok=True),
        "recency_weight": Param("number"),
        "recency_half_life": Param("number", low=0, low_open=True),
        "max_candidates": limited("int", "max_candidates", 1),
        "cell_budget": limited("int", "cell_budget", 1),
        "sample_block": limited("int", "sample_block", 1),
    }

    def __init__(self, window: int | None = None, recency_weight: float = 0.0,
                 recency_half_life: float = 2.0, max_candidates: int = 512,
                 cell_budget: int = 2_000_000, sample_block: int = 64) -> None:
        check_own(ScoredRecommender, window=window, recency_weight=recency_weight,
                  recency_half_life=recency_half_life, max_candidates=max_candidates,
                  cell_budget=cell_budget, sample_block=sample_block)
        self.window = window
        self.recency_weight = float(recency_weight)
        self.recency_half_life = float(recency_half_life)
        self.max_candidates = int(max_candidates)
        self.cell_budget = int(cell_budget)
        self.sample_block = int(sample_block)

    # ---- what subclasses implement -----------------------------------------------------------
    @abstractmethod
    def score(self, request: FeedRequest, viewers: np.ndarray, cand: np.ndarray) -> np.ndarray:
        """(len(viewers), C) scores of candidate ids ``cand`` (never -1 here; higher = better)."""

    def extra_candidates(self, request: FeedRequest, pool: np.ndarray, viewers: np.ndarray) -> np.ndarray | None:
        """Optional (len(viewers), E) ids, -1 padded, added to the sampled candidates."""
        return None

    # ---- the shared machinery ----------------------------------------------------------------
    def candidate_pool(self, request: FeedRequest) -> np.ndarray:
        pool = request.candidates
        if self.window is not None and request.phase == "act" and len(pool):
            pool = pool[request.content.column("round")[pool] >= request.round - self.window]
        return pool

    def total_score(self, request: FeedRequest, viewers: np.ndarray, cand: np.ndarray) -> np.ndarray:
        scores = np.asarray(self.score(request, viewers, cand), dtype=np.float64)
        if scores.shape != cand.shape:
            raise ValueError(f"{type(self).__name__}.score returned shape {scores.shape}, "
                             f"expected {cand.shape}")
        if not np.all(np.isfinite(scores)):
            raise ValueError(f"{type(self).__name__}.score returned NaN or infinite scores")
        if self.recency_weight:
            age = request.item_age(cand)
            scores = scores + self.recency_weight * np.exp2(-np.maximum(age - 1, 0) / self.recency_half_life)
        return scores

    def recommend(self, request: FeedRequest, rng: np.random.Generator) -> np.ndarray:
        viewers, k = request.viewers, request.k
        out = np.full((len(viewers), k), EMPTY, dtype=np.int64)
        pool = self.candidate_pool(request)
        if len(pool) == 0 or len(viewers) == 0 or k == 0:
            return out
        newest_first = pool[::-1]
        sampled = len(viewers) * len(pool) > self.cell_budget and len(pool) > self.max_candidates
        width = self.max_candidates if sampled else len(pool)
        block = self.sample_block if sampled else max(1, self.cell_budget // width)
        authors = request.content.column("author")
        extra_all = self.extra_candidates(request, pool, viewers)   # once: it may build the tie matrix
        for start in range(0, len(viewers), block):
            v = viewers[start:start + block]
            if sampled:   # one uniform draw per block, newest first so ties favour newer items
                shared = np.sort(pool[rng.choice(len(pool), width, replace=False)])[::-1]
            else:
                shared = newest_first
            cand = np.broadcast_to(shared, (len(v), width))
            extra = None if extra_all is None else extra_all[start:start + block]
            repeats_possible = False
            if extra is not None and extra.shape[1]:
                cand = np.concatenate([np.asarray(extra, np.int64), cand], axis=1)
                repeats_possible = True
            present = cand >= 0
            safe = np.where(present, cand, pool[0]) if repeats_possible else cand
            scores = self.total_score(request, v, safe)
            drop = authors[safe] == v[:, None]
            if repeats_possible:
                drop |= ~present | repeats_in_rows(cand)
            scores[drop] = -np.inf
            out[start:start + len(v)] = top_k_of_scores(scores, cand, k)
        return out


def top_k_of_scores(scores: np.ndarray, cand: np.ndarray, k: int) -> np.ndarray:
    """Per row the ids of the k highest finite scores, best first; equal scores keep column order."""
    k_eff = min(k, scores.shape[1])
    if scores.shape[1] > 4 * k_eff:
        # Partition on a key that already orders equal scores by column, so the cut is stable too.
        cols = np.arange(scores.shape[1])
        part = np.argpartition(-scores, k_eff - 1, axis=1)[:, :k_eff]
        part_scores = np.take_along_axis(scores, part, axis=1)
        kth = part_scores.min(axis=1, keepdims=True)
        # Items tied with the k-th score: take the earliest columns among them.
        tied_best = scores > kth
        tied = scores == kth
        need = k_eff - tied_best.sum(axis=1, keepdims=True)
        take_tied = tied & (np.cumsum(tied, axis=1) <= need)
        chosen = tied_best | take_tied
        rows, c = np.nonzero(chosen)
        pos = np.cumsum(chosen, axis=1) - 1
        sel = np.zeros((scores.shape[0], k_eff), np.int64)
        sel[rows, pos[rows, c]] = cols[c]
        part = sel
    else:
        part = np.broadcast_to(np.arange(scores.shape[1]), scores.shape)
    part_scores = np.take_along_axis(scores, part, axis=1)
    order = np.argsort(-part_scores, axis=1, kind="stable")
    best = np.take_along_axis(part, order, axis=1)[:, :k_eff]
    best_scores = np.take_along_axis(part_scores, order, axis=1)[:, :k_eff]
    ids = np.take_along_axis(np.asarray(cand), best, axis=1)
    out = np.full((scores.shape[0], k), EMPTY, dtype=np.int64)
    out[:, :k_eff] = np.where(np.isfinite(best_scores), ids, EMPTY)
    return out
