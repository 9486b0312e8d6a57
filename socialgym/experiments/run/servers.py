"""A run's LLM servers (``llm.endpoints``): the endpoints its client opens, the groups bound to
them (``policy.groups[*].endpoints`` / ``model``), and where route events go.

The router itself (spreading, failover, breakers) is ``socialgym.llm.router``; docs/servers.md
describes it. Every failover and breaker change of a run becomes a line of
``llm_routes.jsonl`` (the runner hands :func:`listen`'s callback to the recorder).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from socialgym.experiments.define import ExperimentConfig, LLMConfig
from socialgym.experiments.errors import RunError


def run_endpoints(cfg: ExperimentConfig) -> list[dict]:
    """The endpoints of ``cfg.llm.endpoints`` as mappings for ``open_client(endpoints=...)``,
    after checking that each one that needs a key has one (a RunError naming the variable)."""
    from socialgym.llm.router import Endpoint, PlainHttpKeyError

    llm = cfg.llm or LLMConfig()
    out = []
    for e in llm.endpoints:
        variable = e.api_key_env or llm.api_key_env
        try:                           # the router's own key rule (a named variable never falls back)
            Endpoint(e.base_url, e.model, e.name, variable, e.api_key or llm.api_key,
                     allow_plain_http=llm.allow_plain_http).key()
        except PlainHttpKeyError as exc:
            raise RunError(f"llm.endpoints: {exc}") from None
        except ValueError:
            raise RunError(f"llm.endpoints: no API key for {e.name} ({e.base_url}): set the environment variable "
                           f"{variable} (the endpoint's api_key_env, else llm.api_key_env)")
        entry = {"name": e.name, "base_url": e.base_url, "model": e.model, "max_concurrency": e.max_concurrency,
                 "weight": e.weight, "api_key_env": e.api_key_env}
        if e.api_key:
            entry["api_key"] = e.api_key
        out.append(entry)
    return out


def client_settings(cfg: ExperimentConfig, seed: int, cache: Path | None) -> dict:
    """The client keywords of a run with endpoints (``llm.max_concurrency`` caps them all together)."""
    llm = cfg.llm or LLMConfig()
    return dict(api_key=llm.api_key, api_key_env=llm.api_key_env, max_concurrency=llm.max_concurrency,
                timeout=llm.timeout, max_retries=llm.max_retries, temperature=llm.temperature,
                max_tokens=llm.max_tokens, structured=llm.structured, max_repairs=llm.max_repairs, seed=seed,
                cache=cache, max_reply_bytes=llm.max_reply_bytes, max_retry_wait=llm.max_retry_wait,
                allow_plain_http=llm.allow_plain_http)


def group_endpoints(cfg: ExperimentConfig) -> dict[str, tuple[list[str], list[str]]]:
    """Group name -> (its agents, the endpoints they are bound to), for the groups that name
    ``endpoints`` or a ``model`` (the config checks made sure each has at least one)."""
    llm = cfg.llm or LLMConfig()
    out, start = {}, 0
    for g in cfg.policy_groups():
        agents = [f"agent_{i}" for i in range(start, start + g.agents)]
        start += g.agents
        if not g.endpoints and g.model is None:
            continue
        names = [e.name for e in llm.endpoints if (not g.endpoints or e.name in g.endpoints)
                 and (g.model is None or e.model == g.model)]
        out[g.name] = (agents, names)
    return out


def bind_groups(client: Any, cfg: ExperimentConfig) -> None:
    """Keep each bound group's agents on its endpoints (``client.bind``)."""
    for agents, names in group_endpoints(cfg).values():
        client.bind(agents, names)


def listen(client: Any, cfg: ExperimentConfig, transcript: Callable[[dict], None],
           route: Callable[[dict], None]) -> None:
    """Hand the client's transcript lines (when ``logging.transcripts``) and route events (runs
    with ``llm.endpoints``) to these callbacks."""
    if cfg.logging.transcripts:
        client.transcript = transcript
    if cfg.llm is not None and cfg.llm.endpoints:
        client.on_route_event = route


__all__ = ["run_endpoints", "client_settings", "group_endpoints", "bind_groups", "listen"]
