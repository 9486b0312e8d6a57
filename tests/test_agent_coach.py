"""Unit tests of ``socialgym.agents.coach``: the priorities the coach reads from the gaps between an
agent's target weights and its last reward components. No network, no model."""

from __future__ import annotations

import pytest

from socialgym.agents.coach import coach_priorities
from socialgym.config import REWARD_NAMES as RN


# ============================================================================ coach priorities
def test_coach_priorities_gaps_sorted_with_negative_and_zero_lambda_left_out():
    lam = {"SOC": 0.4, "INF": 0.0, "PRE": 0.3, "COORD": 0.2, "EMO": 0.1}
    last = {"SOC": 0.1, "INF": 0.9, "PRE": 0.5, "COORD": 0.0, "EMO": 0.1, "total": 3.0}
    # SOC .4-.1 = .3; INF lambda 0 -> left out; PRE .3-.5 = -.2; COORD .2-0 = .2; EMO .1-.1 = 0
    got = coach_priorities(last, lam)
    assert [c for c, _ in got] == ["SOC", "COORD", "EMO", "PRE"]
    assert [g for _, g in got] == pytest.approx([0.3, 0.2, 0.0, -0.2])


def test_coach_priorities_all_tied_keep_canonical_order():
    # every gap 0.2 - 0 = 0.2 (missing last rewards count 0)
    got = coach_priorities({}, dict.fromkeys(["EMO", "COORD", "PRE", "INF", "SOC"], 0.2))
    assert got == [("SOC", 0.2), ("INF", 0.2), ("PRE", 0.2), ("COORD", 0.2), ("EMO", 0.2)]


def test_coach_priorities_partial_ties():
    # INF .5-.25 = .25; COORD .25-0 = .25; EMO .25-0 = .25 (exact binary fractions) -> tie order INF, COORD, EMO
    got = coach_priorities({"INF": 0.25}, {"EMO": 0.25, "COORD": 0.25, "INF": 0.5})
    assert got == [("INF", 0.25), ("COORD", 0.25), ("EMO", 0.25)]
    # negative ties: PRE .5-1 = -.5, SOC .5-1 = -.5 -> SOC before PRE; EMO .5-.25 wins with +.25
    got = coach_priorities({"SOC": 1.0, "PRE": 1.0, "EMO": 0.25}, {"PRE": 0.5, "SOC": 0.5, "EMO": 0.5})
    assert got == [("EMO", 0.25), ("SOC", -0.5), ("PRE", -0.5)]


def test_coach_priorities_no_goals():
    assert coach_priorities({"SOC": 1.0}, {}) == []
    assert coach_priorities({}, dict.fromkeys(RN, 0.0)) == []
