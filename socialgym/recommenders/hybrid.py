"""A hybrid recommender: a weighted sum of other recommenders' standardised scores."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from socialgym.platform.validation import is_number, show
from socialgym.recommenders.params import Param, ParamError, check_own
from socialgym.recommenders.scored import ScoredRecommender

SCORED_NAMES = "popularity, topic_affinity, social, mf, or a ScoredRecommender"


def component_pairs(components: Any) -> list[tuple[Any, float]]:
    """``components`` as a list of (recommender or name, weight): from ``{spec: weight}`` or
    ``[(spec, weight), ...]``; a ParamError for another shape or no component. The weights are
    checked by :func:`check_weight`; what each spec may be is the caller's rule (built:
    :func:`check_component`; by name: ``registry.check_recommender``)."""
    if isinstance(components, Mapping):
        pairs = list(components.items())
    elif isinstance(components, (str, bytes)) or not isinstance(components, Iterable):
        raise ParamError("components", f"components must be {{recommender: weight}} or a list of "
                                       f"(recommender, weight) pairs, got {show(components)}")
    else:
        pairs = list(components)
    if not pairs:
        raise ParamError("components", "components: Hybrid needs at least one (recommender, weight) component")
    out = []
    for pair in pairs:
        if isinstance(pair, (str, bytes)) or not isinstance(pair, Sequence) or len(pair) != 2:
            raise ParamError("components", f"components: each entry must be a (recommender, weight) pair, "
                                           f"got {show(pair)}")
        spec, weight = pair
        out.append((spec, weight))
    return out


def check_weight(spec: Any, weight: Any) -> None:
    """A component's weight: a finite number (negative: the component counts against)."""
    if not is_number(weight):
        label = spec if isinstance(spec, str) else getattr(spec, "name", type(spec).__name__)
        raise ParamError("components", f"components: the weight of {label!r} must be a finite number, "
                                       f"got {show(weight)}")


def check_component(rec: Any) -> None:
    """A built component: a ScoredRecommender (a TypeError otherwise, with a hint for a name)."""
    if not isinstance(rec, ScoredRecommender):
        hint = (f" (a name: make_recommender('hybrid', components={{{rec!r}: ...}}))"
                if isinstance(rec, str) else "")
        raise TypeError(f"Hybrid components must be scored recommenders ({SCORED_NAMES}); got {show(rec)}{hint}")


def _check_built_components(name: str, components: Any) -> None:
    for rec, weight in component_pairs(components):
        check_component(rec)
        check_weight(rec, weight)


class Hybrid(ScoredRecommender):
    """``Hybrid([(MatrixFactorization(), 0.6), (Popularity(), 0.4)])`` (or ``{recommender:
    weight}``): built scored recommenders with their weights. By name, as in a config:
    ``make_recommender("hybrid", components={"mf": 0.6, "popularity": 0.2, "social": 0.2})``.

    Scores live on different scales (logits, like counts, tie weights), so each component's
    scores are standardised per viewer over that viewer's candidates (mean 0, sd 1; a constant
    row becomes 0) before the weighted sum. Candidates are the union of the components'
    extra candidates (e.g. the social component's tie items) and the shared pool/sample.
    Every component is updated after every round.
    """

    name = "hybrid"
    PARAMS = {"components": Param("custom", required=True, check=_check_built_components)}

    def __init__(self, components: Any, **kwargs) -> None:
        super().__init__(**kwargs)
        pairs = component_pairs(components)      # read once: ``components`` may be a one-shot iterable
        check_own(Hybrid, components=pairs)
        self.components: list[tuple[ScoredRecommender, float]] = [(rec, float(weight)) for rec, weight in pairs]

    def score(self, request, viewers, cand):
        total = np.zeros(cand.shape)
        for rec, weight in self.components:
            s = rec.total_score(request, viewers, cand)
            sd = s.std(axis=1, keepdims=True)
            total += weight * np.where(sd > 0, (s - s.mean(axis=1, keepdims=True)) / np.where(sd > 0, sd, 1), 0.0)
        return total

    def extra_candidates(self, request, pool, viewers):
        extras = [e for rec, _ in self.components
                  if (e := rec.extra_candidates(request, pool, viewers)) is not None and e.shape[1]]
        return np.concatenate(extras, axis=1) if extras else None

    def update(self, content, batch, rng) -> None:
        for rec, _ in self.components:
            rec.update(content, batch, rng)

    def reset(self) -> None:
        for rec, _ in self.components:
            rec.reset()

    def state_dict(self) -> dict:
        return {"components": [rec.state_dict() for rec, _ in self.components]}

    def load_state_dict(self, state: dict) -> None:
        for (rec, _), sub in zip(self.components, state["components"]):
            rec.load_state_dict(sub)
