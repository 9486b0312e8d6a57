"""The core paper's four claims as statistics with verdicts decided by rules fixed in advance.

Each function takes plain arrays (what a study's runs produce) and returns a :class:`Verdict`:
the statistic, its numbers, the verdict ("supported", "contradicted" or "inconclusive") and the
rule that decided it. The rules are written here, before any study's data, and restated in
docs/reproduction.md. Intervals are 95 %.

1. **Rewards are learnable** (performance rises over rounds): per task group, the OLS slope of
   the group's task reward on the round, with its 95 % interval over all (replicate, round)
   points. *Supported* if the interval lies above 0 for a majority of the task groups;
   *contradicted* if it lies below 0 for a majority; else *inconclusive*.
2. **Task difficulty** (INF easiest, EMO relatively high, PRE partly controllable, COORD
   hardest): the groups ranked by their mean task reward over the last third of the rounds.
   *Supported* if INF ranks first and COORD last; *contradicted* if INF ranks in the bottom two
   or COORD in the top two; else *inconclusive*.
3. **The coach helps early, not late**: paired differences coach minus no coach of the task
   reward, per (task group, replicate), averaged over the first third and over the last third
   of the rounds. *Supported* if the early interval lies above 0 and the late one below 0;
   *contradicted* if the early interval lies below 0 or the late one above 0; else
   *inconclusive*.
4. **LLM ties are more stable across θ and closer to real networks**: per network metric, the
   spread across θ (max − min) and the mean distance to the real-network band (0 inside it),
   LLM against heuristic. *Supported* if the LLM scorer has the smaller spread on a majority of
   the metrics and the smaller distance on a majority; *contradicted* if the heuristic has both
   majorities; else *inconclusive*.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Mapping, Sequence

import numpy as np

from socialgym.experiments.analysis.compare import mean_ci

VERDICTS = ("supported", "contradicted", "inconclusive")


@dataclass(frozen=True)
class Verdict:
    claim: str
    statistic: str
    numbers: dict = field(default_factory=dict)
    verdict: str = "inconclusive"
    rule: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


def _slope_ci(curve: np.ndarray, level: float = 0.95) -> tuple[float, float, float]:
    """OLS slope of value on round (1..T) over every (replicate, round) point, with its t-interval."""
    from scipy import stats

    y = np.asarray(curve, float)
    if y.ndim == 1:
        y = y[None, :]
    rounds = np.tile(np.arange(1, y.shape[1] + 1, dtype=float), y.shape[0])
    values = y.ravel()
    ok = np.isfinite(values)
    x, v = rounds[ok], values[ok]
    if len(x) < 3 or np.ptp(x) == 0:
        return math.nan, math.nan, math.nan
    fit = stats.linregress(x, v)
    half = float(stats.t.ppf(0.5 + level / 2, len(x) - 2) * fit.stderr)
    return float(fit.slope), float(fit.slope - half), float(fit.slope + half)


def learnable(curves: Mapping[str, np.ndarray]) -> Verdict:
    """``curves[task]``: (replicates, rounds) of the task group's mean task reward."""
    numbers, up, down = {}, 0, 0
    for task, curve in curves.items():
        slope, lo, hi = _slope_ci(curve)
        numbers[task] = {"slope": slope, "lo": lo, "hi": hi}
        up += lo > 0
        down += hi < 0
    half = len(curves) / 2
    verdict = "supported" if up > half else "contradicted" if down > half else "inconclusive"
    return Verdict("1. rewards are learnable: performance rises over rounds",
                   "OLS slope of task reward on round per task group (95 % interval)", numbers, verdict,
                   "supported if the interval is above 0 for a majority of groups; contradicted if below 0 "
                   "for a majority")


def _last_third(curve: np.ndarray) -> np.ndarray:
    y = np.asarray(curve, float)
    y = y[None, :] if y.ndim == 1 else y
    k = max(1, math.ceil(y.shape[1] / 3))
    return y[:, -k:].mean(axis=1)


def task_order(curves: Mapping[str, np.ndarray]) -> Verdict:
    """``curves[task]``: (replicates, rounds); tasks named SOC, INF, PRE, COORD, EMO."""
    missing = {"INF", "COORD"} - set(curves)
    if missing:
        raise ValueError(f"task_order needs the INF and COORD groups; missing {sorted(missing)}")
    means = {task: float(np.nanmean(_last_third(c))) for task, c in curves.items()}
    ranking = sorted(means, key=lambda t: -means[t])
    rank = {t: i + 1 for i, t in enumerate(ranking)}
    n = len(ranking)
    if rank["INF"] == 1 and rank["COORD"] == n:
        verdict = "supported"
    elif rank["INF"] >= n - 1 or rank["COORD"] <= 2:
        verdict = "contradicted"
    else:
        verdict = "inconclusive"
    return Verdict("2. INF is the easiest task, EMO relatively high, PRE partly controllable, COORD the hardest",
                   "task groups ranked by mean task reward over the last third of rounds",
                   {"ranking": ranking, "means": means}, verdict,
                   "supported if INF ranks first and COORD last; contradicted if INF is in the bottom two or "
                   "COORD in the top two")


def coach_early_late(coach: Mapping[str, np.ndarray], no_coach: Mapping[str, np.ndarray]) -> Verdict:
    """``coach[task]``, ``no_coach[task]``: (replicates, rounds), replicate k paired (common random
    numbers)."""
    early, late = [], []
    for task in coach:
        a, b = np.asarray(coach[task], float), np.asarray(no_coach[task], float)
        a, b = (a[None, :] if a.ndim == 1 else a), (b[None, :] if b.ndim == 1 else b)
        if a.shape != b.shape:
            raise ValueError(f"task {task}: coach {a.shape} and no-coach {b.shape} curves differ in shape")
        k = max(1, math.ceil(a.shape[1] / 3))
        d = a - b
        early += d[:, :k].mean(axis=1).tolist()
        late += d[:, -k:].mean(axis=1).tolist()
    e, l_ = mean_ci(early), mean_ci(late)
    if len(early) > 1 and e[1] > 0 and l_[2] < 0:
        verdict = "supported"
    elif len(early) > 1 and (e[2] < 0 or l_[1] > 0):
        verdict = "contradicted"
    else:
        verdict = "inconclusive"
    return Verdict("3. the coach speeds up early learning, but agents do better in the long run without it",
                   "coach minus no coach of task reward, first third vs last third of rounds (paired, 95 % interval)",
                   {"early": {"mean": e[0], "lo": e[1], "hi": e[2], "n": e[3]},
                    "late": {"mean": l_[0], "lo": l_[1], "hi": l_[2], "n": l_[3]}}, verdict,
                   "supported if the early interval is above 0 and the late one below 0; contradicted if the "
                   "early interval is below 0 or the late one above 0")


def _band_distance(values: np.ndarray, lo: float, hi: float) -> float:
    v = np.asarray(values, float)
    return float(np.nanmean(np.maximum(0.0, lo - v) + np.maximum(0.0, v - hi)))


def llm_ties_realistic(heuristic: Mapping[str, Sequence[float]], llm: Mapping[str, Sequence[float]],
                       bands: Mapping[str, tuple[float, float]]) -> Verdict:
    """``heuristic[metric]``, ``llm[metric]``: the metric at each θ of the sweep (replicate means);
    ``bands[metric]``: the real networks' (low, high)."""
    numbers, stable, closer, n = {}, 0, 0, 0
    for metric, (lo, hi) in bands.items():
        if metric not in heuristic or metric not in llm:
            continue
        h, m = np.asarray(heuristic[metric], float), np.asarray(llm[metric], float)
        spread_h, spread_m = float(np.nanmax(h) - np.nanmin(h)), float(np.nanmax(m) - np.nanmin(m))
        dist_h, dist_m = _band_distance(h, lo, hi), _band_distance(m, lo, hi)
        numbers[metric] = {"spread_heuristic": spread_h, "spread_llm": spread_m,
                           "distance_heuristic": dist_h, "distance_llm": dist_m, "band": [lo, hi]}
        stable += spread_m < spread_h
        closer += dist_m < dist_h
        n += 1
    if n == 0:
        raise ValueError("no metric has both a band and values for both tie scorers")
    if stable > n / 2 and closer > n / 2:
        verdict = "supported"
    elif (n - stable) > n / 2 and (n - closer) > n / 2:
        verdict = "contradicted"
    else:
        verdict = "inconclusive"
    numbers["llm_more_stable"], numbers["llm_closer"], numbers["metrics"] = stable, closer, n
    return Verdict("4. LLM text-based ties are more stable across θ and closer to real networks than the heuristic",
                   "per metric: spread across θ and mean distance to the real-network band, LLM vs heuristic",
                   numbers, verdict,
                   "supported if the LLM scorer has the smaller spread on a majority of metrics and the smaller "
                   "distance on a majority; contradicted if the heuristic has both majorities")
