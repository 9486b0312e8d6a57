"""Rules of evidence for the reproduction's verdicts, fixed before any study's data.

Every row of docs/reproduction.md is judged by these rules (the page restates them):

1. **Scale first.** A claim is judged supported or contradicted only when the runs behind it
   reach the paper's design scale: at least as many agents and rounds as the paper's experiment,
   at least as many independent runs as the paper (and never fewer than :data:`MIN_RUNS`), and,
   for a claim about what LLM agents do, a model named in :data:`CAPABLE_MODELS` (scripted users
   never test such a claim: their behaviour is written in). Below that the verdict is
   :data:`NOT_TESTED` and the row says what would test it.
2. **The independent run is the unit** (for a paired design, the run pair: same seed, one arm
   each). Cells inside a run (groups, rounds, agents) are averaged within the run first.
3. **Intervals by bootstrap over runs**: the percentile interval of the mean over
   :data:`BOOTSTRAP` resamples of the runs (seeded, so the page is regenerable), 95 %.
4. **Trends per run, then across runs**: a slope is fitted inside each run (over rounds, or over
   the levels of a treatment); the runs' slopes are then bootstrapped. Points of one run are
   never pooled as if independent.
5. **Ranks with bootstrap confidence**: the runs are resampled, each resample's means ranked; a
   ranking claim is supported when its ordering holds in at least 95 % of the resamples and
   contradicted when the opposite holds in at least 95 %.
6. **Direction and size judged apart**: the verdict is about the direction (the interval lies
   on the paper's side of 0: supported; on the other side: contradicted; across 0:
   inconclusive); the size is set beside the paper's value (inside our interval, or ours
   larger / smaller) and does not change the verdict.
7. **The real-network band** is the spread between the real networks (mean ± 1.96 standard
   deviations across networks), not the standard error of their mean.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

SUPPORTED, CONTRADICTED, INCONCLUSIVE = "supported", "contradicted", "inconclusive"
NOT_TESTED = "not tested at this scale"
VERDICTS = (SUPPORTED, CONTRADICTED, INCONCLUSIVE, NOT_TESTED)

MIN_RUNS = 5
"""The fewest independent runs (or run pairs) any verdict rests on, whatever the paper used."""
BOOTSTRAP = 10_000
"""Bootstrap resamples per interval."""
LEVEL = 0.95
"""Interval level, and the share of resamples a ranking must hold in."""
CAPABLE_MODELS = ("gpt-4", "gpt-3.5", "chatgpt", "llama-3.1-70b", "llama-3.3-70b", "llama3.1:70b", "llama3.3:70b",
                  "qwen2.5-32b", "qwen2.5-72b", "qwen2.5:32b", "qwen2.5:72b", "mistral-nemo", "claude")
"""Models counted as capable enough to test a claim about LLM agents' behaviour: the papers' own
models (gpt-4.1-mini, ChatGPT, LLaMa 3.x 70B, Qwen2.5 32B, Mistral Nemo 12B) and those at least as
large; matched as case-insensitive substrings of the model's name."""


@dataclass(frozen=True)
class Design:
    """The scale of the paper's experiment behind a claim (None: the paper does not say)."""

    agents: int | None = None
    rounds: int | None = None
    runs: int | None = None
    llm_behaviour: bool = False
    """The claim is about what LLM agents do (not about the platform's mechanics)."""


@dataclass(frozen=True)
class Scale:
    """The scale of socialgym's runs behind a row."""

    agents: int
    rounds: int
    runs: int
    """Independent runs, or run pairs in a paired design."""
    model: str | None = None
    """The LLM that drove the agents; None for scripted users."""

    @property
    def population(self) -> str:
        return "scripted users" if self.model is None else f"LLM agents ({self.model})"


def capable(model: str | None) -> bool:
    name = (model or "").lower()
    return bool(name) and any(m in name for m in CAPABLE_MODELS)


def shortfalls(design: Design, ours: Scale) -> list[str]:
    """What keeps ``ours`` below ``design`` (empty: at scale)."""
    short = []
    if design.agents is not None and ours.agents < design.agents:
        short.append(f"{ours.agents} agents < the paper's {design.agents}")
    if design.rounds is not None and ours.rounds < design.rounds:
        short.append(f"{ours.rounds} rounds < {design.rounds}")
    need_runs = max(design.runs or 0, MIN_RUNS)
    if ours.runs < need_runs:
        short.append(f"{ours.runs} independent runs < {need_runs}")
    if design.llm_behaviour and ours.model is None:
        short.append("scripted users stand in for LLM agents (their behaviour is written in)")
    elif design.llm_behaviour and not capable(ours.model):
        short.append(f"{ours.model} is not a model named capable enough (evidence.CAPABLE_MODELS)")
    return short


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


def direction(interval: Interval, expected: int) -> str:
    """``expected`` +1 (the paper says it rises / is positive) or -1."""
    if interval.n < 2 or not math.isfinite(interval.lo):
        return INCONCLUSIVE
    lo, hi = (interval.lo, interval.hi) if expected > 0 else (-interval.hi, -interval.lo)
    return SUPPORTED if lo > 0 else CONTRADICTED if hi < 0 else INCONCLUSIVE


def ranking_verdict(p_holds: float, p_opposite: float) -> str:
    return SUPPORTED if p_holds >= LEVEL else CONTRADICTED if p_opposite >= LEVEL else INCONCLUSIVE


def gated(verdict: str, design: Design, ours: Scale) -> tuple[str, list[str]]:
    """The verdict, or :data:`NOT_TESTED` with the shortfalls when ``ours`` is below ``design``."""
    short = shortfalls(design, ours)
    return (NOT_TESTED, short) if short else (verdict, [])


def size_against(interval: Interval, paper_value: float | None, digits: int = 3, unit: str = "") -> str:
    """The size of the effect beside the paper's, judged apart from the direction."""
    if paper_value is None:
        return "the paper gives no number"
    if interval.n < 2 or not math.isfinite(interval.lo):
        return f"paper {paper_value:+.{digits}f}{unit}; ours has no interval"
    if interval.lo <= paper_value <= interval.hi:
        return f"paper's {paper_value:+.{digits}f}{unit} inside our interval"
    return f"ours {'above' if interval.lo > paper_value else 'below'} the paper's {paper_value:+.{digits}f}{unit}"


def network_band(mean: float, sd: float, z: float = 1.96) -> tuple[float, float]:
    """The range real networks span: mean ± z standard deviations across networks."""
    return mean - z * sd, mean + z * sd


def band_distance(value: float, band: tuple[float, float]) -> float:
    lo, hi = band
    return max(0.0, lo - value) + max(0.0, value - hi)
