"""The core paper's claim statistics (claims.py) on synthetic runs with known answers."""

from __future__ import annotations

import numpy as np
import pytest

from socialgym.experiments.studies import claims as c
from socialgym.experiments.studies import evidence as ev

TASKS = ("SOC", "INF", "PRE", "COORD", "EMO")
AT_SCALE = ev.Scale(agents=30, rounds=15, runs=0, model="gpt-4.1-mini")
SMALL = ev.Scale(agents=5, rounds=4, runs=0, model="the embedded SmolLM2-135M")
BANDS = {"density": (0.1, 0.3), "clustering": (0.3, 0.6)}


def _sweep(density, clustering, n_nodes=30):
    return [{"theta": t, "n_nodes": n_nodes, "density": d, "clustering": k}
            for t, d, k in zip((0.05, 0.1, 0.2), density, clustering)]


def _runs(curve, *, reps=3, coach_curve=None, llm_sweep=None, heur_sweep=None, seed=0, noise=0.01):
    """The 2 x 2 design: ``curve(task, rng)`` gives a run's reward per round."""
    rng = np.random.default_rng(seed)
    runs = []
    for coach in (False, True):
        for llm in (False, True):
            for rep in range(reps):
                make = coach_curve if coach and coach_curve else curve
                runs.append({"coach": coach, "llm_ties": llm, "replicate": rep,
                             "curves": {t: (make(t) + noise * rng.standard_normal(15)).tolist() for t in TASKS},
                             "sweep": (llm_sweep if llm else heur_sweep) or _sweep((0.2,) * 3, (0.4,) * 3),
                             "stance_homophily": 0.8})
    return runs


def test_planted_rise_is_supported_at_scale_and_not_tested_below_it():
    runs = _runs(lambda t: 0.3 + 0.02 * np.arange(15))
    v = c.learnable(runs, AT_SCALE)
    assert v.verdict == "supported" and v.n == 12
    assert all(v.numbers[t]["mean"] == pytest.approx(0.02, abs=0.003) for t in TASKS)
    below = c.learnable(runs, SMALL)
    assert below.verdict == "not tested at this scale" and below.direction == "supported"
    assert "5 agents < the paper's 30" in below.shortfalls
    assert c.learnable(_runs(lambda t: 0.3 - 0.02 * np.arange(15)), AT_SCALE).verdict == "contradicted"
    assert c.learnable(_runs(lambda t: np.full(15, 0.3)), AT_SCALE).verdict == "inconclusive"


def test_round_1_is_left_out_of_the_slope():
    # a jump in round 1 only (0 then flat 0.5): with round 1, a rise; from round 2, flat
    runs = _runs(lambda t: np.r_[0.0, np.full(14, 0.5)], noise=0.0)
    v = c.learnable(runs, AT_SCALE)
    assert v.numbers["INF"]["mean"] == pytest.approx(0.0)


def test_task_order_needs_confidence_across_runs():
    level = {"INF": 0.9, "EMO": 0.7, "SOC": 0.5, "PRE": 0.4, "COORD": 0.1}
    v = c.task_order(_runs(lambda t: np.full(15, level[t])), AT_SCALE)
    assert v.verdict == "supported" and v.numbers["ranking"] == ["INF", "EMO", "SOC", "PRE", "COORD"]
    assert v.numbers["p_paper_order"] == 1.0
    reverse = c.task_order(_runs(lambda t: np.full(15, 1 - level[t])), AT_SCALE)
    assert reverse.verdict == "contradicted"
    # the paper's order in the means, but by less than the run-to-run noise: no confidence
    close = {"INF": 0.52, "EMO": 0.51, "SOC": 0.50, "PRE": 0.49, "COORD": 0.48}
    noisy = c.task_order(_runs(lambda t: np.full(15, close[t]), noise=0.3, seed=4), AT_SCALE)
    assert noisy.verdict == "inconclusive" and noisy.numbers["p_paper_order"] < 0.95


def test_the_coach_effect_counts_run_pairs():
    bump = np.r_[np.zeros(1), np.full(5, 0.2), np.zeros(4), np.full(5, -0.2)]    # rounds 2-6 +, 11-15 -
    runs = _runs(lambda t: np.full(15, 0.4), coach_curve=lambda t: 0.4 + bump, reps=3)
    v = c.coach_early_late(runs, AT_SCALE)
    # 3 replicates x 2 tie conditions = 6 coach pairs (not 30 group cells)
    assert v.n == 6 and v.numbers["early"]["n"] == 6
    assert v.numbers["early"]["mean"] == pytest.approx(0.2, abs=0.01)
    assert v.numbers["late"]["mean"] == pytest.approx(-0.2, abs=0.01)
    assert v.verdict == "supported"
    flipped = _runs(lambda t: 0.4 + bump, coach_curve=lambda t: np.full(15, 0.4))
    assert c.coach_early_late(flipped, AT_SCALE).verdict == "contradicted"
    per_group = c.coach_per_group(runs, AT_SCALE)
    assert per_group.verdict == "supported" and per_group.numbers["EMO"]["mean"] == pytest.approx(0.2, abs=0.01)


def test_llm_ties_closer_and_steadier_by_hand():
    # LLM density 0.2 everywhere (in the band, spread 0); heuristic 0.6, 0.3, 0.05: spread 0.55,
    # distances 0.3, 0, 0.05 -> mean 0.1167
    llm = _sweep((0.2, 0.2, 0.2), (0.45, 0.45, 0.45))
    heur = _sweep((0.6, 0.3, 0.05), (0.9, 0.4, 0.1))
    runs = _runs(lambda t: np.full(15, 0.4), llm_sweep=llm, heur_sweep=heur)
    v = c.llm_ties_realistic(runs, BANDS, AT_SCALE)
    assert v.numbers["density"]["spread"]["mean"] == pytest.approx(-0.55)
    assert v.numbers["density"]["distance"]["mean"] == pytest.approx(-(0.3 + 0.05) / 3)
    # identical pairs: zero-width intervals below 0 -> LLM steadier and closer on both metrics
    assert v.verdict == "supported" and v.n == 6
    assert c.llm_ties_realistic(_runs(lambda t: np.full(15, 0.4), llm_sweep=heur, heur_sweep=llm), BANDS,
                                AT_SCALE).verdict == "contradicted"
    d = c.heuristic_diverges(runs, {**BANDS, "avg_shortest_path_norm": (0.0, 1.0)}, AT_SCALE)
    assert d.verdict == "inconclusive"       # path length has no values here: one of two metrics


def test_coach_lowers_degree_by_hand():
    runs = _runs(lambda t: np.full(15, 0.4))
    for r in runs:                            # mean degree = density x (n - 1) at theta 0.1
        r["sweep"] = _sweep((0.3, 0.2 if r["coach"] else 0.4, 0.1), (0.4,) * 3, n_nodes=11)
    v = c.coach_lowers_degree(runs, AT_SCALE)
    assert v.numbers["difference"]["mean"] == pytest.approx((0.2 - 0.4) * 10)
    assert v.verdict == "supported"


def test_stance_homophily_is_reported_without_a_verdict():
    v = c.stance_homophily(_runs(lambda t: np.full(15, 0.4)), AT_SCALE)
    assert v.numbers["phi"]["mean"] == pytest.approx(0.8) and v.verdict == c.NO_CLAIM
    assert len(c.all_claims(_runs(lambda t: np.full(15, 0.4)), {**BANDS, "avg_shortest_path_norm": (0, 1)},
                            AT_SCALE)) == 8
