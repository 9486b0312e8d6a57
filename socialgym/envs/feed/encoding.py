"""The numeric encoding of actions and observations, for neural policies (specification §1).

One flat integer vector per agent carries both phases (the part of the other phase is ignored):

    act part, per slot s < N (C = 6 + F fields each):
        type         4      POST, COM, DM, NOT
        target_slot  F      the feed slot a COM replies to
        recipient    n-1    a new DM goes to agent (self + 1 + value) mod n — never oneself
        reply_slot   D+1    0 = new DM; j = reply to DM j-1 of the inbox (recipient = its author)
        topic        Kt     index into the topic vocabulary (a COM takes its target's topic)
        tone         3      supportive, neutral, critical
        mention_j    2 x F  1 = mention the author of feed slot j (POST and COM)
    vote part, per vote slot v < V:
        vote         3      0 = -1 (dislike), 1 = 0 (no vote), 2 = +1 (like)

This is a ``gymnasium.spaces.MultiDiscrete``; with ``action_masks`` the observation carries the
per-dimension masks that make every masked sample a valid action. Every component allows at
least one value (so a masked softmax over any component is well defined): a component that no
allowed action type reads in this state (the other phase's components, ``target_slot`` when no
COM is possible, ``recipient``/``reply_slot`` when no DM is, ...) allows exactly its no-op value
``ActionLayout.noop`` (NOT, slot/index 0, neutral tone, no mention, no vote). The one state
without any valid numeric action — round 1 with an empty topic vocabulary (a numeric action
cannot introduce a topic, and round 1 allows only POST) — has all-zero ``type`` and ``topic``
masks.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

PHASES = ("act", "vote")    # the numeric observation's ``phase`` is an index into this
FIELDS = ("type", "target_slot", "recipient", "reply_slot", "topic", "tone")
FEED_ITEM_FEATURES = ("present", "author", "topic", "is_comment", "likes", "dislikes", "age",
                      "tie_out", "tie_in", "mentions_me")
DM_FEATURES = ("present", "author", "topic", "sentiment", "tie_out", "tie_in")
NOOP_TYPE = 3      # NOT
NOOP_TONE = 1      # neutral
NO_VOTE = 1        # vote code of "no vote"
SELF_FEATURES = ("round", "max_rounds", "phase", "lambda_SOC", "lambda_INF", "lambda_PRE",
                 "lambda_COORD", "lambda_EMO", "last_SOC", "last_INF", "last_PRE", "last_COORD",
                 "last_EMO", "last_total")


@dataclass(frozen=True)
class ActionLayout:
    n_agents: int
    n_actions: int
    feed_size: int
    dm_inbox_size: int
    max_topics: int
    vote_feed_size: int

    @property
    def slot_width(self) -> int:
        return len(FIELDS) + self.feed_size

    @property
    def act_length(self) -> int:
        return self.n_actions * self.slot_width

    @property
    def length(self) -> int:
        return self.act_length + self.vote_feed_size

    @cached_property
    def slot_nvec(self) -> np.ndarray:
        return np.array([4, self.feed_size, self.n_agents - 1, self.dm_inbox_size + 1,
                         self.max_topics, 3] + [2] * self.feed_size, dtype=np.int64)

    @cached_property
    def nvec(self) -> np.ndarray:
        return np.concatenate([np.tile(self.slot_nvec, self.n_actions),
                               np.full(self.vote_feed_size, 3, dtype=np.int64)])

    @cached_property
    def slot_noop(self) -> np.ndarray:
        """The no-op value of each act-slot component: type NOT, target slot 0, recipient 0,
        reply slot 0 (a new DM), topic 0, tone neutral, no mentions."""
        noop = np.zeros(self.slot_width, dtype=np.int64)
        noop[0], noop[5] = NOOP_TYPE, NOOP_TONE
        noop.flags.writeable = False
        return noop

    @cached_property
    def noop(self) -> np.ndarray:
        """The action that does nothing: NOT in every slot and no vote on any vote slot. Valid
        in every state but round 1's act phase (round 1 allows only POST); an inert component's
        mask allows exactly its value here."""
        noop = np.concatenate([np.tile(self.slot_noop, self.n_actions),
                               np.full(self.vote_feed_size, NO_VOTE, dtype=np.int64)])
        noop.flags.writeable = False
        return noop

    def field_name(self, column: int) -> str:
        if column < len(FIELDS):
            return FIELDS[column]
        return f"mention_{column - len(FIELDS)}"

    def split(self, flat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(rows, L) -> act part (rows, N, C) and vote part (rows, V)."""
        act = flat[:, : self.act_length].reshape(len(flat), self.n_actions, self.slot_width)
        return act, flat[:, self.act_length:]


class MaskCache:
    """Action masks depend only on a few counts, so agents share identical tuples of arrays.

    Key: (vote phase?, round 1?, filled feed slots, filled inbox slots, filled vote slots,
    vocabulary size); in the vote phase only the vote slots matter, in the act phase the vote
    part is inert. Feeds, inboxes and vote lists are always filled from slot 0 (the env
    compacts them).
    """

    def __init__(self, layout: ActionLayout) -> None:
        self.layout = layout
        self._cache: dict[tuple, tuple[np.ndarray, ...]] = {}
        self._ones_recipient = _frozen(np.ones(layout.n_agents - 1, dtype=np.int8))
        # the inert mask of each act component: only its no-op value allowed
        self._inert_slot = tuple(_frozen(np.eye(1, int(size), int(value), dtype=np.int8).ravel())
                                 for size, value in zip(layout.slot_nvec, layout.slot_noop))
        self._any_vote = _frozen(np.ones(3, dtype=np.int8))
        self._no_vote = _frozen(np.eye(1, 3, NO_VOTE, dtype=np.int8).ravel())

    def get(self, vote_phase: bool, first_round: bool, n_feed: int, n_dms: int, n_votes: int, n_topics: int):
        if vote_phase:
            key = (True, False, 0, 0, n_votes, 0)
        else:
            key = (False, first_round, n_feed, n_dms, 0, min(n_topics, self.layout.max_topics))
        masks = self._cache.get(key)
        if masks is None:
            masks = self._build(*key)
            self._cache[key] = masks
        return masks

    def _build(self, vote_phase, first_round, n_feed, n_dms, n_votes, n_topics):
        lay = self.layout
        F, D = lay.feed_size, lay.dm_inbox_size
        V = lay.vote_feed_size
        inert = self._inert_slot
        if vote_phase:
            votes = tuple(self._any_vote if v < n_votes else self._no_vote for v in range(V))
            return inert * lay.n_actions + votes

        def prefix(size, filled):
            m = np.zeros(size, dtype=np.int8)
            m[:filled] = 1
            return _frozen(m)

        has_topics = n_topics > 0
        post = has_topics
        com = not first_round and n_feed > 0
        dm = not first_round and has_topics
        type_mask = _frozen(np.array([post, com, dm, not first_round], dtype=np.int8))
        if not type_mask.any():
            # round 1 with an empty vocabulary: no valid numeric action exists, and the masks say so
            topic = prefix(lay.max_topics, 0)
        else:
            topic = prefix(lay.max_topics, n_topics) if has_topics else inert[4]   # POST and DM read it
        target = prefix(F, n_feed) if com else inert[1]
        recipient = self._ones_recipient if dm else inert[2]
        reply = prefix(D + 1, n_dms + 1) if dm else inert[3]
        tone = prefix(3, 3) if post or com or dm else inert[5]
        on = prefix(2, 2)
        mentions = tuple(on if (post or com) and j < n_feed else inert[len(FIELDS) + j] for j in range(F))
        slot = (type_mask, target, recipient, reply, topic, tone) + mentions
        return slot * lay.n_actions + (self._no_vote,) * V


def _frozen(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array
