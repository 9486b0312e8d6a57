"""The agentsociety2 scripted-user study (§7.4 cocoons and tail strategies, §7.5 stance
penalty): its --quick run writes the fixed summary format, and the numbers behave."""

from __future__ import annotations

import json
import math
import time

import numpy as np
import pytest
from capabilities import need_module

need_module("torch")
from socialgym.experiments.studies import agentsociety  # noqa: E402

CONDITIONS_74 = {"base", "tail_quota_transfer", "efficiency_boost", "underserved_boost"}


@pytest.fixture(scope="module")
def summary(tmp_path_factory):
    out = tmp_path_factory.mktemp("agentsociety")
    start = time.perf_counter()
    agentsociety.main(["--out", str(out), "--quick"])
    took = time.perf_counter() - start
    with open(out / "summary.json", encoding="utf-8") as fh:
        return {**json.load(fh), "_took": took, "_out": out}


def test_summary_format(summary):
    assert summary["study"] == "agentsociety" and summary["population"] == "scripted users"
    assert summary["command"].startswith("socialgym study agentsociety --out DIR")
    # the study's own clock: positive, and within the time main() took as measured from outside
    assert isinstance(summary["wall_seconds"], float) and 0 < summary["wall_seconds"] <= summary["_took"] + 0.01
    design = summary["design"]
    assert all(isinstance(design[key], int) for key in ("agents", "rounds", "runs"))
    runs = design["runs"]
    assert runs >= 2
    assert summary["notes"] and all(isinstance(n, str) and "\n" not in n for n in summary["notes"])
    measures = summary["measures"]
    for group in ("narrow", "medium", "broad"):
        assert set(measures[f"deep_cocoon_share:{group}"]["per_run"]) == CONDITIONS_74
    assert set(measures["deep_cocoon_share"]["per_run"]) == CONDITIONS_74
    for name in ("cross_cutting_shown", "cross_cutting_chosen", "gap_ranking_pp", "gap_choice_pp"):
        assert set(measures[name]["per_run"]) == {"base", "stance_penalty"}
    for name, measure in measures.items():
        assert isinstance(measure["description"], str) and "\n" not in measure["description"], name
        for condition, values in measure["per_run"].items():
            assert len(values) == runs, (name, condition)
            assert all(v is None or isinstance(v, float) for v in values), (name, condition)
    json.dumps({k: v for k, v in summary.items() if not k.startswith("_")}, allow_nan=False)       # strict JSON


def _values(summary, measure, condition):
    return np.array(summary["measures"][measure]["per_run"][condition], dtype=float)


def test_shares_are_fractions_and_the_split_adds_up(summary):
    for name, measure in summary["measures"].items():
        if "share" in name or name.startswith("cross_cutting"):
            for values in measure["per_run"].values():
                assert all(v is None or 0.0 <= v <= 1.0 for v in values), name
    for condition in ("base", "stance_penalty"):
        total = _values(summary, "gap_total_pp", condition)
        parts = _values(summary, "gap_ranking_pp", condition) + _values(summary, "gap_choice_pp", condition)
        assert np.allclose(total, parts, equal_nan=True)


def test_the_stance_penalty_shows_fewer_cross_cutting_items_on_every_seed(summary):
    assert (_values(summary, "cross_cutting_shown", "stance_penalty")
            < _values(summary, "cross_cutting_shown", "base")).all()
    # the pool is what the users wrote: the same on every seed whatever the ranking
    supply = _values(summary, "cross_cutting_supply", "base")
    assert all(math.isfinite(v) for v in supply)


def test_moving_slots_to_tail_topics_takes_the_targeted_group_out_of_its_cocoon(summary):
    """Tail QuotaTransfer, aimed at the narrow group, leaves fewer of its users in a deep cocoon
    than the base recommender on the same seed (common random numbers)."""
    base = _values(summary, "deep_cocoon_share:narrow", "base")
    tail = _values(summary, "deep_cocoon_share:narrow", "tail_quota_transfer")
    assert (tail < base).all()


def test_every_run_is_a_run_directory_of_its_part(summary):
    out = summary["_out"]
    for part, conditions in (("cocoon", CONDITIONS_74), ("polar", {"base", "stance_penalty"})):
        manifest = json.loads((out / part / "sweep.json").read_text())
        assert len(manifest["jobs"]) == len(conditions) * summary["design"]["runs"]
        assert all((out / part / job["out"] / "network.csv").is_file() for job in manifest["jobs"])
