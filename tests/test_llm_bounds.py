"""Bounded LLM calls (issue 28, item 4), against the loopback fake server.

- ``timeout`` is a deadline for one whole HTTP attempt: a server that trickles its body a few
  bytes at a time (each read well within the per-read timeout) is cut off at the deadline;
- ``max_reply_bytes`` caps a reply while it is read: a 30 MiB body is refused at its
  Content-Length, or after the cap when its size is not announced, and a small gzip body that
  would decode past the cap too; the memory the request allocates stays a few MiB;
- ``max_retry_wait``: a 429 asking to wait an hour fails at once, naming the 429, the wait and
  the cap; a short Retry-After is waited for, then the request succeeds;
- ``interview`` raises when its request fails: ``LLMModelError`` on a 404, ``RunError`` naming
  the server when it is down (``socialgym interview`` exits 2 with one line).
"""

from __future__ import annotations

import asyncio
import gzip
import json
import math
import socket
import time
import tracemalloc

import pytest
from capabilities import need_module

need_module("openai")

from socialgym.experiments import RunError, load_config, run_experiment  # noqa: E402
from socialgym.llm import LLMClient  # noqa: E402
from socialgym.llm.client import LLMError, LLMModelError, LLMServerDown  # noqa: E402
from socialgym.llm.testing import FakeReply, FakeServer  # noqa: E402

MSG = [{"role": "user", "content": "hi"}]
MiB = 2**20
BACKENDS = ["httpx", "aiohttp"]


def completion(content: str = "hello there", pad: int = 0) -> bytes:
    """A chat completion's body, ``pad`` spaces longer (JSON ignores them)."""
    body = json.dumps({"id": "x", "object": "chat.completion", "usage": {"prompt_tokens": 3, "completion_tokens": 2},
                       "choices": [{"index": 0, "message": {"role": "assistant", "content": content}}]})
    return body.encode() + b" " * pad


def warm(client: LLMClient) -> None:
    """One good request first: the openai import and connection set-up are not measured."""
    assert client.run(client.chat([{"role": "user", "content": "warm-up"}])) == "hello"


class SleepSpy:
    """Stands in for ``asyncio`` inside socialgym.llm.client: records each wait the client asks
    for (``waits``) and waits it for real; every other name is asyncio's. What the client waited
    for is then read off ``waits``, not off a wall clock that a loaded machine stretches."""

    def __init__(self):
        self.waits: list[float] = []

    def __getattr__(self, name):
        return getattr(asyncio, name)

    async def sleep(self, delay, *args, **kwargs):
        self.waits.append(float(delay))
        return await asyncio.sleep(delay, *args, **kwargs)


@pytest.fixture
def waits(monkeypatch) -> list[float]:
    """The waits (seconds) the LLM client asks for between attempts, in order."""
    import socialgym.llm.client as client_module

    spy = SleepSpy()
    monkeypatch.setattr(client_module, "asyncio", spy)
    return spy.waits


def peak_allocated(call) -> tuple[float, object]:
    """(MiB allocated at the peak while ``call()`` ran, its result or the exception raised)."""
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        try:
            out = call()
        except Exception as exc:      # noqa: BLE001 - the caller checks what it was
            out = exc
        return (tracemalloc.get_traced_memory()[1] - base) / MiB, out
    finally:
        tracemalloc.stop()


# ------------------------------------------------------------------ 1. a deadline per attempt
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_trickling_server_is_cut_off_at_the_deadline(backend):
    slow = {"on": False}
    body = completion("hello " * 100)              # ~690 bytes at 2 bytes / 0.05 s: ~17 s to send

    def responder(b, n):
        return FakeReply(raw=body, trickle=(2, 0.05)) if slow["on"] else None

    timeout, attempts = 0.4, 2
    with FakeServer(responder) as server, LLMClient(server.base_url, "fake", timeout=timeout, max_retries=attempts - 1,
                                                    backoff=0.01, max_backoff=0.01, http_backend=backend) as client:
        warm(client)
        slow["on"] = True
        start = time.perf_counter()
        with pytest.raises(LLMError, match=r"timed out: no complete reply within the timeout of 0\.4 s") as err:
            client.run(client.chat(MSG, agent="a", round=1, purpose="write"))
        elapsed = time.perf_counter() - start
        # each attempt got its whole 0.4 s (the server was still sending), and the deadline cut
        # it off: without one each attempt reads for ~17 s. The upper bound leaves a loaded
        # machine 2 s of slack over the 0.8 s, still far below one uncut attempt.
        assert timeout * attempts - 0.05 <= elapsed <= timeout * attempts + 2.0, elapsed
        assert "after 2 attempt(s)" in str(err.value)
        assert len(server.requests) == 1 + attempts
        assert 0 < server.body_bytes_sent < len(body) / 4          # cut off early, not nearly done
        call = client.usage.calls[-1]
        assert (call.attempts, call.ok, call.purpose) == (attempts, False, "write")
        reply = client.run(client.complete_text(MSG))               # the policies' fallback path
        assert not reply.ok and reply.error.startswith("request failed: timed out")
        slow["on"] = False
        assert client.run(client.chat([{"role": "user", "content": "after"}])) == "hello"


def test_a_slow_but_steady_reply_within_the_deadline_is_read():
    with FakeServer(lambda b, n: FakeReply(raw=completion(), trickle=(40, 0.01))) as server, \
            LLMClient(server.base_url, "fake", timeout=5, max_retries=0) as client:
        assert client.run(client.chat(MSG)) == "hello there"


# ------------------------------------------------------------------ 2. a cap on the reply's size
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("announced", [True, False], ids=["content-length", "chunked"])
def test_a_30_mib_reply_is_refused_at_the_cap(backend, announced):
    huge = {"on": False}

    def responder(b, n):        # 30 MiB, sent a MiB at a time (the server never holds it whole)
        return FakeReply(raw=b"x" * MiB, repeat=30, chunked=not announced) if huge["on"] else None

    with FakeServer(responder) as server, LLMClient(server.base_url, "fake", max_retries=3, backoff=0.01,
                                                    max_reply_bytes=MiB, http_backend=backend) as client:
        warm(client)
        huge["on"] = True
        start = time.perf_counter()
        peak, err = peak_allocated(lambda: client.run(client.chat(MSG)))
        elapsed = time.perf_counter() - start
        assert isinstance(err, LLMError), err
        assert "larger than max_reply_bytes=1048576" in str(err) or "more than max_reply_bytes=1048576" in str(err)
        assert ("31457280 bytes (Content-Length)" in str(err)) == announced
        assert "after 1 attempt(s)" in str(err) and len(server.requests) == 2      # not retried
        # bounded: the client allocated a few MiB, not the 30 MiB body and its copies (61 MiB uncapped)
        assert peak < 12, f"{peak:.1f} MiB allocated"
        assert server.body_bytes_sent < 20 * MiB                    # the client hung up
        assert elapsed < 60                 # did not hang (the bytes sent above show the early hang-up)
        huge["on"] = False
        assert client.run(client.chat([{"role": "user", "content": "after"}])) == "hello"


def test_a_small_gzip_body_that_decodes_past_the_cap_is_refused():
    bomb = gzip.compress(b'{"choices": [{"message": {"content": "' + b"a" * 30 * MiB + b'"}}]}')
    with FakeServer() as server, LLMClient(server.base_url, "fake", max_reply_bytes=MiB) as client:
        warm(client)
        server.responder = lambda b, n: FakeReply(raw=bomb, headers={"content-encoding": "gzip"})
        peak, err = peak_allocated(lambda: client.run(client.chat(MSG)))
        assert isinstance(err, LLMError) and "larger than max_reply_bytes=1048576" in str(err) and "decoded" in str(err)
        assert len(bomb) < MiB and len(server.requests) == 2                      # not retried
        assert peak < 12, f"{peak:.1f} MiB allocated"      # (90 MiB when httpx decodes it all)


@pytest.mark.parametrize("chunked", [False, True])
def test_the_cap_is_inclusive_and_a_gzip_reply_under_it_is_read(chunked):
    body = completion(pad=1000)
    ok = FakeReply(raw=body, chunked=chunked, trickle=(100, 0.0))
    with FakeServer(lambda b, n: ok) as server:
        with LLMClient(server.base_url, "fake", max_reply_bytes=len(body), max_retries=0) as client:
            assert client.run(client.chat(MSG)) == "hello there"
        with LLMClient(server.base_url, "fake", max_reply_bytes=len(body) - 1, max_retries=0) as client:
            with pytest.raises(LLMError, match=f"max_reply_bytes={len(body) - 1}"):
                client.run(client.chat(MSG))
    zipped = FakeReply(raw=gzip.compress(body), headers={"content-encoding": "gzip"})
    with FakeServer(lambda b, n: zipped) as server, LLMClient(server.base_url, "fake", max_reply_bytes=len(body)) as client:
        assert client.run(client.chat(MSG)) == "hello there"


# ------------------------------------------------------------------ 3. a cap on Retry-After
def test_a_429_asking_for_an_hour_fails_at_once_naming_it(waits):
    hour = FakeReply(status=429, error="rate limited", headers={"retry-after": "3600"})
    with FakeServer(lambda b, n: hour) as server, LLMClient(server.base_url, "fake", max_retries=3,
                                                            max_retry_wait=1) as client:
        start = time.perf_counter()
        with pytest.raises(LLMError) as err:
            client.run(client.chat(MSG))
        elapsed = time.perf_counter() - start
        text = str(err.value)
        assert "HTTP 429" in text and "3600 s" in text and "Retry-After" in text and "max_retry_wait=1 s" in text
        assert waits == [] and len(server.requests) == 1              # it did not wait, nor retry
        assert elapsed < 60                                           # (nor hang)


def test_the_policies_record_the_long_retry_after_as_their_fallback_reason(waits):
    import socialgym
    from socialgym.agents import LLMPolicy, generate_personas

    hour = FakeReply(status=429, headers={"retry-after": "3600"})
    with FakeServer(lambda b, n: hour) as server, LLMClient(server.base_url, "fake", max_retry_wait=1) as client:
        policy = LLMPolicy(client, generate_personas(2, seed=0))
        env = socialgym.parallel_env(n_agents=2, max_rounds=1, seed=0, recommender="random")
        obs, _ = env.reset(seed=0)
        start = time.perf_counter()
        env.step(policy.act(obs))
        assert waits == [] and time.perf_counter() - start < 60        # no wait, no hang
        falls = client.usage.fallback_rows()
        assert falls and all("HTTP 429" in f["reason"] and "3600 s" in f["reason"]
                             and "max_retry_wait=1 s" in f["reason"] for f in falls)


def test_a_short_retry_after_within_the_cap_is_waited_for(waits):
    def responder(b, n):
        return FakeReply(status=429, headers={"retry-after": "0.3"}) if n == 0 else None

    with FakeServer(responder) as server, LLMClient(server.base_url, "fake", max_retry_wait=1,
                                                    backoff=5.0, max_backoff=5.0) as client:
        start = time.perf_counter()
        assert client.run(client.chat(MSG)) == "hello"
        elapsed = time.perf_counter() - start
        assert waits == [pytest.approx(0.3)]      # the server's 0.3 s, not the 2.5-7.5 s of the backoff
        assert elapsed >= 0.3, elapsed            # and it was waited for
        assert len(server.requests) == 2 and client.usage.calls[-1].attempts == 2


# ------------------------------------------------------------------ arguments
@pytest.mark.parametrize("kwargs, word", [
    ({"max_reply_bytes": 0}, "max_reply_bytes"), ({"max_reply_bytes": 1.5}, "max_reply_bytes"),
    ({"max_reply_bytes": True}, "max_reply_bytes"), ({"max_reply_bytes": "4MB"}, "max_reply_bytes"),
    ({"max_retry_wait": -1}, "max_retry_wait"), ({"max_retry_wait": math.nan}, "max_retry_wait"),
    ({"max_retry_wait": math.inf}, "max_retry_wait"), ({"max_retry_wait": "60"}, "max_retry_wait"),
    ({"timeout": math.nan}, "timeout"), ({"timeout": math.inf}, "timeout"), ({"timeout": 0}, "timeout")])
def test_bad_bounds_are_value_errors_naming_them(kwargs, word):
    with pytest.raises(ValueError, match=word):
        LLMClient("http://127.0.0.1:9/v1", "m", **kwargs)


def test_the_bounds_are_in_the_config():
    client = LLMClient("http://127.0.0.1:9/v1", "m", max_reply_bytes=123456, max_retry_wait=0)
    assert client.config()["max_reply_bytes"] == 123456 and client.config()["max_retry_wait"] == 0.0
    default = LLMClient("http://127.0.0.1:9/v1", "m").config()
    assert (default["max_reply_bytes"], default["max_retry_wait"]) == (4 * MiB, 60.0)


# ------------------------------------------------------------------ 4. interviews that fail
def _interviewee(client):
    from socialgym.agents import LLMPolicy, generate_personas

    policy = LLMPolicy(client, generate_personas(1, seed=0))
    policy.assign_personas(["agent_0"])
    return policy


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_interview_raises_on_a_404_and_on_a_server_that_is_down():
    from socialgym.experiments.run.surveys import interview

    with FakeServer(lambda b, n: FakeReply(status=404, error="The model `fake` does not exist")) as server, \
            LLMClient(server.base_url, "fake", max_retries=0) as client:
        with pytest.raises(LLMModelError, match="does not serve the model"):
            interview(_interviewee(client), "agent_0", "Anything to add?", client, round=0)
        with pytest.raises(LLMModelError):
            interview(_interviewee(client), "agent_0", "How do you rate it?", client, round=0, scale="0-10")
    down = f"http://127.0.0.1:{_closed_port()}/v1"
    with LLMClient(down, "fake", max_retries=1, backoff=0.01) as client:
        for n, scale in enumerate(("text", "likert5"), start=1):
            with pytest.raises(LLMServerDown) as err:          # no server there: named as a run's round is
                interview(_interviewee(client), "agent_0", "Anything to add?", client, round=0, scale=scale)
            text = str(err.value)
            assert text.startswith(f"interview of agent_0: every one of the {n} LLM request(s) of round 0 found no "
                                   f"server to connect to ({down}); last error: ")
            assert "ConnectionRefusedError" in text and "after 2 attempt(s)" in text and "\n" not in text
        assert client.usage.fallbacks == []                # an error, not an empty answer


def test_socialgym_interview_exits_2_on_a_404_and_6_on_a_down_server(tmp_path, capsys):
    from socialgym.cli import main

    config = {"seed": 1, "env": {"n_agents": 2, "max_rounds": 1, "recommender": "random"},
              "policy": {"groups": [{"name": "llm", "kind": "llm", "agents": 1}, {"name": "bot", "kind": "greedy"}]},
              "llm": {"model": "fake", "api_key": "sk-test", "max_retries": 0, "cache": False},
              "logging": {"report": False, "progress": False}}
    ask = ["interview", str(tmp_path / "run"), "--agent", "agent_0", "Anything to add?"]
    with FakeServer() as server:
        config["llm"]["base_url"] = server.base_url
        run_experiment(load_config(config), tmp_path / "run")
        assert main(ask) == 0                                          # the success path as before
        record = json.loads(capsys.readouterr().out)
        assert record["status"] == "ok" and record["answer"]
        server.responder = lambda b, n: FakeReply(status=404, error="no such model: fake")
        assert main(ask) == 2
        err = capsys.readouterr().err
        assert err.startswith("socialgym: error: the LLM server at ") and "404" in err and err.count("\n") == 1
    assert main(ask) == 6                                              # the server is gone now
    out, err = capsys.readouterr()
    assert not out
    assert err.startswith("socialgym: error: interview of agent_0: every one of the 1 LLM request(s) of round 1 "
                          f"found no server to connect to ({server.base_url}); ") and err.count("\n") == 1
    assert "ConnectionRefusedError" in err and "after 1 attempt(s)" in err
