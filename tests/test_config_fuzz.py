"""Acceptance fuzz of the config loader and of ``socialgym run``.

Configs are built from the config schema — the dataclasses' fields (``ExperimentConfig``'s
sections, ``FeedConfig`` for ``env`` with its ``ties``/``rewards`` groups, ``PolicyConfig`` and
``PolicyGroup``, ``LLMConfig``, ``LoggingConfig``/``WandbConfig``, ``RunConfig``,
``PersonaConfig``, the sweep) — by mutating a valid config: field-aware values near the valid
ones, wrong types, negatives, huge numbers, NaN/inf, empty strings, lists instead of maps,
nulls, unknown keys, whole sections replaced. Every case must end in a config (``load_config``
returns, and the config it writes back loads again) or a one-line ``ConfigError`` — never
another exception. The CLI-level fuzz runs the configs that load, forced tiny (at most 6
agents, 2 rounds, scripted policies only), for real: exit status 0, or 2 with one line on
stderr. Deterministic (``derandomize=True``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from socialgym.cli import main
from socialgym.config import REWARD_NAMES, FeedConfig
from socialgym.experiments import ConfigError, load_config
from socialgym.experiments.define import (ENV_GROUPS, ENV_RESERVED, MAX_MESSAGE_CHARS, LLMConfig, LoggingConfig,
                                         PersonaConfig, PolicyConfig, PolicyGroup, RunConfig, WandbConfig,
                                         dump_yaml, to_dict)
from socialgym.recommenders import REGISTRY, RERANKERS

# ---------------------------------------------------------------------------------- the schema
GROUPED = {k for keys in ENV_GROUPS.values() for k in keys}
ENV_FIELDS = {f.name: f.type for f in dataclasses.fields(FeedConfig)
              if f.name not in ENV_RESERVED and f.name not in GROUPED}
GROUP_FIELDS = {group: {f.name: f.type for f in dataclasses.fields(FeedConfig) if f.name in keys}
                for group, keys in ENV_GROUPS.items()}
SECTIONS = {
    "env": ENV_FIELDS,
    "env.ties": GROUP_FIELDS["ties"],
    "env.rewards": GROUP_FIELDS["rewards"],
    "policy": {f.name: f.type for f in dataclasses.fields(PolicyConfig) if f.name != "groups"},
    "llm": {f.name: f.type for f in dataclasses.fields(LLMConfig)},
    "logging": {f.name: f.type for f in dataclasses.fields(LoggingConfig) if f.name != "wandb"},
    "logging.wandb": {f.name: f.type for f in dataclasses.fields(WandbConfig)},
    "run": {f.name: f.type for f in dataclasses.fields(RunConfig)},
    "personas": {f.name: f.type for f in dataclasses.fields(PersonaConfig)},
}
GROUP_KEYS = {f.name: f.type for f in dataclasses.fields(PolicyGroup)}

BASE = {
    "seed": 3,
    "env": {"n_agents": 4, "max_rounds": 1, "n_actions": 1, "recommender": "random", "sentiment": "tone",
            "feed_size": 3, "vote_feed_size": 2},
    "policy": {"kind": "random"},
    "logging": {"report": False, "progress": False},
}

SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-10, 10), st.floats(-2, 2, allow_nan=False),
                    st.text(max_size=6))
JUNK = st.one_of(
    st.none(), st.booleans(),
    st.integers(-2**70, 2**70),
    st.sampled_from([0, -1, 1, 2, 10**12, 2**63, -10**9]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([float("nan"), float("inf"), -float("inf"), -0.5, 1e308]),
    st.text(max_size=12), st.just(""), st.just("x" * 300),
    st.lists(SCALARS, max_size=4),
    st.dictionaries(st.text(max_size=6), SCALARS, max_size=3),
    st.sampled_from(["climate-change", "random", "mf", "llm", "greedy", "nope", "tone", "vader", "auto",
                     "offline", "local", "ray", "strict", "lenient", "logistic", "http://127.0.0.1:9/v1"]),
)
FLOATS = st.one_of(st.floats(-1, 2), st.sampled_from([0.0, 0.5, 1.0, 1e-9]), st.floats(allow_nan=True,
                                                                                     allow_infinity=True))
INTS = st.one_of(st.integers(-2, 12), st.sampled_from([0, 1, 100, 10**6, 10**12]), st.integers(-2**64, 2**64))
REWARD_ROW = st.one_of(st.just([0.2] * 5), st.just([1, 0, 0, 0, 0]), st.lists(FLOATS, min_size=4, max_size=6),
                       st.dictionaries(st.sampled_from(REWARD_NAMES + ("FOO",)), FLOATS, max_size=5),
                       st.just({"SOC": 0.5, "INF": 0.5, "PRE": 0, "COORD": 0, "EMO": 0}))
RERANK_STEP = st.fixed_dictionaries(
    {"kind": st.sampled_from(sorted(RERANKERS) + ["nope"])},
    optional={"n": INTS, "every": INTS, "start_round": INTS, "strength": FLOATS, "overfetch": INTS,
              "share": FLOATS, "n_head": INTS, "n_tail": INTS, "phases": st.lists(st.sampled_from(["act", "vote", "x"])),
              "stances": st.lists(st.sampled_from(["a", "b", None]), max_size=7)})
TOPICS = st.one_of(st.lists(st.sampled_from(["a", "b", "c", "A ", "climate", "", " "]), max_size=5),
                   st.lists(st.text(max_size=70), max_size=3))

FIELD_VALUES = {
    "recommender": st.sampled_from(sorted(REGISTRY) + ["nope", "mf"]),
    "recommender_kwargs": st.one_of(st.dictionaries(st.sampled_from(["half_life", "window", "dim", "epochs",
                                                                     "bogus", "recency_weight"]), INTS, max_size=2),
                                    st.just({"components": {"popularity": 0.5, "topic_affinity": 0.5}})),
    "rerank": st.one_of(st.lists(RERANK_STEP, max_size=2), RERANK_STEP),
    "topics": TOPICS,
    "agent_interests": st.one_of(st.lists(st.sampled_from(["a", "b"]), max_size=7),
                                 st.lists(st.lists(FLOATS, min_size=2, max_size=2), max_size=5)),
    "agent_groups": st.lists(st.sampled_from(["x", "y", 1]), max_size=7),
    "lambdas": st.one_of(REWARD_ROW, st.lists(REWARD_ROW, max_size=5)),
    "evidence_weights": st.dictionaries(st.sampled_from(["bias", "nov", "appr", "rec", "aff", "zzz"]), FLOATS,
                                        max_size=3),
    "tie_scorer": st.one_of(st.none(), st.just("logistic"), st.just({"kind": "logistic", "nov": 2.0}),
                            st.just({"kind": "llm", "model": "m"}), st.just({"kind": "x"})),
    "seed_graph": st.lists(st.lists(st.sampled_from([0, 0.5, 1, 2]), min_size=4, max_size=4), min_size=4,
                           max_size=4),
    "sentiment": st.sampled_from(["tone", "vader", "nope"]),
    "invalid_actions": st.sampled_from(["strict", "lenient", "maybe"]),
    "kind": st.sampled_from(["random", "greedy", "llm", "torch", "smart"]),
    "structured": st.sampled_from(["auto", "json_schema", "json_object", "prompt", "xml"]),
    "mode": st.sampled_from(["online", "offline", "disabled", "loud"]),
    "backend": st.sampled_from(["local", "ray", "slurm"]),
    "source": st.sampled_from(["climate-change", "good.json", "bad.json", "few.csv", "missing.json",
                               "persona.yaml", "utf16.json", ""]),
    "params": st.one_of(st.dictionaries(st.sampled_from(["mention_prob", "b", "seed", "generation", "text_chars",
                                                         "max_users", "memory", "path", "bogus"]), JUNK, max_size=2),
                        st.just({}), st.just({"mention_prob": 0.3}), st.just({"b": 0.5})),
    "base_url": st.sampled_from(["http://127.0.0.1:9/v1", "https://x.example/v1", "ftp://x", "", "notaurl"]),
}
SWEEP_KEYS = ["env.recommender", "env.n_agents", "env.ties.xi", "policy.kind", "policy.coach", "seed",
              "env.topics", "personas.source", "llm.temperature", "run.replicates", "env", "nonsense.key",
              "env.n_agnets", "logging.events"]


def typed_value(name: str, hint: str, junk: bool = True):
    """A value for the field: mostly of its type and near the valid range, sometimes junk."""
    if name in FIELD_VALUES:
        special = FIELD_VALUES[name]
    elif "bool" in hint:
        special = st.booleans()
    elif "int" in hint:
        special = INTS
    elif "float" in hint:
        special = FLOATS
    elif "tuple" in hint:
        special = st.lists(st.text(max_size=8), max_size=3)
    elif "str" in hint:
        special = st.text(max_size=10)
    else:
        special = SCALARS
    return st.one_of(special, special, JUNK) if junk else special


@st.composite
def mutation(draw, gentle: bool = False):
    """One change to a config. ``gentle``: only field values of the field's type (deeper cases:
    more of them load, and reach the sweep, recommender, policy and persona checks)."""
    what = "set" if gentle else draw(st.sampled_from(["set", "set", "set", "set", "delete", "unknown", "section",
                                                      "sweep", "groups", "personas", "top"]))
    if what in ("set", "delete", "unknown"):
        section = draw(st.sampled_from(sorted(SECTIONS)))
        fields = SECTIONS[section]
        key = draw(st.sampled_from(sorted(fields))) if what != "unknown" else draw(st.text(min_size=1, max_size=8))
        value = draw(typed_value(key, fields.get(key, "Any"), junk=not gentle))
        return what, section, key, value
    if what == "section":
        return what, draw(st.sampled_from(["env", "policy", "llm", "logging", "run", "sweep", "personas",
                                           "env.ties", "logging.wandb"])), None, draw(JUNK)
    if what == "sweep":
        key = draw(st.sampled_from(SWEEP_KEYS))
        last = key.split(".")[-1]
        hint = next((fields[last] for fields in SECTIONS.values() if last in fields), "Any")
        values = draw(st.one_of(st.lists(typed_value(last, hint), min_size=1, max_size=3), JUNK))
        return what, "sweep", key, values
    if what == "groups":
        groups = draw(st.lists(st.fixed_dictionaries({}, optional={
            k: typed_value(k, h) for k, h in GROUP_KEYS.items()}), min_size=0, max_size=3))
        return what, "policy", "groups", groups if draw(st.booleans()) else draw(JUNK)
    if what == "personas":
        return what, None, None, draw(st.one_of(FIELD_VALUES["source"], st.fixed_dictionaries(
            {"source": FIELD_VALUES["source"]}, optional={"survey": st.booleans()}), JUNK))
    return what, None, draw(st.sampled_from(["seed", "colour", "env", "sweep"])), draw(JUNK)


def apply(raw: dict, m) -> None:
    what, section, key, value = m
    if what == "top":
        raw[key] = value
        return
    if what == "personas":
        raw["personas"] = value
        return
    if what == "groups":
        raw.setdefault("policy", {})
        if isinstance(raw["policy"], dict):
            raw["policy"]["groups"] = value
        return
    parts = section.split(".")
    node = raw
    for part in parts:
        if not isinstance(node, dict):
            return
        if what == "section" and part == parts[-1]:
            node[part] = value
            return
        if not isinstance(node.get(part), dict):
            node[part] = {}
        node = node[part]
    if what == "delete":
        node.pop(key, None)
    else:
        node[key] = value


@st.composite
def configs(draw):
    raw = json.loads(json.dumps(BASE))
    gentle = draw(st.booleans())
    for m in draw(st.lists(mutation(gentle), min_size=1, max_size=4)):
        apply(raw, m)
    if gentle and draw(st.booleans()):         # and a sweep over a field, of values of its type
        apply(raw, ("sweep", "sweep", *_sweep_entry(draw)))
    return raw


def _sweep_entry(draw):
    key = draw(st.sampled_from(SWEEP_KEYS))
    last = key.split(".")[-1]
    hint = next((fields[last] for fields in SECTIONS.values() if last in fields), "Any")
    return key, draw(st.lists(typed_value(last, hint, junk=False), min_size=1, max_size=3))


# ---------------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def folder():
    """Persona files the configs may name (relative to the config file, written here too)."""
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        (d / "good.json").write_text(json.dumps([{"name": f"P{i}", "big_five": {"E": 3}} for i in range(8)]))
        (d / "bad.json").write_text(json.dumps([{"name": "P", "big_five": {"O": 9}}]))
        (d / "few.csv").write_text("name,E\nAna,3\nBen,4\n")
        (d / "persona.yaml").write_text("- name: Ana\n")
        (d / "utf16.json").write_bytes(json.dumps([{"name": "P"}]).encode("utf-16"))
        yield d


def dump(raw: dict) -> str:
    return yaml.safe_dump(raw, sort_keys=False, allow_unicode=True)


def check_loads_or_config_error(path: Path):
    try:
        cfg = load_config(path)
    except ConfigError as exc:
        message = str(exc)
        assert message and "\n" not in message and len(message) <= MAX_MESSAGE_CHARS, message
        return None
    # what a run writes back (config.yaml) must load again, to the same config
    again = path.with_name("again.yaml")
    dump_yaml(cfg, again)
    assert to_dict(load_config(again)) == to_dict(cfg)
    return cfg


# ---------------------------------------------------------------------------------- load-level fuzz
@settings(max_examples=300, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])
@pytest.mark.slow
@given(raw=configs())
def test_load_config_returns_or_raises_one_line_config_error(folder, raw):
    path = folder / "c.yaml"
    path.write_text(dump(raw))
    try:
        check_loads_or_config_error(path)
    except ConfigError:
        raise
    except AssertionError:
        raise
    except Exception as exc:     # anything else is the bug this test exists for
        pytest.fail(f"{type(exc).__name__}: {exc}\nconfig:\n{dump(raw)}")


@settings(max_examples=300, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(text=st.one_of(st.binary(max_size=300).map(lambda b: b.decode("latin-1")),
                      st.text(max_size=200),
                      st.lists(st.sampled_from(["env:", " n_agents: 3", "&a [x]", "*a", "- ", "{", "}", "[", "]",
                                                "<<: *a", "? ", ": ", "!!binary", "!!python/name:os.system",
                                                "seed: 1", "\n", "  ", "'", '"', "#", "---", "...", ".nan"]),
                               max_size=30).map("".join)))
def test_arbitrary_text_is_a_config_or_one_line_error(folder, text):
    path = folder / "t.yaml"
    path.write_bytes(text.encode("utf-8"))
    try:
        check_loads_or_config_error(path)
    except AssertionError:
        raise
    except Exception as exc:
        pytest.fail(f"{type(exc).__name__}: {exc}\ntext: {text!r}")


# ---------------------------------------------------------------------------------- CLI-level fuzz
def mostly(valid, invalid):
    """``valid`` about nine times in ten."""
    return st.integers(0, 9).flatmap(lambda i: invalid if i == 7 else valid)


VALID_TOPICS = st.lists(st.sampled_from(["a", "b", "climate", "sports", "x y"]), min_size=1, max_size=4, unique=True)
VALID_STEP = st.one_of(
    st.fixed_dictionaries({"kind": st.just("random_replacement"), "n": st.integers(0, 3)},
                          optional={"every": st.integers(1, 2), "start_round": st.integers(1, 2),
                                    "phases": st.sampled_from([["act"], ["act", "vote"]])}),
    st.fixed_dictionaries({"kind": st.just("tail_quota_transfer")},
                          optional={"share": st.floats(0, 1), "n_head": st.integers(1, 2), "n_tail": st.integers(1, 2),
                                    "overfetch": st.integers(1, 3)}),
    st.fixed_dictionaries({"kind": st.just("stance_penalty"), "stances": st.just(["a", "b"] * 3)},
                          optional={"strength": st.floats(0, 2), "overfetch": st.integers(1, 3)}))
TINY_ENV = {
    "n_actions": st.integers(1, 3),
    "feed_size": st.integers(1, 5), "vote_feed_size": st.integers(1, 5), "dm_inbox_size": st.integers(1, 5),
    "max_topics": st.integers(1, 6), "max_text_chars": st.sampled_from([0, 10, 100, 10_000]),
    "topics": mostly(VALID_TOPICS, TOPICS),
    "recommender": mostly(st.sampled_from(sorted(REGISTRY)), st.just("nope")),
    "recommender_kwargs": st.dictionaries(st.sampled_from(["half_life", "window", "recency_weight"]),
                                          st.integers(1, 3), max_size=1),
    "rerank": mostly(st.lists(VALID_STEP, max_size=2), st.lists(RERANK_STEP, max_size=2)),
    "agent_interests": FIELD_VALUES["agent_interests"], "agent_groups": FIELD_VALUES["agent_groups"],
    "soc_strategy": st.integers(0, 3), "soc_strategy_weight": st.floats(0.01, 1),
    "exposure_window": st.integers(1, 3), "cocoon_threshold": st.one_of(st.none(), st.floats(0, 2)),
    "exposure_in_infos": st.booleans(), "invalid_actions": st.sampled_from(["strict", "lenient"]),
    "action_masks": st.booleans(), "sentiment": st.sampled_from(["tone", "vader"]),
    "ties": st.fixed_dictionaries({}, optional={"xi": st.floats(0, 0.99), "half_life": st.floats(0.5, 10),
                                                "delta_max": st.floats(0, 1), "b_rec": st.floats(0, 1),
                                                "tie_scorer": st.sampled_from([None, "logistic",
                                                                               {"kind": "logistic", "nov": 2.0}]),
                                                "evidence_weights": FIELD_VALUES["evidence_weights"],
                                                "seed_graph": FIELD_VALUES["seed_graph"]}),
    "rewards": st.fixed_dictionaries({}, optional={"b_soc": st.floats(0, 1), "b_emo": st.floats(-2, 2),
                                                   "lambdas": FIELD_VALUES["lambdas"]}),
}
SCRIPTED_GROUP = st.fixed_dictionaries(
    {"kind": st.sampled_from(["random", "greedy"])},
    optional={"agents": st.integers(1, 3),
              "params": mostly(st.sampled_from([{}, {"mention_prob": 0.5}, {"b": 0.3}]), st.just({"mention_prob": 2})),
              "lambdas": mostly(st.just([0.6, 0.1, 0.1, 0.1, 0.1]), REWARD_ROW)})


@st.composite
def tiny_configs(draw):
    """Configs that run in about a second: 2-6 agents, 1-2 rounds, scripted policies, no LLM, no
    wandb; a few of their env keys drawn (mostly valid), now and then an invalid size."""
    keys = draw(st.lists(st.sampled_from(sorted(TINY_ENV)), max_size=5, unique=True))
    env = {"n_agents": draw(mostly(st.integers(2, 6), st.sampled_from([1, -1, "4", 7]))),
           "max_rounds": draw(mostly(st.integers(1, 2), st.just(0)))}
    env.update({k: draw(TINY_ENV[k]) for k in keys})
    n = env["n_agents"] if isinstance(env["n_agents"], int) and env["n_agents"] > 0 else 2
    if "agent_groups" in env or "agent_interests" in env:     # mostly one label per agent
        labels = st.lists(st.sampled_from(["x", "y", "z"]), min_size=n, max_size=n)
        for key in ("agent_groups", "agent_interests"):
            if key in env:
                env[key] = draw(mostly(labels, st.just(env[key])))
    if draw(st.booleans()):
        groups = draw(st.lists(SCRIPTED_GROUP, min_size=1, max_size=3))
        for i, g in enumerate(groups):
            g["name"] = f"g{i}"
            if i == len(groups) - 1:
                g.pop("agents", None)          # the last group takes the rest
            else:
                g["agents"] = draw(mostly(st.just(1), st.integers(0, 3)))
        policy = {"groups": groups}
    else:
        policy = {"kind": draw(st.sampled_from(["random", "greedy"]))}
    raw = {"seed": draw(st.integers(0, 50)), "env": env, "policy": policy,
           "logging": {"progress": False, "report": draw(st.sampled_from([False] * 9 + [True])),
                       **draw(st.fixed_dictionaries({}, optional={"events": st.booleans(), "ties": st.booleans(),
                                                                  "network_every": st.integers(1, 2)}))}}
    if draw(st.integers(0, 9)) == 0:           # now and then replicates or a two-cell sweep (a process pool)
        if draw(st.booleans()):
            raw["run"] = {"replicates": 2, "workers": 1}
        else:
            raw["run"] = {"workers": 1}
            raw["sweep"] = {"env.ties.xi": [0.1, 0.2]}
    personas = draw(st.sampled_from([None, None, None, "good.json", "climate-change", "few.csv"]))
    if personas is not None:
        raw["personas"] = personas
    return raw


@settings(max_examples=30, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@pytest.mark.slow
@given(raw=tiny_configs())
def test_cli_run_of_tiny_configs_exits_0_or_2_with_one_line(folder, raw):
    with tempfile.TemporaryDirectory(dir=folder) as d:
        path = Path(d) / "c.yaml"
        path.write_text(dump(raw))
        for name in ("good.json", "few.csv"):
            (Path(d) / name).write_bytes((folder / name).read_bytes())
        try:
            cfg = load_config(path)
        except ConfigError:
            cfg = None
        if cfg is not None:                    # what the fuzz promises: tiny, scripted, offline
            assert cfg.env["n_agents"] <= 6 and cfg.env["max_rounds"] <= 2 and not cfg.uses_llm()
            assert cfg.logging.wandb is None and all(g.kind in ("random", "greedy") for g in cfg.policy_groups())
        out, err = io.StringIO(), io.StringIO()
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = main(["run", str(path), "--out", str(Path(d) / "out"), "--quiet"])
        except BaseException as exc:           # noqa: BLE001 -- the finding, with its reproducer
            pytest.fail(f"socialgym run raised {type(exc).__name__}: {exc}\nconfig:\n{dump(raw)}")
        lines = err.getvalue().strip().splitlines()
        if cfg is None:
            assert code == 2 and not (Path(d) / "out").exists()
        assert code in (0, 2), f"exit {code}\nconfig:\n{dump(raw)}"
        if code == 2:
            assert len(lines) == 1 and lines[0].startswith("socialgym: error: "), \
                f"stderr: {err.getvalue()!r}\nconfig:\n{dump(raw)}"
        else:
            assert (Path(d) / "out" / "summary.json").exists() or (Path(d) / "out" / "sweep.json").exists()
