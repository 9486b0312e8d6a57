"""Issue 44's bad values and tracebacks on the surfaces added since the old probe: run files
holding numbers past int64 or a reply cycle, damaged or edited decision logs, a run given twice
to ``distill``, an all-NaN model, CLI numbers out of range, platform objective weights and stances
of the wrong type, and ``estimate --json`` beyond float range. Each expected value is worked out
in the comments, not read back from the code under test."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import numpy as np
import pytest
from capabilities import need_module

from socialgym.cli import main
from socialgym.experiments.analysis.realism import scorecard
from socialgym.metrics.realism import thread_roots
from socialgym.rundir import layout

from test_realism import _content, small_run


# ---------------------------------------------------------------------------------- run files past int64
SCRIPTED = {"seed": 0, "env": {"n_agents": 8, "max_rounds": 3, "recommender": "random"},
            "policy": {"groups": [{"name": "users", "kind": "social_users", "agents": 4},
                                  {"name": "greedy", "kind": "greedy"}]},
            "logging": {"decisions": "all", "report": False, "progress": False},
            "run": {"snapshots": False}}


@pytest.fixture(scope="module")
def logged_runs(tmp_path_factory):
    from socialgym.experiments import load_config, run_experiment

    root = tmp_path_factory.mktemp("logged")
    for s in range(2):
        run_experiment(load_config({**SCRIPTED, "seed": s}), root / f"r{s}", progress=False)
    return root


def _copy(logged_runs, tmp_path, name="r1") -> Path:
    return Path(shutil.copytree(logged_runs / name, tmp_path / f"copy-{name}"))


def _events(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / layout.EVENTS).read_text().splitlines()]


def _write_events(run: Path, events: list[dict]) -> None:
    (run / layout.EVENTS).write_text("".join(json.dumps(e) + "\n" for e in events))


def test_thread_roots_of_a_reply_cycle_by_hand():
    # posts 10, 20; 11 -> 10, 12 -> 11 (root 10); 21 -> 20; 30 <-> 31 a cycle, 40 -> 40 itself,
    # 50 -> 99 (not in the file): none of the last four reaches a POST, root -1
    ids = [10, 11, 12, 20, 21, 30, 31, 40, 50]
    targets = [-1, 10, 11, -1, 20, 31, 30, 40, 99]
    assert thread_roots(ids, targets).tolist() == [10, 10, 10, 20, 20, -1, -1, -1, -1]


def test_a_long_reply_cycle_is_not_quadratic():
    # 200,000 comments in one ring: every root is -1. The old loop took one pass per item (n^2 =
    # 4e10 steps, hours); pointer doubling takes log2(n) = 18 passes. A generous bound, not a timing.
    n = 200_000
    ids = np.arange(n)
    targets = np.roll(ids, 1)
    start = time.perf_counter()
    assert (thread_roots(ids, targets) == -1).all()
    assert time.perf_counter() - start < 30


def test_validate_reads_a_reply_cycle_as_threads_that_reach_no_post(tmp_path):
    run = small_run(tmp_path)
    # small_run: posts 0-3; COM 5 replies to COM 4 (on post 0): 1 - 1/4 of posts have a nested reply
    assert scorecard([run]).score("thread_depth").mean == pytest.approx(0.75)
    a = [f"agent_{i}" for i in range(4)]
    _write_events(run, _events(run) + [_content("COM", 12, a[0], a[1], 13, rnd=2),
                                       _content("COM", 13, a[1], a[0], 12, rnd=2),
                                       _content("COM", 14, a[2], a[2], 14, rnd=2)])
    # the three comments reach no post: no post gains a nested thread, the share stays 0.75
    assert scorecard([run]).score("thread_depth").mean == pytest.approx(0.75)


@pytest.mark.parametrize("field", ["id", "target_id", "round"])
@pytest.mark.parametrize("value", [2**70, -2**70, 1e300, 1.5])
def test_ids_and_rounds_past_int64_are_left_out_with_a_note(logged_runs, tmp_path, capsys, field, value):
    run = small_run(tmp_path)
    events = _events(run)
    events[6][field] = value                       # COM 6 (a0 on post 1)
    _write_events(run, events)
    card = scorecard([run])
    assert any("1 events whose id, target_id or round is not an integer" in n for n in card.notes)
    # without COM 6, a0 wrote no public item from round 2 on: posts per user from round 2 are
    # a0 0, a1 2 (4, 11), a2 1 (5), a3 2 (9, 10): sorted 0,1,2,2, sum (2i - n - 1) x_i =
    # -1*1 + 1*2 + 3*2 = 7, G = 7 / (4 * 5) = 0.35
    assert card.score("posts_gini").mean == pytest.approx(0.35)
    real = _copy(logged_runs, tmp_path)           # report and view need a whole run (summary.json)
    events = _events(real)
    for e in events[3:6]:
        e[field] = value
    _write_events(real, events)
    for command in (["validate", str(run)], ["validate", str(real)], ["report", str(real)], ["view", str(real)]):
        assert main(command) == 0, command
        captured = capsys.readouterr()
        assert "Traceback" not in captured.err and "OverflowError" not in captured.err and \
            "warning" not in captured.err, captured.err


@pytest.mark.parametrize("cell", ["99999999999999999999", "²", "-3", "1.5"])
def test_a_rounds_csv_round_that_is_no_round_is_left_out(logged_runs, tmp_path, capsys, cell):
    run = _copy(logged_runs, tmp_path)
    lines = (run / layout.ROUNDS).read_text().splitlines()
    lines[1] = cell + lines[1][lines[1].index(","):]
    (run / layout.ROUNDS).write_text("\n".join(lines) + "\n")
    card = scorecard([run])
    assert any("1 rounds.csv row(s) whose round is not a whole number" in n for n in card.notes)
    for command in (["validate", str(run)], ["report", str(run)], ["view", str(run)]):
        assert main(command) == 0, command
        assert "Traceback" not in capsys.readouterr().err


# ---------------------------------------------------------------------------------- distill
def _edit(path: Path, **changes) -> None:
    with np.load(path) as data:
        arrays = {k: data[k] for k in data.files}
    for k, v in changes.items():
        if v is None:
            del arrays[k]
        else:
            arrays[k] = v(arrays[k]) if callable(v) else v
    with open(path, "wb") as f:
        np.savez(f, **arrays)


DAMAGES = {
    "truncated": (lambda p: p.write_bytes(p.read_bytes()[: p.stat().st_size // 2]), "cannot be read: BadZipFile"),
    "empty": (lambda p: p.write_bytes(b""), "cannot be read"),
    "an array missing": (lambda p: _edit(p, act_action=None), "phase 'act' lacks action"),
    "an agent past the layout": (lambda p: _edit(p, act_agent=lambda a: a + 100),
                                 "'act_agent' holds an agent index outside 0..7"),
    "a negative choice": (lambda p: _edit(p, vote_action=lambda a: a - 5),
                          "'vote_action' holds a choice outside its range"),
    "actions as floats": (lambda p: _edit(p, act_action=lambda a: a.astype(float)), "'act_action' must be integers"),
    "observations with NaN": (lambda p: _edit(p, act_self=lambda a: a * np.nan), "'act_self' holds NaN"),
    "rows that disagree": (lambda p: _edit(p, act_feed=lambda a: a[:-1]), "'act_feed' must be floats"),
    "an unknown format": (lambda p: _edit(p, format=np.int64(9)), "format 9, expected 1"),
    "a layout of strings": (lambda p: _edit(p, layout=np.array(["a"] * 6)), "'layout' must be integers"),
    "unmapped not JSON": (lambda p: _edit(p, unmapped=np.asarray("{oops")), "'unmapped' must be a JSON object"),
    "an extra array": (lambda p: _edit(p, payload=np.zeros(3)), "unknown arrays ['payload']"),
}


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_distill_names_a_damaged_decision_file_in_one_line(logged_runs, tmp_path, capsys, damage):
    held = _copy(logged_runs, tmp_path)
    file = layout.decision_path(held, 2)
    harm, expected = DAMAGES[damage]
    harm(file)
    out = tmp_path / "m.pt"
    assert main(["distill", str(logged_runs / "r0"), str(held), "--out", str(out), "--epochs", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("socialgym: error: ")
    assert f"{file}: not a usable decision log" in err and expected in err, err
    assert not out.exists()


def test_distill_refuses_a_run_given_twice_or_its_copy(logged_runs, tmp_path, capsys):
    r0, r1 = logged_runs / "r0", logged_runs / "r1"
    copy = _copy(logged_runs, tmp_path, "r0")
    for argv, named in (([r0, r1, r0], f"{r0} is given twice (also as {r0}"),
                        ([r0, copy], f"{copy} is given twice (also as {r0}, the same run or a copy")):
        out = tmp_path / "m.pt"
        assert main(["distill", *map(str, argv), "--out", str(out), "--epochs", "1"]) == 2
        err = capsys.readouterr().err
        assert named in err and err.count("\n") == 1
        assert not out.exists()


def test_a_nan_model_is_refused_by_name(logged_runs, tmp_path, capsys):
    torch = need_module("torch")
    from socialgym.training.torch_policy import TorchPolicy

    good = tmp_path / "m.pt"
    assert main(["distill", str(logged_runs / "r0"), str(logged_runs / "r1"), "--out", str(good),
                 "--epochs", "1"]) == 0
    capsys.readouterr()
    data = torch.load(good, weights_only=True)
    for tensor in data["state_dict"].values():
        if tensor.is_floating_point():
            tensor.fill_(float("nan"))
    nan = tmp_path / "nan.pt"
    torch.save(data, nan)
    with pytest.raises(ValueError, match=r"nan.pt: weight '.*' has \d+ of \d+ values NaN or infinite"):
        TorchPolicy.load(nan)
    config = tmp_path / "c.yaml"
    config.write_text(json.dumps({**SCRIPTED, "logging": {"report": False, "progress": False},
                                  "policy": {"groups": [{"name": "d", "kind": "distilled", "agents": 4,
                                                         "params": {"path": str(nan)}},
                                                        {"name": "greedy", "kind": "greedy"}]}}))
    assert main(["run", str(config), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert "policy group 'd' (distilled)" in err and "NaN or infinite" in err and err.count("\n") == 1
    assert not (tmp_path / "run").exists()         # refused before the run directory is made
    data["obs_var"] = [-1.0] * len(data["obs_var"]) if data["obs_var"] is not None else [-1.0]
    torch.save(torch.load(good, weights_only=True) | {"obs_var": data["obs_var"]}, nan)
    with pytest.raises(ValueError, match="obs_var holds NaN, infinite or negative values"):
        TorchPolicy.load(nan)


# ---------------------------------------------------------------------------------- CLI numbers
@pytest.mark.parametrize("argv, option, span", [
    (["calibrate", "c.yaml", "--targets", "t.yaml", "--out", "o", "--seed", "-1"], "--seed", "0..4294967295"),
    (["distill", "a", "b", "--out", "m.pt", "--seed", "-1"], "--seed", "0..4294967295"),
    (["distill", "a", "b", "--out", "m.pt", "--hidden", "99999"], "--hidden", "1..4096"),
    (["distill", "a", "b", "--out", "m.pt", "--epochs", "0"], "--epochs", "1..100000"),
    (["distill", "a", "b", "--out", "m.pt", "--holdout", "-1"], "--holdout", ">= 0"),
    (["view", "d", "--serve", "--port", "70000"], "--port", "0..65535"),
    (["view", "d", "--serve", "--port", "-1"], "--port", "0..65535"),
    (["fork", "d", "--at-round", "-3", "--out", "o"], "--at-round", ">= 0"),
    (["study", "soc-strategy", "--out", "o", "--replicates", "0"], "--replicates", "1..10000"),
    (["estimate", "c.yaml", "--text-chars", "x"], "--text-chars", "1..100000"),
])
def test_cli_numbers_out_of_range_are_one_usage_line(capsys, argv, option, span):
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert f"error: argument {option}: must be an integer" in last and span in last


# ---------------------------------------------------------------------------------- objectives, stances
@pytest.mark.parametrize("objective, message", [
    ({}, "at least one weight must be non-zero"),
    ({"engagement": 0.0, "welfare": 0}, "at least one weight must be non-zero"),
    ({"engagement": "1"}, "weight 'engagement' must be a finite number, got '1'"),
    ({"engagement": True}, "weight 'engagement' must be a finite number, got True"),
    ({"welfare": float("nan")}, "weight 'welfare' must be a finite number"),
    ({"welfare": None}, "weight 'welfare' must be a finite number, got None"),
])
def test_platform_objective_weights_are_numbers(objective, message):
    from socialgym.rewards.platform import platform_weights

    with pytest.raises(ValueError, match=message):
        platform_weights(objective)
    # order engagement, welfare, diversity, bridging, negativity; the others 0
    assert platform_weights({"welfare": 0.5, "negativity": -1}).tolist() == [0.0, 0.5, 0.0, 0.0, -1.0]


@pytest.mark.parametrize("stances", ["abab", b"ab", {"a": 1}, {"a", "b"}, np.zeros((2, 2)), 5, [[1], [2]]])
def test_stances_are_one_label_per_agent(stances):
    from socialgym.recommenders.features import stance_codes

    with pytest.raises(TypeError, match="stances: "):
        stance_codes(stances, 4 if not isinstance(stances, list) else 2)
    # labels sorted by repr: 'a' -> 0, 'b' -> 1; None unknown
    assert stance_codes(["b", "a", None, "b"], 4).tolist() == [1, 0, -1, 1]
    assert stance_codes(np.array([3, 1, 3]), 3).tolist() == [1, 0, 1]


# ---------------------------------------------------------------------------------- strict JSON
def test_estimate_json_is_strict_json_even_past_float_range(tmp_path, capsys):
    config = tmp_path / "c.yaml"
    config.write_text("seed: 0\nenv: {n_agents: 4, max_rounds: 2}\npolicy: {kind: llm}\n")
    assert main(["estimate", str(config), "--throughput", "1e-308,1e-308", "--json"]) == 0

    def refuse(constant):
        raise AssertionError(f"not JSON: {constant}")
    result = json.loads(capsys.readouterr().out, parse_constant=refuse)
    # tokens / 1e-308 tokens per second overflows to inf seconds: written as null
    assert result["wall_seconds"] is None
    assert result["total"]["requests"] > 0


# ---------------------------------------------------------------------------------- probe findings
@pytest.mark.parametrize("name", ["round_²³.npz", f"round_{2**70}.npz", "round_99999999.npz", "round_-3.npz"])
def test_a_file_named_for_no_round_is_not_a_rounds_file(logged_runs, tmp_path, capsys, name):
    run = _copy(logged_runs, tmp_path)
    good = layout.tie_files(run)
    shutil.copy(good[3], run / layout.TIES / name)
    shutil.copy(layout.decision_path(run, 3), run / layout.DECISIONS / name)
    # only the rounds 1..MAX_ROUNDS = 100,000 written as ASCII digits count
    assert layout.tie_files(run) == good and sorted(layout.decision_files(run)) == [1, 2, 3]
    assert [p.name for p in layout.stray_round_files(run)] == [name, name]     # ties/ and decisions/, said
    for command in (["validate", str(run)], ["report", str(run)], ["view", str(run)]):
        assert main(command) == 0, command
        captured = capsys.readouterr()
        assert "Traceback" not in captured.err
        if command[0] == "validate":
            assert f"ties/{name} names no round (left out)" in captured.out
    assert main(["distill", str(logged_runs / "r0"), str(run), "--out", str(tmp_path / "m.pt")]) == 2
    assert f"decisions/{name}: a decision file whose name is no round's" in capsys.readouterr().err


def test_the_viewer_names_comments_whose_target_it_cannot_read(logged_runs, tmp_path):
    from socialgym.viewer.data import load_run

    run = _copy(logged_runs, tmp_path)
    events = _events(run)
    comments = [e for e in events if e["kind"] == "COM"]
    assert len(comments) >= 2
    comments[0]["target_id"], comments[1]["target_id"] = 2**70, 1e300
    _write_events(run, events)
    data = load_run(run)
    assert any("2 comments without a readable target_id" in n for n in data["notices"]), data["notices"]


def test_a_distilled_group_with_an_unknown_parameter_is_a_config_error(tmp_path):
    from socialgym.experiments import ConfigError, load_config

    model = tmp_path / "m.pt"
    model.write_bytes(b"placeholder")
    base = {"env": {"n_agents": 4, "max_rounds": 2},
            "policy": {"groups": [{"name": "d", "kind": "distilled", "agents": 2, "params": {"path": str(model)}},
                                  {"name": "g", "kind": "greedy"}]}}
    for params, message in (({"temperature": 1}, "unknown parameter 'temperature'; allowed: path, deterministic, seed"),
                            ({"deterministic": "yes"}, "deterministic must be true or false"),
                            ({"seed": -1}, r"seed must be an integer in 0..4294967295")):
        base["policy"]["groups"][0]["params"] = {"path": str(model), **params}
        with pytest.raises(ConfigError, match=message):
            load_config(base)


def test_a_model_of_another_layout_is_named_with_its_group(logged_runs, tmp_path, capsys):
    need_module("torch")
    model = tmp_path / "m.pt"
    assert main(["distill", str(logged_runs / "r0"), str(logged_runs / "r1"), "--out", str(model),
                 "--epochs", "1"]) == 0
    config = tmp_path / "c.yaml"
    config.write_text(json.dumps({**SCRIPTED, "env": {**SCRIPTED["env"], "feed_size": 4},
                                  "logging": {"report": False, "progress": False},
                                  "policy": {"groups": [{"name": "clones", "kind": "distilled", "agents": 4,
                                                         "params": {"path": str(model)}},
                                                        {"name": "greedy", "kind": "greedy"}]}}))
    capsys.readouterr()
    assert main(["run", str(config), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert f"policy group 'clones' (distilled): {model}: this policy was trained on another layout" in err
    assert err.count("\n") == 1


@pytest.mark.parametrize("field, value", [("discussions", 10**30), ("max_turns", 10**30), ("users", 0),
                                          ("seed", -1), ("parallel", 5000)])
def test_moderation_sizes_are_bounded(field, value):
    from socialgym.experiments.studies.moderation import ModerationExperiment

    with pytest.raises(ValueError, match=f"{field} must be an integer >= "):
        ModerationExperiment(**{field: value})


@pytest.mark.parametrize("argv, message", [(["--rounds", "0"], "max_rounds must be an integer >= 1"),
                                           (["--agents", "1"], "n_agents must be an integer >= 2"),
                                           (["--seed", "-1"], "seed must be None or an integer >= 0")])
def test_the_scripted_demo_checks_its_arguments(capsys, argv, message):
    from socialgym.demo import main as demo

    with pytest.raises(SystemExit) as stop:
        demo(argv)
    assert stop.value.code == 2 and message in capsys.readouterr().err.splitlines()[-1]


def test_a_study_refuses_a_plain_http_key_before_its_directory_exists(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-study-secret")
    out = tmp_path / "study"
    assert main(["study", "soc-strategy", "--out", str(out), "--base-url", "http://10.9.9.9/v1", "--model", "m",
                 "--scale", "llm", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "refusing to send the API key over plain http to http://10.9.9.9/v1" in err and err.count("\n") == 1
    assert "sk-study-secret" not in err and not out.exists()


def test_show_keeps_an_array_on_one_line():
    from socialgym.platform.validation import show

    assert show(np.array([["a", "b"], ["a", "b"]])) == "array([['a', 'b'], ['a', 'b']], dtype='<U1')"
    # numpy pads to the widest value ("  0," for 3 digits); only the line breaks and their indent go
    assert show(np.arange(200).reshape(20, 10), 30) == "array([[  0,   1,   2,   3,  …"
    assert "\n" not in show(np.arange(2000).reshape(200, 10))


def test_an_objective_weight_past_float_range_is_named():
    from socialgym.rewards.platform import platform_weights

    with pytest.raises(ValueError, match="platform objective weight 'engagement' must be a finite number"):
        platform_weights({"engagement": 10**400})


@pytest.mark.parametrize("stances", [{"a", "b"}, frozenset({"a"}), np.array([["a", "b"], ["a", "b"]])])
def test_every_way_in_refuses_stances_without_an_agent_order(stances):
    import socialgym
    from socialgym.recommenders import make_recommender

    with pytest.raises(ValueError, match=r"one label per agent, in agent order"):
        make_recommender("bridging", stances=stances)
    with pytest.raises(ValueError, match=r"one label per agent, in agent order"):
        socialgym.parallel_env(n_agents=4, rerank=[{"kind": "stance_penalty", "stances": stances}])


def test_a_stance_penalty_with_a_label_short_is_refused_at_construction():
    import socialgym

    with pytest.raises(ValueError, match="stances has 3 labels for n_agents = 4 agents"):
        socialgym.parallel_env(n_agents=4, rerank=[{"kind": "stance_penalty", "stances": ["a", "b", "a"]}])


@pytest.mark.parametrize("wrapped", ["none", "dict", "aec", "flat", "platform", "discussion", "vector"])
def test_flat_observation_names_what_it_cannot_wrap(wrapped):
    import socialgym
    from socialgym import FlatObservation
    from socialgym.envs import discussion_v0, feed_v0
    from socialgym.envs.platform.env import PlatformEnv
    from socialgym.vector import make_vec

    make = {"none": lambda: None, "dict": lambda: {},
            "aec": lambda: feed_v0.env(n_agents=4, obs_format="numeric"),
            "flat": lambda: FlatObservation(socialgym.parallel_env(n_agents=4, obs_format="numeric")),
            "platform": lambda: PlatformEnv(n_agents=4), "discussion": lambda: discussion_v0.env(),
            "vector": lambda: make_vec("mixed", 2)}
    with pytest.raises(TypeError, match="FlatObservation wraps a parallel feed environment"):
        FlatObservation(make[wrapped]())


def test_flat_observation_split_checks_the_length():
    import socialgym
    from socialgym import FlatObservation

    env = FlatObservation(socialgym.parallel_env(n_agents=4, obs_format="numeric"))
    length = env.feature_size + env.mask_size
    features, mask = env.split(np.zeros((3, length)))
    assert features.shape == (3, env.feature_size) and mask.shape == (3, env.mask_size)
    for shape in ((3,), (2, length - 1), ()):
        with pytest.raises(ValueError, match=f"a flat observation has {length} entries"):
            env.split(np.zeros(shape))


def test_a_transposed_action_matrix_is_refused():
    from socialgym.vector import make_vec

    vec = make_vec("mixed", 2)
    vec.reset(seed=0)
    n, length = vec.n_agents, vec.single_action_space.shape[0]
    with pytest.raises(ValueError, match=rf"step_arrays: .* \(2, {n}, L\), got \({n}, 2, {length}\)"):
        vec.step_arrays(np.zeros((n, 2, length), np.int64))
