"""Platform state: the content store, the topic vocabulary and a round's action batch.

Everything here is columnar numpy so that the rewards, ties and recommenders can work on all
agents at once.
"""

from socialgym.platform.actions import (
    ACTION_TYPES, COM, DM, NOT, POST, TONES, TONE_SENTIMENT, RoundBatch,
)
from socialgym.platform.content import ContentStore
from socialgym.platform.topics import MAX_TOPIC_CHARS, TopicVocabulary, topic_problem
from socialgym.platform.validation import NotResetError, check_seed, utf8_problem

__all__ = [
    "ACTION_TYPES", "POST", "COM", "DM", "NOT", "TONES", "TONE_SENTIMENT",
    "RoundBatch", "ContentStore", "TopicVocabulary", "MAX_TOPIC_CHARS", "topic_problem",
    "NotResetError", "check_seed", "utf8_problem",
]
