"""``run_discussion``: play one episode of the discussion environment with given policies."""

from __future__ import annotations

from typing import Any, Callable, Mapping

from socialgym.discussion.config import MODERATOR


def policy_lookup(policies: Any) -> Callable[[str], Any]:
    """``policies`` is one policy for everyone, ``{agent: policy}``, or the shorthand
    ``{"users": policy, "moderator": policy}`` (agent keys win over ``users``)."""
    if not isinstance(policies, Mapping):
        return lambda agent: policies

    def find(agent: str):
        if agent in policies:
            return policies[agent]
        if agent != MODERATOR and "users" in policies:
            return policies["users"]
        raise KeyError(f"no policy for {agent!r}; give one per agent, or 'users' and 'moderator'")
    return find


def _call(policy, agent, obs, info):
    # the per-turn protocol (socialgym.baselines.protocol.DiscussionPolicy), or a plain function
    if hasattr(policy, "act"):
        return policy.act(agent, obs, info)
    if callable(policy):
        return policy(agent, obs, info)
    raise TypeError(f"a discussion policy needs act(agent, observation, info) or to be callable; got {policy!r}")


def run_discussion(env, policies: Any, *, seed: int | None = None) -> dict:
    """Reset ``env`` (seeded if ``seed`` is given), play until every agent is done, and return
    ``{"turns": env.turn_log, "returns": {agent: summed reward}, "transcript": str}``."""
    base = getattr(env, "unwrapped", env)
    lookup = policy_lookup(policies)
    distinct = {id(p): p for p in (policies.values() if isinstance(policies, Mapping) else [policies])}
    for p in distinct.values():          # a policy serving several agents is reset once
        if hasattr(p, "reset"):
            p.reset()
    env.reset(seed=seed)
    returns = {a: 0.0 for a in base.possible_agents}
    for agent in env.agent_iter():
        obs, reward, terminated, truncated, info = env.last()
        returns[agent] += float(reward)
        action = None if terminated or truncated else _call(lookup(agent), agent, obs, info)
        env.step(action)
    return {"turns": base.turn_log, "returns": returns, "transcript": base.transcript()}
