"""Rankers over retrieved candidates: the platform's learning seat and two hand-written rankers.

A :class:`CandidateRanker` retrieves ``candidates`` items per viewer (``socialgym.recommenders.
features.retrieve``), describes each with :data:`~socialgym.recommenders.features.RANKING_FEATURES`
and shows the ``k`` best by a score per (viewer, candidate); equal scores go to the newer item.
Vote-phase lists are drawn uniformly (``RandomFeed``), so a ranker decides what users *see in
their feeds* and nothing else.

* :class:`PlatformSeat` — the score comes from outside, an RL agent's action: either one
  score per (viewer, candidate) (``action_form="scores"``, shape ``(n_agents, candidates)``) or
  one weight per feature (``"weights"``, shape ``(N_FEATURES,)``; score = features @ weights).
  Every action gives a valid feed, since the environment only ever shows retrieved candidates.
  No action yet: the newest candidates first.
* :class:`BridgingRanker` — items liked by every stance group first, in the spirit of Community
  Notes: score = the likes of the group that liked the item least (``bridging_score``), then
  cross-group likes; needs ``stances``.
* :class:`EngagementGreedy` — an online ridge regression of "the viewer commented on the item"
  on the features of the items it was shown, refitted after every round; score = the predicted
  engagement; each round an ``explore`` share of the viewers get random scores (epsilon-greedy).
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any

import numpy as np

from socialgym.recommenders.base import EMPTY, FeedRequest, Recommender, as_recommender
from socialgym.recommenders.features import DEFAULT_CANDIDATES, N_FEATURES, RANKING_FEATURES, RankingFeatures, retrieve
from socialgym.recommenders.params import Param, ParamError, check_own, check_stances, limited
from socialgym.recommenders.scored import top_k_of_scores
from socialgym.recommenders.simple import RandomFeed
from socialgym.platform.actions import COM

ACTION_FORMS = ("weights", "scores")
_CROSS_LIKES = RANKING_FEATURES.index("cross_likes")


class CandidateRanker(Recommender):
    """Retrieve ``candidates`` items per viewer from the last ``window`` rounds, score, show the
    top k (module docstring). ``stances``: one label per agent (None: unknown), for the stance
    features. Subclasses implement :meth:`score_candidates`."""

    PARAMS = {"candidates": limited("int", "candidates", 1), "window": limited("int", "window", 1),
              "stances": Param("custom", none_ok=True, check=check_stances)}

    def __init__(self, candidates: int = DEFAULT_CANDIDATES, window: int = 3, stances: Any = None) -> None:
        check_own(CandidateRanker, candidates=candidates, window=window, stances=stances)
        self.size, self.window = int(candidates), int(window)
        self._stances = None if stances is None else list(stances)
        self.features: RankingFeatures | None = None
        self._vote = RandomFeed()

    def set_stances(self, stances: Any) -> None:
        """Give the ranker one stance label per agent (e.g. a population's groups)."""
        check_stances("stances", stances)
        self._stances = list(stances)
        self.features = None

    def _features(self, n_agents: int) -> RankingFeatures:
        if self.features is None or self.features.n_agents != n_agents:
            self.features = RankingFeatures(n_agents, self._stances, self.window)
        return self.features

    def candidates_of(self, request: FeedRequest, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """(cand (m, C) ids -1 padded, features (m, C, N_FEATURES)) for an act-phase request."""
        cand = retrieve(request, rng, self.size, self.window)
        return cand, self._features(request.n_agents).matrix(request, cand)

    @abstractmethod
    def score_candidates(self, request: FeedRequest, cand: np.ndarray, feats: np.ndarray,
                         rng: np.random.Generator) -> np.ndarray:
        """(m, C) scores of the candidates (higher first; -1 slots are never shown)."""

    def recommend(self, request: FeedRequest, rng: np.random.Generator) -> np.ndarray:
        if request.phase == "vote":
            return self._vote.recommend(request, rng)
        cand, feats = self.candidates_of(request, rng)
        return self.show(request, cand, self.score_candidates(request, cand, feats, rng))

    @staticmethod
    def show(request: FeedRequest, cand: np.ndarray, scores: np.ndarray) -> np.ndarray:
        scores = np.where(cand >= 0, np.asarray(scores, np.float64), -np.inf)
        return top_k_of_scores(scores, cand, request.k)

    def update(self, content, batch, rng) -> None:
        self._features(batch.n_agents).update(content, batch)

    def reset(self) -> None:
        if self.features is not None:
            self.features.reset()

    def state_dict(self) -> dict:
        return {"features": None if self.features is None else self.features.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        if state.get("features") is None:
            self.features = None                 # the counts did not exist yet
        elif self.features is not None:
            self.features.load_state_dict(state["features"])


class PlatformSeat(CandidateRanker):
    """The ranking is an external agent's action (module docstring).

    ``set_action(action)`` before the feed is built; ``prepare(request, rng)`` retrieves the
    candidates and features the agent observes, and the next act-phase feed of that round ranks
    exactly those. ``deferred=True``: without an action the act-phase feed is left empty (the
    environment builds it again once the action is in), so no work is done twice.
    """

    name = "platform_seat"
    PARAMS = {"action_form": Param("custom", check=lambda n, v: _check_form(v))}

    def __init__(self, candidates: int = DEFAULT_CANDIDATES, window: int = 3, stances: Any = None,
                 action_form: str = "weights") -> None:
        super().__init__(candidates, window, stances)
        _check_form(action_form)
        self.action_form = action_form
        self.action: np.ndarray | None = None
        self.prepared: tuple[int, np.ndarray, np.ndarray] | None = None
        self.deferred = False
        self.last_shown: np.ndarray | None = None

    def action_shape(self, n_agents: int) -> tuple[int, ...]:
        return (N_FEATURES,) if self.action_form == "weights" else (n_agents, self.size)

    def prepare(self, request: FeedRequest, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        cand, feats = self.candidates_of(request, rng)
        self.prepared = (request.round, cand, feats)
        return cand, feats

    def set_action(self, action: Any, n_agents: int) -> None:
        a = np.asarray(action, dtype=np.float64)
        shape = self.action_shape(n_agents)
        if a.shape != shape:
            raise ValueError(f"the platform's action ({self.action_form}) must have shape {shape}, got {a.shape}")
        if not np.all(np.isfinite(a)):
            raise ValueError("the platform's action holds NaN or infinite values")
        if np.abs(a).max(initial=0.0) > 1.0:     # the declared Box(-1, 1): larger overflows float32 scores
            i = int(np.argmax(np.abs(a).ravel()))
            raise ValueError(f"the platform's action must lie in [-1, 1] (its space Box(-1, 1)), got "
                             f"{a.ravel()[i]:g} at flat index {i}")
        self.action = a

    def score_candidates(self, request, cand, feats, rng) -> np.ndarray:
        return self.scores(feats, self.action)

    def scores(self, feats: np.ndarray, action: np.ndarray | None) -> np.ndarray:
        if action is None:
            return np.zeros(feats.shape[:2])
        return feats @ action.astype(feats.dtype) if self.action_form == "weights" else action

    def recommend(self, request: FeedRequest, rng: np.random.Generator) -> np.ndarray:
        if request.phase == "vote":
            return self._vote.recommend(request, rng)
        if self.action is None and self.deferred:
            return np.full((len(request.viewers), request.k), EMPTY, np.int64)
        if self.prepared is not None and self.prepared[0] == request.round:
            cand, feats = self.prepared[1], self.prepared[2]
        else:
            cand, feats = self.prepare(request, rng)
        feed = self.show(request, cand, self.score_candidates(request, cand, feats, rng))
        self.action, self.prepared, self.last_shown = None, None, feed
        return feed

    def reset(self) -> None:
        super().reset()
        self.action, self.prepared, self.last_shown = None, None, None


class BridgingRanker(CandidateRanker):
    """Items that every stance group liked first (module docstring)."""

    name = "bridging"
    PARAMS = {"stances": Param("custom", required=True, check=check_stances)}

    def __init__(self, stances: Any, candidates: int = DEFAULT_CANDIDATES, window: int = 3) -> None:
        super().__init__(candidates, window, stances)

    def score_candidates(self, request, cand, feats, rng) -> np.ndarray:
        f = self._features(request.n_agents)
        cross = feats[..., _CROSS_LIKES]
        return f.bridging_score(cand) + 0.5 * cross


class EngagementGreedy(CandidateRanker):
    """Online ridge regression of engagement on the features; ``explore``: share of viewers
    whose candidates get random scores in a round; ``ridge``: the L2 penalty."""

    name = "engagement_greedy"
    PARAMS = {"explore": Param("number", low=0, high=1), "ridge": Param("number", low=0, low_open=True)}

    def __init__(self, candidates: int = DEFAULT_CANDIDATES, window: int = 3, stances: Any = None, explore: float = 0.1,
                 ridge: float = 1.0) -> None:
        super().__init__(candidates, window, stances)
        check_own(EngagementGreedy, explore=explore, ridge=ridge)
        self.explore, self.ridge = float(explore), float(ridge)
        self.reset()

    def reset(self) -> None:
        super().reset()
        d = N_FEATURES + 1
        self.gram, self.target = np.zeros((d, d)), np.zeros(d)
        self.coef = np.zeros(d)
        self._shown: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    def score_candidates(self, request, cand, feats, rng) -> np.ndarray:
        x = np.concatenate([feats, np.ones(feats.shape[:2] + (1,), feats.dtype)], axis=2)
        scores = x @ self.coef
        explore = rng.random(len(cand)) < self.explore
        scores[explore] = rng.random((int(explore.sum()), cand.shape[1]))
        self._pending = (request.viewers, cand, x)
        return scores

    def recommend(self, request, rng):
        feed = super().recommend(request, rng)
        if request.phase == "act":
            viewers, cand, x = self._pending
            shown = (cand[:, :, None] == feed[:, None, :]).any(axis=2) & (cand >= 0)
            rows, cols = np.nonzero(shown)
            self._shown = (viewers[rows], cand[rows, cols], x[rows, cols])
        return feed

    def update(self, content, batch, rng) -> None:
        super().update(content, batch, rng)
        if self._shown is None:
            return
        viewer, item, x = self._shown
        n_items = max(len(content), 1)
        com = batch.kind == COM
        engaged_keys = np.unique(batch.sender[com].astype(np.int64) * n_items + batch.target_id[com])
        y = np.isin(viewer.astype(np.int64) * n_items + item, engaged_keys).astype(float)
        self.gram = self.gram + x.T.astype(np.float64) @ x
        self.target = self.target + x.T.astype(np.float64) @ y
        self.coef = np.linalg.solve(self.gram + self.ridge * np.eye(len(self.target)), self.target)
        self._shown = None

    def state_dict(self) -> dict:
        return {**super().state_dict(), "gram": self.gram.copy(), "target": self.target.copy(),
                "coef": self.coef.copy(), "shown": self._shown}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        for key in ("gram", "target", "coef"):
            if key in state:
                setattr(self, key, state[key].copy())
        if "shown" in state:
            self._shown = state["shown"]


def _check_form(value: Any) -> None:
    if value not in ACTION_FORMS:
        raise ParamError("action_form", f"action_form must be one of {ACTION_FORMS}, got {value!r}")


class FeedOnly(Recommender):
    """``ranker`` builds the act-phase feeds; vote-phase lists are drawn uniformly, as a
    :class:`CandidateRanker`'s are, so rankers compared on a platform task differ in feeds only.
    ``observers``: rankers that only learn from each round (their ``update`` is called too)."""

    def __init__(self, ranker: Any, observers: tuple = ()) -> None:
        self.ranker = as_recommender(ranker)
        self.observers = tuple(observers)
        self.name = getattr(self.ranker, "name", type(self.ranker).__name__)
        self._vote = RandomFeed()

    def recommend(self, request, rng):
        return (self._vote if request.phase == "vote" else self.ranker).recommend(request, rng)

    def update(self, content, batch, rng) -> None:
        self.ranker.update(content, batch, rng)
        for observer in self.observers:
            observer.update(content, batch, rng)

    def reset(self) -> None:
        self.ranker.reset()
        for observer in self.observers:
            observer.reset()

    def state_dict(self) -> dict:
        return {"ranker": self.ranker.state_dict(), "observers": [o.state_dict() for o in self.observers]}

    def load_state_dict(self, state: dict) -> None:
        self.ranker.load_state_dict(state["ranker"])
        for observer, sub in zip(self.observers, state["observers"]):
            observer.load_state_dict(sub)

