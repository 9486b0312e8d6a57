"""socialgym/discussion-v0: a threaded discussion with an optional LLM moderator (AEC).

    from socialgym.envs import discussion_v0
    env = discussion_v0.env(n_users=5, roles={"user_4": "troll"}, max_turns=12)
"""

from pettingzoo.utils import wrappers

from socialgym.envs.discussion.env import DiscussionEnv

ENV_ID = "socialgym/discussion-v0"
metadata = DiscussionEnv.metadata


def raw_env(render_mode=None, **config) -> DiscussionEnv:
    """The AEC environment without wrappers (turns are sequential, so there is no parallel form)."""
    return DiscussionEnv(render_mode=render_mode, **config)


def env(render_mode=None, **config):
    """The AEC environment with PettingZoo's order check."""
    return wrappers.OrderEnforcingWrapper(raw_env(render_mode=render_mode, **config))
