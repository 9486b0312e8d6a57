"""``socialgym calibrate``: the targets file, the objective by hand, a small search end to end,
its resume, and the population set it writes."""

from __future__ import annotations

import json

import pytest
import yaml

from socialgym.baselines.social_users import SocialUsers, load_population
from socialgym.cli import main
from socialgym.experiments import ConfigError, load_config, run_experiment
from socialgym.experiments.analysis.realism import scorecard
from socialgym.experiments.analysis.realism_facts import FACTS
from socialgym.experiments.run.calibrate import (FACT_COST_CAP, calibrate, objective_value, read_targets,
                                                 tuned_groups, with_params)
from socialgym.rundir import layout

from test_realism import small_run

SMALL = {"seed": 0, "env": {"n_agents": 24, "max_rounds": 5}, "policy": {"kind": "social_users"},
         "logging": {"report": False}, "run": {"snapshots": False}}


def _write(path, data):
    path.write_text(yaml.safe_dump(data))
    return path


def test_targets_file_checks(tmp_path):
    tunable = SocialUsers.TUNABLE
    good = read_targets(_write(tmp_path / "t.yaml", {"facts": {"reciprocity": "reference", "clustering": [0.1, 0.2]},
                                                     "params": ["activity", "p_dm"]}), tunable)
    band = next(f.band for f in FACTS if f.key == "reciprocity")
    assert good.bands == {"reciprocity": band, "clustering": (0.1, 0.2)}
    assert good.params == ("activity", "p_dm")
    assert read_targets(_write(tmp_path / "all.yaml", {"facts": {"clustering": "reference"}}), tunable).params \
        == tuple(tunable)
    for bad, message in (({"facts": {"nope": "reference"}}, "unknown fact 'nope'"),
                         ({"facts": {"clustering": [0.3, 0.1]}}, "low <= high"),
                         ({"facts": {"clustering": "ref"}}, "targets.facts.clustering"),
                         ({"facts": {"clustering": "reference"}, "params": ["seed"]}, "'seed' is not tunable"),
                         ({"facts": {}}, "non-empty 'facts'"),
                         ({"facts": {"clustering": "reference"}, "extra": 1}, "unknown key 'extra'")):
        with pytest.raises(ConfigError, match=message):
            read_targets(_write(tmp_path / "bad.yaml", bad), tunable)
    with pytest.raises(ConfigError, match="does not exist"):
        read_targets(tmp_path / "missing.yaml", tunable)


def test_damaged_targets_are_one_config_error(tmp_path):
    tunable = SocialUsers.TUNABLE
    latin1 = tmp_path / "latin1.yaml"
    latin1.write_bytes("facts: {clustering: reference}  # caf\xe9\n".encode("latin-1"))
    with pytest.raises(ConfigError, match=r"not UTF-8 text \(byte 0xe9"):
        read_targets(latin1, tunable)
    huge = tmp_path / "huge.yaml"
    huge.write_text("facts: {clustering: [0, " + "9" * 400 + "]}\n")
    with pytest.raises(ConfigError, match="targets.facts.clustering .* finite numbers within"):
        read_targets(huge, tunable)
    for band in ("[0, .inf]", "[-.inf, 0.5]", "[.nan, 0.5]", "[0, 1e13]"):
        (tmp_path / "b.yaml").write_text(f"facts: {{clustering: {band}}}\n")
        with pytest.raises(ConfigError, match="targets.facts.clustering"):
            read_targets(tmp_path / "b.yaml", tunable)
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
        f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n" for i in range(8)))
    with pytest.raises(ConfigError, match="alias bomb"):
        read_targets(bomb, tunable)


@pytest.mark.parametrize("damage", [b"{\"seeds\": 2", b"[1, 2]", b"\xff\xfe not json", b""])
def test_a_damaged_search_key_is_one_line(tmp_path, capsys, damage):
    config = _write(tmp_path / "pop.yaml", SMALL)
    targets = _write(tmp_path / "t.yaml", {"facts": {"reciprocity": "reference"}})
    out = tmp_path / "c"
    out.mkdir()
    (out / layout.SEARCH_KEY).write_bytes(damage)
    assert main(["calibrate", str(config), "--targets", str(targets), "--out", str(out), "--trials", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{layout.SEARCH_KEY} is damaged" in err
    assert (out / layout.SEARCH_KEY).read_bytes() == damage


def test_objective_by_hand(tmp_path):
    # the hand-made run: reciprocity 2/3, clustering 7/9, thread depth 3/4 (tests/test_realism.py)
    card = scorecard([small_run(tmp_path)])
    # reciprocity in [0.5, 1]: inside -> 0; clustering 7/9 vs [0.1, 0.35]: (7/9 - 0.35) / 0.25 = 1.7111;
    # thread depth 0.75 vs [0.9, 1]: 0.15 / 0.1 = 1.5; posts_tail unmeasurable -> the cap, 2
    bands = {"reciprocity": (0.5, 1.0), "clustering": (0.1, 0.35), "thread_depth": (0.9, 1.0),
             "posts_tail": (1.5, 3.2)}
    expected = 0.0 + (7 / 9 - 0.35) / 0.25 + 0.15 / 0.1 + FACT_COST_CAP
    assert objective_value(card, bands) == pytest.approx(expected)
    # far outside: capped at 2 (clustering 7/9 vs [0, 0.01]: 77 widths)
    assert objective_value(card, {"clustering": (0.0, 0.01)}) == pytest.approx(FACT_COST_CAP)


def test_config_must_have_social_users(tmp_path):
    with pytest.raises(ConfigError, match="no social_users agents"):
        tuned_groups(load_config({**SMALL, "policy": {"kind": "greedy"}}))
    grouped = load_config({**SMALL, "policy": {"groups": [{"name": "g", "kind": "greedy", "agents": 4},
                                                           {"name": "s", "kind": "social_users"}]}})
    assert tuned_groups(grouped) == [1]
    cfg = with_params(grouped, {"activity": 0.1}, seed=7)
    assert cfg.seed == 7 and dict(cfg.policy.groups[1].params)["activity"] == 0.1
    assert not dict(cfg.policy.groups[0].params)                    # the greedy group untouched
    assert cfg.logging.report is False and cfg.run.snapshots is False


def test_small_calibration_end_to_end_and_resume(tmp_path, capsys):
    config = _write(tmp_path / "pop.yaml", SMALL)
    targets = _write(tmp_path / "targets.yaml", {"facts": {"active_share": [0.05, 0.2], "reciprocity": "reference"},
                                                 "params": ["activity", "p_dm"]})
    out = tmp_path / "cal"
    result = calibrate(config, targets, out, trials=3, minutes=2, seeds=1, eval_seeds=2, workers=1, name="mine")
    assert result["trials_complete"] >= 3
    assert result["eval_seeds"] == [1_000_000, 1_000_001]
    assert {r["fact"] for r in result["facts"]} == {"active_share", "reciprocity"}
    for sub in ("before", "after"):
        assert (out / sub / layout.REALISM_JSON).is_file()
    # the after column is the scorecard of the best parameters on the held-out seeds
    after = json.loads((out / "after" / layout.REALISM_JSON).read_text())
    share = next(f for f in after["facts"] if f["key"] == "active_share")["mean"]
    assert next(r for r in result["facts"] if r["fact"] == "active_share")["after"] == pytest.approx(share)
    # the population set: the best trial's parameters, loadable by name of file in a config
    params = load_population(out / "mine.json")
    assert set(result["params"]) >= {"activity", "p_dm"} and params["activity"] == result["params"]["activity"]
    run = run_experiment(load_config({**SMALL, "policy": {"kind": "social_users",
                                                          "params": {"population": str(out / "mine.json")}}}),
                         tmp_path / "run", progress=False)
    assert run["status"] == "complete"
    # resumed: the journal keeps the first trials and adds to them
    again = calibrate(config, targets, out, trials=5, minutes=2, seeds=1, eval_seeds=2, workers=1, name="mine")
    assert again["trials_complete"] >= 5
    # a resume with other targets is refused
    other = _write(tmp_path / "other.yaml", {"facts": {"clustering": "reference"}})
    with pytest.raises(ConfigError, match="another config, targets, parameters or --seeds"):
        calibrate(config, other, out, trials=5, minutes=1, seeds=1, workers=1)
    with pytest.raises(ConfigError, match="another config, targets, parameters or --seeds"):
        calibrate(config, targets, out, trials=5, minutes=1, seeds=2, workers=1)
    key = (out / layout.SEARCH_KEY).read_text()
    assert "social_users" not in key and "config_sha256" in key             # digests, not the config
    capsys.readouterr()


@pytest.mark.slow
def test_two_workers_share_the_journal(tmp_path):
    # spawned worker processes write to one journal; a seed in the config stays out of the population
    config = _write(tmp_path / "pop.yaml", {**SMALL, "policy": {"kind": "social_users", "params": {"seed": 5}}})
    targets = _write(tmp_path / "t.yaml", {"facts": {"reciprocity": "reference"}, "params": ["activity"]})
    result = calibrate(config, targets, tmp_path / "cal", trials=4, minutes=3, seeds=1, eval_seeds=1, workers=2)
    assert result["trials_complete"] >= 4
    assert "seed" not in load_population(result["population"])


def test_a_search_interrupted_mid_trial_resumes(tmp_path):
    import optuna
    from optuna.storages.journal import JournalFileBackend
    from optuna.trial import TrialState

    config = _write(tmp_path / "pop.yaml", SMALL)
    targets = _write(tmp_path / "t.yaml", {"facts": {"reciprocity": "reference"}, "params": ["activity"]})
    out = tmp_path / "cal"
    calibrate(config, targets, out, trials=1, minutes=1, seeds=1, eval_seeds=1, workers=1)
    storage = optuna.storages.JournalStorage(JournalFileBackend(str(out / layout.SEARCH_LOG)))
    study = optuna.load_study(study_name="socialgym-calibration", storage=storage)
    study.ask()                                       # a trial left running, as by a killed worker
    calibrate(config, targets, out, trials=2, minutes=1, seeds=1, eval_seeds=1, workers=1)
    states = [t.state for t in optuna.load_study(study_name="socialgym-calibration", storage=storage).trials]
    assert TrialState.RUNNING not in states and TrialState.FAIL in states
    assert states.count(TrialState.COMPLETE) >= 2


def test_cli_errors_are_one_line(tmp_path, capsys):
    config = _write(tmp_path / "pop.yaml", {**SMALL, "policy": {"kind": "greedy"}})
    targets = _write(tmp_path / "t.yaml", {"facts": {"reciprocity": "reference"}})
    assert main(["calibrate", str(config), "--targets", str(targets), "--out", str(tmp_path / "c")]) == 2
    assert "no social_users agents" in capsys.readouterr().err
    config = _write(tmp_path / "pop.yaml", SMALL)
    assert main(["calibrate", str(config), "--targets", str(targets), "--out", str(tmp_path / "c"),
                 "--trials", "0"]) == 2
    assert "--trials must be a positive integer" in capsys.readouterr().err
    assert main(["calibrate", str(config), "--targets", str(targets), "--out", str(tmp_path / "c"),
                 "--workers", "0"]) == 2
    assert "--workers must be a positive integer" in capsys.readouterr().err


def test_a_band_outside_what_the_fact_can_take_is_refused(tmp_path):
    tunable = SocialUsers.TUNABLE
    # clustering is a share (0 - 1), homophily a correlation (-1 - 1), a tail exponent is >= 1
    for key, band in (("clustering", [-0.5, -0.1]), ("active_share", [1.5, 2.0]), ("homophily", [-3, -2]),
                      ("posts_tail", [0.2, 0.8])):
        with pytest.raises(ConfigError, match=f"targets.facts.{key}: .* lies outside the values {key} can take"):
            read_targets(_write(tmp_path / "t.yaml", {"facts": {key: band}}), tunable)
    # a band that reaches into the domain is a target
    assert read_targets(_write(tmp_path / "t.yaml", {"facts": {"homophily": [-2, -0.5]}}), tunable).bands == {
        "homophily": (-2.0, -0.5)}


@pytest.mark.parametrize("argv, message", [
    (["--seeds", str(10**9)], "--seeds 1000000000 is more than 1,000"),
    (["--eval-seeds", "5000"], "--eval-seeds 5000 is more than 1,000"),
    (["--name", "search"], "--name search would write the population over search.json"),
    (["--name", "calibration"], "--name calibration would write the population over calibration.json"),
])
def test_calibrate_refuses_sizes_and_names_before_any_work(tmp_path, capsys, argv, message):
    config = _write(tmp_path / "pop.yaml", SMALL)
    targets = _write(tmp_path / "t.yaml", {"facts": {"reciprocity": "reference"}})
    assert main(["calibrate", str(config), "--targets", str(targets), "--out", str(tmp_path / "c"), *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not (tmp_path / "c").exists()


@pytest.mark.parametrize("damage", [b'{"op_code": 0, "worker_id"', b"\xff\xfe\x00 garbage", b'{"a": 1}\n'])
def test_a_damaged_journal_is_one_line(tmp_path, capsys, damage):
    config = _write(tmp_path / "pop.yaml", SMALL)
    targets = _write(tmp_path / "t.yaml", {"facts": {"reciprocity": "reference"}})
    out = tmp_path / "c"
    argv = ["calibrate", str(config), "--targets", str(targets), "--out", str(out), "--trials", "1", "--workers", "1",
            "--seeds", "1", "--eval-seeds", "1"]
    assert main(argv) == 0
    capsys.readouterr()
    (out / layout.SEARCH_LOG).write_bytes(damage)
    assert main([*argv[:7], "2", *argv[8:]]) == 2
    err = capsys.readouterr().err
    assert f"{layout.SEARCH_LOG} is damaged and cannot be resumed" in err and err.count("\n") == 1
    assert (out / layout.SEARCH_LOG).read_bytes() == damage
