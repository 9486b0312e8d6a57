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
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

import yaml

from socialgym.agents.persona import PERSONA_SETS
from socialgym.config import FeedConfig

POLICY_KINDS = ("random", "greedy", "llm", "torch")
BACKENDS = ("local", "ray")
WANDB_MODES = ("online", "offline", "disabled")
SECRET_KEY = re.compile(r"(api_key|token|secret|password)", re.IGNORECASE)

# env sub-sections that flatten into FeedConfig keys (a spelling aid, not a second namespace)
ENV_GROUPS = {
    "ties": ("xi", "delta_max", "half_life", "b_rec", "evidence_weights", "tie_scorer", "tie_prune_below",
             "seed_graph"),
    "rewards": ("b_soc", "b_inf", "b_pre", "b_coord", "b_emo", "eps", "lambdas"),
}
# keys the runner owns: the seed comes from the top level and replicates, the format from the policy
ENV_RESERVED = ("seed", "obs_format")


class ConfigError(ValueError):
    """A bad experiment config; the message is one line and names the key."""


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
    """LLM groups only: the coach advises these agents (SPEC §8)."""
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


# ---------------------------------------------------------------------------------- loading
def load_config(source: str | Path | Mapping, overrides: Iterable[str] = ()) -> ExperimentConfig:
    """Read YAML (a path, or an already-parsed mapping), apply ``key.path=value`` overrides,
    validate. Relative paths inside the file (``personas``) are resolved against its folder."""
    base = None
    if isinstance(source, Mapping):
        raw = thaw(source)
    else:
        path = Path(source)
        if not path.is_file():
            raise ConfigError(f"config file {str(path)!r} does not exist")
        try:
            raw = yaml.safe_load(path.read_text()) or {}
        except yaml.YAMLError as exc:
            raise ConfigError(f"{path}: not valid YAML: {' '.join(str(exc).split())}") from None
        base = path.parent
    if not isinstance(raw, dict):
        raise ConfigError(f"the config must be a mapping of sections, got {type(raw).__name__}")
    for item in overrides:
        apply_override(raw, item)
    cfg = from_dict(raw)
    source = cfg.personas.source
    if base is not None and source is not None and source not in PERSONA_SETS and not Path(source).is_absolute():
        cfg = dataclasses.replace(cfg, personas=dataclasses.replace(cfg.personas,
                                                                    source=str((base / source).resolve())))
    return cfg


def apply_override(raw: dict, item: str) -> None:
    """``env.n_agents=50`` -> raw["env"]["n_agents"] = 50 (the value is read as YAML)."""
    if "=" not in item:
        raise ConfigError(f"--set expects key.path=value, got {item!r}")
    key, text = item.split("=", 1)
    parts = [p for p in key.strip().split(".") if p]
    if not parts:
        raise ConfigError(f"--set expects key.path=value, got {item!r}")
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        value = text
    node = raw
    for i, part in enumerate(parts[:-1]):
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        if not isinstance(child, dict):
            raise ConfigError(f"--set {key}: {'.'.join(parts[:i + 1])} is not a section")
        node = child
    node[parts[-1]] = value


def from_dict(raw: Mapping) -> ExperimentConfig:
    raw = dict(raw)
    _known("", raw, [f.name for f in dataclasses.fields(ExperimentConfig)])
    seed = raw.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ConfigError(f"seed must be a non-negative integer, got {seed!r}")
    env = _env(raw.get("env") or {})
    policy = _policy(raw.get("policy") or {})
    llm = _section("llm", LLMConfig, raw["llm"]) if raw.get("llm") is not None else None
    logging = _logging(raw.get("logging") or {})
    run = _section("run", RunConfig, raw.get("run") or {})
    personas = raw.get("personas")
    if personas is None or isinstance(personas, str):
        personas = PersonaConfig(source=personas)
    elif isinstance(personas, Mapping):
        personas = _section("personas", PersonaConfig, personas)
    else:
        raise ConfigError(f"personas must be a file path, a bundled set ({', '.join(PERSONA_SETS)}) or a "
                          f"mapping {{source, survey}}, got {personas!r}")
    sweep = _sweep(raw.get("sweep") or {})
    cfg = ExperimentConfig(seed, env, policy, llm, personas, logging, run, sweep)
    _check(cfg)
    for assignment in grid(cfg):             # every cell of the sweep must be a valid config too
        if assignment:
            with_values(cfg, assignment)
    return cfg


def _known(where: str, raw: Mapping, allowed: Iterable[str]) -> None:
    allowed = list(allowed)
    for key in raw:
        if key not in allowed:
            name = f"{where}.{key}" if where else str(key)
            raise ConfigError(f"unknown key {name!r}; allowed{' in ' + where if where else ''}: {', '.join(allowed)}")


def _section(where: str, cls, raw: Any):
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where} must be a mapping, got {raw!r}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    _known(where, raw, fields)
    hints = {f.name: f.type for f in fields.values()}
    values = {}
    for key, value in raw.items():
        values[key] = _typed(f"{where}.{key}", hints[key], value)
    required = [f.name for f in fields.values()
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    for key in required:
        if key not in values:
            raise ConfigError(f"{where}.{key} is required")
    try:
        return cls(**values)
    except TypeError as exc:
        raise ConfigError(f"{where}: {exc}") from None


def _typed(name: str, hint: str, value: Any) -> Any:
    """Check a scalar against the field's annotation (written as a string: PEP 563)."""
    optional = "None" in hint or hint == "Any"
    if value is None:
        if optional:
            return None
        raise ConfigError(f"{name} may not be null")
    base = hint.replace(" | None", "").strip()
    if base == "bool":
        if not isinstance(value, bool):
            raise ConfigError(f"{name} must be true or false, got {value!r}")
    elif base == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{name} must be an integer, got {value!r}")
    elif base == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{name} must be a number, got {value!r}")
        value = float(value)
    elif base == "str":
        if not isinstance(value, str):
            raise ConfigError(f"{name} must be a string, got {value!r}")
    elif base.startswith("tuple"):
        if isinstance(value, str) or not isinstance(value, (list, tuple)):
            raise ConfigError(f"{name} must be a list, got {value!r}")
        value = tuple(value)
    elif base == "FrozenDict":
        if not isinstance(value, Mapping):
            raise ConfigError(f"{name} must be a mapping, got {value!r}")
        value = freeze(value)
    return value


def _env(raw: Any) -> FrozenDict:
    if not isinstance(raw, Mapping):
        raise ConfigError(f"env must be a mapping, got {raw!r}")
    allowed = [f.name for f in dataclasses.fields(FeedConfig) if f.name not in ENV_RESERVED]
    flat: dict = {}
    origin: dict[str, str] = {}
    for key, value in raw.items():
        if key in ENV_GROUPS:
            if not isinstance(value, Mapping):
                raise ConfigError(f"env.{key} must be a mapping, got {value!r}")
            _known(f"env.{key}", value, ENV_GROUPS[key])
            for sub, v in value.items():
                flat[sub], origin[sub] = v, f"env.{key}.{sub}"
        elif key in ENV_RESERVED:
            where = "the top-level seed" if key == "seed" else "the policy kind"
            raise ConfigError(f"env.{key} is set by the runner from {where}; remove it from env")
        else:
            if key not in allowed:
                raise ConfigError(f"unknown key 'env.{key}'; allowed in env: {', '.join(allowed + list(ENV_GROUPS))}")
            flat[key], origin[key] = value, f"env.{key}"
    try:
        FeedConfig.from_kwargs(**flat)
    except (TypeError, ValueError) as exc:
        message = " ".join(str(exc).split())
        for key, where in sorted(origin.items(), key=lambda kv: -len(kv[0])):
            if message.startswith(key):
                message = where + message[len(key):]
                break
        else:
            message = f"env: {message}"
        raise ConfigError(message) from None
    return freeze(flat)


def _policy(raw: Any) -> PolicyConfig:
    if not isinstance(raw, Mapping):
        raise ConfigError(f"policy must be a mapping, got {raw!r}")
    raw = dict(raw)
    groups_raw = raw.pop("groups", None)
    policy = _section("policy", PolicyConfig, raw)
    groups = []
    if groups_raw is not None:
        if isinstance(groups_raw, (str, Mapping)) or not isinstance(groups_raw, (list, tuple)) or not groups_raw:
            raise ConfigError(f"policy.groups must be a non-empty list of groups, got {groups_raw!r}")
        for i, g in enumerate(groups_raw):
            if not isinstance(g, Mapping):
                raise ConfigError(f"policy.groups[{i}] must be a mapping, got {g!r}")
            g = {"kind": policy.kind, "params": policy.params, **g}
            if "coach" not in g:         # the default coach setting applies to LLM groups only
                g["coach"] = policy.coach and g["kind"] == "llm"
            if "name" not in g:
                g["name"] = f"group_{i}"
            groups.append(_section(f"policy.groups[{i}]", PolicyGroup, g))
    return dataclasses.replace(policy, groups=tuple(groups))


def _logging(raw: Any) -> LoggingConfig:
    if not isinstance(raw, Mapping):
        raise ConfigError(f"logging must be a mapping, got {raw!r}")
    raw = dict(raw)
    wandb = raw.pop("wandb", None)
    out = _section("logging", LoggingConfig, raw)
    if wandb is not None:
        out = dataclasses.replace(out, wandb=_section("logging.wandb", WandbConfig, wandb))
    return out


def _sweep(raw: Any) -> FrozenDict:
    if not isinstance(raw, Mapping):
        raise ConfigError(f"sweep must be a mapping of dotted keys to lists of values, got {raw!r}")
    for key, values in raw.items():
        if not isinstance(key, str) or "." not in key and key != "seed":
            raise ConfigError(f"sweep key {key!r} must be a dotted config path such as env.recommender")
        if key.split(".")[0] in ("sweep", "run"):
            raise ConfigError(f"sweep.{key}: the run and sweep sections cannot be swept")
        if isinstance(values, (str, Mapping)) or not isinstance(values, (list, tuple)) or not values:
            raise ConfigError(f"sweep.{key} must be a non-empty list of values, got {values!r}")
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
            raise ConfigError(f"{where} must be one of {', '.join(POLICY_KINDS)}, got {kind!r}")
    if p.groups:
        names = [g.name for g in p.groups]
        if len(set(names)) != len(names):
            raise ConfigError(f"policy.groups: names must be unique, got {names}")
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
                except ValueError as exc:
                    raise ConfigError(f"policy.groups[{i}].lambdas: {exc}") from None
        taken = sum(g.agents or 0 for g in p.groups)
        if (taken != n and all(g.agents is not None for g in p.groups)) or taken > n \
                or (taken == n and any(g.agents is None for g in p.groups)):
            raise ConfigError(f"policy.groups: the groups' agents must add up to env.n_agents = {n}, got {taken}")
    elif p.coach and p.kind != "llm":
        raise ConfigError("policy.coach: only llm agents can be coached (policy.kind is "
                          f"{p.kind!r})")
    if cfg.llm is not None:
        if cfg.llm.base_url is not None and not cfg.llm.model:
            raise ConfigError("llm.model is required with llm.base_url")
        if cfg.llm.max_concurrency < 1:
            raise ConfigError(f"llm.max_concurrency must be >= 1, got {cfg.llm.max_concurrency}")
    if cfg.run.backend not in BACKENDS:
        raise ConfigError(f"run.backend must be one of {', '.join(BACKENDS)}, got {cfg.run.backend!r}")
    if cfg.run.replicates < 1:
        raise ConfigError(f"run.replicates must be >= 1, got {cfg.run.replicates}")
    if cfg.run.workers is not None and cfg.run.workers < 1:
        raise ConfigError(f"run.workers must be >= 1, got {cfg.run.workers}")
    if cfg.logging.network_every < 1:
        raise ConfigError(f"logging.network_every must be >= 1, got {cfg.logging.network_every}")
    w = cfg.logging.wandb
    if w is not None and w.mode not in WANDB_MODES:
        raise ConfigError(f"logging.wandb.mode must be one of {', '.join(WANDB_MODES)}, got {w.mode!r}")
    if cfg.env.get("tie_scorer") is not None and cfg.llm is not None and cfg.llm.tie_scorer:
        raise ConfigError("set either env.ties.tie_scorer or llm.tie_scorer, not both")
    if "lambdas" in cfg.env and any(g.lambdas is not None for g in p.groups):
        raise ConfigError("set either env.rewards.lambdas or policy.groups[*].lambdas, not both")


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
    for key, value in assignment.items():
        value = thaw(value)
        apply_override(raw, f"{key}={yaml.safe_dump(value, default_flow_style=True).strip()}"
                       if not isinstance(value, str) else f"{key}={value}")
        if key == "policy.coach":       # groups take policy.coach as their default: a swept value reaches
            for group in raw["policy"].get("groups") or []:      # every llm group (to_dict wrote it out)
                if group.get("kind", "llm") == "llm":
                    group["coach"] = value
    try:
        return from_dict(raw)
    except ConfigError as exc:
        raise ConfigError(f"sweep cell {dict(assignment)}: {exc}") from None


# ---------------------------------------------------------------------------------- writing
def to_dict(cfg: ExperimentConfig, redact: bool = True) -> dict:
    """Plain data (YAML-ready). ``redact`` drops every secret-looking key (api_key, token, ...)."""
    out = thaw(dataclasses.asdict(cfg))
    if not out["policy"]["groups"]:
        del out["policy"]["groups"]
    return _redact(out) if redact else out


def _redact(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _redact(v) for k, v in value.items()
                if not (isinstance(k, str) and SECRET_KEY.search(k) and k != "api_key_env")}
    if isinstance(value, list):
        return [_redact(v) for v in value]
    return value


def dump_yaml(cfg: ExperimentConfig, path: str | Path) -> None:
    Path(path).write_text(yaml.safe_dump(to_dict(cfg, redact=True), sort_keys=False))

