"""The feed environment's intervention API: changes to the platform between rounds.

``FeedInterventions`` is a mixin of :class:`socialgym.envs.feed.env.FeedEnv` (it reads and
rebinds the environment's state: ``config``, ``ties``, ``vocab``, ``content``, ``lambdas``,
``recommender``, the feeds), so these are methods of the environment: ``env.add_ties(...)``,
``env.set_recommender(...)``, ``env.refresh_feeds()``. The experiment runner's scheduled
interventions (``socialgym.experiments.run.interventions``) call them.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from socialgym.config import RUNTIME_PARAMS, lambda_row
from socialgym.platform.actions import POST, RoundActions
from socialgym.platform.validation import NotResetError
from socialgym.recommenders import apply_reranking, make_recommender


class FeedInterventions:
    """Ties, recommender, reward weights, tie parameters and injected posts, changed mid-episode."""

    def add_ties(self, src, dst, weight) -> None:
        """Set W[src, dst] to at least ``weight`` (arrays or scalars; existing stronger ties stay).

        For interventions on the graph, e.g. recagent's Soc-Strategy applied mid-run.
        """
        if "ties" not in vars(self):       # reset() calls this while it builds the state
            raise NotResetError(self, "add_ties")
        n = self.config.n_agents
        src, dst = np.broadcast_arrays(np.asarray(src, np.int64), np.asarray(dst, np.int64))
        weight = np.broadcast_to(np.asarray(weight, np.float64), src.shape)
        if src.size and (src.min() < 0 or dst.min() < 0 or src.max() >= n or dst.max() >= n):
            raise ValueError(f"add_ties: agent indices must lie in [0, {n})")
        if np.any(src == dst):
            raise ValueError("add_ties: no self-ties (src == dst)")
        if not np.all(np.isfinite(weight)) or weight.min(initial=0) < 0 or weight.max(initial=0) > 1:
            raise ValueError("add_ties: weights must lie in [0, 1]")
        keys, first = np.unique(src.ravel() * n + dst.ravel(), return_index=True)
        values = np.maximum(weight.ravel()[first], self.ties.weights.lookup(keys))
        self.ties.weights.replace(1.0, keys, values, 0.0)

    # ---------------------------------------------------------------- interventions between rounds
    # Called between rounds (phase "act", before the round's act step), e.g. by the experiment
    # runner's scheduled interventions (socialgym.experiments.run.interventions). After changing
    # what the round's feeds depend on (recommender, content), call refresh_feeds().
    def _between_rounds(self, what: str) -> None:
        if "ties" not in vars(self):
            raise NotResetError(self, what)
        if self.phase != "act" or not self.agents:
            raise RuntimeError(f"{what}: only between rounds (before a round's act step of a running episode)")

    def remove_ties(self, src, dst) -> None:
        """Delete W[src, dst] (arrays or scalars; absent ties are ignored)."""
        self._between_rounds("remove_ties")
        n = self.config.n_agents
        src, dst = np.broadcast_arrays(np.asarray(src, np.int64), np.asarray(dst, np.int64))
        if src.size and (src.min() < 0 or dst.min() < 0 or src.max() >= n or dst.max() >= n):
            raise ValueError(f"remove_ties: agent indices must lie in [0, {n})")
        keys = np.unique(src.ravel() * n + dst.ravel())
        self.ties.weights.replace(1.0, keys, np.zeros(len(keys)), 0.0)    # zero entries are dropped

    def set_recommender(self, recommender, rerank=None, *, reset: bool = True, **kwargs) -> None:
        """Replace the recommender (a registered name with ``kwargs``, or an object), wrapped in the
        re-ranking steps ``rerank`` (the format of the ``rerank`` config key); ``reset=False`` keeps
        the state of a recommender object passed in (e.g. the current model under new re-rankers).
        Takes effect at the next feed built: call :meth:`refresh_feeds` for the current round's."""
        self._between_rounds("set_recommender")
        rec = apply_reranking(make_recommender(recommender, **kwargs), rerank)
        if reset:
            rec.reset()
        self.recommender = rec

    def set_lambdas(self, agents, weights) -> None:
        """Set the reward weights λ of ``agents`` (indices or ids) to ``weights`` (5 numbers on the
        simplex, or a mapping component -> weight); from the next reward computed."""
        self._between_rounds("set_lambdas")
        row = lambda_row(weights, "set_lambdas weights")
        idx = []
        for a in agents:
            if isinstance(a, (int, np.integer)) and not isinstance(a, bool):
                if not 0 <= a < self.config.n_agents:        # a negative index would be another agent
                    raise ValueError(f"set_lambdas: agent index {a} out of range [0, {self.config.n_agents})")
                idx.append(int(a))
            elif isinstance(a, str) and a in self._agent_index:
                idx.append(self._agent_index[a])
            else:
                raise ValueError(f"set_lambdas: unknown agent {a!r}")
        lam = self.lambdas.copy()
        lam[idx] = row
        self.lambdas = lam

    #: FeedConfig fields that may change between rounds (set_param): the tie dynamics' parameters
    RUNTIME_PARAMS = RUNTIME_PARAMS          # socialgym.config: the one list

    def set_param(self, name: str, value) -> None:
        """Change one of :attr:`RUNTIME_PARAMS` (validated like the config); from the next tie update."""
        self._between_rounds("set_param")
        if name not in self.RUNTIME_PARAMS:
            raise ValueError(f"set_param: {name!r} cannot change during an episode; allowed: "
                             f"{', '.join(self.RUNTIME_PARAMS)}")
        config = dataclasses.replace(self.config, **{name: value})
        config.validate()                       # the constructor's checks: NaN, inf, out of range refused
        self.config = config
        t = self.ties
        t.xi, t.delta_max, t.decay, t.b_rec = self.config.xi, self.config.delta_max, self.config.decay, \
            self.config.b_rec

    def inject_post(self, author, topic: str, text: str | None = None, sentiment: float = 0.0) -> int:
        """Add a POST by ``author`` (index or id) on ``topic`` to the current round, before its act
        step (so it can appear in this round's feeds after :meth:`refresh_feeds`); returns its
        content id. It earns its author no reward this round (it is not an action of the round)."""
        self._between_rounds("inject_post")
        a = int(author) if isinstance(author, (int, np.integer)) else self._agent_index[author]
        if not 0 <= a < self.config.n_agents:
            raise ValueError(f"inject_post: author index {a} out of range")
        if not np.isfinite(sentiment) or not -1 <= sentiment <= 1:
            raise ValueError(f"inject_post: sentiment must lie in [-1, 1], got {sentiment!r}")
        topic_id = self.vocab.add(str(topic))
        self._grow_seen(len(self.vocab))
        batch = RoundActions(n_agents=self.config.n_agents, n_actions=self.config.n_actions, round=self.round,
                             sender=np.array([a], np.int32), kind=np.array([POST], np.int8),
                             recipient=np.array([-1], np.int32), target_id=np.array([-1], np.int64),
                             topic=np.array([topic_id], np.int32), sentiment=np.array([float(sentiment)]))
        return int(self.content.append_batch(batch, [text])[0])

    def refresh_feeds(self, feeds: bool = True) -> dict:
        """Rebuild the current round's act-phase feeds (after an intervention changed the
        recommender, the content or the ties; ``feeds=False`` keeps them) and return the new
        observations (they show the agents' λ too)."""
        self._between_rounds("refresh_feeds")
        if feeds:
            self.build_feeds()
        return self._observe()

    def build_feeds(self) -> None:
        """Rebuild the current round's act-phase feeds from the recommender, without observing."""
        self._between_rounds("build_feeds")
        public = np.flatnonzero(self.content.public_mask())
        self._feed = self._recommend(public, self.config.feed_size, "act")

    @property
    def act_feeds(self) -> np.ndarray:
        """The current round's act-phase feeds: an (n_agents, feed_size) read-only array of
        content ids, -1 in empty slots (between rounds: the feeds the next act step shows)."""
        self._require_state("act_feeds")
        view = self._feed.view()
        view.flags.writeable = False
        return view

    @property
    def vote_lists(self) -> np.ndarray:
        """The current round's vote-phase items: an (n_agents, vote_feed_size) read-only array of
        content ids, -1 in empty slots (chosen by the act step; empty between rounds)."""
        self._require_state("vote_lists")
        view = self._vote_items.view()
        view.flags.writeable = False
        return view

    def tie_weights(self, src, dst) -> np.ndarray:
        """Tie weights ``W[src, dst]`` for arrays of agent indices (0 where there is no tie)."""
        self._require_state("tie_weights")
        return self._tie_lookup(np.asarray(src, np.int64), np.asarray(dst, np.int64))

    def feed_request(self):
        """The request the recommender gets for the current round's act-phase feeds (between
        rounds): every public item so far as the pool, the current round and ties."""
        self._between_rounds("feed_request")
        return self._request(np.flatnonzero(self.content.public_mask()), self.config.feed_size, "act")

