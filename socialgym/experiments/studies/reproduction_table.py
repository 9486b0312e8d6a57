"""The reproduction table's building blocks: a row, a claim, and the judging of a row by the
rules of evidence (:mod:`socialgym.experiments.studies.evidence`) at its summary's scale."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from socialgym.experiments.studies import evidence as ev


@dataclass(frozen=True)
class Row:
    paper: str
    claim: str
    paper_value: str
    where: str
    population: str
    result: str
    size: str
    command: str
    verdict: str
    shortfalls: tuple[str, ...] = field(default=())

    def cells(self) -> list[str]:
        verdict = f"**{self.verdict}**"
        if self.shortfalls:
            verdict += " (" + "; ".join(self.shortfalls) + ")"
        return [f"{self.paper}: {self.claim}", f"{self.paper_value} ({self.where})", self.population, self.result,
                self.size, f"`{self.command}`", verdict]


def not_run(paper: str, claim: str, paper_value: str, where: str, command: str) -> Row:
    return Row(paper, claim, paper_value, where, "—", "not run (no summary)", "—", command, "not run")


# ------------------------------------------------------------------------ summaries of per-run values
def per_run(summary: Mapping, measure: str, condition: str) -> list[float]:
    try:
        values = summary["measures"][measure]["per_run"][condition]
    except KeyError as e:
        raise KeyError(f"summary {summary.get('study')!r} has no {measure!r} / {condition!r}") from e
    return [float(v) for v in values]


def scale_of(summary: Mapping, runs: int | None = None) -> ev.Scale:
    d = summary["design"]
    return ev.Scale(int(d["agents"]), int(d["rounds"]), int(runs if runs is not None else d["runs"]),
                    summary.get("model"))


def judged(interval: ev.Interval, expected: int, design: ev.Design, scale: ev.Scale) -> tuple[str, tuple[str, ...]]:
    verdict, short = ev.gated(ev.direction(interval, expected), design, scale)
    return verdict, tuple(short)


@dataclass(frozen=True)
class Claim:
    """What a paper says: the row's left half."""

    paper: str
    claim: str
    paper_value: str
    where: str
    design: ev.Design
    paper_number: float | None = None
    """The paper's size on the scale of socialgym's statistic (None: the paper gives no number)."""


def row(c: Claim, summary: Mapping, result: str, interval: ev.Interval, expected: int, *,
        unit: str = "", percent: bool = False, verdict: str | None = None, n: int | None = None) -> Row:
    """A row judged by direction (``expected`` +1 / -1) at the summary's scale; ``verdict``
    overrides the direction rule (still gated)."""
    scale = scale_of(summary, n if n is not None else interval.n)
    direction = verdict if verdict is not None else ev.direction(interval, expected)
    gated, short = ev.gated(direction, c.design, scale)
    if percent:
        pct = ev.Interval(100 * interval.mean, 100 * interval.lo, 100 * interval.hi, interval.n)
        size = ev.size_against(pct, None if c.paper_number is None else 100 * c.paper_number, 1, " %")
    else:
        size = ev.size_against(interval, c.paper_number, 3, unit)
    return Row(c.paper, c.claim, c.paper_value, c.where, scale.population, result, size, summary["command"],
               gated, tuple(short))


def fmt(interval: ev.Interval, unit: str = "", digits: int = 3, percent: bool = False) -> str:
    if percent:
        interval = ev.Interval(100 * interval.mean, 100 * interval.lo, 100 * interval.hi, interval.n)
        return interval.text(1, " %")
    return interval.text(digits, unit)


def slope(x: Sequence[float], y: Sequence[float]) -> float | None:
    """OLS slope of y on x; None with fewer than 3 points or no spread in x."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    ok = np.isfinite(x) & np.isfinite(y)
    if ok.sum() < 3 or np.ptp(x[ok]) == 0:
        return None
    return float(ev.slopes_per_run(y[ok][None, :], x[ok])[0])
