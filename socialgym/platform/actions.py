"""Action codes and the columnar record of one round (the batch ``B_t`` of SPEC §3)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

# Action type codes; the numeric action encoding uses the same numbers.
POST, COM, DM, NOT = 0, 1, 2, 3
ACTION_TYPES: tuple[str, ...] = ("POST", "COM", "DM", "NOT")
TONES: tuple[str, ...] = ("supportive", "neutral", "critical")
TONE_SENTIMENT = np.array([1.0, 0.0, -1.0])  # s(a) of an action without text (SPEC §1)

_I32 = np.int32
_I64 = np.int64


def _empty(dtype) -> np.ndarray:
    return np.zeros(0, dtype=dtype)


@dataclass
class RoundBatch:
    """Every content-creating action and every non-zero vote of round ``t``, as columns.

    NOT actions create nothing and are not stored: each agent always has ``n_actions`` slots,
    so the number of NOTs is ``n_actions`` minus its stored actions.

    Action columns (length M): ``sender``, ``kind`` (POST/COM/DM), ``recipient`` (RCPT: DM
    recipient, COM target author, -1 for POST), ``target_id`` (-1 if none), ``topic``,
    ``sentiment`` (s(a)), ``content_id``. Mentions are pairs (``mention_action`` row into the
    action columns, ``mention_agent``), unique per action, self-mentions removed.
    Votes (non-zero only): ``vote_voter``, ``vote_item``, ``vote_author``, ``vote_kind``,
    ``vote_topic``, ``vote_value`` (+1/-1).
    ``feed`` / ``feed_topics``: the act-phase feed C_t(u) as an (n, feed_size) array of content
    ids / topic ids, -1 where a slot is empty. ``vote_feed``: the vote-phase items as an
    (n, vote_feed_size) array of content ids (exposures too). ``prev_dm_sender`` / ``prev_dm_recipient``: the DMs
    of round t-1 (for COORD's reciprocity).
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

    def __post_init__(self) -> None:
        if self.feed_topics is None:
            self.feed_topics = np.full((self.n_agents, 0), -1, dtype=_I32)
        if self.feed is None:
            self.feed = np.full(self.feed_topics.shape, -1, dtype=_I64)
        if self.vote_feed is None:
            self.vote_feed = np.full((self.n_agents, 0), -1, dtype=_I64)

    # ---- derived views used by several rewards -------------------------------------------
    @property
    def is_direct(self) -> np.ndarray:
        """B_t^DIR: DMs and COMs."""
        return (self.kind == DM) | (self.kind == COM)

    @property
    def is_public(self) -> np.ndarray:
        """B_t^PUB: POSTs and COMs."""
        return (self.kind == POST) | (self.kind == COM)
