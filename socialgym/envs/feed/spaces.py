"""Gymnasium spaces for the structured observation (lists of items, ids, rewards).

Gymnasium has no space for "a list of post dicts", so these small spaces validate the exact
shape the environment emits; ``contains`` is what ``observation_space(agent)`` promises.
:func:`feed_observation_space` builds that space from the configuration.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from gymnasium import spaces
from gymnasium.spaces import Space

from socialgym.config import REWARD_NAMES
from socialgym.envs.feed.encoding import DM_FEATURES, FEED_ITEM_FEATURES, PHASES, SELF_FEATURES, ActionLayout

if TYPE_CHECKING:
    from socialgym.config import FeedConfig

ITEM_KEYS = ("id", "type", "author", "topic", "text", "target_id", "mentions", "likes", "dislikes", "round")
DM_KEYS = ("id", "type", "author", "recipient", "topic", "text", "target_id", "round")


class Choice(Space):
    """One of a fixed set of hashable values (e.g. the phase names)."""

    def __init__(self, values: Sequence[Any], seed=None) -> None:
        self.values = tuple(values)
        super().__init__(None, None, seed)

    def contains(self, x: Any) -> bool:
        return isinstance(x, type(self.values[0])) and x in self.values

    def sample(self, mask=None, probability=None):
        return self.values[int(self.np_random.integers(len(self.values)))]

    def __repr__(self) -> str:
        return f"Choice{self.values}"

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, Choice) and other.values == self.values


class IdSequence(Space):
    """A sequence of strings drawn from a known set (agent ids, topics)."""

    def __init__(self, universe: Sequence[str] | None = None, seed=None) -> None:
        self.universe = None if universe is None else frozenset(universe)
        super().__init__(None, None, seed)

    def contains(self, x: Any) -> bool:
        if isinstance(x, (str, bytes)) or not isinstance(x, Sequence):
            return False
        return all(isinstance(v, str) and (self.universe is None or v in self.universe) for v in x)

    def sample(self, mask=None, probability=None):
        return ()

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, IdSequence) and other.universe == self.universe


class ItemList(Space):
    """A list of item dicts (posts/comments, or DMs) with exactly the documented keys."""

    def __init__(self, keys: Sequence[str], max_len: int | None, seed=None) -> None:
        self.keys = tuple(keys)
        self.max_len = max_len
        super().__init__(None, None, seed)

    def contains(self, x: Any) -> bool:
        if not isinstance(x, list) or (self.max_len is not None and len(x) > self.max_len):
            return False
        for item in x:
            if not isinstance(item, Mapping) or tuple(item.keys()) != self.keys:
                return False
            if not isinstance(item["id"], int) or not isinstance(item["author"], str):
                return False
            if not isinstance(item["topic"], str) or not (item["text"] is None or isinstance(item["text"], str)):
                return False
        return True

    def sample(self, mask=None, probability=None):
        return []

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, ItemList) and (other.keys, other.max_len) == (self.keys, self.max_len)


class RewardDict(Space):
    """Named finite floats (the previous round's reward components and total)."""

    def __init__(self, names: Sequence[str], seed=None) -> None:
        self.names = tuple(names)
        super().__init__(None, None, seed)

    def contains(self, x: Any) -> bool:
        return (isinstance(x, Mapping) and tuple(x.keys()) == self.names
                and all(isinstance(v, float) and np.isfinite(v) for v in x.values()))

    def sample(self, mask=None, probability=None):
        return {k: 0.0 for k in self.names}

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, RewardDict) and other.names == self.names


def feed_observation_space(cfg: FeedConfig, layout: ActionLayout, agent_ids: Sequence[str],
                           agent: str) -> spaces.Dict:
    """The observation space of ``agent`` (``FeedEnv.observation_space``): the numeric arrays,
    the structured lists or both (``cfg.obs_format``), with the action masks when enabled."""
    entries: dict[str, spaces.Space] = {}
    numeric = {
        "phase": spaces.Discrete(2),
        "round": spaces.Discrete(cfg.max_rounds + 2),
        "self": spaces.Box(-1.0, np.inf, (len(SELF_FEATURES),), np.float32),
        "feed": spaces.Box(-1.0, np.inf, (cfg.feed_size, len(FEED_ITEM_FEATURES)), np.float32),
        "dms": spaces.Box(-1.0, np.inf, (cfg.dm_inbox_size, len(DM_FEATURES)), np.float32),
        "vote_items": spaces.Box(-1.0, np.inf, (cfg.vote_feed_size, len(FEED_ITEM_FEATURES)), np.float32),
    }
    if cfg.obs_format == "numeric":
        entries.update(numeric)
    else:
        entries.update({
            "phase": Choice(PHASES),
            "round": spaces.Discrete(cfg.max_rounds + 2),
            "agent": Choice((agent,)),
            "n_actions": Choice((cfg.n_actions,)),
            "users": IdSequence(agent_ids),
            "feed": ItemList(ITEM_KEYS, cfg.feed_size),
            "dms": ItemList(DM_KEYS, None),
            "topics": IdSequence(None),
            "last_rewards": RewardDict(REWARD_NAMES + ("total",)),
            "lambdas": RewardDict(REWARD_NAMES),
            "vote_items": ItemList(ITEM_KEYS, cfg.vote_feed_size),
        })
        if cfg.obs_format == "both":
            entries["numeric"] = spaces.Dict(numeric)
    if cfg.action_masks:
        entries["action_mask"] = spaces.Tuple([spaces.MultiBinary(int(k)) for k in layout.nvec])
    return spaces.Dict(entries)
