"""Runs over several LLM servers (``llm.endpoints``): a server dying mid-run changes nothing in
the outputs, its failovers land in llm_routes.jsonl, and a group bound to its own server keeps
to it. Every server is a deterministic loopback fake (its reply a pure function of the request),
so which server answered cannot show in the results."""

from __future__ import annotations

import json
from pathlib import Path

from capabilities import need_module

from socialgym.experiments import load_config, run_experiment

need_module("openai")
from socialgym.llm.testing import FakeServer  # noqa: E402

AGENTS, ROUNDS = 6, 3


def _config(llm: dict, groups: list | None = None) -> dict:
    policy = {"kind": "llm", "coach": False, "params": {"generation": "split", "text_chars": 120}}
    if groups is not None:
        policy["groups"] = groups
    return {"seed": 4, "env": {"n_agents": AGENTS, "n_actions": 2, "max_rounds": ROUNDS, "recommender": "random",
                               "feed_size": 4, "vote_feed_size": 3, "sentiment": "tone"},
            "policy": policy,
            "llm": {"max_retries": 2, "max_repairs": 1, "cache": False, **llm},
            "logging": {"report": False, "progress": False, "transcripts": True}}


def _endpoint(name: str, server: FakeServer, model: str = "fake") -> dict:
    return {"name": name, "base_url": server.base_url, "model": model, "max_concurrency": 4}


def _rounds(run: Path) -> list[dict]:
    lines = (run / "rounds.csv").read_text().splitlines()
    header = lines[0].split(",")
    return [dict(zip(header, line.split(","))) for line in lines[1:]]


def test_a_server_dying_mid_run_changes_no_output(tmp_path):
    with FakeServer(deterministic=True) as one:
        single = run_experiment(load_config(_config({"base_url": one.base_url, "model": "fake"})),
                                tmp_path / "single", progress=False)
    with FakeServer(deterministic=True) as a, FakeServer(deterministic=True, kill_after=7) as b, \
            FakeServer(deterministic=True) as c:
        keyed = {**_endpoint("a", a), "api_key": "sk-endpoint-SECRET-4242"}     # accepted, never written
        cfg = load_config(_config({"endpoints": [keyed, _endpoint("b", b), _endpoint("c", c)]}))
        pooled = run_experiment(cfg, tmp_path / "pooled", progress=False)
        assert b.killed, "the server meant to die mid-run was never asked 7 times: the test proves nothing"
        served = {"a": len(a.requests), "b": len(b.requests), "c": len(c.requests)}
    assert pooled["status"] == "complete" and pooled["rounds_completed"] == ROUNDS
    assert pooled["llm"]["fallbacks"] == 0 and single["llm"]["fallbacks"] == 0
    rows = _rounds(tmp_path / "pooled")
    assert len(rows) == AGENTS * ROUNDS and {r["fallbacks"] for r in rows} == {"0"}
    for name in ("events.jsonl", "rounds.csv"):
        assert (tmp_path / "pooled" / name).read_bytes() == (tmp_path / "single" / name).read_bytes(), name
    for r in range(1, ROUNDS + 1):
        tie = f"ties/round_{r:04d}.npz"
        assert (tmp_path / "pooled" / tie).read_bytes() == (tmp_path / "single" / tie).read_bytes(), tie
    routes = [json.loads(x) for x in (tmp_path / "pooled" / "llm_routes.jsonl").read_text().splitlines()]
    failovers = [e for e in routes if e["kind"] == "failover"]
    assert failovers and {e["endpoint"] for e in failovers} == {"b"}
    assert all(e["to"] in ("a", "c") for e in failovers)
    stats = pooled["llm"]["endpoints"]
    assert set(stats) == {"a", "b", "c"} and stats["b"]["failovers"] >= 1
    # the 6th request was b's last answered one; a and c served the rest between them
    assert served["b"] == 7 and served["a"] + served["c"] + 6 >= single["llm"]["requests"]
    for file in (tmp_path / "pooled").rglob("*"):      # the endpoint's key in no file
        if file.is_file():
            assert b"SECRET-4242" not in file.read_bytes(), file
    assert "api_key:" not in (tmp_path / "pooled" / "config.yaml").read_text()


def test_a_group_bound_to_its_own_server_keeps_to_it(tmp_path):
    groups = [{"name": "own", "kind": "llm", "agents": 3, "endpoints": ["solo"]},
              {"name": "rest", "kind": "llm", "model": "shared-model"}]
    with FakeServer(deterministic=True) as solo, FakeServer(deterministic=True) as shared:
        endpoints = [_endpoint("solo", solo, "solo-model"), _endpoint("shared", shared, "shared-model")]
        summary = run_experiment(load_config(_config({"endpoints": endpoints}, groups)), tmp_path / "run",
                                 progress=False)
        bodies = {"solo": list(solo.requests), "shared": list(shared.requests)}
    assert summary["status"] == "complete"
    # which agent sent each request: the transcript has the agent and the messages it sent
    sender = {}
    for line in (tmp_path / "run" / "transcripts.jsonl").read_text().splitlines():
        entry = json.loads(line)
        sender[json.dumps(entry["messages"], sort_keys=True)] = entry["agent"]
    own = {"agent_0", "agent_1", "agent_2"}
    senders = {name: [sender[json.dumps(b["messages"], sort_keys=True)] for b in found]
               for name, found in bodies.items()}
    assert senders["solo"] and set(senders["solo"]) <= own
    assert senders["shared"] and not set(senders["shared"]) & own
    assert {b["model"] for b in bodies["solo"]} == {"solo-model"}
    assert {b["model"] for b in bodies["shared"]} == {"shared-model"}
    assert summary["llm"]["endpoints"]["solo"]["requests"] == len(bodies["solo"])
