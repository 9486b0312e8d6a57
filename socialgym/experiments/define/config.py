"""Experiment configuration: a YAML file validated into frozen, typed sections.

    seed: 7
    env: {n_agents: 30, max_rounds: 15, recommender: mf, ties: {half_life: 5}}
    policy: {kind: llm, coach: true}                 # or groups: [{name, kind, agents, ...}]
    llm: {base_url: http://127.0.0.1:8000/v1, model: m, max_concurrency: 32}   # absent: embedded model
    personas: climate-change                         # a file (JSON/CSV), a bundled set, or {source: .., survey: true}
    logging: {wandb: {project: my-study, mode: offline}}
    run: {replicates: 1, backend: local}
    sweep: {env.recommender: [random, mf], policy.coach: [true, false]}

Every section is checked when the file is loaded, so a typo fails before a run starts, with a
one-line :class:`ConfigError` that names the key (``env.n_agnets``) and what is allowed. The
``env`` section is validated by building the environment's own ``FeedConfig``; ``ties:`` and
``rewards:`` sub-sections are spelling aids that flatten into it.

Secrets: an ``llm.api_key`` in the file is accepted but never written back
(:func:`to_dict` with ``redact=True``); the recommended way is ``llm.api_key_env``, the *name*
of an environment variable.

Hostile or broken files fail the same way, fast: the file is read only up to
:data:`MAX_CONFIG_BYTES`, must be UTF-8, and is parsed by a YAML loader that rejects duplicate
keys, more than :data:`MAX_YAML_ALIASES` aliases, recursive aliases, nesting deeper than
:data:`MAX_YAML_DEPTH` and documents that expand to more than :data:`MAX_YAML_NODES` values (a
"billion laughs" file is refused in milliseconds); ``--set`` values go through the same loader.
Every number has a range (NaN and infinities are rejected everywhere), sizes have the upper
limits of ``socialgym.config`` (``MAX_AGENTS`` ...), names are checked against the registries
(recommenders, re-rankers, policies), persona files are loaded and checked, and every sweep cell
is validated — all before a directory is created. Values shown in messages are cut to
:data:`MAX_SHOWN_CHARS` characters and a whole message to :data:`MAX_MESSAGE_CHARS`.
"""

from __future__ import annotations

import dataclasses
import inspect
import itertools
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np
import yaml

from socialgym.agents.persona import PERSONA_SETS
from socialgym.config import MAX_AGENTS, MAX_FEED_SIZE, MAX_ROUNDS, MAX_TEXT_CHARS, MAX_TOPICS, FeedConfig
from socialgym.llm.sanitize import drop_secrets
from socialgym.platform.validation import MAX_SHOWN_CHARS  # noqa: F401 -- documented above
from socialgym.platform.validation import is_int, is_number, show

POLICY_KINDS = ("random", "greedy", "llm", "torch", "topic_users")
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
    "llm.max_concurrency": (1, MAX_WORKERS, False),
    "llm.timeout": (0, 86_400, True),
    "llm.max_retries": (0, 100, False),
    "llm.temperature": (0, 2, False),
    "llm.max_tokens": (1, 1_000_000, False),
    "llm.max_repairs": (0, 100, False),
    "llm.n_ctx": (256, 1_048_576, False),
    "logging.wandb.sample_posts": (0, 10_000, False),
    "logging.wandb.graph_every": (0, MAX_ROUNDS, False),
    "logging.network_every": (1, MAX_ROUNDS, False),
    "run.replicates": (1, MAX_REPLICATES, False),
    "run.workers": (1, MAX_WORKERS, False),
    "run.max_fallback_share": (0, 1, False),
    "run.fork_at": (1, MAX_ROUNDS, False),
}
# string fields with a shorter limit than MAX_STRING_CHARS (wandb's own limits for its fields)
STRING_LIMITS = {"logging.wandb.project": 128, "logging.wandb.entity": 128, "logging.wandb.name": 128,
                 "logging.wandb.group": 128, "logging.wandb.tags": 64, "run.name": 128,
                 "policy.groups[*].name": 64, "llm.api_key_env": 128}
# constructor parameters of recommenders and re-rankers that size arrays or loops
PARAM_LIMITS = {"dim": 4096, "epochs": 1000, "batch_size": 10_000_000, "replay_rounds": MAX_ROUNDS,
                "max_candidates": 1_000_000, "cell_budget": 1_000_000_000, "sample_block": 100_000,
                "max_social_candidates": 1_000_000, "overfetch": 100, "n": MAX_FEED_SIZE,
                "n_head": MAX_TOPICS, "n_tail": MAX_TOPICS, "window": MAX_ROUNDS, "every": MAX_ROUNDS,
                "start_round": MAX_ROUNDS}
# llm policy keywords the runner sets itself
LLM_PARAMS_RESERVED = ("client", "personas", "coach", "coached", "prompts", "seed")


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _one_line(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """Whitespace runs become one space, other unprintable characters are escaped, and the
    result is cut to ``limit`` characters: an error message is always one short line."""
    text = " ".join(text.split())
    if not text.isprintable():
        text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    return text if len(text) <= limit else text[:limit - 1] + "…"


class ConfigError(ValueError):
    """A bad experiment config; the message is one line and names the key (see :func:`_one_line`)."""

    def __init__(self, message: object = "") -> None:
        super().__init__(_one_line(str(message)))


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
    """How many agents; one group may leave it out and take the rest."""
    coach: bool = False
    """LLM groups only: the coach advises these agents (specification §8)."""
    lambdas: Any = None
    """Reward weights of this group's agents: 5 numbers or {SOC: .., ...}; None keeps env.lambdas."""
    params: FrozenDict = field(default_factory=FrozenDict)
    """Constructor keywords of the policy (e.g. ``mention_prob`` for random, ``b`` for greedy,
    ``max_users`` / ``text_chars`` for llm)."""


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
class LLMConfig:
    """An OpenAI-compatible server, or (``base_url`` None) the embedded local model."""

    base_url: str | None = None
    model: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    """Name of the environment variable that holds the key (the key itself is never stored)."""
    api_key: str | None = None
    """Accepted for convenience; removed from every file the run writes."""
    max_concurrency: int = 16
    timeout: float = 60.0
    max_retries: int = 3
    temperature: float = 0.7
    max_tokens: int = 512
    structured: str = "auto"
    max_repairs: int = 3
    cache: bool = True
    """The response cache in DIR/llm_cache.sqlite: a resumed run replays the interrupted round."""
    tie_scorer: bool = False
    """Score tie evidence with the Tie-Update prompt (``LLMTieScorer``) instead of G_theta."""
    n_ctx: int = 4096
    """Embedded model only: context length of the llama.cpp server."""


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
    of it after round ``fork_at`` (``socialgym.experiments.fork``), so treatment and control share
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
    """Scheduled interventions (``socialgym.experiments.interventions``): frozen mappings, each
    with a kind, its round(s) and its target; applied at the start of their rounds."""
    surveys: tuple = ()
    """Questionnaires put to agents at the end of given rounds (``socialgym.experiments.surveys``):
    frozen mappings; answers in surveys.csv and, for free text, interviews.jsonl."""

    # ------------------------------------------------------------------ derived
    def uses_llm(self) -> bool:
        return any(g.kind == "llm" for g in self.policy_groups()) or bool(self.llm and self.llm.tie_scorer)

    def policy_groups(self) -> tuple[PolicyGroup, ...]:
        """The groups with ``agents`` filled in (one implicit group when none are given)."""
        n = int(self.env.get("n_agents", FeedConfig.n_agents))
        p = self.policy
        groups = p.groups or (PolicyGroup("all", p.kind, n, p.coach, None, p.params),)
        missing = [g for g in groups if g.agents is None]
        taken = sum(g.agents for g in groups if g.agents is not None)
        if missing:
            groups = tuple(dataclasses.replace(g, agents=n - taken) if g.agents is None else g for g in groups)
        return groups

    def feed_kwargs(self) -> dict:
        """Keywords for ``socialgym.parallel_env`` (without the seed, which the runner sets)."""
        return thaw(self.env)


# ---------------------------------------------------------------------------------- YAML
class _Loader(yaml.SafeLoader):
    """``yaml.SafeLoader`` with bounds: duplicate keys are errors (not "the last one wins"), at
    most :data:`MAX_YAML_ALIASES` aliases, nesting at most :data:`MAX_YAML_DEPTH` deep, and
    (checked by :func:`_parse_yaml` before anything is constructed) no recursive aliases and at
    most :data:`MAX_YAML_NODES` values after alias expansion."""

    def __init__(self, stream: str, where: str) -> None:
        super().__init__(stream)
        self.where = where
        self.aliases = 0
        self.depth = 0

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            self.aliases += 1
            if self.aliases > MAX_YAML_ALIASES:
                mark = self.peek_event().start_mark
                raise ConfigError(f"{self.where}: more than MAX_YAML_ALIASES = {MAX_YAML_ALIASES} aliases "
                                  f"(*name), the {self.aliases}th at line {mark.line + 1}")
            return super().compose_node(parent, index)
        self.depth += 1
        try:
            if self.depth > MAX_YAML_DEPTH:
                mark = self.peek_event().start_mark
                raise ConfigError(f"{self.where}: nested more than MAX_YAML_DEPTH = {MAX_YAML_DEPTH} levels "
                                  f"deep (line {mark.line + 1})")
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen: dict = {}
            for key_node, _ in node.value:      # explicit keys only: a merge (<<: *base) may be overridden
                if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                line = f"{key_node.start_mark.line + 1}, column {key_node.start_mark.column + 1}"
                try:
                    first = seen.get(key)
                    seen.setdefault(key, line)
                except TypeError:                    # unhashable: the base class reports it
                    continue
                if first is not None:
                    raise ConfigError(f"{self.where}: duplicate key {show(key)} at line {line} (first at "
                                      f"line {first}); a key may appear once in a mapping")
        return super().construct_mapping(node, deep=deep)


def _expanded_size(root) -> int:
    """The number of values the node graph stands for once every alias is expanded (each alias
    counts its whole target again), or a ConfigError on a recursive alias. Iterative: a deep
    chain of aliases cannot exhaust the stack; memoised: a bomb is measured, not expanded."""
    size: dict[int, int] = {}
    open_: set[int] = set()
    stack = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        children = ([c for pair in node.value for c in pair] if isinstance(node, yaml.MappingNode)
                    else list(node.value) if isinstance(node, yaml.SequenceNode) else [])
        if done:
            open_.discard(key)
            size[key] = 1 + sum(size[id(c)] for c in children)
            if size[key] > MAX_YAML_NODES:
                return size[key]
            continue
        if key in size:
            continue
        if key in open_:
            raise ConfigError("a recursive alias (a list or mapping that contains itself)")
        open_.add(key)
        stack.append((node, True))
        for child in children:
            if id(child) in open_:
                raise ConfigError("a recursive alias (a list or mapping that contains itself)")
            if id(child) not in size:
                stack.append((child, False))
    return size[id(root)]


_NOT_READ = object()


def _parse_yaml(text: str, where: str, fallback: Any = _NOT_READ) -> Any:
    """One YAML document through :class:`_Loader`; ``fallback`` is returned instead of raising
    when the text is not valid YAML (``--set`` takes such text as a plain string), but never
    when a bound is exceeded."""
    if len(text) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{where}: {len(text)} characters, more than MAX_CONFIG_BYTES = {MAX_CONFIG_BYTES}")
    loader = None
    try:
        loader = _Loader(text, where)       # the reader already rejects control characters (NUL ...)
        node = loader.get_single_node()
        if node is None:
            return None
        try:
            total = _expanded_size(node)
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc}") from None
        if total > MAX_YAML_NODES:
            raise ConfigError(f"{where}: expands to more than MAX_YAML_NODES = {MAX_YAML_NODES} values "
                              f"({loader.aliases} aliases); is it an alias bomb?")
        return loader.construct_document(node)
    except ConfigError:
        raise
    except yaml.YAMLError as exc:
        if fallback is not _NOT_READ:
            return fallback
        text = " ".join(str(exc).replace('"<unicode string>", ', "").split())
        raise ConfigError(f"{where}: not valid YAML: {_cut(text, 300)}") from None
    except RecursionError:
        raise ConfigError(f"{where}: nested too deeply") from None
    except (ValueError, TypeError, OverflowError) as exc:     # e.g. a date 2024-13-40, a 5000-digit int
        if fallback is not _NOT_READ:
            return fallback
        raise ConfigError(f"{where}: a value cannot be read: {_cut(' '.join(str(exc).split()), 200)}") from None
    finally:
        if loader is not None:
            loader.dispose()


def _read_file(path: Path) -> Any:
    try:
        if not path.exists():
            raise ConfigError(f"config file {show(str(path))} does not exist")
        if not path.is_file():
            raise ConfigError(f"config {show(str(path))} is not a file")
        size = path.stat().st_size
        if size > MAX_CONFIG_BYTES:
            raise ConfigError(f"{path}: {size} bytes, more than MAX_CONFIG_BYTES = {MAX_CONFIG_BYTES}")
        with open(path, "rb") as f:
            data = f.read(MAX_CONFIG_BYTES + 1)
    except (OSError, ValueError) as exc:
        if isinstance(exc, ConfigError):
            raise
        raise ConfigError(f"config file {show(str(path))} cannot be read: {exc}") from None
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{path}: more than MAX_CONFIG_BYTES = {MAX_CONFIG_BYTES} bytes")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {data[exc.start]:#04x} at offset {exc.start}); "
                          "a config is a YAML file saved as UTF-8") from None
    raw = _parse_yaml(text, str(path))
    if raw is None:
        raise ConfigError(f"{path} is empty: a config needs at least one section, e.g. env: {{n_agents: 10}}")
    return raw


def _scan(value: Any, where: str, depth: int = 0, budget: list | None = None) -> None:
    """Every mapping key is a string, every float is finite (NaN and infinities mean nothing in a
    config), nesting and size are bounded (a mapping passed in may contain itself)."""
    budget = [0] if budget is None else budget
    budget[0] += 1
    if budget[0] > MAX_YAML_NODES:
        raise ConfigError(f"the config holds more than MAX_YAML_NODES = {MAX_YAML_NODES} values")
    if depth > MAX_YAML_DEPTH:
        raise ConfigError(f"{where or 'the config'}: nested more than MAX_YAML_DEPTH = {MAX_YAML_DEPTH} levels")
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ConfigError(f"{where or 'the config'}: key {show(key)} must be a string")
            _scan(item, f"{where}.{key}" if where else key, depth + 1, budget)
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _scan(item, f"{where}[{i}]", depth + 1, budget)
    elif isinstance(value, (float, np.floating)):
        if not math.isfinite(value):
            raise ConfigError(f"{where} must be a finite number, got {value}")
    elif isinstance(value, np.ndarray) and value.dtype.kind in "fc" and not np.all(np.isfinite(value)):
        raise ConfigError(f"{where} must hold finite numbers only")


# ---------------------------------------------------------------------------------- loading
def load_config(source: str | Path | Mapping, overrides: Iterable[str] = ()) -> ExperimentConfig:
    """Read YAML (a path, or an already-parsed mapping), apply ``key.path=value`` overrides,
    validate. Relative paths inside the file (``personas``) are resolved against its folder.
    Every problem is a one-line :class:`ConfigError`, raised before anything is written."""
    base = None
    if isinstance(source, Mapping):
        _scan(source, "")
        raw = thaw(source)
    else:
        if not isinstance(source, (str, Path)):
            raise ConfigError(f"a config is a path or a mapping, got {type(source).__name__}")
        path = Path(source)
        raw = _read_file(path)
        base = path.parent
    if not isinstance(raw, dict):
        raise ConfigError(f"the config must be a mapping of sections, got {type(raw).__name__} {show(raw)}")
    if isinstance(overrides, str):
        overrides = [overrides]
    for item in overrides:
        apply_override(raw, item)
    if base is not None:
        _resolve_persona_paths(raw, base)
    return from_dict(raw)


def _resolve_persona_paths(raw: dict, base: Path) -> None:
    """Persona files named relative to the config file, also in the sweep, become absolute."""
    def fix(source: Any) -> Any:
        if not isinstance(source, str) or not source.strip() or source in PERSONA_SETS:
            return source
        try:
            return source if Path(source).is_absolute() else str((base / source).resolve())
        except (OSError, ValueError, RuntimeError):      # e.g. a NUL byte: reported by the check
            return source

    def fix_section(value: Any) -> Any:
        if isinstance(value, dict) and "source" in value:
            return {**value, "source": fix(value["source"])}
        return fix(value)

    raw_personas = raw.get("personas")
    if raw_personas is not None:
        raw["personas"] = fix_section(raw_personas)
    sweep = raw.get("sweep")
    if isinstance(sweep, dict):
        for key in ("personas", "personas.source"):
            if isinstance(sweep.get(key), list):
                sweep[key] = [fix_section(v) if key == "personas" else fix(v) for v in sweep[key]]


def apply_override(raw: dict, item: str) -> None:
    """``env.n_agents=50`` -> raw["env"]["n_agents"] = 50 (the value is read as YAML, with the
    file's bounds; text that is not YAML is taken as a string)."""
    if not isinstance(item, str) or "=" not in item:
        raise ConfigError(f"--set expects key.path=value, got {show(item)}")
    key, text = item.split("=", 1)
    what = f"--set {_one_line(key.strip(), 60)}"
    value = _parse_yaml(text, what, fallback=text)
    _set_path(raw, key, value, what)


def _set_path(raw: dict, key: str, value: Any, what: str) -> None:
    parts = [p for p in key.strip().split(".") if p]
    if not parts or any(not p.strip() for p in parts):
        raise ConfigError(f"{what}: expected a dotted key such as env.n_agents, got {show(key)}")
    node = raw
    for i, part in enumerate(parts[:-1]):
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        if not isinstance(child, dict):
            raise ConfigError(f"{what}: {'.'.join(parts[:i + 1])} is not a section")
        node = child
    node[parts[-1]] = value


# sections that are mappings; a null one is a mistake (an empty ``env:`` line), except ``llm``,
# whose null means "no LLM settings" (to_dict writes it so)
MAPPING_SECTIONS = ("env", "policy", "logging", "run", "sweep", "personas")


def from_dict(raw: Mapping) -> ExperimentConfig:
    if not isinstance(raw, Mapping):
        raise ConfigError(f"the config must be a mapping of sections, got {type(raw).__name__} {show(raw)}")
    _scan(raw, "")
    raw = dict(raw)
    _known("", raw, [f.name for f in dataclasses.fields(ExperimentConfig)])
    for key in (*MAPPING_SECTIONS, "seed"):
        if key in raw and raw[key] is None:
            raise ConfigError(f"{key} is empty (null): give it {'a value' if key == 'seed' else 'keys'} "
                              "or remove the line")
    seed = raw.get("seed", 0)
    if not is_int(seed, numpy=False) or not 0 <= seed <= MAX_SEED:
        raise ConfigError(f"seed must be an integer in [0, {MAX_SEED}] (non-negative), got {show(seed)}")
    env = _env(raw.get("env", {}))
    policy = _policy(raw.get("policy", {}))
    llm = _section("llm", LLMConfig, raw["llm"]) if raw.get("llm") is not None else None
    logging = _logging(raw.get("logging", {}))
    run = _section("run", RunConfig, raw.get("run", {}))
    personas = raw.get("personas")
    if personas is None or isinstance(personas, str):
        personas = PersonaConfig(source=_typed("personas", "str | None", personas))
    elif isinstance(personas, Mapping):
        personas = _section("personas", PersonaConfig, personas)
    else:
        raise ConfigError(f"personas must be a file path, a bundled set ({', '.join(PERSONA_SETS)}) or a "
                          f"mapping {{source, survey}}, got {show(personas)}")
    sweep = _sweep(raw.get("sweep", {}))
    cfg = ExperimentConfig(seed, env, policy, llm, personas, logging, run, sweep)
    _check(cfg)
    if raw.get("interventions") is not None:
        cfg = dataclasses.replace(cfg, interventions=_interventions(cfg, raw["interventions"]))
    if raw.get("surveys") is not None:
        cfg = dataclasses.replace(cfg, surveys=_surveys(cfg, raw["surveys"]))
    _check_env_objects(cfg)
    _check_policy_params(cfg)
    _check_personas(cfg)
    cells = [with_values(cfg, a) if a else cfg for a in grid(cfg)]   # every cell must be a valid config too
    if cfg.run.fork_at is not None:
        _check_forks(cfg, cells)
    return cfg


def _check_forks(cfg: ExperimentConfig, cells: list) -> None:
    """``run.fork_at``: before the last round, and every cell a possible fork of the first."""
    max_rounds = int(cfg.env.get("max_rounds", FeedConfig.max_rounds))
    if not 1 <= cfg.run.fork_at < max_rounds:
        raise ConfigError(f"run.fork_at must lie in [1, {max_rounds - 1}] (env.max_rounds is {max_rounds}), "
                          f"got {cfg.run.fork_at}")
    if not cfg.run.checkpoint or not cfg.run.snapshots:
        raise ConfigError("run.fork_at needs run.checkpoint and run.snapshots on (forks start from a snapshot)")
    if cfg.llm is not None and cfg.llm.api_key:
        raise ConfigError("run.fork_at: an inline llm.api_key is never written to disk, so the forks could not "
                          "use it; put the key in the environment variable named by llm.api_key_env")
    if len(cells) > 1:
        for assignment, cell in zip(grid(cfg)[1:], cells[1:]):
            try:
                fork_config(cells[0], cell, cfg.run.fork_at)
            except ConfigError as exc:
                raise ConfigError(f"run.fork_at: cell {show(dict(thaw(assignment)), 50)}: {exc}") from None


def _interventions(cfg: ExperimentConfig, raw: Any) -> tuple:
    from socialgym.experiments.interventions import InterventionError, check_interventions

    agents, groups, llm_agents = _group_members(cfg)
    try:
        specs = check_interventions(raw, max_rounds=int(cfg.env.get("max_rounds", FeedConfig.max_rounds)),
                                    agents=agents, groups=groups,
                                    agent_interests=cfg.env.get("agent_interests") is not None,
                                    llm_agents=llm_agents)
    except InterventionError as exc:
        raise ConfigError(str(exc)) from None
    return tuple(freeze(s) for s in specs)


def _group_members(cfg: ExperimentConfig) -> tuple[list[str], dict, list[str]]:
    """The agent ids, policy group name -> its ids (named groups only), and the llm agents."""
    n = int(cfg.env.get("n_agents", FeedConfig.n_agents))
    agents = [f"agent_{i}" for i in range(n)]
    groups, llm_agents, start = {}, [], 0
    for g in cfg.policy_groups():
        if cfg.policy.groups:
            groups[g.name] = agents[start:start + g.agents]
        if g.kind == "llm":
            llm_agents += agents[start:start + g.agents]
        start += g.agents
    return agents, groups, llm_agents


def _surveys(cfg: ExperimentConfig, raw: Any) -> tuple:
    from socialgym.experiments.surveys import SurveyError, check_surveys

    agents, groups, _ = _group_members(cfg)
    try:
        specs = check_surveys(raw, max_rounds=int(cfg.env.get("max_rounds", FeedConfig.max_rounds)),
                              agents=agents, groups=groups)
    except SurveyError as exc:
        raise ConfigError(str(exc)) from None
    return tuple(freeze(s) for s in specs)


def _known(where: str, raw: Mapping, allowed: Iterable[str]) -> None:
    allowed = list(allowed)
    for key in raw:
        if key not in allowed:
            name = f"{where}.{key}" if where else str(key)
            raise ConfigError(f"unknown key {show(name)}; allowed{' in ' + where if where else ''}: "
                              f"{', '.join(allowed)}")


def _section(where: str, cls, raw: Any, table: str | None = None):
    """``raw`` checked against the dataclass ``cls``: known keys, types, ranges (``RANGES`` and
    ``STRING_LIMITS`` under ``table``, default ``where``)."""
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where} must be a mapping, got {show(raw)}")
    table = table or where
    fields = {f.name: f for f in dataclasses.fields(cls)}
    _known(where, raw, fields)
    hints = {f.name: f.type for f in fields.values()}
    values = {}
    for key, value in raw.items():
        values[key] = _typed(f"{where}.{key}", hints[key], value, f"{table}.{key}")
    required = [f.name for f in fields.values()
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    for key in required:
        if key not in values:
            raise ConfigError(f"{where}.{key} is required")
    try:
        return cls(**values)
    except TypeError as exc:
        raise ConfigError(f"{where}: {exc}") from None


def _typed(name: str, hint: str, value: Any, table: str | None = None) -> Any:
    """Check a value against the field's annotation (written as a string: PEP 563) and, under
    the key ``table`` (default ``name``), its range or length limit."""
    table = table or name
    optional = "None" in hint or hint == "Any"
    if value is None:
        if optional:
            return None
        raise ConfigError(f"{name} may not be null")
    base = hint.replace(" | None", "").strip()
    if base == "bool":
        if not isinstance(value, bool):
            raise ConfigError(f"{name} must be true or false, got {show(value)}")
    elif base == "int":
        if not is_int(value, numpy=False):
            raise ConfigError(f"{name} must be an integer, got {show(value)}")
        _in_range(name, table, value, "an integer")
    elif base == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{name} must be a number, got {show(value)}")
        if not math.isfinite(value):
            raise ConfigError(f"{name} must be a finite number, got {value}")
        value = float(value)
        _in_range(name, table, value, "a number")
    elif base == "str":
        _string(name, table, value)
    elif base.startswith("tuple"):
        if isinstance(value, str) or not isinstance(value, (list, tuple)):
            raise ConfigError(f"{name} must be a list, got {show(value)}")
        if base == "tuple[str, ...]":
            for i, item in enumerate(value):
                _string(f"{name}[{i}]", table, item)
        value = tuple(value)
    elif base == "FrozenDict":
        if not isinstance(value, Mapping):
            raise ConfigError(f"{name} must be a mapping, got {show(value)}")
        value = freeze(value)
    return value


def _in_range(name: str, table: str, value: float, what: str) -> None:
    if table not in RANGES:
        return
    low, high, low_open = RANGES[table]
    if not (value > low if low_open else value >= low) or value > high:
        raise ConfigError(f"{name} must be {what} {'>' if low_open else '>='} {low} and <= {high}, got {show(value)}")


def _string(name: str, table: str, value: Any) -> None:
    if not isinstance(value, str):
        raise ConfigError(f"{name} must be a string, got {show(value)}")
    if not value.strip():
        raise ConfigError(f"{name} must not be empty")
    limit = STRING_LIMITS.get(table, MAX_STRING_CHARS)
    if len(value) > limit:
        raise ConfigError(f"{name} has {len(value)} characters, more than {limit}: {show(value)}")
    if not value.isprintable():
        raise ConfigError(f"{name} contains a control character: {show(value)}")


def _env(raw: Any) -> FrozenDict:
    if not isinstance(raw, Mapping):
        raise ConfigError(f"env must be a mapping, got {show(raw)}")
    allowed = [f.name for f in dataclasses.fields(FeedConfig) if f.name not in ENV_RESERVED]
    flat: dict = {}
    origin: dict[str, str] = {}
    for key, value in raw.items():
        if key in ENV_GROUPS:
            if not isinstance(value, Mapping):
                raise ConfigError(f"env.{key} must be a mapping, got {show(value)}")
            _known(f"env.{key}", value, ENV_GROUPS[key])
            for sub, v in value.items():
                if sub in flat:
                    raise ConfigError(f"env.{key}.{sub}: {sub} is set twice (also as {origin[sub]})")
                flat[sub], origin[sub] = v, f"env.{key}.{sub}"
        elif key in ENV_RESERVED:
            where = "the top-level seed" if key == "seed" else "the policy kind"
            raise ConfigError(f"env.{key} is set by the runner from {where}; remove it from env")
        else:
            if key not in allowed:
                raise ConfigError(f"unknown key {show('env.' + str(key))}; allowed in env: "
                                  f"{', '.join(allowed + list(ENV_GROUPS))}")
            if key in flat:
                raise ConfigError(f"env.{key} is set twice (also as {origin[key]})")
            flat[key], origin[key] = value, f"env.{key}"
    try:
        feed = FeedConfig.from_kwargs(**flat)
    except (TypeError, ValueError) as exc:
        raise ConfigError(_env_message(str(exc), origin)) from None
    except Exception as exc:                        # noqa: BLE001 -- e.g. numpy on a strange shape
        raise ConfigError(_env_message(f"{type(exc).__name__}: {exc}", origin)) from None
    if not feed.topics:
        raise ConfigError("env.topics must not be empty: scripted and trained agents post on these topics")
    return freeze(flat)


def _env_message(message: str, origin: Mapping[str, str]) -> str:
    """FeedConfig's message with its key replaced by where it was written (env.ties.xi ...)."""
    message = " ".join(message.split())
    for key, where in sorted(origin.items(), key=lambda kv: -len(kv[0])):
        if message.startswith(key):
            return where + message[len(key):]
    return f"env: {message}"


def _policy(raw: Any) -> PolicyConfig:
    if not isinstance(raw, Mapping):
        raise ConfigError(f"policy must be a mapping, got {show(raw)}")
    raw = dict(raw)
    if "groups" in raw and raw["groups"] is None:
        raise ConfigError("policy.groups is empty (null): list the groups or remove the line")
    groups_raw = raw.pop("groups", None)
    policy = _section("policy", PolicyConfig, raw)
    groups = []
    if groups_raw is not None:
        if isinstance(groups_raw, (str, Mapping)) or not isinstance(groups_raw, (list, tuple)) or not groups_raw:
            raise ConfigError(f"policy.groups must be a non-empty list of groups, got {show(groups_raw)}")
        if len(groups_raw) > MAX_AGENTS:
            raise ConfigError(f"policy.groups has {len(groups_raw)} groups, more than MAX_AGENTS = {MAX_AGENTS}")
        for i, g in enumerate(groups_raw):
            if not isinstance(g, Mapping):
                raise ConfigError(f"policy.groups[{i}] must be a mapping, got {show(g)}")
            g = {"kind": policy.kind, "params": policy.params, **g}
            if "coach" not in g:         # the default coach setting applies to LLM groups only
                g["coach"] = policy.coach and g["kind"] == "llm"
            if "name" not in g:
                g["name"] = f"group_{i}"
            groups.append(_section(f"policy.groups[{i}]", PolicyGroup, g, table="policy.groups[*]"))
    return dataclasses.replace(policy, groups=tuple(groups))


def _logging(raw: Any) -> LoggingConfig:
    if not isinstance(raw, Mapping):
        raise ConfigError(f"logging must be a mapping, got {show(raw)}")
    raw = dict(raw)
    wandb = raw.pop("wandb", None)
    out = _section("logging", LoggingConfig, raw)
    if wandb is not None:
        out = dataclasses.replace(out, wandb=wandb_section(wandb))
    return out


def wandb_section(raw: Any) -> WandbConfig:
    """The ``logging.wandb`` section, checked: the one check of these settings, also made by
    :class:`~socialgym.experiments.wandb_log.WandbLogger` on the settings it is given."""
    where = "logging.wandb"
    if isinstance(raw, Mapping):
        allowed = [f.name for f in dataclasses.fields(WandbConfig)]
        unknown = [k for k in raw if k not in allowed]
        if unknown:
            raise ConfigError(f"{where}: unknown key(s) {', '.join(show(k) for k in unknown)}; "
                              f"allowed: {', '.join(allowed)}")
        project = raw.get("project")
        if project is None or isinstance(project, str) and not project.strip():
            raise ConfigError(f"{where}.project is required (a non-empty string)")
    out = _section(where, WandbConfig, raw)
    if out.mode not in WANDB_MODES:
        raise ConfigError(f"{where}.mode must be one of {', '.join(WANDB_MODES)}, got {show(out.mode)}")
    return out


def _sweep(raw: Any) -> FrozenDict:
    if not isinstance(raw, Mapping):
        raise ConfigError(f"sweep must be a mapping of dotted keys to lists of values, got {show(raw)}")
    cells = 1
    for key, values in raw.items():
        if not isinstance(key, str) or "." not in key and key not in ("seed", "interventions", "surveys"):
            raise ConfigError(f"sweep key {show(key)} must be a dotted config path such as env.recommender")
        parts = key.split(".")
        if any(not p.strip() for p in parts):
            raise ConfigError(f"sweep key {show(key)} must be a dotted config path such as env.recommender")
        if parts[0] in ("sweep", "run"):
            raise ConfigError(f"sweep.{key}: the run and sweep sections cannot be swept")
        if isinstance(values, (str, Mapping)) or not isinstance(values, (list, tuple)) or not values:
            raise ConfigError(f"sweep.{key} must be a non-empty list of values, got {show(values)}")
        cells *= len(values)
        if cells > MAX_SWEEP_CELLS:
            raise ConfigError(f"sweep: the grid has more than MAX_SWEEP_CELLS = {MAX_SWEEP_CELLS} cells "
                              f"(the product of the lists' lengths, up to sweep.{key})")
    return freeze(raw)


def _check(cfg: ExperimentConfig) -> None:
    """Cross-section rules."""
    if cfg.personas.survey and not any(g.kind == "llm" for g in cfg.policy_groups()):
        raise ConfigError("personas.survey: the Mini-IPIP survey is given to llm agents; this run has none")
    n = int(cfg.env.get("n_agents", FeedConfig.n_agents))
    p = cfg.policy
    kinds = [p.kind] + [g.kind for g in p.groups]
    for i, kind in enumerate(kinds):
        if kind not in POLICY_KINDS:
            where = "policy.kind" if i == 0 else f"policy.groups[{i - 1}].kind"
            raise ConfigError(f"{where} must be one of {', '.join(POLICY_KINDS)}, got {show(kind)}")
    if p.groups:
        names = [g.name for g in p.groups]
        if len(set(names)) != len(names):
            twice = sorted({x for x in names if names.count(x) > 1})
            raise ConfigError(f"policy.groups: names must be unique, {show(twice)} appear more than once")
        if sum(g.agents is None for g in p.groups) > 1:
            raise ConfigError("policy.groups: at most one group may leave out 'agents' (it takes the rest)")
        for i, g in enumerate(p.groups):
            if g.agents is not None and g.agents < 1:
                raise ConfigError(f"policy.groups[{i}].agents must be >= 1, got {g.agents}")
            if g.coach and g.kind != "llm":
                raise ConfigError(f"policy.groups[{i}].coach: only llm agents can be coached")
            if g.lambdas is not None:
                try:
                    FeedConfig.from_kwargs(n_agents=2, lambdas=g.lambdas)
                except (TypeError, ValueError) as exc:
                    raise ConfigError(f"policy.groups[{i}].lambdas: {exc}") from None
        taken = sum(g.agents or 0 for g in p.groups)
        if (taken != n and all(g.agents is not None for g in p.groups)) or taken > n \
                or (taken == n and any(g.agents is None for g in p.groups)):
            raise ConfigError(f"policy.groups: the groups' agents must add up to env.n_agents = {n}, got {taken}")
    elif p.coach and p.kind != "llm":
        raise ConfigError("policy.coach: only llm agents can be coached (policy.kind is "
                          f"{show(p.kind)})")
    if cfg.llm is not None:
        if cfg.llm.base_url is not None:
            if not re.match(r"https?://[^\s/?#]+", cfg.llm.base_url):
                raise ConfigError(f"llm.base_url must be an http:// or https:// URL, got {show(cfg.llm.base_url)}")
            if not cfg.llm.model:
                raise ConfigError("llm.model is required with llm.base_url")
        if cfg.llm.structured not in STRUCTURED_MODES:
            raise ConfigError(f"llm.structured must be one of {', '.join(STRUCTURED_MODES)}, "
                              f"got {show(cfg.llm.structured)}")
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", cfg.llm.api_key_env):
            raise ConfigError(f"llm.api_key_env is the name of an environment variable (letters, digits, _), "
                              f"got {show(cfg.llm.api_key_env)}")
    if cfg.run.backend not in BACKENDS:
        raise ConfigError(f"run.backend must be one of {', '.join(BACKENDS)}, got {show(cfg.run.backend)}")
    if cfg.seed + cfg.run.replicates - 1 > MAX_SEED:
        raise ConfigError(f"seed + run.replicates - 1 = {cfg.seed + cfg.run.replicates - 1} (the last replicate's "
                          f"seed) is more than {MAX_SEED}")
    cells = math.prod(len(v) for v in cfg.sweep.values()) if cfg.sweep else 1
    if cells * cfg.run.replicates > MAX_JOBS:
        raise ConfigError(f"run.replicates: {cells} sweep cells x {cfg.run.replicates} replicates = "
                          f"{cells * cfg.run.replicates} runs, more than MAX_JOBS = {MAX_JOBS}")
    if cfg.env.get("tie_scorer") is not None and cfg.llm is not None and cfg.llm.tie_scorer:
        raise ConfigError("set either env.ties.tie_scorer or llm.tie_scorer, not both")
    if "lambdas" in cfg.env and any(g.lambdas is not None for g in p.groups):
        raise ConfigError("set either env.rewards.lambdas or policy.groups[*].lambdas, not both")


def _env_key(cfg: ExperimentConfig, key: str) -> str:
    """Where an env key was written (``env.ties.tie_scorer`` or ``env.tie_scorer``)."""
    for group, keys in ENV_GROUPS.items():
        if key in keys:
            return f"env.{group}.{key}"
    return f"env.{key}"


def _check_env_objects(cfg: ExperimentConfig) -> None:
    """Build what the environment will build from names — the recommender with its parameters
    and its re-ranking wrappers — so that an unknown parameter or a bad value fails now."""
    from socialgym.recommenders import Reranker, apply_reranking, make_recommender

    env = FeedConfig.from_kwargs(**thaw(cfg.env))
    n = env.n_agents
    kwargs = dict(env.recommender_kwargs)
    _param_limits("env.recommender_kwargs", kwargs)
    for i, step in enumerate(env.rerank):
        if isinstance(step, Mapping):
            _param_limits(f"env.rerank[{i}]", step)
    try:
        recommender = make_recommender(env.recommender, **kwargs)
    except ImportError as exc:
        raise ConfigError(f"env.recommender {show(env.recommender)}: {exc}") from None
    except Exception as exc:                        # noqa: BLE001 -- any constructor complaint
        raise ConfigError(f"env.recommender_kwargs: {_exc_text(exc)}") from None
    for i, step in enumerate(env.rerank):
        if not isinstance(step, Mapping):       # a user's callable: not called before the run
            continue
        try:
            recommender = apply_reranking(recommender, [thaw(step)])
        except Exception as exc:                    # noqa: BLE001
            raise ConfigError(f"env.rerank[{i}]: {_exc_text(exc)}") from None
        codes = getattr(recommender, "stance_codes", None)
        if isinstance(recommender, Reranker) and codes is not None and len(codes) != n:
            raise ConfigError(f"env.rerank[{i}].stances has {len(codes)} labels for env.n_agents = {n} agents")
    ts = env.tie_scorer
    if isinstance(ts, Mapping):
        where = _env_key(cfg, "tie_scorer")
        spec = dict(ts)
        kind = spec.pop("kind")
        if kind == "logistic":
            try:
                FeedConfig.from_kwargs(evidence_weights=spec)
            except (TypeError, ValueError) as exc:
                raise ConfigError(f"{where}: {exc}") from None
        else:
            raise ConfigError(f"{where}: kind 'llm' builds its own client here; use llm.tie_scorer: true, "
                              "which scores ties through the run's model")


def _param_limits(where: str, params: Mapping) -> None:
    for key, limit in PARAM_LIMITS.items():
        value = params.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > limit:
            raise ConfigError(f"{where}.{key} must be at most {limit}, got {show(value)}")


def _exc_text(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    known = (TypeError, ValueError, OSError, ImportError)
    return text if isinstance(exc, known) and text else f"{type(exc).__name__}: {text}"


def _check_policy_params(cfg: ExperimentConfig) -> None:
    """The constructor keywords of each group's policy, as the runner will pass them."""
    from socialgym.baselines import GreedyPolicy, RandomPolicy

    groups = cfg.policy_groups()
    llm_params: dict = {}
    llm_where = "policy.params"
    for i, g in enumerate(groups):
        where = f"policy.groups[{i}].params" if cfg.policy.groups else "policy.params"
        params = thaw(g.params)
        if g.kind in ("random", "greedy"):
            cls = RandomPolicy if g.kind == "random" else GreedyPolicy
            try:
                inspect.signature(cls).bind(**{"seed": 0, **params})
            except TypeError as exc:
                allowed = ", ".join(inspect.signature(cls).parameters)
                raise ConfigError(f"{where}: {exc}; a {g.kind} policy takes {allowed}") from None
            seed = params.get("seed")
            if seed is not None and (not is_int(seed, numpy=False) or not 0 <= seed <= MAX_SEED):
                raise ConfigError(f"{where}.seed must be an integer in [0, {MAX_SEED}], got {show(seed)}")
            for name in ("mention_prob", "b"):
                if name in params:
                    value = params[name]
                    if not is_number(value, numpy=False) or not 0 <= value <= 1:
                        raise ConfigError(f"{where}.{name} must be a number in [0, 1], got {show(value)}")
        elif g.kind == "topic_users":
            from socialgym.baselines.topic_users import TopicUsers
            if cfg.env.get("agent_interests") is None:
                raise ConfigError(f"policy.groups[{i}]: topic_users agents need env.agent_interests (one topic "
                                  "per agent, or an (n, K) preference matrix): their topic preferences"
                                  if cfg.policy.groups else "policy: topic_users agents need env.agent_interests "
                                  "(one topic per agent, or an (n, K) preference matrix): their topic preferences")
            taken = {"preferences", "layout", "n_agents", "agent_ids", "n_topics", "interests_per_agent"}
            allowed = [k for k in inspect.signature(TopicUsers).parameters if k not in taken] + ["concentration"]
            unknown = sorted(set(params) - set(allowed))
            if unknown:
                raise ConfigError(f"{where}: unknown parameter {unknown[0]!r}; a topic_users policy takes "
                                  f"{', '.join(dict.fromkeys(allowed))}")
            try:
                TopicUsers.from_interests(cfg.env["agent_interests"],
                                          cfg.env.get("topics", FeedConfig.topics), **{"seed": 0, **params})
            except (TypeError, ValueError) as exc:
                raise ConfigError(f"{where}: {exc}") from None
        elif g.kind == "torch":
            path = params.get("path")
            if not isinstance(path, str) or not path.strip():
                raise ConfigError(f"{where}.path must name a trained model file (model.pt), got {show(path)}")
            try:
                exists = Path(path).is_file()
            except (OSError, ValueError):
                exists = False
            if not exists:
                raise ConfigError(f"{where}.path: {show(path)} is not a file")
        elif g.kind == "llm":
            llm_params.update(params)
            llm_where = where
    if not llm_params:
        return
    reserved = sorted(set(llm_params) & set(LLM_PARAMS_RESERVED))
    if reserved:
        raise ConfigError(f"{llm_where}: {', '.join(reserved)} {'is' if len(reserved) == 1 else 'are'} set by the runner")
    for name in ("plan_tokens", "vote_tokens", "text_tokens"):
        value = llm_params.get(name)
        if value is not None and (not is_int(value, numpy=False) or not 1 <= value <= 1_000_000):
            raise ConfigError(f"{llm_where}.{name} must be null or an integer in [1, 1000000], got {show(value)}")
    if "new_topics" in llm_params and not isinstance(llm_params["new_topics"], bool):
        raise ConfigError(f"{llm_where}.new_topics must be true or false, got {show(llm_params['new_topics'])}")
    for name in ("item_chars", "text_chars"):
        value = llm_params.get(name)
        if is_int(value, numpy=False) and value > MAX_TEXT_CHARS:
            raise ConfigError(f"{llm_where}.{name} must be at most MAX_TEXT_CHARS = {MAX_TEXT_CHARS}, got {value}")
    try:
        from socialgym.agents.llm_policy import LLMPolicy
    except ImportError:                             # the llm extra is missing: the runner says so
        return
    try:
        LLMPolicy(None, {}, coach=None, coached=[], seed=0, **llm_params)
    except Exception as exc:                        # noqa: BLE001 -- any constructor complaint
        raise ConfigError(f"{llm_where}: {_exc_text(exc)}") from None


_PERSONA_CACHE: dict = {}


def _check_personas(cfg: ExperimentConfig) -> None:
    """Load the persona source now (the runner loads it again): a missing file, a bad field or
    too few personas for the agents is a config error, not a crash in round 0."""
    source = cfg.personas.source
    if source is None:
        return
    from socialgym.agents.persona import load_personas

    try:
        key = source if source in PERSONA_SETS else (str(Path(source)), Path(source).stat().st_mtime_ns,
                                                     Path(source).stat().st_size)
    except (OSError, ValueError):
        key = None
    personas = _PERSONA_CACHE.get(key) if key is not None else None
    if personas is None:
        try:
            personas = load_personas(source)
        except (OSError, ValueError, RecursionError, MemoryError) as exc:
            raise ConfigError(f"personas.source: {_exc_text(exc)}") from None
        if key is not None:
            if len(_PERSONA_CACHE) > 32:
                _PERSONA_CACHE.clear()
            _PERSONA_CACHE[key] = personas
    n = int(cfg.env.get("n_agents", FeedConfig.n_agents))
    if len(personas) < n:
        raise ConfigError(f"personas.source: {show(source)} has {len(personas)} personas for "
                          f"env.n_agents = {n} agents")


# ---------------------------------------------------------------------------------- sweeps
def grid(cfg: ExperimentConfig) -> list[dict]:
    """The sweep's cells as {dotted key: value} (one empty cell without a sweep)."""
    if not cfg.sweep:
        return [{}]
    keys = list(cfg.sweep)
    return [dict(zip(keys, combo)) for combo in itertools.product(*(cfg.sweep[k] for k in keys))]


def with_values(cfg: ExperimentConfig, assignment: Mapping[str, Any]) -> ExperimentConfig:
    """The config of one sweep cell (re-validated, without the sweep section)."""
    raw = to_dict(cfg, redact=False)
    raw.pop("sweep", None)
    try:
        for key, value in assignment.items():
            value = thaw(value)
            _set_path(raw, key, value, f"sweep key {show(key)}")
            if key == "policy.coach":       # groups take policy.coach as their default: a swept value reaches
                for group in raw["policy"].get("groups") or []:      # every llm group (to_dict wrote it out)
                    if group.get("kind", "llm") == "llm":
                        group["coach"] = value
        return from_dict(raw)
    except ConfigError as exc:
        raise ConfigError(f"sweep cell {show(dict(thaw(assignment)), 160)}: {exc}") from None


# ---------------------------------------------------------------------------------- forks
FORK_RUNTIME_ENV = ("half_life", "xi", "delta_max", "b_rec")          # FeedEnv.RUNTIME_PARAMS
FORK_RECOMMENDER_ENV = ("recommender", "recommender_kwargs", "rerank")
FORK_TAKES_EFFECT = ("llm", "logging", "run")
FORK_SCHEDULED = ("interventions", "surveys")


def fork_config(base: ExperimentConfig, target: ExperimentConfig, at_round: int) -> tuple[ExperimentConfig, list]:
    """The config a fork after round ``at_round`` runs with: ``base`` (the config rounds 1..t ran
    with) changed towards ``target``. Returns it and the list of changes, each a short text.
    Raises :class:`ConfigError` naming a key that a fork cannot change."""
    max_rounds = _fork_max_rounds(base)
    if not 1 <= at_round < max_rounds:
        raise ConfigError(f"--at-round must lie in [1, {max_rounds - 1}] (env.max_rounds is {max_rounds}: a fork "
                          f"continues from the state after that round), got {at_round}")
    old, new = to_dict(base), to_dict(target)         # redacted: a key is no change, and never printed
    old.pop("sweep", None)
    new.pop("sweep", None)
    out = {k: v for k, v in old.items()}
    changes: list[str] = []
    later: list[dict] = []                                          # interventions at t+1
    if bool((old.get("llm") or {}).get("tie_scorer")) != bool((new.get("llm") or {}).get("tie_scorer")):
        raise ConfigError(_fork_cannot("llm.tie_scorer", at_round))        # the env's scorer is in the snapshot
    for key in ("events", "ties", "transcripts"):     # the fork continues the original's files
        if (old.get("logging") or {}).get(key) != (new.get("logging") or {}).get(key):
            raise ConfigError(_fork_cannot(f"logging.{key}", at_round))
    for section in FORK_TAKES_EFFECT:
        if old.get(section) != new.get(section):
            out[section] = new.get(section)
            changes += [f"{k}: {_fork_short(a)} -> {_fork_short(b)}"
                        for k, a, b in _fork_diff(old.get(section), new.get(section), section)]
    first = at_round + 1
    for key in FORK_SCHEDULED:
        before, after = old.get(key) or [], new.get(key) or []
        if _fork_past(before, at_round, max_rounds) != _fork_past(after, at_round, max_rounds):
            raise ConfigError(f"{key}: the fork changes {key} of rounds <= {at_round}, which already happened "
                              f"before the fork; change only rounds >= {first}")
        if before != after:
            out[key] = after
            changes.append(f"{key}: {len(before)} -> {len(after)} entries")
    env_old, env_new = dict(old.get("env") or {}), dict(new.get("env") or {})
    for key in sorted(set(env_old) | set(env_new)):
        if env_old.get(key) == env_new.get(key) or key in FORK_RECOMMENDER_ENV:
            continue
        if key not in FORK_RUNTIME_ENV:
            raise ConfigError(_fork_cannot(f"env.{key}", at_round))
        later.append({"kind": "param", "at_round": first, "name": key, "value": env_new.get(key, _fork_default(key))})
        changes.append(f"env.{key}: {_fork_short(env_old.get(key, _fork_default(key)))} -> "
                       f"{_fork_short(env_new.get(key))} from round {first}")
    model_old = (env_old.get("recommender", FeedConfig.recommender), env_old.get("recommender_kwargs") or {})
    model_new = (env_new.get("recommender", FeedConfig.recommender), env_new.get("recommender_kwargs") or {})
    if model_old != model_new:          # another model: it starts afresh (a recommender intervention)
        spec = {"kind": "recommender", "at_round": first, "recommender": model_new[0]}
        if model_new[1]:
            spec["params"] = model_new[1]
        if env_new.get("rerank"):
            spec["rerank"] = env_new["rerank"]
        later.append(spec)
        changes.append(f"recommender: {_fork_short(model_old[0])} -> {_fork_short(model_new[0])}"
                       f"{' ' + _fork_short(model_new[1]) if model_new[1] else ''}, a new model"
                       f"{' with re-ranking' if spec.get('rerank') else ''}, from round {first}")
    elif (env_old.get("rerank") or []) != (env_new.get("rerank") or []):    # the same model, re-ranked anew
        later.append({"kind": "rerank", "at_round": first, "rerank": env_new.get("rerank") or []})
        changes.append(f"rerank: {_fork_short(env_old.get('rerank') or [])} -> "
                       f"{_fork_short(env_new.get('rerank') or [])} from round {first} (the model is kept)")
    later += _coach_changes(base, target, first, changes)
    for key in old:
        if key not in (*FORK_TAKES_EFFECT, *FORK_SCHEDULED, "env", "policy") and old.get(key) != new.get(key):
            raise ConfigError(_fork_cannot(key, at_round))
    if later:
        out["interventions"] = list(out.get("interventions") or []) + later
    try:
        return from_dict(out), changes
    except ConfigError as exc:
        raise ConfigError(f"the fork's config: {exc}") from None


def _fork_default(key: str) -> Any:
    return getattr(FeedConfig, key, None)


def _fork_max_rounds(cfg: ExperimentConfig) -> int:
    return int(cfg.env.get("max_rounds", FeedConfig.max_rounds))


def _fork_past(specs: list, t: int, max_rounds: int) -> list:
    """The part of a schedule that applied in rounds <= t: (spec without its schedule, rounds)."""
    from socialgym.experiments.interventions import SCHEDULE_KEYS, rounds_of
    past = []
    for spec in specs:
        rounds = [r for r in rounds_of(spec, max_rounds) if r <= t]
        if rounds:
            past.append(({k: v for k, v in spec.items() if k not in SCHEDULE_KEYS}, rounds))
    return past


def _coach_changes(base: ExperimentConfig, target: ExperimentConfig, first: int, changes: list) -> list:
    """Coach switches (policy.coach, a group's coach) as interventions; any other policy change
    is refused, naming the first key that differs."""
    specs = []
    old_groups, new_groups = base.policy_groups(), target.policy_groups()
    if len(old_groups) != len(new_groups):
        raise ConfigError(_fork_cannot("policy.groups", first - 1))
    rest = [("policy.kind", base.policy.kind, target.policy.kind)]
    rest += _fork_diff(thaw(base.policy.params), thaw(target.policy.params), "policy.params")
    for i, (a, b) in enumerate(zip(old_groups, new_groups)):
        where = f"policy.groups[{i}]" if base.policy.groups else "policy"
        for f in dataclasses.fields(a):
            if f.name != "coach":
                rest += _fork_diff(thaw(getattr(a, f.name)), thaw(getattr(b, f.name)), f"{where}.{f.name}")
    rest = [r for r in rest if r[1] != r[2]]
    if rest:
        raise ConfigError(_fork_cannot(rest[0][0], first - 1))
    for a, b in zip(old_groups, new_groups):
        if a.coach != b.coach:
            specs.append({"kind": "coach", "at_round": first, "enabled": bool(b.coach),
                          "target": a.name if base.policy.groups else "all"})
            changes.append(f"coach of {a.name if base.policy.groups else 'all agents'}: {a.coach} -> {b.coach} "
                           f"from round {first}")
    return specs


def _fork_cannot(key: str, at_round: int) -> str:
    return (f"{key} cannot change in a fork (it is part of the state after round {at_round}); forks change "
            f"later interventions/surveys, env.{'/'.join(FORK_RECOMMENDER_ENV + FORK_RUNTIME_ENV)}, coach, "
            "llm/logging/run")


def _fork_diff(a: Any, b: Any, prefix: str) -> list:
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        out = []
        for k in sorted(set(a) | set(b), key=str):
            out += _fork_diff(a.get(k), b.get(k), f"{prefix}.{k}")
        return out
    return [] if a == b else [(prefix, a, b)]


def _fork_short(value: Any, limit: int = 60) -> str:
    text = json.dumps(thaw(value), default=str, separators=(",", ":"))
    return text if len(text) <= limit else text[:limit - 1] + "…"


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
    Path(path).write_text(yaml.safe_dump(to_dict(cfg, redact=True), sort_keys=False))

