"""Baseline policies. The feed's policy protocol is batched:

    policy.act(observations: dict[agent, obs]) -> dict[agent, action]

one call per environment step for all agents, so LLM policies can run every agent concurrently;
the discussion's is per turn, ``policy.act(agent, observation, info) -> action``. Both are
declared in ``socialgym.baselines.protocol`` (``Policy``, ``DiscussionPolicy``).

Trainers and the network runtime (``TorchPolicy``) live in :mod:`socialgym.training`.
"""

from socialgym.baselines.greedy import GreedyPolicy
from socialgym.baselines.protocol import DiscussionPolicy, Policy
from socialgym.baselines.random_policy import RandomPolicy
from socialgym.baselines.social_users import SocialUsers
from socialgym.baselines.topic_users import TopicUsers

__all__ = ["DiscussionPolicy", "GreedyPolicy", "Policy", "RandomPolicy", "SocialUsers", "TopicUsers"]
