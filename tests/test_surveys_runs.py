"""Surveys and interviews inside runs (issue 20): the runner writes surveys.csv and
interviews.jsonl at the surveys' rounds (LLM agents answering from a fake server whose answers
are scripted, so the expected table is known exactly), a kill and resume in a survey round
gives the same files, forks may add later surveys, and ``socialgym interview`` leaves the run
directory unchanged (checksums)."""

from __future__ import annotations

import csv
import hashlib
import json
from pathlib import Path

import math

import numpy as np
import pytest
from capabilities import need_module

from socialgym.experiments import RunError, load_config, run_experiment
from socialgym.experiments.run import runner as runner_module
from socialgym.experiments.run.recorder import RunRecorder

SCRIPTED = {
    "seed": 4,
    "env": {"n_agents": 6, "max_rounds": 6, "recommender": "random"},
    "policy": {"groups": [{"name": "g", "kind": "greedy", "agents": 3}, {"name": "r", "kind": "random"}]},
    "interventions": [{"kind": "post", "at_round": 2, "author": "agent_0", "topic": "vaccines",
                       "text": "A false claim", "sentiment": -1.0}],
    "surveys": [{"instrument": "stance", "topic": "vaccines", "every": 3},
                {"instrument": "trust", "at_round": 5, "target": "r"}],
    "logging": {"report": False, "progress": False},
}


def table(out: Path) -> list[dict]:
    with open(out / "surveys.csv", newline="") as f:
        return list(csv.DictReader(f))


def checksums(root: Path) -> dict:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


class _Feeds(RunRecorder):
    """Keeps every round's act-phase feeds and the content store's topics and sentiments."""
    feeds: dict = {}
    content: tuple = ()

    def record_round(self, env, usage=None):
        _Feeds.feeds[env.last_round.round] = np.array(env.last_round.batch.feed)
        _Feeds.content = (np.array(env.content.column("topic")), np.array(env.content.column("sentiment")),
                          env.vocab.get("vaccines"))
        return super().record_round(env, usage)


def test_a_scripted_run_writes_its_surveys_at_their_rounds(tmp_path, monkeypatch):
    monkeypatch.setattr(runner_module, "RunRecorder", _Feeds)
    run_experiment(load_config(SCRIPTED), tmp_path / "s")
    rows = table(tmp_path / "s")
    # stance after rounds 3 and 6 for all six agents, trust after round 5 for group r (agents 3-5)
    assert [(r["round"], r["agent"], r["survey"], r["item"]) for r in rows] == (
        [("3", f"agent_{i}", "stance", "stance") for i in range(6)]
        + [("5", f"agent_{i}", "trust", "trust") for i in range(3, 6)]
        + [("6", f"agent_{i}", "stance", "stance") for i in range(6)])
    assert {(r["status"], r["source"]) for r in rows} == {("ok", "rule")}
    assert [r["group"] for r in rows[:6]] == ["g", "g", "g", "r", "r", "r"]
    assert all(1 <= int(r["answer"]) <= 5 for r in rows if r["survey"] == "stance")
    # the stated rule, by hand: the mean sentiment m of the "vaccines" items in an agent's feeds
    # of rounds 1..r (each appearance counted) gives round-half-up(3 + 2 m), 3 when none
    topics, sentiments, vaccines = _Feeds.content
    for r in (3, 6):
        for i in range(6):
            seen = [sentiments[c] for t in range(1, r + 1) for c in _Feeds.feeds[t][i]
                    if c >= 0 and topics[c] == vaccines]
            expected = 3 if not seen else min(5, max(1, math.floor(3 + 2 * sum(seen) / len(seen) + 0.5)))
            got = [x["answer"] for x in rows if x["round"] == str(r) and x["agent"] == f"agent_{i}"]
            assert got == [str(expected)], (r, i, seen)
    assert any(x["answer"] != "3" for x in rows if x["survey"] == "stance")      # someone saw the claim
    assert not (tmp_path / "s" / "interviews.jsonl").read_text()


def test_no_survey_files_without_surveys(tmp_path):
    run_experiment(load_config({k: v for k, v in SCRIPTED.items() if k != "surveys"}), tmp_path / "n")
    assert not (tmp_path / "n" / "surveys.csv").exists() and not (tmp_path / "n" / "interviews.jsonl").exists()


@pytest.mark.slow
def test_a_kill_in_a_survey_round_resumes_to_the_same_files(tmp_path):
    from tests.test_experiments import assert_same_outputs
    from tests.test_interventions import run_killed_and_resumed

    ref, broken = run_killed_and_resumed(tmp_path, SCRIPTED)       # killed after round 3's outputs
    assert_same_outputs(ref, broken, 6)
    assert (ref / "surveys.csv").read_bytes() == (broken / "surveys.csv").read_bytes()


def test_a_fork_can_add_a_later_survey_but_not_an_earlier_one(tmp_path):
    from socialgym.experiments.run.fork import fork_run

    run_experiment(load_config(SCRIPTED), tmp_path / "s")
    surveys = json.dumps(SCRIPTED["surveys"] + [{"instrument": "satisfaction", "at_round": 5}])
    fork_run(tmp_path / "s", 4, tmp_path / "f", overrides=[f"surveys={surveys}"], progress=False)
    rows = table(tmp_path / "f")
    assert [(r["round"], r["survey"]) for r in rows if r["survey"] == "satisfaction"] == [("5", "satisfaction")] * 6
    base = (tmp_path / "s" / "surveys.csv").read_text().splitlines()
    assert (tmp_path / "f" / "surveys.csv").read_text().splitlines()[:7] == base[:7]    # header + round 3
    early = json.dumps(SCRIPTED["surveys"] + [{"instrument": "satisfaction", "at_round": 2}])
    with pytest.raises(RunError, match="surveys of rounds <= 4, which already happened"):
        fork_run(tmp_path / "s", 4, tmp_path / "g", overrides=[f"surveys={early}"])


def test_compare_reports_the_survey_answers(tmp_path):
    from socialgym.experiments.analysis.compare import compare

    run_experiment(load_config(SCRIPTED), tmp_path / "a")
    run_experiment(load_config({**SCRIPTED, "interventions": []}), tmp_path / "b")
    result = compare(tmp_path / "b", tmp_path / "a")
    lines = [x.split(",") for x in Path(result["csv"]).read_text().splitlines()[1:]]
    stance = {x[0]: float(x[3]) for x in lines if x[1] == "survey:stance.stance"}
    # with the false claim: the mean stance of round 3 from surveys.csv itself
    mine = [int(r["answer"]) for r in table(tmp_path / "a") if r["round"] == "3" and r["survey"] == "stance"]
    assert stance["3"] == pytest.approx(sum(mine) / 6)
    # without it no item on "vaccines" exists: every agent answers 3
    assert {r["answer"] for r in table(tmp_path / "b") if r["survey"] == "stance"} == {"3"}


# ---------------------------------------------------------------------------------- LLM agents
def _survey_responder(body: dict, n: int):
    """Survey answers scripted: every numeric item 4 (trust 7), free text a fixed sentence; the
    rest of the agents' requests as tests.test_experiments' deterministic server."""
    from socialgym.llm.testing import schema_of
    from tests.test_experiments import _deterministic_responder

    schema = schema_of(body) or {}
    answers = (schema.get("properties") or {}).get("answers")
    if answers is not None:
        return json.dumps({"answers": {k: 7 if k == "trust" else 4 for k in answers["properties"]}})
    if "change about your feed" in json.dumps(body.get("messages")):
        return "More science posts."
    return _deterministic_responder(body, n)


LLM_SURVEYS = [{"instrument": "stance", "topic": "climate", "every": 2},
               {"name": "exit", "at_round": 3, "target": ["agent_1"],
                "items": [{"id": "trust", "text": "How much do you trust people here?", "scale": "0-10"},
                          {"id": "change", "text": "What would you change about your feed?", "scale": "text"}]}]


def _llm_config(server, **extra) -> dict:
    return {"seed": 2, "env": {"n_agents": 3, "max_rounds": 4, "recommender": "random", "sentiment": "tone"},
            "policy": {"groups": [{"name": "llm", "kind": "llm", "agents": 2}, {"name": "bot", "kind": "greedy"}]},
            "llm": {"base_url": server.base_url, "model": "fake", "api_key": "sk-test", "max_concurrency": 4},
            "logging": {"report": False, "progress": False}, "surveys": LLM_SURVEYS, **extra}


def test_llm_agents_answer_surveys_through_the_runs_model(tmp_path):
    need_module("openai")
    from socialgym.llm.testing import FakeServer

    with FakeServer(_survey_responder) as server:
        run_experiment(load_config(_llm_config(server)), tmp_path / "llm")
        prompts = [json.dumps(b["messages"]) for b in server.requests
                   if "answers" in json.dumps((b.get("response_format") or {}))]
    got = [(r["round"], r["agent"], r["survey"], r["item"], r["answer"], r["status"], r["source"])
           for r in table(tmp_path / "llm")]
    bot_stance = [r for r in table(tmp_path / "llm") if r["agent"] == "agent_2"]
    assert got == [
        ("2", "agent_0", "stance", "stance", "4", "ok", "llm"),
        ("2", "agent_1", "stance", "stance", "4", "ok", "llm"),
        ("2", "agent_2", "stance", "stance", bot_stance[0]["answer"], "ok", "rule"),
        ("3", "agent_1", "exit", "trust", "7", "ok", "llm"),
        ("3", "agent_1", "exit", "change", "More science posts.", "ok", "llm"),
        ("4", "agent_0", "stance", "stance", "4", "ok", "llm"),
        ("4", "agent_1", "stance", "stance", "4", "ok", "llm"),
        ("4", "agent_2", "stance", "stance", bot_stance[1]["answer"], "ok", "rule"),
    ]
    interviews = [json.loads(x) for x in (tmp_path / "llm" / "interviews.jsonl").read_text().splitlines()]
    assert interviews == [{"round": 3, "agent": "agent_1", "survey": "exit", "item": "change",
                           "question": "What would you change about your feed?", "answer": "More science posts."}]
    personas = json.loads((tmp_path / "llm" / "personas.json").read_text())
    assert any(personas["agent_1"]["name"] in p for p in prompts)     # the persona is in the survey prompt
    summary = json.loads((tmp_path / "llm" / "summary.json").read_text())
    assert summary["llm"]["fallbacks"] == 0


def test_an_interview_answers_from_a_snapshot_and_changes_nothing(tmp_path, capsys):
    need_module("openai")
    from socialgym.cli import main
    from socialgym.llm.testing import FakeServer

    with FakeServer(_survey_responder) as server:
        run_experiment(load_config(_llm_config(server, surveys=[])), tmp_path / "llm")
        before = checksums(tmp_path / "llm")
        sent = len(server.requests)
        assert main(["interview", str(tmp_path / "llm"), "--agent", "agent_0", "--round", "2",
                     "What would you change about your feed?"]) == 0
        asked = server.requests[sent:]
        assert main(["interview", str(tmp_path / "llm"), "--agent", "agent_1", "--scale", "0-10",
                     "How much do you trust people here? (trust)"]) == 0
        assert main(["interview", str(tmp_path / "llm"), "--agent", "agent_2", "Why?"]) == 2
        assert main(["interview", str(tmp_path / "llm"), "--agent", "agent_0", "--round", "9", "Why?"]) == 2
    out, err = capsys.readouterr()
    records = [json.loads(line) for line in out.splitlines()]
    assert records[0]["answer"] == "More science posts." and records[0]["round"] == 2
    assert records[1]["answer"] == 4 and records[1]["round"] == 4 and records[1]["scale"] == "0-10"
    assert "agent_2 is not an LLM agent" in err and "round_0009.pkl not found" in err
    assert len(asked) == 1
    memory_line = "Your stance after each round: r1"        # the memory of round 2 is in the prompt
    assert memory_line in json.dumps(asked[0]["messages"])
    assert checksums(tmp_path / "llm") == before


def test_survey_config_errors_are_one_line():
    from socialgym.experiments import ConfigError

    for surveys, words in (([{"instrument": "stance", "topic": "x", "at_round": 9}], "surveys[0].at_round"),
                           ([{"instrument": "trust", "at_round": 2, "target": "nobody"}], "surveys[0].target"),
                           ([{"instrument": "mood", "at_round": 2}], "surveys[0].instrument")):
        with pytest.raises(ConfigError) as err:
            load_config({**SCRIPTED, "surveys": surveys})
        assert words in str(err.value) and "\n" not in str(err.value)


@pytest.mark.slow
def test_the_report_plots_the_survey_means_and_names_the_fork(tmp_path):
    from socialgym.experiments.run.fork import fork_run
    from socialgym.rundir import survey_means
    from socialgym.experiments.analysis.report import build_report

    run_experiment(load_config(SCRIPTED), tmp_path / "s")
    fork_run(tmp_path / "s", 4, tmp_path / "f", overrides=["env.xi=0.3"], progress=False)
    means = survey_means(tmp_path / "f")
    rows = table(tmp_path / "f")
    for r in (3, 6):
        answers = [int(x["answer"]) for x in rows if x["round"] == str(r) and x["survey"] == "stance"]
        assert means["stance.stance"][1][r] == pytest.approx(sum(answers) / len(answers))
    assert means["trust.trust"][0] == "0-10" and means["trust.trust"][2] == 3
    page = build_report(tmp_path / "f").read_text()
    assert (tmp_path / "f" / "plots" / "surveys.png").is_file()
    assert f"{(tmp_path / 's').resolve()} after round 4; changes: env.xi: 0.1 -&gt; 0.3 from round 5" in page
    assert "forked from" not in build_report(tmp_path / "s").read_text()


def test_generated_personas_take_the_runs_topics_and_each_agents_label(tmp_path):
    need_module("openai")
    from socialgym.llm.testing import FakeServer

    with FakeServer(_survey_responder) as server:
        data = _llm_config(server, surveys=[])
        data["env"] = {**data["env"], "max_rounds": 1, "topics": ["water", "sports", "music"],
                       "agent_interests": ["music", "water", "water"]}
        run_experiment(load_config(data), tmp_path / "p")
    personas = json.loads((tmp_path / "p" / "personas.json").read_text())
    assert [personas[f"agent_{i}"]["interests"][0] for i in range(3)] == ["music", "water", "water"]
    assert all(set(p["interests"]) <= {"water", "sports", "music"} for p in personas.values())
