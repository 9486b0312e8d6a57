"""SocialUsers: scripted users who use every action (valid in strict mode), seeded, with
heterogeneous activity, homophily, the documented engagement formula, checked parameters, named
populations, and the runner's ``social_users`` policy kind."""

import json

import numpy as np
import pytest

import socialgym
from socialgym.baselines import SocialUsers
from socialgym.baselines.social_users import bundled_populations, load_population, save_population
from socialgym.experiments import ConfigError, load_config, run_experiment
from socialgym.recommenders.params import ParamError

TOPICS = ["movies", "music", "sports", "science", "travel", "food"]
NAN, INF = float("nan"), float("inf")


def play(seed=0, n_agents=20, rounds=8, obs_format="both", **params):
    """A strict-mode episode; returns the policy and [(observations, actions)] of every step."""
    env = socialgym.parallel_env(n_agents=n_agents, max_rounds=rounds, topics=TOPICS, obs_format=obs_format,
                                 invalid_actions="strict", sentiment="tone", seed=seed)
    policy = SocialUsers.for_env(env, seed=seed, **params)
    obs, _ = env.reset(seed=seed)
    steps = []
    while env.agents:
        actions = policy.act(obs)
        steps.append((obs, actions))
        obs, _, _, _, infos = env.step(actions)
        assert all(not info["invalid"] for info in infos.values())
    return policy, steps


def act_actions(steps):
    """(agent index, observation, action dict) of every act-phase slot."""
    return [(int(agent.split("_")[1]), obs[agent], action)
            for obs, actions in steps for agent, payload in actions.items() if "actions" in payload
            for action in payload["actions"]]


def votes(steps):
    return [value for _, actions in steps for payload in actions.values() if "votes" in payload
            for value in payload["votes"].values()]


def gini(values):
    """Gini coefficient: sum over pairs of |x_i - x_j| / (2 n^2 mean)."""
    x = [float(v) for v in values]
    n, total = len(x), sum(x)
    return sum(abs(a - b) for a in x for b in x) / (2 * n * total)


def test_gini_helper():
    assert gini([1, 1, 1, 1]) == 0
    assert gini([0, 0, 0, 4]) == pytest.approx(0.75)


# ---------------------------------------------------------------------------------- behaviour
def test_every_action_type_tone_and_vote_occurs():
    _, steps = play(seed=0)
    acts = act_actions(steps)
    types = {a["type"] for _, _, a in acts}
    assert types == {"POST", "COM", "DM", "NOT"}
    dms = [a for _, _, a in acts if a["type"] == "DM"]
    assert any(a.get("target_id") is not None for a in dms), "no DM reply"
    assert any(a.get("target_id") is None and "topic" in a for a in dms), "no new DM"
    assert any(a.get("mentions") for _, _, a in acts)
    assert {a["tone"] for _, _, a in acts if "tone" in a} == {"supportive", "neutral", "critical"}
    assert all(a["tone"] != "critical" for _, _, a in acts if a["type"] == "POST")
    assert {1, -1} <= set(votes(steps))


def test_dm_replies_answer_an_inbox_dm_of_their_recipient():
    _, steps = play(seed=1, p_dm=0.5, dm_reply_prob=1.0)
    replies = [(obs, a) for _, obs, a in act_actions(steps) if a["type"] == "DM" and a.get("target_id") is not None]
    assert len(replies) >= 5
    for obs, a in replies:
        inbox = {dm["id"]: dm for dm in obs["dms"]}
        assert inbox[a["target_id"]]["author"] == a["recipient"]
    # with replies certain, a DM slot of an agent with an inbox never starts a new conversation
    assert all(a.get("target_id") is not None for _, obs, a in act_actions(steps) if a["type"] == "DM" and obs["dms"])


def test_round_one_posts_everywhere_and_off_switches_work():
    _, steps = play(seed=2, rounds=4, p_dm=0.0, mention_prob=0.0, critical_prob=0.0, dislike_prob=0.0)
    acts = act_actions(steps)
    assert all(a["type"] == "POST" for _, obs, a in acts if obs["round"] == 1)
    assert not any(a["type"] == "DM" for _, _, a in acts)
    assert not any(a.get("mentions") for _, _, a in acts)
    assert not any(a.get("tone") == "critical" for _, _, a in acts)
    assert -1 not in votes(steps)
    _, silent = play(seed=2, rounds=3, activity=0.0)
    assert all(a["type"] == "NOT" for _, obs, a in act_actions(silent) if obs["round"] > 1)


def test_seeded_runs_repeat_and_seeds_differ():
    _, a = play(seed=4, rounds=5)
    _, b = play(seed=4, rounds=5)
    _, c = play(seed=5, rounds=5)
    assert [x for _, x in a] == [x for _, x in b]
    assert [x for _, x in a] != [x for _, x in c]


def test_numeric_and_both_observations_make_the_same_choices():
    def contents(obs_format):
        env = socialgym.parallel_env(n_agents=12, max_rounds=5, topics=TOPICS, obs_format=obs_format,
                                     invalid_actions="strict", action_masks=True, seed=0)
        policy = SocialUsers.for_env(env, seed=1, p_dm=0.4, mention_prob=0.5)
        obs, _ = env.reset(seed=0)
        while env.agents:
            obs, *_ = env.step(policy.act(obs))
        c = env.content
        return [np.asarray(c.column(k)).tolist() for k in ("kind", "author", "target_id", "topic", "sentiment",
                                                            "likes", "dislikes")]
    numeric = contents("numeric")
    assert numeric == contents("both")
    kinds = numeric[0]
    assert {0, 1, 2} <= set(kinds)        # POST, COM and DM through the numeric encoding too


def test_activity_sigma_makes_activity_unequal():
    def action_gini(sigma, seed):
        _, steps = play(seed=seed, activity_sigma=sigma)
        counts = [0] * 20
        for agent, obs, a in act_actions(steps):
            if obs["round"] > 1 and a["type"] != "NOT":
                counts[agent] += 1
        return gini(counts)
    for seed in (0, 1, 2):
        equal, skewed = action_gini(0.0, seed), action_gini(1.5, seed)
        assert skewed > equal + 0.15, (seed, equal, skewed)
    policy, _ = play(seed=0, rounds=1, activity_sigma=0.0, activity=0.4)
    assert np.array_equal(policy.agent_activity, np.full(20, 0.4))


def test_group_gain_raises_same_group_comments():
    def same_group_share(group_gain):
        # topic and tie terms off, so only homophily separates the authors
        policy, steps = play(seed=3, group_gain=group_gain, gain=0.0, tie_gain=0.0, reciprocity_gain=0.0, base=0.1)
        main = policy.main_interest
        pairs = []
        for agent, obs, a in act_actions(steps):
            if a["type"] == "COM":
                author = next(it["author"] for it in obs["feed"] if it["id"] == a["target_id"])
                pairs.append(main[int(author.split("_")[1])] == main[agent])
        return sum(pairs) / len(pairs)
    assert same_group_share(0.0) < 0.35
    assert same_group_share(1.0) > 0.8


def test_engagement_probability_formula():
    prefs = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]])     # main interests 0, 1, 0
    policy = SocialUsers(prefs, seed=0, base=0.05, gain=0.2, tie_gain=0.1, group_gain=0.2, reciprocity_gain=0.1)
    p = policy.engagement_probability([0], [[0, 1]], [[0.5, 0.0]], author=[[2, 1]], tie_in=[[0.0, 0.4]],
                                      mentions_me=[[1.0, 0.0]])
    # item 0: 0.05 + 0.2 * 1 + 0.1 * 0.5 + 0.2 (same group) + 0.1 * max(0, 1); item 1: 0.05 + 0.1 * 0.4
    assert p[0].tolist() == pytest.approx([0.6, 0.09])


def test_numeric_observations_without_layout_are_refused():
    env = socialgym.parallel_env(n_agents=4, max_rounds=2, topics=TOPICS, obs_format="numeric", seed=0)
    obs, _ = env.reset(seed=0)
    policy = SocialUsers(n_topics=6, n_agents=4, seed=0)
    with pytest.raises(ValueError, match="layout"):
        policy.act(obs)


# ---------------------------------------------------------------------------------- parameters
@pytest.mark.parametrize("name, value", [
    ("activity", 1.5), ("activity", NAN), ("activity_sigma", -0.1), ("activity_sigma", 11), ("activity_sigma", "1"),
    ("p_dm", -0.1), ("p_dm", 0.8), ("group_gain", INF), ("reciprocity_gain", "x"), ("dm_reply_prob", 2),
    ("critical_prob", -1), ("mention_prob", True), ("p_post", 1.2), ("base", NAN), ("concentration", 0),
    ("interests_per_agent", 0), ("seed", -1),
])
def test_check_params_names_the_parameter(name, value):
    with pytest.raises(ParamError) as err:
        SocialUsers.check_params(**{name: value})
    assert err.value.param == name and name in str(err.value)
    with pytest.raises(ValueError, match=name):
        SocialUsers(n_topics=3, n_agents=4, **{name: value})


def test_check_params_sum_and_unknown_keyword():
    with pytest.raises(ParamError, match="p_post \\+ p_dm") as err:
        SocialUsers.check_params(p_post=0.7, p_dm=0.4)
    assert err.value.param == "p_dm"
    with pytest.raises(TypeError):
        SocialUsers.check_params(activty=0.5)
    SocialUsers.check_params(p_post=0.6, p_dm=0.4, activity=0, activity_sigma=0, group_gain=-1.0)


def test_tunable_ranges_lie_inside_the_valid_values():
    assert set(SocialUsers.TUNABLE) == {
        "activity", "activity_sigma", "p_post", "p_dm", "base", "gain", "tie_gain", "group_gain",
        "reciprocity_gain", "dislike_prob", "critical_prob", "dm_reply_prob", "mention_prob", "concentration",
        "interests_per_agent"}
    assert SocialUsers.TUNABLE["interests_per_agent"] == (1, 4, False)
    for name, (low, high, log) in SocialUsers.TUNABLE.items():
        assert low < high and (not log or low > 0), name
        for value in (low, high):
            SocialUsers.check_params(**{name: value})
    highs = {name: high for name, (_, high, _) in SocialUsers.TUNABLE.items()}
    SocialUsers.check_params(**highs)           # every upper end at once (p_post + p_dm <= 1)
    SocialUsers(n_topics=4, n_agents=5, **highs)


# ---------------------------------------------------------------------------------- populations
DEFAULTS = {"activity": 0.6, "activity_sigma": 1.0, "p_post": 0.3, "p_dm": 0.15, "base": 0.05, "gain": 0.6,
            "tie_gain": 0.3, "group_gain": 0.2, "reciprocity_gain": 0.3, "dislike_prob": 0.2,
            "critical_prob": 0.2, "dm_reply_prob": 0.7, "mention_prob": 0.1, "concentration": 0.8,
            "interests_per_agent": 1, "supportive_threshold": 0.5}


def test_bundled_default_population_holds_the_defaults():
    assert "default" in bundled_populations()
    assert load_population("default") == DEFAULTS


def test_population_round_trip(tmp_path):
    params = {"activity": 0.3, "activity_sigma": 1.7, "p_dm": 0.25, "interests_per_agent": 2}
    path = save_population(tmp_path / "sets" / "fitted.json", "fitted", params, meta={"trials": 200})
    data = json.loads(path.read_text())
    assert data == {"name": "fitted", "kind": "social_users", "params": params, "meta": {"trials": 200}}
    assert load_population(str(path)) == params
    assert load_population(path) == params


def test_population_errors(tmp_path):
    with pytest.raises(ValueError, match="activity"):
        save_population(tmp_path / "x.json", "x", {"activity": 3})
    with pytest.raises(ValueError, match="seed"):
        save_population(tmp_path / "x.json", "x", {"seed": 3})
    assert not (tmp_path / "x.json").exists()
    with pytest.raises(ValueError, match="unknown population 'nope'.*default"):
        load_population("nope")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="bad.json.*not valid JSON"):
        load_population(bad)
    bad.write_text(json.dumps({"name": "b", "kind": "topic_users", "params": {}}))
    with pytest.raises(ValueError, match="bad.json.*kind"):
        load_population(bad)
    bad.write_text(json.dumps({"name": "b", "kind": "social_users", "params": {"p_dm": 2}}))
    with pytest.raises(ValueError, match="bad.json.*p_dm"):
        load_population(bad)
    with pytest.raises(ValueError, match="missing.json does not exist"):
        load_population(tmp_path / "missing.json")


# ---------------------------------------------------------------------------------- configs and runs
def config(policy, **env):
    return {"seed": 1, "env": {"n_agents": 20, "max_rounds": 4, "topics": TOPICS, "sentiment": "tone", **env},
            "policy": policy, "logging": {"report": False, "progress": False}}


def test_config_errors_name_the_key(tmp_path):
    load_config(config({"kind": "social_users", "params": {"population": "default", "p_dm": 0.3}}))
    cases = [
        ({"kind": "social_users", "params": {"activity": 2}}, "policy.params.activity"),
        ({"kind": "social_users", "params": {"actvity": 0.5}}, "unknown parameter 'actvity'"),
        ({"kind": "social_users", "params": {"population": "nope"}}, "policy.params.population.*unknown population"),
        ({"kind": "social_users", "params": {"population": "default", "p_post": 0.9}}, "policy.params.p_dm"),
        ({"kind": "social_users", "params": {"interests_per_agent": 7}}, "policy.params.interests_per_agent"),
        ({"groups": [{"name": "a", "kind": "random", "agents": 10},
                     {"name": "b", "kind": "social_users", "params": {"critical_prob": -1}}]},
         r"policy\.groups\[1\]\.params\.critical_prob"),
    ]
    for policy, message in cases:
        with pytest.raises(ConfigError, match=message):
            load_config(config(policy))
    with pytest.raises(ConfigError, match="agent_interests"):
        load_config(config({"kind": "social_users"}, agent_interests=["movies", "nope"] * 10))


def test_run_with_social_users(tmp_path):
    out = tmp_path / "run"
    params = {"population": "default", "p_dm": 0.3, "critical_prob": 0.6}
    run_experiment(load_config(config({"kind": "social_users", "params": params},
                                      max_rounds=6)), out)
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    kinds = {e["kind"] for e in events}
    assert {"POST", "COM", "DM", "VOTE"} <= kinds
    assert any(e["kind"] == "DM" and e["target_id"] is not None for e in events)
    assert {e["value"] for e in events if e["kind"] == "VOTE"} == {1, -1}
    assert any(e.get("mentions") for e in events)
    assert any(e["kind"] in ("COM", "DM") and e["sentiment"] < 0 for e in events)


def test_run_with_interest_labels_uses_them(tmp_path):
    labels = TOPICS * 3 + TOPICS[:2]
    policy = SocialUsers.from_interests(labels, TOPICS, concentration=0.7, seed=0)
    assert policy.main_interest.tolist() == [TOPICS.index(t) for t in labels]
    assert policy.preferences[0].tolist() == pytest.approx([0.7] + [0.06] * 5)
    cfg = load_config(config({"groups": [{"name": "s", "kind": "social_users", "agents": 20}]},
                             agent_interests=labels))
    summary = run_experiment(cfg, tmp_path / "run")
    assert summary["status"] == "complete"
