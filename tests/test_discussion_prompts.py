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
    # each phrase restates one instruction of the paper's prompt (App. A.4.4)
    ("no_instructions", ["stay neutral",                                  # be neutral
                         "act only when it is needed",                    # only when necessary
                         "do not step in when there is no need to",       # no unnecessary interventions
                         "Avoid saying the same thing twice",             # do not repeat yourself
                         "return an empty string"]),
    ("rules_only", ["make sure the rules listed below are followed",
                    "Be even-handed and fair.", "Never spread misinformation.",
                    "someone without definite answers to everything",
                    "comes from an AI", "Honor people's personal boundaries.",
                    "threaten a ban, or ban them outright"]),
    ("moderation_guidelines", ["Ask rather than challenge",
                               "ask at most one or two questions per response",
                               "unless the user is experienced",
                               "Careful corrections: correct misinformation",
                               "Off-topic comments",
                               "Keep your responses short, in simple and clear language."]),
    ("facilitation_guidelines", ["Silence is allowed", "No decisions", "Guiding:",
                                 "Explanations: explain the reasons behind your actions",
                                 "personal attacks or microaggressions",
                                 "Mutual respect: encourage everyone to take part equally",
                                 "return an empty string"]),
    ("moderation_game", ["Treat the discussion as a scorable game",
                         "Keep your score to yourself and never state it",
                         "highest score"]),
])
def test_strategy_contains_paper_instructions(strategy, phrases):
    text = P.moderator_instructions(strategy)
    for phrase in phrases:
        assert phrase in text
    # the untangled two-column text: each strategy keeps only its own bullets
    if strategy == "rules_only":
        assert "Ask rather than challenge" not in text and "Scores:" not in text
    if strategy == "moderation_guidelines":
        assert "Be even-handed and fair" not in text and "Silence is allowed" not in text
    if strategy == "facilitation_guidelines":
        assert len([ln for ln in text.splitlines() if ln.startswith("- ")]) == 13
    if strategy == "rules_only":
        assert len([ln for ln in text.splitlines() if ln.startswith("- ")]) == 19
    if strategy == "moderation_guidelines":
        assert len([ln for ln in text.splitlines() if ln.startswith("- ")]) == 13


def test_game_default_scores_match_paper():
    text = P.moderator_instructions("moderation_game")
    assert text.startswith(P.moderator_instructions("no_instructions"))
    for line in ["You keep the discussion civil without invoking your authority as moderator: +10",
                 "You intervene (any response at all counts): -10",
                 "You threaten to ban someone: -10",
                 "Your intervention succeeds in improving a participant's behavior: +15",
                 "Signs of toxicity and polarization show in the discussion right now: -8",
                 "You ban a participant: -5"]:
        assert f"- {line}" in text
    assert text.splitlines()[-7].endswith("Scores:")
    assert "toxicidity" not in text and "tox-" not in text
    assert P.MODERATION_GAME_SCORES == {"civil": 10.0, "intervene": -10.0, "warn": -10.0,
                                        "recovery": 15.0, "toxic": -8.0, "ban": -5.0}


def test_game_renders_custom_scores():
    scores = {**P.MODERATION_GAME_SCORES, "toxic": -3, "recovery": 2.5, "ban": 0}
    text = P.moderator_instructions("moderation_game", scores)
    assert "polarization show in the discussion right now: -3" in text
    assert "improving a participant's behavior: +2.5" in text
    assert "You ban a participant: 0" in text
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
    address = "Address a user by writing @ followed by their username (@username)."
    silent = "return an empty string"
    assert "in the role of its moderator" in P.MODERATOR_ACTOR
    assert "Disciplinary measures, such as banning a user" in P.MODERATOR_ACTOR
    assert "only when you judge them to be absolutely necessary" in P.MODERATOR_ACTOR
    assert address in P.MODERATOR_ACTOR and silent in P.MODERATOR_ACTOR
    assert "in the style of Reddit" in P.USER_ACTOR
    assert "back your views with arguments" in P.USER_ACTOR
    assert "inflammatory and aggressive" in P.USER_ACTOR
    assert "Other users may provoke you" in P.USER_ACTOR
    assert "all the more so when it keeps happening" in P.USER_ACTOR
    assert "Avoid saying the same thing twice." in P.USER_ACTOR
    assert "stay silent" in P.USER_ACTOR and silent in P.USER_ACTOR
    assert address in P.USER_ACTOR
    assert P.BASIC_USER_ACTOR.startswith("Play the part of a person on an online forum.")
    assert address in P.BASIC_USER_ACTOR and "in English" in P.BASIC_USER_ACTOR
    assert "inflammatory" not in P.BASIC_USER_ACTOR
    labels = ["1: Not Toxic", "2: Barely Toxic", "3: Almost Toxic", "4: Toxic", "5: Extremely Toxic"]
    assert all(f"\n{label}\n" in P.ANNOTATOR_ACTOR for label in labels)
    assert "from 1 to 5: 1 marks low-quality arguments and 5 marks" in P.ANNOTATOR_ACTOR
    assert "Example:\nUser GravelRoad19 posted: @MapleQuinn5," in P.ANNOTATOR_ACTOR
    assert "Output: Toxicity=4\nArgumentQuality=1\n" in P.ANNOTATOR_ACTOR
    assert "DarkShadow333" not in P.ANNOTATOR_ACTOR   # our own example, not the paper's
    assert P.ANNOTATOR_ACTOR.endswith("do not join in or reply to it.")


def test_role_instructions():
    assert set(P.ROLE_INSTRUCTIONS) == {"normal", "community", "troll"}
    assert P.ROLE_INSTRUCTIONS["normal"] == ""
    assert "belonged to this community for a long time" in P.ROLE_INSTRUCTIONS["community"]
    assert "upholding its values" in P.ROLE_INSTRUCTIONS["community"]
    assert "expect everyone else to conform to them" in P.ROLE_INSTRUCTIONS["community"]
    assert "internet troll" in P.ROLE_INSTRUCTIONS["troll"]
    assert "derail the conversation" in P.ROLE_INSTRUCTIONS["troll"]
    assert "break the rules" in P.ROLE_INSTRUCTIONS["troll"]
    assert "provoke other users into toxicity" in P.ROLE_INSTRUCTIONS["troll"]


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
