"""docs/reproduction.md is what benchmarks/reproduction.py writes from the committed summaries."""

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import reproduction  # noqa: E402

from socialgym.experiments.studies import evidence as ev  # noqa: E402
from socialgym.experiments.studies import reproduction as rep  # noqa: E402
from socialgym.experiments.studies import reproduction_table as table  # noqa: E402


def test_the_page_equals_the_generators_output():
    expected = reproduction.page()
    actual = (ROOT / "docs" / "reproduction.md").read_text(encoding="utf-8")
    assert actual == expected, "docs/reproduction.md is stale: run `python benchmarks/reproduction.py`"


def test_the_cocoon_table_of_recommenders_md_equals_the_generators_output():
    text = (ROOT / "docs" / "recommenders.md").read_text(encoding="utf-8")
    section = text.split("<!-- cocoon:begin -->\n", 1)[1].split("\n<!-- cocoon:end -->", 1)[0]
    assert section == reproduction.cocoon_table(reproduction.load("recagent")).strip()


def test_every_summary_the_page_reads_is_committed_and_small():
    for name in ("core", "moderation", "recagent", "agentsociety", "soc_strategy", "rerun"):
        path = reproduction.SUMMARIES / f"{name}.json"
        if name in ("core", "moderation") and not path.is_file():
            continue                      # an LLM study not run yet: its rows say "not run"
        assert path.is_file(), f"{path} is missing"
        assert path.stat().st_size < 400_000, f"{path} is not small"
        json.loads(path.read_text())


def test_at_least_25_rows_each_with_a_value_an_interval_or_a_reason_and_no_verdict_below_scale():
    summaries = {n: reproduction.load(n) for n in ("core", "moderation", *reproduction.SCRIPTED, "rerun")}
    rows = [r for r in rep.all_rows(summaries) if r.verdict != "not run"]
    assert len(rows) >= 25
    for r in rows:
        assert r.paper_value and r.where and r.command
        assert r.population == "scripted users" or r.population.startswith("LLM agents ("), r.population
        assert "(n = " in r.result, r.result
        if r.verdict in (ev.SUPPORTED, ev.CONTRADICTED):
            assert not r.shortfalls
        if r.shortfalls:
            assert r.verdict == ev.NOT_TESTED


def _summary(per_run, agents=50, rounds=50):
    return {"study": "synthetic", "command": "cmd", "population": "scripted users",
            "design": {"agents": agents, "rounds": rounds, "runs": len(next(iter(per_run.values()))),
                       "intervene_from": 20, "interests_per_user": 3},
            "measures": {"entropy_after": {"description": "", "per_run": per_run}}}


@pytest.mark.parametrize("agents,expected", [(50, ev.SUPPORTED), (12, ev.NOT_TESTED)])
def test_a_row_is_gated_by_the_papers_scale(agents, expected):
    from socialgym.experiments.studies.reproduction_recsys import REC_DESIGN

    s = _summary({"replace_3": [1.3, 1.31, 1.29, 1.3, 1.32], "replace_1": [1.0, 1.01, 0.99, 1.0, 1.0]}, agents)
    claim = table.Claim("recagent", "3 rather than 1", "+30.8 %", "Fig. 4d", REC_DESIGN, 0.308)
    iv = ev.relative_change(table.per_run(s, "entropy_after", "replace_3"), table.per_run(s, "entropy_after", "replace_1"))
    r = table.row(claim, s, "x", iv, +1, percent=True)
    assert r.verdict == expected
    assert r.size == "paper's +30.8 % inside our interval"
