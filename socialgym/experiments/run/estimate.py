"""``socialgym estimate CONFIG``: the requests, tokens, dollars and wall time a config will cost,
before it runs.

Nothing here is a rule of thumb: each sweep cell is simulated once, with the config's real
environment, policies, prompt builders, coach, tie scorer, surveys and interventions, against a
stand-in model (``socialgym.experiments.run.standin``) that answers every request at once with
a schema-valid reply and texts of a realistic length. The cell's counts are then multiplied by
``run.replicates`` (replicates differ only in their seed). A cell that ``run.fork_at`` forks from
the first one counts only its rounds after the fork.

Tokens are counted the stand-in's way (characters // 4 + 1 per request and per reply); see
docs/experiments.md ("Estimating a run") for how far a real tokenizer is from that. Wall time
comes from a throughput: ``--throughput PROMPT_TOK_S,COMPLETION_TOK_S`` as given, or ``--probe``,
which sends a few short requests to the config's server(s) and measures them.
"""

from __future__ import annotations

import asyncio
import math
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from socialgym.config import FeedConfig
from socialgym.experiments.define import ConfigError, ExperimentConfig, LLMConfig, grid, thaw, with_values
from socialgym.experiments.errors import RunError
from socialgym.experiments.run.runner import simulate
from socialgym.experiments.run.standin import ReplyModel, stand_in_client, stand_in_config
from socialgym.llm.budget import Spend, spend, spend_by_model

PROBE_PROMPT_CHARS = 6000
"""Characters of the probe's prefill prompt (about 1,500 tokens)."""
PROBE_COMPLETION_TOKENS = 64
"""Tokens the probe's generation requests ask for."""
PROBE_REQUESTS = 4
"""Requests of each kind the probe sends to each server at once (fewer when it allows fewer)."""


@dataclass(frozen=True)
class Throughput:
    """Tokens per second a server (or all of them together) gets through."""

    prompt: float
    completion: float
    source: str = "--throughput"

    @classmethod
    def parse(cls, text: str) -> "Throughput":
        """``"2000,50"``: prompt and completion tokens per second, both > 0."""
        parts = [p.strip() for p in str(text).split(",")]
        try:
            values = [float(p) for p in parts]
        except ValueError:
            values = []
        if len(values) != 2 or not all(math.isfinite(v) and v > 0 for v in values):
            raise ConfigError(f"--throughput expects PROMPT_TOK_S,COMPLETION_TOK_S, two numbers > 0 (e.g. 2000,50), "
                              f"got {text!r}")
        return cls(values[0], values[1])

    def seconds(self, prompt_tokens: int, completion_tokens: int) -> float:
        return prompt_tokens / self.prompt + completion_tokens / self.completion


def estimate(cfg: ExperimentConfig, *, replies: ReplyModel | None = None,
             throughput: Throughput | None = None) -> dict:
    """The estimate of ``cfg`` (every sweep cell x ``run.replicates``) as plain data: ``cells``
    (each with its condition, runs, requests, tokens, USD and per-model counts), ``total``,
    ``wall_seconds`` (with a throughput) and ``notes``."""
    from socialgym.experiments.run.sweep import condition_id

    prices = thaw(cfg.llm.prices) if cfg.llm is not None and cfg.llm.prices else None
    cells = grid(cfg)
    width = max(2, len(str(len(cells) - 1)))
    runs = cfg.run.replicates
    out_cells, totals, local = [], Spend(usd=0.0 if prices is not None else None), 0.0
    models: dict[str, Spend] = {}
    for index, assignment in enumerate(cells):
        cell = with_values(cfg, assignment) if assignment else cfg
        forked_at = cfg.run.fork_at if cfg.run.fork_at is not None and index > 0 else None
        usage, seconds = _simulate(cell, replies)
        keep = (lambda c, t=forked_at: isinstance(c.round, int) and c.round > t) if forked_at else None
        one = spend(usage, prices, default_model=cell.default_model(), keep=keep)
        for model, part in spend_by_model(usage, prices, default_model=cell.default_model(), keep=keep).items():
            models[model] = models.get(model, Spend(usd=0.0 if prices is not None else None)) + part.times(runs)
        cell_total = one.times(runs)
        totals = totals + cell_total
        local += seconds * runs
        out_cells.append({"condition_id": condition_id(index, thaw(assignment), width), "condition": thaw(assignment),
                          "runs": runs, "forked_at": forked_at, "per_run": one.to_dict(), **cell_total.to_dict(),
                          "simulated_seconds": round(seconds, 3)})
    workers = cfg.run.workers or 1
    result = {"runs": runs * len(cells), "cells": out_cells, "total": totals.to_dict(),
              "models": {m: s.to_dict() for m, s in models.items()},
              "agents": int(cfg.env.get("n_agents", FeedConfig.n_agents)),
              "rounds": int(cfg.env.get("max_rounds", FeedConfig.max_rounds)),
              "local_seconds": round(local / workers, 1), "throughput": None, "wall_seconds": None,
              "notes": _notes(cfg, prices, models)}
    if throughput is not None:
        result["throughput"] = {"prompt": throughput.prompt, "completion": throughput.completion,
                                "source": throughput.source}
        result["wall_seconds"] = round(throughput.seconds(totals.prompt_tokens, totals.completion_tokens)
                                       + local / workers, 1)
    return result


def _simulate(cell: ExperimentConfig, replies: ReplyModel | None) -> tuple[Any, float]:
    """One run of ``cell`` (its first replicate's seed) against the stand-in: its usage log and
    how long it took here."""
    if not cell.uses_llm():
        return _NoUsage(), 0.0
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="socialgym-estimate-") as tmp, \
            stand_in_client(cell, cell.seed, replies) as client:
        summary = simulate(stand_in_config(cell), Path(tmp) / "run", client, seed=cell.seed)
        if summary.get("status") != "complete":
            raise RunError(f"estimate: the simulation with the stand-in model did not complete "
                           f"({summary.get('status')}: {summary.get('error')})")
        return client.usage, time.perf_counter() - t0


class _NoUsage:
    calls: list = []


def _notes(cfg: ExperimentConfig, prices: Mapping | None, models: Mapping) -> list[str]:
    notes = []
    if not cfg.uses_llm():
        notes.append("this config makes no LLM requests")
    elif prices is None:
        notes.append("no llm.prices: USD not estimated")
    else:
        missing = [m for m in models if m not in prices]
        if missing:
            notes.append(f"no price for {', '.join(missing)}: USD not estimated")
    if cfg.run.replicates > 1:
        notes.append(f"each cell simulated once (seed of replicate 0) and counted x {cfg.run.replicates} replicates")
    return notes


# ---------------------------------------------------------------------------------- --probe
def probe(cfg: ExperimentConfig, requests: int = PROBE_REQUESTS) -> Throughput:
    """Measure the config's server(s): ``requests`` long prompts with a one-token reply at once
    (prompt tokens per second), then ``requests`` short prompts asking for
    :data:`PROBE_COMPLETION_TOKENS` tokens at once (completion tokens per second), per server;
    the servers' rates are added (they work side by side). The embedded model is started for it."""
    from socialgym.llm import open_client

    llm = cfg.llm or LLMConfig()
    servers = [(e.name, e.base_url, e.model, e.api_key, e.api_key_env or llm.api_key_env, e.max_concurrency)
               for e in llm.endpoints] or [("server", llm.base_url, llm.model, llm.api_key, llm.api_key_env,
                                            llm.max_concurrency)]
    prompt_rate = completion_rate = 0.0
    from socialgym.llm.router import PlainHttpKeyError

    for name, url, model, key, key_env, concurrency in servers:
        k = max(1, min(requests, concurrency, llm.max_concurrency))
        try:
            with open_client(url, model, api_key=key, api_key_env=key_env, n_ctx=llm.n_ctx, max_concurrency=k,
                             timeout=llm.timeout, max_retries=1, max_tokens=PROBE_COMPLETION_TOKENS, cache=None,
                             temperature=0.0, allow_plain_http=llm.allow_plain_http) as client:
                p, c = _probe_one(client, k)
        except PlainHttpKeyError as exc:
            raise RunError(f"--probe: {exc}") from None
        if p <= 0 or c <= 0:
            raise RunError(f"--probe: {name} ({url or 'the embedded model'}) reported no token counts; "
                           "give --throughput PROMPT_TOK_S,COMPLETION_TOK_S instead")
        prompt_rate += p
        completion_rate += c
    what = f"--probe of {len(servers)} server{'s' if len(servers) > 1 else ''}, {requests} requests at once"
    return Throughput(prompt_rate, completion_rate, what)


def _probe_one(client, k: int) -> tuple[float, float]:
    from socialgym.llm.client import LLMError, LLMServerDown

    filler = ("The council met on Tuesday to discuss the new bus routes and the budget for next year. " *
              (PROBE_PROMPT_CHARS // 90 + 1))[:PROBE_PROMPT_CHARS]
    prefill = [{"role": "user", "content": f"{filler}\nReply with the single word: ok"}]
    decode = [{"role": "user", "content": "Write the numbers from 1 to 200 in words, separated by commas."}]

    async def batch(messages, max_tokens, tag):
        return await asyncio.gather(*(client.chat(messages + [{"role": "user", "content": f"(probe {tag}.{i})"}],
                                                  purpose="probe", max_tokens=max_tokens) for i in range(k)))
    def send(messages, max_tokens, tag):
        try:
            client.run(batch(messages, max_tokens, tag))
        except LLMError as exc:
            if getattr(exc, "unreachable", False):       # no server there: as a run's round stops
                raise LLMServerDown(f"--probe: no server to connect to at {client.base_url}: {exc}",
                                    base_url=client.base_url) from None
            raise RunError(f"--probe: {client.base_url} did not answer: {exc}") from None

    send(decode, 1, "w")                               # warm up: connections, a loaded model
    rates = []
    for messages, max_tokens, field in ((prefill, 1, "prompt_tokens"), (decode, PROBE_COMPLETION_TOKENS,
                                                                        "completion_tokens")):
        before = len(client.usage.calls)
        t0 = time.perf_counter()
        send(messages, max_tokens, field)
        seconds = max(time.perf_counter() - t0, 1e-6)
        rates.append(sum(getattr(c, field) for c in client.usage.calls[before:]) / seconds)
    return rates[0], rates[1]


# ---------------------------------------------------------------------------------- the table
def format_estimate(result: Mapping, source: str = "") -> str:
    """The estimate as a small text table."""
    total, cells = result["total"], result["cells"]
    usd = "usd" in total
    head = f"{'cell':<40} {'runs':>5} {'requests':>10} {'prompt tok':>13} {'compl. tok':>12}" + (f" {'USD':>10}" if usd else "")
    lines = [f"socialgym estimate{': ' + source if source else ''}: {len(cells)} cell{'s' if len(cells) != 1 else ''} "
             f"x {cells[0]['runs'] if cells else 0} replicate(s) = {result['runs']} run(s) of {result['agents']} agents "
             f"x {result['rounds']} rounds", "", head, "-" * len(head)]

    def row(name: str, runs: int, s: Mapping) -> str:
        text = (f"{name[:40]:<40} {runs:>5} {s['requests']:>10,} {s['prompt_tokens']:>13,} "
                f"{s['completion_tokens']:>12,}")
        if not usd or s.get("usd") is None:
            return text
        return text + (f" {s['usd']:>10,.2f}" if s["usd"] >= 1 or s["usd"] == 0 else f" {s['usd']:>10.4f}")
    lines += [row(c["condition_id"] + (f" (fork after {c['forked_at']})" if c["forked_at"] else ""), c["runs"], c)
              for c in cells]
    lines += ["-" * len(head), row("total", result["runs"], total), ""]
    if result["wall_seconds"] is not None:
        t = result["throughput"]
        lines.append(f"wall time: about {_duration(result['wall_seconds'])} at {t['prompt']:,.0f} prompt + "
                     f"{t['completion']:,.1f} completion tokens/s ({t['source']}), with "
                     f"{_duration(result['local_seconds'])} of simulation")
    else:
        lines.append(f"wall time: give --throughput PROMPT_TOK_S,COMPLETION_TOK_S or --probe "
                     f"(simulation alone: {_duration(result['local_seconds'])})")
    lines.append("tokens: counted as characters / 4 (a real tokenizer differs: docs/experiments.md, "
                 "'Estimating a run')")
    lines += [f"note: {n}" for n in result["notes"]]
    return "\n".join(lines)


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


__all__ = ["Throughput", "estimate", "probe", "format_estimate", "PROBE_REQUESTS"]
