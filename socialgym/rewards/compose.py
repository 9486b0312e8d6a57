"""Composition of the five components into the per-agent total ``sum_r lambda_r R^r``."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from socialgym.config import REWARD_NAMES, FeedConfig
from socialgym.platform.actions import RoundBatch
from socialgym.rewards.components import (
    coord_reward, emo_reward, inf_reward, pre_reward, soc_reward,
)


@dataclass(frozen=True)
class RewardParams:
    b_soc: float = 0.5
    b_inf: float = 0.5
    b_pre: float = 0.5
    b_coord: float = 0.5
    b_emo: float = -1.0
    eps: float = 1e-6

    @classmethod
    def from_config(cls, config: FeedConfig) -> "RewardParams":
        return cls(config.b_soc, config.b_inf, config.b_pre, config.b_coord, config.b_emo, config.eps)


def reward_components(batch: RoundBatch, seen_feed_topics: np.ndarray, n_topics: int,
                      params: RewardParams = RewardParams()) -> np.ndarray:
    """(n, 5) matrix of SOC, INF, PRE, COORD, EMO for every agent (column order REWARD_NAMES)."""
    return np.column_stack([
        soc_reward(batch, params.b_soc),
        inf_reward(batch, seen_feed_topics, n_topics, params.b_inf),
        pre_reward(batch, params.b_pre),
        coord_reward(batch, params.b_coord),
        emo_reward(batch, params.b_emo, params.eps),
    ])


def compose(components: np.ndarray, lambdas: np.ndarray) -> np.ndarray:
    """Per-agent total: row-wise dot product of components and lambda weights."""
    if components.shape != lambdas.shape or components.shape[1] != len(REWARD_NAMES):
        raise ValueError(f"components {components.shape} and lambdas {lambdas.shape} must both be (n, 5)")
    return np.einsum("ij,ij->i", components, lambdas)
