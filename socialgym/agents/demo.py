"""LLM agents on the platform with the embedded local model (or any OpenAI-compatible server).

    python -m socialgym.agents.demo                      # SmolLM2-135M via llama.cpp, 6 agents x 4 rounds
    python -m socialgym.agents.demo --base-url http://127.0.0.1:8000/v1 --model my-model
    python -m socialgym.agents.demo --coach --tie-scorer llm

Prints per-round mean rewards, tie counts, time and tokens, then the requests, tokens and
fallbacks per agent-round. The defaults are the compact settings a 135M-parameter model on two
CPU cores needs: one call per agent-round for the plan and its texts, short texts, topics
chosen from a list, short item lists.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import socialgym
from socialgym.agents.coach import Coach
from socialgym.agents.llm_policy import LLMPolicy
from socialgym.agents.persona import generate_personas, lambdas_matrix
from socialgym.config import REWARD_NAMES
from socialgym.llm import open_client


# What a 135M-parameter model on two CPU cores needs (docs/llm.md): split generation (closed
# choices under the schema, texts asked for plainly), topics from a short list, short quotes of
# others' texts, a small memory view, and no quotes of the agent's own posts (such a small model
# copies them instead of avoiding them: docs/llm.md). Shared with `socialgym demo`.
COMPACT_POLICY = {"generation": "split", "text_chars": 160, "text_tokens": 38, "new_topics": False,
                  "max_topics": 6, "item_chars": 56, "own_posts": 0,
                  "memory": {"recent": 3, "peers_in_prompt": 1, "opinions_in_prompt": 2, "max_chars": 320}}


@dataclass(frozen=True)
class DemoArgs:
    agents: int = 6
    """number of LLM agents"""
    rounds: int = 4
    """rounds (each: act phase + vote phase)"""
    n_actions: int = 2
    """actions per agent per round"""
    seed: int = 0
    base_url: str | None = None
    """an OpenAI-compatible server; None starts the embedded model"""
    model: str | None = None
    coach: bool = False
    """coach every agent (one more call per agent-round)"""
    tie_scorer: str = "logistic"
    """'logistic' (G_theta) or 'llm' (the Tie-Update prompt; one more call per agent-round)"""
    max_concurrency: int = 1
    """1 for the embedded model: its server runs one request at a time, and requests sent in
    order re-use the shared start of the previous prompt"""
    cache: str | None = None
    """response-cache file: a second run with the same arguments replays the first exactly"""


def run(args: DemoArgs) -> dict:
    personas = generate_personas(args.agents, seed=args.seed)
    start = time.perf_counter()
    with open_client(args.base_url, args.model, max_concurrency=args.max_concurrency, temperature=0.7,
                     seed=args.seed, cache=args.cache) as client:
        policy = LLMPolicy(client, personas, coach=Coach(client) if args.coach else None, **COMPACT_POLICY)
        scorer = None
        if args.tie_scorer == "llm":
            from socialgym.ties.llm_scorer import LLMTieScorer
            scorer = LLMTieScorer(client, personas=dict(zip([f"agent_{i}" for i in range(args.agents)], personas)))
        env = socialgym.parallel_env(n_agents=args.agents, max_rounds=args.rounds, n_actions=args.n_actions,
                                     recommender="random", feed_size=4, vote_feed_size=3,
                                     lambdas=lambdas_matrix(personas), tie_scorer=scorer, seed=args.seed)
        obs, _ = env.reset(seed=args.seed)
        print(f"socialgym LLM demo: {args.agents} agents, {args.rounds} rounds, model {client.model} "
              f"({client.mode or client.structured} structured output)")
        print(f"{'round':>5} " + " ".join(f"{r:>6}" for r in REWARD_NAMES) + f" {'total':>6} {'ties':>5} "
              f"{'secs':>6} {'tokens':>7}")
        while env.agents:
            t0, tok0 = time.perf_counter(), client.usage.total()["completion_tokens"]
            obs, _, _, _, _ = env.step(policy.act(obs))
            obs, _, _, _, _ = env.step(policy.act(obs))
            rec = env.unwrapped.last_round
            t = client.usage.total()
            print(f"{rec.round:>5} " + " ".join(f"{v:6.3f}" for v in rec.components.mean(axis=0)) +
                  f" {rec.totals.mean():6.3f} {env.unwrapped.tie_matrix().nnz:>5} "
                  f"{time.perf_counter() - t0:6.1f} {t['completion_tokens'] - tok0:>7}")
        last = env.unwrapped.round_transcript()
        sample = [e for e in last if e["kind"] != "VOTE"][:3]
        per = client.usage.per_agent_round()
        total = client.usage.total()
        elapsed = time.perf_counter() - start
        print("sample of the last round:")
        for e in sample:
            print(f"  {e['sender']} {e['kind']}{' -> ' + e['recipient'] if e['recipient'] else ''}"
                  f" [{e['topic']}]: {e['text'][:100]}")
        print(f"per agent-round: {per['requests']:.2f} requests, {per['prompt_tokens']:.0f} prompt tokens, "
              f"{per['completion_tokens']:.0f} completion tokens, "
              f"{elapsed / max(1, per['agent_rounds']):.2f} s")
        print(f"total: {total['requests']} requests ({total['cached']} from cache), {total['repairs']} "
              f"re-prompts, {total['fallbacks']} fallbacks, {elapsed:.1f} s")
        for f in client.usage.fallback_rows()[:5]:
            print(f"  fallback: {f['agent']} round {f['round']} {f['purpose']} slot {f['slot']}: {f['reason'][:120]}")
        return {"seconds": elapsed, "per_agent_round": per, "total": total}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    defaults = DemoArgs()
    parser.add_argument("--agents", type=int, default=defaults.agents)
    parser.add_argument("--rounds", type=int, default=defaults.rounds)
    parser.add_argument("--n-actions", type=int, default=defaults.n_actions)
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--base-url", default=None)
    parser.add_argument("--model", default=None)
    parser.add_argument("--coach", action="store_true")
    parser.add_argument("--tie-scorer", choices=("logistic", "llm"), default="logistic")
    parser.add_argument("--max-concurrency", type=int, default=defaults.max_concurrency)
    parser.add_argument("--cache", default=None)
    a = parser.parse_args(argv)
    if a.base_url is not None and a.model is None:
        parser.error("--model is required with --base-url")
    run(DemoArgs(a.agents, a.rounds, a.n_actions, a.seed, a.base_url, a.model, a.coach, a.tie_scorer,
                 a.max_concurrency, a.cache))


if __name__ == "__main__":
    main()
