"""Request, token and fallback accounting for an ``LLMClient`` (``client.usage``)."""

from __future__ import annotations

import threading
from collections import defaultdict
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Call:
    """One logical request: its HTTP attempts, repairs and outcome. ``model`` is the model that
    answered (a cached or failed request: the agent's pool's model name(s), as in the cache key),
    ``endpoint`` the name of the endpoint that answered (or was tried last; None when cached).
    Both default to None, so records pickled before they existed still load."""

    agent: str | None
    round: int | None
    purpose: str
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    cached: bool          # served from the response cache (no request sent)
    attempts: int         # HTTP attempts (1 + transport retries); 0 when cached
    ok: bool              # a reply arrived (it may still have failed validation)
    error: str | None = None
    model: str | None = None
    endpoint: str | None = None


@dataclass(frozen=True)
class Fallback:
    """A slot the LLM could not fill validly, and what was used instead."""

    agent: str | None
    round: int | None
    purpose: str
    slot: int | None
    reason: str
    used: Any


_FIELDS = ("requests", "cached", "http_attempts", "retries", "prompt_tokens", "completion_tokens",
           "failed", "seconds")


class Usage:
    """Thread-safe log; the aggregates are computed on demand from the records."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.calls: list[Call] = []
        self.fallbacks: list[Fallback] = []
        self.repairs = 0

    def __getstate__(self) -> dict:        # checkpoints: everything but the lock
        with self._lock:
            return {"calls": list(self.calls), "fallbacks": list(self.fallbacks), "repairs": self.repairs}

    def __setstate__(self, state: dict) -> None:
        self.__init__()
        self.calls, self.fallbacks, self.repairs = state["calls"], state["fallbacks"], state["repairs"]

    def record(self, call: Call) -> None:
        with self._lock:
            self.calls.append(call)

    def record_fallback(self, fallback: Fallback) -> None:
        with self._lock:
            self.fallbacks.append(fallback)

    def record_repair(self) -> None:
        with self._lock:
            self.repairs += 1

    # ---- aggregates --------------------------------------------------------------------
    @staticmethod
    def _add(acc: dict, c: Call) -> None:
        acc["requests"] += 1
        acc["cached"] += int(c.cached)
        acc["http_attempts"] += c.attempts
        acc["retries"] += max(0, c.attempts - 1)
        acc["prompt_tokens"] += c.prompt_tokens
        acc["completion_tokens"] += c.completion_tokens
        acc["failed"] += int(not c.ok)
        acc["seconds"] += c.seconds

    def _group(self, key) -> dict:
        out: dict = defaultdict(lambda: dict.fromkeys(_FIELDS, 0))
        with self._lock:
            for c in self.calls:
                self._add(out[key(c)], c)
        return dict(out)

    def total(self) -> dict:
        acc = dict.fromkeys(_FIELDS, 0)
        with self._lock:
            for c in self.calls:
                self._add(acc, c)
            acc["repairs"] = self.repairs
            acc["fallbacks"] = len(self.fallbacks)
        return acc

    def by_agent(self) -> dict:
        return self._group(lambda c: c.agent)

    def by_round(self) -> dict:
        return self._group(lambda c: c.round)

    def by_purpose(self) -> dict:
        return self._group(lambda c: c.purpose)

    def by_model(self) -> dict:
        return self._group(lambda c: c.model)

    def by_endpoint(self) -> dict:
        return self._group(lambda c: c.endpoint)

    def by_agent_round(self) -> dict:
        return self._group(lambda c: (c.agent, c.round))

    def per_agent_round(self) -> dict:
        """Mean requests and tokens per (agent, round) that made at least one request."""
        groups = [g for (agent, rnd), g in self.by_agent_round().items() if agent is not None and rnd is not None]
        n = max(1, len(groups))
        return {"agent_rounds": len(groups),
                **{k: sum(g[k] for g in groups) / n for k in ("requests", "prompt_tokens", "completion_tokens")}}

    def fallback_rows(self) -> list[dict]:
        with self._lock:
            return [asdict(f) for f in self.fallbacks]

    def __repr__(self) -> str:
        t = self.total()
        return (f"Usage(requests={t['requests']}, cached={t['cached']}, prompt_tokens={t['prompt_tokens']}, "
                f"completion_tokens={t['completion_tokens']}, retries={t['retries']}, "
                f"repairs={t['repairs']}, fallbacks={t['fallbacks']})")
