"""A short simulation with the built-in baseline agents: per-round rewards and tie statistics.

    python -m socialgym.demo [--agents 30] [--rounds 15] [--policy greedy|random] [--seed 0]
"""

from __future__ import annotations

import argparse
import time

import socialgym
from socialgym.baselines import GreedyPolicy, RandomPolicy
from socialgym.config import REWARD_NAMES


def run(n_agents: int = 30, rounds: int = 15, policy: str = "greedy", seed: int = 0,
        recommender: str = "random") -> dict:
    env = socialgym.parallel_env(n_agents=n_agents, max_rounds=rounds, recommender=recommender,
                                 sentiment="vader", seed=seed)
    agents = GreedyPolicy(seed=seed) if policy == "greedy" else RandomPolicy(seed=seed)
    obs, _ = env.reset(seed=seed)
    header = f"{'round':>5} " + " ".join(f"{r:>6}" for r in REWARD_NAMES) + \
        f" {'total':>6} {'ties':>6} {'edges':>6} {'dens.':>6} {'clust.':>6} {'LCC':>6}"
    print(f"socialgym demo: {n_agents} agents, {rounds} rounds, {policy} policy, "
          f"{recommender} feed, seed {seed}")
    print(header)
    start = time.perf_counter()
    metrics = {}
    while env.agents:
        obs, _, _, _, _ = env.step(agents.act(obs))           # act phase
        obs, rewards, _, _, infos = env.step(agents.act(obs))  # vote phase
        rec = env.last_round
        metrics = env.network_metrics()
        W = env.tie_matrix()
        comps = rec.components.mean(axis=0)
        print(f"{rec.round:>5} " + " ".join(f"{v:6.3f}" for v in comps) +
              f" {rec.totals.mean():6.3f} {W.nnz:>6} {metrics['n_edges']:>6} "
              f"{metrics['density']:6.3f} {metrics['clustering']:6.3f} {metrics['lcc_fraction']:6.3f}")
    elapsed = time.perf_counter() - start
    modularity = "n/a" if metrics["modularity"] is None else f"{metrics['modularity']:.3f}"   # > LARGE_GRAPH
    print(f"final network: density {metrics['density']:.3f}, clustering {metrics['clustering']:.3f}, "
          f"avg shortest path {metrics['avg_shortest_path']:.3f}, modularity {modularity}, "
          f"directed density {metrics['directed_density']:.3f}")
    print(f"{rounds} rounds in {elapsed:.2f} s")
    return metrics


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agents", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--policy", choices=("greedy", "random"), default="greedy")
    parser.add_argument("--recommender", choices=("chronological", "random"), default="random")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    try:
        socialgym.parallel_env(n_agents=args.agents, max_rounds=args.rounds, seed=args.seed)   # checks the sizes
    except (ValueError, TypeError, MemoryError) as exc:
        parser.error(str(exc))               # one usage line, exit status 2
    run(args.agents, args.rounds, args.policy, args.seed, args.recommender)


if __name__ == "__main__":
    main()
