"""Scripted users with topic preferences, for information-cocoon experiments without an LLM.

Modelled on the users of recagent's cocoon study (``papers/recagent-user-behavior-simulation.txt``,
"Studying the information cocoon phenomenon"): each agent prefers a few topics and engages
(comments, likes) with what it is shown with a probability that rises with its preference for
the item's topic, so a recommender that learns from engagement closes a feedback loop. Ties to
an item's author raise engagement too, which is what recagent's Soc-Strategy (friends with other
interests) relies on to broaden what users see.

Social influence, for recagent's experiments (``socialgym.experiments.studies.recagent``):
:meth:`TopicUsers.add_friends` pulls a user's tastes toward new friends' (Soc-Strategy), and
:meth:`TopicUsers.conform` moves users' 1-10 ratings of one item toward the scores of the friends
they talk with (conformity). Both are rules, so their effects are built in by construction.
Multi-interest users: :meth:`TopicUsers.make_preferences` with ``interests_per_agent > 1`` and
``interest_decay=1``.
"""

from __future__ import annotations

import inspect
import math
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from socialgym.envs.feed.encoding import FEED_ITEM_FEATURES, FIELDS, ActionLayout
from socialgym.platform.actions import COM, NOT, POST, TONES
from socialgym.platform.validation import is_int, show
from socialgym.recommenders.params import ParamError, check_seed_param

_TOPIC = FEED_ITEM_FEATURES.index("topic")
_PRESENT = FEED_ITEM_FEATURES.index("present")
_TIE_OUT = FEED_ITEM_FEATURES.index("tie_out")
_TYPE, _TARGET, _TOPIC_FIELD, _TONE = (FIELDS.index(f) for f in ("type", "target_slot", "topic", "tone"))
_SUPPORTIVE, _NEUTRAL = TONES.index("supportive"), TONES.index("neutral")


@dataclass
class _View:
    """The part of a batch of observations the policy reads, as arrays (row k = agent rows[k]).

    ``topic``/``tie``/``ids`` describe the feed in the act phase and the vote items in the vote
    phase; ``topic`` is -1 in empty slots; ``ids`` (content ids) only for structured input.
    """

    rows: np.ndarray
    phase: str
    first_round: bool
    topic: np.ndarray
    tie: np.ndarray
    n_actions: int
    ids: np.ndarray | None = None
    topic_names: Any = None


class TopicUsers:
    """Agents with topic preferences who post, comment and vote with preference-driven odds.

    ``preferences`` is an ``(n_agents, n_topics)`` array of non-negative weights, one row per
    agent (row i = ``agent_i``); each row is normalised to sum 1 (a row of zeros is an error).
    Column ``c`` is topic ``c`` of the environment's vocabulary, i.e. the ``c``-th entry of the
    env's configured ``topics`` list — run the experiment with a fixed topic list in the same
    order as the columns. Topics outside the columns (introduced later by other policies) have
    preference 0. Without ``preferences`` they are drawn by :meth:`make_preferences` with
    ``interests_per_agent`` favourites and ``concentration`` (needs ``n_topics`` and the number
    of agents, from ``layout`` / ``n_agents`` / :meth:`for_env`), using the policy's own
    generator before any behaviour is drawn; with explicit ``preferences`` those two are unused.

    Notation: ``r[c] = pref[c] / max(pref)`` (1 for the agent's main interest), ``tie`` = the
    ``tie_out`` feature of a shown item (the viewer's tie ``W[me, author]``). For every shown item
    the **engagement probability** is

        p(item) = clip(base + gain * r[topic] + tie_gain * tie, 0, 1)

    **Act phase**, independently for each of the ``N`` slots:

    - round 1: POST (the only valid type), topic drawn from ``pref``;
    - otherwise with probability ``p_post``: POST on a topic drawn from ``pref``;
    - otherwise the slot considers commenting: the feed items are ranked by ``p`` (ties broken
      at random); the k-th commenting slot of the round takes the k-th item (cycling when the
      feed has fewer items, so slots comment on different items when possible) and COMs on it
      with probability ``p(item)``, else NOT. An empty feed gives NOT.

    Tone: supportive if ``r`` of the action's topic (the POST's topic, the commented item's topic)
    is at least ``supportive_threshold``, else neutral; never critical. No DMs, no mentions.

    **Vote phase**, independently for each vote item: like (+1) with probability ``p(item)``,
    dislike (-1) with probability ``min(dislike_prob * (1 - r[topic]), 1 - p(item))`` (one
    uniform draw: like below ``p``, dislike in the next band), else 0.

    Defaults: ``p_post=0.3, base=0.05, gain=0.6, tie_gain=0.3, dislike_prob=0.2,
    supportive_threshold=0.5`` — an item on the main interest is liked / commented with 0.65, an
    item on a topic of preference 0 with 0.05 (plus ``0.3 * tie``) and disliked with 0.2.

    Entry points: :meth:`act` (the batched PettingZoo protocol: ``{agent: obs} -> {agent:
    action}``; numeric observations give numeric actions, structured ones — lists of item dicts,
    ``obs_format="structured"`` or ``"both"`` — give structured actions) and :meth:`act_arrays`
    (the stacked arrays of ``env.step_arrays`` -> an ``(n_agents, L)`` matrix, vectorised over
    agents). Numeric output needs the env's :class:`ActionLayout`: build the policy with
    :meth:`for_env` or pass ``layout=env.layout``. Structured observations carry no tie
    strengths; the tie term is read from ``obs["numeric"]`` when present (``"both"``) and is 0
    otherwise (with a one-time warning if ``tie_gain != 0``).

    All randomness comes from ``self.rng = np.random.default_rng(seed)``; the draws of one call
    have fixed shapes, so the numeric and structured paths and ``act`` / ``act_arrays`` make the
    same choices from the same seed.
    """

    def __init__(self, preferences: Any = None, n_topics: int | None = None, seed: int | None = None,
                 interests_per_agent: int = 1, *, layout: ActionLayout | None = None,
                 n_agents: int | None = None, concentration: float = 0.8, p_post: float = 0.3,
                 base: float = 0.05, gain: float = 0.6, tie_gain: float = 0.3,
                 dislike_prob: float = 0.2, supportive_threshold: float = 0.5,
                 agent_ids: Any = None, interest_decay: float = 0.5, topic_block: Any = None,
                 outside: float = 0.0) -> None:
        TopicUsers.check_params(preferences=preferences, n_topics=n_topics, seed=seed,
                                interests_per_agent=interests_per_agent, n_agents=n_agents,
                                concentration=concentration, interest_decay=interest_decay,
                                topic_block=topic_block, outside=outside, p_post=p_post, base=base, gain=gain,
                                tie_gain=tie_gain, dislike_prob=dislike_prob,
                                supportive_threshold=supportive_threshold)
        self.rng = np.random.default_rng(seed)
        self.layout = layout
        self.p_post, self.base, self.gain, self.tie_gain = float(p_post), float(base), float(gain), float(tie_gain)
        self.dislike_prob, self.supportive_threshold = float(dislike_prob), float(supportive_threshold)

        expected_rows = n_agents if n_agents is not None else (layout.n_agents if layout is not None else None)
        if n_agents is not None and layout is not None and n_agents != layout.n_agents:
            raise ValueError(f"n_agents={n_agents} but the layout has {layout.n_agents} agents")
        if preferences is None:
            if n_topics is None or expected_rows is None:
                raise ValueError("without preferences, TopicUsers needs n_topics and the number of agents "
                                 "(n_agents=, layout=, or TopicUsers.for_env(env, ...))")
            start, stop = topic_block if topic_block is not None else (0, n_topics)
            inner = self.make_preferences(expected_rows, stop - start, self.rng,
                                          interests_per_agent=interests_per_agent,
                                          concentration=concentration, interest_decay=interest_decay)
            # a camp: its tastes on topics [start, stop), `outside` of the weight spread over the rest
            preferences = np.full((expected_rows, n_topics), outside / max(n_topics - (stop - start), 1))
            preferences[:, start:stop] = (1 - outside) * inner
        pref = _check_preferences(preferences, expected_rows, n_topics)
        if layout is not None and pref.shape[1] > layout.max_topics:
            raise ValueError(f"preferences have {pref.shape[1]} topic columns but the env's numeric topic "
                             f"dimension holds max_topics={layout.max_topics}")
        pref = pref / pref.sum(axis=1, keepdims=True)
        self._set_preferences(pref)
        main = np.argmax(pref, axis=1)
        main.flags.writeable = False
        self._main = main
        n = pref.shape[0]
        self.agent_ids = tuple(agent_ids) if agent_ids is not None else tuple(f"agent_{i}" for i in range(n))
        if len(self.agent_ids) != n:
            raise ValueError(f"{len(self.agent_ids)} agent ids for {n} preference rows")
        self._row_of = {a: i for i, a in enumerate(self.agent_ids)}
        self._warned_ties = False

    @classmethod
    def check_params(cls, **params: Any) -> None:
        """Raise what the constructor or :meth:`from_interests` would raise about these keywords,
        building nothing: a TypeError for an unknown one, a ``ParamError`` (a ValueError naming it)
        for a bad value. ``seed``: None or an integer >= 0; ``p_post``, ``dislike_prob``:
        probabilities; ``base``, ``gain``, ``tie_gain``, ``supportive_threshold``: finite numbers;
        ``n_topics``, ``n_agents``: None or positive integers; and where the preferences are drawn
        or come from labels (no ``preferences`` given) ``interests_per_agent`` a positive integer,
        ``concentration`` and ``interest_decay`` in (0, 1]. ``preferences``, ``layout`` and ``agent_ids`` are data,
        checked by the constructor."""
        inspect.signature(TopicUsers).bind_partial(**params)
        if "seed" in params:
            check_seed_param(params["seed"])
        for name in ("p_post", "dislike_prob"):
            if name in params:
                _probability(name, params[name])
        for name in ("base", "gain", "tie_gain", "supportive_threshold"):
            if name in params and not _finite(params[name]):
                raise ParamError(name, f"{name} must be a finite number, got {show(params[name])}")
        for name in ("n_topics", "n_agents"):
            if params.get(name) is not None:
                _positive_int(name, params[name])
        if params.get("preferences") is None:
            if "interests_per_agent" in params:
                _positive_int("interests_per_agent", params["interests_per_agent"])
            if "concentration" in params:
                _concentration(params["concentration"])
            decay = params.get("interest_decay", 0.5)
            if not _finite(decay) or not 0 < decay <= 1:
                raise ParamError("interest_decay", f"interest_decay must lie in (0, 1], got {show(decay)}")
            block, outside = params.get("topic_block"), params.get("outside", 0.0)
            n_topics = params.get("n_topics")
            if block is not None and not (isinstance(block, (list, tuple)) and len(block) == 2
                                          and all(is_int(b) for b in block) and 0 <= block[0] < block[1]
                                          and (n_topics is None or block[1] <= n_topics)):
                raise ParamError("topic_block", "topic_block must be two topic indices [start, stop) with "
                                 f"0 <= start < stop <= n_topics, got {show(block)}")
            whole = block is None or n_topics is not None and block[1] - block[0] == n_topics
            if not _finite(outside) or not 0 <= outside < 1 or (whole and outside):
                raise ParamError("outside", "outside (the weight on topics outside topic_block) must lie in [0, 1), "
                                 f"and be 0 without a topic_block leaving topics out; got {show(outside)}")

    # ------------------------------------------------------------------ construction helpers
    @classmethod
    def for_env(cls, env: Any, preferences: Any = None, *, n_topics: int | None = None,
                seed: int | None = None, **kwargs: Any) -> TopicUsers:
        """A policy sized for ``env`` (parallel or AEC form): its layout, agents and topics.

        Without ``preferences``, ``n_topics`` defaults to the number of configured topics (capped
        by ``max_topics``). Checks that the preference columns fit the configured topic list.
        """
        base_env = getattr(env, "unwrapped", env)
        layout, config = base_env.layout, base_env.config
        available = min(len(config.topics), layout.max_topics)
        if preferences is None and n_topics is None:
            n_topics = available
        policy = cls(preferences, n_topics=n_topics, seed=seed, layout=layout,
                     agent_ids=base_env.possible_agents, **kwargs)
        if policy.n_topics > len(config.topics):
            raise ValueError(f"preferences have {policy.n_topics} topic columns but the environment is "
                             f"configured with {len(config.topics)} topics; pass topics=[...] with at least "
                             f"{policy.n_topics} entries (column c = topics[c])")
        return policy

    @classmethod
    def from_interests(cls, interests: Any, topics: Any, *, concentration: float = 0.8, **kwargs: Any) -> TopicUsers:
        """A policy whose preferences come from an env's ``agent_interests``: an (n, K) matrix
        (used as it is; K at most the number of ``topics``), or one label per agent — a topic
        name of ``topics`` or its index — which becomes that agent's main interest with weight
        ``concentration``, the other topics sharing the rest equally (:meth:`make_preferences`
        with one favourite). ``kwargs`` go to the constructor (``seed``, ``p_post`` ...)."""
        topics = list(topics)
        array = np.asarray(interests, dtype=object)
        if array.ndim == 2:
            return cls(np.asarray(interests, dtype=float), **kwargs)
        main = _main_interests(array, topics, concentration)
        k = len(topics)
        rest = (1 - concentration) / (k - 1) if k > 1 else 0.0
        pref = np.full((len(main), k), rest)
        pref[np.arange(len(main)), main] = concentration if k > 1 else 1.0
        return cls(pref, **kwargs)

    @staticmethod
    def check_interests(interests: Any, topics: Any, concentration: float = 0.8) -> None:
        """Raise what :meth:`from_interests` would raise about ``interests`` and ``concentration``
        (used with labels only), building no policy: a matrix must be a valid preference matrix,
        labels must name topics of ``topics``. The other keywords: :meth:`check_params`."""
        array = np.asarray(interests, dtype=object)
        if array.ndim == 2:
            _check_preferences(np.asarray(interests, dtype=float), None, None)
        else:
            _main_interests(array, list(topics), concentration)

    @staticmethod
    def make_preferences(n_agents: int, n_topics: int, rng: Any = None, interests_per_agent: int = 1,
                         concentration: float = 0.8, interest_decay: float = 0.5) -> np.ndarray:
        """An ``(n_agents, n_topics)`` preference matrix, rows summing to 1.

        Each agent gets ``interests_per_agent`` distinct favourite topics, drawn uniformly at
        random (``rng``: a ``numpy.random.Generator``, a seed, or None). The favourites share
        ``concentration`` of the weight, the j-th (0-based) in proportion to
        ``interest_decay ** j``: the default 0.5 halves from one to the next (1, 1/2, 1/4, ...;
        the first is the agent's main interest), ``interest_decay=1`` makes **multi-interest
        users** who like their ``interests_per_agent`` favourites equally (an item on any of them
        is engaged with at the main-interest rate; ``main_interest`` is then the first of them in
        topic order). The other topics share the remaining ``1 - concentration`` equally (when
        every topic is a favourite, the favourites take all the weight). ``concentration=1`` puts
        zero weight outside the favourites. The favourites are drawn the same way whatever
        ``interest_decay``, so the same ``rng`` gives the same favourite topics.
        """
        n_agents, n_topics, k = _positive_int("n_agents", n_agents), _positive_int("n_topics", n_topics), \
            _positive_int("interests_per_agent", interests_per_agent)
        if k > n_topics:
            raise ValueError(f"interests_per_agent={k} exceeds n_topics={n_topics}")
        _concentration(concentration)
        if not _finite(interest_decay) or not 0 < interest_decay <= 1:
            raise ParamError("interest_decay", f"interest_decay must lie in (0, 1], got {interest_decay!r}")
        gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
        favourites = np.argsort(gen.random((n_agents, n_topics)), axis=1)[:, :k]   # random, distinct
        fav_weight = float(interest_decay) ** np.arange(k)
        rest = n_topics - k
        conc = float(concentration) if rest else 1.0
        pref = np.full((n_agents, n_topics), (1.0 - conc) / rest if rest else 0.0)
        np.put_along_axis(pref, favourites, np.broadcast_to(conc * fav_weight / fav_weight.sum(),
                                                            favourites.shape), axis=1)
        return pref

    def add_friends(self, src: Any, dst: Any, influence: float = 0.25) -> None:
        """Social influence on tastes (recagent's Soc-Strategy, scripted): agent ``src[i]`` is
        befriended with agent ``dst[i]`` (row indices; pass both directions for a mutual
        friendship) and its preferences move toward its new friends'.

        All pairs act at once, from the preferences held before the call: agent ``a`` with new
        friends ``F`` gets ``pref[a] + influence * sum(pref[f] for f in F)``, renormalised — each
        friend adds ``influence`` times its own preference row, so more friends (or friends with
        other interests) widen what ``a`` engages with and posts about. ``main_interest`` (the
        agent's label) is unchanged. With ``influence=0`` nothing changes. This is the only path
        by which friends change a scripted user's tastes; the ``tie_gain`` term (engagement with
        a tied author's items) acts through the environment's ties, which the caller adds
        separately (``env.add_ties``).
        """
        if not _finite(influence) or influence < 0:
            raise ParamError("influence", f"influence must be a finite number >= 0, got {influence!r}")
        src, dst = np.asarray(src, np.int64).ravel(), np.asarray(dst, np.int64).ravel()
        if src.shape != dst.shape:
            raise ValueError(f"src and dst must have the same length, got {len(src)} and {len(dst)}")
        n = self.n_agents
        if src.size and (min(src.min(), dst.min()) < 0 or max(src.max(), dst.max()) >= n):
            raise ValueError(f"friend indices must lie in [0, {n})")
        if np.any(src == dst):
            raise ValueError("an agent cannot befriend itself (src == dst)")
        pref = self._pref.copy()
        np.add.at(pref, src, influence * self._pref[dst])
        self._set_preferences(pref / pref.sum(axis=1, keepdims=True))

    def opinion_of(self, topic: int, rng: Any = None, spread: float = 1.0) -> np.ndarray:
        """Every agent's private opinion of one item (e.g. a movie) of topic index ``topic``, on
        the 1-10 rating scale: ``clip(3 + 5 * r[topic] + spread * N(0, 1), 1, 10)`` — about 8 for
        an agent whose main interest it is, about 3 for one who does not care for the topic.
        Used with :meth:`conform` for recagent's conformity experiment."""
        if not is_int(topic) or not 0 <= topic < self.n_topics:
            raise ValueError(f"topic must be a topic index in [0, {self.n_topics}), got {topic!r}")
        gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
        noise = gen.standard_normal(self.n_agents)
        return np.clip(3.0 + 5.0 * self._rel[:, int(topic)] + float(spread) * noise, 1.0, 10.0)

    @staticmethod
    def conform(opinion: Any, friends: Any, rng: Any = None, weight: float = 0.3,
                talk_prob: float = 0.5) -> tuple[np.ndarray, np.ndarray]:
        """One round of **conformity** among scripted users (the minimal social-influence rule
        for recagent's conformity experiment; by construction, more friends mean more moves).

        ``opinion``: each agent's latent rating (floats on 1-10); its reported score is
        ``rating_scores(opinion)`` (rounded half up). ``friends``: an (n, n) 0/1 adjacency matrix.
        Each agent talks with each friend independently with probability ``talk_prob`` and,
        having heard the scores ``s_f`` of the friends it talked with, takes the weighted mean
        ``(opinion + weight * sum(s_f)) / (1 + weight * n_heard)`` — its own opinion counts 1,
        each friend heard ``weight``. Without talks nothing changes. Returns the new opinions and
        their reported scores.
        """
        x = np.asarray(opinion, np.float64)
        adj = np.asarray(friends) > 0
        if adj.shape != (len(x), len(x)):
            raise ValueError(f"friends must be an ({len(x)}, {len(x)}) adjacency matrix, got {adj.shape}")
        _probability("talk_prob", talk_prob)
        if not _finite(weight) or weight < 0:
            raise ParamError("weight", f"weight must be a finite number >= 0, got {weight!r}")
        gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
        talks = adj & (gen.random(adj.shape) < talk_prob)
        heard = talks @ TopicUsers.rating_scores(x).astype(np.float64)
        new = (x + weight * heard) / (1.0 + weight * talks.sum(axis=1))
        return new, TopicUsers.rating_scores(new)

    @staticmethod
    def rating_scores(opinion: Any) -> np.ndarray:
        """Reported 1-10 integer scores of latent opinions: rounded half up, clipped to 1..10."""
        return np.clip(np.floor(np.asarray(opinion, np.float64) + 0.5), 1, 10).astype(np.int64)

    def _set_preferences(self, pref: np.ndarray) -> None:
        """Install row-normalised preferences and what is derived from them (not the labels)."""
        pref.flags.writeable = False
        self._pref = pref
        self._rel = pref / pref.max(axis=1, keepdims=True)                   # r[c] = pref / max pref
        cdf = np.cumsum(pref, axis=1)
        self._cdf = cdf / cdf[:, -1:]
        self._last_topic = pref.shape[1] - 1 - np.argmax(pref[:, ::-1] > 0, axis=1)

    # ------------------------------------------------------------------ public attributes
    @property
    def preferences(self) -> np.ndarray:
        """The row-normalised ``(n_agents, n_topics)`` preferences (read-only)."""
        return self._pref

    @property
    def main_interest(self) -> np.ndarray:
        """``argmax`` of each agent's preferences (topic index), e.g. to group agents."""
        return self._main

    @property
    def n_agents(self) -> int:
        return self._pref.shape[0]

    @property
    def n_topics(self) -> int:
        return self._pref.shape[1]

    def engagement_probability(self, rows: np.ndarray, topics: np.ndarray, tie: Any = 0.0) -> np.ndarray:
        """``p = clip(base + gain * r[topic] + tie_gain * tie, 0, 1)`` for agents ``rows`` (shape
        (m,)) and topic indices ``topics`` (shape (m, S); -1 or out-of-range -> r = 0)."""
        rows = np.asarray(rows, dtype=np.int64)
        topics = np.asarray(topics, dtype=np.int64)
        return np.clip(self.base + self.gain * self._relative(rows, topics) + self.tie_gain * np.asarray(tie),
                       0.0, 1.0)

    # ------------------------------------------------------------------ entry points
    def act(self, observations: dict[str, Any]) -> dict[str, Any]:
        """One action per agent of ``observations`` (the batched protocol of ``env.step``).

        Numeric observations give numeric vectors (needs the layout), structured ones (``feed``
        a list of item dicts) give structured actions.
        """
        if not observations:
            return {}
        agents = list(observations)
        view = self._view_from_dicts(observations)
        if view.ids is None:
            matrix = self._decide_numeric(view)
            return dict(zip(agents, matrix))
        return dict(zip(agents, self._decide_structured(view)))

    def act_arrays(self, obs: dict[str, Any]) -> np.ndarray:
        """The ``(n_agents, L)`` integer action matrix for ``env.step_arrays``.

        ``obs``: the stacked observation arrays returned by ``step_arrays``, or a per-agent dict
        covering every agent (e.g. what ``reset()`` returns, numeric or structured).
        """
        self._need_layout()
        if is_stacked(obs):
            view = self._view_from_arrays(obs)
        else:
            missing = [a for a in self.agent_ids if a not in obs]
            if missing:
                raise ValueError(f"act_arrays needs the observation of every agent; missing {missing[:5]}")
            view = self._view_from_dicts({a: obs[a] for a in self.agent_ids})
        if len(view.rows) != self.n_agents:
            raise ValueError(f"act_arrays got observations of {len(view.rows)} agents, "
                             f"the policy has {self.n_agents}")
        return self._decide_numeric(view)

    # ------------------------------------------------------------------ observations -> view
    def _view_from_arrays(self, obs: dict[str, Any]) -> _View:
        phase = phase_name(obs["phase"])
        items = np.asarray(obs["feed"] if phase == "act" else obs["vote_items"])
        if items.shape[0] != self.n_agents:
            raise ValueError(f"stacked observations of {items.shape[0]} agents, the policy has {self.n_agents}")
        if phase == "act" and "action_mask" in obs and len(obs["action_mask"]):
            self._check_vocab(int(np.sum(obs["action_mask"][0][_TOPIC_FIELD])), "numeric")
        return self._numeric_view(np.arange(self.n_agents), phase, int(obs["round"]), items)

    def check_batch(self, observations: dict[str, Any]) -> tuple[list, dict, str]:
        """(agents, the first observation, the phase) of one call, after checking that every agent
        is known, the observations have 'phase' and 'feed', and all share one phase."""
        agents = list(observations)
        name = type(self).__name__
        unknown = [a for a in agents if a not in self._row_of]
        if unknown:
            raise ValueError(f"{name} has preferences for {self.n_agents} agents "
                             f"({self.agent_ids[0]} .. {self.agent_ids[-1]}); unknown agent(s) {unknown[:5]}")
        first = observations[agents[0]]
        if not isinstance(first, dict) or "feed" not in first or "phase" not in first:
            raise ValueError(f"{name} reads observations with 'phase' and 'feed' (structured or numeric)")
        phase = phase_name(first["phase"])
        if any(phase_name(observations[a]["phase"]) != phase for a in agents):
            raise ValueError("all observations of one call must be in the same phase")
        return agents, first, phase

    def _view_from_dicts(self, observations: dict[str, Any]) -> _View:
        agents, first, phase = self.check_batch(observations)
        rows = np.fromiter((self._row_of[a] for a in agents), np.int64, len(agents))
        rnd = int(first["round"])
        if isinstance(first["feed"], list):
            return self._structured_view(observations, agents, rows, phase, rnd)
        self._need_layout()
        key = "feed" if phase == "act" else "vote_items"
        items = np.stack([np.asarray(observations[a][key]) for a in agents])
        if phase == "act" and "action_mask" in first:
            self._check_vocab(int(np.sum(first["action_mask"][_TOPIC_FIELD])), "numeric")
        return self._numeric_view(rows, phase, rnd, items)

    def _numeric_view(self, rows: np.ndarray, phase: str, rnd: int, items: np.ndarray) -> _View:
        present = items[..., _PRESENT] > 0
        topic = np.where(present, items[..., _TOPIC], -1).astype(np.int64)
        tie = np.where(present, items[..., _TIE_OUT], 0.0).astype(np.float64)
        return _View(rows, phase, rnd == 1, topic, tie, self.layout.n_actions)

    def _structured_view(self, observations, agents, rows, phase, rnd) -> _View:
        key = "feed" if phase == "act" else "vote_items"
        lists = [observations[a][key] for a in agents]
        names = observations[agents[0]].get("topics")
        if names is None:
            raise ValueError("structured observations must carry 'topics' (the vocabulary)")
        if phase == "act":
            self._check_vocab(len(names), "structured")
        index = {name: c for c, name in enumerate(names)}
        if self.layout is not None:
            width = self.layout.feed_size if phase == "act" else self.layout.vote_feed_size
        else:
            width = max((len(items) for items in lists), default=0)
        m = len(agents)
        topic = np.full((m, width), -1, np.int64)
        ids = np.full((m, width), -1, np.int64)
        tie = np.zeros((m, width))
        has_numeric = "numeric" in observations[agents[0]]
        for k, (agent, items) in enumerate(zip(agents, lists)):
            if len(items) > width:
                raise ValueError(f"{agent}'s {key} has {len(items)} items, more than the layout's {width}")
            for j, item in enumerate(items):
                ids[k, j] = item["id"]
                topic[k, j] = index.get(item["topic"], -1)
            if has_numeric and items:
                tie[k, :len(items)] = np.asarray(observations[agent]["numeric"][key])[:len(items), _TIE_OUT]
        if not has_numeric and self.tie_gain != 0 and not self._warned_ties:
            warnings.warn("structured observations carry no tie strengths: TopicUsers uses tie = 0 "
                          "(use obs_format='both' or 'numeric' for the tie_gain term)", stacklevel=3)
            self._warned_ties = True
        n_actions = self.layout.n_actions if self.layout is not None else int(observations[agents[0]]["n_actions"])
        return _View(rows, phase, rnd == 1, topic, tie, n_actions, ids, names)

    # ------------------------------------------------------------------ decisions
    def _decide_act(self, view: _View) -> tuple[np.ndarray, ...]:
        """(kind, feed slot, topic, tone), each (m, N); feed slot -1 unless COM."""
        n_slots = view.n_actions
        m, width = view.topic.shape
        rng = self.rng
        u_post = rng.random((m, n_slots))
        u_topic = rng.random((m, n_slots))
        u_engage = rng.random((m, n_slots))
        jitter = rng.random((m, width))
        rows = view.rows

        post = np.ones((m, n_slots), bool) if view.first_round else u_post < self.p_post
        cdf = self._cdf[rows]                                                   # (m, K)
        post_topic = (u_topic[:, :, None] >= cdf[:, None, :]).sum(axis=2)
        post_topic = np.minimum(post_topic, self._last_topic[rows][:, None])   # float round-off

        present = view.topic >= 0
        p = self.engagement_probability(rows, view.topic, view.tie)
        order = np.lexsort((jitter, -np.where(present, p, -1.0)), axis=-1)     # best first
        n_present = present.sum(axis=1)
        consider = ~post
        rank = (np.cumsum(consider, axis=1) - 1) % np.maximum(n_present, 1)[:, None]
        slot = np.take_along_axis(order, rank, axis=1) if width else np.zeros((m, n_slots), np.int64)
        p_item = np.take_along_axis(p, slot, axis=1) if width else np.zeros((m, n_slots))
        com = consider & (n_present > 0)[:, None] & (u_engage < p_item)

        kind = np.where(post, POST, np.where(com, COM, NOT))
        r_item = np.take_along_axis(self._relative(rows, view.topic), slot, axis=1) if width else p_item
        r_post = np.take_along_axis(self._rel[rows], post_topic, axis=1)
        r_act = np.where(post, r_post, r_item)
        tone = np.where(r_act >= self.supportive_threshold, _SUPPORTIVE, _NEUTRAL)
        tone = np.where(kind == NOT, _NEUTRAL, tone)
        return kind, np.where(kind == COM, slot, -1), post_topic, tone

    def _decide_votes(self, view: _View) -> np.ndarray:
        """(m, V) votes in {-1, 0, +1}."""
        m, width = view.topic.shape
        u = self.rng.random((m, width))
        present = view.topic >= 0
        p = self.engagement_probability(view.rows, view.topic, view.tie)
        p_dislike = self.dislike_prob * (1.0 - self._relative(view.rows, view.topic))
        like = present & (u < p)
        dislike = present & ~like & (u < p + p_dislike)
        return like.astype(np.int64) - dislike.astype(np.int64)

    def _decide_numeric(self, view: _View) -> np.ndarray:
        lay = self._need_layout()
        m = len(view.rows)
        matrix = np.zeros((m, lay.length), np.int64)
        act, vote = lay.split(matrix)                                            # views
        if view.phase == "act":
            kind, slot, topic, tone = self._decide_act(view)
            act[:, :, _TYPE] = kind
            act[:, :, _TARGET] = np.maximum(slot, 0)
            act[:, :, _TOPIC_FIELD] = np.where(kind == POST, topic, 0)
            act[:, :, _TONE] = tone
            vote[:] = 1
        else:
            act[:, :, _TYPE] = NOT
            act[:, :, _TONE] = _NEUTRAL
            values = self._decide_votes(view)
            vote[:, : values.shape[1]] = values + 1
            vote[:, values.shape[1]:] = 1
        return matrix

    def _decide_structured(self, view: _View) -> list[dict]:
        if view.phase == "vote":
            values = self._decide_votes(view)
            a_idx, v_idx = np.nonzero(values)
            out: list[dict] = [{"votes": {}} for _ in range(len(view.rows))]
            for a, item, value in zip(a_idx.tolist(), view.ids[a_idx, v_idx].tolist(),
                                      values[a_idx, v_idx].tolist()):
                out[a]["votes"][item] = value
            return out
        kind, slot, topic, tone = self._decide_act(view)
        names = view.topic_names
        target = np.take_along_axis(view.ids, np.maximum(slot, 0), axis=1) if view.ids.shape[1] else slot
        out = []
        for k_row, t_row, tone_row, id_row in zip(kind.tolist(), topic.tolist(), tone.tolist(),
                                                  target.tolist()):
            actions = []
            for k, t, tn, cid in zip(k_row, t_row, tone_row, id_row):
                if k == POST:
                    actions.append({"type": "POST", "topic": names[t], "tone": TONES[tn]})
                elif k == COM:
                    actions.append({"type": "COM", "target_id": cid, "tone": TONES[tn]})
                else:
                    actions.append({"type": "NOT"})
            out.append({"actions": actions})
        return out

    # ------------------------------------------------------------------ helpers
    def _need_layout(self) -> ActionLayout:
        if self.layout is None:
            raise ValueError("numeric actions need the env's action layout: build the policy with "
                             "TopicUsers.for_env(env, ...) or pass layout=env.layout")
        return self.layout

    def _relative(self, rows: np.ndarray, topics: np.ndarray) -> np.ndarray:
        """r[topic] per (row, slot); 0 for empty slots and topics beyond the preference columns."""
        known = (topics >= 0) & (topics < self.n_topics)
        safe = np.where(known, topics, 0)
        return np.where(known, self._rel[rows[:, None], safe], 0.0)

    def _check_vocab(self, n_vocab: int, kind: str) -> None:
        if n_vocab < self.n_topics:
            raise ValueError(f"the preferences have {self.n_topics} topic columns but the {kind} observation "
                             f"offers only {n_vocab} topics; configure the env with topics=[...] listing at "
                             f"least {self.n_topics} (column c = topic c of the vocabulary)")


def _check_preferences(preferences: Any, rows: int | None, n_topics: int | None) -> np.ndarray:
    try:
        pref = np.array(preferences, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise ValueError(f"preferences must be a numeric (n_agents, n_topics) array: {err}") from None
    if pref.ndim != 2 or pref.shape[0] == 0 or pref.shape[1] == 0:
        raise ValueError(f"preferences must be a non-empty 2-D (n_agents, n_topics) array, got shape {pref.shape}")
    if rows is not None and pref.shape[0] != rows:
        raise ValueError(f"preferences have {pref.shape[0]} rows but there are {rows} agents "
                         f"(shape must be ({rows}, n_topics))")
    if n_topics is not None and pref.shape[1] != n_topics:
        raise ValueError(f"preferences have {pref.shape[1]} topic columns but n_topics={n_topics}")
    if not np.all(np.isfinite(pref)):
        raise ValueError("preferences must be finite (found NaN or infinity)")
    if np.any(pref < 0):
        agent, topic = (int(x) for x in np.argwhere(pref < 0)[0])
        raise ValueError(f"preferences must be non-negative; row {agent}, column {topic} is {pref[agent, topic]}")
    zero = np.flatnonzero(pref.sum(axis=1) <= 0)
    if len(zero):
        raise ValueError(f"every preference row needs a positive weight; row(s) {zero[:5].tolist()} are all zero")
    return pref


def _probability(name: str, value: Any) -> None:
    if not isinstance(value, (int, float, np.integer, np.floating)) or not 0.0 <= value <= 1.0:
        raise ParamError(name, f"{name} must be a probability in [0, 1], got {value!r}")


def _main_interests(labels: np.ndarray, topics: list, concentration: Any) -> list[int]:
    """Each agent's main topic index from its label (a topic of ``topics`` or its index)."""
    if labels.ndim != 1 or not len(labels):
        raise ValueError(f"agent_interests must be an (n, K) matrix or one label per agent, got shape {labels.shape}")
    _concentration(concentration)
    k = len(topics)
    main = []
    for i, label in enumerate(labels.tolist()):
        if isinstance(label, str) and label in topics:
            main.append(topics.index(label))
        elif is_int(label) and 0 <= int(label) < k:
            main.append(int(label))
        else:
            raise ValueError(f"agent_interests[{i}] = {label!r} names no topic: give a topic of {topics[:8]} "
                             f"or its index 0..{k - 1}")
    return main


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and math.isfinite(value)


def _positive_int(name: str, value: Any) -> int:
    if not is_int(value) or value < 1:
        raise ParamError(name, f"{name} must be a positive integer, got {value!r}")
    return int(value)


def _concentration(value: Any) -> None:
    if not isinstance(value, (int, float, np.integer, np.floating)) or not 0 < value <= 1:
        raise ParamError("concentration", f"concentration must lie in (0, 1], got {value!r}")


def phase_name(phase: Any) -> str:
    """"act" or "vote" from a phase name or its index (the numeric observation's ``phase``)."""
    if isinstance(phase, str):
        if phase not in ("act", "vote"):
            raise ValueError(f"phase must be 'act' or 'vote', got {phase!r}")
        return phase
    return ("act", "vote")[int(phase)]


def is_stacked(obs: Any) -> bool:
    """Whether ``obs`` is the stacked arrays of ``env.step_arrays`` (feed of shape (agents, slots, features))."""
    return isinstance(obs, dict) and isinstance(obs.get("feed"), np.ndarray) and obs["feed"].ndim == 3
