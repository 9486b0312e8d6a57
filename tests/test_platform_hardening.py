"""The platform tasks under bad input, faults and unknown stances."""

from __future__ import annotations

import numpy as np
import pytest

from socialgym.envs.platform.env import PlatformEnv
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
        from socialgym.envs.platform.users import StanceUsers
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
