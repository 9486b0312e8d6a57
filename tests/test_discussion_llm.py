"""LLM users, moderator, coach and annotators against a loopback OpenAI-compatible fake server."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest
from capabilities import need_module

need_module("openai")

import socialgym  # noqa: E402
from socialgym.agents.discussion import (  # noqa: E402
    LLMDiscussant, LLMModerator, ModeratorCoach, check_moderation, moderator_schema,
)
from socialgym.annotation import LLMAnnotators, annotate_discussion, check_annotation, parse_text_form  # noqa: E402
from socialgym.discussion import ROLE_INSTRUCTIONS, run_discussion, score_discussion  # noqa: E402
from socialgym.llm import LLMClient  # noqa: E402
from socialgym.llm.testing import FakeServer, schema_of  # noqa: E402

KEY = "sk-test-discussion-key"


def _kind(body: dict) -> str:
    schema = schema_of(body) or {}
    if "anyOf" in schema:
        return "moderate"
    props = schema.get("properties", {})
    if "comment" in props:
        return "comment"
    if "toxicity" in props:
        return "annotate"
    if "tips" in props:
        return "coach"
    return "other"


def _system(body: dict) -> str:
    return body["messages"][0]["content"]


def test_llm_discussion_end_to_end_with_live_annotators():
    with FakeServer(seed=3) as server, LLMClient(server.base_url, "fake", api_key=KEY, max_repairs=1) as client:
        env = socialgym.discussion_env(n_users=4, roles={"user_3": "troll"}, max_turns=6, seed=2,
                                       annotator=LLMAnnotators(client, 3, seed=1), invalid="lenient")
        result = run_discussion(env, {"users": LLMDiscussant(client, seed=4),
                                      "moderator": LLMModerator(client, "moderation_game")}, seed=2)
        bodies = server.requests
    base = env.unwrapped
    kinds = [_kind(b) for b in bodies]
    user_turns = [r for r in result["turns"] if r["agent"] != "moderator"]
    assert kinds.count("comment") == len(user_turns) == 6
    assert kinds.count("moderate") == len([r for r in result["turns"] if r["agent"] == "moderator"])
    assert kinds.count("annotate") == 3 * len(base.comment_ids)        # k = 3 ratings per comment
    # the troll's prompt has the troll's instructions; normal users' do not
    troll_prompts = [_system(b) for b in bodies if _kind(b) == "comment" and ROLE_INSTRUCTIONS["troll"] in _system(b)]
    assert len(troll_prompts) == sum(1 for r in user_turns if r["agent"] == "user_3")
    # the moderator plays the game with the configured points in its prompt
    mod_system = next(_system(b) for b in bodies if _kind(b) == "moderate")
    assert "scorable game" in mod_system and "-8" in mod_system
    # every comment has 3 ratings on the scale, live rewards equal the post-hoc fold
    for cid in base.comment_ids:
        a = base.annotation(cid)
        assert a.toxicity.shape == (3,) and set(a.toxicity) <= {1, 2, 3, 4, 5}
    assert score_discussion(base.turn_log, base.roles, "moderator")["rewards"] == pytest.approx(result["returns"])
    assert KEY not in json.dumps(result["turns"])


def test_moderator_schema_tracks_bans():
    """After a ban the moderator's user enum no longer offers the banned user."""
    def responder(body, n):
        if _kind(body) == "moderate":
            users = schema_of(body)["anyOf"][2]["properties"]["user"]["enum"]
            if "user_1" in users:
                return json.dumps({"action": "ban", "user": "user_1", "text": "@user_1 you are out"})
            return json.dumps({"action": "silent"})
        return json.dumps({"comment": "fine"})

    with FakeServer(responder) as server, LLMClient(server.base_url, "fake", api_key=KEY) as client:
        env = socialgym.discussion_env(n_users=3, max_turns=5, turn_taking="round_robin")
        run_discussion(env, {"users": LLMDiscussant(client), "moderator": LLMModerator(client, "rules_only")})
        enums = [schema_of(b)["anyOf"][2]["properties"]["user"]["enum"] for b in server.requests
                 if _kind(b) == "moderate"]
    base = env.unwrapped
    assert enums[0] == ["user_0", "user_1", "user_2"]
    assert all(e == ["user_0", "user_2"] for e in enums[1:])
    assert base.banned.tolist() == [False, True, False]
    assert "user_1" not in [r["agent"] for r in base.turn_log[2:]]


def test_malformed_replies_fall_back_and_are_recorded():
    def responder(body, n):
        kind = _kind(body)
        if kind == "moderate":
            return "I think everything is fine here."                     # never JSON
        if kind == "comment":
            return json.dumps({"comment": "x" * 80})                      # longer than max_chars=50
        if kind == "annotate":
            persona = body["messages"][0]["content"]
            if "Your background" in persona and n % 2:
                return "Toxicity=4 ArgumentQuality=2"                       # the paper's text form
            return "no idea"
        return None

    with FakeServer(responder) as server, LLMClient(server.base_url, "fake", api_key=KEY, max_repairs=1) as client:
        env = socialgym.discussion_env(n_users=2, max_turns=2, turn_taking="round_robin")
        result = run_discussion(env, {"users": LLMDiscussant(client, max_chars=50),
                                      "moderator": LLMModerator(client, "no_instructions")})
        annotations = annotate_discussion(env, LLMAnnotators(client, 2), include_moderator=False)
        fallbacks = client.usage.fallbacks
    moderator_turns = [r for r in result["turns"] if r["agent"] == "moderator"]
    assert [r["text"] for r in moderator_turns] == ["", ""]                  # silent fallback
    assert all(len(r["text"]) == 50 for r in result["turns"] if r["agent"] != "moderator")
    purposes = [f.purpose for f in fallbacks]
    assert purposes.count("moderate") == 2 and purposes.count("comment") == 2
    assert all("re-prompts" in f.reason for f in fallbacks if f.purpose == "moderate")
    # every rating is either parsed from the text form (4, 2) or missing (NaN, recorded)
    ratings = np.concatenate([a.toxicity for a in annotations.values()])
    assert np.isfinite(ratings).any() and np.isnan(ratings).any()
    assert set(ratings[np.isfinite(ratings)]) == {4.0}
    assert purposes.count("annotate") == int(np.isnan(ratings).sum())
    for a in annotations.values():
        if np.isfinite(a.toxicity).any():
            assert a.mean_toxicity == 4.0


def test_moderator_reply_validation():
    users = ["ann", "bob"]
    assert check_moderation({"action": "silent"}, users, 100).value == {"text": ""}
    assert check_moderation({"action": "warn", "user": "bob", "text": "careful"}, users, 100).value == \
        {"text": "careful", "warn": "bob"}
    bad = check_moderation({"action": "ban", "user": "eve", "text": "out"}, users, 100)
    assert not bad.ok and "user must be one of ['ann', 'bob']" in bad.errors[0]
    assert not check_moderation({"action": "respond", "text": " "}, users, 100).ok
    assert not check_moderation({"action": "dance"}, users, 100).ok
    schema = moderator_schema(users, 100)
    assert [v["properties"]["action"]["enum"][0] for v in schema["anyOf"]] == ["respond", "silent", "warn", "ban"]
    assert len(moderator_schema([], 100)["anyOf"]) == 2                     # nobody left to warn or ban
    assert check_annotation({"toxicity": 3, "argument_quality": 5}).ok
    assert not check_annotation({"toxicity": 6, "argument_quality": 5}).ok
    assert not check_annotation({"toxicity": True, "argument_quality": 5}).ok
    assert parse_text_form("Output: Toxicity=2\nArgumentQuality=5") == (2, 5)
    assert parse_text_form("toxic!") is None


def test_moderator_coach_tips_reach_the_prompt():
    def responder(body, n):
        if _kind(body) == "coach":
            return json.dumps({"tips": ["Stay silent when the thread is civil.", "Warn only repeat offenders.",
                                        "Never ban a first-time poster."]})
        if _kind(body) == "moderate":
            return json.dumps({"action": "respond", "text": "Please stay on topic."})
        return None

    with FakeServer(responder) as server, LLMClient(server.base_url, "fake", api_key=KEY) as client:
        moderator = LLMModerator(client, "moderation_game", coach=ModeratorCoach(client), coach_every=2)
        env = socialgym.discussion_env(n_users=2, max_turns=4)
        run_discussion(env, {"users": LLMDiscussant(client), "moderator": moderator})
        coach_bodies = [b for b in server.requests if _kind(b) == "coach"]
        mod_bodies = [b for b in server.requests if _kind(b) == "moderate"]
    assert len(coach_bodies) == 2                          # at moderator turns 2 and 4
    assert "intervene: 1 times" in coach_bodies[0]["messages"][1]["content"]
    assert "Coach tips:" not in _system(mod_bodies[0])
    assert "Warn only repeat offenders." in _system(mod_bodies[1])
    assert moderator.outcomes["intervene"] == 4


def test_policies_pickle_without_their_client():
    with FakeServer() as server, LLMClient(server.base_url, "fake", api_key=KEY) as client:
        for obj in (LLMDiscussant(client), LLMModerator(client, "facilitation_guidelines"),
                    LLMAnnotators(client, 2), ModeratorCoach(client)):
            data = pickle.dumps(obj)
            assert KEY.encode() not in data
            assert pickle.loads(data).client is None


def test_unknown_strategy_and_no_moderator():
    with pytest.raises(ValueError, match="no moderator takes part"):
        LLMModerator(None, "no_moderator")
    with pytest.raises(ValueError, match="strategy"):
        LLMModerator(None, "benevolent_dictator")
