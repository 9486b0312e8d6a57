"""Checks of what a config's sections name, run when it is loaded: the recommender and its
re-rankers with their parameters, each policy group's parameters, the persona source, and the
combinations of sections (``_check``). Every problem is one :class:`ConfigError` naming the key.
"""

from __future__ import annotations

import inspect
import math
import re
from pathlib import Path
from typing import Mapping


from socialgym.agents.persona import PERSONA_SETS
from socialgym.baselines.kinds import KIND, kinds_where
from socialgym.config import FeedConfig
from socialgym.platform.validation import is_int, show
from socialgym.experiments.define.schema import (BACKENDS, ConfigError, ENV_GROUPS, ExperimentConfig,
                                                 LLM_PARAMS_RESERVED, MAX_JOBS, MAX_SEED, POLICY_KINDS,
                                                 STRUCTURED_MODES, group_counts, thaw)

def check_sections(cfg: ExperimentConfig) -> None:
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
        if sum(g.agents is None and g.share is None for g in p.groups) > 1:
            raise ConfigError("policy.groups: at most one group may leave out both 'agents' and 'share' "
                              "(it takes the rest)")
        for i, g in enumerate(p.groups):
            if g.agents is not None and g.agents < 1:
                raise ConfigError(f"policy.groups[{i}].agents must be >= 1, got {g.agents}")
            if g.agents is not None and g.share is not None:
                raise ConfigError(f"policy.groups[{i}]: give 'agents' (a count) or 'share' (a fraction of "
                                  "env.n_agents), not both")
            if g.coach and g.kind != "llm":
                raise ConfigError(f"policy.groups[{i}].coach: only llm agents can be coached")
            if g.lambdas is not None:
                try:
                    FeedConfig.from_kwargs(n_agents=2, lambdas=g.lambdas)
                except (TypeError, ValueError) as exc:
                    raise ConfigError(f"policy.groups[{i}].lambdas: {exc}") from None
        try:
            counts = group_counts(p.groups, n)
        except ValueError as exc:
            raise ConfigError(f"policy.groups: {exc}") from None
        for i, (g, c) in enumerate(zip(p.groups, counts)):
            if g.share is not None and c < 1:
                raise ConfigError(f"policy.groups[{i}].share: {g.share:g} of env.n_agents = {n} is {c} agents; "
                                  "a group needs at least 1")
        taken = sum(g.agents or 0 for g in p.groups)
        if sum(counts) != n or min(counts) < 1:
            got = f"{taken}" if all(g.share is None for g in p.groups) else f"counts {counts}"
            raise ConfigError(f"policy.groups: the groups' agents must add up to env.n_agents = {n}, "
                              f"every group at least 1, got {got}")
    elif p.coach and p.kind != "llm":
        raise ConfigError("policy.coach: only llm agents can be coached (policy.kind is "
                          f"{show(p.kind)})")
    check_servers(cfg)
    if cfg.llm is not None:
        if cfg.llm.base_url is not None:
            if not _URL.match(cfg.llm.base_url):
                raise ConfigError(f"llm.base_url must be an http:// or https:// URL, got {show(cfg.llm.base_url)}")
            if not cfg.llm.model:
                raise ConfigError("llm.model is required with llm.base_url")
        if cfg.llm.structured not in STRUCTURED_MODES:
            raise ConfigError(f"llm.structured must be one of {', '.join(STRUCTURED_MODES)}, "
                              f"got {show(cfg.llm.structured)}")
        if not _VARIABLE.fullmatch(cfg.llm.api_key_env):
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


_VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_URL = re.compile(r"https?://[^\s/?#]+")


def check_servers(cfg: ExperimentConfig) -> None:
    """``llm.endpoints`` (unique names, URLs, key variables; not beside ``llm.base_url``), the
    groups bound to them (``policy.groups[*].endpoints`` / ``model``), and a ``usd`` budget's
    prices (one for every model the run uses)."""
    llm = cfg.llm
    endpoints = llm.endpoints if llm is not None else ()
    names = [e.name for e in endpoints]
    if endpoints:
        if llm.base_url is not None or llm.model is not None:
            raise ConfigError("llm.base_url / llm.model: with llm.endpoints every endpoint names its server and "
                              "model; remove llm.base_url and llm.model")
        twice = sorted({x for x in names if names.count(x) > 1})
        if twice:
            raise ConfigError(f"llm.endpoints: names must be unique, {show(twice)} appear more than once")
        for i, e in enumerate(endpoints):
            if not _URL.match(e.base_url):
                raise ConfigError(f"llm.endpoints[{i}].base_url must be an http:// or https:// URL, got {show(e.base_url)}")
            if e.api_key_env is not None and not _VARIABLE.fullmatch(e.api_key_env):
                raise ConfigError(f"llm.endpoints[{i}].api_key_env is the name of an environment variable (letters, "
                                  f"digits, _), got {show(e.api_key_env)}")
    for i, g in enumerate(cfg.policy.groups):
        if not g.endpoints and g.model is None:
            continue
        where = f"policy.groups[{i}]"
        if g.kind != "llm":
            raise ConfigError(f"{where}: endpoints/model bind llm agents to servers; this group's kind is {show(g.kind)}")
        if not endpoints:
            raise ConfigError(f"{where}.{'endpoints' if g.endpoints else 'model'} needs llm.endpoints (the servers "
                              "it names)")
        unknown = [n for n in g.endpoints if n not in names]
        if unknown:
            raise ConfigError(f"{where}.endpoints: no endpoint named {', '.join(map(show, unknown))} in llm.endpoints "
                              f"(names: {', '.join(names)})")
        if g.model is not None:
            serving = [e.name for e in endpoints if e.model == g.model and (not g.endpoints or e.name in g.endpoints)]
            if not serving:
                served = sorted({e.model for e in endpoints if not g.endpoints or e.name in g.endpoints})
                raise ConfigError(f"{where}.model: no endpoint{' of ' + where + '.endpoints' if g.endpoints else ''} "
                                  f"serves {show(g.model)} (served: {', '.join(served)})")
    if llm is not None and "usd" in llm.budget:
        missing = [m for m in cfg.llm_models() if m not in llm.prices]
        if missing:
            raise ConfigError(f"llm.budget.usd needs llm.prices for every model the run uses; no price for "
                              f"{', '.join(map(show, missing))} (give {{prompt: USD, completion: USD}} per 1M tokens)")


def _env_key(cfg: ExperimentConfig, key: str) -> str:
    """Where an env key was written (``env.ties.tie_scorer`` or ``env.tie_scorer``)."""
    for group, keys in ENV_GROUPS.items():
        if key in keys:
            return f"env.{group}.{key}"
    return f"env.{key}"


def check_env_objects(cfg: ExperimentConfig) -> None:
    """Check what the environment will build from names — the recommender with its parameters
    and its re-ranking steps — with their classes' own checks (nothing is built here: the
    environment builds the recommender once), so that an unknown parameter or a bad value fails now."""
    from socialgym.recommenders import ParamError, check_recommender, check_reranking

    env = FeedConfig.from_kwargs(**thaw(cfg.env))
    try:
        check_recommender(env.recommender, **dict(env.recommender_kwargs))
    except ImportError as exc:
        raise ConfigError(f"env.recommender {show(env.recommender)}: {exc}") from None
    except ParamError as exc:
        raise ConfigError(f"env.recommender_kwargs.{_exc_text(exc)}") from None
    except Exception as exc:                        # noqa: BLE001 -- any check's complaint
        raise ConfigError(f"env.recommender_kwargs: {_exc_text(exc)}") from None
    for i, step in enumerate(env.rerank):
        if not isinstance(step, Mapping):       # a user's callable: not called before the run
            continue
        try:
            check_reranking([thaw(step)], n_agents=env.n_agents)
        except ParamError as exc:
            raise ConfigError(f"env.rerank[{i}].{_exc_text(exc)}") from None
        except Exception as exc:                    # noqa: BLE001
            raise ConfigError(f"env.rerank[{i}]: {_exc_text(exc)}") from None
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


def _exc_text(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    known = (TypeError, ValueError, OSError, ImportError)
    return text if isinstance(exc, known) and text else f"{type(exc).__name__}: {text}"


def check_policy_params(cfg: ExperimentConfig) -> None:
    """The constructor keywords of each group's policy, as the runner will pass them, checked by
    the policy classes themselves (``check_params``: nothing is built here)."""
    llm_params: dict = {}
    llm_where = "policy.params"
    for i, g in enumerate(cfg.policy_groups()):
        where = f"policy.groups[{i}].params" if cfg.policy.groups else "policy.params"
        params = thaw(g.params)
        if g.kind in kinds_where(tier="scripted", numeric=False):
            _check_scripted(g.kind, params, where)
        elif g.kind == "topic_users":
            _check_topic_users(cfg, i, params, where)
        elif g.kind == "social_users":
            _check_social_users(cfg, params, where)
        elif KIND[g.kind].model_file:
            _check_torch(params, where)
        elif g.kind == "archetype":
            _check_archetype(params, where)
        elif g.kind == "llm":
            llm_params.update(params)
            llm_where = where
    if llm_params:
        _check_llm(llm_params, llm_where)


def _check_archetype(params: dict, where: str) -> None:
    from socialgym.agents.archetype import ArchetypePolicy
    from socialgym.recommenders import ParamError

    taken = [k for k in ("client", "personas") if k in params]
    if taken:
        raise ConfigError(f"{where}.{taken[0]}: set by the runner (the run's client and personas)")
    try:
        ArchetypePolicy.check_params(**params)
    except ParamError as exc:
        raise ConfigError(f"{where}.{_exc_text(exc)}") from None
    except TypeError as exc:
        allowed = ", ".join(k for k in inspect.signature(ArchetypePolicy).parameters if k not in ("client", "personas"))
        raise ConfigError(f"{where}: {exc}; an archetype policy takes {allowed}") from None


def _check_scripted(kind: str, params: dict, where: str) -> None:
    from socialgym.baselines import GreedyPolicy, RandomPolicy
    from socialgym.recommenders import ParamError

    cls = RandomPolicy if kind == "random" else GreedyPolicy
    problem = None
    try:
        cls.check_params(**params)
    except ParamError as exc:
        problem = exc
    except TypeError as exc:
        allowed = ", ".join(inspect.signature(cls).parameters)
        raise ConfigError(f"{where}: {exc}; a {kind} policy takes {allowed}") from None
    seed = params.get("seed")               # the config's own limit on the seeds written in it
    if seed is not None and (not is_int(seed, numpy=False) or not 0 <= seed <= MAX_SEED):
        raise ConfigError(f"{where}.seed must be an integer in [0, {MAX_SEED}], got {show(seed)}")
    if problem is not None:
        raise ConfigError(f"{where}.{problem}") from None


def _check_topic_users(cfg: ExperimentConfig, i: int, params: dict, where: str) -> None:
    """A topic_users group: its preferences come from env.agent_interests (labels or a matrix) or,
    without them, are drawn from its seed (``interests_per_agent``, ``interest_decay``,
    ``concentration``, ``topic_block``, ``outside``) over env.topics; the runner then gives each
    group's drawn rows to the platform."""
    from socialgym.baselines.topic_users import TopicUsers
    from socialgym.recommenders import ParamError

    interests, topics = cfg.env.get("agent_interests"), cfg.env.get("topics", FeedConfig.topics)
    taken = {"preferences", "layout", "n_agents", "agent_ids", "n_topics"}
    if interests is not None:
        taken |= {"interests_per_agent", "interest_decay", "topic_block", "outside"}
    allowed = [k for k in inspect.signature(TopicUsers).parameters if k not in taken]
    unknown = sorted(set(params) - set(allowed), key=str)
    if unknown:
        raise ConfigError(f"{where}: unknown parameter {unknown[0]!r}; a topic_users policy takes "
                          f"{', '.join(allowed)}")
    try:
        if interests is not None:
            TopicUsers.check_interests(interests, topics, params.get("concentration", 0.8))
            TopicUsers.check_params(**{k: v for k, v in params.items() if k != "concentration"})
            return
        n_topics = min(len(topics), int(cfg.env.get("max_topics", FeedConfig.max_topics)))
        TopicUsers.check_params(n_topics=n_topics, **params)
    except ParamError as exc:
        raise ConfigError(f"{where}.{exc}") from None
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{where}: {exc}") from None
    k, block = params.get("interests_per_agent", 1), params.get("topic_block") or (0, n_topics)
    if k > block[1] - block[0]:
        raise ConfigError(f"{where}.interests_per_agent = {k} exceeds the {block[1] - block[0]} topics "
                          + ("of env.topics" if params.get("topic_block") is None else "of its topic_block"))


def _check_social_users(cfg: ExperimentConfig, params: dict, where: str) -> None:
    """What the runner's SocialUsers would refuse: its keywords and ``population`` (a bundled
    name or a JSON file, which the other keywords override)."""
    from socialgym.baselines.social_users import SocialUsers, load_population
    from socialgym.recommenders import ParamError

    taken = {"preferences", "layout", "n_agents", "agent_ids", "n_topics"}
    allowed = [k for k in inspect.signature(SocialUsers).parameters if k not in taken] + ["population"]
    unknown = sorted(set(params) - set(allowed), key=str)
    if unknown:
        raise ConfigError(f"{where}: unknown parameter {unknown[0]!r}; a social_users policy takes {', '.join(allowed)}")
    params = dict(params)
    source = params.pop("population", None)
    if source is not None:
        if not isinstance(source, str) or not source.strip():
            raise ConfigError(f"{where}.population must name a bundled population or a .json file, got {show(source)}")
        try:
            params = {**load_population(source), **params}
        except ValueError as exc:
            raise ConfigError(f"{where}.population: {exc}") from None
    interests, topics = cfg.env.get("agent_interests"), cfg.env.get("topics", FeedConfig.topics)
    try:
        if interests is not None:      # labels or a matrix: the preferences are not drawn
            SocialUsers.check_interests(interests, topics, params.get("concentration", 0.8))
            SocialUsers.check_params(**{k: v for k, v in params.items() if k != "concentration"})
            return
        SocialUsers.check_params(**params)
    except ParamError as exc:
        raise ConfigError(f"{where}.{exc}") from None
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{where}: {exc}") from None
    n_topics = min(len(topics), int(cfg.env.get("max_topics", FeedConfig.max_topics)))
    if n_topics < 1:
        raise ConfigError(f"{where}: social_users agents draw their preferences over env.topics, which is empty; "
                          "give env.topics or env.agent_interests")
    k = params.get("interests_per_agent", 1)
    if k > n_topics:
        raise ConfigError(f"{where}.interests_per_agent = {k} exceeds the {n_topics} topics of env.topics")


TORCH_PARAMS = ("path", "deterministic", "seed")
"""A ``torch`` / ``distilled`` group's params: ``TorchPolicy.load``'s keywords and the model file."""


def _check_torch(params: dict, where: str) -> None:
    unknown = sorted(set(params) - set(TORCH_PARAMS))
    if unknown:
        raise ConfigError(f"{where}: unknown parameter {unknown[0]!r}; allowed: {', '.join(TORCH_PARAMS)}")
    if not isinstance(params.get("deterministic", False), bool):
        raise ConfigError(f"{where}.deterministic must be true or false, got {show(params['deterministic'])}")
    if "seed" in params and (isinstance(params["seed"], bool) or not isinstance(params["seed"], int)
                             or not 0 <= params["seed"] < 2**32):
        raise ConfigError(f"{where}.seed must be an integer in 0..{2**32 - 1}, got {show(params['seed'])}")
    path = params.get("path")
    if not isinstance(path, str) or not path.strip():
        raise ConfigError(f"{where}.path must name a trained model file (model.pt), got {show(path)}")
    try:
        exists = Path(path).is_file()
    except (OSError, ValueError):
        exists = False
    if not exists:
        raise ConfigError(f"{where}.path: {show(path)} is not a file")


def _check_llm(params: dict, where: str) -> None:
    reserved = sorted(set(params) & set(LLM_PARAMS_RESERVED))
    if reserved:
        raise ConfigError(f"{where}: {', '.join(reserved)} {'is' if len(reserved) == 1 else 'are'} set by the runner")
    try:
        from socialgym.agents.llm_policy import LLMPolicy
        from socialgym.recommenders import ParamError
    except ImportError:                             # the llm extra is missing: the runner says so
        return
    try:
        LLMPolicy.check_params(**params)
    except ParamError as exc:
        raise ConfigError(f"{where}.{_exc_text(exc)}") from None
    except Exception as exc:                        # noqa: BLE001 -- any check's complaint
        raise ConfigError(f"{where}: {_exc_text(exc)}") from None


_PERSONA_CACHE: dict = {}


def check_personas(cfg: ExperimentConfig) -> None:
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


