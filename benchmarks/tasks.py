"""Baseline scores of every registered task (socialgym/tasks.py), written into the docs.

    .venv/bin/python benchmarks/tasks.py --train              # train PPO per small task, then measure all
    .venv/bin/python benchmarks/tasks.py                      # measure with the models already in --models
    .venv/bin/python benchmarks/tasks.py --sizes small --episodes 5 --no-docs

Per task and policy (random, greedy, PPO): one fresh policy plays ``--episodes`` episodes on the
held-out seeds ``--seed .. --seed+episodes-1`` through ``socialgym.experiments.analysis.evaluate.evaluate``
(training uses seeds at or above 2**20, its in-training evaluation 20000...). An agent's
episode return is its λ-weighted total summed over rounds, with the episode's λ (one-hot for a
single-reward task, the reset's draw for ``mixed``); the mean over agents is one sample per
episode, and the table gives the mean over episodes with a 95 % t-interval.

PPO is trained on each *small* task with the default ``Args`` of socialgym/baselines/ppo.py,
PRE with more iterations (``ITERATIONS``), by ``--train`` (models in ``--models/<objective>/``);
a large task is played by the model of its small task (the per-agent interface is the same, so
the network acts at any population size).

Learnability (socialgym's own test of the core paper's claim 2): per single-reward task the
normalised gain (PPO − random) / (greedy − random) on the held-out seeds, and the first
iteration whose in-training evaluation (``eval_return``, validation seeds) reaches greedy's
score on the same validation seeds.

Transfer: each small task's PPO network also plays the task with ``--transfer-agents`` (50)
agents, beside random and greedy at that size.

Writes ``benchmarks/results_tasks.json``, the sections ``tasks-sizes``, ``tasks-baselines`` and
``tasks-transfer`` of docs/tasks.md, ``tasks-learnability`` of docs/reproduction.md, ``training-mixed`` of
docs/training.md and the mixed task's learning curve docs/images/ppo_mixed_curve.png.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _docs import DOCS, write_section  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results_tasks.json"
MODELS = Path("runs/tasks")
POLICIES = ("random", "greedy", "ppo")
LABELS = {"random": "random", "greedy": "greedy", "ppo": "PPO", "llm": "LLM"}


def make_policy(name: str, seed: int, model: Path | None = None, client=None):
    from socialgym.baselines import GreedyPolicy, RandomPolicy

    if name == "llm":                   # the embedded model, with the demo's compact prompts
        from socialgym.agents import LLMPolicy
        from socialgym.agents.demo import COMPACT_POLICY
        return LLMPolicy(client, **COMPACT_POLICY, seed=seed)
    if name == "ppo":
        from socialgym.baselines.torch_policy import TorchPolicy
        return TorchPolicy.load(model, seed=seed)
    return {"random": RandomPolicy, "greedy": GreedyPolicy}[name](seed=seed)


def measure(task_id: str, policy: str, episodes: int, seed: int, model: Path | None = None,
            overrides: dict | None = None, client=None) -> dict:
    """Mean episode return per agent (and per component) of ``policy`` on ``task_id`` (with
    FeedConfig ``overrides``, e.g. another population size)."""
    from socialgym.experiments.analysis.evaluate import evaluate
    from socialgym.config import REWARD_NAMES

    start = time.perf_counter()
    row = evaluate({policy: lambda: make_policy(policy, seed, model, client)}, task_id, overrides=overrides,
                   episodes=episodes, seed=seed)[0]
    return {"task": task_id, "policy": policy, "episodes": episodes, "seeds": [seed, seed + episodes - 1],
            "return_mean": row["total"], "return_ci95": row["total_ci95"], "returns": row["returns"],
            **{f"{k}_mean": row[k] for k in REWARD_NAMES}, "seconds": round(time.perf_counter() - start, 2),
            **({"model": str(model)} if model else {}), **({"overrides": overrides} if overrides else {})}


ITERATIONS = {"PRE": 1000}
"""Tasks trained longer than Args' default 500 iterations: PRE's validation return was still
rising at 500, just under greedy's, and passed it at about 800 (its train_log.csv has the curve)."""


def measure_llm(objectives: list[str], episodes: int, seed: int) -> list[dict]:
    """The LLM policy on the embedded model (one request at a time), per small task; each row
    also records the requests made and the share of LLM tasks that fell back."""
    from socialgym.experiments.run.runner import fallback_share
    from socialgym.llm import open_client
    from socialgym.tasks import task_id

    rows = []
    with open_client(None, max_concurrency=1) as client:
        for objective in objectives:
            before_calls, before_fallbacks = len(client.usage.calls), len(client.usage.fallbacks)
            row = measure(task_id(objective), "llm", episodes, seed, client=client)
            usage = type(client.usage)()
            usage.calls = client.usage.calls[before_calls:]
            usage.fallbacks = client.usage.fallbacks[before_fallbacks:]
            row.update({"requests": len(usage.calls), "fallback_share": fallback_share(usage)})
            rows.append(row)
            print(f"{task_id(objective):<34} llm     {row['return_mean']:8.3f} ± {row['return_ci95']:.3f}  "
                  f"({row['seconds']:.0f} s, {row['requests']} requests, fallback share "
                  f"{row['fallback_share']:.1%})", flush=True)
    return rows


def train_ppo(objective: str, models: Path, iterations: int | None) -> dict:
    """Train PPO on the small task of ``objective`` with the default Args (and ITERATIONS);
    returns its budget."""
    import dataclasses

    from socialgym.baselines import ppo

    args = ppo.Args(task=objective, out=str(models / objective))
    iterations = iterations or ITERATIONS.get(objective)
    if iterations:
        args = dataclasses.replace(args, iterations=iterations)
    print(f"training PPO on {objective}: {args.iterations} iterations x {args.num_envs} episodes", flush=True)
    ppo.train(args, progress=False)
    return budget(models / objective)


def budget(directory: Path) -> dict:
    """The training budget of a trained model, from its train_log.csv and args.json."""
    rows = read_log(directory)
    args = json.loads((directory / "args.json").read_text())
    last = rows[-1]
    return {"iterations": int(last["iteration"]), "episodes": int(last["episodes"]),
            "decisions": int(last["iteration"]) * int(last["decisions"]), "seconds": float(last["seconds"]),
            "args": args}


def read_log(directory: Path) -> list[dict]:
    with open(directory / "train_log.csv", newline="") as f:
        return list(csv.DictReader(f))


def iterations_to(rows: list[dict], target: float) -> dict | None:
    """The first logged evaluation at or above ``target``: its iteration and seconds. (The
    returns are float32 sums in training, float64 in evaluation: 1e-4 of slack.)"""
    for r in rows:
        value = float(r["eval_return"])
        if value == value and value >= target - 1e-4:
            return {"iteration": int(r["iteration"]), "seconds": float(r["seconds"])}
    return None


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


def _cell(row: dict | None) -> str:
    return "not measured" if row is None else f"{row['return_mean']:.3f} ± {row['return_ci95']:.3f}"


def baselines_markdown(data: dict) -> str:
    from socialgym.tasks import TASKS

    meta = data["meta"]
    by = {(r["task"], r["policy"]): r for r in data["results"]}
    tasks = list(dict.fromkeys(r["task"] for r in data["results"]))
    lines = ["| task | " + " | ".join(LABELS[p] for p in POLICIES) + " | LLM (embedded model) | PPO's training budget |",
             "|---|" + "---:|" * len(POLICIES) + "---:|---|"]
    for t in tasks:
        objective = TASKS[t].objective
        b = data.get("training", {}).get(objective)
        if b is None:
            spent = "not trained"
        else:
            spent = (f"{b['iterations']} iterations, {b['episodes']:,} episodes, {b['seconds'] / 60:.1f} min"
                     + ("" if TASKS[t].size == "small" else f" (the small task's model, at {TASKS[t].size} size)"))
        llm = by.get((t, "llm"))
        llm_cell = "not measured" if llm is None else f"{_cell(llm)} ({llm['episodes']} episodes)"
        lines.append(f"| `{t}` | " + " | ".join(_cell(by.get((t, p))) for p in POLICIES) + f" | {llm_cell} | {spent} |")
    lines += ["", f"Mean episode return per agent (λ-weighted total summed over rounds) ± the 95 % t-interval "
                  f"over {meta['episodes']} episodes on the held-out seeds {meta['seed']}–"
                  f"{meta['seed'] + meta['episodes'] - 1}. PPO samples its actions (its evaluation uses the "
                  f"same stochastic policy it was trained as). Measured by `benchmarks/tasks.py` in "
                  f"{meta['seconds']:.0f} s on {meta['machine']}, training excluded (raw numbers, per-component "
                  f"means and per-episode returns: `benchmarks/results_tasks.json`). Training times are wall-clock "
                  "as logged by each run; the runs shared the machine's cores with other work (two or more at a "
                  "time), so a run on its own is faster."]
    for r in (r for r in data["results"] if r["policy"] == "llm"):
        lines += ["", f"LLM on `{r['task']}`: `LLMPolicy` with the demo's compact prompts on the embedded "
                      f"SmolLM2-135M, one request at a time, on the first {r['episodes']} held-out seeds; "
                      f"{r['requests']:,} requests in {r['seconds'] / 60:.0f} min, {r['fallback_share']:.1%} of "
                      "its LLM tasks fell back to a scripted action (`python benchmarks/tasks.py --llm "
                      "OBJECTIVE`)."]
    flat = [f"{LABELS[r['policy']]} on `{r['task']}`" for r in data["results"] if r["return_ci95"] < 5e-4]
    if flat:
        lines += ["", f"± 0.000 ({', '.join(flat)}): the episodes' returns agree to three decimals — a population "
                      "of that policy acts (nearly) the same whatever the seed."]
    return "\n".join(lines)


def transfer_markdown(data: dict) -> str:
    rows = data.get("transfer", [])
    if not rows:
        return "Not measured yet: run `python benchmarks/tasks.py --train`."
    n = rows[0]["overrides"]["n_agents"]
    by = {(r["task"], r["policy"]): r for r in rows}
    tasks = list(dict.fromkeys(r["task"] for r in rows))
    lines = ["| task | agents | random | greedy | PPO (trained at 20 agents) |", "|---|---:|---:|---:|---:|"]
    for t in tasks:
        lines.append(f"| `{t}` | {n} | " + " | ".join(_cell(by.get((t, p))) for p in POLICIES) + " |")
    meta = data["meta"]
    lines += ["", f"Each small task played by {n} agents instead of 20 (`overrides={{'n_agents': {n}}}`), the "
                  f"PPO network of that task unchanged; {meta['episodes']} held-out episodes (seeds {meta['seed']}–"
                  f"{meta['seed'] + meta['episodes'] - 1}), mean episode return per agent ± 95 % t-interval. "
                  "Written by `benchmarks/tasks.py`."]
    return "\n".join(lines)


def learnability_rows(data: dict) -> list[dict]:
    from socialgym.config import REWARD_NAMES
    from socialgym.tasks import task_id

    by = {(r["task"], r["policy"]): r for r in data["results"]}
    out = []
    for objective in REWARD_NAMES:
        t = task_id(objective)
        random, greedy, trained = (by.get((t, p)) for p in POLICIES)
        if trained is None:
            continue
        gap = greedy["return_mean"] - random["return_mean"]
        learn = data.get("learnability", {}).get(objective, {})
        out.append({"objective": objective, "random": random["return_mean"], "greedy": greedy["return_mean"],
                    "ppo": trained["return_mean"], "ppo_ci95": trained["return_ci95"],
                    "gain": (trained["return_mean"] - random["return_mean"]) / gap if gap else float("nan"),
                    "reached": learn.get("reached"), "iterations": data["training"][objective]["iterations"],
                    "greedy_validation": learn.get("greedy_validation")})
    return out


def learnability_markdown(data: dict) -> str:
    rows = learnability_rows(data)
    if not rows:
        return "Not measured yet: run `python benchmarks/tasks.py --train`."
    lines = ["| task | random | greedy | PPO | normalised gain (PPO − random) / (greedy − random) | "
             "iterations to pass greedy |", "|---|---:|---:|---:|---:|---|"]
    for r in rows:
        reached = (f"{r['reached']['iteration']} ({r['reached']['seconds']:.0f} s)" if r["reached"]
                   else f"not within {r['iterations']}")
        lines.append(f"| {r['objective']} | {r['random']:.3f} | {r['greedy']:.3f} | {r['ppo']:.3f} ± "
                     f"{r['ppo_ci95']:.3f} | {r['gain']:.2f} | {reached} |")

    meta = data["meta"]
    # no ranking of the tasks by learnability: "iterations to pass greedy" measures how weak the
    # hand-written greedy heuristic is on each task, and the gain divides by greedy's margin too;
    # the rewards' scales differ, so neither column orders the tasks by how learnable they are
    lines += ["", "No ranking of the tasks by learnability is drawn from this table: \"iterations to pass greedy\" "
                  "and the normalised gain both measure PPO against the greedy heuristic, so they say how weak "
                  "greedy is on each task as much as how learnable the task is, and the rewards' scales differ. "
                  "The paper's claim 2 (INF easiest, COORD hardest) is therefore not tested by this table.", "",
              f"PPO with the default `Args` of `socialgym/baselines/ppo.py` on each small task (the budgets are in "
              f"docs/tasks.md); returns on the "
              f"held-out seeds {meta['seed']}–{meta['seed'] + meta['episodes'] - 1} (docs/tasks.md); "
              "\"iterations to pass greedy\" is the first in-training evaluation (every "
              f"{data['training'][rows[0]['objective']]['args']['eval_every']} iterations, validation seeds "
              "20000…) at or above greedy's mean on the same validation seeds. The gain is a ratio of "
              "differences of means; where greedy is close to random (INF) it is noisy. Written by "
              "`benchmarks/tasks.py`."]
    return "\n".join(lines)


def mixed_markdown(data: dict) -> str:
    """The mixed task's table with components, for docs/training.md."""
    from socialgym.config import REWARD_NAMES
    from socialgym.tasks import task_id

    t = task_id("mixed")
    rows = [r for r in data["results"] if r["task"] == t]
    b = data.get("training", {}).get("mixed")
    if b is None or not rows:
        return "Not measured yet: run `python benchmarks/tasks.py --train`."
    meta = data["meta"]
    lines = ["| policy | " + " | ".join(REWARD_NAMES) + " | total (λ-weighted) |",
             "|---|" + "---:|" * (len(REWARD_NAMES) + 1)]
    for r in rows:
        lines.append(f"| {LABELS[r['policy']]} | " + " | ".join(f"{r[c + '_mean']:.3f}" for c in REWARD_NAMES)
                     + f" | {_cell(r)} |")
    by = {r["policy"]: r for r in rows}
    ppo, greedy = by["ppo"], by["greedy"]
    ratio = ppo["return_mean"] / greedy["return_mean"] - 1
    apart = ppo["return_mean"] - ppo["return_ci95"] > greedy["return_mean"] + greedy["return_ci95"]
    learn = data.get("learnability", {}).get("mixed", {})
    plus = learn.get("reached_greedy_plus_10")
    crossing = (f"In training, the validation return first reached greedy + 10 % (greedy "
                f"{learn['greedy_validation']:.3f} on the validation seeds) at iteration {plus['iteration']}, "
                f"after {plus['seconds']:.0f} s." if plus else "In training, the validation return never reached "
                "greedy + 10 %.")
    lines += ["", f"`{t}`, {meta['episodes']} held-out episodes (seeds {meta['seed']}–"
                  f"{meta['seed'] + meta['episodes'] - 1}). PPO trained for {b['iterations']} iterations "
                  f"({b['episodes']:,} episodes, {b['decisions']:,} decisions) in {b['seconds'] / 60:.1f} min on "
                  f"{meta['machine']}: **{ratio:+.1%} against greedy**, intervals "
                  f"{'apart' if apart else 'overlapping'}. Component columns are unweighted sums over rounds; "
                  "the total weighs them by each agent's λ. " + crossing, "",
              "![PPO on the mixed task: in-training evaluation against greedy and random](images/ppo_mixed_curve.png)"]
    return "\n".join(lines)


def curve(directory: Path, out_png: Path, lines_at: dict[str, float], title: str) -> None:
    from socialgym.experiments.analysis.plotting import figure, save

    rows = read_log(directory)
    fig = figure(7, 4)
    ax = fig.add_subplot()
    ax.plot([int(r["iteration"]) for r in rows], [float(r["return_mean"]) for r in rows], linewidth=0.8,
            alpha=0.6, label="PPO, training episodes (team-spirit policy, sampled)")
    ev = [(int(r["iteration"]), float(r["eval_return"])) for r in rows if float(r["eval_return"]) == float(r["eval_return"])]
    ax.plot([i for i, _ in ev], [v for _, v in ev], marker="o", markersize=3, label="PPO, validation seeds")
    for name, value in lines_at.items():
        ax.axhline(value, linestyle="--", linewidth=1, color={"greedy": "C2", "random": "C3"}.get(name),
                   label=f"{name}, validation seeds")
    ax.set_xlabel("PPO iteration")
    ax.set_ylabel("mean episode return per agent (λ-weighted)")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)
    save(fig, out_png)


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def main(argv: list[str] | None = None) -> int:
    from socialgym.baselines.ppo import VALIDATION_SEED, Args
    from socialgym.config import REWARD_NAMES
    from socialgym.tasks import OBJECTIVES, SIZES, TASKS, task_id

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="+", default=list(SIZES), choices=list(SIZES))
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--seed", type=int, default=10_000, help="first held-out evaluation seed")
    parser.add_argument("--models", type=Path, default=MODELS, help="trained PPO models, one folder per objective")
    parser.add_argument("--train", action="store_true", help="train PPO on each small task first (default Args)")
    parser.add_argument("--objectives", nargs="+", default=list(OBJECTIVES), choices=list(OBJECTIVES),
                        help="the objectives to train (with --train)")
    parser.add_argument("--iterations", type=int, default=None, help="with --train: override Args.iterations")
    parser.add_argument("--transfer-agents", type=int, default=50,
                        help="population size at which the small tasks' PPO networks are also played")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--no-docs", action="store_true", help="do not write the docs")
    parser.add_argument("--docs-only", action="store_true",
                        help="measure nothing: write the docs from --out (an earlier run's results)")
    parser.add_argument("--llm", nargs="+", default=None, choices=list(OBJECTIVES), metavar="OBJECTIVE",
                        help="measure only the LLM policy (embedded model) on these small tasks, add its rows to "
                             "--out and write the docs")
    parser.add_argument("--llm-episodes", type=int, default=2)
    args = parser.parse_args(argv)
    if args.docs_only:
        write_docs(json.loads(args.out.read_text()), args.models)
        return 0
    if args.llm:
        data = json.loads(args.out.read_text())
        rows = measure_llm(args.llm, args.llm_episodes, args.seed)
        done = {r["task"] for r in rows}
        data["results"] = [r for r in data["results"] if not (r["policy"] == "llm" and r["task"] in done)] + rows
        args.out.write_text(json.dumps(data, indent=2) + "\n")
        if not args.no_docs:
            write_docs(data, args.models)
        return 0
    if args.episodes < 2:
        parser.error("--episodes must be >= 2 (the interval needs two samples)")
    if args.train:
        for objective in args.objectives:
            train_ppo(objective, args.models, args.iterations)
    start = time.perf_counter()
    results, training = [], {}
    for objective in OBJECTIVES:
        if (args.models / objective / "model.pt").is_file():
            training[objective] = budget(args.models / objective)
    for task in TASKS.values():
        if task.size not in args.sizes:
            continue
        for policy in POLICIES:
            model = args.models / task.objective / "model.pt" if policy == "ppo" else None
            if policy == "ppo" and task.objective not in training:
                continue
            row = measure(task.id, policy, args.episodes, args.seed, model)
            results.append(row)
            print(f"{task.id:<34} {policy:<7} {row['return_mean']:8.3f} ± {row['return_ci95']:.3f}  "
                  f"({row['seconds']:.1f} s)", flush=True)
    transfer = []
    if "small" in args.sizes:
        for objective in training:
            for policy in POLICIES:
                model = args.models / objective / "model.pt" if policy == "ppo" else None
                row = measure(task_id(objective), policy, args.episodes, args.seed, model,
                              {"n_agents": args.transfer_agents})
                transfer.append(row)
                print(f"{task_id(objective):<34} {policy:<7} at {args.transfer_agents} agents "
                      f"{row['return_mean']:8.3f} ± {row['return_ci95']:.3f}", flush=True)
    learnability = {}
    for objective in training:
        if objective not in REWARD_NAMES and objective != "mixed":
            continue
        eval_episodes = training[objective]["args"]["eval_episodes"]
        validation = {p: measure(task_id(objective), p, eval_episodes, VALIDATION_SEED)["return_mean"]
                      for p in ("random", "greedy")}
        learnability[objective] = {"greedy_validation": validation["greedy"],
                                   "random_validation": validation["random"],
                                   "reached": iterations_to(read_log(args.models / objective), validation["greedy"]),
                                   "reached_greedy_plus_10": iterations_to(read_log(args.models / objective),
                                                                           1.1 * validation["greedy"])}
    seconds = time.perf_counter() - start
    data = {"meta": {"episodes": args.episodes, "seed": args.seed, "sizes": args.sizes,
                     "seconds": round(seconds, 1), "machine": f"{_cores()} CPU cores, {platform.machine()}",
                     "python": platform.python_version(), "default_args": __import__("dataclasses").asdict(Args())},
            "sizes": {s: dict(SIZES[s]) for s in SIZES}, "training": training, "learnability": learnability,
            "results": results, "transfer": transfer}
    args.out.write_text(json.dumps(data, indent=2) + "\n")
    print(f"{len(results)} evaluations in {seconds:.1f} s; wrote {args.out}")
    if not args.no_docs:
        write_docs(data, args.models)
    return 0


def write_docs(data: dict, models: Path) -> None:
    """Every docs section this script owns, from its results (and the mixed model's training log)."""
    from socialgym.tasks import task_id

    training, learnability = data["training"], data["learnability"]
    write_section("tasks.md", "tasks-sizes", sizes_markdown())
    print(f"written to {write_section('tasks.md', 'tasks-baselines', baselines_markdown(data))}")
    write_section("tasks.md", "tasks-transfer", transfer_markdown(data))
    if learnability_rows(data):
        print(f"written to {write_section('reproduction.md', 'tasks-learnability', learnability_markdown(data))}")
    if "mixed" in training and "mixed" in learnability:
        curve(models / "mixed", DOCS / "images" / "ppo_mixed_curve.png",
              {"greedy": learnability["mixed"]["greedy_validation"],
               "random": learnability["mixed"]["random_validation"]},
              f"{task_id('mixed')}: PPO with the default Args")
        print(f"written to {write_section('training.md', 'training-mixed', mixed_markdown(data))}")


if __name__ == "__main__":
    sys.exit(main())
