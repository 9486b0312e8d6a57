"""The claim statistics of the core paper's study on synthetic inputs with known answers."""

from __future__ import annotations

import numpy as np
import pytest

from socialgym.experiments.studies.claims import coach_early_late, learnable, llm_ties_realistic, task_order

TASKS = ("SOC", "INF", "PRE", "COORD", "EMO")
RNG = np.random.default_rng(0)


def _curves(slope: float, level: float = 0.3, noise: float = 0.02, reps: int = 3, rounds: int = 15):
    t = np.arange(1, rounds + 1)
    return {task: level + slope * t + noise * RNG.standard_normal((reps, rounds)) for task in TASKS}


def test_planted_upward_trend_is_supported():
    v = learnable(_curves(0.02))
    assert v.verdict == "supported"
    assert all(v.numbers[t]["slope"] == pytest.approx(0.02, abs=0.005) and v.numbers[t]["lo"] > 0 for t in TASKS)


def test_flat_curves_are_inconclusive_and_falling_ones_contradicted():
    assert learnable(_curves(0.0)).verdict == "inconclusive"
    assert learnable(_curves(-0.02)).verdict == "contradicted"


def test_slope_by_hand():
    # y = 1, 2, 3 over rounds 1..3 exactly: slope 1 with zero standard error -> interval [1, 1]
    v = learnable({"INF": np.array([[1.0, 2.0, 3.0]])})
    assert v.numbers["INF"] == {"slope": pytest.approx(1.0), "lo": pytest.approx(1.0), "hi": pytest.approx(1.0)}


def _ordered(means: dict[str, float]):
    return {t: np.full((2, 6), m) for t, m in means.items()}


def test_task_order_supported_reversed_contradicted_mixed_inconclusive():
    paper = {"INF": 0.9, "EMO": 0.7, "SOC": 0.5, "PRE": 0.4, "COORD": 0.1}
    v = task_order(_ordered(paper))
    assert v.verdict == "supported" and v.numbers["ranking"] == ["INF", "EMO", "SOC", "PRE", "COORD"]
    reversed_ = {t: 1 - m for t, m in paper.items()}
    assert task_order(_ordered(reversed_)).verdict == "contradicted"
    mixed = {"EMO": 0.9, "INF": 0.8, "SOC": 0.5, "COORD": 0.3, "PRE": 0.2}     # INF 2nd, COORD 4th
    assert task_order(_ordered(mixed)).verdict == "inconclusive"


def test_task_order_uses_the_last_third():
    curves = {t: np.array([[0.0, 0.0, 0.0, 0.0, 0.5, 0.5]]) for t in TASKS}
    curves["INF"] = np.array([[0.9, 0.9, 0.9, 0.9, 0.6, 0.6]])     # high early, first in the last third too
    curves["COORD"] = np.array([[0.9, 0.9, 0.9, 0.9, 0.1, 0.1]])   # high early, last in the last third
    v = task_order(curves)
    assert v.numbers["means"]["INF"] == pytest.approx(0.6) and v.numbers["means"]["COORD"] == pytest.approx(0.1)
    assert v.verdict == "supported"


def test_coach_early_gain_late_loss_is_supported_and_the_reverse_contradicted():
    rounds = 9
    base = {t: 0.4 + 0.01 * RNG.standard_normal((3, rounds)) for t in TASKS}
    bump = np.array([0.2] * 3 + [0.0] * 3 + [-0.2] * 3)                       # early +, late -
    coach = {t: base[t] + bump + 0.01 * RNG.standard_normal((3, rounds)) for t in TASKS}
    v = coach_early_late(coach, base)
    assert v.verdict == "supported"
    assert v.numbers["early"]["mean"] == pytest.approx(0.2, abs=0.02) and v.numbers["early"]["n"] == 15
    assert coach_early_late(base, coach).verdict == "contradicted"
    same = {t: base[t] + 0.01 * RNG.standard_normal((3, rounds)) for t in TASKS}
    assert coach_early_late(same, base).verdict == "inconclusive"
    with pytest.raises(ValueError, match="shape"):
        coach_early_late({"INF": np.zeros((2, 3))}, {"INF": np.zeros((2, 4))})


def test_llm_ties_verdicts_by_hand():
    bands = {"density": (0.15, 0.25), "clustering": (0.4, 0.5), "modularity": (0.3, 0.45)}
    llm = {"density": [0.2, 0.2, 0.19], "clustering": [0.45, 0.44, 0.43], "modularity": [0.35, 0.35, 0.36]}
    heuristic = {"density": [0.6, 0.3, 0.1], "clustering": [0.8, 0.5, 0.1], "modularity": [0.1, 0.4, 0.7]}
    v = llm_ties_realistic(heuristic, llm, bands)
    assert v.verdict == "supported" and v.numbers["llm_more_stable"] == 3 and v.numbers["llm_closer"] == 3
    # heuristic density 0.6, 0.3, 0.1 against [0.15, 0.25]: distances 0.35, 0.05, 0.05 -> mean 0.15; spread 0.5
    assert v.numbers["density"]["distance_heuristic"] == pytest.approx(0.15)
    assert v.numbers["density"]["spread_heuristic"] == pytest.approx(0.5)
    assert llm_ties_realistic(llm, heuristic, bands).verdict == "contradicted"
    split = dict(llm, density=heuristic["density"])            # LLM wins 2 of 3 on both: still supported
    assert llm_ties_realistic(heuristic, split, bands).verdict == "supported"
    half = {"density": llm["density"], "clustering": heuristic["clustering"]}
    assert llm_ties_realistic({"density": heuristic["density"], "clustering": llm["clustering"]}, half,
                              {k: bands[k] for k in half}).verdict == "inconclusive"
    with pytest.raises(ValueError, match="no metric"):
        llm_ties_realistic({}, {}, bands)
