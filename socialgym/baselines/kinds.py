"""The policy kinds a config's group can name, in one table.

Every question the config, its validation, the runner and the decision logs ask about a kind —
which tier it belongs to, whether it needs the run's LLM client, whether it reads the numeric
observation, whether ``logging.decisions: llm`` logs it, whether its ``params.path`` names a
model file — is answered here, so that adding a kind is one row.
"""

from __future__ import annotations

from dataclasses import dataclass

TIERS = ("llm", "archetype", "distilled", "trained", "scripted")
"""A group's ``policy:`` in YAML: how its agents decide (docs/hybrid.md)."""


@dataclass(frozen=True)
class PolicyKind:
    name: str
    tier: str
    """One of :data:`TIERS` (``trained`` is kind ``torch``; scripted kinds share ``scripted``)."""
    client: bool = False
    """Its agents need the run's LLM client."""
    numeric: bool = False
    """It reads the numeric observation (the env is built with ``obs_format="both"``)."""
    llm_logged: bool = False
    """``logging.decisions: llm`` logs its agents (the LLM-driven ones)."""
    model_file: bool = False
    """Its ``params.path`` names a trained network (``model.pt``), read before a run starts."""


POLICY_KIND_TABLE: tuple[PolicyKind, ...] = (
    PolicyKind("random", "scripted"),
    PolicyKind("greedy", "scripted"),
    PolicyKind("llm", "llm", client=True, llm_logged=True),
    PolicyKind("torch", "trained", numeric=True, model_file=True),
    PolicyKind("topic_users", "scripted", numeric=True),
    PolicyKind("social_users", "scripted", numeric=True),
    PolicyKind("archetype", "archetype", client=True, llm_logged=True),
    PolicyKind("distilled", "distilled", numeric=True, model_file=True),
)
POLICY_KINDS: tuple[str, ...] = tuple(k.name for k in POLICY_KIND_TABLE)
KIND = {k.name: k for k in POLICY_KIND_TABLE}


def kinds_where(**flags) -> tuple[str, ...]:
    """The kinds whose fields equal ``flags`` (e.g. ``client=True``, ``tier="scripted"``), in table order."""
    return tuple(k.name for k in POLICY_KIND_TABLE if all(getattr(k, f) == v for f, v in flags.items()))


__all__ = ["TIERS", "PolicyKind", "POLICY_KIND_TABLE", "POLICY_KINDS", "KIND", "kinds_where"]
