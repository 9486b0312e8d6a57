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

Optional, for surveys (``socialgym.experiments.run.surveys``): a feed policy that is not an LLM
policy may define ``answer_survey(agent, item, context) -> int | str | None`` (``SurveyHook``).
``item`` is a dict with ``id``, ``text``, ``scale`` (``likert5``, ``0-10``, ``1-10`` or ``text``),
``survey`` (its name), ``instrument`` (None for a custom questionnaire) and, for stance, ``topic``;
``context`` has ``round``, ``env`` (to read, never to change), ``index`` and ``agent``, ``survey``
and ``rule``: the answer the built-in rule would give (None where there is none). Return an
integer of the scale (a string for ``text``), or None to leave the item to the rule. A value
that does not fit the scale stops the run with a ``ValueError`` naming the policy, the agent and
the item. Without the method, the built-in rules answer.
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


@runtime_checkable
class SurveyHook(Protocol):
    def answer_survey(self, agent: str, item: dict, context: Any) -> int | str | None:
        """The agent's answer to one survey item, or None for the built-in rule's (see above)."""
        ...


__all__ = ["Policy", "DiscussionPolicy", "SurveyHook"]
