"""Implementation package of the feed environment (see ``socialgym.envs.feed_v0``)."""

from socialgym.envs.feed.env import FeedEnv, RoundRecord
from socialgym.envs.feed.observations import Peers

__all__ = ["FeedEnv", "Peers", "RoundRecord"]
