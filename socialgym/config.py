"""Typed, frozen configuration of the feed environment (the *substrate*).

Every keyword of ``socialgym.parallel_env(**config)`` is a field here; unknown keywords are
errors that list the allowed ones. Values are validated once, at construction, so the step
loop can trust them.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from socialgym.platform.population import main_interests, seed_graph_pairs
from socialgym.platform.topics import MAX_TOPIC_CHARS, normalise_topic, topic_problem
from socialgym.platform.validation import check_finite, check_int, check_range, check_seed, show

REWARD_NAMES: tuple[str, ...] = ("SOC", "INF", "PRE", "COORD", "EMO")
DEFAULT_TOPICS: tuple[str, ...] = (
    "politics", "sports", "technology", "science", "music", "health", "climate", "economy",
)
DEFAULT_EVIDENCE_WEIGHTS: Mapping[str, float] = {
    "bias": -2.0, "nov": 1.0, "appr": 2.0, "rec": 0.5, "aff": 2.0,
}
OBS_FORMATS = ("structured", "numeric", "both")
INVALID_MODES = ("strict", "lenient")
# The registered recommender and re-ranker names (socialgym.recommenders.registry builds them;
# listed here so that the config checks names without importing the recommenders layer)
RECOMMENDER_NAMES = ("chronological", "random", "popularity", "topic_affinity", "social", "mf", "hybrid", "bridging",
                     "engagement_greedy", "learned")
RERANK_KINDS = ("random_replacement", "tail_quota_transfer", "efficiency_boost", "underserved_boost",
                "stance_penalty")
RUNTIME_PARAMS = ("half_life", "xi", "delta_max", "b_rec")
"""The tie parameters that may change during a run (``FeedEnv.set_param``, a ``param`` intervention,
a fork's changed ``env``); the others describe the platform the run started with."""

# Upper limits of the sizes (docs/experiments.md, "Limits"). They are generous for research —
# the environment is vectorised and was run with 1,000,000 agents — and exist to stop a typo such
# as ``n_agents: 10**12`` with a one-line error before any array is allocated, instead of a
# MemoryError (or a run that never ends) later. Whether a size fits this machine's memory is a
# separate check (``socialgym.platform.validation.check_memory``, when an environment is built).
MAX_AGENTS = 10_000_000
"""``n_agents``: the tie store is sparse; per-agent arrays are (n_agents x feed/topics)."""
MAX_ROUNDS = 100_000
"""``max_rounds`` and ``exposure_window``."""
MAX_ACTIONS = 100
"""``n_actions``: action slots per agent per round."""
MAX_FEED_SIZE = 1_000
"""``feed_size``, ``vote_feed_size`` and ``dm_inbox_size``: list lengths per agent and round."""
MAX_TOPICS = 1_000
"""``max_topics`` (the numeric topic dimension) and the length of the ``topics`` list."""
# MAX_TOPIC_CHARS (socialgym.platform.topics): the longest topic name in ``topics`` (normalised;
# the platform's own limit for topics agents add)
MAX_TEXT_CHARS = 1_000_000
"""Upper bound of ``max_text_chars`` (the longest post, comment or DM text accepted)."""


@dataclass(frozen=True)
class FeedConfig:
    """Configuration of the feed environment. See ``docs/environment.md`` for each rule."""

    n_agents: int = 10
    n_actions: int = 3
    max_rounds: int = 15
    topics: tuple[str, ...] = DEFAULT_TOPICS
    recommender: Any = "chronological"
    recommender_kwargs: Mapping[str, Any] = field(default_factory=dict)
    """Constructor parameters of a recommender given by name (e.g. ``{"dim": 32}`` for mf)."""
    rerank: tuple = ()
    """Re-ranking interventions, innermost first: dicts ``{"kind": ..., **params}`` (see
    ``RERANK_KINDS``) or callables ``f(recommender) -> recommender``."""
    agent_interests: Any = None
    """(n_agents, n_topics) preferences or n_agents labels; used by ``soc_strategy`` and as the
    default groups of the exposure metrics."""
    agent_groups: Any = None
    """n_agents group labels for cross-cutting exposure and per-group cocoon shares."""
    soc_strategy: int = 0
    """recagent's Soc-Strategy: at reset, tie every agent to this many agents of a different
    main interest (both directions), weight ``soc_strategy_weight``. Needs ``agent_interests``."""
    soc_strategy_weight: float = 0.5
    exposure_window: int = 5
    """Rounds of act-phase feeds the cocoon / exposure metrics look back over."""
    cocoon_threshold: float | None = None
    """Topic entropy (nats) below which an agent is in a deep cocoon; None = 0.5 * ln(topics)."""
    exposure_in_infos: bool = False
    """Also put the exposure metrics into every agent's info after each vote step."""
    feed_size: int = 10
    vote_feed_size: int = 10
    dm_inbox_size: int = 10
    """How many of last round's DMs the *numeric* observation shows (structured shows all)."""
    max_topics: int = 32
    """Width of the numeric topic dimension; structured actions may add topics beyond it."""
    invalid_actions: str = "lenient"
    """``"lenient"`` (default): an action that breaks the platform's rules becomes NOT (no vote)
    and is recorded in ``infos[agent]["invalid"]`` and ``last_round.invalid``, so any element of
    the action space is a legal ``step`` argument (PettingZoo's convention); ``"strict"``: it
    raises a ValueError naming agent, slot and field, and the step changes nothing."""
    obs_format: str = "structured"
    action_masks: bool = True
    # rewards (specification §3)
    b_soc: float = 0.5
    b_inf: float = 0.5
    b_pre: float = 0.5
    b_coord: float = 0.5
    b_emo: float = -1.0
    eps: float = 1e-6
    lambdas: Any = None
    # ties (specification §4)
    xi: float = 0.1
    delta_max: float = 0.25
    half_life: float = 5.0
    b_rec: float = 0.5
    evidence_weights: Mapping[str, float] = field(
        default_factory=lambda: dict(DEFAULT_EVIDENCE_WEIGHTS)
    )
    tie_scorer: Any = None
    tie_prune_below: float = 1e-6
    """Tie and like-EMA entries that decay below this are dropped to keep the store sparse."""
    seed_graph: Any = None
    # text
    sentiment: Any = "vader"
    max_text_chars: int = 10_000
    seed: int | None = None

    @classmethod
    def from_kwargs(cls, **kwargs: Any) -> "FeedConfig":
        allowed = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(kwargs) - allowed)
        if unknown:
            raise TypeError(
                f"unknown feed-environment config key(s) {unknown}; allowed keys: {sorted(allowed)}"
            )
        if "rerank" in kwargs:
            steps = kwargs["rerank"]
            if steps is None:
                steps = ()
            elif isinstance(steps, (Mapping, str)) or callable(steps):
                steps = (steps,)
            elif not isinstance(steps, (list, tuple)):
                raise TypeError(f"rerank must be a list of steps, got {show(steps)}")
            kwargs["rerank"] = tuple(steps)
        if kwargs.get("recommender_kwargs") is None:
            kwargs.pop("recommender_kwargs", None)
        if "topics" in kwargs and kwargs["topics"] is not None:
            kwargs["topics"] = _topic_tuple(kwargs["topics"])
        if "evidence_weights" in kwargs:
            merged = dict(DEFAULT_EVIDENCE_WEIGHTS)
            weights = kwargs["evidence_weights"] or {}
            if not isinstance(weights, Mapping):
                raise TypeError("evidence_weights must be a mapping of "
                                f"{sorted(DEFAULT_EVIDENCE_WEIGHTS)} to floats")
            merged.update(weights)
            kwargs["evidence_weights"] = merged
        config = cls(**kwargs)
        config.validate()
        return config

    # ------------------------------------------------------------------ validation
    def validate(self) -> None:
        check_seed(self.seed, "seed")
        for name, low, high, limit in (
                ("n_agents", 2, MAX_AGENTS, "MAX_AGENTS"), ("n_actions", 1, MAX_ACTIONS, "MAX_ACTIONS"),
                ("max_rounds", 1, MAX_ROUNDS, "MAX_ROUNDS"), ("feed_size", 1, MAX_FEED_SIZE, "MAX_FEED_SIZE"),
                ("vote_feed_size", 1, MAX_FEED_SIZE, "MAX_FEED_SIZE"),
                ("dm_inbox_size", 1, MAX_FEED_SIZE, "MAX_FEED_SIZE"), ("max_topics", 1, MAX_TOPICS, "MAX_TOPICS"),
                ("max_text_chars", 0, MAX_TEXT_CHARS, "MAX_TEXT_CHARS")):
            check_int(name, getattr(self, name), low, high, limit=limit)
        _check_topics(self.topics)
        for name in ("exposure_in_infos", "action_masks"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise TypeError(f"{name} must be True or False, got {show(getattr(self, name))}")
        _check_recommender(self.recommender, self.recommender_kwargs, self.rerank)
        if self.invalid_actions not in INVALID_MODES:
            raise ValueError(f"invalid_actions must be one of {INVALID_MODES}, got {show(self.invalid_actions)}")
        if self.obs_format not in OBS_FORMATS:
            raise ValueError(f"obs_format must be one of {OBS_FORMATS}, got {show(self.obs_format)}")
        for name in ("b_soc", "b_inf", "b_pre", "b_coord"):
            check_range(name, getattr(self, name), 0.0, 1.0)
        check_finite("b_emo", self.b_emo)
        check_range("eps", self.eps, 0.0, math.inf, low_open=True)
        check_range("xi", self.xi, 0.0, 1.0, high_open=True)
        check_range("delta_max", self.delta_max, 0.0, math.inf)
        check_range("half_life", self.half_life, 0.0, math.inf, low_open=True)
        check_range("b_rec", self.b_rec, 0.0, 1.0)
        check_range("tie_prune_below", self.tie_prune_below, 0.0, 1.0)
        unknown = sorted(set(self.evidence_weights) - set(DEFAULT_EVIDENCE_WEIGHTS))
        if unknown:
            raise ValueError(f"evidence_weights has unknown key(s) {unknown}; "
                             f"allowed: {sorted(DEFAULT_EVIDENCE_WEIGHTS)}")
        for key, value in self.evidence_weights.items():
            check_finite(f"evidence_weights[{key!r}]", value)
            if key != "bias" and value < 0:
                raise ValueError(f"evidence_weights[{key!r}] must be >= 0 so that G_theta is "
                                 f"monotone non-decreasing in every signal, got {value}")
        if not (isinstance(self.sentiment, str) or callable(self.sentiment)):
            raise TypeError("sentiment must be 'vader', 'tone' or a callable str -> float")
        if isinstance(self.sentiment, str) and self.sentiment not in ("vader", "tone"):
            raise ValueError(f"sentiment must be 'vader', 'tone' or a callable, got {show(self.sentiment)}")
        self.lambda_matrix()  # raises on malformed lambdas
        ts = self.tie_scorer
        if not (ts is None or ts == "logistic" or (isinstance(ts, Mapping) and ts.get("kind") in ("logistic", "llm"))
                or callable(getattr(ts, "score", None))):
            raise ValueError("tie_scorer must be None/'logistic' (G_theta), {'kind': 'llm', <LLMClient "
                             f"arguments>}} or an object with score(signals, env); got {show(ts)}")
        if not isinstance(self.recommender_kwargs, Mapping):
            raise TypeError("recommender_kwargs must be a mapping of parameter names to values")
        check_int("soc_strategy", self.soc_strategy, 0, self.n_agents - 1, limit="n_agents - 1")
        check_range("soc_strategy_weight", self.soc_strategy_weight, 0.0, 1.0, low_open=True)
        check_int("exposure_window", self.exposure_window, 1, MAX_ROUNDS, limit="MAX_ROUNDS")
        if self.cocoon_threshold is not None:
            check_range("cocoon_threshold", self.cocoon_threshold, 0.0, math.inf)
        if self.soc_strategy and self.agent_interests is None:
            raise ValueError("soc_strategy needs agent_interests (a preference matrix or labels per agent)")
        if self.agent_interests is not None:
            try:
                main_interests(self.agent_interests, self.n_agents)   # raises on a bad shape
            except (TypeError, ValueError) as exc:
                message = " ".join(str(exc).split())
                raise ValueError(message if message.startswith("agent_interests")
                                 else f"agent_interests: {message}") from None
        if self.agent_groups is not None:
            groups = self.agent_groups
            if isinstance(groups, (str, bytes, Mapping)) or not hasattr(groups, "__len__") \
                    or not hasattr(groups, "__getitem__"):
                raise TypeError(f"agent_groups must be a sequence of {self.n_agents} labels, got {show(groups)}")
            if len(groups) != self.n_agents:
                raise ValueError(f"agent_groups has {len(groups)} labels for {self.n_agents} agents")
            if any(isinstance(g, (list, dict, set)) for g in groups):
                raise TypeError("agent_groups must hold one hashable label (a string or number) per agent")
        if self.seed_graph is not None:
            try:
                seed_graph_pairs(self.seed_graph, self.n_agents)
            except (TypeError, ValueError) as exc:
                raise ValueError(f"seed_graph: {' '.join(str(exc).split())}") from None

    # ------------------------------------------------------------------ derived values
    @property
    def agent_ids(self) -> tuple[str, ...]:
        return tuple(f"agent_{i}" for i in range(self.n_agents))

    @property
    def decay(self) -> float:
        """delta = 1 - 2^(-1/half_life): the per-round decay of an inactive tie."""
        return 1.0 - 2.0 ** (-1.0 / self.half_life)

    def lambda_matrix(self) -> np.ndarray:
        """Per-agent reward weights as an (n, 5) array, rows on the simplex."""
        n = self.n_agents
        lam = self.lambdas
        if lam is None:
            return np.full((n, len(REWARD_NAMES)), 1.0 / len(REWARD_NAMES))
        if isinstance(lam, Mapping):
            out = np.full((n, len(REWARD_NAMES)), 1.0 / len(REWARD_NAMES))
            ids = {a: i for i, a in enumerate(self.agent_ids)}
            for agent, weights in lam.items():
                if agent not in ids:
                    raise ValueError(f"lambdas names unknown agent {show(agent)}")
                out[ids[agent]] = lambda_row(weights, f"lambdas[{agent!r}]")
            return out
        try:
            arr = np.asarray(lam, dtype=float) if not isinstance(lam, str) else None
        except (TypeError, ValueError):
            arr = None
        if arr is not None and arr.shape == (len(REWARD_NAMES),):
            return np.tile(lambda_row(arr, "lambdas"), (n, 1))
        if arr is not None and arr.shape == (n, len(REWARD_NAMES)):
            # every row at once (a row-by-row check took 35 s at 200k agents); the first bad row named
            bad = ~np.isfinite(arr).all(axis=1) | (arr < 0).any(axis=1) | (np.abs(arr.sum(axis=1) - 1.0) > 1e-6)
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                lambda_row(arr[i], f"lambdas[{i}]")       # raises, naming the row and its values
            return arr.copy()
        raise ValueError("lambdas must be None, a 5-vector (SOC, INF, PRE, COORD, EMO), "
                         f"a dict agent -> weights, or an ({n}, 5) array; got {show(lam)}")


def lambda_row(weights: Any, where: str) -> np.ndarray:
    """One agent's five reward weights, from a mapping by reward name or a sequence of five;
    a ValueError naming ``where`` for anything else (shared by the config, ``set_lambdas`` and
    the ``set_lambdas`` intervention)."""
    if isinstance(weights, Mapping):
        unknown = sorted(set(weights) - set(REWARD_NAMES))
        if unknown:
            raise ValueError(f"{where} has unknown component(s) {unknown}; allowed: {list(REWARD_NAMES)}")
        row = np.array([float(weights.get(r, 0.0)) for r in REWARD_NAMES])
    else:
        try:
            row = np.asarray(weights, dtype=float).reshape(-1)
        except (TypeError, ValueError):
            raise ValueError(f"{where} must be 5 numbers (SOC, INF, PRE, COORD, EMO), got {show(weights)}")
        if row.shape != (len(REWARD_NAMES),):
            raise ValueError(f"{where} must have 5 entries (SOC, INF, PRE, COORD, EMO), got {show(weights)}")
    if not np.all(np.isfinite(row)) or np.any(row < 0) or abs(row.sum() - 1.0) > 1e-6:
        raise ValueError(f"{where} must be non-negative and sum to 1 (the simplex), got {show(row.tolist())}")
    return row


def _topic_tuple(topics: Any) -> tuple[str, ...]:
    """The normalised topics; empty lists, non-strings and repeats are errors (not dropped)."""
    if isinstance(topics, str) or not isinstance(topics, Sequence):
        raise TypeError(f"topics must be a list of strings, got {show(topics)}")
    if len(topics) > MAX_TOPICS:
        raise ValueError(f"topics has {len(topics)} entries, more than MAX_TOPICS = {MAX_TOPICS}")
    out: list[str] = []
    for t in topics:
        if not isinstance(t, str) or not normalise_topic(t):
            raise ValueError(f"topics must be non-empty strings, got {show(t)}")
        key = normalise_topic(t)
        if key in out:
            raise ValueError(f"topics lists {show(key)} twice (topics are compared stripped and lower-cased)")
        out.append(key)
    return tuple(out)


def _check_topics(topics: Any) -> None:
    if not isinstance(topics, tuple):
        raise TypeError(f"topics must be a list of strings, got {show(topics)}")
    # an empty vocabulary is allowed here (agents then introduce every topic, specification §2); the
    # experiment configs reject it, since scripted and trained policies need topics to post on
    if len(topics) > MAX_TOPICS:
        raise ValueError(f"topics has {len(topics)} entries, more than MAX_TOPICS = {MAX_TOPICS}")
    seen: set[str] = set()
    for i, t in enumerate(topics):
        if not isinstance(t, str) or not normalise_topic(t):
            raise ValueError(f"topics must be non-empty strings, got {show(t)}")
        key = normalise_topic(t)
        if len(key) > MAX_TOPIC_CHARS:
            raise ValueError(f"topics[{i}] has {len(key)} characters, more than MAX_TOPIC_CHARS = "
                             f"{MAX_TOPIC_CHARS}: {show(t)}")
        if key in seen:
            raise ValueError(f"topics lists {show(key)} twice (topics are compared stripped and lower-cased)")
        seen.add(key)
        problem = topic_problem(key)
        if problem:
            raise ValueError(f"topics[{i}]: {problem}")


def _check_recommender(recommender: Any, kwargs: Any, rerank: Any) -> None:
    """Names must be registered (``RECOMMENDER_NAMES`` / ``RERANK_KINDS``), so that a typo fails
    when the config is made, not when the environment is built."""
    if isinstance(recommender, str):
        if recommender not in RECOMMENDER_NAMES:
            raise ValueError(f"recommender: unknown recommender {show(recommender)}; available: "
                             f"{', '.join(sorted(RECOMMENDER_NAMES))}")
    elif not (callable(recommender) or hasattr(recommender, "recommend")):
        raise TypeError(f"recommender must be a name ({', '.join(sorted(RECOMMENDER_NAMES))}), an object with "
                        f"recommend(request, rng), or a function; got {show(recommender)}")
    if kwargs and not isinstance(recommender, str):
        raise TypeError("recommender_kwargs apply only to a recommender given by name")
    if isinstance(kwargs, Mapping) and any(not isinstance(k, str) for k in kwargs):
        raise TypeError(f"recommender_kwargs keys must be parameter names, got {show(list(kwargs))}")
    if not isinstance(rerank, tuple):
        raise TypeError(f"rerank must be a list of steps, got {show(rerank)}")
    for i, step in enumerate(rerank):
        if callable(step):
            continue
        if not isinstance(step, Mapping) or "kind" not in step:
            raise TypeError(f"rerank[{i}]: a rerank step must be a dict with 'kind' (one of "
                            f"{', '.join(sorted(RERANK_KINDS))}) or a callable; got {show(step)}")
        if not isinstance(step["kind"], str) or step["kind"] not in RERANK_KINDS:
            raise ValueError(f"rerank[{i}].kind: unknown rerank kind {show(step['kind'])}; available: "
                             f"{', '.join(sorted(RERANK_KINDS))}")
        if any(not isinstance(k, str) for k in step):
            raise TypeError(f"rerank[{i}] keys must be parameter names, got {show(list(step))}")


SentimentFn = Callable[[str], float]
