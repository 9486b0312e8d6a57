"""Intervention studies run as forks: ``socialgym study soc-strategy`` and ``socialgym study
misinformation`` (configs in ``configs/studies/``, ``--scale scripted`` or ``llm``).

Each study is a sweep over ``interventions`` with ``run.fork_at``: the first condition (the
control) runs whole, every other condition is forked from it after round ``fork_at``
(``socialgym.experiments.run.fork``), so each replicate's branches share everything before their
interventions and differ only through them. On top of the sweep's aggregate and its paired
comparisons (``compare/<condition>.csv``), the analysis writes:

- ``effects.csv`` / ``effects.md``: for every comparison and metric, the effect of B against A:
  per replicate pair the mean over rounds of B - A from the first round at which the two
  conditions' interventions differ, then the mean over pairs with a 95 % t-interval;
- verdicts on the study's expectations (recagent's claim for the Soc-Strategy; the direction
  of the claim's and the correction's effect on the stance survey for the misinformation
  study), by one rule fixed here: **supported** when the interval excludes 0 on the expected
  side, **contradicted** when it excludes 0 on the other, **inconclusive** otherwise (and with
  one pair, which has no interval);
- ``plots/branches.png``: each metric per round, mean and 95 % band per condition, with the
  fork and the interventions marked; ``study.html`` with the tables, the figure and links to
  every run's report.
"""

from __future__ import annotations

import base64
import html
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from socialgym.experiments.analysis.compare import run_metrics
from socialgym.experiments.analysis.statistics import mean_ci
from socialgym.experiments.analysis.realism import conditions_html
from socialgym.experiments.define import load_config
from socialgym.rundir.files import atomic_write, finite_json, own_dir, write_csv
from socialgym.experiments.define.schedule import rounds_of
from socialgym.experiments.run.runner import RunError
from socialgym.experiments.run.sweep import SWEEP_FILE
from socialgym.rundir import Run, layout, read_sweep


@dataclass(frozen=True)
class Expectation:
    text: str
    metric: str
    comparison: tuple[int, int]
    """(A, B): condition indices; the effect is B - A."""
    direction: int
    """+1: B above A expected; -1: below."""


@dataclass(frozen=True)
class ForkStudy:
    title: str
    metrics: tuple[str, ...]
    comparisons: tuple[tuple[int, int], ...]
    labels: tuple[str, ...]
    """A short name per condition, in the sweep's order."""
    expectations: tuple[Expectation, ...]


FORK_STUDIES = {
    "soc-strategy": ForkStudy(
        title="recagent's Soc-Strategy, forked from the same runs",
        metrics=("mean_topic_entropy", "cross_cutting_share", "deep_cocoon_share", "n_ties",
                 "survey:satisfaction.satisfaction", "total"),
        comparisons=((0, 1),),
        labels=("control", "Soc-Strategy"),
        expectations=(Expectation(
            "recagent (Fig. 4a/b): giving each user a friend with different interests raises the topic entropy "
            "of what users are recommended", "mean_topic_entropy", (0, 1), +1),)),
    "misinformation": ForkStudy(
        title="a false claim and its correction, forked from the same runs",
        metrics=("survey:stance.stance", "mean_topic_entropy", "n_ties", "total"),
        comparisons=((0, 1), (0, 2), (1, 2)),
        labels=("control", "claim", "claim + correction"),
        expectations=(
            Expectation("the false claim lowers the agents' stance on the water's safety (stance survey)",
                        "survey:stance.stance", (0, 1), -1),
            Expectation("the correction raises the stance again, against the claim alone",
                        "survey:stance.stance", (1, 2), +1))),
}


def analyze(out: str | Path, study: str) -> dict:
    """The effects, verdicts, figure and page of a finished fork study in ``out``."""
    spec = FORK_STUDIES[study]
    out = Path(out)
    manifest = read_sweep(out)
    if not isinstance(manifest, dict):
        raise RunError(f"{out} is not a sweep directory (no {SWEEP_FILE})")
    cfg = load_config(out / layout.CONFIG)
    max_rounds = int(cfg.env.get("max_rounds"))
    conditions = list(dict.fromkeys(job["condition_id"] for job in manifest["jobs"]))
    if len(conditions) != len(spec.labels):
        raise RunError(f"{out}: {len(conditions)} conditions, the study {study} has {len(spec.labels)}")
    runs: dict[int, dict[int, dict]] = {}          # condition index -> replicate -> metrics
    for job in manifest["jobs"]:
        path = out / job["out"]
        if (Run(path).summary or {}).get("status") != "complete":
            raise RunError(f"{path} is not complete: resume the study (socialgym study {study} --out {out})")
        runs.setdefault(conditions.index(job["condition_id"]), {})[job["replicate"]] = run_metrics(path)
    interventions = [list(job["condition"].get("interventions") or []) for job in
                     {j["condition_id"]: j for j in manifest["jobs"]}.values()]
    effects = []
    for a, b in spec.comparisons:
        start = _first_difference(interventions[a], interventions[b], max_rounds)
        for metric in spec.metrics:
            per_pair = []
            for k in sorted(set(runs[a]) & set(runs[b])):
                xa, xb = runs[a][k].get(metric, {}), runs[b][k].get(metric, {})
                diffs = [xb[r] - xa[r] for r in sorted(set(xa) & set(xb)) if r >= start
                         and math.isfinite(xa[r]) and math.isfinite(xb[r])]
                if diffs:
                    per_pair.append(float(np.mean(diffs)))
            mean, low, high, n = mean_ci(per_pair)
            effects.append({"a": spec.labels[a], "b": spec.labels[b], "metric": metric, "from_round": start,
                            "effect": mean, "ci_low": low, "ci_high": high, "n_pairs": n, "per_pair": per_pair})
    verdicts = [_verdict(e, effects, spec) for e in spec.expectations]
    write_csv(out / layout.EFFECTS_CSV, ["a", "b", "metric", "from_round", "effect", "ci_low", "ci_high", "n_pairs"],
              [[e[k] for k in ("a", "b", "metric", "from_round", "effect", "ci_low", "ci_high", "n_pairs")]
               for e in effects])
    atomic_write(out / layout.EFFECTS_JSON, json.dumps(finite_json({"effects": effects, "verdicts": verdicts}), indent=1,
                                                       default=_json) + "\n")
    atomic_write(out / layout.EFFECTS_MD, effects_markdown(spec, effects, verdicts, int(cfg.run.fork_at)))
    figure = _figure(out, spec, runs, interventions, int(cfg.run.fork_at), max_rounds)
    atomic_write(out / layout.STUDY_HTML, _html(out, spec, manifest, effects, verdicts, figure))
    return {"runs": len(manifest["jobs"]), "claims": {v["text"]: v["verdict"] for v in verdicts},
            "html": str(out / layout.STUDY_HTML), "effects": effects, "verdicts": verdicts}


def _first_difference(a: list, b: list, max_rounds: int) -> int:
    """The earliest round of an intervention that one condition has and the other has not."""
    only = [s for s in a if s not in b] + [s for s in b if s not in a]
    rounds = [r for s in only for r in rounds_of(s, max_rounds)]
    return min(rounds) if rounds else 1


def _verdict(expectation: Expectation, effects: list, spec: ForkStudy) -> dict:
    a, b = (spec.labels[i] for i in expectation.comparison)
    e = next(x for x in effects if x["a"] == a and x["b"] == b and x["metric"] == expectation.metric)
    if e["n_pairs"] < 2 or not math.isfinite(e["ci_low"]):
        verdict = "inconclusive"
        reason = "one pair: no interval" if e["n_pairs"] == 1 else "no data"
    else:
        low, high = e["ci_low"] * expectation.direction, e["ci_high"] * expectation.direction
        lo, hi = min(low, high), max(low, high)
        verdict = "supported" if lo > 0 else "contradicted" if hi < 0 else "inconclusive"
        reason = "the 95 % interval excludes 0 on the expected side" if verdict == "supported" else \
            "the 95 % interval excludes 0 on the other side" if verdict == "contradicted" else \
            "the 95 % interval contains 0"
    return {"text": expectation.text, "metric": expectation.metric, "a": a, "b": b,
            "direction": "higher" if expectation.direction > 0 else "lower", "effect": e["effect"],
            "ci_low": e["ci_low"], "ci_high": e["ci_high"], "n_pairs": e["n_pairs"], "verdict": verdict,
            "reason": reason}


def effects_markdown(spec: ForkStudy, effects: list, verdicts: list, fork_at: int) -> str:
    lines = [f"# {spec.title}", "",
             f"Branches forked after round {fork_at}. Effect of B against A: per replicate pair, the mean over "
             "rounds (from the first round at which their interventions differ) of B - A; then the mean over "
             "pairs with a 95 % t-interval. Rule: supported when the interval excludes 0 on the expected side, "
             "contradicted when it excludes 0 on the other, inconclusive otherwise (or with one pair).", "",
             "| expectation | B - A | effect | 95 % interval | pairs | verdict |", "|---|---|---|---|---|---|"]
    for v in verdicts:
        lines.append(f"| {v['text']} | {v['b']} - {v['a']}, {v['metric']} ({v['direction']} expected) | "
                     f"{_num(v['effect'])} | {_interval(v)} | {v['n_pairs']} | **{v['verdict']}** |")
    lines += ["", "| B - A | metric | from round | effect | 95 % interval | pairs |", "|---|---|---|---|---|---|"]
    for e in effects:
        lines.append(f"| {e['b']} - {e['a']} | {e['metric']} | {e['from_round']} | {_num(e['effect'])} | "
                     f"{_interval(e)} | {e['n_pairs']} |")
    return "\n".join(lines) + "\n"


def _num(x) -> str:
    return "n/a" if x is None or not math.isfinite(x) else f"{x:+.4g}"


def _interval(e: dict) -> str:
    if e["n_pairs"] < 2 or not math.isfinite(e["ci_low"]):
        return "(one pair)" if e["n_pairs"] == 1 else "n/a"
    return f"[{e['ci_low']:+.4g}, {e['ci_high']:+.4g}]"


def _figure(out: Path, spec: ForkStudy, runs: dict, interventions: list, fork_at: int, max_rounds: int) -> Path:
    from socialgym.experiments.analysis.plotting import figure, save

    metrics = [m for m in spec.metrics if any(m in reps[k] for reps in runs.values() for k in reps)]
    cols = min(3, len(metrics))
    rows = math.ceil(len(metrics) / cols)
    fig = figure(4.6 * cols, 3.3 * rows, layout="tight")
    axes = fig.subplots(rows, cols, squeeze=False)
    marks = sorted({r for specs in interventions for s in specs for r in rounds_of(s, max_rounds)})
    for ax, metric in zip(axes.flat, metrics):
        for c, label in enumerate(spec.labels):
            by_round: dict[int, list[float]] = {}
            for values in runs.get(c, {}).values():
                for r, v in values.get(metric, {}).items():
                    by_round.setdefault(r, []).append(v)
            xs = sorted(by_round)
            stats = np.array([mean_ci(by_round[r])[:3] for r in xs], float)
            if not len(xs):
                continue
            (line,) = ax.plot(xs, stats[:, 0], marker="." if len(xs) < 15 else None, label=label)
            ax.fill_between(xs, stats[:, 1], stats[:, 2], color=line.get_color(), alpha=0.18)
        ax.axvline(fork_at + 0.5, color="grey", lw=1, ls="--")
        for r in marks:
            ax.axvline(r, color="black", lw=0.8, ls=":")
        ax.set_title(metric)
        ax.set_xlabel("round")
    for ax in list(axes.flat)[len(metrics):]:
        ax.set_visible(False)
    axes.flat[0].legend(fontsize=7)
    fig.suptitle(f"{spec.title}: mean per round, 95 % band (dashed: fork; dotted: interventions)", fontsize=9)
    path = out / "plots" / "branches.png"
    own_dir(path.parent)
    save(fig, path, dpi=110)
    return path


def _html(out: Path, spec: ForkStudy, manifest: dict, effects: list, verdicts: list, figure: Path) -> str:
    esc = html.escape
    vrows = "".join(f"<tr><td>{esc(v['text'])}</td><td>{esc(v['b'])} - {esc(v['a'])}</td><td>{_num(v['effect'])}"
                    f"</td><td>{_interval(v)}</td><td>{v['n_pairs']}</td><td><b>{v['verdict']}</b></td></tr>"
                    for v in verdicts)
    erows = "".join(f"<tr><td>{esc(e['b'])} - {esc(e['a'])}</td><td>{esc(e['metric'])}</td><td>{e['from_round']}"
                    f"</td><td>{_num(e['effect'])}</td><td>{_interval(e)}</td><td>{e['n_pairs']}</td></tr>"
                    for e in effects)
    links = "".join(f'<li><a href="{esc(job["out"])}/{layout.REPORT}">{esc(job["condition_id"])} / replicate '
                    f'{job["replicate"]}</a></li>' for job in manifest["jobs"] if (out / job["out"] / layout.REPORT).is_file())
    compares = "".join(f'<li><a href="compare/{esc(p.name)}">{esc(p.name)}</a></li>'
                       for p in sorted((out / "compare").glob("*.md")))
    img = base64.b64encode(figure.read_bytes()).decode()
    scorecards = conditions_html((job["condition_id"], out / job["out"]) for job in manifest["jobs"])
    return ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; img-src data:; "
            "style-src 'unsafe-inline'\">"
            f"<title>socialgym study: {esc(spec.title)}</title><style>body{{font-family:sans-serif;max-width:1200px;"
            "margin:auto}img{max-width:100%}td,th{border:1px solid #ccc;padding:4px}table{border-collapse:collapse}"
            f"</style></head><body><h1>{esc(spec.title)}</h1><p>{len(manifest['jobs'])} runs in "
            f"{esc(os.path.basename(os.path.abspath(out)))}</p><h2>Expectations</h2><table><tr><th>expectation</th>"
            f"<th>B - A</th><th>effect</th><th>95 % interval</th><th>pairs</th><th>verdict</th></tr>{vrows}</table>"
            f"<h2>Branches</h2><img alt=\"branches\" src=\"data:image/png;base64,{img}\">"
            f"<h2>Effects</h2><table><tr><th>B - A</th><th>metric</th><th>from round</th><th>effect</th>"
            f"<th>95 % interval</th><th>pairs</th></tr>{erows}</table>"
            f"<h2>Paired comparisons per round</h2><ul>{compares}</ul>{scorecards}"
            f"<h2>Runs</h2><ul>{links}</ul></body></html>\n")


def _json(value):
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return str(value)


__all__ = ["FORK_STUDIES", "ForkStudy", "Expectation", "analyze"]
