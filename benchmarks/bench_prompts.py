"""Prompt tokens and prefix reuse of LLM agents, measured on a recording fake server.

    python benchmarks/bench_prompts.py            # writes benchmarks/results_prompts.json and docs/benchmarks.md

20 agents (the bundled climate-change personas) x 10 rounds, 3 actions, feed 10, vote feed 10,
random recommender, against the loopback fake server, which records every request body. Text
requests get one of a few English sentences back (about 25 words, like a real model's), plan and
vote requests a random instance of their schema (in joint mode with one of the same sentences as
each action's text). Tokens are cl100k (``bpe-openai``, the
tiktoken vocabulary in a wheel: nothing is downloaded).

Each request is rendered the way a server sees it:

- **grammar servers** (vLLM, llama.cpp): the schema becomes a grammar, the prompt is the chat
  messages (``<|im_start|>role ... <|im_end|>``);
- **OpenAI**: the response schema is placed in front of the messages.

*Reusable* tokens of a request are the longest token prefix it shares with the same agent's
previous request (the issue's measure) and, as a second figure, with any earlier request of that
agent (what a prefix cache holding several prefixes, as vLLM's and OpenAI's do, can reuse).
Tokens per action = prompt tokens per agent-round / actions per round.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _docs import write_section  # noqa: E402

AGENTS, ROUNDS, N_ACTIONS = 20, 10, 3
OASIS_TOKENS_PER_ACTION = 2673         # OASIS's Reddit set-up, measured in issue 14 (same fake, cl100k)
SENTENCES = (
    "Solar panels on every school roof would cut bills and teach kids about energy at the same time.",
    "I am not convinced the carbon tax helps families who already struggle with rent and food prices.",
    "Our town planted two hundred trees last spring, and the park already feels cooler in the afternoon.",
    "Has anyone here switched to a heat pump, and was the winter bill really lower than with gas?",
    "Electric buses are quiet and clean, but the city still needs a plan for charging them at night.",
    "Farmers need support to change how they work, not lectures from people who never grew anything.",
    "The flood last month showed how badly our drains were designed for the rain we get now.",
    "Thanks for sharing that study, it changed how I think about nuclear power as part of the mix.",
)


def _render(body: dict, openai_layout: bool) -> str:
    chat = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in body["messages"])
    fmt = body.get("response_format") or {}
    schema = (fmt.get("json_schema") or {}).get("schema") or fmt.get("schema")
    if openai_layout and schema is not None:
        return json.dumps(schema, separators=(",", ":")) + "\n" + chat
    return chat


def _lcp(a: np.ndarray, b: np.ndarray) -> int:
    n = min(len(a), len(b))
    diff = np.nonzero(a[:n] != b[:n])[0]
    return int(diff[0]) if len(diff) else n


def _users(listed: str) -> tuple[str, ...]:
    """The users of the plan prompt's list, which may be a range ("agent_0 to agent_19 except agent_4")."""
    found = re.fullmatch(r"(\D*?)(\d+) to \D*?(\d+)(?: except \D*?(\d+))?", listed)
    if found is None:
        return tuple(listed.split(", "))
    prefix, low, high, gap = found.group(1), int(found.group(2)), int(found.group(3)), found.group(4)
    return tuple(f"{prefix}{i}" for i in range(low, high + 1) if gap is None or i != int(gap))


def _valid_reply(body: dict, schema: dict, rng: random.Random):
    """A reply that a model obeying the prompt would give: ids taken from the listed ones, so
    that ``schema_ids="validate"`` (plain ints and strings in the schema) is measured without
    re-prompts. Plans are drawn from the enum schema of what the prompt lists."""
    from socialgym.llm.schemas import PlanContext, plan_schema
    from socialgym.llm.testing import sample_schema

    user = body["messages"][-1]["content"]
    if "actions" in schema["properties"]:
        users = _users(re.search(r"Users you can interact with: ([^\n(]*)", user).group(1).strip())
        posts = tuple(int(i) for i in re.findall(r"^- id (\d+) by ", user, re.M))
        dms = tuple((int(i), a) for i, a in re.findall(r"^- DM id (\d+) from (\S+) ", user, re.M))
        n = schema["properties"]["actions"]["minItems"]
        rnd = int(re.search(r"Round (\d+)\.", user).group(1))
        with_text = '"text"' in json.dumps(schema)
        ctx = PlanContext("a", rnd, n, users if users != ("none",) else (), posts, dms, with_text=with_text)
        plan = sample_schema(plan_schema(ctx), rng)
        for action in plan["actions"]:       # joint: texts as long as the split mode's, like a model's
            if "text" in action:
                action["text"] = rng.choice(SENTENCES)
        return plan
    ids = [int(i) for i in re.findall(r"^- (\d+) \S+: ", user, re.M)]
    stance = rng.choice(schema["properties"]["stance"]["enum"])
    votes = [{"id": i, "vote": rng.choice([1, 0, -1])} for i in ids]
    if schema["properties"]["votes"].get("type") == "object":
        return {"votes": {str(v["id"]): v["vote"] for v in votes}, "stance": stance}
    return {"votes": votes, "stance": stance}


def run(generation: str, schema_ids: str, encoding) -> dict:
    import socialgym
    from socialgym.agents import LLMPolicy
    from socialgym.agents.persona import climate_change_personas, lambdas_matrix
    from socialgym.llm import LLMClient
    from socialgym.llm.testing import FakeServer, schema_of

    rng = random.Random(0)

    def responder(body, n):
        schema = schema_of(body)
        if schema is None:
            return rng.choice(SENTENCES)
        return json.dumps(_valid_reply(body, schema, rng))

    personas = climate_change_personas(AGENTS)
    with FakeServer(responder, seed=0) as server, \
            LLMClient(server.base_url, "fake", api_key="bench", max_concurrency=64, seed=0) as client:
        policy = LLMPolicy(client, personas, generation=generation, schema_ids=schema_ids)
        env = socialgym.parallel_env(n_agents=AGENTS, max_rounds=ROUNDS, n_actions=N_ACTIONS, feed_size=10,
                                     vote_feed_size=10, recommender="random", lambdas=lambdas_matrix(personas),
                                     seed=0)
        obs, _ = env.reset(seed=0)
        marks = []
        while env.agents:
            obs, *_ = env.step(policy.act(obs))
            obs, *_ = env.step(policy.act(obs))
            marks.append(len(server.requests))
        bodies = list(server.requests)
        repairs = client.usage.repairs
    names = {p.name: f"agent_{i}" for i, p in enumerate(personas)}

    def owner(body: dict) -> str:
        system = body["messages"][0]["content"]
        return next(a for name, a in names.items() if f"You are {name}," in system)

    out: dict = {"generation": generation, "schema_ids": schema_ids, "requests": len(bodies), "repairs": repairs,
                 "requests_per_agent_round": len(bodies) / (AGENTS * ROUNDS)}
    round_of = np.searchsorted(np.array(marks), np.arange(len(bodies)), side="right") + 1
    for layout in ("grammar", "openai"):
        tokens = [np.array(encoding.encode(_render(b, layout == "openai")), dtype=np.int64) for b in bodies]
        history: dict[str, list[np.ndarray]] = {}
        prev = any_ = total = 0
        per_round = np.zeros(ROUNDS)
        for body, toks, r in zip(bodies, tokens, round_of):
            seen = history.setdefault(owner(body), [])
            if seen:
                prev += _lcp(toks, seen[-1])
                any_ += max(_lcp(toks, s) for s in seen)
            seen.append(toks)
            total += len(toks)
            per_round[r - 1] += len(toks)
        per_agent_round = total / (AGENTS * ROUNDS)
        out[layout] = {"prompt_tokens_per_agent_round": round(per_agent_round, 1),
                       "tokens_per_action": round(per_agent_round / N_ACTIONS, 1),
                       "reusable_from_previous": round(prev / total, 3),
                       "reusable_from_any_earlier": round(any_ / total, 3),
                       "tokens_per_agent_round_by_round": [round(v / AGENTS, 1) for v in per_round]}
    return out


def markdown(results: list[dict]) -> str:
    lines = [f"{AGENTS} agents x {ROUNDS} rounds, {N_ACTIONS} actions, feed 10, vote feed 10, climate-change "
             f"personas, recording fake server, cl100k tokens (`python benchmarks/bench_prompts.py`).", "",
             "| generation | schema ids | server layout | requests / agent-round | prompt tokens / agent-round "
             "| tokens / action | reusable from the previous request | reusable from any earlier request |",
             "|---|---|---|---:|---:|---:|---:|---:|"]
    for r in results:
        for layout, label in (("grammar", "grammar (vLLM, llama.cpp)"), ("openai", "schema first (OpenAI)")):
            m = r[layout]
            lines.append(f"| {r['generation']} | {r['schema_ids']} | {label} | {r['requests_per_agent_round']:.2f} | "
                         f"{m['prompt_tokens_per_agent_round']:,.0f} | {m['tokens_per_action']:,.0f} | "
                         f"{100 * m['reusable_from_previous']:.0f} % | {100 * m['reusable_from_any_earlier']:.0f} % |")
    target = OASIS_TOKENS_PER_ACTION / 5
    lines += ["", f"Targets (issues 14 and 30): tokens per action at most a fifth of OASIS's "
              f"{OASIS_TOKENS_PER_ACTION:,} (= {target:,.0f}); at least 60 % of each agent's prompt tokens reusable "
              "from its previous request. *New tokens* are those not reusable from the previous request, per "
              "agent-round; the last column is the most reuse a layout could reach with the same new tokens at the "
              "token target (1 - new tokens / (target x actions)): below 60 %, the two targets cannot both hold "
              "without showing the agent less.",
              "", "| generation | schema ids | server layout | tokens / action <= "
              f"{target:,.0f} | reusable from the previous request >= 60 % | new tokens / agent-round "
              "| reuse possible at the token target |", "|---|---|---|---|---|---:|---:|"]
    for r in results:
        for layout in ("grammar", "openai"):
            m = r[layout]
            ok1 = "met" if m["tokens_per_action"] <= target else "**not met**"
            ok2 = "met" if m["reusable_from_previous"] >= 0.6 else "**not met**"
            new = m["prompt_tokens_per_agent_round"] * (1 - m["reusable_from_previous"])
            bound = max(0.0, 1 - new / (target * N_ACTIONS))
            lines.append(f"| {r['generation']} | {r['schema_ids']} | {layout} | {ok1} ({m['tokens_per_action']:,.0f}) | "
                         f"{ok2} ({100 * m['reusable_from_previous']:.0f} %) | {new:,.0f} | {100 * bound:.0f} % |")
    growth = results[0]["grammar"]["tokens_per_agent_round_by_round"]
    lines += ["", "Prompt tokens per agent-round by round (first row above): "
              + ", ".join(f"{v:,.0f}" for v in growth) + "."]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=str(Path(__file__).with_name("results_prompts.json")))
    parser.add_argument("--no-docs", action="store_true", help="do not rewrite the table in docs/benchmarks.md")
    args = parser.parse_args()
    import bpe_openai

    encoding = bpe_openai.get_encoding("cl100k_base")
    results = [run(g, ids, encoding) for g in ("split", "joint") for ids in ("enum", "validate")]
    Path(args.out).write_text(json.dumps(results, indent=1) + "\n")
    table = markdown(results)
    print(table)
    if not args.no_docs:
        print(f"written to {write_section('benchmarks.md', 'bench_prompts', table)}")


if __name__ == "__main__":
    main()
