"""Hybrid populations (issue 34): a run mixing LLM agents, archetypes, distilled and scripted agents
against the loopback fake (the config side and each tier's metrics by hand: test_hybrid_config.py)."""

from __future__ import annotations

import json

import pytest
from capabilities import need_module

from socialgym.experiments import ConfigError, load_config


def test_archetype_params_are_checked_by_the_policy():
    with pytest.raises(ConfigError, match="an archetype policy takes"):
        load_config({"env": {"n_agents": 10}, "policy": {"groups": [{"name": "a", "policy": "archetype",
                                                                      "params": {"flavour": 1}}]}})


# ---------------------------------------------------------------------------------- a hybrid run
@pytest.mark.slow
def test_a_hybrid_run_against_the_fake(tmp_path):
    need_module("openai")
    need_module("torch")
    from socialgym.experiments import run_experiment
    from socialgym.experiments.run.distill import distill
    from socialgym.llm.testing import FakeServer
    from socialgym.rundir import Run, layout
    from socialgym.rundir.decisions import read_decisions

    env = {"n_agents": 40, "max_rounds": 3, "recommender": "random", "n_actions": 2, "feed_size": 4,
           "vote_feed_size": 3}
    # a distilled model first, from scripted runs with the same per-agent interface
    for s in range(2):
        run_experiment(load_config({"seed": s, "env": env, "policy": {"kind": "social_users"},
                                    "logging": {"decisions": "all", "report": False, "progress": False}}),
                       tmp_path / f"src{s}", progress=False)
    model = tmp_path / "model.pt"
    distill([tmp_path / "src0", tmp_path / "src1"], model, args=None)
    with FakeServer(deterministic=True) as server:
        cfg = load_config({
            "seed": 3, "env": env,
            "policy": {"groups": [
                {"name": "llm", "policy": "llm", "agents": 2, "params": {"generation": "split", "max_users": 5}},
                {"name": "arch", "policy": "archetype", "share": 0.5, "params": {"k": 3, "pool_size": 2}},
                {"name": "dist", "policy": "distilled", "share": 0.25, "params": {"path": str(model)}},
                {"name": "users", "policy": "scripted"}]},
            "llm": {"base_url": server.base_url, "model": "fake", "api_key": "sk-test", "max_concurrency": 4},
            "logging": {"decisions": "llm", "transcripts": True, "progress": False}})
        assert [(g.name, g.kind, g.agents) for g in cfg.policy_groups()] == [
            ("llm", "llm", 2), ("arch", "archetype", 20), ("dist", "distilled", 10), ("users", "social_users", 8)]
        out = tmp_path / "run"
        summary = run_experiment(cfg, out, progress=False)
    assert summary["status"] == "complete"
    # the archetype group made k = 3 plans a round for its 20 agents (agents 2..21 speak for it)
    plans = [json.loads(x) for x in (out / layout.TRANSCRIPTS).read_text().splitlines()]
    arch = {f"agent_{i}" for i in range(2, 22)}
    per_round = {r: sum(1 for p in plans if p["purpose"] == "plan" and p["agent"] in arch and p["round"] == r)
                 for r in (1, 2, 3)}
    assert per_round == {1: 3, 2: 3, 3: 3}
    # decisions were logged for the llm and archetype agents only
    decisions, _ = read_decisions([out])
    assert set(decisions["act"].agent.tolist()) == set(range(22))
    # no agent acted invalidly; the report sets the four tiers side by side
    rows = Run(out).rounds
    assert {r["policy"] for r in rows} == {"llm", "archetype", "distilled", "social_users"}
    assert sum(int(r["invalid"]) for r in rows) == 0
    page = (out / layout.REPORT).read_text()
    assert "Tiers side by side" in page and "<th>archetype</th>" in page and "<th>distilled</th>" in page
