"""Action codes and the columnar record of one round (the batch ``B_t`` of specification §3)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from functools import cached_property

import numpy as np

# Action type codes; the numeric action encoding uses the same numbers.
POST, COM, DM, NOT = 0, 1, 2, 3
ACTION_TYPES: tuple[str, ...] = ("POST", "COM", "DM", "NOT")
CONTENT_TYPES: tuple[str, ...] = ACTION_TYPES[:NOT]
"""POST, COM, DM: the types that create content (NOT creates nothing and is not stored)."""
PUBLIC_TYPES: tuple[str, ...] = ACTION_TYPES[:DM]
"""POST, COM: public content (B_t^PUB); DMs are private."""
TONES: tuple[str, ...] = ("supportive", "neutral", "critical")
TONE_SENTIMENT = np.array([1.0, 0.0, -1.0])  # s(a) of an action without text (specification §1)

_I32 = np.int32
_I64 = np.int64


def _empty(dtype) -> np.ndarray:
    return np.zeros(0, dtype=dtype)


@dataclass
class RoundActions:
    """Every content-creating action of round ``t`` (its act phase), as columns.

    NOT actions create nothing and are not stored: each agent always has ``n_actions`` slots,
    so the number of NOTs is ``n_actions`` minus its stored actions.

    Action columns (length M): ``sender``, ``kind`` (POST/COM/DM), ``recipient`` (RCPT: DM
    recipient, COM target author, -1 for POST), ``target_id`` (-1 if none), ``topic``,
    ``sentiment`` (s(a)), ``content_id`` (written by ``ContentStore.append_batch``). Mentions
    are pairs (``mention_action`` row into the action columns, ``mention_agent``), unique per
    action, self-mentions removed.
    """

    n_agents: int
    n_actions: int
    round: int
    sender: np.ndarray = field(default_factory=lambda: _empty(_I32))
    kind: np.ndarray = field(default_factory=lambda: _empty(np.int8))
    recipient: np.ndarray = field(default_factory=lambda: _empty(_I32))
    target_id: np.ndarray = field(default_factory=lambda: _empty(_I64))
    topic: np.ndarray = field(default_factory=lambda: _empty(_I32))
    sentiment: np.ndarray = field(default_factory=lambda: _empty(np.float64))
    content_id: np.ndarray = field(default_factory=lambda: _empty(_I64))
    mention_action: np.ndarray = field(default_factory=lambda: _empty(_I64))
    mention_agent: np.ndarray = field(default_factory=lambda: _empty(_I32))

    # ---- derived views used by several rewards -------------------------------------------
    @property
    def is_direct(self) -> np.ndarray:
        """B_t^DIR: DMs and COMs."""
        return (self.kind == DM) | (self.kind == COM)

    @property
    def is_public(self) -> np.ndarray:
        """B_t^PUB: POSTs and COMs."""
        return (self.kind == POST) | (self.kind == COM)


@dataclass
class RoundBatch(RoundActions):
    """The closed round ``t``: its actions (the columns of :class:`RoundActions`), every
    non-zero vote and what each agent was shown.

    Votes (non-zero only): ``vote_voter``, ``vote_item``, ``vote_author``, ``vote_kind``,
    ``vote_topic``, ``vote_value`` (+1/-1).
    ``feed`` / ``feed_topics``: the act-phase feed C_t(u) as an (n, feed_size) array of content
    ids / topic ids, -1 where a slot is empty. ``vote_feed``: the vote-phase items as an
    (n, vote_feed_size) array of content ids (exposures too). ``prev_dm_sender`` / ``prev_dm_recipient``: the DMs
    of round t-1 (for COORD's reciprocity).
    ``platform_size``: 0 when the agents form one platform; otherwise agents
    ``[p * platform_size, (p + 1) * platform_size)`` form platform ``p``, disjoint platforms
    stepped as one batch (``socialgym.vector``): the population totals in SOC, PRE and COORD are
    then each platform's own.
    """

    vote_voter: np.ndarray = field(default_factory=lambda: _empty(_I32))
    vote_item: np.ndarray = field(default_factory=lambda: _empty(_I64))
    vote_author: np.ndarray = field(default_factory=lambda: _empty(_I32))
    vote_kind: np.ndarray = field(default_factory=lambda: _empty(np.int8))
    vote_topic: np.ndarray = field(default_factory=lambda: _empty(_I32))
    vote_value: np.ndarray = field(default_factory=lambda: _empty(np.int8))
    feed: np.ndarray | None = None
    feed_topics: np.ndarray | None = None
    vote_feed: np.ndarray | None = None
    prev_dm_sender: np.ndarray = field(default_factory=lambda: _empty(_I32))
    prev_dm_recipient: np.ndarray = field(default_factory=lambda: _empty(_I32))
    platform_size: int = 0

    def __post_init__(self) -> None:
        if self.feed_topics is None:
            self.feed_topics = np.full((self.n_agents, 0), -1, dtype=_I32)
        if self.feed is None:
            self.feed = np.full(self.feed_topics.shape, -1, dtype=_I64)
        if self.vote_feed is None:
            self.vote_feed = np.full((self.n_agents, 0), -1, dtype=_I64)

    @property
    def population(self) -> int:
        """|V|: the number of agents on one platform."""
        return self.platform_size or self.n_agents

    def population_total(self, members: np.ndarray, mask: np.ndarray) -> float | np.ndarray:
        """How many rows of ``mask`` are True: over the whole population (a float), or, with
        ``platform_size``, over each agent's own platform (an (n,) array), where ``members``
        gives each row's agent."""
        if not self.platform_size:
            return float(mask.sum())
        size = self.platform_size
        per_platform = np.bincount(members[mask] // size, minlength=self.n_agents // size)
        return per_platform.astype(float)[np.arange(self.n_agents) // size]

    @classmethod
    def from_actions(cls, actions: RoundActions, **votes_and_exposures) -> RoundBatch:
        """The batch of the round whose act phase was ``actions`` (its arrays shared, not
        copied), with the vote and exposure columns given by keyword."""
        return cls(**{f.name: getattr(actions, f.name) for f in fields(RoundActions)}, **votes_and_exposures)


class RoundTranscript:
    """One round as readable entries, for text-based tie scorers and logs (specification §4).

    ``agent_ids``: the agents' ids (index -> id); ``round``: the round's number; ``entries``:
    every action (``kind`` POST/COM/DM, ``sender``, ``recipient`` = RCPT, ``mentions``, ``id``,
    ``target_id``, ``topic``, ``sentiment`` s(a), ``text``) and, once the round is closed (a
    :class:`RoundBatch`), every non-zero vote (``kind`` VOTE, ``sender`` = voter, ``recipient``
    = author, ``id`` = item, ``value``). The entries are built on first access — a Python loop
    over the round, which scorers that never read them (the vectorised ``G_theta``) do not pay
    for.
    """

    def __init__(self, actions: RoundActions, texts: list[str | None], agent_ids: tuple[str, ...],
                 topic_names: tuple[str, ...]) -> None:
        self.agent_ids, self.round = agent_ids, actions.round
        self._actions, self._texts, self._topic_names = actions, texts, topic_names

    @cached_property
    def entries(self) -> list[dict]:
        batch, texts, names, topics = self._actions, self._texts, self.agent_ids, self._topic_names
        mentions: dict[int, list[str]] = {}
        for row, agent in zip(batch.mention_action.tolist(), batch.mention_agent.tolist()):
            mentions.setdefault(row, []).append(names[agent])
        sentiment = batch.sentiment.tolist()
        out = []
        for k, (snd, kind, rcp, tgt, top, cid) in enumerate(zip(
                batch.sender.tolist(), batch.kind.tolist(), batch.recipient.tolist(), batch.target_id.tolist(),
                batch.topic.tolist(), batch.content_id.tolist())):
            out.append({"kind": ACTION_TYPES[kind], "sender": names[snd], "recipient": names[rcp] if rcp >= 0 else None,
                        "mentions": mentions.get(k, []), "id": cid, "target_id": tgt if tgt >= 0 else None,
                        "topic": topics[top], "sentiment": sentiment[k], "text": texts[k] or ""})
        if isinstance(batch, RoundBatch):          # an open round (its vote phase) has no votes yet
            for voter, item, author, value in zip(batch.vote_voter.tolist(), batch.vote_item.tolist(),
                                                  batch.vote_author.tolist(), batch.vote_value.tolist()):
                out.append({"kind": "VOTE", "sender": names[voter], "recipient": names[author], "id": item,
                            "value": value})
        return out
