"""Baseline scores of every registered task (socialgym/tasks.py), written into the docs.

    .venv/bin/python benchmarks/tasks.py --train              # train PPO (both variants, 3 seeds), then measure
    .venv/bin/python benchmarks/tasks.py                      # measure with the models already in --models
    .venv/bin/python benchmarks/tasks.py --sizes small --episodes 5 --no-docs

Per task and policy: random and greedy play ``--episodes`` episodes on the held-out seeds
``--seed .. --seed+episodes-1`` through ``socialgym.experiments.analysis.evaluate.evaluate``
(training uses seeds at or above 2**20, its in-training evaluation 20000...). An agent's
episode return is its λ-weighted total summed over rounds, with the episode's λ (one-hot for a
single-reward task, the reset's draw for ``mixed``); the mean over agents is one sample per
episode, and a scripted row gives the mean over episodes with a 95 % t-interval.

PPO is trained on each *small* task with the default ``Args`` of socialgym/training/ppo.py in
two variants (``TEAM_SPIRIT``): cooperative (team spirit 0.8, the default) and selfish (0, the
reward random and greedy pursue), each with the training seeds ``TRAIN_SEEDS``, by ``--train``
(``--jobs`` at a time; models in ``--models/<objective>/<variant>-seed<k>/``). Every network plays
the same held-out episodes; a PPO cell is the mean over training seeds ± the standard deviation
across them. A large task is played by the networks of its small task (the per-agent interface
is the same, so a network acts at any population size). The normalised score of a policy is
(x − random) / (best known − random), best known = the highest mean of greedy and the PPO
variants on that task.

Transfer: each small task's cooperative PPO networks also play the task with
``--transfer-agents`` (50) agents, beside random and greedy at that size.

Writes ``benchmarks/results_tasks.json``, the sections ``tasks-sizes``, ``tasks-baselines`` and
``tasks-transfer`` of docs/tasks.md, ``tasks-learnability`` of docs/reproduction.md, ``training-mixed`` of
docs/training.md and the mixed task's learning curve docs/images/ppo_mixed_curve.png (training
seed 0's in-training evaluation).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _docs import DOCS, write_section  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results_tasks.json"
MODELS = Path("runs/tasks")
POLICIES = ("random", "greedy", "ppo", "ppo_selfish")
SCRIPTED = ("random", "greedy")
TEAM_SPIRIT = {"ppo": 0.8, "ppo_selfish": 0.0}
"""The PPO variants: the cooperative default (80 % of the reward an agent learns from is the
population's mean) and the selfish one (its own reward only) — what greedy and random are."""
TRAIN_SEEDS = (0, 1, 2)
LABELS = {"random": "random", "greedy": "greedy", "ppo": "PPO (team spirit 0.8)",
          "ppo_selfish": "PPO (selfish, team spirit 0)", "llm": "LLM"}


def model_dir(models: Path, objective: str, variant: str, train_seed: int) -> Path:
    """Where the PPO model of one objective, variant and training seed lives."""
    return models / objective / f"{variant}-seed{train_seed}"


def make_policy(name: str, seed: int, model: Path | None = None, client=None):
    from socialgym.baselines import GreedyPolicy, RandomPolicy

    if name == "llm":                   # the embedded model, with the demo's compact prompts
        from socialgym.agents import LLMPolicy
        from socialgym.agents.demo import COMPACT_POLICY
        return LLMPolicy(client, **COMPACT_POLICY, seed=seed)
    if name in TEAM_SPIRIT:
        from socialgym.training.torch_policy import TorchPolicy
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
    # (evaluate's own label for the policy is its key; the row keeps the variant name)
    return {"task": task_id, "policy": policy, "episodes": episodes, "seeds": [seed, seed + episodes - 1],
            "return_mean": row["total"], "return_ci95": row["total_ci95"], "returns": row["returns"],
            **{f"{k}_mean": row[k] for k in REWARD_NAMES}, "seconds": round(time.perf_counter() - start, 2),
            **({"model": str(model)} if model else {}), **({"overrides": overrides} if overrides else {})}


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


def train_all(objectives: list[str], models: Path, jobs: int, iterations: int | None) -> None:
    """Train every (objective, variant, training seed) with the default Args, ``jobs`` at a time
    (one torch thread each), each through the command line a user would type."""
    import concurrent.futures

    commands = []
    for objective in objectives:
        for variant, spirit in TEAM_SPIRIT.items():
            for seed in TRAIN_SEEDS:
                out = model_dir(models, objective, variant, seed)
                cmd = [sys.executable, "-m", "socialgym.training.ppo", "--task", objective, "--seed", str(seed),
                       "--team-spirit", str(spirit), "--out", str(out), "--threads", "1" if jobs > 1 else "0"]
                commands.append(cmd + (["--iterations", str(iterations)] if iterations else []))

    def run(cmd):
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode:
            raise RuntimeError(f"{' '.join(cmd)} failed:\n{done.stderr[-2000:]}")
        print(done.stdout.strip().splitlines()[-1], flush=True)

    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        list(pool.map(run, commands))


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


def aggregate(rows: list[dict]) -> dict | None:
    """PPO rows of one task and variant, one per training seed -> mean over seeds and the
    spread (sample standard deviation) across them."""
    if not rows:
        return None
    means = [r["return_mean"] for r in rows]
    import numpy as np

    return {"return_mean": float(np.mean(means)), "seed_sd": float(np.std(means, ddof=1)) if len(means) > 1 else 0.0,
            "seeds": len(means), "per_seed": means}


def summary(data: dict, key: str = "results") -> dict:
    """(task, policy) -> {return_mean, ...}: scripted rows as measured, PPO variants aggregated."""
    out, ppo = {}, {}
    for r in data.get(key, []):
        if r["policy"] in TEAM_SPIRIT:
            ppo.setdefault((r["task"], r["policy"]), []).append(r)
        else:
            out[(r["task"], r["policy"])] = r
    out.update({k: aggregate(v) for k, v in ppo.items()})
    return out


def _ppo_cell(a: dict | None) -> str:
    if a is None:
        return "not measured"
    return f"{a['return_mean']:.3f} ± {a['seed_sd']:.3f} ({a['seeds']} seeds)"


def normalised(by: dict, task: str) -> dict[str, float]:
    """(x − random) / (best known − random) per policy on ``task``; best known = the highest mean
    of greedy and the PPO variants measured here."""
    rand = by[(task, "random")]["return_mean"]
    known = [by[(task, p)]["return_mean"] for p in POLICIES[1:] if by.get((task, p))]
    best = max(known)
    return {p: (by[(task, p)]["return_mean"] - rand) / (best - rand) if best > rand else float("nan")
            for p in POLICIES if by.get((task, p))}


def baselines_markdown(data: dict) -> str:

    meta = data["meta"]
    by = summary(data)
    tasks = list(dict.fromkeys(r["task"] for r in data["results"]))
    lines = ["| task | " + " | ".join(LABELS[p] for p in POLICIES) + " | LLM (embedded model) |",
             "|---|" + "---:|" * len(POLICIES) + "---:|"]
    for t in tasks:
        cells = [_cell(by.get((t, p))) if p in SCRIPTED else _ppo_cell(by.get((t, p))) for p in POLICIES]
        llm = by.get((t, "llm"))
        llm_cell = "not measured" if llm is None else f"{_cell(llm)} ({llm['episodes']} episodes)"
        lines.append(f"| `{t}` | " + " | ".join(cells) + f" | {llm_cell} |")
    lines += ["", "Normalised score (x − random) / (best known − random): 1 is the best policy measured on the task "
                  "(greedy or a PPO variant), 0 is random.", "",
              "| task | " + " | ".join(LABELS[p] for p in POLICIES[1:]) + " |", "|---|" + "---:|" * (len(POLICIES) - 1)]
    for t in tasks:
        score = normalised(by, t)
        lines.append(f"| `{t}` | " + " | ".join(f"{score[p]:.2f}" if p in score else "—" for p in POLICIES[1:]) + " |")
    lines += ["", budget_sentence(data), "",
              f"random and greedy: mean episode return per agent (λ-weighted total summed over rounds) ± the 95 % "
              f"t-interval over {meta['episodes']} episodes on the held-out seeds {meta['seed']}–"
              f"{meta['seed'] + meta['episodes'] - 1}. PPO: one network per training seed "
              f"({', '.join(map(str, TRAIN_SEEDS))}), each played on the same {meta['episodes']} held-out episodes "
              "(sampling its actions, as it was trained); the cell is the mean over the training seeds ± the "
              "standard deviation across them, so the ± is the seed-to-seed spread, not episode noise. A large "
              "task is played by its small task's networks (20 agents at training, 100 in play). Measured by "
              f"`benchmarks/tasks.py` in {meta['seconds']:.0f} s on {meta['machine']}, training excluded (raw numbers, "
              "per-seed and per-episode returns: `benchmarks/results_tasks.json`)."]
    for r in (r for r in data["results"] if r["policy"] == "llm"):
        lines += ["", f"LLM on `{r['task']}`: `LLMPolicy` with the demo's compact prompts on the embedded "
                      f"SmolLM2-135M, one request at a time, on the first {r['episodes']} held-out seeds; "
                      f"{r['requests']:,} requests in {r['seconds'] / 60:.0f} min, {r['fallback_share']:.1%} of "
                      "its LLM tasks fell back to a scripted action (`python benchmarks/tasks.py --llm "
                      "OBJECTIVE`)."]
    return "\n".join(lines)


def budget_sentence(data: dict) -> str:
    """How long the PPO networks trained, from their logs."""
    import numpy as np

    parts = []
    for objective, variants in data.get("training", {}).items():
        if not isinstance(variants, dict) or "iterations" in variants:     # results from before issue 31
            continue
        for variant, runs in variants.items():
            if isinstance(runs, list) and runs:
                seconds = [b["seconds"] for b in runs]
                parts.append(f"{objective} {'selfish' if variant == 'ppo_selfish' else 'cooperative'}: "
                             f"{runs[0]['iterations']} iterations, {runs[0]['episodes']:,} episodes, "
                             f"{np.mean(seconds):.0f} s (max {max(seconds):.0f} s)")
    if not parts:
        return "PPO not trained yet: run `python benchmarks/tasks.py --train`."
    jobs = data["meta"].get("jobs", 1)
    return ("PPO training budgets (default `Args` of `socialgym/training/ppo.py`, mean wall-clock time over the "
            f"seeds; {jobs} trainings ran at a time, one torch thread each): " + "; ".join(parts) + ".")


def transfer_markdown(data: dict) -> str:
    rows = data.get("transfer", [])
    if not rows:
        return "Not measured yet: run `python benchmarks/tasks.py --train`."
    n = rows[0]["overrides"]["n_agents"]
    by = summary(data, "transfer")
    tasks = list(dict.fromkeys(r["task"] for r in rows))
    lines = ["| task | agents | random | greedy | PPO, team spirit 0.8 (trained at 20 agents) |",
             "|---|---:|---:|---:|---:|"]
    for t in tasks:
        lines.append(f"| `{t}` | {n} | {_cell(by.get((t, 'random')))} | {_cell(by.get((t, 'greedy')))} | "
                     f"{_ppo_cell(by.get((t, 'ppo')))} |")
    meta = data["meta"]
    lines += ["", f"Each small task played by {n} agents instead of 20 (`overrides={{'n_agents': {n}}}`), the "
                  f"PPO networks of that task unchanged; {meta['episodes']} held-out episodes (seeds {meta['seed']}–"
                  f"{meta['seed'] + meta['episodes'] - 1}); scripted: mean ± 95 % t-interval; PPO: mean over the "
                  "training seeds ± their standard deviation. Written by `benchmarks/tasks.py`."]
    return "\n".join(lines)


def learnability_rows(data: dict) -> list[dict]:
    from socialgym.config import REWARD_NAMES
    from socialgym.tasks import task_id

    by = summary(data)
    out = []
    for objective in REWARD_NAMES:
        t = task_id(objective)
        if by.get((t, "ppo")) is None:
            continue
        score = normalised(by, t)
        out.append({"objective": objective, **{p: by[(t, p)]["return_mean"] for p in POLICIES if by.get((t, p))},
                    "ppo_sd": by[(t, "ppo")]["seed_sd"], "seeds": by[(t, "ppo")]["seeds"],
                    **{f"score_{p}": v for p, v in score.items()}})
    return out


def learnability_markdown(data: dict) -> str:
    rows = learnability_rows(data)
    if not rows:
        return "Not measured yet: run `python benchmarks/tasks.py --train`."
    lines = ["| task | random | greedy | PPO (team spirit 0.8) | PPO (selfish) | normalised: greedy | "
             "normalised: PPO | normalised: PPO selfish |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['objective']} | {r['random']:.3f} | {r['greedy']:.3f} | {r['ppo']:.3f} ± {r['ppo_sd']:.3f} | "
                     f"{r.get('ppo_selfish', float('nan')):.3f} | {r['score_greedy']:.2f} | {r['score_ppo']:.2f} | "
                     f"{r.get('score_ppo_selfish', float('nan')):.2f} |")
    meta = data["meta"]
    # no ranking of the tasks by learnability: the normalised scores divide by the best policy
    # measured on each task, and the rewards' scales differ
    lines += ["", "No ranking of the tasks by learnability is drawn from this table: the normalised score "
                  "(x − random) / (best known − random) measures each policy against the best one measured on the "
                  "same task, so it says how far PPO gets towards what is known to be reachable there, not how "
                  "learnable one task is against another, and the rewards' scales differ. The paper's claim 2 "
                  "(INF easiest, COORD hardest) is therefore not tested by this table.", "",
              f"PPO with the default `Args` of `socialgym/training/ppo.py`, {rows[0]['seeds']} training seeds per "
              f"variant (mean ± standard deviation across seeds); returns on the held-out seeds {meta['seed']}–"
              f"{meta['seed'] + meta['episodes'] - 1} (docs/tasks.md). Written by `benchmarks/tasks.py`."]
    return "\n".join(lines)


def mixed_markdown(data: dict) -> str:
    """The mixed task's table with components, for docs/training.md."""
    import numpy as np

    from socialgym.config import REWARD_NAMES
    from socialgym.tasks import task_id

    t = task_id("mixed")
    rows = [r for r in data["results"] if r["task"] == t and r["policy"] != "llm"]
    runs = data.get("training", {}).get("mixed", {}).get("ppo")
    if not runs or not rows:
        return "Not measured yet: run `python benchmarks/tasks.py --train`."
    meta = data["meta"]
    lines = ["| policy | " + " | ".join(REWARD_NAMES) + " | total (λ-weighted) |",
             "|---|" + "---:|" * (len(REWARD_NAMES) + 1)]
    for p in POLICIES:
        mine = [r for r in rows if r["policy"] == p]
        if not mine:
            continue
        comps = " | ".join(f"{np.mean([r[c + '_mean'] for r in mine]):.3f}" for c in REWARD_NAMES)
        total = _cell(mine[0]) if p in SCRIPTED else _ppo_cell(aggregate(mine))
        lines.append(f"| {LABELS[p]} | {comps} | {total} |")
    by = summary(data)
    ppo, greedy = by[(t, "ppo")], by[(t, "greedy")]
    lines += ["", f"`{t}`, {meta['episodes']} held-out episodes (seeds {meta['seed']}–"
                  f"{meta['seed'] + meta['episodes'] - 1}); PPO rows are the mean over {ppo['seeds']} training seeds "
                  f"({runs[0]['iterations']} iterations, {runs[0]['episodes']:,} episodes each, "
                  f"{np.mean([b['seconds'] for b in runs]):.0f} s on average): "
                  f"**{ppo['return_mean'] / greedy['return_mean'] - 1:+.1%} against greedy** (the lowest seed "
                  f"{min(ppo['per_seed']):.3f}, greedy {greedy['return_mean']:.3f} ± {greedy['return_ci95']:.3f}). "
                  "Component columns are unweighted sums over rounds (PPO: mean over seeds); the total weighs them "
                  "by each agent's λ.", "",
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
    from socialgym.training.ppo import VALIDATION_SEED, Args
    from socialgym.tasks import OBJECTIVES, SIZES, TASKS, task_id

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="+", default=list(SIZES), choices=list(SIZES))
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--seed", type=int, default=10_000, help="first held-out evaluation seed")
    parser.add_argument("--models", type=Path, default=MODELS,
                        help="trained PPO models: OBJECTIVE/VARIANT-seedK/ under this folder")
    parser.add_argument("--train", action="store_true",
                        help="train PPO first: every small task, both variants, every training seed")
    parser.add_argument("--jobs", type=int, default=2, help="with --train: trainings at a time")
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
        train_all(args.objectives, args.models, args.jobs, args.iterations)
    start = time.perf_counter()
    training = {o: {v: [budget(model_dir(args.models, o, v, k)) for k in TRAIN_SEEDS
                        if (model_dir(args.models, o, v, k) / "model.pt").is_file()] for v in TEAM_SPIRIT}
                for o in OBJECTIVES}

    def play(task: str, overrides: dict | None, variants=POLICIES) -> list[dict]:
        objective, rows = TASKS[task].objective, []
        for policy in variants:
            runs = [None] if policy in SCRIPTED else [k for k in TRAIN_SEEDS if (
                model_dir(args.models, objective, policy, k) / "model.pt").is_file()]
            for k in runs:
                model = None if k is None else model_dir(args.models, objective, policy, k) / "model.pt"
                row = measure(task, policy, args.episodes, args.seed, model, overrides)
                rows.append(row if k is None else {**row, "train_seed": k})
                print(f"{task:<34} {policy:<12} {'' if k is None else f'seed {k}':<7} {row['return_mean']:8.3f} ± "
                      f"{row['return_ci95']:.3f}  ({row['seconds']:.1f} s)", flush=True)
        return rows

    results = [r for task in TASKS.values() if task.size in args.sizes for r in play(task.id, None)]
    transfer = [r for o in OBJECTIVES if "small" in args.sizes and training[o]["ppo"]
                for r in play(task_id(o), {"n_agents": args.transfer_agents}, ("random", "greedy", "ppo"))]
    validation = {}
    if training["mixed"]["ppo"]:
        eval_episodes = training["mixed"]["ppo"][0]["args"]["eval_episodes"]
        validation = {p: measure(task_id("mixed"), p, eval_episodes, VALIDATION_SEED)["return_mean"]
                      for p in SCRIPTED}
    seconds = time.perf_counter() - start
    data = {"meta": {"episodes": args.episodes, "seed": args.seed, "sizes": args.sizes, "jobs": args.jobs,
                     "train_seeds": list(TRAIN_SEEDS), "team_spirit": TEAM_SPIRIT,
                     "seconds": round(seconds, 1), "machine": f"{_cores()} CPU cores, {platform.machine()}",
                     "python": platform.python_version(), "default_args": __import__("dataclasses").asdict(Args())},
            "sizes": {s: dict(SIZES[s]) for s in SIZES}, "training": training, "mixed_validation": validation,
            "results": results, "transfer": transfer}
    args.out.write_text(json.dumps(data, indent=2) + "\n")
    print(f"{len(results)} evaluations in {seconds:.1f} s; wrote {args.out}")
    if not args.no_docs:
        write_docs(data, args.models)
    return 0


def write_docs(data: dict, models: Path) -> None:
    """Every docs section this script owns, from its results (and the mixed model's training log)."""
    from socialgym.tasks import task_id

    write_section("tasks.md", "tasks-sizes", sizes_markdown())
    print(f"written to {write_section('tasks.md', 'tasks-baselines', baselines_markdown(data))}")
    write_section("tasks.md", "tasks-transfer", transfer_markdown(data))
    if learnability_rows(data):
        print(f"written to {write_section('reproduction.md', 'tasks-learnability', learnability_markdown(data))}")
    if data.get("training", {}).get("mixed", {}).get("ppo") and data.get("mixed_validation"):
        curve(model_dir(models, "mixed", "ppo", TRAIN_SEEDS[0]), DOCS / "images" / "ppo_mixed_curve.png",
              data["mixed_validation"], f"{task_id('mixed')}: PPO with the default Args (training seed "
              f"{TRAIN_SEEDS[0]})")
        print(f"written to {write_section('training.md', 'training-mixed', mixed_markdown(data))}")


if __name__ == "__main__":
    sys.exit(main())
