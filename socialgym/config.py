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

REWARD_NAMES: tuple[str, ...] = ("SOC", "INF", "PRE", "COORD", "EMO")
DEFAULT_TOPICS: tuple[str, ...] = (
    "politics", "sports", "technology", "science", "music", "health", "climate", "economy",
)
DEFAULT_EVIDENCE_WEIGHTS: Mapping[str, float] = {
    "bias": -2.0, "nov": 1.0, "appr": 2.0, "rec": 0.5, "aff": 2.0,
}
OBS_FORMATS = ("structured", "numeric", "both")
INVALID_MODES = ("strict", "lenient")


def normalise_topic(topic: str) -> str:
    """Topic strings are compared stripped and lower-cased (SPEC §2)."""
    return topic.strip().lower()


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
    ``socialgym.recommenders.RERANKERS``) or callables ``f(recommender) -> recommender``."""
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
    invalid_actions: str = "strict"
    obs_format: str = "structured"
    action_masks: bool = True
    # rewards (SPEC §3)
    b_soc: float = 0.5
    b_inf: float = 0.5
    b_pre: float = 0.5
    b_coord: float = 0.5
    b_emo: float = -1.0
    eps: float = 1e-6
    lambdas: Any = None
    # ties (SPEC §4)
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
            elif isinstance(steps, (dict, str)) or callable(steps):
                steps = (steps,)
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
        _int_at_least("n_agents", self.n_agents, 2)
        _int_at_least("n_actions", self.n_actions, 1)
        _int_at_least("max_rounds", self.max_rounds, 1)
        _int_at_least("feed_size", self.feed_size, 1)
        _int_at_least("vote_feed_size", self.vote_feed_size, 1)
        _int_at_least("dm_inbox_size", self.dm_inbox_size, 1)
        _int_at_least("max_topics", self.max_topics, 1)
        _int_at_least("max_text_chars", self.max_text_chars, 0)
        if self.invalid_actions not in INVALID_MODES:
            raise ValueError(f"invalid_actions must be one of {INVALID_MODES}, got {self.invalid_actions!r}")
        if self.obs_format not in OBS_FORMATS:
            raise ValueError(f"obs_format must be one of {OBS_FORMATS}, got {self.obs_format!r}")
        for name in ("b_soc", "b_inf", "b_pre", "b_coord"):
            _float_in(name, getattr(self, name), 0.0, 1.0)
        _finite("b_emo", self.b_emo)
        _float_in("eps", self.eps, 0.0, math.inf, low_open=True)
        _float_in("xi", self.xi, 0.0, 1.0, high_open=True)
        _float_in("delta_max", self.delta_max, 0.0, math.inf)
        _float_in("half_life", self.half_life, 0.0, math.inf, low_open=True)
        _float_in("b_rec", self.b_rec, 0.0, 1.0)
        _float_in("tie_prune_below", self.tie_prune_below, 0.0, 1.0)
        unknown = sorted(set(self.evidence_weights) - set(DEFAULT_EVIDENCE_WEIGHTS))
        if unknown:
            raise ValueError(f"evidence_weights has unknown key(s) {unknown}; "
                             f"allowed: {sorted(DEFAULT_EVIDENCE_WEIGHTS)}")
        for key, value in self.evidence_weights.items():
            _finite(f"evidence_weights[{key!r}]", value)
            if key != "bias" and value < 0:
                raise ValueError(f"evidence_weights[{key!r}] must be >= 0 so that G_theta is "
                                 f"monotone non-decreasing in every signal, got {value}")
        if not (isinstance(self.sentiment, str) or callable(self.sentiment)):
            raise TypeError("sentiment must be 'vader', 'tone' or a callable str -> float")
        if isinstance(self.sentiment, str) and self.sentiment not in ("vader", "tone"):
            raise ValueError(f"sentiment must be 'vader', 'tone' or a callable, got {self.sentiment!r}")
        self.lambda_matrix()  # raises on malformed lambdas
        ts = self.tie_scorer
        if not (ts is None or ts == "logistic" or (isinstance(ts, Mapping) and ts.get("kind") in ("logistic", "llm"))
                or callable(getattr(ts, "score", None))):
            raise ValueError("tie_scorer must be None/'logistic' (G_theta), {'kind': 'llm', <LLMClient "
                             f"arguments>}} or an object with score(signals, env); got {ts!r}")
        if not isinstance(self.recommender_kwargs, Mapping):
            raise TypeError("recommender_kwargs must be a mapping of parameter names to values")
        _int_at_least("soc_strategy", self.soc_strategy, 0)
        _float_in("soc_strategy_weight", self.soc_strategy_weight, 0.0, 1.0, low_open=True)
        _int_at_least("exposure_window", self.exposure_window, 1)
        if self.cocoon_threshold is not None:
            _float_in("cocoon_threshold", self.cocoon_threshold, 0.0, math.inf)
        if self.soc_strategy and self.agent_interests is None:
            raise ValueError("soc_strategy needs agent_interests (a preference matrix or labels per agent)")
        if self.agent_interests is not None:
            from socialgym.ties.seeding import main_interests
            main_interests(self.agent_interests, self.n_agents)   # raises on a bad shape
        if self.agent_groups is not None and len(self.agent_groups) != self.n_agents:
            raise ValueError(f"agent_groups has {len(self.agent_groups)} labels for {self.n_agents} agents")

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
                    raise ValueError(f"lambdas names unknown agent {agent!r}")
                out[ids[agent]] = _lambda_row(weights, f"lambdas[{agent!r}]")
            return out
        arr = np.asarray(lam, dtype=float) if not isinstance(lam, str) else None
        if arr is not None and arr.shape == (len(REWARD_NAMES),):
            return np.tile(_lambda_row(arr, "lambdas"), (n, 1))
        if arr is not None and arr.shape == (n, len(REWARD_NAMES)):
            return np.stack([_lambda_row(r, f"lambdas[{i}]") for i, r in enumerate(arr)])
        raise ValueError("lambdas must be None, a 5-vector (SOC, INF, PRE, COORD, EMO), "
                         f"a dict agent -> weights, or an ({n}, 5) array; got {lam!r}")


def _lambda_row(weights: Any, where: str) -> np.ndarray:
    if isinstance(weights, Mapping):
        unknown = sorted(set(weights) - set(REWARD_NAMES))
        if unknown:
            raise ValueError(f"{where} has unknown component(s) {unknown}; allowed: {list(REWARD_NAMES)}")
        row = np.array([float(weights.get(r, 0.0)) for r in REWARD_NAMES])
    else:
        try:
            row = np.asarray(weights, dtype=float).reshape(-1)
        except (TypeError, ValueError):
            raise ValueError(f"{where} must be 5 numbers (SOC, INF, PRE, COORD, EMO), got {weights!r}")
        if row.shape != (len(REWARD_NAMES),):
            raise ValueError(f"{where} must have 5 entries (SOC, INF, PRE, COORD, EMO), got {weights!r}")
    if not np.all(np.isfinite(row)) or np.any(row < 0) or abs(row.sum() - 1.0) > 1e-6:
        raise ValueError(f"{where} must be non-negative and sum to 1 (the simplex), got {row.tolist()}")
    return row


def _topic_tuple(topics: Any) -> tuple[str, ...]:
    if isinstance(topics, str) or not isinstance(topics, Sequence):
        raise TypeError(f"topics must be a list of strings, got {topics!r}")
    out: list[str] = []
    for t in topics:
        if not isinstance(t, str) or not normalise_topic(t):
            raise ValueError(f"topics must be non-empty strings, got {t!r}")
        if normalise_topic(t) not in out:
            out.append(normalise_topic(t))
    return tuple(out)


def _int_at_least(name: str, value: Any, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")


def _finite(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)) \
            or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")


def _float_in(name: str, value: Any, low: float, high: float, *,
              low_open: bool = False, high_open: bool = False) -> None:
    _finite(name, value)
    ok_low = value > low if low_open else value >= low
    ok_high = value < high if high_open else value <= high
    if not (ok_low and ok_high):
        lb = "(" if low_open else "["
        hb = ")" if high_open else "]"
        raise ValueError(f"{name} must lie in {lb}{low}, {high}{hb}, got {value!r}")


SentimentFn = Callable[[str], float]
