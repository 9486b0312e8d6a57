"""A dead LLM server is named at once (issue 43): the embedded server's process is watched, and a
round in which no request reached any server stops the run, resumable, instead of being played on
stand-ins.

The fast tests use the in-process fake server and a port nothing listens on; the slow ones run the
real command on the embedded model (SmolLM2-135M via llama.cpp), kill its server with SIGSEGV or
SIGKILL in the middle of a run, and resume.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from capabilities import need_embedded_model, need_module

from socialgym.llm import LLMClient, LLMServerDown
from socialgym.llm.local import LocalServer, describe_exit

ROOT = Path(__file__).resolve().parents[1]
MESSAGES = [{"role": "user", "content": "hi"}]


def _dead_port() -> int:
    """A loopback port that refuses connections (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cli(*args, timeout=600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "socialgym.cli", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=timeout)


def _summary(out: Path) -> dict:
    return json.loads((out / "summary.json").read_text())


def _error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("socialgym: error:")]


# ---------------------------------------------------------------------------------- the message
def test_describe_exit_names_the_signal_the_code_and_the_log(tmp_path):
    log = tmp_path / "server.log"
    log.write_text("llama_model_loader: loaded\n\nINFO: started server\nSegmentation fault in ggml\n")
    text = describe_exit(-11, 4242, log)
    assert "pid 4242" in text and "was killed by SIGSEGV (signal 11)" in text
    assert "INFO: started server | Segmentation fault in ggml" in text      # the last non-empty lines
    assert "socialgym doctor" in text and "\n" not in text
    killed = describe_exit(-9, 1, log)
    assert "SIGKILL (signal 9)" in killed and "socialgym doctor" not in killed    # not a crash of the build
    assert "exited with code 3" in describe_exit(3, 1, tmp_path / "missing.log")


def test_a_live_process_is_no_failure(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    server = LocalServer("http://127.0.0.1:1/v1", "m", "x.gguf", proc.pid, str(tmp_path / "l.log"), process=proc)
    try:
        assert server.failure() is None
        proc.send_signal(signal.SIGSEGV)
        proc.wait(10)
        assert "SIGSEGV" in server.failure()
    finally:
        proc.kill()
        proc.wait()
    assert "Popen" not in repr(server) and "process=" not in repr(server)


def test_a_port_taken_before_the_server_binds_it_is_retried(monkeypatch):
    """The free port is found by binding and closing it; a parallel process may take it first."""
    need_embedded_model()
    from socialgym.llm import local

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    ports = [taken.getsockname()[1]]
    real = local._free_port
    monkeypatch.setattr(local, "_free_port", lambda: ports.pop(0) if ports else real())
    try:
        with local.local_server() as server:
            assert f":{taken.getsockname()[1]}/" not in server.base_url
            assert server.failure() is None
    finally:
        taken.close()
    assert ports == []                                   # the taken port was tried first


# ---------------------------------------------------------------------------------- the client
def test_a_dead_watched_server_raises_at_once_without_retries():
    need_module("openai")
    from socialgym.llm.testing import FakeServer

    with FakeServer() as server:
        client = LLMClient(server.base_url, "m", api_key="k", max_retries=3, backoff=2.0, max_concurrency=1)
        dead = {"why": None}
        client.server_check = lambda: dead["why"]
        with client:
            assert client.run(client.chat(MESSAGES, round=1))       # alive: answered
            server.kill()
            dead["why"] = "the embedded LLM server (llama.cpp, pid 7) was killed by SIGSEGV (signal 11)"
            start = time.perf_counter()
            with pytest.raises(LLMServerDown, match="SIGSEGV"):
                client.run(client.chat(MESSAGES, round=1))
            # no backoff: retries would have slept 2 + 4 + 8 s
            assert time.perf_counter() - start < 1.5
            sent = len(server.requests)
            with pytest.raises(LLMServerDown, match="SIGSEGV"):    # later requests are not sent
                client.run(client.chat([{"role": "user", "content": "again"}], round=2))
            assert len(server.requests) == sent
            assert client.outage(1) is not None


def test_outage_only_when_every_request_of_the_round_found_no_server():
    need_module("openai")
    from socialgym.llm.testing import FakeServer

    port = _dead_port()
    with LLMClient(f"http://127.0.0.1:{port}/v1", "m", api_key="k", max_retries=0) as client:
        for i in range(3):
            reply = client.run(client.complete_text([{"role": "user", "content": f"q{i}"}], round=4))
            assert reply.text == "" and "request failed" in reply.error
        why = client.outage(4)
        assert why is not None and "every one of the 3 LLM request(s) of round 4" in why
        assert f"127.0.0.1:{port}" in why
        assert client.outage(5) is None                 # a round that sent nothing
    with FakeServer() as server:
        with LLMClient(server.base_url, "m", api_key="k", max_retries=0) as client:
            assert client.run(client.complete_text(MESSAGES, round=1)).ok
            server.kill()
            assert not client.run(client.complete_text([{"role": "user", "content": "x"}], round=1)).ok
            assert client.outage(1) is None             # one request of the round was answered


def test_a_server_error_is_no_outage():
    need_module("openai")
    from socialgym.llm.testing import FakeReply, FakeServer

    with FakeServer(lambda body, n: FakeReply(status=503)) as server:
        with LLMClient(server.base_url, "m", api_key="k", max_retries=0) as client:
            assert not client.run(client.complete_text(MESSAGES, round=1)).ok
            assert client.outage(1) is None             # the server answered: it is up


# ---------------------------------------------------------------------------------- a run
LLM_RUN = {"seed": 2, "env": {"n_agents": 3, "max_rounds": 2, "recommender": "random", "sentiment": "tone"},
           "policy": {"groups": [{"name": "llm", "kind": "llm", "agents": 2}, {"name": "greedy", "kind": "greedy"}]},
           "logging": {"report": False, "progress": False}}


@pytest.mark.slow
def test_a_run_whose_server_refuses_every_connection_stops_named_and_resumes(tmp_path):
    need_module("openai")
    from socialgym.llm.testing import FakeServer

    from test_experiments import _deterministic_responder, assert_same_outputs

    port = _dead_port()
    data = {**LLM_RUN, "llm": {"base_url": f"http://127.0.0.1:{port}/v1", "model": "fake", "api_key": "k",
                               "max_retries": 1, "cache": True}}
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(data))
    broken, ref = tmp_path / "broken", tmp_path / "ref"
    proc = _cli("run", str(path), "--out", str(broken), "--quiet")
    assert proc.returncode == 6, proc.stderr
    errors = _error_lines(proc.stderr)
    assert len(errors) == 1 and "found no server to connect to" in errors[0] and "socialgym resume" in errors[0]
    assert f"127.0.0.1:{port}" in errors[0]
    summary = _summary(broken)
    assert summary["status"] == "failed" and summary["rounds_completed"] == 0
    assert not (broken / "rounds.csv").exists() or len((broken / "rounds.csv").read_text().splitlines()) <= 1
    with FakeServer(_deterministic_responder) as server:
        live = {**data, "llm": {**data["llm"], "base_url": server.base_url}}
        ref_path = tmp_path / "ref.yaml"
        ref_path.write_text(yaml.safe_dump(live))
        assert _cli("run", str(ref_path), "--out", str(ref), "--quiet").returncode == 0
        config = yaml.safe_load((broken / "config.yaml").read_text())
        config["llm"]["base_url"] = server.base_url          # the server is back (elsewhere)
        (broken / "config.yaml").write_text(yaml.safe_dump(config))
        resumed = _cli("resume", str(broken), "--quiet", "--allow-config-change")
        assert resumed.returncode == 0, resumed.stderr
    assert _summary(broken)["status"] == "complete"
    assert _summary(broken)["llm"]["fallbacks"] == 0
    assert_same_outputs(ref, broken, 2)


# ---------------------------------------------------------------------------------- the embedded model
EMBEDDED_RUN = {"seed": 0, "env": {"n_agents": 3, "n_actions": 1, "max_rounds": 3, "recommender": "random",
                                   "feed_size": 3, "vote_feed_size": 3},
                "policy": {"kind": "llm", "coach": False,
                           "params": {"generation": "joint", "text_chars": 60, "new_topics": False, "max_users": 3,
                                      "max_posts": 3, "max_vote_items": 3, "max_topics": 5}},
                "llm": {"max_concurrency": 1, "max_tokens": 96},
                "logging": {"report": False, "progress": False}}


def _server_child(pid: int) -> int | None:
    """The pid of the llama.cpp server that run process ``pid`` started, if running."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == pid and b"llama_cpp.server" in cmdline:
            return int(entry.name)
    return None


def _rounds_done(out: Path) -> int:
    try:
        return int(_summary(out)["rounds_completed"])
    except (OSError, ValueError, KeyError):
        return 0


@pytest.fixture(scope="module")
def embedded_reference(tmp_path_factory):
    need_embedded_model()
    base = tmp_path_factory.mktemp("embedded")
    path = base / "c.yaml"
    path.write_text(yaml.safe_dump(EMBEDDED_RUN))
    ref = base / "ref"
    proc = _cli("run", str(path), "--out", str(ref), "--quiet")
    assert proc.returncode == 0, proc.stderr
    return path, ref


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("sig", [signal.SIGSEGV, signal.SIGKILL], ids=["SIGSEGV", "SIGKILL"])
def test_killing_the_embedded_server_mid_run_stops_named_then_resumes_identically(tmp_path, embedded_reference, sig):
    from test_experiments import assert_same_outputs

    path, ref = embedded_reference
    out = tmp_path / "broken"
    proc = subprocess.Popen([sys.executable, "-m", "socialgym.cli", "run", str(path), "--out", str(out), "--quiet"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 600
        while _rounds_done(out) < 1 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proc.poll() is None, proc.communicate()[1]
        server = _server_child(proc.pid)
        assert server is not None
        time.sleep(0.5)                                  # in round 2, a request or two in
        os.kill(server, sig)
        killed = time.monotonic()
        _, stderr = proc.communicate(timeout=120)
        waited = time.monotonic() - killed
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 6, stderr
    assert waited < 10, f"the run took {waited:.1f} s to stop after its server died"
    errors = _error_lines(stderr)
    assert len(errors) == 1, stderr
    assert f"{sig.name} (signal {int(sig)})" in errors[0] and "socialgym resume" in errors[0]
    summary = _summary(out)
    assert summary["status"] == "failed" and summary["rounds_completed"] == 1
    assert sig.name in summary["error"]
    resumed = _cli("resume", str(out), "--quiet")
    assert resumed.returncode == 0, resumed.stderr
    assert _summary(out)["status"] == "complete"
    assert _summary(out)["llm"]["fallbacks"] == _summary(ref)["llm"]["fallbacks"]
    assert_same_outputs(ref, out, 3)
