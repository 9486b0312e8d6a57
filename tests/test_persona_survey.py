"""Personas in runs (issue 14): the bundled climate-change set and the Mini-IPIP pre-survey wired
through the runner, with scripted answers from the fake server scored by hand."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from capabilities import need_module

from socialgym.agents.persona import STANCES, climate_change_personas, load_personas
from socialgym.experiments import ConfigError, load_config


def test_climate_change_set_spreads_stances_evenly():
    personas = load_personas("climate-change")
    assert len(personas) == 30 and len({p.name for p in personas}) == 30
    counts = Counter(p.stance for p in personas)
    assert counts == Counter({f"{s} action on climate change": 6 for s in STANCES})
    assert all(p.issue == "action on climate change" and "climate" in p.interests for p in personas)
    assert [p.to_dict() for p in climate_change_personas()] == [p.to_dict() for p in personas]   # fixed
    assert len(climate_change_personas(10)) == 10


def test_persona_source_and_survey_in_configs(tmp_path):
    assert load_config({"personas": "climate-change"}).personas.source == "climate-change"
    cfg = load_config({"personas": {"source": "climate-change", "survey": True}, "policy": {"kind": "llm"}})
    assert cfg.personas.survey is True
    with pytest.raises(ConfigError, match="personas.survey"):
        load_config({"personas": {"survey": True}, "policy": {"kind": "greedy"}})
    with pytest.raises(ConfigError, match="personas.surve"):
        load_config({"personas": {"surve": True}})
    with pytest.raises(ConfigError, match="personas must be"):
        load_config({"personas": 3})


def test_survey_runs_through_the_runs_model_and_is_scored_by_hand(tmp_path):
    need_module("openai")
    from socialgym.experiments import run_experiment
    from socialgym.llm.testing import FakeServer, schema_of

    # q_k = 5 for odd k, 1 for even k. Reverse-keyed items score 6 - a. Keys (Mini-IPIP order):
    # E: q1 +, q6 -, q11 +, q16 -  -> 5, 5, 5, 5 -> 5.0     A: q2 +, q7 -, q12 +, q17 - -> 1, 1, 1, 1 -> 1.0
    # C: q3 +, q8 -, q13 +, q18 -  -> 5, 5, 5, 5 -> 5.0     N: q4 +, q9 -, q14 +, q19 - -> 1, 1, 1, 1 -> 1.0
    # I: q5 +, q10 -, q15 -, q20 - -> 5, 5, 1, 5 -> 4.0
    answers = {f"q{k}": 5 if k % 2 else 1 for k in range(1, 21)}

    def responder(body, n):
        schema = schema_of(body) or {}
        if "answers" in schema.get("properties", {}):
            return json.dumps({"answers": answers})
        return None if schema else "Fine words about the climate."

    with FakeServer(responder) as server:
        cfg = load_config({"seed": 0, "env": {"n_agents": 4, "max_rounds": 1, "n_actions": 1},
                           "policy": {"kind": "llm"},
                           "personas": {"source": "climate-change", "survey": True},
                           "llm": {"base_url": server.base_url, "model": "fake", "api_key": "k"}})
        run_experiment(cfg, tmp_path / "run", progress=False)
        surveys = [b for b in server.requests if "answers" in (schema_of(b) or {}).get("properties", {})]
    assert len(surveys) == 4
    saved = json.loads((tmp_path / "run" / "personas.json").read_text())
    intended = climate_change_personas()
    for i in range(4):
        p = saved[f"agent_{i}"]
        assert p["big_five_measured"] == {"E": 5.0, "A": 1.0, "C": 5.0, "N": 1.0, "I": 4.0}
        assert p["big_five"] == dict(intended[i].big_five)          # the intended scores stay beside
    report = (tmp_path / "run" / "report.html").read_text()
    assert "Personas" in report and "measured" in report
