"""Stable-Baselines3 through SuperSuit, PettingZoo's own SB3 route, on the flat observation.

SB3 refuses nested observation spaces; ``socialgym.FlatObservation`` turns the numeric Dict
(which nests the action-mask Tuple) into one float32 ``Box``: the numeric features, then the
concatenated masks. The first tests check that vector against the unwrapped env's arrays on
every parallel id (no SB3 needed); ``test_sb3_snippet`` trains SB3's PPO through SuperSuit.

The snippet in docs/marl_tooling.md ("Stable-Baselines3") is copied from ``test_sb3_snippet``;
keep them in sync.
"""

from __future__ import annotations

import numpy as np
import pytest
from capabilities import need_module
from pettingzoo.test import parallel_api_test

import socialgym
from socialgym.envs import REGISTRY
from socialgym.tasks import TASKS

PARALLEL_IDS = [*TASKS, *(i for i, module in REGISTRY.items() if hasattr(module, "parallel_env"))]


def expected_vector(obs: dict) -> np.ndarray:
    """The flat vector written out from one agent's numeric Dict observation."""
    return np.concatenate([obs["self"], obs["feed"].ravel(), obs["dms"].ravel(), obs["vote_items"].ravel(),
                           [obs["phase"], obs["round"]], *obs["action_mask"]]).astype(np.float32)


@pytest.mark.parametrize("env_id", PARALLEL_IDS)
def test_flat_observation_is_the_numeric_arrays_concatenated(env_id):
    flat = socialgym.FlatObservation(socialgym.make(env_id, obs_format="numeric"))
    raw = socialgym.make(env_id, obs_format="numeric")
    c = raw.unwrapped.config
    nvec = raw.action_space("agent_0").nvec
    assert flat.feature_size == 14 + 10 * c.feed_size + 6 * c.dm_inbox_size + 10 * c.vote_feed_size + 2
    assert flat.mask_size == nvec.sum()
    space = flat.observation_space("agent_0")
    assert space.shape == (flat.feature_size + flat.mask_size,) and space.dtype == np.float32
    assert space is flat.observation_space("agent_0")                     # cached per agent
    assert all(flat.observation_space(a) == space for a in flat.possible_agents)
    assert flat.action_space("agent_0") is flat.unwrapped.action_space("agent_0") == raw.action_space("agent_0")
    assert space.high[flat.feature_size - 1] == c.max_rounds + 1          # round
    assert (space.low[flat.feature_size:] == 0).all() and (space.high[flat.feature_size:] == 1).all()

    got, _ = flat.reset(seed=3)
    want, _ = raw.reset(seed=3)
    rng = np.random.default_rng(0)
    for step in range(4):                                       # round 1 and 2, act and vote
        for agent in raw.possible_agents:
            np.testing.assert_array_equal(got[agent], expected_vector(want[agent]))
            assert space.contains(got[agent])
        features, mask = flat.split(got["agent_1"])
        assert features[-2:].tolist() == [step % 2, step // 2 + 1]          # phase, round
        assert mask.sum() == sum(m.sum() for m in want["agent_1"]["action_mask"])
        actions = {}
        for agent in raw.agents:
            mask = want[agent]["action_mask"]
            actions[agent] = np.array([rng.choice(np.flatnonzero(m)) for m in mask])
        got, got_rewards, _, _, got_infos = flat.step(actions)
        want, want_rewards, _, _, want_infos = raw.step(actions)
        assert got_rewards == want_rewards and got_infos == want_infos
        assert all(not info["invalid"] for info in want_infos.values())    # masked samples are valid
    batch = np.stack([got[a] for a in flat.possible_agents])
    assert flat.split(batch)[0].shape == (c.n_agents, flat.feature_size)


def test_flat_observation_reads_the_numeric_part_of_both_and_refuses_structured():
    both = socialgym.FlatObservation(socialgym.make("socialgym/feed-mixed-v0", obs_format="both"))
    numeric = socialgym.FlatObservation(socialgym.make("socialgym/feed-mixed-v0", obs_format="numeric"))
    assert both.observation_space("agent_0") == numeric.observation_space("agent_0")
    a, _ = both.reset(seed=1)
    b, _ = numeric.reset(seed=1)
    for agent in a:
        np.testing.assert_array_equal(a[agent], b[agent])
    with pytest.raises(ValueError, match="obs_format='numeric'"):
        socialgym.FlatObservation(socialgym.make("socialgym/feed-SOC-v0"))
    no_masks = socialgym.FlatObservation(socialgym.make("socialgym/feed-SOC-v0", obs_format="numeric",
                                                        action_masks=False))
    assert no_masks.mask_size == 0
    assert no_masks.observation_space("agent_0").shape == (no_masks.feature_size,)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_flat_observation_passes_the_parallel_api_test():
    parallel_api_test(socialgym.FlatObservation(socialgym.make("socialgym/feed-SOC-v0", obs_format="numeric")),
                      num_cycles=21)


@pytest.mark.slow
def test_sb3_snippet():
    need_module("stable_baselines3")
    need_module("supersuit")

    # --- snippet: docs/marl_tooling.md "Stable-Baselines3" ---
    import supersuit as ss
    from stable_baselines3 import PPO
    from stable_baselines3.common.utils import set_random_seed

    import socialgym

    env = socialgym.FlatObservation(socialgym.make("socialgym/feed-SOC-v0", obs_format="numeric"))
    envs = ss.pettingzoo_env_to_vec_env_v1(env)           # one row per agent: 20 rows
    envs = ss.concat_vec_envs_v1(envs, 2, num_cpus=0, base_class="stable_baselines3")   # 2 copies: 40 rows
    envs.venv.reset(seed=0)     # SuperSuit's SB3 wrapper never passes a seed on: seed the copies here
    set_random_seed(0)          # and SB3 here (PPO(seed=...) calls envs.seed(), which SuperSuit lacks)
    model = PPO("MlpPolicy", envs, n_steps=20, batch_size=200, n_epochs=4, verbose=0)
    model.learn(total_timesteps=3_200)                    # 4 rollouts of 20 steps x 40 rows
    obs = envs.reset()                                    # (40, 340): features, then the masks
    actions, _ = model.predict(obs, deterministic=True)   # (40, 30): one MultiDiscrete vector per row
    envs.close()
    # --- end snippet ---

    assert envs.num_envs == 40 and obs.shape == (40, env.feature_size + env.mask_size) == (40, 340)
    assert model.num_timesteps == 3_200
    assert model.logger.name_to_value["train/n_updates"] == 4 * 4      # rollouts x epochs
    assert np.isfinite(model.logger.name_to_value["train/value_loss"])
    space = env.action_space("agent_0")
    assert actions.shape == (40, len(space.nvec))
    assert all(space.contains(row) for row in actions.astype(space.dtype))
