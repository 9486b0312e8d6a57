"""Directed, weighted social ties (SPEC §4) and the tie-scorer seam."""

from socialgym.ties.dynamics import (
    LogisticEvidence, TieDynamics, TieScorer, TieSignals, TieUpdate,
)
from socialgym.ties.pairs import PairTable
from socialgym.ties.seeding import different_interest_ties, main_interests

__all__ = ["TieDynamics", "TieScorer", "TieSignals", "TieUpdate", "LogisticEvidence", "PairTable",
           "different_interest_ties", "main_interests"]
