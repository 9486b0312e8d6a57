"""Baseline scores of every registered task (socialgym/tasks.py), written into docs/tasks.md.

    .venv/bin/python benchmarks/tasks.py                      # both sizes, 10 episodes, seeds 10000..10009
    .venv/bin/python benchmarks/tasks.py --sizes small --episodes 5 --no-docs

Per task and policy (random, greedy): one fresh policy plays ``--episodes`` episodes on the
held-out seeds ``--seed .. --seed+episodes-1`` (the evaluation seeds of
``socialgym.baselines.evaluate``; training uses others), through
``socialgym.baselines.evaluate.play``. An agent's episode return is its λ-weighted total summed
over rounds, with the episode's λ (one-hot for a single-reward task, the reset's draw for
``mixed``); the mean over agents is one sample per episode, and the table gives the mean over
episodes with a 95 % t-interval. Writes ``benchmarks/results_tasks.json`` and the sections
``tasks-sizes`` and ``tasks-baselines`` of ``docs/tasks.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _docs import write_section  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results_tasks.json"
POLICIES = ("random", "greedy")
LATER = ("PPO", "LLM")        # columns filled by later work


def make_policy(name: str, seed: int):
    from socialgym.baselines import GreedyPolicy, RandomPolicy

    return {"random": RandomPolicy, "greedy": GreedyPolicy}[name](seed=seed)


def measure(task_id: str, policy: str, episodes: int, seed: int) -> dict:
    """Mean episode return per agent (and per component) of ``policy`` on ``task_id``."""
    import socialgym
    from socialgym.baselines.evaluate import _t95, play
    from socialgym.config import REWARD_NAMES

    env = socialgym.make(task_id)             # structured observations: what greedy reads
    agent = make_policy(policy, seed)
    returns, comps = [], []
    start = time.perf_counter()
    for e in range(episodes):
        c = play(env, agent, seed + e)        # (n, 5), summed over rounds; resets with the seed
        returns.append(float((c * env.lambdas).sum(1).mean()))
        comps.append(c.mean(0))
    seconds = time.perf_counter() - start
    r = np.array(returns)
    half = _t95(len(r)) * r.std(ddof=1) / np.sqrt(len(r)) if len(r) > 1 else float("nan")
    return {"task": task_id, "policy": policy, "episodes": episodes, "seeds": [seed, seed + episodes - 1],
            "return_mean": float(r.mean()), "return_ci95": float(half), "returns": returns,
            **{f"{k}_mean": float(v) for k, v in zip(REWARD_NAMES, np.mean(comps, axis=0))},
            "seconds": round(seconds, 2)}


# ---------------------------------------------------------------------------- markdown
def sizes_markdown() -> str:
    """The size and objective tables, from socialgym.tasks (not written by hand)."""
    from socialgym.config import REWARD_NAMES
    from socialgym.tasks import OBJECTIVES, SIZES, TASKS, task_id

    lines = ["| size | agents | N (actions per round) | rounds | feed | vote feed | DM inbox | recommender |",
             "|---|---:|---:|---:|---:|---:|---:|---|"]
    for size, c in SIZES.items():
        lines.append(f"| {size} | {c['n_agents']} | {c['n_actions']} | {c['max_rounds']} | {c['feed_size']} | "
                     f"{c['vote_feed_size']} | {c['dm_inbox_size']} | {c['recommender']} |")
    lines += ["", "| objective | " + " | ".join(f"{s} id" for s in SIZES) + " | λ (" + ", ".join(REWARD_NAMES) + ") |",
              "|---|" + "---|" * len(SIZES) + "---|"]
    for objective in OBJECTIVES:
        task = TASKS[task_id(objective)]
        lam = task.config.get("lambdas")
        weights = ("flat Dirichlet per agent, redrawn at every reset from its seed" if task.redraws_lambdas
                   else "(" + ", ".join(f"{w:g}" for w in lam) + ")")
        lines.append(f"| {objective} | " + " | ".join(f"`{task_id(objective, s)}`" for s in SIZES)
                     + f" | {weights} |")
    return "\n".join(lines)


def baselines_markdown(data: dict) -> str:
    meta = data["meta"]
    by = {(r["task"], r["policy"]): r for r in data["results"]}
    tasks = list(dict.fromkeys(r["task"] for r in data["results"]))
    lines = ["| task | " + " | ".join(POLICIES) + " | " + " | ".join(LATER) + " |",
             "|---|" + "---:|" * len(POLICIES) + "---|" * len(LATER)]
    for t in tasks:
        cells = [f"{by[t, p]['return_mean']:.3f} ± {by[t, p]['return_ci95']:.3f}" for p in POLICIES]
        lines.append(f"| `{t}` | " + " | ".join(cells) + " | " + " | ".join("not yet measured" for _ in LATER) + " |")
    lines += ["", f"Mean episode return per agent (λ-weighted total summed over rounds) ± the 95 % t-interval "
                  f"over {meta['episodes']} episodes on the held-out seeds {meta['seed']}–"
                  f"{meta['seed'] + meta['episodes'] - 1}; structured observations. Measured by "
                  f"`benchmarks/tasks.py` in {meta['seconds']:.0f} s on {meta['machine']} "
                  f"(raw numbers, per-component means and per-episode returns: `benchmarks/results_tasks.json`)."]
    flat = [f"{r['policy']} on `{r['task']}`" for r in data["results"] if r["return_ci95"] < 5e-4]
    if flat:
        lines += ["", f"± 0.000 ({', '.join(flat)}): the episodes' returns agree to three decimals — a population "
                      "of that policy acts (nearly) the same whatever the seed."]
    return "\n".join(lines)


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def main(argv: list[str] | None = None) -> int:
    from socialgym.tasks import SIZES, TASKS

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="+", default=list(SIZES), choices=list(SIZES))
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--seed", type=int, default=10_000, help="first held-out evaluation seed")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--no-docs", action="store_true", help="do not write docs/tasks.md")
    args = parser.parse_args(argv)
    if args.episodes < 2:
        parser.error("--episodes must be >= 2 (the interval needs two samples)")
    start = time.perf_counter()
    results = []
    for task in TASKS.values():
        if task.size not in args.sizes:
            continue
        for policy in POLICIES:
            row = measure(task.id, policy, args.episodes, args.seed)
            results.append(row)
            print(f"{task.id:<34} {policy:<7} {row['return_mean']:8.3f} ± {row['return_ci95']:.3f}  "
                  f"({row['seconds']:.1f} s)", flush=True)
    seconds = time.perf_counter() - start
    data = {"meta": {"episodes": args.episodes, "seed": args.seed, "sizes": args.sizes,
                     "seconds": round(seconds, 1), "machine": f"{_cores()} CPU cores, {platform.machine()}",
                     "python": platform.python_version()},
            "sizes": {s: dict(SIZES[s]) for s in SIZES}, "results": results}
    args.out.write_text(json.dumps(data, indent=2) + "\n")
    print(f"{len(results)} runs in {seconds:.1f} s; wrote {args.out}")
    if not args.no_docs:
        write_section("tasks.md", "tasks-sizes", sizes_markdown())
        print(f"written to {write_section('tasks.md', 'tasks-baselines', baselines_markdown(data))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
