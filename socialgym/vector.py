"""Many platforms in one step: the vector form of a registered task.

    import socialgym.vector
    venv = socialgym.vector.make_vec("socialgym/feed-mixed-v0", num_envs=16)
    obs, info = venv.reset(seed=0)                       # platform e seeded with 0 + e
    actions = policy(obs)                                # (num_envs * n_agents, L) integers
    obs, rewards, terminated, truncated, info = venv.step_arrays(actions)

``num_envs`` independent platforms of the task are stepped by one array computation
(:class:`socialgym.envs.feed.batched.BatchedFeedEnv`): each platform's content, ties, feeds,
rewards and random streams are exactly those of ``socialgym.make(task_id)`` reset with the same
seed (``tests/test_vector.py`` checks it byte for byte over whole episodes), while a step costs
about as much as one environment of ``num_envs * n_agents`` agents instead of ``num_envs``
environments' worth of Python.

Conventions (docs/environment.md, "Many platforms at once"):

- **Rows are agents of all platforms**, ``row = env * n_agents + agent`` — the layout SuperSuit's
  ``concat_vec_envs`` gives a PettingZoo environment and the one a parameter-shared policy wants
  (one forward pass over every agent). :meth:`FeedVecEnv.per_env` reshapes any row array to
  ``(num_envs, n_agents, ...)``. Observations are ``step_arrays``' stacked numeric arrays
  (``self``, ``feed``, ``dms``, ``vote_items``, ``phase``, ``round``, ``action_mask``); author
  features are indices within the agent's platform, as in a single environment.
- **Seeds** follow Gymnasium's vector environments: ``reset(seed=s)`` seeds platform ``e`` with
  ``s + e``; a list gives one seed per platform; ``reset()`` continues every platform's streams
  (the first time from the task's ``seed`` + e).
- **Episodes end together**: every platform of a task has the same horizon and steps in lock
  step, so ``terminated``/``truncated`` (one flag per platform) are equal across platforms.
  With ``autoreset=True`` (the default) the step that ends the episodes resets every platform
  (as ``reset()`` without a seed: streams continue) and returns the new episodes' first
  observation; the last observation, rewards' components and infos of the ended episodes are in
  ``info["final_observation"]`` and ``info["final_info"]`` (Gymnasium's same-step
  convention, as SuperSuit's).
- On the ``mixed`` task every platform's λ is redrawn at each reset from its own seed, as
  :class:`socialgym.tasks.RedrawLambdas` does for one environment.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from socialgym.envs.feed.batched import BatchedFeedEnv
from socialgym.platform.validation import show
from socialgym.tasks import OBJECTIVES, TASKS, draw_lambdas, lambda_stream, task_id as objective_task_id


def _registered_task(task_id: Any) -> str:
    """The registered id of ``task_id`` (an id or an objective), or one short line naming it."""
    if not isinstance(task_id, str):
        raise TypeError(f"task_id must be a task id or an objective (a str), got {type(task_id).__name__} "
                        f"{show(task_id, 60)}")
    if task_id not in TASKS and "/" not in task_id:
        try:
            task_id = objective_task_id(task_id)
        except ValueError:                           # its message repeats the whole (maybe huge) name
            pass
    if task_id not in TASKS:
        raise ValueError(f"unknown task {show(task_id, 80)}: socialgym.tasks.TASKS lists the registered ids "
                         f"(such as 'socialgym/feed-SOC-v0'); an objective is one of {', '.join(OBJECTIVES)}")
    return task_id


class FeedVecEnv:
    """``num_envs`` platforms of one task, stepped together (see the module docstring)."""

    def __init__(self, task_id: str, num_envs: int, *, autoreset: bool = True, **overrides: Any) -> None:
        task_id = _registered_task(task_id)
        if isinstance(num_envs, bool) or not isinstance(num_envs, (int, np.integer)) or num_envs < 1:
            raise ValueError(f"num_envs must be an integer >= 1, got {num_envs!r}")
        self.task = TASKS[task_id]
        if "lambdas" in overrides:
            raise ValueError(f"{task_id} fixes lambdas (its objective is {self.task.objective})")
        if overrides.get("obs_format", "numeric") != "numeric":
            raise ValueError("a vector environment steps numeric arrays only (obs_format='numeric')")
        config = {**self.task.config, **overrides, "obs_format": "numeric"}
        self.env = BatchedFeedEnv(int(num_envs), **config)
        self.num_envs, self.n_agents = int(num_envs), self.env.platform_size
        self.autoreset = bool(autoreset)
        self._lambda_rngs: list[np.random.Generator] = []
        single = self.task.make(**{**overrides, "obs_format": "numeric"}).unwrapped
        self.single_action_space = single.action_space(single.possible_agents[0])
        self.single_observation_space = single.observation_space(single.possible_agents[0])
        self.layout = self.env.layout

    @property
    def config(self):
        """The configuration of one platform."""
        return self.env.single_config

    def per_env(self, rows: np.ndarray) -> np.ndarray:
        """An array with one row per agent of every platform -> ``(num_envs, n_agents, ...)``."""
        rows = np.asarray(rows)
        return rows.reshape(self.num_envs, self.n_agents, *rows.shape[1:])

    def reset(self, seed: Any = None, options: dict | None = None):
        """Start every platform's episode; ``seed`` as in Gymnasium (see the module docstring).
        Returns ``(obs, info)``: stacked arrays, and ``{"seeds": the platforms' seeds or None}``."""
        seeds = self.env.platform_seeds(seed)
        if self.task.redraws_lambdas:
            if seeds is not None:
                self._lambda_rngs = [lambda_stream(s) for s in seeds]
            elif not self._lambda_rngs:
                base = self.env.config.seed
                self._lambda_rngs = [lambda_stream(None if base is None else base + e) for e in range(self.num_envs)]
            self.env.lambdas = np.concatenate([draw_lambdas(self.n_agents, rng) for rng in self._lambda_rngs])
        return self.env.reset_arrays(seeds), {"seeds": seeds}

    def step_arrays(self, actions: Any):
        """One phase of every platform: ``actions`` is an ``(num_envs * n_agents, L)`` (or
        ``(num_envs, n_agents, L)``) integer matrix. Returns ``(obs, rewards, terminated,
        truncated, info)``: rewards one per row, the flags one per platform, ``info`` the batched
        environment's (``reward_components`` per row after a vote step, ``invalid`` by row id
        ``agent_<row>``)."""
        matrix = actions
        if isinstance(matrix, (list, tuple)):        # nested lists: their shape is checked as an array's
            try:
                matrix = np.asarray(matrix)
            except ValueError:                       # ragged: the batched env names it
                matrix = actions
        if hasattr(matrix, "shape") and len(matrix.shape) == 3:
            if tuple(matrix.shape[:2]) != (self.num_envs, self.n_agents):
                raise ValueError(f"step_arrays: a 3-D action matrix must have shape (num_envs, n_agents, L) = "
                                 f"({self.num_envs}, {self.n_agents}, L), got {tuple(matrix.shape)}")
            matrix = matrix.reshape(-1, matrix.shape[-1])
        obs, rewards, terminated, truncated, info = self.env.step_arrays(matrix)
        flags_t = np.full(self.num_envs, bool(terminated))
        flags_u = np.full(self.num_envs, bool(truncated))
        if (terminated or truncated) and self.autoreset:
            info = {"final_observation": obs, "final_info": info}
            obs, _ = self.reset()
        return obs, rewards, flags_t, flags_u, info

    def close(self) -> None:
        self.env.close()


def make_vec(task_id: str, num_envs: int, *, autoreset: bool = True, **overrides: Any) -> FeedVecEnv:
    """``num_envs`` platforms of a registered task (its id or objective, e.g. ``"mixed"``) stepped
    as one; ``overrides`` are FeedConfig keywords as for ``socialgym.make`` (``lambdas`` and
    settings that need a copy per platform excepted: ``socialgym.envs.feed.batched``)."""
    return FeedVecEnv(task_id, num_envs, autoreset=autoreset, **overrides)


__all__ = ["FeedVecEnv", "make_vec"]
