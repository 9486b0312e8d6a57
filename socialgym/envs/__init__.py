"""PettingZoo adapters: one versioned entry module per environment."""

from socialgym.envs import discussion_v0, feed_v0, platform_v0

REGISTRY = {feed_v0.ENV_ID: feed_v0, discussion_v0.ENV_ID: discussion_v0}


def make(env_id: str, *, aec: bool = False, **config):
    """Construct a registered environment by id, e.g. ``make("socialgym/feed-v0", n_agents=30)``."""
    if env_id not in REGISTRY:
        raise ValueError(f"unknown environment id {env_id!r}; registered: {sorted(REGISTRY)}")
    module = REGISTRY[env_id]
    if aec or not hasattr(module, "parallel_env"):     # the discussion env is AEC only
        return module.env(**config)
    return module.parallel_env(**config)


__all__ = ["feed_v0", "discussion_v0", "platform_v0", "make", "REGISTRY"]
