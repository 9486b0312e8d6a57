"""Config hardening: every bad config is a one-line ConfigError naming the key, raised before any
work starts — through ``load_config`` and through ``socialgym run`` (exit status 2, one line on
stderr, the --out directory not created). One test (or parametrised family) per reported case:

1. unknown recommender / rerank kinds; 2. persona sources; 3. binary and UTF-16 files;
4. ranges of every numeric field; 5. upper size limits; 6. sweep cells validated at load;
7. empty files, null sections, duplicate keys, nonsense llm values, NaN/inf anywhere;
8. topic lists; 9. YAML alias bombs, recursion, depth and size bounds, message length;
10. ``--set`` overrides through the same checks.
"""

from __future__ import annotations

import dataclasses
import json
import random
import time
from pathlib import Path

import pytest
import yaml

from socialgym import config as feed_config
from socialgym.cli import main
from socialgym.experiments import ConfigError, load_config
from socialgym.experiments import define as exp_config
from socialgym.experiments.define import MAX_MESSAGE_CHARS, MAX_SHOWN_CHARS

BASE = {
    "seed": 1,
    "env": {"n_agents": 4, "max_rounds": 1, "recommender": "random", "sentiment": "tone"},
    "policy": {"kind": "random"},
    "logging": {"report": False, "progress": False},
}


def write(path: Path, data) -> Path:
    if isinstance(data, bytes):
        path.write_bytes(data)
    elif isinstance(data, str):
        path.write_text(data)
    else:
        path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def merged(**sections) -> dict:
    raw = json.loads(json.dumps(BASE))
    for key, value in sections.items():
        if isinstance(value, dict) and isinstance(raw.get(key), dict):
            raw[key].update(value)
        else:
            raw[key] = value
    return raw


def fails(tmp_path: Path, capsys, data, *overrides: str, words=()) -> str:
    """The config fails in load_config and in the CLI alike; returns the message."""
    path = data if isinstance(data, Path) else write(tmp_path / "c.yaml", data)
    with pytest.raises(ConfigError) as err:
        load_config(path, list(overrides))
    message = str(err.value)
    assert "\n" not in message and len(message) <= MAX_MESSAGE_CHARS, message
    for w in words:
        assert w in message, message
    out = tmp_path / "out"
    argv = ["run", str(path), "--out", str(out), "--quiet"]
    for item in overrides:
        argv += ["--set", item]
    assert main(argv) == 2
    stderr = capsys.readouterr().err
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("socialgym: error: "), stderr
    assert not out.exists()
    return message


# ---------------------------------------------------------------------------------- 1. registry names
def test_unknown_recommender_kind(tmp_path, capsys):
    fails(tmp_path, capsys, merged(env={"recommender": "nope"}),
          words=("env.recommender", "nope", "chronological"))


def test_unknown_rerank_kind(tmp_path, capsys):
    fails(tmp_path, capsys, merged(env={"rerank": [{"kind": "nope"}]}),
          words=("env.rerank[0].kind", "nope", "random_replacement"))


@pytest.mark.parametrize("env, words", [
    ({"rerank": [{"n": 2}]}, ("env.rerank[0]", "kind")),
    ({"rerank": "random_replacement"}, ("env.rerank[0]",)),
    ({"rerank": 5}, ("env.rerank", "list")),
    ({"rerank": [{"kind": "random_replacement", "n": 2, "bogus": 1}]}, ("env.rerank[0]", "bogus")),
    ({"rerank": [{"kind": "random_replacement", "n": -1}]}, ("env.rerank[0]", "n >= 0")),
    ({"rerank": [{"kind": "random_replacement", "n": 10**9}]}, ("env.rerank[0].n", "at most")),
    ({"rerank": [{"kind": "stance_penalty", "stances": ["a", "b"]}]}, ("env.rerank[0].stances", "2 labels")),
    ({"recommender": "popularity", "recommender_kwargs": {"half_lfe": 2}}, ("env.recommender_kwargs", "half_lfe")),
    ({"recommender": "popularity", "recommender_kwargs": {"half_life": -1}}, ("env.recommender_kwargs", "half_life")),
    ({"recommender": None}, ("env.recommender",)),
    ({"recommender": 7}, ("env.recommender",)),
])
def test_recommender_and_rerank_parameters(tmp_path, capsys, env, words):
    fails(tmp_path, capsys, merged(env=env), words=words)


def test_registered_recommenders_and_rerankers_load(tmp_path):
    cfg = load_config(merged(env={"recommender": "popularity", "recommender_kwargs": {"half_life": 3},
                                  "rerank": [{"kind": "random_replacement", "n": 1},
                                             {"kind": "stance_penalty", "stances": [0, 1, 0, 1]}]}))
    assert cfg.env["recommender"] == "popularity"


# ---------------------------------------------------------------------------------- 2. personas
PERSONA = {"name": "Ana", "big_five": {"E": 3}}


def personas_file(tmp_path: Path, rows, name="p.json") -> Path:
    path = tmp_path / name
    path.write_text(rows if isinstance(rows, str) else json.dumps(rows))
    return path


def test_persona_file_missing(tmp_path, capsys):
    fails(tmp_path, capsys, merged(personas={"source": "nothere.json"}),
          words=("personas.source", "nothere.json", "does not exist"))


@pytest.mark.parametrize("content, words", [
    ("[{\"name\": \"Ana\",", ("personas.source", "not valid JSON", "line 1")),
    ("{\"name\": \"Ana\"}", ("personas.source", "JSON list")),
    ("[]", ("personas.source", "no personas")),
    ("[\"Ana\"]", ("personas.source", "item 0", "object")),
    (json.dumps([PERSONA] * 3 + [{"name": "Dev", "big_five": {"E": 9}}]),
     ("personas.source", "item 3", "big_five['E'] must be a number in [1, 5]", "9")),
    (json.dumps([PERSONA] * 3 + [{"name": "Dev", "big_five": {"O": 3}}]),
     ("personas.source", "item 3", "big_five['O'] is not a trait")),
    (json.dumps([PERSONA, {"name": "Ben", "big_five": {"E": True}}]), ("item 1", "big_five['E']")),
    (json.dumps([PERSONA, {"name": "Ben", "lambdas": [0.2] * 5}]), ("item 1", "lambdas")),
    (json.dumps([PERSONA, {"name": "Ben", "interests": "climate"}]), ("item 1", "interests")),
    (json.dumps([PERSONA, {"name": "Ben", "description": ["x"]}]), ("item 1", "description")),
    (json.dumps([PERSONA, {"name": "Ben", "favourite": "tea"}]), ("item 1", "favourite")),
    (json.dumps([PERSONA, {"name": ""}]), ("item 1", "name")),
])
def test_persona_file_malformed_or_bad_fields(tmp_path, capsys, content, words):
    personas_file(tmp_path, content)
    fails(tmp_path, capsys, merged(personas={"source": "p.json"}), words=words)


@pytest.mark.parametrize("content, words", [
    ("name,E\nAna,3\nBen,9\n", ("personas.source", "row 3", "big_five")),
    ("name,E\nAna,3\nBen,high\n", ("personas.source", "row 3", "high")),
    ("name,stanse\nAna,x\n", ("personas.source", "stanse")),
    ("name,E\nAna,3,extra\n", ("personas.source", "row 2", "more cells")),
    ("name\n", ("personas.source", "no personas")),
])
def test_persona_csv_problems(tmp_path, capsys, content, words):
    personas_file(tmp_path, content, "p.csv")
    fails(tmp_path, capsys, merged(personas="p.csv"), words=words)


def test_persona_file_wrong_extension_not_utf8_or_a_directory(tmp_path, capsys):
    personas_file(tmp_path, "- name: Ana\n", "p.yaml")
    fails(tmp_path, capsys, merged(personas={"source": "p.yaml"}), words=("personas.source", ".json or .csv"))
    (tmp_path / "u.json").write_bytes(json.dumps([PERSONA]).encode("utf-16"))
    fails(tmp_path, capsys, merged(personas={"source": "u.json"}), words=("personas.source", "not UTF-8"))
    (tmp_path / "dir.json").mkdir()
    fails(tmp_path, capsys, merged(personas={"source": "dir.json"}), words=("personas.source", "not a file"))


def test_too_few_personas_for_the_agents(tmp_path, capsys):
    personas_file(tmp_path, [{"name": f"P{i}"} for i in range(3)])
    fails(tmp_path, capsys, merged(personas="p.json"), words=("personas.source", "3 personas", "n_agents = 4"))
    # the bundled set has 30
    fails(tmp_path, capsys, merged(env={"n_agents": 31}, personas="climate-change"),
          words=("personas.source", "30 personas", "31"))


def test_a_good_persona_file_loads_relative_to_the_config(tmp_path):
    personas_file(tmp_path, [{"name": f"P{i}", "big_five": {"E": 1 + i}} for i in range(4)])
    cfg = load_config(write(tmp_path / "c.yaml", merged(personas={"source": "p.json"})))
    assert cfg.personas.source == str((tmp_path / "p.json").resolve())


# ---------------------------------------------------------------------------------- 3. binary files
def test_binary_config_file(tmp_path, capsys):
    data = bytes(random.Random(0).getrandbits(8) for _ in range(512))
    fails(tmp_path, capsys, write(tmp_path / "c.yaml", data), words=("c.yaml", "not UTF-8"))


def test_utf16_config_file(tmp_path, capsys):
    fails(tmp_path, capsys, write(tmp_path / "c.yaml", yaml.safe_dump(BASE).encode("utf-16")),
          words=("not UTF-8", "0xff"))


def test_control_characters_and_nul(tmp_path, capsys):
    fails(tmp_path, capsys, write(tmp_path / "c.yaml", b"seed: 1\x00\n"), words=("not valid YAML",))
    fails(tmp_path, capsys, merged(run={"name": "a\x1b[31mb"}), words=("run.name", "control character"))


# ---------------------------------------------------------------------------------- 4. numeric ranges
@pytest.mark.parametrize("key, value", [
    ("logging.wandb.sample_posts", -5), ("logging.wandb.sample_posts", 10**6),
    ("logging.wandb.graph_every", -1), ("logging.network_every", 0), ("logging.network_every", 10**7),
    ("run.replicates", 0), ("run.replicates", 10**6), ("run.workers", 0), ("run.workers", 10**5),
    ("llm.max_concurrency", 0), ("llm.max_concurrency", 10**6), ("llm.timeout", 0), ("llm.timeout", -1),
    ("llm.timeout", 10**9), ("llm.max_retries", -1), ("llm.max_retries", 10**4), ("llm.temperature", -0.1),
    ("llm.temperature", 2.5), ("llm.max_tokens", 0), ("llm.max_tokens", -5), ("llm.max_tokens", 10**9),
    ("llm.max_repairs", -1), ("llm.n_ctx", 16), ("llm.n_ctx", 10**9),
    ("seed", -1), ("seed", 2**40), ("policy.params.mention_prob", 1.5), ("policy.params.seed", -3),
    ("env.ties.xi", 1.0), ("env.ties.half_life", 0), ("env.rewards.b_soc", 2), ("env.soc_strategy", -1),
    ("env.exposure_window", 0), ("env.cocoon_threshold", -1),
])
def test_every_numeric_field_has_a_range(tmp_path, capsys, key, value):
    data = merged(logging={"wandb": {"project": "p"}} if key.startswith("logging.wandb") else {})
    message = fails(tmp_path, capsys, data, f"{key}={value}")
    assert key.split(".")[-1] in message, message


def test_the_range_table_covers_every_numeric_field():
    """Every int/float field of the typed sections is in RANGES (or is a seed, checked apart)."""
    sections = {"llm": exp_config.LLMConfig, "logging": exp_config.LoggingConfig,
                "logging.wandb": exp_config.WandbConfig, "run": exp_config.RunConfig,
                "policy.groups[*]": exp_config.PolicyGroup}
    missing = [f"{where}.{f.name}" for where, cls in sections.items() for f in dataclasses.fields(cls)
               if f.type.replace(" | None", "") in ("int", "float") and f"{where}.{f.name}" not in exp_config.RANGES]
    assert missing == []


def test_sweep_and_replicate_counts_are_bounded(tmp_path, capsys):
    sweep = {"env.ties.xi": [0.1, 0.2, 0.3, 0.4], "env.feed_size": list(range(1, 20)),
             "env.vote_feed_size": list(range(1, 20))}
    fails(tmp_path, capsys, merged(sweep=sweep), words=("sweep", "MAX_SWEEP_CELLS"))
    fails(tmp_path, capsys, merged(run={"replicates": 100}, sweep={"env.feed_size": list(range(1, 200))}),
          words=("MAX_JOBS",))
    fails(tmp_path, capsys, merged(seed=2**32 - 2, run={"replicates": 5}), words=("seed", "replicate"))


# ---------------------------------------------------------------------------------- 5. size limits
@pytest.mark.parametrize("key, value, limit", [
    ("n_agents", 10**12, "MAX_AGENTS"),
    ("n_agents", feed_config.MAX_AGENTS + 1, "MAX_AGENTS"),
    ("max_rounds", 10**9, "MAX_ROUNDS"),
    ("n_actions", 10**6, "MAX_ACTIONS"),
    ("feed_size", 10**8, "MAX_FEED_SIZE"),
    ("vote_feed_size", 10**8, "MAX_FEED_SIZE"),
    ("dm_inbox_size", 10**8, "MAX_FEED_SIZE"),
    ("max_topics", 10**9, "MAX_TOPICS"),
    ("max_text_chars", 10**12, "MAX_TEXT_CHARS"),
    ("exposure_window", 10**9, "MAX_ROUNDS"),
])
def test_sizes_have_documented_upper_limits(tmp_path, capsys, key, value, limit):
    t0 = time.perf_counter()
    message = fails(tmp_path, capsys, merged(env={key: value}), words=(f"env.{key}", limit))
    assert str(getattr(feed_config, limit)) in message
    assert time.perf_counter() - t0 < 30       # refused before anything of that size is made (no hang)


def test_topic_count_and_length_limits(tmp_path, capsys):
    many = [f"t{i}" for i in range(feed_config.MAX_TOPICS + 1)]
    fails(tmp_path, capsys, merged(env={"topics": many}), words=("env.topics", "MAX_TOPICS"))
    long = "x" * (feed_config.MAX_TOPIC_CHARS + 1)
    fails(tmp_path, capsys, merged(env={"topics": ["a", long]}), words=("env.topics", "MAX_TOPIC_CHARS"))


def test_the_limits_are_generous(tmp_path):
    cfg = load_config(merged(env={"n_agents": feed_config.MAX_AGENTS, "max_rounds": feed_config.MAX_ROUNDS,
                                  "feed_size": feed_config.MAX_FEED_SIZE,
                                  "max_text_chars": feed_config.MAX_TEXT_CHARS}))
    assert cfg.env["n_agents"] == 10_000_000


# ---------------------------------------------------------------------------------- 6. sweep cells
def test_every_sweep_cell_is_validated_before_anything_runs(tmp_path, capsys):
    personas_file(tmp_path, [{"name": f"P{i}"} for i in range(4)])
    personas_file(tmp_path, [{"name": "P0", "big_five": {"E": 7}}], "bad.json")
    fails(tmp_path, capsys, merged(sweep={"personas.source": ["p.json", "bad.json"]}),
          words=("sweep cell", "personas.source", "big_five['E']"))
    fails(tmp_path, capsys, merged(sweep={"env.recommender": ["random", "nope"]}),
          words=("sweep cell", "env.recommender", "nope"))
    fails(tmp_path, capsys, merged(sweep={"env.rerank": [[], [{"kind": "nope"}]]}),
          words=("sweep cell", "rerank"))
    fails(tmp_path, capsys, merged(sweep={"env.n_agents": [4, 10**9]}), words=("sweep cell", "MAX_AGENTS"))
    fails(tmp_path, capsys, merged(sweep={"policy.params.mention_prob": [0.1, 7]}), words=("sweep cell", "mention_prob"))


def test_swept_persona_files_resolve_against_the_config_folder(tmp_path, monkeypatch):
    (tmp_path / "sub").mkdir()
    personas_file(tmp_path / "sub", [{"name": f"P{i}"} for i in range(4)], "a.json")
    personas_file(tmp_path / "sub", [{"name": f"Q{i}"} for i in range(4)], "b.json")
    monkeypatch.chdir(tmp_path)
    cfg = load_config(write(tmp_path / "sub" / "c.yaml", merged(sweep={"personas.source": ["a.json", "b.json"]})))
    assert [Path(v).name for v in cfg.sweep["personas.source"]] == ["a.json", "b.json"]
    assert all(Path(v).is_absolute() for v in cfg.sweep["personas.source"])


def test_string_sweep_values_are_not_reparsed_as_yaml():
    from socialgym.experiments.define import with_values
    cfg = load_config(merged(logging={"wandb": {"project": "p"}}, sweep={"logging.wandb.name": ["a: b", "null"]}))
    names = [with_values(cfg, {"logging.wandb.name": v}).logging.wandb.name for v in ("a: b", "null")]
    assert names == ["a: b", "null"]


# ---------------------------------------------------------------------------------- 7. empty / null / duplicates / llm
@pytest.mark.parametrize("text, words", [
    ("", ("is empty",)),
    ("# only a comment\n", ("is empty",)),
    ("---\n", ("is empty",)),
    ("env:\n", ("env is empty (null)",)),
    ("policy:\n", ("policy is empty",)),
    ("logging:\n", ("logging is empty",)),
    ("run:\n", ("run is empty",)),
    ("sweep:\n", ("sweep is empty",)),
    ("personas:\n", ("personas is empty",)),
    ("seed:\n", ("seed is empty",)),
    ("env: {ties: }\n", ("env.ties",)),
    ("env: {n_agents: }\n", ("n_agents",)),
    ("env: {topics: }\n", ("topics",)),
    ("policy: {groups: }\n", ("policy.groups is empty",)),
    ("- just\n- a list\n", ("mapping of sections",)),
])
def test_empty_files_and_null_sections(tmp_path, capsys, text, words):
    fails(tmp_path, capsys, write(tmp_path / "c.yaml", text), words=words)


@pytest.mark.parametrize("text, words", [
    ("seed: 1\nseed: 2\n", ("duplicate key 'seed'", "line 2", "first at line 1")),
    ("env:\n  n_agents: 4\n  n_agents: 40\n", ("duplicate key 'n_agents'", "line 3")),
    ("env: {n_agents: 4, max_rounds: 1, n_agents: 5}\n", ("duplicate key 'n_agents'", "column")),
    ("env:\n  n_agents: 4\npolicy: {kind: random}\nenv:\n  n_agents: 5\n", ("duplicate key 'env'", "line 4")),
    ("env: {ties: {xi: 0.1}, xi: 0.2}\n", ("env.xi", "twice")),
])
def test_duplicate_keys(tmp_path, capsys, text, words):
    fails(tmp_path, capsys, write(tmp_path / "c.yaml", text), words=words)


def test_merge_keys_and_small_aliases_still_work(tmp_path):
    text = ("env:\n  <<: &d {n_agents: 4, max_rounds: 1, sentiment: tone}\n  n_agents: 6\n"
            "sweep:\n  env.feed_size: &sizes [2, 3]\n  env.vote_feed_size: *sizes\n")
    cfg = load_config(write(tmp_path / "c.yaml", text))
    assert cfg.env["n_agents"] == 6 and cfg.env["max_rounds"] == 1
    assert list(cfg.sweep["env.vote_feed_size"]) == [2, 3]


@pytest.mark.parametrize("llm, key", [
    ({"temperature": float("nan")}, "llm.temperature"),
    ({"temperature": float("inf")}, "llm.temperature"),
    ({"timeout": -1}, "llm.timeout"),
    ({"timeout": float("inf")}, "llm.timeout"),
    ({"max_tokens": -100}, "llm.max_tokens"),
    ({"max_concurrency": 0}, "llm.max_concurrency"),
    ({"structured": "xml"}, "llm.structured"),
    ({"base_url": "ftp://x", "model": "m"}, "llm.base_url"),
    ({"base_url": "http://x/v1", "model": ""}, "llm.model"),
    ({"api_key_env": "MY KEY"}, "llm.api_key_env"),
    ({"model": 5}, "llm.model"),
])
def test_nonsense_llm_values(tmp_path, capsys, llm, key):
    fails(tmp_path, capsys, merged(llm=llm), words=(key,))


@pytest.mark.parametrize("override, key", [
    ("env.ties.xi=.nan", "env.ties.xi"),
    ("env.ties.delta_max=.inf", "env.ties.delta_max"),
    ("env.rewards.b_emo=-.inf", "env.rewards.b_emo"),
    ("env.evidence_weights={bias: .nan}", "env.evidence_weights.bias"),
    ("policy.params.mention_prob=.nan", "policy.params.mention_prob"),
    ("env.rewards.lambdas=[.nan, 0, 0, 0, 1]", "env.rewards.lambdas[0]"),
    ("env.recommender_kwargs={half_life: .inf}", "env.recommender_kwargs.half_life"),
    ("sweep={env.ties.xi: [0.1, .nan]}", "sweep.env.ties.xi[1]"),
])
def test_nan_and_inf_are_rejected_anywhere(tmp_path, capsys, override, key):
    fails(tmp_path, capsys, BASE, override, words=(key, "finite"))


def test_non_string_keys(tmp_path, capsys):
    fails(tmp_path, capsys, write(tmp_path / "c.yaml", "env: {1: 2}\n"), words=("env", "key 1", "string"))


# ---------------------------------------------------------------------------------- 8. topics
@pytest.mark.parametrize("topics, words", [
    ([], ("env.topics", "must not be empty")),
    (["a", "A "], ("env.topics", "twice")),
    (["a", 5], ("env.topics", "5")),
    (["a", ""], ("env.topics", "non-empty")),
    ("ab", ("env.topics", "list")),
    (["a", "b\nc"], ("env.topics",)),
])
def test_topic_lists(tmp_path, capsys, topics, words):
    fails(tmp_path, capsys, merged(env={"topics": topics}), words=words)


# ---------------------------------------------------------------------------------- 9. YAML bounds
BILLION_LAUGHS = """\
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
"""


def test_billion_laughs_fails_fast_with_a_short_message(tmp_path, capsys):
    t0 = time.perf_counter()
    message = fails(tmp_path, capsys, write(tmp_path / "c.yaml", BILLION_LAUGHS), words=("MAX_YAML_NODES",))
    assert time.perf_counter() - t0 < 10       # not expanded: its 9**9 leaves would take hours
    assert len(message) < 200


def test_alias_bomb_inside_a_real_section(tmp_path, capsys):
    text = "env:\n  topics: &a [x, y, z, w]\n" + "".join(
        f"  k{i}: &a{i} [{', '.join(['*a' if i == 0 else f'*a{i - 1}'] * 8)}]\n" for i in range(8))
    t0 = time.perf_counter()
    fails(tmp_path, capsys, write(tmp_path / "c.yaml", text), words=("MAX_YAML_NODES",))
    assert time.perf_counter() - t0 < 10       # not expanded: 4 * 8**8 leaves


def test_too_many_aliases(tmp_path, capsys):
    text = "env:\n  topics: &t [a]\nsweep:\n  env.topics: [" + ", ".join(["*t"] * 101) + "]\n"
    fails(tmp_path, capsys, write(tmp_path / "c.yaml", text), words=("MAX_YAML_ALIASES", "100"))


def test_recursive_aliases_and_deep_nesting(tmp_path, capsys):
    fails(tmp_path, capsys, write(tmp_path / "c.yaml", "env: &a {x: *a}\n"), words=("recursive alias",))
    fails(tmp_path, capsys, write(tmp_path / "c.yaml", "env: {topics: &a [a, *a]}\n"), words=("recursive alias",))
    fails(tmp_path, capsys, write(tmp_path / "c.yaml", "env: " + "[" * 5000 + "]" * 5000 + "\n"),
          words=("MAX_YAML_DEPTH",))


def test_a_file_over_the_size_limit(tmp_path, capsys):
    text = "# " + "x" * exp_config.MAX_CONFIG_BYTES + "\nseed: 1\n"
    fails(tmp_path, capsys, write(tmp_path / "c.yaml", text), words=("MAX_CONFIG_BYTES",))


def test_unreadable_values(tmp_path, capsys):
    fails(tmp_path, capsys, write(tmp_path / "c.yaml", "seed: " + "9" * 5000 + "\n"), words=("cannot be read",))
    fails(tmp_path, capsys, write(tmp_path / "c.yaml", "seed: 2024-13-40\n"), words=("cannot be read",))
    fails(tmp_path, capsys, write(tmp_path / "c.yaml", "env: !!python/object/apply:os.system [ls]\n"),
          words=("not valid YAML",))


def test_long_values_are_cut_in_messages(tmp_path, capsys):
    message = fails(tmp_path, capsys, merged(policy={"kind": "k" * 100_000}), words=("policy.kind", "…"))
    assert len(message) < 250
    message = fails(tmp_path, capsys, merged(env={"n_agnets_" + "x" * 5000: 1}), words=("unknown key",))
    assert len(message) <= MAX_MESSAGE_CHARS
    message = fails(tmp_path, capsys, merged(env={"topics": ["y" * 10_000]}), words=("env.topics",))
    assert len(message) < 300
    # a value quoted in a message is at most MAX_SHOWN_CHARS long
    assert "k" * (MAX_SHOWN_CHARS + 1) not in fails(tmp_path, capsys, merged(policy={"kind": "k" * 500}))


def test_recursive_mapping_passed_in():
    raw = {"env": {}}
    raw["env"]["self"] = raw
    with pytest.raises(ConfigError, match="MAX_YAML_DEPTH|nested"):
        load_config(raw)


# ---------------------------------------------------------------------------------- 10. --set
def _bomb(levels: int, width: int) -> str:
    """A flow-style alias bomb: ``width ** levels`` leaves from about ``levels * width`` aliases."""
    text = "&l0 [" + ",".join(["lol"] * width) + "]"
    for k in range(1, levels):
        text = f"&l{k} [{text}," + ",".join([f"*l{k - 1}"] * (width - 1)) + "]"
    return text


def test_overrides_go_through_the_same_checks(tmp_path, capsys):
    path = write(tmp_path / "c.yaml", BASE)
    t0 = time.perf_counter()
    fails(tmp_path, capsys, path, "env.topics=" + _bomb(8, 10), words=("--set env.topics", "MAX_YAML_NODES"))
    assert time.perf_counter() - t0 < 10       # not expanded: 10**8 leaves
    fails(tmp_path, capsys, path, "env.topics=[&a x, " + ", ".join(["*a"] * 101) + "]",
          words=("--set env.topics", "MAX_YAML_ALIASES"))
    fails(tmp_path, capsys, path, "env.topics=&a [x, *a]", words=("--set env.topics", "recursive alias"))
    fails(tmp_path, capsys, path, "env.topics=" + "[" * 200 + "]" * 200, words=("MAX_YAML_DEPTH",))
    fails(tmp_path, capsys, path, "env={n_agents: 4, n_agents: 5}", words=("--set env", "duplicate key"))
    fails(tmp_path, capsys, path, "llm.temperature=.nan", words=("llm.temperature", "finite"))
    fails(tmp_path, capsys, path, "env.n_agents=1000000000000", words=("env.n_agents", "MAX_AGENTS"))
    fails(tmp_path, capsys, path, "env.topics=[]", words=("env.topics",))
    fails(tmp_path, capsys, path, "env.recommender=nope", words=("env.recommender",))
    fails(tmp_path, capsys, path, "env=", words=("env is empty",))
    fails(tmp_path, capsys, path, "nokey", words=("--set expects key.path=value",))
    fails(tmp_path, capsys, path, "..=3", words=("dotted key",))
    fails(tmp_path, capsys, path, "run.name=" + "x" * (exp_config.MAX_CONFIG_BYTES + 1), words=("MAX_CONFIG_BYTES",))


def test_plain_text_overrides_still_become_strings(tmp_path):
    cfg = load_config(write(tmp_path / "c.yaml", BASE), ["run.name=a: b: c"])
    assert cfg.run.name == "a: b: c"


def test_run_sweep_validates_every_cell_before_creating_the_directory(tmp_path):
    """A config built in code (not through load_config) is checked cell by cell by run_sweep."""
    from socialgym.experiments.define import FrozenDict
    from socialgym.experiments.run.sweep import run_sweep

    cfg = load_config(BASE)
    bad = dataclasses.replace(cfg, sweep=FrozenDict({"env.recommender": ("random", "nope")}))
    with pytest.raises(ConfigError, match="sweep cell .*env.recommender.*nope"):
        run_sweep(bad, tmp_path / "sweep", progress=False)
    assert not (tmp_path / "sweep").exists()
