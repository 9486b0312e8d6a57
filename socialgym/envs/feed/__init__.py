"""Implementation package of the feed environment (see ``socialgym.envs.feed_v0``)."""

from socialgym.envs.feed.env import FeedEnv, Peers, RoundRecord

__all__ = ["FeedEnv", "Peers", "RoundRecord"]
