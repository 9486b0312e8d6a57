"""LLM-layer cost: framework overhead against a fixed-latency fake server, and the embedded model.

    python benchmarks/bench_llm.py                 # overhead (128 agents, both modes) + embedded model
    python benchmarks/bench_llm.py --skip-local    # overhead only

Overhead (issue 14): ``LLMPolicy`` over a fake server with a fixed 1 s latency in its own process
(real HTTP on loopback, schema-valid random replies), ``max_concurrency=64``, 128 agents, one
round = act phase + env step + vote phase + env step. Round 1 is warm-up (client start, format
detection); rounds 2-3 are timed. The ideal is what the mode's dependency structure allows with
64 requests in flight: per phase, ``max(depth, ceil(requests / 64))`` latencies, where the depth
is 1 for a phase of independent requests (joint's plans, every vote phase) and 2 for split's act
phase (an agent's texts wait for its own plan). The target: at most 1.10x the ideal.

Client CPU per request: 2,000 requests, 64 in flight, zero latency; the official openai client
(typed reply, dict reply) and raw aiohttp for reference.

Embedded model: the ``socialgym.agents.demo`` configuration (6 agents x 4 rounds, SmolLM2-135M
via llama.cpp on this machine, split generation), seconds and tokens per agent-round.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _docs import write_section  # noqa: E402

LATENCY = 1.0
SLOTS = 64


def overhead(n_agents: int, generation: str, rounds: int = 3) -> dict:
    import socialgym
    from socialgym.agents import LLMPolicy
    from socialgym.llm import LLMClient
    from socialgym.llm.testing import FakeServerProcess

    rows = []
    with FakeServerProcess(latency=LATENCY) as server, \
            LLMClient(server.base_url, "fake", api_key="bench", max_concurrency=SLOTS) as client:
        policy = LLMPolicy(client, generation=generation)
        env = socialgym.parallel_env(n_agents=n_agents, max_rounds=rounds, seed=0, recommender="random")
        obs, _ = env.reset(seed=0)

        def sent() -> int:
            return sum(c.attempts for c in client.usage.calls)

        while env.agents:
            calls0 = sent()
            t0 = time.perf_counter()
            obs, _, _, _, _ = env.step(policy.act(obs))
            act_calls = sent() - calls0
            obs, _, _, _, _ = env.step(policy.act(obs))
            seconds = time.perf_counter() - t0
            vote_calls = sent() - calls0 - act_calls
            rows.append({"seconds": seconds, "act_calls": act_calls, "vote_calls": vote_calls})
        per = client.usage.per_agent_round()
    timed = rows[1:]
    depth = 2 if generation == "split" else 1
    ideal = sum(max(depth, math.ceil(r["act_calls"] / SLOTS)) + max(1, math.ceil(r["vote_calls"] / SLOTS))
                for r in timed) / len(timed) * LATENCY
    seconds = sum(r["seconds"] for r in timed) / len(timed)
    return {"agents": n_agents, "generation": generation,
            "calls_per_round": sum(r["act_calls"] + r["vote_calls"] for r in timed) / len(timed),
            "seconds_per_round": round(seconds, 3), "ideal_s": round(ideal, 3), "ratio_to_ideal": round(seconds / ideal, 3),
            "calls_per_agent_round": round(per["requests"], 2),
            "prompt_tokens_per_agent_round": round(per["prompt_tokens"], 1),
            "completion_tokens_per_agent_round": round(per["completion_tokens"], 1)}


def client_cpu(n_requests: int = 2000) -> dict:
    """Client CPU per request against a zero-latency fake server (64 in flight): what each wave
    of 64 simultaneous replies costs the single event loop. The raw-aiohttp row is a reference
    point only (LLMClient sits on the official openai client)."""
    import asyncio

    from openai.types.chat import ChatCompletion

    from socialgym.llm.testing import FakeServerProcess

    body = {"model": "fake", "temperature": 0.7, "max_tokens": 200,
            "messages": [{"role": "system", "content": "x" * 2500}, {"role": "user", "content": "y" * 1200}],
            "response_format": {"type": "json_schema", "json_schema": {
                "name": "r", "schema": {"type": "object", "properties": {"a": {"type": "string"}}}}}}

    async def timed(one) -> float:
        sem = asyncio.Semaphore(SLOTS)

        async def bounded():
            async with sem:
                return await one()
        await bounded()                        # connect, warm up
        c0 = time.process_time()
        await asyncio.gather(*[bounded() for _ in range(n_requests)])
        return (time.process_time() - c0) / n_requests * 1e3

    async def via_openai(url: str, cast) -> float:
        import openai

        api = openai.AsyncOpenAI(base_url=url, api_key="bench", max_retries=0,
                                 http_client=openai.DefaultAioHttpClient(timeout=30))
        try:
            return await timed(lambda: api.post("/chat/completions", body=body, cast_to=cast))
        finally:
            await api.close()

    async def via_aiohttp(url: str) -> float:
        import aiohttp

        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
            async def one():
                async with session.post(url + "/chat/completions", data=json.dumps(body).encode(),
                                        headers={"content-type": "application/json"}) as r:
                    return json.loads(await r.read())
            return await timed(one)

    with FakeServerProcess(latency=0.0) as server:
        return {"openai_typed_ms": round(asyncio.run(via_openai(server.base_url, ChatCompletion)), 3),
                "openai_dict_ms": round(asyncio.run(via_openai(server.base_url, dict)), 3),
                "raw_aiohttp_ms": round(asyncio.run(via_aiohttp(server.base_url)), 3)}


def embedded() -> dict:
    from socialgym.agents.demo import DemoArgs, run

    result = run(DemoArgs())
    per = result["per_agent_round"]
    return {"agents": 6, "rounds": 4, "n_actions": 2, "generation": "split",
            "total_seconds": round(result["seconds"], 1),
            "seconds_per_agent_round": round(result["seconds"] / per["agent_rounds"], 2),
            "calls_per_agent_round": round(per["requests"], 2),
            "prompt_tokens_per_agent_round": round(per["prompt_tokens"], 1),
            "completion_tokens_per_agent_round": round(per["completion_tokens"], 1),
            "repairs": result["total"]["repairs"], "fallbacks": result["total"]["fallbacks"]}


def markdown(out: dict) -> str:
    lines = [f"Fake server with a fixed {LATENCY:g} s latency in its own process, `max_concurrency={SLOTS}`, "
             f"rounds 2-3 timed (`python benchmarks/bench_llm.py`, {out['machine']}).", "",
             "| agents | generation | requests / round | s / round | ideal (s) | x ideal | requests / agent-round "
             "| prompt tokens / agent-round | completion tokens / agent-round |",
             "|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in out["overhead"]:
        lines.append(f"| {r['agents']} | {r['generation']} | {r['calls_per_round']:.0f} | {r['seconds_per_round']:.2f} | "
                     f"{r['ideal_s']:.0f} | {r['ratio_to_ideal']:.3f} | {r['calls_per_agent_round']:.2f} | "
                     f"{r['prompt_tokens_per_agent_round']:,.0f} | {r['completion_tokens_per_agent_round']:,.0f} |")
    worst = max(r["ratio_to_ideal"] for r in out["overhead"])
    lines += ["", f"Target: at most 1.10x the ideal in both modes: **{'met' if worst <= 1.10 else 'not met'}** "
              f"(worst {worst:.3f}x). Prompt tokens here are the fake's count (characters / 4); "
              "cl100k counts are in the prompt-layout table.",
              "", "Client CPU per request (ms, 64 in flight, zero latency): "
              + ", ".join(f"{k} {v}" for k, v in out["client_cpu_per_request"].items()) + "."]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agents", type=int, nargs="+", default=[128])
    parser.add_argument("--skip-local", action="store_true")
    parser.add_argument("--no-docs", action="store_true", help="do not rewrite the table in docs/benchmarks.md")
    parser.add_argument("--out", default=str(Path(__file__).with_name("results_llm.json")))
    args = parser.parse_args()
    out = {"machine": f"{platform.machine()}, {__import__('os').cpu_count()} cores", "overhead": []}
    for n in args.agents:
        for generation in ("joint", "split"):
            out["overhead"].append(overhead(n, generation))
            print(json.dumps(out["overhead"][-1]))
    out["client_cpu_per_request"] = client_cpu()
    print("client CPU per request (ms):", out["client_cpu_per_request"])
    if not args.skip_local:
        out["embedded"] = embedded()
        print(json.dumps(out["embedded"], indent=1))
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    if not args.no_docs:
        print(f"written to {write_section('benchmarks.md', 'bench_llm', markdown(out))}")


if __name__ == "__main__":
    main()
