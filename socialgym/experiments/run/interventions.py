"""Scheduled interventions: changes to the platform at given rounds of a run (issue 20).

In a config, ``interventions:`` is a list of mappings (docs/experiments.md)::

    interventions:
      - {kind: recommender, at_round: 5, recommender: random}
      - {kind: rerank, at_round: 8, rerank: [{kind: diversity}]}     # [] switches re-ranking off
      - {kind: param, at_round: 3, name: half_life, value: 2.0}
      - {kind: add_ties, at_round: 20, soc_strategy: 2}                # recagent's Soc-Strategy
      - {kind: add_ties, at_round: 4, pairs: [[agent_0, agent_1]], weight: 0.5}
      - {kind: remove_ties, at_round: 6, target: trolls}               # every tie from or to them
      - {kind: post, at_round: 5, author: agent_0, topic: vaccines, text: "A correction: ..."}
      - {kind: lambdas, every: 5, from: 5, until: 15, target: lurkers, lambdas: [0, 0, 0, 0, 1]}
      - {kind: coach, at_round: 10, target: uncoached, enabled: true}  # llm agents; false: off

When: ``at_round: r``, or ``every: k`` with ``from`` (default 1) and ``until`` (default
``max_rounds``): rounds from, from + k, ... <= until. An intervention applies at the START of its
round, before the round's act step: ``at_round: 5`` changes round 5's feeds, actions and rewards.
Several interventions of one round apply in list order. The rounds are a function of the config
alone, so a resumed run needs no extra state: the checkpoint after round r holds the platform with
every intervention of rounds <= r applied, and the runner applies those of later rounds.

Whom (``target``, where it applies: lambdas, coach, add_ties / remove_ties without ``pairs``): ``all``
(default), a policy group's name, or a list of agent ids.

Each applied intervention is one line of events.jsonl:
``{"round": r, "kind": "INTERVENTION", "intervention": <kind>, "target": ..., <details>}``.

Python: :func:`apply_intervention` applies one (a mapping of the same form, already checked
with :func:`check_interventions` or not) to a FeedEnv between rounds and returns the log entry;
:func:`set_coach` switches the coach of an LLM policy (the runner applies ``coach`` with it).
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np

KINDS = {
    # kind: (required keys, optional keys)
    "recommender": (("recommender",), ("params", "rerank")),
    "rerank": (("rerank",), ()),
    "param": (("name", "value"), ()),
    "add_ties": ((), ("pairs", "soc_strategy", "weight", "target")),
    "remove_ties": ((), ("pairs", "target")),
    "post": (("author", "topic"), ("text", "sentiment")),
    "lambdas": (("lambdas",), ("target",)),
    "coach": (("enabled",), ("target",)),      # llm agents only; applied by the runner (it owns the policy)
}
SCHEDULE_KEYS = ("at_round", "every", "from", "until")
# kinds after which the runner rebuilds the round's feeds (the others keep them: no extra draws)
FEED_KINDS = ("recommender", "rerank", "post", "add_ties", "remove_ties")
RUNTIME_PARAMS = ("half_life", "xi", "delta_max", "b_rec")     # FeedEnv.RUNTIME_PARAMS


class InterventionError(ValueError):
    """A bad intervention; the message names it (``interventions[2].at_round ...``)."""


# ---------------------------------------------------------------------------------- schedule
def rounds_of(spec: Mapping, max_rounds: int) -> list[int]:
    """The rounds at which ``spec`` applies (ascending)."""
    if spec.get("at_round") is not None:
        return [int(spec["at_round"])]
    start, until = int(spec.get("from", 1)), int(spec.get("until", max_rounds))
    return list(range(start, min(until, max_rounds) + 1, int(spec["every"])))


def due(specs: Sequence[Mapping], r: int, max_rounds: int) -> list[Mapping]:
    """The interventions of round ``r``, in list order."""
    return [s for s in specs if _applies(s, r, max_rounds)]


def _applies(spec: Mapping, r: int, max_rounds: int) -> bool:
    if spec.get("at_round") is not None:
        return r == int(spec["at_round"])
    start, until = int(spec.get("from", 1)), min(int(spec.get("until", max_rounds)), max_rounds)
    return start <= r <= until and (r - start) % int(spec["every"]) == 0


# ---------------------------------------------------------------------------------- validation
def check_interventions(raw: Any, *, max_rounds: int, agents: Sequence[str], groups: Mapping[str, Sequence[str]],
                        agent_interests: bool = False, llm_agents: Sequence[str] = ()) -> list[dict]:
    """Validate the config's ``interventions`` list; returns it normalised (plain dicts). Raises
    :class:`InterventionError` with a one-line message naming the key."""
    if raw is None:
        return []
    if isinstance(raw, (str, Mapping)) or not isinstance(raw, Sequence):
        raise InterventionError(f"interventions must be a list of mappings, got {_show(raw)}")
    out = []
    for i, spec in enumerate(raw):
        spec = _check_one(spec, f"interventions[{i}]", max_rounds, list(agents), groups, agent_interests)
        if spec["kind"] == "coach":
            target = spec.get("target", "all")
            ids = agents if target == "all" else groups[target] if isinstance(target, str) else target
            others = [a for a in ids if a not in set(llm_agents)]
            if others:
                raise InterventionError(f"interventions[{i}].target: the coach advises llm agents only; "
                                        f"{others[0]} is not one ({len(others)} such)")
        out.append(spec)
    return out


def _check_one(spec: Any, where: str, max_rounds: int, agents: list[str], groups: Mapping, interests: bool) -> dict:
    if not isinstance(spec, Mapping):
        raise InterventionError(f"{where} must be a mapping with a kind, got {_show(spec)}")
    kind = spec.get("kind")
    if kind not in KINDS:
        raise InterventionError(f"{where}.kind must be one of {', '.join(KINDS)}, got {_show(kind)}")
    required, optional = KINDS[kind]
    allowed = ("kind", *SCHEDULE_KEYS, *required, *optional)
    for key in spec:
        if key not in allowed:
            raise InterventionError(f"unknown key {where}.{key} for kind {kind}; allowed: {', '.join(allowed)}")
    for key in required:
        if key not in spec:
            raise InterventionError(f"{where}.{key} is required for kind {kind}")
    spec = dict(spec)
    # when
    if "at_round" in spec:
        if any(k in spec for k in ("every", "from", "until")):
            raise InterventionError(f"{where}: give at_round or every/from/until, not both")
        _round(spec["at_round"], f"{where}.at_round", max_rounds)
    elif "every" in spec:
        _int(spec["every"], f"{where}.every", 1, max_rounds)
        start = _round(spec.get("from", 1), f"{where}.from", max_rounds)
        until = _round(spec.get("until", max_rounds), f"{where}.until", max_rounds)
        if until < start:
            raise InterventionError(f"{where}.until ({until}) is before {where}.from ({start})")
    else:
        raise InterventionError(f"{where} needs at_round (or every, with optional from/until)")
    # whom
    if "target" in spec:
        spec["target"] = _target(spec["target"], f"{where}.target", agents, groups)
    # what
    if kind == "recommender":
        from socialgym.recommenders import REGISTRY
        if spec["recommender"] not in REGISTRY:
            raise InterventionError(f"{where}.recommender must be one of {', '.join(sorted(REGISTRY))}, "
                                    f"got {_show(spec['recommender'])}")
        if not isinstance(spec.get("params", {}), Mapping):
            raise InterventionError(f"{where}.params must be a mapping, got {_show(spec['params'])}")
    if kind in ("recommender", "rerank") and spec.get("rerank") is not None:
        _rerank(spec["rerank"], f"{where}.rerank")
    if kind in ("recommender", "rerank"):         # built once here: bad parameters fail at load time
        try:
            _build_recommender(spec)
        except (TypeError, ValueError) as exc:
            raise InterventionError(f"{where}: {exc}") from None
    if kind == "param":
        if spec["name"] not in RUNTIME_PARAMS:
            raise InterventionError(f"{where}.name {_show(spec['name'])} is not a parameter that can change "
                                    f"during a run; allowed: {', '.join(RUNTIME_PARAMS)}")
        value = spec["value"]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise InterventionError(f"{where}.value must be a finite number, got {_show(value)}")
        from socialgym.config import FeedConfig
        try:
            FeedConfig.from_kwargs(**{spec["name"]: float(value)})
        except (TypeError, ValueError) as exc:
            raise InterventionError(f"{where}.value: {exc}") from None
    if kind in ("add_ties", "remove_ties"):
        if "pairs" in spec:
            if "target" in spec or "soc_strategy" in spec:
                raise InterventionError(f"{where}: give pairs, or target/soc_strategy, not both")
            spec["pairs"] = _pairs(spec["pairs"], f"{where}.pairs", agents)
        if kind == "add_ties":
            if "soc_strategy" in spec:
                _int(spec["soc_strategy"], f"{where}.soc_strategy", 1, len(agents) - 1)
                if not interests:
                    raise InterventionError(f"{where}.soc_strategy needs env.agent_interests")
            weight = spec.get("weight", 0.5)
            if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not 0 < weight <= 1:
                raise InterventionError(f"{where}.weight must be a number in (0, 1], got {_show(weight)}")
    if kind == "post":
        if spec["author"] not in agents:
            raise InterventionError(f"{where}.author: unknown agent {_show(spec['author'])} "
                                    f"(agents are {agents[0]} .. {agents[-1]})")
        for key in ("topic", "text"):
            if key in spec and (not isinstance(spec[key], str) or not spec[key].strip()):
                raise InterventionError(f"{where}.{key} must be a non-empty string, got {_show(spec[key])}")
        from socialgym.platform.topics import topic_problem
        problem = topic_problem(spec["topic"])
        if problem:
            raise InterventionError(f"{where}.topic: {problem}")
        s = spec.get("sentiment", 0.0)
        if isinstance(s, bool) or not isinstance(s, (int, float)) or not -1 <= s <= 1:
            raise InterventionError(f"{where}.sentiment must be a number in [-1, 1], got {_show(s)}")
    if kind == "coach" and not isinstance(spec["enabled"], bool):
        raise InterventionError(f"{where}.enabled must be true or false, got {_show(spec['enabled'])}")
    if kind == "lambdas":
        from socialgym.config import _lambda_row
        try:
            _lambda_row(spec["lambdas"], f"{where}.lambdas")
        except ValueError as exc:
            raise InterventionError(str(exc)) from None
    return spec


def _int(value: Any, name: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InterventionError(f"{name} must be an integer in [{low}, {high}], got {_show(value)}")
    return value


def _round(value: Any, name: str, max_rounds: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InterventionError(f"{name} must be a round number (an integer), got {_show(value)}")
    if not 1 <= value <= max_rounds:
        raise InterventionError(f"{name} = {value} is outside the run's rounds 1 .. {max_rounds} (env.max_rounds)")
    return value


def _target(value: Any, name: str, agents: list[str], groups: Mapping) -> Any:
    if value == "all":
        return value
    if isinstance(value, str):
        if value not in groups:
            raise InterventionError(f"{name}: unknown group {_show(value)}; give all, a policy group "
                                    f"({', '.join(groups) or 'none defined'}) or a list of agent ids")
        return value
    if isinstance(value, Sequence) and value:
        known = set(agents)
        for a in value:
            if a not in known:
                raise InterventionError(f"{name}: unknown agent {_show(a)} (agents are {agents[0]} .. {agents[-1]})")
        return list(value)
    raise InterventionError(f"{name} must be all, a group name or a non-empty list of agent ids, got {_show(value)}")


def _pairs(value: Any, name: str, agents: list[str]) -> list:
    known = set(agents)
    if isinstance(value, (str, Mapping)) or not isinstance(value, Sequence) or not value:
        raise InterventionError(f"{name} must be a non-empty list of [src, dst] agent ids, got {_show(value)}")
    for p in value:
        if isinstance(p, str) or not isinstance(p, Sequence) or len(p) != 2 or p[0] == p[1] \
                or any(a not in known for a in p):
            raise InterventionError(f"{name}: {_show(p)} is not a [src, dst] pair of two different known agents")
    return [list(p) for p in value]


def _rerank(value: Any, name: str) -> None:
    if isinstance(value, (str, Mapping)) or not isinstance(value, Sequence):
        raise InterventionError(f"{name} must be a list of re-ranking steps ({{kind: ...}}), got {_show(value)}")


def _build_recommender(spec: Mapping):
    from socialgym.recommenders import apply_reranking, make_recommender
    if spec["kind"] == "rerank":        # the steps checked over a stand-in model
        return apply_reranking(make_recommender("chronological"), [dict(s) for s in spec["rerank"] or []])
    return apply_reranking(make_recommender(spec["recommender"], **dict(spec.get("params") or {})),
                           [dict(s) for s in spec.get("rerank") or []])


def _show(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 1] + "…"


# ---------------------------------------------------------------------------------- application
def target_indices(env, target: Any, groups: Mapping[str, Sequence[str]] | None = None) -> np.ndarray:
    """Agent indices of a target: ``all``, a group name (``groups`` maps names to agent ids) or ids."""
    if target is None or target == "all":
        return np.arange(env.config.n_agents)
    if isinstance(target, str):
        ids = (groups or {}).get(target)
        if ids is None:
            raise InterventionError(f"unknown group {target!r}")
    else:
        ids = target
    return np.array([env.possible_agents.index(a) for a in ids], np.int64)


def apply_intervention(env, spec: Mapping, groups: Mapping[str, Sequence[str]] | None = None) -> dict:
    """Apply one intervention to ``env`` between rounds (before its act step) and return its
    events.jsonl entry (without the round). Call ``env.refresh_feeds()`` afterwards (the runner
    does, once per round) so that the round's feeds reflect it."""
    kind = spec["kind"]
    target = spec.get("target", "all")
    entry: dict = {"kind": "INTERVENTION", "intervention": kind}
    if "target" in KINDS[kind][1]:                   # platform-wide kinds have no target
        entry["target"] = target
    if kind == "recommender":
        rerank = [dict(s) for s in spec.get("rerank") or []]
        env.set_recommender(spec["recommender"], rerank, **dict(spec.get("params") or {}))
        entry.update(recommender=spec["recommender"], params=dict(spec.get("params") or {}), rerank=rerank)
    elif kind == "rerank":
        from socialgym.recommenders import Reranker
        base = env.recommender
        while isinstance(base, Reranker):          # strip the current re-rankers, keep the model
            base = base.base
        rerank = [dict(s) for s in spec["rerank"] or []]
        env.set_recommender(base, rerank, reset=False)
        entry.update(rerank=rerank)
    elif kind == "param":
        old = getattr(env.config, spec["name"])
        env.set_param(spec["name"], float(spec["value"]))
        entry.update(name=spec["name"], before=old, value=float(spec["value"]))
    elif kind == "add_ties":
        weight = float(spec.get("weight", 0.5))
        if "pairs" in spec:
            src, dst = _pair_indices(env, spec["pairs"])
        elif "soc_strategy" in spec:
            from socialgym.ties import different_interest_ties, main_interests
            labels = main_interests(env.config.agent_interests, env.config.n_agents)
            src, dst = different_interest_ties(labels, int(spec["soc_strategy"]), env.rng)
        else:
            idx = target_indices(env, target, groups)
            src, dst = np.repeat(idx, len(idx)), np.tile(idx, len(idx))
            keep = src != dst
            src, dst = src[keep], dst[keep]
        env.add_ties(src, dst, weight)
        entry.update(weight=weight, n_pairs=int(len(src)))
    elif kind == "remove_ties":
        if "pairs" in spec:
            src, dst = _pair_indices(env, spec["pairs"])
        else:
            idx = target_indices(env, target, groups)
            W = env.tie_matrix().tocoo()
            hit = np.isin(W.row, idx) | np.isin(W.col, idx)
            src, dst = W.row[hit].astype(np.int64), W.col[hit].astype(np.int64)
        before = env.tie_matrix().nnz
        env.remove_ties(src, dst)
        entry.update(n_removed=int(before - env.tie_matrix().nnz))
    elif kind == "post":
        cid = env.inject_post(spec["author"], spec["topic"], spec.get("text"), float(spec.get("sentiment", 0.0)))
        entry.update(id=cid, author=spec["author"], topic=spec["topic"], text=spec.get("text"),
                     sentiment=float(spec.get("sentiment", 0.0)))
    elif kind == "lambdas":
        from socialgym.config import _lambda_row
        idx = target_indices(env, target, groups)
        env.set_lambdas(idx.tolist(), spec["lambdas"])
        entry.update(lambdas=_lambda_row(spec["lambdas"], "lambdas").tolist(), n_agents=int(len(idx)))
    elif kind == "coach":
        raise InterventionError("coach interventions change the LLM policy: apply them with set_coach(policy, ...)")
    else:
        raise InterventionError(f"unknown intervention kind {kind!r}; one of {', '.join(KINDS)}")
    return entry


def set_coach(policy, agents: Sequence[str], enabled: bool, llm_agents: Sequence[str], make_coach=None) -> list[str]:
    """Switch the coach on or off for ``agents`` of the LLM policy inside ``policy`` (a
    PolicyMix or an LLMPolicy; ``llm_agents``: the agents it plays); ``make_coach()`` builds a
    coach when the policy has none yet. Returns the agents coached afterwards (sorted)."""
    llm = [p for p in getattr(policy, "policies", [policy]) if hasattr(p, "is_coached")]
    if not llm:
        raise InterventionError("coach: the run has no LLM policy")
    p = llm[0]
    current = {a for a in llm_agents if p.is_coached(a)}
    coached = (current | set(agents)) if enabled else (current - set(agents))
    if enabled and p.coach is None:
        if make_coach is None:
            raise InterventionError("coach: the policy has no coach and none can be made here")
        p.coach = make_coach()
    p._coached = frozenset(coached)
    return sorted(coached)


def _pair_indices(env, pairs) -> tuple[np.ndarray, np.ndarray]:
    index = {a: i for i, a in enumerate(env.possible_agents)}
    src = np.array([index[p[0]] for p in pairs], np.int64)
    dst = np.array([index[p[1]] for p in pairs], np.int64)
    return src, dst


__all__ = ["KINDS", "FEED_KINDS", "set_coach", "InterventionError", "apply_intervention", "check_interventions", "due", "rounds_of",
           "target_indices"]
