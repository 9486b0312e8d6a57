"""Baseline policies. The policy protocol is batched:

    policy.act(observations: dict[agent, obs]) -> dict[agent, action]

one call per environment step for all agents, so LLM policies can run every agent concurrently.
"""

from socialgym.baselines.greedy import GreedyPolicy
from socialgym.baselines.protocol import Policy
from socialgym.baselines.random_policy import RandomPolicy
from socialgym.baselines.topic_users import TopicUsers

__all__ = ["GreedyPolicy", "Policy", "RandomPolicy", "TopicUsers"]
