"""Seconds per round spent in recommendation (feed + vote lists) and model update.

    python benchmarks/bench_recommenders.py                          # mf at 1k and 10k agents
    python benchmarks/bench_recommenders.py --recommenders mf social popularity --agents 1000

Random baseline agents, 3 actions, feed 10, vote feed 10, numeric observations, batched
``step_arrays``. The recommender's ``recommend`` and ``update`` calls are timed inside the
environment; the first two rounds (cold start, tiny pool) are warm-up. Each configuration runs
in its own process (peak RSS is its own).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time


def measure(name: str, n_agents: int, rounds: int, seed: int = 0) -> dict:
    import numpy as np

    import socialgym
    from socialgym.baselines import RandomPolicy

    env = socialgym.parallel_env(n_agents=n_agents, n_actions=3, feed_size=10, vote_feed_size=10,
                                 max_rounds=rounds + 2, obs_format="numeric", recommender=name,
                                 sentiment="tone")
    rec = env.recommender
    timing = {"recommend": 0.0, "update": 0.0}

    def timed(fn, key):
        def wrapper(*a, **k):
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                timing[key] += time.perf_counter() - t0
        return wrapper

    rec.recommend = timed(rec.recommend, "recommend")
    rec.update = timed(rec.update, "update")
    policy = RandomPolicy(seed=seed)
    env.reset(seed=seed)
    obs = {"action_mask": env._masks()}
    per_round = []
    for r in range(rounds + 2):
        before = dict(timing)
        obs, *_ = env.step_arrays(policy.sample_masks(obs["action_mask"]))
        obs, *_ = env.step_arrays(policy.sample_masks(obs["action_mask"]))
        if r >= 2:
            per_round.append({k: timing[k] - before[k] for k in timing})
    rec_s = [p["recommend"] for p in per_round]
    upd_s = [p["update"] for p in per_round]
    tot = [a + b for a, b in zip(rec_s, upd_s)]
    return {"recommender": name, "agents": n_agents, "rounds_timed": rounds,
            "recommend_s": float(np.mean(rec_s)), "update_s": float(np.mean(upd_s)),
            "total_s_mean": float(np.mean(tot)), "total_s_max": float(np.max(tot)),
            "pool_items_end": int(env.content.public_mask().sum()),
            "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 ** 2}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--recommenders", nargs="+", default=["mf"])
    parser.add_argument("--agents", type=int, nargs="+", default=[1_000, 10_000])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", help="also write the results to this file")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.child[0], int(args.child[1]), args.rounds)))
        return
    results = []
    for name in args.recommenders:
        for n in args.agents:
            out = subprocess.run([sys.executable, __file__, "--child", name, str(n), "--rounds", str(args.rounds)],
                                 capture_output=True, text=True, check=True)
            r = json.loads(out.stdout.strip().splitlines()[-1])
            results.append(r)
            print(f"{name:>15} {n:>7} agents: {r['total_s_mean']:.3f} s/round (recommend {r['recommend_s']:.3f} "
                  f"+ update {r['update_s']:.3f}, max {r['total_s_max']:.3f}), pool {r['pool_items_end']} items, "
                  f"peak RSS {r['peak_rss_gb']:.2f} GB", flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=2)


if __name__ == "__main__":
    main()
