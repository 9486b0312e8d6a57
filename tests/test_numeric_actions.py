"""Numeric actions (issue 18): action masks valid in every phase and round, inert masks for the
other phase's components, numeric actions as lists and torch tensors, and the lazy
``socialgym.training.TorchPolicy`` export."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest
from capabilities import need_module, not_applicable

import socialgym
from socialgym.baselines import RandomPolicy

# 3 agents, 1 action slot, feed 2, vote feed 2, inbox 1, 2 topics in a numeric width of 3:
# one slot is type(4) target(2) recipient(2) reply(2) topic(3) tone(3) mention_0(2) mention_1(2)
HAND = dict(n_agents=3, n_actions=1, max_rounds=3, feed_size=2, vote_feed_size=2, dm_inbox_size=1,
            topics=["a", "b"], max_topics=3, recommender="chronological", sentiment="tone",
            obs_format="numeric")


def masks_of(obs, agent="agent_0") -> list[list[int]]:
    return [m.tolist() for m in obs[agent]["action_mask"]]


def run_episode_masks(**config):
    """Every (phase, round, agent mask tuple) of one random-policy episode (strict mode)."""
    env = socialgym.parallel_env(invalid_actions="strict", **config)
    obs, _ = env.reset(seed=config.get("seed", 0))
    policy = RandomPolicy(seed=1)
    seen = []
    while env.agents:
        for agent, o in obs.items():
            seen.append((env.unwrapped.phase, env.unwrapped.round, agent, o["action_mask"]))
        obs, *_ = env.step(policy.act(obs))
    return env, seen


# ============================================================ 1. masks valid in every round
@pytest.mark.parametrize("config", [
    dict(n_agents=5, n_actions=3, max_rounds=4, sentiment="tone", obs_format="numeric"),
    dict(n_agents=4, n_actions=2, max_rounds=4, feed_size=8, vote_feed_size=8, dm_inbox_size=3,
         sentiment="tone", obs_format="numeric", recommender="random"),
    dict(HAND),
])
def test_every_mask_component_allows_a_value_in_every_phase_and_round(config):
    env, seen = run_episode_masks(**config)
    nvec = env.action_space("agent_0").nvec
    assert {(phase, rnd) for phase, rnd, _, _ in seen} >= {("act", 1), ("vote", 1), ("act", 2), ("vote", 2)}
    for phase, rnd, agent, masks in seen:
        assert [len(m) for m in masks] == nvec.tolist()
        empty = [k for k, m in enumerate(masks) if not m.any()]
        assert not empty, (phase, rnd, agent, empty)


def test_round_one_target_slot_mask_is_the_null_slot():
    env = socialgym.parallel_env(**HAND)
    obs, _ = env.reset(seed=0)
    lay = env.unwrapped.layout
    for agent in env.agents:
        target = obs[agent]["action_mask"][1]            # target_slot of slot 0 (no COM in round 1)
        assert target.tolist() == [1, 0] and int(lay.slot_noop[1]) == 0


def test_masked_softmax_over_env_masks_has_no_nan_in_round_one():
    torch = need_module("torch")
    from socialgym.training import torch_policy as ppo      # the PPO network's runtime

    env = socialgym.parallel_env(n_agents=6, n_actions=2, max_rounds=3, feed_size=4, vote_feed_size=4,
                                 dm_inbox_size=3, sentiment="tone", obs_format="numeric",
                                 invalid_actions="strict", seed=0)
    obs, _ = env.reset(seed=0)
    stacked = ppo.stack_observations(obs, env.possible_agents)
    heads = ppo.Heads(env.layout.nvec, env.layout.act_length)
    generator = torch.Generator().manual_seed(0)
    net = ppo.ActorCritic(ppo.feature_size(4, 3, 4), heads.K, heads.M, 32)
    for step in range(2 * 3):
        # the env's masks alone (before Heads.masks' padding and fallback) allow a value per component
        assert all(all(c.any() for c in m) for m in stacked["action_mask"]), step
        mask = torch.from_numpy(heads.masks(stacked["action_mask"]))
        assert bool(mask.any(-1).all())
        # a textbook masked softmax (-inf, not PPO's -1e9) is finite on every component
        probs = torch.softmax(torch.zeros(mask.shape).masked_fill(~mask, float("-inf")), dim=-1)
        assert not torch.isnan(probs).any(), step
        x = torch.from_numpy(ppo.encode(stacked))
        w = torch.from_numpy(heads.phase_weight[int(stacked["phase"])]).expand(len(x), -1)
        with torch.no_grad():
            actions, logp, entropy, value = ppo.evaluate_actions(net, x, mask, w, generator=generator)
        assert torch.isfinite(logp).all() and torch.isfinite(entropy).all() and torch.isfinite(value).all()
        # every sampled action lies in its component's mask, and the env accepts it (strict)
        picked = np.take_along_axis(mask.numpy(), actions.numpy()[..., None], axis=-1)
        assert picked.all()
        obs_arrays, *_ = env.unwrapped.step_arrays(actions.numpy().astype(np.int64))
        stacked = obs_arrays


# ============================================================ 2. inert masks, by hand
R, S = [1, 0], [1, 0, 0]        # inert: only the no-op value 0 allowed (2- and 3-way components)
NOT_ONLY, NO_VOTE, ANY3 = [0, 0, 0, 1], [0, 1, 0], [1, 1, 1]


def test_masks_by_hand_round_one_vote_phase_and_round_two():
    env = socialgym.parallel_env(**HAND)
    obs, _ = env.reset(seed=0)
    # round 1, act: only POST; no COM -> target inert; no DM -> recipient, reply inert;
    # topics a, b of a width of 3; any tone; empty feed -> no mentions; votes inert (no vote)
    assert masks_of(obs) == [[1, 0, 0, 0], R, R, R, [1, 1, 0], ANY3, R, R, NO_VOTE, NO_VOTE]
    assert env.unwrapped.layout.noop.tolist() == [3, 0, 0, 0, 0, 1, 0, 0, 1, 1]
    obs, *_ = env.step({a: np.array([0, 0, 0, 0, 1, 1, 0, 0, 1, 1]) for a in env.agents})   # POST on b
    # round 1, vote: the act part is inert (NOT, slot 0, recipient 0, new DM, topic 0, neutral,
    # no mentions); both vote slots hold another agent's post
    assert masks_of(obs) == [NOT_ONLY, R, R, R, S, [0, 1, 0], R, R, ANY3, ANY3]
    obs, *_ = env.step({a: env.unwrapped.layout.noop for a in env.agents})
    # round 2, act: a feed of 2 posts, no DM received -> reply only "new DM"
    assert env.unwrapped.round == 2
    assert masks_of(obs) == [[1, 1, 1, 1], [1, 1], [1, 1], [1, 0], [1, 1, 0], ANY3, [1, 1], [1, 1],
                             NO_VOTE, NO_VOTE]


def test_masks_by_hand_with_an_empty_vocabulary():
    env = socialgym.parallel_env(**{**HAND, "topics": [], "invalid_actions": "lenient"})
    obs, _ = env.reset(seed=0)
    # round 1 with no topic: no valid numeric action exists (only POST, which needs a topic)
    assert masks_of(obs) == [[0, 0, 0, 0], R, R, R, [0, 0, 0], [0, 1, 0], R, R, NO_VOTE, NO_VOTE]
    obs, _, _, _, infos = env.step({a: env.unwrapped.layout.noop for a in env.agents})
    assert infos["agent_0"]["invalid"]                          # NOT in round 1: recorded (lenient)
    assert masks_of(obs) == [NOT_ONLY, R, R, R, S, [0, 1, 0], R, R, NO_VOTE, NO_VOTE]
    obs, *_ = env.step({a: env.unwrapped.layout.noop for a in env.agents})
    # round 2, nothing posted: only NOT, every other component inert
    assert masks_of(obs) == [NOT_ONLY, R, R, R, S, [0, 1, 0], R, R, NO_VOTE, NO_VOTE]


def test_the_env_ignores_what_inert_masks_rule_out():
    """The act part of a vote-phase action (and the vote part of an act-phase action) is ignored:
    any values there give the same step as the no-op values the inert masks allow."""
    results = []
    for junk in (False, True):
        env = socialgym.parallel_env(**{**HAND, "invalid_actions": "strict"})
        obs, _ = env.reset(seed=0)
        policy = RandomPolicy(seed=3)
        rng = np.random.default_rng(7)
        nvec = env.action_space("agent_0").nvec
        lay = env.unwrapped.layout
        rewards = []
        while env.agents:
            actions = policy.act(obs)
            if junk:        # random in-range values in the other phase's part of every vector
                other = slice(lay.act_length, None) if env.unwrapped.phase == "act" else slice(0, lay.act_length)
                for a, v in actions.items():
                    v = v.copy()
                    v[other] = rng.integers(0, nvec)[other]
                    actions[a] = v
            obs, rew, *_ = env.step(actions)
            rewards.append(rew)
        results.append(rewards)
    assert results[0] == results[1]


# ============================================================ 3. lists and tensors
def _run(form: str, api: str = "dict"):
    """One full episode driven by the same numeric actions given as ndarray / list / tensor."""
    env = socialgym.parallel_env(n_agents=5, n_actions=2, max_rounds=3, sentiment="tone",
                                 obs_format="numeric", invalid_actions="strict", seed=0)
    obs, _ = env.reset(seed=0)
    policy = RandomPolicy(seed=4)
    base = env.unwrapped
    trace = []
    while env.agents:
        if api == "dict":
            actions = policy.act(obs)
            converted = {a: convert(v, form) for a, v in actions.items()}
            obs, rew, term, trunc, infos = env.step(converted)
            trace.append((rew, trunc, [infos[a].get("reward_components") for a in env.possible_agents],
                          {a: {k: np.asarray(v).tolist() for k, v in o.items() if k != "action_mask"}
                           for a, o in obs.items()}))
        else:
            masks = obs["action_mask"] if isinstance(obs.get("action_mask"), list) else \
                [obs[a]["action_mask"] for a in env.agents]
            matrix = policy.sample_masks(masks)
            obs, rew, term, trunc, info = base.step_arrays(convert(matrix, form))
            trace.append((rew.tolist(), trunc, info["round"],
                          {k: np.asarray(v).tolist() for k, v in obs.items() if k != "action_mask"}))
    W = base.tie_matrix()
    return trace, (len(base.content), W.nnz, W.sum())


def convert(array: np.ndarray, form: str):
    if form == "ndarray":
        return array
    if form == "list":
        return array.tolist()
    if form == "tuple":
        return tuple(array.tolist())
    torch = need_module("torch")
    if form == "tensor":
        return torch.as_tensor(array)
    if form == "float_grad_tensor":                 # whole numbers in a float tensor that needs grad
        return torch.as_tensor(array, dtype=torch.float32).requires_grad_(True)
    raise AssertionError(form)


@pytest.mark.parametrize("form", ["list", "tuple", "tensor", "float_grad_tensor"])
def test_same_step_via_ndarray_list_and_tensor(form):
    assert _run(form) == _run("ndarray")


@pytest.mark.parametrize("form", ["list", "tensor"])
def test_same_step_arrays_via_ndarray_list_and_tensor(form):
    assert _run(form, api="arrays") == _run("ndarray", api="arrays")


def test_mixed_forms_in_one_step():
    torch = need_module("torch")
    env = socialgym.parallel_env(n_agents=4, n_actions=2, max_rounds=2, sentiment="tone",
                                 obs_format="numeric", invalid_actions="strict")
    ref = socialgym.parallel_env(n_agents=4, n_actions=2, max_rounds=2, sentiment="tone",
                                 obs_format="numeric", invalid_actions="strict")
    obs, _ = env.reset(seed=2)
    ref.reset(seed=2)
    policy = RandomPolicy(seed=2)
    while env.agents:
        actions = policy.act(obs)
        forms = [lambda v: v, lambda v: v.tolist(), torch.as_tensor, lambda v: tuple(int(x) for x in v)]
        obs, rew, *_ = env.step({a: forms[i](v) for i, (a, v) in enumerate(actions.items())})
        _, want, *_ = ref.step(actions)
        assert rew == want


class _ArrayLike:
    def __init__(self, values):
        self.values = values

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self.values, dtype=dtype)


def test_any_object_with___array___is_a_numeric_action():
    env = socialgym.parallel_env(**{**HAND, "invalid_actions": "strict"})
    env.reset(seed=0)
    obs, *_ = env.step({a: _ArrayLike([0, 0, 0, 0, 1, 1, 0, 0, 1, 1]) for a in env.agents})
    assert len(env.unwrapped.content) == 3 and obs["agent_0"]["phase"] == 1


@pytest.mark.parametrize("payload, phase, words", [
    ([0, 0, [0, 1], 0, 1, 1, 0, 0, 1, 1], "act", "field 'actions': numeric action must be a flat list of integers"),
    (["POST", 0, 0, 0, 1, 1, 0, 0, 1, 1], "act", "field 'actions': numeric action must be an integer array, got dtype"),
    ([0, 0, 0, 0, None, 1, 0, 0, 1, 1], "act", "must be an integer array, got dtype object"),
    ([0, 0, 0], "act", "numeric action must have shape (10,), got (3,)"),
    ([[0, 0, 0, 0, 1, 1, 0, 0, 1, 1]], "act", "numeric action must have shape (10,), got (1, 10)"),
    ([0.5] * 10, "act", "numeric action must hold whole numbers"),
    ([3, 0, 0, 0, 0, 1, 0, 0, [1], 1], "vote", "field 'votes': numeric action must be a flat list of integers"),
    ([3, 0, 0, 0, 0, 1, 0, 0, 1, "x"], "vote", "field 'votes': numeric action must be an integer array"),
])
def test_bad_list_actions_are_invalid_actions_naming_the_agent(payload, phase, words):
    env = socialgym.parallel_env(**{**HAND, "invalid_actions": "strict"})
    env.reset(seed=0)
    post = [0, 0, 0, 0, 1, 1, 0, 0, 1, 1]
    if phase == "vote":
        env.step({a: post for a in env.agents})
    actions = {"agent_0": post, "agent_1": payload, "agent_2": post}
    with pytest.raises(ValueError, match="invalid action of agent_1, payload") as info:
        env.step(actions)
    assert words in str(info.value)
    assert env.unwrapped.phase == phase                                  # atomic: nothing changed
    # lenient: recorded for that agent only, the others' actions go through
    env = socialgym.parallel_env(**{**HAND, "invalid_actions": "lenient"})
    env.reset(seed=0)
    if phase == "vote":
        env.step({a: post for a in env.agents})
    _, _, _, _, infos = env.step(actions)
    assert words.split(": ", 1)[-1] in infos["agent_1"]["invalid"][0]["reason"]
    assert not infos["agent_0"]["invalid"] and not infos["agent_2"]["invalid"]


def test_a_list_of_action_dicts_keeps_the_structured_hint():
    env = socialgym.parallel_env(**{**HAND, "invalid_actions": "strict"})
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"agent_0, payload, field 'actions': act-phase action must be a dict"):
        env.step({a: [{"type": "POST", "topic": "a"}] for a in env.agents})


def test_tensor_that_cannot_reach_the_cpu_is_an_invalid_action_naming_the_agent():
    torch = need_module("torch")
    env = socialgym.parallel_env(**{**HAND, "invalid_actions": "strict"})
    env.reset(seed=0)
    post = np.array([0, 0, 0, 0, 1, 1, 0, 0, 1, 1])
    meta = torch.empty(10, dtype=torch.int64, device="meta")     # has no data to copy
    with pytest.raises(ValueError, match=r"invalid action of agent_2, payload, field 'actions': numeric action "
                                         r"of type Tensor could not be converted"):
        env.step({"agent_0": post, "agent_1": post, "agent_2": meta})


def test_cuda_tensors_are_moved_to_the_cpu():
    torch = need_module("torch")
    if not torch.cuda.is_available():
        not_applicable("no CUDA device here (CI and the developers' machines have none)")

    env = socialgym.parallel_env(**{**HAND, "invalid_actions": "strict"})
    env.reset(seed=0)
    post = torch.tensor([0, 0, 0, 0, 1, 1, 0, 0, 1, 1], device="cuda")
    env.step({a: post for a in env.agents})
    assert len(env.unwrapped.content) == 3
    env.unwrapped.step_arrays(torch.as_tensor(np.tile(env.unwrapped.layout.noop, (3, 1)), device="cuda"))
    assert env.unwrapped.round == 2


def test_step_arrays_ragged_list_is_a_clear_error():
    env = socialgym.parallel_env(**HAND)
    env.reset(seed=0)
    rows = [[0, 0, 0, 0, 1, 1, 0, 0, 1, 1]] * 2 + [[0, 0, 0]]
    with pytest.raises(ValueError, match="step_arrays could not convert the actions .list. to a numpy integer matrix"):
        env.unwrapped.step_arrays(rows)
    with pytest.raises(ValueError, match=r"step_arrays takes an integer matrix of shape \(3, 10\)"):
        env.unwrapped.step_arrays([[0, 0, 0]] * 3)


# ============================================================ 4. the lazy TorchPolicy export
def _python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=120)


def test_importing_baselines_or_training_does_not_import_torch():
    done = _python("""
        import sys
        import socialgym.baselines
        import socialgym.training
        from socialgym.baselines import *
        from socialgym.training import *
        from socialgym.baselines import GreedyPolicy, RandomPolicy
        assert "TorchPolicy" in dir(socialgym.training)
        print(sorted(m for m in sys.modules if m.split(".")[0] == "torch"))
    """)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_torch_policy_is_exported_lazily():
    need_module("torch")
    import socialgym.training as training
    from socialgym.training import TorchPolicy
    from socialgym.training.torch_policy import TorchPolicy as direct

    assert TorchPolicy is direct and training.TorchPolicy is direct
    with pytest.raises(AttributeError, match="has no attribute 'NoSuchPolicy'"):
        training.NoSuchPolicy  # noqa: B018
    from socialgym.training import ppo                          # the training script imports it
    assert not hasattr(ppo, "TorchPolicy")                      # the runtime has its own module


def test_torch_policy_without_torch_says_how_to_install_it():
    done = _python("""
        import sys

        class NoTorch:                      # as if torch were not installed
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] == "torch":
                    raise ModuleNotFoundError(f"No module named {name!r}", name=name)

        sys.meta_path.insert(0, NoTorch())
        import socialgym.training
        try:
            from socialgym.training import TorchPolicy
        except ImportError as err:
            print("ImportError:", err)
    """)
    assert done.returncode == 0, done.stderr
    assert "ImportError: the PPO baseline needs torch" in done.stdout and "socialgym[torch]" in done.stdout
