"""``PolicyMix``: several policies in one run, each acting for its own agents."""

from __future__ import annotations

from typing import Any, Iterable, Mapping


class PolicyMix:
    """``PolicyMix({llm_policy: ["agent_0", "agent_1"], scripted: ["agent_2", ...]})``.

    One ``act`` call splits the observations by owner and merges the actions. Every agent must
    have exactly one owner, so none is silently left without an action.
    """

    def __init__(self, assignment: Mapping[Any, Iterable[str]]) -> None:
        self.owner: dict[str, Any] = {}
        for policy, agents in assignment.items():
            if not callable(getattr(policy, "act", None)):
                raise TypeError(f"{policy!r} has no act(observations) method")
            for agent in agents:
                if agent in self.owner:
                    raise ValueError(f"agent {agent!r} is assigned to two policies")
                self.owner[agent] = policy
        self.policies = list(assignment)

    def act(self, observations: dict[str, Any]) -> dict[str, Any]:
        missing = [a for a in observations if a not in self.owner]
        if missing:
            raise ValueError(f"no policy for agent(s) {missing[:5]}")
        actions: dict[str, Any] = {}
        for policy in self.policies:
            mine = {a: o for a, o in observations.items() if self.owner[a] is policy}
            if mine:
                actions.update(policy.act(mine))
        return actions
