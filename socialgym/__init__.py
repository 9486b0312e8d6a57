"""socialgym: PettingZoo environments of social-media platforms populated by agents."""

from socialgym.config import REWARD_NAMES, FeedConfig
from socialgym.envs import REGISTRY
from socialgym.envs.feed.flat import FlatObservation
from socialgym.envs.feed_v0 import env, parallel_env, raw_env
from socialgym.envs.discussion_v0 import env as discussion_env
from socialgym.tasks import TASKS, make

__version__ = "0.1.0"

__all__ = ["parallel_env", "env", "raw_env", "discussion_env", "make", "REGISTRY", "TASKS", "FeedConfig", "REWARD_NAMES",
           "FlatObservation", "__version__"]
