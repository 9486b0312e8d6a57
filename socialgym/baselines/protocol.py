"""The two policy protocols, one per environment.

- ``Policy`` (the feed environment, ``socialgym.parallel_env``): batched — one call per step
  for all agents, so LLM policies can run every agent concurrently. Scripted, trained and LLM
  feed policies implement it (``RandomPolicy``, ``GreedyPolicy``, ``TopicUsers``,
  ``TorchPolicy``, ``LLMPolicy``, ``PolicyMix``).
- ``DiscussionPolicy`` (the discussion environment, ``socialgym.discussion_env``): per turn —
  the AEC environment has one speaker at a time. ``run_discussion`` calls ``act`` (or the
  policy itself, when it is a plain function with the same arguments); what a policy reads is
  ``info["view"]``. ``ScriptedUser``, ``ScriptedModerator``, ``LLMDiscussant`` and
  ``LLMModerator`` implement it.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class Policy(Protocol):
    def act(self, observations: dict[str, Any]) -> dict[str, Any]:
        """One action per agent in ``observations`` (act- or vote-phase, as ``obs["phase"]`` says)."""
        ...


@runtime_checkable
class DiscussionPolicy(Protocol):
    def act(self, agent: str, observation: Any, info: dict) -> Any:
        """The speaking ``agent``'s action: a comment (``str``, ``""`` = a pass or, for the
        moderator, silence) or a dict (users: ``text``, ``mentions``; the moderator also
        ``warn``, ``ban``)."""
        ...


__all__ = ["Policy", "DiscussionPolicy"]
