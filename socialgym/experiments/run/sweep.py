"""Replicates and sweeps: every cell of a config's ``sweep`` grid, ``run.replicates`` times, as
independent jobs on a local process pool or on Ray, then an aggregate across replicates.

    from socialgym.experiments import load_config
    from socialgym.experiments.run.sweep import run_sweep, resume_sweep, aggregate
    run_sweep(load_config("study.yaml"), "runs/study")     # {"jobs": 8, "ran": 8, ...}
    resume_sweep("runs/study")                             # after a crash: runs what is not complete
    aggregate("runs/study")                                # rebuild aggregate.csv and plots/

A sweep directory SWEEP::

    SWEEP/
      config.yaml                 the resolved config, sweep section included (secrets removed)
      sweep.json                  the job list: condition ids, conditions, replicates, seeds, paths
      runs/<condition_id>/rep_<k>/  one run directory per job (see runner.py / the run-dir spec)
      aggregate.csv               condition_id, <one column per swept key>, round, metric,
                                  mean, ci_low, ci_high, n
      plots/compare_total.png     total reward per round, one line per condition, 95% CI band
      plots/compare_rewards.png   one panel per reward component
      plots/compare_network.png   density, clustering, mean_tie, deep_cocoon_share

Seeds -- common random numbers: replicate ``k`` of *every* condition runs with seed
``cell.seed + k`` (``cell.seed`` is the top-level ``seed`` unless ``seed`` itself is swept).
Conditions therefore differ only in the swept settings, not in their random draws, which makes
between-condition differences less noisy; replicates of one condition use different seeds.

Jobs are independent: a job whose directory holds a complete run is skipped, a partial one is
resumed from its checkpoint, so ``resume_sweep`` simply runs the sweep again. A failing job does
not stop the others; after all of them finished (and the completed ones were aggregated) one
:class:`RunError` lists the failed jobs.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import json
import math
import os
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from socialgym.config import REWARD_NAMES, FeedConfig
from socialgym.experiments.analysis.compare import compare, run_metrics
from socialgym.experiments.analysis.statistics import mean_ci
from socialgym.experiments.run.servers import check_llm_keys, check_model_files
from socialgym.experiments.define import (ConfigError, ExperimentConfig, dump_yaml, fork_config, grid, load_config,
                                          thaw, to_dict, with_values)
from socialgym.experiments.errors import RunError
from socialgym.experiments.run.runner import resume_experiment, run_experiment
from socialgym.rundir import (Run, is_sweep, kind_of, layout, read_sweep, was_started,
                              write_sweep, writes)
from socialgym.rundir.files import atomic_write, own_dir, write_csv

SWEEP_FILE = layout.SWEEP
SWEEP_VERSION = 1
AGGREGATE_FILE = layout.AGGREGATE
NETWORK_PLOT_METRICS = ("density", "clustering", "mean_tie", "deep_cocoon_share")
ID_CHARS = 48
"""Longest readable part of a condition id (the ``cNN-`` index keeps ids unique)."""


# ---------------------------------------------------------------------------------- jobs
@dataclass(frozen=True)
class Job:
    """One run of a sweep: one condition (sweep cell), one replicate."""

    condition_id: str
    """Short, filesystem-safe and stable: ``c01-env.recommender=mf,policy.coach=true``."""
    condition: dict
    """The cell: {dotted key: value} ({} when only replicates are run)."""
    replicate: int
    seed: int
    """``cell.seed + replicate``: the same for replicate k of every condition (common random numbers)."""
    config: ExperimentConfig
    """The cell's config (no sweep section) with ``seed`` replaced."""
    out: str
    """Run directory relative to the sweep directory: ``runs/<condition_id>/rep_<k>``."""
    fork_from: str | None = None
    """With ``run.fork_at``: the run (relative path) this one is forked from after round
    ``config.run.fork_at`` — replicate k of the first condition; None for the first condition."""

    @property
    def name(self) -> str:
        return f"{self.condition_id}/rep_{self.replicate}"


def jobs(cfg: ExperimentConfig) -> list[Job]:
    """Every sweep cell x ``cfg.run.replicates``, cell-major (c00 rep 0, c00 rep 1, c01 rep 0, ...)."""
    cells = grid(cfg)
    width = max(2, len(str(len(cells) - 1)))
    out = []
    first = None
    for index, cell in enumerate(cells):
        cell = thaw(cell)                        # plain dicts/lists: YAML- and JSON-ready
        cell_cfg = with_values(cfg, cell)
        cid = condition_id(index, cell, width)
        first = first or cid
        for k in range(cfg.run.replicates):
            seed = cell_cfg.seed + k
            fork_from = f"runs/{first}/rep_{k}" if cfg.run.fork_at is not None and index > 0 else None
            out.append(Job(cid, dict(cell), k, seed, dataclasses.replace(cell_cfg, seed=seed),
                           f"runs/{cid}/rep_{k}", fork_from))
    return out


def condition_id(index: int, cell: Mapping[str, Any], width: int = 2) -> str:
    """``c<index>-key=value,key=value``, unsafe characters replaced by ``_``, the readable part
    cut to :data:`ID_CHARS` characters. The index alone keeps ids unique and stable."""
    text = ",".join(f"{k}={_compact(v)}" for k, v in cell.items())
    text = re.sub(r"[{}\[\]\"' ]", "", text)              # mapping/list values: keep the content
    text = re.sub(r"[^A-Za-z0-9._=,+-]", "_", text)[:ID_CHARS].rstrip("_,")
    prefix = f"c{index:0{width}d}"
    return f"{prefix}-{text}" if text else prefix


def _compact(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (Mapping, list, tuple)):
        return json.dumps(value, separators=(",", ":"), sort_keys=True, default=str)
    return str(value)


# ---------------------------------------------------------------------------------- running
@writes("sweep", "out")
def run_sweep(cfg: ExperimentConfig, out: str | Path, progress: bool | None = None) -> dict:
    """Create the sweep directory ``out``, run every job, aggregate. Returns
    ``{"jobs": n, "ran": .., "skipped": .., "failed": [..], "aggregate": path}``."""
    out = Path(out)
    if is_sweep(out):
        raise RunError(f"{out} already holds a sweep: use `socialgym resume {out}` or another --out")
    if kind_of(out) is not None:
        raise RunError(f"{out} holds a {kind_of(out)}: a sweep needs a new directory (another --out)")
    if cfg.run.fork_at is not None and len(grid(cfg)) < 2:
        raise RunError("run.fork_at forks every condition of a sweep from the first one after that round; this "
                       "config has one condition (give a sweep section)")
    todo = jobs(cfg)
    for job in todo:                        # keys and model files, before any directory or job exists
        if job.config.uses_llm():
            check_llm_keys(job.config)
        check_model_files(job.config)
    out.mkdir(parents=True, exist_ok=True)
    dump_yaml(cfg, out / layout.CONFIG)
    write_sweep(out, _manifest(cfg, todo))
    return _execute(cfg, out, todo, progress)


@writes("resume", "directory")
def resume_sweep(directory: str | Path, progress: bool | None = None, *, trust: bool = False,
                 allow_config_change: bool = False) -> dict:
    """Run the jobs of the sweep in ``directory`` that are not complete (partial runs resume
    from their checkpoints, with ``resume_experiment``'s checks and options), then aggregate again."""
    out = Path(directory)
    manifest = read_sweep(out)
    if manifest is None or not (out / layout.CONFIG).exists():
        raise RunError(f"{out} is not a sweep directory (no {layout.SWEEP} / {layout.CONFIG})")
    cfg = load_config(out / layout.CONFIG)
    todo = jobs(cfg)
    if [j.out for j in todo] != [j["out"] for j in manifest.get("jobs", [])]:
        raise RunError(f"{out}/{layout.CONFIG} no longer gives the job list of {SWEEP_FILE}; "
                       "was the config edited? start a new sweep instead")
    return _execute(cfg, out, todo, progress, {"trust": trust, "allow_config_change": allow_config_change})


def _manifest(cfg: ExperimentConfig, todo: list[Job]) -> dict:
    return {
        "version": SWEEP_VERSION,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "keys": list(cfg.sweep),
        "replicates": cfg.run.replicates,
        "backend": cfg.run.backend,
        "seeds": "common random numbers: replicate k of every condition runs with seed cell.seed + k",
        "jobs": [{"condition_id": j.condition_id, "condition": j.condition, "replicate": j.replicate,
                  "seed": j.seed, "out": j.out, **({"fork_from": j.fork_from, "fork_at": j.config.run.fork_at}
                                                    if j.fork_from else {})} for j in todo],
        "config": to_dict(cfg, redact=True),
    }


def _execute(cfg: ExperimentConfig, out: Path, todo: list[Job], progress: bool | None,
             options: dict | None = None) -> dict:
    own_dir(out / "runs")                  # a linked runs/ folder is refused: the runs stay inside
    show = progress is not False
    results: list[dict] = []
    pending, unverified = [], []
    for job in todo:
        try:
            if not verified_complete(out, job, todo, options):
                pending.append(job)
        except RunError as exc:             # says complete, but is not this job's whole run
            unverified.append(_result(job, 0.0, exc))
    skipped = len(todo) - len(pending) - len(unverified)
    if show and skipped:
        _say(f"sweep: {skipped} of {len(todo)} runs already complete (verified), {len(pending)} to run")
    report = _reporter(show, len(pending) + len(unverified), results)
    for result in unverified:
        report(result)
    backend = _run_ray if cfg.run.backend == "ray" else _run_local
    # forks start from their first-condition run's snapshot: those runs first, then the forks
    for phase in ([j for j in pending if j.fork_from is None], [j for j in pending if j.fork_from is not None]):
        if phase:
            backend(cfg, out, phase, report, dict(options or {}))
    failed = [r for r in results if r["error"] is not None]
    path = aggregate(out)
    if failed:
        lines = "; ".join(f"{r['job']}: {r['error']}" for r in failed)
        rest = f"the other {len(todo) - len(failed)} are complete and aggregated in {path}; " \
            if len(failed) < len(todo) else ""
        raise RunError(f"{len(failed)} of {len(todo)} sweep jobs failed: {lines}; {rest}"
                       f"fix the cause and run `socialgym resume {out}`")
    problems = [f"{j.name}: {p}" for j in todo for p in (Run(out / j.out).summary or {})
                .get("problems", [])]
    return {"jobs": len(todo), "ran": len(pending), "skipped": skipped, "failed": [], "aggregate": str(path),
            "problems": problems}


def _reporter(show: bool, total: int, results: list) -> Callable[[dict], None]:
    def report(result: dict) -> None:
        results.append(result)
        if show:
            status = f"FAILED: {result['error']}" if result["error"] is not None else \
                "done" if result.get("status") in (None, "complete") else f"stopped ({result['status']})"
            _say(f"[{len(results)}/{total}] {result['job']} {status} ({result['seconds']:.1f} s)")
    return report


def _say(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def _workers(cfg: ExperimentConfig) -> int:
    return cfg.run.workers or os.cpu_count() or 1


def _run_local(cfg: ExperimentConfig, out: Path, pending: list[Job], report, options: dict) -> None:
    import concurrent.futures as cf
    import multiprocessing

    workers = min(_workers(cfg), len(pending))
    context = multiprocessing.get_context("spawn")
    with cf.ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        futures = {pool.submit(run_job, job, str(out), options): job for job in pending}
        for future in cf.as_completed(futures):
            job = futures[future]
            try:
                report(future.result())
            except Exception as exc:            # the worker process died (e.g. killed, OOM)
                report(_result(job, 0.0, exc))


def _run_ray(cfg: ExperimentConfig, out: Path, pending: list[Job], report, options: dict) -> None:
    try:
        import ray
    except ImportError:
        raise RunError("run.backend: ray needs Ray: pip install 'socialgym[ray]'") from None
    workers = _workers(cfg)
    started = not ray.is_initialized()
    if started:
        if cfg.run.address:
            ray.init(address=cfg.run.address, log_to_driver=False)
        else:
            ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
    try:
        task = ray.remote(num_cpus=1, max_retries=0)(run_job)
        queue = list(pending)
        running: dict = {}
        while queue or running:
            while queue and len(running) < workers:     # at most `workers` tasks in flight
                job = queue.pop(0)
                running[task.remote(job, str(out), options)] = job
            done, _ = ray.wait(list(running), num_returns=1)
            for ref in done:
                job = running.pop(ref)
                try:
                    report(ray.get(ref))
                except Exception as exc:        # the task's worker died
                    report(_result(job, 0.0, exc))
    finally:
        if started:
            ray.shutdown()


def run_job(job: Job, root: str, options: dict | None = None) -> dict:
    """Run (or resume, or skip when complete) one job; never raises: errors come back as text.
    Module-level so that process pools and Ray can pickle it."""
    t0 = time.perf_counter()
    path = Path(root) / job.out
    try:
        if not _complete(path):
            if was_started(path):
                resume_experiment(path, progress=False, **(options or {}))
            elif job.fork_from is not None:
                from socialgym.experiments.run.fork import fork_run
                base = Path(root) / job.fork_from
                if not _complete(base):
                    raise RunError(f"cannot fork from {job.fork_from}: that run is not complete")
                fork_run(base, job.config.run.fork_at, path, config=job.config, condition=job.condition,
                         replicate=job.replicate, trust=bool((options or {}).get("trust")), progress=False)
            else:
                run_experiment(job.config, path, condition=job.condition, replicate=job.replicate,
                               progress=False)
    except BaseException as exc:                 # noqa: BLE001 -- reported, the sweep goes on
        if isinstance(exc, KeyboardInterrupt):
            raise
        return _result(job, time.perf_counter() - t0, exc)
    return _result(job, time.perf_counter() - t0, None, (Run(path).summary or {}).get("status"))


def _result(job: Job, seconds: float, exc: BaseException | None, status: str | None = None) -> dict:
    error = None
    if exc is not None:
        text = " ".join(str(exc).split()) or "(no message)"
        error = f"{type(exc).__name__}: {text}"
    return {"job": job.name, "out": job.out, "seconds": seconds, "error": error, "status": status}


def verified_complete(root: Path, job: Job, todo: list[Job], options: dict | None = None) -> bool:
    """Whether the job's directory holds this job's complete run, verified before a sweep skips
    it: its summary says complete after all of the config's rounds, its run.json names the job's
    replicate and seed, its config is the one the job runs with (forks: the fork of the first
    condition's run; the llm, logging and run sections may differ), and its files are those its
    checkpoint recorded (``resume_experiment`` checks them). False for a run not complete; a
    :class:`RunError` saying what differs for a directory that claims to be complete but is not."""
    path = Path(root) / job.out
    if not _complete(path):
        return False
    run = Run(path)
    summary, info = run.summary or {}, run.info or {}
    max_rounds = int(job.config.env.get("max_rounds", FeedConfig.max_rounds))
    problems = []
    if summary.get("rounds_completed") != max_rounds:
        problems.append(f"{layout.SUMMARY} reports {summary.get('rounds_completed')!r} rounds, not {max_rounds}")
    if info.get("replicate") != job.replicate or info.get("seed") != job.seed:
        problems.append(f"{layout.RUN_INFO} names replicate {info.get('replicate')!r} and seed {info.get('seed')!r}, "
                        f"not {job.replicate} and {job.seed}")
    try:
        found = config_digest_of(load_config(path / layout.CONFIG))
    except (ConfigError, OSError) as exc:
        found = f"unreadable ({exc})"
    if found != config_digest_of(_expected_config(job, todo)):
        problems.append(f"its {layout.CONFIG} is not the sweep cell's config")
    if problems:
        raise RunError(f"{path} says complete but {'; '.join(problems)}: move it away and resume the sweep")
    resume_experiment(path, progress=False, **(options or {}))    # checks the files against the checkpoint
    return True


def config_digest_of(cfg: ExperimentConfig) -> str:
    """SHA-256 of what a config says about the run itself (not its llm, logging or run sections,
    which a resume may change: ``--allow-config-change``)."""
    data = {k: v for k, v in to_dict(cfg, redact=True).items() if k not in ("llm", "logging", "run")}
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


def _expected_config(job: Job, todo: list[Job]) -> ExperimentConfig:
    if job.fork_from is None:
        return job.config
    base = next(j for j in todo if j.out == job.fork_from)
    return fork_config(base.config, job.config, job.config.run.fork_at)[0]


def _complete(path: Path) -> bool:
    return (Run(path).summary or {}).get("status") == "complete"


# ---------------------------------------------------------------------------------- aggregate
@writes("report", "directory")
def aggregate(directory: str | Path) -> Path:
    """Mean and 95% t-interval across replicates of every per-round metric of every condition
    (complete runs only) into ``aggregate.csv``; comparison plots into ``plots/``."""
    out = Path(directory)
    manifest = read_sweep(out)
    if manifest is None:
        raise RunError(f"{out} is not a sweep directory (no {SWEEP_FILE})")
    keys = list(manifest.get("keys", []))
    conditions: dict[str, dict] = {}
    # values[condition_id][metric][round] -> one value per complete replicate
    values: dict[str, dict[str, dict[int, list[float]]]] = {}
    for job in manifest["jobs"]:
        cid = job["condition_id"]
        conditions.setdefault(cid, job["condition"])
        run = out / job["out"]
        if not _complete(run):
            continue
        per_condition = values.setdefault(cid, {})
        for metric, series in run_metrics(run).items():
            for r, v in series.items():
                per_condition.setdefault(metric, {}).setdefault(r, []).append(v)
    rows = []
    for cid, cond in conditions.items():
        for metric, by_round in values.get(cid, {}).items():
            for r in sorted(by_round):
                mean, low, high, n = mean_ci(by_round[r])
                rows.append([cid, *(_compact(cond.get(k)) for k in keys), r, metric, mean, low, high, n])
    path = out / AGGREGATE_FILE
    write_csv(path, ["condition_id", *keys, "round", "metric", "mean", "ci_low", "ci_high", "n"], rows)
    if values:
        _plots(out / "plots", values)
    if any(job.get("fork_from") for job in manifest["jobs"]) and len(values) > 1:
        compare_sweep(out)                 # forks: each condition paired with the first
    _index(out, manifest)
    return path


def _index(out: Path, manifest: dict) -> None:
    """index.html: every run of the sweep with its status and links to its report and viewer."""
    import html

    rows = []
    for job in manifest.get("jobs", []):
        run = out / job["out"]
        status = (Run(run).summary or {}).get("status", "not started")
        links = " ".join(f'<a href="{html.escape(job["out"])}/{name}">{label}</a>'
                         for name, label in ((layout.REPORT, "report"), (layout.VIEWER, "viewer"))
                         if (run / name).is_file())
        rows.append(f"<tr><td>{html.escape(str(job['condition_id']))}</td><td>{int(job['replicate'])}</td>"
                    f"<td>{html.escape(str(status))}</td><td>{links}</td></tr>")
    page = ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">"
            f"<title>socialgym sweep: {html.escape(out.resolve().name)}</title>"
            "<style>body{font-family:system-ui,sans-serif;margin:2em}td,th{border:1px solid #ccc;padding:.2em .6em}"
            "table{border-collapse:collapse}</style></head><body>"
            f"<h1>Sweep {html.escape(out.resolve().name)}</h1><p>{len(rows)} runs; the comparison across conditions "
            f"is in {AGGREGATE_FILE} and plots/.</p><table><tr><th>condition</th><th>replicate</th><th>status</th>"
            f"<th>pages</th></tr>{''.join(rows)}</table></body></html>\n")
    atomic_write(out / layout.SWEEP_INDEX, page)


@writes("compare", "directory")
def compare_sweep(directory: str | Path) -> list[dict]:
    """Every condition of the sweep in ``directory`` against its first condition."""
    root = Path(directory)
    manifest = read_sweep(root)
    if not isinstance(manifest, dict):
        raise RunError(f"{root} is not a sweep directory (no {SWEEP_FILE})")
    conditions = list(dict.fromkeys(job["condition_id"] for job in manifest.get("jobs", [])))
    if len(conditions) < 2:
        raise RunError(f"{root} has {len(conditions)} condition(s): nothing to compare")
    control = conditions[0]
    results = []
    for cid in conditions[1:]:
        try:
            results.append(compare(root / "runs" / control, root / "runs" / cid, own_dir(root / "compare") / f"{cid}.csv"))
        except RunError as exc:                 # e.g. every run of the condition failed: the others still
            _say(f"sweep: no comparison of {cid} with {control}: {exc}")    # compare, the failure is reported
    return results


def _plots(folder: Path, values: dict) -> None:
    from matplotlib.ticker import MaxNLocator

    from socialgym.experiments.analysis.plotting import figure, save

    own_dir(folder)
    panels = {
        "compare_total.png": ("total",),
        "compare_rewards.png": REWARD_NAMES,
        "compare_network.png": NETWORK_PLOT_METRICS,
    }
    for name, metrics in panels.items():
        cols = min(3, len(metrics))
        rows = math.ceil(len(metrics) / cols)
        fig = figure(5 * cols, 3.6 * rows, layout=None)
        axes = fig.subplots(rows, cols, squeeze=False)
        for ax, metric in zip(axes.flat, metrics):
            for cid, per_condition in values.items():
                by_round = per_condition.get(metric, {})
                if not by_round:
                    continue
                rounds = sorted(by_round)
                stats = np.array([mean_ci(by_round[r])[:3] for r in rounds], dtype=float)
                (line,) = ax.plot(rounds, stats[:, 0], marker=".", label=cid)
                ax.fill_between(rounds, stats[:, 1], stats[:, 2], color=line.get_color(), alpha=0.2)
            ax.set_title(metric)
            ax.set_xlabel("round")
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.grid(alpha=0.3)
        for ax in list(axes.flat)[len(metrics):]:
            ax.set_visible(False)
        handles, labels = axes.flat[0].get_legend_handles_labels()
        if handles:
            fig.legend(handles, labels, loc="lower center", ncol=min(3, len(labels)), fontsize="small",
                       frameon=False)
        fig.suptitle("mean across replicates, 95% CI")
        fig.tight_layout(rect=(0, 0.06 + 0.03 * math.ceil(len(labels) / 3), 1, 1))
        save(fig, folder / name)


__all__ = ["Job", "jobs", "condition_id", "run_sweep", "resume_sweep", "aggregate", "run_job", "compare_sweep"]
