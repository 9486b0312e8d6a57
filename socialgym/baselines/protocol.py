"""The batched policy protocol shared by scripted, trained and LLM policies."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class Policy(Protocol):
    def act(self, observations: dict[str, Any]) -> dict[str, Any]:
        """One action per agent in ``observations`` (act- or vote-phase, as ``obs["phase"]`` says)."""
        ...
