"""The platform tasks under bad input (actions outside their space, seeds, sizes), faults and unknown stances."""

from __future__ import annotations

import time

import numpy as np
import pytest

import socialgym
from socialgym.envs.platform.env import PlatformEnv
from socialgym.envs.platform.users import StanceUsers
from socialgym.platform.validation import check_memory
from socialgym.recommenders.features import RANKING_FEATURES, RankingFeatures, stance_codes, stance_labels

F = {name: j for j, name in enumerate(RANKING_FEATURES)}


def test_unknown_stances_stay_unknown():
    codes = stance_codes([0, 1, None, 0])
    assert codes.tolist() == [0, 1, -1, 0]
    assert stance_labels(codes) == [0, 1, None, 0]
    features = RankingFeatures(4, stance_labels(codes))
    assert features.stances.tolist() == [0, 1, -1, 0] and features.n_groups == 2
    env = PlatformEnv(n_agents=6, stances=["a", "b", None, "a", "b", None])
    assert env.seat._features(6).stances.tolist() == [0, 1, -1, 0, 1, -1]


def test_ranker_mode_observes_the_same_counts_as_the_seat():
    env = PlatformEnv(ranker="chronological")
    env.reset(seed=0)
    for _ in range(2):
        obs, *_ = env.step(env.action_space.sample())
    present = obs["mask"] > 0
    for name in ("topic_affinity", "author_activity", "viewer_activity"):
        assert obs["candidates"][..., F[name]][present].max() > 0, name


class FailingUsers:
    """Scripted users that raise once, in the act phase of the second step."""

    def __init__(self, env: PlatformEnv) -> None:
        self.inner = StanceUsers(env.feed_env.layout, env.n_topics, seed=1)
        self.rng, self.stances, self.calls, self.fail_at = self.inner.rng, self.inner.stances, 0, 4

    def act(self, feed_env):
        self.calls += 1
        if self.calls == self.fail_at:
            raise RuntimeError("user fault")
        return self.inner.act(feed_env)


def _twin(fail: bool):
    env = PlatformEnv(action_form="scores", seed=3)
    users = FailingUsers(env)
    users.fail_at = -1
    env.users, env._custom_users = users, users
    obs, _ = env.reset(seed=3)
    return env, users, obs


def test_a_failed_step_leaves_everything_as_it_was():
    env, users, obs = _twin(True)
    twin, _, twin_obs = _twin(False)
    action = np.random.default_rng(0).uniform(-1, 1, env.action_space.shape).astype(np.float32)
    before = (env.feed_env.round, env.feed_env.phase, len(env.feed_env.content))
    users.fail_at = users.calls + 2                       # the vote phase of the next round
    with pytest.raises(RuntimeError, match="user fault"):
        env.step(action)
    assert (env.feed_env.round, env.feed_env.phase, len(env.feed_env.content)) == before
    got = env.step(action)                                # the retry: exactly the step that never failed
    want = twin.step(action)
    assert got[1] == want[1]
    np.testing.assert_array_equal(got[4]["feeds"], want[4]["feeds"])
    np.testing.assert_array_equal(got[0]["candidates"], want[0]["candidates"])


@pytest.mark.parametrize("kwargs, match", [
    ({"seed": -1}, "seed"), ({"seed": 1.5}, "seed"), ({"topics": ()}, "topic"),
    ({"user_params": {"groups": 2.7}}, "groups"), ({"user_params": {"hostility": 1.5}}, "hostility"),
    ({"user_params": {"p_post": True}}, "p_post"), ({"recommender": "mf"}, "recommender"),
])
def test_bad_input_is_named(kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        PlatformEnv(**kwargs)


def test_user_params_with_own_users_is_refused():
    with pytest.raises(ValueError, match="user_params"):
        PlatformEnv(users=object(), user_params={"p_post": 0.1})


# --------------------------------------------------------------------------- issue 44, Hardening III
TOPICS3 = ("a", "b", "c")


def _same(a, b):
    """Recursive exact equality of observations (dicts, lists, arrays, numbers)."""
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            _same(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
    else:
        np.testing.assert_array_equal(a, b)


def _agent_env(mode: str = "strict", max_rounds: int = 4, **kw):
    env = socialgym.parallel_env(platform_agent=True, n_agents=8, max_rounds=max_rounds,
                                 platform_stances=[0, 1] * 4, topics=TOPICS3, max_topics=3, n_actions=2,
                                 feed_size=3, vote_feed_size=3, invalid_actions=mode, **kw)
    env.reset(seed=0)
    return env


def _users(env) -> dict:
    """The scripted users' actions for the platform as it stands (fresh users: a function of the state)."""
    fe = env.feed_env
    matrix = StanceUsers(fe.layout, len(TOPICS3), seed=1).act(fe)
    return {a: matrix[i] for i, a in enumerate(fe.possible_agents)}


def _weights(**named) -> np.ndarray:
    w = np.zeros(len(RANKING_FEATURES), np.float64)
    for name, value in named.items():
        w[F[name]] = value
    return w


# 1: platform actions are checked against Box(-1, 1)
@pytest.mark.parametrize("entry, value, shown", [(0, 3e38, r"3e\+38"), (0, np.nan, "nan"), (5, np.inf, "inf"),
                                                 (5, -np.inf, "-inf"), (2, 1.0000001, r"1\.0000001")])
def test_platform_env_refuses_weights_outside_the_box(entry, value, shown):
    env = PlatformEnv(n_agents=6, max_rounds=4, seed=0)
    env.reset()
    action = np.zeros(12)
    action[entry] = value
    with pytest.raises(ValueError, match=rf"^invalid action of platform, field 'weights': entry \[{entry}\] is "
                                         rf"{shown}\b") as err:
        env.step(action)
    assert "\n" not in str(err.value) and "Box(-1, 1, (12,))" in str(err.value)
    assert (env.feed_env.round, env.feed_env.phase, env.seat.action) == (2, "act", None)
    _, reward, _, _, info = env.step(np.zeros(12))               # the environment goes on as if nothing happened
    assert info["round"] == 2


@pytest.mark.parametrize("action, match", [
    (np.zeros(3), r"field 'weights': must have shape \(12,\) .*got shape \(3,\)"),
    (["x"] * 12, r"field 'weights': must be an array of real numbers, got list"),
    (None, r"field 'weights': must be an array of real numbers, got NoneType None"),
])
def test_platform_env_refuses_actions_of_the_wrong_shape_or_kind(action, match):
    env = PlatformEnv(n_agents=6, max_rounds=4, seed=0)
    env.reset()
    with pytest.raises(ValueError, match=match):
        env.step(action)
    assert env.feed_env.round == 2


def test_platform_env_scores_outside_the_box_are_refused():
    env = PlatformEnv(n_agents=6, max_rounds=4, seed=0, action_form="scores", candidates=32)
    env.reset()
    scores = np.zeros(env.action_space.shape, np.float32)
    scores[4, 7] = -2.5
    with pytest.raises(ValueError, match=r"field 'scores': entry \[4, 7\] is -2\.5, outside the action space "
                                         r"Box\(-1, 1, \(6, 32\)\) \(1 entries outside \[-1, 1\]\)"):
        env.step(scores)


def test_platform_agent_refuses_weights_outside_the_box_when_strict():
    env = _agent_env("strict")
    env.step(_users(env))                                            # round 1, act
    with pytest.raises(ValueError, match=r"^invalid action of platform, field 'weights': entry \[9\] is 3e\+38"):
        env.step({**_users(env), "platform": _weights(tone=3e38)})
    assert (env.feed_env.round, env.feed_env.phase, env.agents[-1]) == (1, "vote", "platform")


def test_platform_agent_clips_weights_outside_the_box_when_lenient():
    env, twin = _agent_env("lenient"), _agent_env("lenient")
    for e in (env, twin):
        e.step(_users(e))                                            # round 1, act
    _, rewards, _, _, infos = env.step({**_users(env), "platform": _weights(age=-5.0, likes=0.5, tone=3e38)})
    _, want_rewards, _, _, want_infos = twin.step({**_users(twin), "platform": _weights(age=-1.0, likes=0.5,
                                                                                        tone=1.0)})   # clipped by hand
    feeds = env.feed_env.act_feeds
    assert feeds.tolist() == twin.feed_env.act_feeds.tolist()
    assert (feeds >= 0).sum() == 8 * 3                               # every viewer's feed is full, not empty
    [record] = infos["platform"]["invalid"]
    assert (record["phase"], record["slot"], record["field"]) == ("vote", None, "weights")
    assert record["reason"] == ("entry [3] is -5.0, outside the action space Box(-1, 1, (12,)) (2 entries outside "
                                "[-1, 1]); clipped into [-1, 1]")
    assert want_infos["platform"]["invalid"] == []
    assert rewards == want_rewards


def test_platform_agent_ignores_a_nan_action_when_lenient():
    env, twin = _agent_env("lenient"), _agent_env("lenient")
    for e in (env, twin):
        e.step(_users(e))
    _, _, _, _, infos = env.step({**_users(env), "platform": _weights(tone=np.nan)})
    twin.step(_users(twin))                                          # no platform action at all
    assert env.feed_env.act_feeds.tolist() == twin.feed_env.act_feeds.tolist()
    [record] = infos["platform"]["invalid"]
    assert record["reason"].startswith("entry [9] is nan (1 NaN entries)")
    assert record["reason"].endswith("ignored (ranked as without an action: newest first)")


# 2: a failed step leaves no trace
@pytest.mark.parametrize("fault", ["user_vote", "feed_observe", "platform_observe"])
def test_a_failed_platform_agent_step_leaves_no_trace(fault, monkeypatch):
    # 6 candidates of 16 posts: retrieval draws from the environment's generator
    env, twin = _agent_env(platform_candidates=6), _agent_env(platform_candidates=6)
    for e in (env, twin):
        e.step(_users(e))                                            # round 1, act
    ranking = _weights(tone=-1.0, stance_distance=1.0)               # hostile, cross-group first: not newest first
    good = _users(env)
    if fault == "user_vote":
        bad = dict(good)
        bad["agent_0"] = good["agent_0"].copy()
        bad["agent_0"][-1] = 7                                       # a vote value of 7: refused (strict)
        with pytest.raises(ValueError, match="agent_0"):
            env.step({**bad, "platform": ranking})
        retry = good                                                 # the refused step's ranking must not survive
    else:
        target, name = (env.feed_env, "_observe") if fault == "feed_observe" else (env, "platform_observation")
        original, calls = getattr(target, name), []

        def fail_once(*args, **kwargs):
            calls.append(1)
            if len(calls) == 1:
                raise RuntimeError("observation fault")
            return original(*args, **kwargs)
        monkeypatch.setattr(target, name, fail_once)
        with pytest.raises(RuntimeError, match="observation fault"):
            env.step({**good, "platform": ranking})
        retry = {**good, "platform": ranking}
    assert (env.feed_env.round, env.feed_env.phase, len(env.agents)) == (1, "vote", 9)
    got, want = env.step(retry), twin.step(retry)
    for x, y in zip(got, want):
        _same(x, y)
    assert env.feed_env.act_feeds.tolist() == twin.feed_env.act_feeds.tolist()
    for _ in range(2):                                               # and the next round's phases too
        got, want = env.step(_users(env)), twin.step(_users(twin))
        for x, y in zip(got, want):
            _same(x, y)


def test_a_platform_env_step_failing_in_its_observation_leaves_no_trace(monkeypatch):
    env, twin = PlatformEnv(n_agents=6, max_rounds=4, seed=3), PlatformEnv(n_agents=6, max_rounds=4, seed=3)
    env.reset()
    twin.reset()
    action = _weights(tone=1.0, likes=-0.5)
    original, calls = env._observe, []

    def fail_once():
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("observation fault")
        return original()
    monkeypatch.setattr(env, "_observe", fail_once)
    with pytest.raises(RuntimeError, match="observation fault"):
        env.step(action)
    assert (env.feed_env.round, env.feed_env.phase, len(env.feed_env.content)) == (2, "act", 12)
    for _ in range(2):
        got, want = env.step(action), twin.step(action)
        _same(got[0], want[0])
        assert got[1:4] == want[1:4]
        _same(got[4], want[4])


# 3: numpy integer seeds
def test_numpy_integer_seeds_work_like_python_ints():
    a = PlatformEnv(n_agents=6, max_rounds=4, seed=np.int64(3))
    b = PlatformEnv(n_agents=6, max_rounds=4, seed=3)
    _same(a.reset()[0], b.reset()[0])
    action = _weights(tone=1.0)
    assert a.step(action)[1] == b.step(action)[1]
    _same(a.reset(seed=np.uint16(5))[0], b.reset(seed=5)[0])


@pytest.mark.parametrize("seed", [-1, True, np.bool_(False), 3.0, np.float64(3.0), "3", np.int64(-2)])
def test_bad_seeds_are_refused_at_construction(seed):
    with pytest.raises((TypeError, ValueError), match=r"^seed must be None or an integer >= 0, got ") as err:
        PlatformEnv(n_agents=6, max_rounds=4, seed=seed)
    assert "\n" not in str(err.value)


# 4: max_rounds = 1
def test_platform_env_needs_two_rounds():
    with pytest.raises(ValueError, match=r"^PlatformEnv: max_rounds must be >= 2 \(reset\(\) plays round 1.*got 1$"):
        PlatformEnv(n_agents=6, max_rounds=1)
    env = PlatformEnv(n_agents=6, max_rounds=2, seed=0)              # the shortest episode: one step
    env.reset()
    obs, _, terminated, truncated, info = env.step(np.zeros(12))
    assert (terminated, truncated, info["round"]) == (False, True, 2)
    assert all(not v.any() for v in obs.values())


def test_one_round_episodes_of_the_feed_and_the_platform_agent():
    env = _agent_env(max_rounds=1)                                   # post, vote, end
    _, _, _, truncs, infos = env.step(_users(env))
    assert not any(truncs.values()) and infos["platform"]["phase"] == "vote"
    _, _, terms, truncs, infos = env.step({**_users(env), "platform": _weights(tone=1.0)})
    assert all(truncs.values()) and not any(terms.values()) and len(truncs) == 9
    assert env.agents == [] and infos["platform"]["round"] == 2


def test_one_round_episodes_of_the_vector_form():
    import socialgym.vector
    venv = socialgym.vector.make_vec("mixed", 2, max_rounds=1)
    venv.reset(seed=0)
    noop = np.zeros((40, venv.layout.length), np.int64)
    _, _, terminated, truncated, _ = venv.step_arrays(noop)
    assert terminated.tolist() == truncated.tolist() == [False, False]
    obs, _, terminated, truncated, info = venv.step_arrays(noop)
    assert terminated.tolist() == [False, False] and truncated.tolist() == [True, True]
    assert "final_info" in info and np.ravel(obs["round"]).tolist() == [1] and obs["phase"] == 0   # autoreset


# 5: the memory guard runs first, at any size
def test_make_vec_refuses_a_size_that_cannot_fit_before_any_per_agent_work(monkeypatch):
    import socialgym.config as config_module
    import socialgym.platform.validation as validation
    import socialgym.vector
    monkeypatch.setattr(validation, "available_memory", lambda: 1_000_000_000)
    rows, real = [], config_module.lambda_row
    monkeypatch.setattr(config_module, "lambda_row", lambda *a, **k: rows.append(1) or real(*a, **k))
    start = time.perf_counter()
    # 215,020 agents x (1,400 + 110 x (6 + 6 + 4) + 220 x 2 actions x 10 rounds) = 215,020 x 7,560 = 1.63e9 bytes
    with pytest.raises(MemoryError, match=r"^n_agents=215,020 with 2 actions over 10 rounds needs about 1\.6 GB "
                                          r".* 1\.0 GB available"):
        socialgym.vector.make_vec("mixed", 10_751)
    assert time.perf_counter() - start < 2.0                        # milliseconds; generous bound
    assert rows == []                                                # no λ row was validated before the refusal


def test_check_memory_refuses_small_populations_whose_estimate_does_not_fit(monkeypatch):
    import socialgym.platform.validation as validation
    # 1,000 x (1,400 + 110 x 30 + 220 x 3 actions x 10,000 rounds) = 1,000 x 6,604,700 = 6.6047e9 bytes
    with pytest.raises(MemoryError, match=r"^n_agents=1,000 with 3 actions over 10000 rounds needs about 6\.6 GB "
                                          r".* 4\.0 GB available"):
        check_memory(1_000, 3, 10_000, 30, available=4_000_000_000)
    check_memory(1_000, 3, 10_000, 30, available=7_000_000_000)   # fits
    monkeypatch.setattr(validation, "available_memory", lambda: None)
    check_memory(1_000, 3, 10_000, 30)                               # unknown memory: no refusal
    monkeypatch.setattr(validation, "available_memory", lambda: 4_000_000_000)
    with pytest.raises(MemoryError, match="n_agents=1,000"):
        socialgym.parallel_env(n_agents=1_000, n_actions=3, max_rounds=10_000, feed_size=10, vote_feed_size=10,
                               dm_inbox_size=10)
