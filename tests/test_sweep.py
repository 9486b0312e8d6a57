"""Sweeps and replicates (socialgym.experiments.run.sweep): the job list, a local process-pool sweep
with its aggregate checked by hand, resume, a failing job, and (when installed) Ray."""

import csv
import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
from capabilities import need_module
from scipy import stats

from socialgym.experiments import RunError, load_config
from socialgym.experiments.run.sweep import condition_id, jobs, resume_sweep, run_sweep

REWARDS = ("SOC", "INF", "PRE", "COORD", "EMO", "total")


def tiny(**changes):
    raw = {"seed": 1,
           "env": {"n_agents": 6, "max_rounds": 3, "recommender": "random", "sentiment": "tone"},
           "policy": {"kind": "greedy"},
           "logging": {"progress": False, "report": False},
           "run": {"replicates": 2, "workers": 2},
           "sweep": {"env.recommender": ["random", "chronological"]}}
    raw.update(changes)
    return load_config(raw)


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def per_round_mean(run, column="total"):
    """{round: mean over agents} from a run's rounds.csv."""
    sums = {}
    for row in read_csv(Path(run) / "rounds.csv"):
        sums.setdefault(int(row["round"]), []).append(float(row[column]))
    return {r: float(np.mean(v)) for r, v in sums.items()}


def summary(run):
    return json.loads((Path(run) / "summary.json").read_text())


@pytest.fixture(scope="module")
def local_sweep(tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep") / "study"
    result = run_sweep(tiny(), out, progress=False)
    return out, result


# ---------------------------------------------------------------------------------- jobs
def test_jobs_ids_seeds_and_paths():
    cfg = tiny()
    js = jobs(cfg)
    assert len(js) == 4
    assert [j.condition_id for j in js] == ["c00-env.recommender=random"] * 2 + \
        ["c01-env.recommender=chronological"] * 2
    assert [j.replicate for j in js] == [0, 1, 0, 1]
    assert [j.seed for j in js] == [1, 2, 1, 2]              # common random numbers across conditions
    assert [j.config.seed for j in js] == [1, 2, 1, 2]
    assert [j.config.env["recommender"] for j in js] == ["random", "random", "chronological", "chronological"]
    assert all(not j.config.sweep for j in js)
    assert js[3].out == "runs/c01-env.recommender=chronological/rep_1"
    assert js[2].condition == {"env.recommender": "chronological"}
    assert jobs(cfg) == js                                    # stable


def test_jobs_without_sweep_and_condition_ids():
    js = jobs(tiny(sweep={}, run={"replicates": 3}))
    assert [(j.condition_id, j.replicate, j.seed) for j in js] == [("c00", 0, 1), ("c00", 1, 2), ("c00", 2, 3)]
    cid = condition_id(3, {"policy.params": {"b": 0.5}, "a.b": "x/../y z", "env.flag": True})
    assert cid.startswith("c03-policy.params=b_0.5,a.b=x_.._y")
    assert "/" not in cid and " " not in cid and len(cid) <= 4 + 48


# ---------------------------------------------------------------------------------- local sweep
def test_local_sweep_writes_runs_and_manifest(local_sweep):
    out, result = local_sweep
    assert result["jobs"] == 4 and result["ran"] == 4 and result["failed"] == []
    manifest = json.loads((out / "sweep.json").read_text())
    assert manifest["keys"] == ["env.recommender"]
    assert [j["seed"] for j in manifest["jobs"]] == [1, 2, 1, 2]
    assert manifest["config"]["sweep"] == {"env.recommender": ["random", "chronological"]}
    assert load_config(out / "config.yaml").sweep == tiny().sweep
    for job in manifest["jobs"]:
        s = summary(out / job["out"])
        assert s["status"] == "complete" and s["rounds_completed"] == 3
        assert (s["seed"], s["replicate"], s["condition"]) == (job["seed"], job["replicate"], job["condition"])
    with pytest.raises(RunError, match="already holds a sweep"):
        run_sweep(tiny(), out, progress=False)


def test_replicates_differ_and_conditions_share_seeds(local_sweep):
    out, _ = local_sweep
    runs = out / "runs"
    a0, a1 = runs / "c00-env.recommender=random/rep_0", runs / "c00-env.recommender=random/rep_1"
    b0 = runs / "c01-env.recommender=chronological/rep_0"
    assert (a0 / "rounds.csv").read_text() != (a1 / "rounds.csv").read_text()
    assert summary(a0)["seed"] == summary(b0)["seed"] == 1
    assert summary(a1)["seed"] == 2


def test_aggregate_rows_and_ci_by_hand(local_sweep):
    out, _ = local_sweep
    rows = read_csv(out / "aggregate.csv")
    assert list(rows[0]) == ["condition_id", "env.recommender", "round", "metric", "mean", "ci_low", "ci_high", "n"]
    metrics = {r["metric"] for r in rows}
    assert set(REWARDS) | {"density", "clustering", "modularity", "mean_tie", "n_ties",
                           "mean_topic_entropy", "deep_cocoon_share"} <= metrics
    assert "round" not in metrics
    assert len(rows) == 2 * 3 * len(metrics)                  # conditions x rounds x metrics
    assert {(r["condition_id"], r["env.recommender"]) for r in rows} == {
        ("c00-env.recommender=random", "random"), ("c01-env.recommender=chronological", "chronological")}
    cid = "c01-env.recommender=chronological"
    for rnd in (1, 2, 3):
        x = [per_round_mean(out / "runs" / cid / f"rep_{k}")[rnd] for k in (0, 1)]
        mean = (x[0] + x[1]) / 2
        sd = math.sqrt(((x[0] - mean) ** 2 + (x[1] - mean) ** 2) / (2 - 1))
        half = stats.t.ppf(0.975, 1) * sd / math.sqrt(2)
        (row,) = [r for r in rows if r["condition_id"] == cid and r["round"] == str(rnd) and r["metric"] == "total"]
        assert int(row["n"]) == 2
        assert float(row["mean"]) == pytest.approx(mean, abs=1e-12)
        assert float(row["ci_low"]) == pytest.approx(mean - half, abs=1e-9)
        assert float(row["ci_high"]) == pytest.approx(mean + half, abs=1e-9)
    # a network metric is the plain mean of the two runs' network.csv values
    (row,) = [r for r in rows if r["condition_id"] == cid and r["round"] == "3" and r["metric"] == "density"]
    dens = [float(read_csv(out / "runs" / cid / f"rep_{k}" / "network.csv")[-1]["density"]) for k in (0, 1)]
    assert float(row["mean"]) == pytest.approx(np.mean(dens))


def test_comparison_plots(local_sweep):
    out, _ = local_sweep
    for name in ("compare_total.png", "compare_rewards.png", "compare_network.png"):
        path = out / "plots" / name
        assert path.exists() and path.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.slow
def test_single_replicate_ci_is_the_mean(tmp_path):
    out = tmp_path / "one"
    run_sweep(tiny(run={"replicates": 1, "workers": 1}, sweep={"env.recommender": ["random"]}), out,
              progress=False)
    rows = read_csv(out / "aggregate.csv")
    finite = [r for r in rows if r["mean"] != ""]
    assert finite and all(r["n"] == "1" and r["ci_low"] == r["mean"] == r["ci_high"] for r in finite)


# ---------------------------------------------------------------------------------- resume
@pytest.mark.slow
def test_resume_reruns_only_the_missing_job(local_sweep, tmp_path):
    src, _ = local_sweep
    out = tmp_path / "copy"
    shutil.copytree(src, out)                                 # copy2: mtimes preserved
    before_agg = (out / "aggregate.csv").read_text()
    gone = out / "runs/c00-env.recommender=random/rep_1"
    shutil.rmtree(gone)
    others = [p for p in (out / "runs").glob("*/rep_*") if p != gone]
    stamps = {p: (p / "summary.json").stat().st_mtime_ns for p in others}
    result = resume_sweep(out, progress=False)
    assert result == {**result, "jobs": 4, "ran": 1, "skipped": 3}
    assert summary(gone)["status"] == "complete"
    assert {p: (p / "summary.json").stat().st_mtime_ns for p in others} == stamps
    assert (out / "aggregate.csv").read_text() == before_agg
    assert (gone / "rounds.csv").read_text() == (src / "runs/c00-env.recommender=random/rep_1/rounds.csv").read_text()


@pytest.mark.slow
def test_killed_jobs_resume_from_their_checkpoints(local_sweep, tmp_path, monkeypatch):
    # every worker SIGKILLs itself after round 2's outputs (the tests' kill switch, conftest.py): the pool
    # breaks, every job is reported failed; resume continues each from its round-1 checkpoint
    monkeypatch.setenv("SOCIALGYM_KILL_AT", "2:outputs")
    out = tmp_path / "killed"
    with pytest.raises(RunError, match="4 of 4 sweep jobs failed"):
        run_sweep(tiny(), out, progress=False)
    partial = [summary(p) for p in (out / "runs").glob("*/rep_*") if (p / "summary.json").exists()]
    assert partial and all(s["status"] == "running" for s in partial)
    monkeypatch.delenv("SOCIALGYM_KILL_AT")
    assert resume_sweep(out, progress=False)["ran"] == 4
    src, _ = local_sweep
    assert (out / "aggregate.csv").read_text() == (src / "aggregate.csv").read_text()


def test_resume_rejects_a_non_sweep(tmp_path):
    with pytest.raises(RunError, match="not a sweep directory"):
        resume_sweep(tmp_path)


# ---------------------------------------------------------------------------------- failures
@pytest.mark.slow
def test_failing_job_does_not_stop_the_others(tmp_path):
    # valid at config load and before the sweep starts (a loopback server needs no key); the LLM
    # condition's jobs fail in their first round, when no request finds the server
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]                   # nothing listens there once closed
    cfg = tiny(run={"replicates": 2, "workers": 2},
               llm={"base_url": f"http://127.0.0.1:{port}/v1", "model": "m", "max_retries": 0, "timeout": 5,
                    "cache": False},
               sweep={"policy.groups": [[{"name": "g", "kind": "greedy"}], [{"name": "g", "kind": "llm"}]]})
    out = tmp_path / "fail"
    with pytest.raises(RunError) as info:
        run_sweep(cfg, out, progress=False)
    message = str(info.value)
    assert "2 of 4 sweep jobs failed" in message and "\n" not in message
    assert "c01-policy.groups=" in message and "/rep_0: " in message and "/rep_1: " in message
    assert "c00-policy.groups=" not in message
    assert "found no server to connect to" in message
    done = sorted(p.parent.name for p in (out / "runs").glob("c00-*/rep_0"))
    assert len(done) == 1
    for k in (0, 1):
        assert summary(out / "runs" / done[0] / f"rep_{k}")["status"] == "complete"
    rows = read_csv(out / "aggregate.csv")                    # the completed jobs were aggregated
    assert rows and {r["condition_id"] for r in rows} == {done[0]}
    assert {r["n"] for r in rows if r["metric"] == "total"} == {"2"}


def test_a_sweep_refuses_a_damaged_model_before_any_job(tmp_path):
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"not a model")
    cfg = tiny(sweep={"policy.groups": [[{"name": "g", "kind": "greedy"}],
                                        [{"name": "g", "kind": "torch", "params": {"path": str(junk)}}]]})
    with pytest.raises(RunError, match="policy group 'g' \\(torch\\): .*junk.pt is not a socialgym PPO model file"):
        run_sweep(cfg, tmp_path / "fail", progress=False)
    assert not (tmp_path / "fail").exists()


# ---------------------------------------------------------------------------------- ray
@pytest.mark.slow
def test_ray_backend(tmp_path):
    ray = need_module("ray")
    assert not ray.is_initialized()
    cfg = tiny(run={"replicates": 2, "workers": 2, "backend": "ray"}, sweep={})
    out = tmp_path / "ray"
    result = run_sweep(cfg, out, progress=False)
    assert result["jobs"] == 2 and result["failed"] == []
    assert not ray.is_initialized()                           # the cluster we started is shut down
    for k in (0, 1):
        assert summary(out / f"runs/c00/rep_{k}")["status"] == "complete"
    rows = read_csv(out / "aggregate.csv")
    assert list(rows[0])[:3] == ["condition_id", "round", "metric"]
    assert {r["n"] for r in rows if r["metric"] == "total"} == {"2"}
