"""socialgym/platform-<objective>-v0: the platform's seat as single-agent Gymnasium tasks.

    import gymnasium, socialgym
    env = gymnasium.make("socialgym/platform-welfare-v0")          # or socialgym.make(...)
    env = socialgym.make("socialgym/platform-engagement-v0", action_form="scores")

One id per platform objective (``socialgym.rewards.platform.PLATFORM_OBJECTIVES``); keywords
override the task (``PlatformEnv``'s: ``action_form``, ``users``, ``ranker``, FeedConfig keys).
"""

from __future__ import annotations

from types import MappingProxyType

import gymnasium

from socialgym.envs.platform.env import PlatformEnv
from socialgym.rewards.platform import PLATFORM_OBJECTIVES

PLATFORM_TASKS = MappingProxyType({f"socialgym/platform-{o}-v0": o for o in PLATFORM_OBJECTIVES})
"""Task id -> the platform objective it pays."""


def make(task_id: str, **kwargs) -> PlatformEnv:
    """The task's environment without Gymnasium's wrappers."""
    return PlatformEnv(PLATFORM_TASKS[task_id], **kwargs)


for _id, _objective in PLATFORM_TASKS.items():
    if _id not in gymnasium.registry:
        gymnasium.register(_id, entry_point="socialgym.envs.platform.env:PlatformEnv",
                           kwargs={"objective": _objective})
