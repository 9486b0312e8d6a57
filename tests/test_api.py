"""PettingZoo API conformance, spaces, seeding and the two action encodings."""

import numpy as np
import pytest
import scipy.sparse as sp
from pettingzoo.test import api_test, parallel_api_test

import socialgym
from socialgym.baselines import GreedyPolicy, RandomPolicy


def small(**kw):
    base = dict(n_agents=5, n_actions=3, max_rounds=6, sentiment="tone")
    base.update(kw)
    return socialgym.parallel_env(**base)


@pytest.mark.parametrize("obs_format", ["structured", "numeric", "both"])
def test_parallel_api_test(obs_format):
    parallel_api_test(small(obs_format=obs_format), num_cycles=100)


def test_aec_api_test():
    api_test(socialgym.env(n_agents=4, n_actions=2, max_rounds=3, sentiment="tone"), num_cycles=50)


def test_aec_loop_runs_full_episode_with_rewards():
    env = socialgym.env(n_agents=4, n_actions=2, max_rounds=3, sentiment="tone")
    env.reset(seed=3)
    policy = RandomPolicy(seed=3)
    steps, total = 0, 0.0
    for agent in env.agent_iter():
        obs, reward, term, trunc, info = env.last()
        total += reward
        action = None if term or trunc else policy.act({agent: obs})[agent]
        env.step(action)
        steps += 1
    # 4 agents x (2 phases x 3 rounds) turns, plus one final turn per agent to remove it
    assert steps == 4 * 6 + 4
    assert total != 0.0


@pytest.mark.parametrize("obs_format", ["structured", "numeric", "both"])
def test_observations_lie_in_observation_space_all_episode(obs_format):
    env = small(obs_format=obs_format)
    obs, _ = env.reset(seed=0)
    policy = RandomPolicy(seed=0)
    while env.agents:
        for a in env.agents:
            assert env.observation_space(a).contains(obs[a]), a
        obs, *_ = env.step(policy.act(obs))


def test_masked_samples_are_always_valid_in_strict_mode():
    env = small(obs_format="numeric", invalid_actions="strict", max_rounds=8)
    obs, _ = env.reset(seed=1)
    while env.agents:  # raises ValueError on any invalid sample
        actions = {a: env.action_space(a).sample(mask=obs[a]["action_mask"]) for a in env.agents}
        obs, *_ = env.step(actions)


def test_phases_rewards_and_truncation_timing():
    env = small(max_rounds=2)
    obs, _ = env.reset(seed=0)
    policy = RandomPolicy(seed=0)
    assert all(o["phase"] == "act" and o["round"] == 1 for o in obs.values())
    obs, rew, term, trunc, infos = env.step(policy.act(obs))
    assert all(o["phase"] == "vote" for o in obs.values())
    assert set(rew.values()) == {0.0} and not any(trunc.values())
    assert "reward_components" not in infos["agent_0"]
    obs, rew, term, trunc, infos = env.step(policy.act(obs))
    assert set(infos["agent_0"]["reward_components"]) == {"SOC", "INF", "PRE", "COORD", "EMO"}
    assert all(o["phase"] == "act" and o["round"] == 2 for o in obs.values())
    env.step(policy.act(obs))
    _, _, term, trunc, _ = env.step(policy.act(env._observe()))
    assert all(trunc.values()) and not any(term.values())
    assert env.agents == []
    with pytest.raises(RuntimeError, match="reset"):
        env.step({})


def test_spaces_are_cached_per_agent():
    env = small()
    assert env.action_space("agent_1") is env.action_space("agent_1")
    assert env.observation_space("agent_1") is env.observation_space("agent_1")
    assert env.action_space("agent_1") is not env.action_space("agent_2")
    with pytest.raises(KeyError, match="unknown agent"):
        env.action_space("bob")


def test_registered_versioned_id_and_metadata():
    env = socialgym.make("socialgym/feed-v0", n_agents=3)
    assert isinstance(env, socialgym.envs.feed.FeedEnv)
    assert env.metadata["name"] == "socialgym_feed_v0"
    assert env.metadata["is_parallelizable"] is True
    with pytest.raises(ValueError, match="unknown environment id"):
        socialgym.make("socialgym/nope-v0")


def test_unknown_config_key_names_allowed_keys():
    with pytest.raises(TypeError, match="n_agentz.*allowed keys"):
        socialgym.parallel_env(n_agentz=3)
    with pytest.raises(ValueError, match="lambdas"):
        socialgym.parallel_env(n_agents=3, lambdas=[0.5, 0.5, 0.5, 0, 0])
    with pytest.raises(ValueError, match="invalid_actions"):
        socialgym.parallel_env(n_agents=3, invalid_actions="sloppy")


def _run(env, policy, seed):
    obs, _ = env.reset(seed=seed)
    trace = []
    while env.agents:
        obs, rew, *_ = env.step(policy.act(obs))
        trace.append(sorted(rew.items()))
    return trace, env.tie_matrix().toarray(), [t for t in env.content.texts]


@pytest.mark.parametrize("recommender", ["chronological", "random"])
def test_multi_round_determinism_under_seed(recommender):
    kw = dict(n_agents=8, max_rounds=6, recommender=recommender, sentiment="tone")
    a = _run(socialgym.parallel_env(**kw), RandomPolicy(seed=5), seed=11)
    b = _run(socialgym.parallel_env(**kw), RandomPolicy(seed=5), seed=11)
    assert a[0] == b[0]
    np.testing.assert_array_equal(a[1], b[1])
    c = _run(socialgym.parallel_env(**kw), RandomPolicy(seed=6), seed=11)
    assert a[0] != c[0]


def test_random_recommender_depends_on_env_seed_only():
    kw = dict(n_agents=8, max_rounds=3, recommender="random", sentiment="tone")
    feeds = []
    for seed in (1, 1, 2):
        env = socialgym.parallel_env(**kw)
        obs, _ = env.reset(seed=seed)
        policy = GreedyPolicy(seed=0)
        for _ in range(2):
            obs, *_ = env.step(policy.act(obs))
        feeds.append(env._feed.copy())
    np.testing.assert_array_equal(feeds[0], feeds[1])
    assert not np.array_equal(feeds[0], feeds[2])


def test_tie_matrix_is_sparse_with_zero_diagonal():
    env = small()
    obs, _ = env.reset(seed=0)
    policy = RandomPolicy(seed=0)
    while env.agents:
        obs, *_ = env.step(policy.act(obs))
    W = env.tie_matrix()
    assert sp.issparse(W) and W.shape == (5, 5)
    assert np.all(W.diagonal() == 0)
    assert W.nnz > 0 and W.data.min() >= 0 and W.data.max() <= 1


def _numeric_action(env, slots, votes=None):
    lay = env.layout
    vec = np.zeros(lay.length, dtype=np.int64)
    vec[lay.act_length:] = 1  # no votes
    for s, fields in enumerate(slots):
        row = np.zeros(lay.slot_width, dtype=np.int64)
        for name, value in fields.items():
            if name.startswith("mention_"):
                row[6 + int(name.split("_")[1])] = value
            else:
                row[("type", "target_slot", "recipient", "reply_slot", "topic", "tone").index(name)] = value
        vec[s * lay.slot_width:(s + 1) * lay.slot_width] = row
    if votes is not None:
        vec[lay.act_length:] = votes
    return vec


def test_numeric_and_structured_actions_reach_the_same_batch():
    kw = dict(n_agents=3, n_actions=2, max_rounds=2, topics=["a", "b"], sentiment="tone", feed_size=4,
              vote_feed_size=4)
    envs = [socialgym.parallel_env(**kw) for _ in range(2)]
    obs = [e.reset(seed=0)[0] for e in envs]
    POST, COM, DM = 0, 1, 2
    # round 1: numeric POSTs (topic a supportive, topic b critical) vs structured equivalents
    num = {a: _numeric_action(envs[0], [{"type": POST, "topic": 0, "tone": 0},
                                        {"type": POST, "topic": 1, "tone": 2}]) for a in envs[0].agents}
    struct = {a: {"actions": [{"type": "POST", "topic": "a", "tone": "supportive"},
                              {"type": "POST", "topic": "b", "tone": "critical"}]} for a in envs[1].agents}
    obs[0], *_ = envs[0].step(num)
    obs[1], *_ = envs[1].step(struct)
    # votes: like the first vote item (numeric code 2 = +1)
    vnum = {a: _numeric_action(envs[0], [{}, {}], votes=[2, 1, 1, 1]) for a in envs[0].agents}
    vstruct = {a: {"votes": {obs[1][a]["vote_items"][0]["id"]: 1}} for a in envs[1].agents}
    obs[0], r0, *_ = envs[0].step(vnum)
    obs[1], r1, *_ = envs[1].step(vstruct)
    assert r0 == r1
    # round 2 for agent_0: COM on feed slot 0 mentioning its author; a new DM to agent_2
    # (recipient offset 1: (0 + 1 + 1) mod 3 = 2) on topic b
    feed0 = obs[1]["agent_0"]["feed"]
    num = {a: _numeric_action(envs[0], [{"type": COM, "target_slot": 0, "tone": 0, "mention_0": 1},
                                        {"type": DM, "recipient": 1, "topic": 1, "tone": 1}])
           for a in envs[0].agents}
    struct = {}
    for i, a in enumerate(envs[1].agents):
        f = obs[1][a]["feed"][0]
        dm_to = envs[1].agents[(i + 2) % 3]
        struct[a] = {"actions": [{"type": "COM", "target_id": f["id"], "mentions": [f["author"]], "tone": "supportive"},
                                 {"type": "DM", "recipient": dm_to, "topic": "b", "tone": "neutral"}]}
    assert [f["id"] for f in feed0] == [f["id"] for f in obs[0]["agent_0"]["feed"]]
    envs[0].step(num)
    envs[1].step(struct)
    b0, b1 = envs[0]._pending[0], envs[1]._pending[0]
    for col in ("sender", "kind", "recipient", "target_id", "topic", "sentiment", "mention_action", "mention_agent"):
        np.testing.assert_array_equal(getattr(b0, col), getattr(b1, col), err_msg=col)


def test_custom_recommender_function_and_validation():
    def newest_two(request, rng):
        from socialgym.recommenders import top_k_excluding_own
        return top_k_excluding_own(request.candidates[::-1], request.viewers,
                                   request.content.column("author"), min(2, request.k))

    env = socialgym.parallel_env(n_agents=4, max_rounds=2, recommender=newest_two, sentiment="tone")
    obs, _ = env.reset(seed=0)
    policy = RandomPolicy(seed=0)
    obs, *_ = env.step(policy.act(obs))
    obs, *_ = env.step(policy.act(obs))
    assert all(len(o["feed"]) == 2 for o in obs.values())

    def shows_own(request, rng):
        return np.tile(request.candidates[:1], (request.n_agents, 1))

    env = socialgym.parallel_env(n_agents=4, max_rounds=2, recommender=shows_own, sentiment="tone")
    obs, _ = env.reset(seed=0)
    with pytest.raises(ValueError, match="own items"):
        env.step(policy.act(obs))


def test_greedy_beats_random_on_total_reward():
    def mean_total(policy):
        env = socialgym.parallel_env(n_agents=20, max_rounds=10, recommender="random", sentiment="tone")
        obs, _ = env.reset(seed=4)
        totals = []
        while env.agents:
            obs, rew, *_ = env.step(policy.act(obs))
            if env.phase == "act":
                totals.append(np.mean(list(rew.values())))
        return np.mean(totals)

    assert mean_total(GreedyPolicy(seed=1)) > mean_total(RandomPolicy(seed=1))


def _posts_only_round(env):
    env.step({a: {"actions": [{"type": "POST", "topic": "a"}]} for a in env.agents})
    return env.step({a: {"votes": {}} for a in env.agents})


def test_seed_graph_starts_ties_and_decays_when_inactive():
    seed = np.zeros((3, 3))
    seed[0, 1] = 0.5
    env = socialgym.parallel_env(n_agents=3, n_actions=1, max_rounds=2, topics=["a"], sentiment="tone",
                                 seed_graph=seed)
    env.reset(seed=0)
    assert env.tie_matrix()[0, 1] == 0.5
    _posts_only_round(env)                              # no interaction: one decay step
    assert env.tie_matrix()[0, 1] == pytest.approx(0.5 * 2 ** (-1 / 5))
    with pytest.raises(ValueError, match="seed_graph"):
        socialgym.parallel_env(n_agents=3, seed_graph=np.ones((2, 2))).reset(seed=0)


def test_custom_tie_scorer_replaces_heuristic_evidence():
    class Always(object):
        def __init__(self, value):
            self.value = value
            self.seen = []

        def score(self, signals, context):
            self.seen.append((signals.src.tolist(), signals.dst.tolist()))
            return np.full(len(signals), self.value)

    scorer = Always(0.3)
    env = socialgym.parallel_env(n_agents=3, n_actions=1, max_rounds=2, topics=["a"], sentiment="tone",
                                 tie_scorer=scorer)
    env.reset(seed=0)
    env.step({"agent_0": {"actions": [{"type": "POST", "topic": "a", "mentions": ["agent_2"]}]},
              "agent_1": {"actions": [{"type": "POST", "topic": "a"}]},
              "agent_2": {"actions": [{"type": "POST", "topic": "a"}]}})
    env.step({a: {"votes": {}} for a in env.agents})
    assert scorer.seen == [([0], [2])]
    # W = 0 + min(0.25, (1 - 0) * (0.3 - 0.1)) = 0.2
    assert env.tie_matrix()[0, 2] == pytest.approx(0.2)

    env = socialgym.parallel_env(n_agents=3, n_actions=1, max_rounds=2, topics=["a"], sentiment="tone",
                                 tie_scorer=Always(1.5))
    env.reset(seed=0)
    env.step({"agent_0": {"actions": [{"type": "POST", "topic": "a", "mentions": ["agent_2"]}]},
              "agent_1": {"actions": [{"type": "POST", "topic": "a"}]},
              "agent_2": {"actions": [{"type": "POST", "topic": "a"}]}})
    with pytest.raises(ValueError, match="tie scorer"):
        env.step({a: {"votes": {}} for a in env.agents})


def test_vader_scores_text_and_text_overrides_tone():
    env = socialgym.parallel_env(n_agents=2, n_actions=1, max_rounds=2, topics=["a"], sentiment="vader")
    env.reset(seed=0)
    env.step({"agent_0": {"actions": [{"type": "POST", "topic": "a", "text": "I love this, wonderful!",
                                       "tone": "critical"}]},
              "agent_1": {"actions": [{"type": "POST", "topic": "a", "text": "This is terrible and awful."}]}})
    s = env.content.column("sentiment")
    assert s[0] > 0.5 and s[1] < -0.5


def test_render_ansi_summarises_round():
    env = socialgym.parallel_env(n_agents=3, n_actions=1, max_rounds=2, topics=["a"], sentiment="tone",
                                 render_mode="ansi")
    env.reset(seed=0)
    _posts_only_round(env)
    text = env.render()
    assert "round 2" in text and "SOC" in text


def test_step_arrays_matches_dict_step_round_for_round():
    kw = dict(n_agents=6, n_actions=2, max_rounds=4, obs_format="numeric", sentiment="tone",
              recommender="random")
    env_d, env_a = socialgym.parallel_env(**kw), socialgym.parallel_env(**kw)
    obs_d, _ = env_d.reset(seed=9)
    env_a.reset(seed=9)
    policy = RandomPolicy(seed=2)
    while env_d.agents:
        actions = policy.act(obs_d)
        matrix = np.stack([actions[a] for a in env_d.agents])
        obs_d, rew_d, _, trunc_d, info_d = env_d.step(actions)
        obs_a, rew_a, _, trunc_a, info_a = env_a.step_arrays(matrix)
        np.testing.assert_array_equal(rew_a, [rew_d[a] for a in env_d.possible_agents])
        for i, agent in enumerate(env_d.possible_agents):
            for key in ("self", "feed", "dms", "vote_items"):
                np.testing.assert_array_equal(obs_a[key][i], obs_d[agent][key])
            assert all(np.array_equal(x, y) for x, y in zip(obs_a["action_mask"][i], obs_d[agent]["action_mask"]))
        if info_a["reward_components"] is not None:
            np.testing.assert_allclose(info_a["reward_components"][0],
                                       list(info_d["agent_0"]["reward_components"].values()))
        assert trunc_a == all(trunc_d.values())
    assert (env_a.tie_matrix() != env_d.tie_matrix()).nnz == 0
    with pytest.raises(RuntimeError):
        env_a.step_arrays(matrix)


def test_step_arrays_validates_shape_and_contents():
    env = socialgym.parallel_env(n_agents=3, n_actions=1, max_rounds=2, sentiment="tone", invalid_actions="strict")
    env.reset(seed=0)
    with pytest.raises(ValueError, match="shape"):
        env.step_arrays(np.zeros((2, env.layout.length), np.int64))
    bad = np.zeros((3, env.layout.length), np.int64)
    bad[1, 0] = 3                                   # NOT in round 1
    with pytest.raises(ValueError, match="agent_1.*slot 0.*'type'"):
        env.step_arrays(bad)


def test_buffer_pool_reuses_only_released_arrays():
    from socialgym.envs.feed.buffers import BufferPool
    pool = BufferPool(per_key=3)
    a = pool.empty("x", (4, 3), np.float32)
    a_addr = a.ctypes.data
    kept = pool.empty("x", (4, 3), np.float32)      # a is still held: a new array
    assert kept.ctypes.data != a_addr
    view = a[1:]
    del a
    b = pool.empty("x", (4, 3), np.float32)         # a view of a is still alive
    assert not np.shares_memory(b, view) and not np.shares_memory(b, kept)
    del view
    reused = pool.empty("x", (4, 3), np.float32)    # now a is free again
    assert reused.ctypes.data == a_addr
    assert pool.empty("x", (5, 3), np.float32).shape == (5, 3)   # other shapes never reuse


def test_kept_observations_are_not_overwritten():
    env = socialgym.parallel_env(n_agents=6, n_actions=2, max_rounds=6, obs_format="numeric",
                                 recommender="random", seed=3)
    policy = RandomPolicy(seed=3)
    obs, _ = env.reset(seed=3)
    history = []
    for _ in range(5):
        for _phase in range(2):
            obs, *_ = env.step(policy.act(obs))
            history.append({a: {k: np.array(v, copy=True) for k, v in o.items() if k != "action_mask"}
                            for a, o in obs.items()})
            history.append(obs)
    for snapshot, live in zip(history[0::2], history[1::2]):
        for agent, o in snapshot.items():
            for key, value in o.items():
                np.testing.assert_array_equal(live[agent][key], value)


def test_pair_lookup_within_source_rows():
    from socialgym.ties.pairs import PairTable
    n = 5
    table = PairTable(n, np.array([0 * n + 1, 1 * n + 2, 2 * n + 0, 2 * n + 4, 4 * n + 3]),
                      np.array([0.1, 0.2, 0.3, 0.4, 0.5]))
    probe = np.array([2 * n + 4, 2 * n + 1, 1 * n + 2, 2 * n + 0])
    np.testing.assert_allclose(table.lookup(probe, src_range=(1, 3)), [0.4, 0.0, 0.2, 0.3])
    np.testing.assert_allclose(table.lookup(probe), [0.4, 0.0, 0.2, 0.3])
    np.testing.assert_allclose(table.lookup(np.array([3 * n + 1]), src_range=(3, 4)), [0.0])
