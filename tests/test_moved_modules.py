"""Experiments live in socialgym.experiments' rooms (evaluate and cocoon moved from baselines,
then into analysis/ and studies/), and both policy protocols are declared in one module."""

from __future__ import annotations

import importlib

import pytest


@pytest.mark.parametrize("room, name", [("analysis", "evaluate"), ("studies", "cocoon")])
def test_experiments_live_in_experiments_not_baselines(room, name):
    assert callable(importlib.import_module(f"socialgym.experiments.{room}.{name}").main)
    for old in (f"socialgym.baselines.{name}", f"socialgym.experiments.{name}"):
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module(old)


def test_both_policy_protocols_in_one_module():
    from socialgym.agents import LLMPolicy, PolicyMix
    from socialgym.agents.discussion import LLMDiscussant, LLMModerator
    from socialgym.baselines import GreedyPolicy, RandomPolicy, TopicUsers
    from socialgym.baselines.discussion import ScriptedModerator, ScriptedUser
    from socialgym.baselines.protocol import DiscussionPolicy, Policy

    assert isinstance(RandomPolicy(seed=0), Policy) and isinstance(GreedyPolicy(seed=0), Policy)
    assert all(callable(getattr(cls, "act", None)) for cls in (TopicUsers, LLMPolicy, PolicyMix))
    assert isinstance(ScriptedUser(), DiscussionPolicy) and isinstance(ScriptedModerator(), DiscussionPolicy)
    assert all(callable(getattr(cls, "act", None)) for cls in (LLMDiscussant, LLMModerator))
