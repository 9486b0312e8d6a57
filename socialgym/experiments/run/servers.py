"""A run's LLM servers (``llm.endpoints``): the endpoints its client opens, the groups bound to
them (``policy.groups[*].endpoints`` / ``model``), and where route events go.

The router itself (spreading, failover, breakers) is ``socialgym.llm.router``; docs/servers.md
describes it. Every failover and breaker change of a run becomes a line of
``llm_routes.jsonl`` (the runner hands :func:`listen`'s callback to the recorder).

What a run needs from outside before its directory is made is checked here too: the keys
(:func:`check_llm_keys`) and the model files of trained or distilled groups
(:func:`check_model_files`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from socialgym.baselines.kinds import KIND
from socialgym.experiments.define import ExperimentConfig, LLMConfig
from socialgym.experiments.errors import RunError


def run_endpoints(llm: LLMConfig) -> list[dict]:
    """The endpoints of ``llm.endpoints`` as mappings for ``open_client(endpoints=...)``, after
    checking that each one that needs a key has one (a RunError naming the variable)."""
    from socialgym.llm.router import Endpoint, PlainHttpKeyError

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


def client_settings(llm: LLMConfig, seed: int, cache: Path | None) -> dict:
    """The client keywords of a run with endpoints (``llm.max_concurrency`` caps them all together)."""
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


def check_model_files(cfg: ExperimentConfig) -> None:
    """Each ``torch`` / ``distilled`` group's model file read and checked (``read_model_file``:
    tensors only, complete, finite weights) before a run starts: a RunError naming the group."""
    for group in cfg.policy_groups():
        if not KIND[group.kind].model_file or not group.params.get("path"):
            continue                           # no path: the runner names it when it builds the group
        try:
            from socialgym.training.torch_policy import read_model_file
            read_model_file(group.params["path"])
        except (ImportError, OSError, ValueError, TypeError) as exc:
            raise RunError(f"policy group {group.name!r} ({group.kind}): {exc}") from None


def check_llm_keys(cfg: ExperimentConfig | LLMConfig) -> LLMConfig:
    """The key rules of a run (its config) or of an llm section, checked before anything starts (a
    RunError naming the variable or the host): a remote server needs a key, and a key goes over
    plain http only to this machine unless ``llm.allow_plain_http``. Returns the llm section."""
    import os

    llm = cfg if isinstance(cfg, LLMConfig) else cfg.llm or LLMConfig()
    if llm.base_url is not None and not llm.api_key and not os.environ.get(llm.api_key_env):
        from socialgym.llm.client import is_loopback
        if not is_loopback(llm.base_url):        # say which variable, before anything starts
            raise RunError(f"llm: no API key for {llm.base_url}: set the environment variable {llm.api_key_env} "
                           "(llm.api_key_env names it)")
    if llm.base_url is not None and not llm.allow_plain_http and (llm.api_key or os.environ.get(llm.api_key_env)):
        from socialgym.llm.router import plain_http_remote
        if plain_http_remote(llm.base_url):
            raise RunError(f"llm: refusing to send the API key over plain http to {llm.base_url}; use https, or "
                           "set llm.allow_plain_http: true if that network is private and yours")
    if llm.endpoints:
        run_endpoints(llm)
    return llm


__all__ = ["run_endpoints", "client_settings", "group_endpoints", "bind_groups", "listen", "check_llm_keys",
           "check_model_files"]
