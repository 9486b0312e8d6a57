"""The platform's seat: a single-agent Gymnasium environment in which the recommender is the agent.

One ``step`` is one round of the feed platform. The agent ranks the round's feeds; the users —
the scripted :class:`~socialgym.envs.platform.users.StanceUsers` by default, any object with
``act(env) -> (n, L) action matrix`` and ``reset(seed)`` by parameter — act and vote on what they
are shown, the round closes (user rewards, ties), and the agent is paid the weighted platform
objectives of that round (``socialgym.rewards.platform``).

**Observation** (a ``Dict``; shapes fixed by the task):

* ``candidates`` (n_agents, C, F) float32 — the features of each viewer's ``C`` retrieved
  candidates (``socialgym.recommenders.features``: retrieval and :data:`RANKING_FEATURES`);
* ``mask`` (n_agents, C) float32 — 1 where a candidate slot holds an item;
* ``platform`` (8,) float32 — :data:`PLATFORM_FEATURES`: the episode's progress, the last
  round's five objective values, the total tie weight per user and the share of users who commented or voted.

**Action**: ``action_form="weights"`` (default): one weight per ranking feature, ``Box(-1, 1,
(F,))``, score = features @ weights — what standard RL libraries handle out of the box;
``"scores"``: one score per (viewer, candidate), ``Box(-1, 1, (n_agents, C))``. The top
``feed_size`` candidates of each viewer by score are shown (equal scores: newer first), so every
action in the space is a valid feed. Vote-phase lists are drawn uniformly. An action outside the
space (a value outside [-1, 1] such as 3e38, NaN, an infinity, a wrong shape) is refused with a
one-line ValueError before anything changes (``socialgym.envs.platform.actions``): the platform
tasks have no lenient mode; clip a policy's output into the box (Stable-Baselines3 does).

Round 1 has nothing to rank (no items yet), so ``reset`` plays it; an episode has
``max_rounds - 1`` steps, so ``max_rounds`` must be at least 2 (a ValueError at construction
otherwise). ``ranker=`` (a registered name or a recommender) makes the feeds come from a
hand-written ranker instead, ignoring the action: how the baselines are evaluated on exactly
the same dynamics.
"""

from __future__ import annotations

from typing import Any, Mapping

import gymnasium
import numpy as np
from gymnasium import spaces

from socialgym.envs.feed.env import FeedEnv
from socialgym.envs.platform.actions import check_platform_action
from socialgym.envs.platform.users import StanceUsers
from socialgym.recommenders import make_recommender, recommender_class
from socialgym.platform.validation import check_seed, is_int, show
from socialgym.recommenders.features import DEFAULT_CANDIDATES, N_FEATURES, RANKING_FEATURES, stance_codes, stance_labels
from socialgym.recommenders.seat import CandidateRanker, FeedOnly, PlatformSeat
from socialgym.rewards.platform import (
    PLATFORM_OBJECTIVES, engaged_share, feed_authors, platform_components, platform_metrics, platform_weights,
)

PLATFORM_FEATURES: tuple[str, ...] = ("progress", *PLATFORM_OBJECTIVES, "tie_weight_per_user", "active_share")

TOPICS = ("politics", "sports", "science", "music", "food", "travel")
TASK_CONFIG: Mapping[str, Any] = dict(n_agents=30, n_actions=2, max_rounds=15, feed_size=5, vote_feed_size=5,
                                      dm_inbox_size=2, topics=TOPICS, max_topics=len(TOPICS))
"""The feed platform of every platform task (FeedConfig keywords): the issue's 30 users, 15 rounds,
feed 5."""


class PlatformEnv(gymnasium.Env):
    """The recommender's seat (module docstring). ``objective``: a name of
    :data:`PLATFORM_OBJECTIVES` or a mapping name -> weight. ``candidates`` / ``window``: the
    retrieval step. ``users``: None (``StanceUsers`` with ``user_params``) or a population
    object. ``stances``: the labels the platform sees (default: the scripted users' groups).
    Other keywords override :data:`TASK_CONFIG`. ``seed``: None or an integer >= 0 (numpy's too),
    the first ``reset``'s seed."""

    metadata = {"render_modes": []}

    def __init__(self, objective: str | Mapping[str, float] = "engagement", *, action_form: str = "weights",
                 candidates: int = DEFAULT_CANDIDATES, window: int = 3, users: Any = None, user_params: Mapping | None = None,
                 stances: Any = None, ranker: Any = None, seed: int | None = None, **config: Any) -> None:
        seed = check_seed(seed, "seed")           # a Python int: Gymnasium's seeding takes no numpy integers
        rounds = config.get("max_rounds", TASK_CONFIG["max_rounds"])
        if is_int(rounds) and rounds < 2:
            raise ValueError(f"PlatformEnv: max_rounds must be >= 2 (reset() plays round 1, which has nothing to "
                             f"rank, so an episode has max_rounds - 1 steps), got {show(rounds)}")
        for key in ("recommender", "recommender_kwargs", "rerank"):
            if key in config:
                raise ValueError(f"PlatformEnv: {key!r} cannot be set: the platform's seat (or ranker=) builds the "
                                 "feeds")
        if users is not None and user_params:
            raise ValueError("PlatformEnv: user_params configure the scripted users; with users= pass none")
        self.objective = objective
        self.weights = platform_weights(objective)
        self.seat = PlatformSeat(candidates, window, action_form=action_form)
        self.feed_env = FeedEnv(**{**TASK_CONFIG, **config, "recommender": FeedOnly(self.seat),
                                   "invalid_actions": "strict"})
        cfg = self.feed_env.config
        self.n_agents, self.n_topics = cfg.n_agents, len(cfg.topics)
        self._user_params = dict(user_params or {})
        self._custom_users = users
        self.users = users if users is not None else StanceUsers(self.feed_env.layout, self.n_topics, seed,
                                                                 **self._user_params)
        labels = stances if stances is not None else getattr(self.users, "stances", None)
        self.stances = stance_codes(labels, self.n_agents)
        labels = stance_labels(self.stances)
        self.seat.set_stances(labels)
        self.ranker = None
        if ranker is not None:          # a hand-written ranker builds the feeds; it sees the same stances
            if isinstance(ranker, str) and issubclass(recommender_class(ranker), CandidateRanker):
                extra = {"stances": labels} if ranker == "bridging" else {}
                self.ranker = make_recommender(ranker, candidates=candidates, window=window, **extra)
            else:
                self.ranker = make_recommender(ranker)
            if isinstance(self.ranker, CandidateRanker):
                self.ranker.set_stances(labels)
            # the seat still learns its running counts, so the observation means the same in both modes
            self.feed_env.recommender = FeedOnly(self.ranker, observers=(self.seat,))
        self._seed = seed
        n, c = self.n_agents, candidates
        self.observation_space = spaces.Dict({
            "candidates": spaces.Box(-np.inf, np.inf, (n, c, N_FEATURES), np.float32),
            "mask": spaces.Box(0.0, 1.0, (n, c), np.float32),
            "platform": spaces.Box(-np.inf, np.inf, (len(PLATFORM_FEATURES),), np.float32),
        })
        self.action_space = spaces.Box(-1.0, 1.0, self.seat.action_shape(n), np.float32)
        self.last_components = np.zeros(len(PLATFORM_OBJECTIVES))
        self.last_metrics: dict[str, float] = {}
        self._active_share = 0.0

    # ---------------------------------------------------------------- episode
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        seed = check_seed(seed, "seed")
        if seed is None and self._seed is not None and self.feed_env.rng is None:
            seed = self._seed                      # the constructor's seed, on the first reset
        super().reset(seed=seed)
        self.feed_env.reset(seed=seed)
        user_seed = int(self.np_random.integers(2**31))     # Gymnasium's stream: seeded by reset(seed)
        if self._custom_users is None:
            self.users = StanceUsers(self.feed_env.layout, self.n_topics, user_seed, **self._user_params)
        elif hasattr(self.users, "reset"):
            self.users.reset(user_seed)
        self.seat.deferred = self.ranker is None
        self.last_components = np.zeros(len(PLATFORM_OBJECTIVES))
        self._play_round()                 # round 1: nothing to rank yet
        return self._observe(), {"round": self.feed_env.round}

    _STEP_ATTRS = ("last_components", "last_metrics", "last_per_viewer", "last_candidates", "_active_share")
    """What a step rebinds on the environment itself (restored by reference when it fails)."""

    def step(self, action):
        """One round. ``action`` must lie in ``action_space`` (ValueError otherwise, nothing
        changed; ignored with ``ranker=``). Atomic: if the users or the platform raise — while
        the round is played or its observation is built — the environment, the seat and the
        scripted users' generator are left as they were, so the step can be retried."""
        env = self.feed_env
        env._require_state("step")
        if not env.agents:
            raise RuntimeError("the episode is over; call reset()")
        if self.ranker is None:
            action, _ = check_platform_action(action, self.action_space, self.seat.action_form, strict=True)
        seat_state = (self.seat.action, self.seat.prepared, self.seat.last_shown)
        own_state = {k: self.__dict__[k] for k in self._STEP_ATTRS if k in self.__dict__}
        users_rng = getattr(self.users, "rng", None)
        users_state = users_rng.bit_generator.state if users_rng is not None else None
        try:
            with env.atomic():
                if self.ranker is None:             # a ranker's feeds were built when the last round closed
                    self.seat.set_action(action, self.n_agents)
                    env.build_feeds()
                shown = env.act_feeds.copy()
                done = self._play_round()
                obs = self._observe() if not done else self._empty_observation()   # draws from env.rng
        except BaseException:
            self.seat.action, self.seat.prepared, self.seat.last_shown = seat_state
            self.__dict__.update(own_state)
            if users_state is not None:
                users_rng.bit_generator.state = users_state
            raise
        reward = float(self.weights @ self.last_components)
        info = {"round": env.round - 1, "components": dict(zip(PLATFORM_OBJECTIVES, self.last_components.tolist())),
                "metrics": self.last_metrics, "feeds": shown}
        return obs, reward, False, done, info

    def _play_round(self) -> bool:
        env = self.feed_env
        env.step_arrays(self.users.act(env), observe=False)
        *_, done, _ = env.step_arrays(self.users.act(env), observe=False)
        record = env.last_round
        batch = record.batch
        per_viewer = platform_components(batch, record.totals, self.stances, self.n_topics)
        self.last_components = per_viewer.mean(axis=0)
        self.last_per_viewer = per_viewer
        authors = feed_authors(batch.feed, env.content.column("author"))
        self.last_metrics = platform_metrics(batch, record.totals, self.stances, self.n_topics, authors, per_viewer)
        self._active_share = engaged_share(batch)
        return bool(done)

    # ---------------------------------------------------------------- observation
    def _observe(self) -> dict:
        env = self.feed_env
        request = env.feed_request()
        cand, feats = self.seat.prepare(request, env.rng)
        self.last_candidates = cand
        platform = np.array([(env.round - 1) / env.config.max_rounds, *self.last_components,
                             env.ties.weights.values.sum() / self.n_agents, self._active_share], np.float32)
        return {"candidates": feats.astype(np.float32, copy=False), "mask": (cand >= 0).astype(np.float32), "platform": platform}

    def _empty_observation(self) -> dict:
        space = self.observation_space
        return {k: np.zeros(s.shape, np.float32) for k, s in space.spaces.items()}


__all__ = ["PlatformEnv", "PLATFORM_FEATURES", "RANKING_FEATURES", "TASK_CONFIG", "TOPICS"]
