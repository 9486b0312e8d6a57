"""Hybrid populations in YAML (issue 34): groups by tier (``policy:``) and by ``share:`` of
``env.n_agents``, the errors that name their key, and each tier's metrics of a run directory
written here by hand (``socialgym.experiments.analysis.tiers``)."""

from __future__ import annotations

import csv

import numpy as np
import pytest
import scipy.sparse as sp

from socialgym.experiments import ConfigError, load_config
from socialgym.experiments.define import dump_yaml, from_dict, grid, to_dict, with_values
from socialgym.experiments.define.schema import POLICY_KINDS, TIERS, tier_of
from socialgym.rundir import layout


def _counts(groups, n=10):
    cfg = load_config({"env": {"n_agents": n}, "policy": {"groups": groups}})
    return [(g.name, g.kind, g.agents) for g in cfg.policy_groups()]


def _refused(groups, n=10):
    with pytest.raises(ConfigError) as info:
        load_config({"env": {"n_agents": n}, "policy": {"groups": groups}})
    return str(info.value)


# ---------------------------------------------------------------------------------- tiers
def test_tier_of_every_kind():
    assert TIERS == ("llm", "archetype", "distilled", "trained", "scripted")
    assert {k: tier_of(k) for k in POLICY_KINDS} == {
        "random": "scripted", "greedy": "scripted", "llm": "llm", "torch": "trained", "topic_users": "scripted",
        "social_users": "scripted", "archetype": "archetype", "distilled": "distilled"}


def test_yaml_with_tiers_and_shares_loads_kinds_and_counts(tmp_path):
    model = tmp_path / "model.pt"
    model.write_bytes(b"not read when loading")
    path = tmp_path / "hybrid.yaml"
    path.write_text(f"""
env: {{n_agents: 100000}}
policy:
  groups:
    - {{name: core, policy: llm, agents: 20}}
    - {{name: crowd, policy: archetype, share: 0.3, params: {{k: 4, pool_size: 2}}}}
    - {{name: clones, policy: distilled, share: 0.25, params: {{path: {model}}}}}
    - {{name: ppo, policy: trained, kind: torch, share: 0.05, params: {{path: {model}}}}}
    - {{name: bots, policy: scripted, kind: greedy, agents: 10}}
    - {{name: users, policy: scripted}}
""")
    cfg = load_config(path)
    # 0.3, 0.25 and 0.05 of 100000 are 30000, 25000 and 5000; the rest 100000 - 20 - 10 - 60000 = 39970
    assert [(g.name, g.kind, g.agents) for g in cfg.policy_groups()] == [
        ("core", "llm", 20), ("crowd", "archetype", 30000), ("clones", "distilled", 25000), ("ppo", "torch", 5000),
        ("bots", "greedy", 10), ("users", "social_users", 39970)]
    assert [tier_of(g.kind) for g in cfg.policy_groups()] == ["llm", "archetype", "distilled", "trained",
                                                              "scripted", "scripted"]
    assert [g.agents for g in cfg.policy.groups] == [20, None, None, None, 10, None]    # as written
    assert cfg.uses_llm()
    # written back: the kind, not the tier; the share as given; loads to the same config
    raw = to_dict(cfg)
    assert all("policy" not in g for g in raw["policy"]["groups"])
    assert [(g["kind"], g["share"]) for g in raw["policy"]["groups"]][1:3] == [("archetype", 0.3), ("distilled", 0.25)]
    assert from_dict(raw) == cfg
    dump_yaml(cfg, tmp_path / "again.yaml")
    assert load_config(tmp_path / "again.yaml").policy_groups() == cfg.policy_groups()


def test_archetype_groups_need_the_client_distilled_do_not():
    assert load_config({"env": {"n_agents": 4}, "policy": {"groups": [
        {"name": "a", "policy": "archetype", "agents": 1}, {"name": "b", "policy": "scripted"}]}}).uses_llm()
    assert not load_config({"env": {"n_agents": 4}, "policy": {"kind": "greedy"}}).uses_llm()


def test_shares_round_to_an_exact_total():
    # 0.5, 0.25, 0.25 of 7: 3.5, 1.75, 1.75; floors 3 + 1 + 1 = 5, two left: the largest remainders
    # (0.75, 0.75) go first, so b and c get one each -> 3, 2, 2
    assert _counts([{"name": "a", "kind": "random", "share": 0.5}, {"name": "b", "kind": "random", "share": 0.25},
                    {"name": "c", "kind": "random", "share": 0.25}], 7) == [("a", "random", 3), ("b", "random", 2),
                                                                             ("c", "random", 2)]
    # a count beside the shares: 2 + 0.45 * 10 + 0.35 * 10 = 2 + 4.5 + 3.5 = 10; floors 4 + 3 = 7, one
    # left; equal remainders (0.5, 0.5): the earlier group -> 2, 5, 3
    assert _counts([{"name": "a", "kind": "greedy", "agents": 2}, {"name": "b", "kind": "random", "share": 0.45},
                    {"name": "c", "kind": "random", "share": 0.35}]) == [("a", "greedy", 2), ("b", "random", 5),
                                                                          ("c", "random", 3)]
    # with a group taking the rest a share rounds half up: 0.15 * 10 = 1.5 -> 2, the rest 8
    assert _counts([{"name": "a", "kind": "random", "share": 0.15}, {"name": "b", "kind": "greedy"}]) == [
        ("a", "random", 2), ("b", "greedy", 8)]
    # a share of 1 is every agent
    assert _counts([{"name": "a", "policy": "scripted", "share": 1}]) == [("a", "social_users", 10)]


def test_shares_follow_a_swept_population_size():
    cfg = load_config({"env": {"n_agents": 10}, "sweep": {"env.n_agents": [10, 40]},
                       "policy": {"groups": [{"name": "a", "kind": "random", "share": 0.25},
                                             {"name": "b", "kind": "greedy"}]}})
    # 0.25 of 10 = 2.5 -> 3 (rest 7); of 40 = 10 (rest 30)
    assert [[g.agents for g in with_values(cfg, a).policy_groups()] for a in grid(cfg)] == [[3, 7], [10, 30]]


# ---------------------------------------------------------------------------------- errors name the key
@pytest.mark.parametrize("groups, key, words", [
    ([{"name": "a", "kind": "random", "agents": 3, "share": 0.3}, {"name": "b"}], "policy.groups[0]", "not both"),
    ([{"name": "a", "kind": "random", "share": 0}, {"name": "b"}], "policy.groups[0].share", "> 0"),
    ([{"name": "a", "kind": "random", "share": -0.2}, {"name": "b"}], "policy.groups[0].share", "> 0"),
    ([{"name": "a", "kind": "random", "share": 1.5}, {"name": "b"}], "policy.groups[0].share", "<= 1"),
    ([{"name": "a", "kind": "random", "share": "half"}, {"name": "b"}], "policy.groups[0].share", "number"),
    ([{"name": "a", "kind": "greedy"}, {"name": "b", "policy": "llm", "kind": "greedy"}],
     "policy.groups[1].policy", "is llm but kind is 'greedy'"),
    ([{"name": "a", "policy": "trained", "kind": "distilled"}], "policy.groups[0].policy", "trained means kind torch"),
    ([{"name": "a", "policy": "scripted", "kind": "archetype"}], "policy.groups[0].policy", "scripted kinds"),
    ([{"name": "a", "policy": "cyborg"}], "policy.groups[0].policy", "must be one of llm, archetype, distilled"),
    # 0.49 + 0.49 of 100 is 98, not 100: largest remainders do not make up two missing agents
    ([{"name": "a", "kind": "random", "share": 0.49}, {"name": "b", "kind": "random", "share": 0.49}],
     "policy.groups", "do not add up to 100"),
    # 0.04 of 10 is 0.4 agents -> 0
    ([{"name": "a", "kind": "random", "share": 0.04}, {"name": "b"}], "policy.groups[0].share", "is 0 agents"),
    ([{"name": "a", "kind": "random", "share": 0.5}, {"name": "b"}, {"name": "c"}], "policy.groups",
     "at most one group"),
    ([{"name": "a", "policy": "distilled"}], "policy.groups[0].params.path", "model"),
    ([{"name": "a", "policy": "archetype", "params": {"k": 0}}], "policy.groups[0].params.k", "k must be"),
])
def test_bad_groups_are_refused_naming_the_key(groups, key, words):
    n = 100 if key == "policy.groups" and "100" in words else 10
    message = _refused(groups, n)
    assert message.startswith(key) and words in message, message


# ---------------------------------------------------------------------------------- each tier's metrics, by hand
def _row(r, agent, kind, total, SOC=0.0, INF=0.0, POST=0, COM=0, DM=0, NOT=0, up=0, down=0):
    row = dict.fromkeys(layout.ROUND_COLUMNS, 0)
    row.update({"round": r, "agent": agent, "group": kind, "policy": kind, "coached": 0, "SOC": SOC, "INF": INF,
                "total": total, "POST": POST, "COM": COM, "DM": DM, "NOT": NOT, "votes_up": up, "votes_down": down})
    return row


def _hand_run(path):
    rows = [
        # llm: agents 0 and 1, two rounds each (4 agent-rounds)
        _row(1, "agent_0", "llm", 0.6, SOC=1.0, INF=0.5, POST=1, DM=1, up=2),
        _row(2, "agent_0", "llm", 0.2, NOT=2, down=1),                       # only NOT: not active
        _row(1, "agent_1", "llm", 0.4, SOC=0.5, COM=2, up=1),
        _row(2, "agent_1", "llm", -0.2, NOT=1),                              # not active
        # archetype: agent 2
        _row(1, "agent_2", "archetype", 0.3, POST=1),
        _row(2, "agent_2", "archetype", 0.1, NOT=1),
        # scripted: agents 3 (greedy) and 4 (social_users), one tier
        _row(1, "agent_3", "greedy", 0.0, COM=1),
        _row(2, "agent_3", "greedy", 0.4, COM=1),
        _row(1, "agent_4", "social_users", 0.2, DM=1),
        _row(2, "agent_4", "social_users", 0.2, NOT=1),
    ]
    with open(path / layout.ROUNDS, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=layout.ROUND_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    layout.tie_path(path, 1).parent.mkdir()
    sp.save_npz(layout.tie_path(path, 1), sp.csr_matrix(np.ones((5, 5))))         # an earlier round: not read
    # the last round's ties, W[i, j] = i's tie to j: 0->1 .6, 0->2 .2, 1->0 .4, 2->0 .9, 3->0 .1, 3->4 .5,
    # and 4->3 stored as an explicit 0 (no tie)
    data = np.array([0.6, 0.2, 0.4, 0.9, 0.1, 0.5, 0.0])
    indices = np.array([1, 2, 0, 0, 0, 4, 3])
    indptr = np.array([0, 2, 3, 4, 6, 7])
    W = sp.csr_matrix((data, indices, indptr), shape=(5, 5))
    assert W.nnz == 7
    sp.save_npz(layout.tie_path(path, 2), W)


def test_tier_table_by_hand(tmp_path):
    from socialgym.experiments.analysis.tiers import tier_table

    _hand_run(tmp_path)
    table = {r["tier"]: r for r in tier_table(tmp_path)}
    assert list(table) == ["llm", "archetype", "scripted"]                 # TIERS order, present ones only
    llm, arch, scr = table["llm"], table["archetype"], table["scripted"]
    # llm: total (0.6 + 0.2 + 0.4 - 0.2) / 4 = 0.25; SOC (1 + 0.5) / 4 = 0.375; INF 0.5 / 4 = 0.125
    assert llm["agents"] == 2
    assert llm["total"] == pytest.approx(0.25) and llm["SOC"] == pytest.approx(0.375)
    assert llm["INF"] == pytest.approx(0.125) and llm["PRE"] == 0.0
    # actions per agent-round: POST 1/4, COM 2/4, DM 1/4, NOT (2 + 1)/4; votes up 3/4, down 1/4
    assert (llm["POST"], llm["COM"], llm["DM"], llm["NOT"]) == pytest.approx((0.25, 0.5, 0.25, 0.75))
    assert (llm["votes_up"], llm["votes_down"]) == pytest.approx((0.75, 0.25))
    assert llm["active_share"] == 0.5                                      # rounds 1 acted, rounds 2 only NOT
    # ties out of agents 0 and 1: 2 + 1 = 3 over 2 agents; mean strength (0.6 + 0.2 + 0.4) / 3 = 0.4
    assert llm["out_degree"] == 1.5 and llm["tie_strength"] == pytest.approx(0.4)
    # archetype: total (0.3 + 0.1) / 2 = 0.2, POST 1/2, active 1/2; one tie of 0.9
    assert arch["agents"] == 1 and arch["total"] == pytest.approx(0.2) and arch["POST"] == 0.5
    assert arch["active_share"] == 0.5 and arch["out_degree"] == 1.0 and arch["tie_strength"] == pytest.approx(0.9)
    # scripted (greedy and social_users together): total (0 + 0.4 + 0.2 + 0.2) / 4 = 0.2; COM 2/4,
    # DM 1/4, NOT 1/4; active 3 of 4; ties: agent 3 has two (0.1, 0.5), agent 4's stored 0 is none:
    # out-degree 2 / 2 = 1, strength 0.3
    assert scr["agents"] == 2 and scr["total"] == pytest.approx(0.2)
    assert (scr["COM"], scr["DM"], scr["NOT"]) == pytest.approx((0.5, 0.25, 0.25))
    assert scr["active_share"] == 0.75
    assert scr["out_degree"] == 1.0 and scr["tie_strength"] == pytest.approx(0.3)


def test_tier_sections_show_only_several_tiers(tmp_path):
    from socialgym.experiments.analysis.tiers import tier_markdown, tier_table, tiers_html

    _hand_run(tmp_path)
    md = tier_markdown(tier_table(tmp_path)).splitlines()
    assert md[0] == "| | llm | archetype | scripted |"
    assert "| agents | 2 | 1 | 2 |" in md
    assert "| mean total reward | 0.25 | 0.2 | 0.2 |" in md
    assert "| share of agent-rounds active | 0.5 | 0.5 | 0.75 |" in md
    page = tiers_html(tmp_path)
    assert "<th>llm</th><th>archetype</th><th>scripted</th>" in page
    # one tier: nothing to set side by side; no rounds.csv: no section
    rows = (tmp_path / layout.ROUNDS).read_text().splitlines()
    (tmp_path / layout.ROUNDS).write_text("\n".join(rows[:5]) + "\n")        # the header and llm's rows
    assert [r["tier"] for r in tier_table(tmp_path)] == ["llm"] and tiers_html(tmp_path) == ""
    (tmp_path / layout.ROUNDS).unlink()
    assert tiers_html(tmp_path) == ""


def test_tiers_without_tie_files(tmp_path):
    from socialgym.experiments.analysis.tiers import tier_table

    _hand_run(tmp_path)
    for path in layout.tie_files(tmp_path).values():
        path.unlink()
    rows = tier_table(tmp_path)
    assert [r["out_degree"] for r in rows] == [None, None, None]
    assert [r["tie_strength"] for r in rows] == [None, None, None]
