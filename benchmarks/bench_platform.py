"""What the platform's seat adds to a round: seconds per round with and without it.

    python benchmarks/bench_platform.py                 # 10,000 users, writes results_platform_seat.json
    python benchmarks/bench_platform.py --docs          # and the "seat-cost" section of docs/platform.md

Both arms play the same platform task (``socialgym.envs.platform``: ``StanceUsers``, feed 5, two
actions per user) at the given size, ``rounds`` timed rounds after two warm-up rounds:

* **without the seat**: the bare feed environment (``FeedEnv.step_arrays`` without observations)
  with the chronological recommender, the users deciding from the platform's arrays;
* **with the seat**: ``PlatformEnv.step`` with a weights action — retrieval, the feature matrix
  of every (viewer, candidate), the scores and top-k, the platform's rewards and metrics, and
  the observation; the same users.

The users' decisions are inside both arms. Each arm runs in its own process.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from _docs import machine, write_section  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results_platform_seat.json"


def measure(arm: str, n_agents: int, rounds: int, candidates: int) -> dict:
    import numpy as np

    from socialgym.envs.platform.env import PlatformEnv

    env = PlatformEnv("engagement", n_agents=n_agents, max_rounds=rounds + 4, candidates=candidates,
                      ranker="chronological" if arm == "without" else None)
    env.reset(seed=0)
    times = []
    if arm == "without":
        feed_env, users = env.feed_env, env.users
        for r in range(rounds + 2):
            t0 = time.perf_counter()
            feed_env.build_feeds()
            feed_env.step_arrays(users.act(feed_env), observe=False)
            feed_env.step_arrays(users.act(feed_env), observe=False)
            times.append(time.perf_counter() - t0)
    else:
        weights = np.zeros(env.action_space.shape, np.float32)
        weights[2] = 1.0                                            # topic affinity
        for r in range(rounds + 2):
            t0 = time.perf_counter()
            env.step(weights)
            times.append(time.perf_counter() - t0)
    timed = times[2:]
    return {"arm": arm, "agents": n_agents, "rounds": rounds, "candidates": candidates, "mean_s": float(np.mean(timed)),
            "max_s": float(np.max(timed))}


def markdown(data: dict) -> str:
    base = next(r for r in data["runs"] if r["arm"] == "without")
    lines = ["| agents | candidates per viewer | without the seat (s / round) | with the seat (s / round) | ratio |",
             "|---:|---:|---:|---:|---:|"]
    for r in (r for r in data["runs"] if r["arm"] == "with"):
        lines.append(f"| {r['agents']:,} | {r['candidates']} | {base['mean_s']:.3f} | {r['mean_s']:.3f} | "
                     f"{r['mean_s'] / base['mean_s']:.2f}x |")
    verdicts = [f"{'met' if r['mean_s'] <= 2 * base['mean_s'] else 'not met'} at {r['candidates']} candidates"
                for r in data["runs"] if r["arm"] == "with"]
    lines += ["", "The seat's cost target, at most 2x the step without it: " + ", ".join(verdicts) + ". Most of the "
                  "seat's time is the feature matrix of every (viewer, candidate) pair and its two tie lookups per "
                  "pair, which grow with the candidates.", "",
              f"Mean over {base['rounds']} rounds after two warm-up rounds, each arm in its own process, on "
                  f"{data['machine']}. 60 candidates is the platform tasks' setting. Written by "
                  "`python benchmarks/bench_platform.py --docs`."]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agents", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--docs", action="store_true")
    parser.add_argument("--candidates", type=int, nargs="+", default=[60, 20])
    parser.add_argument("--arm", choices=("with", "without"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.arm:
        print(json.dumps(measure(args.arm, args.agents, args.rounds, args.candidates[0])))
        return
    runs = []
    for arm, candidates in [("without", args.candidates[0]), *(("with", c) for c in args.candidates)]:
        out = subprocess.run([sys.executable, __file__, "--arm", arm, "--agents", str(args.agents),
                              "--rounds", str(args.rounds), "--candidates", str(candidates)],
                             capture_output=True, text=True, check=True)
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(runs[-1], flush=True)
    data = {"runs": runs, "machine": machine()}
    RESULTS.write_text(json.dumps(data, indent=1) + "\n")
    print(markdown(data))
    if args.docs:
        print(f"written to {write_section('platform.md', 'seat-cost', markdown(data))}")


if __name__ == "__main__":
    main()
