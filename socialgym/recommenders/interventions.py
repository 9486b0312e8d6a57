"""Re-ranking interventions, composable on top of any recommender.

Each wraps a built recommender and changes its lists; wrappers nest
(``StancePenalty(RandomReplacement(MatrixFactorization(), n=1), stances, 0.4)``). Every
wrapper counts what it did: ``last`` (the latest call) and ``counts`` (cumulative), which the
environment copies into ``infos``/``last_round`` so runs can check and log the dose.

* :class:`RandomReplacement` — recagent's Rec-Strategy: every ``every`` rounds, replace ``n``
  of the ``k`` items (the lowest-ranked) with uniformly random ones.
* :class:`TailQuotaTransfer` — agentsociety2's Tail QuotaTransfer: move a share of the exposure
  quota of the viewer's head topics to its tail topics.
* :class:`StancePenalty` — agentsociety2's ``algorithm_filter_strength``: a ranking penalty of
  strength ``s`` for items whose author's stance differs from the viewer's.

The Soc-Strategy (seed ties to agents of different interests) changes the tie graph, not the
ranking: see the environment options ``soc_strategy`` / ``agent_interests``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Any

import numpy as np

from socialgym.recommenders.base import EMPTY, FeedRequest, Recommender, as_recommender
from socialgym.recommenders.params import Param, check_own, check_phases, check_stances, limited
from socialgym.rowops import first_per_row, repeats_in_rows


class Reranker(Recommender):
    """Base of the wrappers: delegates learning and state to the wrapped recommender (a built
    one, or a function ``f(request, rng) -> ids``; by name: ``apply_reranking`` or
    ``make_recommender``). ``check_params(**kwargs)`` checks the parameters other than ``base``."""

    PARAMS = {"phases": Param("custom", check=check_phases)}

    def __init__(self, base: Any, phases: tuple[str, ...] = ("act",)) -> None:
        if isinstance(base, str):
            raise TypeError(f"{type(self).__name__} wraps a built recommender, got the name {base!r}: "
                            f"pass make_recommender({base!r})")
        self.base = as_recommender(base)
        check_own(Reranker, phases=phases)
        self.phases = tuple(phases)
        self.name = f"{type(self).__name__}({getattr(self.base, 'name', type(self.base).__name__)})"
        self.last: dict[str, int] = {}
        self.counts: Counter = Counter()

    def applies(self, request: FeedRequest) -> bool:
        return request.phase in self.phases

    def _record(self, **numbers: int) -> None:
        self.last = {k: int(v) for k, v in numbers.items()}
        self.counts.update(self.last)

    def _base_lists(self, request: FeedRequest, rng, k: int) -> np.ndarray:
        """The wrapped recommender's lists for ``k`` slots, compacted to the left, -1 padded."""
        raw = np.asarray(self.base.recommend(replace(request, k=k), rng), dtype=np.int64)
        out = np.full((len(request.viewers), k), EMPTY, dtype=np.int64)
        order = np.argsort(raw < 0, axis=1, kind="stable")
        out[:, :raw.shape[1]] = np.take_along_axis(raw, order, axis=1)
        return out

    def intervention_stats(self) -> dict:
        """This wrapper's and every nested wrapper's counts, keyed by wrapper class."""
        stats = {type(self).__name__: {"last": dict(self.last), "total": dict(self.counts)}}
        if isinstance(self.base, Reranker):
            stats.update(self.base.intervention_stats())
        return stats

    def update(self, content, batch, rng) -> None:
        self.base.update(content, batch, rng)

    def reset(self) -> None:
        self.base.reset()
        self.last, self.counts = {}, Counter()

    def state_dict(self) -> dict:
        return {"base": self.base.state_dict(), "counts": dict(self.counts)}

    def load_state_dict(self, state: dict) -> None:
        self.base.load_state_dict(state["base"])
        self.counts = Counter(state["counts"])


class RandomReplacement(Reranker):
    """Replace ``n`` of the ``k`` items with uniformly random pool items every ``every`` rounds
    from ``start_round`` on (recagent's Rec-Strategy).

    The replaced slots are the ``n`` lowest-ranked ones; random items are never the viewer's own,
    never an item still in the list, never repeated. ``last["replaced"]`` counts the slots that
    received a random item (fewer than ``n`` per viewer only when the pool is too small).
    """

    PARAMS = {"n": limited("int", "n", 0, required=True), "every": limited("int", "every", 1),
              "start_round": limited("int", "start_round", 1)}

    def __init__(self, base: Any, n: int, every: int = 1, start_round: int = 1,
                 phases: tuple[str, ...] = ("act",)) -> None:
        super().__init__(base, phases)
        check_own(RandomReplacement, n=n, every=every, start_round=start_round)
        self.n, self.every, self.start_round = int(n), int(every), int(start_round)

    def recommend(self, request: FeedRequest, rng: np.random.Generator) -> np.ndarray:
        k = request.k
        active = (self.applies(request) and request.round >= self.start_round
                  and (request.round - self.start_round) % self.every == 0 and self.n > 0)
        lists = self._base_lists(request, rng, k)
        if not active or len(request.candidates) == 0:
            self._record(replaced=0, rounds_applied=0)
            return lists
        n = min(self.n, k)
        kept = lists.copy()
        kept[:, k - n:] = EMPTY
        fill = _random_fill(request, rng, kept, n)
        lists[:, k - n:] = fill
        self._record(replaced=int((fill >= 0).sum()), rounds_applied=1)
        return _compact(lists)


class StancePenalty(Reranker):
    """Demote items whose author's stance differs from the viewer's (agentsociety2's
    ``algorithm_filter_strength``).

    The wrapped recommender ranks ``overfetch * k`` items; an item at position p (0-based) of
    that list of length L gets the rank score ``1 - p / L``, minus ``strength`` if it is
    cross-cutting; the k best by that score (ties: base order) are shown. ``stances``: one
    label per agent (any hashable values; None / NaN = unknown, never cross-cutting).
    ``strength = 0`` is the base ranking; ``strength >= 1`` shows cross-cutting items only when
    nothing else is left. ``last["demoted"]`` counts cross-cutting items pushed out of the
    top k, ``last["cross_cutting_shown"]`` those still shown.
    """

    PARAMS = {"strength": Param("number", low=0), "overfetch": limited("int", "overfetch", 1),
              "stances": Param("custom", required=True, check=check_stances)}

    def __init__(self, base: Any, stances: Any, strength: float = 0.4, overfetch: int = 3,
                 phases: tuple[str, ...] = ("act",)) -> None:
        super().__init__(base, phases)
        check_own(StancePenalty, strength=strength, overfetch=overfetch, stances=stances)
        self.strength, self.overfetch = float(strength), int(overfetch)
        self.stance_codes = _codes(stances)

    def recommend(self, request: FeedRequest, rng: np.random.Generator) -> np.ndarray:
        k = request.k
        if not self.applies(request):
            self._record(demoted=0, cross_cutting_shown=0)
            return self._base_lists(request, rng, k)
        codes = self.stance_codes
        if len(codes) != request.n_agents:
            raise ValueError(f"StancePenalty has {len(codes)} stances for {request.n_agents} agents")
        lists = self._base_lists(request, rng, k * self.overfetch)
        present = lists >= 0
        author = request.content.column("author")[np.maximum(lists, 0)]
        viewer = codes[request.viewers][:, None]
        cross = present & (codes[author] >= 0) & (viewer >= 0) & (codes[author] != viewer)
        L = lists.shape[1]
        key = 1.0 - np.arange(L) / L - self.strength * cross
        key[~present] = -np.inf
        order = np.argsort(-key, axis=1, kind="stable")[:, :k]
        out = np.take_along_axis(lists, order, axis=1)
        shown_cross = np.take_along_axis(cross, order, axis=1).sum()
        self._record(demoted=int(cross[:, :k].sum() - shown_cross), cross_cutting_shown=int(shown_cross))
        return out


class TailQuotaTransfer(Reranker):
    """Move ``share`` of each head topic's slots to the viewer's tail topics (agentsociety2).

    Per viewer: the wrapped recommender's top k define the quotas (slots per topic). The head
    topics are the ``n_head`` topics with the most slots; each gives up
    ``round(share * slots)`` of its lowest-ranked items. The freed slots go round-robin to the
    ``n_tail`` tail topics — the topics this viewer was shown least so far (counted from the
    feeds it saw; ties: the topic rarest in the pool, then topic id) that have items in the
    pool and are not head topics. Each freed slot takes the tail topic's best item in the
    wrapped recommender's longer list (``overfetch * k``), else its newest pool item. The list
    is then re-ranked by the wrapped recommender's order (pool-only items last).
    ``last["transferred"]`` counts slots moved to tail topics.

    Cost: a loop over viewers of plain-Python work on k items each (~20 us per viewer).
    """

    PARAMS = {"share": Param("number", low=0, high=1), "n_head": limited("int", "n_head", 1),
              "n_tail": limited("int", "n_tail", 1), "overfetch": limited("int", "overfetch", 1)}

    def __init__(self, base: Any, share: float = 0.3, n_head: int = 3, n_tail: int = 3,
                 overfetch: int = 3, phases: tuple[str, ...] = ("act",)) -> None:
        super().__init__(base, phases)
        check_own(TailQuotaTransfer, share=share, n_head=n_head, n_tail=n_tail, overfetch=overfetch)
        self.share, self.n_head, self.n_tail, self.overfetch = float(share), int(n_head), int(n_tail), int(overfetch)
        self.seen: np.ndarray | None = None          # (n, topics) feed exposures per viewer

    def reset(self) -> None:
        super().reset()
        self.seen = None

    def update(self, content, batch, rng) -> None:
        super().update(content, batch, rng)
        topics = batch.feed_topics
        width = max(int(topics.max(initial=-1)) + 1, 1)
        if self.seen is None:
            self.seen = np.zeros((batch.n_agents, width), np.int64)
        if width > self.seen.shape[1]:
            self.seen = np.hstack([self.seen, np.zeros((batch.n_agents, width - self.seen.shape[1]), np.int64)])
        rows, cols = np.nonzero(topics >= 0)
        np.add.at(self.seen, (rows, topics[rows, cols]), 1)

    def state_dict(self) -> dict:
        return {**super().state_dict(), "seen": None if self.seen is None else self.seen.copy()}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.seen = None if state["seen"] is None else np.array(state["seen"])

    def recommend(self, request: FeedRequest, rng: np.random.Generator) -> np.ndarray:
        k = request.k
        if not self.applies(request) or self.share == 0 or len(request.candidates) == 0:
            self._record(transferred=0)
            return self._base_lists(request, rng, k)
        content = request.content
        topic_col, author_col = content.column("topic"), content.column("author")
        long = self._base_lists(request, rng, k * self.overfetch)
        pool = request.candidates
        pool_topics = topic_col[pool]
        n_topics = int(max(pool_topics.max(initial=-1) + 1, 1))
        pool_count = np.bincount(pool_topics, minlength=n_topics)
        # newest pool items per topic (enough for any viewer after skipping own items)
        newest = {t: pool[pool_topics == t][::-1][: k + 1] for t in np.flatnonzero(pool_count)}
        seen = np.zeros((len(request.viewers), n_topics), np.int64)
        if self.seen is not None:
            w = min(n_topics, self.seen.shape[1])
            seen[:, :w] = self.seen[request.viewers, :w]
        out = np.full((len(request.viewers), k), EMPTY, dtype=np.int64)
        transferred = 0
        long_topics = np.where(long >= 0, topic_col[np.maximum(long, 0)], -1).tolist()
        long_l = long.tolist()
        for row, viewer in enumerate(request.viewers.tolist()):
            ranked, topics = long_l[row], long_topics[row]
            top = [(i, t) for i, t in zip(ranked[:k], topics[:k]) if i >= 0]
            quota = Counter(t for _, t in top)
            head = [t for t, _ in sorted(quota.items(), key=lambda x: (-x[1], x[0]))[: self.n_head]]
            give = {t: int(np.floor(self.share * quota[t] + 0.5)) for t in head}
            moved = sum(give.values())
            if moved == 0:
                out[row, :len(top)] = [i for i, _ in top]
                continue
            order_tail = sorted((t for t in np.flatnonzero(pool_count).tolist() if t not in head),
                                key=lambda t: (seen[row, t], pool_count[t], t))[: self.n_tail]
            if not order_tail:
                out[row, :len(top)] = [i for i, _ in top]
                continue
            keep, dropped = [], Counter()
            for i, t in reversed(top):                 # drop head items from the bottom up
                if t in give and dropped[t] < give[t]:
                    dropped[t] += 1
                else:
                    keep.append(i)
            keep.reverse()
            used = set(keep)
            position = {i: p for p, i in enumerate(ranked) if i >= 0}
            sources = {t: [i for i, tt in zip(ranked, topics) if tt == t and i >= 0] for t in order_tail}
            for t in order_tail:   # then the newest pool items of the topic, not the viewer's own
                sources[t] += [i for i in newest[t].tolist() if author_col[i] != viewer]
            fills, j, stalled = [], 0, 0
            while len(fills) < moved and stalled < len(order_tail):
                t = order_tail[j % len(order_tail)]
                j += 1
                src = sources[t]
                while src and src[0] in used:
                    src.pop(0)
                if src:
                    used.add(src[0])
                    fills.append(src.pop(0))
                    stalled = 0
                else:
                    stalled += 1
            final = sorted(keep + fills, key=lambda i: position.get(i, len(ranked)))
            out[row, :len(final)] = final
            transferred += len(fills)
        self._record(transferred=transferred)
        return out


def _codes(labels: Any) -> np.ndarray:
    """Integer codes of per-agent labels; -1 for unknown (None or NaN)."""
    values = list(labels)
    known = [v for v in values if v is not None and not (isinstance(v, float) and np.isnan(v))]
    lookup = {v: c for c, v in enumerate(sorted(set(known), key=repr))}
    return np.array([lookup.get(v, -1) for v in values], dtype=np.int64)


def _compact(lists: np.ndarray) -> np.ndarray:
    order = np.argsort(lists < 0, axis=1, kind="stable")
    return np.take_along_axis(lists, order, axis=1)


def _random_fill(request: FeedRequest, rng: np.random.Generator, kept: np.ndarray, n: int) -> np.ndarray:
    """(viewers, n) uniform pool items per viewer: not own, not in ``kept``, not repeated."""
    pool = request.candidates
    authors = request.content.column("author")
    viewers = request.viewers
    draws = pool[rng.integers(len(pool), size=(len(viewers), 3 * n + 8))]
    bad = authors[draws] == viewers[:, None]
    bad |= (draws[:, :, None] == kept[:, None, :]).any(axis=2)
    rows, cols, pos = first_per_row(~bad & ~repeats_in_rows(draws), n)
    out = np.full((len(viewers), n), EMPTY, dtype=np.int64)
    out[rows, pos] = draws[rows, cols]
    for row in np.flatnonzero((out >= 0).sum(axis=1) < n):   # rare: small pools
        allowed = pool[(authors[pool] != viewers[row]) & ~np.isin(pool, kept[row])]
        chosen = rng.choice(allowed, size=min(n, len(allowed)), replace=False) if len(allowed) else []
        out[row] = EMPTY
        out[row, :len(chosen)] = chosen
    return out
