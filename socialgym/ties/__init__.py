"""Directed, weighted social ties (specification §4) and the tie-scorer seam."""

from collections.abc import Mapping

from socialgym.platform.actions import RoundTranscript
from socialgym.ties.dynamics import (
    LogisticEvidence, TieDynamics, TieScorer, TieSignals, TieUpdate,
)
from socialgym.ties.pairs import PairTable
from socialgym.platform.population import main_interests
from socialgym.ties.seeding import different_interest_ties


def make_tie_scorer(spec, evidence_weights):
    """``None``/``"logistic"`` -> ``G_theta``; ``{"kind": "llm", **client_kwargs}`` -> an
    ``LLMTieScorer`` over a new ``LLMClient``; any object with ``score`` is used as it is."""
    if spec is None or spec == "logistic":
        return LogisticEvidence(evidence_weights)
    if isinstance(spec, Mapping):
        spec = dict(spec)
        kind = spec.pop("kind")
        if kind == "logistic":
            return LogisticEvidence({**evidence_weights, **spec})
        from socialgym.llm import LLMClient
        from socialgym.ties.llm_scorer import LLMTieScorer

        scorer_keys = {"transcript_tokens", "text_chars", "max_tokens"}
        return LLMTieScorer(LLMClient(**{k: v for k, v in spec.items() if k not in scorer_keys}),
                            **{k: v for k, v in spec.items() if k in scorer_keys})
    return spec


def __getattr__(name):       # LLMTieScorer loads the LLM layer only when asked for
    if name == "LLMTieScorer":
        from socialgym.ties.llm_scorer import LLMTieScorer
        return LLMTieScorer
    raise AttributeError(name)


__all__ = ["make_tie_scorer", "LLMTieScorer", "RoundTranscript", "TieDynamics", "TieScorer", "TieSignals", "TieUpdate",
           "LogisticEvidence", "PairTable", "different_interest_ties", "main_interests"]
