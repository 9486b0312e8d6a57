"""Recommenders: the seam the environment calls to build feeds and vote lists (SPEC §5)."""

from __future__ import annotations

from typing import Any

from socialgym.recommenders.base import (
    EMPTY, FeedRequest, FunctionRecommender, Recommender, top_k_excluding_own,
)
from socialgym.recommenders.simple import Chronological, RandomFeed

REGISTRY: dict[str, type[Recommender]] = {
    "chronological": Chronological,
    "random": RandomFeed,
}


def make_recommender(spec: Any) -> Recommender:
    """A registered name, a Recommender-like object (has ``recommend``), or a plain function."""
    if isinstance(spec, str):
        if spec not in REGISTRY:
            raise ValueError(f"unknown recommender {spec!r}; available: {sorted(REGISTRY)}")
        return REGISTRY[spec]()
    if hasattr(spec, "recommend"):
        return spec
    if callable(spec):
        return FunctionRecommender(spec)
    raise TypeError(f"recommender must be a name {sorted(REGISTRY)}, an object with "
                    f"recommend(request, rng), or a function; got {spec!r}")


__all__ = [
    "EMPTY", "FeedRequest", "Recommender", "FunctionRecommender", "top_k_excluding_own",
    "Chronological", "RandomFeed", "REGISTRY", "make_recommender",
]
