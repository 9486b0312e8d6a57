"""Recommenders and re-ranking interventions by name: the one place names resolve.

``make_recommender("mf", dim=32)`` builds a registered recommender; ``apply_reranking(rec,
[{"kind": "random_replacement", "n": 3}])`` wraps a built one. The classes themselves
(``Hybrid``, the re-rankers) take built recommenders, so they never look names up.

``check_recommender("mf", dim=32)`` and ``check_reranking(steps, n_agents)`` raise what those two
would raise about names and parameters, without building anything (no model, no torch import):
each class's ``check_params`` holds its rules, and its constructor applies the same ones.

The names are written once, in ``socialgym.config`` (``RECOMMENDER_NAMES``, ``RERANK_KINDS``),
which checks a config's names without importing this layer; the registry pairs them with their
constructors in that order.
"""

from __future__ import annotations

from typing import Any

from socialgym.config import RECOMMENDER_NAMES, RERANK_KINDS
from socialgym.platform.validation import show
from socialgym.recommenders.base import Recommender, as_recommender
from socialgym.recommenders.engagement import Popularity, Social, TopicAffinity
from socialgym.recommenders.hybrid import SCORED_NAMES, Hybrid, check_component, check_weight, component_pairs
from socialgym.recommenders.interventions import (
    EfficiencyBoost, QuotaTransfer, RandomReplacement, Reranker, StancePenalty, TailQuotaTransfer, UnderServedBoost,
)
from socialgym.recommenders.params import ParamError, check_keywords
from socialgym.recommenders.scored import ScoredRecommender
from socialgym.recommenders.seat import BridgingRanker, EngagementGreedy
from socialgym.recommenders.simple import Chronological, RandomFeed


def _mf(**kwargs):
    from socialgym.recommenders.mf import MatrixFactorization   # imports torch
    return MatrixFactorization(**kwargs)


def _learned(**kwargs):
    from socialgym.recommenders.learned import LearnedRanker   # imports torch when it loads the policy
    return LearnedRanker(**kwargs)


def _hybrid(components: Any, **kwargs) -> Hybrid:
    """``components``: ``{spec: weight}`` or ``[(spec, weight), ...]``, each spec a name (built
    with its default parameters), a built recommender or a function."""
    pairs = component_pairs(components)
    for spec, _ in pairs:
        _known_component(spec)
    return Hybrid([(make_recommender(spec), weight) for spec, weight in pairs], **kwargs)


def _known_component(spec: Any) -> None:
    if isinstance(spec, str) and spec not in REGISTRY:
        raise ParamError("components", f"components: unknown recommender {show(spec)}; "
                                       f"available: {sorted(REGISTRY)}")


# the names are written once, in socialgym.config (the config checks them without importing this
# layer); the constructors follow in the same order, and each class's own ``name`` must agree
REGISTRY: dict[str, Any] = dict(zip(RECOMMENDER_NAMES, (
    Chronological, RandomFeed, Popularity, TopicAffinity, Social, _mf, _hybrid, BridgingRanker, EngagementGreedy,
    _learned), strict=True))
RERANKERS: dict[str, type[Reranker]] = dict(zip(RERANK_KINDS, (
    RandomReplacement, TailQuotaTransfer, EfficiencyBoost, UnderServedBoost, StancePenalty), strict=True))
_MISNAMED = [(k, v.name) for k, v in REGISTRY.items()
             if isinstance(getattr(v, "name", None), str) and v.name != k]
if _MISNAMED:
    raise ImportError(f"recommender registry out of order with socialgym.config's names: {_MISNAMED}")

QUOTA_KINDS = tuple(kind for kind, cls in RERANKERS.items() if issubclass(cls, QuotaTransfer))
"""The re-rankers of agentsociety2 §7.4 (quota transfer from head to target topics)."""


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
        kind, params = _step_kind(step)
        try:
            recommender = RERANKERS[kind](recommender, **params)
        except TypeError as exc:
            raise TypeError(f"bad parameters for rerank step {kind!r}: {exc}") from exc
    return recommender


def _step_kind(step: Any) -> tuple[str, dict]:
    if not isinstance(step, dict) or "kind" not in step:
        raise TypeError(f"a rerank step must be a dict with 'kind' (one of {sorted(RERANKERS)}) "
                        f"or a callable; got {step!r}")
    params = {k: v for k, v in step.items() if k != "kind"}
    if step["kind"] not in RERANKERS:
        raise ValueError(f"unknown rerank kind {step['kind']!r}; available: {sorted(RERANKERS)}")
    return step["kind"], params


# ---------------------------------------------------------------------------------- checks only
def recommender_class(name: str) -> type[Recommender]:
    """The class a registered name builds (``mf``: its module is imported, torch is not)."""
    if name not in REGISTRY:
        raise ValueError(f"unknown recommender {name!r}; available: {sorted(REGISTRY)}")
    if name == "mf":
        from socialgym.recommenders.mf import MatrixFactorization
        return MatrixFactorization
    if name == "hybrid":
        return Hybrid
    if name == "learned":
        from socialgym.recommenders.learned import LearnedRanker
        return LearnedRanker
    return REGISTRY[name]


def check_recommender(spec: Any, **kwargs: Any) -> None:
    """Raise what ``make_recommender(spec, **kwargs)`` would raise, without building anything: a
    ValueError for an unknown name, a TypeError ("bad parameters for recommender ...") for an
    unknown or missing keyword or a spec that is no recommender, a ``ParamError`` (a ValueError
    naming the parameter) for a bad value, an ImportError for ``mf`` without torch (found
    without importing it). ``hybrid``'s components are checked by name, recursively."""
    if not isinstance(spec, str):
        if kwargs:
            raise TypeError("recommender_kwargs apply only to a recommender given by name")
        if not (hasattr(spec, "recommend") or callable(spec)):
            raise TypeError(f"recommender must be a name {sorted(REGISTRY)}, an object with "
                            f"recommend(request, rng), or a function; got {spec!r}")
        return
    cls = recommender_class(spec)
    try:
        if cls is Hybrid:
            _check_hybrid(kwargs)
        else:
            cls.check_params(**kwargs)
    except TypeError as exc:
        raise TypeError(f"bad parameters for recommender {spec!r}: {exc}") from exc
    if spec == "mf":
        from socialgym.recommenders.mf import check_torch
        check_torch()


def _check_hybrid(kwargs: dict) -> None:
    """``hybrid``'s keywords, in the order ``make_recommender`` meets them: the components'
    names (registered), each component as ``make_recommender`` would build it (its defaults),
    the other keywords, then each component a scored recommender with a finite weight."""
    if "components" not in kwargs:
        raise TypeError("Hybrid() missing required parameter 'components'")
    pairs = component_pairs(kwargs["components"])
    for spec, _ in pairs:
        _known_component(spec)
    for spec, _ in pairs:
        check_recommender(spec)
    check_keywords(Hybrid, kwargs, skip=("components",))
    for spec, weight in pairs:
        if isinstance(spec, str):
            if not issubclass(recommender_class(spec), ScoredRecommender):
                raise TypeError(f"Hybrid components must be scored recommenders ({SCORED_NAMES}); got {spec!r}")
        else:
            check_component(spec)
        check_weight(spec, weight)


def check_reranking(steps: Any, n_agents: int | None = None) -> None:
    """Raise what ``apply_reranking(recommender, steps)`` would raise, without building anything
    (callables are not called); with ``n_agents``, also a ``ParamError`` for a
    ``stance_penalty`` whose ``stances``, or a quota re-ranker whose ``users``, do not hold one
    entry per agent (the re-ranker would raise it at its first feed)."""
    for step in steps or ():
        if callable(step):
            continue
        kind, params = _step_kind(step)
        try:
            RERANKERS[kind].check_params(**params)
        except TypeError as exc:
            raise TypeError(f"bad parameters for rerank step {kind!r}: {exc}") from exc
        stances = params.get("stances")
        if n_agents is not None and kind == "stance_penalty" and hasattr(stances, "__len__") \
                and len(stances) != n_agents:
            raise ParamError("stances", f"stances has {len(stances)} labels for n_agents = {n_agents} agents")
        users = params.get("users")
        if n_agents is not None and kind in QUOTA_KINDS and hasattr(users, "__len__") and len(users) != n_agents:
            raise ParamError("users", f"users has {len(users)} flags for n_agents = {n_agents} agents")


__all__ = ["REGISTRY", "RERANKERS", "make_recommender", "apply_reranking", "recommender_class",
           "check_recommender", "check_reranking"]
