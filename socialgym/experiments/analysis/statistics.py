"""The package's statistics, in one place: intervals over independent runs and the distances
the verdicts and scorecards use.

- **Bootstrap over runs** (:func:`bootstrap_mean`, :func:`paired_difference`,
  :func:`relative_change`, :func:`trend`, :func:`bootstrap_slope`, :func:`rank_probability`): the
  percentile interval over :data:`BOOTSTRAP` seeded resamples of the independent units (runs, or
  run pairs), at :data:`LEVEL`; the rules of evidence that use them are
  ``socialgym.experiments.studies.evidence``.
- **t intervals** (:func:`mean_ci`, :func:`t_half_width`): the classical interval of a mean with
  n - 1 degrees of freedom, for per-round curves over replicates and policy evaluations.
- **Band distances** (:func:`band_distance`, :func:`band_distance_in_widths`): how far a value
  lies outside a range, absolute or in widths of the range.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

import numpy as np

BOOTSTRAP = 10_000
"""Bootstrap resamples per interval."""
LEVEL = 0.95
"""Interval level, and the share of resamples a ranking must hold in."""


@dataclass(frozen=True)
class Interval:
    mean: float
    lo: float
    hi: float
    n: int

    def text(self, digits: int = 3, unit: str = "") -> str:
        if not math.isfinite(self.mean):
            return "n/a"
        f = f"{{:+.{digits}f}}"
        if self.n < 2 or not math.isfinite(self.lo):
            return f"{f.format(self.mean)}{unit} (n = {self.n}, no interval)"
        return f"{f.format(self.mean)}{unit} [{f.format(self.lo)}, {f.format(self.hi)}] (n = {self.n})"


def _resamples(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, n, size=(BOOTSTRAP, n))


def _units(values) -> np.ndarray:
    v = np.asarray(values, float)
    if v.ndim != 1:
        raise ValueError(f"expected one value per independent run, got an array of shape {v.shape}")
    if not np.all(np.isfinite(v)):
        raise ValueError("a run's value is not finite (nan or inf): a missing run must be left out, not averaged in")
    return v


def bootstrap_mean(values: Sequence[float], seed: int = 0) -> Interval:
    """Mean over independent runs with its percentile bootstrap interval."""
    v = _units(values)
    if len(v) == 0:
        return Interval(math.nan, math.nan, math.nan, 0)
    if len(v) == 1:
        return Interval(float(v[0]), math.nan, math.nan, 1)
    means = v[_resamples(len(v), seed)].mean(axis=1)
    lo, hi = np.quantile(means, [(1 - LEVEL) / 2, (1 + LEVEL) / 2])
    return Interval(float(v.mean()), float(lo), float(hi), len(v))


def paired_difference(treated: Sequence[float], control: Sequence[float], seed: int = 0) -> Interval:
    """Mean of the per-pair differences treated − control (pair k: the same seed in both arms)."""
    a, b = _units(treated), _units(control)
    if a.shape != b.shape:
        raise ValueError(f"paired arms differ in length: {len(a)} treated runs, {len(b)} control runs")
    return bootstrap_mean(a - b, seed)


def relative_change(treated: Sequence[float], control: Sequence[float], seed: int = 0) -> Interval:
    """mean(treated) / mean(control) − 1 over run pairs, the pairs resampled together."""
    a, b = _units(treated), _units(control)
    if a.shape != b.shape:
        raise ValueError(f"paired arms differ in length: {len(a)} treated runs, {len(b)} control runs")
    if len(a) == 0 or b.mean() == 0:
        return Interval(math.nan, math.nan, math.nan, len(a))
    point = float(a.mean() / b.mean() - 1)
    if len(a) == 1:
        return Interval(point, math.nan, math.nan, 1)
    idx = _resamples(len(a), seed)
    den = b[idx].mean(axis=1)
    ratios = a[idx].mean(axis=1)[den != 0] / den[den != 0] - 1
    lo, hi = np.quantile(ratios, [(1 - LEVEL) / 2, (1 + LEVEL) / 2])
    return Interval(point, float(lo), float(hi), len(a))


def unit_means(cells: Sequence[float], units: Sequence) -> tuple[np.ndarray, list]:
    """Average cells (groups, agents, rounds of one run) within their unit (run or run pair):
    the unit, not the cell, is what an interval counts."""
    v = np.asarray(cells, float)
    keys = list(units)
    if len(keys) != len(v):
        raise ValueError(f"{len(v)} cells but {len(keys)} unit labels")
    order = list(dict.fromkeys(keys))
    return np.array([v[[k == u for k in keys]].mean() for u in order]), order


def slopes_per_run(curves, x: Sequence[float] | None = None) -> np.ndarray:
    """OLS slope of each run's curve (rows: runs; columns: rounds or treatment levels) on ``x``
    (default 1, 2, ...). A run with fewer than two finite points has no slope and is an error."""
    y = np.asarray(curves, float)
    y = y[None, :] if y.ndim == 1 else y
    xs = np.arange(1, y.shape[1] + 1, dtype=float) if x is None else np.asarray(x, float)
    if xs.shape != (y.shape[1],):
        raise ValueError(f"{y.shape[1]} points per run but {xs.shape} x values")
    out = []
    for row in y:
        ok = np.isfinite(row)
        if ok.sum() < 2 or np.ptp(xs[ok]) == 0:
            raise ValueError("a run has fewer than two finite points: no slope")
        xc = xs[ok] - xs[ok].mean()
        out.append(float((xc * (row[ok] - row[ok].mean())).sum() / (xc ** 2).sum()))
    return np.array(out)


def trend(curves, x: Sequence[float] | None = None, seed: int = 0) -> Interval:
    """The mean of the per-run slopes, bootstrapped over runs."""
    return bootstrap_mean(slopes_per_run(curves, x), seed)


def bootstrap_slope(x: Sequence[float], y: Sequence[float], seed: int = 0) -> Interval:
    """OLS slope of y on x where each (x, y) point is one independent unit (a discussion, a run),
    with the percentile interval over resamples of the units."""
    xs, ys = _units(x), _units(y)
    if xs.shape != ys.shape:
        raise ValueError(f"{len(xs)} x values but {len(ys)} y values")
    if len(xs) < 3 or np.ptp(xs) == 0:
        return Interval(math.nan, math.nan, math.nan, len(xs))
    point = float(slopes_per_run(ys[None, :], xs)[0])
    idx = _resamples(len(xs), seed)
    bx, by = xs[idx], ys[idx]
    bxc = bx - bx.mean(axis=1, keepdims=True)
    den = (bxc ** 2).sum(axis=1)
    ok = den > 0
    slopes = (bxc * (by - by.mean(axis=1, keepdims=True))).sum(axis=1)[ok] / den[ok]
    lo, hi = np.quantile(slopes, [(1 - LEVEL) / 2, (1 + LEVEL) / 2])
    return Interval(point, float(lo), float(hi), len(xs))


def rank_probability(per_run: Mapping[str, Sequence[float]], holds, seed: int = 0) -> tuple[float, list[str]]:
    """Share of run resamples in which ``holds(ranking)`` is true, ranking = names by mean, highest
    first; the runs are resampled together (run k gives every name's value k). Also the ranking of
    the full sample."""
    names = list(per_run)
    m = np.vstack([_units(per_run[n]) for n in names])          # (names, runs)
    if len({len(per_run[n]) for n in names}) != 1:
        raise ValueError("every name needs one value per run, the same runs")
    full = [names[i] for i in np.argsort(-m.mean(axis=1), kind="stable")]
    idx = _resamples(m.shape[1], seed)
    means = m[:, idx].mean(axis=2)                               # (names, resamples)
    order = np.argsort(-means, axis=0, kind="stable")
    hits = sum(bool(holds([names[i] for i in order[:, b]])) for b in range(order.shape[1]))
    return hits / order.shape[1], full


# ---------------------------------------------------------------------------------- t intervals
def mean_ci(samples: Iterable[float], level: float = LEVEL) -> tuple[float, float, float, int]:
    """Mean and two-sided t-interval (n-1 degrees of freedom) of the finite samples; the interval
    is the mean itself when n == 1, and everything is nan when n == 0."""
    x = np.array([v for v in samples if v is not None and math.isfinite(v)], dtype=float)
    n = len(x)
    if n == 0:
        return math.nan, math.nan, math.nan, 0
    mean = float(x.mean())
    if n == 1:
        return mean, mean, mean, 1
    half = t_half_width(x, level)
    return mean, mean - half, mean + half, n


def t_half_width(values, level: float = LEVEL) -> float:
    """Half-width of the two-sided t-interval of the mean (n - 1 degrees of freedom); nan for
    fewer than two values."""
    from scipy import stats

    x = np.asarray(values, float)
    if len(x) < 2:
        return math.nan
    return float(stats.t.ppf(0.5 + level / 2, len(x) - 1) * x.std(ddof=1) / math.sqrt(len(x)))


# ---------------------------------------------------------------------------------- band distances
def band_distance(value: float, band: tuple[float, float]) -> float:
    """How far ``value`` lies outside ``band``, in the value's own units (0 inside)."""
    lo, hi = band
    return max(0.0, lo - value) + max(0.0, value - hi)


def band_distance_in_widths(value: float, band: tuple[float, float]) -> float:
    """How far ``value`` lies outside ``band``, in band widths (0 inside, NaN for NaN, inf for an
    infinite value outside). A band with an open or zero-width side is measured in units of its
    largest finite end (at least 1)."""
    lo, hi = band
    if math.isnan(value):
        return math.nan
    if math.isinf(value):
        return 0.0 if lo <= value <= hi else math.inf
    if math.isfinite(lo) and math.isfinite(hi) and hi > lo:
        width = hi - lo
    else:
        width = max([abs(b) for b in band if math.isfinite(b)] + [1.0])
    return max(lo - value, value - hi, 0.0) / width


__all__ = ["BOOTSTRAP", "LEVEL", "Interval", "bootstrap_mean", "paired_difference", "relative_change", "unit_means",
           "slopes_per_run", "trend", "bootstrap_slope", "rank_probability", "mean_ci", "t_half_width",
           "band_distance", "band_distance_in_widths"]
