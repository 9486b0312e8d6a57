"""Every agent's observation (specification §1): the structured dicts, the numeric feature arrays and the
action masks, built from the platform state after a step.

The numeric features are computed for all agents at once (the scale path); the structured
dicts are one Python dict per agent, meant for LLM-sized populations.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from socialgym.config import REWARD_NAMES, FeedConfig
from socialgym.envs.feed.buffers import BufferPool
from socialgym.envs.feed.encoding import (
    DM_FEATURES, FEED_ITEM_FEATURES, PHASES, SELF_FEATURES, ActionLayout, MaskCache,
)
from socialgym.platform.actions import ACTION_TYPES, COM, DM
from socialgym.platform.content import ContentStore
from socialgym.platform.topics import TopicVocabulary
from socialgym.ties import PairTable

_FEATURE_BLOCK_BYTES = 1 << 20   # per block of viewers: well inside L2


class Peers(Sequence):
    """The ids an agent may address: everyone but itself, without an n-sized copy per agent."""

    __slots__ = ("_ids", "_me")

    def __init__(self, ids: tuple[str, ...], me: int) -> None:
        self._ids, self._me = ids, me

    def __len__(self) -> int:
        return len(self._ids) - 1

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        return self._ids[i + (i >= self._me)]

    def __contains__(self, x) -> bool:
        return x != self._ids[self._me] and x in self._ids

    def __eq__(self, other) -> bool:
        return isinstance(other, Sequence) and list(self) == list(other)

    def __repr__(self) -> str:
        return f"Peers({list(self)!r})" if len(self) <= 20 else f"Peers(<{len(self)} agents>)"


@dataclass(frozen=True)
class ObservedState:
    """The platform state the observations show. Rows are agents; lists of content ids hold
    -1 in empty slots and are filled from slot 0."""

    round: int
    phase: str
    feed: np.ndarray                    # (n, feed_size)
    vote_items: np.ndarray              # (n, vote_feed_size)
    inbox: np.ndarray                   # (n, dm_inbox_size): last round's DMs, newest first
    inbox_ids: np.ndarray               # all of last round's DMs, grouped by recipient
    inbox_ptr: np.ndarray               # agent i's DMs: inbox_ids[inbox_ptr[i]:inbox_ptr[i + 1]]
    last_rewards: np.ndarray            # (n, 6): last round's reward components and total
    lambdas: np.ndarray                 # (n, 5)
    content: ContentStore
    vocab: TopicVocabulary
    tie_weights: PairTable              # W


class ObservationBuilder:
    """Builds the observations of all agents, keeping what later calls reuse: the action masks
    (shared between agents with equal masks), the current round's feed and inbox features and
    the buffers of the large feature arrays."""

    def __init__(self, config: FeedConfig, layout: ActionLayout, agent_ids: tuple[str, ...]) -> None:
        self.config, self.agent_ids = config, agent_ids
        self._mask_cache = MaskCache(layout)
        # agents per platform: the author features are indices within the platform (several
        # platforms stepped as one, socialgym.vector, number their agents consecutively)
        self.platform_size = layout.n_agents
        self.reset()

    def reset(self) -> None:
        """Drop the features and buffers of the previous episode."""
        self._buffers = BufferPool()
        self._feature_cache: tuple | None = None

    def observe(self, state: ObservedState) -> dict:
        """Every agent's observation in the configured ``obs_format``, by agent id."""
        cfg = self.config
        masks = self.masks(state) if cfg.action_masks else None
        numeric = self._numeric_rows(state) if cfg.obs_format != "structured" else None
        structured = self.structured(state) if cfg.obs_format != "numeric" else None
        obs = {}
        for i, agent in enumerate(self.agent_ids):
            if structured is not None:
                o = structured[i]
                if numeric is not None:
                    o["numeric"] = numeric(i)
            else:
                o = numeric(i)
            if masks is not None:
                o["action_mask"] = masks[i]
            obs[agent] = o
        return obs

    def masks(self, state: ObservedState) -> list:
        """Per-agent mask tuples (shared between agents with equal masks). The act phase's
        masks depend on the filled feed and inbox slots, the vote phase's on the filled vote
        slots only (the act part is inert there, as the env ignores it)."""
        cache = self._mask_cache
        if state.phase == "vote":
            codes, inverse = np.unique((state.vote_items >= 0).sum(axis=1), return_inverse=True)
            tuples = [cache.get(True, False, 0, 0, c, 0) for c in codes.tolist()]
        else:
            n_feed = (state.feed >= 0).sum(axis=1)
            n_dms = (state.inbox >= 0).sum(axis=1)
            D1 = self.config.dm_inbox_size + 1
            codes, inverse = np.unique(n_feed * D1 + n_dms, return_inverse=True)
            first, n_topics = state.round == 1, len(state.vocab)
            tuples = [cache.get(False, first, c // D1, c % D1, 0, n_topics) for c in codes.tolist()]
        return [tuples[j] for j in inverse.tolist()]

    # ---------------------------------------------------------------- numeric
    def numeric_arrays(self, state: ObservedState) -> dict:
        """The numeric observation of every agent as stacked arrays (row i = agent i)."""
        cfg = self.config
        n = cfg.n_agents
        me = np.arange(n)
        self_feat = np.empty((n, len(SELF_FEATURES)), np.float32)
        self_feat[:, 0] = state.round
        self_feat[:, 1] = cfg.max_rounds
        self_feat[:, 2] = PHASES.index(state.phase)
        self_feat[:, 3:8] = state.lambdas
        self_feat[:, 8:14] = state.last_rewards
        # Feed and inbox do not change between a round's act and vote observations (votes and
        # ties are applied after the vote step), so their features are computed once per round.
        # The env rebinds both arrays when a round closes (and restores them when a step fails),
        # so the arrays themselves tell whether the cached features are current.
        cache = self._feature_cache
        if cache is None or cache[0] is not state.feed or cache[1] is not state.inbox:
            self._feature_cache = None   # releases last round's arrays for reuse
            self._feature_cache = (state.feed, state.inbox, self._item_features(state, state.feed, me, "feed"),
                                   self._dm_features(state, me))
        _, _, feed, dms = self._feature_cache
        return {"phase": PHASES.index(state.phase), "round": state.round, "self": self_feat,
                "feed": feed, "dms": dms,
                "vote_items": self._item_features(state, state.vote_items, me, "vote_items")}

    def _numeric_rows(self, state: ObservedState):
        """``row(i)``: agent i's numeric observation, views into the stacked arrays."""
        arrays = self.numeric_arrays(state)
        phase, rnd = arrays["phase"], arrays["round"]
        self_feat, feed, dms, votes = arrays["self"], arrays["feed"], arrays["dms"], arrays["vote_items"]

        def row(i: int) -> dict:
            return {"phase": phase, "round": rnd, "self": self_feat[i], "feed": feed[i],
                    "dms": dms[i], "vote_items": votes[i]}
        return row

    def _item_features(self, state: ObservedState, ids: np.ndarray, me: np.ndarray, key: str) -> np.ndarray:
        """FEED_ITEM_FEATURES of public items shown to each viewer (rows of ``ids``)."""
        c, n = state.content, self.config.n_agents
        mention_keys = c.mention_keys(n)

        def columns(safe, viewers, author, tie_out, tie_in):
            if len(mention_keys):
                probe = _slot_major(safe * n + viewers[:, None])
                pos = np.minimum(np.searchsorted(mention_keys, probe), len(mention_keys) - 1)
                mention_me = _from_slot_major(mention_keys[pos] == probe, safe.shape)
            else:
                mention_me = False
            return [1.0, author, c.column("topic")[safe], c.column("kind")[safe] == COM,
                    c.column("likes")[safe], c.column("dislikes")[safe],
                    state.round - c.column("round")[safe], tie_out, tie_in, mention_me]
        return self._shown_features(state, ids, me, len(FEED_ITEM_FEATURES), columns, key)

    def _dm_features(self, state: ObservedState, me: np.ndarray) -> np.ndarray:
        """DM_FEATURES of the inbox."""
        c = state.content

        def columns(safe, viewers, author, tie_out, tie_in):
            return [1.0, author, c.column("topic")[safe], c.column("sentiment")[safe], tie_out, tie_in]
        return self._shown_features(state, state.inbox, me, len(DM_FEATURES), columns, "dms")

    def _shown_features(self, state: ObservedState, ids: np.ndarray, me: np.ndarray, width: int, columns,
                        key: str) -> np.ndarray:
        """(viewers, slots, width) features of shown content; empty slots: present 0, author
        and topic -1. ``columns(safe_ids, viewers, author, tie_out, tie_in)`` lists the feature
        columns of a block of viewers."""
        feats = self._buffers.empty(key, ids.shape + (width,), np.float32)
        any_shown = bool((ids >= 0).any())
        # Viewers are processed in blocks whose feature rows fit in cache: writing the columns
        # of an interleaved (viewers, slots, width) array is otherwise one pass over main memory
        # per column, which made 100k agents 25x slower than 10k instead of 10x.
        block = max(1, _FEATURE_BLOCK_BYTES // max(1, feats[0].nbytes))
        for start in range(0, len(ids), block):
            out = feats[start:start + block]
            out[...] = 0
            out[..., 1:3] = -1
            if any_shown:
                self._shown_block(state, ids[start:start + block], me[start:start + block], out, columns)
        return feats

    def _shown_block(self, state: ObservedState, ids: np.ndarray, viewers: np.ndarray, out: np.ndarray,
                     columns) -> None:
        n = self.config.n_agents
        present = ids >= 0
        safe = np.maximum(ids, 0)
        author = state.content.column("author")[safe].astype(np.int64, copy=False)
        # (viewer, author) keys only touch the block's rows of the tie table, a cache-sized
        # slice; (author, viewer) keys are probed slot by slot: viewers in a slot often share
        # the author, so probes arrive nearly sorted and the binary searches stay in cache.
        rows = (int(viewers.min()), int(viewers.max()) + 1)
        tie_out = state.tie_weights.lookup((viewers[:, None] * n + author).ravel(), src_range=rows)
        tie_out = tie_out.reshape(ids.shape)
        tie_in = _from_slot_major(state.tie_weights.lookup(_slot_major(author * n + viewers[:, None])),
                                  ids.shape)
        full = bool(present.all())
        shown_author = author if self.platform_size == n else author % self.platform_size
        for j, col in enumerate(columns(safe, viewers, shown_author, tie_out, tie_in)):
            out[..., j] = col if full else np.where(present, col, out[..., j])

    # ---------------------------------------------------------------- structured
    def structured(self, state: ObservedState) -> list[dict]:
        """Every agent's structured observation (row i = agent i)."""
        cfg = self.config
        shown = np.concatenate([state.feed.ravel(), state.vote_items.ravel(), state.inbox_ids])
        base = self._item_dicts(state, np.unique(shown[shown >= 0]))
        topics = state.vocab.names
        last_rows = state.last_rewards.tolist()
        lambda_rows = state.lambdas.tolist()
        names = REWARD_NAMES + ("total",)
        ptr = state.inbox_ptr
        out = []
        for i, agent in enumerate(self.agent_ids):
            feed = [_copy_item(base[j]) for j in state.feed[i].tolist() if j >= 0]
            votes = [_copy_item(base[j]) for j in state.vote_items[i].tolist() if j >= 0]
            dms = [dict(base[j]) for j in state.inbox_ids[ptr[i]:ptr[i + 1]].tolist()]
            out.append({
                "phase": state.phase, "round": state.round, "agent": agent, "n_actions": cfg.n_actions,
                "users": Peers(self.agent_ids, i), "feed": feed, "dms": dms, "topics": topics,
                "last_rewards": dict(zip(names, last_rows[i])),
                "lambdas": dict(zip(REWARD_NAMES, lambda_rows[i])), "vote_items": votes,
            })
        return out

    def _item_dicts(self, state: ObservedState, ids: np.ndarray) -> dict[int, dict]:
        c = state.content
        ids_l = ids.tolist()
        kind = c.column("kind")[ids].tolist()
        author = c.column("author")[ids].tolist()
        recipient = c.column("recipient")[ids].tolist()
        topic = c.column("topic")[ids].tolist()
        target = c.column("target_id")[ids].tolist()
        likes = c.column("likes")[ids].tolist()
        dislikes = c.column("dislikes")[ids].tolist()
        rnd = c.column("round")[ids].tolist()
        names, agents = state.vocab.names, self.agent_ids
        out = {}
        for k, cid in enumerate(ids_l):
            if kind[k] == DM:
                out[cid] = {"id": cid, "type": "DM", "author": agents[author[k]],
                            "recipient": agents[recipient[k]], "topic": names[topic[k]],
                            "text": c.texts[cid], "target_id": target[k] if target[k] >= 0 else None,
                            "round": rnd[k]}
            else:
                out[cid] = {"id": cid, "type": ACTION_TYPES[kind[k]], "author": agents[author[k]],
                            "topic": names[topic[k]], "text": c.texts[cid],
                            "target_id": target[k] if target[k] >= 0 else None,
                            "mentions": [agents[m] for m in c.mentions_of(cid)],
                            "likes": likes[k], "dislikes": dislikes[k], "round": rnd[k]}
        return out


def _slot_major(keys: np.ndarray) -> np.ndarray:
    """(viewers, slots) -> flat in slot-major order."""
    return keys.T.ravel()


def _from_slot_major(flat: np.ndarray, shape: tuple) -> np.ndarray:
    return flat.reshape(shape[::-1]).T


def _copy_item(item: dict) -> dict:
    copy = dict(item)
    copy["mentions"] = list(item["mentions"])
    return copy
