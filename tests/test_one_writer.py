"""Issue 28, items 1, 2 and 5: one writer per output directory, writes that stay inside it, and
one line with a documented exit status for every failure a user can cause or meet."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from capabilities import not_applicable
import yaml

from socialgym.experiments import RunError, load_config, run_experiment
from socialgym.rundir import writer_lock

ROOT = Path(__file__).resolve().parents[1]
SCRIPTED = {"seed": 3, "env": {"n_agents": 8, "max_rounds": 6, "recommender": "random"},
            "policy": {"kind": "greedy"}, "logging": {"report": False, "progress": False}}


def cli(*args, check=True, timeout=300, **popen):
    done = subprocess.run([sys.executable, "-m", "socialgym.cli", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout, **popen)
    if check:
        assert done.returncode == 0, done.stderr[-3000:]
    return done


def write_config(path: Path, data: dict) -> Path:
    path.write_text(yaml.safe_dump(data))
    return path


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("socialgym: error:")]


# ---------------------------------------------------------------------------------- the lock
def test_a_second_writer_is_refused_and_names_the_holder(tmp_path):
    with writer_lock(tmp_path / "run", "run"):
        with writer_lock(tmp_path / "run", "report"):          # the same process may take it again
            pass
        code = ("import sys; from socialgym.rundir import writer_lock\n"
                f"with writer_lock({str(tmp_path / 'run')!r}, 'resume'): pass")
        other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        assert other.returncode != 0
        assert "DirectoryBusy" in other.stderr and f"process {os.getpid()}" in other.stderr
        assert "`socialgym run`" in other.stderr
    with writer_lock(tmp_path / "run", "resume"):               # released when the block ends
        pass


@pytest.mark.slow
def test_two_concurrent_runs_into_one_directory_exactly_one_proceeds(tmp_path):
    config = write_config(tmp_path / "c.yaml", {**SCRIPTED, "env": {**SCRIPTED["env"], "max_rounds": 40}})
    out = tmp_path / "out"
    procs = [subprocess.Popen([sys.executable, "-m", "socialgym.cli", "run", str(config), "--out", str(out), "--quiet"],
                              cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    results = [p.communicate(timeout=300) + (p.returncode,) for p in procs]
    codes = sorted(r[2] for r in results)
    assert codes in ([0, 2], [0, 3]), results            # busy (3), or: it already holds a run (2)
    loser = next(r for r in results if r[2] != 0)
    assert len(error_lines(loser[1])) == 1 and "Traceback" not in loser[1]
    reference = tmp_path / "ref"
    cli("run", str(config), "--out", str(reference), "--quiet")
    for name in ("rounds.csv", "network.csv", "events.jsonl"):      # one run's outputs, whole
        assert (out / name).read_bytes() == (reference / name).read_bytes(), name


@pytest.mark.slow
def test_a_resume_while_the_run_writes_is_refused(tmp_path):
    config = write_config(tmp_path / "c.yaml", {**SCRIPTED, "env": {**SCRIPTED["env"], "n_agents": 60,
                                                                       "max_rounds": 300}})
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "socialgym.cli", "run", str(config), "--out", str(out), "--quiet"],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 120
        while not (out / "summary.json").exists() and time.time() < deadline:
            time.sleep(0.05)
        busy = cli("resume", str(out), "--quiet", check=False)
        still_running = proc.poll() is None
    finally:
        proc.kill()
        proc.wait(30)
    if not still_running:
        not_applicable("the run ended before the resume was tried")
    assert busy.returncode == 3, busy.stderr
    assert error_lines(busy.stderr) and "is being written by `socialgym run`" in busy.stderr


@pytest.mark.slow
def test_a_directory_of_another_kind_is_refused(tmp_path):
    run_dir = tmp_path / "run"
    run_experiment(load_config(SCRIPTED), run_dir)
    sweep = write_config(tmp_path / "s.yaml", {**SCRIPTED, "run": {"replicates": 2, "workers": 1}})
    refused = cli("run", str(sweep), "--out", str(run_dir), "--quiet", check=False)
    assert refused.returncode == 2 and "holds a run: a sweep needs a new directory" in refused.stderr
    (tmp_path / "sw").mkdir()
    (tmp_path / "sw" / "sweep.json").write_text("{}")
    with pytest.raises(RunError, match="holds a sweep, not a run"):
        run_experiment(load_config(SCRIPTED), tmp_path / "sw")
    study = cli("study", "soc-strategy", "--out", str(run_dir), "--quiet", check=False)
    assert study.returncode == 2 and "holds a run, not a study" in study.stderr


@pytest.mark.slow
def test_a_study_is_resumed_only_as_itself(tmp_path):
    out = tmp_path / "study"
    cli("study", "soc-strategy", "--out", str(out), "--quiet")
    other = cli("study", "misinformation", "--out", str(out), "--quiet", check=False)
    assert other.returncode == 2 and "study 'soc-strategy' (asked: 'misinformation')" in other.stderr
    more = cli("study", "soc-strategy", "--out", str(out), "--replicates", "7", "--quiet", check=False)
    assert more.returncode == 2 and "replicates" in more.stderr and "(asked: 7)" in more.stderr
    again = cli("study", "soc-strategy", "--out", str(out), "--quiet")            # as it is: resumed
    assert again.returncode == 0


# ---------------------------------------------------------------------------------- writes stay inside
@pytest.mark.slow
def test_links_planted_in_a_run_directory_are_never_written_through(tmp_path):
    run_dir = tmp_path / "run"
    run_experiment(load_config({**SCRIPTED, "logging": {"progress": False}}), run_dir)
    outside = tmp_path / "outside"
    outside.mkdir()
    victims = {name: outside / name for name in ("report.html", "rewards.png", "compare.md", "config.yaml")}
    for victim in victims.values():
        victim.write_text("precious")
    (run_dir / "report.html").unlink()
    (run_dir / "report.html").symlink_to(victims["report.html"])
    (run_dir / "plots" / "rewards.png").unlink()
    (run_dir / "plots" / "rewards.png").symlink_to(victims["rewards.png"])
    (run_dir / "compare.md").symlink_to(victims["compare.md"])
    for name in ("report.html.tmp", ".report.html.tmp"):
        (run_dir / name).symlink_to(victims["config.yaml"])
    cli("report", str(run_dir))
    cli("compare", str(run_dir), str(run_dir))
    assert all(v.read_text() == "precious" for v in victims.values())
    assert not (run_dir / "report.html").is_symlink() and "<html" in (run_dir / "report.html").read_text()


def test_a_linked_plots_folder_is_refused_with_one_line(tmp_path):
    run_dir = tmp_path / "run"
    run_experiment(load_config(SCRIPTED), run_dir)
    outside = tmp_path / "outside"
    outside.mkdir()
    (run_dir / "plots").symlink_to(outside, target_is_directory=True)
    done = cli("report", str(run_dir), check=False)
    assert done.returncode in (2, 4) and len(error_lines(done.stderr)) == 1 and "is a link" in done.stderr
    assert list(outside.iterdir()) == []


@pytest.mark.slow
def test_a_resume_never_truncates_a_linked_output(tmp_path):
    config = write_config(tmp_path / "c.yaml", SCRIPTED)
    run_dir = tmp_path / "run"
    killed = cli("run", str(config), "--out", str(run_dir), "--quiet", check=False,
                 env={**os.environ, "SOCIALGYM_KILL_AT": "3:outputs"})
    assert killed.returncode == -signal.SIGKILL
    victim = tmp_path / "victim.txt"
    victim.write_text("x" * 100_000)
    (run_dir / "events.jsonl").unlink()
    (run_dir / "events.jsonl").symlink_to(victim)
    done = cli("resume", str(run_dir), "--quiet", check=False)
    assert done.returncode != 0 and len(error_lines(done.stderr)) == 1
    assert victim.read_text() == "x" * 100_000


# ---------------------------------------------------------------------------------- one line
def test_an_out_that_is_a_file_is_one_line_with_status_4(tmp_path):
    config = write_config(tmp_path / "c.yaml", SCRIPTED)
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    done = cli("run", str(config), "--out", str(blocker / "run"), "--quiet", check=False)
    assert done.returncode == 4, done.stderr
    assert len(error_lines(done.stderr)) == 1 and "Traceback" not in done.stderr


@pytest.mark.slow
def test_ctrl_c_leaves_a_resumable_run_that_says_so(tmp_path):
    config = write_config(tmp_path / "c.yaml", {**SCRIPTED, "env": {**SCRIPTED["env"], "n_agents": 40,
                                                                       "max_rounds": 60}})
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "socialgym.cli", "run", str(config), "--out", str(out), "--quiet"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline:
        try:
            if json.loads((out / "summary.json").read_text())["rounds_completed"] >= 2:
                break
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    summary = json.loads((out / "summary.json").read_text())
    if summary["status"] == "complete":
        not_applicable("the run finished before the interrupt landed")
    assert proc.returncode == 130, stderr
    assert error_lines(stderr) and "interrupted" in error_lines(stderr)[0] and "Traceback" not in stderr
    assert summary["status"] == "interrupted" and "socialgym resume" in summary["error"]
    cli("resume", str(out), "--quiet")
    reference = tmp_path / "ref"
    cli("run", str(config), "--out", str(reference), "--quiet")
    for name in ("rounds.csv", "network.csv", "events.jsonl"):
        assert (out / name).read_bytes() == (reference / name).read_bytes(), name


# ---------------------------------------------------------------------------------- view --serve
def test_view_serve_answers_the_page_alone_and_only_for_loopback(tmp_path):
    import http.client
    import threading

    from socialgym.viewer.serve import page_server

    run_dir = tmp_path / "run"
    (run_dir).mkdir()
    page = run_dir / "viewer.html"
    page.write_text("<!DOCTYPE html><html><body>the page</body></html>")
    (run_dir / "config.yaml").write_text("llm: {api_key_env: SECRET}\n")
    (run_dir / "checkpoint.pkl").write_bytes(b"state")
    server = page_server(page)
    port = server.server_address[1]
    threading.Thread(target=server.serve_forever, daemon=True).start()

    def get(path, host=f"127.0.0.1:{port}"):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("GET", path, headers={"Host": host})
        response = conn.getresponse()
        return response.status, response.read()

    try:
        assert get("/viewer.html") == (200, page.read_bytes())
        assert get("/")[0] == 200 and get("/", f"localhost:{port}")[0] == 200
        for other in ("/config.yaml", "/checkpoint.pkl", "/../run/config.yaml", "/plots/", "/viewer.html/x"):
            status, body = get(other)
            assert status == 404 and b"SECRET" not in body and b"state" not in body, other
        assert get("/viewer.html", f"attacker.example:{port}")[0] == 403      # a rebinding page's Host
        assert get("/viewer.html", "127.0.0.1:1")[0] == 403
        assert server.server_address[0] == "127.0.0.1"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.slow
def test_an_edited_sweep_manifest_cannot_lead_outside(tmp_path):
    from socialgym.experiments.run.sweep import run_sweep

    out = tmp_path / "sweep"
    run_sweep(load_config({**SCRIPTED, "env": {**SCRIPTED["env"], "max_rounds": 3},
                           "sweep": {"env.recommender": ["random", "chronological"]}}), out, progress=False)
    manifest = json.loads((out / "sweep.json").read_text())
    escape = tmp_path / "escape"
    manifest["jobs"][1]["condition_id"] = "../../escape"
    (out / "sweep.json").write_text(json.dumps(manifest))
    for command in (("compare", str(out)), ("report", str(out)), ("resume", str(out), "--quiet")):
        done = cli(*command, check=False)
        assert done.returncode == 2 and len(error_lines(done.stderr)) == 1, (command, done.stderr)
        assert "job 1 names a folder socialgym does not write" in done.stderr
    assert not escape.exists() and not (tmp_path / "compare").exists()


def test_a_damaged_rounds_file_is_one_line_for_compare(tmp_path):
    for name in ("a", "b"):
        run_experiment(load_config({**SCRIPTED, "env": {**SCRIPTED["env"], "max_rounds": 3}}), tmp_path / name)
    rounds = tmp_path / "a" / "rounds.csv"
    lines = rounds.read_text().splitlines()
    lines[2] = "zz" + lines[2][lines[2].index(","):]
    rounds.write_text("\n".join(lines) + "\n")
    done = cli("compare", str(tmp_path / "a"), str(tmp_path / "b"), check=False)
    assert done.returncode == 2 and error_lines(done.stderr) == [
        f"socialgym: error: {rounds}: row 3 has no round number ('zz'): the file was changed or damaged"]


@pytest.mark.slow
def test_the_config_change_warning_names_only_what_does_not_take_effect(tmp_path):
    data = {**SCRIPTED, "surveys": [{"instrument": "trust", "at_round": 1}]}
    config = write_config(tmp_path / "c.yaml", data)
    out = tmp_path / "run"
    killed = cli("run", str(config), "--out", str(out), "--quiet", check=False,
                 env={**os.environ, "SOCIALGYM_KILL_AT": "2:outputs"})
    assert killed.returncode == -signal.SIGKILL
    edited = yaml.safe_load((out / "config.yaml").read_text())
    edited["surveys"].append({"instrument": "trust", "name": "late", "at_round": 5})
    (out / "config.yaml").write_text(yaml.safe_dump(edited))
    done = cli("resume", str(out), "--quiet", "--allow-config-change")
    assert "changed since the checkpoint (surveys)" in done.stderr
    assert "do not take effect" not in done.stderr                 # the new survey does take effect
    rows = (out / "surveys.csv").read_text().splitlines()
    assert any(",late,trust," in row and row.startswith("5,") for row in rows)


def test_an_edited_fork_origin_is_refused(tmp_path):
    from socialgym.experiments.run.fork import fork_run

    base = tmp_path / "base"
    run_experiment(load_config(SCRIPTED), base)
    decoy = tmp_path / "decoy"
    run_experiment(load_config({**SCRIPTED, "seed": 9}), decoy)
    first = tmp_path / "first"
    fork_run(base, 4, first, progress=False)
    info = json.loads((first / "run.json").read_text())
    info["fork"]["of"] = str(decoy.resolve())                     # lead a fork of the fork elsewhere
    (first / "run.json").write_text(json.dumps(info))
    with pytest.raises(RunError, match="names an origin .* that its signed snapshot does not"):
        fork_run(first, 2, tmp_path / "second", progress=False)
    assert not (tmp_path / "second").exists()
