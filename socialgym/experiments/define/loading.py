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
(:func:`to_dict` with ``redact=True``), so ``run.fork_at`` and a fork refuse it; the recommended
way is ``llm.api_key_env``, the *name* of an environment variable.

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
import itertools
import math
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np
import yaml

from socialgym.agents.persona import PERSONA_SETS
from socialgym.config import MAX_AGENTS, FeedConfig
from socialgym.platform.validation import MAX_SHOWN_CHARS  # noqa: F401 -- documented in loading
from socialgym.platform.validation import is_int, show, utf8_problem
from socialgym.rundir.decisions import DECISION_MODES
from socialgym.experiments.define.forks import fork_changes, inline_key
from socialgym.experiments.define.schedule import RESERVED_TARGETS
from socialgym.experiments.define.schema import (ConfigError, cut_text, EndpointConfig, ENV_GROUPS, ENV_RESERVED,
                                                 ExperimentConfig, freeze, FrozenDict, kind_of_tier, LLMConfig,
                                                 LoggingConfig,
                                                 MAX_CONFIG_BYTES, MAX_ENDPOINTS,
                                                 MAX_SEED, MAX_STRING_CHARS, MAX_SWEEP_CELLS, MAX_YAML_ALIASES,
                                                 MAX_YAML_DEPTH, MAX_YAML_NODES, one_line, PersonaConfig,
                                                 PolicyConfig, PolicyGroup, RANGES, RunConfig, STRING_LIMITS, thaw,
                                                 to_dict, WANDB_MODES, WandbConfig)
from socialgym.experiments.define.validation import (check_env_objects, check_personas, check_policy_params,
                                                     check_sections)

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
        raise ConfigError(f"{where}: not valid YAML: {cut_text(text, 300)}") from None
    except RecursionError:
        raise ConfigError(f"{where}: nested too deeply") from None
    except (ValueError, TypeError, OverflowError) as exc:     # e.g. a date 2024-13-40, a 5000-digit int
        if fallback is not _NOT_READ:
            return fallback
        raise ConfigError(f"{where}: a value cannot be read: {cut_text(' '.join(str(exc).split()), 200)}") from None
    finally:
        if loader is not None:
            loader.dispose()


def read_yaml_file(path: Path, what: str = "config") -> Any:
    """A YAML/JSON file through the bounded loader (size, aliases, nesting, no Python tags), as
    UTF-8; every problem a ConfigError naming the file. ``what`` names the file in messages."""
    try:
        if not path.exists():
            raise ConfigError(f"{what} file {show(str(path))} does not exist")
        if not path.is_file():
            raise ConfigError(f"{what} {show(str(path))} is not a file")
        size = path.stat().st_size
        if size > MAX_CONFIG_BYTES:
            raise ConfigError(f"{path}: {size} bytes, more than MAX_CONFIG_BYTES = {MAX_CONFIG_BYTES}")
        with open(path, "rb") as f:
            data = f.read(MAX_CONFIG_BYTES + 1)
    except (OSError, ValueError) as exc:
        if isinstance(exc, ConfigError):
            raise
        raise ConfigError(f"{what} file {show(str(path))} cannot be read: {exc}") from None
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{path}: more than MAX_CONFIG_BYTES = {MAX_CONFIG_BYTES} bytes")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {data[exc.start]:#04x} at offset {exc.start}); "
                          f"a {what} file is YAML saved as UTF-8") from None
    raw = _parse_yaml(text, str(path))
    if raw is None and what == "config":
        raise ConfigError(f"{path} is empty: a config needs at least one section, e.g. env: {{n_agents: 10}}")
    return raw


def _scan(value: Any, where: str, depth: int = 0, budget: list | None = None) -> None:
    """Every mapping key is a string, every string (key or value) can be encoded as UTF-8 (a lone
    surrogate would stop the run when it is written out), every float is finite (NaN and
    infinities mean nothing in a config), nesting and size are bounded (a mapping passed in may
    contain itself). Files, mappings, ``--set`` values, sweep cells and forks all pass here."""
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
            if utf8_problem(key):
                raise ConfigError(f"{where or 'the config'}: key {show(key)}: {utf8_problem(key)}")
            _scan(item, f"{where}.{key}" if where else key, depth + 1, budget)
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _scan(item, f"{where}[{i}]", depth + 1, budget)
    elif isinstance(value, str):
        if utf8_problem(value):
            raise ConfigError(f"{where or 'the config'}: {utf8_problem(value)}")
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
        raw = read_yaml_file(path)
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
    what = f"--set {one_line(key.strip(), 60)}"
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
    llm = llm_section(raw["llm"]) if raw.get("llm") is not None else None
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
    check_sections(cfg)
    if raw.get("interventions") is not None:
        cfg = dataclasses.replace(cfg, interventions=_interventions(cfg, raw["interventions"]))
    if raw.get("surveys") is not None:
        cfg = dataclasses.replace(cfg, surveys=_surveys(cfg, raw["surveys"]))
    check_env_objects(cfg)
    check_policy_params(cfg)
    check_personas(cfg)
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
    if inline_key(cfg):
        raise ConfigError("run.fork_at: an inline llm.api_key is never written to disk (nor an endpoint's "
                          "api_key), so the forks could not use it; put the key in the environment variable named "
                          "by llm.api_key_env")
    if len(cells) > 1:
        for assignment, cell in zip(grid(cfg)[1:], cells[1:]):
            try:
                fork_config(cells[0], cell, cfg.run.fork_at)
            except ConfigError as exc:
                raise ConfigError(f"run.fork_at: cell {show(dict(thaw(assignment)), 50)}: {exc}") from None


def _interventions(cfg: ExperimentConfig, raw: Any) -> tuple:
    from socialgym.experiments.define.interventions import InterventionError, check_interventions

    agents, groups, llm_agents = _group_members(cfg)
    try:
        specs = check_interventions(raw, max_rounds=int(cfg.env.get("max_rounds", FeedConfig.max_rounds)),
                                    agents=agents, groups=groups,
                                    agent_interests=cfg.env.get("agent_interests") is not None
                                    or any(g.kind == "topic_users" for g in cfg.policy_groups()),   # drawn
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
    from socialgym.experiments.define.surveys import SurveyError, check_surveys

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
            g = dict(g)
            if "policy" in g:               # the tier (docs/hybrid.md): the kind it stands for
                try:
                    g["kind"] = kind_of_tier(g.pop("policy"), g.get("kind"))
                except ValueError as exc:
                    raise ConfigError(f"policy.groups[{i}].policy {exc}") from None
            g = {"kind": policy.kind, "params": policy.params, **g}
            if "coach" not in g:         # the default coach setting applies to LLM groups only
                g["coach"] = policy.coach and g["kind"] == "llm"
            if "name" not in g:
                g["name"] = f"group_{i}"
            groups.append(_section(f"policy.groups[{i}]", PolicyGroup, g, table="policy.groups[*]"))
            name = groups[-1].name
            if name in RESERVED_TARGETS:                  # target: all would mean every agent, not the group
                raise ConfigError(f"policy.groups[{i}].name: {name!r} is reserved (target: {name} means "
                                  f"{RESERVED_TARGETS[name]}); give the group another name")
    return dataclasses.replace(policy, groups=tuple(groups))


def llm_section(raw: Any) -> LLMConfig:
    """The llm section (a config's, or a study's own: ``socialgym moderation``) from a mapping: its
    plain fields, then ``budget`` and ``prices`` (checked by ``socialgym.llm.budget``) and
    ``endpoints`` (each an :class:`EndpointConfig`); a ConfigError names a bad key."""
    from socialgym.llm.budget import Budget, BudgetError, check_prices

    if not isinstance(raw, Mapping):
        raise ConfigError(f"llm must be a mapping, got {show(raw)}")
    raw = dict(raw)
    budget, prices, endpoints = raw.pop("budget", None), raw.pop("prices", None), raw.pop("endpoints", None)
    llm = _section("llm", LLMConfig, raw)
    try:
        limits = Budget.from_mapping(budget).limits()
        prices = check_prices(prices)
    except BudgetError as exc:
        raise ConfigError(str(exc)) from None
    found = ()
    if endpoints is not None and not (isinstance(endpoints, (list, tuple)) and not endpoints):   # [] means none
        if isinstance(endpoints, (str, Mapping)) or not isinstance(endpoints, (list, tuple)):
            raise ConfigError("llm.endpoints must be a non-empty list of servers {name, base_url, model, "
                              f"api_key_env, max_concurrency, weight}}, got {show(endpoints)}")
        if len(endpoints) > MAX_ENDPOINTS:
            raise ConfigError(f"llm.endpoints has {len(endpoints)} servers, more than MAX_ENDPOINTS = {MAX_ENDPOINTS}")
        found = tuple(_section(f"llm.endpoints[{i}]", EndpointConfig, e, table="llm.endpoints[*]")
                      for i, e in enumerate(endpoints))
    return dataclasses.replace(llm, budget=freeze(limits), prices=freeze(prices), endpoints=found)


def _logging(raw: Any) -> LoggingConfig:
    if not isinstance(raw, Mapping):
        raise ConfigError(f"logging must be a mapping, got {show(raw)}")
    raw = dict(raw)
    wandb = raw.pop("wandb", None)
    out = _section("logging", LoggingConfig, raw)
    if out.decisions not in DECISION_MODES:
        raise ConfigError(f"logging.decisions must be one of {', '.join(DECISION_MODES)}, got {show(out.decisions)}")
    if wandb is not None:
        out = dataclasses.replace(out, wandb=wandb_section(wandb))
    return out


def wandb_section(raw: Any) -> WandbConfig:
    """The ``logging.wandb`` section, checked: the one check of these settings, also made by
    :class:`~socialgym.experiments.run.wandb_log.WandbLogger` on the settings it is given."""
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
        if not isinstance(key, str) or "." not in key and key not in ("seed", "interventions", "surveys", "personas"):
            raise ConfigError(f"sweep key {show(key)} must be a dotted config path such as env.recommender "
                              "(or seed, interventions, surveys, personas)")
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
            if key == "personas":           # a swept source keeps the section's other keys (survey)
                value = {**raw["personas"], **(value if isinstance(value, Mapping) else {"source": value})}
            _set_path(raw, key, value, f"sweep key {show(key)}")
            if key == "policy.coach":       # groups take policy.coach as their default: a swept value reaches
                for group in raw["policy"].get("groups") or []:      # every llm group (to_dict wrote it out)
                    if group.get("kind", "llm") == "llm":
                        group["coach"] = value
        return from_dict(raw)
    except ConfigError as exc:
        raise ConfigError(f"sweep cell {show(dict(thaw(assignment)), 160)}: {exc}") from None


def fork_config(base: ExperimentConfig, target: ExperimentConfig, at_round: int) -> tuple[ExperimentConfig, list]:
    """The config a fork after round ``at_round`` runs with: ``base`` (the config rounds 1..t ran
    with) changed towards ``target`` (:func:`~socialgym.experiments.define.forks.fork_changes`),
    validated. Returns it and the list of changes, each a short text. Raises
    :class:`ConfigError` naming a key that a fork cannot change."""
    raw, changes = fork_changes(base, target, at_round)
    try:
        return from_dict(raw), changes
    except ConfigError as exc:
        raise ConfigError(f"the fork's config: {exc}") from None
