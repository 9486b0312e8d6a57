"""Recommenders and re-ranking interventions by name: the one place names resolve.

``make_recommender("mf", dim=32)`` builds a registered recommender; ``apply_reranking(rec,
[{"kind": "random_replacement", "n": 3}])`` wraps a built one. The classes themselves
(``Hybrid``, the re-rankers) take built recommenders, so they never look names up.

The names are also listed in ``socialgym.config`` (``RECOMMENDER_NAMES``, ``RERANK_KINDS``),
which checks a config's names without importing this layer; ``tests/test_layers.py`` keeps the
two in agreement.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from socialgym.recommenders.base import Recommender, as_recommender
from socialgym.recommenders.engagement import Popularity, Social, TopicAffinity
from socialgym.recommenders.hybrid import Hybrid
from socialgym.recommenders.interventions import RandomReplacement, Reranker, StancePenalty, TailQuotaTransfer
from socialgym.recommenders.simple import Chronological, RandomFeed


def _mf(**kwargs):
    from socialgym.recommenders.mf import MatrixFactorization   # imports torch
    return MatrixFactorization(**kwargs)


def _hybrid(components: Any, **kwargs) -> Hybrid:
    """``components``: ``{spec: weight}`` or ``[(spec, weight), ...]``, each spec a name (built
    with its default parameters), a built recommender or a function."""
    pairs = list(components.items()) if isinstance(components, Mapping) else list(components)
    return Hybrid([(make_recommender(spec), weight) for spec, weight in pairs], **kwargs)


REGISTRY: dict[str, Any] = {
    "chronological": Chronological,
    "random": RandomFeed,
    "popularity": Popularity,
    "topic_affinity": TopicAffinity,
    "social": Social,
    "mf": _mf,
    "hybrid": _hybrid,
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
    try:
        return as_recommender(spec)
    except TypeError:
        raise TypeError(f"recommender must be a name {sorted(REGISTRY)}, an object with "
                        f"recommend(request, rng), or a function; got {spec!r}") from None


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


__all__ = ["REGISTRY", "RERANKERS", "make_recommender", "apply_reranking"]
