"""What a fork may change: the config a fork after round ``t`` runs with (:func:`fork_config`).

A fork continues a run from its state after round ``t``; what describes that state (the agents,
the seed, the policies' kinds) cannot change, what acts from round ``t + 1`` on can: scheduled
interventions and surveys of later rounds, the recommender and the runtime tie parameters
(which become interventions at ``t + 1``), the coach, and the llm, logging and run sections
(not an inline ``llm.api_key``: a fork reads its key from ``llm.api_key_env``, like a resume),
and which servers the LLM groups use (``policy.groups[*].endpoints`` / ``model``: routing only).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Mapping


from socialgym.config import RUNTIME_PARAMS, FeedConfig
from socialgym.experiments.define.schedule import SCHEDULE_KEYS, rounds_of
from socialgym.experiments.define.schema import ConfigError, ExperimentConfig, thaw, to_dict

# ---------------------------------------------------------------------------------- forks
FORK_RUNTIME_ENV = RUNTIME_PARAMS         # tie parameters: interventions at t+1
FORK_RECOMMENDER_ENV = ("recommender", "recommender_kwargs", "rerank")
FORK_TAKES_EFFECT = ("llm", "logging", "run")
FORK_SCHEDULED = ("interventions", "surveys")
GROUP_ROUTING = ("endpoints", "model")
"""Fields of a policy group that only say which servers its requests go to."""


def inline_key(cfg: ExperimentConfig) -> bool:
    """Whether the config holds an API key itself (``llm.api_key``, an endpoint's ``api_key``)."""
    return cfg.llm is not None and (bool(cfg.llm.api_key) or any(e.api_key for e in cfg.llm.endpoints))


def fork_changes(base: ExperimentConfig, target: ExperimentConfig, at_round: int) -> tuple[dict, list]:
    """The config a fork after round ``at_round`` runs with, as plain data (not yet validated:
    :func:`socialgym.experiments.define.loading.fork_config` does that): ``base`` (the config
    rounds 1..t ran with) changed towards ``target``. Returns it and the list of changes, each a
    short text. Raises :class:`ConfigError` naming a key that a fork cannot change."""
    max_rounds = _fork_max_rounds(base)
    if not 1 <= at_round < max_rounds:
        raise ConfigError(f"--at-round must lie in [1, {max_rounds - 1}] (env.max_rounds is {max_rounds}: a fork "
                          f"continues from the state after that round), got {at_round}")
    if inline_key(target):            # dropped from the fork's config.yaml: refuse, not ignore
        raise ConfigError("llm.api_key: a fork cannot take an inline key (it is never written to disk, and the "
                          "fork runs from its config on disk); put the key in the environment variable named "
                          "by llm.api_key_env")
    old, new = to_dict(base), to_dict(target)         # redacted: a key is no change, and never printed
    old.pop("sweep", None)
    new.pop("sweep", None)
    out = {k: v for k, v in old.items()}
    changes: list[str] = []
    later: list[dict] = []                                          # interventions at t+1
    if bool((old.get("llm") or {}).get("tie_scorer")) != bool((new.get("llm") or {}).get("tie_scorer")):
        raise ConfigError(_fork_cannot("llm.tie_scorer", at_round))        # the env's scorer is in the snapshot
    for key in ("events", "ties", "transcripts"):     # the fork continues the original's files
        if (old.get("logging") or {}).get(key) != (new.get("logging") or {}).get(key):
            raise ConfigError(_fork_cannot(f"logging.{key}", at_round))
    for section in FORK_TAKES_EFFECT:
        if old.get(section) != new.get(section):
            out[section] = new.get(section)
            changes += [f"{k}: {_fork_short(a)} -> {_fork_short(b)}"
                        for k, a, b in _fork_diff(old.get(section), new.get(section), section)]
    first = at_round + 1
    for key in FORK_SCHEDULED:
        before, after = old.get(key) or [], new.get(key) or []
        if _fork_past(before, at_round, max_rounds) != _fork_past(after, at_round, max_rounds):
            raise ConfigError(f"{key}: the fork changes {key} of rounds <= {at_round}, which already happened "
                              f"before the fork; change only rounds >= {first}")
        if before != after:
            out[key] = after
            changes.append(f"{key}: {len(before)} -> {len(after)} entries")
    env_old, env_new = dict(old.get("env") or {}), dict(new.get("env") or {})
    for key in sorted(set(env_old) | set(env_new)):
        if env_old.get(key) == env_new.get(key) or key in FORK_RECOMMENDER_ENV:
            continue
        if key not in FORK_RUNTIME_ENV:
            raise ConfigError(_fork_cannot(f"env.{key}", at_round))
        later.append({"kind": "param", "at_round": first, "name": key, "value": env_new.get(key, _fork_default(key))})
        changes.append(f"env.{key}: {_fork_short(env_old.get(key, _fork_default(key)))} -> "
                       f"{_fork_short(env_new.get(key))} from round {first}")
    model_old = (env_old.get("recommender", FeedConfig.recommender), env_old.get("recommender_kwargs") or {})
    model_new = (env_new.get("recommender", FeedConfig.recommender), env_new.get("recommender_kwargs") or {})
    if model_old != model_new:          # another model: it starts afresh (a recommender intervention)
        spec = {"kind": "recommender", "at_round": first, "recommender": model_new[0]}
        if model_new[1]:
            spec["params"] = model_new[1]
        if env_new.get("rerank"):
            spec["rerank"] = env_new["rerank"]
        later.append(spec)
        changes.append(f"recommender: {_fork_short(model_old[0])} -> {_fork_short(model_new[0])}"
                       f"{' ' + _fork_short(model_new[1]) if model_new[1] else ''}, a new model"
                       f"{' with re-ranking' if spec.get('rerank') else ''}, from round {first}")
    elif (env_old.get("rerank") or []) != (env_new.get("rerank") or []):    # the same model, re-ranked anew
        later.append({"kind": "rerank", "at_round": first, "rerank": env_new.get("rerank") or []})
        changes.append(f"rerank: {_fork_short(env_old.get('rerank') or [])} -> "
                       f"{_fork_short(env_new.get('rerank') or [])} from round {first} (the model is kept)")
    later += _coach_changes(base, target, first, changes)
    _routing_changes(base, target, out, changes)
    for key in old:
        if key not in (*FORK_TAKES_EFFECT, *FORK_SCHEDULED, "env", "policy") and old.get(key) != new.get(key):
            raise ConfigError(_fork_cannot(key, at_round))
    if later:
        out["interventions"] = list(out.get("interventions") or []) + later
    return out, changes


def _fork_default(key: str) -> Any:
    return getattr(FeedConfig, key, None)


def _fork_max_rounds(cfg: ExperimentConfig) -> int:
    return int(cfg.env.get("max_rounds", FeedConfig.max_rounds))


def _fork_past(specs: list, t: int, max_rounds: int) -> list:
    """The part of a schedule that applied in rounds <= t: (spec without its schedule, rounds)."""
    past = []
    for spec in specs:
        rounds = [r for r in rounds_of(spec, max_rounds) if r <= t]
        if rounds:
            past.append(({k: v for k, v in spec.items() if k not in SCHEDULE_KEYS}, rounds))
    return past


def _coach_changes(base: ExperimentConfig, target: ExperimentConfig, first: int, changes: list) -> list:
    """Coach switches (policy.coach, a group's coach) as interventions; any other policy change
    is refused, naming the first key that differs."""
    specs = []
    old_groups, new_groups = base.policy_groups(), target.policy_groups()
    if len(old_groups) != len(new_groups):
        raise ConfigError(_fork_cannot("policy.groups", first - 1))
    rest = [("policy.kind", base.policy.kind, target.policy.kind)]
    rest += _fork_diff(thaw(base.policy.params), thaw(target.policy.params), "policy.params")
    for i, (a, b) in enumerate(zip(old_groups, new_groups)):
        where = f"policy.groups[{i}]" if base.policy.groups else "policy"
        for f in dataclasses.fields(a):
            if f.name != "coach" and f.name not in GROUP_ROUTING:
                rest += _fork_diff(thaw(getattr(a, f.name)), thaw(getattr(b, f.name)), f"{where}.{f.name}")
    rest = [r for r in rest if r[1] != r[2]]
    if rest:
        raise ConfigError(_fork_cannot(rest[0][0], first - 1))
    for a, b in zip(old_groups, new_groups):
        if a.coach != b.coach:
            specs.append({"kind": "coach", "at_round": first, "enabled": bool(b.coach),
                          "target": a.name if base.policy.groups else "all"})
            changes.append(f"coach of {a.name if base.policy.groups else 'all agents'}: {a.coach} -> {b.coach} "
                           f"from round {first}")
    return specs


def _routing_changes(base: ExperimentConfig, target: ExperimentConfig, out: dict, changes: list) -> None:
    """The servers each LLM group is bound to, taken from ``target`` into ``out`` (routing, not state)."""
    if not base.policy.groups:
        return
    groups = [dict(g) for g in out["policy"]["groups"]]
    for i, (a, b) in enumerate(zip(base.policy.groups, target.policy.groups)):
        for key in GROUP_ROUTING:
            old, new = thaw(getattr(a, key)), thaw(getattr(b, key))
            if old != new:
                groups[i][key] = new
                changes.append(f"policy.groups[{i}].{key}: {_fork_short(old)} -> {_fork_short(new)}")
    out["policy"] = {**out["policy"], "groups": groups}


def _fork_cannot(key: str, at_round: int) -> str:
    return (f"{key} cannot change in a fork (it is part of the state after round {at_round}); forks change "
            f"later interventions/surveys, env.{'/'.join(FORK_RECOMMENDER_ENV + FORK_RUNTIME_ENV)}, coach, "
            "llm/logging/run")


def _fork_diff(a: Any, b: Any, prefix: str) -> list:
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        out = []
        for k in sorted(set(a) | set(b), key=str):
            out += _fork_diff(a.get(k), b.get(k), f"{prefix}.{k}")
        return out
    return [] if a == b else [(prefix, a, b)]


def _fork_short(value: Any, limit: int = 60) -> str:
    text = json.dumps(thaw(value), default=str, separators=(",", ":"))
    return text if len(text) <= limit else text[:limit - 1] + "…"


