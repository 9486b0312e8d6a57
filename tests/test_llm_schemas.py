"""Unit tests of ``socialgym.llm.schemas``: the plan, vote, tie, tips and survey schemas built from
the observation, the validators that check replies, tolerant JSON parsing, and the schemas'
conversion to llama.cpp grammars. No network, no model."""

from __future__ import annotations

import json

import pytest
from capabilities import need_module

from socialgym.llm.schemas import (PlanContext, check_plan, check_survey, check_ties, check_tips,
                                   check_votes, parse_json, plan_schema, survey_schema,
                                   tie_schema, tips_schema, vote_schema)


# ============================================================================ plan schema / check_plan
CTX = PlanContext(agent="agent_0", round=2, n_actions=2, users=("agent_1", "agent_2"), posts=(3, 7),
                  dms=((11, "agent_1"),))
CTX1 = PlanContext(agent="agent_0", round=1, n_actions=2, users=("agent_1", "agent_2"), posts=(3, 7),
                   dms=((11, "agent_1"),))


def _walk(node):
    """Every dict inside a schema."""
    if isinstance(node, dict):
        yield node
        for v in node.values():
            yield from _walk(v)
    elif isinstance(node, list):
        for v in node:
            yield from _walk(v)


def _variants(schema):
    item = schema["properties"]["actions"]["items"]
    return item["anyOf"] if "anyOf" in item else [item]


def _enum_of(prop):
    """The enum of a property, looking through a nullable anyOf."""
    if "anyOf" in prop:
        (inner,) = [s for s in prop["anyOf"] if "enum" in s]
        assert {"type": "null"} in prop["anyOf"]
        return inner["enum"]
    return prop["enum"]


def test_plan_schema_round1_is_post_only():
    s = plan_schema(CTX1)
    item = s["properties"]["actions"]["items"]
    assert "anyOf" not in item                                  # a single variant, not a union
    assert item["properties"]["type"]["enum"] == ["POST"]
    assert s["properties"]["actions"]["minItems"] == s["properties"]["actions"]["maxItems"] == 2
    assert not any(n.get("enum") in (["COM"], ["DM"], ["NOT"]) for n in _walk(s))


def test_plan_schema_enums_are_exactly_the_listed_ids():
    variants = _variants(plan_schema(CTX))
    by = {}
    for v in variants:
        p = v["properties"]
        kind = p["type"]["enum"][0]
        if kind == "DM":
            kind = "DM_cold" if p["target_id"] == {"type": "null"} else "DM_reply"
        by[kind] = p
        assert v["additionalProperties"] is False and v["required"] == list(p)
    assert sorted(by) == ["COM", "DM_cold", "DM_reply", "NOT", "POST"]
    assert _enum_of(by["POST"]["mention"]) == ["agent_1", "agent_2"]
    assert _enum_of(by["COM"]["mention"]) == ["agent_1", "agent_2"]
    assert by["COM"]["target_id"]["enum"] == [3, 7] and by["COM"]["target_id"]["type"] == "integer"
    assert by["DM_reply"]["recipient"]["enum"] == ["agent_1"] and by["DM_reply"]["target_id"]["enum"] == [11]
    assert by["DM_cold"]["recipient"]["enum"] == ["agent_1", "agent_2"]
    assert by["POST"]["tone"]["enum"] == ["supportive", "neutral", "critical"]
    assert list(by["NOT"]) == ["type"]
    # no enum carries a list-valued "type" (llama.cpp's converter would then ignore the enum)
    for node in _walk(plan_schema(CTX)):
        if "enum" in node:
            assert isinstance(node["type"], str)


def test_plan_schema_without_users_or_text():
    ctx = PlanContext("agent_0", 2, 1, users=(), posts=(), dms=(), with_text=False)
    variants = _variants(plan_schema(ctx))
    kinds = [v["properties"]["type"]["enum"][0] for v in variants]
    assert kinds == ["POST", "NOT"]                            # no COM (no posts), no DM (no users / DMs)
    assert variants[0]["properties"]["mention"] == {"type": "null"}
    assert "text" not in variants[0]["properties"]


def test_check_plan_valid_plan_values():
    plan = {"actions": [
        {"type": "COM", "target_id": 7, "mention": "agent_2", "tone": "supportive", "text": "nice"},
        {"type": "DM", "recipient": "agent_1", "target_id": 11, "topic": " climate ", "tone": "critical",
         "text": None},
    ]}
    got = check_plan(plan, CTX)
    assert got.ok, got.errors
    assert got.value == [
        {"type": "COM", "tone": "supportive", "text": "nice", "target_id": 7, "mention": "agent_2"},
        {"type": "DM", "tone": "critical", "text": "", "topic": "climate", "target_id": 11, "recipient": "agent_1"},
    ]


def test_check_plan_defaults_and_text_truncation():
    # missing tone -> "neutral"; text longer than 280 kept to its first 280 characters
    got = check_plan({"actions": [{"type": "POST", "topic": "music", "mention": None, "text": "x" * 300},
                                  {"type": "POST", "topic": "a" * 40}]}, CTX1)
    assert got.ok, got.errors
    assert got.value[0] == {"type": "POST", "tone": "neutral", "text": "x" * 280, "topic": "music", "mention": None}
    assert got.value[1]["topic"] == "a" * 40


def test_check_plan_round1_rejects_com():
    got = check_plan({"actions": [{"type": "POST", "topic": "music"},
                                  {"type": "COM", "target_id": 3}]}, CTX1)
    assert got.errors == ["action 2: round 1 allows only POST, got COM"]
    assert got.value[0]["type"] == "POST" and got.value[1] is None


@pytest.mark.parametrize("action, fragments", [
    ({"type": "COM", "target_id": 99}, ["action 2:", "target_id 99", "[3, 7]"]),
    ({"type": "COM", "target_id": True}, ["action 2:", "target_id True"]),
    ({"type": "DM", "recipient": "agent_2", "target_id": 11, "topic": "x"},
     ["action 2:", "reply to DM 11 must go to its author agent_1", "'agent_2'"]),
    ({"type": "DM", "recipient": "agent_1", "target_id": 12, "topic": "x"}, ["action 2:", "target_id 12", "[11]"]),
    ({"type": "DM", "recipient": "agent_9", "target_id": None, "topic": "x"}, ["action 2:", "recipient 'agent_9'"]),
    ({"type": "DM", "recipient": "agent_0", "target_id": None, "topic": "x"}, ["action 2:", "recipient 'agent_0'"]),
    ({"type": "POST", "topic": "x", "tone": "angry"}, ["action 2:", "tone", "'angry'"]),
    ({"type": "POST", "topic": "#climate!"}, ["action 2:", "topic", "'#climate!'"]),
    ({"type": "POST", "topic": "1st"}, ["action 2:", "topic"]),
    ({"type": "POST", "topic": "a" * 41}, ["action 2:", "topic"]),
    ({"type": "POST"}, ["action 2:", "topic", "None"]),
    ({"type": "POST", "topic": "x", "mention": "agent_9"}, ["action 2:", "mention 'agent_9'"]),
    ({"type": "NOT", "text": "hi"}, ["action 2:", "NOT does not take ['text']"]),
    ({"type": "LIKE"}, ["action 2:", "type must be one of", "'LIKE'"]),
    ("POST", ["action 2:", "must be an object, got str"]),
])
def test_check_plan_slot_errors(action, fragments):
    got = check_plan({"actions": [{"type": "NOT"}, action]}, CTX)
    assert len(got.errors) == 1, got.errors
    for f in fragments:
        assert f in got.errors[0], (f, got.errors[0])
    assert got.value == [{"type": "NOT"}, None]      # the good slot is kept


def test_check_plan_wrong_number_of_actions():
    too_many = check_plan({"actions": [{"type": "NOT"}] * 3}, CTX)
    assert too_many.errors == ["expected exactly 2 actions, got 3"]
    assert too_many.value == [{"type": "NOT"}, {"type": "NOT"}]     # extra slots dropped
    too_few = check_plan({"actions": [{"type": "NOT"}]}, CTX)
    assert too_few.errors == ["expected exactly 2 actions, got 1"] and too_few.value == [{"type": "NOT"}]


@pytest.mark.parametrize("value", [None, [], {"actions": "POST"}, {"plan": []}])
def test_check_plan_not_an_actions_object(value):
    got = check_plan(value, CTX)
    assert not got.ok and got.value == [] and "actions" in got.errors[0]


# ============================================================================ votes / ties / tips / survey
def test_check_votes_dict_form():
    got = check_votes({"votes": {"4": 1, "9": -1}}, [4, 9, 12])      # 12 missing -> fine (counts 0)
    assert got.ok and got.value == {4: 1, 9: -1}


def test_check_votes_errors_keep_good_votes():
    got = check_votes({"votes": {"4": 2, "5": 1, "9": 0, "12": True}}, [4, 9, 12])
    assert got.value == {9: 0}
    assert len(got.errors) == 3
    assert "vote on 4 must be 1, 0 or -1, got 2" in got.errors
    assert "'5' is not one of the item ids [4, 9, 12]" in got.errors
    assert "vote on 12 must be 1, 0 or -1, got True" in got.errors


def test_check_votes_paper_list_form():
    got = check_votes({"votes": [{"id": 4, "vote": -1}, {"id": 9, "vote": 0}]}, [4, 9])
    assert got.ok and got.value == {4: -1, 9: 0}
    bad = check_votes({"votes": [{"id": 4}]}, [4, 9])
    assert not bad.ok and bad.value == {} and '"vote"' in bad.errors[0]
    assert not check_votes({"votes": 3}, [4]).ok
    assert not check_votes([], [4]).ok


def test_vote_schema_enums():
    s = vote_schema([4, 9])
    props = s["properties"]["votes"]["properties"]
    assert list(props) == ["4", "9"] and props["4"]["enum"] == [1, 0, -1]
    assert s["properties"]["votes"]["required"] == ["4", "9"]


PEERS = ["agent_1", "agent_2"]


def test_check_ties_ok_and_bare_scores():
    got = check_ties({"ratings": {"agent_1": {"score": 4, "reason": "kind"}, "agent_2": 0}}, PEERS)
    assert got.ok and got.value == {"agent_1": 4, "agent_2": 0}


def test_check_ties_bad_score_keeps_good_ones():
    got = check_ties({"ratings": {"agent_1": {"score": 3, "reason": "ok"}, "agent_2": {"score": 6}}}, PEERS)
    assert got.value == {"agent_1": 3}
    assert got.errors == ["score for agent_2 must be an integer 0-5, got 6"]     # bad, but not also "missing"


def test_check_ties_unknown_and_missing_peer():
    got = check_ties({"ratings": {"agent_1": {"score": 2}, "agent_9": {"score": 1}}}, PEERS)
    assert got.value == {"agent_1": 2}
    assert got.errors == ["'agent_9' is not one of your peers ['agent_1', 'agent_2']", "no rating for ['agent_2']"]


def test_check_ties_list_form():
    got = check_ties({"ratings": [{"peer": "agent_2", "score": 5, "reason": "r"},
                                  {"peer": "agent_1", "score": 1, "reason": "r"}]}, PEERS)
    assert got.ok and got.value == {"agent_2": 5, "agent_1": 1}
    assert not check_ties({"ratings": [{"score": 5}]}, PEERS).ok


def test_check_tips():
    got = check_tips({"tips": [" DM agent_1 ", "", "POST on music", "   ", "COM on the top post"]})
    assert got.ok and got.value == ["DM agent_1", "POST on music", "COM on the top post"]
    assert check_tips({"tips": ["a", "b"]}).errors == ["give 3 to 5 non-empty tips, got 2"]
    assert check_tips({"tips": list("abcdef")}).errors == ["give 3 to 5 non-empty tips, got 6"]
    assert not check_tips({"tips": ["a", "b", 3]}).ok
    assert check_tips({"tips": ["t" * 300, "b", "c"]}).value[0] == "t" * 240


def test_check_survey():
    got = check_survey({"answers": {"q1": 1, "q2": 5, "q3": 3, "q9": 7}}, 3)    # q9 is beyond n: ignored
    assert got.ok and got.value == {0: 1, 1: 5, 2: 3}
    bad = check_survey({"answers": {"q1": 1, "q2": 0}}, 3)
    assert bad.value == {0: 1}
    assert bad.errors == ["q2 must be an integer 1-5, got 0", "q3 must be an integer 1-5, got None"]
    assert not check_survey({"answers": [1, 2, 3]}, 3).ok


def test_survey_schema_keys():
    s = survey_schema(20)
    answers = s["properties"]["answers"]
    assert answers["required"] == [f"q{i}" for i in range(1, 21)]
    assert answers["properties"]["q20"]["enum"] == [1, 2, 3, 4, 5]


@pytest.mark.parametrize("reply, expected", [
    ('{"a": 1}', {"a": 1}),
    ('```json\n{"a": 1}\n```', {"a": 1}),
    ('```\n{"votes": {"4": -1}}\n```', {"votes": {"4": -1}}),
    ('Sure! Here it is: {"a": [1, 2], "b": {"c": null}} Hope this helps.', {"a": [1, 2], "b": {"c": None}}),
])
def test_parse_json_tolerant(reply, expected):
    assert parse_json(reply) == expected


@pytest.mark.parametrize("reply", ["no json here", '{"a": }', "", None, "} {"])
def test_parse_json_garbage_raises(reply):
    with pytest.raises(ValueError):
        parse_json(reply)


# ============================================================================ llama.cpp grammar conversion
def _all_schemas():
    return {
        "plan_r2": plan_schema(CTX), "plan_r1": plan_schema(CTX1),
        "plan_bare": plan_schema(PlanContext("a", 2, 1, users=(), posts=(), dms=(), with_text=False)),
        "votes": vote_schema([4, 9]), "ties": tie_schema(PEERS), "tips": tips_schema(),
        "survey": survey_schema(20),
    }


@pytest.mark.parametrize("name", sorted(_all_schemas()))
def test_schemas_convert_to_gbnf(name):
    llama_grammar = need_module("llama_cpp.llama_grammar")
    grammar = llama_grammar.json_schema_to_gbnf(json.dumps(_all_schemas()[name]))
    assert "root ::=" in grammar


def test_plan_grammar_enforces_user_enum():
    llama_grammar = need_module("llama_cpp.llama_grammar")
    ctx = PlanContext("agent_0", 2, 1, users=("agent_1", "agent_2"), posts=(3,), dms=())
    grammar = llama_grammar.json_schema_to_gbnf(json.dumps(plan_schema(ctx)))
    assert '"\\"agent_1\\""' in grammar and '"\\"agent_2\\""' in grammar
    assert '"\\"agent_0\\""' not in grammar
    # the target_id enum as well
    assert 'target-id ::= "3"' in grammar


# ============================================================================ stable schemas
def test_validate_mode_schema_is_identical_across_rounds_and_ids_are_checked():
    a = PlanContext("agent_0", 1, 2, ("agent_1",), (), (), ids="validate")
    b = PlanContext("agent_0", 5, 2, ("agent_1", "agent_2"), (17, 23), ((30, "agent_2"),), ids="validate")
    assert plan_schema(a) == plan_schema(b)                      # nothing of the round in the schema
    assert "enum" not in json.dumps(plan_schema(b)["properties"]["actions"]["items"]["anyOf"][1]["properties"]
                                    ["target_id"])
    bad = check_plan({"actions": [{"type": "COM", "target_id": 99, "mention": None, "tone": "neutral"},
                                  {"type": "DM", "recipient": "agent_9", "target_id": None, "topic": "x",
                                   "tone": "neutral"}]}, b)
    assert bad.errors == ["action 1: target_id 99 is not one of the listed post ids [17, 23]",
                          "action 2: recipient 'agent_9' is not one of the listed users"]
    round1 = check_plan({"actions": [{"type": "NOT"}, {"type": "NOT"}]}, a)
    assert round1.errors[0] == "action 1: round 1 allows only POST, got NOT"
    with pytest.raises(ValueError, match="ids"):
        plan_schema(PlanContext("a", 1, 1, (), (), (), ids="loose"))


def test_vote_schema_with_stance_both_forms():
    from socialgym.llm.schemas import check_vote_reply
    stances = ("for", "against")
    keyed = vote_schema([4, 9], stances)
    assert keyed["properties"]["stance"] == {"type": "string", "enum": ["for", "against"]}
    assert set(keyed["properties"]["votes"]["properties"]) == {"4", "9"}
    listed = vote_schema([4, 9], stances, ids="validate")
    assert listed == vote_schema([1, 2, 3], stances, ids="validate")            # stable across rounds
    ok = check_vote_reply({"votes": [{"id": 4, "vote": 1}, {"id": 9, "vote": -1}], "stance": "for"}, [4, 9], stances)
    assert ok.ok and ok.value == ({4: 1, 9: -1}, "for")
    bad = check_vote_reply({"votes": {"4": 1}, "stance": "maybe"}, [4, 9], stances)
    assert bad.value == ({4: 1}, None) and bad.errors == ["stance must be one of ['for', 'against'], got 'maybe'"]
