"""The core paper's claims as statistics with verdicts, by the rules of evidence (``evidence``).

Each function takes the study's runs as records — one per run: ``coach``, ``llm_ties``,
``replicate``, ``curves`` (task group -> the group's mean task reward per round), ``sweep`` (the
final tie network's metrics at each θ) and ``stance_homophily`` — and the study's
:class:`~socialgym.experiments.studies.evidence.Scale`, and returns a :class:`Verdict`. The rules
are written here, before any study's data, and restated in docs/reproduction.md:

- the unit is the run; for the coach and the tie scorer, the run pair (same replicate seed and
  the same other factor, one run in each arm); cells inside a run are averaged within it;
- round 1 measures no choice (every action is a POST, every feed is empty, nobody is coached
  yet): claims 1, 3 and the per-group coach effects use rounds 2 to T;
- every verdict is gated by the paper's design (30 agents, 15 rounds, a capable model): below
  it the verdict is "not tested at this scale".

1. **Rewards are learnable**: per group, each run's OLS slope of the task reward on the round,
   bootstrapped over runs. Supported if the interval lies above 0 for a majority of groups;
   contradicted if below 0 for a majority.
2. **Task difficulty** (INF easiest, COORD hardest): groups ranked by each run's mean over the
   last third of the rounds, runs resampled together. Supported if INF first and COORD last in
   ≥ 95 % of the resamples; contradicted if INF in the bottom two or COORD in the top two in ≥ 95 %.
3. **The coach helps early, not late**: per run pair, coach minus no coach averaged over the
   groups and over the first (last) third of rounds 2..T. Supported if the early interval lies
   above 0 and the late one below 0; contradicted if the early one lies below 0 or the late one above.
4. **LLM ties are more stable across θ and closer to real networks**: per metric and tie pair,
   LLM minus heuristic of the spread across θ and of the mean distance to the real-network band
   (the spread between real networks). Supported if LLM is smaller (interval below 0) on a
   majority of metrics for both; contradicted if larger on a majority for both.
5. **The coach lowers degree** (App. C.2): per pair, coach minus no coach of the mean degree of
   the final network at θ = 0.1. Supported if the interval lies below 0, contradicted if above.
6. **The coach speeds up early learning for some tasks**: per group, the paired early-third
   difference. Supported if its interval lies above 0 for at least one group; contradicted if
   below 0 for every group.
7. **The heuristic diverges in clustering and path length**: per pair, heuristic minus LLM of
   the mean distance to the band for clustering and for the normalised shortest path. Supported
   if both intervals lie above 0; contradicted if both lie below.
8. **Stance homophily** (App. C.1 defines φ; the paper reports no value): per run, φ of the final
   network with the personas' stances as groups (< 1: ties within a stance), reported only.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Mapping, Sequence

import numpy as np

from socialgym.experiments.studies import evidence as ev

VERDICTS = ev.VERDICTS
NO_CLAIM = "reported, no claim to test"
DESIGN = ev.Design(agents=30, rounds=15, llm_behaviour=True)
"""The core paper's study: 30 agents, 15 rounds, gpt-4.1-mini; replicates not given (MIN_RUNS)."""
THETA_DEGREE = 0.1
"""The θ at which degrees are read (the study's degree figures)."""
SWEEP_METRICS = ("density", "clustering", "lcc_fraction", "avg_shortest_path_norm", "modularity")


@dataclass(frozen=True)
class Verdict:
    claim: str
    statistic: str
    numbers: dict = field(default_factory=dict)
    verdict: str = ev.INCONCLUSIVE
    rule: str = ""
    n: int = 0
    """Independent units (runs or run pairs) behind the verdict."""
    shortfalls: tuple[str, ...] = ()
    """Why the runs are below the design's scale (empty: at scale)."""
    direction: str = ""
    """What the direction rule alone gave, before the scale gate."""

    def to_dict(self) -> dict:
        return asdict(self)


def _verdict(claim: str, statistic: str, numbers: dict, direction: str, rule: str, n: int, scale: ev.Scale) -> Verdict:
    gated, short = ev.gated(direction, DESIGN, ev.Scale(scale.agents, scale.rounds, n, scale.model))
    return Verdict(claim, statistic, numbers, gated, rule, n, tuple(short), direction)


def _iv(interval: ev.Interval) -> dict:
    return {"mean": interval.mean, "lo": interval.lo, "hi": interval.hi, "n": interval.n}


def _curve(run: Mapping, task: str, first_round: int = 2) -> np.ndarray:
    return np.asarray(run["curves"][task], float)[first_round - 1:]


def _tasks(runs: Sequence[Mapping]) -> list[str]:
    return [t for t in runs[0]["curves"] if all(t in r["curves"] for r in runs)]


def pairs(runs: Sequence[Mapping], factor: str) -> list[tuple[Mapping, Mapping]]:
    """(on, off) run pairs of ``factor`` ("coach" or "llm_ties"), matched on the replicate and the
    other factor."""
    other = "llm_ties" if factor == "coach" else "coach"
    off = {(r[other], r["replicate"]): r for r in runs if not r[factor]}
    out = [(r, off[(r[other], r["replicate"])]) for r in runs if r[factor] and (r[other], r["replicate"]) in off]
    return sorted(out, key=lambda p: (p[0][other], p[0]["replicate"]))


def _thirds(d: np.ndarray) -> tuple[float, float]:
    k = max(1, math.ceil(len(d) / 3))
    return float(d[:k].mean()), float(d[-k:].mean())


def learnable(runs: Sequence[Mapping], scale: ev.Scale) -> Verdict:
    numbers, up, down = {}, 0, 0
    tasks = _tasks(runs)
    for task in tasks:
        iv = ev.trend(np.vstack([_curve(r, task) for r in runs]), seed=1)
        numbers[task] = _iv(iv)
        d = ev.direction(iv, +1)
        up, down = up + (d == ev.SUPPORTED), down + (d == ev.CONTRADICTED)
    half = len(tasks) / 2
    direction = ev.SUPPORTED if up > half else ev.CONTRADICTED if down > half else ev.INCONCLUSIVE
    return _verdict("1. rewards are learnable: performance rises over rounds",
                    "per group: each run's slope of task reward on round (rounds 2..T), bootstrapped over runs",
                    numbers, direction, "supported if the interval lies above 0 for a majority of groups; "
                    "contradicted if below 0 for a majority", len(runs), scale)


def last_third_means(runs: Sequence[Mapping]) -> dict[str, list[float]]:
    out = {}
    for task in _tasks(runs):
        out[task] = [float(_curve(r, task, 1)[-max(1, math.ceil(len(r["curves"][task]) / 3)):].mean()) for r in runs]
    return out


def task_order(runs: Sequence[Mapping], scale: ev.Scale) -> Verdict:
    per_run = last_third_means(runs)
    missing = {"INF", "COORD"} - set(per_run)
    if missing:
        raise ValueError(f"task_order needs the INF and COORD groups; missing {sorted(missing)}")
    n = len(per_run)
    p, ranking = ev.rank_probability(per_run, lambda r: r[0] == "INF" and r[-1] == "COORD", seed=2)
    q, _ = ev.rank_probability(per_run, lambda r: r.index("INF") >= n - 2 or r.index("COORD") <= 1, seed=2)
    means = {t: float(np.mean(v)) for t, v in per_run.items()}
    return _verdict("2. INF is the easiest task, EMO relatively high, PRE partly controllable, COORD the hardest",
                    "groups ranked by each run's mean task reward over the last third of rounds; runs resampled",
                    {"ranking": ranking, "means": means, "p_paper_order": p, "p_opposite": q},
                    ev.ranking_verdict(p, q), "supported if INF ranks first and COORD last in >= 95 % of the "
                    "resamples; contradicted if INF is in the bottom two or COORD in the top two in >= 95 %",
                    len(runs), scale)


def _coach_differences(runs: Sequence[Mapping]) -> tuple[dict[str, list[tuple[float, float]]], int]:
    """Per group, per coach pair: (early, late) third of coach − no coach over rounds 2..T."""
    out: dict[str, list[tuple[float, float]]] = {}
    ps = pairs(runs, "coach")
    for task in _tasks(runs):
        out[task] = [_thirds(_curve(on, task) - _curve(off, task)) for on, off in ps]
    return out, len(ps)


def coach_early_late(runs: Sequence[Mapping], scale: ev.Scale) -> Verdict:
    diffs, n = _coach_differences(runs)
    early = ev.bootstrap_mean(np.mean([[e for e, _ in d] for d in diffs.values()], axis=0), seed=3)
    late = ev.bootstrap_mean(np.mean([[l_ for _, l_ in d] for d in diffs.values()], axis=0), seed=4)
    e, l_ = ev.direction(early, +1), ev.direction(late, -1)
    direction = (ev.SUPPORTED if e == l_ == ev.SUPPORTED else
                 ev.CONTRADICTED if ev.CONTRADICTED in (e, l_) else ev.INCONCLUSIVE)
    return _verdict("3. the coach speeds up early learning, but agents do better in the long run without it",
                    "per coach pair: coach minus no coach, mean over groups, first vs last third of rounds 2..T",
                    {"early": _iv(early), "late": _iv(late)}, direction,
                    "supported if the early interval lies above 0 and the late one below 0; contradicted if the "
                    "early one lies below 0 or the late one above 0", n, scale)


def coach_per_group(runs: Sequence[Mapping], scale: ev.Scale) -> Verdict:
    diffs, n = _coach_differences(runs)
    numbers = {task: _iv(ev.bootstrap_mean([e for e, _ in d], seed=5)) for task, d in diffs.items()}
    dirs = [ev.direction(ev.Interval(**v), +1) for v in numbers.values()]
    direction = (ev.SUPPORTED if ev.SUPPORTED in dirs else
                 ev.CONTRADICTED if dirs and all(d == ev.CONTRADICTED for d in dirs) else ev.INCONCLUSIVE)
    return _verdict("6. the coach speeds up early learning for some tasks",
                    "per group: coach minus no coach over the first third of rounds 2..T, per coach pair",
                    numbers, direction, "supported if the interval lies above 0 for at least one group; "
                    "contradicted if below 0 for every group", n, scale)


def _sweep_values(run: Mapping, metric: str) -> np.ndarray:
    return np.array([row.get(metric, math.nan) for row in run["sweep"]], float)


def _distance(values: np.ndarray, band: tuple[float, float]) -> float:
    ok = values[np.isfinite(values)]
    return float(np.mean([ev.band_distance(v, band) for v in ok])) if len(ok) else math.nan


def _tie_pair_differences(runs, bands) -> tuple[dict, int]:
    """Per metric: per tie pair, LLM − heuristic of the spread across θ and of the band distance."""
    ps = pairs(runs, "llm_ties")
    out = {}
    for metric, band in bands.items():
        spread, dist = [], []
        for llm, heur in ps:
            a, b = _sweep_values(llm, metric), _sweep_values(heur, metric)
            if np.isfinite(a).any() and np.isfinite(b).any():
                spread.append(float(np.nanmax(a) - np.nanmin(a) - (np.nanmax(b) - np.nanmin(b))))
                dist.append(_distance(a, band) - _distance(b, band))
        if spread:
            out[metric] = {"spread": _iv(ev.bootstrap_mean(spread, seed=6)),
                           "distance": _iv(ev.bootstrap_mean(dist, seed=7)), "band": list(band)}
    return out, len(ps)


def llm_ties_realistic(runs: Sequence[Mapping], bands: Mapping[str, tuple[float, float]], scale: ev.Scale) -> Verdict:
    numbers, n = _tie_pair_differences(runs, bands)
    if not numbers:
        raise ValueError("no metric has values for both tie scorers")
    m = len(numbers)
    stable = sum(ev.direction(ev.Interval(**v["spread"]), -1) == ev.SUPPORTED for v in numbers.values())
    closer = sum(ev.direction(ev.Interval(**v["distance"]), -1) == ev.SUPPORTED for v in numbers.values())
    wider = sum(ev.direction(ev.Interval(**v["spread"]), -1) == ev.CONTRADICTED for v in numbers.values())
    further = sum(ev.direction(ev.Interval(**v["distance"]), -1) == ev.CONTRADICTED for v in numbers.values())
    direction = (ev.SUPPORTED if stable > m / 2 and closer > m / 2 else
                 ev.CONTRADICTED if wider > m / 2 and further > m / 2 else ev.INCONCLUSIVE)
    numbers = {**numbers, "llm_more_stable": stable, "llm_closer": closer, "metrics": m}
    return _verdict("4. LLM text-based ties are more stable across θ and closer to real networks than the heuristic",
                    "per metric and tie pair: LLM minus heuristic of the spread across θ and of the distance to "
                    "the real-network band", numbers, direction,
                    "supported if LLM is smaller (interval below 0) on a majority of metrics for both; "
                    "contradicted if larger on a majority for both", n, scale)


def heuristic_diverges(runs: Sequence[Mapping], bands: Mapping[str, tuple[float, float]], scale: ev.Scale) -> Verdict:
    numbers, n = _tie_pair_differences(runs, {m: bands[m] for m in ("clustering", "avg_shortest_path_norm")})
    # heuristic − LLM is the negative of LLM − heuristic: the paper's side is LLM closer (below 0)
    dirs = [ev.direction(ev.Interval(**v["distance"]), -1) for v in numbers.values()]
    direction = (ev.SUPPORTED if len(dirs) == 2 and all(d == ev.SUPPORTED for d in dirs) else
                 ev.CONTRADICTED if len(dirs) == 2 and all(d == ev.CONTRADICTED for d in dirs) else ev.INCONCLUSIVE)
    return _verdict("7. the heuristic diverges from real networks in clustering and average shortest path",
                    "per tie pair: LLM minus heuristic of the distance to the real-network band, clustering and "
                    "normalised shortest path", numbers, direction, "supported if both intervals lie below 0 "
                    "(the heuristic further from the band); contradicted if both lie above 0", n, scale)


def mean_degree(run: Mapping, theta: float = THETA_DEGREE) -> float:
    row = min(run["sweep"], key=lambda r: abs(r["theta"] - theta))
    return float(row["density"] * (row["n_nodes"] - 1))


def coach_lowers_degree(runs: Sequence[Mapping], scale: ev.Scale) -> Verdict:
    ps = pairs(runs, "coach")
    iv = ev.paired_difference([mean_degree(on) for on, _ in ps], [mean_degree(off) for _, off in ps], seed=8)
    return _verdict("5. with the coach agents keep fewer ties: degrees shift lower",
                    f"per coach pair: coach minus no coach of the mean degree of the final network at θ = {THETA_DEGREE}",
                    {"difference": _iv(iv)}, ev.direction(iv, -1),
                    "supported if the interval lies below 0; contradicted if above 0", len(ps), scale)


def stance_homophily(runs: Sequence[Mapping], scale: ev.Scale) -> Verdict:
    values = [r["stance_homophily"] for r in runs if r.get("stance_homophily") is not None
              and math.isfinite(r["stance_homophily"])]
    iv = ev.bootstrap_mean(values, seed=9)
    return _verdict("8. stance homophily of the final network (φ < 1: ties within a stance)",
                    f"per run: φ of the final network at θ = {THETA_DEGREE} with the personas' stances as groups",
                    {"phi": _iv(iv)}, NO_CLAIM, "the paper defines φ (App. C.1) and reports no value: no verdict",
                    len(values), scale)


def all_claims(runs: Sequence[Mapping], bands: Mapping[str, tuple[float, float]], scale: ev.Scale) -> list[Verdict]:
    verdicts = [learnable(runs, scale)]
    if {"INF", "COORD"} <= set(_tasks(runs)):
        verdicts.append(task_order(runs, scale))
    verdicts += [coach_early_late(runs, scale), llm_ties_realistic(runs, bands, scale), coach_lowers_degree(runs, scale),
                 coach_per_group(runs, scale), heuristic_diverges(runs, bands, scale), stance_homophily(runs, scale)]
    return verdicts
