"""Composition of the five components into the per-agent total ``sum_r lambda_r R^r``."""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from socialgym.config import REWARD_NAMES, FeedConfig
from socialgym.platform.actions import RoundBatch
from socialgym.rewards.components import (
    coord_reward, emo_reward, inf_reward, pre_reward, soc_reward,
)


_CONFIG_DEFAULTS = {f.name: f.default for f in fields(FeedConfig)}


@dataclass(frozen=True)
class RewardParams:
    """The reward constants of specification §3; the defaults are FeedConfig's (one home for them)."""

    b_soc: float = _CONFIG_DEFAULTS["b_soc"]
    b_inf: float = _CONFIG_DEFAULTS["b_inf"]
    b_pre: float = _CONFIG_DEFAULTS["b_pre"]
    b_coord: float = _CONFIG_DEFAULTS["b_coord"]
    b_emo: float = _CONFIG_DEFAULTS["b_emo"]
    eps: float = _CONFIG_DEFAULTS["eps"]

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
