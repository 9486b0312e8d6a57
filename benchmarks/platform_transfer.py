"""Sim-to-LLM transfer: the rankers trained on scripted users, played against LLM users.

    python benchmarks/platform_transfer.py            # needs runs/platform (benchmarks/platform_tasks.py --train)
    python benchmarks/platform_transfer.py --docs     # and the "transfer" section of docs/platform.md

Eight LLM agents on the embedded model (SmolLM2-135M behind llama.cpp, split generation, uniform
λ, personas of ``generate_personas(8, seed=0)``, their stance labels as the platform's stance
groups) play ``ROUNDS`` rounds of a feed (feed 5, vote list 5) under three rankers: chronological,
and the first training seed's PPO rankers for engagement and for welfare (deployed as
``recommender="learned"``). Vote lists are drawn uniformly under all three. Each round from round
2 on (round 1 has nothing to rank) is measured with ``socialgym.rewards.platform``'s metrics.
One run per ranker: a description of what happened, not a test of anything.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from _docs import machine, write_section  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results_platform_transfer.json"
MODELS = ROOT / "runs" / "platform" / "models"
ROUNDS = 4
N_AGENTS = 8
MEASURES = ("engagement", "welfare", "negativity_share", "cross_cutting_exposure", "topic_entropy")


def play(client, ranker_name: str, path: Path | None) -> dict:
    import socialgym
    from socialgym.agents import LLMPolicy, generate_personas
    from socialgym.recommenders import make_recommender
    from socialgym.recommenders.features import stance_codes
    from socialgym.recommenders.seat import FeedOnly
    from socialgym.rewards.platform import feed_authors, platform_metrics

    personas = generate_personas(N_AGENTS, seed=0, lambdas="uniform")
    labels = [p.stance for p in personas]
    codes = stance_codes(labels, N_AGENTS)
    base = make_recommender("chronological") if path is None else \
        make_recommender("learned", path=str(path), stances=labels)
    env = socialgym.parallel_env(n_agents=N_AGENTS, max_rounds=ROUNDS, feed_size=5, vote_feed_size=5,
                                 recommender=FeedOnly(base), seed=0)
    policy = LLMPolicy(client, personas, new_topics=False, seed=0)
    obs, _ = env.reset(seed=0)
    rounds, start = [], time.perf_counter()
    while env.agents:
        obs, _, _, _, _ = env.step(policy.act(obs))
        if env.phase == "act" and env.last_round is not None and env.last_round.round >= 2:
            record = env.last_round
            authors = feed_authors(record.batch.feed, env.content.column("author"))
            rounds.append(platform_metrics(record.batch, record.totals, codes, len(env.vocab), authors))
    return {"ranker": ranker_name, "seconds": round(time.perf_counter() - start, 1), "per_round": rounds,
            "mean": {m: float(np.nanmean([r[m] for r in rounds])) for m in MEASURES}}


def markdown(data: dict) -> str:
    lines = ["| ranker | " + " | ".join(MEASURES) + " | seconds |", "|---|" + "---:|" * (len(MEASURES) + 1)]
    for run in data["runs"]:
        lines.append(f"| {run['ranker']} | " + " | ".join(f"{run['mean'][m]:.3f}" for m in MEASURES)
                     + f" | {run['seconds']:.0f} |")
    lines += ["", f"{N_AGENTS} LLM agents (embedded SmolLM2-135M), {ROUNDS} rounds, one run per ranker; means over "
                  f"rounds 2–{ROUNDS}. One run each cannot separate the rankers: this shows that the trained rankers "
                  f"run against LLM users, not how well they transfer. Machine: {data['machine']}. Written by "
                  "`python benchmarks/platform_transfer.py --docs`."]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", action="store_true")
    parser.add_argument("--from-results", action="store_true", help="only rewrite the docs")
    args = parser.parse_args()
    if not args.from_results:
        from socialgym.llm import open_client

        rankers = [("chronological", None), ("PPO (engagement)", MODELS / "engagement-seed0" / "policy.pt"),
                   ("PPO (welfare)", MODELS / "welfare-seed0" / "policy.pt")]
        runs = []
        with open_client(None, max_concurrency=1) as client:
            for name, path in rankers:
                runs.append(play(client, name, path))
                print(name, runs[-1]["mean"], runs[-1]["seconds"], "s", flush=True)
        data = {"runs": runs, "machine": machine()}
        RESULTS.write_text(json.dumps(data, indent=1) + "\n")
    data = json.loads(RESULTS.read_text())
    print(markdown(data))
    if args.docs:
        print(f"written to {write_section('platform.md', 'transfer', markdown(data))}")


if __name__ == "__main__":
    main()
