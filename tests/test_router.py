"""Several servers behind one LLMClient (socialgym.llm.router), all on loopback FakeServers:
affinity and weights, binding, failover when a server dies, the breaker, the cache across
server counts, per-endpoint keys and structured-output forms, the route-event log."""

from __future__ import annotations

import asyncio
import json
import pickle
import threading
import time

import pytest
from capabilities import need_module

need_module("openai")

from socialgym.llm import LLMClient, LLMError, LLMModelError, open_client  # noqa: E402
from socialgym.llm.router import Endpoint  # noqa: E402
from socialgym.llm.schemas import Checked  # noqa: E402
from socialgym.llm.testing import FakeReply, FakeServer  # noqa: E402
from socialgym.llm.usage import Call, Usage  # noqa: E402

AGENTS = [f"agent_{i}" for i in range(12)]
SCHEMA = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 9}}, "required": ["n"]}
FAST = {"backoff": 0.001, "max_backoff": 0.01}


def message(agent: str | None, i: int) -> list[dict]:
    return [{"role": "user", "content": f"I am {agent}; this is message {i}."}]


def agent_of(body: dict) -> str:
    return body["messages"][0]["content"].split(";")[0].removeprefix("I am ")


class FakeClock:
    """The router's clock (breaker cooldowns) moved by hand: a cooldown is over when the test
    says so, however slowly a loaded machine runs the requests in between."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def with_fake_clock(client: LLMClient) -> FakeClock:
    client.router.clock = clock = FakeClock()
    return clock


def client_over(servers, weights=None, **kwargs) -> LLMClient:
    weights = weights or [1.0] * len(servers)
    endpoints = [Endpoint(s.base_url, s.model, weight=w) for s, w in zip(servers, weights)]
    return LLMClient(endpoints=endpoints, **{**FAST, **kwargs})


async def agent_requests(client, agent, n, schema_every=0):
    out = {}
    for i in range(n):
        if schema_every and i % schema_every == 0:
            reply = await client.complete_json(message(agent, i), SCHEMA, lambda v: Checked(v, []), agent=agent)
            assert reply.ok, reply.error
            out[(agent, i)] = reply.raw
        else:
            out[(agent, i)] = await client.chat(message(agent, i), agent=agent)
    return out


def run_agents(client, agents, n, schema_every=0) -> dict:
    async def everyone():
        parts = await asyncio.gather(*(agent_requests(client, a, n, schema_every) for a in agents))
        return {k: v for part in parts for k, v in part.items()}
    return client.run(everyone())


class Fakes:
    """Several FakeServers started and stopped together."""

    def __init__(self, *servers: FakeServer) -> None:
        self.servers = servers

    def __enter__(self):
        for s in self.servers:
            s.start()
        return self.servers

    def __exit__(self, *exc):
        for s in self.servers:
            s.stop()


# ---------------------------------------------------------------- affinity and weights
@pytest.mark.parametrize("weights,expected", [
    ((1, 1, 1), [[0, 3, 6, 9], [1, 4, 7, 10], [2, 5, 8, 11]]),
    # first requests in agent order; fewest agents per weight, then fewest in flight per weight:
    # a0 e0, a1 e1, a2 e2, a3 e0, a4 e0 (tie 1/1/1, e0 has 2 in flight / 2), a5 e1, a6 e2, ...
    ((2, 1, 1), [[0, 3, 4, 7, 8, 11], [1, 5, 9], [2, 6, 10]]),
])
def test_each_agent_stays_on_one_server_and_agents_spread_by_weight(weights, expected):
    with Fakes(*(FakeServer(latency=0.01) for _ in range(3))) as servers, client_over(servers, weights) as client:
        run_agents(client, AGENTS, 5)
        for server, indices in zip(servers, expected):
            assert sorted({agent_of(b) for b in server.requests}, key=AGENTS.index) == [AGENTS[i] for i in indices]
            assert len(server.requests) == 5 * len(indices)
        stats = client.endpoint_stats()
        assert [stats[name]["agents"] for name in ("e0", "e1", "e2")] == [len(i) for i in expected]
        assert [stats[name]["requests"] for name in ("e0", "e1", "e2")] == [5 * len(i) for i in expected]
        assert client.route_events == []
        assert client.usage.by_endpoint()["e0"]["requests"] == 5 * len(expected[0])


def test_requests_without_agent_go_where_fewest_are_in_flight_per_weight():
    # four at once, weights 3 and 1: e0 (0/3), e1 (0 < 1/3), e0 (1/3 < 1), e0 (2/3 < 1)
    with Fakes(FakeServer(latency=0.2), FakeServer(latency=0.2)) as servers, \
            client_over(servers, [3, 1]) as client:
        async def four():
            return await asyncio.gather(*(client.chat(message(None, i)) for i in range(4)))
        client.run(four())
        assert [len(s.requests) for s in servers] == [3, 1]
        assert client.endpoint_stats()["e0"]["peak_in_flight"] == 3


# ---------------------------------------------------------------- binding
def test_bound_agent_uses_only_its_endpoint_even_when_slow():
    with Fakes(FakeServer(latency=0.3), FakeServer(), FakeServer()) as servers, \
            LLMClient(endpoints=[Endpoint(servers[0].base_url, "fake-model", name="slow"),
                                 Endpoint(servers[1].base_url, "fake-model", name="quick"),
                                 Endpoint(servers[2].base_url, "fake-model")], **FAST) as client:
        client.bind(["agent_x"], ["slow"])

        async def burst():        # four requests at once while the other two servers are idle
            return await asyncio.gather(*(client.chat(message("agent_x", i), agent="agent_x") for i in range(4)))
        client.run(burst())
        assert len(servers[0].requests) == 4 and servers[0].peak_in_flight == 4
        assert servers[1].requests == [] and servers[2].requests == []
        run_agents(client, ["agent_y", "agent_z"], 1)      # unbound agents: the first two free endpoints
        assert len(servers[0].requests) == 4          # "slow" has 1 agent, the others none: quick, e2
        assert [agent_of(b) for b in servers[1].requests + servers[2].requests] == ["agent_y", "agent_z"]
        with pytest.raises(ValueError, match="unknown endpoint name.*fast.*known: slow, quick, e2"):
            client.bind(["agent_x"], ["fast"])


def test_bound_pool_fails_over_only_inside_the_pool():
    down = FakeReply(status=503, error="overloaded")
    with Fakes(FakeServer(lambda b, n: down), FakeServer(), FakeServer()) as servers, \
            client_over(servers, max_retries=1) as client:
        client.bind(["a"], ["e0", "e1"])
        assert client.run(client.chat(message("a", 0), agent="a")) == "hello"
        assert [len(s.requests) for s in servers] == [1, 1, 0]
        (event,) = client.route_events
        assert (event["kind"], event["endpoint"], event["to"], event["agent"]) == ("failover", "e0", "e1", "a")
        client.bind(["b"], ["e0"])                # a pool of one: retried there, then failed as today
        with pytest.raises(LLMError, match=r"HTTP 503.*after 2 attempt"):
            client.run(client.chat(message("b", 0), agent="b"))
        assert [len(s.requests) for s in servers] == [3, 1, 0]


# ---------------------------------------------------------------- failover and the breaker
def test_a_server_dying_mid_run_loses_no_request_and_replies_as_one_server():
    servers = (FakeServer(deterministic=True), FakeServer(deterministic=True, kill_after=10),
               FakeServer(deterministic=True))
    with Fakes(*servers), client_over(servers) as client:
        events = []
        client.on_route_event = events.append
        replies = run_agents(client, AGENTS, 6, schema_every=3)
        assert client.usage.total()["failed"] == 0 and len(replies) == 72
        assert servers[1].killed and len(servers[1].requests) == 10
        # e1 served agents 1, 4, 7 and 10. Each failed there once and moved with its affinity,
        # except one whose next request came after the breaker opened (3 failures): moved unfailed
        failovers = [e for e in client.route_events if e["kind"] == "failover"]
        assert len(failovers) in (3, 4) and len({e["agent"] for e in failovers}) == len(failovers)
        assert {e["agent"] for e in failovers} <= {"agent_1", "agent_4", "agent_7", "agent_10"}
        assert {e["endpoint"] for e in failovers} == {"e1"} and {e["to"] for e in failovers} <= {"e0", "e2"}
        assert all("Connection" in e["reason"] or "disconnected" in e["reason"] for e in failovers)
        assert [e["endpoint"] for e in client.route_events if e["kind"] == "breaker_open"] == ["e1"]
        assert events == client.route_events
        stats = client.endpoint_stats()
        assert (stats["e1"]["state"], stats["e1"]["failed"], stats["e1"]["failovers"], stats["e1"]["agents"]) == \
            ("open", len(failovers), len(failovers), 0)
        assert stats["e0"]["agents"] + stats["e2"]["agents"] == 12
    with FakeServer(deterministic=True) as single, LLMClient(single.base_url, "fake-model", **FAST) as client:
        assert run_agents(client, AGENTS, 6, schema_every=3) == replies


def test_breaker_opens_then_half_opens_after_the_cooldown_and_closes_on_success():
    down = {"now": True}

    def flaky(body, n):
        return FakeReply(status=503, error="overloaded") if down["now"] else "back"

    with Fakes(FakeServer(flaky), FakeServer(lambda b, n: "spare")) as (a, b), \
            client_over((a, b), breaker_failures=2, breaker_cooldown=1.0) as client:
        clock = with_fake_clock(client)
        ask = lambda i: client.run(client.chat(message(None, i)))    # noqa: E731
        assert [ask(0), ask(1)] == ["spare", "spare"]      # each tried e0 first, then moved
        assert client.endpoint_stats()["e0"]["state"] == "open"
        clock.advance(0.9)
        assert ask(2) == "spare" and len(a.requests) == 2           # open within the cooldown: skipped
        down["now"] = False
        clock.advance(0.2)                                          # 1.1 s since it opened
        assert ask(3) == "back"                                     # the trial request
        assert [e["kind"] for e in client.route_events] == [
            "failover", "breaker_open", "failover", "breaker_half_open", "breaker_closed"]
        assert [len(a.requests), len(b.requests)] == [3, 3]
        assert client.endpoint_stats()["e0"]["state"] == "closed"
        assert "2 failed attempt(s) in a row: HTTP 503: overloaded" in client.route_events[1]["reason"]


def test_a_failed_trial_opens_the_breaker_again():
    with Fakes(FakeServer(lambda b, n: FakeReply(status=500, error="down")), FakeServer()) as (a, b), \
            client_over((a, b), breaker_failures=1, breaker_cooldown=1.0) as client:
        clock = with_fake_clock(client)
        client.run(client.chat(message(None, 0)))
        clock.advance(1.1)
        client.run(client.chat(message(None, 1)))
        clock.advance(0.9)
        client.run(client.chat(message(None, 2)))              # within the new cooldown: e0 is open again
        assert [e["kind"] for e in client.route_events] == [
            "breaker_open", "failover", "breaker_half_open", "breaker_open", "failover"]
        assert [len(a.requests), len(b.requests)] == [2, 3]


def test_a_cancelled_trial_leaves_the_breaker_open_for_the_next_trial():
    def down_then_slow(body, n):
        return FakeReply(status=503, error="down") if n == 0 else FakeReply(content="late", delay=60.0)

    with Fakes(FakeServer(down_then_slow), FakeServer()) as (a, b), \
            client_over((a, b), breaker_failures=1, breaker_cooldown=0.5) as client:
        clock = with_fake_clock(client)
        client.run(client.chat(message(None, 0)))
        clock.advance(0.6)
        with pytest.raises(asyncio.TimeoutError):        # the caller gives up on the trial
            client.run(asyncio.wait_for(client.chat(message(None, 1)), 0.3))
        assert client.endpoint_stats()["e0"]["state"] == "open"
        assert [e["kind"] for e in client.route_events] == [
            "breaker_open", "failover", "breaker_half_open", "breaker_open"]
        assert client.route_events[-1]["reason"] == "the trial request was cancelled"
        assert len(a.requests) == 2 and len(b.requests) == 1


def test_failovers_do_not_use_up_retries_and_are_bounded_when_every_server_fails():
    # e0 fails, over to e1; e1 fails, over to e0; e0 fails again: no third failover (e0 was
    # left once already), 1 counted attempt <= max_retries=1: back off, retry (e0), fail: 4 in all
    down = FakeReply(status=503, error="down")
    with Fakes(FakeServer(lambda b, n: down), FakeServer(lambda b, n: down)) as (a, b), \
            client_over((a, b), max_retries=1) as client:
        with pytest.raises(LLMError, match=r"after 4 attempt\(s\)"):
            client.run(client.chat(message(None, 0)))
        assert [len(a.requests), len(b.requests)] == [3, 1]
        assert [(e["kind"], e["endpoint"], e["to"]) for e in client.route_events] == [
            ("failover", "e0", "e1"), ("failover", "e1", "e0"), ("breaker_open", "e0", None)]
        (call,) = client.usage.calls
        assert (call.attempts, call.ok, call.endpoint) == (4, False, "e0")


def test_fatal_statuses_stop_the_whole_client():
    with Fakes(FakeServer(), FakeServer(lambda b, n: FakeReply(status=404, error="no such model"))) as (a, b), \
            client_over((a, b)) as client:
        client.bind(["x"], ["e1"])
        with pytest.raises(LLMModelError, match=r"endpoint e1.*does not serve the model") as info:
            client.run(client.chat(message("x", 0), agent="x"))
        assert info.value.base_url == b.base_url
        with pytest.raises(LLMModelError):             # e0 is fine, but the run stops
            client.run(client.chat(message("y", 0), agent="y"))
        assert a.requests == [] and client.route_events == []


# ---------------------------------------------------------------- cache and usage
def test_a_run_over_three_servers_replays_from_cache_over_one(tmp_path):
    cache = tmp_path / "cache"
    agents = AGENTS[:6]
    servers = [FakeServer(deterministic=True, model="m") for _ in range(3)]
    with Fakes(*servers), client_over(servers, cache=cache) as client:
        first = run_agents(client, agents, 3, schema_every=2)
        assert {m: (u["requests"], u["cached"], u["http_attempts"], u["failed"])
                for m, u in client.usage.by_model().items()} == {"m": (18, 0, 18, 0)}
        assert {k: v["requests"] for k, v in client.usage.by_endpoint().items()} == {"e0": 6, "e1": 6, "e2": 6}
    with FakeServer(model="m") as single, LLMClient(single.base_url, "m", cache=cache) as client:
        assert run_agents(client, agents, 3, schema_every=2) == first
        assert single.requests == []
        assert {m: (u["requests"], u["cached"], u["http_attempts"])
                for m, u in client.usage.by_model().items()} == {"m": (18, 18, 0)}
        assert list(client.usage.by_endpoint()) == [None]


def test_model_sent_is_the_endpoints_and_cached_calls_record_the_pools(tmp_path):
    with Fakes(FakeServer(model="beta"), FakeServer(model="alpha")) as (b, a):
        with client_over((b, a), cache=tmp_path / "c") as client:
            run_agents(client, ["p", "q"], 1)
            assert [r["model"] for r in b.requests + a.requests] == ["beta", "alpha"]
            assert {m: u["requests"] for m, u in client.usage.by_model().items()} == {"beta": 1, "alpha": 1}
        with client_over((a, b), cache=tmp_path / "c") as client:          # the other order: same keys
            run_agents(client, ["p", "q"], 1)
            assert [(c.model, c.cached, c.endpoint) for c in client.usage.calls] == [("alpha,beta", True, None)] * 2


def test_old_pickled_calls_load_without_model_and_endpoint():
    call = Call("a", 1, "plan", 10, 5, 0.2, False, 1, True)
    object.__delattr__(call, "model")          # what a checkpoint from before these fields holds
    object.__delattr__(call, "endpoint")
    usage = Usage()
    usage.record(call)
    blob = pickle.dumps(usage)
    assert b"endpoint" not in blob
    back = pickle.loads(blob)
    assert (back.calls[0].model, back.calls[0].endpoint) == (None, None)
    assert back.by_model()[None]["prompt_tokens"] == 10


# ---------------------------------------------------------------- per-endpoint state
def test_each_endpoint_finds_its_own_structured_output_form():
    with Fakes(FakeServer(), FakeServer(reject_json_schema=True)) as servers, client_over(servers) as client:
        run_agents(client, ["p", "q"], 2, schema_every=1)
        assert [e["mode"] for e in client.config()["endpoints"]] == ["json_schema", "json_object"]
        assert client.mode == "json_schema"
        assert len(client.format_rejections) == 1 and client.format_rejections[0].startswith("e1: json_schema: ")


def test_route_events_survive_a_checkpoint():
    with Fakes(FakeServer(lambda b, n: FakeReply(status=503, error="x")), FakeServer()) as servers:
        with client_over(servers, breaker_failures=1) as client:
            client.run(client.chat(message("a", 0), agent="a"))
            state = pickle.loads(pickle.dumps(client.state_dict()))
            assert [e["kind"] for e in state["route_events"]] == ["breaker_open", "failover"]
        with client_over(servers, breaker_failures=1) as resumed:
            resumed.load_state_dict(state)
            assert resumed.route_events == state["route_events"]
            resumed.run(resumed.chat(message("b", 0), agent="b"))   # a fresh breaker: e0 tried again
            assert [e["kind"] for e in resumed.route_events] == ["breaker_open", "failover"] * 2
            assert resumed.endpoint_stats()["e1"]["agents"] == 2      # "a" kept its endpoint from the checkpoint
        with client_over(servers) as old:                            # a checkpoint from before endpoints
            old.load_state_dict({"occurrences": {}, "usage": Usage(), "mode": "json_object",
                                 "format_rejections": ["json_schema: HTTP 400"]})
            assert old.route_events == [] and old.mode == "json_object"


# ---------------------------------------------------------------- keys
def test_endpoint_keys_never_leak(monkeypatch):
    key_a, key_b = "sk-endpoint-a-secret-0123456789", "sk-endpoint-b-secret-9876543210"
    monkeypatch.setenv("SERVER_B_KEY", key_b)

    def echo(body, n):
        return FakeReply(status=503, error=f"upstream refused {a.headers[n]['authorization']}")

    with Fakes(FakeServer(echo), FakeServer()) as (a, b), \
            LLMClient(endpoints=[Endpoint(a.base_url, "m", api_key=key_a),
                                 {"base_url": b.base_url, "model": "m", "api_key_env": "SERVER_B_KEY"}],
                      max_retries=0, **FAST) as client:
        client.run(client.chat(message("p", 0), agent="p"))
        client.bind(["solo"], ["e0"])
        with pytest.raises(LLMError) as info:
            client.run(client.chat(message("solo", 0), agent="solo"))
        assert a.headers[0]["authorization"] == f"Bearer {key_a}" and b.headers[0]["authorization"] == f"Bearer {key_b}"
        texts = [repr(client), json.dumps(client.config()), json.dumps(client.route_events), str(info.value),
                 repr(Endpoint(a.base_url, "m", api_key=key_a)), json.dumps(client.endpoint_stats()),
                 *(c.error or "" for c in client.usage.calls), pickle.dumps(client.state_dict()).decode("latin-1")]
        assert "***" in client.route_events[0]["reason"] and "***" in str(info.value)
        for text in texts:
            assert key_a not in text and key_b not in text and key_a[:14] not in text


# ---------------------------------------------------------------- validation and set-up
@pytest.mark.parametrize("fields,word", [
    ({"base_url": ""}, "base_url"), ({"model": None}, "model"), ({"max_concurrency": 0}, "max_concurrency"),
    ({"max_concurrency": 2.5}, "max_concurrency"), ({"weight": 0}, "weight"), ({"weight": float("inf")}, "weight"),
    ({"name": ""}, "name"), ({"api_key_env": 3}, "api_key_env")])
def test_bad_endpoint_fields_are_named(fields, word):
    with pytest.raises(ValueError, match=f"Endpoint {word} must"):
        Endpoint(**{"base_url": "http://127.0.0.1:9/v1", "model": "m", **fields})


def test_bad_endpoint_lists_are_refused(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    local = "http://127.0.0.1:9/v1"
    cases = [([Endpoint(local, "m", name="x"), Endpoint(local, "m", name="x")], "used more than once: x"),
             ([Endpoint(local, "m"), Endpoint(local, "m", name="e0")], "used more than once: e0"),
             ([], "at least one"), ([{"base_url": local, "model": "m", "url": 1}], "unknown endpoint key.*url"),
             ([Endpoint("https://llm.example.com/v1", "m", name="far", api_key_env="NOPE_KEY")],
              "no API key for endpoint far: set the environment variable NOPE_KEY")]
    for endpoints, message_part in cases:
        with pytest.raises(ValueError, match=message_part):
            LLMClient(endpoints=endpoints)
    with pytest.raises(ValueError, match="not both"):
        LLMClient(local, "m", endpoints=[Endpoint(local, "m")])
    with pytest.raises(ValueError, match="breaker_failures"):
        LLMClient(local, "m", breaker_failures=0)


def test_open_client_takes_endpoints_and_names_them():
    with Fakes(FakeServer(model="m1"), FakeServer(model="m2")) as (a, b), \
            open_client(endpoints=[{"base_url": a.base_url, "model": "m1", "name": "left", "weight": 2},
                                   {"base_url": b.base_url, "model": "m2"}], max_concurrency=4) as client:
        assert (client.base_url, client.model, list(client.endpoint_stats())) == (a.base_url, "m1", ["left", "e1"])
        assert [e["weight"] for e in client.config()["endpoints"]] == [2.0, 1.0]
        assert client.run(client.chat(message(None, 0))) == "hello" and len(a.requests) == 1


# ---------------------------------------------------------------- the fake servers themselves
def test_deterministic_fakes_answer_equal_requests_equally():
    with Fakes(FakeServer(deterministic=True, seed=1), FakeServer(deterministic=True, seed=2)) as (a, b), \
            LLMClient(endpoints=[Endpoint(a.base_url, "m"), Endpoint(b.base_url, "m")]) as client:
        client.bind(["to_a"], ["e0"])
        client.bind(["to_b"], ["e1"])
        texts = [client.run(client.chat(message("a", 0), agent=agent, seed=3, max_tokens=50))
                 for agent in ("to_a", "to_b")]
        assert texts[0] == texts[1] and texts[0].endswith(".") and len(texts[0].split()) >= 5
        other_seeds = {client.run(client.chat(message("a", 0), agent="to_a", seed=s, max_tokens=50))
                       for s in range(4, 12)}
        assert len(other_seeds) > 1                 # the seed is part of what the reply depends on


def test_kill_drops_requests_in_flight_and_refuses_later_ones():
    with FakeServer(latency=60.0) as server, LLMClient(server.base_url, "m", max_retries=0, timeout=120) as client:
        threading.Timer(0.3, server.kill).start()
        start = time.perf_counter()
        with pytest.raises(LLMError, match="Server disconnected|Connection"):
            client.run(client.chat(message(None, 0)))
        # dropped at the kill (0.3 s), not answered after the server's 60 s; slack for a loaded machine
        assert time.perf_counter() - start < 30 and server.killed
        with pytest.raises(LLMError, match="Connect call failed|Connection refused|ConnectError"):
            client.run(client.chat(message(None, 1)))
        assert len(server.requests) == 1


def test_a_named_key_variable_never_falls_back_to_another_servers_key(monkeypatch):
    """An endpoint whose api_key_env is unset is refused, even with OPENAI_API_KEY set: that key
    belongs to another server and must not be sent to this one."""
    from socialgym.llm.router import Endpoint

    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-key-for-api-openai-com")
    monkeypatch.delenv("GPU_KEY", raising=False)
    named = Endpoint("https://10.0.0.7:8000/v1", "m", name="gpu", api_key_env="GPU_KEY")
    with pytest.raises(ValueError, match="GPU_KEY"):
        named.key()
    monkeypatch.setenv("GPU_KEY", "gpu-secret")
    assert named.key() == "gpu-secret"
    assert Endpoint("https://10.0.0.7:8000/v1", "m").key() == "sk-openai-key-for-api-openai-com"   # none named


@pytest.mark.parametrize("url", ["http://10.0.0.7:8000/v1", "HTTP://gpu.example.org/v1", "http://[2001:db8::1]/v1"])
def test_a_key_never_goes_over_plain_http_to_another_machine(monkeypatch, url):
    """A key sent over plain http to another host can be read on the way; it is refused unless
    the endpoint (llm.allow_plain_http) says the network is private."""
    from socialgym.llm.router import Endpoint, PlainHttpKeyError, client_endpoints

    monkeypatch.setenv("OPENAI_API_KEY", "sk-plain")
    with pytest.raises(PlainHttpKeyError, match="refusing to send an API key over plain http"):
        Endpoint(url, "m").key()
    assert Endpoint(url, "m", allow_plain_http=True).key() == "sk-plain"
    (e,) = client_endpoints(url, "m", None, 4, None, allow_plain_http=True)
    assert e.key() == "sk-plain"
    (e,) = client_endpoints(None, None, None, 4, [{"base_url": url, "model": "m"}], allow_plain_http=True)
    assert e.allow_plain_http is True
    with pytest.raises(ValueError, match="allow_plain_http must be true or false"):
        Endpoint(url, "m", allow_plain_http="yes")
    # loopback over http and anything over https keep working; a keyless loopback server too
    assert Endpoint("http://127.0.0.1:8080/v1", "m").key() == "sk-plain"
    assert Endpoint("https://gpu.example.org/v1", "m").key() == "sk-plain"
    monkeypatch.delenv("OPENAI_API_KEY")
    assert Endpoint("http://localhost:8080/v1", "m").key() == "no-key-required"


def test_a_run_refuses_a_plain_http_key_before_its_directory_exists(tmp_path, monkeypatch, capsys):
    from socialgym.cli import main

    monkeypatch.setenv("OPENAI_API_KEY", "sk-plain-secret")
    config = tmp_path / "c.yaml"
    config.write_text("env: {n_agents: 4, max_rounds: 2}\npolicy: {kind: llm}\n"
                      "llm: {base_url: 'http://10.0.0.7:8000/v1', model: m}\n")
    assert main(["run", str(config), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert "refusing to send the API key over plain http to http://10.0.0.7:8000/v1" in err
    assert "sk-plain-secret" not in err and not (tmp_path / "run").exists()
    endpoints = ("env: {n_agents: 4, max_rounds: 2}\npolicy: {kind: llm}\n"
                 "llm: {endpoints: [{name: gpu, base_url: 'http://10.0.0.7:8000/v1', model: m}]}\n")
    config.write_text(endpoints)
    assert main(["run", str(config), "--out", str(tmp_path / "run")]) == 2
    assert "llm.endpoints: endpoint gpu: refusing to send an API key over plain http" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()
