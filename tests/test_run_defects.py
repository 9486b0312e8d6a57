"""Four defects of issue 27, each with the case that showed it.

1. A sweep skipped a run it found "complete" without checking it: now the summary's round count,
   run.json's replicate and seed, the config and the files (against the checkpoint) are verified.
2. An unknown model (HTTP 404) gave a fallback on every request: now the run stops with one
   line naming the model and the server.
3. A sweep over ``personas`` dropped the section's ``survey`` key.
4. The persona survey's requests were counted in the usage but missing from transcripts.jsonl.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from capabilities import need_module
import yaml

from socialgym.experiments import RunError, load_config
from socialgym.experiments.run.sweep import jobs, resume_sweep, run_sweep

ROOT = Path(__file__).resolve().parents[1]


def tiny_sweep(**changes):
    raw = {"seed": 1,
           "env": {"n_agents": 5, "max_rounds": 3, "recommender": "random"},
           "policy": {"kind": "greedy"},
           "logging": {"progress": False, "report": False},
           "run": {"replicates": 1, "workers": 2},
           "sweep": {"env.recommender": ["random", "chronological"]}}
    raw.update(changes)
    return load_config(raw)


@pytest.fixture()
def sweep(tmp_path):
    out = tmp_path / "sweep"
    run_sweep(tiny_sweep(), out, progress=False)
    return out


def _run_dirs(out: Path) -> list[Path]:
    return sorted(p.parent for p in (out / "runs").rglob("summary.json"))


# ---------------------------------------------------------------------------------- 1. sweeps verify
@pytest.mark.slow
def test_an_untouched_complete_sweep_is_skipped_whole(sweep):
    before = {p: (p / "rounds.csv").read_bytes() for p in _run_dirs(sweep)}
    result = resume_sweep(sweep, progress=False)
    assert (result["ran"], result["skipped"]) == (0, 2)
    assert {p: (p / "rounds.csv").read_bytes() for p in _run_dirs(sweep)} == before


@pytest.mark.slow
def test_another_cells_run_in_a_jobs_folder_is_not_skipped(sweep):
    first, second = _run_dirs(sweep)             # c00 (random) and c01 (chronological)
    shutil.rmtree(first)
    shutil.copytree(second, first)               # a complete run, but of the other condition
    with pytest.raises(RunError) as info:
        resume_sweep(sweep, progress=False)
    message = str(info.value)
    assert "1 of 2 sweep jobs failed" in message and "c00-env.recommender=random/rep_0" in message
    assert "is not the sweep cell's config" in message


@pytest.mark.slow
def test_a_summary_that_claims_more_than_was_run_is_not_skipped(sweep):
    run = _run_dirs(sweep)[0]
    summary = json.loads((run / "summary.json").read_text())
    summary["rounds_completed"] = 2              # max_rounds is 3
    (run / "summary.json").write_text(json.dumps(summary))
    with pytest.raises(RunError, match="reports 2 rounds, not 3"):
        resume_sweep(sweep, progress=False)


@pytest.mark.slow
def test_a_changed_output_file_of_a_complete_run_is_found(sweep):
    run = _run_dirs(sweep)[1]
    rounds = run / "rounds.csv"
    rounds.write_text(rounds.read_text().replace(",greedy,", ",edited,", 1))
    with pytest.raises(RunError, match=r"rounds\.csv differs from what this run wrote"):
        resume_sweep(sweep, progress=False)


@pytest.mark.slow
def test_a_run_json_of_another_replicate_is_found(sweep):
    run = _run_dirs(sweep)[0]
    info = json.loads((run / "run.json").read_text())
    info["seed"] = 99
    (run / "run.json").write_text(json.dumps(info))
    with pytest.raises(RunError, match="names replicate 0 and seed 99, not 0 and 1"):
        resume_sweep(sweep, progress=False)


# ---------------------------------------------------------------------------------- 2. unknown model
NOT_FOUND = {"error": {"message": "The model `no-such-model` does not exist.", "type": "invalid_request_error",
                       "code": "model_not_found"}}


def test_an_unknown_model_stops_the_client_at_the_first_reply():
    need_module("openai")
    from socialgym.llm import LLMClient, LLMModelError
    from socialgym.llm.testing import FakeReply, FakeServer

    with FakeServer(lambda body, n: FakeReply(status=404, body=NOT_FOUND)) as server, \
            LLMClient(server.base_url, "no-such-model", api_key="k", max_retries=3, backoff=0.001) as client:
        with pytest.raises(LLMModelError) as info:
            client.run(client.chat([{"role": "user", "content": "hi"}]))
        message = str(info.value)
        assert "\n" not in message and server.base_url in message and "'no-such-model'" in message
        assert "HTTP 404" in message and "llm.model" in message
        assert len(server.requests) == 1                       # no retry


def test_an_unknown_model_is_fatal_not_a_fallback():
    need_module("openai")
    from socialgym.llm import LLMClient, LLMError, LLMFatalError, LLMModelError
    from socialgym.llm.testing import FakeReply, FakeServer

    assert issubclass(LLMModelError, LLMFatalError) and not issubclass(LLMModelError, LLMError)
    with FakeServer(lambda body, n: FakeReply(status=404, body=NOT_FOUND)) as server, \
            LLMClient(server.base_url, "no-such-model", api_key="k", max_retries=3, backoff=0.001) as client:
        with pytest.raises(LLMModelError):
            client.run(client.chat([{"role": "user", "content": "hi"}]))
        sent = len(server.requests)
        with pytest.raises(LLMModelError):                       # complete_* do not turn it into a fallback
            client.run(client.complete_text([{"role": "user", "content": "again"}]))
        assert len(server.requests) == sent and client.usage.fallbacks == []


def test_a_404_without_a_model_names_the_address():
    need_module("openai")
    from socialgym.llm import LLMClient, LLMModelError
    from socialgym.llm.testing import FakeReply, FakeServer

    with FakeServer(lambda body, n: FakeReply(status=404, body={"detail": "Not Found"})) as server, \
            LLMClient(server.base_url, "m", api_key="k", backoff=0.001) as client:
        with pytest.raises(LLMModelError, match="answered 404 Not Found.*check llm.base_url"):
            client.run(client.chat([{"role": "user", "content": "hi"}]))


@pytest.mark.slow
def test_a_run_against_an_unknown_model_exits_with_one_line(tmp_path):
    need_module("openai")
    from socialgym.llm.testing import FakeReply, FakeServer

    with FakeServer(lambda body, n: FakeReply(status=404, body=NOT_FOUND)) as server:
        config = {"seed": 0, "env": {"n_agents": 3, "max_rounds": 2, "recommender": "random"},
                  "policy": {"kind": "llm"},
                  "llm": {"base_url": server.base_url, "model": "no-such-model", "api_key_env": "SG_TEST_KEY"},
                  "logging": {"report": False, "progress": False}}
        path = tmp_path / "c.yaml"
        path.write_text(yaml.safe_dump(config))
        done = subprocess.run([sys.executable, "-m", "socialgym.cli", "run", str(path), "--out", str(tmp_path / "r"),
                               "--quiet"], cwd=ROOT, capture_output=True, text=True, timeout=300,
                              env={**__import__("os").environ, "SG_TEST_KEY": "k"})
        sent = len(server.requests)
    assert done.returncode == 2, done.stderr[-2000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("socialgym: error:")]
    assert len(errors) == 1 and "'no-such-model'" in errors[0] and server.base_url in errors[0]
    assert "Traceback" not in done.stderr
    assert sent <= 3                                 # one refusal, at most the requests already in flight
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["status"] == "failed" and "no-such-model" in summary["error"]


# ---------------------------------------------------------------------------------- 3. sweep over personas
def test_a_sweep_over_personas_keeps_the_survey_key(tmp_path):
    need_module("openai")
    other = tmp_path / "people.json"
    other.write_text(json.dumps([{"name": f"P{i}", "issue": "climate policy"} for i in range(3)]))
    cfg = load_config({"seed": 0, "env": {"n_agents": 3, "max_rounds": 2},
                       "policy": {"kind": "llm"},
                       "personas": {"source": "climate-change", "survey": True},
                       "sweep": {"personas": ["climate-change", str(other)]}})
    cells = [j.config.personas for j in jobs(cfg)]
    assert [p.source for p in cells] == ["climate-change", str(other)]
    assert [p.survey for p in cells] == [True, True]
    swept_off = load_config({"seed": 0, "env": {"n_agents": 3, "max_rounds": 2}, "policy": {"kind": "llm"},
                             "personas": {"source": "climate-change", "survey": True},
                             "sweep": {"personas": [{"source": "climate-change", "survey": False}]}})
    assert jobs(swept_off)[0].config.personas.survey is False      # a mapping says it itself


# ---------------------------------------------------------------------------------- 4. survey requests logged
def test_the_persona_survey_is_in_the_transcripts(tmp_path):
    need_module("openai")
    import hashlib
    import random

    from socialgym.experiments import run_experiment
    from socialgym.llm.testing import FakeServer, sample_schema, schema_of

    def responder(body, n):
        schema = schema_of(body)
        seed = hashlib.sha256(json.dumps(body.get("messages"), sort_keys=True).encode()).digest()
        return json.dumps(sample_schema(schema, random.Random(seed))) if schema else "A fine day for a walk."

    with FakeServer(responder) as server:
        cfg = load_config({"seed": 0, "env": {"n_agents": 2, "max_rounds": 1, "recommender": "random"},
                           "policy": {"kind": "llm"},
                           "personas": {"source": "climate-change", "survey": True},
                           "llm": {"base_url": server.base_url, "model": "fake", "api_key": "k"},
                           "logging": {"report": False, "progress": False, "transcripts": True}})
        summary = run_experiment(cfg, tmp_path / "run")
    lines = [json.loads(x) for x in (tmp_path / "run" / "transcripts.jsonl").read_text().splitlines()]
    survey = [x for x in lines if x["purpose"] == "survey" and x["round"] == 0]
    assert len(survey) == 2 and {x["agent"] for x in survey} == {"agent_0", "agent_1"}
    assert len(lines) == summary["llm"]["requests"]       # every request the usage counts is logged


# ---------------------------------------------------------------------------------- built once
def test_a_run_builds_its_recommender_once(tmp_path, monkeypatch):
    """The config is checked by the recommender classes themselves: loading a config builds no
    recommender, the environment builds its one, an intervention builds the one it switches to."""
    from socialgym.experiments import run_experiment
    from socialgym.recommenders import engagement

    built = {"Popularity": 0, "TopicAffinity": 0}
    for name in built:
        cls = getattr(engagement, name)
        original = cls.__init__

        def counting(self, *args, _original=original, _name=name, **kwargs):
            built[_name] += 1
            _original(self, *args, **kwargs)
        monkeypatch.setattr(cls, "__init__", counting)
    cfg = load_config({"seed": 0, "env": {"n_agents": 4, "max_rounds": 3, "recommender": "popularity"},
                       "policy": {"kind": "greedy"},
                       "interventions": [{"kind": "recommender", "at_round": 2, "recommender": "topic_affinity"}],
                       "sweep": {"env.feed_size": [3, 4]},          # every cell is validated as well
                       "logging": {"report": False, "progress": False}})
    assert built == {"Popularity": 0, "TopicAffinity": 0}
    run_experiment(jobs(cfg)[0].config, tmp_path / "run")
    assert built == {"Popularity": 1, "TopicAffinity": 1}
