"""The content store: every post, comment and DM of an episode, in columnar numpy arrays.

Content ids are row numbers, so ids are unique across the episode and increase in order of
creation (posts, comments and DMs share one id space, specification §1).
"""

from __future__ import annotations

import numpy as np

from socialgym.platform.actions import COM, POST, RoundBatch

_COLUMNS: dict[str, tuple[type, int | float]] = {
    "kind": (np.int8, -1),
    "author": (np.int32, -1),
    "recipient": (np.int32, -1),   # DM recipient / COM target author / -1
    "target_id": (np.int64, -1),
    "topic": (np.int32, -1),
    "round": (np.int32, 0),
    "sentiment": (np.float64, 0.0),
    "likes": (np.int32, 0),
    "dislikes": (np.int32, 0),
}


class ContentStore:
    """Append-only columnar store with amortised O(1) growth."""

    def __init__(self, capacity: int = 1024) -> None:
        self._size = 0
        self._cols = {name: np.full(capacity, fill, dtype=dt) for name, (dt, fill) in _COLUMNS.items()}
        self.texts: list[str | None] = []
        # mentions as (content id, agent) pairs, appended round by round
        self._mention_item: list[np.ndarray] = []
        self._mention_agent: list[np.ndarray] = []
        self._mention_cache: tuple[np.ndarray, np.ndarray] | None = None
        self._mention_keys: tuple[int, np.ndarray] | None = None

    def __len__(self) -> int:
        return self._size

    def column(self, name: str) -> np.ndarray:
        """A read-only view of the live part of a column."""
        view = self._cols[name][: self._size]
        view.flags.writeable = False
        return view

    def __getattr__(self, name: str) -> np.ndarray:
        if name in _COLUMNS:
            return self.column(name)
        raise AttributeError(name)

    def _reserve(self, extra: int) -> None:
        need = self._size + extra
        cap = len(self._cols["kind"])
        if need <= cap:
            return
        new_cap = max(need, 2 * cap)
        for name, (dt, fill) in _COLUMNS.items():
            grown = np.full(new_cap, fill, dtype=dt)
            grown[: self._size] = self._cols[name][: self._size]
            self._cols[name] = grown

    def append_batch(self, batch: RoundBatch, texts: list[str | None]) -> np.ndarray:
        """Store the round's actions; returns their new content ids (also written to the batch)."""
        m = len(batch.sender)
        self._reserve(m)
        start, stop = self._size, self._size + m
        cols = self._cols
        cols["kind"][start:stop] = batch.kind
        cols["author"][start:stop] = batch.sender
        cols["recipient"][start:stop] = batch.recipient
        cols["target_id"][start:stop] = batch.target_id
        cols["topic"][start:stop] = batch.topic
        cols["round"][start:stop] = batch.round
        cols["sentiment"][start:stop] = batch.sentiment
        self._size = stop
        self.texts.extend(texts)
        ids = np.arange(start, stop, dtype=np.int64)
        batch.content_id = ids
        if len(batch.mention_action):
            # kept sorted by (item, agent): ids only grow, so the concatenation of all rounds'
            # chunks stays sorted and never needs a global sort
            items, agents = ids[batch.mention_action], batch.mention_agent.astype(np.int32, copy=False)
            order = np.lexsort((agents, items))
            self._mention_item.append(items[order])
            self._mention_agent.append(agents[order])
            self._mention_cache = None
            self._mention_keys = None
        return ids

    def apply_votes(self, items: np.ndarray, values: np.ndarray) -> None:
        """Add non-zero votes (+1 like / -1 dislike) to the items' counters."""
        # O(votes log votes), independent of how much content the episode has accumulated
        for column, sign in (("likes", values > 0), ("dislikes", values < 0)):
            voted, counts = np.unique(items[sign], return_counts=True)
            self._cols[column][voted] += counts.astype(np.int32, copy=False)

    # ---- step rollback ----------------------------------------------------------------------
    def checkpoint(self, votes_from: int | None = None) -> tuple:
        """A cheap mark to :meth:`rollback` to: the size (the store is append-only) and a copy of
        the like/dislike counters of rows ``votes_from ..`` (the only rows whose votes may change
        before the rollback; None = no existing row). O(rows from ``votes_from``), not O(store)."""
        size = self._size
        lo = size if votes_from is None else min(max(int(votes_from), 0), size)
        return (size, len(self.texts), len(self._mention_item), self._mention_cache, self._mention_keys,
                lo, self._cols["likes"][lo:size].copy(), self._cols["dislikes"][lo:size].copy())

    def rollback(self, mark: tuple) -> None:
        """Undo every append and vote since :meth:`checkpoint` returned ``mark``."""
        size, n_texts, n_chunks, cache, keys, lo, likes, dislikes = mark
        for name, (_, fill) in _COLUMNS.items():
            self._cols[name][size:self._size] = fill       # rows past the size keep fill values
        self._size = size
        del self.texts[n_texts:]
        del self._mention_item[n_chunks:]
        del self._mention_agent[n_chunks:]
        self._mention_cache, self._mention_keys = cache, keys
        self._cols["likes"][lo:size] = likes
        self._cols["dislikes"][lo:size] = dislikes

    def mentions_of(self, content_id: int) -> list[int]:
        """Agent indices mentioned by one item (for the structured observation)."""
        items, agents = self._mentions()
        lo, hi = np.searchsorted(items, [content_id, content_id + 1])
        return agents[lo:hi].tolist()

    def mention_keys(self, n_agents: int) -> np.ndarray:
        """Sorted ``item * n_agents + agent`` keys of every mention (for fast membership tests)."""
        if self._mention_keys is None or self._mention_keys[0] != n_agents:
            items, agents = self._mentions()
            self._mention_keys = (n_agents, items * n_agents + agents)   # sorted (see append_batch)
        return self._mention_keys[1]

    def _mentions(self) -> tuple[np.ndarray, np.ndarray]:
        if self._mention_cache is None:
            if self._mention_item:
                self._mention_cache = (np.concatenate(self._mention_item),
                                       np.concatenate(self._mention_agent))
            else:
                self._mention_cache = (np.zeros(0, np.int64), np.zeros(0, np.int32))
        return self._mention_cache

    def public_mask(self) -> np.ndarray:
        kind = self.column("kind")
        return (kind == POST) | (kind == COM)

    # ---- persistence (checkpointing) -------------------------------------------------------
    def state_dict(self) -> dict:
        items, agents = self._mentions()
        return {
            **{name: self.column(name).copy() for name in _COLUMNS},
            "texts": list(self.texts),
            "mention_item": items.copy(),
            "mention_agent": agents.copy(),
        }

    @classmethod
    def from_state(cls, state: dict) -> "ContentStore":
        store = cls(capacity=max(1024, len(state["kind"])))
        n = len(state["kind"])
        for name in _COLUMNS:
            store._cols[name][:n] = state[name]
        store._size = n
        store.texts = list(state["texts"])
        store._mention_item = [np.asarray(state["mention_item"], np.int64)]
        store._mention_agent = [np.asarray(state["mention_agent"], np.int32)]
        return store
