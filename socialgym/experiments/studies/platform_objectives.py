"""``socialgym study platform-objectives``: what a ranking trained for engagement, welfare or bridging
does to a population that talks, votes and forms ties.

PPO (``socialgym.training.platform_ppo``) is trained on the platform task of each objective,
``TRAIN_SEEDS`` training seeds each (the independent run is the training seed); every trained
ranker and every hand-written one (:data:`HAND_RANKERS`) is then played on the held-out episode
seeds :data:`EVAL_SEEDS` and measured on every metric (:data:`METRICS`, per round, averaged over
the episode, then over the held-out episodes). Outputs in ``--out``: ``models/<objective>-seed<k>/``
(policy, curve; a finished model is reused, so the study resumes), ``results.json``,
``pareto.png`` (engagement against welfare) and ``summary.md``.

The claim tested (:data:`MILLI_RULE`, written before any data): Milli et al. (PNAS Nexus 2025)
found that ranking by engagement amplified hostile content relative to ranking by what users
said they wanted. Here "what users want" is their own reward (welfare). The result holds only
under the user model of the platform tasks (``socialgym.envs.platform.users``): hostile replies
to the other group and the pull of provoking items are rules of that model.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from socialgym.config import RECOMMENDER_NAMES
from socialgym.training.platform_ppo import Args, train
from socialgym.recommenders.learned import PlatformPolicy
from socialgym.envs.platform.env import PlatformEnv
from socialgym.experiments.studies import evidence as ev

OBJECTIVES = ("engagement", "welfare", "bridging")
ALL_OBJECTIVES = ("engagement", "welfare", "diversity", "bridging", "negativity")
HAND_RANKERS = tuple(n for n in RECOMMENDER_NAMES if n not in ("hybrid", "learned"))
"""Every registered ranker but the blend of others and the trained one."""
METRICS = ("engagement", "welfare", "diversity", "bridging", "negativity_share", "topic_entropy",
           "deep_cocoon_share", "cross_cutting_exposure", "polarisation")
TRAIN_SEEDS = 5
EVAL_SEEDS = tuple(range(1_000_000, 1_000_010))
"""Held-out episode seeds: training seed k plays episodes 10_000 k + 0, 1, ... (far below these)."""
ARGS = Args(iterations=150)
"""The PPO arguments of the study (the module's defaults but the number of updates)."""

MILLI_RULE = (
    "Primary measure: negativity share (the share of feed comments with negative sentiment), per trained "
    "ranker the mean over the held-out episodes. Unit: the training seed; pair k = the engagement- and the "
    "welfare-trained ranker of training seed k. Statistic: the mean over pairs of engagement − welfare, with "
    "its 95 % bootstrap interval (rules of evidence). Direction of Milli et al.: > 0. The interval above 0: "
    "supported; below 0: contradicted; across 0: inconclusive; fewer than 5 pairs: not tested at this scale."
)


def episode_metrics(env: PlatformEnv, act: Callable[[dict], Any], seed: int) -> dict[str, float]:
    """Play one episode from ``reset(seed)``; the per-round metrics averaged over its rounds."""
    obs, _ = env.reset(seed=seed)
    rows, done = [], False
    while not done:
        obs, _, _, done, info = env.step(act(obs))
        rows.append({**info["metrics"], "diversity": info["components"]["diversity"]})
    return {m: float(np.nanmean([r[m] for r in rows])) for m in METRICS}


def evaluate(make_env: Callable[[], PlatformEnv], act_for: Callable[[PlatformEnv], Callable],
             seeds: Sequence[int]) -> dict[str, float]:
    """Mean of :func:`episode_metrics` over the episodes of ``seeds``."""
    env = make_env()
    act = act_for(env)
    per = [episode_metrics(env, act, s) for s in seeds]
    return {m: float(np.mean([p[m] for p in per])) for m in METRICS}


def evaluate_hand(name: str, seeds: Sequence[int] = EVAL_SEEDS) -> dict[str, float]:
    return evaluate(lambda: PlatformEnv("engagement", ranker=name), lambda env: lambda obs: env.action_space.sample(),
                    seeds)


def evaluate_policy(policy: PlatformPolicy, objective: str, seeds: Sequence[int] = EVAL_SEEDS) -> dict[str, float]:
    def act_for(env):
        k = env.feed_env.config.feed_size
        return lambda obs: policy.act(obs, k)
    return evaluate(lambda: PlatformEnv(objective, action_form="scores"), act_for, seeds)


def train_or_load(out: Path, objective: str, seed: int, args: Args = ARGS, log=print) -> tuple[PlatformPolicy, dict]:
    folder = out / "models" / f"{objective}-seed{seed}"
    if (folder / "policy.pt").is_file() and (folder / "done.json").is_file():
        return PlatformPolicy.load(folder / "policy.pt"), json.loads((folder / "done.json").read_text())
    start = time.perf_counter()
    policy, curve = train(replace(args, objective=objective, seed=seed, out=str(folder)), log=None)
    record = {"seconds": round(time.perf_counter() - start, 1), "final_return": curve[-1]["mean_return"]}
    (folder / "done.json").write_text(json.dumps(record))
    if log:
        log(f"trained {objective} seed {seed} in {record['seconds']} s")
    return policy, record


def _train_job(out: str, objective: str, seed: int, args: Args) -> dict:
    import torch
    torch.set_num_threads(1)
    return train_or_load(Path(out), objective, seed, args, log=None)[1]


def run_study(out: str | Path, objectives: Sequence[str] = OBJECTIVES, train_seeds: int = TRAIN_SEEDS,
              args: Args = ARGS, eval_seeds: Sequence[int] = EVAL_SEEDS, workers: int = 2, log=print) -> dict:
    """Train (``workers`` trainings at a time, one torch thread each; finished models are
    reused), evaluate, judge, draw; returns the results written to ``out/results.json``."""
    import concurrent.futures as cf
    import multiprocessing

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    jobs = [(objective, seed) for objective in objectives for seed in range(train_seeds)]
    with cf.ProcessPoolExecutor(max(1, workers), mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = {pool.submit(_train_job, str(out), o, s, args): (o, s) for o, s in jobs}
        for done in cf.as_completed(futures):
            record = done.result()
            if log:
                log(f"{futures[done][0]} seed {futures[done][1]}: trained ({record['seconds']} s)")
    hand = {name: evaluate_hand(name, eval_seeds) for name in HAND_RANKERS}
    trained: dict[str, list[dict]] = {}
    training: dict[str, list[dict]] = {}
    for objective, seed in jobs:
        policy, record = train_or_load(out, objective, seed, args, log)
        trained.setdefault(objective, []).append(evaluate_policy(policy, objective, eval_seeds))
        training.setdefault(objective, []).append(record)
    results = {"hand": hand, "ppo": trained, "training": training, "eval_seeds": list(eval_seeds),
               "train_seeds": train_seeds, "ppo_args": {**vars(args)}, "milli": milli_verdict(trained),
               "seconds": round(time.perf_counter() - start, 1)}
    (out / "results.json").write_text(json.dumps(results, indent=1))
    try:
        pareto_figure(results, out / "pareto.png")
    except ImportError:                       # the figure needs the plot extra; the results stand without it
        if log:
            log("matplotlib is not installed (pip install 'socialgym[plot]'): no pareto.png")
    (out / "summary.md").write_text(summary_markdown(results))
    return results


def milli_verdict(trained: dict[str, list[dict]]) -> dict:
    """:data:`MILLI_RULE` applied to the trained rankers' evaluations."""
    if "engagement" not in trained or "welfare" not in trained:
        return {"verdict": "not run", "rule": MILLI_RULE}
    e = [r["negativity_share"] for r in trained["engagement"]]
    w = [r["negativity_share"] for r in trained["welfare"]]
    n = min(len(e), len(w))
    interval = ev.paired_difference(e[:n], w[:n])
    verdict = ev.direction(interval, +1) if n >= ev.MIN_RUNS else ev.NOT_TESTED
    return {"verdict": verdict, "rule": MILLI_RULE, "mean": interval.mean, "lo": interval.lo, "hi": interval.hi,
            "n": interval.n, "negativity_engagement": e[:n], "negativity_welfare": w[:n], "text": interval.text(3)}


def pareto_front(points: dict[str, tuple[float, float]]) -> list[str]:
    """Names of the points no other point beats on both coordinates (higher is better)."""
    front = []
    for name, (x, y) in points.items():
        if not any((x2 >= x and y2 >= y and (x2 > x or y2 > y)) for other, (x2, y2) in points.items() if other != name):
            front.append(name)
    return sorted(front, key=lambda k: points[k][0])


def ranker_points(results: dict) -> dict[str, tuple[float, float]]:
    points = {name: (r["engagement"], r["welfare"]) for name, r in results["hand"].items()}
    for objective, runs in results["ppo"].items():
        points[f"PPO ({objective})"] = (float(np.mean([r["engagement"] for r in runs])),
                                        float(np.mean([r["welfare"] for r in runs])))
    return points


def pareto_figure(results: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = ranker_points(results)
    front = pareto_front(points)
    fig, ax = plt.subplots(figsize=(6.4, 4.6))
    for objective, runs in results["ppo"].items():
        ax.scatter([r["engagement"] for r in runs], [r["welfare"] for r in runs], s=12, alpha=0.4)
    for name, (x, y) in points.items():
        ax.scatter([x], [y], marker="o" if name.startswith("PPO") else "s", color="k" if name in front else "grey")
        ax.annotate(name, (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7)
    fx, fy = zip(*(points[n] for n in front))
    ax.plot(fx, fy, "k--", linewidth=0.8, label="Pareto front")
    ax.set_xlabel("engagement (feed comments per impression, per round)")
    ax.set_ylabel("welfare (mean user reward per round)")
    ax.set_title("Rankers on the platform tasks (held-out episodes)")
    ax.legend(loc="lower left", fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def summary_markdown(results: dict) -> str:
    header = "| ranker | " + " | ".join(METRICS) + " |"
    lines = [header, "|---|" + "---:|" * len(METRICS)]
    for name, r in results["hand"].items():
        lines.append(f"| {name} | " + " | ".join(f"{r[m]:.3f}" for m in METRICS) + " |")
    for objective, runs in results["ppo"].items():
        cells = [f"{np.mean([r[m] for r in runs]):.3f} ± {np.std([r[m] for r in runs]):.3f}" for m in METRICS]
        lines.append(f"| PPO ({objective}), {len(runs)} seeds | " + " | ".join(cells) + " |")
    m = results["milli"]
    lines += ["", f"Milli et al.'s direction (negativity share, engagement − welfare PPO): {m.get('text', '—')}: "
                  f"**{m['verdict']}**, under the platform tasks' scripted user model.", "", f"Rule: {m['rule']}"]
    return "\n".join(lines) + "\n"


def milli_rows(summary: dict | None) -> list:
    """The reproduction page's row for Milli et al., judged by :data:`MILLI_RULE` and gated by the
    rules of evidence (at least 5 training-seed pairs)."""
    from socialgym.experiments.studies import reproduction_table as table

    claim = table.Claim(
        "Milli et al. (PNAS Nexus 2025)", "ranking by engagement amplifies hostile content relative to ranking by "
        "what users want", "direction only: engagement ranking > stated-preference ranking", "arXiv 2305.16941",
        ev.Design())
    command = "socialgym study platform-objectives --out runs/platform"
    if summary is None:
        return [table.not_run(claim.paper, claim.claim, claim.paper_value, claim.where, command)]
    m = summary["milli"]
    if "mean" not in m:                                     # the study ran without both arms
        return [table.not_run(claim.paper, claim.claim, claim.paper_value, claim.where, command)]
    interval = ev.Interval(m["mean"], m["lo"], m["hi"], m["n"])
    row = table.row(claim, summary, f"negativity share, PPO(engagement) − PPO(welfare): {table.fmt(interval)}",
                    interval, +1)
    note = "under the platform tasks' scripted user model: hostile replies to the other group are a rule of it"
    return [replace(row, population=f"{row.population}: {note}")]
