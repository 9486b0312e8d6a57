"""What annotators read and write: ``AnnotationRequest`` in, ``Annotation`` out.

An annotator is any object with ``annotate(requests) -> list[Annotation]`` (one annotation per
request, in order) and a ``k`` (how many annotator personas rate each comment). The discussion
environment calls it once per new comment when annotation is live; ``annotate_discussion``
calls it once for a whole finished discussion, so LLM annotators can send every request
concurrently.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

import numpy as np

from socialgym.annotation.polarization import ndfu

SCALE = (1, 2, 3, 4, 5)


@dataclass(frozen=True)
class AnnotationRequest:
    """One comment to rate, with the comments before it (the annotator's context)."""

    comment_id: int
    author: str
    text: str
    context: tuple[tuple[str, str], ...] = ()    # (author, text) of the preceding comments, oldest first
    topic: str = ""


@dataclass(frozen=True)
class Annotation:
    """The k annotators' ratings of one comment (NaN = that annotator gave no valid rating)."""

    toxicity: np.ndarray             # (k,) float, 1..5 or NaN
    argument_quality: np.ndarray     # (k,) float, 1..5 or NaN

    def __post_init__(self) -> None:
        for name in ("toxicity", "argument_quality"):
            values = np.asarray(getattr(self, name), dtype=np.float64).reshape(-1)
            ok = np.isnan(values) | np.isin(values, SCALE)
            if not ok.all():
                raise ValueError(f"annotation {name} must hold ratings in 1..5 (or NaN), got {values[~ok][0]!r}")
            object.__setattr__(self, name, values)

    @property
    def mean_toxicity(self) -> float:
        return _nanmean(self.toxicity)

    @property
    def mean_argument_quality(self) -> float:
        return _nanmean(self.argument_quality)

    @property
    def ndfu_toxicity(self) -> float:
        return float(ndfu(self.toxicity)) if np.isfinite(self.toxicity).any() else float("nan")

    @property
    def ndfu_argument_quality(self) -> float:
        return float(ndfu(self.argument_quality)) if np.isfinite(self.argument_quality).any() else float("nan")

    def summary(self) -> dict:
        return {"toxicity": self.mean_toxicity, "argument_quality": self.mean_argument_quality,
                "ndfu_toxicity": self.ndfu_toxicity, "ndfu_argument_quality": self.ndfu_argument_quality,
                "toxicity_ratings": [None if np.isnan(v) else int(v) for v in self.toxicity],
                "argument_quality_ratings": [None if np.isnan(v) else int(v) for v in self.argument_quality]}


def _nanmean(values: np.ndarray) -> float:
    finite = values[np.isfinite(values)]
    return float(finite.mean()) if len(finite) else float("nan")


class Annotator(Protocol):
    k: int

    def annotate(self, requests: Sequence[AnnotationRequest]) -> list[Annotation]: ...
