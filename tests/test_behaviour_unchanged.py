"""Issue 27's restructuring moved code, not behaviour: the files three runs write are
byte-identical to those recorded before anything moved (benchmarks/behaviour_hashes.py;
benchmarks/results_behaviour_hashes.json was written at 7b38bee; the LLM run's three files were
recorded again in issue 30, which changes that run's prompts on purpose)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from capabilities import need_module

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "behaviour_hashes.py"


def _module():
    spec = importlib.util.spec_from_file_location("behaviour_hashes", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_outputs_byte_identical_to_the_recorded_runs(tmp_path):
    need_module("openai")
    hashes = _module()
    recorded = json.loads(hashes.RESULTS.read_text(encoding="utf-8"))["files"]
    computed = hashes.compute(tmp_path)
    assert len(recorded) == 66                 # 3 demo files, 20 study runs x 3, 3 of the LLM run
    assert hashes.check(computed, recorded) == []


def test_the_check_names_a_file_that_differs():
    hashes = _module()
    recorded = {"demo-no-llm/rounds.csv": "a" * 64, "llm-fake/events.jsonl": "b" * 64}
    computed = {"demo-no-llm/rounds.csv": "c" * 64, "extra/network.csv": "d" * 64}
    assert hashes.check(computed, recorded) == ["demo-no-llm/rounds.csv: differs", "llm-fake/events.jsonl: missing",
                                                "extra/network.csv: not recorded"]
