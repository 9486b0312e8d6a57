"""Environment seconds per round (act + vote steps, policy time excluded) and peak memory.

    python benchmarks/bench_env.py                 # 1k, 10k, 100k agents
    python benchmarks/bench_env.py --agents 1000 --rounds 5 --obs-format structured
    python benchmarks/bench_env.py --api arrays      # the batched step_arrays() path

Each size runs in its own subprocess so its peak RSS (ru_maxrss) is its own. Random baseline,
3 actions, feed 10, vote feed 10, chronological feed, numeric observations and actions.
Round 1 (POSTs only, empty feeds) is warm-up and not timed.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
import resource
import subprocess
import sys
import time


def measure(n_agents: int, rounds: int, obs_format: str, recommender: str, api: str = "dict",
            seed: int = 0) -> dict:
    import numpy as np

    import socialgym
    from socialgym.baselines import RandomPolicy

    env = socialgym.parallel_env(n_agents=n_agents, n_actions=3, feed_size=10, vote_feed_size=10,
                                 max_rounds=rounds + 1, obs_format=obs_format, recommender=recommender,
                                 sentiment="tone")
    policy = RandomPolicy(seed=seed)
    t0 = time.perf_counter()
    obs, _ = env.reset(seed=seed)
    reset_s = time.perf_counter() - t0
    per_round, act_s, vote_s = [], [], []
    if api == "arrays":   # the batched path: one (n, L) matrix in, stacked arrays out
        step = env.step_arrays
        decide = lambda o: policy.sample_masks(o["action_mask"])  # noqa: E731
        obs = {"action_mask": env._masks()}
    else:                 # the PettingZoo path: dicts keyed by agent id
        step, decide = env.step, policy.act
    for r in range(rounds + 1):
        actions = decide(obs)
        t0 = time.perf_counter()
        obs, *_ = step(actions)
        t_act = time.perf_counter() - t0
        votes = decide(obs)
        t0 = time.perf_counter()
        obs, rewards, *_ = step(votes)
        t_vote = time.perf_counter() - t0
        if r > 0:
            per_round.append(t_act + t_vote)
            act_s.append(t_act)
            vote_s.append(t_vote)
    W = env.tie_matrix()
    return {
        "agents": n_agents, "rounds_timed": rounds, "api": api, "obs_format": obs_format,
        "recommender": recommender,
        "reset_s": reset_s,
        "sec_per_round_mean": float(np.mean(per_round)), "sec_per_round_max": float(np.max(per_round)),
        "act_step_s": float(np.mean(act_s)), "vote_step_s": float(np.mean(vote_s)),
        "items": len(env.content), "ties": int(W.nnz),
        "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 ** 2,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agents", type=int, nargs="*", default=[1_000, 10_000, 100_000])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--obs-format", default="numeric", choices=("numeric", "structured", "both"))
    parser.add_argument("--recommender", default="chronological")
    parser.add_argument("--api", default="dict", choices=("dict", "arrays"),
                        help="dict: PettingZoo step(); arrays: the batched step_arrays() (numeric only)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--json", help="also write the results to this file")
    parser.add_argument("--docs", action="store_true",
                        help="write the results (and the ratio of the last two sizes) into docs/benchmarks.md, "
                             "section bench_env_1m")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.agents[0], args.rounds, args.obs_format, args.recommender, args.api)))
        return
    results = []
    for n in args.agents:
        out = subprocess.run([sys.executable, __file__, "--child", "--agents", str(n), "--rounds",
                              str(args.rounds), "--obs-format", args.obs_format,
                              "--recommender", args.recommender, "--api", args.api],
                             capture_output=True, text=True, check=True)
        results.append(json.loads(out.stdout.strip().splitlines()[-1]))
        r = results[-1]
        print(f"{r['agents']:>7} agents: {r['sec_per_round_mean']:.3f} s/round "
              f"(act {r['act_step_s']:.3f} + vote {r['vote_step_s']:.3f}, max {r['sec_per_round_max']:.3f}), "
              f"peak RSS {r['peak_rss_gb']:.2f} GB, {r['items']} items, {r['ties']} ties", flush=True)
    if len(results) >= 2:
        print(f"time ratio {results[-1]['agents']}/{results[-2]['agents']}: "
              f"{results[-1]['sec_per_round_mean'] / results[-2]['sec_per_round_mean']:.2f}x")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=2)
    if args.docs:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from _docs import write_section
        write_section("benchmarks.md", "bench_env_1m", scale_table(results))


def scale_table(results: list[dict]) -> str:
    import os
    import platform

    lines = ["| agents | API | s / round (mean) | s / round (max) | act step | vote step | peak RSS | items | directed ties |",
             "|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        lines.append(f"| {r['agents']:,} | {r['api']} | {r['sec_per_round_mean']:.2f} | {r['sec_per_round_max']:.2f} | "
                     f"{r['act_step_s']:.2f} | {r['vote_step_s']:.2f} | {r['peak_rss_gb']:.2f} GB | {r['items']:,} | "
                     f"{r['ties']:,} |")
    note = (f"\n\n{results[0]['rounds_timed']} timed rounds after a warm-up round, each size in its own process, "
            f"on {os.cpu_count()} CPU cores ({platform.machine()}).")
    if len(results) >= 2:
        a, b = results[-2], results[-1]
        note += (f" {b['agents']:,} agents take {b['sec_per_round_mean'] / a['sec_per_round_mean']:.1f}x the time of "
                 f"{a['agents']:,} per round.")
    return "\n".join(lines) + note


if __name__ == "__main__":
    main()
