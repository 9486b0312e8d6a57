"""A per-request ``seed=`` on ``LLMClient.chat`` / ``complete_json`` / ``complete_text``: it
replaces the client's seed in the request sent and in the cache key (FakeServer on loopback)."""

from __future__ import annotations

import pytest
from capabilities import need_module

need_module("openai")

from socialgym.llm import LLMClient, ResponseCache  # noqa: E402
from socialgym.llm.schemas import Checked  # noqa: E402
from socialgym.llm.testing import FakeServer  # noqa: E402

MSG = [{"role": "user", "content": "say something"}]
SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


def check_n(value) -> Checked:
    if isinstance(value, dict) and isinstance(value.get("n"), int):
        return Checked(value, [])
    return Checked(None, ["n must be an integer"])


def test_seed_replaces_the_clients_seed_in_every_body():
    replies = iter(["not json", '{"n": 2}'])        # complete_json: one repair, then valid

    def responder(body, n):
        return next(replies) if body.get("response_format") else None

    with FakeServer(responder) as server, LLMClient(server.base_url, "fake", seed=7) as client:
        client.run(client.chat(MSG, seed=11))
        client.run(client.chat(MSG))
        client.run(client.chat(MSG, seed=0))               # 0 is a seed, not "no seed"
        text = client.run(client.complete_text(MSG, seed=3))
        reply = client.run(client.complete_json(MSG, SCHEMA, check_n, seed=5))
        assert text.ok and reply.ok and reply.repairs == 1 and reply.checked.value == {"n": 2}
        assert [b["seed"] for b in server.requests] == [11, 7, 0, 3, 5, 5]
        assert "not valid JSON" in server.requests[5]["messages"][-1]["content"]   # the re-prompt


def test_no_seed_anywhere_sends_none():
    with FakeServer() as server, LLMClient(server.base_url, "fake") as client:
        client.run(client.chat(MSG))
        client.run(client.chat(MSG, seed=4))
        assert "seed" not in server.requests[0] and server.requests[1]["seed"] == 4


def test_different_seeds_are_different_cache_entries_and_a_rerun_replays(tmp_path):
    cache = tmp_path / "cache"
    with FakeServer(lambda body, n: f"reply {n} to seed {body.get('seed')}") as server:
        with LLMClient(server.base_url, "fake", seed=1, cache=cache) as client:
            first = [client.run(client.chat(MSG, seed=s)) for s in (21, 22)]
        assert first == ["reply 0 to seed 21", "reply 1 to seed 22"]
        assert len(server.requests) == 2 and len(ResponseCache(cache)) == 2
        with LLMClient(server.base_url, "fake", seed=1, cache=cache) as client:
            again = [client.run(client.chat(MSG, seed=s)) for s in (21, 22)]
            fresh = client.run(client.chat(MSG, seed=23))       # a seed not seen before is sent
            assert [c.cached for c in client.usage.calls] == [True, True, False]
        assert again == first and fresh == "reply 2 to seed 23"
        assert len(server.requests) == 3 and len(ResponseCache(cache)) == 3


def test_the_clients_seed_and_an_equal_request_seed_share_the_cache_key(tmp_path):
    cache = tmp_path / "cache"
    with FakeServer(lambda body, n: f"reply {n}") as server:
        with LLMClient(server.base_url, "fake", seed=9, cache=cache) as client:
            assert client.run(client.chat(MSG)) == "reply 0"
        with LLMClient(server.base_url, "fake", seed=2, cache=cache) as client:
            assert client.run(client.chat(MSG, seed=9)) == "reply 0"       # from the cache
            assert client.usage.calls[0].cached
        assert len(server.requests) == 1


@pytest.mark.parametrize("bad", ["7", 1.5, True])
def test_bad_seed_is_refused_naming_it(bad):
    with FakeServer() as server, LLMClient(server.base_url, "fake") as client:
        with pytest.raises(ValueError, match="seed must be an integer"):
            client.run(client.chat(MSG, seed=bad))
        assert server.requests == []
        assert client.usage.total()["requests"] == 0
