"""The LLM layer against a real HTTP server on loopback (socialgym.llm.testing.FakeServer).

Scripted replies: malformed JSON, wrong ids, HTTP 500/429, replies slower than the timeout.
Checks re-prompting with the error, retries, fallback to NOT with the reason recorded, the run
finishing, the cache replaying a run exactly, concurrency bounded, the API key never leaking.
"""

from __future__ import annotations

import json
import threading
import time

import pytest
from capabilities import need_module

need_module("openai")

import socialgym  # noqa: E402
from socialgym.agents import Coach, LLMPolicy, generate_personas  # noqa: E402
from socialgym.llm import LLMClient  # noqa: E402
from socialgym.llm.schemas import Checked  # noqa: E402
from socialgym.llm.testing import FakeReply, FakeServer, sample_schema, schema_of  # noqa: E402

KEY = "sk-secret-test-key-123456"


def purpose(body: dict) -> str:
    fmt = body.get("response_format") or {}
    name = (fmt.get("json_schema") or {}).get("name")
    if name:
        return name
    schema = schema_of(body) or {}
    return next(iter(schema.get("properties", {"text": 0})))


def run_episode(client, n_agents=3, rounds=2, seed=0, policy_kwargs=None, env_kwargs=None):
    policy = LLMPolicy(client, generate_personas(n_agents, seed=seed), **(policy_kwargs or {}))
    env = socialgym.parallel_env(n_agents=n_agents, max_rounds=rounds, seed=seed, recommender="random",
                                 **(env_kwargs or {}))
    obs, _ = env.reset(seed=seed)
    trace = []
    while env.agents:
        actions = policy.act(obs)
        trace.append(actions)
        obs, rewards, _, _, infos = env.step(actions)
    return policy, env, trace


def test_valid_run_json_schema_mode_and_usage():
    with FakeServer() as server, LLMClient(server.base_url, "fake", api_key=KEY, max_concurrency=4) as client:
        policy, env, trace = run_episode(client)
        assert client.mode == "json_schema"
        # 3 agents x 2 rounds x (plan + vote) = 12 requests, each answered
        assert len(server.requests) == 12
        total = client.usage.total()
        assert total["requests"] == 12 and total["fallbacks"] == 0 and total["repairs"] == 0
        by_round = client.usage.by_round()
        assert by_round[1]["requests"] == 6 and by_round[2]["requests"] == 6
        assert client.usage.by_agent()["agent_0"]["requests"] == 4
        assert total["prompt_tokens"] == sum(sum(len(m["content"]) for m in r["messages"]) // 4 + 1
                                             for r in server.requests)
        # every request that expects JSON carried a schema with the live ids
        for body in server.requests:
            assert body["response_format"]["type"] == "json_schema"
        # round 1: only POSTs allowed by the schema
        first = server.requests[0]["response_format"]["json_schema"]["schema"]
        assert first["properties"]["actions"]["items"]["properties"]["type"]["enum"] == ["POST"]
        assert all(a["type"] == "POST" for acts in trace[0].values() for a in acts["actions"])


def test_detects_llama_cpp_python_format():
    with FakeServer(reject_json_schema=True) as server, LLMClient(server.base_url, "fake", api_key=KEY) as client:
        run_episode(client, rounds=1)
        assert client.mode == "json_object"
        assert "Input should be" in client.format_rejections[0]
        kinds = [(b.get("response_format") or {}).get("type") for b in server.requests]
        assert kinds[0] == "json_schema" and set(kinds[1:]) == {"json_object"}
        assert "schema" in server.requests[1]["response_format"]


def test_reprompt_with_validation_error_then_success():
    def responder(body, n):
        if purpose(body) == "plan" and len(body["messages"]) == 2 and "Round 2" in body["messages"][1]["content"]:
            return json.dumps({"actions": [{"type": "COM", "target_id": 999999, "mention": None,
                                            "tone": "neutral", "text": "hi"}] * 3})
        if purpose(body) == "plan" and "Round 2" in body["messages"][1]["content"]:
            return None   # the re-prompt gets a valid random reply
        return None

    with FakeServer(responder) as server, LLMClient(server.base_url, "fake", api_key=KEY) as client:
        run_episode(client)
        repairs = [b for b in server.requests if len(b["messages"]) == 4]
        assert len(repairs) == 3          # one re-prompt per agent in round 2
        repair_msg = repairs[0]["messages"][3]["content"]
        assert "action 1: target_id 999999 is not one of the listed post ids" in repair_msg
        assert repairs[0]["messages"][2]["role"] == "assistant"
        assert client.usage.total()["repairs"] == 3 and client.usage.total()["fallbacks"] == 0


def test_malformed_json_three_reprompts_then_not_fallback():
    def responder(body, n):
        if purpose(body) == "plan" and "Round 2" in body["messages"][1]["content"]:
            return '{"actions": [ {"type": "NOT"'   # truncated JSON, every time
        return None

    with FakeServer(responder) as server, LLMClient(server.base_url, "fake", api_key=KEY) as client:
        policy, env, trace = run_episode(client)
        # round 2 act step: every agent falls back to NOT in all 3 slots
        assert all(acts == {"actions": [{"type": "NOT"}] * 3} for acts in trace[2].values())
        falls = client.usage.fallback_rows()
        assert len(falls) == 9
        assert {f["purpose"] for f in falls} == {"plan"} and {f["slot"] for f in falls} == {0, 1, 2}
        assert all("invalid after 3 re-prompts" in f["reason"] and "not valid JSON" in f["reason"] for f in falls)
        # 1 + 3 re-prompts per agent in round 2
        round2_plans = [b for b in server.requests if purpose(b) == "plan" and "Round 2" in b["messages"][1]["content"]]
        assert len(round2_plans) == 3 * 4
        assert env.unwrapped.round == 3      # the run finished


def test_round1_fallback_is_a_post():
    def responder(body, n):
        return "garbage" if purpose(body) == "plan" else None

    with FakeServer(responder) as server, LLMClient(server.base_url, "fake", api_key=KEY, max_repairs=1) as client:
        policy, env, trace = run_episode(client, rounds=1)
        for agent, acts in trace[0].items():
            assert [a["type"] for a in acts["actions"]] == ["POST"] * 3
            topic = policy.personas[agent].interests[0]
            assert all(a["topic"] == topic and a["text"] == "" for a in acts["actions"])
        assert len(client.usage.fallbacks) == 9


def test_http_500_retries_then_success():
    fails = {"n": 0}

    def responder(body, n):
        if fails["n"] < 2:
            fails["n"] += 1
            return FakeReply(status=500, error="boom")
        return None

    with FakeServer(responder) as server, LLMClient(server.base_url, "fake", api_key=KEY, backoff=0.01,
                                                    max_concurrency=1) as client:
        run_episode(client, rounds=1)
        total = client.usage.total()
        assert total["retries"] == 2 and total["fallbacks"] == 0
        assert len(server.requests) == total["requests"] + 2


def test_http_429_exhausts_retries_and_falls_back():
    def responder(body, n):
        return FakeReply(status=429, error="slow down") if purpose(body) == "votes" else None

    with FakeServer(responder) as server, LLMClient(server.base_url, "fake", api_key=KEY, backoff=0.01,
                                                    max_retries=2) as client:
        policy, env, trace = run_episode(client, rounds=1)
        assert all(v == {"votes": {}} for v in trace[1].values())
        falls = client.usage.fallback_rows()
        assert len(falls) == 3 and all(f["purpose"] == "vote" for f in falls)
        assert all("HTTP 429" in f["reason"] and "after 3 attempt(s)" in f["reason"] for f in falls)
        vote_calls = [c for c in client.usage.calls if c.purpose == "vote"]
        assert all(c.attempts == 3 and not c.ok for c in vote_calls)


def test_timeout_is_retried_then_recorded():
    def responder(body, n):
        return FakeReply(delay=60.0) if purpose(body) == "votes" else None

    with FakeServer(responder) as server, LLMClient(server.base_url, "fake", api_key=KEY, timeout=0.2,
                                                    max_retries=1, backoff=0.01) as client:
        start = time.perf_counter()
        policy, env, trace = run_episode(client, rounds=1)
        # 2 attempts of 0.2 s each; without the timeout the votes would wait out the server's 60 s
        assert time.perf_counter() - start < 30
        falls = client.usage.fallback_rows()
        # the attempt's total deadline (timeout) ends it, or httpx's read timeout, whichever is first
        assert len(falls) == 3 and all("timed out" in f["reason"] for f in falls)
        assert all(c.attempts == 2 for c in client.usage.calls if c.purpose == "vote")
        assert env.unwrapped.round == 2


def test_non_retryable_400_not_retried():
    with FakeServer(lambda b, n: FakeReply(status=400, error="bad model")) as server, \
            LLMClient(server.base_url, "fake", api_key=KEY, structured="json_schema") as client:
        run_episode(client, rounds=1)
        assert len(server.requests) == 6            # plan + vote per agent, one attempt each, no retries
        assert all("HTTP 400: bad model" in f["reason"] for f in client.usage.fallback_rows())


def test_concurrency_is_bounded():
    with FakeServer(latency=0.1) as server, LLMClient(server.base_url, "fake", api_key=KEY, max_concurrency=3) as client:
        async def many():
            import asyncio
            return await asyncio.gather(*(client.chat([{"role": "user", "content": str(i)}]) for i in range(12)))

        start = time.perf_counter()
        client.run(many())
        elapsed = time.perf_counter() - start
        assert server.peak_in_flight == 3 and client.peak_in_flight == 3
        assert elapsed >= 0.4 - 0.02        # 12 calls / 3 slots = 4 waves of 0.1 s


def test_agents_run_concurrently():
    with FakeServer(latency=0.2) as server, LLMClient(server.base_url, "fake", api_key=KEY, max_concurrency=16,
                                                      structured="json_schema") as client:
        policy = LLMPolicy(client)
        env = socialgym.parallel_env(n_agents=10, max_rounds=1, seed=0)
        obs, _ = env.reset(seed=0)
        policy.act(obs)
        assert server.peak_in_flight == 10     # all 10 agents' plan requests were in flight together


def test_cache_replays_run_exactly(tmp_path):
    cache = tmp_path / "cache.sqlite"
    kwargs = dict(api_key=KEY, cache=cache, temperature=1.0)
    with FakeServer(seed=1) as server, LLMClient(server.base_url, "fake", **kwargs) as client:
        _, env1, trace1 = run_episode(client, rounds=3, policy_kwargs={"coach": Coach(client)})
        first_requests = len(server.requests)
        W1 = env1.unwrapped.tie_matrix().toarray()
    # a different server (other seed): nothing may reach it
    with FakeServer(seed=99) as server, LLMClient(server.base_url, "fake", **kwargs) as client:
        _, env2, trace2 = run_episode(client, rounds=3, policy_kwargs={"coach": Coach(client)})
        assert len(server.requests) == 0
        assert client.usage.total()["cached"] == first_requests
    assert trace1 == trace2
    assert (W1 == env2.unwrapped.tie_matrix().toarray()).all()
    assert KEY not in cache.read_bytes().decode("latin-1")


def test_api_key_never_leaks(tmp_path, capsys):
    with FakeServer(lambda b, n: FakeReply(status=500, error="nope")) as server, \
            LLMClient(server.base_url, "fake", api_key=KEY, cache=tmp_path / "c", max_retries=0) as client:
        run_episode(client, rounds=1)
        texts = [repr(client), json.dumps(client.config()), repr(client.usage),
                 json.dumps(client.usage.fallback_rows(), default=str)]
        for t in texts:
            assert KEY not in t
        assert {k.lower(): v for k, v in server.headers[0].items()}["authorization"] == f"Bearer {KEY}"   # sent to the server, and only there
    out = capsys.readouterr()
    assert KEY not in out.out + out.err


def test_key_from_environment_and_required_for_remote(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ValueError, match="no API key"):
        LLMClient("https://api.example.com/v1", "m")
    LLMClient("http://127.0.0.1:9/v1", "m")          # loopback may go without
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with FakeServer() as server, LLMClient(server.base_url, "fake") as client:
        client.run(client.chat([{"role": "user", "content": "hi"}]))
        assert {k.lower(): v for k, v in server.headers[0].items()}["authorization"] == f"Bearer {KEY}"
        assert KEY not in repr(client) + json.dumps(client.config())


def test_bad_client_arguments():
    for kwargs, word in (({"max_concurrency": 0}, "max_concurrency"), ({"timeout": -1}, "timeout"),
                         ({"structured": "xml"}, "structured"), ({"max_repairs": -1}, "max_repairs")):
        with pytest.raises(ValueError, match=word):
            LLMClient("http://127.0.0.1:9/v1", "m", **kwargs)
    with pytest.raises(ValueError, match="model"):
        LLMClient("http://127.0.0.1:9/v1", "")


def test_complete_json_partial_value_kept():
    # a checker that keeps the good part: the JSONReply carries it with the error
    with FakeServer(lambda b, n: '{"x": 1}') as server, LLMClient(server.base_url, "fake", api_key=KEY,
                                                                 max_repairs=2) as client:
        reply = client.run(client.complete_json([{"role": "user", "content": "q"}], {"type": "object"},
                                                lambda v: Checked(v, ["always wrong"])))
        assert not reply.ok and reply.repairs == 2 and reply.checked.value == {"x": 1}
        assert "invalid after 2 re-prompts: always wrong" in reply.error
        assert len(server.requests) == 3


def test_coach_tips_reach_plan_prompt_only_for_coached_agents():
    tips = ["DM agent_1 about climate, supportive.", "COM on the top-liked post.", "POST a question on sports."]

    def responder(body, n):
        return json.dumps({"tips": tips}) if purpose(body) == "coach_tips" else None

    with FakeServer(responder) as server, LLMClient(server.base_url, "fake", api_key=KEY) as client:
        policy, env, trace = run_episode(client, n_agents=4, policy_kwargs={
            "coach": Coach(client), "coached": ["agent_0", "agent_2"]})
        coach_calls = [b for b in server.requests if purpose(b) == "coach_tips"]
        assert len(coach_calls) == 2          # round 2 only, 2 coached agents
        assert "Priorities this round, highest first:" in coach_calls[0]["messages"][1]["content"]
        plans = [b for b in server.requests if purpose(b) == "plan" and "Round 2." in b["messages"][1]["content"]]
        with_tip = [b for b in plans if "Coach's tips: " + " ".join(tips) in b["messages"][1]["content"]]
        assert len(with_tip) == 2
        assert set(policy.tips) == {"agent_0", "agent_2"}


def test_llm_tie_scorer_scores_replace_evidence():
    from socialgym.ties.llm_scorer import LLMTieScorer

    def responder(body, n):
        if purpose(body) == "tie_ratings":
            peers = list(schema_of(body)["properties"]["ratings"]["properties"])
            return json.dumps({"ratings": {p: {"score": 5, "reason": "warm"} for p in peers}})
        return None

    with FakeServer(responder) as server, LLMClient(server.base_url, "fake", api_key=KEY) as client:
        scorer = LLMTieScorer(client)
        _, env, _ = run_episode(client, rounds=1, env_kwargs={"tie_scorer": scorer})
        upd = env.unwrapped.last_round.ties
        assert len(upd.src) > 0
        # score 5 -> evidence 1.0 -> gain min(0.25, (1 - 0) * (1 - 0.1)) = 0.25 on a fresh tie
        assert (upd.evidence == 1.0).all() and (upd.after == 0.25).all()
        tie_calls = [b for b in server.requests if purpose(b) == "tie_ratings"]
        assert len(tie_calls) == len(set(upd.src.tolist()))
        assert "Transcript of the last round:" in tie_calls[0]["messages"][1]["content"]


def test_tie_scorer_missing_peer_gets_zero_and_is_recorded():
    from socialgym.ties.llm_scorer import LLMTieScorer

    def responder(body, n):
        if purpose(body) == "tie_ratings":
            return json.dumps({"ratings": {}})
        return None

    with FakeServer(responder) as server, LLMClient(server.base_url, "fake", api_key=KEY, max_repairs=1) as client:
        _, env, _ = run_episode(client, rounds=1, env_kwargs={"tie_scorer": LLMTieScorer(client)})
        upd = env.unwrapped.last_round.ties
        assert (upd.evidence == 0).all() and (upd.after == 0).all()
        falls = [f for f in client.usage.fallback_rows() if f["purpose"] == "tie"]
        assert len(falls) == len(upd.src) and "no rating for" in falls[0]["reason"]


def test_tie_scorer_selectable_by_config():
    with FakeServer() as server:
        env = socialgym.parallel_env(n_agents=3, max_rounds=1, seed=0, tie_scorer={
            "kind": "llm", "base_url": server.base_url, "model": "fake", "api_key": KEY})
        assert type(env.unwrapped.tie_scorer).__name__ == "LLMTieScorer"
        with pytest.raises(ValueError, match="tie_scorer"):
            socialgym.parallel_env(n_agents=3, tie_scorer="magic")


def test_mentions_are_literal_and_parsed():
    def responder(body, n):
        if purpose(body) == "plan":
            users = schema_of(body)["properties"]["actions"]["items"]
            users = (users.get("anyOf") or [users])[0]["properties"]["mention"]["anyOf"][0]["enum"]
            return json.dumps({"actions": [
                {"type": "POST", "topic": "climate", "mention": users[0], "tone": "supportive", "text": "hello all"},
                {"type": "POST", "topic": "climate", "mention": None, "tone": "neutral", "text": f"hey @{users[1]} and @nobody"},
                {"type": "POST", "topic": "sports", "mention": None, "tone": "critical", "text": ""}]})
        return None

    with FakeServer(responder) as server, LLMClient(server.base_url, "fake", api_key=KEY) as client:
        _, env, trace = run_episode(client, rounds=1)
        a0 = trace[0]["agent_0"]["actions"]
        # the planned mention is written literally, at the end (the text does not use the person's name)
        assert a0[0]["text"] == f"hello all @{a0[0]['mentions'][0]}" and len(a0[0]["mentions"]) == 1
        assert len(a0[1]["mentions"]) == 1 and "nobody" not in a0[1]["mentions"]
        assert a0[2]["mentions"] == []


def test_sync_bridge_works_inside_running_loop():
    import asyncio

    with FakeServer() as server, LLMClient(server.base_url, "fake", api_key=KEY) as client:
        async def notebook_cell():   # e.g. Jupyter: a loop is already running in this thread
            return client.run(client.chat([{"role": "user", "content": "hi"}]))

        assert asyncio.run(notebook_cell()) == "hello"


def test_fake_server_sample_schema_respects_enums():
    import random

    schema = {"type": "object", "properties": {"a": {"type": "integer", "enum": [3, 4]},
                                               "b": {"anyOf": [{"type": "string", "enum": ["x"]}, {"type": "null"}]}}}
    for _ in range(20):
        v = sample_schema(schema, random.Random(_))
        assert v["a"] in (3, 4) and v["b"] in ("x", None)


def test_threads_do_not_leak_after_close():
    before = threading.active_count()
    with FakeServer() as server:
        client = LLMClient(server.base_url, "fake", api_key=KEY)
        client.run(client.chat([{"role": "user", "content": "hi"}]))
        client.close()
    deadline = time.monotonic() + 10          # threads that were told to stop may take a moment under load
    while threading.active_count() > before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert threading.active_count() <= before
