"""A link planted at every output name of ``validate``, ``report``, ``calibrate`` and ``distill``,
and at their lock files: nothing outside changes (issue 44, second class).

Each case plants one link — a symbolic link to a file (or folder) outside, or a hard link to a
file outside — under one name the command writes, runs the command in-process, and checks that
the outside file holds its bytes (the outside folder its file), that the command either wrote
around the link (status 0: the name replaced, not written through) or refused in one line, and
that no traceback came out."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from capabilities import need_module
import yaml

from socialgym.cli import main
from socialgym.rundir import layout
from socialgym.rundir.lock import lock_path

PRECIOUS = b"precious bytes outside\n"
RUN = {"seed": 0, "env": {"n_agents": 8, "max_rounds": 3, "recommender": "random"},
       "policy": {"groups": [{"name": "users", "kind": "social_users", "agents": 4},
                             {"name": "greedy", "kind": "greedy"}]},
       "logging": {"decisions": "all", "report": False, "progress": False}, "run": {"snapshots": False}}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    from socialgym.experiments import load_config, run_experiment

    root = tmp_path_factory.mktemp("runs")
    for s in range(2):
        run_experiment(load_config({**RUN, "seed": s}), root / f"r{s}", progress=False)
    return root


def _plant(where: Path, outside: Path, kind: str) -> None:
    """A link at ``where`` to a precious file (or a folder holding one) in ``outside``."""
    where.parent.mkdir(parents=True, exist_ok=True)
    outside.mkdir(exist_ok=True)
    target = outside / "precious.bin"
    target.write_bytes(PRECIOUS)
    if kind == "symlink":
        where.symlink_to(target)
    elif kind == "hardlink":
        os.link(target, where)
    else:                                    # a folder name linked to a folder outside
        where.symlink_to(outside, target_is_directory=True)


def _check(status: int, capsys, outside: Path) -> None:
    err = capsys.readouterr().err
    assert (outside / "precious.bin").read_bytes() == PRECIOUS
    assert sorted(p.name for p in outside.iterdir()) == ["precious.bin"], "something was written outside"
    assert "Traceback" not in err
    assert status == 0 or (status in (2, 4) and err.count("\n") == 1 and err.startswith("socialgym: error:")), \
        (status, err)


# ---------------------------------------------------------------------------------- validate, report
@pytest.mark.parametrize("kind", ["symlink", "hardlink"])
@pytest.mark.parametrize("name", [layout.REALISM_MD, layout.REALISM_JSON, layout.REALISM_CSV, layout.REALISM_HTML])
def test_validate_out(runs, tmp_path, capsys, name, kind):
    out = tmp_path / "card"
    _plant(out / name, tmp_path / "outside", kind)
    _check(main(["validate", str(runs / "r0"), "--out", str(out)]), capsys, tmp_path / "outside")


def test_validate_out_folder_linked(runs, tmp_path, capsys):
    _plant(tmp_path / "card", tmp_path / "outside", "folder")
    _check(main(["validate", str(runs / "r0"), "--out", str(tmp_path / "card")]), capsys, tmp_path / "outside")


REPORT_NAMES = [(layout.REPORT, "symlink"), (layout.REPORT, "hardlink"), (layout.VIEWER, "symlink"),
                (layout.VIEWER, "hardlink"), (f"{layout.PLOTS}/rewards.png", "symlink"),
                (f"{layout.PLOTS}/rewards.png", "hardlink"), (layout.PLOTS, "folder")]


@pytest.mark.parametrize("name, kind", REPORT_NAMES)
def test_report(runs, tmp_path, capsys, name, kind):
    import shutil

    run = Path(shutil.copytree(runs / "r0", tmp_path / "run"))
    _plant(run / name, tmp_path / "outside", kind)
    _check(main(["report", str(run)]), capsys, tmp_path / "outside")


# ---------------------------------------------------------------------------------- calibrate
CALIBRATE_FILES = [layout.SEARCH_KEY, layout.SEARCH_LOG, layout.CALIBRATION_JSON, layout.CALIBRATION_MD,
                   "calibrated.json", f"before/{layout.REALISM_JSON}", f"after/{layout.REALISM_MD}"]


@pytest.mark.slow
@pytest.mark.parametrize("name, kind", [(n, k) for n in CALIBRATE_FILES for k in ("symlink", "hardlink")]
                         + [(f, "folder") for f in ("before", "after", "trials", "eval_before", "eval_after")]
                         + [("<lock>", "hardlink"), ("<lock>", "symlink")])
def test_calibrate(tmp_path, capsys, name, kind):
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump({"seed": 0, "env": {"n_agents": 24, "max_rounds": 5},
                                      "policy": {"kind": "social_users"}, "logging": {"report": False},
                                      "run": {"snapshots": False}}))
    targets = tmp_path / "t.yaml"
    targets.write_text("facts: {reciprocity: reference}\n")
    out = tmp_path / "cal"
    _plant(lock_path(out) if name == "<lock>" else out / name, tmp_path / "outside", kind)
    status = main(["calibrate", str(config), "--targets", str(targets), "--out", str(out), "--trials", "1",
                   "--workers", "1", "--seeds", "1", "--eval-seeds", "1", "--minutes", "1"])
    _check(status, capsys, tmp_path / "outside")


# ---------------------------------------------------------------------------------- distill
@pytest.mark.slow
@pytest.mark.parametrize("name, kind", [("model.pt", "symlink"), ("model.pt", "hardlink"),
                                        (f"report/{layout.FIDELITY_MD}", "symlink"),
                                        (f"report/{layout.FIDELITY_JSON}", "hardlink"),
                                        (f"report/{layout.REPLAYS}", "folder"),
                                        (f"report/{layout.REPLAYS}/00-r1", "folder")])
def test_distill(runs, tmp_path, capsys, name, kind):
    need_module("torch")
    _plant(tmp_path / name, tmp_path / "outside", kind)
    status = main(["distill", str(runs / "r0"), str(runs / "r1"), "--out", str(tmp_path / "model.pt"),
                   "--report", str(tmp_path / "report"), "--epochs", "1"])
    _check(status, capsys, tmp_path / "outside")
