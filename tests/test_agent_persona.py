"""Hand-computed unit tests of ``socialgym.agents.persona``: Mini-IPIP scoring, ``Persona``
validation, ``generate_personas``, ``load_personas`` and ``lambdas_matrix``. No network, no model.

Mini-IPIP table (socialgym/agents/persona.py, MINI_IPIP), index -> trait, R = reverse-keyed (6 - a):
    E: 0, 5R, 10, 15R      A: 1, 6R, 11, 16R      C: 2, 7R, 12, 17R
    N: 3, 8R, 13, 18R      I: 4, 9R, 14R, 19R     (intellect has three reverse-keyed items)
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from socialgym.agents.persona import (Persona, generate_personas, lambdas_matrix, load_personas,
                                      score_mini_ipip)

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


def test_a_main_interest_goes_first_and_the_description_follows():
    from socialgym.agents.persona import generate_personas, with_main_interest

    p = generate_personas(1, seed=0, topics=["water", "sports", "music", "food"])[0]
    assert p.interests == ("sports",) and p.description == "Encourages others and offers help, mostly around sports."
    q = with_main_interest(p, "food")
    assert q.interests == ("food", "sports")
    assert q.description == "Encourages others and offers help, mostly around food and sports."
    assert with_main_interest(q, "sports").interests == ("sports", "food")
    custom = dataclasses.replace(p, description="Writes about the harbour.")
    assert with_main_interest(custom, "food").description == "Writes about the harbour."   # not a generated one
