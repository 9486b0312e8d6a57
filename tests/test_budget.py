"""LLM budgets (``llm.budget``, ``llm.prices``, ``socialgym resume --budget``).

The runs: 3 LLM agents, 2 actions, 4 rounds, no coach, against a deterministic loopback fake
(a reply is a pure function of the request, so a resumed run can be compared byte for byte
with an uninterrupted one). The fake is not the embedded model, so the agents plan and write in
one JSON reply ("joint"); each agent then sends exactly two requests a round: its plan, and its
votes (or, with nothing to vote on, its reflection). So every round costs 3 x 2 = 6 requests.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from capabilities import need_module
import scipy.sparse as sp
import yaml

from socialgym.cli import EXIT_BUDGET, main
from socialgym.experiments import ConfigError, load_config
from socialgym.llm.budget import Budget, BudgetError, Spend, predict_next_round, spend
from socialgym.llm.usage import Call, Usage

need_module("openai")
from socialgym.llm.testing import FakeServer, request_rng, sample_schema, schema_of  # noqa: E402

PER_ROUND = 3 * 2          # 3 agents x (plan + vote-or-reflect)
ROUNDS = 4


def _data(base_url: str, budget: dict | None = None, prices: dict | None = None) -> dict:
    llm = {"base_url": base_url, "model": "fake", "max_retries": 0, "max_repairs": 0}
    if budget:
        llm["budget"] = budget
    if prices:
        llm["prices"] = prices
    return {"seed": 2, "env": {"n_agents": 3, "n_actions": 2, "max_rounds": ROUNDS, "recommender": "random",
                               "sentiment": "tone"},
            "policy": {"kind": "llm", "coach": False}, "llm": llm,
            "logging": {"report": True, "progress": False}}


def _write(path: Path, data: dict) -> str:
    path.write_text(yaml.safe_dump(data))
    return str(path)


def _same_outputs(a: Path, b: Path) -> None:
    for name in ("rounds.csv", "network.csv", "events.jsonl"):
        assert (a / name).read_bytes() == (b / name).read_bytes(), f"{name} differs"
    for r in range(1, ROUNDS + 1):
        wa, wb = (sp.load_npz(d / "ties" / f"round_{r:04d}.npz") for d in (a, b))
        assert (wa != wb).nnz == 0, f"ties of round {r} differ"


def _summary(run: Path) -> dict:
    return json.loads((run / "summary.json").read_text())


@pytest.mark.slow
def test_a_request_budget_stops_at_a_round_boundary_and_resume_finishes_the_run(tmp_path, capsys):
    assert EXIT_BUDGET == 5
    with FakeServer(deterministic=True) as server:
        reference = tmp_path / "reference"
        assert main(["run", _write(tmp_path / "ref.yaml", _data(server.base_url)), "--out", str(reference),
                     "--quiet"]) == 0
        assert len(server.requests) == PER_ROUND * ROUNDS          # the counts the budget is figured from
        server.requests.clear()
        capsys.readouterr()
        # 20 requests: after round 1, 6 + 6 <= 20; after round 2, 12 + 6 <= 20; after round 3, 18 + 6 > 20
        run = tmp_path / "run"
        status = main(["run", _write(tmp_path / "c.yaml", _data(server.base_url, {"requests": 20})),
                       "--out", str(run), "--quiet"])
        err = capsys.readouterr().err
        assert status == 5
        assert len(server.requests) == 18
        summary = _summary(run)
        assert summary["status"] == "budget" and summary["rounds_completed"] == 3
        assert summary["stopped"]["before_round"] == 4 and summary["stopped"]["limit"] == "requests"
        assert summary["llm"]["spent"]["requests"] == 18
        assert (run / "checkpoint.pkl").is_file() and (run / "report.html").is_file()
        lines = err.strip().splitlines()
        assert len(lines) == 1, err
        assert lines[0].startswith("socialgym: budget: stopped before round 4 of 4: 18 requests spent + 6 requests "
                                   "predicted for round 4")
        assert "llm.budget.requests = 20 requests" in lines[0]
        assert f"socialgym resume {run} --budget requests=24" in lines[0]
        assert main(["resume", str(run), "--budget", "requests=24", "--quiet"]) == 0
        assert len(server.requests) == 24
    assert _summary(run)["status"] == "complete" and _summary(run)["rounds_completed"] == ROUNDS
    _same_outputs(reference, run)
    info = json.loads((run / "run.json").read_text())
    assert info["config_changes"] == [{"round": 3, "keys": ["llm.budget.requests"]}]
    assert load_config(run / "config.yaml").llm.budget == {"requests": 24}


@pytest.mark.slow
def test_a_budget_below_round_one_stops_before_it_with_a_checkpoint(tmp_path, capsys):
    """Round 1 is predicted by the estimator's stand-in run of it: 6 requests, above a budget of 5."""
    with FakeServer(deterministic=True) as server:
        reference = tmp_path / "reference"
        main(["run", _write(tmp_path / "ref.yaml", _data(server.base_url)), "--out", str(reference), "--quiet"])
        server.requests.clear()
        run = tmp_path / "run"
        capsys.readouterr()
        status = main(["run", _write(tmp_path / "c.yaml", _data(server.base_url, {"requests": 5})),
                       "--out", str(run), "--quiet"])
        err = capsys.readouterr().err
        assert status == 5 and server.requests == []
        assert _summary(run)["status"] == "budget" and _summary(run)["rounds_completed"] == 0
        assert (run / "checkpoint.pkl").is_file()
        assert "0 requests spent + 6 requests predicted for round 1 (the estimate of round 1)" in err
        assert main(["resume", str(run), "--budget", "requests=100", "--quiet"]) == 0
        assert len(server.requests) == PER_ROUND * ROUNDS
    _same_outputs(reference, run)


@pytest.mark.slow
def test_each_sweep_job_has_its_own_budget(tmp_path, capsys):
    data = _data("", {"requests": 20})
    data["run"] = {"replicates": 2, "workers": 1}
    data["logging"]["report"] = False
    with FakeServer(deterministic=True) as server:
        data["llm"]["base_url"] = server.base_url
        sweep = tmp_path / "sweep"
        assert main(["run", _write(tmp_path / "c.yaml", data), "--out", str(sweep), "--quiet"]) == 5
        err = capsys.readouterr().err.strip().splitlines()
        assert len(server.requests) == 2 * 18          # each job: 18 requests, stopped before its round 4
        assert len(err) == 1 and "2 of 2 sweep runs stopped" in err[0] and "llm.budget.requests" in err[0]
        runs = [sweep / "runs" / "c00" / f"rep_{k}" for k in (0, 1)]
        assert [_summary(r)["status"] for r in runs] == ["budget", "budget"]
        assert main(["resume", str(sweep), "--budget", "requests=24", "--quiet"]) == 0
        assert len(server.requests) == 2 * 24
    assert [_summary(r)["status"] for r in runs] == ["complete", "complete"]
    assert load_config(sweep / "config.yaml").llm.budget == {"requests": 24}


def _padded(body: dict, n: int) -> str:
    """A deterministic schema-valid reply padded with spaces to 399 characters: the fake then
    counts 399 // 4 + 1 = 100 completion tokens for every request."""
    text = json.dumps(sample_schema(schema_of(body), request_rng(body)))
    assert len(text) <= 399
    return text.ljust(399)


def test_a_usd_budget_with_prices(tmp_path, capsys):
    # $10 per 1M completion tokens, prompts free: 100 tokens = $0.001 a request, $0.006 a round.
    # A budget of $0.013: after round 1, 0.006 + 0.006 <= 0.013; after round 2, 0.012 + 0.006 > 0.013
    prices = {"fake": {"prompt": 0, "completion": 10}}
    with FakeServer(_padded) as server:
        run = tmp_path / "run"
        status = main(["run", _write(tmp_path / "c.yaml", _data(server.base_url, {"usd": 0.013}, prices)),
                       "--out", str(run), "--quiet"])
        err = capsys.readouterr().err
        assert status == 5 and len(server.requests) == 2 * PER_ROUND
    summary = _summary(run)
    assert summary["rounds_completed"] == 2 and summary["stopped"]["limit"] == "usd"
    assert summary["llm"]["completion_tokens"] == 2 * PER_ROUND * 100
    assert summary["llm"]["spent"]["usd"] == pytest.approx(0.012)
    assert summary["stopped"]["predicted"]["usd"] == pytest.approx(0.006)
    assert "$0.01 spent + $0.0060 predicted for round 3" in err and "llm.budget.usd = $0.01" in err
    assert "--budget usd=0.03`" in err           # 0.012 + 2 rounds x 0.006 = 0.024, rounded up to cents


@pytest.mark.parametrize("budget, words", [
    ({"requests": 0}, "llm.budget.requests must be a positive whole number"),
    ({"requests": -3}, "llm.budget.requests must be a positive whole number"),
    ({"requests": 2.5}, "llm.budget.requests must be a positive whole number"),
    ({"prompt_tokens": "many"}, "llm.budget.prompt_tokens must be a positive whole number"),
    ({"completion_tokens": True}, "llm.budget.completion_tokens must be a positive whole number"),
    ({"usd": 0}, "llm.budget.usd must be a positive number"),
    ({"usd": "5$"}, "llm.budget.usd must be a positive number"),
    ({"dollars": 5}, "unknown key 'llm.budget.dollars'"),
    ({"usd": 5}, "llm.budget.usd needs llm.prices for every model the run uses; no price for 'fake'"),
])
def test_bad_budgets_are_config_errors(budget, words):
    with pytest.raises(ConfigError, match=words.replace("$", r"\$").replace(".", r"\.")) as info:
        load_config(_data("http://127.0.0.1:9/v1", budget))
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("prices, words", [
    ({"fake": {"prompt": 1}}, "llm.prices.fake.completion must be a number >= 0"),
    ({"fake": {"prompt": -1, "completion": 1}}, "llm.prices.fake.prompt must be a number >= 0"),
    ({"fake": {"prompt": 1, "completion": 1, "cached": 0}}, "unknown key 'llm.prices.fake.cached'"),
    ({"fake": 3}, "llm.prices.fake must be {prompt: USD, completion: USD}"),
])
def test_bad_prices_are_config_errors(prices, words):
    with pytest.raises(ConfigError, match=words.replace(".", r"\.").replace("{", r"\{").replace("}", r"\}")):
        load_config(_data("http://127.0.0.1:9/v1", None, prices))


@pytest.mark.parametrize("text, words", [
    ("requests=ten", "--budget requests must be a positive whole number"),
    ("tokens=5", "--budget: unknown limit 'tokens'"),
    ("requests", "--budget: 'requests' is not key=value"),
    ("usd=-1", "--budget usd must be a positive number"),
    ("requests=5,requests=6", "--budget: requests is given twice"),
])
def test_a_bad_budget_on_resume_is_one_line_and_exit_2(tmp_path, capsys, text, words):
    assert main(["resume", str(tmp_path), "--budget", text]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and words in err


def test_budget_parsing_and_limits():
    assert Budget.parse("requests=500,usd=2.5") == {"requests": 500, "usd": 2.5}
    assert Budget.parse(" prompt_tokens = 1e6 ") == {"prompt_tokens": 1_000_000}
    budget = Budget.from_mapping({"requests": 10, "usd": 1})
    assert budget.passed_by(Spend(10, 0, 0, 1.0)) is None            # reaching a limit is not passing it
    assert budget.passed_by(Spend(11, 0, 0, 0.5)) == "requests"
    assert budget.passed_by(Spend(3, 0, 0, 1.01)) == "usd"
    with pytest.raises(BudgetError):
        Budget.from_mapping({"requests": 10**16})


def _call(rnd, prompt, completion, *, cached=False, model="a", attempts=1):
    return Call("agent_0", rnd, "plan", prompt, completion, 0.1, cached, 0 if cached else attempts, True,
                model=model)


def test_spend_and_the_next_rounds_prediction_by_hand():
    usage = Usage()
    for call in (_call(0, 50, 5),                                 # the persona survey: spent, in no round
                 _call(1, 100, 10), _call(1, 200, 20, model="b"),
                 _call(2, 300, 30), _call(2, 100, 10, cached=True),   # a cache hit: free, but part of the round
                 _call(2, 7, 0, attempts=0)):                      # refused before sending: free
        usage.record(call)
    prices = {"a": {"prompt": 1.0, "completion": 2.0}, "b": {"prompt": 10.0, "completion": 20.0}}
    spent = spend(usage, prices)
    assert (spent.requests, spent.prompt_tokens, spent.completion_tokens) == (4, 650, 65)
    # a: (50 + 100 + 300) x 1 + (5 + 10 + 30) x 2 = 540; b: 200 x 10 + 20 x 20 = 2400; per 1M tokens
    assert spent.usd == pytest.approx(2940 / 1e6)
    nxt = predict_next_round(usage, prices)
    # round 1: 2 requests, 300 + 30 tokens, (100 + 20) + (2000 + 400) = 2520 micro-USD; round 2: 3 requests,
    # 407 + 40 tokens, (300 + 60) + (100 + 20) + 7 = 487: the largest of each
    assert (nxt.requests, nxt.prompt_tokens, nxt.completion_tokens) == (3, 407, 40)
    assert nxt.usd == pytest.approx(2520 / 1e6)
    assert predict_next_round(usage, prices, before=2).requests == 2
    assert predict_next_round(Usage(), prices) is None


def test_the_progress_line_shows_the_spend_against_the_budget(tmp_path):
    from socialgym.experiments.run.spending import Spending

    cfg = load_config({"env": {"n_agents": 2}, "policy": {"kind": "llm"},
                       "llm": {"base_url": "http://127.0.0.1:9/v1", "model": "a",
                               "budget": {"requests": 20, "usd": 5},
                               "prices": {"a": {"prompt": 1.0, "completion": 2.0},
                                          "b": {"prompt": 10.0, "completion": 20.0}}}})
    usage = Usage()
    for call in (_call(1, 100, 10), _call(1, 200, 20, model="b"), _call(2, 1500, 30),
                 _call(2, 100, 10, cached=True)):
        usage.record(call)
    # sent: 3 requests, 1,800 + 60 tokens; (100 + 20) + (2000 + 400) + (1500 + 60) = 4080 micro-USD
    assert Spending(cfg, {}, tmp_path).progress(usage) == " | LLM 3/20 req 1.8k+60 tok $0.0041/$5.00"
    # a fork after round 1 counts its own rounds only: the one request of round 2 that was sent
    fork = Spending(cfg, {"fork": {"at_round": 1}}, tmp_path)
    assert fork.spent(usage).requests == 1 and fork.spent(usage).prompt_tokens == 1500


def test_a_fork_counts_only_its_own_rounds(tmp_path, capsys):
    """The original's 4 rounds cost 24 requests. A fork after round 2 with a budget of 8 and no
    response cache: before round 3 it has spent 0 of its own (not the original's 12), + 6
    predicted <= 8; before round 4, 6 + 6 > 8: it stops there."""
    with FakeServer(deterministic=True) as server:
        base = tmp_path / "base"
        data = _data(server.base_url)
        data["logging"]["report"] = False
        assert main(["run", _write(tmp_path / "c.yaml", data), "--out", str(base), "--quiet"]) == 0
        sent = len(server.requests)
        status = main(["fork", str(base), "--at-round", "2", "--out", str(tmp_path / "fork"), "--quiet",
                       "--set", "llm.budget.requests=8", "--set", "llm.cache=false"])
        assert status == 5 and len(server.requests) - sent == PER_ROUND
    summary = _summary(tmp_path / "fork")
    assert summary["rounds_completed"] == 3 and summary["stopped"]["before_round"] == 4
    assert summary["stopped"]["spent"]["requests"] == 6
    assert "6 requests spent + 6 requests predicted for round 4" in capsys.readouterr().err


def test_a_pool_of_models_is_priced_at_its_dearest_member():
    """A cache hit records the pool's models joined ("a,b"): priced at the dearer one, by hand:
    1,000 prompt + 500 completion tokens at b's 2.0 / 8.0 USD per 1M = 0.002 + 0.004 = 0.006."""
    from socialgym.llm.budget import price_of, total
    from socialgym.llm.usage import Call

    prices = {"a": {"prompt": 0.5, "completion": 1.0}, "b": {"prompt": 2.0, "completion": 8.0}}
    assert price_of(prices, "a,b") == prices["b"] and price_of(prices, "a") == prices["a"]
    assert price_of(prices, "a,c") is None and price_of(prices, "c") is None
    call = Call("agent_0", 1, "plan", 1000, 500, 0.0, True, 0, True, model="a,b")
    assert abs(total([call], prices).usd - 0.006) < 1e-12
