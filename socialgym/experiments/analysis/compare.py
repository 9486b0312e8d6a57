"""Paired comparison of two conditions, round by round: ``socialgym compare DIR_A DIR_B``.

Each side is a run directory, or a folder of replicate runs (``rep_0``, ``rep_1`` ... as a
sweep writes them under ``runs/<condition>/``). Runs are paired by replicate index; with forks
(``socialgym fork``, a sweep's ``run.fork_at``) or common random numbers, a pair shares its seed
and — for a fork — every round before the fork, so the difference B - A of a pair removes the
noise both share. For every round and metric ``compare.csv`` holds the mean of A and of B, the
mean paired difference and its 95 % t-interval over the pairs (the mean itself when there is one
pair), and the number of pairs. The metrics are those of a sweep's aggregate
(:func:`run_metrics`): rewards averaged over agents (rounds.csv), the network and cocoon
metrics (network.csv), and the mean numeric answer of each survey item (surveys.csv).

``socialgym compare SWEEP`` (``sweep.compare_sweep``) compares every condition of a sweep with
its first one (the control; with ``run.fork_at``, the run every other condition was forked
from) into ``SWEEP/compare/<condition>.csv``. ``compare.md`` beside each CSV states, for the headline
metrics, the first round at which the two differ and the difference in the last round.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Sequence

import numpy as np

from socialgym.config import REWARD_NAMES
from socialgym.rundir.files import atomic_write, to_float, write_csv
from socialgym.rundir import Run
from socialgym.experiments.analysis.statistics import mean_ci
from socialgym.experiments.errors import RunError
from socialgym.rundir import layout, writer_lock

REWARD_METRICS = (*REWARD_NAMES, "total")
COMPARE_COLUMNS = ("round", "metric", "mean_a", "mean_b", "diff", "ci_low", "ci_high", "n_pairs")
HEADLINE = ("total", "SOC", "INF", "PRE", "COORD", "EMO", "density", "clustering", "mean_tie", "n_ties",
            "mean_topic_entropy", "deep_cocoon_share", "cross_cutting_share")


def replicates(path: str | Path) -> dict[int, Path]:
    """{replicate index: run directory} of one side: a run, or a folder of replicate runs."""
    path = Path(path)
    if (path / layout.RUN_INFO).is_file():
        return {int((Run(path).info or {}).get("replicate", 0)): path}
    runs = sorted(p for p in path.glob("rep_*") if (p / layout.RUN_INFO).is_file())
    if not runs:
        raise RunError(f"{path} is neither a run directory (no {layout.RUN_INFO}) nor a folder of replicate runs (rep_*)")
    out = {}
    for run in runs:
        k = int((Run(run).info or {}).get("replicate", 0))
        if k in out:
            raise RunError(f"{path}: two runs claim replicate {k} ({out[k].name}, {run.name})")
        out[k] = run
    return out


def compare(a: str | Path, b: str | Path, out: str | Path | None = None) -> dict:
    """Write the paired comparison B - A to ``out`` (default ``B/compare.csv``) and a summary
    beside it (``.md``); returns ``{"csv", "md", "pairs", "first_difference": {metric: round},
    "warnings"}``."""
    side_a, side_b = replicates(a), replicates(b)
    pairs = sorted(set(side_a) & set(side_b))
    if not pairs:
        raise RunError(f"no replicate of {a} has a partner in {b} (replicates {sorted(side_a)} vs {sorted(side_b)})")
    warnings = []
    for k in pairs:
        sa = (Run(side_a[k]).info or {}).get("seed")
        sb = (Run(side_b[k]).info or {}).get("seed")
        if sa != sb:
            warnings.append(f"replicate {k}: the runs have different seeds ({sa}, {sb}): the pair shares no draws")
        for side in (side_a[k], side_b[k]):
            status = (Run(side).summary or {}).get("status")
            if status != "complete":
                warnings.append(f"{side} is not complete ({status}): its missing rounds are left out")
    left = sorted(set(side_a) ^ set(side_b))
    if left:
        warnings.append(f"replicates without a partner left out: {left}")
    metrics_a = {k: run_metrics(side_a[k]) for k in pairs}
    metrics_b = {k: run_metrics(side_b[k]) for k in pairs}
    names = sorted({m for k in pairs for m in metrics_a[k]} & {m for k in pairs for m in metrics_b[k]},
                   key=_metric_order)
    rows, first = [], {}
    for metric in names:
        rounds = sorted({r for k in pairs for r in metrics_a[k].get(metric, {})}
                        | {r for k in pairs for r in metrics_b[k].get(metric, {})})
        for r in rounds:
            va = [metrics_a[k].get(metric, {}).get(r) for k in pairs]
            vb = [metrics_b[k].get(metric, {}).get(r) for k in pairs]
            pairs_ab = [(x, y) for x, y in zip(va, vb) if _finite(x) and _finite(y)]
            if not pairs_ab:
                continue
            diffs = [y - x for x, y in pairs_ab]
            mean, low, high, n = mean_ci(diffs)
            rows.append([r, metric, mean_ci([x for x, _ in pairs_ab])[0], mean_ci([y for _, y in pairs_ab])[0],
                         mean, low, high, n])          # both means over the pairs the difference uses
            # a difference beyond float rounding (the same sums in another order differ by ~1e-16)
            if metric not in first and any(abs(y - x) > 1e-9 * max(1.0, abs(x), abs(y)) for x, y in pairs_ab):
                first[metric] = r
    target = Path(out) if out is not None else Path(b) / layout.COMPARE_CSV
    target.parent.mkdir(parents=True, exist_ok=True)
    md = target.with_suffix(".md")
    with writer_lock(target.parent, "compare"):
        write_csv(target, COMPARE_COLUMNS, rows)
        atomic_write(md, _summary(Path(a), Path(b), pairs, rows, first, warnings))
    return {"csv": str(target), "md": str(md), "pairs": len(pairs), "first_difference": first,
            "warnings": warnings}


def _finite(value) -> bool:
    return value is not None and math.isfinite(value)


def _metric_order(name: str) -> tuple:
    return (HEADLINE.index(name) if name in HEADLINE else len(HEADLINE), name)


def _summary(a: Path, b: Path, pairs: Sequence[int], rows: list, first: dict, warnings: list) -> str:
    last: dict[str, list] = {}
    for row in rows:
        last[row[1]] = row                      # rows are in round order within a metric
    lines = [f"# {b} - {a}", "",
             f"{len(pairs)} pair(s) of runs (replicates {', '.join(map(str, pairs))}); differences B - A with "
             "95 % t-intervals over the pairs.", "",
             "| metric | first round that differs | last round | A | B | B - A | 95 % interval |",
             "|---|---|---|---|---|---|---|"]
    shown = [m for m in HEADLINE if m in last] + sorted(m for m in last if m.startswith("survey:"))
    for metric in shown:
        r, _, ma, mb, d, lo, hi, n = last[metric]
        interval = f"[{lo:.4g}, {hi:.4g}]" if n > 1 else "(one pair)"
        lines.append(f"| {metric} | {first.get(metric, 'none')} | {r} | {ma:.4g} | {mb:.4g} | {d:+.4g} | {interval} |")
    if warnings:
        lines += ["", "Warnings:", *(f"- {w}" for w in warnings)]
    return "\n".join(lines) + "\n"


def run_metrics(path: Path) -> dict[str, dict[int, float]]:
    """{metric: {round: value}}: rounds.csv's rewards averaged over agents, network.csv's
    numeric columns as they are, and (surveys.csv) ``survey:<survey>.<item>``: the mean numeric
    answer of the agents that answered. A file changed or damaged: RunFileError naming it."""
    run = Run(path)
    metrics: dict[str, dict[int, float]] = {}
    header, rows = _read_table(run, layout.ROUNDS)
    columns = [c for c in REWARD_METRICS if c in header]
    sums: dict[int, list] = {}
    for line, row in enumerate(rows, 2):
        record = dict(zip(header, row))
        acc = sums.setdefault(_round_of(record, run, layout.ROUNDS, line), [np.zeros(len(columns)), 0])
        acc[0] += [to_float(record[c]) for c in columns]
        acc[1] += 1
    for r, (total, count) in sums.items():
        for c, v in zip(columns, total / count):
            metrics.setdefault(c, {})[r] = float(v)
    header, rows = _read_table(run, layout.NETWORK)
    records = [dict(zip(header, row)) for row in rows]
    for column in header:
        cells = [rec.get(column, "") for rec in records]
        if column == "round" or column in metrics or not all(_numeric(c) for c in cells):
            continue                             # the key, or a text column
        metrics[column] = {_round_of(rec, run, layout.NETWORK, line): to_float(c)
                           for line, (rec, c) in enumerate(zip(records, cells), 2)}
    for key, (_, by_round, _) in run.survey_means().items():
        metrics[f"survey:{key}"] = by_round
    return metrics


def _read_table(run: Run, name: str) -> tuple[list[str], list[list[str]]]:
    """A run's CSV file, every row as long as its header, else the file is damaged."""
    header, rows = run.table(name)
    run.check(name)
    for line, row in enumerate(rows, 2):
        if len(row) != len(header):
            raise run.damage(name, f"row {line} has {len(row)} cells for the {len(header)} columns: the file was "
                                   "changed or damaged")
    return header, rows


def _round_of(record: dict, run: Run, name: str, line: int) -> int:
    """The row's round, else the file is damaged (the error names the file and the line)."""
    try:
        return int(record["round"])
    except (KeyError, TypeError, ValueError):
        raise run.damage(name, f"row {line} has no round number ({str(record.get('round'))[:40]!r}): the file "
                               "was changed or damaged") from None


def _numeric(text: str) -> bool:
    """Empty or a number (empty cells and nan are allowed in numeric columns)."""
    return text == "" or not math.isnan(to_float(text)) or text.strip().lower() == "nan"


__all__ = ["compare", "replicates", "run_metrics", "COMPARE_COLUMNS"]
