"""``socialgym estimate``: the estimate against what real runs on a loopback fake server used.

The real runs here talk to ``FakeServer`` with its default replies (a random instance of each
request's schema; the word "hello" to a plain-text request), not to the estimator's stand-in.
The stand-in is told how long those texts are (``--text-chars``): 5 characters for the demo's
plain texts ("hello"), 13 for ties-coach's JSON strings (the mean length of the fake's eight
phrases: 11, 7, 11, 19, 18, 17, 9, 13 -> 105 / 8). Everything else — how many requests, how long
the prompts grow, which actions the random replies pick — the estimator finds by simulating.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from capabilities import need_module

from socialgym.cli import DEMO_CONFIG, main
from socialgym.experiments import load_config, run_experiment
from socialgym.experiments.run.estimate import Throughput, estimate
from socialgym.experiments.run.standin import ReplyModel
from socialgym.experiments.run.sweep import jobs

need_module("openai")
from socialgym.llm.testing import FakeServer  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TOLERANCE = 0.15
FIELDS = ("requests", "prompt_tokens", "completion_tokens")
# settings that change no request, only how much the real runs write (they run faster without)
QUIET = ["logging.report=false", "logging.progress=false", "logging.transcripts=false", "llm.cache=false",
         "run.checkpoint=false", "run.snapshots=false"]


def _actual(cfg) -> dict:
    """Every run of ``cfg`` (each sweep cell x replicate), summed."""
    total = dict.fromkeys(FIELDS, 0)
    with tempfile.TemporaryDirectory() as tmp:
        for job in jobs(cfg):
            summary = run_experiment(job.config, Path(tmp) / job.out, progress=False)
            for key in FIELDS:
                total[key] += summary["llm"][key]
    return total


def _compare(name: str, source, overrides: list, text_chars: int) -> None:
    with FakeServer() as server:
        cfg = load_config(source, [f"llm.base_url={server.base_url}", "llm.model=fake", *QUIET, *overrides])
        predicted = estimate(cfg, replies=ReplyModel(chars=text_chars))["total"]
        actual = _actual(cfg)
    deviation = {k: predicted[k] / actual[k] - 1 for k in FIELDS}
    shown = ", ".join(f"{k} {predicted[k]:,} vs {actual[k]:,} ({deviation[k]:+.1%})" for k in FIELDS)
    print(f"\n{name}: estimate vs actual: {shown}")
    for key in FIELDS:
        assert abs(deviation[key]) <= TOLERANCE, f"{name}: {key} off by more than 15 %: {shown}"


def test_the_demo_config_within_15_percent():
    """6 LLM agents x 4 rounds, split generation (a plan, then one plain request per text)."""
    _compare("demo", DEMO_CONFIG, [], text_chars=5)


@pytest.mark.slow
def test_the_ties_coach_study_within_15_percent():
    """configs/studies/ties-coach.yaml, all 4 cells x 3 replicates, shortened to 4 rounds (the
    estimate is of that whole shortened config: 12 runs of 30 agents x 4 rounds)."""
    _compare("ties-coach (4 rounds)", ROOT / "configs" / "studies" / "ties-coach.yaml", ["env.max_rounds=4"],
             text_chars=13)


def test_usd_and_wall_time_follow_from_the_counts(tmp_path, capsys):
    data = {"seed": 1, "env": {"n_agents": 3, "n_actions": 2, "max_rounds": 2, "recommender": "random"},
            "policy": {"kind": "llm"}, "run": {"replicates": 2},
            "llm": {"base_url": "http://127.0.0.1:9/v1", "model": "m",
                    "prices": {"m": {"prompt": 2.0, "completion": 8.0}}}}
    path = tmp_path / "c.json"
    path.write_text(json.dumps(data))
    assert main(["estimate", str(path), "--throughput", "1000,10", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    total, cell = result["total"], result["cells"][0]
    assert result["runs"] == 2 and cell["runs"] == 2
    # 3 agents x 2 rounds x (plan + vote or reflect) per run, two replicates
    assert cell["per_run"]["requests"] == 12 and total["requests"] == 24
    assert total["prompt_tokens"] == 2 * cell["per_run"]["prompt_tokens"]
    assert total["usd"] == pytest.approx((2.0 * total["prompt_tokens"] + 8.0 * total["completion_tokens"]) / 1e6)
    waited = total["prompt_tokens"] / 1000 + total["completion_tokens"] / 10
    assert result["wall_seconds"] - result["local_seconds"] == pytest.approx(waited, abs=0.11)
    assert main(["estimate", str(path)]) == 0
    table = capsys.readouterr().out
    assert "total" in table and f"{total['requests']:,}" in table and "USD" in table


def test_probe_measures_the_server(tmp_path, capsys):
    """4 requests at once to a fake that takes 0.2 s for each: the 4 prefill prompts of
    (6,000 + 30 + 23 characters) // 4 + 1 = 1,514 tokens took at least 0.2 s; the 4 replies
    ("hello": 5 // 4 + 1 = 2 tokens each) as well."""
    with FakeServer(latency=0.2) as server:
        path = tmp_path / "c.json"
        path.write_text(json.dumps({"env": {"n_agents": 2, "max_rounds": 1}, "policy": {"kind": "llm"},
                                    "llm": {"base_url": server.base_url, "model": "m"}}))
        assert main(["estimate", str(path), "--probe", "--json"]) == 0
    speed = json.loads(capsys.readouterr().out)["throughput"]
    # at most the tokens over the fake's 0.2 s (a wait cannot be shorter); at least over 20 s,
    # which no loaded machine takes for 4 loopback requests
    assert 4 * 1514 / 20.0 <= speed["prompt"] <= 4 * 1514 / 0.2
    assert 4 * 2 / 20.0 <= speed["completion"] <= 4 * 2 / 0.2
    assert speed["source"].startswith("--probe")


@pytest.mark.parametrize("text", ["fast", "100", "100,0", "1,2,3", "nan,5"])
def test_a_bad_throughput_is_one_line(tmp_path, capsys, text):
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"env": {"n_agents": 2}, "policy": {"kind": "random"}}))
    assert main(["estimate", str(path), "--throughput", text]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "--throughput expects" in err
    with pytest.raises(Exception):
        Throughput.parse(text)
