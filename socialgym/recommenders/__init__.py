"""Recommenders: the seam the environment calls to build feeds and vote lists (SPEC §5).

Choose one by name in the env config (``recommender="mf"``, parameters in
``recommender_kwargs``), wrap it in re-ranking interventions (``rerank=[{"kind":
"random_replacement", "n": 3}]``), or pass your own object or function — see
``docs/recommenders.md``.
"""

from __future__ import annotations

from typing import Any

from socialgym.recommenders.base import (
    EMPTY, FeedRequest, FunctionRecommender, Recommender, top_k_excluding_own,
)
from socialgym.recommenders.engagement import Popularity, Social, TopicAffinity
from socialgym.recommenders.hybrid import Hybrid
from socialgym.recommenders.interventions import (
    RandomReplacement, Reranker, StancePenalty, TailQuotaTransfer,
)
from socialgym.recommenders.scored import ScoredRecommender
from socialgym.recommenders.simple import Chronological, RandomFeed


def _mf(**kwargs):
    from socialgym.recommenders.mf import MatrixFactorization   # imports torch
    return MatrixFactorization(**kwargs)


REGISTRY: dict[str, Any] = {
    "chronological": Chronological,
    "random": RandomFeed,
    "popularity": Popularity,
    "topic_affinity": TopicAffinity,
    "social": Social,
    "mf": _mf,
    "hybrid": Hybrid,
}

RERANKERS: dict[str, type[Reranker]] = {
    "random_replacement": RandomReplacement,
    "tail_quota_transfer": TailQuotaTransfer,
    "stance_penalty": StancePenalty,
}


def make_recommender(spec: Any, **kwargs: Any) -> Recommender:
    """A registered name (with constructor ``kwargs``), a Recommender-like object (has
    ``recommend``), or a plain function ``f(request, rng) -> ids``."""
    if isinstance(spec, str):
        if spec not in REGISTRY:
            raise ValueError(f"unknown recommender {spec!r}; available: {sorted(REGISTRY)}")
        try:
            return REGISTRY[spec](**kwargs)
        except TypeError as exc:
            raise TypeError(f"bad parameters for recommender {spec!r}: {exc}") from exc
    if kwargs:
        raise TypeError("recommender_kwargs apply only to a recommender given by name")
    if hasattr(spec, "recommend"):
        return spec
    if callable(spec):
        return FunctionRecommender(spec)
    raise TypeError(f"recommender must be a name {sorted(REGISTRY)}, an object with "
                    f"recommend(request, rng), or a function; got {spec!r}")


def apply_reranking(recommender: Recommender, steps: Any) -> Recommender:
    """Wrap ``recommender`` in each re-ranking step, innermost first. A step is a dict
    ``{"kind": <name in RERANKERS>, **parameters}`` or a callable ``f(recommender) -> recommender``."""
    for step in steps or ():
        if callable(step):
            recommender = step(recommender)
            continue
        if not isinstance(step, dict) or "kind" not in step:
            raise TypeError(f"a rerank step must be a dict with 'kind' (one of {sorted(RERANKERS)}) "
                            f"or a callable; got {step!r}")
        params = {k: v for k, v in step.items() if k != "kind"}
        if step["kind"] not in RERANKERS:
            raise ValueError(f"unknown rerank kind {step['kind']!r}; available: {sorted(RERANKERS)}")
        try:
            recommender = RERANKERS[step["kind"]](recommender, **params)
        except TypeError as exc:
            raise TypeError(f"bad parameters for rerank step {step['kind']!r}: {exc}") from exc
    return recommender


__all__ = [
    "EMPTY", "FeedRequest", "Recommender", "FunctionRecommender", "ScoredRecommender",
    "top_k_excluding_own", "Chronological", "RandomFeed", "Popularity", "TopicAffinity", "Social",
    "Hybrid", "Reranker", "RandomReplacement", "StancePenalty", "TailQuotaTransfer", "REGISTRY",
    "RERANKERS", "make_recommender", "apply_reranking",
]
