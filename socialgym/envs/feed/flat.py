"""``FlatObservation``: the numeric feed observation as one flat float32 vector.

Stable-Baselines3 (directly or through SuperSuit's ``concat_vec_envs_v1(...,
base_class="stable_baselines3")``) refuses nested observation spaces, and SuperSuit's own
observation wrappers take ``Box`` observations only. The numeric observation is a ``Dict`` that
nests the action-mask ``Tuple``; this wrapper turns it into one ``Box`` per agent, so
``PPO("MlpPolicy", ...)`` and every Box-only wrapper can read it::

    import socialgym
    env = socialgym.FlatObservation(socialgym.make("socialgym/feed-SOC-v0", obs_format="numeric"))

Actions, rewards, flags and infos are the wrapped env's, unchanged.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces
from pettingzoo.utils import BaseParallelWrapper

BOX_KEYS = ("self", "feed", "dms", "vote_items")
"""The numeric observation's arrays, in the order the flat vector holds them."""


class FlatObservation(BaseParallelWrapper):
    """A parallel feed env whose observation is one flat float32 ``Box`` per agent.

    The vector is, in this order (F = ``feed_size``, D = ``dm_inbox_size``, V =
    ``vote_feed_size``, ``nvec`` = the action space's ``nvec``):

    ========================  =============  =================================================
    entries                   length         what
    ========================  =============  =================================================
    ``features[0:14]``        14             ``self`` (``SELF_FEATURES``: round, max_rounds,
                                             phase, λ (5), last round's components (5), total)
    next                      F * 10         ``feed``, row by row (``FEED_ITEM_FEATURES``)
    next                      D * 6          ``dms``, row by row (``DM_FEATURES``)
    next                      V * 10         ``vote_items``, row by row (``FEED_ITEM_FEATURES``)
    next                      1              ``phase`` (0 act, 1 vote)
    next                      1              ``round``
    ``mask``                  ``sum(nvec)``  the action masks of the dimensions, concatenated
                                             (1.0 allowed, 0.0 not): the layout of the
                                             concatenated logits of a ``MultiDiscrete`` head
    ========================  =============  =================================================

    ``feature_size`` and ``mask_size`` give the two lengths, ``split(vector)`` the two parts
    (for a batch too). The features are the environment's raw values, not normalised (counts
    such as likes and age are unbounded; SB3's ``VecNormalize`` can scale them). The mask part is
    empty (``mask_size == 0``) when the env was built with ``action_masks=False``.

    The wrapped env must be a numeric one: ``obs_format="numeric"`` (or ``"both"``, whose
    ``numeric`` part is read).
    """

    def __init__(self, env) -> None:
        from pettingzoo import ParallelEnv

        from socialgym.envs.feed.env import FeedEnv

        base = getattr(env, "unwrapped", None)
        if isinstance(env, FlatObservation) or not isinstance(env, ParallelEnv) or not isinstance(base, FeedEnv):
            raise TypeError("FlatObservation wraps a parallel feed environment (socialgym.parallel_env or "
                            "socialgym.make of a feed task, not yet flat), got "
                            f"{type(env).__name__}{f' over {type(base).__name__}' if base is not env else ''}")
        super().__init__(env)
        config = env.unwrapped.config
        if config.obs_format not in ("numeric", "both"):
            raise ValueError("FlatObservation needs the numeric observation: build the env with "
                             f"obs_format='numeric' (got obs_format={config.obs_format!r})")
        self._numeric_key = "numeric" if config.obs_format == "both" else None
        agent = env.possible_agents[0]
        numeric = env.observation_space(agent)
        if self._numeric_key is not None:
            numeric = numeric[self._numeric_key]
        lows, highs = [], []
        for key in BOX_KEYS:
            box = numeric[key]
            lows.append(np.broadcast_to(box.low, box.shape).ravel())
            highs.append(np.broadcast_to(box.high, box.shape).ravel())
        lows.append(np.zeros(2, np.float32))                                   # phase, round
        highs.append(np.array([1, config.max_rounds + 1], np.float32))
        self.feature_size = int(sum(len(part) for part in lows))
        self.mask_size = int(env.action_space(agent).nvec.sum()) if config.action_masks else 0
        low = np.concatenate([*lows, np.zeros(self.mask_size, np.float32)]).astype(np.float32)
        high = np.concatenate([*highs, np.ones(self.mask_size, np.float32)]).astype(np.float32)
        self.observation_spaces = {a: spaces.Box(low, high, dtype=np.float32) for a in env.possible_agents}

    def observation_space(self, agent: str) -> spaces.Box:
        return self.observation_spaces[agent]

    def split(self, vector: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(features, mask)`` of one flat observation or of a batch (last axis)."""
        vector = np.asarray(vector)
        length = self.feature_size + self.mask_size
        if vector.ndim == 0 or vector.shape[-1] != length:
            raise ValueError(f"FlatObservation.split: a flat observation has {length} entries "
                             f"({self.feature_size} features + {self.mask_size} mask), got shape {vector.shape}")
        return vector[..., :self.feature_size], vector[..., self.feature_size:]

    def flatten(self, observation: dict) -> np.ndarray:
        """One agent's Dict observation -> its flat float32 vector."""
        numeric = observation if self._numeric_key is None else observation[self._numeric_key]
        parts = [np.asarray(numeric[key], np.float32).ravel() for key in BOX_KEYS]
        parts.append(np.array([numeric["phase"], numeric["round"]], np.float32))
        if self.mask_size:
            parts.extend(np.asarray(m, np.float32) for m in observation["action_mask"])
        return np.concatenate(parts)

    def _flat(self, observations: dict) -> dict:
        return {agent: self.flatten(obs) for agent, obs in observations.items()}

    def reset(self, seed: int | None = None, options: dict | None = None):
        observations, infos = self.env.reset(seed=seed, options=options)
        return self._flat(observations), infos

    def step(self, actions: dict[str, Any]):
        observations, rewards, terminations, truncations, infos = self.env.step(actions)
        return self._flat(observations), rewards, terminations, truncations, infos
