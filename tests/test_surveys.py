"""Surveys during a run (socialgym.experiments.run.surveys): config checks, LLM agents against the
loopback fake server, the scripted agents' rules and hook, pickling, and interviews.

Every expected answer below is worked out by hand from the rules stated in the module's
docstring, never by calling the code under test."""

from __future__ import annotations

import json
import pickle
from types import SimpleNamespace

import numpy as np
import pytest
from capabilities import need_module
import scipy.sparse as sp

from socialgym.experiments.define.surveys import SurveyError, check_surveys
from socialgym.experiments.run.surveys import Surveys, interview
from socialgym.rundir.layout import SURVEY_COLUMNS

AGENTS = ["agent_0", "agent_1", "agent_2"]


class Plain:
    """A scripted policy without a survey hook (administer never calls act)."""

    def act(self, observations):
        return {a: {"actions": [{"type": "NOT"}]} for a in observations}


class Hooked(Plain):
    def __init__(self, answers):
        self.answers = answers          # item id -> what the hook returns
        self.calls = []

    def answer_survey(self, agent, item, context):
        self.calls.append((agent, dict(item), context.round, context.index, context.rule, context.survey))
        return self.answers.get(item["id"])


def check(raw, max_rounds=20, groups=None):
    return check_surveys(raw, max_rounds=max_rounds, agents=AGENTS,
                         groups={"a": ["agent_0"], "b": ["agent_1", "agent_2"]} if groups is None else groups)


def custom(**extra):
    return {"name": "exit", "at_round": 2, "items": [{"id": "fair", "text": "A fair mix?", "scale": "likert5"}],
            **extra}


# ============================================================================ check_surveys
@pytest.mark.parametrize("raw, message", [
    ([{"instrument": "trust", "at_round": 30}], "surveys[0].at_round 30 is beyond env.max_rounds (20)"),
    ([{"instrument": "trust", "every": 2, "until": 21}], "surveys[0].until 21 is beyond env.max_rounds (20)"),
    ([{"instrument": "trust", "at_round": 0}], "surveys[0].at_round must be a round number"),
    ([{"instrument": "trust", "every": 0}], "surveys[0].every must be a positive integer, got 0"),
    ([{"instrument": "trust", "every": 4, "from": 6, "until": 5}],
     "surveys[0].until (5) is before surveys[0].from (6)"),
    ([{"instrument": "trust", "at_round": 3, "every": 2}], "surveys[0]: give at_round or every"),
    ([{"instrument": "trust"}], "surveys[0] needs at_round"),
    ([{"instrument": "trust", "at_round": 1}, {"instrument": "satisfaction", "at_round": 1},
      {"instrument": "stance", "topic": "a", "at_round": 1, "target": "x"}],
     "surveys[2].target: unknown group 'x'; groups: a, b"),
    ([{"instrument": "trust", "at_round": 1, "target": ["agent_0", "agent_9"]}],
     "surveys[0].target: unknown agent 'agent_9'"),
    ([{"instrument": "trust", "at_round": 1, "target": []}], "surveys[0].target must be all, a group name"),
    ([{"instrument": "bfi", "at_round": 1}],
     "surveys[0].instrument must be one of mini_ipip, stance, satisfaction, trust, got 'bfi'"),
    ([{"instrument": "trust", "at_round": 1},
      custom(items=[{"id": "fair", "text": "A fair mix?", "scale": "stars"}])],
     "surveys[1].items[0].scale must be one of likert5, 0-10, 1-10, text, got 'stars'"),
    ([{"instrument": "trust", "at_round": 1}, custom(scale="stars")],
     "surveys[1].scale must be one of likert5, 0-10, 1-10, text, got 'stars'"),
    ([{"instrument": "stance", "at_round": 1}], "surveys[0].topic is required for instrument stance"),
    ([{"instrument": "stance", "at_round": 1, "topic": "a\nb"}], "surveys[0].topic: topic contains the control"),
    ([{"instrument": "trust", "at_round": 1, "colour": "red"}], "unknown key surveys[0].colour for instrument trust"),
    ([{"instrument": "trust", "at_round": 1, "topic": "a"}], "unknown key surveys[0].topic for instrument trust"),
    ([custom(instrument_name="x")], "unknown key surveys[0].instrument_name for a custom questionnaire"),
    ([{"instrument": "stance", "topic": "a", "at_round": 1}, {"instrument": "stance", "topic": "b", "at_round": 2}],
     "surveys[1].name 'stance' is used by surveys[0] too"),
    ([custom(), custom()], "surveys[1].name 'exit' is used by surveys[0] too"),
    ([{"at_round": 1, "items": [{"id": "q", "text": "?"}]}], "surveys[0].name is required for a custom questionnaire"),
    ([custom(items=[])], "surveys[0].items must be a non-empty list"),
    ([custom(items=[{"id": "q", "text": "A?"}, {"id": "q", "text": "B?"}])],
     "surveys[0].items[1].id 'q' is used by surveys[0].items[0] too"),
    ([custom(items=[{"id": "q", "text": "x" * 501}])], "surveys[0].items[0].text has 501 characters"),
    ([custom(items=[{"id": "q", "text": "A?", "hint": "h"}])], "unknown key surveys[0].items[0].hint"),
    ([custom(items=[{"id": "2q", "text": "A?"}])], "surveys[0].items[0].id must be a word"),
    ([{"instrument": "stance", "topic": "a", "at_round": 1, "issue": ""}], "surveys[0].issue must be a non-empty"),
    ({"instrument": "trust"}, "surveys must be a list of mappings"),
    (["trust"], "surveys[0] must be a mapping"),
])
def test_bad_surveys_give_one_line_errors_naming_the_key(raw, message):
    with pytest.raises(SurveyError) as info:
        check(raw)
    text = str(info.value)
    assert message in text and "\n" not in text
    assert isinstance(info.value, ValueError)


def test_surveys_are_normalised_and_checking_them_again_changes_nothing():
    raw = [{"instrument": "stance", "every": 3, "topic": "climate"},
           {"instrument": "trust", "every": 2, "from": 5, "until": 9, "target": "b", "name": "trust_b"},
           {"name": "exit", "at_round": 10, "scale": "0-10", "target": ["agent_2", "agent_0"],
            "items": [{"id": "rating", "text": "Rate it."}, {"id": "change", "text": "Change?", "scale": "text"}]}]
    out = check(raw)
    assert out == [
        {"instrument": "stance", "name": "stance", "every": 3, "from": 3, "target": "all", "topic": "climate"},
        {"instrument": "trust", "name": "trust_b", "every": 2, "from": 5, "until": 9, "target": "b"},
        {"name": "exit", "at_round": 10, "target": ["agent_2", "agent_0"],
         "items": [{"id": "rating", "text": "Rate it.", "scale": "0-10"},
                   {"id": "change", "text": "Change?", "scale": "text"}]}]
    assert check(out) == out
    assert check(None) == [] and check([]) == []
    # every: 3 asks after rounds 3, 6, 9 ...; from/until bound it; at_round once
    s = Surveys(out, AGENTS, ["a", "b", "b"], ["greedy"] * 3)
    asked = {r: [d["name"] for d in s.due(r, 12)] for r in range(1, 13)}
    assert asked == {1: [], 2: [], 3: ["stance"], 4: [], 5: ["trust_b"], 6: ["stance"], 7: ["trust_b"], 8: [],
                     9: ["stance", "trust_b"], 10: ["exit"], 11: [], 12: ["stance"]}
    assert s.targets(out[1]).tolist() == [1, 2] and s.targets(out[2]).tolist() == [0, 2]
    with pytest.raises(SurveyError, match=r"surveys\[0\]\.target: unknown group 'b'; groups: none defined"):
        check([{"instrument": "trust", "at_round": 1, "target": "b"}], groups={})


# ============================================================================ scripted agents: rules
def stub_env(votes, W, max_rounds=5):
    """``votes``: (vote_feed rows, [(voter, value), ...]) of the last round, or None (no round closed)."""
    last = None
    if votes is not None:
        feed, cast = votes
        last = SimpleNamespace(batch=SimpleNamespace(
            vote_feed=np.array(feed, np.int64), vote_voter=np.array([v for v, _ in cast], np.int32),
            vote_value=np.array([x for _, x in cast], np.int8)))
    return SimpleNamespace(possible_agents=list(AGENTS), config=SimpleNamespace(max_rounds=max_rounds),
                           last_round=last, tie_matrix=lambda: sp.csr_matrix(W))


def table(rows, *keys):
    return [tuple(row[k] for k in keys) for row in rows]


def test_satisfaction_and_trust_rules_by_hand_and_items_without_a_rule_stay_unanswered():
    # ties W[v, u] from v to u; agent_2 -> agent_0 is stored with weight 0: no tie
    W = sp.csr_matrix((np.array([0.3, 0.6, 0.2, 0.0]), (np.array([0, 0, 1, 2]), np.array([1, 2, 0, 0]))), shape=(3, 3))
    specs = [{"instrument": "satisfaction", "at_round": 1}, {"instrument": "trust", "at_round": 1},
             {"instrument": "mini_ipip", "at_round": 1, "target": ["agent_1"]},
             {"name": "exit", "at_round": 1, "target": ["agent_2"],
              "items": [{"id": "fair", "text": "Fair?"}, {"id": "change", "text": "Change?", "scale": "text"}]}]
    s = Surveys(specs, AGENTS, ["", "", ""], ["greedy", "random", "greedy"])
    # vote items shown: agent_0 three, agent_1 two, agent_2 one; up-votes: agent_0 one (and one
    # down-vote), agent_1 two, agent_2 none
    votes = ([[5, 6, 7], [5, 8, -1], [6, -1, -1]], [(0, 1), (0, -1), (1, 1), (1, 1)])
    rows, interviews = s.administer(1, stub_env(votes, W), Plain(), None)
    assert interviews == []
    assert all(tuple(row) == SURVEY_COLUMNS for row in rows)
    # satisfaction: up-voted shares 1/3, 2/2, 0/1 -> 1 + round(3) = 4, 1 + 9 = 10, 1
    # trust: agent_0 (0.3 + 0.6) / 2 = 0.45 -> round(4.5) = 5 (halves up); agent_1 0.2 -> 2; agent_2 none -> 0
    assert table(rows[:6], "agent", "policy", "survey", "item", "scale", "answer", "status", "source") == [
        ("agent_0", "greedy", "satisfaction", "satisfaction", "1-10", 4, "ok", "rule"),
        ("agent_1", "random", "satisfaction", "satisfaction", "1-10", 10, "ok", "rule"),
        ("agent_2", "greedy", "satisfaction", "satisfaction", "1-10", 1, "ok", "rule"),
        ("agent_0", "greedy", "trust", "trust", "0-10", 5, "ok", "rule"),
        ("agent_1", "random", "trust", "trust", "0-10", 2, "ok", "rule"),
        ("agent_2", "greedy", "trust", "trust", "0-10", 0, "ok", "rule")]
    ipip = rows[6:26]
    assert [r["item"] for r in ipip] == [f"ipip_{k}" for k in range(1, 21)]
    assert {(r["agent"], r["answer"], r["status"], r["source"], r["scale"]) for r in ipip} == \
        {("agent_1", "", "unanswered", "", "likert5")}
    assert table(rows[26:], "agent", "survey", "item", "answer", "status", "source") == [
        ("agent_2", "exit", "fair", "", "unanswered", ""), ("agent_2", "exit", "change", "", "unanswered", "")]
    assert len(rows) == 28 and {r["round"] for r in rows} == {1}

    # shares 1/2 (1 + round(4.5) = 6, halves up), 1/4 (1 + round(2.25) = 3); agent_2 was shown nothing
    votes = ([[1, 2, -1, -1], [1, 2, 3, 4], [-1, -1, -1, -1]], [(0, 1), (1, 1)])
    rows, _ = Surveys(specs[:1], AGENTS, ["", "", ""], ["greedy"] * 3).administer(
        1, stub_env(votes, W), Plain(), None)
    assert [(r["answer"], r["status"]) for r in rows] == [(6, "ok"), (3, "ok"), ("", "unanswered")]
    # before any round closed there are no votes: satisfaction has no rule answer
    rows, _ = Surveys(specs[:1], AGENTS, ["", "", ""], ["greedy"] * 3).administer(
        1, stub_env(None, W), Plain(), None)
    assert [r["status"] for r in rows] == ["unanswered"] * 3
    assert Surveys(specs[:1], AGENTS, ["", "", ""], ["greedy"] * 3).administer(2, stub_env(None, W), Plain(), None) \
        == ([], [])


@pytest.fixture
def stance_run(make_env, post, act, vote, NOT):
    """Three rounds, topics a and b, tone sentiment (supportive 1, neutral 0, critical -1);
    chronological feeds of 50 show every earlier public item of the others.

    round 1: agent_0 POST a +1, agent_1 POST a -1, agent_2 POST c -1 (c is new in round 1)
    round 2: agent_2 POST a +1 (the others NOT)
    round 3: before the act step a post by agent_1 on a with sentiment 0 is injected
    """
    env = make_env(max_rounds=3)
    specs = [{"instrument": "stance", "topic": "a", "every": 1, "from": 2},
             {"instrument": "stance", "name": "stance_c", "topic": "C", "at_round": 2},   # topics match case-blind
             {"instrument": "stance", "name": "stance_z", "topic": "zzz", "at_round": 2}]
    s = Surveys(specs, AGENTS, ["", "", ""], ["scripted"] * 3)
    seen = {}
    s.observe(env)                                           # round 1: empty feeds; c not in the vocabulary
    act(env, {"agent_0": [post("a", "supportive")], "agent_1": [post("a", "critical")],
              "agent_2": [post("c", "critical")]})
    vote(env)
    s.observe(env)                                           # round 2
    seen[2] = {k: (v[0].copy(), v[1].copy()) for k, v in s.exposure.items()}
    act(env, {"agent_0": [NOT], "agent_1": [NOT], "agent_2": [post("a", "supportive")]})
    vote(env)
    s.observe(env)                                           # round 3 ...
    env.inject_post("agent_1", "a", sentiment=0.0)
    env.refresh_feeds()
    s.observe(env)                                           # ... again: replaces round 3's contribution
    act(env, {"agent_0": [NOT], "agent_1": [NOT], "agent_2": [NOT]})
    vote(env)
    return env, s, seen


def test_stance_rule_from_the_exposure_observe_adds_up(stance_run):
    env, s, seen = stance_run
    # after round 2's observe: on a, agent_0 saw -1 (1 item), agent_1 +1 (1), agent_2 +1 and -1 (2);
    # on c, agent_0 and agent_1 saw agent_2's -1; agent_2 saw nothing on c
    assert seen[2]["a"][0].tolist() == [-1.0, 1.0, 0.0] and seen[2]["a"][1].tolist() == [1, 1, 2]
    assert seen[2]["c"][0].tolist() == [-1.0, -1.0, 0.0] and seen[2]["c"][1].tolist() == [1, 1, 0]
    assert seen[2]["zzz"][1].tolist() == [0, 0, 0]
    # round 3 (with the injected post): on a agent_0 sees 0, +1, -1; agent_1 sees +1, +1 (its own
    # posts are not in its feed); agent_2 sees 0, +1, -1. Counted once, though observed twice.
    assert s.exposure["a"][0].tolist() == [-1.0, 3.0, 0.0] and s.exposure["a"][1].tolist() == [4, 3, 5]
    assert s.exposure["c"][0].tolist() == [-2.0, -2.0, 0.0] and s.exposure["c"][1].tolist() == [2, 2, 0]
    rows, interviews = s.administer(3, env, Plain(), None)
    # a: m = -1/4 -> 3 - 0.5 = 2.5 -> 3 (halves up); m = 1 -> 5; m = 0 -> 3
    assert table(rows, "agent", "survey", "item", "scale", "answer", "source") == [
        ("agent_0", "stance", "stance", "likert5", 3, "rule"), ("agent_1", "stance", "stance", "likert5", 5, "rule"),
        ("agent_2", "stance", "stance", "likert5", 3, "rule")]
    assert interviews == []


def test_stance_rule_after_round_2_and_topics_never_seen(make_env, post, act, vote, NOT):
    env = make_env(max_rounds=3)
    specs = [{"instrument": "stance", "topic": "a", "at_round": 2},
             {"instrument": "stance", "name": "stance_c", "topic": "c", "at_round": 2},
             {"instrument": "stance", "name": "stance_z", "topic": "zzz", "at_round": 2}]
    s = Surveys(specs, AGENTS, ["", "", ""], ["scripted"] * 3)
    for acts in ({"agent_0": [post("a", "supportive")], "agent_1": [post("a", "critical")],
                  "agent_2": [post("c", "critical")]},
                 {"agent_0": [NOT], "agent_1": [NOT], "agent_2": [NOT]}):
        s.observe(env)
        act(env, acts)
        vote(env)
    rows, _ = s.administer(2, env, Plain(), None)
    # a: m = -1, 1, 0 -> 1, 5, 3; c: m = -1, -1, none -> 1, 1, 3; zzz: never a topic -> 3
    assert [(r["survey"], r["answer"]) for r in rows] == [
        ("stance", 1), ("stance", 5), ("stance", 3), ("stance_c", 1), ("stance_c", 1), ("stance_c", 3),
        ("stance_z", 3), ("stance_z", 3), ("stance_z", 3)]


def test_surveys_pickle_with_their_exposure(stance_run):
    env, s, _ = stance_run
    back = pickle.loads(pickle.dumps(s))
    assert back.specs == s.specs and back.observed_round == 3
    for key in ("a", "c", "zzz"):
        assert back.exposure[key][0].tolist() == s.exposure[key][0].tolist()
        assert back.exposure[key][1].tolist() == s.exposure[key][1].tolist()
    assert back.administer(3, env, Plain(), None) == s.administer(3, env, Plain(), None)


def test_a_hook_takes_precedence_over_the_rule_and_gets_the_rule_answer(stance_run):
    from socialgym.agents import PolicyMix

    env, s, _ = stance_run
    s.specs = [*s.specs, {"name": "exit", "at_round": 3, "target": ["agent_0", "agent_2"],
                          "items": [{"id": "fair", "text": "A fair mix?"},
                                    {"id": "change", "text": "What would you change?", "scale": "text"}]}]
    hooked = Hooked({"stance": 2, "change": "  Fewer posts on a. "})      # fair: None -> no rule -> unanswered
    rows, interviews = s.administer(3, env, PolicyMix({hooked: ["agent_0"], Plain(): ["agent_1", "agent_2"]}), None)
    assert table(rows, "agent", "survey", "item", "answer", "status", "source") == [
        ("agent_0", "stance", "stance", 2, "ok", "hook"), ("agent_1", "stance", "stance", 5, "ok", "rule"),
        ("agent_2", "stance", "stance", 3, "ok", "rule"),
        ("agent_0", "exit", "fair", "", "unanswered", ""),
        ("agent_0", "exit", "change", "Fewer posts on a.", "ok", "hook"),
        ("agent_2", "exit", "fair", "", "unanswered", ""), ("agent_2", "exit", "change", "", "unanswered", "")]
    assert interviews == [{"round": 3, "agent": "agent_0", "survey": "exit", "item": "change",
                           "question": "What would you change?", "answer": "Fewer posts on a."}]
    (agent, item, rnd, index, rule, survey), *rest = hooked.calls
    assert (agent, rnd, index, rule, survey) == ("agent_0", 3, 0, 3, "stance")       # the rule's answer: 3
    assert item == {"id": "stance", "text": "Where do you stand on a?", "scale": "likert5", "survey": "stance",
                    "instrument": "stance", "topic": "a"}
    assert [(c[1]["id"], c[4]) for c in rest] == [("fair", None), ("change", None)]


@pytest.mark.parametrize("answers, scale", [({"stance": 7}, "likert5"), ({"stance": "4"}, "likert5"),
                                            ({"stance": True}, "likert5")])
def test_a_bad_hook_value_names_the_policy_agent_and_item(stance_run, answers, scale):
    env, s, _ = stance_run
    with pytest.raises(ValueError) as info:
        s.administer(3, env, Hooked(answers), None)
    text = str(info.value)
    assert "Hooked.answer_survey" in text and "agent_0" in text and "stance.stance" in text and scale in text


def test_a_text_hook_must_return_text(stance_run):
    env, s, _ = stance_run
    s.specs = [{"name": "exit", "at_round": 3, "items": [{"id": "change", "text": "Change?", "scale": "text"}]}]
    with pytest.raises(ValueError, match=r"Hooked\.answer_survey returned 3 for agent_0, item exit\.change"):
        s.administer(3, env, Hooked({"change": 3}), None)


# ============================================================================ LLM agents
FIXED = {"stance": 4, "fair": 5, "rating": 8, "trust": 2, "answer": 6}
FREE_TEXT = "More science posts."


def scripted(body, n):
    from socialgym.llm.testing import schema_of

    schema = schema_of(body)
    if schema is not None and "answers" in schema.get("properties", {}):
        ids = list(schema["properties"]["answers"]["properties"])
        return json.dumps({"answers": {i: FIXED[i] for i in ids}})
    if schema is None and body["messages"][-1]["content"].startswith("Survey after round"):
        return FREE_TEXT
    return None            # plans and votes: a random schema-valid reply


def broken(body, n):
    from socialgym.llm.testing import schema_of

    return "{not json" if schema_of(body) is not None else ""


@pytest.fixture
def llm_setup():
    need_module("openai")
    from socialgym.llm import LLMClient
    from socialgym.llm.testing import FakeServer

    def make(responder, **client_kwargs):
        server = FakeServer(responder)
        server.start()
        client = LLMClient(server.base_url, "fake", api_key="k", max_retries=0, backoff=0.001, **client_kwargs)
        made.append((server, client))
        return server, client

    made = []
    yield make
    for server, client in made:
        client.close()
        server.stop()


LLM_SPECS = [{"instrument": "stance", "topic": "climate", "every": 1},
             {"name": "exit", "at_round": 1,
              "items": [{"id": "fair", "text": "The feed showed me a fair mix of views."},
                        {"id": "change", "text": "What would you change about your feed?", "scale": "text"}]}]


def survey_requests(server):
    return [b for b in server.requests if b["messages"][-1]["content"].startswith("Survey after round")]


def test_llm_agents_answer_from_persona_and_memory(llm_setup):
    import socialgym
    from socialgym.agents import LLMPolicy
    from socialgym.agents.persona import climate_change_personas

    server, client = llm_setup(scripted)
    personas = climate_change_personas(3)
    policy = LLMPolicy(client, personas, generation="joint", coach=None)
    env = socialgym.parallel_env(n_agents=3, n_actions=1, max_rounds=3, topics=["climate", "science"], seed=0)
    obs, _ = env.reset(seed=0)
    s = Surveys(LLM_SPECS, AGENTS, ["", "", ""], ["llm"] * 3)
    s.observe(env)
    obs, *_ = env.step(policy.act(obs))
    obs, *_ = env.step(policy.act(obs))
    blocks = {a: policy.memories[a].prompt_block() for a in AGENTS}
    sizes = {a: (len(policy.memories[a].conversation), len(policy.memories[a].opinions)) for a in AGENTS}
    assert all(blocks.values())                      # every agent posted in round 1: something to remember
    calls_before = len(client.usage.calls)
    rows, interviews = s.administer(1, env, policy, client)

    expected = [(a, "stance", "stance", "likert5", 4, "ok", "llm") for a in AGENTS]
    for a in AGENTS:
        expected += [(a, "exit", "fair", "likert5", 5, "ok", "llm"),
                     (a, "exit", "change", "text", FREE_TEXT, "ok", "llm")]
    assert table(rows, "agent", "survey", "item", "scale", "answer", "status", "source") == expected
    assert [(r["round"], r["group"], r["policy"]) for r in rows] == [(1, "", "llm")] * 9
    assert interviews == [{"round": 1, "agent": a, "survey": "exit", "item": "change",
                           "question": "What would you change about your feed?", "answer": FREE_TEXT} for a in AGENTS]
    # one structured request per agent and survey, one plain request per free-text item
    calls = client.usage.calls[calls_before:]
    assert len(calls) == 9 and {c.purpose for c in calls} == {"survey"} and {c.round for c in calls} == {1}
    assert sorted(c.agent for c in calls) == sorted(AGENTS * 3)
    requests = survey_requests(server)
    assert len(requests) == 9
    for a, persona in zip(AGENTS, personas):
        mine = [b for b in requests if f"You are {persona.name}," in b["messages"][0]["content"]]
        assert len(mine) == 3
        for b in mine:
            system = b["messages"][0]["content"]
            assert blocks[a] in system and "What you remember:" in system
        users = sorted(b["messages"][-1]["content"] for b in mine)
        stance = next(u for u in users if "stance:" in u)
        # the persona's own issue words the stance item; the scale is explained
        assert "Where do you stand on action on climate change?" in stance and "5 strongly for" in stance
        assert '"stance": <1-5>' in stance
        exit_numeric = next(u for u in users if "fair:" in u)
        assert "The feed showed me a fair mix of views." in exit_numeric and "change" not in exit_numeric
        text = next(u for u in users if "What would you change" in u)
        assert text.startswith("Survey after round 1. What would you change about your feed?")
    # the survey changed no memory
    assert {a: policy.memories[a].prompt_block() for a in AGENTS} == blocks
    assert {a: (len(policy.memories[a].conversation), len(policy.memories[a].opinions)) for a in AGENTS} == sizes
    assert not client.usage.fallbacks


def test_failed_llm_answers_are_fallback_rows_and_recorded(llm_setup):
    from socialgym.agents import LLMPolicy
    from socialgym.agents.persona import generate_personas

    server, client = llm_setup(broken, max_repairs=1)
    personas = generate_personas(3, seed=4)
    policy = LLMPolicy(client, personas)
    env = stub_env(([[1, -1], [1, -1], [1, -1]], []), sp.csr_matrix((3, 3)))
    rows, interviews = Surveys(LLM_SPECS, AGENTS, ["", "", ""], ["llm"] * 3).administer(1, env, policy, client)
    assert len(rows) == 9 and interviews == []
    assert {(r["answer"], r["status"], r["source"]) for r in rows} == {("", "fallback", "")}
    # no round was played: the personas were assigned as the first act step would, in agent order
    assert [policy.personas[a] for a in AGENTS] == personas
    fallbacks = client.usage.fallbacks
    assert len(fallbacks) == 9
    assert {(f.purpose, f.round, f.slot, f.used) for f in fallbacks} == {("survey", 1, None, "no answer")}
    assert sorted(f.agent for f in fallbacks) == sorted(AGENTS * 3)
    reasons = sorted(f.reason.split(":")[0] for f in fallbacks)
    assert reasons == ["exit"] * 3 + ["exit.change"] * 3 + ["stance"] * 3
    assert all("invalid after 1 re-prompts" in f.reason for f in fallbacks if f.reason.startswith(("stance", "exit:")))
    assert client.usage.repairs == 6                  # stance and exit's numeric request, once each per agent
    # a generated persona's issue is the placeholder: the stance item names the topic
    assert any("Where do you stand on climate?" in b["messages"][-1]["content"] for b in survey_requests(server))


def test_a_mix_asks_llm_agents_and_answers_for_the_others(llm_setup):
    from socialgym.agents import LLMPolicy, PolicyMix
    from socialgym.agents.persona import generate_personas

    server, client = llm_setup(scripted)
    llm = LLMPolicy(client, generate_personas(1, seed=0))
    mix = PolicyMix({llm: ["agent_0"], Plain(): ["agent_1", "agent_2"]})
    W = sp.csr_matrix((np.array([0.5, 0.25]), (np.array([1, 2]), np.array([0, 0]))), shape=(3, 3))
    specs = [{"instrument": "trust", "at_round": 2}, {"instrument": "trust", "name": "trust_bots", "at_round": 2,
                                                       "target": "bots"}]
    s = Surveys(specs, AGENTS, ["talkers", "bots", "bots"], ["llm", "greedy", "greedy"])
    rows, _ = s.administer(2, stub_env(([[-1], [-1], [-1]], []), W, max_rounds=4), mix, client)
    # trust: agent_1 0.5 -> 5; agent_2 0.25 -> round(2.5) = 3 (halves up); agent_0 asks the model: 2
    assert table(rows, "agent", "group", "policy", "survey", "answer", "source") == [
        ("agent_0", "talkers", "llm", "trust", 2, "llm"), ("agent_1", "bots", "greedy", "trust", 5, "rule"),
        ("agent_2", "bots", "greedy", "trust", 3, "rule"), ("agent_1", "bots", "greedy", "trust_bots", 5, "rule"),
        ("agent_2", "bots", "greedy", "trust_bots", 3, "rule")]
    assert len(survey_requests(server)) == 1
    assert "0 no trust at all" in survey_requests(server)[0]["messages"][-1]["content"]


def test_interview_one_llm_agent(llm_setup):
    from socialgym.agents import LLMPolicy, PolicyMix
    from socialgym.agents.persona import generate_personas

    server, client = llm_setup(scripted)
    llm = LLMPolicy(client, generate_personas(1, seed=0))
    mix = PolicyMix({llm: ["agent_0"], Plain(): ["agent_1", "agent_2"]})
    with pytest.raises(ValueError, match="agent_0 has no persona yet"):
        interview(mix, "agent_0", "Anything to add?", client, round=2)
    llm.assign_personas(["agent_0"])
    before = len(llm.memories["agent_0"].conversation)
    out = interview(mix, "agent_0", "What would you change about your feed?", client, round=2)
    assert out == {"agent": "agent_0", "round": 2, "question": "What would you change about your feed?",
                   "scale": "text", "answer": FREE_TEXT, "status": "ok"}
    assert interview(mix, "agent_0", "How much do you like it here?", client, round=2, scale="0-10")["answer"] == 6
    name = llm.personas["agent_0"].name
    assert all(f"You are {name}," in b["messages"][0]["content"] for b in server.requests)
    assert [c.purpose for c in client.usage.calls] == ["interview", "interview"]
    assert len(llm.memories["agent_0"].conversation) == before
    with pytest.raises(ValueError, match="agent_1 is not an LLM agent"):
        interview(mix, "agent_1", "Hello?", client, round=2)
    with pytest.raises(ValueError, match="agent_7"):
        interview(mix, "agent_7", "Hello?", client, round=2)
    with pytest.raises(ValueError, match="scale must be one of"):
        interview(mix, "agent_0", "Hello?", client, round=2, scale="stars")


def test_a_failed_interview_is_a_recorded_fallback(llm_setup):
    from socialgym.agents import LLMPolicy
    from socialgym.agents.persona import generate_personas

    server, client = llm_setup(broken)
    llm = LLMPolicy(client, generate_personas(1, seed=0))
    llm.assign_personas(["agent_0"])
    out = interview(llm, "agent_0", "Anything to add?", client, round=0)
    assert (out["answer"], out["status"]) == ("", "fallback")
    (f,) = client.usage.fallbacks
    assert (f.agent, f.round, f.purpose, f.used) == ("agent_0", 0, "interview", "no answer")
