"""The experiment layer: config validation, run outputs, SIGKILL + resume, secrets, wandb gating.

Crash tests run the real command (``python -m socialgym.cli``) in a subprocess and kill it with
SIGKILL, either from inside at a chosen point (``SOCIALGYM_KILL_AT``: after the act step, after
the round's files are written, or between writing the new checkpoint and renaming it) or from
outside at whatever moment the run has reached. The variable is read by the tests' own kill
switch (tests/faults/sitecustomize.py, on the subprocesses' PYTHONPATH through conftest.py), which
installs the runner's fault hook; socialgym itself never reads it.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from capabilities import need_module, not_applicable
import scipy.sparse as sp
import yaml

from socialgym.experiments import ConfigError, load_config, run_experiment
from socialgym.experiments.define import grid, to_dict, with_values

ROOT = Path(__file__).resolve().parents[1]

SCRIPTED = {
    "seed": 3,
    "env": {"n_agents": 10, "max_rounds": 5, "recommender": "mf", "sentiment": "vader", "ties": {"half_life": 4}},
    "policy": {"groups": [{"name": "greedy", "kind": "greedy", "agents": 5}, {"name": "random", "kind": "random"}]},
    "logging": {"report": False, "progress": False},
}


def write_config(path: Path, data: dict) -> Path:
    path.write_text(yaml.safe_dump(data))
    return path


def cli(*args, env_extra: dict | None = None, check: bool = True) -> subprocess.CompletedProcess:
    env = {**os.environ, **(env_extra or {})}
    proc = subprocess.run([sys.executable, "-m", "socialgym.cli", *args], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=300)
    if check and proc.returncode != 0:
        raise AssertionError(f"socialgym {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return proc


def assert_same_outputs(a: Path, b: Path, rounds: int) -> None:
    for name in ("rounds.csv", "network.csv", "events.jsonl"):
        assert (a / name).read_bytes() == (b / name).read_bytes(), f"{name} differs"
    for r in range(1, rounds + 1):
        wa = sp.load_npz(a / "ties" / f"round_{r:04d}.npz")
        wb = sp.load_npz(b / "ties" / f"round_{r:04d}.npz")
        assert (wa != wb).nnz == 0, f"ties of round {r} differ"


def test_token_counts_survive_the_written_config(tmp_path):
    # llm.max_tokens and the llm policy's *_tokens once matched the secret filter ("token") and were
    # dropped from config.yaml: a resume or a fork then ran with the defaults
    from socialgym.experiments.define import dump_yaml

    cfg = load_config({"env": {"n_agents": 2}, "policy": {"kind": "llm", "params": {"text_tokens": 38}},
                       "llm": {"max_tokens": 64, "api_key": "sk-secret-123"}})
    dump_yaml(cfg, tmp_path / "c.yaml")
    again = load_config(tmp_path / "c.yaml")
    assert again.llm.max_tokens == 64 and dict(again.policy.params) == {"text_tokens": 38}
    assert again.llm.api_key is None and "sk-secret" not in (tmp_path / "c.yaml").read_text()


# ---------------------------------------------------------------------------------- config
@pytest.mark.parametrize("override, key, words", [
    ("env.n_agnets=3", "env.n_agnets", "unknown key"),
    ("env.n_agents=lots", "env.n_agents", "integer"),
    ("env.ties.half_life=-1", "env.ties.half_life", "(0.0, inf]"),
    ("env.ties.halflife=2", "env.ties.halflife", "unknown key"),
    ("env.invalid_actions=maybe", "invalid_actions", "strict"),
    ("policy.kind=smart", "policy.kind", "random, greedy, llm"),
    ("policy.coach=often", "policy.coach", "true or false"),
    ("llm.max_concurrency=many", "llm.max_concurrency", "integer"),
    ("llm.temprature=0.1", "llm.temprature", "unknown key"),
    ("logging.wandb.mode=loud", "logging.wandb.mode", "online, offline, disabled"),
    ("logging.wandb.entity=me", "logging.wandb.project", "required"),
    ("run.backend=slurm", "run.backend", "local, ray"),
    ("run.replicates=0", "run.replicates", ">= 1"),
    ("seed=-1", "seed", "non-negative"),
    ("colour=blue", "colour", "unknown key"),
    ("env.seed=4", "env.seed", "top-level seed"),
])
def test_config_errors_are_one_line_and_name_the_key(tmp_path, override, key, words):
    path = write_config(tmp_path / "c.yaml", {"env": {"n_agents": 6}, "policy": {"kind": "greedy"}})
    extra = ["logging.wandb.project=p"] if override.startswith("logging.wandb.mode") else []
    with pytest.raises(ConfigError) as err:
        load_config(path, [*extra, override])
    message = str(err.value)
    assert "\n" not in message
    assert key in message and words in message, message


def test_unknown_key_lists_the_allowed_ones(tmp_path):
    path = write_config(tmp_path / "c.yaml", {"run": {"replicate": 2}})
    with pytest.raises(ConfigError, match=r"unknown key 'run.replicate'; allowed in run: replicates, backend"):
        load_config(path)


def test_group_errors(tmp_path):
    base = {"env": {"n_agents": 6}}
    cases = [
        ({"groups": [{"name": "a", "kind": "greedy", "agents": 2}, {"name": "b", "kind": "random", "agents": 2}]},
         "add up to env.n_agents = 6"),
        ({"groups": [{"name": "a", "kind": "greedy", "coach": True}]}, "only llm agents can be coached"),
        ({"groups": [{"name": "a", "kind": "greedy", "agents": 3, "lambdas": [1, 0, 0, 0, 0.5]}, {"name": "b"}]},
         "policy.groups[0].lambdas"),
        ({"groups": [{"name": "a"}, {"name": "a"}]}, "names must be unique"),
    ]
    for policy, words in cases:
        with pytest.raises(ConfigError) as err:
            load_config({**base, "policy": policy})
        assert words in str(err.value), str(err.value)


def test_overrides_sweep_grid_and_frozen(tmp_path):
    cfg = load_config({"env": {"n_agents": 6, "ties": {"half_life": 3}}, "policy": {"kind": "greedy"},
                       "sweep": {"env.recommender": ["random", "chronological"], "policy.kind": ["greedy", "random"]}},
                      ["env.n_agents=8", "env.topics=[a, b]"])
    assert cfg.env["n_agents"] == 8 and cfg.env["half_life"] == 3 and cfg.env["topics"] == ("a", "b")
    cells = grid(cfg)
    assert len(cells) == 4 and cells[3] == {"env.recommender": "chronological", "policy.kind": "random"}
    cell = with_values(cfg, cells[3])
    assert cell.env["recommender"] == "chronological" and cell.policy.kind == "random" and not cell.sweep
    with pytest.raises(TypeError):
        cfg.env["n_agents"] = 3
    with pytest.raises(Exception):
        cfg.seed = 1
    # the written config reloads to the same object
    again = load_config(yaml.safe_load(yaml.safe_dump(to_dict(cfg))))
    assert again == cfg


def test_a_bad_sweep_cell_fails_at_load(tmp_path):
    with pytest.raises(ConfigError, match=r"sweep cell .*env.max_rounds.*max_rounds must be an integer >= 1"):
        load_config({"env": {"n_agents": 4}, "sweep": {"env.max_rounds": [2, 0]}})


def test_cli_config_error_exit_code(tmp_path):
    path = write_config(tmp_path / "c.yaml", {"env": {"n_agents": 4, "max_round": 2}})
    proc = cli("run", str(path), "--out", str(tmp_path / "out"), check=False)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip()]     # one line
    assert "env.max_round" in proc.stderr


# ---------------------------------------------------------------------------------- a run
def test_run_writes_every_file(tmp_path):
    cfg = load_config({**SCRIPTED, "logging": {"report": True, "progress": False}})
    out = tmp_path / "run"
    summary = run_experiment(cfg, out)
    names = {p.name for p in out.iterdir()}
    for name in ("config.yaml", "rounds.csv", "network.csv", "events.jsonl", "summary.json", "report.html",
                 "plots", "ties", "checkpoint.pkl"):
        assert name in names, name
    assert sorted(p.name for p in (out / "ties").iterdir()) == [f"round_{r:04d}.npz" for r in range(1, 6)]
    assert {p.name for p in (out / "plots").iterdir()} >= {"rewards.png", "network.png", "degree.png",
                                                           "ties_graph.png"}
    assert summary["status"] == "complete" and summary["rounds_completed"] == 5
    rows = (out / "rounds.csv").read_text().splitlines()
    assert rows[0].startswith("round,agent,group,policy,coached,SOC,INF,PRE,COORD,EMO,total,POST,COM,DM,NOT")
    assert len(rows) == 1 + 5 * 10
    # every agent has n_actions actions per round, and round 1 is POSTs only (specification §1)
    header = rows[0].split(",")
    for line in rows[1:]:
        row = dict(zip(header, line.split(",")))
        assert sum(int(row[k]) for k in ("POST", "COM", "DM", "NOT")) == 3
        if row["round"] == "1":
            assert row["POST"] == "3"
        assert row["group"] == ("greedy" if int(row["agent"].split("_")[1]) < 5 else "random")
    # the last tie matrix is the env's final W, and TIE events end at the values stored
    W = sp.load_npz(out / "ties" / "round_0005.npz").toarray()
    last_tie = {}
    for line in (out / "events.jsonl").read_text().splitlines():
        e = json.loads(line)
        if e["kind"] == "TIE":
            last_tie[(e["src"], e["dst"])] = (e["round"], e["after"])
    for (s, d), (r, after) in last_tie.items():
        if r == 5:
            i, j = int(s.split("_")[1]), int(d.split("_")[1])
            assert W[i, j] == pytest.approx(after, abs=1e-6)
    network = (out / "network.csv").read_text().splitlines()
    assert len(network) == 6 and "deep_cocoon_share:greedy" in network[0]
    # mean_total in network.csv is the mean of rounds.csv's totals of that round
    totals = np.array([float(line.split(",")[header.index("total")]) for line in rows[1:]]).reshape(5, 10)
    net_header = network[0].split(",")
    for r in range(5):
        value = float(network[r + 1].split(",")[net_header.index("mean_total")])
        assert value == pytest.approx(totals[r].mean())
    with pytest.raises(Exception, match="already holds a run"):
        run_experiment(cfg, out)


@pytest.mark.slow
@pytest.mark.parametrize("point", ["act", "outputs", "checkpoint"])
def test_sigkill_at_each_point_then_resume_is_identical(tmp_path, point):
    path = write_config(tmp_path / "c.yaml", SCRIPTED)
    ref, broken = tmp_path / "ref", tmp_path / "broken"
    cli("run", str(path), "--out", str(ref), "--quiet")
    proc = cli("run", str(path), "--out", str(broken), "--quiet", env_extra={"SOCIALGYM_KILL_AT": f"3:{point}"},
               check=False)
    assert proc.returncode == -signal.SIGKILL
    summary = json.loads((broken / "summary.json").read_text())
    assert summary["status"] == "running" and summary["rounds_completed"] == 2
    cli("resume", str(broken), "--quiet")
    assert json.loads((broken / "summary.json").read_text())["status"] == "complete"
    assert_same_outputs(ref, broken, 5)


@pytest.mark.slow
def test_external_sigkill_mid_run_then_resume(tmp_path):
    data = {**SCRIPTED, "env": {**SCRIPTED["env"], "n_agents": 40, "max_rounds": 12}}
    path = write_config(tmp_path / "c.yaml", data)
    ref, broken = tmp_path / "ref", tmp_path / "broken"
    cli("run", str(path), "--out", str(ref), "--quiet")
    proc = subprocess.Popen([sys.executable, "-m", "socialgym.cli", "run", str(path), "--out", str(broken),
                             "--quiet"], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while time.time() < deadline:               # wait until a few rounds are done, then kill
        try:
            done = json.loads((broken / "summary.json").read_text())["rounds_completed"]
        except (OSError, ValueError, KeyError):
            done = 0
        if done >= 3:
            break
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    status = json.loads((broken / "summary.json").read_text())
    if status["status"] == "complete":
        not_applicable("the run finished before the kill landed")
    cli("resume", str(broken), "--quiet")
    assert_same_outputs(ref, broken, 12)


# ---------------------------------------------------------------------------------- LLM runs
def _deterministic_responder(body: dict, n: int):
    """A server whose reply depends only on the request (like temperature 0 with a fixed seed)."""
    from socialgym.llm.testing import sample_schema, schema_of

    schema = schema_of(body)
    digest = hashlib.sha256(json.dumps([body.get("messages"), schema], sort_keys=True).encode()).digest()
    return json.dumps(sample_schema(schema, random.Random(digest))) if schema else "ok"


@pytest.mark.slow
def test_llm_run_sigkill_and_resume_with_cache(tmp_path):
    need_module("openai")
    from socialgym.llm.testing import FakeServer

    with FakeServer(_deterministic_responder) as server:
        data = {"seed": 1, "env": {"n_agents": 4, "max_rounds": 3, "recommender": "random", "sentiment": "tone"},
                "policy": {"groups": [{"name": "llm", "kind": "llm", "agents": 3, "coach": True},
                                      {"name": "greedy", "kind": "greedy"}]},
                "llm": {"base_url": server.base_url, "model": "fake", "api_key": "sk-test-SECRET-789",
                        "max_concurrency": 4},
                "logging": {"report": False, "progress": False, "transcripts": True}}
        path = write_config(tmp_path / "c.yaml", data)
        ref, broken = tmp_path / "ref", tmp_path / "broken"
        cli("run", str(path), "--out", str(ref), "--quiet")
        sent_ref = len(server.requests)
        proc = cli("run", str(path), "--out", str(broken), "--quiet", env_extra={"SOCIALGYM_KILL_AT": "2:outputs"},
                   check=False)
        assert proc.returncode == -signal.SIGKILL
        before_resume = len(server.requests)
        cli("resume", str(broken), "--quiet")
        sent_resume = len(server.requests) - before_resume
    assert_same_outputs(ref, broken, 3)
    ref_summary = json.loads((ref / "summary.json").read_text())
    summary = json.loads((broken / "summary.json").read_text())
    # round 2's requests were answered before the kill: the resumed run replays them from the cache
    assert summary["llm"]["cached"] > 0
    assert sent_resume < sent_ref
    assert summary["llm"]["requests"] == ref_summary["llm"]["requests"]
    assert ref_summary["llm"]["fallbacks"] == 0
    # transcripts: one line per logical request of the final history
    lines = (ref / "transcripts.jsonl").read_text().splitlines()
    assert len(lines) == ref_summary["llm"]["requests"]
    assert {json.loads(x)["purpose"] for x in lines} >= {"plan", "vote", "coach"}
    # the API key never reaches a file of either run
    for run in (ref, broken):
        for file in run.rglob("*"):
            if file.is_file():
                assert b"SECRET-789" not in file.read_bytes(), file
    assert "api_key:" not in (ref / "config.yaml").read_text()


def test_wandb_without_the_extra_fails_clearly(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)
    cfg = load_config({**SCRIPTED, "logging": {"wandb": {"project": "p"}, "report": False, "progress": False}})
    with pytest.raises(RuntimeError, match=r"pip install 'socialgym\[wandb\]'"):
        run_experiment(cfg, tmp_path / "run")
    assert not (tmp_path / "run" / "rounds.csv").exists()


def test_wandb_offline_run_under_the_run_dir(tmp_path, monkeypatch):
    need_module("wandb")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_MODE", "offline")
    data = {**SCRIPTED, "env": {**SCRIPTED["env"], "max_rounds": 3},
            "logging": {"wandb": {"project": "socialgym-test", "mode": "offline"}, "report": False,
                        "progress": False}}
    out = tmp_path / "run"
    run_experiment(load_config(data), out)
    runs = list((out / "wandb").glob("offline-run-*"))
    assert len(runs) == 1 and list(runs[0].glob("*.wandb"))
