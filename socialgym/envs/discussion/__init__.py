"""The discussion environment's implementation (entry module: ``socialgym.envs.discussion_v0``)."""

from socialgym.envs.discussion.env import SELF_FEATURES, SLOT_FEATURES, CommentText, DiscussionEnv, InvalidRecord

__all__ = ["DiscussionEnv", "CommentText", "InvalidRecord", "SELF_FEATURES", "SLOT_FEATURES"]
