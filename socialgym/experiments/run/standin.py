"""A stand-in model for predicting what a config will cost: a loopback server that answers every
request at once with a schema-valid reply, and the client and config settings a simulation
with it runs under.

The run itself is the real one (``socialgym.experiments.run.runner.simulate``): the config's
environment, policies, prompt builders, coach, tie scorer, surveys and interventions, so the
requests and prompts are those a real run would send; only the replies are made up. A reply is a
pure function of its request (the same config gives the same estimate): a random instance of the
request's JSON schema, where

- an enum, a number, a boolean, an array's length are drawn uniformly from what the schema allows
  (as a model that follows the schema but has no preference would);
- a topic (a string with a ``pattern``) is a short topic word;
- an id left open by the schema (``schema_ids: validate``) is one that the prompt lists;
- free text — a JSON string with a ``maxLength``, or a plain-text reply — has ``chars``
  characters when :class:`ReplyModel` gives them, else ``fill`` x its limit (the ``maxLength``, or
  4 characters per token of the request's ``max_tokens``): a model that writes three quarters
  of what it may.

Tokens are the stand-in server's count: characters of the messages // 4 + 1 per request,
characters of the reply // 4 + 1 (``socialgym.llm.testing.FakeServer``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import random
import re
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Iterator

from socialgym.config import FeedConfig
from socialgym.experiments.define import ExperimentConfig, LLMConfig, from_dict, to_dict

TOPIC_WORDS = ("climate", "energy", "transport", "housing", "health", "schools", "local news", "technology")
FILLER = ("the", "city", "council", "plan", "makes", "sense", "to", "me", "but", "I", "would", "like", "more",
          "detail", "on", "costs", "and", "who", "pays", "for", "it", "people", "here", "care", "about")
SCHEMA_MARK = "schema: "
"""How the client appends a schema to the prompt (``structured: prompt``)."""
_IDS = re.compile(r"\b(agent_\d+)\b")
_NUMBERS = re.compile(r"\bid (\d+)\b")


@dataclass(frozen=True)
class ReplyModel:
    """How long the stand-in's free texts are: ``chars`` characters each (capped by the text's
    limit), or, ``chars`` None, ``fill`` x the limit."""

    fill: float = 0.75
    chars: int | None = None

    def length(self, limit: int) -> int:
        wanted = self.chars if self.chars is not None else round(self.fill * limit)
        return max(1, min(int(wanted), int(limit)))


class StandIn:
    """The stand-in's answer to one request body (``FakeServer``'s ``responder``)."""

    def __init__(self, replies: ReplyModel | None = None) -> None:
        self.replies = replies or ReplyModel()

    def __call__(self, body: dict, n: int) -> str:
        from socialgym.llm.testing import schema_of

        messages = body.get("messages") or []
        schema = schema_of(body) or _schema_in_prompt(messages)
        canonical = json.dumps([messages, schema, body.get("max_tokens"), body.get("seed")], sort_keys=True,
                               default=str)
        rng = random.Random(hashlib.sha256(canonical.encode("utf-8", "replace")).digest())
        prompt = " ".join(str(m.get("content", "")) for m in messages if isinstance(m, dict))
        if schema is None:
            limit = 4 * int(body.get("max_tokens") or 64)
            return _text(rng, self.replies.length(limit))
        return json.dumps(self._value(schema, rng, prompt))

    def _value(self, schema: dict, rng: random.Random, prompt: str) -> Any:
        if "anyOf" in schema:
            return self._value(rng.choice(schema["anyOf"]), rng, prompt)
        if "enum" in schema:
            return rng.choice(schema["enum"])
        kind = schema.get("type")
        if isinstance(kind, list):
            kind = rng.choice(kind)
        if kind == "object":
            return {k: self._value(v, rng, prompt) for k, v in (schema.get("properties") or {}).items()}
        if kind == "array":
            low = int(schema.get("minItems", 1))
            n = rng.randint(low, max(low, int(schema.get("maxItems", low))))
            return [self._value(schema.get("items") or {"type": "string"}, rng, prompt) for _ in range(n)]
        if kind == "string":
            return self._string(schema, rng, prompt)
        if kind == "integer":
            low, high = schema.get("minimum"), schema.get("maximum")
            if low is None and high is None:
                listed = _NUMBERS.findall(prompt)
                if listed:
                    return int(rng.choice(listed))
            low = 0 if low is None else int(low)
            return rng.randint(low, max(low, 5 if high is None else int(high)))
        if kind == "number":
            return round(rng.uniform(float(schema.get("minimum", 0)), float(schema.get("maximum", 1))), 3)
        if kind == "boolean":
            return rng.random() < 0.5
        return None

    def _string(self, schema: dict, rng: random.Random, prompt: str) -> str:
        if "pattern" in schema:
            return rng.choice(TOPIC_WORDS)
        limit = schema.get("maxLength")
        if limit is None:
            listed = _IDS.findall(prompt)
            return rng.choice(listed) if listed else rng.choice(TOPIC_WORDS)
        length = max(int(schema.get("minLength", 1)), self.replies.length(int(limit)))
        return _text(rng, min(length, int(limit)))


def _text(rng: random.Random, length: int) -> str:
    """Plain words, exactly ``length`` characters, ending with a period."""
    words: list[str] = []
    while sum(len(w) + 1 for w in words) <= length:
        words.append(rng.choice(FILLER))
    text = " ".join(words)[:length]
    return text[:-1] + "." if length >= 2 else text


def _schema_in_prompt(messages: list) -> dict | None:
    """The schema the client wrote into the last message (``structured: prompt``), if any."""
    last = messages[-1].get("content") if messages and isinstance(messages[-1], dict) else None
    if not isinstance(last, str) or SCHEMA_MARK not in last:
        return None
    try:
        value = json.loads(last[last.rindex(SCHEMA_MARK) + len(SCHEMA_MARK):])
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


# ---------------------------------------------------------------------------------- config and client
def stand_in_config(cfg: ExperimentConfig) -> ExperimentConfig:
    """``cfg`` for a simulation with the stand-in: one cell, no files beyond what the runner
    needs (no checkpoints, snapshots, events, ties, transcripts, report or wandb), no response
    cache and no budget; the LLM policies' ``generation`` and ``schema_ids`` pinned to what they
    resolve to for the config's own server (they look at the client, which is the stand-in's)."""
    raw = to_dict(cfg, redact=False)
    raw.pop("sweep", None)
    rounds = int(cfg.env.get("max_rounds", FeedConfig.max_rounds))
    raw["logging"] = {"events": False, "ties": False, "transcripts": False, "progress": False, "report": False,
                      "network_every": rounds}
    raw["run"] = {**raw["run"], "replicates": 1, "checkpoint": False, "snapshots": False, "fork_at": None,
                  "workers": 1}
    if raw.get("llm") is not None:
        raw["llm"] = {**raw["llm"], "cache": False, "budget": {}}
    probe = SimpleNamespace(base_url=_server_url(cfg), local=_embedded(cfg), model=(cfg.llm_models() or ("",))[0])
    for params in _llm_params(raw):
        _pin_modes(params, probe)
    return from_dict(raw)


def _llm_params(raw: dict) -> list[dict]:
    """The params mappings of the config's LLM policy (each llm group's, or the policy's)."""
    policy = raw["policy"]
    groups = policy.get("groups") or []
    if not groups:
        if policy.get("kind") == "llm":
            policy["params"] = dict(policy.get("params") or {})
            return [policy["params"]]
        return []
    out = []
    for g in groups:
        if g.get("kind") == "llm":
            g["params"] = dict(g.get("params") or {})
            out.append(g["params"])
    return out


def _pin_modes(params: dict, probe: Any) -> None:
    from socialgym.agents.llm_policy import LLMPolicy

    policy = LLMPolicy(probe, None, **params)
    params["generation"] = policy.generation_mode
    params["schema_ids"] = policy.id_mode


def _embedded(cfg: ExperimentConfig) -> bool:
    llm = cfg.llm or LLMConfig()
    return llm.base_url is None and not llm.endpoints


def _server_url(cfg: ExperimentConfig) -> str:
    llm = cfg.llm or LLMConfig()
    if llm.endpoints:
        return llm.endpoints[0].base_url
    return llm.base_url or "http://127.0.0.1/v1"


@contextlib.contextmanager
def stand_in_client(cfg: ExperimentConfig, seed: int, replies: ReplyModel | None = None,
                    max_concurrency: int = 64) -> Iterator[Any]:
    """An ``LLMClient`` on a stand-in server for ``cfg``'s requests: the same model names (and
    endpoint names, so that groups bind as in the run), the same client settings that shape
    requests (structured output, repairs, max_tokens, temperature, the seed), no cache, and
    marked local exactly when the run uses the embedded model."""
    from socialgym.llm.client import LLMClient
    from socialgym.llm.testing import FakeServer

    llm = cfg.llm or LLMConfig()
    settings = dict(api_key="stand-in", max_concurrency=max_concurrency, timeout=120.0, max_retries=0,
                    temperature=llm.temperature, max_tokens=llm.max_tokens, structured=llm.structured,
                    max_repairs=llm.max_repairs, seed=seed, cache=None, local=_embedded(cfg))
    with FakeServer(StandIn(replies)) as server:
        if llm.endpoints:
            endpoints = [{"name": e.name, "base_url": server.base_url, "model": e.model, "api_key": "stand-in",
                          "max_concurrency": max_concurrency, "weight": e.weight} for e in llm.endpoints]
            settings.pop("api_key")
            client = LLMClient(endpoints=endpoints, **settings)
        else:
            client = LLMClient(server.base_url, (cfg.llm_models() or ("stand-in",))[0], **settings)
        with client:
            yield client


__all__ = ["ReplyModel", "StandIn", "stand_in_config", "stand_in_client", "TOPIC_WORDS"]
