"""The feed environment inside common MARL tooling (docs/marl_tooling.md).

SuperSuit: ``pettingzoo_env_to_vec_env_v1`` + ``concat_vec_envs_v1`` give one gymnasium
VectorEnv whose rows are the agents of one or more copies of the environment (the CleanRL
parameter-sharing setup). TorchRL: ``PettingZooWrapper`` around a ~20-line adapter that
flattens the action mask and drops the non-numeric infos. Each test checks the wrapper against
the unwrapped environment stepped with the same seed and the same actions.

The snippets in docs/marl_tooling.md are copied from ``test_supersuit_snippet`` and
``TorchRLCompat`` / ``test_torchrl_snippet``; keep them in sync.
"""

from __future__ import annotations

import numpy as np
import pytest
from capabilities import need_module

import socialgym

N_AGENTS, MAX_ROUNDS = 6, 3
STEPS_PER_EPISODE = 2 * MAX_ROUNDS          # every round is an act step and a vote step
# the random recommender draws from the env's rng, so a wrong seed shows up in the observations
CONFIG = {"n_agents": N_AGENTS, "max_rounds": MAX_ROUNDS, "obs_format": "numeric", "seed": 0,
          "recommender": "random"}
BOX_KEYS = ("self", "feed", "dms", "vote_items")


def make_env():
    return socialgym.parallel_env(**CONFIG, invalid_actions="strict")     # a bad action raises


def flat_features(obs: dict) -> np.ndarray:
    """Batched Dict observation -> (rows, 274) float32. ``phase`` and ``round`` are left out:
    they are also columns 2 and 0 of ``self``."""
    rows = len(obs["self"])
    return np.concatenate([np.asarray(obs[k], np.float32).reshape(rows, -1) for k in BOX_KEYS], axis=1)


def flat_mask(obs: dict) -> np.ndarray:
    """Batched tuple of per-dimension masks -> (rows, sum(nvec)) bool, the layout of the
    concatenated logits of a MultiDiscrete policy head."""
    return np.concatenate(obs["action_mask"], axis=1).astype(bool)


def assert_obs_equal(batched: dict, rows: slice, per_agent: dict) -> None:
    """Rows ``rows`` of a SuperSuit batch equal the unwrapped env's per-agent observations."""
    agents = [f"agent_{i}" for i in range(N_AGENTS)]
    for key in ("phase", "round", *BOX_KEYS):
        np.testing.assert_array_equal(batched[key][rows], np.stack([per_agent[a][key] for a in agents]))
    for j, m in enumerate(batched["action_mask"]):
        np.testing.assert_array_equal(m[rows], np.stack([per_agent[a]["action_mask"][j] for a in agents]))


# ------------------------------------------------------------------------------------ SuperSuit
def test_supersuit_snippet():
    need_module("supersuit")

    # --- snippet: docs/marl_tooling.md "SuperSuit" ---
    import numpy as np
    import supersuit as ss

    import socialgym

    env = socialgym.parallel_env(n_agents=6, max_rounds=3, obs_format="numeric", seed=0)
    envs = ss.pettingzoo_env_to_vec_env_v1(env)          # one vector row per agent
    envs = ss.concat_vec_envs_v1(envs, 2, num_cpus=0, base_class="gymnasium")   # 2 copies: 12 rows
    envs.single_observation_space = envs.observation_space   # SuperSuit stores the per-agent
    envs.single_action_space = envs.action_space             # spaces under the batched names
    space = envs.single_action_space                          # MultiDiscrete, 58 dimensions
    space.seed(0)

    obs, infos = envs.reset(seed=0)                      # copy i is reset with seed 0 + i
    episode_return = np.zeros(envs.num_envs)
    for step in range(2 * 3):                            # one episode: (act, vote) x 3 rounds
        masks = obs["action_mask"]                       # tuple of 58 arrays (12, k_j)
        actions = np.stack([space.sample(mask=tuple(m[i] for m in masks))
                            for i in range(envs.num_envs)])
        obs, rewards, terms, truncs, infos = envs.step(actions)
        episode_return += rewards                        # 0 after an act step, the round's total after a vote
    # the last step auto-reset every copy: obs is round 1 of the next episode and
    # infos[i]["terminal_observation"] holds agent i's final observation
    envs.close()
    # --- end snippet ---

    assert envs.num_envs == 12
    assert obs["self"].shape == (12, 14) and obs["feed"].shape == (12, 10, 10)
    assert obs["dms"].shape == (12, 10, 6) and obs["vote_items"].shape == (12, 10, 10)
    assert len(obs["action_mask"]) == len(space.nvec) == 58
    assert flat_features(obs).shape == (12, 14 + 100 + 60 + 100)
    assert flat_mask(obs).shape == (12, int(space.nvec.sum()))
    assert truncs.all() and not terms.any()
    assert (obs["round"] == 1).all() and (obs["phase"] == 0).all()
    assert all("terminal_observation" in info and "reward_components" in info for info in infos)
    assert np.all(episode_return > 0)


@pytest.mark.parametrize("num_cpus", [0, 2])
def test_supersuit_vector_env_matches_unwrapped(num_cpus):
    ss = need_module("supersuit")
    copies, episodes, seed = 2, 3, 5
    n = copies * N_AGENTS
    envs = ss.concat_vec_envs_v1(ss.pettingzoo_env_to_vec_env_v1(make_env()), copies,
                                 num_cpus=num_cpus, base_class="gymnasium")
    refs = [make_env() for _ in range(copies)]
    space = refs[0].action_space("agent_0")
    space.seed(1)
    try:
        obs, infos = envs.reset(seed=seed)
        ref_obs = [ref.reset(seed=seed + k)[0] for k, ref in enumerate(refs)]   # copy k gets seed + k
        if num_cpus == 0:   # SuperSuit 3.11's multiprocessing reset returns its internal
            # compressed form, one [(row, info), ...] list per worker (step infos are fine)
            assert len(infos) == n and infos[0] == {"phase": "act", "round": 1}
        for k in range(copies):
            assert_obs_equal(obs, slice(k * N_AGENTS, (k + 1) * N_AGENTS), ref_obs[k])
        returns = np.zeros((episodes, n))
        for episode in range(episodes):
            for step in range(STEPS_PER_EPISODE):
                actions = np.stack([space.sample(mask=tuple(m[i] for m in obs["action_mask"]))
                                    for i in range(n)])
                obs, rewards, terms, truncs, infos = envs.step(actions)
                last = step == STEPS_PER_EPISODE - 1
                assert rewards.shape == terms.shape == truncs.shape == (n,) and len(infos) == n
                assert not np.any(terms)                      # the horizon is a truncation
                assert np.all(truncs) if last else not np.any(truncs)
                for k, ref in enumerate(refs):
                    rows = slice(k * N_AGENTS, (k + 1) * N_AGENTS)
                    r_obs, r_rew, r_term, r_trunc, r_info = ref.step(
                        {f"agent_{i}": actions[k * N_AGENTS + i] for i in range(N_AGENTS)})
                    want = np.array([r_rew[f"agent_{i}"] for i in range(N_AGENTS)])
                    np.testing.assert_array_equal(terms[rows], [r_term[f"agent_{i}"] for i in range(N_AGENTS)])
                    np.testing.assert_array_equal(truncs[rows], [r_trunc[f"agent_{i}"] for i in range(N_AGENTS)])
                    np.testing.assert_allclose(rewards[rows], want, rtol=1e-6, atol=1e-7)
                    if step % 2 == 0:
                        assert np.all(want == 0.0)            # act steps pay nothing
                    assert all(not r_info[f"agent_{i}"]["invalid"] for i in range(N_AGENTS))
                    if last:
                        assert ref.agents == []
                        for i in range(N_AGENTS):             # the final observation is kept
                            final = infos[k * N_AGENTS + i]["terminal_observation"]
                            np.testing.assert_array_equal(final["self"], r_obs[f"agent_{i}"]["self"])
                            assert infos[k * N_AGENTS + i]["reward_components"] == \
                                r_info[f"agent_{i}"]["reward_components"]
                        r_obs, _ = ref.reset()                # auto-reset continues the copy's rng
                    else:
                        assert ref.agents == ref.possible_agents   # no agent ever leaves early
                    assert_obs_equal(obs, rows, r_obs)
                returns[episode] += rewards
        assert np.all(returns > 0)
        assert not np.allclose(returns[0], returns[1])        # auto-reset started a new episode
    finally:
        envs.close()


def test_supersuit_unseeded_reset_gives_identical_copies():
    """Documented pitfall: the copies are pickled from one env, so ``reset()`` without a
    seed starts every copy from the config seed (same actions -> same episode)."""
    ss = need_module("supersuit")
    envs = ss.concat_vec_envs_v1(ss.pettingzoo_env_to_vec_env_v1(make_env()), 2, base_class="gymnasium")
    space = make_env().action_space("agent_0")

    def run(seed):
        space.seed(0)
        obs, _ = envs.reset(seed=seed)
        feeds = []
        for _ in range(STEPS_PER_EPISODE - 1):   # stop before the auto-reset
            masks = obs["action_mask"]
            row = [space.sample(mask=tuple(m[i] for m in masks)) for i in range(N_AGENTS)]
            obs, *_ = envs.step(np.stack(row + row))      # copy 1 gets copy 0's actions
            feeds.append(obs["feed"].copy())
        return np.stack(feeds)

    unseeded, seeded = run(None), run(0)
    np.testing.assert_array_equal(unseeded[:, :N_AGENTS], unseeded[:, N_AGENTS:])
    assert not np.array_equal(seeded[:, :N_AGENTS], seeded[:, N_AGENTS:])
    envs.close()


# ------------------------------------------------------------------------------------ TorchRL
# --- snippet: docs/marl_tooling.md "TorchRL adapter" ---
from gymnasium import spaces
from pettingzoo.utils.wrappers import BaseParallelWrapper


class TorchRLCompat(BaseParallelWrapper):
    """What torchrl's PettingZooWrapper needs from the numeric feed env: one flat boolean
    action mask of length sum(nvec) (not a tuple of per-dimension masks), with index 0 allowed
    in a dimension whose mask is all zero (gymnasium samples index 0 there, a masked torch
    distribution cannot), and infos of fixed-shape numbers (ours hold strings and lists: they
    are dropped; the round's reward components stay on ``env.unwrapped.last_round``)."""

    def observation_space(self, agent):
        space = self.env.observation_space(agent)
        size = int(self.env.action_space(agent).nvec.sum())
        return spaces.Dict({**space.spaces, "action_mask": spaces.MultiBinary(size)})

    def _convert(self, obs):
        out = {}
        for agent, o in obs.items():
            rows = [m if m.any() else np.eye(len(m), 1, dtype=m.dtype).ravel() for m in o["action_mask"]]
            out[agent] = {**o, "action_mask": np.concatenate(rows).astype(np.int8)}
        return out

    def reset(self, seed=None, options=None):
        obs, _ = self.env.reset(seed=seed, options=options)
        return self._convert(obs), {agent: {} for agent in obs}

    def step(self, actions):
        obs, rewards, terms, truncs, _ = self.env.step(actions)
        return self._convert(obs), rewards, terms, truncs, {agent: {} for agent in obs}
# --- end snippet ---


def test_torchrl_snippet():
    need_module("torchrl")

    # --- snippet: docs/marl_tooling.md "TorchRL" ---
    import torch
    from torchrl.envs.libs.pettingzoo import PettingZooWrapper

    import socialgym

    env = PettingZooWrapper(
        env=TorchRLCompat(socialgym.parallel_env(n_agents=6, max_rounds=3, obs_format="numeric", seed=0)),
        categorical_actions=True,          # MultiDiscrete -> MultiCategorical (integer vectors)
        return_state=False)
    torch.manual_seed(0)
    td = env.reset(seed=0)
    rollout = env.rollout(100, auto_reset=False, tensordict=td)   # masked random actions, stops at done
    # rollout["agent", "observation", "feed"]: (6 steps, 6 agents, 10, 10)
    # rollout["agent", "action"]: (6, 6, 58); rollout["next", "agent", "reward"]: (6, 6, 1)
    # --- end snippet ---

    assert env.group_map == {"agent": [f"agent_{i}" for i in range(N_AGENTS)]}
    assert rollout.batch_size == (STEPS_PER_EPISODE,)
    assert rollout["agent", "observation", "feed"].shape == (STEPS_PER_EPISODE, N_AGENTS, 10, 10)
    assert rollout["agent", "observation", "self"].shape == (STEPS_PER_EPISODE, N_AGENTS, 14)
    assert rollout["agent", "action"].shape == (STEPS_PER_EPISODE, N_AGENTS, 58)
    assert rollout["agent", "action_mask"].shape == (STEPS_PER_EPISODE, N_AGENTS, 285)
    assert rollout["next", "agent", "reward"].shape == (STEPS_PER_EPISODE, N_AGENTS, 1)
    done = rollout["next", "done"].squeeze(-1)
    assert done.tolist() == [False] * (STEPS_PER_EPISODE - 1) + [True]
    assert rollout["next", "truncated"][-1].item() and not rollout["next", "terminated"].any()


def test_torchrl_wrapper_matches_unwrapped():
    need_module("torchrl")
    import torch
    from torchrl.envs.libs.pettingzoo import PettingZooWrapper

    torch.manual_seed(0)
    env = PettingZooWrapper(env=TorchRLCompat(make_env()), categorical_actions=True, return_state=False)
    episodes = 2
    # without break_when_any_done the rollout auto-resets (unseeded) after each episode
    rollout = env.rollout(episodes * STEPS_PER_EPISODE, auto_reset=False, tensordict=env.reset(seed=3),
                          break_when_any_done=False)
    assert rollout.batch_size == (episodes * STEPS_PER_EPISODE,)

    ref = make_env()
    space = ref.action_space("agent_0")
    ref_obs, _ = ref.reset(seed=3)
    agents = ref.possible_agents
    for t in range(episodes * STEPS_PER_EPISODE):
        step = t % STEPS_PER_EPISODE
        if step == 0 and t > 0:
            ref_obs, _ = ref.reset()
        observed = rollout[t]["agent"]
        for key in BOX_KEYS:
            np.testing.assert_array_equal(observed["observation", key].numpy(),
                                          np.stack([ref_obs[a][key] for a in agents]))
        np.testing.assert_array_equal(observed["observation", "phase"].argmax(-1).numpy(), step % 2)
        mask = observed["action_mask"].numpy()
        for i, a in enumerate(agents):
            want = np.concatenate([m if m.any() else np.eye(len(m), 1, dtype=m.dtype).ravel()
                                   for m in ref_obs[a]["action_mask"]]).astype(bool)
            np.testing.assert_array_equal(mask[i], want)
        actions = observed["action"].numpy()
        assert all(space.contains(row) for row in actions)
        ref_obs, ref_rew, ref_term, ref_trunc, ref_info = ref.step({a: actions[i] for i, a in enumerate(agents)})
        assert all(not ref_info[a]["invalid"] for a in agents)    # masked samples are valid
        got = rollout[t]["next", "agent", "reward"].squeeze(-1).numpy()
        np.testing.assert_allclose(got, [ref_rew[a] for a in agents], rtol=1e-6, atol=1e-7)
        last = step == STEPS_PER_EPISODE - 1
        assert rollout[t]["next", "done"].item() == last
        assert bool(rollout[t]["next", "agent", "truncated"].all()) == last
        np.testing.assert_array_equal(rollout[t]["next", "agent", "truncated"].squeeze(-1).numpy(),
                                      [ref_trunc[a] for a in agents])
        np.testing.assert_array_equal(rollout[t]["next", "agent", "terminated"].squeeze(-1).numpy(),
                                      [ref_term[a] for a in agents])
        assert (ref.agents == []) == last
