"""TopicUsers: scripted preference-driven users (valid in strict mode, seeded, engagement rises
with preference, the documented probabilities, preference generation and validation)."""

import numpy as np
import pytest

import socialgym
from socialgym.baselines import Policy, TopicUsers
from socialgym.envs.feed.encoding import FEED_ITEM_FEATURES, ActionLayout

TOPICS = ["t0", "t1", "t2", "t3", "t4", "t5"]
KW = dict(n_agents=40, n_actions=3, max_rounds=5, topics=TOPICS, recommender="random", feed_size=8,
          vote_feed_size=8, sentiment="tone", invalid_actions="strict", obs_format="numeric")
TOPIC_COL = FEED_ITEM_FEATURES.index("topic")


def make_env(**overrides):
    return socialgym.parallel_env(**{**KW, **overrides})


def batch_record(env):
    """The finished round's actions and votes, comparable across runs."""
    b = env.last_round.batch
    return tuple(np.asarray(x).tolist() for x in (b.sender, b.kind, b.target_id, b.topic, b.sentiment,
                                                  b.vote_voter, b.vote_item, b.vote_value))


def run_step(env, policy, seed=0):
    """A full episode through env.step; returns each round's record and checks nothing was invalid."""
    obs, _ = env.reset(seed=seed)
    rounds = []
    while env.agents:
        obs, _, _, _, infos = env.step(policy.act(obs))
        assert all(not info["invalid"] for info in infos.values())
        if env.phase == "act":        # a vote step just closed a round
            rounds.append(batch_record(env))
    return rounds


def run_arrays(env, policy, seed=0):
    obs, _ = env.reset(seed=seed)     # per-agent dicts: act_arrays accepts them for round 1
    rounds = []
    while env.agents:
        obs, _, _, _, info = env.step_arrays(policy.act_arrays(obs))
        assert info["invalid"] == {}
        if env.phase == "act":
            rounds.append(batch_record(env))
    return rounds


def totals(rounds):
    kinds = np.concatenate([np.asarray(r[1]) for r in rounds])
    votes = np.concatenate([np.asarray(r[7]) for r in rounds])
    return np.bincount(kinds, minlength=4), (votes == 1).sum(), (votes == -1).sum()


# ---------------------------------------------------------------- validity in strict mode
@pytest.mark.parametrize("obs_format", ["numeric", "structured", "both"])
def test_strict_episode_via_step(obs_format):
    env = make_env(obs_format=obs_format)
    policy = TopicUsers.for_env(env, seed=1, interests_per_agent=2)
    assert isinstance(policy, Policy)
    rounds = run_step(env, policy)
    assert len(rounds) == KW["max_rounds"]
    n_slots = KW["n_agents"] * KW["n_actions"]
    assert np.asarray(rounds[0][1]).tolist() == [0] * n_slots           # round 1: POST only
    kinds, likes, dislikes = totals(rounds)
    assert kinds[1] > 50 and kinds[0] > n_slots and kinds[2] == 0        # comments happen, no DMs
    assert likes > 50 and dislikes > 0


def test_strict_episode_via_step_arrays():
    env = make_env()
    rounds = run_arrays(env, TopicUsers.for_env(env, seed=5))
    assert len(rounds) == KW["max_rounds"]
    kinds, likes, dislikes = totals(rounds)
    assert kinds[1] > 50 and likes > 50 and dislikes > 0


def test_step_and_step_arrays_make_the_same_episode():
    rounds_d = run_step(make_env(), TopicUsers.for_env(make_env(), seed=5))
    rounds_a = run_arrays(make_env(), TopicUsers.for_env(make_env(), seed=5))
    assert rounds_d == rounds_a


def test_structured_and_numeric_paths_make_the_same_choices():
    # obs_format="both" -> structured actions (ties read from obs["numeric"]); numeric -> vectors
    rounds_s = run_step(make_env(obs_format="both"), TopicUsers.for_env(make_env(), seed=4))
    rounds_n = run_step(make_env(obs_format="numeric"), TopicUsers.for_env(make_env(), seed=4))
    assert rounds_s == rounds_n


def test_structured_without_layout_uses_obs_n_actions():
    env = make_env(obs_format="structured", n_actions=2)
    policy = TopicUsers(np.eye(6)[np.arange(40) % 6], seed=0, tie_gain=0.0)   # no layout, no warning
    rounds = run_step(env, policy)
    assert len(rounds) == KW["max_rounds"]


# ---------------------------------------------------------------- determinism
def test_seed_determinism():
    assert run_step(make_env(), TopicUsers.for_env(make_env(), seed=7)) == \
        run_step(make_env(), TopicUsers.for_env(make_env(), seed=7))
    a, b = TopicUsers.for_env(make_env(), seed=7), TopicUsers.for_env(make_env(), seed=8)
    assert not np.array_equal(a.preferences, b.preferences)
    assert run_step(make_env(), a) != run_step(make_env(), b)


# ---------------------------------------------------------------- behaviour
def test_engagement_rises_with_preference_in_env():
    env = make_env(n_agents=120, max_rounds=6, vote_feed_size=10)
    policy = TopicUsers.for_env(env, seed=5)
    main = policy.main_interest
    obs, _ = env.reset(seed=5)
    obs, *_ = env.step_arrays(policy.act_arrays(obs))          # round 1: posts only
    shown_pref = shown_other = liked_pref = liked_other = 0
    com_pref = com_total = feed_pref = feed_total = 0
    while env.agents:
        matrix = policy.act_arrays(obs)
        lay = env.layout
        if obs["phase"] == 1:
            items = obs["vote_items"]
            present = items[..., 0] > 0
            preferred = present & (items[..., TOPIC_COL] == main[:, None])
            liked = matrix[:, lay.act_length:] == 2
            shown_pref += preferred.sum()
            shown_other += (present & ~preferred).sum()
            liked_pref += (liked & preferred).sum()
            liked_other += (liked & present & ~preferred).sum()
        else:
            act, _ = lay.split(matrix)
            feed_topic = obs["feed"][..., TOPIC_COL]
            present = obs["feed"][..., 0] > 0
            feed_pref += (present & (feed_topic == main[:, None])).sum()
            feed_total += present.sum()
            is_com = act[:, :, 0] == 1
            target_topic = np.take_along_axis(feed_topic, act[:, :, 1], axis=1)
            com_pref += (is_com & (target_topic == main[:, None])).sum()
            com_total += is_com.sum()
        obs, *_ = env.step_arrays(matrix)
    like_pref, like_other = liked_pref / shown_pref, liked_other / shown_other
    assert shown_pref > 300 and shown_other > 1000
    assert like_pref > 0.55 and like_other < 0.2 and like_pref - like_other > 0.4
    # comments go to the preferred topic far more often than its share of the feed
    assert com_total > 200 and com_pref / com_total > 2 * feed_pref / feed_total


def _layout(n_agents, n_actions=3, feed_size=4, vote_feed_size=4, max_topics=4):
    return ActionLayout(n_agents, n_actions, feed_size, 2, max_topics, vote_feed_size)


def _items(n, spec, width=4):
    """Stacked item features: spec = [(topic, tie_out), ...] for slots 0.., the rest empty."""
    items = np.zeros((n, width, len(FEED_ITEM_FEATURES)), np.float32)
    items[..., 1:3] = -1
    for j, (topic, tie) in enumerate(spec):
        items[:, j, 0] = 1
        items[:, j, 1] = 0
        items[:, j, TOPIC_COL] = topic
        items[:, j, FEED_ITEM_FEATURES.index("tie_out")] = tie
    return items


def test_vote_probabilities_match_the_documented_formula():
    n = 20_000
    pref = np.tile([0.8, 0.2, 0.0], (n, 1))                    # r = 1, 0.25, 0
    policy = TopicUsers(pref, layout=_layout(n, max_topics=4), seed=0)
    obs = {"phase": 1, "round": 2, "vote_items": _items(n, [(0, 0.0), (1, 0.0), (2, 0.5)]),
           "feed": _items(n, [])}
    votes = policy.act_arrays(obs)[:, policy.layout.act_length:] - 1
    b, g, tg, d = policy.base, policy.gain, policy.tie_gain, policy.dislike_prob
    for slot, (r, tie) in enumerate([(1.0, 0.0), (0.25, 0.0), (0.0, 0.5)]):
        p_like = b + g * r + tg * tie
        p_dislike = min(d * (1 - r), 1 - p_like)
        assert abs((votes[:, slot] == 1).mean() - p_like) < 0.015
        assert abs((votes[:, slot] == -1).mean() - p_dislike) < 0.015
    assert (votes[:, 3] == 0).all()                             # empty slot: no vote


def test_act_probabilities_ranking_and_tone():
    n = 20_000
    pref = np.tile([0.8, 0.2, 0.0], (n, 1))
    policy = TopicUsers(pref, layout=_layout(n), seed=0, p_post=0.3)
    lay = policy.layout
    feed = _items(n, [(1, 0.0), (0, 0.0)])                     # best item (topic 0) in slot 1
    act, _ = lay.split(policy.act_arrays({"phase": 0, "round": 2, "feed": feed, "vote_items": _items(n, [])}))
    kind, slot, topic, tone = act[:, :, 0], act[:, :, 1], act[:, :, 4], act[:, :, 5]
    post = kind == 0
    assert abs(post.mean() - 0.3) < 0.015
    assert abs((topic[post] == 0).mean() - 0.8) < 0.015 and not (topic[post] == 2).any()
    assert (tone[post & (topic == 0)] == 0).all() and (tone[post & (topic == 1)] == 1).all()
    # the first commenting slot takes the best item, the second the next one
    consider = ~post
    k = np.cumsum(consider, axis=1) - 1
    first, second = consider & (k == 0), consider & (k == 1)
    com = kind == 1
    assert (slot[first & com] == 1).all() and (slot[second & com] == 0).all()
    assert abs(com[first].mean() - (policy.base + policy.gain)) < 0.015
    assert abs(com[second].mean() - (policy.base + policy.gain * 0.25)) < 0.015
    assert (tone[first & com] == 0).all() and (tone[second & com] == 1).all()   # r 1 vs 0.25
    assert set(np.unique(kind)) == {0, 1, 3}
    # round 1: every slot a POST
    act1, _ = lay.split(policy.act_arrays({"phase": 0, "round": 1, "feed": _items(n, []),
                                           "vote_items": _items(n, [])}))
    assert (act1[:, :, 0] == 0).all()


def test_ties_raise_engagement():
    n = 20_000
    policy = TopicUsers(np.tile([1.0, 0.0], (n, 1)), layout=_layout(n), seed=0)
    obs = {"phase": 1, "round": 2, "vote_items": _items(n, [(1, 0.0), (1, 1.0)]), "feed": _items(n, [])}
    likes = (policy.act_arrays(obs)[:, policy.layout.act_length:] == 2).mean(axis=0)
    assert likes[1] - likes[0] == pytest.approx(policy.tie_gain, abs=0.02)


# ---------------------------------------------------------------- preferences
def test_make_preferences_shapes_and_normalisation():
    for k in (1, 2, 3):
        pref = TopicUsers.make_preferences(500, 6, 0, interests_per_agent=k, concentration=0.9)
        assert pref.shape == (500, 6) and (pref >= 0).all()
        np.testing.assert_allclose(pref.sum(axis=1), 1.0)
        srt = np.sort(pref, axis=1)[:, ::-1]
        halves = 0.5 ** np.arange(k)
        np.testing.assert_allclose(srt[:, :k], np.broadcast_to(0.9 * halves / halves.sum(), (500, k)))
        np.testing.assert_allclose(srt[:, k:], 0.1 / (6 - k))
    only = TopicUsers.make_preferences(300, 5, 1, interests_per_agent=2, concentration=1.0)
    assert ((only > 0).sum(axis=1) == 2).all()
    assert set(np.argmax(only, axis=1)) == set(range(5))                  # main interests spread
    np.testing.assert_array_equal(TopicUsers.make_preferences(50, 4, 9),
                                  TopicUsers.make_preferences(50, 4, np.random.default_rng(9)))
    np.testing.assert_allclose(TopicUsers.make_preferences(3, 2, 0, interests_per_agent=2).sum(axis=1), 1.0)


def test_preferences_and_main_interest_exposed():
    raw = np.array([[2.0, 0.0, 6.0], [1.0, 1.0, 0.0], [0.0, 5.0, 0.0]])
    policy = TopicUsers(raw)
    np.testing.assert_allclose(policy.preferences, raw / raw.sum(axis=1, keepdims=True))
    assert policy.main_interest.tolist() == [2, 0, 1]
    assert policy.n_agents == 3 and policy.n_topics == 3
    with pytest.raises(ValueError):
        policy.preferences[0, 0] = 1.0
    env = make_env()
    generated = TopicUsers.for_env(env, seed=0, interests_per_agent=2)
    assert generated.preferences.shape == (40, len(TOPICS))
    np.testing.assert_array_equal(generated.main_interest, generated.preferences.argmax(axis=1))


@pytest.mark.parametrize("bad, match", [
    (np.ones(6), "2-D"),
    (np.ones((39, 6)), "40 agents"),
    (np.ones((40, 7)), "7 topic columns"),
    (np.r_[np.ones((39, 6)), [[1, -1, 0, 0, 0, 0]]], "non-negative"),
    (np.r_[np.ones((39, 6)), [[1, np.nan, 0, 0, 0, 0]]], "finite"),
    (np.r_[np.ones((39, 6)), np.zeros((1, 6))], "all zero"),
    ([["a", "b"]], "numeric"),
])
def test_bad_preferences_are_clear_errors(bad, match):
    with pytest.raises(ValueError, match=match):
        TopicUsers.for_env(make_env(), bad)


def test_other_configuration_errors():
    with pytest.raises(ValueError, match="n_topics"):
        TopicUsers(np.ones((4, 3)), n_topics=4)
    with pytest.raises(ValueError, match="n_topics and the number of agents"):
        TopicUsers(n_topics=3)
    with pytest.raises(ValueError, match="interests_per_agent"):
        TopicUsers.make_preferences(4, 3, 0, interests_per_agent=4)
    with pytest.raises(ValueError, match="concentration"):
        TopicUsers.make_preferences(4, 3, 0, concentration=0.0)
    with pytest.raises(ValueError, match="p_post"):
        TopicUsers(np.ones((2, 2)), p_post=1.5)
    # numeric observations without the layout
    env = make_env()
    obs, _ = env.reset(seed=0)
    with pytest.raises(ValueError, match="for_env"):
        TopicUsers(np.ones((40, 6))).act(obs)
    # more preference columns than the env's vocabulary
    small = make_env(topics=TOPICS[:4])
    with pytest.raises(ValueError, match="topics"):
        TopicUsers.for_env(small, np.ones((40, 6)))
    obs, _ = small.reset(seed=0)
    with pytest.raises(ValueError, match="only 4 topics"):
        TopicUsers(np.ones((40, 6)), layout=small.layout).act(obs)
    with pytest.raises(ValueError, match="unknown agent"):
        TopicUsers.for_env(env).act({"agent_99": obs["agent_0"]})
