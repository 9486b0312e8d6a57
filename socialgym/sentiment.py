"""Sentiment scorers ``s(a) in [-1, 1]`` (specification §1).

An action with non-empty text is scored by the configured scorer; one without text takes the
value of its tone. The default scorer is VADER's compound score, which runs offline.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Callable

SentimentScorer = Callable[[str], float]


class VaderScorer:
    """VADER compound score, cached per text (agents often repeat themselves)."""

    def __init__(self, cache_size: int = 65536) -> None:
        self.cache_size = cache_size
        self._build()

    def _build(self) -> None:
        from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

        analyzer = SentimentIntensityAnalyzer()
        self._score = lru_cache(maxsize=self.cache_size)(
            lambda text: float(analyzer.polarity_scores(text)["compound"])
        )

    def __call__(self, text: str) -> float:
        return self._score(text)

    # checkpoints pickle the environment: the analyzer is rebuilt rather than stored (a pure
    # function of the text, so the cache's contents never change a result)
    def __getstate__(self) -> dict:
        return {"cache_size": self.cache_size}

    def __setstate__(self, state: dict) -> None:
        self.cache_size = state["cache_size"]
        self._build()


def make_scorer(spec: str | SentimentScorer) -> SentimentScorer | None:
    """``"vader"`` -> VaderScorer, ``"tone"`` -> None (text ignored), callable -> checked wrapper."""
    if spec == "vader":
        return VaderScorer()
    if spec == "tone":
        return None
    if callable(spec):
        return _checked(spec)
    raise ValueError(f"sentiment must be 'vader', 'tone' or a callable, got {spec!r}")


class _checked:
    """A user's scorer with its output checked (a class, not a closure, so it pickles when
    the user's function does)."""

    def __init__(self, fn: SentimentScorer) -> None:
        self.fn = fn

    def __call__(self, text: str) -> float:
        value = self.fn(text)
        try:
            value = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"sentiment scorer {self.fn!r} returned {value!r}, not a number") from None
        if not math.isfinite(value) or not -1.0 <= value <= 1.0:
            raise ValueError(f"sentiment scorer {self.fn!r} returned {value!r}, outside [-1, 1]")
        return value
