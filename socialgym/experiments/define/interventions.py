"""Scheduled interventions in a config: their kinds and the check of each (issue 20).

In a config, ``interventions:`` is a list of mappings (docs/experiments.md)::

    interventions:
      - {kind: recommender, at_round: 5, recommender: random}
      - {kind: rerank, at_round: 8, rerank: [{kind: diversity}]}     # [] switches re-ranking off
      - {kind: param, at_round: 3, name: half_life, value: 2.0}
      - {kind: add_ties, at_round: 20, soc_strategy: 2}                # recagent's Soc-Strategy
      - {kind: add_ties, at_round: 20, soc_strategy: 1, influence: 0.25}   # ... and tastes follow friends
      - {kind: add_ties, at_round: 4, pairs: [[agent_0, agent_1]], weight: 0.5}
      - {kind: remove_ties, at_round: 6, target: trolls}               # every tie from or to them
      - {kind: post, at_round: 5, author: agent_0, topic: vaccines, text: "A correction: ..."}
      - {kind: lambdas, every: 5, from: 5, until: 15, target: lurkers, lambdas: [0, 0, 0, 0, 1]}
      - {kind: coach, at_round: 10, target: uncoached, enabled: true}  # llm agents; false: off

When and whom: :mod:`socialgym.experiments.define.schedule` (``from`` defaults to round 1). An
intervention applies at the START of its round, before the round's act step. Applying one to an
environment: :mod:`socialgym.experiments.run.interventions`.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

from socialgym.config import RUNTIME_PARAMS, FeedConfig, lambda_row
from socialgym.experiments.define.schedule import SCHEDULE_KEYS, check_schedule, check_target
from socialgym.platform.topics import topic_problem
from socialgym.platform.validation import utf8_problem

KINDS = {
    # kind: (required keys, optional keys)
    "recommender": (("recommender",), ("params", "rerank")),
    "rerank": (("rerank",), ()),
    "param": (("name", "value"), ()),
    "add_ties": ((), ("pairs", "soc_strategy", "weight", "target", "influence")),
    "remove_ties": ((), ("pairs", "target")),
    "post": (("author", "topic"), ("text", "sentiment")),
    "lambdas": (("lambdas",), ("target",)),
    "coach": (("enabled",), ("target",)),      # llm agents only; applied by the runner (it owns the policy)
}
# kinds after which the runner rebuilds the round's feeds (the others keep them: no extra draws)
FEED_KINDS = ("recommender", "rerank", "post", "add_ties", "remove_ties")


class InterventionError(ValueError):
    """A bad intervention; the message names it (``interventions[2].at_round ...``)."""


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
    check_schedule(spec, where, max_rounds, InterventionError)        # the spec keeps its own keys
    if "target" in spec:
        spec["target"] = check_target(spec["target"], f"{where}.target", agents, list(groups), InterventionError)
    _CHECKS.get(kind, _no_check)(spec, where, agents, interests)
    return spec


# ---------------------------------------------------------------------------------- what, per kind
def _check_recommender(spec: dict, where: str, agents: list[str], interests: bool) -> None:
    if spec["kind"] == "recommender":
        from socialgym.recommenders import REGISTRY
        if spec["recommender"] not in REGISTRY:
            raise InterventionError(f"{where}.recommender must be one of {', '.join(sorted(REGISTRY))}, "
                                    f"got {_show(spec['recommender'])}")
        if not isinstance(spec.get("params", {}), Mapping):
            raise InterventionError(f"{where}.params must be a mapping, got {_show(spec['params'])}")
    if spec.get("rerank") is not None:
        _rerank(spec["rerank"], f"{where}.rerank")
    try:                                        # bad parameters fail at load time
        _check_recommender_spec(spec, len(agents))
    except (TypeError, ValueError) as exc:
        raise InterventionError(f"{where}: {exc}") from None


def _check_param(spec: dict, where: str, agents: list[str], interests: bool) -> None:
    if spec["name"] not in RUNTIME_PARAMS:
        raise InterventionError(f"{where}.name {_show(spec['name'])} is not a parameter that can change "
                                f"during a run; allowed: {', '.join(RUNTIME_PARAMS)}")
    value = spec["value"]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InterventionError(f"{where}.value must be a finite number, got {_show(value)}")
    try:
        FeedConfig.from_kwargs(**{spec["name"]: float(value)})
    except (TypeError, ValueError) as exc:
        raise InterventionError(f"{where}.value: {exc}") from None


def _check_ties(spec: dict, where: str, agents: list[str], interests: bool) -> None:
    if "pairs" in spec:
        if "target" in spec or "soc_strategy" in spec:
            raise InterventionError(f"{where}: give pairs, or target/soc_strategy, not both")
        spec["pairs"] = _pairs(spec["pairs"], f"{where}.pairs", agents)
    if spec["kind"] == "add_ties":
        if "soc_strategy" in spec:
            _int(spec["soc_strategy"], f"{where}.soc_strategy", 1, len(agents) - 1)
            if not interests:
                raise InterventionError(f"{where}.soc_strategy needs env.agent_interests")
        weight = spec.get("weight", 0.5)
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not 0 < weight <= 1:
            raise InterventionError(f"{where}.weight must be a number in (0, 1], got {_show(weight)}")
        influence = spec.get("influence", 0.0)     # scripted tastes pulled toward the new friends'
        if isinstance(influence, bool) or not isinstance(influence, (int, float)) or not 0 <= influence <= 10:
            raise InterventionError(f"{where}.influence must be a number in [0, 10], got {_show(influence)}")


def _check_post(spec: dict, where: str, agents: list[str], interests: bool) -> None:
    if spec["author"] not in agents:
        raise InterventionError(f"{where}.author: unknown agent {_show(spec['author'])} "
                                f"(agents are {agents[0]} .. {agents[-1]})")
    for key in ("topic", "text"):
        if key in spec and (not isinstance(spec[key], str) or not spec[key].strip()):
            raise InterventionError(f"{where}.{key} must be a non-empty string, got {_show(spec[key])}")
        if key in spec and utf8_problem(spec[key]):        # e.g. a lone surrogate: the run could not write it
            raise InterventionError(f"{where}.{key}: {utf8_problem(spec[key])}")
    problem = topic_problem(spec["topic"])
    if problem:
        raise InterventionError(f"{where}.topic: {problem}")
    s = spec.get("sentiment", 0.0)
    if isinstance(s, bool) or not isinstance(s, (int, float)) or not -1 <= s <= 1:
        raise InterventionError(f"{where}.sentiment must be a number in [-1, 1], got {_show(s)}")


def _check_coach(spec: dict, where: str, agents: list[str], interests: bool) -> None:
    if not isinstance(spec["enabled"], bool):
        raise InterventionError(f"{where}.enabled must be true or false, got {_show(spec['enabled'])}")


def _check_lambdas(spec: dict, where: str, agents: list[str], interests: bool) -> None:
    try:
        lambda_row(spec["lambdas"], f"{where}.lambdas")
    except ValueError as exc:
        raise InterventionError(str(exc)) from None


def _no_check(spec: dict, where: str, agents: list[str], interests: bool) -> None:
    """Kinds whose keys need no check beyond their presence."""


_CHECKS = {"recommender": _check_recommender, "rerank": _check_recommender, "param": _check_param,
           "add_ties": _check_ties, "remove_ties": _check_ties, "post": _check_post, "coach": _check_coach,
           "lambdas": _check_lambdas}


def _int(value: Any, name: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InterventionError(f"{name} must be an integer in [{low}, {high}], got {_show(value)}")
    return value


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


def _check_recommender_spec(spec: Mapping, n_agents: int) -> None:
    """What building the intervention's recommender would refuse, checked without building it."""
    from socialgym.recommenders import check_recommender, check_reranking
    if spec["kind"] != "rerank":        # a rerank intervention keeps the model; only its steps are new
        check_recommender(spec["recommender"], **dict(spec.get("params") or {}))
    check_reranking([dict(s) for s in spec.get("rerank") or []], n_agents=n_agents)


def _show(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 1] + "…"
__all__ = ["KINDS", "FEED_KINDS", "InterventionError", "check_interventions"]
