"""Forks and paired comparisons (issue 20): a fork with no change reproduces the original's
continuation byte for byte (scripted, and LLM agents against a fake server); a fork with a
change differs only from round t+1; sweeps fork their conditions from the first one with
``run.fork_at``; ``compare`` gives paired differences with t-intervals (checked by hand);
every misuse is a one-line error."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest
from capabilities import need_module
import scipy.sparse as sp

from socialgym.experiments import ConfigError, RunError, load_config, run_experiment
from socialgym.rundir import Run
from socialgym.rundir.layout import snapshot_path
from socialgym.experiments.analysis.compare import compare
from socialgym.experiments.run.fork import fork_run
from socialgym.experiments.run.sweep import run_sweep

BASE = {
    "seed": 7,
    "env": {"n_agents": 8, "max_rounds": 6, "recommender": "random", "agent_interests": [0, 1, 2, 0, 1, 2, 0, 1]},
    "policy": {"groups": [{"name": "g", "kind": "greedy", "agents": 5}, {"name": "r", "kind": "random"}]},
    "logging": {"report": False, "progress": False},
}
SAME = ("rounds.csv", "network.csv", "events.jsonl")


def lines(path: Path, r: int | None = None, *, first: int = 1, last: int = 99) -> list[str]:
    """The round-tagged lines of a CSV (after its header) or a JSONL file, of rounds first..last."""
    out = []
    text = path.read_text().splitlines()
    for line in text[1:] if path.suffix == ".csv" else text:
        rnd = int(line.split(",")[0]) if path.suffix == ".csv" else json.loads(line)["round"]
        if first <= rnd <= last and (r is None or rnd == r):
            out.append(line)
    return out


def tie_matrix(out: Path, r: int) -> sp.csr_matrix:
    return sp.load_npz(out / "ties" / f"round_{r:04d}.npz").tocsr()


@pytest.fixture(scope="module")
def base_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("fork") / "base"
    run_experiment(load_config(BASE), out)
    return out


# ---------------------------------------------------------------------------------- snapshots
def test_every_round_is_kept_as_a_signed_snapshot(base_run):
    from socialgym.experiments.run.checkpoint import read_checkpoint

    assert sorted(p.name for p in (base_run / "snapshots").iterdir()) == [f"round_{r:04d}.pkl" for r in range(1, 7)]
    for r in (1, 4, 6):
        assert read_checkpoint(snapshot_path(base_run, r))["round"] == r
    # the last snapshot is the checkpoint file itself (a hard link: no second copy written)
    assert os.path.samefile(snapshot_path(base_run, 6), base_run / "checkpoint.pkl")


# ---------------------------------------------------------------------------------- forks
def test_a_fork_without_change_equals_the_original_byte_for_byte(base_run, tmp_path):
    summary = fork_run(base_run, 3, tmp_path / "same", progress=False)
    assert summary["status"] == "complete" and summary["rounds_completed"] == 6
    for name in SAME:
        assert (tmp_path / "same" / name).read_bytes() == (base_run / name).read_bytes(), name
    for r in range(1, 7):
        assert (tie_matrix(base_run, r) != tie_matrix(tmp_path / "same", r)).nnz == 0
    meta = Run(tmp_path / "same").info
    original = Run(base_run).info
    assert meta["fork"] == {"of": str(base_run.resolve()), "run_id": original["run_id"], "at_round": 3,
                            "changes": []}
    assert meta["run_id"] != original["run_id"] and meta["seed"] == original["seed"]


def test_a_fork_with_a_change_differs_only_from_the_next_round(base_run, tmp_path):
    out = tmp_path / "chrono"
    fork_run(base_run, 3, out, overrides=["env.recommender=chronological"], progress=False)
    for name in ("rounds.csv", "network.csv"):
        assert lines(out / name, last=3) == lines(base_run / name, last=3)
        assert lines(out / name, 4) != lines(base_run / name, 4)
    assert lines(out / "events.jsonl", last=3) == lines(base_run / "events.jsonl", last=3)
    logged = [json.loads(x) for x in lines(out / "events.jsonl") if '"INTERVENTION"' in x]
    assert [(e["round"], e["intervention"]) for e in logged] == [(4, "recommender")]
    cfg = load_config(out / "config.yaml")
    assert cfg.env["recommender"] == "random"                 # env still describes rounds 1..3
    assert [dict(s) for s in cfg.interventions] == [{"kind": "recommender", "at_round": 4,
                                                      "recommender": "chronological"}]


def test_soc_strategy_in_a_fork_adds_its_ties_at_the_next_round(base_run, tmp_path):
    out = tmp_path / "soc"
    fork_run(base_run, 4, out, progress=False,
             overrides=["interventions=[{kind: add_ties, at_round: 5, soc_strategy: 2, weight: 0.5}]"])
    assert (tie_matrix(out, 4) != tie_matrix(base_run, 4)).nnz == 0
    added = [json.loads(x) for x in lines(out / "events.jsonl", 5) if '"INTERVENTION"' in x]
    assert added[0]["intervention"] == "add_ties" and added[0]["n_pairs"] > 0
    assert tie_matrix(out, 5).nnz > tie_matrix(base_run, 5).nnz


def test_a_fork_of_a_fork_before_its_start_forks_the_origin(base_run, tmp_path):
    first = tmp_path / "first"
    fork_run(base_run, 4, first, progress=False)
    assert not snapshot_path(first, 2).exists()
    fork_run(first, 2, tmp_path / "second", progress=False)
    meta = Run(tmp_path / "second").info
    assert meta["fork"]["of"] == str(base_run.resolve()) and meta["fork"]["at_round"] == 2
    assert (tmp_path / "second" / "rounds.csv").read_bytes() == (base_run / "rounds.csv").read_bytes()


@pytest.mark.parametrize("kwargs, words", [
    ({"at_round": 6}, "--at-round must lie in [1, 5]"),
    ({"at_round": 3, "overrides": ["env.feed_size=2"]}, "env.feed_size cannot change in a fork"),
    ({"at_round": 3, "overrides": ["seed=1"]}, "seed cannot change in a fork"),
    ({"at_round": 3, "overrides": ["policy.groups=[{name: g, kind: random, agents: 5}, {name: r, kind: random}]"]},
     "policy.groups[0].kind cannot change"),
    ({"at_round": 3, "overrides": ["interventions=[{kind: param, at_round: 2, name: xi, value: 0.3}]"]},
     "interventions of rounds <= 3, which already happened"),
    ({"at_round": 3, "overrides": ["env.n_agnets=9"]}, "env.n_agnets"),
])
def test_bad_forks_are_one_line_errors(base_run, tmp_path, kwargs, words):
    with pytest.raises(RunError) as err:
        fork_run(base_run, out=tmp_path / "x", progress=False, **kwargs)
    assert words in str(err.value) and "\n" not in str(err.value)
    assert not (tmp_path / "x").exists()


def test_a_fork_needs_a_snapshot_and_a_fresh_directory(base_run, tmp_path):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    with pytest.raises(RunError, match="is not empty"):
        fork_run(base_run, 3, tmp_path / "full")
    no_snaps = tmp_path / "nosnap"
    run_experiment(load_config({**BASE, "run": {"snapshots": False}}), no_snaps)
    with pytest.raises(RunError, match="round_0003.pkl not found: .* has no snapshots"):
        fork_run(no_snaps, 3, tmp_path / "y")
    with pytest.raises(RunError, match="not a run directory"):
        fork_run(tmp_path / "full", 3, tmp_path / "z")


def test_a_tampered_snapshot_is_refused(base_run, tmp_path):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(base_run, copy)
    path = snapshot_path(copy, 3)
    data = bytearray(path.read_bytes())
    data[-5] ^= 1
    path.unlink()                        # (a hard link: write a new file, not through the link)
    path.write_bytes(bytes(data))
    with pytest.raises(RunError, match="bad signature"):
        fork_run(copy, 3, tmp_path / "f")


def test_the_fork_command(base_run, tmp_path):
    from socialgym.cli import main

    assert main(["fork", str(base_run), "--at-round", "2", "--out", str(tmp_path / "cli"), "--quiet",
                 "--set", "env.xi=0.3"]) == 0
    meta = Run(tmp_path / "cli").info
    assert meta["fork"]["changes"] == ["env.xi: 0.1 -> 0.3 from round 3"]
    assert main(["fork", str(base_run), "--at-round", "9", "--out", str(tmp_path / "bad")]) == 2


# ---------------------------------------------------------------------------------- LLM runs
def test_an_llm_fork_without_change_replays_the_original_from_its_cache(tmp_path):
    need_module("openai")
    from socialgym.llm.testing import FakeServer

    # replies drawn at random by the server: only the copied cache can make the fork repeat them
    with FakeServer(seed=11) as server:
        data = {"seed": 3, "env": {"n_agents": 3, "max_rounds": 4, "recommender": "random", "sentiment": "tone"},
                "policy": {"kind": "llm"},
                "llm": {"base_url": server.base_url, "model": "fake", "api_key": "sk-test", "max_concurrency": 4},
                "logging": {"report": False, "progress": False}}
        run_experiment(load_config(data), tmp_path / "llm")
        sent = len(server.requests)
        fork_run(tmp_path / "llm", 2, tmp_path / "llm-fork", progress=False)
        assert len(server.requests) == sent                  # every reply came from the cache
        changed = tmp_path / "llm-coach"
        fork_run(tmp_path / "llm", 2, changed, overrides=["policy.coach=true"], progress=False)
        assert len(server.requests) > sent
    for name in SAME:
        assert (tmp_path / "llm-fork" / name).read_bytes() == (tmp_path / "llm" / name).read_bytes(), name
    assert lines(changed / "rounds.csv", last=2) == lines(tmp_path / "llm" / "rounds.csv", last=2)
    assert {x.split(",")[4] for x in lines(changed / "rounds.csv", first=3)} == {"1"}     # coached from round 3
    assert "sk-test" not in (changed / "config.yaml").read_text() + (changed / "run.json").read_text()
    meta = Run(changed).info
    assert meta["fork"]["changes"] == ["coach of all agents: False -> True from round 3"]


# ---------------------------------------------------------------------------------- sweeps
SWEEP = {**BASE, "run": {"replicates": 2, "fork_at": 3, "workers": 1},
         "sweep": {"interventions": [[], [{"kind": "add_ties", "at_round": 4, "soc_strategy": 2}]]}}


@pytest.mark.slow
def test_a_sweep_forks_its_conditions_from_the_first(tmp_path):
    run_sweep(load_config(SWEEP), tmp_path / "s", progress=False)
    manifest = json.loads((tmp_path / "s" / "sweep.json").read_text())
    control, treated = manifest["jobs"][0]["condition_id"], manifest["jobs"][2]["condition_id"]
    assert [j.get("fork_from") for j in manifest["jobs"]] == [None, None, f"runs/{control}/rep_0",
                                                              f"runs/{control}/rep_1"]
    for k in (0, 1):
        a, b = tmp_path / "s" / "runs" / control / f"rep_{k}", tmp_path / "s" / "runs" / treated / f"rep_{k}"
        assert lines(b / "rounds.csv", last=3) == lines(a / "rounds.csv", last=3)
        assert Run(b).info["fork"]["at_round"] == 3
    table = (tmp_path / "s" / "compare" / f"{treated}.csv").read_text().splitlines()
    assert table[0] == "round,metric,mean_a,mean_b,diff,ci_low,ci_high,n_pairs"
    n_ties = [x.split(",") for x in table[1:] if x.split(",")[1] == "n_ties"]
    assert [float(x[4]) for x in n_ties[:3]] == [0.0, 0.0, 0.0] and float(n_ties[3][4]) > 0
    from socialgym.cli import main

    (tmp_path / "s" / "compare" / f"{treated}.csv").unlink()
    assert main(["compare", str(tmp_path / "s")]) == 0                 # the sweep: every condition vs the first
    assert (tmp_path / "s" / "compare" / f"{treated}.csv").read_text().splitlines() == table


@pytest.mark.parametrize("change, words", [
    ({"sweep": {"env.feed_size": [3, 2]}}, "env.feed_size cannot change in a fork"),
    ({"run": {"fork_at": 6}}, "run.fork_at must lie in [1, 5]"),
    ({"run": {"fork_at": 2, "snapshots": False}}, "needs run.checkpoint and run.snapshots"),
    ({"sweep": {"interventions": [[], [{"kind": "param", "at_round": 2, "name": "xi", "value": 0.3}]]}},
     "interventions of rounds <= 3"),
])
def test_bad_fork_sweeps_fail_at_load(change, words):
    data = {**SWEEP, **change, "run": {**SWEEP["run"], **change.get("run", {})}}
    with pytest.raises(ConfigError) as err:
        load_config(data)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_fork_at_needs_conditions(tmp_path):
    with pytest.raises(RunError, match="one condition"):
        run_sweep(load_config({**BASE, "run": {"replicates": 2, "fork_at": 3}}), tmp_path / "x", progress=False)


# ---------------------------------------------------------------------------------- compare
def _fake_run(path: Path, replicate: int, totals: dict[int, list[float]], seed: int = 0) -> Path:
    """A run directory with rounds.csv holding the given per-agent totals per round."""
    path.mkdir(parents=True)
    (path / "run.json").write_text(json.dumps({"replicate": replicate, "seed": seed}))
    (path / "summary.json").write_text(json.dumps({"status": "complete"}))
    rows = ["round,agent,total"] + [f"{r},agent_{i},{v}" for r, vs in totals.items() for i, v in enumerate(vs)]
    (path / "rounds.csv").write_text("\n".join(rows) + "\n")
    (path / "network.csv").write_text("round,density\n" + "".join(f"{r},0.5\n" for r in totals))
    return path


def test_compare_pairs_replicates_and_gives_t_intervals(tmp_path):
    # A: replicate 0 totals 1 and 3 in round 2 (mean 2), replicate 1: 2 and 2 (mean 2)
    # B: replicate 0 mean 3, replicate 1 mean 5 -> paired differences 1 and 3: mean 2,
    # sd sqrt(2), half-width t(0.975, 1) * sqrt(2) / sqrt(2) = 12.7062
    _fake_run(tmp_path / "A" / "rep_0", 0, {1: [1, 1], 2: [1, 3]})
    _fake_run(tmp_path / "A" / "rep_1", 1, {1: [1, 1], 2: [2, 2]}, seed=1)
    _fake_run(tmp_path / "B" / "rep_0", 0, {1: [1, 1], 2: [3, 3]})
    _fake_run(tmp_path / "B" / "rep_1", 1, {1: [1, 1], 2: [4, 6]}, seed=1)
    result = compare(tmp_path / "A", tmp_path / "B", tmp_path / "out.csv")
    assert result["pairs"] == 2 and result["first_difference"] == {"total": 2} and result["warnings"] == []
    rows = {(x.split(",")[0], x.split(",")[1]): x.split(",") for x in (tmp_path / "out.csv").read_text().splitlines()[1:]}
    r2 = [float(v) for v in rows[("2", "total")][2:]]
    assert r2[:3] == [2.0, 4.0, 2.0] and r2[5] == 2
    assert math.isclose(r2[3], 2 - 12.7062047, abs_tol=1e-5) and math.isclose(r2[4], 2 + 12.7062047, abs_tol=1e-5)
    assert [float(v) for v in rows[("1", "total")][2:]] == [1.0, 1.0, 0.0, 0.0, 0.0, 2.0]
    assert "| total | 2 | 2 | 2 | 4 | +2 |" in (tmp_path / "out.md").read_text()


def test_compare_warns_about_unpaired_and_unseeded_runs(tmp_path):
    _fake_run(tmp_path / "A" / "rep_0", 0, {1: [1, 2]}, seed=0)
    _fake_run(tmp_path / "A" / "rep_1", 1, {1: [1, 2]})
    _fake_run(tmp_path / "B", 0, {1: [2, 2]}, seed=5)
    result = compare(tmp_path / "A", tmp_path / "B")
    assert result["pairs"] == 1 and (tmp_path / "B" / "compare.csv").is_file()
    assert any("different seeds" in w for w in result["warnings"])
    assert any("without a partner left out: [1]" in w for w in result["warnings"])
    with pytest.raises(RunError, match="neither a run directory"):
        compare(tmp_path / "A", tmp_path / "nothing")


def test_an_inline_api_key_is_refused_and_never_shown():
    from socialgym.experiments.define import fork_config

    data = {**BASE, "llm": {"base_url": "http://127.0.0.1:9/v1", "model": "m"}}
    base = load_config(data)
    target = load_config({**data, "llm": {**data["llm"], "api_key": "sk-inline-secret-0123456789"}})
    with pytest.raises(ConfigError, match=r"^llm\.api_key: .*llm\.api_key_env") as err:
        fork_config(base, target, 3)          # it would be dropped silently: a fork reads llm.api_key_env
    assert "sk-inline" not in str(err.value)
    # token counts are settings: a change of them takes effect and is named
    cfg, changes = fork_config(base, load_config({**data, "llm": {**data["llm"], "max_tokens": 99}}), 3)
    assert changes == ["llm.max_tokens: 512 -> 99"] and cfg.llm.max_tokens == 99


def test_compare_ignores_float_rounding_when_it_names_the_first_difference(tmp_path):
    _fake_run(tmp_path / "A", 0, {1: [0.30000000000000004, 1], 2: [1, 1]})
    _fake_run(tmp_path / "B", 0, {1: [0.3, 1], 2: [1, 2]})
    result = compare(tmp_path / "A", tmp_path / "B")
    assert result["first_difference"] == {"total": 2}           # round 1 differs by 5.6e-17 only


# ---------------------------------------------------------------------------------- review fixes
def test_a_rerank_only_fork_keeps_the_model_and_equals_the_rerank_intervention(tmp_path):
    data = {**BASE, "env": {**BASE["env"], "recommender": "topic_affinity"}}
    run_experiment(load_config(data), tmp_path / "b")
    steps = "[{kind: random_replacement, n: 1}]"
    fork_run(tmp_path / "b", 3, tmp_path / "env", overrides=[f"env.rerank={steps}"], progress=False)
    fork_run(tmp_path / "b", 3, tmp_path / "iv", progress=False,
             overrides=[f"interventions=[{{kind: rerank, at_round: 4, rerank: {steps}}}]"])
    for name in SAME:
        assert (tmp_path / "env" / name).read_bytes() == (tmp_path / "iv" / name).read_bytes(), name
    changes = Run(tmp_path / "env").info["fork"]["changes"]
    assert changes == ['rerank: [] -> [{"kind":"random_replacement","n":1}] from round 4 (the model is kept)']
    # the same recommender with new parameters is a new model, and says so
    fork_run(tmp_path / "b", 3, tmp_path / "kw", overrides=["env.recommender_kwargs={w_like: 2.0}"], progress=False)
    assert "a new model" in Run(tmp_path / "kw").info["fork"]["changes"][0]


@pytest.mark.parametrize("override, key", [("llm.tie_scorer=true", "llm.tie_scorer"),
                                           ("logging.events=false", "logging.events"),
                                           ("logging.ties=false", "logging.ties")])
def test_state_like_settings_cannot_change_in_a_fork(base_run, tmp_path, override, key):
    data = {**BASE, "llm": {"base_url": "http://127.0.0.1:9/v1", "model": "m"}} if "llm" in key else BASE
    from socialgym.experiments.define import fork_config

    with pytest.raises(ConfigError, match=f"{key} cannot change in a fork"):
        fork_config(load_config(data), load_config(data, [override]), 3)


def test_a_whole_config_fork_that_drops_an_env_key_goes_back_to_its_default(tmp_path):
    from socialgym.experiments.define import fork_config

    data = {**BASE, "env": {**BASE["env"], "half_life": 2.0}}           # the default is 5.0
    cfg, changes = fork_config(load_config(data), load_config(BASE), 3)
    assert [dict(s) for s in cfg.interventions] == [{"kind": "param", "at_round": 4, "name": "half_life",
                                                      "value": 5.0}]


def test_a_fork_of_a_fork_before_its_start_keeps_the_forks_own_changes(base_run, tmp_path):
    first = tmp_path / "first"
    fork_run(base_run, 4, first, overrides=["env.xi=0.3"], progress=False)
    fork_run(first, 2, tmp_path / "second", progress=False)
    cfg = load_config(tmp_path / "second" / "config.yaml")
    assert [dict(s) for s in cfg.interventions] == [{"kind": "param", "at_round": 5, "name": "xi", "value": 0.3}]
    assert (tmp_path / "second" / "rounds.csv").read_bytes() == (first / "rounds.csv").read_bytes()


def test_compare_means_use_the_same_pairs_as_the_difference(tmp_path):
    # B's replicate 1 has no round 2: round 2's means and difference all come from replicate 0
    _fake_run(tmp_path / "A" / "rep_0", 0, {1: [1], 2: [1]})
    _fake_run(tmp_path / "A" / "rep_1", 1, {1: [1], 2: [9]})
    _fake_run(tmp_path / "B" / "rep_0", 0, {1: [1], 2: [2]})
    _fake_run(tmp_path / "B" / "rep_1", 1, {1: [1]})
    compare(tmp_path / "A", tmp_path / "B", tmp_path / "c.csv")
    row = next(x.split(",") for x in (tmp_path / "c.csv").read_text().splitlines() if x.startswith("2,total,"))
    assert [float(v) for v in row[2:5]] == [1.0, 2.0, 1.0] and row[7] == "1"


def test_a_killed_link_of_the_last_snapshot_is_made_on_resume(base_run, tmp_path):
    import shutil

    from socialgym.experiments import resume_experiment
    from socialgym.experiments.run.checkpoint import read_checkpoint

    copy = tmp_path / "copy"
    shutil.copytree(base_run, copy)
    snapshot_path(copy, 6).unlink()               # as if killed between the checkpoint's rename and its link
    resume_experiment(copy, progress=False)
    assert read_checkpoint(snapshot_path(copy, 6))["round"] == 6


def test_an_inline_api_key_cannot_reach_the_forks_of_a_sweep():
    data = {**SWEEP, "llm": {"base_url": "http://127.0.0.1:9/v1", "model": "m", "api_key": "sk-x"}}
    with pytest.raises(ConfigError, match="inline llm.api_key is never written to disk"):
        load_config(data)


def test_compare_sweep_skips_a_condition_without_runs(tmp_path):
    from socialgym.experiments.run.sweep import compare_sweep

    root = tmp_path / "s"
    _fake_run(root / "runs" / "c00" / "rep_0", 0, {1: [1, 1]})
    _fake_run(root / "runs" / "c01" / "rep_0", 0, {1: [2, 2]})
    (root / "runs" / "c02").mkdir(parents=True)               # every run of it failed before it started
    jobs = [{"condition_id": c, "replicate": 0, "out": f"runs/{c}/rep_0"} for c in ("c00", "c01", "c02")]
    (root / "sweep.json").write_text(json.dumps({"jobs": jobs}))
    results = compare_sweep(root)
    assert [Path(r["csv"]).name for r in results] == ["c01.csv"]


def test_a_missing_api_key_names_the_variable(tmp_path, monkeypatch):
    from socialgym.experiments.run.runner import open_llm_client

    monkeypatch.delenv("MY_KEY", raising=False)
    cfg = load_config({**BASE, "llm": {"base_url": "https://example.invalid/v1", "model": "m", "api_key_env": "MY_KEY"}})
    with pytest.raises(RunError, match="set the environment variable MY_KEY"):
        open_llm_client(cfg.llm, 0, tmp_path / "log", None)
