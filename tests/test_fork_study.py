"""The intervention studies run as forks (issue 20): ``socialgym study misinformation`` and
``socialgym study soc-strategy`` on scripted agents, their effects table and verdicts, and the
verdict rule itself on effects computed by hand."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest

from socialgym.experiments import load_config
from socialgym.experiments.studies.fork_studies import FORK_STUDIES, _verdict
from socialgym.experiments.studies.ties_coach import STUDIES, config_path, run_study


def rows_until(path: Path, last: int) -> list[str]:
    return [x for x in path.read_text().splitlines()[1:] if int(x.split(",")[0]) <= last]


@pytest.fixture(scope="module")
def misinformation(tmp_path_factory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("study") / "mis"
    return out, run_study("misinformation", out, replicates=3, progress=False)


@pytest.mark.slow
def test_the_misinformation_study_forks_three_branches(misinformation):
    out, result = misinformation
    assert result["runs"] == 9
    manifest = json.loads((out / "sweep.json").read_text())
    control = manifest["jobs"][0]
    for job in manifest["jobs"][3:]:
        base = out / job["fork_from"]
        assert job["fork_at"] == 4 and base.parent.name == control["condition_id"]
        assert rows_until(out / job["out"] / "rounds.csv", 4) == rows_until(base / "rounds.csv", 4)
    with open(out / "effects.csv", newline="") as f:
        effects = list(csv.DictReader(f))
    assert [(e["a"], e["b"], e["from_round"]) for e in effects[::4]] == [
        ("control", "claim", "5"), ("control", "claim + correction", "5"), ("claim", "claim + correction", "8")]
    assert len(effects) == 3 * len(FORK_STUDIES["misinformation"].metrics)
    assert set(result["claims"]) == {e.text for e in FORK_STUDIES["misinformation"].expectations}
    assert set(result["claims"].values()) <= {"supported", "contradicted", "inconclusive"}
    info = json.loads((out / "study.json").read_text())
    assert info["model"] == "none (scripted agents)" and info["scale"] == "scripted"
    assert (out / "plots" / "branches.png").stat().st_size > 10_000
    page = (out / "study.html").read_text()
    assert "<h2>Expectations</h2>" in page
    assert "<h2>Realism scorecard</h2>" in page and page.count("<h3>") == 3     # one per condition


@pytest.mark.slow
def test_the_effect_is_the_mean_over_pairs_of_each_pairs_mean_difference(misinformation):
    from socialgym.experiments.analysis.statistics import mean_ci

    out, result = misinformation
    manifest = json.loads((out / "sweep.json").read_text())
    runs = {(j["condition_id"], j["replicate"]): out / j["out"] for j in manifest["jobs"]}
    cids = list(dict.fromkeys(j["condition_id"] for j in manifest["jobs"]))

    def stance(path: Path) -> dict[int, float]:
        with open(path / "surveys.csv", newline="") as f:
            rows = list(csv.DictReader(f))
        rounds = sorted({int(r["round"]) for r in rows})
        return {t: sum(int(r["answer"]) for r in rows if int(r["round"]) == t) / 30 for t in rounds}

    per_pair = []
    for k in range(3):
        a, b = stance(runs[cids[0], k]), stance(runs[cids[1], k])
        per_pair.append(sum(b[t] - a[t] for t in (6, 9, 12)) / 3)     # survey rounds from round 5 on
    mean, low, high, n = mean_ci(per_pair)
    got = next(e for e in result["effects"] if e["b"] == "claim" and e["metric"] == "survey:stance.stance")
    assert got["effect"] == pytest.approx(sum(per_pair) / 3) and got["n_pairs"] == 3
    assert (got["ci_low"], got["ci_high"]) == pytest.approx((low, high))


@pytest.mark.slow
def test_the_soc_strategy_study_from_the_command_line(tmp_path):
    from socialgym.cli import main

    out = tmp_path / "soc"
    assert main(["study", "soc-strategy", "--out", str(out), "--replicates", "2", "--fork-at", "18", "--quiet"]) == 0
    manifest = json.loads((out / "sweep.json").read_text())
    forked = [j for j in manifest["jobs"] if j.get("fork_from")]
    assert [j["fork_at"] for j in forked] == [18, 18]
    text = (out / "compare" / f"{forked[0]['condition_id']}.md").read_text()
    assert "| n_ties | 20 |" in text               # the ties are added at the start of round 20
    effects = json.loads((out / "effects.json").read_text())["effects"]
    assert {e["from_round"] for e in effects} == {20}


def test_the_verdict_rule():
    spec = FORK_STUDIES["misinformation"]
    expectation = spec.expectations[0]            # claim - control, lower expected

    def effect(mean, low, high, n):
        return [{"a": "control", "b": "claim", "metric": "survey:stance.stance", "effect": mean, "ci_low": low,
                 "ci_high": high, "n_pairs": n}]

    assert _verdict(expectation, effect(-1.0, -1.5, -0.5, 5), spec)["verdict"] == "supported"
    assert _verdict(expectation, effect(1.0, 0.5, 1.5, 5), spec)["verdict"] == "contradicted"
    assert _verdict(expectation, effect(-0.2, -0.5, 0.1, 5), spec)["verdict"] == "inconclusive"
    one = _verdict(expectation, effect(-1.0, -1.0, -1.0, 1), spec)
    assert one["verdict"] == "inconclusive" and one["reason"] == "one pair: no interval"
    assert math.isnan(_verdict(expectation, effect(math.nan, math.nan, math.nan, 0), spec)["effect"])


@pytest.mark.parametrize("study, scale", [(s, k) for s in STUDIES for k in STUDIES[s]])
def test_every_study_config_loads(study, scale):
    cfg = load_config(config_path(study, scale))
    if study in FORK_STUDIES:
        assert cfg.run.fork_at is not None and len(cfg.sweep["interventions"]) == len(FORK_STUDIES[study].labels)
