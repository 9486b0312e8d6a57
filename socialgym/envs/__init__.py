"""PettingZoo adapters: one versioned entry module per environment."""

from socialgym.envs import feed_v0

REGISTRY = {feed_v0.ENV_ID: feed_v0}


def make(env_id: str, *, aec: bool = False, **config):
    """Construct a registered environment by id, e.g. ``make("socialgym/feed-v0", n_agents=30)``."""
    if env_id not in REGISTRY:
        raise ValueError(f"unknown environment id {env_id!r}; registered: {sorted(REGISTRY)}")
    module = REGISTRY[env_id]
    return module.env(**config) if aec else module.parallel_env(**config)


__all__ = ["feed_v0", "make", "REGISTRY"]
