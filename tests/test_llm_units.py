"""Hand-computed unit tests for the LLM layer's pure parts: personas, coach priorities, schemas and
validators, bounded memory, prompt templates and PolicyMix. No network, no model.

Mini-IPIP table (socialgym/agents/persona.py, MINI_IPIP), index -> trait, R = reverse-keyed (6 - a):
    E: 0, 5R, 10, 15R      A: 1, 6R, 11, 16R      C: 2, 7R, 12, 17R
    N: 3, 8R, 13, 18R      I: 4, 9R, 14R, 19R     (intellect has three reverse-keyed items)
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from socialgym.agents.coach import coach_priorities
from socialgym.agents.mix import PolicyMix
from socialgym.agents.persona import (Persona, generate_personas, lambdas_matrix, load_personas,
                                      score_mini_ipip)
from socialgym.llm import prompts as prompts_mod
from socialgym.llm.prompts import PromptSet
from socialgym.llm.schemas import (PlanContext, check_plan, check_survey, check_ties, check_tips,
                                   check_votes, parse_json, plan_schema, survey_schema,
                                   tie_schema, tips_schema, vote_schema)

RN = ("SOC", "INF", "PRE", "COORD", "EMO")


# ============================================================================ Mini-IPIP scoring
def test_mini_ipip_all_fives():
    # E = (5 + (6-5) + 5 + (6-5)) / 4 = 12/4 = 3.0; A, C, N likewise 3.0
    # I = (5 + (6-5) + (6-5) + (6-5)) / 4 = 8/4 = 2.0
    got = score_mini_ipip({i: 5 for i in range(20)})
    assert got == pytest.approx({"E": 3.0, "A": 3.0, "C": 3.0, "N": 3.0, "I": 2.0})


def test_mini_ipip_all_ones():
    # E = (1 + 5 + 1 + 5) / 4 = 3.0; A, C, N likewise; I = (1 + 5 + 5 + 5) / 4 = 16/4 = 4.0
    got = score_mini_ipip({i: 1 for i in range(20)})
    assert got == pytest.approx({"E": 3.0, "A": 3.0, "C": 3.0, "N": 3.0, "I": 4.0})


def test_mini_ipip_keyed_extremes_give_five_everywhere():
    # forward items answered 5, reverse items answered 1 (-> 6-1 = 5): every trait mean = 5.0
    reverse = {5, 6, 7, 8, 9, 14, 15, 16, 17, 18, 19}
    got = score_mini_ipip({i: (1 if i in reverse else 5) for i in range(20)})
    assert got == pytest.approx(dict.fromkeys("EACNI", 5.0))


def test_mini_ipip_mixed_answers():
    answers = {0: 4, 5: 2, 10: 3, 15: 1,      # E = (4 + 4 + 3 + 5)/4 = 16/4 = 4.0
               1: 5, 6: 2, 11: 4, 16: 4,      # A = (5 + 4 + 4 + 2)/4 = 15/4 = 3.75
               2: 1, 7: 5, 12: 2, 17: 3,      # C = (1 + 1 + 2 + 3)/4 = 7/4 = 1.75
               3: 3, 8: 1, 13: 2, 18: 2,      # N = (3 + 5 + 2 + 4)/4 = 14/4 = 3.5
               4: 2, 9: 4, 14: 5, 19: 3}      # I = (2 + 2 + 1 + 3)/4 = 8/4 = 2.0
    assert score_mini_ipip(answers) == pytest.approx({"E": 4.0, "A": 3.75, "C": 1.75, "N": 3.5, "I": 2.0})


def test_mini_ipip_partial_answers_omit_unanswered_traits():
    # E from items 0 (5) and 5R (6-5 = 1): (5 + 1)/2 = 3.0; I from item 19R only: 6 - 2 = 4.0
    got = score_mini_ipip({0: 5, 5: 5, 19: 2})
    assert set(got) == {"E", "I"}
    assert got == pytest.approx({"E": 3.0, "I": 4.0})
    assert score_mini_ipip({}) == {}


# ============================================================================ Persona
@pytest.mark.parametrize("big_five, needle", [
    ({"X": 3.0}, "X"),
    ({"E": 6.0}, "E"),
    ({"E": 0.5}, "E"),
    ({"A": "high"}, "A"),
])
def test_persona_rejects_bad_big_five(big_five, needle):
    with pytest.raises(ValueError, match="big_five") as info:
        Persona(name="Ana", big_five=big_five)
    assert f"'{needle}'" in str(info.value)


@pytest.mark.parametrize("lambdas", [
    {"SOC": 0.5, "INF": 0.4},                 # sum 0.9
    {"SOC": 1.2, "INF": -0.2},                # sums to 1 but has a negative weight
    {"SOC": 0.5, "FOO": 0.5},                 # unknown component
    {"SOC": "1"},                             # not a number
    {},                                       # sum 0
])
def test_persona_rejects_bad_lambdas(lambdas):
    with pytest.raises(ValueError, match="lambdas"):
        Persona(name="Ana", lambdas=lambdas)


def test_persona_rejects_nan_lambda():
    with pytest.raises(ValueError, match="lambdas"):
        Persona(name="Ana", lambdas={"SOC": float("nan"), "INF": 1.0})


@pytest.mark.parametrize("name", ["", "   ", None])
def test_persona_rejects_empty_name(name):
    with pytest.raises(ValueError, match="name"):
        Persona(name=name)


def test_persona_accepts_valid_and_tolerates_rounding():
    # 0.1 + 0.2 + 0.3 + 0.2 + 0.2 = 1.0000000000000002 in floats, within 1e-6
    p = Persona(name="Ana", big_five={"E": 1, "I": 5}, lambdas=dict(zip(RN, (0.1, 0.2, 0.3, 0.2, 0.2))),
                interests=["a", "b"])
    assert p.interests == ("a", "b")
    assert p.to_dict()["interests"] == ["a", "b"]


def test_personality_words_and_boundaries():
    # E 4.0 >= 3.5 -> outgoing; A 2.0 <= 2.5 -> blunt; C 3.0 omitted;
    # N 3.5 (boundary, high) -> anxious; I 2.5 (boundary, low) -> down-to-earth
    p = Persona(name="Ana", big_five={"E": 4.0, "A": 2.0, "C": 3.0, "N": 3.5, "I": 2.5})
    assert p.personality() == "outgoing, blunt, anxious, down-to-earth"


def test_personality_balanced():
    assert Persona(name="Ana", big_five={"E": 3.49, "A": 2.51, "C": 3.0}).personality() == "balanced"
    assert Persona(name="Ana").personality() == "balanced"
    assert Persona(name="Ana", big_five={"C": 1.0, "N": 5.0}).personality() == "spontaneous, anxious"


# ============================================================================ generate_personas
def test_generate_personas_reproducible_and_seed_dependent():
    a = [p.to_dict() for p in generate_personas(12, seed=3)]
    b = [p.to_dict() for p in generate_personas(12, seed=3)]
    c = [p.to_dict() for p in generate_personas(12, seed=4)]
    assert a == b
    assert a != c


def test_generate_personas_unique_names_and_simplex():
    ps = generate_personas(60, seed=0)
    assert len(ps) == 60
    assert len({p.name for p in ps}) == 60
    for p in ps:
        assert tuple(p.lambdas) == RN
        assert all(v >= 0 for v in p.lambdas.values())
        assert sum(p.lambdas.values()) == pytest.approx(1.0)
        assert all(1.5 <= v <= 4.5 for v in p.big_five.values()) and set(p.big_five) == set("EACNI")


def test_generate_personas_roles_cycle_with_their_profiles():
    ps = generate_personas(14, seed=1)
    order = ["community builder", "news curator", "influencer", "supporter", "organiser", "debater",
             "casual user"]
    assert [p.role for p in ps] == order * 2       # n >= 7 roles: role i % 7
    assert dict(ps[0].lambdas) == pytest.approx(dict(zip(RN, (0.35, 0.1, 0.1, 0.3, 0.15))))
    assert dict(ps[2].lambdas) == pytest.approx(dict(zip(RN, (0.1, 0.1, 0.55, 0.15, 0.1))))


def test_generate_personas_uniform_lambdas_and_topics():
    ps = generate_personas(5, seed=2, lambdas="uniform", topics=("x", "y"), issue="the vote")
    for p in ps:
        assert dict(p.lambdas) == pytest.approx(dict.fromkeys(RN, 0.2))
        assert 1 <= len(p.interests) <= 2 and set(p.interests) <= {"x", "y"}
        assert len(set(p.interests)) == len(p.interests)
        assert p.stance.endswith(" the vote")


@pytest.mark.parametrize("kwargs", [
    dict(n=0), dict(n=-1), dict(n=2.5), dict(n=3, lambdas="bogus"), dict(n=3, roles=["wizard"]),
    dict(n=3, topics=()),
])
def test_generate_personas_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        generate_personas(**kwargs)


def test_generate_personas_empty_roles_is_value_error():
    with pytest.raises(ValueError):
        generate_personas(3, roles=[])


# ============================================================================ load_personas
def test_load_personas_json(tmp_path):
    path = tmp_path / "p.json"
    path.write_text(json.dumps([
        {"name": "Ana", "role": "organiser", "stance": "supports X", "big_five": {"E": 4.5, "N": 2},
         "lambdas": {"SOC": 0.2, "INF": 0.2, "PRE": 0.2, "COORD": 0.3, "EMO": 0.1}, "interests": ["a", "b"]},
        {"name": "Ben", "lambdas": None, "description": None},
    ]))
    a, b = load_personas(path)
    assert (a.name, a.role, a.stance, a.interests) == ("Ana", "organiser", "supports X", ("a", "b"))
    assert dict(a.big_five) == {"E": 4.5, "N": 2}
    assert a.lambdas["COORD"] == 0.3
    assert (b.name, b.lambdas, b.description, b.role) == ("Ben", None, "", "social media user")


def test_load_personas_json_unknown_field_names_file_and_item(tmp_path):
    path = tmp_path / "p.json"
    path.write_text(json.dumps([{"name": "Ana"}, {"name": "Ben", "favourite": "tea"}]))
    with pytest.raises(ValueError) as info:
        load_personas(path)
    msg = str(info.value)
    assert str(path) in msg and "item 1" in msg and "favourite" in msg


def test_load_personas_json_bad_value_names_item(tmp_path):
    path = tmp_path / "p.json"
    path.write_text(json.dumps([{"name": "Ana", "big_five": {"E": 9}}]))
    with pytest.raises(ValueError) as info:
        load_personas(path)
    assert f"{path} item 0" in str(info.value) and "big_five" in str(info.value)


@pytest.mark.parametrize("content, needle", [('{"name": "Ana"}', "JSON list"), ('["Ana"]', "item 0")])
def test_load_personas_json_shape_errors(tmp_path, content, needle):
    path = tmp_path / "p.json"
    path.write_text(content)
    with pytest.raises(ValueError, match=needle):
        load_personas(path)


CSV_HEADER = "name,role,interests,E,A,C,N,I,lambda_SOC,lambda_INF,lambda_PRE,lambda_COORD,lambda_EMO\n"


def test_load_personas_csv(tmp_path):
    path = tmp_path / "p.csv"
    path.write_text(CSV_HEADER
                    + "Ana,debater, climate ; music;;,4,2.5,3,1,5,0.1,0.2,0.3,0.2,0.2\n"
                    + "Ben,,,,,,,,,,,,\n")
    a, b = load_personas(path)
    assert (a.name, a.role, a.interests) == ("Ana", "debater", ("climate", "music"))
    assert dict(a.big_five) == {"E": 4.0, "A": 2.5, "C": 3.0, "N": 1.0, "I": 5.0}
    assert dict(a.lambdas) == {"SOC": 0.1, "INF": 0.2, "PRE": 0.3, "COORD": 0.2, "EMO": 0.2}
    # empty cells fall back to the defaults
    assert (b.name, b.role, b.interests, dict(b.big_five), b.lambdas) == ("Ben", "social media user", (), {}, None)


@pytest.mark.parametrize("row, needle", [
    ("Ben,,,high,,,,,,,,,\n", "high"),                     # not a number
    ("Ben,,,7,,,,,,,,,\n", "big_five"),                    # out of 1..5
    ("Ben,,,,,,,,0.5,0.4,0,0,0\n", "lambdas"),             # sums to 0.9
    (",debater,,,,,,,,,,,\n", "name"),                     # no name
])
def test_load_personas_csv_errors_name_file_and_row(tmp_path, row, needle):
    path = tmp_path / "p.csv"
    path.write_text(CSV_HEADER + "Ana,,,,,,,,,,,,\n" + row)   # header = line 1, Ana = row 2, bad = row 3
    with pytest.raises(ValueError) as info:
        load_personas(path)
    assert f"{path} row 3" in str(info.value) and needle in str(info.value)


def test_load_personas_csv_unknown_column_is_error(tmp_path):
    path = tmp_path / "p.csv"
    path.write_text("name,stanse\nAna,supports X\n")
    with pytest.raises(ValueError, match="stanse"):
        load_personas(path)


def test_load_personas_bad_suffix_and_missing_file(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("- name: Ana\n")
    with pytest.raises(ValueError, match=r"\.json or \.csv"):
        load_personas(path)
    with pytest.raises(FileNotFoundError):
        load_personas(tmp_path / "missing.json")


# ============================================================================ lambdas_matrix
def test_lambdas_matrix():
    ps = [Persona(name="A", lambdas=dict(zip(RN, (0.35, 0.1, 0.1, 0.3, 0.15)))), Persona(name="B")]
    m = lambdas_matrix(ps)
    assert m.shape == (2, 5)
    np.testing.assert_allclose(m, [[0.35, 0.1, 0.1, 0.3, 0.15], [0.2, 0.2, 0.2, 0.2, 0.2]])


def test_lambdas_matrix_partial_lambdas():
    # either Persona rejects a partial mapping, or the missing components count as weight 0
    try:
        p = Persona(name="A", lambdas={"SOC": 1.0})
    except ValueError:
        return
    np.testing.assert_allclose(lambdas_matrix([p]), [[1.0, 0.0, 0.0, 0.0, 0.0]])


# ============================================================================ coach priorities
def test_coach_priorities_gaps_sorted_with_negative_and_zero_lambda_left_out():
    lam = {"SOC": 0.4, "INF": 0.0, "PRE": 0.3, "COORD": 0.2, "EMO": 0.1}
    last = {"SOC": 0.1, "INF": 0.9, "PRE": 0.5, "COORD": 0.0, "EMO": 0.1, "total": 3.0}
    # SOC .4-.1 = .3; INF lambda 0 -> left out; PRE .3-.5 = -.2; COORD .2-0 = .2; EMO .1-.1 = 0
    got = coach_priorities(last, lam)
    assert [c for c, _ in got] == ["SOC", "COORD", "EMO", "PRE"]
    assert [g for _, g in got] == pytest.approx([0.3, 0.2, 0.0, -0.2])


def test_coach_priorities_all_tied_keep_canonical_order():
    # every gap 0.2 - 0 = 0.2 (missing last rewards count 0)
    got = coach_priorities({}, dict.fromkeys(["EMO", "COORD", "PRE", "INF", "SOC"], 0.2))
    assert got == [("SOC", 0.2), ("INF", 0.2), ("PRE", 0.2), ("COORD", 0.2), ("EMO", 0.2)]


def test_coach_priorities_partial_ties():
    # INF .5-.25 = .25; COORD .25-0 = .25; EMO .25-0 = .25 (exact binary fractions) -> tie order INF, COORD, EMO
    got = coach_priorities({"INF": 0.25}, {"EMO": 0.25, "COORD": 0.25, "INF": 0.5})
    assert got == [("INF", 0.25), ("COORD", 0.25), ("EMO", 0.25)]
    # negative ties: PRE .5-1 = -.5, SOC .5-1 = -.5 -> SOC before PRE; EMO .5-.25 wins with +.25
    got = coach_priorities({"SOC": 1.0, "PRE": 1.0, "EMO": 0.25}, {"PRE": 0.5, "SOC": 0.5, "EMO": 0.5})
    assert got == [("EMO", 0.25), ("SOC", -0.5), ("PRE", -0.5)]


def test_coach_priorities_no_goals():
    assert coach_priorities({"SOC": 1.0}, {}) == []
    assert coach_priorities({}, dict.fromkeys(RN, 0.0)) == []


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
    llama_grammar = pytest.importorskip("llama_cpp.llama_grammar")
    grammar = llama_grammar.json_schema_to_gbnf(json.dumps(_all_schemas()[name]))
    assert "root ::=" in grammar


def test_plan_grammar_enforces_user_enum():
    llama_grammar = pytest.importorskip("llama_cpp.llama_grammar")
    ctx = PlanContext("agent_0", 2, 1, users=("agent_1", "agent_2"), posts=(3,), dms=())
    grammar = llama_grammar.json_schema_to_gbnf(json.dumps(plan_schema(ctx)))
    assert '"\\"agent_1\\""' in grammar and '"\\"agent_2\\""' in grammar
    assert '"\\"agent_0\\""' not in grammar
    # the target_id enum as well
    assert 'target-id ::= "3"' in grammar


# ============================================================================ PromptSet
def test_prompt_override_unknown_field():
    with pytest.raises(ValueError) as info:
        PromptSet().replace(vote_user="You are {nmae}.")
    assert "'vote_user'" in str(info.value) and "nmae" in str(info.value)


def test_prompt_replace_unknown_template():
    with pytest.raises(ValueError, match="vote_sytem"):
        PromptSet().replace(vote_sytem="hi")
    with pytest.raises(ValueError, match="bogus"):
        PromptSet.from_mapping({"bogus": "x"})


def test_prompt_invalid_format_and_missing_reward_doc():
    with pytest.raises(ValueError, match="repair"):
        PromptSet().replace(repair="broken {")
    with pytest.raises(ValueError, match="EMO"):
        PromptSet().replace(reward_docs={k: "x" for k in ("SOC", "INF", "PRE", "COORD")})


def test_prompt_render_fills_fields():
    p = PromptSet()
    assert p.render("repair", error="bad id") == "Your reply was not valid: bad id\nReply again with JSON only, fixing this."
    assert p.render("tie_user", peers="a, b", transcript="T") == \
        "Your peers this round: a, b\nTranscript of the last round:\nT\nRate each peer."
    assert p.render("coach_format_json") == 'Reply with JSON only: {"tips": ["...", ...]}.'   # {{ }} unescaped
    q = p.replace(text_post="Do: {topic}, {tone}")
    assert q.render("text_post", topic="climate", tone="critical") == "Do: climate, critical"
    assert p.text_post == prompts_mod.TEXT_POST                     # the original is unchanged


def test_prompt_from_dir(tmp_path):
    (tmp_path / "tie_user.txt").write_text("Peers: {peers}\n\n")
    (tmp_path / "notes.md").write_text("ignored: not a .txt file {whatever}")
    p = PromptSet.from_dir(tmp_path)
    assert p.tie_user == "Peers: {peers}"                              # trailing newlines stripped
    assert p.render("tie_user", peers="x") == "Peers: x"
    assert p.vote_user == prompts_mod.VOTE_USER


def test_prompt_from_dir_rejects_unknown_file_and_field(tmp_path):
    (tmp_path / "bogus.txt").write_text("hi")
    with pytest.raises(ValueError, match="bogus.txt"):
        PromptSet.from_dir(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    (other / "tie_system.txt").write_text("You are {name} on {platform}.")
    with pytest.raises(ValueError) as info:
        PromptSet.from_dir(other)
    assert "'tie_system'" in str(info.value) and "platform" in str(info.value)
    with pytest.raises(FileNotFoundError):
        PromptSet.from_dir(tmp_path / "nope")


# ============================================================================ PolicyMix
class _Recorder:
    def __init__(self, tag):
        self.tag, self.calls = tag, []

    def act(self, observations):
        self.calls.append(dict(observations))
        return {a: f"{self.tag}:{o}" for a, o in observations.items()}


def test_policy_mix_routes_and_merges():
    p, q, idle = _Recorder("p"), _Recorder("q"), _Recorder("idle")
    mix = PolicyMix({p: ["agent_0", "agent_2"], q: ["agent_1"], idle: ["agent_3"]})
    out = mix.act({"agent_0": 0, "agent_1": 1, "agent_2": 2})
    assert out == {"agent_0": "p:0", "agent_1": "q:1", "agent_2": "p:2"}
    assert p.calls == [{"agent_0": 0, "agent_2": 2}] and q.calls == [{"agent_1": 1}]
    assert idle.calls == []                                          # nothing to do: not called


def test_policy_mix_agent_assigned_twice():
    with pytest.raises(ValueError, match="agent_1"):
        PolicyMix({_Recorder("p"): ["agent_0", "agent_1"], _Recorder("q"): ["agent_1"]})


def test_policy_mix_unowned_agent_and_bad_policy():
    mix = PolicyMix({_Recorder("p"): ["agent_0"]})
    with pytest.raises(ValueError, match="agent_7"):
        mix.act({"agent_0": 0, "agent_7": 7})
    with pytest.raises(TypeError):
        PolicyMix({object(): ["agent_0"]})


# ============================================================================ plain texts
@pytest.mark.parametrize("raw, expected", [
    ('Sure! Here is the post: "Solar is cheap now. Agree?"', "Solar is cheap now. Agree?"),
    ("Post: Wind farms work. They really do. And more", "Wind farms work. They really do."),
    ("@Ana @ClimateFan\nThe climate matters to all of us.", "The climate matters to all of us."),
    ("Here's a short reply to Ben:\n\nThanks for sharing!\n\nSecond paragraph here.", "Thanks for sharing!"),
    ("I love #gardening and #food.", "I love gardening and food."),
    ("One. Two. Three.", "One. Two."),                                 # at most two sentences
    ("   ", ""),
    ("@only @handles", ""),
    ('She said "act now." We agree.', 'She said "act now." We agree.'),      # a closer between sentences
    ("'Tis the season, isn't it?", "'Tis the season, isn't it?"),              # a leading apostrophe
    ('"Climate change is real," she said.', '"Climate change is real," she said.'),   # a quoted phrase
    ("Hey @someone, how are you?", "Hey, how are you?"),
])
def test_clean_text_cases(raw, expected):
    from socialgym.llm.text import clean_text
    assert clean_text(raw, 200) == expected


def test_clean_text_cuts_at_sentence_then_word_boundaries():
    from socialgym.llm.text import clean_text
    assert clean_text("Short one. " + "word " * 60, 40) == "Short one."          # the 2nd sentence is too long
    long = "alpha beta gamma delta epsilon zeta eta theta"
    out = clean_text(long, 20)                                                   # no sentence fits: a word cut
    assert out == "alpha beta gamma…" and len(out) <= 20
    with pytest.raises(ValueError, match="max_chars"):
        clean_text("x", 0)


def test_parse_bullets():
    from socialgym.llm.text import parse_bullets
    raw = "Here are the tips:\n- DM agent_1 about energy now\n2) Comment on the top post\n* ok\n• Post a question on food"
    assert parse_bullets(raw) == ["DM agent_1 about energy now", "Comment on the top post", "Post a question on food"]
    assert parse_bullets(None) == []


# ============================================================================ English measure
def test_english_word_share_by_hand():
    from socialgym.metrics.language import english_share, english_word_share, words_of
    words = frozenset({"the", "sun", "is", "warm", "it's", "maya"})
    assert words_of("@agent_2 The sun is warm! 42") == ["The", "sun", "is", "warm"]
    assert english_word_share("@agent_2 The sun is warm", words) == 1.0
    assert english_word_share("The sun es caliente", words) == 0.5               # 2 of 4
    assert english_word_share("Maya's sun", words) == 1.0                         # possessive of a listed word
    assert np.isnan(english_word_share("@agent_3 1.0.2", words))                  # no words at all
    # 4 texts: 1.0, 0.5, no words, 0.8 (4 of 5) -> English-like: 1st and 4th
    result = english_share(["the sun is warm", "the sun es caliente", "@agent_1 12",
                            "it's the sun is hot"], words)
    assert result == {"texts": 4, "english_like": 2, "share": 0.5, "median_word_share": pytest.approx(0.65)}


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
