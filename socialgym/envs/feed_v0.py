"""socialgym/feed-v0: the social-media feed platform of specification §1-§6.

    from socialgym.envs import feed_v0
    env = feed_v0.parallel_env(n_agents=30, max_rounds=15, recommender="chronological")
"""

from pettingzoo.utils import parallel_to_aec, wrappers

from socialgym.envs.feed.env import FeedEnv

ENV_ID = "socialgym/feed-v0"
metadata = FeedEnv.metadata


def parallel_env(render_mode=None, platform_agent: bool = False, **config) -> FeedEnv:
    """The ParallelEnv (both phases of a round are one ``step`` each). ``platform_agent=True``:
    the recommender is one more agent, ``"platform"`` (``socialgym.envs.platform.agent``; its
    keywords ``platform_objective``, ``platform_action_form``, ``platform_candidates``,
    ``platform_window``, ``platform_stances``)."""
    if platform_agent:
        if render_mode is not None:
            raise ValueError("platform_agent=True has no render modes")
        from socialgym.envs.platform.agent import PlatformAgentEnv
        return PlatformAgentEnv(**config)
    return FeedEnv(render_mode=render_mode, **config)


def raw_env(render_mode=None, **config):
    """AEC form without wrappers."""
    return parallel_to_aec(parallel_env(render_mode=render_mode, **config))


def env(render_mode=None, **config):
    """AEC form (agents act one after another within a phase), with PettingZoo's order check."""
    return wrappers.OrderEnforcingWrapper(raw_env(render_mode=render_mode, **config))
