"""Scheduled interventions (issue 20, first part): each kind takes effect exactly at its round
(applied before the round's act step), is logged in events.jsonl, survives a kill + resume, and
bad schedules are one-line config errors naming the key.

The expectations are computed from the run's own outputs (rounds.csv, ties/*.npz, events.jsonl)
and from an identical run without the intervention, not by calling the intervention code."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import numpy as np
import pytest
from capabilities import need_browser, need_module
import scipy.sparse as sp
import yaml

from socialgym.experiments import ConfigError, load_config, run_experiment
from socialgym.experiments.run import runner as runner_module
from socialgym.experiments.define import to_dict
from socialgym.experiments.run.recorder import RunRecorder

BASE = {
    "seed": 5,
    "env": {"n_agents": 6, "max_rounds": 5, "recommender": "chronological"},
    "policy": {"groups": [{"name": "g", "kind": "greedy", "agents": 3}, {"name": "r", "kind": "random"}]},
    "logging": {"report": False, "progress": False},
}


def with_interventions(items, **env) -> dict:
    return {**BASE, "env": {**BASE["env"], **env}, "interventions": items}


class _Capture(RunRecorder):
    """Keeps every round's act-phase feeds and the recommender that built them."""
    feeds: dict = {}
    recommenders: dict = {}
    contents: dict = {}

    def record_round(self, env, usage=None):
        r = env.last_round.round
        _Capture.feeds[r] = np.array(env.last_round.batch.feed)
        _Capture.recommenders[r] = type(env.recommender).__name__
        _Capture.contents[r] = (np.array(env.content.column("author")), list(env.content.texts))
        return super().record_round(env, usage)


def run(tmp_path: Path, name: str, data: dict, monkeypatch) -> tuple[Path, dict]:
    _Capture.feeds, _Capture.recommenders, _Capture.contents = {}, {}, {}
    monkeypatch.setattr(runner_module, "RunRecorder", _Capture)
    out = tmp_path / name
    run_experiment(load_config(data), out)
    return out, {"feeds": dict(_Capture.feeds), "recommenders": dict(_Capture.recommenders),
                 "contents": dict(_Capture.contents)}


def rows(out: Path) -> list[dict]:
    lines = (out / "rounds.csv").read_text().splitlines()
    header = lines[0].split(",")
    return [dict(zip(header, line.split(","))) for line in lines[1:]]


def round_lines(out: Path, r: int) -> list[str]:
    return [line for line in (out / "rounds.csv").read_text().splitlines()[1:] if line.split(",")[0] == str(r)]


def events(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]


def ties(out: Path, r: int) -> sp.csr_matrix:
    return sp.load_npz(out / "ties" / f"round_{r:04d}.npz").tocsr()


# ---------------------------------------------------------------------------------- kinds
def test_an_injected_post_is_in_the_feeds_from_its_round(tmp_path, monkeypatch):
    item = {"kind": "post", "at_round": 3, "author": "agent_0", "topic": "vaccines", "text": "A false claim"}
    base, plain = run(tmp_path, "base", BASE, monkeypatch)
    out, got = run(tmp_path, "post", with_interventions([item]), monkeypatch)
    logged = [e for e in events(out) if e["kind"] == "INTERVENTION"]
    assert len(logged) == 1 and logged[0]["round"] == 3 and logged[0]["intervention"] == "post"
    cid = logged[0]["id"]
    authors, texts = got["contents"][3]
    assert authors[cid] == 0 and texts[cid] == "A false claim"       # the store holds it as agent_0's post
    assert (got["feeds"][3] == cid).any(), "the injected post is in round 3's feeds"
    assert not (got["feeds"][3][0] == cid).any(), "not in its author's own feed"
    for r in (1, 2):                                                  # before: identical to the plain run
        assert not (got["feeds"][r] == cid).any()
        assert np.array_equal(got["feeds"][r], plain["feeds"][r])
        assert round_lines(out, r) == round_lines(base, r)


def test_a_recommender_switch_changes_feeds_from_its_round(tmp_path, monkeypatch):
    item = {"kind": "recommender", "at_round": 3, "recommender": "random"}
    base, plain = run(tmp_path, "base", BASE, monkeypatch)
    out, got = run(tmp_path, "switch", with_interventions([item]), monkeypatch)
    for r in (1, 2):
        assert np.array_equal(got["feeds"][r], plain["feeds"][r])
        assert round_lines(out, r) == round_lines(base, r)
        assert got["recommenders"][r] == plain["recommenders"][r] == "Chronological"
    assert got["recommenders"][3] == "RandomFeed"
    assert not np.array_equal(got["feeds"][3], plain["feeds"][3])
    line = [e for e in events(out) if e["kind"] == "INTERVENTION"]
    assert line == [{"round": 3, "kind": "INTERVENTION", "intervention": "recommender", "recommender": "random",
                     "params": {}, "rerank": []}]


def test_a_reranker_switched_on_then_off(tmp_path, monkeypatch):
    items = [{"kind": "rerank", "at_round": 2, "rerank": [{"kind": "random_replacement", "n": 2}]},
             {"kind": "rerank", "at_round": 4, "rerank": []}]
    _, got = run(tmp_path, "rerank", with_interventions(items), monkeypatch)
    assert [got["recommenders"][r] for r in range(1, 6)] == \
        ["Chronological", "RandomReplacement", "RandomReplacement", "Chronological", "Chronological"]


def test_ties_added_at_round_4_appear_after_round_4(tmp_path, monkeypatch):
    h = 1000.0                    # nearly no decay: an untouched tie keeps its weight
    env = {"n_agents": 24, "ties": {"half_life": h}}
    base, _ = run(tmp_path, "base", {**BASE, "env": {**BASE["env"], **env}}, monkeypatch)
    w = ties(base, 4).toarray()
    weak = [(s, d) for s in range(24) for d in range(24) if s != d and w[s, d] < 0.3 and w[d, s] < 0.3]
    assert weak, "the test needs a pair without a strong tie in the plain run"
    s, d = weak[0]
    item = {"kind": "add_ties", "at_round": 4, "pairs": [[f"agent_{s}", f"agent_{d}"], [f"agent_{d}", f"agent_{s}"]],
            "weight": 0.9}
    out, _ = run(tmp_path, "ties", with_interventions([item], **env), monkeypatch)
    for r in (1, 2, 3):
        assert (ties(out, r) != ties(base, r)).nnz == 0
    floor = 0.9 * 2 ** (-1 / h) - 1e-6        # decayed once by round 4's update, or strengthened
    assert ties(out, 4)[s, d] >= floor and ties(out, 4)[d, s] >= floor
    [line] = [e for e in events(out) if e["kind"] == "INTERVENTION"]
    assert line["round"] == 4 and line["n_pairs"] == 2 and line["weight"] == 0.9


def test_removed_ties_are_gone_from_their_round(tmp_path, monkeypatch):
    item = {"kind": "remove_ties", "at_round": 4, "target": "g"}
    out, _ = run(tmp_path, "cut", with_interventions([item]), monkeypatch)
    w3 = ties(out, 3).tocoo()
    touching = int(np.sum((w3.row < 3) | (w3.col < 3)))
    assert touching > 0, "the test needs ties of group g before round 4"
    [line] = [e for e in events(out) if e["kind"] == "INTERVENTION"]
    assert line["n_removed"] == touching and line["target"] == "g"
    w4 = ties(out, 4).tocoo()
    g = (w4.row < 3) | (w4.col < 3)
    # what is left touching g was created by round 4's own update: at most delta_max from zero
    assert np.all(w4.data[g] <= 0.25 + 1e-6)


def test_a_lambda_change_reweights_rewards_from_its_round(tmp_path, monkeypatch):
    item = {"kind": "lambdas", "at_round": 3, "target": "r", "lambdas": {"EMO": 1.0}}
    out, _ = run(tmp_path, "lam", with_interventions([item]), monkeypatch)
    names = ["SOC", "INF", "PRE", "COORD", "EMO"]
    for row in rows(out):
        comps = np.array([float(row[k]) for k in names])
        changed = row["group"] == "r" and int(row["round"]) >= 3
        expected = comps[4] if changed else comps.mean()
        assert float(row["total"]) == pytest.approx(expected, abs=1e-9), row
    [line] = [e for e in events(out) if e["kind"] == "INTERVENTION"]
    assert line == {"round": 3, "kind": "INTERVENTION", "intervention": "lambdas", "target": "r",
                    "lambdas": [0.0, 0.0, 0.0, 0.0, 1.0], "n_agents": 3}


def test_a_half_life_change_applies_to_its_rounds_tie_update(tmp_path, monkeypatch):
    item = {"kind": "param", "at_round": 4, "name": "half_life", "value": 1.0}
    out, _ = run(tmp_path, "param", with_interventions([item], n_agents=24, ties={"half_life": 8.0}), monkeypatch)
    updated = {}
    for e in events(out):
        if e["kind"] == "TIE":
            updated.setdefault(e["round"], set()).add((int(e["src"][6:]), int(e["dst"][6:])))
    checked = {}
    for r, h in ((2, 8.0), (3, 8.0), (4, 1.0), (5, 1.0)):
        before, after = ties(out, r - 1).tocoo(), ties(out, r)
        n = 0
        for s, d, v in zip(before.row, before.col, before.data):
            if (s, d) in updated.get(r, set()) or after[s, d] == 0:
                continue
            assert after[s, d] == pytest.approx(v * 2 ** (-1 / h), rel=1e-5), (r, s, d)
            n += 1
        checked[r] = n
    assert checked[2] + checked[3] and checked[4] + checked[5], checked      # both half-lives were seen


def test_every_from_until_repeats_and_lines_precede_the_rounds_actions(tmp_path, monkeypatch):
    item = {"kind": "lambdas", "every": 2, "from": 2, "until": 5, "target": ["agent_1"], "lambdas": [1, 0, 0, 0, 0]}
    out, _ = run(tmp_path, "every", with_interventions([item]), monkeypatch)
    lines = events(out)
    at = [i for i, e in enumerate(lines) if e["kind"] == "INTERVENTION"]
    assert [lines[i]["round"] for i in at] == [2, 4]
    for i in at:       # first line of its round: applied before the round's act step
        assert all(e["round"] < lines[i]["round"] for e in lines[:i])


def run_killed_and_resumed(tmp_path, data: dict):
    """Run ``data`` once uninterrupted and once SIGKILLed after round 3's outputs, then resumed;
    returns both run directories."""
    from tests.test_experiments import cli, write_config

    path = write_config(tmp_path / "c.yaml", data)
    ref, broken = tmp_path / "ref", tmp_path / "broken"
    cli("run", str(path), "--out", str(ref), "--quiet")
    proc = cli("run", str(path), "--out", str(broken), "--quiet", env_extra={"SOCIALGYM_KILL_AT": "3:outputs"},
               check=False)
    assert proc.returncode == -signal.SIGKILL
    cli("resume", str(broken), "--quiet")
    return ref, broken


@pytest.mark.slow
def test_resume_after_a_kill_in_an_intervention_round_is_identical(tmp_path):
    from tests.test_experiments import assert_same_outputs

    data = with_interventions([
        {"kind": "post", "at_round": 3, "author": "agent_2", "topic": "climate", "text": "A correction"},
        {"kind": "recommender", "at_round": 3, "recommender": "random"},
        {"kind": "add_ties", "at_round": 3, "target": "r", "weight": 0.6}])
    ref, broken = run_killed_and_resumed(tmp_path, data)
    assert_same_outputs(ref, broken, 5)
    assert sum(e["kind"] == "INTERVENTION" for e in events(broken)) == 3


@pytest.mark.slow
def test_interventions_edited_before_a_resume_take_effect_with_allow_config_change(tmp_path):
    from tests.test_experiments import cli, write_config

    path = write_config(tmp_path / "c.yaml", with_interventions([]))
    out = tmp_path / "run"
    proc = cli("run", str(path), "--out", str(out), "--quiet", env_extra={"SOCIALGYM_KILL_AT": "2:checkpoint"},
               check=False)
    assert proc.returncode == -signal.SIGKILL
    data = yaml.safe_load((out / "config.yaml").read_text())
    data["interventions"] = [{"kind": "post", "at_round": 4, "author": "agent_1", "topic": "late", "text": "new"}]
    (out / "config.yaml").write_text(yaml.safe_dump(data))
    refused = cli("resume", str(out), "--quiet", check=False)
    assert refused.returncode == 2 and "interventions" in refused.stderr
    cli("resume", str(out), "--quiet", "--allow-config-change")
    logged = [(e["round"], e["intervention"], e.get("text")) for e in events(out) if e["kind"] == "INTERVENTION"]
    assert logged == [(4, "post", "new")]
    changes = json.loads((out / "run.json").read_text())["config_changes"]
    assert changes == [{"round": 1, "keys": ["interventions"]}]


# ---------------------------------------------------------------------------------- config
@pytest.mark.parametrize("item, words", [
    ({"kind": "post", "at_round": 6, "author": "agent_0", "topic": "t"},
     "interventions[0].at_round 6 is beyond env.max_rounds (5)"),
    ({"kind": "post", "at_round": 0, "author": "agent_0", "topic": "t"},
     "interventions[0].at_round must be a round number (an integer >= 1), got 0"),
    ({"kind": "lambdas", "every": 2, "until": 9, "lambdas": [1, 0, 0, 0, 0]}, "interventions[0].until"),
    ({"kind": "lambdas", "every": 2, "from": 4, "until": 3, "lambdas": [1, 0, 0, 0, 0]}, "interventions[0].until"),
    ({"kind": "lambdas", "lambdas": [1, 0, 0, 0, 0]}, "needs at_round"),
    ({"kind": "lambdas", "at_round": 2, "target": "trolls", "lambdas": [1, 0, 0, 0, 0]},
     "interventions[0].target: unknown group 'trolls'"),
    ({"kind": "lambdas", "at_round": 2, "target": ["agent_9"], "lambdas": [1, 0, 0, 0, 0]},
     "unknown agent 'agent_9'"),
    ({"kind": "lambdas", "at_round": 2, "lambdas": [1, 1, 0, 0, 0]}, "interventions[0].lambdas"),
    ({"kind": "param", "at_round": 2, "name": "feed_size", "value": 3}, "interventions[0].name 'feed_size'"),
    ({"kind": "param", "at_round": 2, "name": "half_life", "value": -1}, "interventions[0].value"),
    ({"kind": "recommender", "at_round": 2, "recommender": "magic"}, "interventions[0].recommender"),
    ({"kind": "recommender", "at_round": 2, "recommender": "mf", "params": {"dimm": 3}}, "interventions[0]"),
    ({"kind": "rerank", "at_round": 2, "rerank": [{"kind": "nope"}]}, "interventions[0]"),
    ({"kind": "add_ties", "at_round": 2, "pairs": [["agent_0", "agent_0"]]}, "interventions[0].pairs"),
    ({"kind": "add_ties", "at_round": 2, "soc_strategy": 1}, "needs env.agent_interests"),
    ({"kind": "post", "at_round": 2, "author": "agent_77", "topic": "t"}, "interventions[0].author"),
    ({"kind": "explode", "at_round": 2}, "interventions[0].kind"),
    ({"kind": "post", "at_round": 2, "author": "agent_0", "topic": "t", "colour": 1}, "interventions[0].colour"),
    ({"kind": "post", "at_round": 2, "author": "agent_0"}, "interventions[0].topic is required"),
    ({"kind": "post", "at_round": 2, "author": "agent_0", "topic": "x" * 500}, "interventions[0].topic: topic has"),
])
def test_bad_schedules_are_one_line_errors_naming_the_key(item, words):
    with pytest.raises(ConfigError) as info:
        load_config(with_interventions([item]))
    message = str(info.value)
    assert "\n" not in message and words in message, message


def test_interventions_must_be_a_list():
    with pytest.raises(ConfigError, match="interventions must be a list"):
        load_config(with_interventions({"kind": "post"}))


def test_a_sweep_cell_that_moves_max_rounds_below_an_intervention_fails_at_load():
    data = with_interventions([{"kind": "lambdas", "at_round": 5, "lambdas": [1, 0, 0, 0, 0]}])
    with pytest.raises(ConfigError, match=r"interventions\[0\]\.at_round 5 is beyond env\.max_rounds \(3\)"):
        load_config({**data, "sweep": {"env.max_rounds": [5, 3]}})


def test_config_round_trip_and_no_key_without_interventions():
    assert "interventions" not in to_dict(load_config(BASE))
    cfg = load_config(with_interventions([{"kind": "post", "at_round": 2, "author": "agent_0", "topic": "t"}]))
    again = load_config(yaml.safe_load(yaml.safe_dump(to_dict(cfg))))
    assert again == cfg and to_dict(again)["interventions"][0]["author"] == "agent_0"


# ---------------------------------------------------------------------------------- Python API
def test_env_methods_between_rounds_only():
    import socialgym

    env = socialgym.parallel_env(n_agents=4, max_rounds=2, seed=0, invalid_actions="lenient")
    env.reset(seed=0)
    cid = env.inject_post("agent_1", "news", "hello")
    obs = env.refresh_feeds()
    feeds = env.act_feeds
    assert all(cid in feeds[i] for i in (0, 2, 3)) and cid not in feeds[1] and not feeds.flags.writeable
    assert set(obs) == set(env.possible_agents)
    assert [[it["id"] for it in obs[a]["feed"]] for a in env.possible_agents] == \
        [[c for c in row if c >= 0] for row in feeds.tolist()]
    env.set_lambdas(["agent_0"], [0, 1, 0, 0, 0])
    assert env.lambdas[0].tolist() == [0, 1, 0, 0, 0]
    env.add_ties([0], [1], 0.5)
    env.remove_ties([0], [1])
    assert env.tie_matrix().nnz == 0
    with pytest.raises(ValueError, match="feed_size"):
        env.set_param("feed_size", 3)
    env.step({a: {"actions": [{"type": "NOT"}] * 3} for a in env.agents})     # now in the vote phase
    with pytest.raises(RuntimeError, match="between rounds"):
        env.inject_post("agent_1", "news", "again")


# ---------------------------------------------------------------------------------- report and viewer
def test_the_report_lists_and_marks_the_interventions(tmp_path, monkeypatch):
    from socialgym.experiments.analysis.report import _load, build_report

    items = [{"kind": "post", "at_round": 2, "author": "agent_0", "topic": "t", "text": "x"},
             {"kind": "lambdas", "at_round": 4, "lambdas": [1, 0, 0, 0, 0]}]
    out, _ = run(tmp_path, "rep", with_interventions(items), monkeypatch)
    assert _load(out).interventions == [(2, "post"), (4, "lambdas")]
    html = build_report(out).read_text()
    assert "round 2: post, round 4: lambdas" in html


def test_the_viewer_shows_an_injected_post_as_a_post_of_its_round(tmp_path, monkeypatch):
    from socialgym.viewer.data import decode, load_run

    items = [{"kind": "post", "at_round": 3, "author": "agent_4", "topic": "vaccines", "text": "A false claim",
              "sentiment": -0.5}]
    out, _ = run(tmp_path, "inj", with_interventions(items), monkeypatch)
    logged = next(e for e in events(out) if e["kind"] == "INTERVENTION")
    table = load_run(out)["items"]
    k = decode(table["id"]).tolist().index(logged["id"])
    assert (int(decode(table["round"])[k]), table["kinds"][int(decode(table["kind"])[k])]) == (3, "POST")
    assert int(decode(table["author"])[k]) == 4 and table["text"][k] == "A false claim"
    assert decode(table["sentiment"])[k] == -0.5


@pytest.mark.slow
def test_the_viewer_marks_intervention_rounds_on_its_slider(tmp_path, monkeypatch):
    from tests.test_viewer_browser import _go_to_round, _open, _page_is_clean
    from socialgym.viewer import build_viewer

    items = [{"kind": "post", "at_round": 3, "author": "agent_0", "topic": "t", "text": "x"},
             {"kind": "lambdas", "at_round": 3, "lambdas": [1, 0, 0, 0, 0]}]
    out, _ = run(tmp_path, "view", with_interventions(items), monkeypatch)
    page = Path(build_viewer(out))
    assert "events.jsonl: 2 lines of an unknown kind" not in page.read_text()
    browser = need_browser()
    with browser.headless_chrome(1200, 900) as drv:
        _open(drv, page)
        assert drv.execute_script(
            "return Array.from(document.querySelectorAll('#intervention-rounds option')).map(o => o.value)") == ["3"]
        _go_to_round(drv, 3)
        assert "intervention: post, lambdas" in drv.find_element("css selector", "#round-label").text
        _go_to_round(drv, 2)
        assert "intervention" not in drv.find_element("css selector", "#round-label").text
        _page_is_clean(drv)


def test_the_coach_switched_on_and_off_from_its_round(tmp_path):
    need_module("openai")
    from socialgym.llm.testing import FakeServer
    from tests.test_experiments import _deterministic_responder

    with FakeServer(_deterministic_responder) as server:
        data = {"seed": 1, "env": {"n_agents": 4, "max_rounds": 4, "recommender": "random", "sentiment": "tone"},
                "policy": {"groups": [{"name": "a", "kind": "llm", "agents": 2},
                                      {"name": "b", "kind": "llm", "agents": 2, "coach": True}]},
                "llm": {"base_url": server.base_url, "model": "fake", "max_concurrency": 4},
                "logging": {"report": False, "progress": False, "transcripts": True},
                "interventions": [{"kind": "coach", "at_round": 3, "target": "a", "enabled": True},
                                  {"kind": "coach", "at_round": 3, "target": ["agent_2"], "enabled": False}]}
        out = tmp_path / "coach"
        run_experiment(load_config(data), out)
    coached_rounds: dict = {}
    for line in (out / "transcripts.jsonl").read_text().splitlines():
        e = json.loads(line)
        if e.get("purpose") == "coach":
            coached_rounds.setdefault(e["agent"], set()).add(e["round"])
    # the coach speaks from round 2 on (round 1 has nothing to advise on)
    assert coached_rounds == {"agent_0": {3, 4}, "agent_1": {3, 4}, "agent_2": {2}, "agent_3": {2, 3, 4}}
    for row in rows(out):
        r, agent = int(row["round"]), row["agent"]
        expected = {"agent_0": r >= 3, "agent_1": r >= 3, "agent_2": r < 3, "agent_3": True}[agent]
        assert row["coached"] == str(int(expected)), row
    logged = [e for e in events(out) if e["kind"] == "INTERVENTION"]
    assert [(e["round"], e["intervention"], e["enabled"]) for e in logged] == [(3, "coach", True), (3, "coach", False)]


def test_the_coach_targets_llm_agents_only():
    with pytest.raises(ConfigError, match=r"interventions\[0\].target: the coach advises llm agents only"):
        load_config(with_interventions([{"kind": "coach", "at_round": 2, "target": "g", "enabled": True}]))


@pytest.mark.slow
def test_a_coach_switch_survives_a_kill_and_resume(tmp_path):
    need_module("openai")
    from socialgym.llm.testing import FakeServer
    from tests.test_experiments import _deterministic_responder, assert_same_outputs

    with FakeServer(_deterministic_responder) as server:
        data = {"seed": 2, "env": {"n_agents": 3, "max_rounds": 4, "recommender": "random", "sentiment": "tone"},
                "policy": {"kind": "llm"},
                "llm": {"base_url": server.base_url, "model": "fake", "max_concurrency": 4},
                "logging": {"report": False, "progress": False},
                "interventions": [{"kind": "coach", "at_round": 3, "enabled": True}]}
        ref, broken = run_killed_and_resumed(tmp_path, data)
    assert_same_outputs(ref, broken, 4)
    assert {(int(r["round"]), r["coached"]) for r in rows(broken)} == {(1, "0"), (2, "0"), (3, "1"), (4, "1")}


def test_the_documented_example_loads():
    text = (Path(__file__).resolve().parents[1] / "docs" / "experiments.md").read_text()
    block = text[text.index("interventions:\n  - {kind: recommender"):]
    raw = yaml.safe_load(block[:block.index("```")])
    groups = [{"name": "trolls", "kind": "random", "agents": 5}, {"name": "lurkers", "kind": "greedy", "agents": 5},
              {"name": "uncoached", "kind": "llm"}]
    cfg = load_config({"env": {"n_agents": 30, "max_rounds": 30, "agent_interests": [i % 3 for i in range(30)]},
                       "policy": {"groups": groups}, **raw})
    assert [s["kind"] for s in cfg.interventions] == ["recommender", "rerank", "param", "add_ties", "add_ties",
                                                      "remove_ties", "post", "lambdas", "coach"]
