"""LLM-layer cost: framework overhead against a fixed-latency fake server, and the embedded model.

    python benchmarks/bench_llm.py                 # overhead (100 and 128 agents) + embedded model
    python benchmarks/bench_llm.py --skip-local    # overhead only

Overhead: ``LLMPolicy`` over a fake server with a fixed 0.2 s latency in its own process (real
HTTP on loopback, schema-valid random replies), ``max_concurrency=64``, one round = act phase + env step + vote phase + env
step. Round 1 is warm-up (client start, format detection); rounds 2-4 are timed. Two ideals:

- the issue's: ``calls x latency / 64``;
- the wave bound: the vote phase cannot start before every agent has acted, so each phase
  needs at least ``ceil(calls_in_phase / 64)`` latencies; this is the least any client can do.

Client CPU per request: 2,000 requests, 64 in flight, zero latency; the official openai client
(typed reply, dict reply) and raw aiohttp for reference.

Embedded model: the ``socialgym.agents.demo`` configuration (6 agents x 4 rounds, SmolLM2-135M
via llama.cpp on this machine), seconds and tokens per agent-round.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import time
from pathlib import Path

LATENCY = 0.2
SLOTS = 64


def overhead(n_agents: int, rounds: int = 4) -> dict:
    import socialgym
    from socialgym.agents import LLMPolicy
    from socialgym.llm import LLMClient
    from socialgym.llm.testing import FakeServerProcess

    rows = []
    with FakeServerProcess(latency=LATENCY) as server, \
            LLMClient(server.base_url, "fake", api_key="bench", max_concurrency=SLOTS) as client:
        policy = LLMPolicy(client)
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
    calls = sum(r["act_calls"] + r["vote_calls"] for r in timed) / len(timed)
    seconds = sum(r["seconds"] for r in timed) / len(timed)
    ideal = calls * LATENCY / SLOTS
    waves = sum(math.ceil(r["act_calls"] / SLOTS) + math.ceil(r["vote_calls"] / SLOTS) for r in timed) / len(timed)
    wave_bound = waves * LATENCY
    return {"agents": n_agents, "calls_per_round": calls, "seconds_per_round": round(seconds, 3),
            "ideal_s": round(ideal, 3), "ratio_to_ideal": round(seconds / ideal, 3),
            "wave_bound_s": round(wave_bound, 3), "ratio_to_wave_bound": round(seconds / wave_bound, 3),
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
    return {"agents": 6, "rounds": 4, "n_actions": 2, "total_seconds": round(result["seconds"], 1),
            "seconds_per_agent_round": round(result["seconds"] / per["agent_rounds"], 2),
            "calls_per_agent_round": round(per["requests"], 2),
            "prompt_tokens_per_agent_round": round(per["prompt_tokens"], 1),
            "completion_tokens_per_agent_round": round(per["completion_tokens"], 1),
            "repairs": result["total"]["repairs"], "fallbacks": result["total"]["fallbacks"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agents", type=int, nargs="+", default=[100, 128])
    parser.add_argument("--skip-local", action="store_true")
    parser.add_argument("--out", default=str(Path(__file__).with_name("results_llm.json")))
    args = parser.parse_args()
    out = {"machine": f"{platform.machine()}, {__import__('os').cpu_count()} cores", "overhead": []}
    print(f"{'agents':>6} {'calls':>6} {'s/round':>8} {'ideal':>6} {'x ideal':>8} {'wave bd':>8} {'x wave':>7} "
          f"{'calls/ar':>8} {'prompt/ar':>9} {'compl/ar':>8}")
    for n in args.agents:
        r = overhead(n)
        out["overhead"].append(r)
        print(f"{r['agents']:>6} {r['calls_per_round']:>6.0f} {r['seconds_per_round']:>8.3f} {r['ideal_s']:>6.3f} "
              f"{r['ratio_to_ideal']:>8.3f} {r['wave_bound_s']:>8.3f} {r['ratio_to_wave_bound']:>7.3f} "
              f"{r['calls_per_agent_round']:>8.2f} {r['prompt_tokens_per_agent_round']:>9.0f} "
              f"{r['completion_tokens_per_agent_round']:>8.0f}")
    out["client_cpu_per_request"] = client_cpu()
    print("client CPU per request (ms):", out["client_cpu_per_request"])
    if not args.skip_local:
        out["embedded"] = embedded()
        print(json.dumps(out["embedded"], indent=1))
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
