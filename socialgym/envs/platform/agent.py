"""The feed environment with the platform as one more PettingZoo agent, so users and platform can
learn at the same time: ``socialgym.parallel_env(platform_agent=True, ...)``.

The agent ``"platform"`` sits beside ``agent_0 .. agent_{n-1}``. Users see a round's feed before
they act, so the platform ranks the *next* round's feed: in the vote step of round ``t`` its
action (as in :class:`~socialgym.envs.platform.env.PlatformEnv`: feature weights, or scores per
(viewer, candidate) with ``platform_action_form="scores"``) ranks the candidates it observed in
that phase, and the feed of round ``t + 1`` shows them. Its action in an act step is ignored (a
no-op; its observation there is all zeros). Its reward arrives with each vote step: the
weighted platform objectives (``platform_objective``) of the round that step closes — which
was ranked by its action one vote step earlier. Vote-phase lists are drawn uniformly.
Its observation is taken in the vote phase, before that phase's votes and tie update: the
features are one update older than those :class:`PlatformEnv` shows after a round closes, so a
policy moved from one form to the other sees slightly shifted inputs.
Stances the platform sees: ``platform_stances`` (one label per user; default unknown).

Its vote-step action is checked against ``action_space("platform")`` (``Box(-1, 1)``;
``socialgym.envs.platform.actions``), following the feed environment's ``invalid_actions``:
``"strict"`` refuses a value outside [-1, 1] (3e38, an infinity), NaN, a wrong shape or
anything that is not numbers with a one-line ValueError naming the platform, the field and
the value; ``"lenient"`` (the default) clips values outside the box into it, drops an action
it cannot clip (that round is ranked as without an action: equal scores, newest first), and
records what it did in ``infos["platform"]["invalid"]`` (a list of ``{"phase", "slot",
"field", "reason"}`` records, empty when the action was valid). A step without a
``"platform"`` entry ranks as without an action too. Every step is atomic: when it raises (a
refused action of the platform or of a user, a fault in the recommender or a scorer, building
an observation) the environment, the seat (its action and prepared candidates) and the
platform's last components are left as they were, so a retry behaves as if the failed step
never happened.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv

from socialgym.envs.feed.env import FeedEnv
from socialgym.envs.platform.actions import PLATFORM, check_platform_action
from socialgym.envs.platform.env import PLATFORM_FEATURES
from socialgym.recommenders.features import DEFAULT_CANDIDATES, N_FEATURES, stance_codes, stance_labels
from socialgym.recommenders.seat import FeedOnly, PlatformSeat
from socialgym.rewards.platform import PLATFORM_OBJECTIVES, engaged_share, platform_components, platform_weights


class PlatformAgentEnv(ParallelEnv):
    """A :class:`FeedEnv` whose recommender is the agent ``"platform"`` (module docstring)."""

    metadata = {"name": "socialgym_feed_platform_v0", "render_modes": [], "is_parallelizable": True}

    def __init__(self, platform_objective: Any = "engagement", platform_action_form: str = "weights",
                 platform_candidates: int = DEFAULT_CANDIDATES, platform_window: int = 3, platform_stances: Any = None,
                 **config: Any) -> None:
        if "recommender" in config:
            raise ValueError("with platform_agent=True the platform agent is the recommender; drop 'recommender'")
        self.seat = PlatformSeat(platform_candidates, platform_window, action_form=platform_action_form)
        self.feed_env = FeedEnv(**config, recommender=FeedOnly(self.seat))
        n = self.feed_env.config.n_agents
        self.stances = stance_codes(platform_stances, n)
        self.seat.set_stances(stance_labels(self.stances))
        self.weights = platform_weights(platform_objective)
        self.possible_agents = [*self.feed_env.possible_agents, PLATFORM]
        self.agents: list[str] = []
        self._space = spaces.Dict({
            "candidates": spaces.Box(-np.inf, np.inf, (n, platform_candidates, N_FEATURES), np.float32),
            "mask": spaces.Box(0.0, 1.0, (n, platform_candidates), np.float32),
            "platform": spaces.Box(-np.inf, np.inf, (len(PLATFORM_FEATURES),), np.float32),
            "phase": spaces.Discrete(2),
        })
        self._action = spaces.Box(-1.0, 1.0, self.seat.action_shape(n), np.float32)
        self.last_components = np.zeros(len(PLATFORM_OBJECTIVES))

    def observation_space(self, agent: str):
        return self._space if agent == PLATFORM else self.feed_env.observation_space(agent)

    def action_space(self, agent: str):
        return self._action if agent == PLATFORM else self.feed_env.action_space(agent)

    @property
    def unwrapped(self):
        return self

    def reset(self, seed: int | None = None, options: dict | None = None):
        obs, infos = self.feed_env.reset(seed=seed, options=options)
        self.agents = list(self.possible_agents)
        self.last_components = np.zeros(len(PLATFORM_OBJECTIVES))
        obs[PLATFORM] = self.platform_observation()
        infos[PLATFORM] = {"phase": "act", "round": 1}
        return obs, infos

    def step(self, actions: dict):
        """One phase for the users and the platform (module docstring). Atomic: if anything
        raises, the environment, the seat and ``last_components`` are left as they were."""
        env = self.feed_env
        env._require_state("step")
        if not env.agents:
            raise RuntimeError("the episode is over; call reset()")
        if not isinstance(actions, dict):
            raise TypeError(f"step() takes a dict agent id -> action, got {type(actions).__name__}")
        user_actions = {a: v for a, v in actions.items() if a != PLATFORM}
        voting = env.phase == "vote"
        seat = self.seat
        seat_state = (seat.action, seat.prepared, seat.last_shown)
        kept = (self.last_components, self.agents)
        invalid: list[dict] = []
        try:
            with env.atomic():          # the feed environment's own step is atomic; this adds the rest
                if voting and PLATFORM in actions:
                    action, invalid = check_platform_action(actions[PLATFORM], self._action, seat.action_form,
                                                            strict=env.config.invalid_actions == "strict")
                    if action is None:
                        seat.action = None
                    else:
                        seat.set_action(action, env.config.n_agents)
                obs, rewards, terms, truncs, infos = env.step(user_actions)
                reward = float(self.weights @ self.score_closed_round().mean(axis=0)) if voting else 0.0
                obs[PLATFORM] = self.platform_observation()     # draws from env.rng (retrieval)
        except BaseException:
            seat.action, seat.prepared, seat.last_shown = seat_state
            self.last_components, self.agents = kept
            raise
        done = not env.agents
        rewards[PLATFORM] = reward
        terms[PLATFORM], truncs[PLATFORM] = False, done
        infos[PLATFORM] = {"phase": env.phase, "round": env.round, "invalid": invalid,
                           "components": dict(zip(PLATFORM_OBJECTIVES, self.last_components.tolist()))}
        self.agents = [] if done else list(self.possible_agents)
        return obs, rewards, terms, truncs, infos

    def platform_observation(self) -> dict:
        """The platform agent's observation now: the candidates of the next feed in a vote phase,
        zeros otherwise."""
        env = self.feed_env
        zeros = {k: np.zeros(s.shape, np.float32) for k, s in self._space.spaces.items() if k != "phase"}
        if env.phase != "vote" or not env.agents:
            return {**zeros, "phase": 0}
        request = dataclasses.replace(env._request(np.flatnonzero(env.content.public_mask()),
                                                   env.config.feed_size, "act"), round=env.round + 1)
        cand, feats = self.seat.prepare(request, env.rng)
        platform = np.array([env.round / env.config.max_rounds, *self.last_components,
                             env.ties.weights.values.sum() / env.config.n_agents, self._engaged_share()], np.float32)
        return {"candidates": feats, "mask": (cand >= 0).astype(np.float32), "platform": platform, "phase": 1}

    def score_closed_round(self) -> np.ndarray:
        """(n, 5) per-viewer platform objectives of the round the last vote step closed; their
        means become ``last_components`` (what the platform observes next)."""
        env = self.feed_env
        record = env.last_round
        per_viewer = platform_components(record.batch, record.totals, self.stances, len(env.vocab))
        self.last_components = per_viewer.mean(axis=0)
        return per_viewer

    def _engaged_share(self) -> float:
        """Share of users who commented or voted in the last closed round."""
        record = self.feed_env.last_round
        return 0.0 if record is None else engaged_share(record.batch)

    def render(self):
        return None

    def close(self) -> None:
        self.feed_env.close()
