"""What the own-loop studies did by hand, as config (issue 45): a ``topic_users`` group that draws
its preferences (and gives them to the platform), an ``add_ties`` intervention whose
``influence`` pulls the scripted users' tastes, and Soc-Strategy friends that share none of a
multi-interest user's favourite topics. Expected values are computed here from the definitions
(TopicUsers.make_preferences, the influence rule of docs/recommenders.md), not by the code under test."""

from __future__ import annotations

import numpy as np
import pytest

from socialgym.baselines.topic_users import TopicUsers
from socialgym.experiments import ConfigError, load_config, run_experiment
from socialgym.experiments.run.checkpoint import read_checkpoint
from socialgym.platform.population import favourite_topics
from socialgym.ties import different_interest_ties

TOPICS = ["a", "b", "c", "d", "e", "f"]


def drawn(**params) -> dict:
    return {"seed": 3, "env": {"n_agents": 8, "max_rounds": 3, "topics": TOPICS, "recommender": "chronological"},
            "policy": {"kind": "topic_users", "params": params}, "logging": {"report": False, "progress": False}}


def build(tmp_path, data: dict):
    """(env, policy, table) as the runner built them: a one-round run's checkpoint, read back."""
    out = tmp_path / "run"
    run_experiment(load_config({**data, "env": {**data["env"], "max_rounds": 2}}), out)
    state = read_checkpoint(out / "checkpoint.pkl")
    return state["env"], state["policy"], state["table"]


def test_a_topic_users_group_draws_its_preferences_and_the_platform_gets_them(tmp_path):
    env, policy, _ = build(tmp_path, drawn(interests_per_agent=3, interest_decay=1.0, concentration=0.9, seed=11))
    # the draw is make_preferences's, from the group's seed: three equal favourites of 0.3, the rest 0.1 / 3
    expected = TopicUsers.make_preferences(8, 6, np.random.default_rng(11), interests_per_agent=3,
                                           concentration=0.9, interest_decay=1.0)
    np.testing.assert_allclose(np.sort(expected, axis=1)[:, -3:], 0.3)
    np.testing.assert_allclose(policy.preferences, expected)
    np.testing.assert_allclose(env.config.agent_interests, expected)
    assert favourite_topics(env.config.agent_interests, 8).sum(axis=1).tolist() == [3] * 8


@pytest.mark.parametrize("data, words", [
    (drawn(interests_per_agent=7), "interests_per_agent = 7 exceeds the 6 topics"),
    (drawn(interest_decay=0.0), "interest_decay must lie in (0, 1]"),
    ({**drawn(), "env": {**drawn()["env"], "agent_interests": TOPICS + TOPICS[:2]}, "policy": {
        "kind": "topic_users", "params": {"interest_decay": 0.5}}}, "unknown parameter 'interest_decay'"),
    (drawn(topic_block=[2, 7]), "topic_block must be two topic indices [start, stop)"),
    (drawn(topic_block=[0, 3], outside=1.0), "outside (the weight on topics outside topic_block) must lie in [0, 1)"),
    (drawn(outside=0.2), "be 0 without a topic_block leaving topics out"),
    (drawn(topic_block=[0, 2], interests_per_agent=3), "interests_per_agent = 3 exceeds the 2 topics of its topic_block"),
    ({**drawn(), "interventions": [{"kind": "add_ties", "at_round": 2, "soc_strategy": 1, "influence": -0.5}]},
     "influence must be a number in [0, 10]"),
])
def test_bad_drawn_preferences_and_influence_are_one_line_errors(data, words):
    with pytest.raises(ConfigError) as err:
        load_config(data)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_groups_draw_their_own_rows_and_camps_keep_to_their_topics(tmp_path):
    camp = {"interests_per_agent": 1, "concentration": 0.9, "outside": 0.3}
    data = {**drawn(), "policy": {"groups": [
        {"name": "left", "kind": "topic_users", "agents": 4, "params": {**camp, "seed": 1, "topic_block": [0, 3]}},
        {"name": "right", "kind": "topic_users", "agents": 4, "params": {**camp, "seed": 2, "topic_block": [3, 6]}}]}}
    env, policy, _ = build(tmp_path, data)
    rows = np.asarray(env.config.agent_interests)
    for seed, agents, own, other in ((1, slice(0, 4), slice(0, 3), slice(3, 6)), (2, slice(4, 8), slice(3, 6), slice(0, 3))):
        inner = TopicUsers.make_preferences(8, 3, np.random.default_rng(seed), concentration=0.9)[agents]
        np.testing.assert_allclose(rows[agents, own], 0.7 * inner)     # 1 - outside on the camp's own topics
        np.testing.assert_allclose(rows[agents, other], 0.1)           # outside / 3 on each of the others
    np.testing.assert_allclose(rows.sum(axis=1), 1)


def test_influence_moves_the_tastes_of_the_befriended_users(tmp_path):
    from socialgym.experiments.run.interventions import apply_intervention

    env, policy, _ = build(tmp_path, drawn(seed=4))
    before = np.array(policy.preferences)
    entry = apply_intervention(env, {"kind": "add_ties", "pairs": [["agent_0", "agent_5"], ["agent_5", "agent_0"]],
                                     "weight": 0.5, "influence": 0.5}, policy=policy)
    assert entry["influence"] == 0.5 and entry["n_pairs"] == 2
    for a, b in ((0, 5), (5, 0)):          # pref[a] + 0.5 pref[b], renormalised (rows sum to 1: divide by 1.5)
        np.testing.assert_allclose(policy.preferences[a], (before[a] + 0.5 * before[b]) / 1.5)
    untouched = [i for i in range(8) if i not in (0, 5)]
    np.testing.assert_array_equal(policy.preferences[untouched], before[untouched])
    assert env.tie_matrix()[0, 5] == 0.5 and env.tie_matrix()[5, 0] == 0.5


def test_influence_without_scripted_tastes_is_refused_by_name(tmp_path):
    from socialgym.experiments.define.interventions import InterventionError
    from socialgym.experiments.run.interventions import apply_intervention

    data = {**drawn(), "policy": {"kind": "random"}}
    env, policy, _ = build(tmp_path, data)
    with pytest.raises(InterventionError, match="no topic_users policy"):
        apply_intervention(env, {"kind": "add_ties", "pairs": [["agent_0", "agent_1"]], "influence": 0.2},
                           policy=policy)


def test_soc_strategy_friends_share_no_favourite_of_a_multi_interest_user():
    # four users: 0 likes a, b equally; 1 likes b; 2 likes c; 3 likes a, c equally (matrix rows)
    prefs = np.array([[0.4, 0.4, 0.1, 0.1], [0.1, 0.7, 0.1, 0.1], [0.1, 0.1, 0.7, 0.1], [0.4, 0.1, 0.4, 0.1]])
    fav = favourite_topics(prefs, 4)
    assert fav.tolist() == [[True, True, False, False], [False, True, False, False],
                            [False, False, True, False], [True, False, True, False]]
    src, dst = different_interest_ties(fav, 1, np.random.default_rng(0))
    # who shares no favourite with whom: 0-2, 1-2, 1-3 only; every user gets >= 1 friend among those
    allowed = {(0, 2), (2, 0), (1, 2), (2, 1), (1, 3), (3, 1)}
    pairs = set(zip(src.tolist(), dst.tolist()))
    assert pairs <= allowed and {s for s, _ in pairs} == {0, 1, 2, 3}
    assert pairs == {(d, s) for s, d in pairs}                       # mutual
    # labels behave as one favourite each: the same draws as before the favourites existed
    labels = np.array([0, 1, 0, 1, 2, 2])
    a = different_interest_ties(labels, 2, np.random.default_rng(7))
    b = different_interest_ties(favourite_topics(labels, 6), 2, np.random.default_rng(7))
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert not (labels[a[0]] == labels[a[1]]).any()
