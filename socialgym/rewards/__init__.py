"""The five reward components of specification §3 as pure, vectorised functions over a round's batch.

Each ``*_reward`` takes a :class:`~socialgym.platform.RoundBatch` (and what else its formula
needs) and returns one value per agent, so researchers can compose new rewards from them.
"""

from socialgym.rewards.components import (
    coord_reward, emo_reward, inf_reward, pre_reward, soc_reward,
)
from socialgym.rewards.compose import RewardParams, compose, reward_components

__all__ = [
    "soc_reward", "inf_reward", "pre_reward", "coord_reward", "emo_reward",
    "RewardParams", "reward_components", "compose",
]
