"""Unit tests of ``socialgym.agents.mix``: ``PolicyMix`` routes each agent to the policy that owns it."""

from __future__ import annotations

import pytest

from socialgym.agents.mix import PolicyMix


# ============================================================================ PolicyMix
class _Recorder:
    def __init__(self, tag):
        self.tag, self.calls = tag, []

    def act(self, observations):
        self.calls.append(dict(observations))
        return {a: f"{self.tag}:{o}" for a, o in observations.items()}


def test_policy_mix_routes_and_merges():
    p, q, idle = _Recorder("p"), _Recorder("q"), _Recorder("idle")
    mix = PolicyMix({p: ["agent_0", "agent_2"], q: ["agent_1"], idle: ["agent_3"]})
    out = mix.act({"agent_0": 0, "agent_1": 1, "agent_2": 2})
    assert out == {"agent_0": "p:0", "agent_1": "q:1", "agent_2": "p:2"}
    assert p.calls == [{"agent_0": 0, "agent_2": 2}] and q.calls == [{"agent_1": 1}]
    assert idle.calls == []                                          # nothing to do: not called


def test_policy_mix_agent_assigned_twice():
    with pytest.raises(ValueError, match="agent_1"):
        PolicyMix({_Recorder("p"): ["agent_0", "agent_1"], _Recorder("q"): ["agent_1"]})


def test_policy_mix_unowned_agent_and_bad_policy():
    mix = PolicyMix({_Recorder("p"): ["agent_0"]})
    with pytest.raises(ValueError, match="agent_7"):
        mix.act({"agent_0": 0, "agent_7": 7})
    with pytest.raises(TypeError):
        PolicyMix({object(): ["agent_0"]})
