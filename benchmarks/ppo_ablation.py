"""What makes the PPO baseline learn: each ingredient switched off in turn, on the mixed task.

    .venv/bin/python benchmarks/ppo_ablation.py                     # 8 variants x 200 iterations, ~25 min on 2 cores
    .venv/bin/python benchmarks/ppo_ablation.py --iterations 50 --no-docs

Every variant trains with the default ``Args`` of socialgym/training/ppo.py except the one
change it names, for the same number of iterations (``--iterations``, fewer than the default
500 so the table stays affordable), then plays ``--episodes`` held-out episodes (seeds 10000…)
through ``socialgym.experiments.analysis.evaluate.evaluate``. "Before issue 18" combines every change at
once: selfish rewards, no normalisation, a constant step size of 3e-4, four environments per
iteration, the old discounts and entropy weight (its recipient head still addresses peers by
observation, which the old network did by index). Writes ``benchmarks/results_ppo_ablation.json``
and the section ``training-ablation`` of docs/training.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _docs import write_section  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results_ppo_ablation.json"
VARIANTS: dict[str, dict] = {
    "all ingredients (default Args)": {},
    "selfish rewards (team_spirit 0)": {"team_spirit": 0.0},
    "team_spirit 1 (population mean only)": {"team_spirit": 1.0},
    "no observation normalisation": {"normalize_obs": False},
    "no learning-rate annealing": {"anneal_lr": False},
    "4 environments per iteration (a quarter of the batch)": {"num_envs": 4},
    "longer credit horizon (gamma 0.95, GAE 0.9)": {"gamma": 0.95, "gae_lambda": 0.9},
    "before issue 18 (all of the above off)": {"team_spirit": 0.0, "normalize_obs": False, "anneal_lr": False,
                                               "num_envs": 4, "learning_rate": 3e-4, "gamma": 0.95,
                                               "gae_lambda": 0.9, "entropy_coef": 0.01, "minibatch": 512},
}


def run(name: str, change: dict, iterations: int, episodes: int, seed: int, out: Path) -> dict:
    from socialgym.training import ppo
    from socialgym.training.torch_policy import TorchPolicy
    from socialgym.experiments.analysis.evaluate import evaluate

    args = dataclasses.replace(ppo.Args(task="mixed", iterations=iterations, eval_every=0,
                                        out=str(out / name.split(" (")[0].replace(" ", "-"))), **change)
    start = time.perf_counter()
    ppo.train(args, progress=False)
    seconds = time.perf_counter() - start
    row = evaluate({"ppo": lambda: TorchPolicy.load(Path(args.out) / "model.pt", seed=seed)},
                   ppo.task_of(args).id, episodes=episodes, seed=seed)[0]
    return {"variant": name, "change": change, "iterations": iterations, "episodes_trained": iterations * args.num_envs,
            "train_seconds": round(seconds, 1), "return_mean": row["total"], "return_ci95": row["total_ci95"],
            "returns": row["returns"]}


def markdown(data: dict) -> str:
    meta = data["meta"]
    base = data["results"][0]["return_mean"]
    lines = ["| variant | change | held-out return | against all ingredients | episodes trained | training time |",
             "|---|---|---:|---:|---:|---:|"]
    for r in data["results"]:
        change = ", ".join(f"`{k}={v}`" for k, v in r["change"].items()) or "—"
        lines.append(f"| {r['variant']} | {change} | {r['return_mean']:.3f} ± {r['return_ci95']:.3f} | "
                     f"{r['return_mean'] - base:+.3f} | {r['episodes_trained']:,} | {r['train_seconds']:.0f} s |")
    greedy = meta.get("greedy")
    if greedy:
        lines += ["", f"Greedy on the same seeds: {greedy['return_mean']:.3f} ± {greedy['return_ci95']:.3f}; "
                      f"random {meta['random']['return_mean']:.3f} ± {meta['random']['return_ci95']:.3f}."]
    lines += ["", f"`socialgym/feed-mixed-v0`, {meta['iterations']} iterations per variant, training seed "
                  f"{meta['train_seed']}; mean episode return per agent ± 95 % t-interval over {meta['episodes']} "
                  f"held-out episodes (seeds {meta['seed']}–{meta['seed'] + meta['episodes'] - 1}). One training "
                  f"run per variant, so a difference smaller than the intervals says little. Measured by "
                  f"`benchmarks/ppo_ablation.py` in {meta['seconds'] / 60:.0f} min on {meta['machine']}; training "
                  "times are wall-clock with other jobs sharing the cores, so compare them only roughly."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--seed", type=int, default=10_000)
    parser.add_argument("--variants", nargs="+", default=None, help="indices into the variant list (default: all)")
    parser.add_argument("--runs", type=Path, default=Path("runs/ablation"))
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--no-docs", action="store_true")
    parser.add_argument("--docs-only", action="store_true",
                        help="train nothing: write the docs section from --out (an earlier run's results)")
    args = parser.parse_args(argv)
    if args.docs_only:
        print(f"written to {write_section('training.md', 'training-ablation', markdown(json.loads(args.out.read_text())))}")
        return 0
    from socialgym.baselines import GreedyPolicy, RandomPolicy
    from socialgym.experiments.analysis.evaluate import evaluate

    start = time.perf_counter()
    chosen = list(VARIANTS.items())
    if args.variants:
        chosen = [chosen[int(i)] for i in args.variants]
    results = []
    for name, change in chosen:
        row = run(name, change, args.iterations, args.episodes, args.seed, args.runs)
        results.append(row)
        print(f"{name:<58} {row['return_mean']:.3f} ± {row['return_ci95']:.3f}  ({row['train_seconds']:.0f} s)",
              flush=True)
    baselines = evaluate({"greedy": lambda: GreedyPolicy(seed=args.seed), "random": lambda: RandomPolicy(seed=args.seed)},
                         "socialgym/feed-mixed-v0", episodes=args.episodes, seed=args.seed)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    data = {"meta": {"iterations": args.iterations, "episodes": args.episodes, "seed": args.seed, "train_seed": 0,
                     "seconds": round(time.perf_counter() - start, 1),
                     "machine": f"{cores} CPU cores, {platform.machine()}",
                     **{r["policy"]: {"return_mean": r["total"], "return_ci95": r["total_ci95"]} for r in baselines}},
            "results": results}
    args.out.write_text(json.dumps(data, indent=2) + "\n")
    if not args.no_docs:
        print(f"written to {write_section('training.md', 'training-ablation', markdown(data))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
