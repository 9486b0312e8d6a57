"""The core paper's study as one command: ``socialgym study ties-coach --out DIR``.

The 2 x 2 design (coach off/on x heuristic/LLM tie scoring) with K replicates on common random
numbers is an ordinary sweep (``configs/studies/ties-coach*.yaml``), run and resumed by
``socialgym.experiments.run.sweep``. This module adds what the paper reports on top of it:

- ``task_rewards.csv``: per condition, replicate, task group and round, the group's mean task
  reward (the reward component its weights are concentrated on);
- ``theta_sweep.csv``: the network metrics of each run's final tie matrix at θ = 0.05 ... 0.50
  (``socialgym.metrics.theta_sweep``), with the average shortest path also normalised by the
  log of the largest component's size, as the real-network reference reports it;
- figures: task reward over rounds per group, coach vs no coach, 95 % intervals (the paper's
  Fig. 2); network metrics against θ, heuristic vs LLM ties, with the real-network bands
  (Figs. 3-4); degree distributions per condition (Figs. 5-8);
- ``claims.md`` / ``claims.json`` (``socialgym.experiments.studies.claims``) and ``study.html``, one
  self-contained page with the figures, the claims and links to every run's report.
"""

from __future__ import annotations

import base64
import html
import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np

from socialgym.config import REWARD_NAMES
from socialgym.experiments.studies import claims as claim_stats
from socialgym.experiments.studies.evidence import Scale, network_band
from socialgym.experiments.define import ConfigError, load_config
from socialgym.experiments.run.runner import RunError
from socialgym.experiments.studies import fork_studies as fork_study
from socialgym.rundir.files import atomic_write, own_dir, read_json, write_csv
from socialgym.experiments.studies.fork_studies import FORK_STUDIES
from socialgym.experiments.analysis.statistics import mean_ci
from socialgym.experiments.analysis.realism import conditions_html
from socialgym.experiments.run.sweep import resume_sweep, run_sweep
from socialgym.rundir import Run, is_sweep, kind_of, layout, read_sweep, writes

STUDIES = {"ties-coach": {"small": "ties-coach-small.yaml", "paper": "ties-coach.yaml"},
           # intervention studies as forks (socialgym.experiments.studies.fork_studies)
           "soc-strategy": {"scripted": "soc-strategy.yaml", "llm": "soc-strategy-llm.yaml"},
           "misinformation": {"scripted": "misinformation.yaml", "llm": "misinformation-llm.yaml"}}
"""Study name -> {scale: config file in configs/studies/}; the first scale is the default."""

# Chang et al. (ICWSM 2025, arXiv 2408.16629): mean and standard error over their eight real
# friendship networks (31-70 nodes), as printed by the authors' analysis notebook
# (snap-stanford/llm-social-network, analyze_networks.ipynb); see notes/chang2024_real_networks.md.
# The band drawn and tested is the spread between the networks, mean +- 1.96 SD with SD = SE * sqrt(8)
# (the rules of evidence, socialgym.experiments.studies.evidence). Their shortest path is normalised by
# ln(LCC size).
REAL_NETWORKS = {"density": (0.197, 0.046), "clustering": (0.454, 0.043), "lcc_fraction": (0.990, 0.010),
                 "avg_shortest_path_norm": (0.635, 0.047), "modularity": (0.378, 0.050)}
SWEEP_METRICS = ("density", "clustering", "lcc_fraction", "avg_shortest_path_norm", "modularity")


def config_path(study: str, scale: str) -> Path:
    if study not in STUDIES:
        raise ConfigError(f"unknown study {study!r}; known: {', '.join(STUDIES)}")
    if scale not in STUDIES[study]:
        raise ConfigError(f"unknown scale {scale!r}; known: {', '.join(STUDIES[study])}")
    root = Path(__file__).resolve().parents[3] / "configs" / "studies"
    path = root / STUDIES[study][scale]
    if not path.is_file():
        raise ConfigError(f"{path} not found: the study configs live in the repository's configs/studies/")
    return path


REAL_NETWORK_COUNT = 8


def bands() -> dict[str, tuple[float, float]]:
    return {m: network_band(mean, se * math.sqrt(REAL_NETWORK_COUNT)) for m, (mean, se) in REAL_NETWORKS.items()}


@writes("study", "out")
def run_study(study: str, out: str | Path, *, scale: str | None = None, replicates: int | None = None,
              base_url: str | None = None, model: str | None = None, progress: bool | None = None,
              fork_at: int | None = None) -> dict:
    """Run (or resume, when ``out`` holds the study already) and analyse the study. ``scale``:
    one of the study's (default: its first); ``fork_at`` overrides ``run.fork_at``."""
    import platform
    import time

    out = Path(out)
    started = time.perf_counter()
    resumed = is_sweep(out)
    if kind_of(out) not in (None, "sweep", "study"):
        raise RunError(f"{out} holds a {kind_of(out)}, not a study: give another --out")
    if resumed:                          # (a scale not given is not compared)
        _check_same_study(out, study, scale, replicates, fork_at, base_url, model)
        sweep = resume_sweep(out, progress=progress)
    else:
        if study in STUDIES and scale is None:
            scale = next(iter(STUDIES[study]))
        cfg = _study_config(study, scale, replicates, fork_at, base_url, model)
        sweep = run_sweep(cfg, out, progress=progress)
        atomic_write(out / layout.STUDY_CONFIG, json.dumps({"study": study, "scale": scale}) + "\n")
    name = (read_json(out / layout.STUDY_CONFIG) or {}).get("study", study)
    if name in FORK_STUDIES:
        result = fork_study.analyze(out, name)
    else:
        result = analyze(out)
    info = json.loads((out / layout.STUDY_CONFIG).read_text()) if (out / layout.STUDY_CONFIG).is_file() else {}
    cfg = load_config(out / layout.CONFIG)
    llm = cfg.llm
    info.update({"runs": result["runs"], "wall_seconds": round(time.perf_counter() - started, 1), "resumed": resumed,
                 "model": (llm.model if llm and llm.base_url else "the embedded SmolLM2-135M") if cfg.uses_llm()
                 else "none (scripted agents)",
                 "machine": f"{platform.machine()}, {os.cpu_count()} cores"})
    atomic_write(out / layout.STUDY_INFO, json.dumps(info, indent=1) + "\n")
    return {**result, "problems": sweep.get("problems", [])}


def _study_config(study: str, scale: str | None, replicates: int | None, fork_at: int | None,
                  base_url: str | None, model: str | None):
    overrides = []
    if fork_at is not None:
        overrides.append(f"run.fork_at={int(fork_at)}")
    if replicates is not None:
        overrides.append(f"run.replicates={int(replicates)}")
    if base_url is not None:
        if not model:
            raise ConfigError("--model is required with --base-url")
        overrides += [f"llm.base_url={base_url}", f"llm.model={model}", "llm.max_concurrency=16"]
    return load_config(config_path(study, scale), overrides)


def _check_same_study(out: Path, study: str, scale: str | None, replicates: int | None, fork_at: int | None,
                      base_url: str | None, model: str | None) -> None:
    """A study directory is resumed only as the study it holds: another study, scale, number of
    replicates or fork round needs a new directory (the old results would be reported as the new);
    a sweep that is not this study's (or a study killed before it named itself: its config
    decides) is refused too."""
    from socialgym.experiments.run.sweep import config_digest_of

    info = read_json(out / layout.STUDY_CONFIG) or {}
    cfg = load_config(out / layout.CONFIG)
    default_scale = next(iter(STUDIES[study])) if study in STUDIES else None
    if not info and config_digest_of(cfg) != config_digest_of(_study_config(
            study, scale or default_scale, replicates or cfg.run.replicates, fork_at or cfg.run.fork_at,
            base_url, model)):
        raise RunError(f"{out} holds a sweep that is not the study {study!r}: give another --out")
    held = {"study": info.get("study", study), "scale": info.get("scale", scale),
            "replicates": cfg.run.replicates, "fork_at": cfg.run.fork_at}
    asked = {"study": study, "scale": scale, "replicates": replicates, "fork_at": fork_at}
    differ = [f"{k} {held[k]!r} (asked: {v!r})" for k, v in asked.items() if v is not None and v != held[k]]
    if differ:
        raise RunError(f"{out} holds a study with {', '.join(differ)}: resume it as it is, or give another --out")


# ---------------------------------------------------------------------------------- reading runs
def _runs(out: Path) -> list[dict]:
    manifest = read_sweep(out)
    runs = []
    for job in manifest["jobs"]:
        path = out / job["out"]
        if (Run(path).summary or {}).get("status") != "complete":
            raise RunError(f"{path} is not complete: resume the study (socialgym study ... --out {out})")
        cond = job["condition"]
        runs.append({"path": path, "coach": bool(cond.get("policy.coach")), "llm_ties": bool(cond.get("llm.tie_scorer")),
                     "replicate": job["replicate"], "condition_id": job["condition_id"]})
    return runs


def _task_curves(path: Path) -> dict[str, np.ndarray]:
    """Per task group (named after its reward), the group's mean task reward per round."""
    run = Run(path)
    run.require(layout.ROUNDS)
    rows = run.rounds
    rounds = sorted({int(r["round"]) for r in rows})
    curves = {}
    for task in REWARD_NAMES:
        mine = [r for r in rows if r["group"] == task]
        if mine:
            curves[task] = np.array([np.mean([float(r[task]) for r in mine if int(r["round"]) == t]) for t in rounds])
    return curves


def _final_ties(path: Path):
    run = Run(path)
    found = run.last_ties()
    run.check(layout.TIES)
    if found is None:
        raise RunError(f"{path} has no {layout.TIES}/round_*.npz (logging.ties must be on)")
    return found[1]


def _groups(path: Path) -> list[str]:
    summary = Run(path).summary
    return [summary.get("groups", {}).get(a, "") for a in summary["agents"]]


# ---------------------------------------------------------------------------------- analysis
def analyze(out: str | Path) -> dict:
    from socialgym.metrics import THETAS, theta_sweep

    out = Path(out)
    runs = _runs(out)
    reward_rows, sweep_rows, degrees = [], [], {}
    for run in runs:
        run["curves"] = _task_curves(run["path"])
        for task, curve in run["curves"].items():
            reward_rows += [[run["condition_id"], run["coach"], run["llm_ties"], run["replicate"], task, t + 1, v]
                            for t, v in enumerate(curve.tolist())]
        rows = theta_sweep(_final_ties(run["path"]), THETAS, groups=_groups(run["path"]))
        run["sweep"] = rows
        for row in rows:
            n_lcc = row["lcc_fraction"] * row["n_nodes"]
            row["avg_shortest_path_norm"] = row["avg_shortest_path"] / math.log(n_lcc) if n_lcc > 1 else float("nan")
            sweep_rows.append([run["condition_id"], run["coach"], run["llm_ties"], run["replicate"], row["theta"],
                               *(row[m] for m in ("density", "clustering", "lcc_fraction", "avg_shortest_path",
                                                  "avg_shortest_path_norm", "modularity", "homophily", "n_edges"))])
            if abs(row["theta"] - 0.1) < 1e-9:
                degrees.setdefault((run["coach"], run["llm_ties"]), []).append(row["degree_histogram"])
    write_csv(out / layout.TASK_REWARDS, ["condition_id", "coach", "llm_ties", "replicate", "task", "round",
                                         "task_reward"], reward_rows)
    write_csv(out / layout.THETA_SWEEP, ["condition_id", "coach", "llm_ties", "replicate", "theta", "density",
                                        "clustering", "lcc_fraction", "avg_shortest_path", "avg_shortest_path_norm",
                                        "modularity", "homophily", "n_edges"], sweep_rows)
    verdicts = _claims(out, runs)
    atomic_write(out / layout.CLAIMS_JSON, json.dumps([v.to_dict() for v in verdicts], indent=1, default=_json) + "\n")
    atomic_write(out / layout.CLAIMS_MD, claims_markdown(verdicts))
    figures = _figures(out, runs, degrees)
    atomic_write(out / layout.STUDY_HTML, _html(out, runs, verdicts, figures))
    return {"runs": len(runs), "claims": {v.claim: v.verdict for v in verdicts}, "html": str(out / layout.STUDY_HTML)}


def _stance_homophily(path: Path) -> float | None:
    from socialgym.metrics import network_metrics

    run = Run(path)
    personas, summary = run.personas or {}, run.summary
    stances = [(personas.get(a) or {}).get("stance") for a in summary["agents"]]
    if None in stances or len(set(stances)) < 2:
        return None
    value = network_metrics(_final_ties(path), claim_stats.THETA_DEGREE, groups=stances)["homophily"]
    return None if value is None or not math.isfinite(value) else float(value)


def study_scale(out: Path, runs: list[dict]) -> Scale:
    """The study's scale for the rules of evidence: agents, rounds, runs and the model."""
    cfg = load_config(out / layout.CONFIG)
    llm = cfg.llm
    model = (llm.model if llm and llm.base_url else "the embedded SmolLM2-135M") if cfg.uses_llm() else None
    return Scale(int(cfg.env["n_agents"]), int(cfg.env["max_rounds"]), len(runs), model)


def run_records(runs: list[dict]) -> list[dict]:
    """The runs as the claims read them (and as the reproduction page's summary stores them)."""
    return [{"coach": r["coach"], "llm_ties": r["llm_ties"], "replicate": r["replicate"],
             "curves": {t: np.asarray(c, float).tolist() for t, c in r["curves"].items()},
             "sweep": [{k: row[k] for k in ("theta", "n_nodes", *SWEEP_METRICS, "avg_shortest_path", "homophily")}
                       for row in r["sweep"]],
             "stance_homophily": r.get("stance_homophily")} for r in runs]


def _claims(out: Path, runs: list[dict]) -> list:
    for run in runs:
        run["stance_homophily"] = _stance_homophily(run["path"])
    records = run_records(runs)
    atomic_write(out / layout.STUDY_RECORDS, json.dumps(records, default=_json) + "\n")
    return claim_stats.all_claims(records, bands(), study_scale(out, runs))


def claims_markdown(verdicts) -> str:
    lines = ["# The core paper's claims, tested", "",
             "Verdicts follow rules fixed before the data (`socialgym/experiments/studies/claims.py`, docs/reproduction.md).",
             "", "| claim | statistic | verdict |", "|---|---|---|"]
    lines += [f"| {v.claim} | {v.statistic} | **{v.verdict}** |" for v in verdicts]
    for v in verdicts:
        below = f" Below the paper's scale: {'; '.join(v.shortfalls)}." if v.shortfalls else ""
        lines += ["", f"## {v.claim}", "", f"Rule: {v.rule}. Units: {v.n}.{below}", "", "```json",
                  json.dumps(v.numbers, indent=1, default=_json), "```"]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------- figures
def _figures(out: Path, runs: list[dict], degrees: dict) -> list[tuple[Path, str]]:
    from socialgym.experiments.analysis.plotting import figure

    folder = out / "plots"
    own_dir(folder)
    figures = []
    tasks = [t for t in REWARD_NAMES if all(t in r["curves"] for r in runs)]
    fig = figure(3.2 * max(1, len(tasks)), 3.0, layout="tight")
    axes = fig.subplots(1, max(1, len(tasks)), squeeze=False)
    for ax, task in zip(axes[0], tasks):
        for coach, colour in ((False, "tab:blue"), (True, "tab:orange")):
            ys = np.vstack([r["curves"][task] for r in runs if r["coach"] == coach])
            stats = [mean_ci(ys[:, t]) for t in range(ys.shape[1])]
            x = np.arange(1, ys.shape[1] + 1)
            ax.plot(x, [s[0] for s in stats], color=colour, label="coach" if coach else "no coach")
            ax.fill_between(x, [s[1] for s in stats], [s[2] for s in stats], color=colour, alpha=0.2)
        ax.set_title(f"{task} group: {task}")
        ax.set_xlabel("round")
    axes[0][0].set_ylabel("task reward (mean, 95 % CI)")
    axes[0][0].legend(fontsize=8)
    figures.append(_captioned(fig, folder / "fig2_task_rewards.png",
                         "task reward over rounds per task group, coach vs no coach (the paper's Fig. 2)"))
    from socialgym.metrics import THETAS

    band = bands()
    fig = figure(3.2 * len(SWEEP_METRICS), 3.0, layout="tight")     # band: the spread between real networks
    axes = fig.subplots(1, len(SWEEP_METRICS), squeeze=False)
    for ax, metric in zip(axes[0], SWEEP_METRICS):
        for llm, colour in ((False, "tab:green"), (True, "tab:purple")):
            ys = np.array([[row[metric] for row in r["sweep"]] for r in runs if r["llm_ties"] == llm], float)
            stats = [mean_ci(ys[:, k]) for k in range(ys.shape[1])]
            ax.plot(THETAS, [s[0] for s in stats], marker="o", ms=3, color=colour, label="LLM ties" if llm else "heuristic")
            ax.fill_between(THETAS, [s[1] for s in stats], [s[2] for s in stats], color=colour, alpha=0.15)
        ax.axhspan(*band[metric], color="grey", alpha=0.2, label="real networks (Chang et al.), mean ± 1.96 SD")
        ax.set_title(metric)
        ax.set_xlabel("θ")
    axes[0][0].legend(fontsize=7)
    figures.append(_captioned(fig, folder / "fig3_4_theta_sweep.png",
                         "network metrics of the final tie graph against θ, heuristic vs LLM ties, with the "
                         "real-network band (the paper's Figs. 3-4)"))
    keys = sorted(degrees)
    fig = figure(3.2 * max(1, len(keys)), 3.0, layout="tight")
    axes = fig.subplots(1, max(1, len(keys)), squeeze=False)
    for ax, key in zip(axes[0], keys):
        hists = degrees[key]
        width = max(len(h) for h in hists)
        total = np.sum([np.pad(h, (0, width - len(h))) for h in hists], axis=0)
        ax.bar(np.arange(width), total / max(1, total.sum()), color="tab:gray")
        ax.set_title(f"{'coach' if key[0] else 'no coach'}, {'LLM' if key[1] else 'heuristic'} ties")
        ax.set_xlabel("degree (θ = 0.1)")
    axes[0][0].set_ylabel("share of agents")
    figures.append(_captioned(fig, folder / "fig5_8_degrees.png",
                         "degree distribution of the final tie graph per condition (the paper's Figs. 5-8)"))
    return figures


def _captioned(fig, path: Path, caption: str) -> tuple[Path, str]:
    from socialgym.experiments.analysis.plotting import save

    save(fig, path, dpi=110)
    return path, caption


def _html(out: Path, runs: list[dict], verdicts, figures) -> str:
    scorecards = conditions_html((r["condition_id"], r["path"]) for r in runs)
    rows = "".join(f"<tr><td>{html.escape(v.claim)}</td><td>{html.escape(v.statistic)}</td>"
                   f"<td><b>{v.verdict}</b></td></tr>" for v in verdicts)
    imgs = "".join(f'<figure><img alt="{html.escape(p.name)}" src="data:image/png;base64,'
                   f'{base64.b64encode(p.read_bytes()).decode()}"><figcaption>{html.escape(c)}</figcaption></figure>'
                   for p, c in figures)
    links = "".join(f'<li><a href="{html.escape(os.path.relpath(r["path"] / layout.REPORT, out))}">'
                    f'{html.escape(r["condition_id"])} / replicate {r["replicate"]}</a>'
                    + (f' (<a href="{html.escape(os.path.relpath(r["path"] / layout.VIEWER, out))}">viewer</a>)'
                       if (r["path"] / layout.VIEWER).is_file() else "") + '</li>' for r in runs)
    return ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>socialgym study: ties-coach"
            "</title><style>body{font-family:sans-serif;max-width:1200px;margin:auto}img{max-width:100%}"
            "td,th{border:1px solid #ccc;padding:4px}table{border-collapse:collapse}</style></head><body>"
            f"<h1>The core paper's study: coach x tie scoring</h1><p>{len(runs)} runs in {html.escape(str(out))}</p>"
            f"<h2>Claims</h2><table><tr><th>claim</th><th>statistic</th><th>verdict</th></tr>{rows}</table>"
            f"<p>Numbers and rules: {layout.CLAIMS_MD}, {layout.CLAIMS_JSON}.</p><h2>Figures</h2>{imgs}"
            f"{scorecards}<h2>Runs</h2><ul>{links}</ul></body></html>\n")


def _json(value: Any):
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return str(value)
