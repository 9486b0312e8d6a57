"""Split generation in the discussion environment (issue 14): users' comments asked for as plain
text, the moderator's move under a schema and then its text asked for plainly."""

from __future__ import annotations

import json

import pytest
from capabilities import need_module

need_module("openai")

import socialgym  # noqa: E402
from socialgym.agents.discussion import LLMDiscussant, LLMModerator  # noqa: E402
from socialgym.llm.text import resolve_generation  # noqa: E402
from socialgym.discussion import run_discussion  # noqa: E402
from socialgym.llm import LLMClient  # noqa: E402
from socialgym.llm.testing import FakeReply, FakeServer, schema_of  # noqa: E402


def test_users_and_moderator_in_split_mode():
    def responder(body, n):
        schema = schema_of(body)
        if schema is not None:                                         # the moderator's move
            users = schema["anyOf"][2]["properties"]["user"]["enum"]
            return json.dumps({"action": "warn", "user": users[0]})
        if "\n\nNow write a warning to @" in body["messages"][-1]["content"]:
            return 'Sure! "Please keep it civil. Personal attacks are not allowed here."'
        return "Comment: I think @NoSuchUser is wrong, and the data shows it. Look at the numbers."

    with FakeServer(responder) as server, LLMClient(server.base_url, "fake", api_key="k") as client:
        env = socialgym.discussion_env(n_users=3, max_turns=3, seed=1)
        result = run_discussion(env, {"users": LLMDiscussant(client, generation="split"),
                                      "moderator": LLMModerator(client, "rules_only", generation="split")}, seed=1)
        bodies = server.requests
    turns = result["turns"]
    users = [t for t in turns if t["agent"] != "moderator"]
    mods = [t for t in turns if t["agent"] == "moderator"]
    plain = [b for b in bodies if schema_of(b) is None]
    assert all([m["role"] for m in b["messages"]] == ["system", "user"] for b in plain)   # roles alternate
    assert len(plain) == len(users) + len(mods)              # one plain text per comment and per move
    assert sum(schema_of(b) is not None for b in bodies) == len(mods)
    moves = [schema_of(b) for b in bodies if schema_of(b) is not None]
    assert all("text" not in v["properties"] for m in moves for v in m["anyOf"])   # closed choices only
    assert client.usage.fallbacks == []
    for t in users:                                           # the label and the stray @handle are dropped
        assert t["text"] == "I think is wrong, and the data shows it. Look at the numbers."
    for t in mods:                                            # the warning is enforced, its text written plainly
        assert t["warned"] == [t["mentions"][0]]
        assert t["text"] == f"@{t['warned'][0]} Please keep it civil. Personal attacks are not allowed here."
    assert int(env.unwrapped.warnings.sum()) == len(mods)


def test_moderator_text_failure_keeps_the_warning_with_a_bare_mention():
    def responder(body, n):
        schema = schema_of(body)
        if schema is not None:
            users = schema["anyOf"][2]["properties"]["user"]["enum"]
            return json.dumps({"action": "ban", "user": users[0]})
        if "\n\nNow write" in body["messages"][-1]["content"]:
            return FakeReply(status=400, error="nope")
        return "Fair enough."

    with FakeServer(responder) as server, LLMClient(server.base_url, "fake", api_key="k") as client:
        mod = LLMModerator(client, "rules_only", generation="split")
        env = socialgym.discussion_env(n_users=3, max_turns=2, seed=1)
        run_discussion(env, {"users": LLMDiscussant(client, generation="split"), "moderator": mod}, seed=1)
        fallbacks = [f for f in client.usage.fallbacks if f.purpose == "moderate_text"]
    assert fallbacks and fallbacks[0].used == "ban with the bare @mention" and "HTTP 400" in fallbacks[0].reason
    assert mod.outcomes["ban"] >= 1


def test_generation_modes_resolve():
    class Stub:
        def __init__(self, local):
            self.local, self.model = local, "m"
    assert resolve_generation("auto", Stub(True)) == "split"
    assert resolve_generation("auto", Stub(False)) == "joint"
    with pytest.raises(ValueError, match="generation"):
        LLMDiscussant(Stub(False), generation="x")


def test_moderator_text_with_its_mention_stays_within_the_comment_limit():
    long = "Please stop now. " + "This is not acceptable here. " * 20

    def responder(body, n):
        schema = schema_of(body)
        if schema is not None:
            return json.dumps({"action": "warn", "user": schema["anyOf"][2]["properties"]["user"]["enum"][0]})
        return long

    with FakeServer(responder) as server, LLMClient(server.base_url, "fake", api_key="k") as client:
        env = socialgym.discussion_env(n_users=3, max_turns=2, seed=1, comment_chars=60)   # strict env
        result = run_discussion(env, {"users": LLMDiscussant(client, generation="split"),
                                      "moderator": LLMModerator(client, "rules_only", generation="split")}, seed=1)
    mods = [t for t in result["turns"] if t["agent"] == "moderator"]
    assert mods and all(len(t["text"]) <= 60 and t["text"].startswith(f"@{t['warned'][0]} ") for t in mods)
