"""Candidate retrieval and per-(viewer, candidate) ranking features: what a learning platform sees.

Production recommenders work in two stages: a cheap *retrieval* step narrows the pool to a few
candidates per viewer, then a *ranker* orders them. :func:`retrieve` is socialgym's retrieval
step and :class:`RankingFeatures` describes each (viewer, candidate) pair with the numbers of
:data:`RANKING_FEATURES`; the platform seat (``socialgym.recommenders.seat``), the bridging and
engagement-greedy rankers and the platform's PPO all read the same two.

**Retrieval** (act phase): the pool is the public items of the last ``window`` rounds. Viewers
are taken in blocks of ``block``; a block draws ``C + m + overdraw`` pool items uniformly without
replacement (one draw per block, from the generator passed in; ``m`` the most pool items one
viewer of the block authored), or takes the whole pool when that is no more, and each viewer
keeps the first ``C`` of them it did not author. So a viewer whose pool, less its own items,
holds at most ``C`` items gets all of them. Candidates are ordered newest first; a row with
fewer than ``C`` is padded with -1.

**Features** (each a float; columns of :data:`RANKING_FEATURES`):

==================  =====================================================================
tie_out             tie weight ``W[viewer, author]`` (0 without a tie)
tie_in              tie weight ``W[author, viewer]``
topic_affinity      the viewer's share of its own past activity (posts, comments, likes) on
                    the item's topic; 0 before it has done anything
age                 rounds since the item was created, divided by ``window``
likes, dislikes     ``log1p`` of the item's votes so far
cross_likes         ``log1p`` of its likes from voters of another stance group than its author
author_activity     ``log1p`` of the items its author created in the last closed round
stance_distance     1 if viewer and author have known, different stance labels, else 0
tone                the item's sentiment s(a) in [-1, 1] (critical -1, supportive +1)
is_comment          1 for a comment, 0 for a post
viewer_activity     ``log1p`` of the viewer's comments and votes in the last closed round
==================  =====================================================================

Running counts (activity by topic, likes by stance group) are kept by :meth:`RankingFeatures.update`
from each closed round's :class:`~socialgym.platform.actions.RoundBatch`.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np

from socialgym.platform.actions import COM, POST
from socialgym.platform.content import ContentStore
from socialgym.platform.validation import show
from socialgym.recommenders.params import stances_problem
from socialgym.recommenders.base import EMPTY, FeedRequest

RANKING_FEATURES: tuple[str, ...] = (
    "tie_out", "tie_in", "topic_affinity", "age", "likes", "dislikes", "cross_likes", "author_activity",
    "stance_distance", "tone", "is_comment", "viewer_activity",
)
N_FEATURES = len(RANKING_FEATURES)
DEFAULT_CANDIDATES = 60
"""Candidates retrieved per viewer unless told otherwise (the platform tasks use this)."""


def stance_codes(stances: Any, n_agents: int | None = None) -> np.ndarray:
    """One integer code per agent (-1 = unknown) from labels (any hashables; None / NaN = unknown)."""
    if stances is None:
        if n_agents is None:
            raise ValueError("stance_codes: without stances the number of agents is needed")
        return np.full(n_agents, -1, np.int64)
    problem = stances_problem(stances)
    if problem:
        raise TypeError(f"stances: {problem}")
    labels = list(stances)
    unhashable = next((x for x in labels if not isinstance(x, Hashable)), None)
    if unhashable is not None:
        raise TypeError(f"stances: each label must be a string, a number or None, got {show(unhashable, 60)}")
    if n_agents is not None and len(labels) != n_agents:
        raise ValueError(f"stances: {len(labels)} labels for {n_agents} agents")
    def is_known(x: Any) -> bool:
        return x is not None and not (isinstance(x, float) and np.isnan(x))

    index = {label: i for i, label in enumerate(sorted({x for x in labels if is_known(x)}, key=repr))}
    return np.array([index[x] if is_known(x) else -1 for x in labels], np.int64)


def stance_labels(codes: np.ndarray) -> list:
    """Labels that :func:`stance_codes` maps back to ``codes`` (-1 -> None, unknown)."""
    return [int(c) if c >= 0 else None for c in np.asarray(codes).tolist()]


def retrieve(request: FeedRequest, rng: np.random.Generator, size: int, window: int = 3,
             block: int = 64, overdraw: int = 0) -> np.ndarray:
    """(len(viewers), ``size``) candidate ids per viewer, newest first, -1 padded (module docstring)."""
    viewers = request.viewers
    out = np.full((len(viewers), size), EMPTY, np.int64)
    pool = request.candidates
    if len(pool):
        pool = pool[request.content.column("round")[pool] >= request.round - window]
    if len(pool) == 0 or len(viewers) == 0 or size == 0:
        return out
    authors = request.content.column("author")
    own = np.bincount(authors[pool], minlength=request.n_agents)
    for start in range(0, len(viewers), block):
        stop = min(start + block, len(viewers))
        v = viewers[start:stop]
        draw = size + int(own[v].max()) + overdraw      # enough for C items not by any viewer of the block
        if draw >= len(pool):
            ids = pool[::-1]
        else:
            ids = np.sort(pool[rng.choice(len(pool), draw, replace=False)])[::-1]
        keep = authors[ids][None, :] != v[:, None]
        position = np.cumsum(keep, axis=1) - 1
        take = keep & (position < size)
        rows, cols = np.nonzero(take)
        part = np.full((len(v), size), EMPTY, np.int64)
        part[rows, position[rows, cols]] = ids[cols]
        out[start:stop] = part
    return out


class RankingFeatures:
    """The per-(viewer, candidate) feature matrix and the running counts it needs.

    ``n_agents``; ``stances``: one label per agent or None (then ``stance_distance`` and
    ``cross_likes`` are 0); ``window``: the retrieval window in rounds (scales ``age``).
    """

    def __init__(self, n_agents: int, stances: Any = None, window: int = 3) -> None:
        self.n_agents = int(n_agents)
        self.stances = stance_codes(stances, self.n_agents)
        self.n_groups = int(self.stances.max()) + 1 if len(self.stances) else 0
        self.window = int(window)
        self.reset()

    def reset(self) -> None:
        self.topic_activity = np.zeros((self.n_agents, 1))
        self.group_likes = np.zeros((0, max(self.n_groups, 1)))      # per item, likes by voter group
        self.author_activity = np.zeros(self.n_agents)
        self.viewer_activity = np.zeros(self.n_agents)

    def state_dict(self) -> dict:
        return {k: v.copy() for k, v in vars(self).items() if isinstance(v, np.ndarray)}

    def load_state_dict(self, state: dict) -> None:
        for k, v in state.items():
            setattr(self, k, v.copy())

    # ---------------------------------------------------------------- learning from a round
    def update(self, content: ContentStore, batch: Any) -> None:
        """Add the closed round's activity to the running counts (copy on write: the env's
        rollback restores the previous arrays)."""
        n = self.n_agents
        topic = content.column("topic")
        width = max(self.topic_activity.shape[1], int(topic.max()) + 1 if len(topic) else 1)
        activity = np.zeros((n, width))
        activity[:, :self.topic_activity.shape[1]] = self.topic_activity
        acted = np.isin(batch.kind, (POST, COM))
        np.add.at(activity, (batch.sender[acted], batch.topic[acted]), 1.0)
        likes = batch.vote_value > 0
        np.add.at(activity, (batch.vote_voter[likes], batch.vote_topic[likes]), 1.0)
        self.topic_activity = activity

        grown = np.zeros((len(content), self.group_likes.shape[1]))
        grown[:len(self.group_likes)] = self.group_likes
        voter_group = self.stances[batch.vote_voter[likes]]
        known = voter_group >= 0
        np.add.at(grown, (batch.vote_item[likes][known], voter_group[known]), 1.0)
        self.group_likes = grown

        made = batch.kind != 3                                  # NOT is no item
        self.author_activity = np.bincount(batch.sender[made], minlength=n).astype(float)
        commented = batch.kind == COM
        self.viewer_activity = (np.bincount(batch.sender[commented], minlength=n)
                                + np.bincount(batch.vote_voter, minlength=n)).astype(float)

    # ---------------------------------------------------------------- the matrix
    def cross_likes(self, ids: np.ndarray, authors: np.ndarray) -> np.ndarray:
        """Likes of items ``ids`` from voters of another group than their ``authors``' (0 for
        unknown groups or items newer than the counts)."""
        ids = np.asarray(ids)
        known = (ids >= 0) & (ids < len(self.group_likes))
        total = np.zeros(ids.shape)
        if not known.any() or self.n_groups == 0:
            return total
        rows = self.group_likes[ids[known]]
        group = self.stances[authors[known]]
        own = np.where(group >= 0, rows[np.arange(len(rows)), np.maximum(group, 0)], rows.sum(axis=1))
        total[known] = rows.sum(axis=1) - own
        return total

    def bridging_score(self, ids: np.ndarray) -> np.ndarray:
        """Likes from the stance group that liked the item least (0 with fewer than two groups)."""
        ids = np.asarray(ids)
        known = (ids >= 0) & (ids < len(self.group_likes))
        out = np.zeros(ids.shape)
        if self.n_groups >= 2 and known.any():
            out[known] = self.group_likes[ids[known]].min(axis=1)
        return out

    def matrix(self, request: FeedRequest, cand: np.ndarray) -> np.ndarray:
        """(len(viewers), C, N_FEATURES) float32 features of candidates ``cand`` (-1 slots: 0).

        The item's own features are computed once per item of the candidates' id range (ids grow
        with rounds, so the window is one contiguous range) and gathered per pair; only the tie
        weights, the topic affinity and the stance distance are computed per pair."""
        content = request.content
        present = cand >= 0
        m, c = cand.shape
        out = np.zeros((m, c, N_FEATURES), np.float32)
        if not present.any():
            return out
        lo, hi = int(cand[present].min()), int(cand.max()) + 1
        local = np.where(present, cand - lo, 0)                      # row of each pair's item in the table
        author_all, topic_all = content.column("author")[lo:hi], content.column("topic")[lo:hi]
        items = np.empty((hi - lo, len(_ITEM_COLUMNS)), np.float32)
        items[:, 0] = (request.round - content.column("round")[lo:hi]) / max(self.window, 1)
        items[:, 1] = np.log1p(content.column("likes")[lo:hi])
        items[:, 2] = np.log1p(content.column("dislikes")[lo:hi])
        items[:, 3] = np.log1p(self.cross_likes(np.arange(lo, hi), author_all))
        items[:, 4] = np.log1p(self.author_activity[author_all])
        items[:, 5] = content.column("sentiment")[lo:hi]
        items[:, 6] = content.column("kind")[lo:hi] == COM
        out[..., _ITEM_INDEX] = items[local]

        viewers = request.viewers[:, None]
        author, item_topic = author_all[local], topic_all[local]
        if request.tie_lookup is not None:
            v = np.broadcast_to(viewers, cand.shape).ravel()
            out[..., _TIE_OUT] = request.tie_lookup(v, author.ravel()).reshape(m, c)
            out[..., _TIE_IN] = request.tie_lookup(author.ravel(), v).reshape(m, c)
        act = self.topic_activity
        share = act / np.maximum(act.sum(axis=1, keepdims=True), 1.0)
        in_range = item_topic < act.shape[1]
        out[..., _AFFINITY] = np.where(in_range, share[viewers, np.minimum(item_topic, act.shape[1] - 1)], 0.0)
        sv, sa = self.stances[viewers], self.stances[author]
        out[..., _STANCE] = (sv >= 0) & (sa >= 0) & (sv != sa)
        out[..., _VIEWER] = np.log1p(self.viewer_activity[viewers])
        out[~present] = 0.0
        return out


_ITEM_COLUMNS = ("age", "likes", "dislikes", "cross_likes", "author_activity", "tone", "is_comment")
_ITEM_INDEX = [RANKING_FEATURES.index(name) for name in _ITEM_COLUMNS]
_TIE_OUT, _TIE_IN, _AFFINITY, _STANCE, _VIEWER = (RANKING_FEATURES.index(name) for name in (
    "tie_out", "tie_in", "topic_affinity", "stance_distance", "viewer_activity"))
