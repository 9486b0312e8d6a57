"""The discussion substrate (paper: LLM facilitators in synthetic discussions).

Configuration, turn-taking, rewards (the moderation game and per-role user terms), the
paper's prompts and SocioDemographic Backgrounds, and discussion metrics (ROUGE-L diversity,
comment length, per-turn means). The PettingZoo environment itself is
``socialgym.discussion_env`` (``socialgym.envs.discussion_v0``); the statistics of the
experiment's analysis (pairwise t-tests, OLS) are ``socialgym.experiments.analysis.discussion_analysis``.
"""

from socialgym.discussion.config import DEFAULT_TOPIC, MODERATOR, ROLES, DiscussionConfig
from socialgym.discussion.loop import run_discussion
from socialgym.discussion.metrics import comment_lengths, diversity, lcs_length, mean_by_turn, rouge_l, tokenize
from socialgym.discussion.prompts import (
    MODERATION_GAME_SCORES, ROLE_INSTRUCTIONS, STRATEGIES, STRATEGY_LABELS, moderator_instructions,
)
from socialgym.discussion.rewards import (
    MODERATOR_TERMS, ROLE_REWARDS, USER_TERMS, ModerationScores, RewardTracker, score_discussion,
)
from socialgym.discussion.sdb import SDB, anonymised, generate_sdbs, load_sdbs, sdb_block
from socialgym.discussion.turn_taking import TURN_TAKING, paper_turn, random_turn, round_robin_turn

__all__ = [
    "DiscussionConfig", "ROLES", "MODERATOR", "DEFAULT_TOPIC", "run_discussion",
    "TURN_TAKING", "paper_turn", "round_robin_turn", "random_turn",
    "ModerationScores", "RewardTracker", "score_discussion", "ROLE_REWARDS", "USER_TERMS", "MODERATOR_TERMS",
    "STRATEGIES", "STRATEGY_LABELS", "MODERATION_GAME_SCORES", "ROLE_INSTRUCTIONS", "moderator_instructions",
    "SDB", "generate_sdbs", "load_sdbs", "anonymised", "sdb_block",
    "rouge_l", "diversity", "tokenize", "lcs_length", "comment_lengths", "mean_by_turn",
]
