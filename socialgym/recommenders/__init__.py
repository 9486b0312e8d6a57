"""Recommenders: the seam the environment calls to build feeds and vote lists (specification §5).

Choose one by name in the env config (``recommender="mf"``, parameters in
``recommender_kwargs``), wrap it in re-ranking interventions (``rerank=[{"kind":
"random_replacement", "n": 3}]``), or pass your own object or function — see
``docs/recommenders.md``. Names resolve in ``registry`` (``make_recommender``,
``apply_reranking``); the classes take built recommenders. Parameters are checked without
building anything by ``check_recommender`` / ``check_reranking`` and each class's
``check_params`` (a ``ParamError`` names the bad parameter; limits in ``PARAM_LIMITS``).
"""

from __future__ import annotations

from socialgym.recommenders.base import (
    EMPTY, FeedRequest, FunctionRecommender, Recommender, as_recommender, top_k_excluding_own,
)
from socialgym.recommenders.engagement import Popularity, Social, TopicAffinity
from socialgym.recommenders.hybrid import Hybrid
from socialgym.recommenders.interventions import (
    EfficiencyBoost, QuotaTransfer, RandomReplacement, Reranker, StancePenalty, TailQuotaTransfer, UnderServedBoost,
)
from socialgym.recommenders.params import PARAM_LIMITS, ParamError
from socialgym.recommenders.registry import (
    RERANKERS, REGISTRY, apply_reranking, check_recommender, check_reranking, make_recommender, recommender_class,
)
from socialgym.recommenders.scored import ScoredRecommender
from socialgym.recommenders.simple import Chronological, RandomFeed

__all__ = [
    "EMPTY", "FeedRequest", "Recommender", "FunctionRecommender", "ScoredRecommender",
    "top_k_excluding_own", "as_recommender", "Chronological", "RandomFeed", "Popularity", "TopicAffinity", "Social",
    "Hybrid", "Reranker", "RandomReplacement", "StancePenalty", "TailQuotaTransfer", "QuotaTransfer",
    "EfficiencyBoost", "UnderServedBoost", "REGISTRY",
    "RERANKERS", "make_recommender", "apply_reranking", "recommender_class", "check_recommender", "check_reranking",
    "ParamError", "PARAM_LIMITS",
]
