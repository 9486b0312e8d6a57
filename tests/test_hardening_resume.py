"""Issue 16: resume trusts nothing it has not checked, and files from others run no code.

Each test first reproduces the case the probe reported (what used to happen is in the
docstring), then asserts the fixed behaviour.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import signal
from pathlib import Path

import pytest
from capabilities import need_module
import yaml

from test_experiments import SCRIPTED, assert_same_outputs, cli, write_config

from socialgym.experiments import RunError, load_config, resume_experiment, run_experiment
from socialgym.experiments.run.checkpoint import MAGIC, read_checkpoint, write_checkpoint

SMALL = {**SCRIPTED, "env": {**SCRIPTED["env"], "n_agents": 6, "max_rounds": 4, "recommender": "random"}}


def _killed_run(tmp_path: Path, name: str = "broken", at: int = 3, data: dict = SMALL) -> Path:
    """A run SIGKILLed after round ``at - 1`` was checkpointed."""
    path = write_config(tmp_path / f"{name}.yaml", data)
    out = tmp_path / name
    proc = cli("run", str(path), "--out", str(out), "--quiet", env_extra={"SOCIALGYM_KILL_AT": f"{at}:act"},
               check=False)
    assert proc.returncode == -signal.SIGKILL
    return out


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("ref")
    out = tmp / "ref"
    cli("run", str(write_config(tmp / "c.yaml", SMALL)), "--out", str(out), "--quiet")
    return out


class _RunsCode:
    def __reduce__(self):
        return (os.makedirs, (os.environ["SOCIALGYM_TEST_MARKER"],))


@pytest.mark.slow
def test_a_checkpoint_from_someone_else_runs_no_code(tmp_path, monkeypatch):
    """Reported: `socialgym resume DIR` unpickled checkpoint.pkl before any check."""
    out = _killed_run(tmp_path)
    marker = tmp_path / "code-ran"
    monkeypatch.setenv("SOCIALGYM_TEST_MARKER", str(marker))
    hostile = pickle.dumps({"version": 3, "x": _RunsCode()})
    for forged in (hostile,                                           # the old, unsigned format
                   MAGIC + b"0" * 64 + b"\n" + hostile):              # a header with a made-up MAC
        (out / "checkpoint.pkl").write_bytes(forged)
        proc = cli("resume", str(out), "--quiet", check=False)
        assert proc.returncode == 2, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1
        assert "checkpoint.pkl" in proc.stderr and ("--trust" in proc.stderr)
        assert not marker.exists()


@pytest.mark.slow
def test_a_checkpoint_signed_with_another_key_needs_trust(tmp_path, monkeypatch, reference):
    """A colleague's run directory: refused by default, loaded with --trust and a warning."""
    out = _killed_run(tmp_path)
    state = read_checkpoint(out / "checkpoint.pkl")
    monkeypatch.setenv("SOCIALGYM_KEY_FILE", str(tmp_path / "colleague.key"))
    write_checkpoint(out / "checkpoint.pkl", state)            # signed with the colleague's key
    monkeypatch.undo()
    proc = cli("resume", str(out), "--quiet", check=False)
    assert proc.returncode == 2 and "not written by this user's socialgym" in proc.stderr
    proc = cli("resume", str(out), "--quiet", "--trust")
    assert "without checking its signature" in proc.stderr
    assert_same_outputs(reference, out, 4)


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["truncated", "flipped", "empty"])
def test_a_corrupt_checkpoint_says_how_to_restart(tmp_path, damage, reference):
    """Reported: a corrupt checkpoint gave a raw UnpicklingError."""
    out = _killed_run(tmp_path)
    path = out / "checkpoint.pkl"
    data = path.read_bytes()
    if damage == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif damage == "flipped":
        path.write_bytes(data[:-100] + bytes([data[-100] ^ 0xFF]) + data[-99:])
    else:
        path.write_bytes(b"")
    proc = cli("resume", str(out), "--quiet", check=False)
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1
    assert "delete" in proc.stderr and "checkpoint.pkl" in proc.stderr and "Traceback" not in proc.stderr
    path.unlink()                                   # what the message says: the run starts over
    cli("resume", str(out), "--quiet")
    assert_same_outputs(reference, out, 4)


def test_a_short_rounds_csv_stops_resume(tmp_path):
    """Reported: rounds.csv shorter than the checkpoint said was padded with NUL bytes and the
    run reported "complete"."""
    out = _killed_run(tmp_path)
    rows = (out / "rounds.csv").read_bytes()
    (out / "rounds.csv").write_bytes(rows[:-40])
    with pytest.raises(RunError, match=r"rounds.csv has \d+ bytes, fewer than"):
        resume_experiment(out, progress=False)
    assert b"\0" not in (out / "rounds.csv").read_bytes()
    assert json.loads((out / "summary.json").read_text())["status"] != "complete"


@pytest.mark.slow
@pytest.mark.parametrize("victim", ["events.jsonl", "network.csv", "ties/round_0001.npz"])
def test_deleted_or_edited_outputs_stop_resume(tmp_path, victim):
    """Reported: deleted outputs gave silently partial results."""
    out = _killed_run(tmp_path)
    (out / victim).unlink()
    with pytest.raises(RunError, match=victim.replace(".", r"\.") + " is missing"):
        resume_experiment(out, progress=False)
    out = _killed_run(tmp_path, "edited")
    path = out / victim
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 1                       # one bit inside what the checkpoint covers
    path.write_bytes(bytes(data))
    with pytest.raises(RunError, match=victim.replace(".", r"\.") + " differs from what this run wrote"):
        resume_experiment(out, progress=False)


@pytest.mark.slow
def test_a_checkpoint_copied_from_another_run_is_refused(tmp_path):
    """Reported: a checkpoint copied from another run (other seed) was accepted."""
    mine = _killed_run(tmp_path, "mine")
    other = _killed_run(tmp_path, "other", data={**SMALL, "seed": 99})
    shutil.copy(other / "checkpoint.pkl", mine / "checkpoint.pkl")
    with pytest.raises(RunError, match="belongs to another run"):
        resume_experiment(mine, progress=False)


@pytest.mark.slow
def test_an_edited_config_is_refused_unless_allowed(tmp_path, reference):
    """Reported: edits to config.yaml were ignored silently."""
    out = _killed_run(tmp_path)
    data = yaml.safe_load((out / "config.yaml").read_text())
    data["env"]["max_rounds"] = 9
    data["logging"]["events"] = True
    (out / "config.yaml").write_text(yaml.safe_dump(data))
    proc = cli("resume", str(out), "--quiet", check=False)
    assert proc.returncode == 2 and "config.yaml changed since the checkpoint (env.max_rounds)" in proc.stderr
    proc = cli("resume", str(out), "--quiet", "--allow-config-change")
    assert "these keys do not take effect: env.max_rounds" in proc.stderr
    assert json.loads((out / "summary.json").read_text())["rounds_completed"] == 4    # the checkpoint's env
    assert json.loads((out / "run.json").read_text())["config_changes"] == [{"round": 2, "keys": ["env.max_rounds"]}]
    assert_same_outputs(reference, out, 4)


@pytest.mark.slow
def test_a_forged_complete_status_does_not_stop_resume(tmp_path, reference):
    """Reported: a forged "status": "complete" made resume a no-op."""
    out = _killed_run(tmp_path)
    summary = json.loads((out / "summary.json").read_text())
    summary["status"] = "complete"
    (out / "summary.json").write_text(json.dumps(summary))
    result = resume_experiment(out, progress=False)
    assert result["status"] == "complete" and result["rounds_completed"] == 4
    assert_same_outputs(reference, out, 4)


def test_a_complete_run_is_checked_and_its_summary_rewritten(tmp_path, reference, capsys):
    out = tmp_path / "copy"
    shutil.copytree(reference, out)
    true = json.loads((out / "summary.json").read_text())
    forged = {**true, "final": {**true["final"], "rewards": {"total": 0.99}}}
    (out / "summary.json").write_text(json.dumps(forged))
    assert resume_experiment(out, progress=False) == true
    assert json.loads((out / "summary.json").read_text()) == true
    assert "did not match the checkpoint" in capsys.readouterr().err
    (out / "rounds.csv").write_bytes((out / "rounds.csv").read_bytes()[:-5])
    with pytest.raises(RunError, match="rounds.csv has"):
        resume_experiment(out, progress=False)


@pytest.mark.slow
def test_a_kill_while_the_report_is_built_is_mended_by_resume(tmp_path):
    """Reported: a kill while the report was built left no report.html, and resume would not
    build it."""
    data = {**SMALL, "logging": {**SMALL["logging"], "report": True}}
    out = tmp_path / "run"
    run_experiment(load_config(write_config(tmp_path / "c.yaml", data)), out, progress=False)
    assert (out / "report.html").exists()
    (out / "report.html").unlink()                  # what the kill left: the summary says complete
    shutil.rmtree(out / "plots", ignore_errors=True)
    resume_experiment(out, progress=False)
    assert "<html" in (out / "report.html").read_text().lower()


# ---------------------------------------------------------------------------------- fallback share
def _llm_data(base_url: str, **run) -> dict:
    return {"seed": 1, "env": {"n_agents": 3, "n_actions": 2, "max_rounds": 2, "recommender": "random",
                               "sentiment": "tone"},
            "policy": {"kind": "llm", "coach": False},
            "llm": {"base_url": base_url, "model": "fake", "api_key": "sk-test", "max_retries": 0,
                    "max_repairs": 0},
            "logging": {"report": True, "progress": False}, "run": run}


@pytest.mark.slow
@pytest.mark.parametrize("threshold", [0.2, 1.0])
def test_a_run_of_fallbacks_ends_non_zero(tmp_path, threshold):
    """Reported (with a wrong key): the whole experiment silently became scripted NOTs and
    `socialgym run` exited 0. Here the server answers, but never with a usable plan or vote."""
    need_module("openai")
    from socialgym.llm.testing import FakeServer

    with FakeServer(lambda body, n: "I would rather not say.") as server:
        path = write_config(tmp_path / "c.yaml", _llm_data(server.base_url, max_fallback_share=threshold))
        proc = cli("run", str(path), "--out", str(tmp_path / "run"), "--quiet", check=False)
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    llm = summary["llm"]
    # 3 agents x 2 rounds, each: a plan (no plan parses: both slots fall back to NOT, so no texts
    # are asked for), then, with nothing posted to vote on, the reflect step (which fails too)
    assert summary["status"] == "complete" and llm["fallbacks"] == 3 * 2 * (2 + 1)
    assert llm["requests"] == 3 * 2 * 2
    assert llm["fallback_share"] == 1.0
    if threshold < 1:
        assert proc.returncode == 1
        assert "100% of the LLM tasks" in proc.stderr and "more than run.max_fallback_share=0.2" in proc.stderr
        assert summary["problems"] and "max_fallback_share" in summary["problems"][0]
        assert 'class="problem"' in (tmp_path / "run" / "report.html").read_text()
    else:
        assert proc.returncode == 0 and "problems" not in summary
        assert 'class="problem"' not in (tmp_path / "run" / "report.html").read_text()


@pytest.mark.slow
def test_a_wrong_api_key_stops_the_run_with_exit_status_2(tmp_path):
    """Reported: 401 on every call, `socialgym run` exited 0 with "complete, 24 fallbacks", and
    the key echoed in the 401 body was stored in checkpoint.pkl."""
    need_module("openai")
    from socialgym.llm.testing import FakeReply, FakeServer

    key = "sk-probe-SECRET-4711"
    reply = FakeReply(status=401, error=f"Incorrect API key provided: {key}")
    with FakeServer(lambda body, n: reply) as server:
        data = _llm_data(server.base_url)
        data["llm"]["api_key"] = key
        proc = cli("run", str(write_config(tmp_path / "c.yaml", data)), "--out", str(tmp_path / "run"), "--quiet",
                   check=False)
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert "refused the API key (HTTP 401" in proc.stderr and key not in proc.stderr
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["status"] == "failed" and "LLMAuthError" in summary["error"]
    for file in (tmp_path / "run").rglob("*"):
        if file.is_file():
            assert key.encode() not in file.read_bytes(), file


@pytest.mark.parametrize("content", ["missing", "empty", "binary"])
def test_report_of_a_directory_that_is_not_a_run(tmp_path, content, capsys):
    """Probe: `socialgym report` on a missing/empty directory or a binary rounds.csv gave a traceback."""
    from socialgym.cli import main

    out = tmp_path / "x"
    if content != "missing":
        out.mkdir()
    if content == "binary":
        (out / "rounds.csv").write_bytes(b"\xff\xfe\x00garbage")
        (out / "summary.json").write_text("{}")
    assert main(["report", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and ("rounds.csv" in err)


@pytest.mark.slow
def test_a_sweep_reports_its_runs_problems_and_exits_1(tmp_path):
    """The fallback-share check reaches sweeps: every run over the threshold is named."""
    need_module("openai")
    from socialgym.llm.testing import FakeServer

    with FakeServer(lambda body, n: "no JSON here") as server:
        data = _llm_data(server.base_url, replicates=2, workers=1)
        data["logging"]["report"] = False
        path = write_config(tmp_path / "c.yaml", data)
        proc = cli("run", str(path), "--out", str(tmp_path / "sweep"), "--quiet", check=False)
    assert proc.returncode == 1
    assert proc.stderr.count("max_fallback_share") == 2 and "rep_0" in proc.stderr and "rep_1" in proc.stderr
