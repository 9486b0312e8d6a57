"""The feed environment: a PettingZoo ParallelEnv of the platform's two-phase rounds (specification §1).

Step 1 of a round (act): every agent submits N actions. Step 2 (vote): every agent votes on
this round's public items by others. After the vote step the round's rewards are computed
(specification §3), then the ties are updated (specification §4), then the recommender learns and builds the
next round's feeds (specification §5).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np
import scipy.sparse as sp
from gymnasium import spaces
from pettingzoo import ParallelEnv

from socialgym.config import REWARD_NAMES, FeedConfig
from socialgym.envs.feed.atomic import AtomicSteps
from socialgym.envs.feed.encoding import ActionLayout
from socialgym.envs.feed.feeds import check_feed, group_inbox
from socialgym.envs.feed.interventions import FeedInterventions
from socialgym.envs.feed.measures import FeedMeasures
from socialgym.envs.feed.observations import ObservationBuilder, ObservedState
from socialgym.envs.feed.parsing import (
    ActParser, RoundState, SlotColumns, collect_votes, invalid_handler, numeric_matrix, parse_numeric_votes,
    route_payloads,
)
from socialgym.envs.feed.spaces import feed_observation_space
from socialgym.platform.actions import DM, RoundActions, RoundBatch, RoundTranscript
from socialgym.platform.content import ContentStore
from socialgym.platform.population import favourite_topics
from socialgym.platform.topics import TopicVocabulary, topic_problem
from socialgym.platform.validation import NotResetError, check_memory, check_seed
from socialgym.recommenders import EMPTY, FeedRequest, apply_reranking, make_recommender
from socialgym.recommenders.registry import check_reranking
from socialgym.rewards import RewardParams, compose, reward_components
from socialgym.sentiment import make_scorer
from socialgym.ties import TieDynamics, make_tie_scorer, TieUpdate, different_interest_ties


@dataclass
class RoundRecord:
    """Everything one finished round produced, for data collectors (runner, logging)."""

    round: int
    batch: RoundBatch
    texts: list
    components: np.ndarray      # (n, 5)
    totals: np.ndarray          # (n,)
    ties: TieUpdate
    invalid: dict


class FeedEnv(AtomicSteps, FeedInterventions, FeedMeasures, ParallelEnv):
    """Social-media feed platform. Construct with ``socialgym.parallel_env(**config)``.

    The state and the step live here; the intervention API (``add_ties``, ``set_recommender``,
    ``refresh_feeds``, ...) comes from :class:`~socialgym.envs.feed.interventions.FeedInterventions`
    and the metrics (``exposure_metrics``, ``network_metrics``, ...) from
    :class:`~socialgym.envs.feed.measures.FeedMeasures`."""

    metadata = {"name": "socialgym_feed_v0", "render_modes": ["human", "ansi"],
                "is_parallelizable": True}
    platforms = 1
    """Disjoint platforms in this one population (more than one: ``BatchedFeedEnv``)."""

    def __init__(self, render_mode: str | None = None, **config: Any) -> None:
        if render_mode not in (None, *self.metadata["render_modes"]):
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']} or None")
        self.render_mode = render_mode
        self.config = FeedConfig.from_kwargs(**config)
        cfg = self.config
        # what this machine has (not part of the config's validity: a config may be run elsewhere)
        check_memory(cfg.n_agents, cfg.n_actions, cfg.max_rounds,
                     cfg.feed_size + cfg.vote_feed_size + cfg.dm_inbox_size)
        check_seed(cfg.seed, "seed")
        for i, topic in enumerate(cfg.topics):
            problem = topic_problem(topic)
            if problem:
                raise ValueError(f"topics[{i}]: {problem}")
        self.possible_agents = list(cfg.agent_ids)
        self.agents_all = tuple(cfg.agent_ids)
        self._agent_index = {a: i for i, a in enumerate(self.agents_all)}
        self.agents: list[str] = []
        self.layout = ActionLayout(cfg.n_agents, cfg.n_actions, cfg.feed_size, cfg.dm_inbox_size,
                                   cfg.max_topics, cfg.vote_feed_size)
        self._observations = ObservationBuilder(cfg, self.layout, self.agents_all)
        self.lambdas = cfg.lambda_matrix()
        self.reward_params = RewardParams.from_config(cfg)
        self._sentiment_scorer = make_scorer(cfg.sentiment)
        if cfg.rerank:                          # per-agent lists (stances, users) against n_agents, before use
            check_reranking([dict(s) if isinstance(s, Mapping) else s for s in cfg.rerank], n_agents=cfg.n_agents)
        self.recommender = apply_reranking(make_recommender(cfg.recommender, **cfg.recommender_kwargs),
                                           cfg.rerank)
        self.tie_scorer = make_tie_scorer(cfg.tie_scorer, cfg.evidence_weights)
        self._action_spaces: dict[str, spaces.Space] = {}
        self._observation_spaces: dict[str, spaces.Space] = {}
        self.rng: np.random.Generator | None = None
        self.last_round: RoundRecord | None = None
        self.round = 0
        self.phase = "act"
        self._has_state = False

    def _require_state(self, what: str) -> None:
        """NotResetError (a RuntimeError) when ``what`` needs the state ``reset()`` creates."""
        if not getattr(self, "_has_state", "content" in vars(self)):
            raise NotResetError(self, what)

    # ---------------------------------------------------------------- spaces (cached per agent)
    def action_space(self, agent: str) -> spaces.Space:
        space = self._action_spaces.get(agent)
        if space is None:
            self._check_agent(agent)
            space = spaces.MultiDiscrete(self.layout.nvec)
            self._action_spaces[agent] = space
        return space

    def observation_space(self, agent: str) -> spaces.Space:
        space = self._observation_spaces.get(agent)
        if space is None:
            self._check_agent(agent)
            space = feed_observation_space(self.config, self.layout, self.agents_all, agent)
            self._observation_spaces[agent] = space
        return space

    def _check_agent(self, agent: str) -> None:
        if agent not in self._agent_index:
            raise KeyError(f"unknown agent {agent!r}; agents are agent_0 .. agent_{self.config.n_agents - 1}")

    # ---------------------------------------------------------------- episode
    def reset(self, seed: int | None = None, options: dict | None = None):
        """Start an episode. ``seed``: None (keep the RNG stream; the config's ``seed`` on the
        first reset) or an integer >= 0 (TypeError / ValueError naming ``seed`` otherwise)."""
        self._start_episode(seed)
        return self._observe(), {a: {"phase": "act", "round": 1} for a in self.agents}

    def _start_episode(self, seed: int | None) -> None:
        cfg = self.config
        seed = check_seed(seed, "seed")
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        elif self.rng is None:
            self.rng = np.random.default_rng(cfg.seed)
        n = cfg.n_agents
        self.content = ContentStore()
        self.vocab = TopicVocabulary(cfg.topics)
        self.ties = TieDynamics(n, xi=cfg.xi, delta_max=cfg.delta_max, decay=cfg.decay,
                                b_rec=cfg.b_rec, eps=cfg.eps, scorer=self.tie_scorer,
                                prune_below=cfg.tie_prune_below, seed_graph=cfg.seed_graph)
        if cfg.soc_strategy:
            src, dst = different_interest_ties(favourite_topics(cfg.agent_interests, n), cfg.soc_strategy, self.rng)
            self.add_ties(src, dst, cfg.soc_strategy_weight)
        self.recommender.reset()
        self._shown_history: deque = deque(maxlen=cfg.exposure_window)   # act-phase feeds
        self.round, self.phase = 1, "act"
        width = max(cfg.max_topics, len(self.vocab), 1)
        self._seen_feed = np.zeros((n, width), dtype=bool)   # topics of feed items, rounds < t
        self._seen_any = np.zeros((n, width), dtype=bool)    # + DMs received + own actions
        self._feed = np.full((n, cfg.feed_size), EMPTY, dtype=np.int64)
        self._vote_items = np.full((n, cfg.vote_feed_size), EMPTY, dtype=np.int64)
        self._set_inbox(np.zeros(0, np.int64))
        self._prev_dm_sender = np.zeros(0, np.int32)
        self._prev_dm_recipient = np.zeros(0, np.int32)
        self._last = np.zeros((n, len(REWARD_NAMES) + 1))
        self._pending: tuple[RoundActions, list, dict] | None = None    # the round in its vote phase
        self._observations.reset()
        self.last_round = None
        self.agents = list(self.possible_agents)
        self._has_state = True

    def step(self, actions: dict):
        """One phase of the round (specification §1). Atomic: if anything raises during the step — an
        invalid action in strict mode, the recommender, the tie scorer, the sentiment scorer, a
        reward hook, building the observations — the environment is left exactly as it was
        before the call (content, ids, topics, ties, RNG state, round, phase, recommender state
        via its ``state_dict``/``load_state_dict``), so the step can be retried.

        An agent's action is structured (a dict) or numeric: an ``np.ndarray``, a flat list or
        tuple of integers, or a torch tensor (detached and moved to the CPU with ``.cpu()``, so
        CUDA tensors work, one device-to-host copy per agent; torch is not imported here) or
        any object with ``__array__``. A ragged list, a wrong shape or a non-integer dtype is an
        invalid action of that agent (named in the error)."""
        self._require_state("step")
        if not self.agents:
            raise RuntimeError("the episode is over; call reset()")
        if not isinstance(actions, dict):
            raise TypeError(f"step() takes a dict agent id -> action, got {type(actions).__name__}")
        unknown = [a for a in actions if a not in self._agent_index]
        if unknown:
            raise ValueError(f"actions given for unknown agent(s) {unknown[:5]}")
        with self._atomic_step():
            if self.phase == "act":
                return self._act_step(actions)
            return self._vote_step(actions)

    def step_arrays(self, actions: np.ndarray, observe: bool = True):
        """Vectorised step of all agents at once — the scale path for neural policies.

        ``actions``: an (n_agents, L) integer matrix, row i the numeric action of agent i (the
        encoding of ``action_space``): an ndarray, a nested list or a torch tensor (moved to the
        CPU with ``.cpu()``). Same rules, validation and state as :meth:`step`; only the
        containers differ, so no per-agent dicts are built. Returns ``(obs, rewards, terminated,
        truncated, info)``: ``obs`` a dict of stacked arrays (``self`` (n, 14), ``feed`` (n, F, 10),
        ``dms`` (n, D, 6), ``vote_items`` (n, V, 10), ``phase``, ``round``, and ``action_mask``,
        a list of per-agent mask tuples shared between agents with equal masks); ``rewards`` an
        (n,) array; ``terminated``/``truncated`` bools for the whole population; ``info`` with
        ``reward_components`` (n, 5) after a vote step and ``invalid`` {agent id: records}.
        Atomic like :meth:`step`. ``observe=False``: ``obs`` is None (for populations that read
        the platform directly, e.g. the platform tasks' scripted users).
        """
        self._require_state("step_arrays")
        if not self.agents:
            raise RuntimeError("the episode is over; call reset()")
        matrix = numeric_matrix(actions)
        shape = (self.config.n_agents, self.layout.length)
        if matrix.shape != shape or matrix.dtype.kind not in "iu":
            raise ValueError(f"step_arrays takes an integer matrix of shape {shape}, "
                             f"got {matrix.dtype} {matrix.shape}")
        everyone = np.arange(self.config.n_agents)
        with self._atomic_step():
            if self.phase == "act":
                invalid: dict[int, list] = {}
                cols = SlotColumns()
                ActParser(self._round_state()).parse_numeric(everyone, matrix, cols,
                                                             self._invalid_handler(invalid, "act"))
                self._commit_act(cols, invalid)
                rewards, components, done = np.zeros(self.config.n_agents), None, False
            else:
                invalid = self._pending[2]
                votes = parse_numeric_votes(self._round_state(), everyone, matrix.astype(np.int64, copy=False),
                                            self._invalid_handler(invalid, "vote"))
                components, rewards, done = self._commit_vote(*votes)
            obs = self.observe_arrays() if observe else None
            info = {"round": self.round - (self.phase == "act"), "reward_components": components,
                    "invalid": {self.agents_all[i]: r for i, r in invalid.items()}}
            if components is not None:
                info.update(self._round_extras())
            if done:
                self.agents = []
            return obs, rewards, False, done, info

    def _invalid_handler(self, invalid: dict, phase: str):
        return invalid_handler(self.agents_all, invalid, phase, self.config.invalid_actions == "strict")

    def _round_state(self) -> RoundState:
        """What the action and vote parsers read, as the platform stands before a step."""
        return RoundState(round=self.round, layout=self.layout, max_text_chars=self.config.max_text_chars,
                          agent_ids=self.agents_all, agent_index=self._agent_index, content=self.content,
                          vocab=self.vocab, feed=self._feed, inbox=self._inbox, vote_items=self._vote_items,
                          sentiment_scorer=self._sentiment_scorer)

    def _act_step(self, actions: dict):
        invalid: dict[int, list] = {}
        handle = self._invalid_handler(invalid, "act")
        parser = ActParser(self._round_state())
        cols = SlotColumns()
        numeric_agents, numeric_vectors = route_payloads(
            self.agents_all, actions, "actions", "no action given for this agent", handle,
            lambda i, payload: parser.parse_structured(i, payload, cols, lambda err: handle(i, err)))
        parser.parse_numeric(numeric_agents, numeric_vectors, cols, handle)
        self._commit_act(cols, invalid)
        obs = self._observe()
        rewards = {a: 0.0 for a in self.agents}
        infos = {a: {"phase": "vote", "round": self.round, "invalid": invalid.get(i, [])}
                 for i, a in enumerate(self.agents_all)}
        return obs, rewards, self._flags(False), self._flags(False), infos

    def _commit_act(self, cols: SlotColumns, invalid: dict) -> None:
        """Store the validated actions and choose every agent's vote items."""
        actions, texts = cols.to_actions(self.vocab, self.config.n_agents, self.config.n_actions, self.round)
        self._grow_seen(len(self.vocab))
        self.content.append_batch(actions, texts)
        pool = actions.content_id[actions.is_public]
        self._vote_items = self._recommend(pool, self.config.vote_feed_size, "vote")
        self._pending = (actions, texts, invalid)
        self.phase = "vote"

    def _vote_step(self, actions: dict):
        invalid = self._pending[2]
        handle = self._invalid_handler(invalid, "vote")
        components, totals, done = self._commit_vote(*collect_votes(self._round_state(), actions, handle))
        obs = self._observe()
        rewards = dict(zip(self.agents, totals.tolist()))
        comp_rows = components.tolist()
        extras = self._round_extras()
        infos = {a: {"phase": "act", "round": self.round - 1,
                     "reward_components": dict(zip(REWARD_NAMES, comp_rows[i])),
                     "invalid": invalid.get(i, []), **extras}
                 for i, a in enumerate(self.agents_all)}
        truncations = self._flags(done)
        terminations = self._flags(False)
        if done:
            self.agents = []
        if self.render_mode == "human":
            print(self.render())
        return obs, rewards, terminations, truncations, infos

    def _commit_vote(self, voters: np.ndarray, items: np.ndarray, values: np.ndarray):
        """Apply the validated votes and close the round: rewards, ties, recommender, next feeds."""
        actions, texts, invalid = self._pending
        content = self.content
        content.apply_votes(items, values)
        topic = content.column("topic")
        batch = RoundBatch.from_actions(
            actions, vote_voter=voters, vote_item=items, vote_value=values,
            vote_author=content.column("author")[items], vote_kind=content.column("kind")[items],
            vote_topic=topic[items], feed=self._feed, vote_feed=self._vote_items,
            feed_topics=(np.where(self._feed >= 0, topic[np.maximum(self._feed, 0)], -1) if len(topic)
                         else np.full_like(self._feed, -1)),
            prev_dm_sender=self._prev_dm_sender, prev_dm_recipient=self._prev_dm_recipient,
            platform_size=self.layout.n_agents if self.platforms > 1 else 0)

        components = reward_components(batch, self._seen_feed, len(self.vocab), self.reward_params)
        totals = compose(components, self.lambdas)
        transcript = RoundTranscript(batch, texts, self.agents_all, self.vocab.names)
        tie_update = self.ties.update(batch, self._seen_any, transcript)
        self._remember_topics(batch)
        self.recommender.update(self.content, batch, self.rng)
        self._shown_history.append(batch.feed)
        self.last_round = RoundRecord(self.round, batch, texts, components, totals, tie_update, invalid)

        is_dm = batch.kind == DM
        self._prev_dm_sender, self._prev_dm_recipient = batch.sender[is_dm], batch.recipient[is_dm]
        self._set_inbox(batch.content_id[is_dm])
        self._last = np.column_stack([components, totals])
        self.round += 1
        self.phase = "act"
        done = self.round > self.config.max_rounds
        if not done:
            public = np.flatnonzero(self.content.public_mask())
            self._feed = self._recommend(public, self.config.feed_size, "act")
        else:
            self._feed = np.full_like(self._feed, EMPTY)
            self._set_inbox(np.zeros(0, np.int64))
        self._vote_items = np.full_like(self._vote_items, EMPTY)
        return components, totals, done

    # ---------------------------------------------------------------- platform bookkeeping
    def _recommend(self, pool: np.ndarray, k: int, phase: str) -> np.ndarray:
        """Ask the recommender for every agent's list; ``pool`` is sorted ascending."""
        raw = self.recommender.recommend(self._request(pool, k, phase), self.rng)
        return check_feed(np.asarray(raw), pool, k, phase, self.recommender, self.content, self.config.n_agents)

    def _request(self, pool: np.ndarray, k: int, phase: str) -> FeedRequest:
        n = self.config.n_agents
        return FeedRequest(viewers=np.arange(n), candidates=pool, k=k, phase=phase, round=self.round,
                           content=self.content, ties=self.tie_matrix, n_agents=n, tie_lookup=self._tie_lookup)

    def _set_inbox(self, dm_ids: np.ndarray) -> None:
        """Last round's DMs grouped by recipient, newest first."""
        recipients = self.content.column("recipient")[dm_ids] if len(dm_ids) else np.zeros(0, np.int32)
        self._inbox, self._inbox_ids, self._inbox_ptr = group_inbox(dm_ids, recipients, self.config.n_agents,
                                                                    self.config.dm_inbox_size)

    def _grow_seen(self, n_topics: int) -> None:
        width = self._seen_feed.shape[1]
        if n_topics > width:
            extra = max(n_topics, 2 * width) - width
            pad = np.zeros((self.config.n_agents, extra), dtype=bool)
            self._seen_feed = np.hstack([self._seen_feed, pad])
            self._seen_any = np.hstack([self._seen_any, pad])

    def _remember_topics(self, batch: RoundBatch) -> None:
        # copy on write: a failing step restores the previous arrays by reference
        self._seen_feed = self._seen_feed.copy()
        self._seen_any = self._seen_any.copy()
        rows, cols = np.nonzero(batch.feed_topics >= 0)
        feed_topic = batch.feed_topics[rows, cols]
        self._seen_feed[rows, feed_topic] = True
        self._seen_any[rows, feed_topic] = True
        self._seen_any[batch.sender, batch.topic] = True                   # own actions
        is_dm = batch.kind == DM
        self._seen_any[batch.recipient[is_dm], batch.topic[is_dm]] = True  # DMs received

    def _flags(self, value: bool) -> dict:
        return dict.fromkeys(self.agents, value)

    # ---------------------------------------------------------------- observations
    def _observed_state(self) -> ObservedState:
        """What the observations show, as the platform stands after a step."""
        return ObservedState(round=self.round, phase=self.phase, feed=self._feed, vote_items=self._vote_items,
                             inbox=self._inbox, inbox_ids=self._inbox_ids, inbox_ptr=self._inbox_ptr,
                             last_rewards=self._last, lambdas=self.lambdas, content=self.content,
                             vocab=self.vocab, tie_weights=self.ties.weights)

    def observe_arrays(self) -> dict:
        """Every agent's numeric observation as the platform stands, as the stacked arrays
        :meth:`step_arrays` returns (with ``action_mask`` when masks are on)."""
        self._require_state("observe_arrays")
        state = self._observed_state()
        obs = self._observations.numeric_arrays(state)
        if self.config.action_masks:
            obs["action_mask"] = self._observations.masks(state)
        return obs

    def _observe(self) -> dict:
        return self._observations.observe(self._observed_state())

    def _masks(self) -> list:
        return self._observations.masks(self._observed_state())

    def round_transcript(self) -> list[dict]:
        """The round in its vote phase (its actions) or the last closed round (its actions and
        non-zero votes), as readable entries (see ``socialgym.platform.actions.RoundTranscript``).
        For text-based tie scorers and logs; a Python loop, so meant for LLM-sized populations."""
        self._require_state("round_transcript")
        if self.phase == "vote" and self._pending is not None:
            actions, texts = self._pending[0], self._pending[1]
        elif self.last_round is not None:
            actions, texts = self.last_round.batch, self.last_round.texts
        else:
            return []
        return RoundTranscript(actions, texts, self.agents_all, self.vocab.names).entries

    def _tie_lookup(self, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
        src = np.asarray(src, np.int64)
        rows = (int(src.min()), int(src.max()) + 1) if src.size else None   # search only those rows
        return self.ties.weights.lookup(src * self.config.n_agents + np.asarray(dst, np.int64), src_range=rows)

    # ---------------------------------------------------------------- public accessors
    def tie_matrix(self) -> sp.csr_matrix:
        """Current W as scipy.sparse CSR (n x n); ``W[v, u]`` = tie from v to u."""
        self._require_state("tie_matrix")
        return self.ties.matrix()

    def render(self) -> str | None:
        if self.render_mode is None:
            return None
        self._require_state("render")
        W = self.tie_matrix()
        lines = [f"round {self.round} ({self.phase} phase next), {len(self.content)} items, "
                 f"{W.nnz} directed ties, mean tie {W.data.mean() if W.nnz else 0.0:.3f}"]
        if self.last_round is not None:
            comps = self.last_round.components.mean(axis=0)
            lines.append("last round mean rewards: " + ", ".join(
                f"{r} {v:.3f}" for r, v in zip(REWARD_NAMES, comps)) +
                f", total {self.last_round.totals.mean():.3f}")
        return "\n".join(lines)

    def close(self) -> None:
        pass

