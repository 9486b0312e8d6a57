"""Hardening of the LLM layer (issue 16): each reported bad outcome, reproduced first.

1. malformed 200 replies (no JSON, no choices, odd ``usage``) are failed attempts, not crashes;
2. a lone surrogate in model text is never cached, never breaks a cache key or a transcript;
3. a refused API key (401/403) aborts with ``LLMAuthError`` instead of falling back silently;
4. the key echoed in server error texts is redacted from everything the client keeps;
5. only a definite rejection, not a transient 5xx, downgrades structured output;
6. the embedded llama.cpp server dies with its parent and requires its own API key.

Items 1-5 run against ``socialgym.llm.testing.FakeServer`` on loopback; item 6 needs the
embedded model (the ``local`` extra) and is skipped without it.
"""

from __future__ import annotations

import json
import os
import pickle
import random
import signal
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request

import pytest
from capabilities import need_embedded_model, need_module

need_module("openai")

import socialgym  # noqa: E402
from socialgym.agents import LLMPolicy, generate_personas  # noqa: E402
from socialgym.llm import LLMAuthError, LLMClient, LLMError, ResponseCache, redact  # noqa: E402
from socialgym.llm.cache import request_key  # noqa: E402
from socialgym.llm.schemas import Checked, parse_json  # noqa: E402
from socialgym.llm.testing import FakeReply, FakeServer, sample_schema, schema_of  # noqa: E402
from test_llm_client import purpose  # noqa: E402

KEY = "sk-hardening-secret-key-987654321"
MSG = [{"role": "user", "content": "hi"}]




def run_episode(client, n_agents=3, rounds=2, seed=0):
    policy = LLMPolicy(client, generate_personas(n_agents, seed=seed))
    env = socialgym.parallel_env(n_agents=n_agents, max_rounds=rounds, seed=seed, recommender="random")
    obs, _ = env.reset(seed=seed)
    trace = []
    while env.agents:
        actions = policy.act(obs)
        trace.append(actions)
        obs, _, _, _, _ = env.step(actions)
    return policy, env, trace


def client_for(server, **kwargs) -> LLMClient:
    return LLMClient(server.base_url, "fake", **{"api_key": KEY, "backoff": 0.001, "max_backoff": 0.01, **kwargs})


def cache_bytes(folder) -> str:
    """Everything the response cache wrote (its database and WAL files)."""
    return "".join(p.read_bytes().decode("latin-1") for p in folder.rglob("*") if p.is_file())


def utf8_line(entry) -> bytes:
    """What the runner's recorder does with a transcript entry (it raised on a lone surrogate)."""
    return (json.dumps(entry, ensure_ascii=False, default=str) + "\n").encode("utf-8")


# ---------------------------------------------------------------- 1. malformed 200 replies
def _completion(content="ok", **extra):
    return {"id": "x", "object": "chat.completion",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}}], **extra}


MALFORMED = {
    "non-JSON body": FakeReply(raw="<html>502 from the proxy</html>"),
    "non-JSON body, text/html": FakeReply(raw="<html>oops</html>", content_type="text/html"),
    "truncated JSON": FakeReply(raw='{"choices": [{"message": {"content": "hi"'),
    "not UTF-8": FakeReply(raw=b'{"choices": "\xff\xfe"}'),
    "body is a list": FakeReply(body=[1, 2, 3]),
    "body is a string": FakeReply(body="hello"),
    "body is null": FakeReply(body=None),
    "no choices": FakeReply(body={"id": "x", "usage": {"prompt_tokens": 3}}),
    "choices not a list": FakeReply(body={"choices": {"0": {"message": {"content": "hi"}}}}),
    "choices empty": FakeReply(body={"choices": []}),
    "choice is null": FakeReply(body={"choices": [None]}),
    "message is a string": FakeReply(body={"choices": [{"message": "hi"}]}),
    "content is a number": FakeReply(body=_completion(42)),
    "content is a list": FakeReply(body=_completion([{"type": "text", "text": "hi"}])),
    "error object with 200": FakeReply(body={"error": {"message": "overloaded"}}),
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_malformed_200_reply_is_a_failed_attempt_retried_then_llm_error(case):
    with FakeServer(lambda b, n: MALFORMED[case]) as server, client_for(server, max_retries=2) as client:
        with pytest.raises(LLMError, match=r"after 3 attempt\(s\)"):
            client.run(client.chat(MSG, agent="a", round=1, purpose="write"))
        assert len(server.requests) == 3                       # retried up to max_retries
        (call,) = client.usage.calls
        assert call.attempts == 3 and not call.ok and "reply" in call.error
        reply = client.run(client.complete_text(MSG))          # the normal failure path: an error reply
        assert not reply.ok and reply.error.startswith("request failed:")


def test_malformed_reply_then_good_reply_succeeds():
    def responder(body, n):
        return FakeReply(raw="not json at all") if n == 0 else "fine"

    with FakeServer(responder) as server, client_for(server) as client:
        assert client.run(client.chat(MSG)) == "fine"
        assert client.usage.calls[0].attempts == 2 and client.usage.calls[0].ok


@pytest.mark.parametrize("usage", [{"prompt_tokens": "lots", "completion_tokens": "7"}, ["prompt_tokens", 5], None,
                                   "12", {"prompt_tokens": [1], "completion_tokens": {"n": 1}},
                                   {"prompt_tokens": -4, "completion_tokens": True}, {"prompt_tokens": 1e300}])
def test_malformed_usage_counts_as_unknown_never_crashes(usage):
    with FakeServer(lambda b, n: FakeReply(content="hello", usage=usage)) as server, client_for(server) as client:
        assert client.run(client.chat(MSG)) == "hello"
        (call,) = client.usage.calls
        assert call.ok and call.attempts == 1
        assert isinstance(call.prompt_tokens, int) and isinstance(call.completion_tokens, int)
        expected = {"completion_tokens": 7} if usage == {"prompt_tokens": "lots", "completion_tokens": "7"} else {}
        assert call.completion_tokens == expected.get("completion_tokens", 0)
        assert call.prompt_tokens == 0          # 1e300 too: no real count, it would overflow SQLite


def test_reported_run_with_bad_usage_and_non_json_bodies_falls_back_and_finishes():
    """The reported case: odd usage on every reply, and non-JSON bodies for every vote."""
    def responder(body, n):
        if purpose(body) == "votes":
            return FakeReply(raw="Bad Gateway")
        schema = schema_of(body)
        content = json.dumps(sample_schema(schema, random.Random(n))) if schema else "hello"
        return FakeReply(content=content, usage=["prompt_tokens", "NaN"] if n % 2 else {"prompt_tokens": "x"})

    with FakeServer(responder) as server, client_for(server, max_retries=1) as client:
        policy, env, trace = run_episode(client)
        assert env.unwrapped.round == 3                         # the run finished
        falls = client.usage.fallback_rows()
        assert falls and {f["purpose"] for f in falls} == {"vote"}
        assert all("no readable reply" in f["reason"] and "after 2 attempt(s)" in f["reason"] for f in falls)
        assert all(v == {"votes": {}} for v in trace[1].values())
        assert client.usage.total()["prompt_tokens"] == 0


# ---------------------------------------------------------------- 2. lone surrogates
def test_request_key_never_crashes_and_keeps_existing_keys():
    import hashlib

    payload = {"model": "m", "messages": [{"role": "user", "content": "caf\u00e9 \U0001f600"}]}
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    assert request_key(payload, 2) == hashlib.sha256(f"{blob}#2".encode()).hexdigest()   # unchanged keys
    bad = {"model": "m", "messages": [{"role": "user", "content": "x \ud800"}]}
    other = {"model": "m", "messages": [{"role": "user", "content": "x \ufffd"}]}
    assert request_key(bad, 0) == request_key(bad, 0) != request_key(other, 0)


def test_cache_never_stores_unencodable_reply(tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite")
    assert cache.put("k1", "fine \u00e9", 1, 2) is True
    assert cache.put("k2", "bad \ud800", 1, 2) is False
    assert len(cache) == 1 and cache.get("k2") is None and cache.get("k1") == ("fine \u00e9", 1, 2)
    cache.close()


def test_surrogate_in_reply_text_is_a_failed_reply_and_not_cached(tmp_path):
    """The server's JSON escapes a lone surrogate in the message content: a failed attempt."""
    with FakeServer(lambda b, n: FakeReply(content="Hello \ud800 world")) as server, \
            client_for(server, max_retries=1, cache=tmp_path / "c") as client:
        entries = []
        client.transcript = entries.append
        reply = client.run(client.complete_text(MSG))
        assert not reply.ok and "UTF-8" in reply.error and "after 2 attempt(s)" in reply.error
        assert len(client.cache) == 0 and entries == []
        reply.error.encode("utf-8")
        json.dumps(client.usage.fallback_rows()).encode("utf-8")
        assert all(c.error is None or c.error.encode("utf-8") for c in client.usage.calls)


def test_escaped_surrogate_in_json_reply_is_invalid_and_reprompted():
    assert parse_json('{"text": "\\ud83d\\ude00"}') == {"text": "\U0001f600"}     # a pair is fine
    with pytest.raises(ValueError, match="lone surrogate"):
        parse_json('{"text": "hi \\ud800"}')
    with pytest.raises(ValueError, match="lone surrogate"):
        parse_json('{"\\udfff": 1}')
    with FakeServer(lambda b, n: '{"text": "hi \\ud800"}') as server, client_for(server, max_repairs=1) as client:
        reply = client.run(client.complete_json(MSG, {"type": "object"}, lambda v: Checked(v, [])))
        assert not reply.ok and "lone surrogate" in reply.error
        assert "lone surrogate" in server.requests[1]["messages"][-1]["content"]     # the re-prompt says why


def _surrogate_plans(body, n):
    schema = schema_of(body)
    if schema and "actions" in schema.get("properties", {}):
        value = sample_schema(schema, random.Random(n))
        for action in value["actions"]:
            if "text" in action:
                action["text"] = "bad \ud800 text"
        return json.dumps(value)                 # the model's JSON escapes the surrogate: "\\ud800"
    if schema is None:
        return FakeReply(content="plain \udc80 reply")      # and a raw one in plain-text requests
    return None


def test_reported_surrogate_run_finishes_and_resume_replays_from_cache(tmp_path):
    """The reported case: model text with an escaped lone surrogate reached events.jsonl and the
    cache key, and since the reply was cached every resume crashed again."""
    kwargs = dict(cache=tmp_path / "cache.sqlite", max_repairs=1, max_retries=1)
    lines = []
    with FakeServer(_surrogate_plans) as server, client_for(server, **kwargs) as client:
        client.transcript = lambda entry: lines.append(utf8_line(entry))
        _, env1, trace1 = run_episode(client)
        assert env1.unwrapped.round == 3
        assert client.usage.fallback_rows()                  # the bad texts were invalid replies
        json.dumps(trace1, ensure_ascii=False).encode("utf-8")   # no surrogate reached the env
        json.dumps(env1.unwrapped.round_transcript(), ensure_ascii=False, default=str).encode("utf-8")
    with FakeServer(_surrogate_plans) as server, client_for(server, **kwargs) as client:
        client.transcript = lambda entry: lines.append(utf8_line(entry))
        _, env2, trace2 = run_episode(client)                # the resume: replayed, no crash
        assert len(server.requests) == 0
    assert trace1 == trace2 and lines


def test_transcript_entries_are_always_encodable():
    with FakeServer(lambda b, n: "fine") as server, client_for(server) as client:
        entries = []
        client.transcript = entries.append
        client.run(client.chat([{"role": "user", "content": "prompt with \ud800 in it"}]))
        (entry,) = entries
        utf8_line(entry)
        assert entry["messages"][0]["content"] == "prompt with \ufffd in it" and entry["reply"] == "fine"
        assert server.requests[0]["messages"][0]["content"] == "prompt with \ufffd in it"   # sent cleaned


# ---------------------------------------------------------------- 3. refused API key
@pytest.mark.parametrize("status", [401, 403])
def test_refused_key_aborts_the_run_instead_of_falling_back(status):
    """The reported case: 401 on every call gave a run of fallbacks that exited 0."""
    reply = FakeReply(status=status, error="Incorrect API key provided")
    with FakeServer(lambda b, n: reply) as server, client_for(server, max_retries=3) as client:
        with pytest.raises(LLMAuthError) as info:
            run_episode(client)
        msg = str(info.value)
        assert "\n" not in msg and server.base_url in msg and f"HTTP {status}" in msg
        assert "api_key_env" in msg and "API key" in msg and KEY not in msg
        assert info.value.status == status and info.value.base_url == server.base_url
        time.sleep(0.3)                                     # the other agents' requests end too
        assert len(server.requests) == 1                     # no retries, nothing sent after the first 401
        assert client.usage.fallbacks == []
        sent = len(server.requests)
        with pytest.raises(LLMAuthError):                   # every later request fails at once
            client.run(client.complete_text(MSG))
        with pytest.raises(LLMAuthError):
            client.run(client.complete_json(MSG, {"type": "object"}, lambda v: Checked(v, [])))
        assert len(server.requests) == sent


def test_auth_error_is_not_an_llm_error_and_pickles():
    assert not issubclass(LLMAuthError, LLMError) and issubclass(LLMAuthError, RuntimeError)
    err = LLMAuthError("the LLM server at http://x refused the API key", status=401, base_url="http://x")
    back = pickle.loads(pickle.dumps(err))
    assert str(back) == str(err) and back.status == 401 and back.base_url == "http://x"


def test_auth_error_during_format_detection():
    with FakeServer(lambda b, n: FakeReply(status=401, error="no")) as server, client_for(server) as client:
        with pytest.raises(LLMAuthError):
            client.run(client.complete_json(MSG, {"type": "object"}, lambda v: Checked(v, [])))
        assert client.mode is None and client.format_rejections == [] and len(server.requests) == 1


@pytest.mark.parametrize("refused", ["coach_tips", "tie_ratings", "votes"])
def test_auth_error_is_not_swallowed_by_coach_tie_scorer_or_votes(refused):
    from socialgym.agents import Coach
    from socialgym.ties.llm_scorer import LLMTieScorer

    def responder(body, n):
        return FakeReply(status=401, error="bad key") if purpose(body) == refused else None

    with FakeServer(responder) as server, client_for(server) as client:
        policy = LLMPolicy(client, generate_personas(3, seed=0), coach=Coach(client))
        env = socialgym.parallel_env(n_agents=3, max_rounds=2, seed=0, recommender="random",
                                     tie_scorer=LLMTieScorer(client))
        obs, _ = env.reset(seed=0)
        with pytest.raises(LLMAuthError):
            while env.agents:
                obs, _, _, _, _ = env.step(policy.act(obs))
        assert any(purpose(b) == refused for b in server.requests)


# ---------------------------------------------------------------- 4. redaction
def test_redact_helper():
    assert redact(f"Incorrect API key provided: {KEY}.", KEY) == "Incorrect API key provided: ***."
    assert redact("header was Bearer abc.def-123 ok", "zzz") == "header was Bearer *** ok"
    assert redact("key sk-abcdefghijklmnopqrstuvwxyz in text") == "key *** in text"
    assert redact("took key k here", "k") == "took key *** here"          # short keys: whole tokens only
    assert redact("nothing to hide", None, "") == "nothing to hide"


def test_key_echoed_by_server_is_never_stored(tmp_path, capsys):
    def echo(body, n):
        auth = server.headers[n]["authorization"]
        pad = "x" * 280                                  # the key straddles where texts are cut
        if body.get("response_format", {}).get("type") == "json_schema":
            return FakeReply(status=400, error=f"response_format json_schema unsupported for {auth}")
        if n < 4:
            return FakeReply(status=500, error=f"{pad} upstream failed for {auth} key={KEY}")
        if n < 6:
            return FakeReply(body={"detail": f"weird 200 for {auth}"})
        return FakeReply(status=401, error=f"Incorrect API key provided: {KEY} ({auth})")

    with FakeServer(echo) as server, client_for(server, max_retries=1, cache=tmp_path / "c") as client:
        entries = []
        client.transcript = entries.append
        failures = [client.run(client.complete_json(MSG, {"type": "object"}, lambda v: Checked(v, [])))
                    for _ in range(2)]
        with pytest.raises(LLMAuthError) as info:
            client.run(client.chat(MSG))
        assert server.headers[0]["authorization"] == f"Bearer {KEY}"          # it was sent, and echoed
        assert len(client.format_rejections) == 1 and "***" in client.format_rejections[0]
        stored = [str(info.value), repr(info.value), *(f.error for f in failures),
                  json.dumps(client.usage.fallback_rows()), repr(client.usage),
                  *(c.error or "" for c in client.usage.calls), json.dumps(entries, default=str),
                  pickle.dumps(client.state_dict()).decode("latin-1"), json.dumps(client.config()), repr(client)]
        assert any("***" in s for s in stored)
        for text in stored:
            assert KEY not in text and KEY[:12] not in text
        assert KEY not in cache_bytes(tmp_path)
    out = capsys.readouterr()
    assert KEY not in out.out + out.err


def test_reply_echoing_the_key_is_redacted_before_use(tmp_path):
    with FakeServer(lambda b, n: f"your header was Bearer {KEY}") as server, \
            client_for(server, cache=tmp_path / "c") as client:
        entries = []
        client.transcript = entries.append
        assert client.run(client.chat(MSG)) == "your header was Bearer ***"
        assert KEY not in json.dumps(entries)
        assert KEY not in cache_bytes(tmp_path)


# ---------------------------------------------------------------- 5. structured-output downgrade
def test_transient_500s_mentioning_schema_do_not_switch_off_structured_output():
    """The reported case: two transient 500s that mention "schema" downgraded for good."""
    def responder(body, n):
        if n < 2:
            return FakeReply(status=500, error="internal error while compiling the json schema grammar")
        return None

    with FakeServer(responder) as server, client_for(server, max_concurrency=1) as client:
        reply = client.run(client.complete_json(MSG, {"type": "object", "properties": {"a": {"type": "string"}}},
                                                lambda v: Checked(v, [])))
        assert reply.ok
        assert client.mode == "json_schema" and client.format_rejections == []
        assert [b["response_format"]["type"] for b in server.requests] == ["json_schema"] * 3


def test_persistent_5xx_fails_the_request_but_keeps_detecting():
    def responder(body, n):
        return FakeReply(status=503, error="schema service unavailable") if n < 2 else None

    with FakeServer(responder) as server, client_for(server, max_retries=1) as client:
        schema = {"type": "object"}
        first = client.run(client.complete_json(MSG, schema, lambda v: Checked(v, [])))
        assert not first.ok and "HTTP 503" in first.error and client.mode is None
        second = client.run(client.complete_json(MSG, schema, lambda v: Checked(v, [])))
        assert second.ok and client.mode == "json_schema"


@pytest.mark.parametrize("status,text", [(400, "response_format of type json_schema is not supported"),
                                         (422, "Unsupported value: 'response_format.type' does not support "
                                               "'json_schema' with this model")])
def test_definite_4xx_rejection_downgrades(status, text):
    def responder(body, n):
        if body.get("response_format", {}).get("type") == "json_schema":
            return FakeReply(status=status, error=text)
        return None

    with FakeServer(responder) as server, client_for(server) as client:
        reply = client.run(client.complete_json(MSG, {"type": "object"}, lambda v: Checked(v, [])))
        assert reply.ok and client.mode == "json_object"
        assert len(client.format_rejections) == 1 and f"HTTP {status}" in client.format_rejections[0]


def test_llama_cpp_python_validation_500_still_downgrades():
    with FakeServer(reject_json_schema=True) as server, client_for(server) as client:
        assert client.run(client.complete_json(MSG, {"type": "object"}, lambda v: Checked(v, []))).ok
        assert client.mode == "json_object"


# ---------------------------------------------------------------- 6. the embedded server
def _running(pid: int) -> bool:
    """Alive and not a zombie (a container's init may not reap orphans at once)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
    except OSError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


_CHILD = textwrap.dedent("""
    import sys, threading, time
    from socialgym.llm import local_server

    def serve():
        with local_server() as server:
            print(server.pid, flush=True)
            time.sleep(600)

    if sys.argv[1] == "thread":          # started from another thread: no PDEATHSIG, the pipe alone
        threading.Thread(target=serve).start()
    else:
        serve()
""")


@pytest.mark.slow
@pytest.mark.parametrize("started_from", ["main", "thread"])
def test_embedded_server_dies_with_its_killed_parent(started_from):
    need_embedded_model()
    child = subprocess.Popen([sys.executable, "-c", _CHILD, started_from], stdout=subprocess.PIPE, text=True)
    try:
        line = child.stdout.readline()
        assert line.strip().isdigit(), f"the child printed {line!r}"
        pid = int(line)
        assert _running(pid)
    finally:
        child.send_signal(signal.SIGKILL)                   # kill -9: no finally, no atexit
        child.wait(10)
    deadline = time.monotonic() + 60          # the watchdog notices within a second or two; generous under load
    while _running(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if _running(pid):                                       # clean up before failing
        os.kill(pid, signal.SIGKILL)
        pytest.fail(f"the llama.cpp server {pid} outlived its parent")


@pytest.mark.slow
def test_embedded_server_requires_its_own_key(monkeypatch):
    need_embedded_model()
    from socialgym.llm import local_server

    monkeypatch.setenv("PORT", "1")                          # the server's settings must not follow it
    monkeypatch.setenv("API_KEY", "inherited")
    with local_server() as server:
        assert len(server.api_key) >= 20 and server.api_key not in repr(server)
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Bearer inherited"}):
            with pytest.raises(urllib.error.HTTPError) as info:
                urllib.request.urlopen(urllib.request.Request(f"{server.base_url}/models", headers=headers),
                                       timeout=10)
            assert info.value.code == 401
        ok = urllib.request.Request(f"{server.base_url}/models",
                                    headers={"Authorization": f"Bearer {server.api_key}"})
        with urllib.request.urlopen(ok, timeout=10) as response:
            assert response.status == 200
        if os.path.exists(f"/proc/{server.pid}/cmdline"):
            with open(f"/proc/{server.pid}/cmdline", "rb") as f:
                assert server.api_key.encode() not in f.read()     # not visible to other users in ps
        with LLMClient(server.base_url, server.model, api_key="wrong-key-1234") as client:
            with pytest.raises(LLMAuthError, match="HTTP 401"):
                client.run(client.chat(MSG, max_tokens=4))
        with LLMClient(server.base_url, server.model, api_key=server.api_key) as client:
            assert isinstance(client.run(client.chat(MSG, max_tokens=4)), str)


# ------------------------------------------------------------------ found by the reliability probe
def test_absurd_token_counts_and_deep_nesting_do_not_crash(tmp_path):
    """Probe: usage.prompt_tokens = 10**30 crashed the cache (SQLite INTEGER overflow); a reply of
    100,000 '[' raised RecursionError from the JSON parser."""
    from socialgym.llm.cache import ResponseCache
    from socialgym.llm.schemas import parse_json

    cache = ResponseCache(tmp_path / "c.sqlite")
    assert cache.put("k", "hello", 10**30, 5) is True
    assert cache.get("k") == ("hello", 0, 5)
    with pytest.raises(ValueError, match="nests arrays or objects too deeply"):
        parse_json("[" * 100_000)
    with pytest.raises(ValueError):
        parse_json("{" + '"a":' * 50_000 + "1}")


def test_a_damaged_cache_row_is_a_miss(tmp_path):
    """Probe: a cache whose reply column held a blob crashed the resumed run (bytes not JSON)."""
    import sqlite3

    from socialgym.llm.cache import ResponseCache

    cache = ResponseCache(tmp_path / "c.sqlite")
    cache.put("k", "hello", 1, 1)
    cache.close()
    db = sqlite3.connect(tmp_path / "c.sqlite")
    db.execute("UPDATE responses SET reply = ?", (b"\x00\xff",))
    db.commit()
    db.close()
    cache = ResponseCache(tmp_path / "c.sqlite")
    assert cache.get("k") is None and cache.misses == 1 and cache.hits == 0
