"""``socialgym.rundir.Run``, the one reader of a run directory (issue 45): what it returns for a
run written by hand, how it tells a missing file from a damaged one, and that it reads a real run."""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.sparse as sp

from socialgym.experiments import load_config, run_experiment
from socialgym.rundir import Run, RunDirError, RunFileError, layout

ROUNDS = "round,agent,group,SOC,total,POST\n1,agent_0,left,0.5,1.0,1\n1,agent_1,right,0.25,0.5,0\n2,agent_0,left,1.5,2.0,2\n"
SURVEYS = ("round,agent,group,policy,survey,item,scale,answer,status,source\n"
           "1,agent_0,left,greedy,trust,t1,likert,4,ok,llm\n1,agent_1,right,greedy,trust,t1,likert,2,ok,llm\n"
           "1,agent_1,right,greedy,trust,t1,likert,5,failed,llm\n2,agent_0,left,greedy,trust,why,text,hello,ok,llm\n")


@pytest.fixture
def hand_run(tmp_path):
    run = tmp_path / "run"
    (run / layout.TIES).mkdir(parents=True)
    (run / layout.ROUNDS).write_text(ROUNDS)
    (run / layout.SUMMARY).write_text(json.dumps({"status": "complete", "agents": ["agent_0", "agent_1"]}))
    (run / layout.RUN_INFO).write_text(json.dumps({"replicate": 2, "seed": 7}))
    (run / layout.CONFIG).write_text("seed: 7\nenv:\n  n_agents: 2\n")
    (run / layout.EVENTS).write_text('{"kind": "POST", "round": 1, "id": 0}\nnot json\n\n[1, 2]\n')
    (run / layout.SURVEYS).write_text(SURVEYS)
    sp.save_npz(layout.tie_path(run, 1), sp.csr_matrix(np.array([[0, 0.5], [0, 0]])))
    sp.save_npz(layout.tie_path(run, 2), sp.csr_matrix(np.array([[0, 0.75], [0.25, 0]])))
    return run


def test_a_hand_written_run_reads_back(hand_run):
    run = Run(hand_run)
    assert run.summary == {"status": "complete", "agents": ["agent_0", "agent_1"]}
    assert run.info == {"replicate": 2, "seed": 7}
    assert run.config == {"seed": 7, "env": {"n_agents": 2}}
    assert run.config_text.startswith("seed: 7\n")
    assert [(r["round"], r["agent"], r["total"]) for r in run.rounds] == [
        ("1", "agent_0", "1.0"), ("1", "agent_1", "0.5"), ("2", "agent_0", "2.0")]
    assert run.table(layout.ROUNDS)[0] == ["round", "agent", "group", "SOC", "total", "POST"]
    assert run.events == [{"kind": "POST", "round": 1, "id": 0}, None, None]     # not JSON, not an object
    assert run.tie_rounds == [1, 2]
    assert run.ties(1).toarray().tolist() == [[0, 0.5], [0, 0]]
    number, W = run.last_ties()
    assert number == 2 and W.toarray().tolist() == [[0, 0.75], [0.25, 0]]
    # trust.t1: round 1, the two answers with status ok (4, 2); the free-text item is left out
    assert run.survey_means() == {"trust.t1": ("likert", {1: 3.0}, 2)}
    assert run.missing == [] and run.damaged == {}
    run.require(layout.ROUNDS, layout.SUMMARY, layout.RUN_INFO, layout.CONFIG, layout.EVENTS, layout.TIES)


def test_a_missing_file_is_empty_and_listed(hand_run):
    for name in (layout.SUMMARY, layout.NETWORK, layout.PERSONAS, layout.CONFIG):
        (hand_run / name).unlink(missing_ok=True)
    for path in layout.tie_files(hand_run).values():
        path.unlink()
    run = Run(hand_run)
    assert run.summary is None and run.network == [] and run.personas is None
    assert run.config == {} and run.config_text is None
    assert run.last_ties() is None and run.ties(1) is None and run.decisions() is None
    assert run.missing == [layout.SUMMARY, layout.NETWORK, layout.PERSONAS, layout.CONFIG, layout.TIES,
                           f"{layout.TIES}/round_0001.npz", layout.DECISIONS]
    assert run.damaged == {}
    run.check(layout.SUMMARY, layout.TIES)                     # missing is not damaged
    with pytest.raises(FileNotFoundError, match=f"{layout.SUMMARY} not found in run directory"):
        run.require(layout.ROUNDS, layout.SUMMARY)


def test_a_damaged_file_is_empty_and_recorded_naming_it(hand_run):
    (hand_run / layout.SUMMARY).write_text('{"status": "compl')                   # cut mid-write
    (hand_run / layout.RUN_INFO).write_text("[1, 2]")                            # JSON, no object
    (hand_run / layout.CONFIG).write_text("seed: [1\n")                          # not YAML
    (hand_run / layout.NETWORK).write_text('round,density\n1,"0.5\n' + "x" * 200_000 + '"\n')   # past csv's field limit
    layout.tie_path(hand_run, 2).write_bytes(b"PK\x03\x04 not a zip")
    run = Run(hand_run)
    assert run.summary is None and run.info is None and run.config == {} and run.network == []
    assert run.last_ties() is None
    assert run.rounds and run.missing == []
    assert set(run.damaged) == {layout.SUMMARY, layout.RUN_INFO, layout.CONFIG, layout.NETWORK,
                                f"{layout.TIES}/round_0002.npz"}
    assert run.damaged[layout.SUMMARY] == f"{hand_run / layout.SUMMARY}: not JSON"
    assert run.damaged[layout.RUN_INFO] == f"{hand_run / layout.RUN_INFO}: not a JSON object"
    assert str(layout.tie_path(hand_run, 2)) in run.damaged[f"{layout.TIES}/round_0002.npz"]
    assert run.notice(layout.TIES).startswith("could not read the tie matrix ties/round_0002.npz: ")
    assert run.notice(layout.SUMMARY) == "summary.json: not JSON"
    assert run.ties(1) is not None                              # the other round's file is sound
    with pytest.raises(RunFileError, match="summary.json: not JSON") as err:
        run.require(layout.ROUNDS, layout.SUMMARY)
    assert isinstance(err.value, ValueError) and isinstance(err.value, RunDirError)
    with pytest.raises(RunFileError, match="round_0002.npz"):
        run.check(layout.TIES)
    run.check(layout.ROUNDS, layout.EVENTS)


def test_what_a_reader_finds_wrong_is_recorded_the_same_way(hand_run):
    run = Run(hand_run)
    error = run.damage(layout.ROUNDS, "row 3 has no round number")
    assert isinstance(error, RunFileError) and str(error) == f"{hand_run / layout.ROUNDS}: row 3 has no round number"
    assert run.notice(layout.ROUNDS) == "rounds.csv: row 3 has no round number"
    with pytest.raises(RunFileError, match="row 3"):
        run.check(layout.ROUNDS)


def test_ids_past_int64_and_matrices_of_another_size_are_damage(hand_run):
    np.savez(layout.tie_path(hand_run, 3), format=np.array(b"csr"), shape=np.array([2, 2]),
             data=np.array([1.0]), indices=np.array([2**40], np.int64), indptr=np.array([0, 1, 1]))
    run = Run(hand_run)
    assert run.last_ties() is None and "an index outside the matrix" in run.notice(layout.TIES)
    assert Run(hand_run).ties(1, n=3) is None
    wrong = Run(hand_run)
    wrong.ties(1, n=3)
    assert "square matrix of the run's 3" in wrong.damaged[f"{layout.TIES}/round_0001.npz"]


def test_a_real_run_reads_back(tmp_path):
    out = tmp_path / "run"
    cfg = {"seed": 1, "env": {"n_agents": 6, "max_rounds": 3, "recommender": "random"},
           "policy": {"kind": "greedy"}, "logging": {"report": False, "progress": False}}
    summary = run_experiment(load_config(cfg), out)
    run = Run(out)
    assert run.summary["status"] == "complete" and run.summary == json.loads((out / layout.SUMMARY).read_text())
    assert run.summary["rounds_completed"] == 3 == summary["rounds_completed"]
    assert run.info["seed"] == 1
    assert run.config["env"]["n_agents"] == 6
    assert len(run.rounds) == 6 * 3 and {r["round"] for r in run.rounds} == {"1", "2", "3"}
    assert tuple(run.table(layout.ROUNDS)[0]) == layout.ROUND_COLUMNS
    assert [r["round"] for r in run.network] == ["1", "2", "3"]
    assert run.events and all(isinstance(e, dict) for e in run.events)
    assert run.tie_rounds[-1] == 3
    number, W = run.last_ties()
    assert number == 3 and W.shape == (6, 6)
    run.require(layout.ROUNDS, layout.SUMMARY, layout.RUN_INFO, layout.CONFIG, layout.NETWORK, layout.EVENTS,
                layout.TIES)
    assert run.damaged == {}


def test_bytes_that_are_not_utf8_damage_a_csv_file_unless_its_last_line_was_cut(hand_run):
    (hand_run / layout.ROUNDS).write_bytes(ROUNDS.encode() + "3,agent_é".encode()[:-1])     # killed mid-character
    run = Run(hand_run)
    assert [r["agent"] for r in run.rounds] == ["agent_0", "agent_1", "agent_0", "agent_\ufffd"]
    assert run.damaged == {}
    (hand_run / layout.ROUNDS).write_bytes(b"\xff\xfe\x00garbage\n" + ROUNDS.encode())
    run = Run(hand_run)
    assert run.rounds == [] and "UnicodeDecodeError" in run.damaged[layout.ROUNDS]
    with pytest.raises(RunFileError, match="rounds.csv: not a CSV file socialgym wrote"):
        run.require(layout.ROUNDS)


def test_each_file_is_read_once_and_says_what_it_holds(hand_run):
    run = Run(hand_run)
    assert run.summary is run.summary and run.info is run.info            # read on first use, then kept
    assert [name.split(":")[0] for name in (Run.summary.__doc__, Run.info.__doc__, Run.rounds.__doc__,
                                           Run.events.__doc__)] == [layout.SUMMARY, layout.RUN_INFO,
                                                                    layout.ROUNDS, layout.EVENTS]


def test_a_fork_names_the_damaged_run_json_it_cannot_read(hand_run, tmp_path):
    from socialgym.experiments import RunError
    from socialgym.experiments.run.fork import fork_run

    (hand_run / layout.RUN_INFO).write_text('{"run_id": "ab')                   # cut mid-write
    with pytest.raises(RunError, match=r"is not a run directory \(run\.json: not JSON\)"):
        fork_run(hand_run, 1, tmp_path / "fork")
