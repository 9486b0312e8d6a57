"""The reliability probe's quick subset (benchmarks/probe_reliability.py --quick): no bad outcome.

Runs in-process, under a minute. Each bad outcome is listed in the failure message with its
category, case name and what went wrong (the traceback's last line, or the broken rule); the
full probe (docs/reliability.md) is `.venv/bin/python benchmarks/probe_reliability.py`.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

PROBE = Path(__file__).resolve().parents[1] / "benchmarks" / "probe_reliability.py"

pytestmark = pytest.mark.slow          # the whole module: one probe run of about half a minute


def _load_probe():
    spec = importlib.util.spec_from_file_location("probe_reliability", PROBE)
    module = importlib.util.module_from_spec(spec)
    sys.modules["probe_reliability"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def quick_report():
    return _load_probe().run_probe(quick=True)


def test_quick_probe_covers_every_category(quick_report):
    probe = sys.modules["probe_reliability"]
    assert set(quick_report["summary"]) - {"total"} == set(probe.CATEGORIES)
    assert quick_report["summary"]["total"]["cases"] >= 50


def test_quick_probe_has_no_bad_outcome(quick_report):
    bad = [c for c in quick_report["cases"] if c["outcome"] == "bad outcome"]
    listing = "\n".join(f"  - {c['category']} / {c['name']}: {c['detail']}" for c in bad)
    assert not bad, f"{len(bad)} bad outcome(s) in the reliability probe's quick subset:\n{listing}"
