"""Applying scheduled interventions to a running platform (their kinds and checks:
:mod:`socialgym.experiments.define.interventions`).

:func:`apply_intervention` applies one (a mapping of the config's form, checked or not) to a
FeedEnv between rounds and returns its events.jsonl entry; :func:`set_coach` switches the coach
of an LLM policy (the runner applies ``coach`` with it). Each applied intervention is one line of
events.jsonl: ``{"round": r, "kind": "INTERVENTION", "intervention": <kind>, "target": ..., ...}``.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from socialgym.config import lambda_row
from socialgym.experiments.define.interventions import KINDS, InterventionError

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


def apply_intervention(env, spec: Mapping, groups: Mapping[str, Sequence[str]] | None = None,
                       policy=None) -> dict:
    """Apply one intervention to ``env`` between rounds (before its act step) and return its
    events.jsonl entry (without the round). Call ``env.refresh_feeds()`` afterwards (the runner
    does, once per round) so that the round's feeds reflect it. ``policy``: the run's policy, for
    an ``add_ties`` with ``influence`` (its scripted users' tastes move toward the new friends',
    ``TopicUsers.add_friends``)."""
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
            from socialgym.platform.population import favourite_topics
            from socialgym.ties import different_interest_ties
            favourites = favourite_topics(env.config.agent_interests, env.config.n_agents)
            src, dst = different_interest_ties(favourites, int(spec["soc_strategy"]), env.rng)
        else:
            idx = target_indices(env, target, groups)
            src, dst = np.repeat(idx, len(idx)), np.tile(idx, len(idx))
            keep = src != dst
            src, dst = src[keep], dst[keep]
        influence = float(spec.get("influence", 0.0))
        if influence:
            pulled = [p for p in getattr(policy, "policies", [policy]) if hasattr(p, "add_friends")]
            if not pulled:
                raise InterventionError("add_ties.influence moves scripted users' tastes: the run has no "
                                        "topic_users policy")
            for p in pulled:
                p.add_friends(src, dst, influence)
        env.add_ties(src, dst, weight)
        entry.update(weight=weight, n_pairs=int(len(src)), **({"influence": influence} if influence else {}))
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
        idx = target_indices(env, target, groups)
        env.set_lambdas(idx.tolist(), spec["lambdas"])
        entry.update(lambdas=lambda_row(spec["lambdas"], "lambdas").tolist(), n_agents=int(len(idx)))
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
    p.set_coached(coached)
    return sorted(coached)


def _pair_indices(env, pairs) -> tuple[np.ndarray, np.ndarray]:
    index = {a: i for i, a in enumerate(env.possible_agents)}
    src = np.array([index[p[0]] for p in pairs], np.int64)
    dst = np.array([index[p[1]] for p in pairs], np.int64)
    return src, dst


__all__ = ["apply_intervention", "set_coach", "target_indices"]
