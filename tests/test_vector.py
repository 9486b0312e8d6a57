"""socialgym.vector: N platforms stepped as one give byte for byte what N single environments give."""

from __future__ import annotations

import numpy as np
import pytest

import socialgym
from socialgym.tasks import OBJECTIVES
from socialgym.vector import make_vec

CONTENT_COLUMNS = ("kind", "topic", "round", "likes", "dislikes", "sentiment")


def sample_actions(masks: list, rng: np.random.Generator) -> np.ndarray:
    """One uniformly random allowed value per component, per agent (rows = agents)."""
    out = np.zeros((len(masks), len(masks[0])), np.int64)
    for i, mask in enumerate(masks):
        for k, m in enumerate(mask):
            out[i, k] = rng.choice(np.flatnonzero(m))
    return out


def content_rows(env, agents: range) -> list[tuple]:
    """The items written by ``agents``, in order, as comparable tuples (authors and recipients
    within the platform, targets as positions in this list)."""
    c = env.content
    author = c.column("author")
    ids = np.flatnonzero((author >= agents.start) & (author < agents.stop))
    position = {int(cid): k for k, cid in enumerate(ids)}
    rows = []
    for cid in ids.tolist():
        target = int(c.column("target_id")[cid])
        recipient = int(c.column("recipient")[cid])
        rows.append((int(author[cid]) - agents.start, recipient - agents.start if recipient >= 0 else -1,
                     position.get(target, -1) if target >= 0 else -1,
                     *(c.column(k)[cid].item() for k in CONTENT_COLUMNS)))
    return rows


def assert_same_rows(batched: dict, single: dict, rows: slice) -> None:
    for key in ("self", "feed", "dms", "vote_items"):
        got, want = np.ascontiguousarray(batched[key][rows]), np.ascontiguousarray(single[key])
        assert got.dtype == want.dtype and got.shape == want.shape, key
        assert got.tobytes() == want.tobytes(), key
    assert batched["phase"] == single["phase"] and batched["round"] == single["round"]
    assert [tuple(map(bytes, m)) for m in batched["action_mask"][rows]] == \
        [tuple(map(bytes, m)) for m in single["action_mask"]]


@pytest.mark.parametrize("objective", OBJECTIVES)
def test_batched_platforms_equal_single_environments(objective):
    seeds = [11, 4, 907]
    venv = make_vec(objective, len(seeds), autoreset=False)
    singles = [socialgym.make(f"socialgym/feed-{objective}-v0", obs_format="numeric") for _ in seeds]
    n = venv.n_agents
    rng = np.random.default_rng(5)
    for episode in range(2):                         # the second episode continues every stream
        obs, _ = venv.reset(seed=seeds if episode == 0 else None)
        single_obs = []
        for env, s in zip(singles, seeds):
            env.reset(seed=s if episode == 0 else None)
            single_obs.append(env.unwrapped.observe_arrays())
        done = False
        while not done:
            for e in range(len(seeds)):
                assert_same_rows(obs, single_obs[e], venv.env.platform_rows(e))
            actions = np.concatenate([sample_actions(o["action_mask"], rng) for o in single_obs])
            obs, rewards, _, truncated, info = venv.step_arrays(actions)
            for e, env in enumerate(singles):
                rows = venv.env.platform_rows(e)
                single_obs[e], r, _, done_e, single_info = env.unwrapped.step_arrays(actions[rows])
                assert rewards[rows].tobytes() == np.asarray(r).tobytes()
                assert truncated[e] == done_e
                if single_info["reward_components"] is not None:
                    assert info["reward_components"][rows].tobytes() == single_info["reward_components"].tobytes()
                    w = venv.env.tie_matrix()[rows, rows].toarray()
                    assert w.tobytes() == env.unwrapped.tie_matrix().toarray().tobytes()
            done = bool(truncated.all())
        for e, env in enumerate(singles):
            rows = venv.env.platform_rows(e)
            assert content_rows(venv.env, range(rows.start, rows.stop)) == content_rows(env.unwrapped, range(n))
            assert venv.env.lambdas[rows].tobytes() == env.unwrapped.lambdas.tobytes()


@pytest.mark.parametrize("recommender", ["random", "popularity", "social"])
def test_other_stateless_recommenders_per_platform(recommender):
    """random draws from each platform's own generator; popularity and social rank within it."""
    seeds = [3, 8]
    venv = make_vec("INF", 2, autoreset=False, recommender=recommender)
    singles = [socialgym.make("socialgym/feed-INF-v0", obs_format="numeric", recommender=recommender)
               for _ in seeds]
    obs, _ = venv.reset(seed=seeds)
    single_obs = []
    for env, s in zip(singles, seeds):
        env.reset(seed=s)
        single_obs.append(env.unwrapped.observe_arrays())
    rng = np.random.default_rng(0)
    for _ in range(8):
        actions = np.concatenate([sample_actions(o["action_mask"], rng) for o in single_obs])
        obs, *_ = venv.step_arrays(actions)
        for e, env in enumerate(singles):
            single_obs[e] = env.unwrapped.step_arrays(actions[venv.env.platform_rows(e)])[0]
            assert_same_rows(obs, single_obs[e], venv.env.platform_rows(e))


def test_autoreset_returns_the_new_episode_and_keeps_the_last():
    venv = make_vec("SOC", 2, max_rounds=2)
    obs, _ = venv.reset(seed=0)
    masks_rng = np.random.default_rng(1)
    for step in range(4):
        obs, rewards, terminated, truncated, info = venv.step_arrays(sample_actions(obs["action_mask"], masks_rng))
    assert truncated.tolist() == [True, True] and terminated.tolist() == [False, False]
    assert obs["round"] == 1 and obs["phase"] == 0              # the next episode's first observation
    assert info["final_observation"]["round"] == 3               # after round 2's vote step
    assert info["final_info"]["reward_components"].shape == (2 * venv.n_agents, 5)


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="num_envs"):
        make_vec("SOC", 0)
    with pytest.raises(ValueError, match="unknown task"):
        make_vec("socialgym/feed-XYZ-v0", 2)
    with pytest.raises(ValueError, match="lambdas"):
        make_vec("SOC", 2, lambdas=(1, 0, 0, 0, 0))
    with pytest.raises(ValueError, match="recommender without state"):
        make_vec("SOC", 2, recommender="topic_affinity")
    with pytest.raises(ValueError, match="soc_strategy"):
        make_vec("SOC", 2, soc_strategy=1, agent_interests=list(range(20)))
    venv = make_vec("SOC", 2)
    with pytest.raises(ValueError, match="2 seeds for 2|seeds for 2 platforms"):
        venv.reset(seed=[1, 2, 3])
    with pytest.raises(ValueError, match="step_arrays takes an integer matrix of shape \\(40, "):
        venv.reset(seed=0)
        venv.step_arrays(np.zeros((20, venv.layout.length), np.int64))


def test_round_one_with_nothing_created_matches_the_single_environment():
    """NOT in every slot of round 1 is invalid (round 1 allows only POST): lenient mode records it
    and the platforms' content stays empty, as in one environment."""
    venv = make_vec("SOC", 2, autoreset=False)
    obs, _ = venv.reset(seed=[1, 2])
    noop = np.tile(venv.layout.noop, (2 * venv.n_agents, 1))
    obs, rewards, _, _, info = venv.step_arrays(noop)
    assert len(venv.env.content) == 0 and len(info["invalid"]) == 2 * venv.n_agents
    single = socialgym.make("socialgym/feed-SOC-v0", obs_format="numeric").unwrapped
    single.reset(seed=1)
    want = single.step_arrays(noop[:venv.n_agents])[0]
    assert_same_rows(obs, want, venv.env.platform_rows(0))


def test_nothing_crosses_a_platform_through_the_other_entry_points():
    from socialgym.envs.feed.batched import BatchedFeedEnv

    with pytest.raises(ValueError, match="obs_format='numeric'"):
        BatchedFeedEnv(2, n_agents=4)
    env = BatchedFeedEnv(2, n_agents=4, obs_format="numeric")
    env.reset(seed=7)                                      # an integer: platform e gets 7 + e
    with pytest.raises(TypeError, match="step_arrays"):
        env.step({})
    with pytest.raises(ValueError, match="two platforms"):
        env.add_ties([0], [5], 0.5)
    env.add_ties([0], [3], 0.5)                            # within platform 0
    with pytest.raises(ValueError, match="without state"):
        env.set_recommender("topic_affinity")
    assert env.recommender.name == "chronological"
    with pytest.raises(ValueError, match="configured topics"):
        env.inject_post(0, "gardening")
    first = BatchedFeedEnv(2, n_agents=4, obs_format="numeric")
    first.reset(seed=[7, 8])
    assert env.observe_arrays()["self"].tobytes() == first.observe_arrays()["self"].tobytes()
