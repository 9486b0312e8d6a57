"""Registered tasks (socialgym/tasks.py): PettingZoo's parallel API test on every id, the
documented sizes, λ per objective (one-hot; mixed redrawn from the reset seed), make's errors,
and the size table of docs/tasks.md being the one the benchmark script writes."""

from __future__ import annotations

import importlib.util
import warnings
from pathlib import Path

import numpy as np
import pytest
from capabilities import need_module
from pettingzoo.test import api_test, parallel_api_test

import socialgym
from socialgym.baselines import RandomPolicy
from socialgym.config import REWARD_NAMES
from socialgym.envs.feed import FeedEnv
from socialgym.tasks import OBJECTIVES, SIZES, TASKS, RedrawLambdas, draw_lambdas, task_id

ROOT = Path(__file__).resolve().parents[1]
SMALL_IDS = [t.id for t in TASKS.values() if t.size == "small"]
LARGE_IDS = [t.id for t in TASKS.values() if t.size == "large"]
MIXED = "socialgym/feed-mixed-v0"


def _api_test(env, num_cycles: int) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)        # the test's findings are warnings
        parallel_api_test(env, num_cycles=num_cycles)


@pytest.mark.parametrize("env_id", SMALL_IDS)
def test_parallel_api_small(env_id):
    _api_test(socialgym.make(env_id), num_cycles=25)             # one whole episode (2 steps a round)


@pytest.mark.parametrize("env_id", LARGE_IDS)
def test_parallel_api_large(env_id):
    _api_test(socialgym.make(env_id), num_cycles=4)


@pytest.mark.parametrize("obs_format", ["numeric", "both"])
def test_parallel_api_mixed_numeric(obs_format):
    _api_test(socialgym.make(MIXED, obs_format=obs_format), num_cycles=25)


def test_aec_form():
    api_test(socialgym.make(MIXED, aec=True), num_cycles=5)


def test_registry_and_sizes():
    assert len(TASKS) == len(OBJECTIVES) * len(SIZES) == 12
    assert set(SMALL_IDS) == {f"socialgym/feed-{o}-v0" for o in ("SOC", "INF", "PRE", "COORD", "EMO", "mixed")}
    assert set(LARGE_IDS) == {f"socialgym/feed-{o}-large-v0" for o in ("SOC", "INF", "PRE", "COORD", "EMO", "mixed")}
    assert socialgym.TASKS is TASKS
    for t in TASKS.values():
        env = socialgym.make(t.id)
        assert isinstance(env.unwrapped, FeedEnv)
        cfg = env.unwrapped.config
        for key, value in SIZES[t.size].items():
            assert getattr(cfg, key) == value, (t.id, key)
        assert task_id(t.objective, t.size) == t.id
    assert SIZES["small"]["n_agents"] == 20 and SIZES["small"]["max_rounds"] == 10
    assert SIZES["large"]["n_agents"] == 100 and SIZES["large"]["max_rounds"] == 20
    with pytest.raises(TypeError):
        TASKS["socialgym/feed-SOC-v0"].config["n_agents"] = 3             # read-only


def test_small_size_is_the_ppo_default():
    need_module("torch")
    from socialgym.training import ppo
    kwargs = ppo.env_kwargs(ppo.Args())
    assert {k: kwargs[k] for k in SIZES["small"]} == dict(SIZES["small"])
    env = ppo.make_env(ppo.Args())                                      # trains on the task itself
    assert isinstance(env, RedrawLambdas) and env.unwrapped.config.obs_format == "numeric"


@pytest.mark.parametrize("objective", REWARD_NAMES)
def test_single_reward_tasks_pay_one_component(objective):
    env = socialgym.make(task_id(objective), obs_format="both")
    k = REWARD_NAMES.index(objective)
    hot = np.eye(len(REWARD_NAMES))[k]
    for seed in (0, 1):
        obs, _ = env.reset(seed=seed)
        assert np.array_equal(env.lambdas, np.tile(hot, (env.num_agents, 1)))
        assert obs["agent_0"]["lambdas"] == dict(zip(REWARD_NAMES, hot.tolist()))
    policy = RandomPolicy(seed=0)
    votes = 0
    while env.agents:
        obs, rewards, _, _, infos = env.step(policy.act(obs))
        if "reward_components" in infos["agent_0"]:                      # after a vote step
            votes += 1
            comps = np.array([[infos[a]["reward_components"][r] for r in REWARD_NAMES] for a in env.possible_agents])
            assert [rewards[a] for a in env.possible_agents] == pytest.approx(comps[:, k].tolist())
    assert votes == 10


def test_mixed_lambdas_follow_the_reset_seed():
    env = socialgym.make(MIXED)
    other = socialgym.make(MIXED)
    env.reset(seed=3)
    a = env.lambdas.copy()
    assert a.shape == (20, len(REWARD_NAMES))
    assert np.allclose(a.sum(1), 1.0) and (a >= 0).all()
    assert len({tuple(r) for r in a.round(12)}) == 20                   # per agent, not one row tiled
    env.reset(seed=4)
    assert not np.allclose(env.lambdas, a)                                # another seed, other λ
    obs, _ = other.reset(seed=3)
    assert np.array_equal(other.lambdas, a)                               # equal seeds, equal λ (fresh env)
    env.reset(seed=3)
    assert np.array_equal(env.lambdas, a)                                 # ... and on the same env
    assert obs["agent_5"]["lambdas"] == pytest.approx(dict(zip(REWARD_NAMES, a[5])))   # what the agent sees
    env.reset()
    b = env.lambdas.copy()
    env.reset()
    assert not np.allclose(env.lambdas, b) and not np.allclose(b, a)      # unseeded resets go on drawing
    # unseeded first reset: from the config's seed
    first = [socialgym.make(MIXED, seed=7) for _ in range(2)]
    for e in first:
        e.reset()
    assert np.array_equal(first[0].lambdas, first[1].lambdas)
    # the λ stream is its own, not the environment RNG on the same seed
    assert not np.allclose(a, np.random.default_rng(3).dirichlet(np.ones(5), size=20))


def test_mixed_rewards_use_the_drawn_lambdas():
    env = socialgym.make(MIXED, obs_format="numeric")
    obs, _ = env.reset(seed=11)
    assert np.allclose(obs["agent_2"]["self"][3:8], env.lambdas[2])
    policy = RandomPolicy(seed=0)
    while env.agents:
        obs, rewards, _, _, infos = env.step(policy.act(obs))
        if "reward_components" in infos["agent_0"]:
            want = (env.last_round.components * env.lambdas).sum(1)
            assert [rewards[a] for a in env.possible_agents] == pytest.approx(want.tolist())


def test_overrides_and_errors():
    env = socialgym.make("socialgym/feed-EMO-large-v0", obs_format="numeric", seed=5)
    assert env.config.obs_format == "numeric" and env.config.seed == 5 and env.config.n_agents == 100
    assert isinstance(socialgym.make("socialgym/feed-v0", n_agents=3), FeedEnv)   # plain ids still work
    with pytest.raises(ValueError) as info:
        socialgym.make("socialgym/feed-SOCC-v0")
    message = str(info.value)
    assert "\n" not in message and message.startswith("unknown environment id")
    assert all(i in message for i in [*TASKS, "socialgym/feed-v0", "socialgym/discussion-v0"])
    assert "did you mean 'socialgym/feed-SOC-v0'" in message
    with pytest.raises(ValueError, match="unknown environment id"):
        socialgym.make(["not", "an id"])
    with pytest.raises(ValueError, match="fixes lambdas"):
        socialgym.make(MIXED, lambdas=[0.2] * 5)
    with pytest.raises(TypeError, match="allowed keys"):
        socialgym.make("socialgym/feed-SOC-v0", n_agentz=3)
    with pytest.raises(ValueError, match="seed"):
        socialgym.make(MIXED).reset(seed=-1)
    with pytest.raises(ValueError, match="lambdas must be one of"):
        draw_lambdas(3, np.random.default_rng(0), "flat")
    assert np.allclose(draw_lambdas(3, np.random.default_rng(0), "uniform"), 0.2)


def test_docs_size_table_is_generated():
    spec = importlib.util.spec_from_file_location("socialgym_bench_tasks", ROOT / "benchmarks" / "tasks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    doc = (ROOT / "docs" / "tasks.md").read_text(encoding="utf-8")
    section = doc.split("<!-- tasks-sizes:begin -->", 1)[1].split("<!-- tasks-sizes:end -->", 1)[0]
    assert section.strip() == module.sizes_markdown().strip(), "rerun benchmarks/tasks.py"
