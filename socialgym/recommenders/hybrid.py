"""A hybrid recommender: a weighted sum of other recommenders' standardised scores."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from socialgym.recommenders.scored import ScoredRecommender


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

    def __init__(self, components: Any, **kwargs) -> None:
        super().__init__(**kwargs)
        pairs = list(components.items()) if isinstance(components, Mapping) else list(components)
        if not pairs:
            raise ValueError("Hybrid needs at least one (recommender, weight) component")
        self.components: list[tuple[ScoredRecommender, float]] = []
        for rec, weight in pairs:
            if not isinstance(rec, ScoredRecommender):
                hint = (f" (a name: make_recommender('hybrid', components={{{rec!r}: ...}}))"
                        if isinstance(rec, str) else "")
                raise TypeError(f"Hybrid components must be scored recommenders (popularity, "
                                f"topic_affinity, social, mf, or a ScoredRecommender); got {rec!r}{hint}")
            if not np.isfinite(weight):
                raise ValueError(f"Hybrid weight for {rec.name!r} must be finite, got {weight}")
            self.components.append((rec, float(weight)))

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
