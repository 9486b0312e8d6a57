"""An experiment's configuration as frozen, typed sections, and its limits.

``ExperimentConfig`` holds the sections (``env``, ``policy``, ``llm``, ``personas``, ``logging``,
``run``, ``sweep``, ``interventions``, ``surveys``); :mod:`.loading` reads and checks a YAML file
into one, :mod:`.validation` checks what the sections name, :mod:`.forks` says what a fork may
change. :func:`to_dict` / :func:`dump_yaml` write a config back, secrets removed.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import yaml

from socialgym.baselines.kinds import KIND, POLICY_KINDS, TIERS, kinds_where  # noqa: F401 -- re-exported
from socialgym.config import MAX_AGENTS, MAX_ROUNDS, FeedConfig
from socialgym.platform.validation import MAX_SHOWN_CHARS  # noqa: F401 -- re-exported: messages cut values to it
from socialgym.llm.sanitize import drop_secrets
from socialgym.rundir.files import atomic_write
from socialgym.recommenders.params import PARAM_LIMITS  # noqa: F401 -- the limits recommenders obey, re-exported

SCRIPTED_KINDS = kinds_where(tier="scripted")
"""A ``scripted`` tier is ``social_users`` unless the group's ``kind`` names another of these."""
LLM_CLIENT_KINDS = kinds_where(client=True)
"""Policy kinds whose agents need the run's LLM client."""


def tier_of(kind: str) -> str:
    """The tier (``TIERS``) of a policy kind."""
    return KIND[kind].tier


def kind_of_tier(tier: str, kind: str | None) -> str:
    """The kind a group's ``policy:`` tier (and ``kind:``, when given too) stands for; ValueError
    when the two disagree or the tier is unknown."""
    if tier not in TIERS:
        raise ValueError(f"must be one of {', '.join(TIERS)}, got {tier!r}")
    if tier == "scripted":
        if kind is not None and kind not in SCRIPTED_KINDS:
            raise ValueError(f"is scripted but kind is {kind!r} (scripted kinds: {', '.join(SCRIPTED_KINDS)})")
        return kind or "social_users"
    (wanted,) = kinds_where(tier=tier)
    if kind is not None and kind != wanted:
        raise ValueError(f"is {tier} but kind is {kind!r} ({tier} means kind {wanted})")
    return wanted


def group_counts(groups, n: int) -> list[int]:
    """Each group's number of agents: ``agents`` as given, ``share`` of ``n`` (rounded half up),
    and the rest to the one group with neither. When no group takes the rest, the counts and
    ``share * n`` must add up to ``n`` once rounded, and the shares are rounded by largest
    remainders so that the counts add up to ``n`` exactly. ValueError when they cannot. A count
    may come out 0 or below (validation refuses it, naming the counts)."""
    counts = [g.agents for g in groups]
    shares = [i for i, g in enumerate(groups) if g.agents is None and g.share is not None]
    rest = [i for i, g in enumerate(groups) if g.agents is None and g.share is None]
    fixed = sum(c for c in counts if c is not None)
    if rest:
        for i in shares:
            counts[i] = int(groups[i].share * n + 0.5)       # half up
        counts[rest[0]] = n - fixed - sum(counts[i] for i in shares)
        return counts
    if shares:
        exact = [groups[i].share * n for i in shares]
        floors = [int(x) for x in exact]
        left = n - fixed - sum(floors)
        if abs(fixed + sum(exact) - n) >= 0.5 or not 0 <= left <= len(shares):
            raise ValueError(f"the shares ({', '.join(f'{groups[i].share:g}' for i in shares)}) of env.n_agents = {n} "
                             f"and the counts ({fixed}) do not add up to {n}")
        for j in sorted(range(len(shares)), key=lambda j: floors[j] - exact[j])[:left]:
            floors[j] += 1
        for i, c in zip(shares, floors):
            counts[i] = c
    return counts
BACKENDS = ("local", "ray")
WANDB_MODES = ("online", "offline", "disabled")

# env sub-sections that flatten into FeedConfig keys (a spelling aid, not a second namespace)
ENV_GROUPS = {
    "ties": ("xi", "delta_max", "half_life", "b_rec", "evidence_weights", "tie_scorer", "tie_prune_below",
             "seed_graph"),
    "rewards": ("b_soc", "b_inf", "b_pre", "b_coord", "b_emo", "eps", "lambdas"),
}
# keys the runner owns: the seed comes from the top level and replicates, the format from the policy
ENV_RESERVED = ("seed", "obs_format")
STRUCTURED_MODES = ("auto", "json_schema", "json_object", "prompt")
"""``llm.structured`` (``socialgym.llm.client.STRUCTURED_MODES``, repeated to keep loading light)."""

# ---- limits of the file and its parsing (docs/experiments.md, "Limits")
MAX_CONFIG_BYTES = 1_000_000
"""Largest config file read (and longest ``--set`` value)."""
MAX_YAML_ALIASES = 100
"""Most ``*alias`` uses in one YAML document."""
MAX_YAML_NODES = 200_000
"""Most values (scalars, lists, mappings) a document may hold once its aliases are expanded."""
MAX_YAML_DEPTH = 64
"""Deepest nesting of lists and mappings."""
MAX_MESSAGE_CHARS = 800
"""Longest error message (the one line a config error prints)."""
MAX_STRING_CHARS = 4096
"""Longest string in a typed field (names, URLs, paths)."""
# ---- limits of the values (sizes of the environment: socialgym.config.MAX_AGENTS ...)
MAX_SEED = 2**32 - 1
"""Largest seed (the top-level ``seed`` plus ``run.replicates - 1``: every replicate's seed)."""
MAX_REPLICATES = 1_000
MAX_SWEEP_CELLS = 1_000
"""Most cells of a sweep grid (the product of its lists' lengths)."""
MAX_JOBS = 10_000
"""Most runs of one config: sweep cells x ``run.replicates``."""
MAX_WORKERS = 1_024
"""``run.workers`` and ``llm.max_concurrency``."""

# numeric fields of the typed sections: (low, high, low is exclusive)
RANGES: dict[str, tuple[float, float, bool]] = {
    "policy.groups[*].agents": (1, MAX_AGENTS, False),
    "policy.groups[*].share": (0, 1, True),
    "llm.max_concurrency": (1, MAX_WORKERS, False),
    "llm.timeout": (0, 86_400, True),
    "llm.max_retries": (0, 100, False),
    "llm.temperature": (0, 2, False),
    "llm.max_tokens": (1, 1_000_000, False),
    "llm.max_repairs": (0, 100, False),
    "llm.max_reply_bytes": (1_024, 1_073_741_824, False),
    "llm.max_retry_wait": (0, 86_400, False),
    "llm.n_ctx": (256, 1_048_576, False),
    "llm.tie_transcript_tokens": (32, 1_048_576, False),
    "logging.wandb.sample_posts": (0, 10_000, False),
    "logging.wandb.graph_every": (0, MAX_ROUNDS, False),
    "logging.network_every": (1, MAX_ROUNDS, False),
    "run.replicates": (1, MAX_REPLICATES, False),
    "run.workers": (1, MAX_WORKERS, False),
    "run.max_fallback_share": (0, 1, False),
    "run.fork_at": (1, MAX_ROUNDS, False),
    "llm.endpoints[*].max_concurrency": (1, MAX_WORKERS, False),
    "llm.endpoints[*].weight": (0, 1_000_000, True),
}
# string fields with a shorter limit than MAX_STRING_CHARS (wandb's own limits for its fields)
STRING_LIMITS = {"logging.wandb.project": 128, "logging.wandb.entity": 128, "logging.wandb.name": 128,
                 "logging.wandb.group": 128, "logging.wandb.tags": 64, "run.name": 128,
                 "policy.groups[*].name": 64, "llm.api_key_env": 128, "llm.endpoints[*].name": 64,
                 "llm.endpoints[*].api_key_env": 128, "policy.groups[*].endpoints": 64}
MAX_ENDPOINTS = 64
"""Most servers in ``llm.endpoints``."""
# constructor parameters of recommenders and re-rankers that size arrays or loops
# llm policy keywords the runner sets itself
LLM_PARAMS_RESERVED = ("client", "personas", "coach", "coached", "prompts", "seed")


def cut_text(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


def one_line(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """Whitespace runs become one space, other unprintable characters are escaped, and the
    result is cut to ``limit`` characters: an error message is always one short line."""
    text = " ".join(text.split())
    if not text.isprintable():
        text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    return text if len(text) <= limit else text[:limit - 1] + "…"


class ConfigError(ValueError):
    """A bad experiment config; the message is one line and names the key (see :func:`one_line`)."""

    def __init__(self, message: object = "") -> None:
        super().__init__(one_line(str(message)))


class FrozenDict(dict):
    """A read-only dict (hashable, picklable) for mapping-valued config fields."""

    def _blocked(self, *args, **kwargs):
        raise TypeError("experiment configs are frozen; use dataclasses.replace or --set")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = _blocked  # type: ignore[assignment]

    def __hash__(self) -> int:   # type: ignore[override]
        return hash(yaml.safe_dump(thaw(self), sort_keys=True))

    def __reduce__(self):
        return (FrozenDict, (dict(self),))


def freeze(value: Any) -> Any:
    if isinstance(value, Mapping):
        return FrozenDict({k: freeze(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v) for v in value)
    return value


def thaw(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [thaw(v) for v in value]
    return value


# ---------------------------------------------------------------------------------- sections
@dataclass(frozen=True)
class PolicyGroup:
    """Agents ``[start, start + agents)`` acting with one policy."""

    name: str
    kind: str = "greedy"
    agents: int | None = None
    """How many agents; one group may leave it and ``share`` out and take the rest."""
    share: float | None = None
    """Instead of ``agents``: this fraction of ``env.n_agents`` (``group_counts`` rounds)."""
    coach: bool = False
    """LLM groups only: the coach advises these agents (specification §8)."""
    lambdas: Any = None
    """Reward weights of this group's agents: 5 numbers or {SOC: .., ...}; None keeps env.lambdas."""
    params: FrozenDict = field(default_factory=FrozenDict)
    """Constructor keywords of the policy (e.g. ``mention_prob`` for random, ``b`` for greedy,
    ``max_users`` / ``text_chars`` for llm)."""
    endpoints: tuple[str, ...] = ()
    """LLM groups with ``llm.endpoints``: the names of the servers this group's requests go to
    (empty: any). Routing only: a fork or resume may change it."""
    model: str | None = None
    """LLM groups with ``llm.endpoints``: only the endpoints serving this model (with
    ``endpoints``: those of them that serve it)."""


@dataclass(frozen=True)
class PolicyConfig:
    kind: str = "greedy"
    coach: bool = False
    params: FrozenDict = field(default_factory=FrozenDict)
    groups: tuple[PolicyGroup, ...] = ()
    """When given, ``kind``/``coach``/``params`` are the defaults of each group."""


@dataclass(frozen=True)
class PersonaConfig:
    """Who the LLM agents are. In YAML a plain string is the ``source``."""

    source: str | None = None
    """A persona file (JSON or CSV), or a bundled set's name (``climate-change``); None draws
    personas from templates (``generate_personas``)."""
    survey: bool = False
    """Give every LLM agent the Mini-IPIP pre-survey through the run's model before round 1; the
    measured Big Five are stored beside the intended ones (``personas.json``, the report)."""


@dataclass(frozen=True)
class EndpointConfig:
    """One server of ``llm.endpoints`` (``socialgym.llm.router.Endpoint``; docs/servers.md)."""

    name: str
    base_url: str
    model: str
    api_key_env: str | None = None
    """Name of the variable holding this server's key (None: ``llm.api_key_env``'s)."""
    api_key: str | None = field(default=None, repr=False)
    """Accepted like ``llm.api_key``; removed from every file the run writes."""
    max_concurrency: int = 16
    weight: float = 1.0
    """This server's share of the requests, relative to the others'."""


@dataclass(frozen=True)
class LLMConfig:
    """An OpenAI-compatible server, or (``base_url`` None) the embedded local model."""

    base_url: str | None = None
    model: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    """Name of the environment variable that holds the key (the key itself is never stored)."""
    api_key: str | None = field(default=None, repr=False)
    """Accepted for convenience; removed from every file the run writes."""
    max_concurrency: int = 16
    timeout: float = 60.0
    max_retries: int = 3
    temperature: float = 0.7
    max_tokens: int = 512
    structured: str = "auto"
    max_repairs: int = 3
    max_reply_bytes: int = 4 * 2**20
    """The largest LLM reply read, in bytes (default 4 MiB; a reply of max_tokens 512 is a few kB): a
    larger one is a failed request, refused while it is read, not retried."""
    max_retry_wait: float = 60.0
    """The longest Retry-After (HTTP 429/503) waited for, in seconds; a server asking for longer
    fails the request at once, with a reason naming it."""
    cache: bool = True
    """The response cache in DIR/llm_cache.sqlite: a resumed run replays the interrupted round."""
    tie_scorer: bool = False
    """Score tie evidence with the Tie-Update prompt (``LLMTieScorer``) instead of G_theta."""
    tie_transcript_tokens: int = 1024
    """The most transcript (estimated tokens, 4 characters each) one Tie-Update prompt carries: the
    round's lines between the rater and its peers, the earliest left out beyond this bound."""
    n_ctx: int = 4096
    """Embedded model only: context length of the llama.cpp server."""
    endpoints: tuple = ()
    """Several servers (:class:`EndpointConfig`) instead of ``base_url`` / ``model``: requests are
    spread over them, and go to the others when one fails (docs/servers.md)."""
    budget: FrozenDict = field(default_factory=FrozenDict)
    """Limits on what the run may spend: ``requests``, ``prompt_tokens``, ``completion_tokens``,
    ``usd`` (``socialgym.llm.budget``); the run stops at a round boundary before passing one."""
    prices: FrozenDict = field(default_factory=FrozenDict)
    """Model -> ``{prompt, completion}`` in USD per 1M tokens (USD spend, a ``usd`` budget)."""
    allow_plain_http: bool = False
    """Send the key over plain ``http://`` to a server on another machine (every endpoint);
    refused by default, since anyone on the path can read it."""


@dataclass(frozen=True)
class WandbConfig:
    project: str
    entity: str | None = None
    mode: str = "offline"
    tags: tuple[str, ...] = ()
    name: str | None = None
    group: str | None = None
    histograms: bool = True
    sample_posts: int = 10
    graph_every: int = 0


@dataclass(frozen=True)
class LoggingConfig:
    wandb: WandbConfig | None = None
    events: bool = True
    """events.jsonl: every action, vote and tie update."""
    ties: bool = True
    """ties/round_0001.npz, ...: W after every round."""
    transcripts: bool = False
    """transcripts.jsonl: every LLM prompt and reply."""
    network_every: int = 1
    """Compute network.csv's metrics every k rounds (networkx; the last round always)."""
    progress: bool = True
    report: bool = True
    """Build plots/ and report.html when the run completes."""
    decisions: str = "none"
    """decisions/round_0001.npz, ...: what agents saw and chose, for ``socialgym distill``: ``none``,
    ``llm`` (the agents of llm and archetype groups) or ``all``."""


@dataclass(frozen=True)
class RunConfig:
    replicates: int = 1
    backend: str = "local"
    address: str | None = None
    """Ray: an existing cluster's address; None starts a local one."""
    workers: int | None = None
    """Parallel jobs (process pool size, or Ray tasks in flight); None = number of cores."""
    checkpoint: bool = True
    name: str | None = None
    max_fallback_share: float = 0.2
    """LLM runs: when more than this share of LLM tasks (an agent's plan, texts, votes... in one
    round) fell back, the run ends non-zero, with the problem in summary.json and the report
    (its outputs are kept)."""
    snapshots: bool = True
    """Keep each round's checkpoint in snapshots/round_NNNN.pkl (a hard link to the checkpoint
    file when the filesystem allows, else a copy): ``socialgym fork`` and ``socialgym interview``
    start from them."""
    fork_at: int | None = None
    """Sweeps: the first cell's replicate k runs whole; every other cell's replicate k is a fork
    of it after round ``fork_at`` (``socialgym.experiments.run.fork``), so treatment and control share
    everything before the cells' differences take effect. The cells may differ only in what a
    fork can change (interventions, surveys, runtime env parameters, llm/logging/run settings)."""


@dataclass(frozen=True)
class ExperimentConfig:
    seed: int = 0
    env: FrozenDict = field(default_factory=FrozenDict)
    """FeedConfig keywords (validated); ``seed`` and ``obs_format`` are set by the runner."""
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    llm: LLMConfig | None = None
    personas: PersonaConfig = field(default_factory=PersonaConfig)
    logging: LoggingConfig = field(default_factory=LoggingConfig)
    run: RunConfig = field(default_factory=RunConfig)
    sweep: FrozenDict = field(default_factory=FrozenDict)
    """Dotted key -> list of values; the grid of their product, each cell ``run.replicates`` times."""
    interventions: tuple = ()
    """Scheduled interventions (``socialgym.experiments.run.interventions``): frozen mappings, each
    with a kind, its round(s) and its target; applied at the start of their rounds."""
    surveys: tuple = ()
    """Questionnaires put to agents at the end of given rounds (``socialgym.experiments.run.surveys``):
    frozen mappings; answers in surveys.csv and, for free text, interviews.jsonl."""

    # ------------------------------------------------------------------ derived
    def uses_llm(self) -> bool:
        return any(g.kind in LLM_CLIENT_KINDS for g in self.policy_groups()) or bool(self.llm and self.llm.tie_scorer)

    def policy_groups(self) -> tuple[PolicyGroup, ...]:
        """The groups with ``agents`` filled in (one implicit group when none are given)."""
        n = int(self.env.get("n_agents", FeedConfig.n_agents))
        p = self.policy
        groups = p.groups or (PolicyGroup("all", p.kind, n, coach=p.coach, params=p.params),)
        if any(g.agents is None for g in groups):
            groups = tuple(dataclasses.replace(g, agents=c, share=None) for g, c in zip(groups, group_counts(groups, n)))
        return groups

    def default_model(self) -> str | None:
        """The model of every request when the run uses exactly one (prices a usage record that
        names none), else None."""
        models = self.llm_models()
        return models[0] if len(models) == 1 else None

    def llm_models(self) -> tuple[str, ...]:
        """The models this run's requests go to: the endpoints' (``llm.endpoints``), else
        ``llm.model``, else the embedded model's name; () for a run without LLM."""
        if not self.uses_llm():
            return ()
        llm = self.llm or LLMConfig()
        if llm.endpoints:
            return tuple(dict.fromkeys(e.model for e in llm.endpoints))
        if llm.model:
            return (llm.model,)
        if llm.base_url is None:
            from socialgym.llm.local import DEFAULT_ALIAS
            return (DEFAULT_ALIAS,)
        return ()

    def feed_kwargs(self) -> dict:
        """Keywords for ``socialgym.parallel_env`` (without the seed, which the runner sets)."""
        return thaw(self.env)


# ---------------------------------------------------------------------------------- writing
def to_dict(cfg: ExperimentConfig, redact: bool = True) -> dict:
    """Plain data (YAML-ready). ``redact`` drops every secret-looking key (api_key, token, ...;
    :func:`socialgym.llm.sanitize.drop_secrets`)."""
    out = thaw(dataclasses.asdict(cfg))
    if not out["policy"]["groups"]:
        del out["policy"]["groups"]
    for key in ("interventions", "surveys"):
        if not out[key]:
            del out[key]
    return drop_secrets(out) if redact else out


def dump_yaml(cfg: ExperimentConfig, path: str | Path) -> None:
    atomic_write(Path(path), yaml.safe_dump(to_dict(cfg, redact=True), sort_keys=False))


