"""Registered tasks of the feed environment: one reward objective at one fixed size.

    import socialgym
    env = socialgym.make("socialgym/feed-SOC-v0")                     # small: 20 agents x 10 rounds
    env = socialgym.make("socialgym/feed-mixed-large-v0")             # large: 100 agents x 20 rounds
    env = socialgym.make("socialgym/feed-INF-v0", obs_format="numeric", seed=3)

A task is a configuration, not a code path: ``TASKS[id].config`` holds the ``FeedConfig``
keywords, and ``make`` passes them (with any overrides, e.g. ``obs_format``, ``seed``,
``render_mode``) to ``socialgym.parallel_env``. Ids are ``socialgym/feed-<OBJECTIVE>[-large]-v0``:

- ``SOC``, ``INF``, ``PRE``, ``COORD``, ``EMO``: every agent is paid one reward component
  (λ is one-hot on it, the same every episode);
- ``mixed``: every agent's λ is redrawn from a flat Dirichlet at each ``reset`` — from the
  ``reset`` seed, so equal seeds give equal λ (``reset()`` without a seed goes on drawing from
  the stream, like the environment's own RNG). One policy must read λ to know its task.

The two sizes (``SIZES``) differ in population and horizon only; the per-agent interface
(actions per round, feed, vote feed and DM inbox sizes, recommender) is the same. The table
with every id is in ``docs/tasks.md`` (written by ``benchmarks/tasks.py`` from this module).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Mapping

import numpy as np
from pettingzoo.utils import BaseParallelWrapper, parallel_to_aec, wrappers

from socialgym.config import REWARD_NAMES
from socialgym.envs import REGISTRY
from socialgym.envs import make as make_env
from socialgym.envs.feed_v0 import parallel_env
from socialgym.envs.platform_v0 import PLATFORM_TASKS
from socialgym.envs.platform_v0 import make as make_platform
from socialgym.platform.validation import check_seed

SIZES: Mapping[str, Mapping[str, Any]] = MappingProxyType({
    # small = the PPO baseline's default training set-up (socialgym/training/ppo.py, Args)
    "small": MappingProxyType(dict(n_agents=20, n_actions=2, max_rounds=10, feed_size=6, vote_feed_size=6,
                                   dm_inbox_size=4, recommender="chronological")),
    "large": MappingProxyType(dict(n_agents=100, n_actions=2, max_rounds=20, feed_size=6, vote_feed_size=6,
                                   dm_inbox_size=4, recommender="chronological")),
})
"""Size name -> the FeedConfig keywords that fix it (agents, N, rounds, feed sizes, recommender)."""

OBJECTIVES: tuple[str, ...] = (*REWARD_NAMES, "mixed")
LAMBDA_KINDS = ("dirichlet", "uniform")
_LAMBDA_STREAM = 0x1A3BDA5   # spawn key of the λ stream: independent of the env's RNG on the same seed


def draw_lambdas(n_agents: int, rng: np.random.Generator, kind: str = "dirichlet") -> np.ndarray:
    """Per-agent reward weights, (n_agents, 5), rows on the simplex. ``"dirichlet"``: each row
    from a flat Dirichlet (the PPO baseline's ``--lambdas dirichlet`` and the mixed task);
    ``"uniform"``: every weight 1/5 (no draw)."""
    if kind == "dirichlet":
        return rng.dirichlet(np.ones(len(REWARD_NAMES)), size=n_agents)
    if kind == "uniform":
        return np.full((n_agents, len(REWARD_NAMES)), 1.0 / len(REWARD_NAMES))
    raise ValueError(f"lambdas must be one of {LAMBDA_KINDS}, got {kind!r}")


def lambda_stream(seed: int | None) -> np.random.Generator:
    """The generator the mixed task draws λ from after ``reset(seed=seed)``."""
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(_LAMBDA_STREAM,)))


class RedrawLambdas(BaseParallelWrapper):
    """Redraws every agent's λ at each ``reset`` (see the module docstring). Everything else —
    ``step_arrays``, ``layout``, ``lambdas``, ``last_round`` ... — is the wrapped env's."""

    def __init__(self, env, kind: str = "dirichlet") -> None:
        super().__init__(env)
        draw_lambdas(2, np.random.default_rng(0), kind)          # an unknown kind fails here
        self.kind = kind
        self.lambda_rng: np.random.Generator | None = None

    def reset(self, seed: int | None = None, options: dict | None = None):
        base = self.env.unwrapped
        seed = check_seed(seed, "seed")
        if seed is not None:
            self.lambda_rng = lambda_stream(seed)
        elif self.lambda_rng is None:
            self.lambda_rng = lambda_stream(base.config.seed)
        base.lambdas = draw_lambdas(base.config.n_agents, self.lambda_rng, self.kind)
        return self.env.reset(seed=seed, options=options)


@dataclass(frozen=True)
class Task:
    """One registered task: ``config`` is the FeedConfig keywords; ``objective`` a reward
    component or ``"mixed"``."""

    id: str
    objective: str
    size: str
    config: Mapping[str, Any]

    @property
    def redraws_lambdas(self) -> bool:
        return self.objective == "mixed"

    def make(self, *, aec: bool = False, **overrides: Any):
        """The ParallelEnv (``aec=True``: the AEC form). ``overrides``: FeedConfig keywords and
        ``render_mode`` — ``lambdas`` excepted, since λ is what defines the task."""
        if "lambdas" in overrides:
            raise ValueError(f"{self.id} fixes lambdas (its objective is {self.objective}); for other "
                             "reward weights use socialgym.parallel_env(lambdas=...)")
        env = parallel_env(**{**self.config, **overrides})
        if self.redraws_lambdas:
            env = RedrawLambdas(env)
        return wrappers.OrderEnforcingWrapper(parallel_to_aec(env)) if aec else env


def _task(objective: str, size: str) -> Task:
    suffix = "" if size == "small" else f"-{size}"
    config = dict(SIZES[size])
    if objective != "mixed":
        config["lambdas"] = tuple(float(r == objective) for r in REWARD_NAMES)
    return Task(f"socialgym/feed-{objective}{suffix}-v0", objective, size, MappingProxyType(config))


TASKS: Mapping[str, Task] = MappingProxyType({
    t.id: t for t in (_task(o, s) for s in SIZES for o in OBJECTIVES)})
"""Task id -> Task, small sizes first."""


def task_id(objective: str, size: str = "small") -> str:
    """``task_id("mixed")`` -> ``"socialgym/feed-mixed-v0"``."""
    for t in TASKS.values():
        if t.objective == objective and t.size == size:
            return t.id
    raise ValueError(f"no task with objective {objective!r} and size {size!r}; objectives: "
                     f"{', '.join(OBJECTIVES)}; sizes: {', '.join(SIZES)}")


def make(env_id: str, **kwargs: Any):
    """A registered task (``TASKS``) or environment (``socialgym.REGISTRY``) by id; keywords are
    config overrides (and ``aec=True`` for the AEC form). Unknown ids: a ValueError listing the
    known ones."""
    if isinstance(env_id, str) and env_id in TASKS:
        return TASKS[env_id].make(**kwargs)
    if isinstance(env_id, str) and env_id in REGISTRY:
        return make_env(env_id, **kwargs)
    if isinstance(env_id, str) and env_id in PLATFORM_TASKS:
        return make_platform(env_id, **kwargs)
    known = [*TASKS, *sorted(REGISTRY), *PLATFORM_TASKS]
    close = difflib.get_close_matches(str(env_id), known, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise ValueError(f"unknown environment id {env_id!r}{hint}; registered: {', '.join(known)}")


__all__ = ["TASKS", "SIZES", "OBJECTIVES", "Task", "RedrawLambdas", "draw_lambdas", "lambda_stream", "make",
           "task_id"]
