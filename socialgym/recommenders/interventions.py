"""Re-ranking interventions, composable on top of any recommender.

Each wraps a built recommender and changes its lists; wrappers nest
(``StancePenalty(RandomReplacement(MatrixFactorization(), n=1), stances, 0.4)``). Every
wrapper counts what it did: ``last`` (the latest call) and ``counts`` (cumulative), which the
environment copies into ``infos``/``last_round`` so runs can check and log the dose.

* :class:`RandomReplacement` — recagent's Rec-Strategy: every ``every`` rounds, replace ``n``
  of the ``k`` items (the lowest-ranked) with uniformly random ones.
* :class:`QuotaTransfer` and its three strategies, agentsociety2 §7.4: move ``share`` (30%) of
  the slots of the viewer's ``n_head`` (10) head topics to ``n_tail`` (10) target topics —
  :class:`TailQuotaTransfer` (the bottom topics), :class:`EfficiencyBoost` (the topics the
  viewer engages with most per exposure), :class:`UnderServedBoost` (high efficiency, low
  platform-wide recommendation volume).
* :class:`StancePenalty` — agentsociety2's ``algorithm_filter_strength``: a ranking penalty of
  strength ``s`` for items whose author's stance differs from the viewer's.

The Soc-Strategy (seed ties to agents of different interests) changes the tie graph, not the
ranking: see the environment options ``soc_strategy`` / ``agent_interests``.
"""

from __future__ import annotations

from abc import abstractmethod
from collections import Counter
from dataclasses import replace
from typing import Any

import numpy as np

from socialgym.recommenders.base import EMPTY, FeedRequest, Recommender, as_recommender
from socialgym.platform.actions import COM
from socialgym.recommenders.params import (
    Param, check_own, check_phases, check_stances, check_user_mask, limited,
)
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


class QuotaTransfer(Reranker):
    """Base of agentsociety2's three quota re-rankers (§7.4): move a share of the head
    categories' slots to target categories, then re-rank under the new quotas.

    Per re-ranked viewer, vectorised over viewers:

    1. Quotas: the wrapped recommender's top k give each topic (category) its number of slots
       ``q_c``. The head is the ``n_head`` topics with the most slots (ties: lower topic id).
    2. Transfer: ``T = round(share * sum of the head's q_c)`` slots (half up), taken from the
       head topics by largest remainder of ``share * q_c`` (ties: larger quota, lower id); each
       gives up its lowest-ranked items.
    3. Targets: up to ``n_tail`` topics outside the head with items in the pool, in the order of
       the subclass's :meth:`target_keys`; the ``T`` slots are dealt round-robin in that order
       (the first ``T mod m`` of ``m`` targets get one more).
    4. Re-rank: every topic keeps its best items, up to its new quota, in the wrapped
       recommender's longer list (``overfetch * k``); a target short of items there takes the
       topic's newest pool items that are not the viewer's own. Slots a target cannot fill go
       back to the wrapped recommender's next items. Items keep the wrapped order; pool-only
       items come last, by topic id, newest first.

    With fewer topics than ``n_head + n_tail`` the numbers clip: the head is at most the topics
    that have slots, the targets at most the pool's other topics (with a k-item list all the
    shown topics are often the head, and the targets come from the topics not shown).
    ``users``: None (every viewer) or one boolean per agent; the paper aimed the strategies at
    its most cocoon-prone group (users aged 50+). Statistics learnt in :meth:`update` from each
    round's act-phase feed: ``seen[u, c]`` (items of topic c shown to u) and ``watched[u, c]``
    (those u commented on). ``last["transferred"]`` counts slots given to target topics.
    """

    PARAMS = {"share": Param("number", low=0, high=1), "n_head": limited("int", "n_head", 1),
              "n_tail": limited("int", "n_tail", 1), "overfetch": limited("int", "overfetch", 1),
              "users": Param("custom", none_ok=True, check=check_user_mask)}

    def __init__(self, base: Any, share: float = 0.3, n_head: int = 10, n_tail: int = 10,
                 overfetch: int = 3, users: Any = None, phases: tuple[str, ...] = ("act",)) -> None:
        super().__init__(base, phases)
        check_own(QuotaTransfer, share=share, n_head=n_head, n_tail=n_tail, overfetch=overfetch, users=users)
        self.share, self.n_head, self.n_tail, self.overfetch = float(share), int(n_head), int(n_tail), int(overfetch)
        self.users = None if users is None else np.array([bool(u) for u in users], dtype=bool)
        self.seen: np.ndarray | None = None          # (n, topics) feed exposures per viewer
        self.watched: np.ndarray | None = None       # (n, topics) feed items commented on

    # ---- learnt statistics -----------------------------------------------------------------
    def reset(self) -> None:
        super().reset()
        self.seen = self.watched = None

    def update(self, content, batch, rng) -> None:
        super().update(content, batch, rng)
        topics, feed = batch.feed_topics, batch.feed
        width = max(int(topics.max(initial=-1)) + 1, 1)
        self._grow(batch.n_agents, width)
        rows, cols = np.nonzero(topics >= 0)
        np.add.at(self.seen, (rows, topics[rows, cols]), 1)
        com = (batch.kind == COM) & (batch.target_id >= 0)
        sender, target = batch.sender[com].astype(np.int64), batch.target_id[com].astype(np.int64)
        shown = (feed[sender] == target[:, None]).any(axis=1) if len(sender) and feed.shape[1] else []
        if np.any(shown):
            pairs = np.unique(np.stack([sender[shown], target[shown]], axis=1), axis=0)
            t = content.column("topic")[pairs[:, 1]].astype(np.int64)
            self._grow(batch.n_agents, int(t.max(initial=-1)) + 1)
            np.add.at(self.watched, (pairs[:, 0], t), 1)

    def _grow(self, n: int, width: int) -> None:
        if self.seen is None:
            self.seen, self.watched = np.zeros((n, 0), np.int64), np.zeros((n, 0), np.int64)
        extra = width - self.seen.shape[1]
        if extra > 0:
            self.seen = np.hstack([self.seen, np.zeros((n, extra), np.int64)])
            self.watched = np.hstack([self.watched, np.zeros((n, extra), np.int64)])

    def stats(self, viewers: np.ndarray, n_topics: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(seen, watched) of ``viewers`` as (len, n_topics) arrays, and the platform's feed
        exposures per topic (all viewers), zeros before any update."""
        seen, watched = np.zeros((len(viewers), n_topics)), np.zeros((len(viewers), n_topics))
        volume = np.zeros(n_topics)
        if self.seen is not None:
            w = min(n_topics, self.seen.shape[1])
            seen[:, :w], watched[:, :w] = self.seen[viewers, :w], self.watched[viewers, :w]
            volume[:w] = self.seen[:, :w].sum(axis=0)
        return seen, watched, volume

    def state_dict(self) -> dict:
        copy = (lambda a: None if a is None else a.copy())
        return {**super().state_dict(), "seen": copy(self.seen), "watched": copy(self.watched)}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.seen = None if state["seen"] is None else np.array(state["seen"], dtype=np.int64)
        watched = state.get("watched")         # checkpoints written before watched existed
        self.watched = (None if self.seen is None else np.zeros_like(self.seen) if watched is None
                        else np.array(watched, dtype=np.int64))

    # ---- the strategy ------------------------------------------------------------------------
    @abstractmethod
    def target_keys(self, quota: np.ndarray, seen: np.ndarray, watched: np.ndarray, volume: np.ndarray,
                    pool_count: np.ndarray) -> tuple[np.ndarray, ...]:
        """Sort keys of each viewer's candidate targets, most important last (``np.lexsort``
        order); smaller sorts first. Arrays broadcastable to (viewers, topics). Each strategy
        (a subclass) says which topics receive the moved slots."""

    def recommend(self, request: FeedRequest, rng: np.random.Generator) -> np.ndarray:
        k = request.k
        if not self.applies(request) or self.share == 0 or len(request.candidates) == 0:
            self._record(transferred=0)
            return self._base_lists(request, rng, k)
        if self.users is not None and len(self.users) != request.n_agents:
            raise ValueError(f"{type(self).__name__} has {len(self.users)} users flags for {request.n_agents} agents")
        viewers = np.asarray(request.viewers, dtype=np.int64)
        on = np.ones(len(viewers), bool) if self.users is None else self.users[viewers]
        long = self._base_lists(request, rng, k * self.overfetch)
        topic_col = request.content.column("topic").astype(np.int64)
        pool_topics = topic_col[request.candidates]
        n_topics = int(pool_topics.max(initial=-1)) + 1
        if self.seen is not None:
            n_topics = max(n_topics, self.seen.shape[1])
        pool_count = np.bincount(pool_topics, minlength=n_topics)
        long_t = np.where(long >= 0, topic_col[np.maximum(long, 0)], -1)
        quota = _row_counts(long_t[:, :k], n_topics)
        head, give = _head_and_give(quota, self.n_head, self.share, on)
        seen, watched, volume = self.stats(viewers, n_topics)
        keys = self.target_keys(quota, seen, watched, volume, pool_count)
        alloc = _deal(give.sum(axis=1), keys, ~head & (pool_count > 0)[None, :], self.n_tail)
        out, transferred = _fill(request, long, long_t, quota - give + alloc, alloc > 0, k)
        self._record(transferred=transferred)
        return out


class TailQuotaTransfer(QuotaTransfer):
    """agentsociety2's Tail QuotaTransfer (§7.4, strategy 1): ``share`` (30%) of the slots of
    the viewer's top-``n_head`` (10) topics go to its bottom-``n_tail`` (10) topics.

    Bottom = the fewest slots in the wrapped recommender's top k; ties (typically the many
    topics with no slot) by the fewest items shown to the viewer so far, then the topic rarest
    in the pool, then topic id. The mechanics are those of :class:`QuotaTransfer`.
    """

    def target_keys(self, quota, seen, watched, volume, pool_count):
        ids = np.arange(quota.shape[1])[None, :]
        return ids, pool_count[None, :], seen, quota


class EfficiencyBoost(QuotaTransfer):
    """agentsociety2's Efficiency Boost (§7.4, strategy 2): ``share`` (30%) of the slots of the
    top-``n_head`` (10) topics go to the ``n_tail`` (10) non-head topics with the highest
    engagement efficiency ``rho = watched / seen`` of this viewer.

    ``rho`` is shrunk towards the viewer's overall rate ``W / E`` with ``prior_weight``
    pseudo-exposures: ``rho_c = (w_c + m * W / E) / (e_c + m)`` (``W / E = 0`` before any
    exposure), so a topic never shown ranks at the viewer's average, not at 0 or 1. Ties: the
    fewer items shown, then topic id. Mechanics: :class:`QuotaTransfer`.
    """

    PARAMS = {"prior_weight": Param("number", low=0)}

    def __init__(self, base: Any, share: float = 0.3, n_head: int = 10, n_tail: int = 10,
                 overfetch: int = 3, users: Any = None, prior_weight: float = 1.0,
                 phases: tuple[str, ...] = ("act",)) -> None:
        super().__init__(base, share, n_head, n_tail, overfetch, users, phases)
        check_own(EfficiencyBoost, prior_weight=prior_weight)
        self.prior_weight = float(prior_weight)

    def efficiency(self, seen: np.ndarray, watched: np.ndarray) -> np.ndarray:
        """Shrunk ``rho`` per (viewer, topic)."""
        total_e, total_w = seen.sum(axis=1, keepdims=True), watched.sum(axis=1, keepdims=True)
        overall = np.divide(total_w, total_e, out=np.zeros_like(total_w), where=total_e > 0)
        num, den = watched + self.prior_weight * overall, seen + self.prior_weight
        return np.divide(num, den, out=np.broadcast_to(overall, seen.shape).copy(), where=den > 0)

    def target_keys(self, quota, seen, watched, volume, pool_count):
        ids = np.arange(quota.shape[1])[None, :]
        return ids, seen, -self.efficiency(seen, watched)


class UnderServedBoost(EfficiencyBoost):
    """agentsociety2's UnderServedBoost (§7.4, strategy 3): ``share`` (30%) of the slots of the
    top-``n_head`` (10) topics go to the ``n_tail`` (10) non-head topics of highest potential,
    high efficiency combined with low recommendation volume:

        potential_c = rho_c * (1 - v_c / max_c' v_c')

    with ``rho_c`` this viewer's shrunk efficiency (:class:`EfficiencyBoost`) and ``v_c`` the
    platform's feed exposures of topic c so far (all viewers; ``1 - v/max`` is 1 for a topic
    never recommended, 0 for the most recommended one). Ties: the fewer items shown to the
    viewer, then topic id. Mechanics: :class:`QuotaTransfer`.
    """

    def target_keys(self, quota, seen, watched, volume, pool_count):
        ids = np.arange(quota.shape[1])[None, :]
        top = volume.max(initial=0.0)
        under = 1.0 - (volume / top if top > 0 else np.zeros_like(volume))
        return ids, seen, -self.efficiency(seen, watched) * under[None, :]


def _row_counts(values: np.ndarray, width: int) -> np.ndarray:
    """(rows, width) counts of each value 0..width-1 per row; negative entries ignored."""
    n = values.shape[0]
    rows, cols = np.nonzero(values >= 0)
    flat = np.bincount(rows * width + values[rows, cols], minlength=n * width)
    return flat.reshape(n, width)


def _head_and_give(quota: np.ndarray, n_head: int, share: float, on: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Head mask (top ``n_head`` topics by slots, ties lower id, slots > 0) and the slots each
    head topic gives up: ``round(share * head total)`` split by largest remainder."""
    n, width = quota.shape
    ids = np.broadcast_to(np.arange(width), quota.shape)
    order = np.lexsort((ids, -quota), axis=1)
    head = np.zeros(quota.shape, bool)
    np.put_along_axis(head, order[:, :n_head], True, axis=1)
    head &= (quota > 0) & on[:, None]
    exact = share * quota * head
    total = np.floor(exact.sum(axis=1) + 0.5 + 1e-9).astype(np.int64)
    give = np.floor(exact + 1e-9).astype(np.int64)
    extra = total - give.sum(axis=1)
    rem = np.where(head, exact - give, -1.0)
    by_rem = np.lexsort((ids, -quota, -rem), axis=1)
    rank = np.empty_like(by_rem)
    np.put_along_axis(rank, by_rem, np.broadcast_to(np.arange(width), quota.shape), axis=1)
    give += (head & (rank < extra[:, None])).astype(np.int64)
    return head, give


def _deal(total: np.ndarray, keys: tuple, allowed: np.ndarray, n_tail: int) -> np.ndarray:
    """(viewers, topics) slots for the targets: the first ``n_tail`` allowed topics in ``keys``
    order get ``total`` round-robin."""
    n, width = allowed.shape
    full = [np.broadcast_to(key, (n, width)) for key in keys]
    order = np.lexsort(tuple(full) + (~allowed,), axis=1)       # allowed first, then by keys
    m = np.minimum(allowed.sum(axis=1), n_tail)
    j = np.arange(width)[None, :]
    m_safe = np.maximum(m, 1)[:, None]
    per = np.where(j < m[:, None], total[:, None] // m_safe + (j < total[:, None] % m_safe), 0)
    alloc = np.zeros((n, width), np.int64)
    np.put_along_axis(alloc, order, per, axis=1)
    return alloc


def _fill(request: FeedRequest, long: np.ndarray, long_t: np.ndarray, new_quota: np.ndarray,
          target: np.ndarray, k: int) -> tuple[np.ndarray, int]:
    """The re-ranked (viewers, k) lists under ``new_quota`` and the number of target slots filled."""
    viewers = np.asarray(request.viewers, dtype=np.int64)
    base_len = (long[:, :k] >= 0).sum(axis=1)
    short = target & (new_quota > _row_counts(long_t, new_quota.shape[1]))
    extra = _newest_block(request, np.flatnonzero(short.any(axis=0)), k + long.shape[1])
    ids = np.concatenate([long, np.broadcast_to(extra, (len(viewers), len(extra)))], axis=1)
    topic_col, author_col = request.content.column("topic"), request.content.column("author")
    ok = ids >= 0
    ok[:, long.shape[1]:] &= (author_col[np.maximum(ids[:, long.shape[1]:], 0)] != viewers[:, None])
    ok &= ~repeats_in_rows(np.where(ok, ids, -1 - np.arange(ids.shape[1])[None, :]))
    topics = np.where(ok, topic_col[np.maximum(ids, 0)], -1).astype(np.int64)
    keep = ok & (_rank_in_topic(topics) < np.take_along_axis(new_quota, np.maximum(topics, 0), axis=1))
    deficit = base_len - keep.sum(axis=1)
    spare = ok & ~keep
    spare[:, long.shape[1]:] = False
    keep |= spare & (np.cumsum(spare, axis=1) <= deficit[:, None])
    gained = np.take_along_axis(target, np.maximum(topics, 0), axis=1) & keep
    transferred = int(np.maximum(_row_counts(np.where(gained, topics, -1), new_quota.shape[1])
                                 - _row_counts(long_t[:, :k], new_quota.shape[1]), 0).sum())
    return _compact(np.where(keep, ids, EMPTY))[:, :k], transferred


def _newest_block(request: FeedRequest, topics: np.ndarray, need: int) -> np.ndarray:
    """For each topic of ``topics``, its newest pool items — enough that ``need`` remain after
    leaving out any one author's — concatenated (a shared block of candidate ids)."""
    pool = request.candidates
    topic_col, author_col = request.content.column("topic"), request.content.column("author")
    blocks = []
    for t in topics.tolist():
        items = pool[topic_col[pool] == t][::-1]
        window = min(len(items), need)
        while window < len(items):
            most = int(np.bincount(author_col[items[:window]]).max())
            if need + most <= window:
                break
            window = min(len(items), need + most)
        blocks.append(items[:window])
    return np.concatenate(blocks).astype(np.int64) if blocks else np.zeros(0, np.int64)


def _rank_in_topic(topics: np.ndarray) -> np.ndarray:
    """Per cell, how many cells of the same topic (>= 0) come before it in its row."""
    n, m = topics.shape
    key = np.arange(n)[:, None] * (int(topics.max(initial=0)) + 2) + topics + 1
    flat = key.ravel()
    order = np.argsort(flat, kind="stable")
    srt = flat[order]
    start = np.r_[0, np.flatnonzero(srt[1:] != srt[:-1]) + 1]
    first = np.repeat(start, np.diff(np.r_[start, len(srt)]))
    rank = np.empty(len(flat), np.int64)
    rank[order] = np.arange(len(flat)) - first
    return rank.reshape(n, m)


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
