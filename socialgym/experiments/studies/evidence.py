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

# the intervals these rules use live in the statistics module; re-exported so a verdict reads ev.*
from socialgym.experiments.analysis.statistics import (BOOTSTRAP, LEVEL, Interval, band_distance,  # noqa: F401
                                                       bootstrap_mean, bootstrap_slope, paired_difference,
                                                       rank_probability, relative_change, slopes_per_run, trend,
                                                       unit_means)

SUPPORTED, CONTRADICTED, INCONCLUSIVE = "supported", "contradicted", "inconclusive"
NOT_TESTED = "not tested at this scale"
VERDICTS = (SUPPORTED, CONTRADICTED, INCONCLUSIVE, NOT_TESTED)

MIN_RUNS = 5
"""The fewest independent runs (or run pairs) any verdict rests on, whatever the paper used."""
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
