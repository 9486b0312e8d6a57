"""Platform state: the content store, the topic vocabulary and a round's action batch.

Everything here is columnar numpy so that the rewards, ties and recommenders can work on all
agents at once.
"""

from socialgym.platform.actions import (
    ACTION_TYPES, COM, CONTENT_TYPES, DM, NOT, POST, PUBLIC_TYPES, TONES, TONE_SENTIMENT, RoundBatch,
)
from socialgym.platform.content import ContentStore
from socialgym.platform.topics import MAX_TOPIC_CHARS, TopicVocabulary, topic_problem
from socialgym.platform.validation import (
    NotResetError, check_finite, check_int, check_range, check_seed, is_int, is_number, show, utf8_problem,
)

__all__ = [
    "ACTION_TYPES", "CONTENT_TYPES", "PUBLIC_TYPES", "POST", "COM", "DM", "NOT", "TONES", "TONE_SENTIMENT",
    "RoundBatch", "ContentStore", "TopicVocabulary", "MAX_TOPIC_CHARS", "topic_problem",
    "NotResetError", "check_seed", "utf8_problem", "check_int", "check_finite", "check_range", "is_int",
    "is_number", "show",
]
