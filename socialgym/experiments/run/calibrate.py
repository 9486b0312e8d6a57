"""``socialgym calibrate CONFIG --targets FILE --out DIR``: fit the scripted population's
parameters to stylised facts by simulation-based search (Optuna's TPE sampler).

Each trial draws a parameter set for the config's ``social_users`` agents, runs the config on
``seeds`` seeds (the trial seeds 0, 1, ...), scores the runs with the realism scorecard and
returns the sum over the target facts of how far the mean lies outside its band, in band
widths (0 inside; an unmeasurable fact costs 1). The search state lives in ``DIR/search.log``
(an Optuna journal): the same command resumes it, and several worker processes share it.
When the trials are done (or the time is up), the config's own population ("before") and the
best one ("after") are scored on held-out seeds (``EVAL_SEED`` on), and the best parameters
are written as a named population set (``DIR/NAME.json``, loadable with ``population:``).

The targets file (YAML or JSON)::

    facts:                        # fact key -> [low, high], or "reference" for the scorecard's band
      posts_gini: reference
      reciprocity: [0.2, 0.4]
    params: [activity, p_dm]      # optional: the parameters searched (default: all tunable ones)
"""

from __future__ import annotations

import dataclasses
import json
import math
import shutil
import time
from pathlib import Path
from typing import Any, Mapping

from socialgym.experiments.analysis.realism import (FactScore, Scorecard, json_number, scorecard,
                                                    write_scorecard)
from socialgym.experiments.analysis.realism_facts import FACTS, in_band
from socialgym.experiments.analysis.statistics import band_distance_in_widths
from socialgym.experiments.define.loading import load_config
from socialgym.experiments.define.schema import ConfigError, ExperimentConfig, to_dict
from socialgym.rundir import layout
from socialgym.rundir.lock import writer_lock
from socialgym.platform.validation import show
from socialgym.rundir.files import atomic_write, own_dir, own_file, read_json, write_json

KIND = "social_users"
EVAL_SEED = 1_000_000
"""Before / after scorecards use seeds EVAL_SEED, EVAL_SEED + 1, ...: never a trial's seed."""
STUDY_NAME = "socialgym-calibration"
SEARCH_LOG, RESULT_JSON, RESULT_MD = layout.SEARCH_LOG, layout.CALIBRATION_JSON, layout.CALIBRATION_MD
MAX_TRIALS, MAX_SEEDS = 100_000, 1_000
"""Upper bounds of --trials and of --seeds / --eval-seeds (runs per trial, held-out runs)."""
MAX_BAND = 1e12
"""A band's ends are facts' values (shares, exponents, coefficients): anything larger is a typo,
and a 400-digit integer would overflow the float it becomes."""
FACT_COST_CAP = 2.0
"""A fact costs at most this many band widths, and this much when it cannot be measured (a
missing fact is no better than a far one, and one far fact does not drown the others)."""


@dataclasses.dataclass(frozen=True)
class Targets:
    bands: dict[str, tuple[float, float]]
    params: tuple[str, ...]


def read_targets(path: str | Path, tunable: Mapping[str, tuple]) -> Targets:
    """Parse a targets file; every problem is a ConfigError naming the key."""
    from socialgym.experiments.define.loading import read_yaml_file

    path = Path(path)
    try:
        raw = read_yaml_file(path, "targets")
    except ConfigError as exc:
        raise ConfigError(f"targets: {exc}") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("facts"), dict) or not raw["facts"]:
        raise ConfigError(f"targets: {path} must hold a mapping with a non-empty 'facts' mapping (fact -> band)")
    unknown = sorted(set(raw) - {"facts", "params"})
    if unknown:
        raise ConfigError(f"targets: unknown key {unknown[0]!r} (allowed: facts, params)")
    known = {f.key: f for f in FACTS}
    bands: dict[str, tuple[float, float]] = {}
    for key, band in raw["facts"].items():
        if key not in known:
            raise ConfigError(f"targets.facts: unknown fact {key!r}; the facts are {', '.join(known)}")
        if band == "reference":
            bands[key] = known[key].band
            continue
        ok = isinstance(band, (list, tuple)) and len(band) == 2 and all(
            isinstance(b, (int, float)) and not isinstance(b, bool) and abs(b) <= MAX_BAND for b in band)
        if not ok or band[0] > band[1]:
            raise ConfigError(f"targets.facts.{key} must be \"reference\" or [low, high] with low <= high, both "
                              f"finite numbers within ±{MAX_BAND:g}, got {show(band, 80)}")
        lo, hi = known[key].domain
        if band[1] < lo or band[0] > hi:
            raise ConfigError(f"targets.facts.{key}: [{band[0]:g}, {band[1]:g}] lies outside the values {key} can "
                              f"take ({lo:g} - {hi:g}); no run could pass it")
        bands[key] = (float(band[0]), float(band[1]))
    params = raw.get("params", list(tunable))
    if not isinstance(params, list) or not params or not all(isinstance(p, str) for p in params):
        raise ConfigError("targets.params must be a non-empty list of parameter names")
    for p in params:
        if p not in tunable:
            raise ConfigError(f"targets.params: {p!r} is not tunable; the tunable parameters are {', '.join(tunable)}")
    return Targets(bands, tuple(dict.fromkeys(params)))


def objective_value(card: Scorecard, bands: Mapping[str, tuple[float, float]]) -> float:
    """Sum over the target facts of ``band_distance_in_widths`` of the mean, each capped at
    ``FACT_COST_CAP`` (which an unmeasurable fact costs too)."""
    total = 0.0
    for key, band in bands.items():
        d = band_distance_in_widths(card.score(key).mean, band)
        total += FACT_COST_CAP if math.isnan(d) else min(d, FACT_COST_CAP)
    return total


# ---------------------------------------------------------------------------------- configs
def tuned_groups(cfg: ExperimentConfig) -> list[int]:
    """Indices of the policy groups with kind ``social_users`` (-1: the whole-policy form)."""
    if cfg.policy.groups:
        found = [i for i, g in enumerate(cfg.policy.groups) if g.kind == KIND]
    else:
        found = [-1] if cfg.policy.kind == KIND else []
    if not found:
        raise ConfigError(f"calibrate: the config has no {KIND} agents to calibrate (policy.kind or a group's kind)")
    return found


def with_params(cfg: ExperimentConfig, params: Mapping[str, Any], seed: int) -> ExperimentConfig:
    """The config with ``params`` set on every social_users group, the seed, and lean logging
    (no report, snapshots, checkpoint or wandb; network metrics once, at the end)."""
    raw = to_dict(cfg, redact=False)
    for i in tuned_groups(cfg):
        section = raw["policy"] if i < 0 else raw["policy"]["groups"][i]
        section["params"] = {**(section.get("params") or {}), **params}
    rounds = int(raw["env"].get("max_rounds", 15))
    raw["seed"] = int(seed)
    raw["logging"].update(report=False, wandb=None, transcripts=False, network_every=max(rounds, 1),
                          progress=False, events=True, ties=True)
    raw["run"].update(snapshots=False, checkpoint=False, replicates=1)
    raw["sweep"] = {}
    return load_config(raw)


def score_params(cfg: ExperimentConfig, params: Mapping[str, Any], seeds: list[int], work: Path,
                 keys: Any = None) -> Scorecard:
    """Run the config with ``params`` on each seed (in ``work``, removed afterwards) and score
    the facts ``keys`` (all when None)."""
    from socialgym.experiments.run.runner import run_experiment

    dirs = []
    try:
        own_dir(work)
        for seed in seeds:
            out = work / f"seed_{seed}"
            shutil.rmtree(out, ignore_errors=True)
            run_experiment(with_params(cfg, params, seed), out, progress=False)
            dirs.append(out)
        return scorecard(dirs, [f for f in FACTS if keys is None or f.key in keys])
    finally:
        shutil.rmtree(work, ignore_errors=True)


# ---------------------------------------------------------------------------------- the search
def search_space(cfg: ExperimentConfig, tunable: Mapping[str, tuple], names: tuple[str, ...]) -> dict[str, tuple]:
    """The ranges searched: ``tunable``'s, with ``interests_per_agent`` at most the number of the
    config's topics (a larger value is invalid there)."""
    from socialgym.config import FeedConfig

    space = {name: tunable[name] for name in names}
    if "interests_per_agent" in space:
        low, high, log = space["interests_per_agent"]
        n_topics = len(cfg.env.get("topics") or FeedConfig.topics)
        space["interests_per_agent"] = (low, max(low, min(high, n_topics)), log)
    return space


def suggest(trial, space: Mapping[str, tuple]) -> dict[str, Any]:
    """One parameter set: integers where both ends of the range are integers."""
    out: dict[str, Any] = {}
    for name, (low, high, log) in space.items():
        if isinstance(low, int) and isinstance(high, int):
            out[name] = trial.suggest_int(name, low, high, log=bool(log))
        else:
            out[name] = trial.suggest_float(name, float(low), float(high), log=bool(log))
    return out


def _storage(out: Path):
    import optuna
    from optuna.storages.journal import JournalFileBackend

    return optuna.storages.JournalStorage(JournalFileBackend(str(out / SEARCH_LOG)))


def _study(out: Path, seed: int, worker: int = 0):
    """The search, created or loaded. The sampler's seed moves on with the trials already in the
    journal, so a resumed search does not draw its first random trials again."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = _storage(out)
    study = optuna.create_study(study_name=STUDY_NAME, storage=storage, direction="minimize", load_if_exists=True)
    done = len(study.get_trials(deepcopy=False))
    study.sampler = optuna.samplers.TPESampler(seed=seed + worker + 7919 * done, multivariate=True,
                                               constant_liar=True, n_startup_trials=10)
    return study


def _done(study) -> int:
    from optuna.trial import TrialState
    return sum(t.state == TrialState.COMPLETE for t in study.get_trials(deepcopy=False))


def _worker(config_path: str, overrides: tuple[str, ...], bands: dict, names: tuple[str, ...], out: str,
            seeds: int, trials: int, deadline: float, seed: int, worker: int) -> None:
    """One search process: trials until ``trials`` are complete (all workers together) or the
    deadline (a wall-clock time) passes; a progress line per trial."""
    from optuna.study import MaxTrialsCallback
    from optuna.trial import TrialState

    from socialgym.baselines.social_users import SocialUsers

    cfg = load_config(config_path, list(overrides))
    out_path = Path(out)
    study = _study(out_path, seed, worker)
    space = search_space(cfg, SocialUsers.TUNABLE, names)

    def objective(trial) -> float:
        params = suggest(trial, space)
        start = time.monotonic()
        work = out_path / "trials" / f"trial_{trial.number:04d}"
        try:
            card = score_params(cfg, params, list(range(seeds)), work, keys=bands)
        except (ValueError, RuntimeError) as exc:     # a parameter set the run refuses: this trial fails
            print(f"calibrate: trial {trial.number} failed: {exc}", flush=True)
            raise RuntimeError(str(exc)) from None
        value = objective_value(card, bands)
        trial.set_user_attr("facts", {k: json_number(card.score(k).mean) for k in bands})
        best = min(value, _best_value(study))
        print(f"calibrate: trial {trial.number}: objective {value:.3f}, best so far {best:.3f}, "
              f"{time.monotonic() - start:.1f} s ({_done(study)} of {trials} trials complete before it)", flush=True)
        return value

    remaining = deadline - time.time()
    if remaining <= 0 or _done(study) >= trials:
        return
    study.optimize(objective, n_trials=trials, timeout=remaining,
                   callbacks=[MaxTrialsCallback(trials, states=(TrialState.COMPLETE,))], catch=(RuntimeError,))


def _best_value(study) -> float:
    try:
        return float(study.best_value)
    except ValueError:                       # no complete trial yet
        return math.inf


def _check_journal(path: Path) -> None:
    """ValueError unless ``path`` (when it exists) is an Optuna journal: UTF-8 lines, each ended
    and each a JSON object with an ``op_code``."""
    if not path.is_file():
        return
    for number, line in enumerate(path.read_bytes().decode("utf-8").splitlines(keepends=True), 1):
        entry = json.loads(line) if line.endswith("\n") else None
        if not isinstance(entry, dict) or "op_code" not in entry:
            raise ValueError(f"line {number} is not a journal entry")


def _fail_stale(study) -> None:
    """Trials left RUNNING by an interrupted search are marked failed, so a resume goes on."""
    from optuna.trial import TrialState
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        study.tell(t.number, state=TrialState.FAIL)


# ---------------------------------------------------------------------------------- the command
def calibrate(config: str | Path, targets: str | Path, out: str | Path, *, trials: int = 60, minutes: float = 25.0,
              seeds: int = 2, eval_seeds: int = 3, workers: int | None = None, name: str = "calibrated",
              seed: int = 0, overrides: tuple[str, ...] = ()) -> dict[str, Any]:
    """The whole calibration (see the module docstring); returns what ``calibration.json`` holds.
    ``minutes`` bounds this invocation's search (the before / after scoring comes on top)."""
    import os

    from socialgym.baselines.social_users import SocialUsers

    try:
        import optuna  # noqa: F401
        import powerlaw  # noqa: F401
    except ImportError:
        raise ConfigError("calibrate needs Optuna and powerlaw: pip install 'socialgym[realism]'") from None
    for label, value, high in (("trials", trials, MAX_TRIALS), ("seeds", seeds, MAX_SEEDS),
                               ("eval_seeds", eval_seeds, MAX_SEEDS), ("workers", 1 if workers is None else workers, 1024)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"calibrate: --{label.replace('_', '-')} must be a positive integer, got {value!r}")
        if value > high:
            raise ConfigError(f"calibrate: --{label.replace('_', '-')} {value} is more than {high:,}; each one is "
                              "whole runs")
    if not (isinstance(minutes, (int, float)) and math.isfinite(minutes) and minutes >= 0):
        raise ConfigError(f"calibrate: --minutes must be a number >= 0, got {minutes!r}")
    if not name or not all(c.isalnum() or c in "-_." for c in name) or name.startswith("."):
        raise ConfigError(f"calibrate: --name must be letters, digits, '-', '_' or '.', got {name!r}")
    if f"{name}.json" in (layout.SEARCH_KEY, RESULT_JSON):
        raise ConfigError(f"calibrate: --name {name} would write the population over {name}.json, a file of the "
                          "search's own; choose another name")
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**32:
        raise ConfigError(f"calibrate: --seed must be an integer in 0..{2**32 - 1}, got {seed!r}")
    cfg = load_config(config, list(overrides))
    tuned_groups(cfg)
    _config_params(cfg)                       # a population set of these parameters can be written
    goal = read_targets(targets, SocialUsers.TUNABLE)
    out = own_dir(Path(out))
    with writer_lock(out, "calibrate"):      # one search per directory: a second would fail the first's trials
        _check_same_search(out, config, targets, overrides, goal, seeds)
        own_file(out / SEARCH_LOG)            # Optuna appends to it in place
        own_dir(out / "trials")
        try:
            _check_journal(out / SEARCH_LOG)       # before Optuna, which appends to a journal it then cannot read
            study = _study(out, seed)
            _fail_stale(study)
        except (ValueError, AssertionError, KeyError, TypeError) as exc:   # a damaged journal
            raise ConfigError(f"calibrate: {out / SEARCH_LOG} is damaged and cannot be resumed "
                              f"({type(exc).__name__}); give a new --out, or delete that directory to start over") \
                from None
        n_workers = max(1, min(int(workers or os.cpu_count() or 1), trials))
        args = (str(config), tuple(overrides), goal.bands, goal.params, str(out), seeds, trials,
                time.time() + 60.0 * minutes, seed)
        started = time.monotonic()
        if n_workers == 1:
            _worker(*args, 0)
        else:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            with ProcessPoolExecutor(n_workers, mp_context=multiprocessing.get_context("spawn")) as pool:
                for future in [pool.submit(_worker, *args, w) for w in range(n_workers)]:
                    future.result()
        search_seconds = time.monotonic() - started
        return _finish(cfg, goal, out, study, name, eval_seeds, search_seconds)


def _check_same_search(out: Path, config, targets, overrides, goal: Targets, seeds: int) -> None:
    """A resumed search must keep its config, overrides, targets, parameters and seeds per trial
    (else the journal mixes two searches). The config and overrides are kept as digests: they may
    hold a key."""
    import hashlib

    def digest(text: str) -> str:
        return hashlib.sha256(text.encode("utf-8")).hexdigest()
    key = {"config_sha256": digest(Path(config).read_text(encoding="utf-8")),
           "overrides_sha256": digest("\n".join(overrides)), "seeds": seeds,
           "bands": {k: list(v) for k, v in goal.bands.items()}, "params": list(goal.params)}
    marker = out / layout.SEARCH_KEY
    if marker.is_file():
        held = read_json(marker, None, errors="replace")
        if not isinstance(held, dict):
            raise ConfigError(f"calibrate: {marker} is damaged (not the JSON object calibrate wrote); give a new "
                              "--out, or delete that directory to start the search over")
        if held != key:
            raise ConfigError(f"calibrate: {out} holds a search with another config, targets, parameters or "
                              "--seeds; give a new --out (or the same ones to resume)")
    else:
        write_json(marker, key)


def _finish(cfg, goal: Targets, out: Path, study, name: str, eval_seeds: int, search_seconds: float) -> dict:
    from socialgym.baselines.social_users import population_document

    from optuna.trial import TrialState
    complete = [t for t in study.get_trials(deepcopy=False) if t.state == TrialState.COMPLETE]
    if not complete:
        raise ConfigError("calibrate: no trial completed (give more --minutes)")
    best = min(complete, key=lambda t: t.value)
    held_out = list(range(EVAL_SEED, EVAL_SEED + eval_seeds))
    before = score_params(cfg, {}, held_out, out / "eval_before")
    after = score_params(cfg, best.params, held_out, out / "eval_after")
    write_scorecard(before, out / "before")
    write_scorecard(after, out / "after")
    params = {**_config_params(cfg), **best.params}
    population = out / f"{name}.json"
    atomic_write(population, population_document(name, params, meta={
        "objective": best.value, "trial": best.number, "trials_complete": len(complete), "targets": goal.bands}))
    rows = [_row(key, band, before.score(key), after.score(key)) for key, band in goal.bands.items()]
    failing = [r for r in rows if r["before_verdict"] == "fail"]
    result = {"population": str(population), "params": params, "best_objective": best.value,
              "best_trial": best.number, "trials_complete": len(complete), "search_seconds": search_seconds,
              "eval_seeds": held_out, "facts": rows, "failing_before": len(failing),
              "fixed_after": sum(r["after_verdict"] == "pass" for r in failing)}
    write_json(out / RESULT_JSON, result)
    atomic_write(out / RESULT_MD, calibration_markdown(result))
    return result


def _config_params(cfg: ExperimentConfig) -> dict:
    """The first social_users group's behaviour parameters (a named ``population`` resolved; a
    seed is the run's, not the population's), checked as a population set."""
    from socialgym.baselines.social_users import check_population_params, load_population
    from socialgym.recommenders.params import ParamError

    i = tuned_groups(cfg)[0]
    params = dict(cfg.policy.params if i < 0 else cfg.policy.groups[i].params)
    source = params.pop("population", None)
    params.pop("seed", None)
    try:
        return check_population_params({**(load_population(source) if source else {}), **params})
    except (ParamError, ValueError) as exc:
        raise ConfigError(f"calibrate: the config's social_users parameters: {exc}") from None


def _row(key: str, band, before: FactScore, after: FactScore) -> dict:
    def verdict(s: FactScore) -> str:
        ok = in_band(s.mean, band)
        return "not measurable" if ok is None else ("pass" if ok else "fail")
    return {"fact": key, "band": list(band), "before": json_number(before.mean), "before_verdict": verdict(before),
            "after": json_number(after.mean), "after_verdict": verdict(after)}


def calibration_markdown(result: Mapping[str, Any]) -> str:
    """Before / after table of a calibration (calibration.md, docs/realism.md)."""
    def num(x) -> str:
        if isinstance(x, str):
            return "∞ (no heavy tail)" if x == "inf" else x
        return "–" if x is None else f"{x:.3g}"
    lines = ["| fact | target band | before | after |", "|---|---|---|---|"]
    for r in result["facts"]:
        lines.append(f"| {r['fact']} | {num(r['band'][0])} – {num(r['band'][1])} | {num(r['before'])} "
                     f"({r['before_verdict']}) | {num(r['after'])} ({r['after_verdict']}) |")
    lines += ["", f"Failing before: {result['failing_before']}; of these, within their band after: "
              f"{result['fixed_after']}. Best objective {result['best_objective']:.3f} (trial {result['best_trial']}, "
              f"{result['trials_complete']} trials complete, search {result['search_seconds'] / 60:.1f} min). "
              f"Scored on the held-out seeds {result['eval_seeds'][0]}–{result['eval_seeds'][-1]}."]
    return "\n".join(lines) + "\n"
