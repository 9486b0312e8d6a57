"""LLM-driven agents: personas, bounded memory, the coach, the LLM policy, policy mixes."""

from socialgym.agents.coach import Coach, coach_priorities
from socialgym.agents.llm_policy import LLMPolicy
from socialgym.agents.memory import AgentMemory, Relationship
from socialgym.agents.mix import PolicyMix
from socialgym.agents.persona import (
    MINI_IPIP, Persona, administer_mini_ipip, generate_personas, lambdas_matrix, load_personas, score_mini_ipip,
)

__all__ = ["LLMPolicy", "Coach", "coach_priorities", "AgentMemory", "Relationship", "PolicyMix", "Persona",
           "generate_personas", "load_personas", "lambdas_matrix", "administer_mini_ipip", "score_mini_ipip",
           "MINI_IPIP"]
