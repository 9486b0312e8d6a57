"""Recommenders from the platform's engagement signals: popularity, topic affinity, social ties."""

from __future__ import annotations

import numpy as np

from socialgym.platform.actions import COM
from socialgym.recommenders.base import FeedRequest, top_k_excluding_own
from socialgym.recommenders.params import Param, check_own, limited
from socialgym.recommenders.scored import ScoredRecommender


class Popularity(ScoredRecommender):
    """Net likes with time decay: ``(1 + likes - dislikes) * 2 ** (-(age - 1) / half_life)``.

    The +1 prior lets a fresh item with no votes outrank a stale one with none; ``age`` is in
    rounds (1 = last round's items). One ranking serves every viewer (own items skipped), so
    the cost is one sort of the pool per round. Equal scores: newest first.
    """

    name = "popularity"
    PARAMS = {"half_life": Param("number", low=0, low_open=True)}

    def __init__(self, half_life: float = 2.0, **kwargs) -> None:
        super().__init__(**kwargs)
        check_own(Popularity, half_life=half_life)
        self.half_life = float(half_life)

    def item_scores(self, request: FeedRequest, ids: np.ndarray) -> np.ndarray:
        c = request.content
        net = c.column("likes")[ids].astype(np.float64) - c.column("dislikes")[ids]
        age = np.maximum(request.item_age(ids) - 1, 0)
        return (1.0 + net) * np.exp2(-age / self.half_life)

    def score(self, request, viewers, cand):
        return self.item_scores(request, cand)

    def recommend(self, request, rng):
        pool = self.candidate_pool(request)
        if self.recency_weight or len(pool) == 0:
            return super().recommend(request, rng)
        newest_first = pool[::-1]
        ranked = newest_first[np.argsort(-self.item_scores(request, newest_first), kind="stable")]
        return top_k_excluding_own(ranked, request.viewers, request.content.column("author"), request.k)


class TopicAffinity(ScoredRecommender):
    """Content-based: items on the topics the viewer engaged with.

    Each agent keeps an engagement profile over topics, decayed by ``2 ** (-1 / profile_half_life)``
    every round, plus ``w_comment`` per comment on an item of the topic, ``w_like`` per like,
    ``-w_dislike`` per dislike and ``w_post`` per own post or DM on it. An item's score is the
    viewer's profile share of its topic (profile / sum of |profile|), plus a freshness bonus
    (``recency_weight``, default 0.1) so that equal shares go to newer items and a cold start is
    chronological.
    """

    name = "topic_affinity"
    PARAMS = {"w_comment": Param("number"), "w_like": Param("number"), "w_dislike": Param("number"),
              "w_post": Param("number"), "profile_half_life": Param("number", low=0, low_open=True)}

    def __init__(self, w_comment: float = 1.0, w_like: float = 1.0, w_dislike: float = 0.5,
                 w_post: float = 0.5, profile_half_life: float = 5.0, recency_weight: float = 0.1,
                 **kwargs) -> None:
        super().__init__(recency_weight=recency_weight, **kwargs)
        check_own(TopicAffinity, w_comment=w_comment, w_like=w_like, w_dislike=w_dislike, w_post=w_post,
                  profile_half_life=profile_half_life)
        self.weights = (float(w_comment), float(w_like), float(w_dislike), float(w_post))
        self.profile_half_life = float(profile_half_life)
        self.profile: np.ndarray | None = None

    def reset(self) -> None:
        self.profile = None

    def _grow(self, n: int, n_topics: int) -> np.ndarray:
        if self.profile is None:
            self.profile = np.zeros((n, max(n_topics, 1)))
        elif n_topics > self.profile.shape[1]:
            pad = np.zeros((n, max(n_topics, 2 * self.profile.shape[1]) - self.profile.shape[1]))
            self.profile = np.hstack([self.profile, pad])
        return self.profile

    def update(self, content, batch, rng) -> None:
        w_comment, w_like, w_dislike, w_post = self.weights
        topics = int(max(batch.topic.max(initial=-1), batch.vote_topic.max(initial=-1))) + 1
        profile = self._grow(batch.n_agents, topics)
        profile *= np.exp2(-1.0 / self.profile_half_life)
        K = profile.shape[1]
        is_com = batch.kind == COM
        weight = np.where(is_com, w_comment, w_post)       # a COM's topic is its target's
        like = batch.vote_value > 0
        rows = np.concatenate([batch.sender, batch.vote_voter])
        cols = np.concatenate([batch.topic, batch.vote_topic])
        vals = np.concatenate([weight, np.where(like, w_like, -w_dislike)])
        ok = cols >= 0
        profile += np.bincount(rows[ok].astype(np.int64) * K + cols[ok], weights=vals[ok],
                               minlength=profile.size).reshape(profile.shape)

    def score(self, request, viewers, cand):
        topic = request.content.column("topic")[cand]
        if self.profile is None:
            return np.zeros(cand.shape)
        profile = self.profile[viewers]
        share = profile / np.maximum(np.abs(profile).sum(axis=1, keepdims=True), 1e-12)
        inside = topic < share.shape[1]
        out = np.zeros(cand.shape)
        rows = np.broadcast_to(np.arange(len(viewers))[:, None], cand.shape)
        out[inside] = share[rows[inside], topic[inside]]
        return out

    def state_dict(self) -> dict:
        return {"profile": None if self.profile is None else self.profile.copy()}

    def load_state_dict(self, state: dict) -> None:
        self.profile = None if state["profile"] is None else np.array(state["profile"])


class Social(ScoredRecommender):
    """Items by the agents the viewer is tied to, weighted by tie strength.

    ``score = W[viewer, author] + in_weight * W[author, viewer]`` plus a freshness bonus
    (``recency_weight``, default 0.05, so that without ties the feed is chronological). The
    items of every out-tie's author within the window are always among the candidates (up to
    ``max_social_candidates`` per viewer, strongest ties first), so sampling never hides them.
    """

    name = "social"
    PARAMS = {"in_weight": Param("number"), "max_social_candidates": limited("int", "max_social_candidates", 0)}

    def __init__(self, in_weight: float = 0.5, recency_weight: float = 0.05,
                 max_social_candidates: int = 256, **kwargs) -> None:
        super().__init__(recency_weight=recency_weight, **kwargs)
        check_own(Social, in_weight=in_weight, max_social_candidates=max_social_candidates)
        self.in_weight = float(in_weight)
        self.max_social_candidates = int(max_social_candidates)

    def reset(self) -> None:
        self._cache_key = self._cache = None

    def _matrices(self, request):
        """W and its transpose as CSR, built once per recommend call (cached by round/phase)."""
        key = (request.round, request.phase, id(request.content))
        if getattr(self, "_cache_key", None) != key:
            W = request.ties().tocsr()
            W.sort_indices()
            WT = W.T.tocsr()
            WT.sort_indices()
            self._cache_key, self._cache = key, (W, WT)
        return self._cache

    def score(self, request, viewers, cand):
        W, WT = self._matrices(request)
        author = request.content.column("author")[cand]
        out = _rows_lookup(W, viewers, author)                    # W[viewer, author]
        if self.in_weight:
            out = out + self.in_weight * _rows_lookup(WT, viewers, author)   # W[author, viewer]
        return out

    def extra_candidates(self, request, pool, viewers):
        W, _ = self._matrices(request)
        authors = request.content.column("author")[pool].astype(np.int64)
        by_author = np.argsort(authors, kind="stable")
        starts = np.searchsorted(authors[by_author], np.arange(request.n_agents + 1))
        sub = W[viewers]
        counts_nb = np.diff(sub.indptr)
        viewer_row = np.repeat(np.arange(len(viewers)), counts_nb)
        nb, w = sub.indices.astype(np.int64), sub.data
        n_items = starts[nb + 1] - starts[nb]
        keep = n_items > 0
        viewer_row, nb, w, n_items = viewer_row[keep], nb[keep], w[keep], n_items[keep]
        if len(nb) == 0:
            return None
        # expand (viewer, neighbour) into (viewer, item of neighbour) rows
        rep_row = np.repeat(viewer_row, n_items)
        rep_w = np.repeat(w, n_items)
        offset = np.arange(n_items.sum()) - np.repeat(np.cumsum(n_items) - n_items, n_items)
        item = pool[by_author[np.repeat(starts[nb], n_items) + offset]]
        order = np.lexsort((-item, -rep_w, rep_row))
        rep_row, item = rep_row[order], item[order]
        first = np.searchsorted(rep_row, np.arange(len(viewers)))
        rank = np.arange(len(rep_row)) - first[rep_row]
        take = rank < self.max_social_candidates
        width = int(min(self.max_social_candidates, rank.max() + 1))
        out = np.full((len(viewers), width), -1, dtype=np.int64)
        out[rep_row[take], rank[take]] = item[take]
        return out


def _rows_lookup(M, viewers: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """M[viewers[i], cols[i, j]] for a (len(viewers), C) array of columns, searching only the
    viewers' rows of the CSR matrix (a few hundred entries for a block)."""
    sub = M[viewers]
    n = M.shape[1]
    keys = np.repeat(np.arange(len(viewers), dtype=np.int64), np.diff(sub.indptr)) * n + sub.indices
    if len(keys) == 0:
        return np.zeros(cols.shape)
    probe = np.arange(len(viewers), dtype=np.int64)[:, None] * n + cols
    pos = np.minimum(np.searchsorted(keys, probe), len(keys) - 1)
    return np.where(keys[pos] == probe, sub.data[pos], 0.0)
