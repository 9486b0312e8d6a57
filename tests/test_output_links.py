"""Writes and deletions stay inside what the user named (issue 44, second class): a model file is
saved through a new temporary name, never a fixed one a link may sit under; a report's replays are
not rebuilt through a linked folder; a lock file that is a hard link to another file is refused
rather than truncated."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from capabilities import need_module

from socialgym.experiments.errors import RunError
from socialgym.rundir import RunDirError, writer_lock
from socialgym.rundir.lock import lock_path

ROOT = Path(__file__).resolve().parents[1]


def test_a_lock_file_that_is_a_hard_link_is_refused_and_its_target_kept(tmp_path):
    outside = tmp_path / "precious.txt"
    outside.write_text("keep me")
    run = tmp_path / "run"
    os.link(outside, lock_path(run))
    with pytest.raises(RunDirError, match="one link"):
        with writer_lock(run, "run"):
            pass
    assert outside.read_text() == "keep me"
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump({"env": {"n_agents": 4, "max_rounds": 1}, "policy": {"kind": "random"},
                                      "logging": {"report": False, "progress": False}}))
    proc = subprocess.run([sys.executable, "-m", "socialgym.cli", "run", str(config), "--out", str(run)],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "one link" in proc.stderr
    assert outside.read_text() == "keep me" and not run.exists()


def test_a_plain_lock_file_is_taken_as_before(tmp_path):
    run = tmp_path / "run"
    lock_path(run).write_text("left by an earlier run")
    with writer_lock(run, "run"):
        assert '"command": "run"' in lock_path(run).read_text()


def test_a_model_is_saved_through_no_planted_link(tmp_path):
    need_module("torch")
    from test_distill import _synthetic_run

    from socialgym.training.distill import Args, behaviour_clone
    from socialgym.training.torch_policy import TorchPolicy, save_policy
    from socialgym.rundir.decisions import read_decisions

    _synthetic_run(0, tmp_path / "run")
    train, _ = read_decisions([tmp_path / "run"])
    actor, _ = behaviour_clone(train, Args(epochs=1, seed=0))
    outside = tmp_path / "outside.txt"
    outside.write_text("keep me")
    models = tmp_path / "models"
    models.mkdir()
    (models / "model.tmp").symlink_to(outside)          # the fixed name the save once wrote through
    save_policy(models / "model.pt", actor, train["act"].layout, Args(epochs=1))
    assert outside.read_text() == "keep me"
    assert sorted(p.name for p in models.iterdir()) == ["model.pt", "model.tmp"]   # no temporary file left
    assert oct((models / "model.pt").stat().st_mode & 0o777) == "0o644"
    TorchPolicy.load(models / "model.pt", deterministic=True)


@pytest.mark.parametrize("link", ["replays", "run"])
def test_a_replay_is_not_rebuilt_through_a_link(tmp_path, link):
    from socialgym.experiments.run.distill import replay

    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "00-run").mkdir(parents=True)
    (elsewhere / "00-run" / "keep.txt").write_text("keep me")
    report = tmp_path / "report"
    report.mkdir()
    if link == "replays":
        (report / "replays").symlink_to(elsewhere)
    else:
        (report / "replays").mkdir()
        (report / "replays" / "00-run").symlink_to(elsewhere / "00-run")
    with pytest.raises(RunError, match="is a link"):
        replay(tmp_path / "run", tmp_path / "model.pt", report / "replays" / "00-run")
    assert (elsewhere / "00-run" / "keep.txt").read_text() == "keep me"
