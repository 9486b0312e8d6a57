"""The realism scorecard: each stylised fact's value over one or more run directories, with an
interval over the runs, beside its published reference and its pass rule
(``socialgym validate``, a section of report.html and study.html, docs/realism.md).

    from socialgym.experiments.analysis.realism import scorecard, write_scorecard
    card = scorecard(["runs/a", "runs/b", "runs/c"])
    write_scorecard(card, "runs/validate")      # realism.md, realism.json, realism.csv, realism.html

The facts, their references and rules are in ``realism_facts.FACTS``; the statistics in
``socialgym.metrics.realism``. The interval is the 95 % Student-t interval of the mean over
the runs (none with one run); the verdict applies the fact's rule to the mean.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from socialgym.experiments.analysis.realism_data import load_run_data
from socialgym.experiments.analysis.statistics import band_distance_in_widths, mean_ci
from socialgym.experiments.analysis.realism_facts import FACTS, Fact
from socialgym.rundir import layout
from socialgym.rundir.files import atomic_write, own_dir, write_csv, write_json

REALISM_MD, REALISM_JSON, REALISM_CSV, REALISM_HTML = (layout.REALISM_MD, layout.REALISM_JSON, layout.REALISM_CSV,
                                                      layout.REALISM_HTML)
VERDICTS = ("pass", "fail", "not measurable")


@dataclass(frozen=True)
class FactScore:
    fact: Fact
    values: tuple[float, ...]
    """One value per run (NaN where that run could not measure it)."""

    @property
    def measured(self) -> np.ndarray:
        """The values of the runs that measured the fact (inf kept: a tail exponent of a sample
        without a heavy tail)."""
        v = np.asarray(self.values, np.float64)
        return v[~np.isnan(v)]

    @property
    def mean(self) -> float:
        m = self.measured
        return float(m.mean()) if m.size else math.nan

    @property
    def interval(self) -> tuple[float, float] | None:
        """95 % t-interval of the mean over the runs that measured it; None with fewer than 2."""
        m = self.measured
        if m.size < 2 or not np.all(np.isfinite(m)):
            return None
        _, lo, hi, _ = mean_ci(m)
        return (lo, hi)

    @property
    def verdict(self) -> str:
        ok = self.fact.passes(self.mean)
        return "not measurable" if ok is None else ("pass" if ok else "fail")

    def distance(self) -> float:
        """How far the mean lies outside the fact's band, in band widths."""
        return band_distance_in_widths(self.mean, self.fact.band)


@dataclass(frozen=True)
class Scorecard:
    runs: tuple[str, ...]
    scores: tuple[FactScore, ...]
    notes: tuple[str, ...] = ()
    """What was missing from which run (a fact it needs is then not measurable there)."""

    def counts(self) -> dict[str, int]:
        return {v: sum(s.verdict == v for s in self.scores) for v in VERDICTS}

    def failing(self) -> list[str]:
        return [s.fact.key for s in self.scores if s.verdict == "fail"]

    def score(self, key: str) -> FactScore:
        for s in self.scores:
            if s.fact.key == key:
                return s
        raise KeyError(f"no fact {key!r}; the facts are {', '.join(f.key for f in FACTS)}")


def scorecard(run_dirs: Iterable[str | Path], facts: Sequence[Fact] = FACTS) -> Scorecard:
    """Every fact measured on every run directory. Raises ValueError without runs and what
    ``load_run_data`` raises for a directory that is no run."""
    paths = [Path(p) for p in run_dirs]
    if not paths:
        raise ValueError("the scorecard needs at least one run directory")
    data = [load_run_data(p) for p in paths]
    notes = tuple(f"{d.path}: {'; '.join(d.missing)}" for d in data if d.missing)
    scores = tuple(FactScore(f, tuple(_measure(f, d) for d in data)) for f in facts)
    return Scorecard(tuple(str(p) for p in paths), scores, notes)


def run_dirs_in(path: str | Path) -> list[Path]:
    """``path`` itself when it is a run directory, else every run directory below it (a sweep's
    or a study's runs), in name order. Raises FileNotFoundError when there is none."""
    path = Path(path)
    if not path.is_dir():
        raise FileNotFoundError(f"{path} is not a directory")
    if _is_run(path):
        return [path]
    found = sorted(p.parent for p in path.rglob(layout.ROUNDS) if _is_run(p.parent))
    if not found:
        raise FileNotFoundError(f"{path} is no run directory and holds none ({layout.ROUNDS} and {layout.EVENTS})")
    return found


def _is_run(path: Path) -> bool:
    return (path / layout.ROUNDS).is_file() or (path / layout.EVENTS).is_file()


def _measure(fact: Fact, data) -> float:
    value = fact.compute(data)
    return math.nan if value is None else float(value)


# ---------------------------------------------------------------------------------- writing
def _fmt(x: float) -> str:
    if math.isinf(x):
        return "∞ (no heavy tail)" if x > 0 else "-∞"
    if not math.isfinite(x):
        return "–"
    return f"{x:.3g}" if abs(x) < 1000 else f"{x:.0f}"


def _band(fact: Fact) -> str:
    lo, hi = fact.band
    if math.isinf(hi):
        return f"≥ {_fmt(lo)}"
    if math.isinf(lo):
        return f"≤ {_fmt(hi)}"
    return f"{_fmt(lo)} – {_fmt(hi)}"


def _value(s: FactScore) -> str:
    n = s.measured.size
    if n == 0:
        return "not measurable"
    iv = s.interval
    runs = f"{n} run" + ("s" if n != 1 else "")
    return f"{_fmt(s.mean)} [{_fmt(iv[0])}, {_fmt(iv[1])}] ({runs})" if iv else f"{_fmt(s.mean)} ({runs})"


def _references(fact: Fact, full: bool = True) -> str:
    if not full:
        return "; ".join(r.citation for r in fact.references)
    return "; ".join(f"{r.value} ({r.platform}; {r.citation}, {r.where})" for r in fact.references)


def markdown_table(card: Scorecard) -> str:
    """The scorecard as a Markdown table (one row per fact)."""
    lines = ["| fact | socialgym (mean [95 % CI]) | pass band | verdict | published references (values: realism.json) |",
             "|---|---|---|---|---|"]
    for s in card.scores:
        lines.append(f"| {s.fact.title} | {_value(s)} | {_band(s.fact)} | **{s.verdict}** | {_references(s.fact, full=False)} |")
    c = card.counts()
    lines.append("")
    lines.append(f"{c['pass']} pass, {c['fail']} fail, {c['not measurable']} not measurable, over "
                 f"{len(card.runs)} run" + ("s." if len(card.runs) != 1 else "."))
    return "\n".join(lines)


def rules_markdown(facts: Sequence[Fact] = FACTS) -> str:
    """What each fact measures, its rule and its references, as a Markdown list."""
    return "\n".join(f"- **{f.title}** (`{f.key}`): {f.measure} Rule: {f.rule} References: {_references(f)}."
                     for f in facts)


def html_section(card: Scorecard, heading: str = "h2") -> str:
    """The scorecard as an HTML section (report.html, study.html, realism.html)."""
    e = html.escape
    rows = "".join(
        f'<tr><td title="{e(s.fact.measure)}">{e(s.fact.title)}</td><td>{e(_value(s))}</td>'
        f"<td>{e(_band(s.fact))}</td><td><b>{e(s.verdict)}</b></td><td>{e(s.fact.rule)}</td>"
        f"<td>{e(_references(s.fact))}</td></tr>" for s in card.scores)
    c = card.counts()
    notes = "".join(f"<li>{e(n)}</li>" for n in card.notes)
    return (f"<{heading}>Realism scorecard</{heading}>"
            f"<p>{c['pass']} pass, {c['fail']} fail, {c['not measurable']} not measurable, over {len(card.runs)} "
            f"run(s). Each value is the mean over the runs with its 95 % t-interval; a fact passes when the "
            f"mean lies in its band, a rule fixed before any run was scored (docs/realism.md).</p>"
            "<table><tr><th>fact</th><th>socialgym</th><th>pass band</th><th>verdict</th><th>rule</th>"
            f"<th>published reference</th></tr>{rows}</table>"
            + (f"<p>Missing from the runs:</p><ul>{notes}</ul>" if notes else ""))


def realism_html(run_dirs: Sequence[str | Path], heading: str = "h2") -> str:
    """The scorecard section of a report or study page; a run that cannot be scored gives a
    section saying why instead (a page is never lost to it)."""
    try:
        return html_section(scorecard(run_dirs), heading)
    except (OSError, ValueError, ImportError) as exc:
        return (f"<{heading}>Realism scorecard</{heading}><p class=\"muted\">Not computed: "
                f"{html.escape(str(exc))}</p>")


def conditions_html(runs: Iterable[tuple[str, str | Path]]) -> str:
    """A study page's section: one scorecard per condition, over its replicates. ``runs``:
    (condition label, run directory) pairs, in the order the conditions should appear."""
    conditions: dict[str, list] = {}
    for label, path in runs:
        conditions.setdefault(label, []).append(path)
    parts = ["<h2>Realism scorecard</h2><p>Per condition, over its replicates (docs/realism.md).</p>"]
    for label, runs in conditions.items():
        parts.append(realism_html(list(runs), "h3").replace(">Realism scorecard<", f">{html.escape(label)}<", 1))
    return "".join(parts)


def json_number(x: float):
    """A value for JSON: None for NaN, "inf" / "-inf" for an infinite one (a tail without a
    heavy tail), else the number."""
    return x if math.isfinite(x) else (None if math.isnan(x) else ("inf" if x > 0 else "-inf"))


def as_json(card: Scorecard) -> dict[str, Any]:
    num = json_number
    return {"runs": list(card.runs), "counts": card.counts(), "notes": list(card.notes),
            "facts": [{"key": s.fact.key, "title": s.fact.title, "values": [num(v) for v in s.values],
                       "mean": num(s.mean), "interval": list(s.interval) if s.interval else None,
                       "band": [num(b) if math.isfinite(b) else str(b) for b in s.fact.band],
                       "verdict": s.verdict, "distance": num(s.distance()), "rule": s.fact.rule,
                       "measure": s.fact.measure,
                       "references": [vars(r) for r in s.fact.references]} for s in card.scores]}


def write_scorecard(card: Scorecard, out: str | Path) -> dict[str, Path]:
    """realism.md, realism.json, realism.csv and realism.html in ``out`` (created)."""
    out = own_dir(Path(out))
    paths = {name: out / name for name in (REALISM_MD, REALISM_JSON, REALISM_CSV, REALISM_HTML)}
    atomic_write(paths[REALISM_MD], "# Realism scorecard\n\n" + markdown_table(card) + "\n\n## Rules\n\n"
                 + rules_markdown() + "\n")
    write_json(paths[REALISM_JSON], as_json(card))
    header = ("fact", "mean", "ci_low", "ci_high", "runs_measured", "band_low", "band_high", "verdict")
    write_csv(paths[REALISM_CSV], header, [
        (s.fact.key, s.mean, *(s.interval or (math.nan, math.nan)), s.measured.size, *s.fact.band, s.verdict)
        for s in card.scores])
    atomic_write(paths[REALISM_HTML], '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
                 "<title>socialgym realism scorecard</title><style>body{font-family:sans-serif;max-width:1300px;"
                 "margin:auto}td,th{border:1px solid #ccc;padding:4px;vertical-align:top}table{border-collapse:"
                 "collapse}</style></head><body>" + html_section(card, "h1")
                 + "<p>Runs: " + ", ".join(html.escape(r) for r in card.runs) + "</p></body></html>\n")
    return paths
