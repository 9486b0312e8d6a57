"""Baseline policies. The feed's policy protocol is batched:

    policy.act(observations: dict[agent, obs]) -> dict[agent, action]

one call per environment step for all agents, so LLM policies can run every agent concurrently;
the discussion's is per turn, ``policy.act(agent, observation, info) -> action``. Both are
declared in ``socialgym.baselines.protocol`` (``Policy``, ``DiscussionPolicy``).

``TorchPolicy`` (the trained PPO network, ``socialgym.baselines.torch_policy``) is exported lazily:
``from socialgym.baselines import TorchPolicy`` imports torch (an optional extra,
``socialgym[torch]``) on first use, and ``import socialgym.baselines`` alone never does.
"""

from socialgym.baselines.greedy import GreedyPolicy
from socialgym.baselines.protocol import DiscussionPolicy, Policy
from socialgym.baselines.random_policy import RandomPolicy
from socialgym.baselines.social_users import SocialUsers
from socialgym.baselines.topic_users import TopicUsers

# TorchPolicy is left out of __all__: ``from socialgym.baselines import *`` must not need torch
__all__ = ["DiscussionPolicy", "GreedyPolicy", "Policy", "RandomPolicy", "SocialUsers", "TopicUsers"]

_LAZY = {"TorchPolicy": "socialgym.baselines.torch_policy"}


def __getattr__(name: str):
    """Lazy exports (PEP 562): the name is imported from its module when first asked for, so
    torch is only imported by code that uses ``TorchPolicy``. Without torch installed this raises
    torch_policy's ImportError, which says how to install it."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
