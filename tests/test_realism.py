"""The realism scorecard: every fact computed on hand-made run directories whose answers were
worked out by hand (the arithmetic is in the comments), the statistics on their own, the
scorecard's interval and verdicts, and ``socialgym validate``."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from socialgym.cli import main
from socialgym.experiments.analysis.realism import run_dirs_in, scorecard, write_scorecard
from socialgym.experiments.analysis.statistics import band_distance_in_widths as band_distance
from socialgym.experiments.analysis.realism_data import load_run_data
from socialgym.experiments.analysis.realism_facts import FACTS
from socialgym.metrics.exposure import gini
from socialgym.metrics.realism import (group_assortativity, negativity_trend, reciprocity, tail_exponent,
                                       thread_roots, thread_sizes)
from socialgym.rundir import layout

ROUND_HEADER = layout.ROUND_COLUMNS


def write_run(path: Path, agents: list[str], events: list[dict], counts: dict[tuple[int, str], dict],
              ties: np.ndarray | sp.spmatrix | None, rounds: int) -> Path:
    """A run directory as socialgym writes one: rounds.csv, events.jsonl, ties/round_NNNN.npz."""
    path.mkdir(parents=True, exist_ok=True)
    with (path / layout.ROUNDS).open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(ROUND_HEADER)
        for r in range(1, rounds + 1):
            for a in agents:
                c = counts.get((r, a), {})
                w.writerow([c.get(col, 0) if col in layout.COUNT_COLUMNS else
                            {"round": r, "agent": a, "group": "", "policy": "hand", "coached": 0}.get(col, 0.0)
                            for col in ROUND_HEADER])
    with (path / layout.EVENTS).open("w") as f:
        for e in events:
            f.write(json.dumps(e) + "\n")
    if ties is not None:
        (path / layout.TIES).mkdir(exist_ok=True)
        sp.save_npz(layout.tie_path(path, rounds), sp.csr_matrix(ties))
    return path


def _content(kind, id_, sender, recipient=None, target=None, topic="x", sentiment=0.0, rnd=1):
    return {"round": rnd, "kind": kind, "sender": sender, "recipient": recipient, "mentions": [], "id": id_,
            "target_id": target, "topic": topic, "sentiment": sentiment, "text": None}


def small_run(tmp_path: Path) -> Path:
    """Four agents, two rounds (every number below is worked out in the tests)."""
    a = [f"agent_{i}" for i in range(4)]
    ev = [_content("POST", 0, a[0], topic="x"), _content("POST", 1, a[1], topic="x"),
          _content("POST", 2, a[2], topic="y"), _content("POST", 3, a[0], topic="x"),
          _content("COM", 4, a[1], a[0], 0, sentiment=-0.5, rnd=2),
          _content("COM", 5, a[2], a[1], 4, sentiment=0.3, rnd=2),
          _content("COM", 6, a[0], a[1], 1, sentiment=-0.8, rnd=2),
          _content("DM", 7, a[1], a[0], None, sentiment=0.2, rnd=2),
          _content("DM", 8, a[0], a[1], 7, sentiment=0.1, rnd=2),
          _content("COM", 9, a[3], a[2], 2, topic="y", sentiment=0.0, rnd=2),
          _content("COM", 10, a[3], a[2], 2, topic="y", sentiment=0.5, rnd=2),
          _content("COM", 11, a[1], a[2], 2, topic="y", sentiment=-0.6, rnd=2)]
    ev += [{"round": 1, "kind": "VOTE", "sender": s, "recipient": a[0], "id": 0, "value": v}
           for s, v in ((a[1], 1), (a[2], -1), (a[3], 1))]
    ev += [{"round": 1, "kind": "VOTE", "sender": a[0], "recipient": a[1], "id": 1, "value": 1},
           {"round": 1, "kind": "TIE", "src": a[0], "dst": a[1], "before": 0.0, "after": 0.5, "evidence": 1.0}]
    counts = {(1, a[0]): {"POST": 2}, (1, a[1]): {"POST": 1}, (1, a[2]): {"POST": 1}, (1, a[3]): {"NOT": 2},
              (2, a[0]): {"COM": 1, "DM": 1}, (2, a[1]): {"COM": 2, "DM": 1}, (2, a[2]): {"COM": 1},
              (2, a[3]): {"COM": 2}}
    W = np.zeros((4, 4))
    W[0, 1], W[1, 0], W[0, 2], W[1, 2], W[2, 3], W[3, 0] = 0.5, 0.3, 0.4, 0.3, 0.6, 0.05
    return write_run(tmp_path / "small", a, ev, counts, W, rounds=2)


def _value(run: Path, key: str) -> float:
    return scorecard([run]).score(key).mean


# ---------------------------------------------------------------------------------- every fact, by hand
def test_activity_gini_on_hand_made_run(tmp_path):
    # POSTs + COMs per agent from round 2 (round 1 is compulsory posting): a0 {6} 1, a1 {4, 11} 2,
    # a2 {5} 1, a3 {9, 10} 2 (DMs not counted). sorted 1,1,2,2; sum (2i - n - 1) x_i =
    # -3*1 - 1*1 + 1*2 + 3*2 = 4; G = 4 / (4 * 6) = 1/6
    assert _value(small_run(tmp_path), "posts_gini") == pytest.approx(1 / 6)


def test_vote_concentration_on_hand_made_run(tmp_path):
    # public items 0-6 and 9-11 (10); votes: item 0 three, item 1 one, the rest none.
    # sorted: eight zeros, 1, 3; coefficients 2i - 11 of the last two: 7 and 9 -> 7 + 27 = 34; G = 34 / 40
    assert _value(small_run(tmp_path), "votes_gini") == pytest.approx(0.85)


def test_reciprocity_on_hand_made_run(tmp_path):
    # directed edges: 1->0 (COM 4, DM 7), 2->1, 0->1 (COM 6, DM 8), 3->2 (twice), 1->2: five edges;
    # 1->0, 0->1, 2->1 and 1->2 have their reverse, 3->2 has not -> 4 / 5
    assert _value(small_run(tmp_path), "reciprocity") == pytest.approx(0.8)


def test_clustering_on_hand_made_run(tmp_path):
    # (W + W^T)/2 >= 0.1: edges 0-1 (0.4), 0-2 (0.2), 1-2 (0.15), 2-3 (0.3); 0-3 is 0.025 (none).
    # local clustering: node 0 -> 1, node 1 -> 1, node 2 (neighbours 0, 1, 3; one link among them)
    # -> 1/3; node 3 has degree 1 (left out). Mean (1 + 1 + 1/3) / 3 = 7/9
    assert _value(small_run(tmp_path), "clustering") == pytest.approx(7 / 9)


def test_homophily_on_hand_made_run(tmp_path):
    # main topics: a0 x (posts x, x), a1 x, a2 y, a3 none (its edge 2-3 left out).
    # edges x-x (0-1), x-y (0-2), x-y (1-2); both directions: e_xx = 2/6, e_xy = e_yx = 2/6, e_yy = 0.
    # a_x = 4/6, a_y = 2/6, sum a^2 = 5/9; r = (1/3 - 5/9) / (1 - 5/9) = -1/2
    assert _value(small_run(tmp_path), "homophily") == pytest.approx(-0.5)


def test_negativity_against_thread_length_on_hand_made_run(tmp_path):
    # threads: post 0 <- COM 4 (-0.5) <- COM 5 (0.3): length 2, negative share 1/2;
    # post 1 <- COM 6 (-0.8): length 1, share 1; post 2 <- 9 (0.0), 10 (0.5), 11 (-0.6): length 3, 1/3.
    # lengths 1, 2, 3 have shares 1, 1/2, 1/3: a perfectly falling order, Spearman -1
    assert _value(small_run(tmp_path), "negativity_trend") == pytest.approx(-1.0)


def test_thread_depth_on_hand_made_run(tmp_path):
    # post 0's thread holds COM 5, a reply to COM 4 (two levels); posts 1 and 2 have direct comments
    # only, post 3 none: 3 of 4 posts end within one level
    assert _value(small_run(tmp_path), "thread_depth") == pytest.approx(0.75)


def test_giant_component_on_hand_made_run(tmp_path):
    # edges 0-1, 0-2, 1-2, 2-3 join all four agents
    assert _value(small_run(tmp_path), "giant_component") == pytest.approx(1.0)
    # a fifth agent with no tie: 4 of 5 in the largest component
    a = [f"agent_{i}" for i in range(5)]
    W = np.zeros((5, 5))
    W[0, 1] = W[1, 2] = W[2, 3] = 0.5
    run = write_run(tmp_path / "five", a, [], {}, W, rounds=1)
    assert _value(run, "giant_component") == pytest.approx(0.8)


def test_active_share_on_hand_made_run(tmp_path):
    # round 1 (compulsory posting) is left out; round 2: all four acted -> 1. With a third round in
    # which only a0 acts: (1 + 1/4) / 2 = 5/8
    run = small_run(tmp_path)
    assert _value(run, "active_share") == pytest.approx(1.0)
    with (run / layout.ROUNDS).open("a", newline="") as f:
        w = csv.writer(f)
        for a in range(4):
            w.writerow([{"round": 3, "agent": f"agent_{a}", "group": "", "policy": "hand", "coached": 0}.get(
                col, (1 if a == 0 and col == "POST" else 0)) for col in ROUND_HEADER])
    assert _value(run, "active_share") == pytest.approx(0.625)


def test_thread_sizes_by_hand():
    ids = np.array([0, 1, 2, 3, 4, 5, 6, 9, 10, 11])
    targets = np.array([-1, -1, -1, -1, 0, 4, 1, 2, 2, 2])
    np.testing.assert_array_equal(thread_roots(ids, targets), [0, 1, 2, 3, 0, 0, 1, 2, 2, 2])
    posts, sizes = thread_sizes(ids, targets)
    np.testing.assert_array_equal(posts, [0, 1, 2, 3])
    np.testing.assert_array_equal(sizes, [2, 1, 3, 0])
    # a comment on an item the run does not hold has no root
    assert thread_roots(np.array([0, 7]), np.array([-1, 99])).tolist() == [0, -1]


def test_tiny_runs_leave_the_tail_facts_unmeasured(tmp_path):
    card = scorecard([small_run(tmp_path)])
    for key in ("posts_tail", "degree_tail"):
        assert card.score(key).verdict == "not measurable"


def _zipf(n: int, alpha: float, seed: int) -> np.ndarray:
    """Discrete power law p(k) ~ k^-alpha on k >= 1 (numpy's zeta sampler)."""
    return np.random.default_rng(seed).zipf(alpha, n)


def test_posts_tail_recovers_a_known_exponent(tmp_path):
    # 3,000 agents whose POST counts follow p(k) ~ k^-2.5 (capped at 400 to keep the file small):
    # the maximum-likelihood exponent must come back within 0.15 of 2.5
    counts = np.minimum(_zipf(3000, 2.5, 1), 400)
    agents = [f"agent_{i}" for i in range(len(counts))]
    events, next_id = [], 0
    for i, k in enumerate(counts):
        for _ in range(int(k)):
            events.append(_content("POST", next_id, agents[i], rnd=2))
            next_id += 1
    run = write_run(tmp_path / "tail", agents, events, {(2, a): {"POST": 1} for a in agents}, None, rounds=2)
    assert _value(run, "posts_tail") == pytest.approx(2.5, abs=0.15)


def test_degree_tail_recovers_a_known_exponent(tmp_path):
    # a configuration-model graph on a degree sequence with p(k) ~ k^-2.5 (multi-edges and loops
    # removed, which moves few degrees): the tie graph's degree tail must come back near 2.5
    import networkx as nx
    seq = np.minimum(_zipf(4000, 2.5, 3), 200)
    if seq.sum() % 2:
        seq[0] += 1
    g = nx.Graph(nx.configuration_model(seq.tolist(), seed=4))
    g.remove_edges_from(nx.selfloop_edges(g))
    W = nx.to_scipy_sparse_array(g, nodelist=range(len(seq)), format="csr") * 0.5
    agents = [f"agent_{i}" for i in range(len(seq))]
    run = write_run(tmp_path / "degrees", agents, [], {}, W, rounds=1)
    assert _value(run, "degree_tail") == pytest.approx(2.5, abs=0.2)


# ---------------------------------------------------------------------------------- the statistics
def test_gini_by_hand():
    assert gini([1, 1, 1, 1]) == pytest.approx(0.0)
    # one of four holds everything: (2*4 - 5) * 1 / (4 * 1) = 3/4
    assert gini([0, 0, 0, 1]) == pytest.approx(0.75)
    assert math.isnan(gini([])) and math.isnan(gini([0, 0], all_zero=math.nan)) and gini([0, 0]) == 0.0
    with pytest.raises(ValueError, match="non-negative"):
        gini([1, -1])


def test_reciprocity_and_assortativity_by_hand():
    assert reciprocity([0, 1, 2], [1, 0, 0]) == pytest.approx(2 / 3)       # 0->1, 1->0 returned; 2->0 not
    assert math.isnan(reciprocity([0], [0]))                             # a self-interaction only
    with pytest.raises(ValueError, match="same length"):
        reciprocity([0, 1], [1])
    assert group_assortativity([[0, 1], [2, 3]], ["a", "a", "b", "b"]) == pytest.approx(1.0)
    # every edge across: e_ab = e_ba = 1/2, a_a = a_b = 1/2: (0 - 1/2) / (1 - 1/2) = -1
    assert group_assortativity([[0, 2], [1, 3]], ["a", "a", "b", "b"]) == pytest.approx(-1.0)
    with pytest.raises(ValueError, match=r"\(m, 2\)"):
        group_assortativity([[0, 1, 2]], ["a", "b", "c"])
    with pytest.raises(ValueError, match="must index the 2 labels"):
        group_assortativity([[0, 5]], ["a", "b"])


def test_a_narrow_sample_has_no_heavy_tail_and_fails():
    # 32 counts packed in 15..30: any fitted x_min is >= 15 and the largest value 30 < 10 x 15
    narrow = np.arange(15, 31).repeat(2)
    assert tail_exponent(narrow) == math.inf
    fact = next(f for f in FACTS if f.key == "posts_tail")
    assert fact.passes(math.inf) is False and fact.passes(math.nan) is None
    assert band_distance(math.inf, fact.band) == math.inf


def test_tail_and_trend_need_enough_data():
    assert math.isnan(tail_exponent([1, 2, 3] * 5))                      # 15 values < 20
    assert math.isnan(tail_exponent([4] * 50))                           # one distinct value
    assert math.isnan(negativity_trend([0, 1], [-1, 0], [0.0, -1.0]))    # one thread


# ---------------------------------------------------------------------------------- the scorecard
def test_every_fact_has_references_a_rule_and_a_band():
    assert len(FACTS) >= 8
    assert len({f.key for f in FACTS}) == len(FACTS)
    for f in FACTS:
        assert f.references and all(r.citation and r.where and r.platform and r.value for r in f.references)
        assert f.rule and f.measure and f.band[0] <= f.band[1]


def test_interval_and_verdict_over_runs(tmp_path):
    run = small_run(tmp_path)
    card = scorecard([run, run, run])
    s = card.score("reciprocity")
    assert s.values == (pytest.approx(0.8),) * 3
    assert s.interval == (pytest.approx(0.8), pytest.approx(0.8))         # no spread between runs
    assert scorecard([run]).score("reciprocity").interval is None           # one run: no interval
    assert s.fact.band == (0.02, 0.3) and s.verdict == "fail"               # 0.8 is above the band
    assert card.score("clustering").verdict == "fail"                       # 7/9 > 0.35
    assert card.score("thread_depth").verdict == "fail"                     # 0.75 < 0.9
    assert card.score("giant_component").verdict == "pass"                  # 1.0 in [0.95, 1]
    assert card.score("posts_tail").verdict == "not measurable"


def test_band_distance_by_hand():
    assert band_distance(0.5, (0.2, 0.6)) == 0.0
    assert band_distance(1.0, (0.2, 0.6)) == pytest.approx(1.0)           # 0.4 past the end / width 0.4
    assert band_distance(-0.5, (0.0, math.inf)) == pytest.approx(0.5)
    assert math.isnan(band_distance(math.nan, (0, 1)))


def test_agent_order_comes_from_the_summary(tmp_path):
    # the tie matrix's rows follow summary.json's agents; rounds.csv lists them in another order
    run = small_run(tmp_path)
    (run / layout.SUMMARY).write_text(json.dumps({"agents": ["agent_3", "agent_2", "agent_1", "agent_0"]}))
    data = load_run_data(run)
    assert data.agents == ["agent_3", "agent_2", "agent_1", "agent_0"]
    assert data.main_topics().tolist() == ["", "y", "x", "x"]


def test_comments_without_target_and_injected_posts(tmp_path):
    run = small_run(tmp_path)
    with (run / layout.EVENTS).open("a") as f:
        f.write(json.dumps({"round": 2, "kind": "INTERVENTION", "intervention": "post", "id": 12,
                            "author": "agent_3", "topic": "z", "text": "injected", "sentiment": 0.0}) + "\n")
        f.write(json.dumps(_content("COM", 13, "agent_0", "agent_3", 12, rnd=2)) + "\n")
        f.write(json.dumps(_content("COM", 14, "agent_0", "agent_3", None, rnd=2)) + "\n")
    data = load_run_data(run)
    assert 12 in data.content_id[data.of_kind("POST")].tolist()             # the injected post counts
    assert 14 not in data.content_id.tolist()
    assert any("COM without target_id" in m for m in data.missing)


def test_missing_files_are_named_not_guessed(tmp_path):
    run = small_run(tmp_path)
    for f in (run / layout.TIES).iterdir():
        f.unlink()
    card = scorecard([run])
    assert card.score("clustering").verdict == "not measurable"
    assert any("ties" in n for n in card.notes)
    with pytest.raises(FileNotFoundError, match="not a run directory"):
        load_run_data(tmp_path)


def test_sweep_directories_are_searched(tmp_path):
    small_run(tmp_path / "sweep" / "a")
    small_run(tmp_path / "sweep" / "b")
    assert [p.parent.name for p in run_dirs_in(tmp_path / "sweep")] == ["a", "b"]
    with pytest.raises(FileNotFoundError, match="holds none"):
        run_dirs_in(tmp_path / "sweep" / "a" / "small" / layout.TIES)


def test_validate_command(tmp_path, capsys):
    run = small_run(tmp_path)
    assert main(["validate", str(run), "--out", str(tmp_path / "card")]) == 0
    out = capsys.readouterr().out
    assert "| Reciprocity of the interaction graph | 0.8 (1 run) | 0.02 – 0.3 | **fail** |" in out
    data = json.loads((tmp_path / "card" / "realism.json").read_text())
    assert {f["key"] for f in data["facts"]} == {f.key for f in FACTS}
    assert data["facts"][[f["key"] for f in data["facts"]].index("reciprocity")]["mean"] == pytest.approx(0.8)
    assert main(["validate", str(tmp_path / "nothing")]) == 2
    assert "not a directory" in capsys.readouterr().err


def test_written_files_agree(tmp_path):
    card = scorecard([small_run(tmp_path)])
    paths = write_scorecard(card, tmp_path / "out")
    rows = list(csv.DictReader(paths["realism.csv"].open()))
    assert [r["fact"] for r in rows] == [f.key for f in FACTS]
    assert "Realism scorecard" in paths["realism.html"].read_text()


def test_report_and_study_pages_carry_the_scorecard(tmp_path):
    from socialgym.experiments import load_config, run_experiment
    from socialgym.experiments.analysis.realism import conditions_html

    cfg = load_config({"seed": 1, "env": {"n_agents": 12, "max_rounds": 4}, "policy": {"kind": "social_users"},
                       "run": {"snapshots": False}})
    run_experiment(cfg, tmp_path / "run", progress=False)
    page = (tmp_path / "run" / layout.REPORT).read_text()
    assert "<h2>Realism scorecard</h2>" in page
    assert all(f">{f.title}<" in page for f in FACTS)
    section = conditions_html([("control", tmp_path / "run"), ("treated", tmp_path / "run")])
    assert section.count("<h3>") == 2 and "<h3>control</h3>" in section and "<h3>treated</h3>" in section
    broken = conditions_html([("gone", tmp_path / "missing")])
    assert "Not computed" in broken and "not a directory" in broken
