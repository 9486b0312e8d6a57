"""Decision logs, behaviour cloning and ``socialgym distill`` (issue 34).

The acceptance test: a policy distilled from synthetic runs whose agents follow a known rule
reproduces that rule on held-out decisions (>= 90 %), acting through ``TorchPolicy`` in fresh
episodes it never saw.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import pytest
from capabilities import need_module

import socialgym
from socialgym.envs.feed.convert import act_to_numeric, votes_to_numeric
from socialgym.envs.feed.encoding import ActionLayout
from socialgym.rundir.decisions import DecisionLog, read_decisions

torch = need_module("torch")


# ---------------------------------------------------------------------------------- the conversion, by hand
LAY = ActionLayout(n_agents=5, n_actions=4, feed_size=3, dm_inbox_size=2, max_topics=4, vote_feed_size=2)
OBS = {"feed": [{"id": 10, "author": "agent_2"}, {"id": 11, "author": "agent_4"}],
       "dms": [{"id": 20, "author": "agent_1", "topic": "b"}], "topics": ["a", "b", "c"],
       "vote_items": [{"id": 10}, {"id": 12}]}


def test_structured_choices_in_the_numeric_encoding():
    actions = {"actions": [
        {"type": "COM", "target_id": 11, "tone": "critical", "mentions": ["agent_2", "agent_3"]},
        {"type": "DM", "recipient": "agent_3", "topic": "c", "tone": "supportive"},
        {"type": "DM", "recipient": "agent_1", "target_id": 20},
        {"type": "POST", "topic": "a brand new topic"}]}
    unmapped = Counter()
    vec, rel = act_to_numeric(OBS, actions, LAY, me=0, unmapped=unmapped)
    w = LAY.slot_width                       # 6 fields + 3 mention flags = 9
    assert w == 9
    # slot 0: COM (1) on feed slot 1 (id 11), tone critical (2); mentions agent_2 = author of slot 0
    assert vec[0] == 1 and vec[1] == 1 and vec[5] == 2
    assert (vec[6], vec[7]) == (1, 0) and rel[6] and rel[7] and not rel[8]     # slot 2 of the feed is empty
    assert not rel[2] and not rel[3] and not rel[4]                            # a COM takes its target's topic
    # slot 1: a new DM (2) to agent_3 from agent_0: recipient index (3 - 0 - 1) mod 5 = 2, reply 0, topic c = 2
    assert tuple(vec[w:w + 6]) == (2, 0, 2, 0, 2, 0) and rel[w + 2] and rel[w + 3] and rel[w + 4]
    # slot 2: a reply to DM 20 = inbox slot 0 -> reply_slot 1; topic inherited ("b" = 1); tone neutral (1)
    assert (vec[2 * w], vec[2 * w + 3], vec[2 * w + 4], vec[2 * w + 5]) == (2, 1, 1, 1)
    assert not rel[2 * w + 2]                                                  # the recipient follows the DM
    # slot 3: a POST on a topic outside the vocabulary: its topic has no numeric twin
    assert vec[3 * w] == 0 and not rel[3 * w + 4]
    assert unmapped == Counter(mentions=1, topic=1)                            # agent_3 is in no feed slot
    vec, rel = votes_to_numeric(OBS, {"votes": {10: 1}}, LAY)
    assert tuple(vec[LAY.act_length:]) == (2, 1) and rel[LAY.act_length:].all()   # like; 12 left out = no vote


# ---------------------------------------------------------------------------------- the rule
def rule(observations: dict) -> dict:
    """Act: COM (supportive) on the first feed item with a like; else reply (critical) to
    the first DM; else POST (neutral) on the first topic. Vote: dislike what has more dislikes
    than likes, else no vote."""
    out = {}
    for a, o in observations.items():
        if o["phase"] == "vote":
            out[a] = {"votes": {it["id"]: -1 if it["dislikes"] > it["likes"] else 0 for it in o["vote_items"]}}
            continue
        liked = [it for it in o["feed"] if it["likes"] >= 1]
        if o["round"] > 1 and liked:
            act = {"type": "COM", "target_id": liked[0]["id"], "tone": "supportive"}
        elif o["round"] > 1 and o["dms"]:
            act = {"type": "DM", "recipient": o["dms"][0]["author"], "target_id": o["dms"][0]["id"], "tone": "critical"}
        else:
            act = {"type": "POST", "topic": o["topics"][0], "tone": "neutral"}
        out[a] = {"actions": [act]}
    return out


def crowd(observations: dict, rnd: random.Random) -> dict:
    """The other half: random votes (so that likes vary) and a POST or a DM to a random agent."""
    out = {}
    for a, o in observations.items():
        if o["phase"] == "vote":
            out[a] = {"votes": {it["id"]: rnd.choice([-1] + [0] * 60 + [1]) for it in o["vote_items"]}}
        elif o["round"] > 1 and rnd.random() < 0.8:
            out[a] = {"actions": [{"type": "DM", "recipient": rnd.choice(list(o["users"])), "topic": o["topics"][0]}]}
        else:
            out[a] = {"actions": [{"type": "POST", "topic": o["topics"][0]}]}
    return out


N, ROUNDS = 120, 10


def _env(seed: int):
    return socialgym.parallel_env(n_agents=N, max_rounds=ROUNDS, n_actions=1, obs_format="both", seed=seed,
                                  recommender="random")


def _mixed(obs: dict, rnd: random.Random) -> dict:
    ruled = {a: o for a, o in obs.items() if int(a.rpartition("_")[2]) < N // 2}
    return {**rule(ruled), **crowd({a: o for a, o in obs.items() if a not in ruled}, rnd)}


def _synthetic_run(seed: int, out: Path) -> None:
    env = _env(seed)
    obs, _ = env.reset(seed=seed)
    log = DecisionLog(env.layout, env.possible_agents, range(N // 2))
    rnd = random.Random(seed)
    while env.agents:
        r = env.round
        for _ in range(2):
            actions = _mixed(obs, rnd)
            log.observe(obs, actions, len(env.vocab))
            obs, *_ = env.step(actions)
        log.write(out, r)


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_distilled_policy_reproduces_a_rule_on_held_out_decisions(tmp_path):
    from socialgym.training.distill import Args, agreement, behaviour_clone
    from socialgym.training.torch_policy import TorchPolicy, save_policy

    runs = [tmp_path / f"run{s}" for s in range(6)]
    for s, run in enumerate(runs):
        _synthetic_run(s, run)
    train, unmapped = read_decisions(runs[:5])
    assert len(train["act"]) == 5 * ROUNDS * N // 2 and sum(unmapped.values()) == 0
    actor, _ = behaviour_clone(train, Args(epochs=100, seed=0))
    held = agreement(actor, read_decisions(runs[5:])[0])
    assert held["overall"]["share"] >= 0.9, held
    path = tmp_path / "model.pt"
    save_policy(path, actor, train["act"].layout, Args(epochs=100))
    policy = TorchPolicy.load(path, deterministic=True)

    # fresh episodes: the loaded policy's choice against the rule's, on the rule's own trajectory
    agreed, total = Counter(), Counter()
    kinds = Counter()
    for seed in (100, 101):
        env = _env(seed)
        obs, _ = env.reset(seed=seed)
        rnd = random.Random(seed)
        while env.agents:
            for _ in range(2):
                actions = _mixed(obs, rnd)
                mine = {a: o for a, o in obs.items() if int(a.rpartition("_")[2]) < N // 2}
                chosen = policy.act(mine)
                for a, o in mine.items():
                    i = int(a.rpartition("_")[2])
                    if o["phase"] == "act":
                        want, fixed = act_to_numeric(o, actions[a], env.layout, i)
                        kinds[actions[a]["actions"][0]["type"]] += 1
                        ok = [bool((chosen[a][fixed] == want[fixed]).all())]
                    else:
                        want, fixed = votes_to_numeric(o, actions[a], env.layout)
                        ok = (chosen[a][fixed] == want[fixed]).tolist()
                    agreed[o["phase"]] += sum(ok)
                    total[o["phase"]] += len(ok)
                obs, *_ = env.step(actions)
    assert min(kinds.values()) > 20 and len(kinds) == 3      # the rule's three branches all occur
    assert sum(agreed.values()) / sum(total.values()) >= 0.9, (agreed, total)
    assert agreed["act"] / total["act"] >= 0.9 and agreed["vote"] / total["vote"] >= 0.9, (agreed, total)


# ---------------------------------------------------------------------------------- runs and the command
SCRIPTED = {"seed": 0, "env": {"n_agents": 16, "max_rounds": 4, "recommender": "random"},
            "policy": {"groups": [{"name": "users", "kind": "social_users", "agents": 10},
                                  {"name": "greedy", "kind": "greedy"}]},
            "logging": {"decisions": "all", "report": False, "progress": False}}


def _runs(tmp_path, n=3, data=SCRIPTED):
    from socialgym.experiments import load_config, run_experiment

    out = []
    for s in range(n):
        run_experiment(load_config({**data, "seed": s}), tmp_path / f"r{s}", progress=False)
        out.append(tmp_path / f"r{s}")
    return out


def test_a_run_logs_the_decisions_it_is_asked_for(tmp_path):
    from socialgym.rundir import Run, layout

    (run,) = _runs(tmp_path, 1)
    assert sorted(layout.decision_files(run)) == [1, 2, 3, 4]
    decisions, _ = read_decisions([run])
    assert set(decisions["act"].agent.tolist()) == set(range(16))
    # the logged types are what the env recorded: per agent and round, as rounds.csv counts them
    act = decisions["act"]
    w = act.layout.slot_width
    types = act.action[:, 0:act.layout.act_length:w]
    rows = Run(run).rounds
    assert rows
    for row in rows:
        i, r = int(row["agent"].rpartition("_")[2]), int(row["round"])
        mine = types[(act.agent == i) & (act.round == r)]
        assert [int((mine == k).sum()) for k in range(4)] == [int(row[t]) for t in ("POST", "COM", "DM", "NOT")]


@pytest.mark.slow
def test_distill_command_writes_a_model_and_a_fidelity_report(tmp_path, capsys):
    from socialgym.training.torch_policy import TorchPolicy
    from socialgym.cli import main
    from socialgym.rundir import Run, layout

    runs = _runs(tmp_path)
    report = tmp_path / "report"
    assert main(["distill", *map(str, runs), "--out", str(tmp_path / "m.pt"), "--report", str(report),
                 "--epochs", "5"]) == 0
    assert "agreement" in capsys.readouterr().out
    TorchPolicy.load(tmp_path / "m.pt")
    result = json.loads((report / layout.FIDELITY_JSON).read_text())
    assert result["train_runs"] == [str(runs[0]), str(runs[1])] and result["heldout_runs"] == [str(runs[2])]
    assert result["agreement"]["overall"]["decisions"] > 0
    (replay,) = result["replays"]
    stats = {ln["statistic"]: ln for ln in replay["lines"]}
    assert {"action types", "targets", "tones", "votes", "mean total reward", "tie out-degree"} <= set(stats)
    assert 0 <= stats["action types"]["distance"] <= 1
    # the replay ran the distilled network for every agent (both groups were logged), same seed
    rows = Run(replay["replay"]).rounds
    assert {r["policy"] for r in rows} == {"distilled"}
    assert "| action types |" in (report / layout.FIDELITY_MD).read_text()


def test_distill_refuses_runs_without_decision_logs_and_a_bad_holdout(tmp_path, capsys):
    from socialgym.cli import main

    plain = {**SCRIPTED, "logging": {"report": False, "progress": False}}
    runs = _runs(tmp_path, 2, plain)
    assert main(["distill", *map(str, runs), "--out", str(tmp_path / "m.pt")]) == 2
    assert "no decision logs" in capsys.readouterr().err
    assert main(["distill", str(runs[0]), "--out", str(tmp_path / "m.pt")]) == 2
    assert "--holdout 1" in capsys.readouterr().err
    assert not (tmp_path / "m.pt").exists()


def test_logging_decisions_is_checked():
    from socialgym.experiments import ConfigError, load_config

    with pytest.raises(ConfigError, match="logging.decisions must be one of none, llm, all"):
        load_config({**SCRIPTED, "logging": {"decisions": "some"}})


def test_a_malformed_action_is_counted_not_logged(tmp_path):
    env = socialgym.parallel_env(n_agents=4, max_rounds=2, n_actions=1, obs_format="both", seed=0)
    obs, _ = env.reset(seed=0)
    log = DecisionLog(env.layout, env.possible_agents, [0, 1])
    log.observe(obs, {"agent_0": [1, 2, 3], "agent_1": {"actions": [{"type": "POST", "topic": obs["agent_1"]["topics"][0]}]}},
                len(env.vocab))
    log.write(tmp_path, 1)
    decisions, unmapped = read_decisions([tmp_path])
    assert unmapped["payload"] == 1                         # agent_0's vector has the wrong length
    assert decisions["act"].agent.tolist() == [1]


def test_topics_are_read_as_the_parser_reads_them():
    # "B" and " b " are topic b (index 1) once stripped and lower-cased; 2 is an index (c)
    for topic, index in (("B", 1), (" b ", 1), (2, 2)):
        vec, rel = act_to_numeric(OBS, {"actions": [{"type": "POST", "topic": topic}]}, LAY, me=0)
        assert rel[4] and vec[4] == index
    vec, rel = act_to_numeric(OBS, {"actions": [{"type": "POST", "topic": True}]}, LAY, me=0)
    assert not rel[4]                                       # a bool is no index


def test_a_choice_the_env_refused_is_taken_out(tmp_path):
    env = socialgym.parallel_env(n_agents=4, max_rounds=2, n_actions=2, obs_format="both", seed=0)
    obs, _ = env.reset(seed=0)
    log = DecisionLog(env.layout, env.possible_agents, [0])
    topic = obs["agent_0"]["topics"][0]
    actions = {a: {"actions": [{"type": "POST", "topic": topic}, {"type": "POST", "topic": topic}]} for a in obs}
    actions["agent_0"]["actions"][1]["tone"] = "furious"      # invalid: slot 1 becomes nothing
    log.observe(obs, actions, len(env.vocab))
    _, _, _, _, infos = env.step(actions)
    log.drop_invalid(infos)
    log.write(tmp_path, 1)
    decisions, unmapped = read_decisions([tmp_path])
    w = env.layout.slot_width
    rel = decisions["act"].relevant[0]
    assert rel[0] and not rel[w:2 * w].any() and unmapped["invalid"] == 1


def test_a_replay_of_a_config_with_shares_loads_again(tmp_path):
    from socialgym.experiments import load_config
    from socialgym.experiments.define import dump_yaml

    cfg = load_config({"env": {"n_agents": 10}, "policy": {"groups": [{"name": "a", "kind": "random", "share": 0.3},
                                                                      {"name": "b", "kind": "greedy"}]}})
    import dataclasses
    groups = cfg.policy_groups()
    assert [(g.agents, g.share) for g in groups] == [(3, None), (7, None)]
    dump_yaml(dataclasses.replace(cfg, policy=dataclasses.replace(cfg.policy, groups=groups)), tmp_path / "c.yaml")
    assert [g.agents for g in load_config(tmp_path / "c.yaml").policy_groups()] == [3, 7]
