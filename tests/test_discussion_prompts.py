"""Prompt texts (paper App. A.4) and SocioDemographic Backgrounds of the discussion env."""

from __future__ import annotations

import dataclasses
import json

import pytest

from socialgym.discussion import prompts as P
from socialgym.discussion.sdb import (SDB, anonymised, generate_sdbs, load_sdbs, save_sdbs,
                                      sdb_block)

MODERATED = [s for s in P.STRATEGIES if s != "no_moderator"]


# ---------------------------------------------------------------- strategies

def test_strategies_and_labels():
    assert P.STRATEGIES == ("no_moderator", "no_instructions", "rules_only",
                            "moderation_guidelines", "facilitation_guidelines", "moderation_game")
    assert P.STRATEGY_LABELS == {
        "no_moderator": "No Moderator", "no_instructions": "No Instructions",
        "rules_only": "Rules Only", "moderation_guidelines": "Mod. Guid.",
        "facilitation_guidelines": "Fac. Guid.", "moderation_game": "RL Game"}
    assert set(P.STRATEGY_PROMPT_NAMES) == set(MODERATED)


def test_strategy_texts_exist_and_are_distinct():
    texts = [P.moderator_instructions(s) for s in MODERATED]
    assert all(t.strip() for t in texts)
    assert len(set(texts)) == len(texts)
    for t in texts:
        assert "@username" in t
        assert "-\n" not in t and "  " not in t  # no PDF hyphenation or double spaces left


@pytest.mark.parametrize("strategy, phrases", [
    ("no_instructions", ["Oversee the conversation. Be neutral.",
                         "avoid unnecessary interventions"]),
    ("rules_only", ["Be fair and impartial.", "Not provide misinformation.",
                    "Accurately represent yourself as not having the definite answers",
                    "outright banning them"]),
    ("moderation_guidelines", ["Ask, Don't Challenge", "Stick to one or two questions",
                               "Correct Inaccuracies Carefully",
                               "Keep responses concise and use simple, clear language."]),
    ("facilitation_guidelines", ["Allow Silence", "Do Not Make Decisions", "Be a Guide",
                                 "Provide Explanations: Explain the rationale"]),
    ("moderation_game", ["View the discussion as a scorable game",
                         "Do not tell your score out loud"]),
])
def test_strategy_contains_paper_phrases(strategy, phrases):
    text = P.moderator_instructions(strategy)
    for phrase in phrases:
        assert phrase in text
    # the untangled two-column text: each strategy keeps only its own bullets
    if strategy == "rules_only":
        assert "Ask, Don't Challenge" not in text and "Scores:" not in text
    if strategy == "moderation_guidelines":
        assert "Be fair and impartial" not in text and "Allow Silence" not in text


def test_game_default_scores_match_paper():
    text = P.moderator_instructions("moderation_game")
    assert text.startswith(P.moderator_instructions("no_instructions"))
    for line in ["Keep discussion civil without appealing to your authority as a moderator: +10",
                 "Intervene (respond in any way): -10",
                 "Threaten a ban: -10",
                 "Successfully improve participant behavior through intervention: +15",
                 "Discussion currently shows signs of toxicity and polarization: -8",
                 "Ban a participant: -5"]:
        assert f"- {line}" in text
    assert "toxicidity" not in text and "tox-" not in text
    assert P.MODERATION_GAME_SCORES == {"civil": 10.0, "intervene": -10.0, "warn": -10.0,
                                        "recovery": 15.0, "toxic": -8.0, "ban": -5.0}


def test_game_renders_custom_scores():
    scores = {**P.MODERATION_GAME_SCORES, "toxic": -3, "recovery": 2.5, "ban": 0}
    text = P.moderator_instructions("moderation_game", scores)
    assert "toxicity and polarization: -3" in text
    assert "through intervention: +2.5" in text
    assert "Ban a participant: 0" in text
    assert "-8" not in text
    assert P.format_points(-0.0) == "0" and P.format_points(10) == "+10"


def test_game_rejects_missing_unknown_and_bad_scores():
    scores = dict(P.MODERATION_GAME_SCORES)
    del scores["warn"]
    with pytest.raises(ValueError, match="warn"):
        P.moderator_instructions("moderation_game", scores)
    with pytest.raises(ValueError, match="bonus"):
        P.moderator_instructions("moderation_game", {**P.MODERATION_GAME_SCORES, "bonus": 1})
    with pytest.raises(ValueError, match="toxic"):
        P.moderator_instructions("moderation_game", {**P.MODERATION_GAME_SCORES,
                                                     "toxic": float("nan")})


def test_no_moderator_and_unknown_strategy():
    with pytest.raises(ValueError, match="no moderator takes part"):
        P.moderator_instructions("no_moderator")
    with pytest.raises(ValueError, match="facilitation_guidelines"):
        P.moderator_instructions("socratic")


# ---------------------------------------------------------------- actors and roles

def test_actor_prompts():
    assert "You are a moderator." in P.MODERATOR_ACTOR
    assert "disciplinary action" in P.MODERATOR_ACTOR
    assert "possibly inflammatory and aggressive speech" in P.USER_ACTOR
    assert "especially when done so repeatedly" in P.USER_ACTOR
    assert "Remain silent if you don't want to comment." in P.USER_ACTOR
    assert P.BASIC_USER_ACTOR.startswith("You are a human in an online forum.")
    assert "inflammatory" not in P.BASIC_USER_ACTOR
    assert "5: Extremely Toxic" in P.ANNOTATOR_ACTOR
    assert "DarkShadow333" in P.ANNOTATOR_ACTOR and "Toxicity=4" in P.ANNOTATOR_ACTOR
    assert P.ANNOTATOR_ACTOR.endswith("Annotate the following conversation without engaging with it.")


def test_role_instructions():
    assert set(P.ROLE_INSTRUCTIONS) == {"normal", "community", "troll"}
    assert P.ROLE_INSTRUCTIONS["normal"] == ""
    assert "uphold your community's values" in P.ROLE_INSTRUCTIONS["community"]
    assert "derail the conversation" in P.ROLE_INSTRUCTIONS["troll"]
    assert "provoke toxicity" in P.ROLE_INSTRUCTIONS["troll"]


# ---------------------------------------------------------------- SDBs

def _sdb(**kw) -> SDB:
    base = dict(username="TechGuru88", age=34, sex="female", education="Bachelor's degree",
                sexual_orientation="bisexual", demographic_group="South Asian",
                employment="Nurse", special_instructions="", personality=("curious", "blunt"))
    return SDB(**{**base, **kw})


@pytest.mark.parametrize("kw, field", [
    ({"username": ""}, "username"),
    ({"username": "has space"}, "username"),
    ({"username": "x" * 33}, "username"),
    ({"username": "@TechGuru"}, "username"),
    ({"age": 12}, "age"),
    ({"age": 101}, "age"),
    ({"age": "forty"}, "age"),
    ({"age": True}, "age"),
    ({"age": 30.5}, "age"),
    ({"sex": ""}, "sex"),
    ({"employment": None}, "employment"),
    ({"personality": "curious"}, "personality"),
    ({"personality": ("curious", "")}, "personality"),
])
def test_sdb_validation(kw, field):
    with pytest.raises(ValueError, match=field):
        _sdb(**kw)


def test_sdb_accepts_bounds_and_normalises():
    assert _sdb(age=13).age == 13 and _sdb(age=100).age == 100
    assert _sdb(username="a_b-C9").username == "a_b-C9"
    s = _sdb(personality=["calm", "kind"])
    assert s.personality == ("calm", "kind")
    hash(s)  # frozen and hashable
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.age = 40  # type: ignore[misc]


def test_generate_sdbs_deterministic_diverse_unique():
    a, b = generate_sdbs(30, seed=7), generate_sdbs(30, seed=7)
    assert a == b and len(a) == 30
    assert generate_sdbs(30, seed=8) != a
    assert generate_sdbs(10, seed=7) == a[:10]
    names = [s.username for s in a]
    assert len(set(names)) == 30
    for s in a:
        assert 18 <= s.age <= 80
        assert 2 <= len(s.personality) <= 3
        assert s.special_instructions == ""
        if s.employment == "Retired":
            assert s.age >= 58
    for field in ("sex", "education", "sexual_orientation", "demographic_group", "employment"):
        assert len({getattr(s, field) for s in a}) >= 3, field
    assert len({s.personality for s in a}) >= 15
    assert len({s.age for s in a}) >= 15
    assert generate_sdbs(0) == []


def test_generate_sdbs_with_usernames():
    names = [f"user{i}" for i in range(5)]
    got = generate_sdbs(5, seed=3, usernames=names)
    assert [s.username for s in got] == names
    # the backgrounds themselves do not depend on the names
    plain = generate_sdbs(5, seed=3)
    assert [dataclasses.replace(s, username="x") for s in got] == \
        [dataclasses.replace(s, username="x") for s in plain]
    with pytest.raises(ValueError, match="n=4"):
        generate_sdbs(4, usernames=names)
    with pytest.raises(ValueError, match="unique"):
        generate_sdbs(2, usernames=["a", "a"])
    with pytest.raises(ValueError, match="username"):
        generate_sdbs(1, usernames=["bad name"])
    with pytest.raises(ValueError, match="n must be"):
        generate_sdbs(-1)


def test_anonymised():
    s = _sdb(special_instructions=P.ROLE_INSTRUCTIONS["troll"])
    a = anonymised(s)
    assert a.username == s.username
    assert a.age == "unknown" and a.sex == "unknown" and a.education == "unknown"
    assert a.sexual_orientation == a.demographic_group == a.employment == "unknown"
    assert a.special_instructions == "unknown" and a.personality == ("unknown",)
    assert anonymised(s, keep_special_instructions=True).special_instructions == \
        s.special_instructions
    assert "Age: unknown" in sdb_block(a)
    with pytest.raises(ValueError, match="age"):
        _sdb(age="Unknown")


def test_sdb_block():
    s = _sdb(special_instructions=P.ROLE_INSTRUCTIONS["community"])
    block = sdb_block(s)
    lines = block.splitlines()
    assert lines[0] == "Username: TechGuru88"
    assert "Age: 34" in lines
    assert "Education level: Bachelor's degree" in lines
    assert "Current employment: Nurse" in lines
    assert f"Special instructions: {P.ROLE_INSTRUCTIONS['community']}" in lines
    assert lines[-1] == "Personality characteristics: curious, blunt"
    annot = sdb_block(s, with_username=False)
    assert "TechGuru88" not in annot and "Username" not in annot
    assert annot.splitlines() == lines[1:]
    assert "Special instructions: none" in sdb_block(_sdb())


def test_load_sdbs_round_trip(tmp_path):
    sdbs = generate_sdbs(6, seed=1)
    path = tmp_path / "sdbs.json"
    save_sdbs(sdbs, path)
    assert load_sdbs(path) == sdbs
    raw = [dataclasses.asdict(s) for s in sdbs]  # tuples become lists in JSON
    path.write_text(json.dumps(raw))
    assert load_sdbs(str(path)) == sdbs
    anon = tmp_path / "anon.json"
    save_sdbs([anonymised(s) for s in sdbs], anon)
    assert load_sdbs(anon)[0].age == "unknown"


def test_load_sdbs_errors(tmp_path):
    row = dataclasses.asdict(_sdb())
    path = tmp_path / "bad.json"
    path.write_text(json.dumps([{**row, "political_party": "x", "hobby": "y"}]))
    with pytest.raises(ValueError, match="hobby.*political_party"):
        load_sdbs(path)
    del row["employment"]
    path.write_text(json.dumps([row]))
    with pytest.raises(ValueError, match="employment"):
        load_sdbs(path)
    path.write_text(json.dumps({"username": "x"}))
    with pytest.raises(ValueError, match="list"):
        load_sdbs(path)
    good = dataclasses.asdict(_sdb())
    path.write_text(json.dumps([good, good]))
    with pytest.raises(ValueError, match="unique"):
        load_sdbs(path)
    path.write_text(json.dumps([{**good, "age": 7}]))
    with pytest.raises(ValueError, match="age"):
        load_sdbs(path)
