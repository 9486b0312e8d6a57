"""Studies are runs (issue 45): every study whose registry entry says it writes run directories
runs at its smallest scale, and each of its run directories opens with ``socialgym report`` and
``socialgym validate``; the studies that do not yet are named, so the list can only shrink."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from capabilities import need_module

from socialgym.cli import main
from socialgym.experiments.studies.registry import STUDIES, STUDY

need_module("matplotlib")

NOT_YET_RUN_DIRECTORIES = ("platform-objectives", "moderation", "co-adaptation")
"""They play their own loops (a trained platform, a second substrate): issue 45 continues."""


def test_the_registry_says_which_studies_write_run_directories():
    assert {s.name for s in STUDIES if not s.writes_runs} == set(NOT_YET_RUN_DIRECTORIES)


def _smallest(name: str, out: Path) -> None:
    """``socialgym study NAME`` at its smallest scale into ``out``."""
    if name in ("cocoon", "recagent", "agentsociety"):
        need_module("torch")                              # MF
        argv = {"cocoon": ["--agents", "8", "--rounds", "6", "--topics", "4", "--intervene-from", "4",
                           "--replacements", "1", "--replicates", "1", "--workers", "1"],
                "recagent": ["--quick", "--workers", "1"],
                "agentsociety": ["--quick", "--replicates", "1", "--workers", "1"]}[name]
        assert main(["study", name, "--out", str(out), *argv]) == 0
    elif name == "ties-coach":
        need_module("openai")
        from socialgym.experiments.studies.ties_coach import run_study
        from socialgym.llm.testing import FakeServer
        with FakeServer() as server:
            run_study(name, out, scale="small", replicates=1, base_url=server.base_url, model="fake", progress=False)
    else:                                                  # soc-strategy, misinformation: scripted forks
        assert main(["study", name, "--out", str(out), "--replicates", "1", "--quiet"]) == 0


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("name", [s.name for s in STUDIES if s.writes_runs])
def test_each_run_of_a_study_opens_with_report_and_validate(tmp_path, capsys, name):
    out = tmp_path / name
    _smallest(name, out)
    runs = [sweep.parent / job["out"] for sweep in sorted(out.rglob("sweep.json"))    # agentsociety: two sweeps
            for job in json.loads(sweep.read_text())["jobs"]]
    assert runs and all((run / "summary.json").is_file() for run in runs)
    assert {json.loads((run / "summary.json").read_text())["status"] for run in runs} == {"complete"}
    for run in runs:
        capsys.readouterr()
        assert main(["report", str(run)]) == 0, capsys.readouterr().err
        assert (run / "report.html").stat().st_size > 1000
        assert main(["validate", str(run)]) == 0, capsys.readouterr().err
        assert "over 1 run" in capsys.readouterr().out
    assert main(["validate", str(out)]) == 0                     # the whole study at once
    assert f"over {len(runs)} run" in capsys.readouterr().out
    assert STUDY[name].writes_runs
