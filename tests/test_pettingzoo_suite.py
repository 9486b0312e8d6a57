"""PettingZoo's own test suite on every registered id, built with default arguments.

``parallel_api_test`` and ``parallel_seed_test`` run on the parallel form of every id that has
one (the 12 tasks and ``socialgym/feed-v0``); ``api_test`` and ``seed_test`` on the AEC form of
every id (``socialgym/discussion-v0`` is turn-based and has only the AEC form). The tests sample
actions from the action spaces — ``parallel_seed_test`` without the masks — which is legal
input under PettingZoo's convention: with the default ``invalid_actions="lenient"`` an action
that breaks the platform's rules becomes NOT (no vote) and is recorded.

PettingZoo 1.27's ``parallel_seed_test`` stops after one step (it tests ``any(terminations)``,
the dict's keys, which are true); ``test_unmasked_episode_is_deterministic`` runs the same
comparison to the end of the episode.

Run time: the large tasks (100 agents) are played for a few rounds only (``LARGE_CYCLES``);
the small ones and ``feed-v0`` to the end of the episode.
"""

from __future__ import annotations

import pytest
from gymnasium.utils.env_checker import data_equivalence
from pettingzoo.test import api_test, parallel_api_test, parallel_seed_test, seed_test

import socialgym
from socialgym.envs import REGISTRY
from socialgym.tasks import TASKS

IDS = [*TASKS, *REGISTRY]
PARALLEL_IDS = [*TASKS, *(i for i, module in REGISTRY.items() if hasattr(module, "parallel_env"))]
LARGE_CYCLES = 4          # 2 rounds: round 2 comments on, DMs about and votes on round 1's posts
# the fast tier (-m "not slow") runs the suite on these; the other tasks differ only in their
# rewards' weights and are left to the whole suite
FAST_IDS = {"socialgym/feed-v0", "socialgym/discussion-v0", "socialgym/feed-mixed-v0", "socialgym/feed-SOC-large-v0"}


def tiered(ids):
    return [i if i in FAST_IDS else pytest.param(i, marks=pytest.mark.slow) for i in ids]

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")   # PettingZoo's advice (non-array obs, names)


def cycles(env_id: str) -> int:
    """Parallel steps to play: the whole episode and one more, or a few rounds of a large task."""
    if env_id in TASKS and TASKS[env_id].size == "large":
        return LARGE_CYCLES
    config = socialgym.make(env_id).unwrapped.config
    return 2 * config.max_turns + 1 if env_id == "socialgym/discussion-v0" else 2 * config.max_rounds + 1


def test_the_ids_cover_every_registration():
    assert len(TASKS) == 12 and set(REGISTRY) == {"socialgym/feed-v0", "socialgym/discussion-v0"}
    assert PARALLEL_IDS == [*TASKS, "socialgym/feed-v0"]          # the discussion env is AEC only
    assert FAST_IDS <= set(IDS)
    discussion = socialgym.make("socialgym/discussion-v0")
    assert discussion.unwrapped.metadata["is_parallelizable"] is False
    assert not hasattr(REGISTRY["socialgym/discussion-v0"], "parallel_env")


@pytest.mark.parametrize("env_id", tiered(PARALLEL_IDS))
def test_parallel_api(env_id):
    env = socialgym.make(env_id)
    assert env.unwrapped.config.invalid_actions == "lenient"       # the default
    parallel_api_test(env, num_cycles=cycles(env_id))


@pytest.mark.parametrize("env_id", tiered(PARALLEL_IDS))
def test_parallel_seed(env_id):
    parallel_seed_test(lambda: socialgym.make(env_id), num_cycles=cycles(env_id))


@pytest.mark.parametrize("env_id", tiered(IDS))
def test_aec_api(env_id):
    api_test(socialgym.make(env_id, aec=True), num_cycles=cycles(env_id))


@pytest.mark.parametrize("env_id", tiered(IDS))
def test_aec_seed(env_id):
    seed_test(lambda: socialgym.make(env_id, aec=True), num_cycles=cycles(env_id))


@pytest.mark.parametrize("env_id", tiered(PARALLEL_IDS))
def test_unmasked_episode_is_deterministic(env_id):
    """What ``parallel_seed_test`` checks, for every step: two envs, the same reset seed and the
    same unmasked samples give equal observations, rewards, flags and infos; the invalid
    samples are recorded, never raised."""
    envs = [socialgym.make(env_id), socialgym.make(env_id)]
    outputs = [env.reset(seed=7) for env in envs]
    assert data_equivalence(outputs[0], outputs[1])
    for env in envs:
        for i, agent in enumerate(env.possible_agents):
            env.action_space(agent).seed(100 + i)
    steps = invalid = 0
    while envs[0].agents and steps < cycles(env_id):
        actions = [{a: env.action_space(a).sample() for a in env.agents} for env in envs]
        assert data_equivalence(actions[0], actions[1])
        outputs = [env.step(act) for env, act in zip(envs, actions)]
        assert data_equivalence(outputs[0], outputs[1]), f"{env_id}: step {steps} differs"
        invalid += sum(bool(info["invalid"]) for info in outputs[0][4].values())
        steps += 1
    assert steps == cycles(env_id) or envs[0].agents == []
    assert invalid > 0            # round 1 allows POST only: most unmasked samples break a rule


@pytest.mark.parametrize("env_id", ["socialgym/feed-SOC-v0", "socialgym/feed-v0"])
def test_default_lenient_mode_turns_a_rule_breaking_action_into_not(env_id):
    env = socialgym.make(env_id)
    obs, _ = env.reset(seed=0)
    nothing = env.unwrapped.layout.noop                           # NOT in every slot: round 1 allows only POST
    assert env.action_space("agent_0").contains(nothing)
    assert not obs["agent_0"]["action_mask"][0][3]                # type 3 = NOT is masked out
    _, _, _, _, infos = env.step({a: nothing for a in env.agents})
    want = [(slot, "act", "type") for slot in range(env.unwrapped.config.n_actions)]   # one record per slot
    assert [(r["slot"], r["phase"], r["field"]) for r in infos["agent_0"]["invalid"]] == want
    assert len(env.unwrapped.content) == 0                        # no slot created anything
    env.step({a: nothing for a in env.agents})                    # the vote step ends the round
    assert [(r["slot"], r["phase"], r["field"]) for r in env.unwrapped.last_round.invalid[0]] == want

    strict = socialgym.make(env_id, invalid_actions="strict")
    strict.reset(seed=0)
    with pytest.raises(ValueError, match="agent_0, slot 0, field 'type'"):
        strict.step({a: nothing for a in strict.agents})
