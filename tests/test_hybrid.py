"""Hybrid populations (issue 34): groups by tier (``policy:``) and share, a run mixing LLM agents,
archetypes, distilled and scripted agents against the loopback fake, and each tier's metrics."""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.sparse as sp

from socialgym.experiments import ConfigError, load_config
from socialgym.experiments.define.schema import TIERS, group_counts, tier_of

BASE = {"env": {"n_agents": 10}}


def _groups(groups, n=10):
    cfg = load_config({"env": {"n_agents": n}, "policy": {"groups": groups}})
    return [(g.name, g.kind, g.agents) for g in cfg.policy_groups()]


# ---------------------------------------------------------------------------------- config
def test_tiers_name_kinds():
    assert [tier_of(k) for k in ("llm", "archetype", "distilled", "torch", "random", "greedy", "topic_users",
                                 "social_users")] == ["llm", "archetype", "distilled", "trained", "scripted",
                                                      "scripted", "scripted", "scripted"]
    assert TIERS == ("llm", "archetype", "distilled", "trained", "scripted")
    assert _groups([{"name": "a", "policy": "scripted", "agents": 3},
                    {"name": "b", "policy": "scripted", "kind": "greedy"}]) == [("a", "social_users", 3),
                                                                                ("b", "greedy", 7)]


def test_shares_become_counts_that_add_up():
    # 0.35 and 0.65 of 10: 3.5 and 6.5; floors 3 + 6 = 9, the one left goes to the first tie (a)
    assert _groups([{"name": "a", "kind": "random", "share": 0.35},
                    {"name": "b", "kind": "greedy", "share": 0.65}]) == [("a", "random", 4), ("b", "greedy", 6)]
    # with a group taking the rest: 0.25 of 10 = 2.5 rounds half up to 3; the rest 10 - 1 - 3 = 6
    assert _groups([{"name": "a", "kind": "random", "agents": 1}, {"name": "b", "kind": "random", "share": 0.25},
                    {"name": "c", "kind": "greedy"}]) == [("a", "random", 1), ("b", "random", 3), ("c", "greedy", 6)]
    # three thirds of 100: 33.3 each, floors 99, the one left to the first
    assert [c for *_, c in _groups([{"name": x, "kind": "random", "share": 1 / 3} for x in "abc"], 100)] == [34, 33, 33]


@pytest.mark.parametrize("groups, message", [
    ([{"name": "a", "kind": "random", "agents": 3, "share": 0.3}, {"name": "b"}], "not both"),
    ([{"name": "a", "kind": "random", "share": 0}, {"name": "b"}], r"share must be a number > 0"),
    ([{"name": "a", "kind": "random", "share": 1.2}, {"name": "b"}], r"share must be a number > 0 and <= 1"),
    ([{"name": "a", "kind": "random", "share": 0.5}, {"name": "b", "share": 0.2}], "do not add up to 10"),
    ([{"name": "a", "policy": "llm", "kind": "greedy"}], r"groups\[0\].policy is llm but kind is 'greedy'"),
    ([{"name": "a", "policy": "scripted", "kind": "llm"}], r"groups\[0\].policy is scripted but kind is 'llm'"),
    ([{"name": "a", "policy": "cyborg"}], r"groups\[0\].policy must be one of llm, archetype"),
    ([{"name": "a", "kind": "random", "share": 0.95}, {"name": "b"}], "every group at least 1"),
    ([{"name": "a", "policy": "archetype", "params": {"k": 0}}], r"groups\[0\].params.k"),
    ([{"name": "a", "policy": "archetype", "params": {"flavour": 1}}], "an archetype policy takes"),
    ([{"name": "a", "policy": "distilled"}], r"groups\[0\].params.path must name"),
])
def test_bad_groups_name_the_key(groups, message):
    with pytest.raises(ConfigError, match=message):
        load_config({**BASE, "policy": {"groups": groups}})


def test_group_counts_refuses_shares_that_cannot_add_up():
    cfg = load_config({**BASE, "policy": {"groups": [{"name": "a", "kind": "random"}]}})
    g = cfg.policy.groups[0]
    import dataclasses
    with pytest.raises(ValueError, match="do not add up"):
        group_counts([dataclasses.replace(g, share=0.5), dataclasses.replace(g, name="b", share=0.1)], 10)


def test_archetype_groups_use_the_llm_client():
    cfg = load_config({**BASE, "policy": {"groups": [{"name": "a", "policy": "archetype", "agents": 4},
                                                     {"name": "b", "kind": "greedy"}]}})
    assert cfg.uses_llm()


# ---------------------------------------------------------------------------------- tiers of a run, by hand
def test_tier_table_by_hand(tmp_path):
    from socialgym.experiments.analysis.tiers import tier_markdown, tier_table, tiers_html
    from socialgym.rundir import layout

    header = "round,agent,group,policy,coached,SOC,INF,PRE,COORD,EMO,total,POST,COM,DM,NOT,votes_up,votes_down," \
             "invalid,fallbacks"
    rows = ["1,agent_0,l,llm,0,1,0,0,0,0,0.4,1,1,0,0,2,0,0,0",
            "2,agent_0,l,llm,0,0,0,0,0,0,0.2,0,0,0,2,0,1,0,0",
            "1,agent_1,d,distilled,0,0,0,0,0,0,0.1,0,0,1,1,1,1,0,0",
            "1,agent_2,s,greedy,0,0,0,0,0,0,0.3,2,0,0,0,0,0,0,0",
            "2,agent_2,s,random,0,0,0,0,0,0,0.5,0,1,0,1,0,0,0,0"]
    (tmp_path / layout.ROUNDS).write_text(header + "\n" + "\n".join(rows) + "\n")
    (tmp_path / layout.TIES).mkdir()
    # ties: 0 -> 1 (0.5), 0 -> 2 (0.3), 2 -> 0 (0.8)
    W = sp.csr_matrix((np.array([0.5, 0.3, 0.8]), (np.array([0, 0, 2]), np.array([1, 2, 0]))), shape=(3, 3))
    sp.save_npz(layout.tie_path(tmp_path, 2), W)
    table = {r["tier"]: r for r in tier_table(tmp_path)}
    assert list(table) == ["llm", "distilled", "scripted"]
    llm, dist, scr = table["llm"], table["distilled"], table["scripted"]
    assert llm["agents"] == 1 and llm["total"] == pytest.approx(0.3) and llm["SOC"] == pytest.approx(0.5)
    assert llm["COM"] == pytest.approx(0.5) and llm["NOT"] == pytest.approx(1.0) and llm["votes_up"] == 1.0
    assert llm["active_share"] == 0.5                     # round 1 acted, round 2 only NOT
    assert llm["out_degree"] == 2 and llm["tie_strength"] == pytest.approx(0.4)
    assert dist["active_share"] == 1.0 and dist["out_degree"] == 0 and dist["tie_strength"] == 0.0
    assert scr["agents"] == 1 and scr["total"] == pytest.approx(0.4) and scr["POST"] == 1.0
    assert scr["out_degree"] == 1 and scr["tie_strength"] == pytest.approx(0.8)
    md = tier_markdown(tier_table(tmp_path))
    assert md.splitlines()[0] == "| | llm | distilled | scripted |"
    assert "| mean total reward | 0.3 | 0.1 | 0.4 |" in md
    assert "<h2>Tiers side by side</h2>" in tiers_html(tmp_path)
    (tmp_path / layout.ROUNDS).write_text(header + "\n" + rows[0] + "\n")
    assert tiers_html(tmp_path) == ""                     # one tier: nothing to set side by side


# ---------------------------------------------------------------------------------- a hybrid run
def test_a_hybrid_run_against_the_fake(tmp_path):
    pytest.importorskip("openai")
    pytest.importorskip("torch")
    from socialgym.experiments import run_experiment
    from socialgym.experiments.run.distill import distill
    from socialgym.llm.testing import FakeServer
    from socialgym.rundir import layout
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
    from socialgym.rundir.runs import read_rounds
    rows = read_rounds(out)
    assert {r["policy"] for r in rows} == {"llm", "archetype", "distilled", "social_users"}
    assert sum(int(r["invalid"]) for r in rows) == 0
    page = (out / layout.REPORT).read_text()
    assert "Tiers side by side" in page and "<th>archetype</th>" in page and "<th>distilled</th>" in page
