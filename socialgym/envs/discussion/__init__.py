"""The discussion environment's implementation (entry module: ``socialgym.envs.discussion_v0``)."""

from socialgym.envs.discussion.env import SELF_FEATURES, SLOT_FEATURES, CommentText, DiscussionEnv

__all__ = ["DiscussionEnv", "CommentText", "SELF_FEATURES", "SLOT_FEATURES"]
