"""The numeric encoding of actions and observations, for neural policies (SPEC §1).

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
per-dimension masks that make every masked sample a valid action.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

FIELDS = ("type", "target_slot", "recipient", "reply_slot", "topic", "tone")
FEED_ITEM_FEATURES = ("present", "author", "topic", "is_comment", "likes", "dislikes", "age",
                      "tie_out", "tie_in", "mentions_me")
DM_FEATURES = ("present", "author", "topic", "sentiment", "tie_out", "tie_in")
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

    Key: (round 1?, filled feed slots, filled inbox slots, filled vote slots, usable topics).
    Feeds, inboxes and vote lists are always filled from slot 0 (the env compacts them).
    """

    def __init__(self, layout: ActionLayout) -> None:
        self.layout = layout
        self._cache: dict[tuple, tuple[np.ndarray, ...]] = {}
        self._ones_recipient = np.ones(layout.n_agents - 1, dtype=np.int8)
        self._ones_recipient.flags.writeable = False

    def get(self, first_round: bool, n_feed: int, n_dms: int, n_votes: int, n_topics: int):
        key = (first_round, n_feed, n_dms, n_votes, n_topics)
        masks = self._cache.get(key)
        if masks is None:
            masks = self._build(*key)
            self._cache[key] = masks
        return masks

    def _build(self, first_round, n_feed, n_dms, n_votes, n_topics):
        lay = self.layout
        F, D = lay.feed_size, lay.dm_inbox_size

        def prefix(size, filled):
            m = np.zeros(size, dtype=np.int8)
            m[:filled] = 1
            m.flags.writeable = False
            return m

        type_mask = np.zeros(4, dtype=np.int8)
        if first_round:
            type_mask[0] = n_topics > 0
        else:
            type_mask[:] = [n_topics > 0, n_feed > 0, n_topics > 0, 1]
        type_mask.flags.writeable = False
        reply = prefix(D + 1, n_dms + 1)
        off, on = prefix(2, 1), prefix(2, 2)
        mentions = tuple(on if j < n_feed else off for j in range(F))
        slot = (type_mask, prefix(F, n_feed), self._ones_recipient, reply,
                prefix(lay.max_topics, min(n_topics, lay.max_topics)), prefix(3, 3)) + mentions
        no_vote = np.array([0, 1, 0], dtype=np.int8)
        any_vote = prefix(3, 3)
        votes = tuple(any_vote if v < n_votes else no_vote for v in range(lay.vote_feed_size))
        return slot * lay.n_actions + votes
