"""Annotator polarisation: the normalised Distance From Unimodality (nDFU).

Pavlopoulos & Likas (2024) measure how far the distribution of several annotators' ratings of
one item is from being unimodal. With ``f`` the relative frequencies over the ordered rating
scale and ``m`` the (first) index of its maximum, DFU is the largest rise met when walking away
from the mode in either direction:

    DFU  = max(0, max_{m <= i < k-1} (f[i+1] - f[i]), max_{1 <= i <= m} (f[i-1] - f[i]))
    nDFU = DFU / f[m]

nDFU is 0 for any unimodal histogram (perfect agreement included) and 1 when the histogram
has an empty category between two equally high peaks. The LLM-facilitators paper (App. A.3.2)
uses it to check how much its ten LLM annotators disagree on toxicity.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["histogram", "ndfu"]

DEFAULT_SCALE: tuple[int, ...] = (1, 2, 3, 4, 5)


def _as_ratings(ratings: Sequence[float] | np.ndarray) -> tuple[np.ndarray, bool]:
    """Ratings as a float 2-D array (rows = items) and whether the input was 1-D."""
    r = np.asarray(ratings, dtype=float)
    if r.ndim == 1:
        return r[None, :], True
    if r.ndim == 2:
        return r, False
    raise ValueError(f"ratings must be 1-D (one item) or 2-D (items x annotators), got {r.ndim}-D")


def _as_scale(scale: Sequence[float]) -> np.ndarray:
    s = np.asarray(scale, dtype=float)
    if s.ndim != 1 or s.size == 0:
        raise ValueError("scale must be a non-empty 1-D sequence of rating values")
    if np.isnan(s).any():
        raise ValueError("scale must not contain NaN")
    if np.unique(s).size != s.size:
        raise ValueError(f"scale has repeated values: {tuple(scale)}")
    return s


def _counts(r: np.ndarray, s: np.ndarray) -> np.ndarray:
    """Per-row counts of each scale category, shape (items, len(scale)).

    Raises ValueError for any non-NaN rating outside the scale: silently dropping it would
    change the histogram and hence the polarisation.
    """
    hit = r[:, :, None] == s[None, None, :]  # (items, annotators, categories)
    bad = ~np.isnan(r) & ~hit.any(axis=2)
    if bad.any():
        values = np.unique(r[bad])
        shown = ", ".join(f"{x:g}" for x in values[:10])
        raise ValueError(
            f"rating(s) not in scale {tuple(s.tolist())}: {shown}"
            + (" ..." if values.size > 10 else "")
        )
    return hit.sum(axis=1)


def _frequencies(r: np.ndarray, s: np.ndarray) -> np.ndarray:
    counts = _counts(r, s).astype(float)
    total = counts.sum(axis=1, keepdims=True)
    f = np.full(counts.shape, np.nan)
    # rows without any rating have no distribution: leave them NaN
    np.divide(counts, total, out=f, where=total > 0)
    return f


def histogram(
    ratings: Sequence[float] | np.ndarray, scale: Sequence[float] = DEFAULT_SCALE
) -> np.ndarray:
    """Relative frequency of each ``scale`` category among the non-NaN ratings.

    A 1-D input (one item) gives shape ``(len(scale),)``; a 2-D input (items x annotators)
    gives ``(items, len(scale))``. A row with no ratings is all NaN.
    """
    r, one = _as_ratings(ratings)
    f = _frequencies(r, _as_scale(scale))
    return f[0] if one else f


def ndfu(
    ratings: Sequence[float] | np.ndarray, scale: Sequence[float] = DEFAULT_SCALE
) -> float | np.ndarray:
    """Normalised Distance From Unimodality of the ratings of one item or of each row.

    ``ratings`` is 1-D (one item's ratings, returns a float) or 2-D (rows = items, columns =
    annotators, returns one value per row). NaN entries are missing ratings and are skipped;
    a row with none gives NaN. ``scale`` lists the rating categories in order; a rating not in
    it raises ValueError. When several categories tie for the maximum, the first one is the
    mode, as in the original definition.
    """
    r, one = _as_ratings(ratings)
    f = _frequencies(r, _as_scale(scale))
    n_items, k = f.shape
    out = np.full(n_items, np.nan)
    valid = ~np.isnan(f[:, 0]) if k else np.zeros(n_items, dtype=bool)
    if valid.any() and k > 1:
        fv = f[valid]
        mode = np.argmax(fv, axis=1)  # argmax returns the first index of the maximum
        step = np.diff(fv, axis=1)  # step[:, j] = f[j+1] - f[j], j = 0 .. k-2
        j = np.arange(k - 1)[None, :]
        # Walking right from the mode (j >= m) a rise is f[j+1] - f[j] = step[j]; walking left
        # (j < m) the move from j+1 to j rises by f[j] - f[j+1] = -step[j].
        rise = np.where(j >= mode[:, None], step, -step)
        dfu = np.maximum(rise.max(axis=1), 0.0)
        out[valid] = dfu / fv[np.arange(fv.shape[0]), mode]
    elif valid.any():
        out[valid] = 0.0  # a one-category scale cannot be multimodal
    return float(out[0]) if one else out
