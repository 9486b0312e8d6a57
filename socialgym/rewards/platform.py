"""The platform's rewards and what a ranking does to the population: pure functions of a round.

A platform that learns (``socialgym.envs.platform``) is paid for one closed round by a weighted
sum of five named objectives, like a user's λ (:data:`PLATFORM_OBJECTIVES`). Each objective is a
population figure that is also split per viewer, so that the per-viewer values average to it
(a policy can learn from every viewer's slate, as the users' PPO learns from every agent):

* **engagement** — comments on shown feed items per feed impression: ``E / I`` over the
  population (``E`` comments whose target was in the commenter's act-phase feed, ``I`` filled
  feed slots); viewer ``v``: ``n * E_v / I``.
* **welfare** — the mean λ-weighted user reward of the round; viewer ``v``: its own reward.
* **diversity** — mean over all viewers of ``H_v / ln K`` (``H_v``: entropy of the topics of
  ``v``'s feed, ``K``: topics in the vocabulary) minus the share of all viewers in a deep cocoon
  (``H_v`` below ``0.5 ln K``, ``socialgym.metrics.exposure``; an empty feed is no cocoon);
  viewer ``v``: ``H_v / ln K - [H_v < 0.5 ln K]`` (0 for an empty feed; 0 when ``K <= 1``).
  (:func:`platform_metrics`' ``deep_cocoon_share`` is over viewers with a feed.)
* **bridging** — supportive comments (sentiment > 0) across stance groups per feed impression;
  viewer ``v``: ``n * B_v / I``.
* **negativity** (a penalty, so the objective is its negative) — ``-N / E``: the share of the
  feed comments with negative sentiment; viewer ``v``: ``-n * N_v / E``.

Ratios with a zero denominator are 0. Stances: one integer code per agent, -1 unknown (never
cross-group).
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from socialgym.metrics.exposure import default_cocoon_threshold, topic_counts, topic_entropy
from socialgym.platform.actions import COM
from socialgym.platform.validation import is_number, show

PLATFORM_OBJECTIVES: tuple[str, ...] = ("engagement", "welfare", "diversity", "bridging", "negativity")
"""The platform's reward components, in this order in every (n, 5) array."""


def platform_weights(objective: str | Mapping[str, float]) -> np.ndarray:
    """The weight vector of an objective name (one-hot) or a mapping name -> weight (the others 0)."""
    if isinstance(objective, str):
        if objective not in PLATFORM_OBJECTIVES:
            raise ValueError(f"platform objective must be one of {PLATFORM_OBJECTIVES}, got {show(objective, 80)}")
        return np.eye(len(PLATFORM_OBJECTIVES))[PLATFORM_OBJECTIVES.index(objective)]
    if not isinstance(objective, Mapping):
        raise TypeError(f"platform objective: a name or a mapping name -> weight, got {show(objective, 80)}")
    unknown = [k for k in objective if k not in PLATFORM_OBJECTIVES]
    if unknown:
        raise ValueError(f"platform objective: unknown component(s) {show(unknown, 80)}; known: {PLATFORM_OBJECTIVES}")
    for name, weight in objective.items():
        # a bool or a string that float() would take ("1", True) is a mistake, not a weight; so are
        # NaN, infinities and ints past float range (float() would overflow)
        if not is_number(weight) or abs(weight) > 1.7976931348623157e308:
            raise ValueError(f"platform objective weight {name!r} must be a finite number, got {show(weight, 40)}")
        if abs(weight) > 1e300:                  # a float, but its weighted rewards would overflow to inf
            raise ValueError(f"platform objective weight {name!r} must be a finite number of size at most 1e300, "
                             f"got {show(weight, 40)}")
    w = np.array([float(objective.get(k, 0.0)) for k in PLATFORM_OBJECTIVES])
    if not w.any():
        raise ValueError(f"platform objective: at least one weight must be non-zero, got {dict(objective)!r} "
                         "(a platform that values nothing ranks at random)")
    return w


def _feed_comments(batch: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(sender, target author, sentiment) of the round's comments on items of the sender's feed."""
    com = np.flatnonzero(batch.kind == COM)
    sender = batch.sender[com].astype(np.int64)
    on_feed = (batch.feed[sender] == batch.target_id[com][:, None]).any(axis=1) if batch.feed.shape[1] else \
        np.zeros(len(com), bool)
    com = com[on_feed]
    return batch.sender[com].astype(np.int64), batch.recipient[com].astype(np.int64), batch.sentiment[com]


def _cross(a: np.ndarray, b: np.ndarray, stances: np.ndarray) -> np.ndarray:
    sa, sb = stances[a], stances[b]
    return (sa >= 0) & (sb >= 0) & (sa != sb)


def platform_components(batch: Any, totals: np.ndarray, stances: np.ndarray, n_topics: int) -> np.ndarray:
    """(n, 5) per-viewer values of :data:`PLATFORM_OBJECTIVES` for one closed round (module
    docstring); their column means are the population figures."""
    n = batch.n_agents
    out = np.zeros((n, len(PLATFORM_OBJECTIVES)))
    impressions = float((batch.feed >= 0).sum())
    sender, target_author, sentiment = _feed_comments(batch)
    comments = float(len(sender))
    if impressions:
        out[:, 0] = n * np.bincount(sender, minlength=n) / impressions
        bridge = _cross(sender, target_author, stances) & (sentiment > 0)
        out[:, 3] = n * np.bincount(sender[bridge], minlength=n) / impressions
    out[:, 1] = totals
    if n_topics > 1:
        h = topic_entropy(topic_counts(batch.feed_topics, n_topics))
        exposed = ~np.isnan(h)
        h0 = np.where(exposed, h, 0.0)
        out[:, 2] = h0 / np.log(n_topics) - (exposed & (h0 < default_cocoon_threshold(n_topics)))
    if comments:
        out[:, 4] = -n * np.bincount(sender[sentiment < 0], minlength=n) / comments
    return out


def feed_authors(feed: np.ndarray, author: np.ndarray) -> np.ndarray:
    """The author of each feed slot (-1 where empty); ``author``: the content store's column."""
    if not len(author):
        return np.full_like(feed, -1)
    return np.where(feed >= 0, author[np.maximum(feed, 0)], -1)


def engaged_share(batch: Any) -> float:
    """Share of the agents who commented or voted in the round (the platform observation's
    ``active_share`` feature; not the realism fact of that name, which counts any post)."""
    active = np.zeros(batch.n_agents, bool)
    active[batch.sender[batch.kind == COM]] = True
    active[batch.vote_voter] = True
    return float(active.mean())


def platform_metrics(batch: Any, totals: np.ndarray, stances: np.ndarray, n_topics: int,
                     feed_authors: np.ndarray, components: np.ndarray | None = None) -> dict[str, float]:
    """The study's population figures for one closed round.

    ``engagement``, ``welfare``, ``bridging``, ``negativity_share`` (= -negativity): as the
    objectives. ``topic_entropy``: mean ``H_v`` (nats) over viewers with a feed;
    ``deep_cocoon_share``: their share with ``H_v < 0.5 ln K``; ``cross_cutting_exposure``: the
    share of feed impressions whose author has another known stance than the viewer;
    ``polarisation``: the share of the round's cross-group interactions (comments and non-zero
    votes) that are hostile (a negative comment or a dislike). ``feed_authors``: the author of
    each feed slot (-1 where empty). ``components``: the round's :func:`platform_components`,
    when the caller has them already."""
    if components is None:
        components = platform_components(batch, totals, stances, n_topics)
    comp = components.mean(axis=0)
    feed = batch.feed
    shown = feed >= 0
    viewer = np.broadcast_to(np.arange(batch.n_agents)[:, None], feed.shape)[shown]
    cross_exposure = float(_cross(viewer, feed_authors[shown], stances).mean()) if shown.any() else 0.0
    h = topic_entropy(topic_counts(batch.feed_topics, n_topics)) if n_topics > 0 else np.array([np.nan])
    exposed = ~np.isnan(h)
    com = batch.kind == COM
    c_cross = _cross(batch.sender[com].astype(np.int64), batch.recipient[com].astype(np.int64), stances)
    v_cross = _cross(batch.vote_voter.astype(np.int64), batch.vote_author.astype(np.int64), stances)
    hostile = int((batch.sentiment[com][c_cross] < 0).sum() + (batch.vote_value[v_cross] < 0).sum())
    crossing = int(c_cross.sum() + v_cross.sum())
    return {
        "engagement": float(comp[0]), "welfare": float(comp[1]), "bridging": float(comp[3]),
        "negativity_share": float(-comp[4]),
        "topic_entropy": float(h[exposed].mean()) if exposed.any() else float("nan"),
        "deep_cocoon_share": float((h[exposed] < default_cocoon_threshold(n_topics)).mean())
        if exposed.any() else float("nan"),
        "cross_cutting_exposure": cross_exposure,
        "polarisation": hostile / crossing if crossing else 0.0,
    }
