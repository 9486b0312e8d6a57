"""Issue 28, item 4: the reason of every fallback is readable in the run directory
(fallbacks.jsonl), and a resumed run writes each fallback once."""

from __future__ import annotations

import json

from capabilities import need_module



def test_every_fallback_is_written_with_its_reason(tmp_path):
    need_module("openai")
    from socialgym.experiments import load_config, run_experiment
    from socialgym.llm.testing import FakeServer

    # plans are never valid JSON objects: every plan falls back; votes are valid
    def responder(body, n):
        schema = (body.get("response_format") or {}).get("json_schema", {}).get("schema") or {}
        return "not json at all" if "actions" in json.dumps(schema) else '{"votes": []}'

    with FakeServer(responder) as server:
        cfg = load_config({"seed": 0, "env": {"n_agents": 3, "max_rounds": 2, "recommender": "random"},
                           "policy": {"kind": "llm", "params": {"generation": "joint"}},
                           "llm": {"base_url": server.base_url, "model": "fake", "api_key": "k", "max_repairs": 0},
                           "run": {"max_fallback_share": 1.0},
                           "logging": {"report": False, "progress": False}})
        summary = run_experiment(cfg, tmp_path / "run")
    lines = [json.loads(x) for x in (tmp_path / "run" / "fallbacks.jsonl").read_text().splitlines()]
    assert summary["llm"]["fallbacks"] > 0 and len(lines) == summary["llm"]["fallbacks"]
    assert all(line["reason"] and line["agent"] in ("agent_0", "agent_1", "agent_2") for line in lines)
    assert {line["round"] for line in lines} == {1, 2}


def test_a_scripted_run_writes_no_fallback_file(tmp_path):
    from socialgym.experiments import load_config, run_experiment

    run_experiment(load_config({"seed": 0, "env": {"n_agents": 3, "max_rounds": 2}, "policy": {"kind": "greedy"},
                                "logging": {"report": False, "progress": False}}), tmp_path / "run")
    assert not (tmp_path / "run" / "fallbacks.jsonl").exists()
