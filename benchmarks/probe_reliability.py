"""Reliability probe: hundreds of bad inputs and faults, each classified by what the user sees.

    .venv/bin/python benchmarks/probe_reliability.py            # full probe (a few minutes on 2 cores)
    .venv/bin/python benchmarks/probe_reliability.py --quick    # a fixed subset (under a minute), writes nothing
    .venv/bin/python benchmarks/probe_reliability.py --only config --verbose

Tried as a skeptical user and a security reviewer would: malformed action payloads (strict and
lenient), misuse of the environment API and faults in user-supplied components, broken and
hostile config files through the CLI, a misbehaving OpenAI-compatible server, tampered run
directories on resume, and untrusted model and report files. Every case ends in exactly one of

- ``clear error``: the documented error type, one line, no traceback, naming the offending
  key / field / file / agent, and nothing changed that should not have (the environment is
  exactly as before the step; no run directory for a config error; the key never in a message);
- ``recorded fallback``: lenient mode turned the action into NOT and recorded why in
  ``infos[agent]["invalid"]``; an LLM fault ended in a fallback recorded in the usage log /
  summary, with the run carried on to the end;
- ``handled``: the input is valid (odd but allowed) or the fault was survived with correct
  results (e.g. a resumed run's files are byte-identical to an uninterrupted run's);
- ``bad outcome``: anything else — a traceback or unexpected exception type, a multi-line or
  huge message, bad input silently accepted, an environment left changed after an error, a
  secret on disk, code run from a data file (a marker file created by a hostile pickle), a hang.

The full probe writes ``benchmarks/results_reliability.json`` (every case) and the summary
table of ``docs/reliability.md`` (between the ``probe`` markers); no number there is typed by
hand. ``--quick`` runs a deterministic subset and writes nothing (``tests/test_probe_reliability.py``
runs it). Checkpoints are signed with a per-user key: the probe uses a key file of its own
(``SOCIALGYM_KEY_FILE`` in a temporary directory), never the user's.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import dataclasses
import io
import json
import os
import pickle
import platform
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from _docs import write_section  # noqa: E402

RESULTS = HERE / "results_reliability.json"
DOC = "reliability.md"

CLEAR, FALLBACK, HANDLED, BAD = "clear error", "recorded fallback", "handled", "bad outcome"
OUTCOMES = (CLEAR, FALLBACK, HANDLED, BAD)

CATEGORIES = {
    "actions": "1. Action payloads (feed env, strict and lenient)",
    "env": "2. Environment API misuse and component faults",
    "config": "3. Config files, --set and the run-directory commands through the CLI",
    "llm": "4. LLM server faults",
    "resume": "5. Resume of tampered run directories",
    "files": "6. Untrusted model, report and pickle files",
    # 7-10: issue 28's classes, in benchmarks/probe_hardening.py (registered below, after the others)
    "writers": "7. One writer per directory; writes that stay inside it",
    "values": "8. One validator per value",
    "bounds": "9. Bounded LLM calls and their fallbacks",
    "failures": "10. One line for every failure; text and config correctness",
    # 11-21: issue 44's surfaces, in benchmarks/probe_surfaces.py (registered below, after issue 28's)
    "platform": "11. The platform's seat and agent: actions outside the Box, seeds, sizes",
    "batched": "12. Batched platforms (socialgym.vector): sizes, seeds, action matrices",
    "flatobs": "13. FlatObservation: what it wraps, split and flatten, its Box",
    "validate": "14. socialgym validate on damaged run directories",
    "report_view": "15. socialgym report and view on damaged tie files and ids",
    "calibrate": "16. socialgym calibrate: targets, a damaged search, links at its outputs",
    "distill": "17. socialgym distill: damaged decision logs, runs given twice, bad models, links",
    "cli_numbers": "18. Numeric options of every command",
    "llm_config": "19. Platform objectives and stances; keys over plain http; budgets, endpoints, estimate --json",
    "locks": "20. Lock files planted as links, folders and FIFOs",
    "hybrid": "21. Hybrid policy groups (llm, archetype, distilled, scripted tiers)",
}

MAX_MESSAGE = 300
"""Longest message a clear error may have, absolute paths counted by their file name; a message
that lists the allowed keys or values ("allowed", "available", "one of") may have MAX_LISTING."""
MAX_LISTING = 900
SECRET = "sk-probe-SECRET-123"
FAST_FAIL_SECONDS = 5.0
"""A config error (YAML bombs included) must be reported within this time."""
DEFAULT_TIMEOUT = 60.0


# =============================================================================== framework
class Bad(Exception):
    """Raised inside a case: the outcome is a bad outcome with this detail."""


class ProbeTimeout(BaseException):
    """The case ran past its time limit (a BaseException: product code must not swallow it)."""


@dataclass
class Case:
    category: str
    name: str
    fn: Callable[["Ctx"], tuple[str, str]]
    quick: bool = False
    timeout: float = DEFAULT_TIMEOUT


@dataclass
class Result:
    category: str
    name: str
    outcome: str
    detail: str
    seconds: float


CASES: list[Case] = []


def accepted_or_recorded(record, expect: str, mode: str):
    """What a step that did not raise means: (HANDLED, "accepted") for valid input, None when the
    invalid input was recorded (lenient mode; the caller checks the record), else Bad."""
    if expect == "valid":
        if record:
            raise Bad(f"valid input recorded as invalid: {one_line(record, 200)}")
        return HANDLED, "accepted"
    if not record:
        if expect == "any":
            return HANDLED, "accepted"
        raise Bad(f"invalid input silently accepted ({mode} mode)")
    if mode == "strict":
        raise Bad(f"strict mode recorded instead of raising: {one_line(record, 200)}")
    return None


def case(category: str, name: str, fn: Callable, *, quick: bool = False, timeout: float = DEFAULT_TIMEOUT) -> None:
    CASES.append(Case(category, name, fn, quick, timeout))


@contextlib.contextmanager
def time_limit(seconds: float):
    """SIGALRM-based limit (main thread only; elsewhere no limit)."""
    import threading

    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return

    def fire(signum, frame):
        raise ProbeTimeout()

    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def one_line(text: str, limit: int = 240) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def describe(exc: BaseException) -> str:
    """What the last line of a traceback would say, cut short."""
    return one_line(f"{type(exc).__name__}: {exc}", 240)


def where(exc: BaseException) -> str:
    """The innermost frame of socialgym code in the exception's traceback."""
    frames = traceback.extract_tb(exc.__traceback__)
    for fr in reversed(frames):
        if "socialgym" in fr.filename and "benchmarks" not in fr.filename:
            path = Path(fr.filename)
            return f" at {path.relative_to(ROOT) if ROOT in path.parents else path}:{fr.lineno}"
    return ""


_DIRS = re.compile(r"(?<![\w:/])/(?:[\w.+\-]+/)+")


def message_length(msg: str) -> int:
    """Characters of a message with every absolute path counted by its file name only (so that
    the limit does not depend on where the probe's temporary directory is)."""
    return len(_DIRS.sub("", msg))


def message_problem(msg: str, names: Sequence[str] = (), secret: bool = True) -> str | None:
    """Why ``msg`` is not a clear one-line message naming ``names`` (None when it is)."""
    if "\n" in msg.strip():
        return f"message has {len(msg.strip().splitlines())} lines"
    limit = MAX_LISTING if ("allowed" in msg or "available" in msg or "one of" in msg) else MAX_MESSAGE
    if message_length(msg) > limit:
        return f"message has {message_length(msg)} characters, paths counted by their file name (limit {limit})"
    if "Traceback" in msg:
        return "message holds a traceback"
    if secret and SECRET in msg:
        return "message holds the API key"
    missing = [n for n in names if n.lower() not in msg.lower()]
    if missing:
        return f"message does not name {missing}"
    return None


def expect_clear(exc: BaseException, types: tuple, names: Sequence[str] = ()) -> tuple[str, str]:
    if not isinstance(exc, types):
        raise Bad(f"unexpected {describe(exc)}{where(exc)}")
    problem = message_problem(str(exc), names)
    if problem:
        raise Bad(f"{problem}: {describe(exc)}")
    return CLEAR, describe(exc)


class Ctx:
    """Temporary directories, marker files and lazily built shared fixtures."""

    def __init__(self, root: Path, verbose: bool = False) -> None:
        self.root = root
        self.verbose = verbose
        self._n = 0
        self._cache: dict[str, Any] = {}
        (root / "markers").mkdir(parents=True, exist_ok=True)

    def fresh(self, stem: str = "d") -> Path:
        self._n += 1
        path = self.root / f"{stem}-{self._n:04d}"
        return path

    def workdir(self, stem: str = "w") -> Path:
        path = self.fresh(stem)
        path.mkdir(parents=True)
        return path

    def marker(self, name: str) -> Path:
        safe = "".join(c if c.isalnum() else "_" for c in name)[:60]
        self._n += 1
        return self.root / "markers" / f"{self._n:04d}-{safe}"

    def cached(self, key: str, build: Callable[[], Any]) -> Any:
        if key not in self._cache:
            self._cache[key] = build()
        return self._cache[key]


class _RunsCode:
    """A pickle that creates a directory when it is loaded (proof that loading ran code)."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return (os.makedirs, (self.marker,))


def hostile_pickle(marker: Path) -> bytes:
    return pickle.dumps({"version": 3, "env": _RunsCode(marker)}, protocol=2)


def check_marker(marker: Path) -> None:
    if marker.exists():
        raise Bad(f"code from a data file ran (marker {marker.name} created)")


# =============================================================================== helpers
def canon(x: Any) -> Any:
    """Plain, comparable data (numpy arrays, sequences, floats incl. NaN)."""
    if isinstance(x, Mapping):
        return {str(k): canon(v) for k, v in sorted(x.items(), key=lambda kv: str(kv[0]))}
    if isinstance(x, np.ndarray):
        return canon(x.tolist())
    if isinstance(x, (str, bytes, bool, type(None))):
        return x
    if isinstance(x, (np.integer, int)):
        return int(x)
    if isinstance(x, (np.floating, float)):
        return repr(float(x))
    if isinstance(x, (list, tuple, Sequence)):
        return [canon(v) for v in x]
    if hasattr(x, "toarray"):
        return canon(x.toarray())
    return repr(x)


@dataclass
class CliResult:
    rc: int | None
    stdout: str
    stderr: str
    exc: BaseException | None
    seconds: float
    warnings: list = field(default_factory=list)

    def lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.strip()]


def call_main(main: Callable[[list[str]], int], argv: list[str]) -> CliResult:
    """Run a command's ``main(argv)`` in-process, capturing its output and any exception."""
    out, err = io.StringIO(), io.StringIO()
    t0 = time.perf_counter()
    exc = None
    rc: int | None = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                rc = main(argv)
        except SystemExit as e:
            rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except ProbeTimeout:
            raise
        except BaseException as e:  # noqa: BLE001 -- a traceback the user would see
            exc = e
    return CliResult(rc, out.getvalue(), err.getvalue(), exc, time.perf_counter() - t0,
                     [str(w.message)[:120] for w in caught])


def cli(argv: list[str]) -> CliResult:
    from socialgym.cli import main
    return call_main(main, argv)


def cli_clear(res: CliResult, names: Sequence[str] = (), *, out: Path | None = None, prefix: str = "socialgym: error:",
              max_seconds: float | None = FAST_FAIL_SECONDS, status: int = 2) -> tuple[str, str]:
    """A clear CLI error: exit status 2, one stderr line starting with ``prefix`` that names
    ``names``, fast, and (for config errors) no ``out`` directory."""
    if res.exc is not None:
        raise Bad(f"traceback: {describe(res.exc)}{where(res.exc)}")
    lines = res.lines()
    msg = lines[-1] if lines else ""
    problems = []
    if res.rc != status:
        problems.append(f"exit status {res.rc}")
    if len(lines) != 1:
        problems.append(f"{len(lines)} stderr lines")
    if lines and not msg.startswith(prefix):
        problems.append(f"stderr does not start with {prefix!r}")
    problem = message_problem(msg, names)
    if problem:
        problems.append(problem)
    if out is not None and out.exists():
        problems.append(f"{out.name} was created")
    if max_seconds is not None and res.seconds > max_seconds:
        problems.append(f"took {res.seconds:.1f} s")
    if problems:
        raise Bad("; ".join(problems) + f" | {one_line(lines[0] if lines else res.stdout, 200)}")
    return CLEAR, one_line(msg, 240)


def files_containing(root: Path, needle: str) -> list[str]:
    data = needle.encode()
    hits = []
    for path in sorted(root.rglob("*")):
        if path.is_file():
            try:
                if data in path.read_bytes():
                    hits.append(str(path.relative_to(root)))
            except OSError:
                pass
    return hits


def jsonl_problem(root: Path) -> str | None:
    for path in sorted(root.glob("*.jsonl")):
        raw = path.read_bytes()
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            return f"{path.name} is not UTF-8 ({exc.reason} at byte {exc.start})"
        for i, line in enumerate(text.splitlines()):
            try:
                json.loads(line)
            except ValueError:
                return f"{path.name} line {i + 1} is not JSON"
    return None


# =============================================================================== 1. actions
ENV_BASE = dict(n_agents=3, n_actions=2, max_rounds=3, recommender="chronological", sentiment="tone",
                feed_size=5, vote_feed_size=5)
TOPICS = ("politics", "sports", "technology")
FILL = {"type": "POST", "topic": "sports", "text": "filler"}


def feed_env(mode: str = "strict", **extra):
    import socialgym
    return socialgym.parallel_env(**{**ENV_BASE, "invalid_actions": mode, **extra})


def baseline(env, obs) -> dict:
    """Valid actions for every live agent: POSTs in round 1; later a COM on the first feed item
    and a DM to the next agent; in the vote phase +1 on the first vote item."""
    n = env.config.n_agents
    acts = {}
    for i, a in enumerate(env.agents):
        o = obs[a]
        if o["phase"] == "vote":
            items = o["vote_items"]
            acts[a] = {"votes": {items[0]["id"]: 1} if items else {}}
            continue
        slots = []
        for s in range(env.config.n_actions):
            if o["round"] == 1 or (s == 0 and not o["feed"]):
                slots.append({"type": "POST", "topic": TOPICS[(i + s) % len(TOPICS)], "text": f"post {i}.{s}",
                              "tone": "supportive", "mentions": [f"agent_{(i + 1) % n}"]})
            elif s == 0:
                slots.append({"type": "COM", "target_id": o["feed"][0]["id"], "text": "agreed", "tone": "neutral"})
            else:
                slots.append({"type": "DM", "recipient": f"agent_{(i + 1) % n}", "topic": "politics", "text": "hi"})
        acts[a] = {"actions": slots}
    return acts


STAGES = {"r1": 0, "r1v": 1, "r2": 2, "r2v": 3, "r3": 4}


def at_stage(stage: str, mode: str = "strict", **extra):
    env = feed_env(mode, **extra)
    obs, _ = env.reset(seed=0)
    for _ in range(STAGES[stage]):
        obs, *_ = env.step(baseline(env, obs))
    return env, obs


def fingerprint(env) -> Any:
    """A deep summary of the environment's state (what a failed step must not change)."""
    state = {"round": env.round, "phase": env.phase, "agents": list(env.agents), "n_content": len(env.content),
             "vocab": env.vocab.names, "rng": env.rng.bit_generator.state, "ties": env.tie_matrix()}
    for name in ("_feed", "_vote_items", "_inbox", "_last", "_seen_feed", "_seen_any"):
        state[name] = getattr(env, name, None)
    content = env.content
    for col in ("author", "kind", "topic", "target_id", "recipient"):
        with contextlib.suppress(Exception):
            state[f"content.{col}"] = np.asarray(content.column(col))[: len(content)]
    rec = env.recommender
    if callable(getattr(rec, "state_dict", None)):
        with contextlib.suppress(Exception):
            state["recommender"] = rec.state_dict()
    return canon(state)


def play_out(env, obs, steps: int | None = None) -> list:
    """Step with valid actions to the end of the episode; the trace of everything returned."""
    trace = []
    k = 0
    while env.agents and (steps is None or k < steps):
        obs, rewards, terms, truncs, infos = env.step(baseline(env, obs))
        trace.append(canon((obs, rewards, terms, truncs, infos)))
        k += 1
    trace.append(fingerprint(env))
    return trace


class Ids:
    """Content ids of interest to agent_0 at a stage."""

    def __init__(self, env, obs) -> None:
        from socialgym.platform.actions import DM
        o = obs["agent_0"]
        self.feed = o["feed"][0]["id"] if o["feed"] else None
        self.vote = o["vote_items"][0]["id"] if o["vote_items"] else None
        self.dm_in = o["dms"][0]["id"] if o["dms"] else None
        n = len(env.content)
        author = np.asarray(env.content.column("author"))[:n]
        kind = np.asarray(env.content.column("kind"))[:n]
        recipient = np.asarray(env.content.column("recipient"))[:n]
        own = np.flatnonzero((author == 0) & (kind != DM))
        self.own = int(own[-1]) if len(own) else None
        dm_out = np.flatnonzero((kind == DM) & (author == 0))
        self.dm_out = int(dm_out[-1]) if len(dm_out) else None
        dm_other = np.flatnonzero((kind == DM) & (recipient != 0))
        self.dm_other = int(dm_other[-1]) if len(dm_other) else None
        self.n = n


def S(action: Any, fill: Any = FILL) -> dict:
    """An act payload with ``action`` in slot 0 and a valid POST in slot 1."""
    return {"actions": [action, fill]}


def _gen(items):
    return (x for x in items)


# (name, stage, payload builder (Ids -> agent_0's payload or a whole-step transform), expect, field, quick)
# expect: "valid" (accepted, no record), "invalid" (strict: ValueError naming agent_0 and the field;
# lenient: NOT with a record), "error" (raises in both modes: misuse of step itself), "any" (either).
P = "POST"
ACTION_CASES: list[tuple] = [
    # ---- POST: type
    ("post/minimal", "r1", lambda i: S({"type": P, "topic": "politics"}), "valid", "", True),
    ("post/type-lowercase-padded", "r1", lambda i: S({"type": " post ", "topic": "politics"}), "valid", "", False),
    ("post/type-None", "r1", lambda i: S({"type": None, "topic": "a"}), "invalid", "type", True),
    ("post/type-int", "r1", lambda i: S({"type": 5, "topic": "a"}), "invalid", "type", False),
    ("post/type-empty", "r1", lambda i: S({"type": "", "topic": "a"}), "invalid", "type", False),
    ("post/type-unknown", "r1", lambda i: S({"type": "SHOUT", "topic": "a"}), "invalid", "type", False),
    ("post/type-list", "r1", lambda i: S({"type": [P], "topic": "a"}), "invalid", "type", False),
    ("post/type-bytes", "r1", lambda i: S({"type": b"POST", "topic": "a"}), "invalid", "type", False),
    ("post/type-missing", "r1", lambda i: S({"topic": "a"}), "invalid", "type", False),
    # ---- POST: topic
    ("post/topic-missing", "r1", lambda i: S({"type": P}), "invalid", "topic", False),
    ("post/topic-None", "r1", lambda i: S({"type": P, "topic": None}), "invalid", "topic", False),
    ("post/topic-empty", "r1", lambda i: S({"type": P, "topic": ""}), "invalid", "topic", False),
    ("post/topic-blank", "r1", lambda i: S({"type": P, "topic": "   "}), "invalid", "topic", False),
    ("post/topic-int-999", "r1", lambda i: S({"type": P, "topic": 999}), "invalid", "topic", True),
    ("post/topic-int-minus-1", "r1", lambda i: S({"type": P, "topic": -1}), "invalid", "topic", True),
    ("post/topic-int-2**40", "r1", lambda i: S({"type": P, "topic": 2**40}), "invalid", "topic", True),
    ("post/topic-int-2**70", "r1", lambda i: S({"type": P, "topic": 2**70}), "invalid", "topic", False),
    ("post/topic-True", "r1", lambda i: S({"type": P, "topic": True}), "invalid", "topic", True),
    ("post/topic-float", "r1", lambda i: S({"type": P, "topic": 1.5}), "invalid", "topic", False),
    ("post/topic-float-whole", "r1", lambda i: S({"type": P, "topic": 1.0}), "invalid", "topic", False),
    ("post/topic-nan", "r1", lambda i: S({"type": P, "topic": float("nan")}), "invalid", "topic", False),
    ("post/topic-np-int64-999", "r1", lambda i: S({"type": P, "topic": np.int64(999)}), "invalid", "topic", False),
    ("post/topic-np-bool", "r1", lambda i: S({"type": P, "topic": np.bool_(True)}), "invalid", "topic", False),
    ("post/topic-index-0", "r1", lambda i: S({"type": P, "topic": 0}), "valid", "", False),
    ("post/topic-np-int64-1", "r1", lambda i: S({"type": P, "topic": np.int64(1)}), "valid", "", False),
    ("post/topic-list", "r1", lambda i: S({"type": P, "topic": ["a"]}), "invalid", "topic", False),
    ("post/topic-dict", "r1", lambda i: S({"type": P, "topic": {"a": 1}}), "invalid", "topic", False),
    ("post/topic-bytes", "r1", lambda i: S({"type": P, "topic": b"sports"}), "invalid", "topic", False),
    ("post/topic-1MB", "r1", lambda i: S({"type": P, "topic": "x" * 1_000_000}), "invalid", "topic", True),
    ("post/topic-65-chars", "r1", lambda i: S({"type": P, "topic": "y" * 65}), "invalid", "topic", False),
    ("post/topic-64-chars", "r1", lambda i: S({"type": P, "topic": "y" * 64}), "valid", "", False),
    ("post/topic-NUL", "r1", lambda i: S({"type": P, "topic": "a\x00b"}), "invalid", "topic", True),
    ("post/topic-newline", "r1", lambda i: S({"type": P, "topic": "a\nb"}), "invalid", "topic", False),
    ("post/topic-escape-seq", "r1", lambda i: S({"type": P, "topic": "a\x1b[31mb"}), "invalid", "topic", False),
    ("post/topic-DEL", "r1", lambda i: S({"type": P, "topic": "a\x7f"}), "invalid", "topic", False),
    ("post/topic-C1", "r1", lambda i: S({"type": P, "topic": "a\x85b"}), "invalid", "topic", False),
    ("post/topic-lone-surrogate", "r1", lambda i: S({"type": P, "topic": "\ud800"}), "invalid", "topic", True),
    ("post/topic-surrogate-inside", "r1", lambda i: S({"type": P, "topic": "ab\udfffcd"}), "invalid", "topic", False),
    ("post/topic-unicode-new", "r1", lambda i: S({"type": P, "topic": "café ☕"}), "valid", "", False),
    ("post/topic-case-padded", "r1", lambda i: S({"type": P, "topic": " Climate "}), "valid", "", False),
    ("post/topic-zero-width", "r1", lambda i: S({"type": P, "topic": "\u200b"}), "any", "topic", False),
    ("post/topic-rtl-override", "r1", lambda i: S({"type": P, "topic": "\u202etxet"}), "any", "topic", False),
    # ---- POST: text
    ("post/text-int", "r1", lambda i: S({"type": P, "topic": "a", "text": 5}), "invalid", "text", False),
    ("post/text-bytes", "r1", lambda i: S({"type": P, "topic": "a", "text": b"hi"}), "invalid", "text", False),
    ("post/text-list", "r1", lambda i: S({"type": P, "topic": "a", "text": ["hi"]}), "invalid", "text", False),
    ("post/text-dict", "r1", lambda i: S({"type": P, "topic": "a", "text": {"t": 1}}), "invalid", "text", False),
    ("post/text-None", "r1", lambda i: S({"type": P, "topic": "a", "text": None}), "valid", "", False),
    ("post/text-empty", "r1", lambda i: S({"type": P, "topic": "a", "text": ""}), "valid", "", False),
    ("post/text-lone-surrogate", "r1", lambda i: S({"type": P, "topic": "a", "text": "hi \ud800"}), "invalid", "text",
     True),
    ("post/text-low-surrogate", "r1", lambda i: S({"type": P, "topic": "a", "text": "\udc80"}), "invalid", "text",
     False),
    ("post/text-at-limit", "r1", lambda i: S({"type": P, "topic": "a", "text": "z" * 10_000}), "valid", "", False),
    ("post/text-over-limit", "r1", lambda i: S({"type": P, "topic": "a", "text": "z" * 10_001}), "invalid", "text",
     False),
    ("post/text-10MB", "r1", lambda i: S({"type": P, "topic": "a", "text": "z" * 10_000_000}), "invalid", "text",
     True),
    ("post/text-NUL", "r1", lambda i: S({"type": P, "topic": "a", "text": "a\x00b"}), "any", "text", False),
    ("post/text-ansi", "r1", lambda i: S({"type": P, "topic": "a", "text": "\x1b[2J\x1b[31mred"}), "any", "text",
     False),
    ("post/text-emoji", "r1", lambda i: S({"type": P, "topic": "a", "text": "🎉 ünïcödé 日本"}), "valid", "", False),
    # ---- POST: mentions
    ("post/mentions-unknown", "r1", lambda i: S({"type": P, "topic": "a", "mentions": ["agent_9"]}), "invalid",
     "mentions", True),
    ("post/mentions-int", "r1", lambda i: S({"type": P, "topic": "a", "mentions": [5]}), "invalid", "mentions",
     False),
    ("post/mentions-None-item", "r1", lambda i: S({"type": P, "topic": "a", "mentions": [None]}), "invalid",
     "mentions", False),
    ("post/mentions-string", "r1", lambda i: S({"type": P, "topic": "a", "mentions": "agent_1"}), "invalid",
     "mentions", False),
    ("post/mentions-dict", "r1", lambda i: S({"type": P, "topic": "a", "mentions": {"agent_1": 1}}), "invalid",
     "mentions", False),
    ("post/mentions-scalar", "r1", lambda i: S({"type": P, "topic": "a", "mentions": 5}), "invalid", "mentions",
     False),
    ("post/mentions-nested", "r1", lambda i: S({"type": P, "topic": "a", "mentions": [["agent_1"]]}), "invalid",
     "mentions", False),
    ("post/mentions-empty-string", "r1", lambda i: S({"type": P, "topic": "a", "mentions": [""]}), "invalid",
     "mentions", False),
    ("post/mentions-self", "r1", lambda i: S({"type": P, "topic": "a", "mentions": ["agent_0"]}), "valid", "", False),
    ("post/mentions-duplicate", "r1", lambda i: S({"type": P, "topic": "a", "mentions": ["agent_1", "agent_1"]}),
     "valid", "", False),
    ("post/mentions-padded", "r1", lambda i: S({"type": P, "topic": "a", "mentions": [" agent_1"]}), "any",
     "mentions", False),
    ("post/mentions-generator", "r1", lambda i: S({"type": P, "topic": "a", "mentions": _gen(["agent_1"])}), "any",
     "mentions", False),
    ("post/mentions-1000-unknown", "r1", lambda i: S({"type": P, "topic": "a", "mentions": ["agent_9"] * 1000}),
     "invalid", "mentions", False),
    # ---- POST: tone, keys
    ("post/tone-unknown", "r1", lambda i: S({"type": P, "topic": "a", "tone": "angry"}), "invalid", "tone", False),
    ("post/tone-int", "r1", lambda i: S({"type": P, "topic": "a", "tone": 1}), "invalid", "tone", False),
    ("post/tone-list", "r1", lambda i: S({"type": P, "topic": "a", "tone": ["neutral"]}), "invalid", "tone", False),
    ("post/tone-padded", "r1", lambda i: S({"type": P, "topic": "a", "tone": " SUPPORTIVE "}), "valid", "", False),
    ("post/unknown-key", "r1", lambda i: S({"type": P, "topic": "a", "foo": 1}), "invalid", "foo", False),
    ("post/int-key", "r1", lambda i: S({"type": P, "topic": "a", 1: 2}), "invalid", "", False),
    ("post/mixed-unknown-keys", "r1", lambda i: S({"type": P, "topic": "a", 1: 2, "zz": 3}), "invalid", "", True),
    ("post/stray-recipient", "r1", lambda i: S({"type": P, "topic": "a", "recipient": "agent_1"}), "invalid",
     "recipient", False),
    ("post/stray-target_id", "r1", lambda i: S({"type": P, "topic": "a", "target_id": 0}), "invalid", "target_id",
     False),
    ("post/empty-target_id", "r1", lambda i: S({"type": P, "topic": "a", "target_id": None}), "valid", "", False),
    # ---- non-POST in round 1, non-dict actions
    ("round1/COM", "r1", lambda i: S({"type": "COM", "target_id": 0}), "invalid", "type", True),
    ("round1/DM", "r1", lambda i: S({"type": "DM", "recipient": "agent_1", "topic": "a"}), "invalid", "type", False),
    ("round1/NOT", "r1", lambda i: S({"type": "NOT"}), "invalid", "type", False),
    ("action/string", "r1", lambda i: S("POST"), "invalid", "type", False),
    ("action/None", "r1", lambda i: S(None), "invalid", "type", False),
    ("action/int", "r1", lambda i: S(5), "invalid", "type", False),
    ("action/list", "r1", lambda i: S([P, "a"]), "invalid", "type", False),
    # ---- payload level
    ("payload/None", "r1", lambda i: None, "invalid", "actions", True),
    ("payload/string", "r1", lambda i: "POST", "invalid", "actions", False),
    ("payload/list", "r1", lambda i: [], "invalid", "actions", False),
    ("payload/actions-None", "r1", lambda i: {"actions": None}, "invalid", "actions", False),
    ("payload/actions-string", "r1", lambda i: {"actions": "POST POST"}, "invalid", "actions", False),
    ("payload/actions-dict", "r1", lambda i: {"actions": {}}, "invalid", "actions", False),
    ("payload/extra-key", "r1", lambda i: {"actions": [FILL, FILL], "extra": 1}, "invalid", "extra", False),
    ("payload/misspelt-key", "r1", lambda i: {"Actions": [FILL, FILL]}, "invalid", "actions", False),
    ("payload/one-action", "r1", lambda i: {"actions": [FILL]}, "invalid", "actions", True),
    ("payload/three-actions", "r1", lambda i: {"actions": [FILL, FILL, FILL]}, "invalid", "actions", False),
    ("payload/10000-actions", "r1", lambda i: {"actions": [FILL] * 10_000}, "invalid", "actions", False),
    ("payload/actions-generator", "r1", lambda i: {"actions": _gen([FILL, FILL])}, "invalid", "actions", False),
    ("payload/actions-tuple", "r1", lambda i: {"actions": (FILL, FILL)}, "valid", "", False),
    ("payload/agent-missing", "r1", "drop-agent_0", "invalid", "actions", False),
    ("payload/numeric-wrong-shape", "r1", lambda i: np.zeros(3, np.int64), "invalid", "actions", False),
    ("payload/numeric-nan", "r1", lambda i: np.full(_numeric_length(), np.nan), "invalid", "actions", False),
    ("payload/numeric-object", "r1", lambda i: np.array([None] * _numeric_length(), dtype=object), "invalid",
     "actions", False),
    ("payload/numeric-out-of-range", "r1", lambda i: np.full(_numeric_length(), 999, np.int64), "invalid", "",
     False),
    ("payload/numeric-negative", "r1", lambda i: np.full(_numeric_length(), -1, np.int64), "invalid", "", False),
    ("payload/numeric-zeros", "r1", lambda i: np.zeros(_numeric_length(), np.int64), "any", "", False),
    # ---- misuse of step itself (raises in both modes)
    ("step/unknown-agent", "r1", "add-agent_99", "error", "agent_99", True),
    ("step/int-agent-key", "r1", "add-int-key", "error", "", False),
    ("step/actions-list", "r1", "as-list", "error", "", False),
    ("step/actions-None", "r1", "as-None", "error", "", False),
    # ---- COM (round 2)
    ("com/valid", "r2", lambda i: S({"type": "COM", "target_id": i.feed}), "valid", "", False),
    ("com/np-int-target", "r2", lambda i: S({"type": "COM", "target_id": np.int64(i.feed)}), "valid", "", False),
    ("com/topic-override", "r2", lambda i: S({"type": "COM", "target_id": i.feed, "topic": "music"}), "valid", "",
     False),
    ("com/target-missing", "r2", lambda i: S({"type": "COM"}), "invalid", "target_id", False),
    ("com/target-None", "r2", lambda i: S({"type": "COM", "target_id": None}), "invalid", "target_id", False),
    ("com/target-string", "r2", lambda i: S({"type": "COM", "target_id": str(i.feed)}), "invalid", "target_id",
     False),
    ("com/target-float", "r2", lambda i: S({"type": "COM", "target_id": float(i.feed)}), "invalid", "target_id",
     False),
    ("com/target-bool", "r2", lambda i: S({"type": "COM", "target_id": True}), "invalid", "target_id", False),
    ("com/target-negative", "r2", lambda i: S({"type": "COM", "target_id": -1}), "invalid", "target_id", True),
    ("com/target-huge", "r2", lambda i: S({"type": "COM", "target_id": 10**6}), "invalid", "target_id", False),
    ("com/target-2**70", "r2", lambda i: S({"type": "COM", "target_id": 2**70}), "invalid", "target_id", False),
    ("com/target-own-post", "r2", lambda i: S({"type": "COM", "target_id": i.own}), "invalid", "target_id", True),
    ("com/target-a-DM", "r3", lambda i: S({"type": "COM", "target_id": i.dm_in}), "invalid", "target_id", False),
    ("com/topic-999", "r2", lambda i: S({"type": "COM", "target_id": i.feed, "topic": 999}), "invalid", "topic",
     False),
    ("com/topic-surrogate", "r2", lambda i: S({"type": "COM", "target_id": i.feed, "topic": "\ud800"}), "invalid",
     "topic", False),
    ("com/stray-recipient", "r2", lambda i: S({"type": "COM", "target_id": i.feed, "recipient": "agent_1"}),
     "invalid", "recipient", False),
    ("com/mentions-unknown", "r2", lambda i: S({"type": "COM", "target_id": i.feed, "mentions": ["x"]}), "invalid",
     "mentions", False),
    ("com/text-surrogate", "r2", lambda i: S({"type": "COM", "target_id": i.feed, "text": "\ud83d"}), "invalid",
     "text", False),
    # ---- DM
    ("dm/valid", "r2", lambda i: S({"type": "DM", "recipient": "agent_1", "topic": "politics"}), "valid", "", False),
    ("dm/no-topic", "r2", lambda i: S({"type": "DM", "recipient": "agent_1"}), "invalid", "topic", False),
    ("dm/to-self", "r2", lambda i: S({"type": "DM", "recipient": "agent_0", "topic": "a"}), "invalid", "recipient",
     True),
    ("dm/unknown-recipient", "r2", lambda i: S({"type": "DM", "recipient": "agent_9", "topic": "a"}), "invalid",
     "recipient", False),
    ("dm/recipient-None", "r2", lambda i: S({"type": "DM", "recipient": None, "topic": "a"}), "invalid", "recipient",
     False),
    ("dm/recipient-int", "r2", lambda i: S({"type": "DM", "recipient": 1, "topic": "a"}), "invalid", "recipient",
     False),
    ("dm/recipient-list", "r2", lambda i: S({"type": "DM", "recipient": ["agent_1"], "topic": "a"}), "invalid",
     "recipient", False),
    ("dm/recipient-empty", "r2", lambda i: S({"type": "DM", "recipient": "", "topic": "a"}), "invalid", "recipient",
     False),
    ("dm/recipient-uppercase", "r2", lambda i: S({"type": "DM", "recipient": "AGENT_1", "topic": "a"}), "invalid",
     "recipient", False),
    ("dm/stray-mentions", "r2", lambda i: S({"type": "DM", "recipient": "agent_1", "topic": "a",
                                             "mentions": ["agent_2"]}), "invalid", "mentions", False),
    ("dm/reply-to-a-post", "r2", lambda i: S({"type": "DM", "recipient": "agent_1", "target_id": i.feed}), "invalid",
     "target_id", False),
    ("dm/reply-valid", "r3", lambda i: S({"type": "DM", "recipient": "agent_2", "target_id": i.dm_in}), "valid", "",
     False),
    ("dm/reply-wrong-recipient", "r3", lambda i: S({"type": "DM", "recipient": "agent_1", "target_id": i.dm_in}),
     "invalid", "target_id", True),
    ("dm/reply-not-addressed-to-me", "r3", lambda i: S({"type": "DM", "recipient": "agent_1",
                                                         "target_id": i.dm_out}), "invalid", "target_id", False),
    ("dm/reply-string-id", "r3", lambda i: S({"type": "DM", "recipient": "agent_2", "target_id": str(i.dm_in)}),
     "invalid", "target_id", False),
    # ---- NOT
    ("not/valid", "r2", lambda i: S({"type": "NOT"}), "valid", "", False),
    ("not/lowercase", "r2", lambda i: S({"type": "not"}), "valid", "", False),
    ("not/empty-text", "r2", lambda i: S({"type": "NOT", "text": ""}), "valid", "", False),
    ("not/stray-topic", "r2", lambda i: S({"type": "NOT", "topic": "x"}), "invalid", "topic", False),
    ("not/stray-text", "r2", lambda i: S({"type": "NOT", "text": "hi"}), "invalid", "text", False),
    # ---- votes (round 1 vote phase)
    ("vote/valid", "r1v", lambda i: {"votes": {i.vote: 1}}, "valid", "", False),
    ("vote/zero", "r1v", lambda i: {"votes": {i.vote: 0}}, "valid", "", False),
    ("vote/string-key", "r1v", lambda i: {"votes": {str(i.vote): -1}}, "valid", "", False),
    ("vote/padded-key", "r1v", lambda i: {"votes": {f" {i.vote} ": 1}}, "valid", "", False),
    ("vote/np-int-value", "r1v", lambda i: {"votes": {i.vote: np.int8(1)}}, "valid", "", False),
    ("vote/duplicate-same", "r1v", lambda i: {"votes": {i.vote: 1, str(i.vote): 1}}, "valid", "", False),
    ("vote/duplicate-conflicting", "r1v", lambda i: {"votes": {i.vote: 1, str(i.vote): -1}}, "invalid", "votes",
     True),
    ("vote/duplicate-conflicting-padded", "r1v", lambda i: {"votes": {str(i.vote): 1, f" {i.vote}": -1}},
     "invalid", "votes", False),
    ("vote/value-2", "r1v", lambda i: {"votes": {i.vote: 2}}, "invalid", "votes", True),
    ("vote/value-minus-2", "r1v", lambda i: {"votes": {i.vote: -2}}, "invalid", "votes", False),
    ("vote/value-half", "r1v", lambda i: {"votes": {i.vote: 0.5}}, "invalid", "votes", False),
    ("vote/value-string", "r1v", lambda i: {"votes": {i.vote: "1"}}, "invalid", "votes", False),
    ("vote/value-bool", "r1v", lambda i: {"votes": {i.vote: True}}, "invalid", "votes", False),
    ("vote/value-None", "r1v", lambda i: {"votes": {i.vote: None}}, "invalid", "votes", False),
    ("vote/value-nan", "r1v", lambda i: {"votes": {i.vote: float("nan")}}, "invalid", "votes", False),
    ("vote/value-inf", "r1v", lambda i: {"votes": {i.vote: float("inf")}}, "invalid", "votes", False),
    ("vote/value-list", "r1v", lambda i: {"votes": {i.vote: [1]}}, "invalid", "votes", False),
    ("vote/value-float-one", "r1v", lambda i: {"votes": {i.vote: 1.0}}, "any", "votes", False),
    ("vote/unknown-id", "r1v", lambda i: {"votes": {999: 1}}, "invalid", "votes", False),
    ("vote/own-item", "r1v", lambda i: {"votes": {i.own: 1}}, "invalid", "votes", True),
    ("vote/key-word", "r1v", lambda i: {"votes": {"abc": 1}}, "invalid", "votes", False),
    ("vote/key-None", "r1v", lambda i: {"votes": {None: 1}}, "invalid", "votes", False),
    ("vote/key-float", "r1v", lambda i: {"votes": {1.5: 1}}, "invalid", "votes", False),
    ("vote/key-bool", "r1v", lambda i: {"votes": {True: 1}}, "invalid", "votes", False),
    ("vote/key-2**70", "r1v", lambda i: {"votes": {2**70: 1}}, "invalid", "votes", False),
    ("vote/key-hex", "r1v", lambda i: {"votes": {"0x1": 1}}, "invalid", "votes", False),
    ("vote/key-arabic-digit", "r1v", lambda i: {"votes": {"١": 1}}, "invalid", "votes", False),
    ("vote/key-tuple", "r1v", lambda i: {"votes": {(1, 2): 1}}, "invalid", "votes", False),
    ("vote/10000-unknown", "r1v", lambda i: {"votes": {k: 1 for k in range(100, 10_100)}}, "invalid", "votes", False),
    ("vote/votes-None", "r1v", lambda i: {"votes": None}, "valid", "", False),
    ("vote/votes-list", "r1v", lambda i: {"votes": [i.vote]}, "invalid", "votes", False),
    ("vote/votes-string", "r1v", lambda i: {"votes": "all"}, "invalid", "votes", False),
    ("vote/extra-key", "r1v", lambda i: {"votes": {}, "x": 1}, "invalid", "x", False),
    ("vote/payload-None", "r1v", lambda i: None, "invalid", "votes", False),
    ("vote/act-payload-in-vote-phase", "r1v", lambda i: S(FILL), "invalid", "votes", False),
    ("vote/agent-missing", "r1v", "drop-agent_0", "invalid", "votes", False),
    ("vote/numeric-wrong-shape", "r1v", lambda i: np.zeros(2, np.int64), "invalid", "votes", False),
    ("vote/numeric-code-3", "r1v", lambda i: _vote_vector(3), "invalid", "votes", False),
    ("vote/previous-round-item", "r2v", lambda i: {"votes": {i.feed: 1}}, "invalid", "votes", False),
    ("vote/unknown-agent", "r1v", "add-agent_99", "error", "agent_99", False),
]


def _numeric_length() -> int:
    env = feed_env()
    return int(env.layout.length)


def _vote_vector(code: int) -> np.ndarray:
    env = feed_env()
    vec = np.ones(env.layout.length, np.int64)
    vec[env.layout.act_length:] = code
    return vec


def _build_actions(env, obs, build) -> dict:
    actions = baseline(env, obs)
    if build == "drop-agent_0":
        del actions["agent_0"]
    elif build == "add-agent_99":
        actions["agent_99"] = actions["agent_1"]
    elif build == "add-int-key":
        actions[5] = actions["agent_1"]
    elif build == "as-list":
        return list(actions.values())
    elif build == "as-None":
        return None
    else:
        actions["agent_0"] = build(Ids(env, obs))
    return actions


def _created_by_agent_0(env, before_fingerprint) -> int | None:
    """Items agent_0 created in the step just taken (act phase only)."""
    n_before = before_fingerprint.get("n_content") if isinstance(before_fingerprint, dict) else None
    if n_before is None or before_fingerprint.get("phase") != "act":
        return None
    author = np.asarray(env.content.column("author"))[n_before:len(env.content)]
    return int((author == 0).sum())


def _encodable(obs) -> str | None:
    try:
        json.dumps(canon(obs), ensure_ascii=False).encode("utf-8")
    except (UnicodeEncodeError, TypeError, ValueError) as exc:
        return describe(exc)
    return None


def action_case(stage: str, build, expect: str, field_name: str, mode: str) -> Callable[[Ctx], tuple[str, str]]:
    def run(ctx: Ctx) -> tuple[str, str]:
        env, obs = at_stage(stage, mode)
        ref, ref_obs = at_stage(stage, mode)
        actions = _build_actions(env, obs, build)
        before = fingerprint(env)
        try:
            out = env.step(actions)
        except ProbeTimeout:
            raise
        except Exception as exc:  # noqa: BLE001
            if expect == "valid":
                raise Bad(f"valid input refused: {describe(exc)}{where(exc)}")
            if mode == "lenient" and expect == "invalid":
                raise Bad(f"lenient mode raised {describe(exc)}{where(exc)}")
            names = [field_name] if field_name else []
            if expect in ("invalid", "any"):
                names.append("agent_0")
            result = expect_clear(exc, (ValueError, TypeError) if expect == "error" else (ValueError,), names)
            if fingerprint(env) != before:
                raise Bad(f"state changed by the failed step ({describe(exc)})")
            try:
                if play_out(env, obs) != play_out(ref, ref_obs):
                    raise Bad("after the error the episode differs from one that never saw the action "
                              f"({describe(exc)})")
            except Bad:
                raise
            except Exception as exc2:  # noqa: BLE001
                raise Bad(f"env broken after the error: next valid step raised {describe(exc2)}{where(exc2)}")
            return result
        obs2, rewards, terms, truncs, infos = out
        created = _created_by_agent_0(env, before)
        if expect == "error":
            raise Bad("bad step() call accepted without an error")
        problem = _encodable(obs2)
        if problem:
            raise Bad(f"accepted text that cannot be encoded: {problem}")
        record = (infos.get("agent_0") or {}).get("invalid") or []
        try:
            play_out(env, obs2)
        except Exception as exc:  # noqa: BLE001
            raise Bad(f"env broken by the accepted step: next valid step raised {describe(exc)}{where(exc)}")
        verdict = accepted_or_recorded(record, expect, mode)
        if verdict is not None:
            return verdict
        bad_slots = {r.get("slot") for r in record if isinstance(r, dict) and r.get("slot") is not None}
        n_actions = env.config.n_actions
        if bad_slots and created is not None and created > n_actions - len(bad_slots):
            raise Bad(f"invalid slot(s) {sorted(bad_slots)} were stored anyway ({created} items by agent_0)")
        text = json.dumps(record, default=str)
        if field_name and field_name not in text:
            raise Bad(f"the record does not name {field_name!r}: {one_line(text, 200)}")
        return FALLBACK, one_line(text, 240)
    return run


for _name, _stage, _build, _expect, _field, _quick in ACTION_CASES:
    for _mode in ("strict", "lenient"):
        case("actions", f"{_mode}/{_name}", action_case(_stage, _build, _expect, _field, _mode),
             quick=_quick and (_mode == "strict" or _name in ("post/topic-int-999", "vote/duplicate-conflicting")))


# =============================================================================== 2. env API
def _raises_clear(fn: Callable[[], Any], types: tuple, names: Sequence[str] = ()) -> tuple[str, str]:
    try:
        value = fn()
    except ProbeTimeout:
        raise
    except Exception as exc:  # noqa: BLE001
        return expect_clear(exc, types, names)
    raise Bad(f"no error; returned {one_line(repr(value), 120)}")


def _ok(fn: Callable[[], Any]) -> tuple[str, str]:
    try:
        fn()
    except ProbeTimeout:
        raise
    except Exception as exc:  # noqa: BLE001
        raise Bad(f"valid use refused: {describe(exc)}{where(exc)}")
    return HANDLED, "works"


MISUSE = (ValueError, TypeError, RuntimeError, KeyError)

for _seed, _expect in [(-1, "error"), (1.5, "error"), ("x", "error"), (True, "error"), ([1], "error"),
                       (float("nan"), "error"), (2**70, "ok"), (np.int64(3), "ok"), (None, "ok"), (0, "ok")]:
    def _reset_case(ctx, seed=_seed, expect=_expect):
        env = feed_env()
        if expect == "ok":
            return _ok(lambda: play_out(env, env.reset(seed=seed)[0]))
        return _raises_clear(lambda: env.reset(seed=seed), MISUSE, ["seed"])
    case("env", f"reset(seed={_seed!r})", _reset_case, quick=_seed in (-1, 2**70))


_BEFORE_RESET = {
    "tie_matrix()": lambda e: e.tie_matrix(),
    "network_metrics()": lambda e: e.network_metrics(),
    "exposure_metrics()": lambda e: e.exposure_metrics(),
    "topic_entropy()": lambda e: e.topic_entropy(),
    "intervention_stats()": lambda e: e.intervention_stats(),
    "round_transcript()": lambda e: e.round_transcript(),
    "step()": lambda e: e.step({}),
    "step_arrays()": lambda e: e.step_arrays(np.zeros((3, e.layout.length), np.int64)),
}
for _what, _fn in _BEFORE_RESET.items():
    def _before_reset(ctx, fn=_fn, must_raise=_what.startswith("step")):
        """A clear error naming reset(); a metric may instead return a value (an empty graph)."""
        env = feed_env()
        try:
            value = fn(env)
        except ProbeTimeout:
            raise
        except Exception as exc:  # noqa: BLE001
            return expect_clear(exc, (RuntimeError, ValueError), ["reset"])
        if must_raise:
            raise Bad(f"no error; returned {one_line(repr(value), 120)}")
        return HANDLED, f"returns {one_line(repr(value), 80)}"
    case("env", f"before reset: {_what}", _before_reset, quick=_what in ("tie_matrix()", "network_metrics()"))


def _render_before_reset(ctx):
    import socialgym
    env = socialgym.parallel_env(**ENV_BASE, render_mode="ansi")
    try:
        env.render()
    except ProbeTimeout:
        raise
    except Exception as exc:  # noqa: BLE001
        return expect_clear(exc, (RuntimeError,), ["reset"])
    return HANDLED, "render before reset returns"


case("env", "before reset: render()", _render_before_reset)


def _ended_env():
    env = feed_env()
    obs, _ = env.reset(seed=0)
    play_out(env, obs)
    return env, obs


case("env", "after the episode: step()", lambda ctx: _raises_clear(
    lambda: (lambda e: e[0].step(baseline(e[0], e[1])))(_ended_env()), (RuntimeError,), ["reset"]), quick=True)
case("env", "after the episode: step({})", lambda ctx: _raises_clear(
    lambda: _ended_env()[0].step({}), (RuntimeError,), ["reset"]))
case("env", "after the episode: step_arrays()", lambda ctx: _raises_clear(
    lambda: (lambda e: e.step_arrays(np.zeros((3, e.layout.length), np.int64)))(_ended_env()[0]), (RuntimeError,),
    ["reset"]))
case("env", "after the episode: metrics and reset", lambda ctx: _ok(
    lambda: (lambda e: (e.tie_matrix(), e.network_metrics(), e.exposure_metrics(),
                        play_out(e, e.reset(seed=1)[0])))(_ended_env()[0])))
case("env", "step_arrays wrong shape", lambda ctx: _raises_clear(
    lambda: (lambda e: e.step_arrays(np.zeros((2, 3), np.int64)))(at_stage("r1")[0]), (ValueError,),
    ["step_arrays"]))
case("env", "step_arrays float matrix", lambda ctx: _raises_clear(
    lambda: (lambda e: e.step_arrays(np.zeros((3, e.layout.length))))(at_stage("r1")[0]), (ValueError,),
    ["step_arrays"]))
case("env", "action_space(unknown agent)", lambda ctx: _raises_clear(
    lambda: feed_env().action_space("agent_99"), (KeyError, ValueError), ["agent_99"]))
case("env", "observation_space(unknown agent)", lambda ctx: _raises_clear(
    lambda: feed_env().observation_space("nobody"), (KeyError, ValueError), ["nobody"]))
case("env", "render_mode bogus", lambda ctx: _raises_clear(
    lambda: feed_env(render_mode="bogus"), (ValueError,), ["render_mode"]))

# constructor keywords (the Python API's config errors)
ENV_KWARG_CASES = [
    ({"n_agents": 1}, "n_agents"), ({"n_agents": 0}, "n_agents"), ({"n_agents": -3}, "n_agents"),
    ({"n_agents": 10**12}, "n_agents"), ({"n_agents": 2.5}, "n_agents"), ({"n_agents": "3"}, "n_agents"),
    ({"n_agents": True}, "n_agents"), ({"n_agents": None}, "n_agents"), ({"n_actions": 0}, "n_actions"),
    ({"n_actions": 10**6}, "n_actions"), ({"max_rounds": 0}, "max_rounds"), ({"max_rounds": 10**12}, "max_rounds"),
    ({"feed_size": 0}, "feed_size"), ({"feed_size": 10**9}, "feed_size"), ({"vote_feed_size": -1}, "vote_feed_size"),
    ({"dm_inbox_size": "x"}, "dm_inbox_size"), ({"max_topics": 0}, "max_topics"), ({"topics": "climate"}, "topics"),
    ({"topics": [1, 2]}, "topics"), ({"topics": ["a", "A"]}, "topics"),
    ({"topics": ["x" * 100]}, "topics"), ({"topics": ["a\x00b"]}, "topics"), ({"topics": ["\ud800"]}, "topics"),
    ({"topics": [None]}, "topics"), ({"topics": ["t"] * 2000}, "topics"), ({"recommender": "nope"}, "recommender"),
    ({"recommender": 5}, "recommender"), ({"recommender": "chronological", "recommender_kwargs": {"x": 1}}, ""),
    ({"rerank": [{"kind": "nope"}]}, "rerank"), ({"rerank": [{"n": 3}]}, "rerank"), ({"rerank": 5}, "rerank"),
    ({"rerank": [{"kind": "random_replacement", "n": -1}]}, ""), ({"invalid_actions": "maybe"}, "invalid_actions"),
    ({"obs_format": "xml"}, "obs_format"), ({"half_life": -1}, "half_life"), ({"half_life": float("nan")}, "half_life"),
    ({"xi": 1.5}, "xi"), ({"b_soc": 2}, "b_soc"), ({"b_emo": float("inf")}, "b_emo"), ({"eps": 0}, "eps"),
    ({"lambdas": [1, 0, 0, 0, 0.5]}, "lambdas"), ({"lambdas": [float("nan"), 0, 0, 0, 1]}, "lambdas"),
    ({"lambdas": "x"}, "lambdas"), ({"lambdas": {"agent_99": [1, 0, 0, 0, 0]}}, "lambdas"),
    ({"evidence_weights": {"nov": -1}}, "evidence_weights"), ({"evidence_weights": {"foo": 1}}, "evidence_weights"),
    ({"evidence_weights": "x"}, "evidence_weights"), ({"tie_scorer": "nope"}, "tie_scorer"),
    ({"sentiment": "happy"}, "sentiment"), ({"max_text_chars": -1}, "max_text_chars"),
    ({"soc_strategy": 1}, "soc_strategy"), ({"agent_groups": ["a"]}, "agent_groups"),
    ({"agent_groups": "abc"}, "agent_groups"), ({"seed_graph": "x"}, "seed_graph"),
    ({"exposure_window": 0}, "exposure_window"), ({"cocoon_threshold": -1}, "cocoon_threshold"),
    ({"action_masks": "no"}, "action_masks"), ({"seed": -1}, "seed"), ({"seed": "x"}, "seed"),
    ({"agent_interests": "x"}, ""), ({"no_such_key": 1}, "no_such_key"),
]
ENV_KWARG_VALID = [{"topics": []}, {"topics": ["only"]}, {"n_agents": 2}, {"max_rounds": 1}, {"n_actions": 1},
                   {"seed": 2**70}, {"feed_size": 1, "vote_feed_size": 1}, {"topics": ["café", "日本"]}]
for _kw, _key in ENV_KWARG_CASES:
    def _ctor_case(ctx, kw=_kw, key=_key):
        import socialgym
        return _raises_clear(lambda: socialgym.parallel_env(**{**ENV_BASE, **kw}), (ValueError, TypeError),
                             [key] if key else [])
    case("env", f"parallel_env({one_line(repr(_kw), 60)})", _ctor_case, quick=_kw == {"n_agents": 10**12})
for _kw in ENV_KWARG_VALID:
    def _ctor_valid(ctx, kw=_kw):
        import socialgym

        def go():
            env = socialgym.parallel_env(**{**ENV_BASE, **kw})
            play_out(env, env.reset(seed=0)[0])
        return _ok(go)
    case("env", f"parallel_env({one_line(repr(_kw), 60)}) is valid", _ctor_valid, quick=_kw == {"topics": []})


# ---- faults in user components: the step must be atomic
class FaultyRecommender:
    """Wraps a registered recommender; raises (or returns garbage) at a chosen point."""

    def __init__(self, inner: str, point: str | None = None, garbage: str | None = None) -> None:
        from socialgym.recommenders import make_recommender
        self.inner = make_recommender(inner)
        self.point, self.garbage = point, garbage
        self.armed = True
        self.name = f"faulty-{inner}"

    def recommend(self, request, rng):
        ids = self.inner.recommend(request, rng)
        if self.armed and self.point == request.phase:
            if self.garbage is None:
                raise RuntimeError("probe: recommender failed")
            ids = np.asarray(ids)
            if self.garbage == "float":
                return ids.astype(float)
            if self.garbage == "shape":
                return ids[:1]
            if self.garbage == "own":
                authors = request.content.column("author")
                own = np.flatnonzero(np.asarray(authors)[: len(request.content)] == 0)
                ids = ids.copy()
                ids[0, 0] = own[0] if len(own) else 0
                return ids
            if self.garbage == "duplicate":
                ids = ids.copy()
                ids[:, 1] = ids[:, 0]
                return ids
            if self.garbage == "outside":
                ids = ids.copy()
                ids[0, 0] = 10**6
                return ids
            if self.garbage == "minus-5":
                ids = ids.copy()
                ids[0, 0] = -5
                return ids
        return ids

    def update(self, content, batch, rng):
        self.inner.update(content, batch, rng)
        if self.armed and self.point == "update":
            raise RuntimeError("probe: recommender update failed")

    def reset(self):
        self.inner.reset()

    def state_dict(self):
        return self.inner.state_dict()

    def load_state_dict(self, state):
        self.inner.load_state_dict(state)


class FaultyTieScorer:
    def __init__(self, kind: str) -> None:
        from socialgym.config import DEFAULT_EVIDENCE_WEIGHTS
        from socialgym.ties import make_tie_scorer
        self.inner = make_tie_scorer(None, dict(DEFAULT_EVIDENCE_WEIGHTS))
        self.kind = kind
        self.armed = True

    def score(self, signals, context=None):
        value = np.asarray(self.inner.score(signals, context), dtype=float)
        if not self.armed:
            return value
        if self.kind == "raise":
            raise RuntimeError("probe: tie scorer failed")
        if self.kind == "nan":
            return np.full_like(value, np.nan)
        if self.kind == "two":
            return np.full_like(value, 2.0)
        if self.kind == "shape":
            return value[:-1] if len(value) else np.zeros(3)
        return value


class FaultySentiment:
    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.armed = True

    def __call__(self, text: str):
        if not self.armed:
            return 0.1
        return {"raise": lambda: (_ for _ in ()).throw(RuntimeError("probe: sentiment failed")),
                "nan": lambda: float("nan"), "five": lambda: 5.0, "string": lambda: "positive"}[self.kind]()


def fault_case(make_component: Callable[[], Any], keyword: str, stage: str, expect: str,
               names: Sequence[str] = ()) -> Callable[[Ctx], tuple[str, str]]:
    """Step at ``stage`` with a component that fails; the env must be unchanged, and once the
    fault is gone the episode must equal one that never saw it."""
    def run(ctx: Ctx) -> tuple[str, str]:
        comp, ref_comp = make_component(), make_component()
        ref_comp.armed = False
        env, obs = _stage_with(stage, keyword, comp)
        ref, ref_obs = _stage_with(stage, keyword, ref_comp)
        before = fingerprint(env)
        try:
            env.step(baseline(env, obs))
        except ProbeTimeout:
            raise
        except Exception as exc:  # noqa: BLE001
            if expect == "clear":
                outcome = expect_clear(exc, (ValueError,), names)
            else:
                outcome = (HANDLED, f"the component's {describe(exc)} passed through; state restored")
            if fingerprint(env) != before:
                raise Bad(f"state changed by the failed step ({describe(exc)})")
            comp.armed = False
            try:
                if play_out(env, obs) != play_out(ref, ref_obs):
                    raise Bad("after the fault the episode differs from one without it (step not atomic)")
            except Bad:
                raise
            except Exception as exc2:  # noqa: BLE001
                raise Bad(f"env broken after the fault: {describe(exc2)}{where(exc2)}")
            return outcome
        raise Bad("the fault was swallowed: the step returned normally")
    return run


def _stage_with(stage: str, keyword: str, comp: Any):
    armed = getattr(comp, "armed", True)
    comp.armed = False                      # no fault while reaching the stage
    env, obs = at_stage(stage, **{keyword: comp})
    comp.armed = armed
    return env, obs


for _inner in ("chronological", "random", "popularity", "mf"):
    for _point, _stage in (("vote", "r2"), ("act", "r2v"), ("update", "r2v")):
        case("env", f"recommender {_inner} raises ({_point} list)" if _point != "update"
             else f"recommender {_inner} raises in update()",
             fault_case(lambda i=_inner, p=_point: FaultyRecommender(i, p), "recommender", _stage, "handled"),
             quick=_inner == "chronological" and _point == "act")
for _garbage in ("float", "shape", "own", "duplicate", "outside", "minus-5"):
    case("env", f"recommender returns {_garbage} ids",
         fault_case(lambda g=_garbage: FaultyRecommender("chronological", "act", garbage=g), "recommender", "r2v",
                    "clear", ["recommender"]))
for _kind in ("raise", "nan", "two", "shape"):
    case("env", f"tie scorer {_kind}", fault_case(lambda k=_kind: FaultyTieScorer(k), "tie_scorer", "r1v",
                                                  "handled" if _kind == "raise" else "clear", ["tie scorer"]),
         quick=_kind == "raise")
for _kind in ("raise", "nan", "five", "string"):
    case("env", f"sentiment scorer {_kind}", fault_case(lambda k=_kind: FaultySentiment(k), "sentiment", "r1",
                                                        "handled" if _kind == "raise" else "clear", ["sentiment"]))


# ---- discussion env
def discussion(mode: str = "strict", **extra):
    from socialgym.envs import discussion_v0
    env = discussion_v0.raw_env(n_users=3, max_turns=4, invalid_actions=mode, seed=0, **extra)
    env.reset(seed=0)
    return env


def disc_fingerprint(env) -> Any:
    return canon({"turn": env.turn, "n": len(env.store), "sel": env.agent_selection, "log": env.turn_log,
                  "rng": env.rng.bit_generator.state, "warnings": env.warnings, "banned": env.banned,
                  "active": env.active, "rewards": env._cumulative_rewards, "history": env.history})


def disc_play_out(env) -> Any:
    k = 0
    while env.agents and k < 20:
        agent = env.agent_selection
        done = env.terminations.get(agent) or env.truncations.get(agent)
        env.step(None if done else ("" if agent == env.moderator else f"comment {k}"))
        k += 1
    return disc_fingerprint(env)


DISCUSSION_CASES = [
    # (name, who: user|moderator, action, expect, field)
    ("user/text", "user", "hello there", "valid", ""),
    ("user/empty string (pass)", "user", "", "valid", ""),
    ("user/None", "user", None, "invalid", "action"),
    ("user/dict text", "user", {"text": "hi", "mentions": ["user_1"]}, "valid", ""),
    ("user/text int", "user", 5, "invalid", "action"),
    ("user/dict text int", "user", {"text": 5}, "invalid", "text"),
    ("user/mention unknown", "user", {"text": "hi", "mentions": ["nobody"]}, "invalid", "mentions"),
    ("user/mention unknown, empty text", "user", {"text": "", "mentions": ["nobody"]}, "invalid", "mentions"),
    ("user/mention int", "user", {"text": "hi", "mentions": [5]}, "invalid", "mentions"),
    ("user/mention None", "user", {"text": "hi", "mentions": [None]}, "invalid", "mentions"),
    ("user/mention string", "user", {"text": "hi", "mentions": "user_1"}, "any", "mentions"),
    ("user/unknown key", "user", {"text": "hi", "foo": 1}, "invalid", "action"),
    ("user/lone surrogate", "user", "hi \ud800", "invalid", "text"),
    ("user/too long", "user", "x" * 1501, "invalid", "text"),
    ("user/10 MB", "user", "x" * 10_000_000, "invalid", "text"),
    ("user/list", "user", ["hi"], "invalid", "action"),
    ("user/bytes", "user", b"hi", "invalid", "action"),
    ("user/@mention of a non-participant in text", "user", "@nobody hello", "valid", ""),
    ("user/NUL and escapes in text", "user", "a\x00b\x1b[2J", "any", "text"),
    ("moderator/silent", "moderator", "", "valid", ""),
    ("moderator/warn index", "moderator", {"text": "", "warn": 1}, "valid", ""),
    ("moderator/warn twice", "moderator", {"warn": [1, 1]}, "valid", ""),
    ("moderator/ban nobody (0)", "moderator", {"ban": 0}, "valid", ""),
    ("moderator/warn out of range", "moderator", {"text": "", "warn": 99}, "invalid", "warn"),
    ("moderator/ban unknown name", "moderator", {"ban": "nobody"}, "invalid", "ban"),
    ("moderator/ban bool", "moderator", {"ban": True}, "invalid", "ban"),
    ("moderator/ban float", "moderator", {"ban": 1.5}, "invalid", "ban"),
    ("moderator/ban negative", "moderator", {"ban": -1}, "invalid", "ban"),
    ("moderator/text int", "moderator", {"text": 5}, "invalid", "text"),
    ("moderator/unknown key", "moderator", {"foo": 1}, "invalid", "action"),
    ("moderator/None", "moderator", None, "invalid", "action"),
    ("moderator/mention unknown", "moderator", {"text": "hi", "mentions": ["nobody"]}, "invalid", "mentions"),
]


def discussion_case(who: str, action: Any, expect: str, field_name: str, mode: str):
    def run(ctx: Ctx) -> tuple[str, str]:
        env, ref = discussion(mode), discussion(mode)
        if who == "moderator":
            for e in (env, ref):
                e.step("a first comment")
        agent = env.agent_selection
        before = disc_fingerprint(env)
        try:
            env.step(action)
        except ProbeTimeout:
            raise
        except Exception as exc:  # noqa: BLE001
            if expect == "valid":
                raise Bad(f"valid action refused: {describe(exc)}{where(exc)}")
            if mode == "lenient":
                raise Bad(f"lenient mode raised {describe(exc)}{where(exc)}")
            result = expect_clear(exc, (ValueError,), [n for n in (agent, field_name) if n])
            if disc_fingerprint(env) != before:
                raise Bad("state changed by the failed step")
            if disc_play_out(env) != disc_play_out(ref):
                raise Bad("after the error the discussion differs from one that never saw the action")
            return result
        record = (env.infos.get(agent) or {}).get("invalid") or []
        verdict = accepted_or_recorded(record, expect, mode)
        if verdict is not None:
            return verdict
        if field_name and field_name not in json.dumps(record):
            raise Bad(f"the record does not name {field_name!r}: {one_line(record, 200)}")
        return FALLBACK, one_line(json.dumps(record), 240)
    return run


for _name, _who, _action, _expect, _field in DISCUSSION_CASES:
    for _mode in ("strict", "lenient"):
        case("env", f"discussion {_mode}/{_name}", discussion_case(_who, _action, _expect, _field, _mode),
             quick=_mode == "strict" and _name in ("user/mention unknown, empty text", "moderator/ban unknown name"))

case("env", "discussion: step before reset", lambda ctx: _raises_clear(
    lambda: __import__("socialgym.envs.discussion_v0", fromlist=["raw_env"]).raw_env(n_users=3).step("hi"),
    (RuntimeError,), ["reset"]))
case("env", "discussion: reset(seed=-1)", lambda ctx: _raises_clear(lambda: discussion().reset(seed=-1),
                                                                   MISUSE, ["seed"]))
case("env", "discussion: reset(seed='x')", lambda ctx: _raises_clear(lambda: discussion().reset(seed="x"),
                                                                    MISUSE, ["seed"]))
for _kw, _key in [({"n_users": 1}, "n_users"), ({"max_turns": 0}, "max_turns"), ({"invalid_actions": "maybe"}, "invalid_actions"),
                  ({"comment_chars": -1}, "comment_chars"), ({"turn_taking": "nope"}, "turn_taking"),
                  ({"roles": {"user_9": "troll"}}, "roles"), ({"topic": ""}, "topic"), ({"bogus": 1}, "bogus")]:
    def _disc_ctor(ctx, kw=_kw, key=_key):
        from socialgym.envs import discussion_v0
        return _raises_clear(lambda: discussion_v0.raw_env(**kw), (ValueError, TypeError), [key])
    case("env", f"discussion_env({one_line(repr(_kw), 50)})", _disc_ctor)


# =============================================================================== 3. configs
BASE_CONFIG = {
    "seed": 0,
    "env": {"n_agents": 4, "max_rounds": 2, "recommender": "random", "sentiment": "tone", "feed_size": 3,
            "vote_feed_size": 3},
    "policy": {"kind": "greedy"},
    "logging": {"report": False, "progress": False},
}
DELETE = object()


def merged(base: dict, changes: Mapping) -> dict:
    """``base`` with dotted-key ``changes`` applied (DELETE removes a key)."""
    out = copy.deepcopy(base)
    for dotted, value in changes.items():
        parts = dotted.split(".") if dotted else []
        node = out
        for p in parts[:-1]:
            if not isinstance(node.get(p), dict):
                node[p] = {}
            node = node[p]
        if value is DELETE:
            node.pop(parts[-1], None)
        else:
            node[parts[-1]] = value
    return out


def config_case(source: Any, expect: str, names: Sequence[str] = (), overrides: Sequence[str] = (),
                suffix: str = ".yaml", marker: bool = False, check: Callable | None = None):
    """``source``: a dict of dotted changes to BASE_CONFIG, raw text/bytes, or a callable
    (ctx, folder) -> path. expect: "error" (exit 2, one line naming ``names``, no --out),
    "run" (exit 0, complete), "any" (either)."""
    def run(ctx: Ctx) -> tuple[str, str]:
        folder = ctx.workdir("cfg")
        mark = ctx.marker("config")
        if callable(source):
            path = source(ctx, folder)
        else:
            path = folder / f"config{suffix}"
            if isinstance(source, dict):
                text = yaml.safe_dump(merged(BASE_CONFIG, source), sort_keys=False, allow_unicode=True)
                path.write_text(text, encoding="utf-8")
            elif isinstance(source, bytes):
                path.write_bytes(source)
            else:
                path.write_text(source.replace("@MARKER@", str(mark)), encoding="utf-8", errors="surrogatepass")
        out = folder / "out"
        argv = ["run", str(path), "--out", str(out), "--quiet"]
        for item in overrides:
            argv += ["--set", item]
        res = cli(argv)
        if marker:
            check_marker(mark)
        if res.exc is not None:
            raise Bad(f"traceback: {describe(res.exc)}{where(res.exc)}")
        if res.rc == 0:
            if expect == "error":
                raise Bad(f"bad config accepted: the run completed ({one_line(res.stdout, 120)})")
            summary = out / "summary.json"
            if summary.exists():
                status = json.loads(summary.read_text()).get("status")
                if status != "complete":
                    raise Bad(f"exit 0 but summary status {status!r}")
            elif not (out / "sweep.json").exists():
                raise Bad("exit 0 but no summary.json or sweep.json")
            if check is not None:
                check(out)
            return HANDLED, f"ran ({res.seconds:.1f} s)"
        if expect == "run":
            lines = res.lines()
            raise Bad(f"valid config refused: exit {res.rc}: {one_line(lines[-1] if lines else '', 200)}")
        return cli_clear(res, names, out=out)
    return run


def _no_secret_on_disk(out: Path) -> None:
    hits = files_containing(out, SECRET)
    if hits:
        raise Bad(f"the API key is on disk in {hits}")


def _billion_laughs(levels: int = 9, width: int = 9) -> str:
    lines = ['a0: &a0 "lol"']
    for i in range(1, levels + 1):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]")
    lines.append("env: {n_agents: 4}")
    return "\n".join(lines) + "\n"


def _persona_file(name: str, content: Any):
    def make(ctx: Ctx, folder: Path) -> Path:
        pfile = folder / name
        if content == "DIR":
            pfile.mkdir()
        elif isinstance(content, bytes):
            pfile.write_bytes(content)
        elif isinstance(content, str):
            pfile.write_text(content, encoding="utf-8")
        elif content is not None:
            pfile.write_text(json.dumps(content), encoding="utf-8")
        path = folder / "config.yaml"
        path.write_text(yaml.safe_dump(merged(BASE_CONFIG, {"personas": name})), encoding="utf-8")
        return path
    return make


VALID_PERSONAS = [{"name": f"P{i}", "description": "a probe persona"} for i in range(4)]
RNG_BYTES = random.Random(0).randbytes(4096)

CONFIG_CASES: list[tuple] = [
    # (name, source, expect, names, overrides, quick)
    ("top/unknown key", {"colour": "blue"}, "error", ["colour"], (), True),
    ("top/seed -1", {"seed": -1}, "error", ["seed"], (), False),
    ("top/seed string", {"seed": "x"}, "error", ["seed"], (), False),
    ("top/seed float", {"seed": 1.5}, "error", ["seed"], (), False),
    ("top/seed bool", {"seed": True}, "error", ["seed"], (), False),
    ("top/seed 2**70", {"seed": 2**70}, "error", ["seed"], (), False),
    ("top/seed null", {"seed": None}, "error", ["seed"], (), False),
    ("top/section a list", {"env": [1, 2]}, "error", ["env"], (), False),
    ("top/section a scalar", {"policy": 5}, "error", ["policy"], (), False),
    # ---- the file itself
    ("file/empty", "", "error", [], (), True),
    ("file/only a comment", "# nothing here\n", "error", [], (), False),
    ("file/null document", "null\n", "error", [], (), False),
    ("file/a list", "- 1\n- 2\n", "error", [], (), False),
    ("file/a scalar", "5\n", "error", [], (), False),
    ("file/binary", RNG_BYTES, "error", [], (), True),
    ("file/NUL bytes", b"env:\n  n_agents: 4\x00\x00\n", "error", [], (), False),
    ("file/UTF-16 with BOM", yaml.safe_dump(BASE_CONFIG).encode("utf-16"), "any", [], (), False),
    ("file/UTF-8 with BOM", b"\xef\xbb\xbf" + yaml.safe_dump(BASE_CONFIG).encode(), "any", [], (), False),
    ("file/Latin-1 bytes", yaml.safe_dump(BASE_CONFIG).encode() + b"# caf\xe9\n", "error", [], (), False),
    ("file/tab indentation", "env:\n\tn_agents: 4\n", "error", [], (), False),
    ("file/unclosed brace", "env: {n_agents: 4\n", "error", [], (), False),
    ("file/duplicate top-level key", yaml.safe_dump(BASE_CONFIG) + "seed: 5\n", "error", ["seed"], (), True),
    ("file/duplicate nested key", "env:\n  n_agents: 4\n  max_rounds: 2\n  n_agents: 6\npolicy: {kind: greedy}\n",
     "error", ["n_agents"], (), False),
    ("file/billion laughs (9x9)", _billion_laughs(), "error", [], (), True),
    ("file/alias bomb inside env.topics", "env:\n  n_agents: 4\n  topics:\n"
     + "".join(f"    - &l{i} [" + ", ".join([f"*l{i - 1}" if i else "lol"] * 12) + "]\n" for i in range(6)),
     "error", [], (), False),
    ("file/recursive alias", "a: &a [*a]\n", "error", [], (), False),
    ("file/nested 10000 deep", "x: " + "[" * 10_000 + "]" * 10_000 + "\n", "error", [], (), False),
    ("file/nested maps 3000 deep", "x: " + "{a: " * 3000 + "1" + "}" * 3000 + "\n", "error", [], (), False),
    ("file/2 MB", "# " + "x" * 2_000_000 + "\n" + yaml.safe_dump(BASE_CONFIG), "error", [], (), False),
    ("file/100 kB run name", {"run.name": "n" * 100_000}, "error", ["name"], (), False),
    ("file/python object tag", "x: !!python/object/apply:os.makedirs ['@MARKER@']\n", "error", [], (), True),
    ("file/python name tag", "x: !!python/name:os.system\n", "error", [], (), False),
    ("file/custom tag", "env: !include other.yaml\n", "error", [], (), False),
    ("file/5000-digit integer", "seed: " + "1" * 5000 + "\n", "error", ["config.yaml"], (), False),
    ("file/float 1.0e999", "env: {n_agents: 4, max_rounds: 2, ties: {half_life: 1.0e999}}\npolicy: {kind: greedy}\n"
     "logging: {report: false}\n", "error", ["half_life"], (), False),
    ("file/JSON syntax", json.dumps(BASE_CONFIG), "run", [], (), False),
    ("file/CRLF line endings", yaml.safe_dump(BASE_CONFIG).replace("\n", "\r\n"), "run", [], (), False),
    ("file/no final newline", yaml.safe_dump(BASE_CONFIG).rstrip("\n"), "run", [], (), False),
    ("file/small anchors and merge key", "defaults: &d {n_agents: 4, max_rounds: 2}\n"
     "env: {<<: *d, recommender: random}\npolicy: {kind: greedy}\nlogging: {report: false}\n", "any", [], (), False),
    ("file/missing", lambda ctx, folder: folder / "missing.yaml", "error", ["missing.yaml"], (), True),
    ("file/a directory", lambda ctx, folder: folder, "error", [], (), False),
    # ---- env
    *[(f"env/n_agents {v!r}", {"env.n_agents": v}, "error", ["n_agents"], (), v == 10**12)
      for v in (0, 1, -3, 10**12, "lots", 2.5, True, None, 10_000_001)],   # past MAX_AGENTS
    ("env/n_actions 0", {"env.n_actions": 0}, "error", ["n_actions"], (), False),
    ("env/n_actions 101", {"env.n_actions": 101}, "error", ["n_actions"], (), False),
    ("env/n_actions '3'", {"env.n_actions": "3"}, "error", ["n_actions"], (), False),
    ("env/max_rounds 0", {"env.max_rounds": 0}, "error", ["max_rounds"], (), False),
    ("env/max_rounds 10**9", {"env.max_rounds": 10**9}, "error", ["max_rounds"], (), False),
    ("env/topics []", {"env.topics": []}, "any", ["topics"], (), True),
    ("env/topics [] with random agents", {"env.topics": [], "policy.kind": "random"}, "any", ["topics"], (), False),
    ("env/topics a string", {"env.topics": "climate"}, "error", ["topics"], (), False),
    ("env/topics numbers", {"env.topics": [1, 2]}, "error", ["topics"], (), False),
    ("env/topics duplicate", {"env.topics": ["a", "A"]}, "error", ["topics"], (), False),
    ("env/topics 100 chars", {"env.topics": ["x" * 100]}, "error", ["topics"], (), False),
    ("env/topics NUL", {"env.topics": ["a\x00b"]}, "error", ["topics"], (), False),
    ("env/topics null item", {"env.topics": [None]}, "error", ["topics"], (), False),
    ("env/topics null", {"env.topics": None}, "error", ["topics"], (), False),
    ("env/recommender unknown", {"env.recommender": "nope"}, "error", ["recommender"], (), True),
    ("env/recommender number", {"env.recommender": 5}, "error", ["recommender"], (), False),
    ("env/recommender null", {"env.recommender": None}, "error", ["recommender"], (), False),
    ("env/recommender upper case", {"env.recommender": "MF"}, "error", ["recommender"], (), False),
    ("env/recommender_kwargs dim 10**9", {"env.recommender": "mf", "env.recommender_kwargs": {"dim": 10**9}},
     "error", ["dim"], (), False),
    ("env/recommender_kwargs unknown", {"env.recommender": "mf", "env.recommender_kwargs": {"nope": 1}}, "error",
     ["nope"], (), False),
    ("env/recommender_kwargs for a name without any", {"env.recommender_kwargs": {"x": 1}}, "error",
     ["recommender"], (), False),
    ("env/recommender_kwargs a string", {"env.recommender_kwargs": "x"}, "error", ["recommender_kwargs"], (), False),
    ("env/rerank unknown kind", {"env.rerank": [{"kind": "nope"}]}, "error", ["rerank"], (), True),
    ("env/rerank without kind", {"env.rerank": [{"n": 3}]}, "error", ["rerank"], (), False),
    ("env/rerank a number", {"env.rerank": 5}, "error", ["rerank"], (), False),
    ("env/rerank n -1", {"env.rerank": [{"kind": "random_replacement", "n": -1}]}, "error", ["rerank"], (), False),
    ("env/rerank n 10**9", {"env.rerank": [{"kind": "random_replacement", "n": 10**9}]}, "error", ["n"], (), False),
    ("env/rerank unknown parameter", {"env.rerank": [{"kind": "random_replacement", "n": 1, "bogus": 2}]},
     "error", ["bogus"], (), False),
    ("env/feed_size 0", {"env.feed_size": 0}, "error", ["feed_size"], (), False),
    ("env/feed_size 10**9", {"env.feed_size": 10**9}, "error", ["feed_size"], (), False),
    ("env/vote_feed_size -1", {"env.vote_feed_size": -1}, "error", ["vote_feed_size"], (), False),
    ("env/dm_inbox_size 'x'", {"env.dm_inbox_size": "x"}, "error", ["dm_inbox_size"], (), False),
    ("env/max_topics 0", {"env.max_topics": 0}, "error", ["max_topics"], (), False),
    ("env/invalid_actions maybe", {"env.invalid_actions": "maybe"}, "error", ["invalid_actions"], (), False),
    ("env/obs_format set", {"env.obs_format": "numeric"}, "error", ["obs_format"], (), False),
    ("env/seed set", {"env.seed": 3}, "error", ["seed"], (), False),
    ("env/ties.half_life -1", {"env.ties": {"half_life": -1}}, "error", ["half_life"], (), False),
    ("env/ties.half_life 0", {"env.ties": {"half_life": 0}}, "error", ["half_life"], (), False),
    ("env/ties.half_life .nan", {"env.ties": {"half_life": float("nan")}}, "error", ["half_life"], (), False),
    ("env/ties.half_life .inf", {"env.ties": {"half_life": float("inf")}}, "any", ["half_life"], (), False),
    ("env/ties.xi 1.5", {"env.ties": {"xi": 1.5}}, "error", ["xi"], (), False),
    ("env/ties.delta_max -1", {"env.ties": {"delta_max": -1}}, "error", ["delta_max"], (), False),
    ("env/ties.b_rec 2", {"env.ties": {"b_rec": 2}}, "error", ["b_rec"], (), False),
    ("env/ties.evidence_weights negative", {"env.ties": {"evidence_weights": {"nov": -1}}}, "error", ["nov"], (),
     False),
    ("env/ties.evidence_weights unknown", {"env.ties": {"evidence_weights": {"foo": 1}}}, "error", ["foo"], (),
     False),
    ("env/ties.tie_scorer unknown", {"env.ties": {"tie_scorer": "nope"}}, "error", ["tie_scorer"], (), False),
    ("env/ties.tie_prune_below 5", {"env.ties": {"tie_prune_below": 5}}, "error", ["tie_prune_below"], (), False),
    ("env/ties a list", {"env.ties": [1]}, "error", ["ties"], (), False),
    ("env/ties unknown key", {"env.ties": {"foo": 1}}, "error", ["foo"], (), False),
    ("env/rewards.b_soc 2", {"env.rewards": {"b_soc": 2}}, "error", ["b_soc"], (), False),
    ("env/rewards.b_soc .nan", {"env.rewards": {"b_soc": float("nan")}}, "error", ["b_soc"], (), False),
    ("env/rewards.b_emo .inf", {"env.rewards": {"b_emo": float("inf")}}, "error", ["b_emo"], (), False),
    ("env/rewards.eps 0", {"env.rewards": {"eps": 0}}, "error", ["eps"], (), False),
    ("env/rewards.lambdas not on the simplex", {"env.rewards": {"lambdas": [1, 0, 0, 0, 0.5]}}, "error",
     ["lambdas"], (), False),
    ("env/rewards.lambdas .nan", {"env.rewards": {"lambdas": [float("nan"), 0, 0, 0, 1]}}, "error", ["lambdas"], (),
     False),
    ("env/rewards.lambdas unknown agent", {"env.rewards": {"lambdas": {"agent_99": [1, 0, 0, 0, 0]}}}, "error",
     ["lambdas"], (), False),
    ("env/rewards unknown key", {"env.rewards": {"foo": 1}}, "error", ["foo"], (), False),
    ("env/sentiment unknown", {"env.sentiment": "happy"}, "error", ["sentiment"], (), False),
    ("env/max_text_chars -1", {"env.max_text_chars": -1}, "error", ["max_text_chars"], (), False),
    ("env/max_text_chars 10**9", {"env.max_text_chars": 10**9}, "error", ["max_text_chars"], (), False),
    ("env/soc_strategy without interests", {"env.soc_strategy": 2}, "error", ["soc_strategy"], (), False),
    ("env/agent_groups wrong length", {"env.agent_groups": ["a"]}, "error", ["agent_groups"], (), False),
    ("env/seed_graph a string", {"env.ties": {"seed_graph": "x"}}, "error", ["seed_graph"], (), False),
    ("env/exposure_window 0", {"env.exposure_window": 0}, "error", ["exposure_window"], (), False),
    ("env/cocoon_threshold -1", {"env.cocoon_threshold": -1}, "error", ["cocoon_threshold"], (), False),
    ("env/exposure_in_infos 'yes'", {"env.exposure_in_infos": "yes"}, "error", ["exposure_in_infos"], (), False),
    ("env/unknown key", {"env.n_agnets": 4}, "error", ["n_agnets"], (), False),
    ("env/null section", {"env": None}, "error", ["env"], (), True),
    # ---- policy
    ("policy/kind unknown", {"policy.kind": "smart"}, "error", ["kind"], (), False),
    ("policy/kind number", {"policy.kind": 5}, "error", ["kind"], (), False),
    ("policy/kind null", {"policy.kind": None}, "error", ["kind"], (), False),
    ("policy/coach 'often'", {"policy.coach": "often"}, "error", ["coach"], (), False),
    ("policy/coach with greedy", {"policy.coach": True}, "error", ["coach"], (), False),
    ("policy/params a string", {"policy.params": "x"}, "error", ["params"], (), False),
    ("policy/params unknown for greedy", {"policy.params": {"nope": 1}}, "error", ["nope"], (), True),
    ("policy/params bad value for random", {"policy.kind": "random", "policy.params": {"mention_prob": 5}}, "any",
     ["mention_prob"], (), False),
    ("policy/groups empty", {"policy.groups": []}, "error", ["groups"], (), False),
    ("policy/groups a string", {"policy.groups": "x"}, "error", ["groups"], (), False),
    ("policy/groups item a number", {"policy.groups": [5]}, "error", ["groups"], (), False),
    ("policy/groups agents 0", {"policy.groups": [{"name": "a", "agents": 0}, {"name": "b"}]}, "error", ["agents"],
     (), False),
    ("policy/groups agents -1", {"policy.groups": [{"name": "a", "agents": -1}, {"name": "b"}]}, "error",
     ["agents"], (), False),
    ("policy/groups agents 10**12", {"policy.groups": [{"name": "a", "agents": 10**12}]}, "error", ["agents"], (),
     False),
    ("policy/groups agents 'two'", {"policy.groups": [{"name": "a", "agents": "two"}, {"name": "b"}]}, "error",
     ["agents"], (), False),
    ("policy/groups sum mismatch", {"policy.groups": [{"name": "a", "agents": 1}, {"name": "b", "agents": 1}]},
     "error", ["n_agents"], (), False),
    ("policy/groups duplicate names", {"policy.groups": [{"name": "a", "agents": 2}, {"name": "a"}]}, "error",
     ["names"], (), False),
    ("policy/groups two without agents", {"policy.groups": [{"name": "a"}, {"name": "b"}]}, "error", ["agents"], (),
     False),
    ("policy/groups name 1000 chars", {"policy.groups": [{"name": "n" * 1000}]}, "error", ["name"], (), False),
    ("policy/groups unknown key", {"policy.groups": [{"name": "a", "agnets": 4}]}, "error", ["agnets"], (), False),
    ("policy/groups lambdas bad", {"policy.groups": [{"name": "a", "lambdas": [2, 0, 0, 0, 0]}]}, "error",
     ["lambdas"], (), False),
    ("policy/torch without path", {"policy.kind": "torch"}, "error", ["path"], (), False),
    ("policy/torch missing model file", {"policy.kind": "torch", "policy.params": {"path": "/nonexistent/model.pt"}},
     "error", ["model.pt"], (), False),
    ("policy/null section", {"policy": None}, "error", ["policy"], (), False),
    # ---- llm (validated even when no agent uses it)
    ("llm/temperature .nan", {"llm": {"temperature": float("nan")}}, "error", ["temperature"], (), True),
    ("llm/temperature -1", {"llm": {"temperature": -1}}, "error", ["temperature"], (), False),
    ("llm/temperature 3", {"llm": {"temperature": 3}}, "error", ["temperature"], (), False),
    ("llm/temperature 'hot'", {"llm": {"temperature": "hot"}}, "error", ["temperature"], (), False),
    ("llm/timeout -1", {"llm": {"timeout": -1}}, "error", ["timeout"], (), True),
    ("llm/timeout 0", {"llm": {"timeout": 0}}, "error", ["timeout"], (), False),
    ("llm/timeout .inf", {"llm": {"timeout": float("inf")}}, "error", ["timeout"], (), False),
    ("llm/max_retries -1", {"llm": {"max_retries": -1}}, "error", ["max_retries"], (), False),
    ("llm/max_retries 1000", {"llm": {"max_retries": 1000}}, "error", ["max_retries"], (), False),
    ("llm/max_concurrency 0", {"llm": {"max_concurrency": 0}}, "error", ["max_concurrency"], (), False),
    ("llm/max_concurrency 10**6", {"llm": {"max_concurrency": 10**6}}, "error", ["max_concurrency"], (), False),
    ("llm/max_tokens 0", {"llm": {"max_tokens": 0}}, "error", ["max_tokens"], (), False),
    ("llm/n_ctx 1", {"llm": {"n_ctx": 1}}, "error", ["n_ctx"], (), False),
    ("llm/base_url without model", {"llm": {"base_url": "http://127.0.0.1:9/v1"}}, "error", ["model"], (), False),
    ("llm/base_url not a URL", {"llm": {"base_url": "not a url", "model": "m"}}, "any", ["base_url"], (), False),
    ("llm/structured xml", {"llm": {"structured": "xml"}}, "error", ["structured"], (), False),
    ("llm/api_key a number", {"llm": {"api_key": 5}}, "error", ["api_key"], (), False),
    ("llm/unknown key", {"llm": {"temprature": 0.1}}, "error", ["temprature"], (), False),
    ("llm/a string", {"llm": "gpt"}, "error", ["llm"], (), False),
    ("llm/null section", {"llm": None}, "any", ["llm"], (), False),
    ("llm/api_key in the file is not written", {"llm": {"base_url": "http://127.0.0.1:9/v1", "model": "m",
                                                        "api_key": SECRET}}, "run", [], (), False),
    # ---- logging
    ("logging/wandb.sample_posts -5", {"logging.wandb": {"project": "p", "sample_posts": -5}}, "error",
     ["sample_posts"], (), True),
    ("logging/wandb.mode loud", {"logging.wandb": {"project": "p", "mode": "loud"}}, "error", ["mode"], (), False),
    ("logging/wandb without project", {"logging.wandb": {"mode": "offline"}}, "error", ["project"], (), False),
    ("logging/wandb.project 1000 chars", {"logging.wandb": {"project": "p" * 1000}}, "error", ["project"], (),
     False),
    ("logging/wandb.tags a string", {"logging.wandb": {"project": "p", "tags": "x"}}, "error", ["tags"], (), False),
    ("logging/wandb.graph_every -1", {"logging.wandb": {"project": "p", "graph_every": -1}}, "error",
     ["graph_every"], (), False),
    ("logging/network_every 0", {"logging.network_every": 0}, "error", ["network_every"], (), False),
    ("logging/events 'yes'", {"logging.events": "yes"}, "error", ["events"], (), False),
    ("logging/unknown key", {"logging.colour": True}, "error", ["colour"], (), False),
    ("logging/null section", {"logging": None}, "error", ["logging"], (), False),
    # ---- run
    ("run/replicates 0", {"run": {"replicates": 0}}, "error", ["replicates"], (), False),
    ("run/replicates 10**6", {"run": {"replicates": 10**6}}, "error", ["replicates"], (), False),
    ("run/replicates 'x'", {"run": {"replicates": "x"}}, "error", ["replicates"], (), False),
    ("run/backend slurm", {"run": {"backend": "slurm"}}, "error", ["backend"], (), False),
    ("run/workers 0", {"run": {"workers": 0}}, "error", ["workers"], (), False),
    ("run/workers 10**6", {"run": {"workers": 10**6}}, "error", ["workers"], (), False),
    ("run/max_fallback_share 2", {"run": {"max_fallback_share": 2}}, "error", ["max_fallback_share"], (), False),
    ("run/max_fallback_share .nan", {"run": {"max_fallback_share": float("nan")}}, "error", ["max_fallback_share"],
     (), False),
    ("run/name 1000 chars", {"run": {"name": "n" * 1000}}, "error", ["name"], (), False),
    ("run/checkpoint 'no'", {"run": {"checkpoint": "no"}}, "error", ["checkpoint"], (), False),
    ("run/unknown key", {"run": {"replicate": 2}}, "error", ["replicate"], (), False),
    ("run/null section", {"run": None}, "error", ["run"], (), False),
    # ---- personas
    ("personas/missing file", {"personas": "/nonexistent/people.json"}, "error", ["people.json"], (), True),
    ("personas/a directory", _persona_file("dir.json", "DIR"), "error", ["dir.json"], (), False),
    ("personas/.txt extension", _persona_file("people.txt", VALID_PERSONAS), "error", ["people.txt"], (), False),
    ("personas/malformed JSON", _persona_file("people.json", '[{"name": "A",'), "error", ["people.json"], (), False),
    ("personas/JSON object, not a list", _persona_file("people.json", {"name": "A"}), "error", ["people.json"], (),
     False),
    ("personas/empty list", _persona_file("people.json", []), "error", ["people.json"], (), False),
    ("personas/Big Five value out of range", _persona_file("people.csv", "name,E\n" + "A,7\n" * 4), "error",
     ["people.csv"], (), False),
    ("personas/Big Five NaN", _persona_file("people.csv", "name,E\n" + "A,nan\n" * 4), "error", ["people.csv"], (),
     False),
    ("personas/unknown field", _persona_file("people.json", [{"name": "A", "shoe_size": 9}] * 4), "error",
     ["shoe_size"], (), False),
    ("personas/missing name", _persona_file("people.json", [{"role": "x"}] * 4), "error", ["name"], (), False),
    ("personas/CSV without name column", _persona_file("people.csv", "role,stance\na,b\n"), "error", ["people.csv"],
     (), False),
    ("personas/binary JSON", _persona_file("people.json", RNG_BYTES), "error", ["people.json"], (), False),
    ("personas/UTF-16 JSON", _persona_file("people.json", json.dumps(VALID_PERSONAS).encode("utf-16")), "any",
     ["people.json"], (), False),
    ("personas/nested 100000 deep", _persona_file("people.json", "[" * 100_000 + "]" * 100_000), "error",
     ["people.json"], (), False),
    ("personas/too few for the agents", _persona_file("people.json", VALID_PERSONAS[:1]), "error", ["personas"], (),
     False),
    ("personas/valid file", _persona_file("people.json", VALID_PERSONAS), "run", [], (), False),
    ("personas/a number", {"personas": 5}, "error", ["personas"], (), False),
    ("personas/unknown key", {"personas": {"sourc": "x"}}, "error", ["sourc"], (), False),
    ("personas/survey without llm agents", {"personas": {"source": "climate-change", "survey": True}}, "error",
     ["survey"], (), False),
    ("personas/unknown bundled set", {"personas": "no-such-set"}, "error", ["no-such-set"], (), False),
    # ---- sweep
    ("sweep/bad value in the second cell", {"sweep": {"env.recommender": ["random", "nope"]}}, "error", ["nope"], (),
     True),
    ("sweep/bad n_agents cell", {"sweep": {"env.n_agents": [4, -1]}}, "error", ["n_agents"], (), False),
    ("sweep/key without a dot", {"sweep": {"nodots": [1]}}, "error", ["nodots"], (), False),
    ("sweep/values not a list", {"sweep": {"env.n_agents": 5}}, "error", ["n_agents"], (), False),
    ("sweep/empty list", {"sweep": {"env.n_agents": []}}, "error", ["n_agents"], (), False),
    ("sweep/run section", {"sweep": {"run.replicates": [1, 2]}}, "error", ["run"], (), False),
    ("sweep/1331 cells", {"sweep": {"env.max_rounds": list(range(1, 12)), "seed": list(range(11)),
                                    "env.feed_size": list(range(1, 12))}}, "error", ["sweep"], (), False),
    ("sweep/a list", {"sweep": [1]}, "error", ["sweep"], (), False),
    ("sweep/unknown key in a cell", {"sweep": {"env.n_agnets": [4, 5]}}, "error", ["n_agnets"], (), False),
    # ---- --set overrides
    ("--set/no '='", {}, "error", ["env.n_agents"], ("env.n_agents",), True),
    ("--set/empty key", {}, "error", [], ("=5",), False),
    ("--set/unparsable value", {}, "error", ["n_agents"], ("env.n_agents=[",), False),
    ("--set/into a scalar", {}, "error", ["n_agents"], ("env.n_agents.x=3",), False),
    ("--set/section to a number", {}, "error", ["env"], ("env=5",), False),
    ("--set/unknown section", {}, "error", ["nosuch"], ("nosuch.key=1",), False),
    ("--set/expression", {}, "error", ["n_agents"], ("env.n_agents=10**12",), False),
    ("--set/empty value", {}, "error", ["kind"], ("policy.kind=",), False),
    ("--set/2 MB value", {}, "error", ["name"], ("run.name=" + "x" * 2_000_000,), False),
    ("--set/billion laughs flow", {}, "error", [], (
        "env.topics=[&a [lol, lol, lol, lol, lol, lol, lol, lol, lol], &b [*a, *a, *a, *a, *a, *a, *a, *a, *a], "
        "&c [*b, *b, *b, *b, *b, *b, *b, *b, *b], &d [*c, *c, *c, *c, *c, *c, *c, *c, *c], "
        "&e [*d, *d, *d, *d, *d, *d, *d, *d, *d], &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]]",), False),
    ("--set/valid max_rounds", {}, "run", [], ("env.max_rounds=1",), False),
    ("--set/valid topics", {}, "run", [], ("env.topics=[a, b]",), False),
    ("--set/api key", {}, "run", [], ("llm.api_key=" + SECRET, "llm.base_url=http://127.0.0.1:9/v1", "llm.model=m"),
     False),
    # ---- valid but odd
    *[(f"valid/recommender {r}", {"env.recommender": r}, "run", [], (), r == "chronological")
      for r in ("chronological", "random", "popularity", "topic_affinity", "social", "mf")],
    ("valid/recommender hybrid", {"env.recommender": "hybrid", "env.recommender_kwargs": {
        "components": {"popularity": 0.5, "topic_affinity": 0.5}}}, "run", [], (), False),
    ("valid/rerank random_replacement", {"env.rerank": [{"kind": "random_replacement", "n": 1}]}, "run", [], (),
     False),
    ("valid/rerank tail_quota_transfer", {"env.rerank": [{"kind": "tail_quota_transfer"}]}, "run", [], (), False),
    ("valid/lenient invalid actions", {"env.invalid_actions": "lenient"}, "run", [], (), False),
    ("valid/smallest sizes", {"env.n_agents": 2, "env.max_rounds": 1, "env.feed_size": 1, "env.vote_feed_size": 1,
                              "env.n_actions": 1}, "run", [], (), False),
    ("valid/one topic", {"env.topics": ["only"]}, "run", [], (), False),
    ("valid/unicode topics and name", {"env.topics": ["café", "日本", "énergie"], "run": {"name": "ünï 🎉"}}, "run",
     [], (), False),
    ("valid/groups greedy + random", {"policy": {"groups": [{"name": "g", "kind": "greedy", "agents": 2},
                                                           {"name": "r", "kind": "random"}]}}, "run", [], (), False),
    ("valid/logging all off", {"logging": {"events": False, "ties": False, "report": False, "progress": False}},
     "run", [], (), False),
    ("valid/no checkpoint", {"run": {"checkpoint": False}}, "run", [], (), False),
    ("valid/with report", {"logging.report": True}, "run", [], (), False),
    ("valid/sweep of two cells", {"sweep": {"env.recommender": ["random", "chronological"]},
                                  "run": {"workers": 1}}, "run", [], (), False),
    ("valid/bundled personas with greedy", {"personas": "climate-change"}, "run", [], (), False),
    # ---- interventions, surveys, forks in sweeps (issue 20)
    ("interventions/round beyond max_rounds", {"interventions": [{"kind": "post", "at_round": 9, "author": "agent_0",
                                                                  "topic": "t"}]}, "error", ["at_round"], (), True),
    ("interventions/unknown target", {"interventions": [{"kind": "lambdas", "at_round": 1, "target": "trolls",
                                                         "lambdas": [1, 0, 0, 0, 0]}]}, "error", ["trolls"], (), False),
    ("interventions/unknown parameter", {"interventions": [{"kind": "param", "at_round": 1, "name": "feed_size",
                                                            "value": 2}]}, "error", ["feed_size"], (), False),
    ("interventions/a mapping", {"interventions": {"kind": "post"}}, "error", ["interventions"], (), False),
    ("interventions/every 0", {"interventions": [{"kind": "lambdas", "every": 0, "lambdas": [1, 0, 0, 0, 0]}]},
     "error", ["every"], (), False),
    ("interventions/valid post", {"interventions": [{"kind": "post", "at_round": 2, "author": "agent_0",
                                                     "topic": "t", "text": "x"}]}, "run", [], (), False),
    ("surveys/round beyond max_rounds", {"surveys": [{"instrument": "trust", "at_round": 9}]}, "error",
     ["at_round"], (), True),
    ("surveys/unknown instrument", {"surveys": [{"instrument": "mood", "at_round": 1}]}, "error", ["instrument"],
     (), False),
    ("surveys/stance without topic", {"surveys": [{"instrument": "stance", "at_round": 1}]}, "error", ["topic"],
     (), False),
    ("surveys/unknown scale", {"surveys": [{"name": "x", "at_round": 1, "items": [{"id": "a", "text": "A?",
                                                                                  "scale": "stars"}]}]},
     "error", ["scale"], (), False),
    ("surveys/unknown group", {"surveys": [{"instrument": "trust", "at_round": 1, "target": "nobody"}]}, "error",
     ["nobody"], (), False),
    ("surveys/duplicate names", {"surveys": [{"instrument": "trust", "at_round": 1},
                                             {"instrument": "trust", "at_round": 2}]}, "error", ["trust"], (), False),
    ("surveys/item text 10000 chars", {"surveys": [{"name": "x", "at_round": 1, "items": [
        {"id": "a", "text": "q" * 10_000}]}]}, "error", ["text"], (), False),
    ("surveys/a string", {"surveys": "stance"}, "error", ["surveys"], (), False),
    ("surveys/valid scripted answers", {"surveys": [{"instrument": "stance", "topic": "t", "every": 1},
                                                    {"instrument": "trust", "at_round": 2}]}, "run", [], (), False),
    ("run/fork_at without a sweep", {"run": {"fork_at": 1, "replicates": 2}}, "error", ["fork_at"], (), False),
    ("run/fork_at at the last round", {"run": {"fork_at": 2}, "sweep": {"env.xi": [0.1, 0.3]}}, "error",
     ["fork_at"], (), False),
    ("run/fork_at with a cell changing n_agents", {"run": {"fork_at": 1}, "sweep": {"env.feed_size": [3, 2]}},
     "error", ["feed_size"], (), False),
    ("run/fork_at 'x'", {"run": {"fork_at": "x"}}, "error", ["fork_at"], (), False),
    ("valid/fork_at sweep", {"run": {"fork_at": 1, "workers": 1}, "sweep": {"env.xi": [0.1, 0.3]}}, "run", [], (),
     False),
]

def _finished_run(ctx: Ctx) -> Path:
    """A small finished scripted run (shared by the fork / compare / interview cases)."""
    def build() -> Path:
        folder = ctx.workdir("base")
        path = folder / "config.yaml"
        path.write_text(yaml.safe_dump(merged(BASE_CONFIG, {"env.max_rounds": 4})), encoding="utf-8")
        res = cli(["run", str(path), "--out", str(folder / "run"), "--quiet"])
        if res.rc != 0:
            raise Bad(f"the base run failed: {one_line(res.stderr, 200)}")
        return folder / "run"
    return ctx.cached("finished-run", build)


def command_case(argv: Callable[[Ctx, Path, Path], list[str]], names: Sequence[str], status: int = 2):
    """A misused fork / compare / interview command: one clear line, no directory created."""
    def run(ctx: Ctx) -> tuple[str, str]:
        base = _finished_run(ctx)
        out = ctx.fresh("out")
        return cli_clear(cli(argv(ctx, base, out)), names, out=out, status=status)
    return run


COMMAND_CASES = [
    ("fork/round beyond the run", lambda c, b, o: ["fork", str(b), "--at-round", "9", "--out", str(o)],
     ["round"]),
    ("fork/round 0", lambda c, b, o: ["fork", str(b), "--at-round", "0", "--out", str(o)], ["round"]),
    ("fork/not a run", lambda c, b, o: ["fork", str(c.workdir("empty")), "--at-round", "1", "--out", str(o)],
     ["run directory"]),
    ("fork/a change it cannot make", lambda c, b, o: ["fork", str(b), "--at-round", "2", "--out", str(o), "--set",
                                                      "env.n_actions=2"], ["n_actions"]),
    ("fork/an earlier intervention", lambda c, b, o: ["fork", str(b), "--at-round", "2", "--out", str(o), "--set",
                                                      "interventions=[{kind: param, at_round: 1, name: xi, value: 0.3}]"],
     ["interventions"]),
    ("fork/bad --set", lambda c, b, o: ["fork", str(b), "--at-round", "2", "--out", str(o), "--set", "env.xi"],
     ["env.xi"]),
    ("compare/not a run", lambda c, b, o: ["compare", str(b), str(c.workdir("empty"))], ["run directory"]),
    ("compare/one run, no sweep", lambda c, b, o: ["compare", str(b)], ["sweep"]),
    ("interview/a scripted agent", lambda c, b, o: ["interview", str(b), "--agent", "agent_0", "Why?"],
     ["agent_0"]),
    ("interview/an unknown agent", lambda c, b, o: ["interview", str(b), "--agent", "agent_99", "Why?"],
     ["agent_99"]),
    ("interview/a missing round", lambda c, b, o: ["interview", str(b), "--agent", "agent_0", "--round", "7", "?"],
     ["round_0007"]),
]
for _name, _argv, _names in COMMAND_CASES:
    case("config", _name, command_case(_argv, _names), timeout=120)


for _name, _source, _expect, _names, _overrides, _quick in CONFIG_CASES:
    _check = _no_secret_on_disk if SECRET in _name or "api key" in _name or "api_key" in _name else None
    case("config", _name, config_case(_source, _expect, _names, _overrides, marker="python object" in _name,
                                      check=_check), quick=_quick, timeout=120)


# =============================================================================== 4. LLM faults
RETRY2 = {"llm.max_retries": 2}


def llm_config(base_url: str) -> dict:
    return {"seed": 0, "env": {"n_agents": 2, "max_rounds": 1, "sentiment": "tone"}, "policy": {"kind": "llm"},
           "llm": {"base_url": base_url, "model": "fake", "api_key": SECRET, "max_retries": 1, "timeout": 2},
           "logging": {"report": False, "progress": False, "transcripts": True}}


def _schema_sample(body: dict, mutate: Callable[[Any], Any] | None = None) -> str:
    from socialgym.llm.testing import sample_schema, schema_of
    schema = schema_of(body)
    if not schema:
        return "hello"
    value = sample_schema(schema, random.Random(len(json.dumps(body.get("messages", [])))))
    if mutate is not None:
        value = mutate(value)
    return json.dumps(value, ensure_ascii=False)


def _map_strings(value: Any, fn: Callable[[str], str]) -> Any:
    from socialgym.llm.testing import _WORDS
    if isinstance(value, dict):
        return {k: _map_strings(v, fn) for k, v in value.items()}
    if isinstance(value, list):
        return [_map_strings(v, fn) for v in value]
    if isinstance(value, str) and value in _WORDS:     # free text only (enum values stay valid)
        return fn(value)
    return value


def faulty(fault: Callable[[dict, int], Any], when: str = "always") -> Callable[[dict, int], Any]:
    """A responder: ``fault`` for every request ("always") or for the first two ("first");
    otherwise a schema-valid reply."""
    def responder(body: dict, n: int):
        if when == "always" or (when == "first" and n < 2) or (when == "once" and n == 0):
            return fault(body, n)
        return None
    return responder


def _reply(**kw):
    from socialgym.llm.testing import FakeReply
    return FakeReply(**kw)


def _completion(content: Any) -> dict:
    return {"id": "c", "object": "chat.completion", "created": 0, "model": "fake",
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}


def llm_case(responder_factory: Callable[[], Callable], expect: set, *, extra: Mapping | None = None,
             base_url: str | None = None, check: Callable | None = None):
    """Run a 2-agent, 1-round LLM experiment against a scripted server; classify the outcome."""
    def run(ctx: Ctx) -> tuple[str, str]:
        from socialgym.experiments import load_config, run_experiment
        from socialgym.llm.testing import FakeServer
        out = ctx.fresh("llm")
        err: BaseException | None = None
        summary = None
        server = FakeServer(responder_factory())
        with server:
            cfg = load_config(merged(llm_config(base_url or server.base_url), extra or {}))
            buf = io.StringIO()
            try:
                with contextlib.redirect_stderr(buf), contextlib.redirect_stdout(io.StringIO()):
                    summary = run_experiment(cfg, out, progress=False)
            except ProbeTimeout:
                raise
            except Exception as exc:  # noqa: BLE001
                err = exc
        if out.exists():
            hits = files_containing(out, SECRET)
            if hits:
                raise Bad(f"the API key is on disk in {hits}")
            problem = jsonl_problem(out)
            if problem:
                raise Bad(problem)
        if err is not None:
            if "auth" in expect or "fatal" in expect:      # a refused key or model (LLMAuthError, LLMModelError)
                from socialgym.experiments import RunError
                from socialgym.llm.client import LLMFatalError
                return expect_clear(err, (LLMFatalError, RunError), [])
            raise Bad(f"the run crashed: {describe(err)}{where(err)}")
        if "auth" in expect or "fatal" in expect:
            raise Bad(f"a refused key or model did not stop the run (status {summary.get('status')}, "
                      f"{(summary.get('llm') or {}).get('fallbacks')} fallbacks)")
        llm = summary.get("llm") or {}
        if summary.get("status") != "complete":
            raise Bad(f"run status {summary.get('status')!r}")
        for key in ("prompt_tokens", "completion_tokens", "requests"):
            value = llm.get(key)
            if not isinstance(value, int) or value < 0:
                raise Bad(f"summary llm.{key} is {value!r}")
        if check is not None:
            check(server, summary, out)
        fallbacks = llm.get("fallbacks", 0)
        if fallbacks:
            share = llm.get("fallback_share", 0)
            if share > llm.get("max_fallback_share", 0.2) and not summary.get("problems"):
                raise Bad(f"{share:.0%} of LLM tasks fell back but the summary lists no problem")
            outcome = FALLBACK
            detail = f"{fallbacks} fallbacks recorded, share {share:.0%}" + \
                     (f"; summary problem: {one_line(summary['problems'][0], 120)}" if summary.get("problems") else "")
        else:
            outcome, detail = HANDLED, f"no fallback; {llm.get('requests')} requests"
        if outcome not in expect:
            raise Bad(f"expected {' or '.join(sorted(expect))}, got {outcome}: {detail}")
        return outcome, detail
    return run


def _no_downgrade(server, summary, out) -> None:
    kinds = [(b.get("response_format") or {}).get("type") for b in server.requests[2:] if b.get("response_format")]
    if not kinds or any(k != "json_schema" for k in kinds):
        raise Bad(f"structured output was downgraded after transient 500s: later formats {kinds}")


def _surrogate_inner(body, n):
    if not (body.get("response_format")):
        return _reply(content="hello \ud800 there")
    return _reply(content=_schema_sample(body, lambda v: _map_strings(v, lambda s: s + " \\ud800")).replace(
        "\\\\ud800", "\\ud800"))


def _surrogate_outer(body, n):
    return _reply(content=_schema_sample(body, lambda v: _map_strings(v, lambda s: s + " \ud800")))


LLM_CASES: list[tuple] = [
    # (name, responder factory, expected outcomes, extra config, quick)
    ("200 with a non-JSON body, always", lambda: faulty(lambda b, n: _reply(raw="<html>oops</html>",
                                                                            content_type="text/html")),
     {FALLBACK}, None, True),
    ("200 with a non-JSON body, first two", lambda: faulty(lambda b, n: _reply(raw="<html>oops</html>",
                                                                               content_type="text/html"), "first"),
     {HANDLED}, RETRY2, False),
    ("200 with truncated JSON body", lambda: faulty(lambda b, n: _reply(raw=b'{"id": "x", "choices": [{"mess')),
     {FALLBACK}, None, False),
    ("200 with an empty body", lambda: faulty(lambda b, n: _reply(raw=b"")), {FALLBACK}, None, False),
    ("usage is a list", lambda: faulty(lambda b, n: _reply(content=_schema_sample(b), usage=[1, 2])),
     {HANDLED, FALLBACK}, None, False),
    ("usage.prompt_tokens not a number", lambda: faulty(lambda b, n: _reply(
        content=_schema_sample(b), usage={"prompt_tokens": "many", "completion_tokens": 3})),
     {HANDLED, FALLBACK}, None, True),
    ("usage null", lambda: faulty(lambda b, n: _reply(content=_schema_sample(b), usage=None)), {HANDLED, FALLBACK},
     None, False),
    ("usage negative", lambda: faulty(lambda b, n: _reply(content=_schema_sample(b),
                                                          usage={"prompt_tokens": -5, "completion_tokens": -1})),
     {HANDLED, FALLBACK}, None, False),
    ("usage 10**30", lambda: faulty(lambda b, n: _reply(content=_schema_sample(b),
                                                        usage={"prompt_tokens": 10**30, "completion_tokens": 1})),
     {HANDLED, FALLBACK}, None, False),
    ("body is a JSON list", lambda: faulty(lambda b, n: _reply(body=[1, 2, 3])), {FALLBACK}, None, False),
    ("choices missing", lambda: faulty(lambda b, n: _reply(body={"id": "x", "object": "chat.completion"})),
     {FALLBACK}, None, False),
    ("choices empty", lambda: faulty(lambda b, n: _reply(body={"id": "x", "choices": []})), {FALLBACK}, None, False),
    ("message missing", lambda: faulty(lambda b, n: _reply(body={"id": "x", "choices": [{"index": 0}]})),
     {FALLBACK}, None, False),
    ("content null", lambda: faulty(lambda b, n: _reply(body=_completion(None))), {FALLBACK}, None, False),
    ("content a number", lambda: faulty(lambda b, n: _reply(body=_completion(5))), {FALLBACK}, None, False),
    ("content an object", lambda: faulty(lambda b, n: _reply(body=_completion({"actions": []}))), {FALLBACK}, None,
     False),
    ("escaped lone surrogate in the body", lambda: faulty(_surrogate_outer), {FALLBACK}, None, True),
    ("escaped lone surrogate inside the model's JSON", lambda: faulty(_surrogate_inner), {FALLBACK, HANDLED}, None,
     False),
    ("content not JSON", lambda: faulty(lambda b, n: _reply(content="Sure! Here is my plan: post about cats.")),
     {FALLBACK}, None, False),
    ("content truncated JSON", lambda: faulty(lambda b, n: _reply(content=_schema_sample(b)[:15])), {FALLBACK}, None,
     False),
    ("content nested 100000 deep", lambda: faulty(lambda b, n: _reply(content="[" * 100_000)), {FALLBACK}, None,
     False),
    ("content a 5000-digit integer", lambda: faulty(lambda b, n: _reply(content="1" * 5000)), {FALLBACK}, None,
     False),
    ("content NaN", lambda: faulty(lambda b, n: _reply(content="NaN")), {FALLBACK}, None, False),
    ("content 1 MB of text", lambda: faulty(lambda b, n: _reply(content=_schema_sample(
        b, lambda v: _map_strings(v, lambda s: s * 100_000)))), {HANDLED, FALLBACK}, None, False),
    ("content with NUL, ANSI escapes and HTML", lambda: faulty(lambda b, n: _reply(content=_schema_sample(
        b, lambda v: _map_strings(v, lambda s: s + " \x00\x1b[2J<script>alert(1)</script>")))),
     {HANDLED, FALLBACK}, None, False),
    ("content echoes the API key", lambda: faulty(lambda b, n: _reply(content=_schema_sample(
        b, lambda v: _map_strings(v, lambda s: s + " " + SECRET)))), {HANDLED, FALLBACK}, None, False),
    ("401 with the key echoed", lambda: faulty(lambda b, n: _reply(
        status=401, error=f"Incorrect API key provided: {SECRET}")), {"auth"}, None, True),
    ("403 with the key echoed", lambda: faulty(lambda b, n: _reply(
        status=403, error=f"key {SECRET} may not use model fake")), {"auth"}, None, False),
    ("401 after a successful request", lambda: (lambda b, n: None if n == 0 else _reply(
        status=401, error=f"revoked: {SECRET}")), {"auth"}, None, False),
    ("500 on the first two requests", lambda: faulty(lambda b, n: _reply(status=500, error="boom"), "first"),
     {HANDLED}, RETRY2, True),
    ("500 always", lambda: faulty(lambda b, n: _reply(status=500, error="boom")), {FALLBACK}, None, False),
    ("500 mentioning 'schema' twice, then OK", lambda: faulty(lambda b, n: _reply(
        status=500, error="transient: schema cache not ready"), "first"), {HANDLED},
     {**RETRY2, "env.max_rounds": 2}, False),
    ("400 rejecting json_schema (downgrade)", lambda: (lambda b, n: _reply(
        status=400, error="response_format json_schema is not supported") if
        (b.get("response_format") or {}).get("type") == "json_schema" else None), {HANDLED}, None, False),
    ("429 on the first two, Retry-After 0", lambda: faulty(lambda b, n: _reply(
        status=429, error="slow down", headers={"retry-after": "0"}), "first"), {HANDLED}, RETRY2, False),
    ("429 always", lambda: faulty(lambda b, n: _reply(status=429, error="slow down", headers={"retry-after": "0"})),
     {FALLBACK}, None, False),
    ("502 always", lambda: faulty(lambda b, n: _reply(status=502, error="bad gateway")), {FALLBACK}, None, False),
    ("404 model not found", lambda: faulty(lambda b, n: _reply(status=404, error="model fake not found")),
     {"fatal"}, None, False),
    ("slow reply past the timeout, first two", lambda: faulty(lambda b, n: _reply(content=_schema_sample(b),
                                                                                  delay=2.6), "first"),
     {HANDLED}, RETRY2, False),
    ("slow reply past the timeout, always", lambda: faulty(lambda b, n: _reply(content=_schema_sample(b),
                                                                               delay=2.6)), {FALLBACK}, None, False),
]

for _name, _factory, _expect, _extra, _quick in LLM_CASES:
    _chk = _no_downgrade if "'schema'" in _name else None
    case("llm", _name, llm_case(_factory, _expect, extra=_extra, check=_chk), quick=_quick, timeout=90)


def _refused_connection(ctx: Ctx) -> tuple[str, str]:
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()                          # nothing listens there now
    # a round none of whose requests reached a server stops the run (issue 43: LLMServerDown, exit 6)
    return llm_case(lambda: None, {"fatal"}, base_url=f"http://127.0.0.1:{port}/v1")(ctx)


case("llm", "connection refused", _refused_connection, timeout=90)


def _auth_cli(ctx: Ctx) -> tuple[str, str]:
    from socialgym.llm.testing import FakeServer
    folder = ctx.workdir("llmcli")
    with FakeServer(faulty(lambda b, n: _reply(status=401, error=f"Incorrect API key provided: {SECRET}"))) as server:
        path = folder / "c.yaml"
        path.write_text(yaml.safe_dump(llm_config(server.base_url)))
        res = cli(["run", str(path), "--out", str(folder / "out"), "--quiet"])
    if (folder / "out").exists():
        hits = files_containing(folder / "out", SECRET)
        if hits:
            raise Bad(f"the API key is on disk in {hits}")
    if res.exc is not None:
        raise Bad(f"traceback: {describe(res.exc)}{where(res.exc)}")
    if res.rc == 0:
        raise Bad(f"exit 0 although the server refused the key: {one_line(res.stdout, 160)}")
    lines = res.lines()
    problem = message_problem(lines[-1] if lines else "", [])
    if len(lines) != 1 or problem:
        raise Bad(f"{len(lines)} stderr lines; {problem or ''} | {one_line(lines[-1] if lines else '', 160)}")
    return CLEAR, f"exit {res.rc}: {one_line(lines[0], 200)}"


case("llm", "401 through the CLI: exit status and message", _auth_cli, quick=True, timeout=90)


# =============================================================================== 5. resume
RESUME_CONFIG = {
    "seed": 3,
    "env": {"n_agents": 6, "max_rounds": 4, "recommender": "random", "sentiment": "tone", "feed_size": 4,
            "vote_feed_size": 4},
    "policy": {"groups": [{"name": "greedy", "kind": "greedy", "agents": 3}, {"name": "random", "kind": "random"}]},
    "logging": {"report": False, "progress": False},
}
OUTPUT_FILES = ("rounds.csv", "network.csv", "events.jsonl")


def _resume_config(ctx: Ctx, **changes) -> Path:
    key = "resume-config-" + json.dumps(changes, sort_keys=True, default=str)

    def build() -> Path:
        path = ctx.fresh("resume-config").with_suffix(".yaml")
        path.write_text(yaml.safe_dump(merged(RESUME_CONFIG, changes)))
        return path
    return ctx.cached(key, build)


def killed_run(ctx: Ctx, point: str = "3:act", **changes) -> Path:
    """A run SIGKILLed at ``point`` (a subprocess running the real command; the kill switch is the
    test-only tests/faults/sitecustomize.py, put on the subprocess's PYTHONPATH)."""
    def build() -> Path:
        out = ctx.fresh("killed")
        proc = subprocess.run([sys.executable, "-m", "socialgym.cli", "run", str(_resume_config(ctx, **changes)),
                               "--out", str(out), "--quiet"], capture_output=True, text=True, cwd=ROOT, timeout=180,
                              env={**os.environ, "SOCIALGYM_KILL_AT": point, "PYTHONPATH": os.pathsep.join(
                                  p for p in (str(ROOT / "tests" / "faults"), os.environ.get("PYTHONPATH")) if p)})
        if proc.returncode != -signal.SIGKILL:
            raise RuntimeError(f"probe setup: the run was not killed (exit {proc.returncode}): "
                               f"{one_line(proc.stderr[-400:], 300)}")
        return out
    return ctx.cached(f"killed-{point}-{json.dumps(changes, sort_keys=True, default=str)}", build)


def reference_run(ctx: Ctx) -> Path:
    def build() -> Path:
        from socialgym.experiments import load_config, run_experiment
        out = ctx.fresh("reference")
        run_experiment(load_config(_resume_config(ctx)), out, progress=False)
        return out
    return ctx.cached("reference", build)


def complete_run(ctx: Ctx) -> Path:
    def build() -> Path:
        out = ctx.fresh("complete")
        res = cli(["run", str(_resume_config(ctx, **{"logging.report": True})), "--out", str(out), "--quiet"])
        if res.rc != 0:
            raise RuntimeError(f"probe setup: the complete run failed: {res.exc or res.stderr[-300:]}")
        return out
    return ctx.cached("complete", build)


def same_outputs(a: Path, b: Path) -> str | None:
    import scipy.sparse as sp
    for name in OUTPUT_FILES:
        if not (a / name).exists() or (a / name).read_bytes() != (b / name).read_bytes():
            return f"{name} differs from the uninterrupted run's"
    ta = sorted(p.name for p in (a / "ties").glob("*.npz")) if (a / "ties").exists() else []
    tb = sorted(p.name for p in (b / "ties").glob("*.npz")) if (b / "ties").exists() else []
    if ta != tb:
        return f"ties/ holds {ta}, the uninterrupted run {tb}"
    for name in ta:
        if (sp.load_npz(a / "ties" / name) != sp.load_npz(b / "ties" / name)).nnz:
            return f"ties/{name} differs"
    return None


def _write_signed(path: Path, state: Any, key_file: Path | None = None) -> None:
    from socialgym.experiments.run.checkpoint import write_checkpoint
    old = os.environ.get("SOCIALGYM_KEY_FILE")
    if key_file is not None:
        os.environ["SOCIALGYM_KEY_FILE"] = str(key_file)
    try:
        write_checkpoint(path, state)
    finally:
        if key_file is not None:
            os.environ["SOCIALGYM_KEY_FILE"] = old or ""


def _with_key_file(key_file: Path, fn: Callable[[], Any]) -> Any:
    old = os.environ.get("SOCIALGYM_KEY_FILE")
    os.environ["SOCIALGYM_KEY_FILE"] = str(key_file)
    try:
        return fn()
    finally:
        os.environ["SOCIALGYM_KEY_FILE"] = old or ""


def resume_case(tamper: Callable[[Path, Ctx, Path], Any] | None, expect: str, names: Sequence[str] = (),
                template: str = "killed", args: Sequence[str] = (),
                key_file: Callable[[Ctx, Path], Path] | None = None):
    """Copy a template run, ``tamper(dir, ctx, marker)``, resume in-process. expect: "error"
    (exit 2, one line naming ``names``, no code run), "same" (completes with files identical
    to an uninterrupted run), "report" (completes and report.html exists), "any-of-those"."""
    def run(ctx: Ctx) -> tuple[str, str]:
        if template == "none":
            d = ctx.fresh("resume")
        else:
            src = complete_run(ctx) if template == "complete" else killed_run(ctx, template if ":" in template
                                                                                else "3:act")
            d = ctx.fresh("resume")
            shutil.copytree(src, d, symlinks=True)
        mark = ctx.marker("resume")
        if tamper is not None:
            tamper(d, ctx, mark)
        argv = ["resume", str(d), "--quiet", *args]
        res = _with_key_file(key_file(ctx, d), lambda: cli(argv)) if key_file else cli(argv)
        check_marker(mark)
        if res.exc is not None:
            raise Bad(f"traceback: {describe(res.exc)}{where(res.exc)}")
        if expect == "error":
            if res.rc == 0:
                summary = json.loads((d / "summary.json").read_text()) if (d / "summary.json").exists() else {}
                problem = same_outputs(d, reference_run(ctx))
                raise Bad(f"tampered directory resumed without an error (status {summary.get('status')}"
                          f"{'; ' + problem if problem else '; outputs equal the reference'})")
            return cli_clear(res, names, max_seconds=None)
        if res.rc != 0:
            lines = res.lines()
            if expect == "any" and res.rc == 2:
                return cli_clear(res, names, max_seconds=None)
            raise Bad(f"resume failed: exit {res.rc}: {one_line(lines[-1] if lines else '', 200)}")
        summary = json.loads((d / "summary.json").read_text())
        if summary.get("status") != "complete" or summary.get("rounds_completed") != RESUME_CONFIG["env"]["max_rounds"]:
            raise Bad(f"resume ended with status {summary.get('status')!r}, {summary.get('rounds_completed')} rounds")
        problem = same_outputs(d, reference_run(ctx))
        if problem:
            raise Bad(f"resumed run is wrong: {problem}")
        expected = json.loads((reference_run(ctx) / "summary.json").read_text())
        if canon(summary.get("final")) != canon(expected.get("final")):
            raise Bad("summary.json's results differ from the uninterrupted run's (not rewritten from the checkpoint)")
        if template == "complete" and not (d / "report.html").exists():
            raise Bad("report.html was not rebuilt")
        return HANDLED, "resumed; files identical to an uninterrupted run"
    return run


def _truncate(name: str, keep: int | float):
    def tamper(d: Path, ctx: Ctx, mark: Path) -> None:
        path = d / name
        data = path.read_bytes()
        n = int(len(data) * keep) if isinstance(keep, float) else max(0, len(data) - keep)
        path.write_bytes(data[:n])
    return tamper


def _flip(name: str, offset: int):
    def tamper(d: Path, ctx: Ctx, mark: Path) -> None:
        path = d / name
        data = bytearray(path.read_bytes())
        i = offset if offset >= 0 else len(data) + offset
        data[i] ^= 0x01
        path.write_bytes(bytes(data))
    return tamper


def _edit_digit(name: str):
    def tamper(d: Path, ctx: Ctx, mark: Path) -> None:
        path = d / name
        text = path.read_text()
        lines = text.splitlines(keepends=True)
        target = len(lines) // 2
        line = lines[target]
        for i, ch in enumerate(line):
            if ch.isdigit():
                line = line[:i] + str((int(ch) + 1) % 10) + line[i + 1:]
                break
        lines[target] = line
        path.write_text("".join(lines))
    return tamper


def _delete(name: str):
    def tamper(d: Path, ctx: Ctx, mark: Path) -> None:
        path = d / name
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    return tamper


def _write(name: str, data: bytes | str | Callable[[Path], bytes]):
    def tamper(d: Path, ctx: Ctx, mark: Path) -> None:
        value = data(mark) if callable(data) else data
        path = d / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(value.encode() if isinstance(value, str) else value)
    return tamper


def _append(name: str, data: bytes):
    def tamper(d: Path, ctx: Ctx, mark: Path) -> None:
        with open(d / name, "ab") as f:
            f.write(data)
    return tamper


def _hostile_signed_by_other(d: Path, ctx: Ctx, mark: Path) -> None:
    _write_signed(d / "checkpoint.pkl", {"version": 3, "env": _RunsCode(mark)}, key_file=ctx.root / "other.key")


def _hostile_magic(d: Path, ctx: Ctx, mark: Path) -> None:
    from socialgym.experiments.run.checkpoint import MAGIC
    (d / "checkpoint.pkl").write_bytes(MAGIC + b"0" * 64 + b"\n" + hostile_pickle(mark))


def _signed_by_colleague(d: Path, ctx: Ctx, mark: Path) -> None:
    from socialgym.experiments.run.checkpoint import read_checkpoint
    state = read_checkpoint(d / "checkpoint.pkl")
    _write_signed(d / "checkpoint.pkl", state, key_file=ctx.root / "colleague.key")


def _from_other_run(with_run_json: bool):
    def tamper(d: Path, ctx: Ctx, mark: Path) -> None:
        other = killed_run(ctx, "3:act", seed=4)
        shutil.copy(other / "checkpoint.pkl", d / "checkpoint.pkl")
        if with_run_json:
            shutil.copy(other / "run.json", d / "run.json")
    return tamper


def _config_change(changes: dict):
    def tamper(d: Path, ctx: Ctx, mark: Path) -> None:
        raw = yaml.safe_load((d / "config.yaml").read_text())
        (d / "config.yaml").write_text(yaml.safe_dump(merged(raw, changes), sort_keys=False))
    return tamper


def _forge_summary(changes: dict):
    def tamper(d: Path, ctx: Ctx, mark: Path) -> None:
        summary = json.loads((d / "summary.json").read_text())
        summary.update(changes)
        (d / "summary.json").write_text(json.dumps(summary))
    return tamper


def _bad_key_file(ctx: Ctx, d: Path) -> Path:
    path = ctx.root / "damaged.key"
    path.write_text("zz not hex\n")
    return path


def _new_key_file(ctx: Ctx, d: Path) -> Path:
    return ctx.fresh("newkey").with_suffix(".key")


RESUME_CASES: list[tuple] = [
    # (name, tamper, expect, names, template, args, key_file, quick)
    ("untouched, killed after the act step", None, "same", [], "3:act", (), None, True),
    ("untouched, killed after the outputs were written", None, "same", [], "3:outputs", (), None, False),
    ("untouched, killed before the checkpoint rename", None, "same", [], "3:checkpoint", (), None, False),
    ("rounds.csv truncated by 10 bytes", _truncate("rounds.csv", 10), "error", ["rounds.csv"], "killed", (), None,
     True),
    ("rounds.csv emptied", _truncate("rounds.csv", 0.0), "error", ["rounds.csv"], "killed", (), None, False),
    ("rounds.csv deleted", _delete("rounds.csv"), "error", ["rounds.csv"], "killed", (), None, False),
    ("rounds.csv one digit changed", _edit_digit("rounds.csv"), "error", ["rounds.csv"], "killed", (), None, False),
    ("rounds.csv with a partial line appended", _append("rounds.csv", b"3,agent_0,0.1"), "same", [], "killed", (),
     None, False),
    ("events.jsonl deleted", _delete("events.jsonl"), "error", ["events.jsonl"], "killed", (), None, False),
    ("events.jsonl one digit changed", _edit_digit("events.jsonl"), "error", ["events.jsonl"], "killed", (), None,
     False),
    ("network.csv truncated", _truncate("network.csv", 0.5), "error", ["network.csv"], "killed", (), None, False),
    ("ties/round_0001.npz deleted", _delete("ties/round_0001.npz"), "error", ["round_0001"], "killed", (), None,
     False),
    ("ties/round_0002.npz replaced", _write("ties/round_0002.npz", RNG_BYTES), "error", ["round_0002"], "killed",
     (), None, False),
    ("stray ties/round_0003.npz from the lost round", _write("ties/round_0003.npz", RNG_BYTES), "same", [],
     "killed", (), None, False),
    ("checkpoint truncated to half", _truncate("checkpoint.pkl", 0.5), "error", ["checkpoint.pkl"], "killed", (),
     None, True),
    ("checkpoint empty", _truncate("checkpoint.pkl", 0.0), "error", ["checkpoint.pkl"], "killed", (), None, False),
    ("checkpoint random bytes", _write("checkpoint.pkl", RNG_BYTES), "error", ["checkpoint.pkl"], "killed", (), None,
     False),
    ("checkpoint one payload byte flipped", _flip("checkpoint.pkl", -100), "error", ["checkpoint.pkl"], "killed", (),
     None, False),
    ("checkpoint signature byte flipped", _flip("checkpoint.pkl", 30), "error", ["checkpoint.pkl"], "killed", (),
     None, False),
    ("hostile pickle, old unsigned format", _write("checkpoint.pkl", hostile_pickle), "error", ["checkpoint.pkl"],
     "killed", (), None, True),
    ("hostile pickle with a made-up signature", _hostile_magic, "error", ["checkpoint.pkl"], "killed", (), None,
     False),
    ("hostile pickle signed with another key", _hostile_signed_by_other, "error", ["checkpoint.pkl"], "killed", (),
     None, False),
    ("checkpoint signed by a colleague's key", _signed_by_colleague, "error", ["checkpoint.pkl"], "killed", (), None,
     False),
    ("checkpoint signed by a colleague's key, --trust", _signed_by_colleague, "same", [], "killed", ("--trust",),
     None, False),
    ("checkpoint copied from another run", _from_other_run(False), "error", ["checkpoint.pkl"], "killed", (), None,
     False),
    ("checkpoint and run.json copied from another run", _from_other_run(True), "error", [], "killed", (), None,
     False),
    ("checkpoint deleted (restart from round 0)", _delete("checkpoint.pkl"), "same", [], "killed", (), None, False),
    ("leftover checkpoint.tmp garbage", _write("checkpoint.tmp", RNG_BYTES), "same", [], "killed", (), None, False),
    ("config.yaml edited: max_rounds", _config_change({"env.max_rounds": 5}), "error", ["config.yaml"], "killed", (),
     None, True),
    ("config.yaml edited: seed", _config_change({"seed": 9}), "error", ["config.yaml"], "killed", (), None, False),
    ("config.yaml edited: only logging, --allow-config-change", _config_change({"logging.network_every": 1}),
     "same", [], "killed", ("--allow-config-change",), None, False),
    ("config.yaml comment added", _append("config.yaml", b"# a note\n"), "any", ["config.yaml"], "killed", (), None,
     False),
    ("config.yaml deleted", _delete("config.yaml"), "error", ["config.yaml"], "killed", (), None, False),
    ("config.yaml replaced by a YAML bomb", _write("config.yaml", _billion_laughs()), "error", [], "killed", (), None,
     False),
    ("config.yaml binary", _write("config.yaml", RNG_BYTES), "error", [], "killed", (), None, False),
    ("run.json deleted", _delete("run.json"), "error", ["run.json"], "killed", (), None, False),
    ("run.json garbage", _write("run.json", "{not json"), "error", ["run.json"], "killed", (), None, False),
    ("summary.json forged status complete", _forge_summary({"status": "complete", "rounds_completed": 4}), "same", [],
     "killed", (), None, True),
    ("summary.json deleted", _delete("summary.json"), "same", [], "killed", (), None, False),
    ("summary.json garbage", _write("summary.json", RNG_BYTES), "same", [], "killed", (), None, False),
    ("key file damaged", None, "error", ["key"], "killed", (), _bad_key_file, False),
    ("key file replaced by a new one", None, "error", ["checkpoint.pkl"], "killed", (), _new_key_file, False),
    ("complete run: report.html deleted", _delete("report.html"), "same", [], "complete", (), None, True),
    ("complete run: summary.json forged", _forge_summary({"final": {"rewards": {"total": 99.0}}}), "same", [],
     "complete", (), None, False),
    ("complete run: summary.json deleted", _delete("summary.json"), "same", [], "complete", (), None, False),
    ("complete run: rounds.csv edited", _edit_digit("rounds.csv"), "error", ["rounds.csv"], "complete", (), None,
     False),
    ("complete run: checkpoint deleted", _delete("checkpoint.pkl"), "error", ["checkpoint.pkl"], "complete", (), None,
     False),
    ("complete run: hostile checkpoint", _write("checkpoint.pkl", hostile_pickle), "error", ["checkpoint.pkl"],
     "complete", (), None, False),
    ("not a run: nonexistent directory", None, "error", [], "none", (), None, False),
    ("not a run: empty directory", lambda d, c, m: d.mkdir(), "error", [], "none", (), None, False),
    ("not a run: a file", lambda d, c, m: d.write_text("x"), "error", [], "none", (), None, False),
    ("not a run: config.yaml only", lambda d, c, m: (d.mkdir(), shutil.copy(_resume_config(c), d / "config.yaml")),
     "error", ["run.json"], "none", (), None, False),
]

for _name, _tamper, _expect, _names, _template, _args, _key, _quick in RESUME_CASES:
    case("resume", _name, resume_case(_tamper, _expect, _names, _template, _args, _key), quick=_quick, timeout=180)


def _run_into_existing(ctx: Ctx) -> tuple[str, str]:
    d = ctx.fresh("resume")
    shutil.copytree(killed_run(ctx), d)
    res = cli(["run", str(_resume_config(ctx)), "--out", str(d), "--quiet"])
    return cli_clear(res, ["resume"], max_seconds=None)


case("resume", "`run` into a directory that holds a run", _run_into_existing)


# =============================================================================== 6. untrusted files
def _torch_save(path: Path, obj: Any) -> None:
    import torch
    torch.save(obj, path)


def _model_file(kind: str) -> Callable[[Path, Path], None]:
    def make(path: Path, mark: Path) -> None:
        if kind == "hostile torch.save":
            _torch_save(path, {"format": "socialgym-ppo-2", "state_dict": _RunsCode(mark)})
        elif kind == "hostile raw pickle":
            path.write_bytes(hostile_pickle(mark))
        elif kind == "text file":
            path.write_text("not a model\n")
        elif kind == "empty file":
            path.write_bytes(b"")
        elif kind == "random bytes":
            path.write_bytes(RNG_BYTES)
        elif kind == "format tag only":
            _torch_save(path, {"format": "socialgym-ppo-2"})
        elif kind == "wrong shapes":
            import torch
            _torch_save(path, {"format": "socialgym-ppo-2", "state_dict": {"w": torch.zeros(2)},
                               "env_nvec": [2, 2], "act_length": 1, "peer_components": [], "widths": {},
                               "n_features": 3, "hidden": 4, "obs_mean": None, "obs_var": None, "args": {},
                               "interface": {"n_actions": 1, "feed_size": 1, "dm_inbox_size": 1, "max_topics": 1,
                                             "vote_feed_size": 1}})
        elif kind == "a list of tensors":
            import torch
            _torch_save(path, [torch.zeros(2)])
        elif kind == "missing":
            pass
        elif kind == "a directory":
            path.mkdir()
    return make


MODEL_KINDS = ("hostile torch.save", "hostile raw pickle", "text file", "empty file", "random bytes",
               "format tag only", "wrong shapes", "a list of tensors", "missing", "a directory")


def torch_group_case(kind: str):
    def run(ctx: Ctx) -> tuple[str, str]:
        folder = ctx.workdir("model")
        mark = ctx.marker("model")
        model = folder / "model.pt"
        _model_file(kind)(model, mark)
        path = folder / "c.yaml"
        path.write_text(yaml.safe_dump(merged(BASE_CONFIG, {"policy": {"groups": [
            {"name": "ppo", "kind": "torch", "agents": 2, "params": {"path": str(model)}},
            {"name": "rest", "kind": "greedy"}]}})))
        res = cli(["run", str(path), "--out", str(folder / "out"), "--quiet"])
        check_marker(mark)
        return cli_clear(res, ["model.pt"], max_seconds=None)
    return run


def evaluate_case(kind: str):
    def run(ctx: Ctx) -> tuple[str, str]:
        from socialgym.experiments.analysis import evaluate
        folder = ctx.workdir("eval")
        mark = ctx.marker("eval")
        model = folder / "model.pt"
        _model_file(kind)(model, mark)
        res = call_main(evaluate.main, ["--model", str(model), "--episodes", "1", "--out", str(folder / "out")])
        check_marker(mark)
        if res.exc is not None:
            raise Bad(f"traceback: {describe(res.exc)}{where(res.exc)}")
        lines = res.lines()
        # argparse prints its usage line(s) before "prog: error: ..." — the last line is the message
        msg = lines[-1] if lines else ""
        if res.rc != 2 or ": error:" not in msg:
            raise Bad(f"exit {res.rc}: {one_line(msg or res.stdout, 200)}")
        problem = message_problem(msg, ["model.pt"])
        if problem:
            raise Bad(f"{problem}: {one_line(msg, 200)}")
        return CLEAR, one_line(msg, 240)
    return run


for _kind in MODEL_KINDS:
    case("files", f"kind: torch group, model file: {_kind}", torch_group_case(_kind),
         quick=_kind == "hostile torch.save", timeout=120)
    case("files", f"evaluate --model: {_kind}", evaluate_case(_kind), quick=_kind == "hostile torch.save",
         timeout=120)


def _read_model_direct(ctx: Ctx) -> tuple[str, str]:
    from socialgym.training.torch_policy import read_model_file
    folder = ctx.workdir("model")
    mark = ctx.marker("direct")
    model = folder / "model.pt"
    _model_file("hostile torch.save")(model, mark)
    try:
        read_model_file(model)
    except ProbeTimeout:
        raise
    except Exception as exc:  # noqa: BLE001
        check_marker(mark)
        return expect_clear(exc, (ValueError,), ["model.pt"])
    check_marker(mark)
    raise Bad("a hostile model file was read without an error")


case("files", "read_model_file(hostile) from Python", _read_model_direct)


def report_case(make: Callable[[Ctx], Path], expect: str):
    def run(ctx: Ctx) -> tuple[str, str]:
        d = make(ctx)
        res = cli(["report", str(d)])
        if res.exc is not None:
            raise Bad(f"traceback: {describe(res.exc)}{where(res.exc)}")
        if expect == "error" and res.rc == 0:
            raise Bad(f"report built from a directory that is not a run: {one_line(res.stdout, 160)}")
        if res.rc != 0 and expect in ("error", "any"):
            return cli_clear(res, [], max_seconds=None)
        if res.rc != 0:
            raise Bad(f"exit {res.rc}: {one_line(res.stderr, 200)}")
        return HANDLED, "report built"
    return run


def _garbage_run(ctx: Ctx) -> Path:
    d = ctx.fresh("report")
    shutil.copytree(complete_run(ctx), d)
    (d / "rounds.csv").write_bytes(RNG_BYTES)
    (d / "report.html").unlink()
    return d


case("files", "report: nonexistent directory", report_case(lambda ctx: ctx.fresh("report"), "error"))
case("files", "report: empty directory", report_case(lambda ctx: ctx.workdir("report"), "error"))
case("files", "report: rounds.csv is garbage", report_case(_garbage_run, "any"))


def _report_escapes(ctx: Ctx) -> tuple[str, str]:
    folder = ctx.workdir("html")
    name = "<script>alert(1)</script>"
    path = folder / "c.yaml"
    path.write_text(yaml.safe_dump(merged(BASE_CONFIG, {"logging.report": True, "policy": {"groups": [
        {"name": name, "kind": "greedy", "agents": 2}, {"name": "rest", "kind": "random"}]}})))
    res = cli(["run", str(path), "--out", str(folder / "out"), "--quiet"])
    if res.exc is not None:
        raise Bad(f"traceback: {describe(res.exc)}{where(res.exc)}")
    if res.rc != 0:
        return cli_clear(res, ["name"], out=folder / "out")
    html = (folder / "out" / "report.html").read_text(encoding="utf-8")
    csp = "Content-Security-Policy" in html and "default-src 'none'" in html and "script-src" not in html
    if name in html:
        raise Bad("report.html holds a group name's <script> unescaped")
    if not csp:
        raise Bad("report.html has no Content-Security-Policy with default-src 'none'")
    return HANDLED, "group name escaped; CSP default-src 'none'"


case("files", "report.html with a <script> group name", _report_escapes, quick=True)


def _cache_is_data(ctx: Ctx) -> tuple[str, str]:
    """llm_cache.sqlite holds JSON text: a hostile pickle stored as a cached reply runs nothing."""
    import sqlite3

    from socialgym.llm.testing import FakeServer
    from socialgym.experiments import load_config, resume_experiment, run_experiment
    mark = ctx.marker("cache")
    out = ctx.fresh("cache")
    with FakeServer() as server:
        cfg = load_config(merged(llm_config(server.base_url), {"env.max_rounds": 2}))
        with contextlib.redirect_stderr(io.StringIO()):
            run_experiment(cfg, out, progress=False)
        db = sqlite3.connect(out / "llm_cache.sqlite")
        tables = [r[0] for r in db.execute("select name from sqlite_master where type='table'")]
        blob = hostile_pickle(mark)
        for table in tables:
            cols = [r[1] for r in db.execute(f"pragma table_info({table})")]
            for col in cols:
                with contextlib.suppress(sqlite3.Error):
                    db.execute(f"update {table} set {col} = ?", (blob,))
        db.commit()
        db.close()
        (out / "summary.json").unlink()
        (out / "checkpoint.pkl").unlink()                 # restart from round 0: every reply from the cache
        try:
            with contextlib.redirect_stderr(io.StringIO()):
                resume_experiment(out, progress=False)
        except ProbeTimeout:
            raise
        except Exception as exc:  # noqa: BLE001
            check_marker(mark)
            return expect_clear(exc, (ValueError, RuntimeError), ["llm_cache"])
    check_marker(mark)
    return HANDLED, "a tampered cache is read as data (no code ran)"


case("files", "llm_cache.sqlite rows replaced by a hostile pickle", _cache_is_data, timeout=120)


# =============================================================================== 7-10. issue 28
import probe_hardening  # noqa: E402  (benchmarks/ is on sys.path)

probe_hardening.register(sys.modules[__name__])

# =============================================================================== 11-21. issue 44
import probe_surfaces  # noqa: E402  (benchmarks/ is on sys.path)

probe_surfaces.register(sys.modules[__name__])


# =============================================================================== running
def select(quick: bool, only: Sequence[str] = ()) -> list[Case]:
    chosen = [c for c in CASES if (not quick or c.quick)]
    if only:
        chosen = [c for c in chosen if c.category in only or any(o in c.name for o in only)]
    return chosen


def _stable(detail: str, root: Path) -> str:
    """The detail without what changes from run to run (temporary paths, ports, addresses)."""
    detail = str(detail).replace(str(root), "<tmp>")
    detail = re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:<port>", detail)
    return re.sub(r" at 0x[0-9a-f]+", "", detail)


def run_cases(cases: Sequence[Case], ctx: Ctx, log: Callable[[str], None] | None = None) -> list[Result]:
    results = []
    for c in cases:
        t0 = time.perf_counter()
        try:
            with time_limit(c.timeout):
                outcome, detail = c.fn(ctx)
        except ProbeTimeout:
            outcome, detail = BAD, f"hang: no result after {c.timeout:.0f} s"
        except Bad as exc:
            outcome, detail = BAD, str(exc)
        except Exception as exc:  # noqa: BLE001 -- an exception the case did not expect
            outcome, detail = BAD, f"unexpected {describe(exc)}{where(exc)}"
        if outcome not in OUTCOMES:
            outcome, detail = BAD, f"probe bug: outcome {outcome!r}"
        seconds = time.perf_counter() - t0
        detail = _stable(detail, ctx.root)
        results.append(Result(c.category, c.name, outcome, one_line(detail, 400), round(seconds, 3)))
        if log is not None and (outcome == BAD or ctx.verbose):
            log(f"  [{outcome}] {c.category} / {c.name} ({seconds:.1f} s): {one_line(detail, 300)}")
    return results


def run_probe(quick: bool = False, only: Sequence[str] = (), verbose: bool = False, keep: bool = False,
              log: Callable[[str], None] | None = None) -> dict:
    """Run the probe in-process; returns {"cases": [...], "summary": {...}, ...}."""
    root = Path(tempfile.mkdtemp(prefix="socialgym-probe-"))
    saved = {k: os.environ.get(k) for k in ("SOCIALGYM_KEY_FILE", "SOCIALGYM_KILL_AT")}
    os.environ["SOCIALGYM_KEY_FILE"] = str(root / "probe-checkpoint.key")
    os.environ.pop("SOCIALGYM_KILL_AT", None)
    t0 = time.perf_counter()
    try:
        ctx = Ctx(root, verbose=verbose)
        results = run_cases(select(quick, only), ctx, log)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        if not keep:
            shutil.rmtree(root, ignore_errors=True)
        elif log is not None:
            log(f"kept {root}")
    seconds = time.perf_counter() - t0
    return {"mode": "quick" if quick else "full", "seconds": round(seconds, 1), "cores": os.cpu_count(),
            "python": platform.python_version(), "summary": summarise(results),
            "cases": [dataclasses.asdict(r) for r in results]}


def summarise(results: Sequence[Result]) -> dict:
    out: dict[str, dict] = {}
    for cat in CATEGORIES:
        rows = [r for r in results if r.category == cat]
        if rows:
            out[cat] = {"cases": len(rows), **{o: sum(r.outcome == o for r in rows) for o in OUTCOMES}}
    out["total"] = {"cases": len(results), **{o: sum(r.outcome == o for r in results) for o in OUTCOMES}}
    return out


def table(report: dict) -> str:
    lines = ["| category | cases tried | clear errors | recorded fallbacks | handled | bad outcomes |",
             "|---|---:|---:|---:|---:|---:|"]
    for cat, row in report["summary"].items():
        label = "**total**" if cat == "total" else CATEGORIES[cat]
        lines.append(f"| {label} | {row['cases']} | {row[CLEAR]} | {row[FALLBACK]} | {row[HANDLED]} | {row[BAD]} |")
    return "\n".join(lines)


def doc_section(report: dict) -> str:
    bad = [c for c in report["cases"] if c["outcome"] == BAD]
    parts = [table(report), "",
             f"{report['summary']['total']['cases']} cases in {report['seconds']:.0f} s on {report['cores']} cores "
             f"(Python {report['python']}); every case with its outcome and detail is in "
             "`benchmarks/results_reliability.json`. Written by `.venv/bin/python benchmarks/probe_reliability.py`.",
             ""]
    if bad:
        parts.append(f"Bad outcomes ({len(bad)}):")
        parts.append("")
        parts += [f"- {CATEGORIES[c['category']].split('. ', 1)[1]} / `{c['name']}`: {c['detail']}" for c in bad]
    else:
        parts.append("Bad outcomes: none.")
    return "\n".join(parts)


def print_report(report: dict) -> None:
    by_cat: dict[str, list] = {}
    for c in report["cases"]:
        by_cat.setdefault(c["category"], []).append(c)
    for cat, rows in by_cat.items():
        s = report["summary"][cat]
        print(f"\n{CATEGORIES[cat]}: {s['cases']} cases — {s[CLEAR]} clear errors, {s[FALLBACK]} recorded "
              f"fallbacks, {s[HANDLED]} handled, {s[BAD]} bad outcomes")
        for r in rows:
            if r["outcome"] == BAD:
                print(f"  BAD  {r['name']}: {r['detail']}")
    print()
    print(table(report))
    print(f"\n{report['mode']} probe: {report['summary']['total']['cases']} cases in {report['seconds']:.1f} s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="the fixed quick subset; writes nothing")
    parser.add_argument("--only", nargs="*", default=[], help="categories or name fragments (writes nothing)")
    parser.add_argument("--verbose", action="store_true", help="print every case, not only bad outcomes")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    parser.add_argument("--no-write", action="store_true", help="do not write the JSON results or the doc")
    args = parser.parse_args(argv)

    def log(line: str) -> None:
        print(line, flush=True)

    report = run_probe(quick=args.quick, only=args.only, verbose=args.verbose, keep=args.keep, log=log)
    print_report(report)
    if not (args.quick or args.only or args.no_write):
        RESULTS.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n")
        path = write_section(DOC, "probe", doc_section(report))
        print(f"wrote {RESULTS.relative_to(ROOT)} and {path.relative_to(ROOT)}")
    return 1 if report["summary"]["total"][BAD] else 0


if __name__ == "__main__":
    sys.exit(main())
