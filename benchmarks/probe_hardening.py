"""Issue 28's cases of the reliability probe ("Hardening II"): written from classes of failure.

``benchmarks/probe_reliability.py`` imports this module and calls :func:`register` with itself:
the cases are added to its list under four categories, and classified by its rules (a clear
error is one line, the documented type or exit status, naming what is wrong; nothing changed
that should not have). Each class is a table crossed with another:

- ``writers`` — one writer per directory: a second writer (run, a sweep, resume, fork, study,
  report, compare) while another process holds the directory's lock (every holding command x
  every writer), while a real run is paused mid-round, and into a directory not yet created: exit
  status 3, one line naming the holder (its command and process), the holder's directory
  byte-identical, the paused run's outputs those of an uninterrupted run. A directory holding
  another kind of output (run, sweep, study, moderation experiment) x the commands that would
  write it: exit 2, untouched. A study resumed as another study. Writes that stay inside: a link
  planted at every output name and folder (to a file outside, or dangling) x every writing
  command: nothing outside the case's run directory changes. An edited sweep.json (a job folder
  or condition id leading outside, odd characters, wrong types) x compare / report / resume:
  one line, exit 2. ``view --serve``: paths (other files, traversal, encoded traversal) x Host
  headers x methods: the page alone, to a loopback Host alone.
- ``values`` — one validator per value: every runtime parameter x NaN / infinities / negatives
  / out of range / wrong types, through the constructor, ``set_param`` on a running environment,
  the config's ``env``, ``--set`` and a ``param`` intervention, and ``fork --set``: all refuse,
  or all accept; ``set_lambdas`` agents and weights against the ``lambdas`` intervention;
  recommender, re-ranker and policy parameters through their ``check_params``, their
  construction, the config, ``--set``, an intervention / a policy group, and the running
  environment's ``set_recommender``.
- ``bounds`` — bounded LLM calls: a trickling or stalling server ends at the deadline; a huge
  reply (announced, chunked, a gzip bomb) is refused at ``max_reply_bytes``, unretried; a 429
  asking for a long wait fails at once naming it; a 404 stops a run with one line (exit 2);
  ``socialgym interview`` against a down, 404, 401 or failing server: one line, non-zero; each
  fault's fallbacks written to fallbacks.jsonl with a reason that names it.
- ``failures`` — one line for every failure a user meets: a bad ``--out`` (under a file, an
  existing file, a name or path too long, a folder that cannot be written) x every command
  with ``--out``; a damaged checkpoint key file x run / resume / fork; a malformed rounds.csv or
  network.csv cell x compare / report / view; Ctrl-C at the hardest points of a round (exit 130,
  summary.json ``interrupted``, ``resume`` gives the uninterrupted run's files); text and config
  correctness: ``clean_text`` keeps numbers, URLs, versions, e-mail addresses and abbreviations
  whole; text that is no UTF-8 anywhere in a config; a policy group named ``all``; ``fork --set
  llm.api_key=...``.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np
import yaml

if TYPE_CHECKING:     # bound by register(): the probe runs as __main__, so it is never imported by name
    from probe_reliability import (BASE_CONFIG, CLEAR, FALLBACK, HANDLED, RNG_BYTES, ROOT, SECRET, Bad,
                                   ProbeTimeout, _finished_run, _raises_clear, _reply, _resume_config,
                                   _schema_sample, _with_key_file, case, cli, cli_clear, complete_run, describe,
                                   expect_clear, faulty, files_containing, killed_run, llm_case, llm_config, merged,
                                   message_problem, one_line, reference_run, same_outputs, where)

# What this module takes from probe_reliability (bound by register(); see its docstring).
_SHARED = ("case", "cli", "cli_clear", "Bad", "ProbeTimeout", "CLEAR", "FALLBACK", "HANDLED", "describe", "where",
           "one_line", "message_problem", "expect_clear", "_raises_clear", "merged", "BASE_CONFIG", "SECRET",
           "files_containing", "llm_case", "llm_config", "faulty", "_reply", "_schema_sample", "_finished_run",
           "killed_run", "complete_run", "reference_run", "same_outputs", "_resume_config", "_with_key_file",
           "RNG_BYTES", "ROOT")
PRECIOUS = b"precious bytes outside the run directory\n"
SENTINEL = "SENTINEL-do-not-serve-7f3a"
LOCK = "<lock file>"
MiB = 2**20


def register(probe) -> None:
    """Bind the probe's framework into this module and add every case of issue 28 to its list
    (under the categories writers, values, bounds and failures of its ``CATEGORIES``)."""
    g = globals()
    for name in _SHARED:
        g[name] = getattr(probe, name)
    for add in (_writers, _inside, _serve, _values, _bounds, _failures, _text):
        add()


# =============================================================================== shared helpers
def _tree(root: Path, skip: Sequence[str] = ()) -> dict[str, str]:
    """Everything under ``root`` (links not followed): relative path -> "dir", "link:<target>" or
    the file's sha256. ``skip``: top-level names left out; writer lock files (regular files named
    ``.<dir>.socialgym-lock``) are left out too (a writer creates them beside its directory)."""
    out: dict[str, str] = {}
    if not os.path.lexists(root):
        return out
    for dirpath, dirnames, filenames in os.walk(root):
        base = Path(dirpath)
        rel_base = base.relative_to(root)
        if rel_base.parts and rel_base.parts[0] in skip:
            continue
        for name in sorted(dirnames + filenames):
            p = base / name
            rel = (rel_base / name).as_posix()
            if not rel_base.parts and name in skip:
                continue
            if p.is_symlink():
                out[rel] = "link:" + os.readlink(p)
            elif p.is_dir():
                out[rel] = "dir"
            elif name.endswith(".socialgym-lock") and name.startswith("."):
                continue
            else:
                out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def _diff(before: dict, after: dict, limit: int = 3) -> str | None:
    changed = [k for k in sorted(set(before) | set(after)) if before.get(k) != after.get(k)]
    if not changed:
        return None
    words = [f"{k} {'created' if k not in before else 'deleted' if k not in after else 'changed'}"
             for k in changed[:limit]]
    return ", ".join(words) + (f" (and {len(changed) - limit} more)" if len(changed) > limit else "")


def _configs(ctx) -> dict[str, Path]:
    """Config files of this module's runs (written once)."""
    def build() -> dict[str, Path]:
        folder = ctx.workdir("hardening-configs")
        variants = {
            "base": {"env.max_rounds": 3},
            "report": {"env.max_rounds": 3, "logging.report": True},
            "reps": {"env.max_rounds": 3, "run.replicates": 2, "run.workers": 1},
            "sweep": {"env.max_rounds": 3, "run.workers": 1, "sweep": {"env.xi": [0.1, 0.3]}},
        }
        paths = {}
        for name, changes in variants.items():
            paths[name] = folder / f"{name}.yaml"
            paths[name].write_text(yaml.safe_dump(merged(BASE_CONFIG, changes), sort_keys=False), encoding="utf-8")
        return paths
    return ctx.cached("hardening-configs", build)


def _template(ctx, kind: str) -> Path:
    """A directory of each kind, made once by the real command: a finished run, a sweep (two
    conditions), a study (soc-strategy, one replicate), a moderation experiment (no LLM)."""
    def build() -> Path:
        if kind == "run":
            return _finished_run(ctx)
        out = ctx.fresh(f"template-{kind}")
        if kind == "sweep":
            argv = ["run", str(_configs(ctx)["sweep"]), "--out", str(out), "--quiet"]
        elif kind == "study":
            argv = ["study", "soc-strategy", "--out", str(out), "--replicates", "1", "--quiet"]
        elif kind == "moderation experiment":
            argv = _moderation_argv(out)
        else:
            raise ValueError(kind)
        res = cli(argv)
        if res.rc != 0:
            raise RuntimeError(f"probe setup: the {kind} template failed: {res.exc or res.stderr[-300:]}")
        return out
    return ctx.cached(f"template-{kind}", build)


def _moderation_argv(out: Path) -> list[str]:
    return ["moderation", "--out", str(out), "--no-llm", "--discussions", "1", "--turns", "3", "--users", "3",
            "--quiet"]


def _copy(ctx, kind: str, stem: str = "d") -> Path:
    d = ctx.fresh(stem)
    shutil.copytree(_template(ctx, kind), d, symlinks=True)
    return d


def _one_line_any(res, words: Sequence[str], status: Sequence[int] = (2,), *, max_seconds: float | None = None):
    """A clear CLI error whose message names at least one of ``words`` (any of the ``status``es)."""
    verdict = cli_clear(res, [], status=res.rc if res.rc in status else status[0], max_seconds=max_seconds)
    msg = res.lines()[-1].lower()
    if words and not any(w.lower() in msg for w in words):
        raise Bad(f"message names none of {list(words)}: {verdict[1]}")
    return verdict


def _default_sigint() -> None:
    """(In a child, before exec) Ctrl-C as a terminal gives it: a probe started in the background
    of a non-interactive shell ignores SIGINT, and its children would inherit that."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _status(res) -> str:
    """How a CLI call ended, in a few words: its exit status, or the exception it raised."""
    return f"traceback: {describe(res.exc)}" if res.exc is not None else f"exit {res.rc}"


def _child_env() -> dict:
    env = {k: v for k, v in os.environ.items() if k != "SOCIALGYM_KILL_AT"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    return env


# ------------------------------------------------------------------------------- another writer
_HOLDER_CODE = r"""
import os, sys, threading
timer = threading.Timer(float(sys.argv[1]), lambda: os._exit(0))   # a bounded life, whatever happens
timer.daemon = True
timer.start()
from socialgym.rundir import writer_lock
held = {}
for line in sys.stdin:                 # ends when the probe closes the pipe (or exits)
    parts = line.rstrip("\n").split("\t")
    try:
        if parts[0] == "lock":
            lock = writer_lock(parts[2], parts[1])
            lock.__enter__()
            held[parts[2]] = lock
        elif parts[0] == "unlock":
            held.pop(parts[1]).__exit__(None, None, None)
        print("ok", flush=True)
    except Exception as exc:
        print("error", type(exc).__name__, " ".join(str(exc).split()), flush=True)
"""


class Holder:
    """Another process that holds writer locks on request: the real ``writer_lock``, as a run,
    resume, fork, sweep, study, report or compare of another process holds it."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", _HOLDER_CODE, "1800"], cwd=ROOT, env=_child_env(),
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True)
        atexit.register(self.close)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _ask(self, line: str) -> None:
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        reply = self.proc.stdout.readline()          # (bounded by the case's time limit)
        if reply.strip() != "ok":
            raise RuntimeError(f"probe setup: the lock holder answered {reply.strip()!r}")

    @contextlib.contextmanager
    def holding(self, directory: Path, command: str):
        self._ask(f"lock\t{command}\t{directory}")
        try:
            yield
        finally:
            self._ask(f"unlock\t{directory}")

    def close(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def _holder(ctx) -> Holder:
    """The probe run's lock holder, started once; it ends with the probe run (or 30 minutes)."""
    def start() -> Holder:
        holder = Holder()
        weakref.finalize(ctx, holder.close)
        return holder
    holder = ctx.cached("lock-holder", start)
    if holder.proc.poll() is not None:
        ctx._cache.pop("lock-holder")
        holder = ctx.cached("lock-holder", start)
    return holder


_PAUSE_CODE = r"""
import os, sys, time
from socialgym.experiments.run import runner
ready, go, spec = sys.argv[1:4]
r, point = spec.split(":")
def pause(rr, pp):
    if (rr, pp) == (int(r), point):
        open(ready, "w").close()
        deadline = time.monotonic() + 60
        while not os.path.exists(go) and time.monotonic() < deadline:
            time.sleep(0.01)
runner._fault_hook = pause
from socialgym.cli import main
sys.exit(main(sys.argv[4:]))
"""


class Paused:
    """``socialgym ARGV`` in a process of its own that pauses at ``round:point`` (act, outputs or
    checkpoint: the runner's fault hook) until released — a command caught in the middle of a
    round, for another writer to meet, or for a Ctrl-C to land at a known point."""

    def __init__(self, ctx, argv: Sequence[str], at: str) -> None:
        folder = ctx.workdir("paused")
        self.ready, self.go = folder / "ready", folder / "go"
        self.proc = subprocess.Popen([sys.executable, "-c", _PAUSE_CODE, str(self.ready), str(self.go), at,
                                      *map(str, argv)], cwd=ROOT, env=_child_env(), stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, start_new_session=True,
                                     preexec_fn=_default_sigint)

    def wait_ready(self, seconds: float = 90) -> None:
        deadline = time.monotonic() + seconds
        while not self.ready.exists():
            if self.proc.poll() is not None:
                raise RuntimeError(f"probe setup: the paused command ended first (exit {self.proc.returncode}): "
                                   f"{one_line(self.proc.stderr.read()[-300:], 240)}")
            if time.monotonic() > deadline:
                raise RuntimeError("probe setup: the paused command never reached its pause")
            time.sleep(0.01)

    def release(self) -> None:
        self.go.touch()

    def interrupt(self) -> None:
        os.killpg(self.proc.pid, signal.SIGINT)         # Ctrl-C: the terminal signals the process group

    def finish(self, seconds: float = 120) -> tuple[int, str, str]:
        out, err = self.proc.communicate(timeout=seconds)
        return self.proc.returncode, out, err

    def kill(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(OSError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)


# =============================================================================== 7a. one writer
def _writer_argv(ctx, writer: str, d: Path) -> list[str]:
    base = str(_finished_run(ctx))
    cfg = _configs(ctx)
    return {
        "run": lambda: ["run", str(cfg["base"]), "--out", str(d), "--quiet"],
        "run with replicates": lambda: ["run", str(cfg["reps"]), "--out", str(d), "--quiet"],
        "run of a sweep": lambda: ["run", str(cfg["sweep"]), "--out", str(d), "--quiet"],
        "resume": lambda: ["resume", str(d), "--quiet"],
        "fork": lambda: ["fork", base, "--at-round", "2", "--out", str(d), "--quiet"],
        "study": lambda: ["study", "soc-strategy", "--out", str(d), "--replicates", "1", "--quiet"],
        "report": lambda: ["report", str(d)],
        "compare": lambda: ["compare", base, str(d)],
        "compare a sweep": lambda: ["compare", str(d)],
        "compare --out": lambda: ["compare", base, base, "--out", str(d / "cmp.csv")],
        "moderation": lambda: _moderation_argv(d),
    }[writer]()


HOLDERS = ("run", "resume", "fork", "sweep", "study", "report", "compare")
RUN_WRITERS = ("run", "run with replicates", "run of a sweep", "resume", "fork", "study", "report", "compare",
               "compare --out")


def _busy_case(holder_command: str, writer: str, target: str):
    """``writer`` while another process (as ``holder_command``) holds ``target``'s lock."""
    def run(ctx):
        if target == "none":
            d = ctx.fresh("busy")
        else:
            d = _copy(ctx, target, "busy")
        before = _tree(d)
        holder = _holder(ctx)
        with holder.holding(d, holder_command):
            res = cli(_writer_argv(ctx, writer, d))
        change = _diff(before, _tree(d))
        if change:
            raise Bad(f"the holder's directory changed under the second writer: {change}")
        return cli_clear(res, [f"`socialgym {holder_command}`", f"process {holder.pid}"], status=3)
    return run


def _running_case(writer: str):
    """``writer`` while a real ``socialgym run`` is paused after round 2's outputs."""
    def run(ctx):
        d = ctx.fresh("running")
        first = Paused(ctx, ["run", _resume_config(ctx), "--out", d, "--quiet"], "2:outputs")
        try:
            first.wait_ready()
            res = cli(_writer_argv(ctx, writer, d))
            first.release()
            rc, _, err = first.finish()
        finally:
            first.kill()
        verdict = cli_clear(res, ["`socialgym run`", f"process {first.proc.pid}"], status=3)
        if rc != 0:
            raise Bad(f"the first run failed after the refused {writer}: exit {rc}: {one_line(err[-300:], 200)}")
        problem = same_outputs(d, reference_run(ctx))
        if problem:
            raise Bad(f"the first run's outputs are not an uninterrupted run's: {problem}")
        return verdict[0], verdict[1] + "; the first run then completed with an uninterrupted run's files"
    return run


# (held kind, writer, words one of which the message must name)
OTHER_KIND = [
    ("run", "run with replicates", ["holds a run"]),
    ("run", "run of a sweep", ["holds a run"]),
    ("run", "study", ["holds a run"]),
    ("run", "moderation", ["holds a run"]),
    ("run", "run", ["already holds a run"]),
    ("sweep", "run", ["holds a sweep"]),
    ("sweep", "run of a sweep", ["already holds a sweep"]),
    ("sweep", "study", []),
    ("sweep", "moderation", ["holds a sweep"]),
    ("study", "run", ["holds a study"]),
    ("study", "run with replicates", ["holds a study", "holds a sweep"]),
    ("study", "moderation", ["holds a study"]),
    ("moderation experiment", "run", ["moderation experiment"]),
    ("moderation experiment", "run with replicates", ["moderation experiment"]),
    ("moderation experiment", "study", ["moderation experiment"]),
    ("moderation experiment", "resume", ["moderation experiment"]),
    ("moderation experiment", "fork", ["not empty", "moderation experiment"]),
    ("run", "fork", ["not empty", "holds a run"]),
    ("sweep", "fork", ["not empty", "holds a sweep"]),
    ("study", "fork", ["not empty", "holds a study"]),
]


def _other_kind_case(kind: str, writer: str, words: Sequence[str]):
    def run(ctx):
        d = _copy(ctx, kind, "kind")
        before = _tree(d)
        res = cli(_writer_argv(ctx, writer, d))
        change = _diff(before, _tree(d))
        if change:
            raise Bad(f"the {kind} directory was written ({_status(res)}): {change}")
        return _one_line_any(res, words, max_seconds=10)
    return run


# (label, extra argv of `study`, words the message must name)
STUDY_AS_ANOTHER = [
    ("another study (misinformation)", ["misinformation"], ["'soc-strategy'", "misinformation"]),
    ("another study (ties-coach)", ["ties-coach"], ["'soc-strategy'", "ties-coach"]),
    ("--replicates 2", ["soc-strategy", "--replicates", "2"], ["replicates", "(asked: 2)"]),
    ("--fork-at 3", ["soc-strategy", "--fork-at", "3"], ["fork_at", "(asked: 3)"]),
    ("--scale llm", ["soc-strategy", "--scale", "llm"], ["scale", "llm"]),
    ("another study and --replicates 3", ["misinformation", "--replicates", "3"], ["misinformation", "(asked: 3)"]),
]


def _study_as_another(extra: Sequence[str], names: Sequence[str]):
    def run(ctx):
        d = _copy(ctx, "study", "study")
        before = _tree(d)
        res = cli(["study", *extra, "--out", str(d), "--quiet"])
        change = _diff(before, _tree(d))
        if change:
            raise Bad(f"the study directory was written: {change}")
        return cli_clear(res, names, max_seconds=10)
    return run


def _study_as_itself(ctx):
    d = _copy(ctx, "study", "study")
    res = cli(["study", "soc-strategy", "--out", str(d), "--quiet"])
    if res.exc is not None or res.rc != 0:
        raise Bad(f"the study resumed as it is failed: exit {res.rc}: {res.exc or one_line(res.stderr[-300:], 200)}")
    return HANDLED, "resumed as it is (no --replicates: the held ones)"


def _moderation_while_held(ctx):
    d = ctx.fresh("busy")
    holder = _holder(ctx)
    with holder.holding(d, "run"):
        res = cli(_moderation_argv(d))
    if d.exists() and any(d.iterdir()):
        raise Bad(f"moderation wrote into a directory another process holds ({_status(res)}; "
                  f"{len(list(d.iterdir()))} entries)")
    return cli_clear(res, ["`socialgym run`"], status=3)


def _writers() -> None:
    quick = {("run", "resume"), ("report", "run"), ("fork", "compare"), ("study", "report")}
    for holder in HOLDERS:
        for writer in RUN_WRITERS:
            case("writers", f"busy: {writer} while another process's {holder} holds the run",
                 _busy_case(holder, writer, "run"), quick=(holder, writer) in quick, timeout=90)
    for writer in ("resume", "report", "compare a sweep", "run of a sweep"):
        case("writers", f"busy: {writer} while another process's sweep holds the sweep",
             _busy_case("sweep", writer, "sweep"), timeout=90)
    for writer in ("run", "run with replicates", "fork", "study"):
        case("writers", f"busy: {writer} into a directory another process's run is creating",
             _busy_case("run", writer, "none"), quick=writer == "fork", timeout=90)
    case("writers", "busy: moderation into a directory another process's run is creating", _moderation_while_held,
         timeout=90)
    for writer in ("resume", "report", "run", "fork", "compare", "run with replicates", "study"):
        case("writers", f"busy: {writer} while a real run is paused in round 2", _running_case(writer),
             quick=writer == "resume", timeout=180)
    for kind, writer, words in OTHER_KIND:
        case("writers", f"another kind: {writer} into a {kind} directory", _other_kind_case(kind, writer, words),
             quick=(kind, writer) == ("run", "run with replicates"), timeout=120)
    for label, extra, names in STUDY_AS_ANOTHER:
        case("writers", f"study resumed as {label}", _study_as_another(extra, names), timeout=120)
    case("writers", "study resumed as it is", _study_as_itself, timeout=120)


# =============================================================================== 7b. writes inside
# command -> (template of the run directory, the names a link is planted at); "x/" is a folder
LINK_COMMANDS: dict[str, tuple[str, tuple[str, ...]]] = {
    "report": ("run", ("report.html", "viewer.html", "plots/rewards.png", ".report.html.tmp", LOCK, "plots/")),
    "view": ("run", ("viewer.html", ".viewer.html.tmp")),
    "compare": ("run", ("compare.csv", "compare.md", LOCK)),
    "resume": ("killed", ("rounds.csv", "events.jsonl", "summary.json", "checkpoint.pkl", "checkpoint.tmp",
                          "ties/round_0003.npz", "snapshots/round_0003.pkl", LOCK, "ties/", "snapshots/")),
    "resume of a complete run": ("complete", ("report.html", "summary.json", "plots/")),
    "run": ("empty", ("run.json", "config.yaml", "rounds.csv", "checkpoint.pkl", "report.html", LOCK, "ties/",
                      "plots/")),
    "run with replicates": ("empty", ("sweep.json", "aggregate.csv", "index.html", "runs/")),
    "fork": ("none", (LOCK,)),
    "report of a sweep": ("sweep", ("aggregate.csv", "index.html", "plots/")),
    "compare a sweep": ("sweep", ("compare/",)),
}
_LINK_ARGV = {"report of a sweep": "report", "resume of a complete run": "resume"}


def _link_case(command: str, template: str, name: str, dangling: bool):
    def run(ctx):
        from socialgym.rundir.lock import lock_path

        w = ctx.workdir("links")
        outside = w / "outside"
        (outside / "victim-dir").mkdir(parents=True)
        (outside / "victim.txt").write_bytes(PRECIOUS)
        (outside / "victim-dir" / "kept.txt").write_bytes(PRECIOUS)
        d = w / "run"
        if template in ("run", "sweep", "killed", "complete"):
            src = {"run": lambda: _finished_run(ctx), "sweep": lambda: _template(ctx, "sweep"),
                   "killed": lambda: killed_run(ctx), "complete": lambda: complete_run(ctx)}[template]()
            shutil.copytree(src, d, symlinks=True)
            if template == "complete":
                (d / "report.html").unlink()
        elif template == "empty":
            d.mkdir()
        folder = name.endswith("/")
        link = lock_path(d) if name == LOCK else d / name.rstrip("/")
        if link.is_symlink() or link.is_file():
            link.unlink()
        elif link.is_dir():
            shutil.rmtree(link)
        link.parent.mkdir(parents=True, exist_ok=True)
        if dangling:
            target = outside / ("ghost-dir" if folder else "ghost.txt")
        else:
            target = outside / ("victim-dir" if folder else "victim.txt")
        link.symlink_to(target, target_is_directory=folder)
        before = _tree(w, skip=("run",))
        cfg = _configs(ctx)["report" if name in ("report.html", "plots/") else "base"]
        argv = {
            "report": ["report", str(d)], "view": ["view", str(d)],
            "compare": ["compare", str(_finished_run(ctx)), str(d)], "resume": ["resume", str(d), "--quiet"],
            "run": ["run", str(cfg), "--out", str(d), "--quiet"],
            "run with replicates": ["run", str(_configs(ctx)["reps"]), "--out", str(d), "--quiet"],
            "fork": ["fork", str(_finished_run(ctx)), "--at-round", "2", "--out", str(d), "--quiet"],
            "compare a sweep": ["compare", str(d)],
        }[_LINK_ARGV.get(command, command)]
        res = cli(argv)
        change = _diff(before, _tree(w, skip=("run",)))
        if change:
            raise Bad(f"a write went through the link to outside the directory ({_status(res)}): {change}")
        if res.exc is not None:
            raise Bad(f"traceback: {describe(res.exc)}{where(res.exc)}")
        if res.rc == 0:
            fate = "still a link" if link.is_symlink() else "replaced by one of its own"
            return HANDLED, f"exit 0; {name} {fate}; nothing outside changed"
        return _one_line_any(res, [], status=(2, 4))
    return run


def _sweep_edit(label: str, edit: Callable[[dict, Path, str], Any]):
    """(an edit of sweep.json: (manifest, case folder, job 1's condition id) -> new manifest)"""
    def make(command: str):
        def run(ctx):
            w = ctx.workdir("sweep-edit")
            d = w / "sweep"
            shutil.copytree(_template(ctx, "sweep"), d, symlinks=True)
            manifest = json.loads((d / "sweep.json").read_text())
            cid = manifest["jobs"][1]["condition_id"]
            manifest = edit(manifest, w, cid)
            (d / "sweep.json").write_text(json.dumps(manifest), encoding="utf-8")
            before_out, before_in = _tree(w, skip=("sweep",)), _tree(d)
            argv = {"compare": ["compare", str(d)], "report": ["report", str(d)],
                    "resume": ["resume", str(d), "--quiet"]}[command]
            res = cli(argv)
            change = _diff(before_out, _tree(w, skip=("sweep",))) or _diff(before_in, _tree(d))
            if change:
                raise Bad(f"{command} of the edited sweep changed files ({_status(res)}): {change}")
            return cli_clear(res, ["sweep.json"], max_seconds=10)
        return run
    return make


def _job(i: int, **fields):
    def edit(m: dict, w: Path, cid: str) -> dict:
        for k, v in fields.items():
            m["jobs"][i][k] = v(w, cid) if callable(v) else v
        return m
    return edit


SWEEP_EDITS = [
    ("job folder ../../escape/rep_0", _job(1, out="../../escape/rep_0")),
    ("job folder an absolute path", _job(1, out=lambda w, c: str(w / "escape" / "rep_0"))),
    ("job folder runs/../../escape", _job(1, out="runs/../../escape")),
    ("job folder with .. after the condition", _job(1, out=lambda w, c: f"runs/{c}/../../../escape/rep_0")),
    ("job folder ending in /..", _job(1, out=lambda w, c: f"runs/{c}/rep_0/..")),
    ("job folder with a newline", _job(1, out=lambda w, c: f"runs/{c}\n/rep_0")),
    ("job folder and condition with a space", _job(1, out="runs/c01-a b/rep_0", condition_id="c01-a b")),
    ("job folder with a NUL byte", _job(1, out=lambda w, c: f"runs/{c}\x00/rep_0")),
    ("job folder not a string", _job(1, out=5)),
    ("job folder null", _job(1, out=None)),
    ("job folder a list", _job(1, out=["runs", "c01", "rep_0"])),
    ("condition id ../../escape", _job(1, condition_id="../../escape")),
    ("condition id an absolute path", _job(1, condition_id=lambda w, c: str(w / "escape"))),
    ("condition id with a slash", _job(1, condition_id=lambda w, c: f"{c}/../..")),
    ("condition and folder non-ASCII", _job(1, out="runs/c01-\u00e9/rep_0", condition_id="c01-\u00e9")),
    ("condition id not its folder's", _job(1, condition_id="c00")),
    ("fork_from leading outside", _job(1, fork_from="../../escape/rep_0")),
    ("jobs not a list", lambda m, w, c: {**m, "jobs": {"0": m["jobs"][0]}}),
    ("the manifest a list", lambda m, w, c: [m]),
]


def _inside() -> None:
    quick = {("report", "report.html", False), ("resume", "rounds.csv", True), ("run", LOCK, False),
             ("compare", "compare.csv", True), ("resume", "ties/", False)}
    for command, (template, names) in LINK_COMMANDS.items():
        for name in names:
            for dangling in (False, True):
                what = "a dangling link" if dangling else "a link to a file outside"
                if name.endswith("/"):
                    what = "a dangling folder link" if dangling else "a link to a folder outside"
                case("writers", f"link: {command} with {what} at {name}", _link_case(command, template, name, dangling),
                     quick=(command, name, dangling) in quick, timeout=120)
    for label, edit in SWEEP_EDITS:
        make = _sweep_edit(label, edit)
        for command in ("compare", "report", "resume"):
            case("writers", f"sweep.json edited, {label}: {command}", make(command),
                 quick=command == "resume" and label.startswith(("job folder ../", "condition id ../")), timeout=90)


# =============================================================================== 7c. view --serve
# (path, expected: "page" = 200 with the page's bytes, "refused" = not 200, "either")
SERVE_PATHS = [
    ("/", "page"), ("/viewer.html", "page"), ("/viewer.html?round=3", "either"), ("/?x=../config.yaml", "either"),
    ("/config.yaml", "refused"), ("/checkpoint.pkl", "refused"), ("/summary.json", "refused"),
    ("/secret.txt", "refused"), ("/../outside/secret.txt", "refused"), ("/%2e%2e/outside/secret.txt", "refused"),
    ("/%2E%2E%2Foutside%2Fsecret.txt", "refused"), ("/..%2f..%2foutside/secret.txt", "refused"),
    ("/./secret.txt", "refused"), ("//secret.txt", "refused"), ("/viewer.html/../secret.txt", "refused"),
    ("/viewer.html/", "refused"), ("/plots/", "refused"), ("/ties/round_0001.npz", "refused"),
    ("/snapshots/", "refused"), ("/viewer.html%00.txt", "refused"), ("/VIEWER.HTML", "refused"),
    ("/viewer.html;.txt", "refused"), ("/%5c..%5csecret.txt", "refused"), ("/\\..\\secret.txt", "refused"),
    ("http://127.0.0.1:{port}/secret.txt", "refused"), ("*", "refused"), ("/" + "a" * 8000, "refused"),
    ("/%ff%fe", "refused"), ("/index.html", "refused"), ("/.socialgym-lock", "refused"),
]
# (label, Host header or None for none, expected)
SERVE_HOSTS = [
    ("127.0.0.1 and its port", "127.0.0.1:{port}", "page"), ("localhost and its port", "localhost:{port}", "page"),
    ("a rebinding domain", "attacker.example:{port}", "refused"), ("a domain, no port", "attacker.example", "refused"),
    ("127.0.0.1 with another port", "127.0.0.1:1", "refused"),
    ("a domain that starts with 127.0.0.1", "127.0.0.1.attacker.example:{port}", "refused"),
    ("a domain that starts with localhost", "localhost.attacker.example:{port}", "refused"),
    ("loopback and a domain in one header", "127.0.0.1:{port}, attacker.example", "refused"),
    ("userinfo before the host", "attacker.example@127.0.0.1:{port}", "refused"),
    ("0.0.0.0", "0.0.0.0:{port}", "refused"), ("no Host header", None, "refused"),
    ("127.0.0.1 without a port", "127.0.0.1", "either"), ("[::1]", "[::1]:{port}", "either"),
    ("LOCALHOST in capitals", "LOCALHOST:{port}", "either"),
]
SERVE_METHODS = [("POST", "/viewer.html"), ("PUT", "/secret.txt"), ("DELETE", "/viewer.html"),
                 ("OPTIONS", "*"), ("HEAD", "/config.yaml"), ("TRACE", "/viewer.html")]


def _served_run(ctx) -> tuple[Path, bytes]:
    def build():
        w = ctx.workdir("served")
        d = w / "run"
        shutil.copytree(_finished_run(ctx), d, symlinks=True)
        res = cli(["view", str(d)])
        if res.rc != 0:
            raise RuntimeError(f"probe setup: view failed: {res.exc or res.stderr[-300:]}")
        (d / "secret.txt").write_text(SENTINEL)
        with open(d / "config.yaml", "a") as f:
            f.write(f"# {SENTINEL}\n")
        (w / "outside").mkdir()
        (w / "outside" / "secret.txt").write_text(SENTINEL)
        return d, (d / "viewer.html").read_bytes()
    return ctx.cached("served-run", build)


def _http(port: int, raw: bytes, limit: int = 16 * MiB) -> tuple[int | None, bytes]:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(raw)
        data = b""
        while len(data) < limit:
            try:
                chunk = s.recv(65536)
            except (ConnectionResetError, socket.timeout):
                break
            if not chunk:
                break
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    parts = head.split(b" ")
    status = int(parts[1]) if head.startswith(b"HTTP/") and len(parts) > 1 and parts[1].isdigit() else None
    return status, body


def _serve_case(method: str, path: str, host: str | None, expect: str):
    def run(ctx):
        from socialgym.viewer.serve import page_server

        d, page = _served_run(ctx)
        server = page_server(d / "viewer.html")
        port = server.server_address[1]
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        thread.start()
        try:
            if server.server_address[0] != "127.0.0.1":
                raise Bad(f"the server listens on {server.server_address[0]}, not 127.0.0.1 only")
            lines = [f"{method} {path.format(port=port)} HTTP/1.1"]
            if host is not None:
                lines.append(f"Host: {host.format(port=port)}")
            lines += ["Connection: close", "Content-Length: 0", "", ""]
            status, body = _http(port, "\r\n".join(lines).encode("latin-1"))
        finally:
            server.shutdown()
            server.server_close()
            thread.join(10)
        if SENTINEL.encode() in body:
            raise Bad(f"{method} {one_line(path, 60)} (Host {host}) served another file's bytes (status {status})")
        if (d / "viewer.html").read_bytes() != page:
            raise Bad("the page on disk changed")
        ok = status == 200 and (body == page or method == "HEAD")
        if expect == "page":
            if not ok:
                raise Bad(f"the page was not served: status {status}, {len(body)} bytes")
            return HANDLED, "200 with the page"
        if status == 200 and not ok:
            raise Bad(f"200 with {len(body)} bytes that are not the page")
        if expect == "refused" and status == 200:
            raise Bad(f"{method} {one_line(path, 60)} with Host {host!r} was answered 200")
        return (HANDLED, "200 with the page") if status == 200 else (CLEAR, f"refused: status {status}")
    return run


def _serve_cli(ctx):
    """The real `socialgym view DIR --serve`: it serves the page on loopback, refuses another file,
    and Ctrl-C ends it with exit status 0 or 130 and no traceback."""
    served, _ = _served_run(ctx)
    d = ctx.fresh("served-cli") / "run"
    shutil.copytree(served.parent, d.parent, symlinks=True)
    env = {k: v for k, v in _child_env().items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "BROWSER")}
    proc = subprocess.Popen([sys.executable, "-m", "socialgym.cli", "view", str(d), "--serve"], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=_default_sigint)
    try:
        line = ""
        deadline = time.monotonic() + 60
        while "serving" not in line and time.monotonic() < deadline and proc.poll() is None:
            line = proc.stdout.readline()
        if "serving" not in line:
            raise Bad(f"no 'serving' line (exit {proc.poll()}): {one_line(proc.stderr.read()[-300:], 200)}")
        url = line.split()[1]
        port = int(url.split(":")[2].split("/")[0])
        if not url.startswith("http://127.0.0.1:"):
            raise Bad(f"serves {url}, not on 127.0.0.1")
        good = _http(port, f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n".encode())
        other = _http(port, f"GET /config.yaml HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
                      .encode())
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
    page = (d / "viewer.html").read_bytes()          # (the command wrote it again before serving it)
    if good != (200, page):
        raise Bad(f"GET / answered {good[0]} with {len(good[1])} bytes, not the page")
    if other[0] == 200 or SENTINEL.encode() in other[1]:
        raise Bad(f"GET /config.yaml answered {other[0]}")
    if proc.returncode not in (0, 130) or "Traceback" in err:
        raise Bad(f"Ctrl-C: exit {proc.returncode}, {one_line(err[-300:], 200)}")
    return HANDLED, f"the page on 127.0.0.1:<port>, /config.yaml {other[0]}, Ctrl-C exit {proc.returncode}"


def _serve() -> None:
    for path, expect in SERVE_PATHS:
        case("writers", f"view --serve: GET {one_line(path, 50)}", _serve_case("GET", path, "127.0.0.1:{port}", expect),
             quick=path in ("/", "/../outside/secret.txt", "/%2e%2e/outside/secret.txt"))
    for label, host, expect in SERVE_HOSTS:
        case("writers", f"view --serve: Host {label}", _serve_case("GET", "/viewer.html", host, expect),
             quick=label == "a rebinding domain")
        if expect == "refused":
            case("writers", f"view --serve: Host {label}, GET /secret.txt",
                 _serve_case("GET", "/secret.txt", host, "refused"))
    for method, path in SERVE_METHODS:
        case("writers", f"view --serve: {method} {path}", _serve_case(method, path, "127.0.0.1:{port}",
                                                                       "either" if method == "HEAD" else "refused"))
    case("writers", "view --serve: the real command, then Ctrl-C", _serve_cli, timeout=90)


# =============================================================================== 8. one validator
NP = "numpy"             # a value only Python can pass (no config can hold it)
# (label, value)
RUNTIME_VALUES = [
    ("nan", math.nan), ("inf", math.inf), ("-inf", -math.inf), ("-1", -1.0), ("-1e-300", -1e-300), ("0", 0.0),
    ("-0.0", -0.0), ("1", 1.0), ("1.5", 1.5), ("1e308", 1e308), ("2**70", 2**70), ("'0.3' (a string)", "0.3"),
    ("None", None), ("True", True), ("[0.1]", [0.1]), ("numpy nan", (NP, np.float64("nan"))),
    ("numpy int -1", (NP, np.int64(-1))), ("numpy float32 0.5", (NP, np.float32(0.5))),
]
BASE_RUN = {"seed": 0, "env": {"n_agents": 4, "max_rounds": 3, "recommender": "random", "sentiment": "tone"},
            "policy": {"kind": "greedy"}, "logging": {"report": False, "progress": False}}


def _yaml_text(value: Any) -> str:
    text = yaml.safe_dump(value, default_flow_style=True).strip()
    return text[:-len("...")].strip() if text.endswith("...") else text


def _outcome(fn: Callable[[], Any]) -> tuple[str, str]:
    """("refused", message) or ("accepted", "")."""
    try:
        fn()
    except ProbeTimeout:
        raise
    except (ValueError, TypeError) as exc:        # ConfigError, ParamError, InterventionError are ValueErrors
        problem = message_problem(str(exc))
        if problem:
            raise Bad(f"{problem}: {describe(exc)}")
        return "refused", f"{type(exc).__name__}: {exc}"
    except Exception as exc:  # noqa: BLE001
        raise Bad(f"unexpected {describe(exc)}{where(exc)}")
    return "accepted", ""


def _agree(routes: dict[str, Callable[[], Any]], name: str, named: dict[str, Sequence[str]] | None = None
           ) -> tuple[str, str]:
    """Every route refuses, each message naming ``name`` (or, for a route in ``named``, one of its
    words: a config route names its own key), or every route accepts."""
    results = {route: _outcome(fn) for route, fn in routes.items()}
    kinds = {r[0] for r in results.values()}
    if len(kinds) > 1:
        refused = [k for k, r in results.items() if r[0] == "refused"]
        accepted = [k for k, r in results.items() if r[0] == "accepted"]
        first = results[refused[0]][1]
        raise Bad(f"refused by {', '.join(refused)} but accepted by {', '.join(accepted)} ({one_line(first, 160)})")
    if kinds == {"accepted"}:
        return HANDLED, f"accepted by all {len(results)} ways in"
    for route, (_, msg) in results.items():
        words = [name, *(named or {}).get(route, ())]
        if not any(w.lower() in msg.lower() for w in words):
            raise Bad(f"the message of {route} names none of {words}: {one_line(msg, 200)}")
    return CLEAR, f"refused by all {len(results)} ways in: {one_line(next(iter(results.values()))[1], 160)}"


def _running_env():
    import socialgym
    env = socialgym.parallel_env(n_agents=3, max_rounds=4, seed=0, recommender="random", sentiment="tone")
    env.reset(seed=0)
    return env


def _runtime_param_case(param: str, raw: Any):
    def run(ctx):
        from socialgym.config import FeedConfig
        from socialgym.experiments import load_config

        python_only = isinstance(raw, tuple) and raw[0] == NP
        value = raw[1] if python_only else raw
        env = _running_env()
        before = (env.config, env.ties.xi, env.ties.delta_max, env.ties.decay, env.ties.b_rec)

        def set_param():
            env.set_param(param, value)

        routes = {"FeedConfig.from_kwargs": lambda: FeedConfig.from_kwargs(**{param: value}),
                  "env.set_param": set_param}
        if not python_only:
            routes.update({
                "the config's env": lambda: load_config(merged(BASE_RUN, {f"env.{param}": value})),
                "--set": lambda: load_config(BASE_RUN, [f"env.{param}={_yaml_text(value)}"]),
                "a param intervention": lambda: load_config(merged(BASE_RUN, {"interventions": [
                    {"kind": "param", "at_round": 2, "name": param, "value": value}]})),
            })
        verdict = _agree(routes, param, {"a param intervention": ["interventions[0].value"]})
        after = (env.config, env.ties.xi, env.ties.delta_max, env.ties.decay, env.ties.b_rec)
        if verdict[0] == CLEAR and after != before:
            raise Bad("set_param refused the value but the environment changed")
        if verdict[0] == HANDLED and getattr(env.config, param) != value:
            raise Bad(f"set_param accepted the value but env.config.{param} is {getattr(env.config, param)!r}")
        return verdict
    return run


FORK_VALUES = (".nan", "-1", "1.5", "'0.3'")


def _fork_param_case(param: str, text: str):
    def run(ctx):
        from socialgym.config import FeedConfig

        value = yaml.safe_load(text)
        try:
            FeedConfig.from_kwargs(**{param: value})
            valid = True
        except (TypeError, ValueError):
            valid = False
        out = ctx.fresh("fork-param")
        res = cli(["fork", str(_finished_run(ctx)), "--at-round", "2", "--out", str(out), "--quiet", "--set",
                   f"env.{param}={text}"])
        if valid:
            if res.rc != 0:
                raise Bad(f"a valid value refused by fork: exit {res.rc}: {one_line(res.stderr, 200)}")
            return HANDLED, "accepted by the constructor and by fork"
        return cli_clear(res, [param], out=out, max_seconds=10)
    return run


# set_lambdas: (label, agents, weights, the word the message must name)
W1 = [1.0, 0.0, 0.0, 0.0, 0.0]
LAMBDA_CASES = [
    ("agent -1", [-1], W1, "-1"), ("agent 3 of 3", [3], W1, "3"), ("agent 10**20", [10**20], W1, "10000"),
    ("agent 'agent_9'", ["agent_9"], W1, "agent_9"), ("agent 'agent_-1'", ["agent_-1"], W1, "agent_-1"),
    ("agent True", [True], W1, "True"), ("agent None", [None], W1, "None"), ("agent 1.5", [1.5], W1, "1.5"),
    ("agent numpy -1", [np.int64(-1)], W1, "-1"), ("agent numpy 3", [np.int64(3)], W1, "3"),
    ("agents a string", "agent_0", W1, "agent"), ("agent a list", [[0]], W1, "[0]"),
    ("weights negative", ["agent_0"], [-1.0, 1.0, 1.0, 0.0, 0.0], "weights"),
    ("weights nan", ["agent_0"], [math.nan, 1.0, 0.0, 0.0, 0.0], "weights"),
    ("weights inf", ["agent_0"], [math.inf, 0.0, 0.0, 0.0, 0.0], "weights"),
    ("weights four numbers", ["agent_0"], [1.0, 0.0, 0.0, 0.0], "weights"),
    ("weights summing to 2", ["agent_0"], [2.0, 0.0, 0.0, 0.0, 0.0], "weights"),
    ("weights an unknown component", ["agent_0"], {"SOC": 1.0, "XYZ": 0.0}, "XYZ"),
    ("weights a string", ["agent_0"], "SOC", "weights"),
    ("weights None", ["agent_0"], None, "weights"),
    ("valid: agent_1 and index 2", ["agent_1", 2], [0.2, 0.2, 0.2, 0.2, 0.2], ""),
    ("valid: no agents", [], W1, ""),
]


def _lambdas_case(agents: Any, weights: Any, word: str):
    def run(ctx):
        from socialgym.experiments import load_config

        env = _running_env()
        before = env.lambdas.copy()
        routes: dict[str, Callable] = {"env.set_lambdas": lambda: env.set_lambdas(agents, weights)}
        ids = None
        if isinstance(agents, list) and all(isinstance(a, str) for a in agents) and agents:
            ids = agents
        elif isinstance(agents, list) and all(type(a) is int and 0 <= a < 3 for a in agents) and agents:
            ids = [f"agent_{a}" for a in agents]
        if ids is not None and (weights is None or isinstance(weights, (list, dict, str))):
            routes["a lambdas intervention"] = lambda: load_config(merged(
                {**BASE_RUN, "env": {**BASE_RUN["env"], "n_agents": 3}},
                {"interventions": [{"kind": "lambdas", "at_round": 2, "target": ids, "lambdas": weights}]}))
        verdict = _agree(routes, word, {"a lambdas intervention": ["interventions[0].lambdas"],
                                        "env.set_lambdas": ["set_lambdas weights"] if word == "weights" else []})
        if verdict[0] == CLEAR and not np.array_equal(env.lambdas, before):
            raise Bad("set_lambdas refused but the weights changed")
        return verdict
    return run


# (family, name, parameter, bad value); family: recommender, rerank or a policy kind
STANCES = ["a", "b", "a", "b"]
PARAM_ROWS = [
    ("recommender", "popularity", "half_life", 0), ("recommender", "popularity", "window", 2.5),
    ("recommender", "popularity", "cell_budget", 10**10), ("recommender", "popularity", "recency_weight", math.inf),
    ("recommender", "topic_affinity", "w_like", math.nan), ("recommender", "topic_affinity", "profile_half_life", 0),
    ("recommender", "topic_affinity", "w_post", None), ("recommender", "social", "in_weight", -math.inf),
    ("recommender", "social", "max_social_candidates", -1), ("recommender", "social", "max_social_candidates", 10**7),
    ("recommender", "mf", "dim", 0), ("recommender", "mf", "dim", 10**8), ("recommender", "mf", "epochs", 1001),
    ("recommender", "mf", "lr", -0.1), ("recommender", "mf", "batch_size", 1.5),
    ("recommender", "mf", "replay_rounds", "3"), ("recommender", "mf", "init_scale", -0.1),
    ("recommender", "popularity", "nope", 1),
    ("rerank", "random_replacement", "n", -1), ("rerank", "random_replacement", "n", 10**9),
    ("rerank", "random_replacement", "every", 0), ("rerank", "random_replacement", "phases", "act"),
    ("rerank", "random_replacement", "phases", ["act", "later"]), ("rerank", "stance_penalty", "strength", -0.1),
    ("rerank", "stance_penalty", "overfetch", 101), ("rerank", "tail_quota_transfer", "share", 1.01),
    ("rerank", "tail_quota_transfer", "n_head", 0),
    ("random", "random", "mention_prob", 1.5), ("random", "random", "seed", -1), ("random", "random", "seed", 1.5),
    ("greedy", "greedy", "b", -0.1), ("greedy", "greedy", "b", "half"), ("greedy", "greedy", "seed", True),
    ("llm", "llm", "max_users", 0), ("llm", "llm", "generation", "both"), ("llm", "llm", "item_chars", 9),
    ("llm", "llm", "text_tokens", 10**7),
]


RERANK_REQUIRED = {"random_replacement": {"n": 2}, "stance_penalty": {"stances": STANCES}}
"""The other (valid) parameters a re-ranking step needs."""


def _rerank_step(name: str, param: str, value: Any) -> dict:
    return {"kind": name, **RERANK_REQUIRED.get(name, {}), param: value}


def _param_case(family: str, name: str, param: str, value: Any):
    def run(ctx):
        from socialgym.experiments import load_config
        from socialgym.recommenders import apply_reranking, make_recommender
        from socialgym.recommenders.registry import check_recommender, check_reranking
        from socialgym.recommenders.simple import Chronological

        base = merged(BASE_RUN, {})
        routes: dict[str, Callable] = {}
        env = None
        if family == "recommender":
            env = _running_env()
            routes = {
                "check_recommender": lambda: check_recommender(name, **{param: value}),
                "make_recommender": lambda: make_recommender(name, **{param: value}),
                "the config": lambda: load_config(merged(base, {"env.recommender": name,
                                                                "env.recommender_kwargs": {param: value}})),
                "--set": lambda: load_config(merged(base, {"env.recommender": name}),
                                             [f"env.recommender_kwargs.{param}={_yaml_text(value)}"]),
                "a recommender intervention": lambda: load_config(merged(base, {"interventions": [
                    {"kind": "recommender", "at_round": 2, "recommender": name, "params": {param: value}}]})),
                "env.set_recommender": lambda: env.set_recommender(name, **{param: value}),
            }
        elif family == "rerank":
            env = _running_env()
            step = _rerank_step(name, param, value)
            routes = {
                "check_reranking": lambda: check_reranking([step], 4),
                "apply_reranking": lambda: apply_reranking(Chronological(), [step]),
                "the config": lambda: load_config(merged(base, {"env.rerank": [step]})),
                "--set": lambda: load_config(base, [f"env.rerank=[{_yaml_text(step)}]"]),
                "a rerank intervention": lambda: load_config(merged(base, {"interventions": [
                    {"kind": "rerank", "at_round": 2, "rerank": [step]}]})),
                "env.set_recommender": lambda: env.set_recommender("chronological", rerank=[
                    {**step, "stances": STANCES[:3]} if name == "stance_penalty" else step]),
            }
        else:
            from socialgym.agents.llm_policy import LLMPolicy
            from socialgym.baselines.greedy import GreedyPolicy
            from socialgym.baselines.random_policy import RandomPolicy
            cls = {"random": RandomPolicy, "greedy": GreedyPolicy, "llm": LLMPolicy}[family]
            build = (lambda: LLMPolicy(None, {}, **{param: value})) if cls is LLMPolicy else \
                (lambda: cls(**{param: value}))
            llm = {"llm": {"base_url": "http://127.0.0.1:9/v1", "model": "m"}} if family == "llm" else {}
            routes = {
                "check_params": lambda: cls.check_params(**{param: value}),
                "the constructor": build,
                "the config": lambda: load_config({**base, **llm, "policy": {"kind": family,
                                                                             "params": {param: value}}}),
                "--set": lambda: load_config({**base, **llm, "policy": {"kind": family}},
                                             [f"policy.params.{param}={_yaml_text(value)}"]),
                "a policy group": lambda: load_config({**base, **llm, "policy": {"groups": [
                    {"name": "g", "kind": family, "agents": 2, "params": {param: value}},
                    {"name": "r", "kind": "random"}]}}),
            }
        held = env.recommender if env is not None else None
        verdict = _agree(routes, param)
        if verdict[0] != CLEAR:
            raise Bad(f"a bad {param}={value!r} was accepted by every way in")
        if env is not None and env.recommender is not held:
            raise Bad("set_recommender refused the parameters but replaced the recommender")
        return verdict
    return run


def _values() -> None:
    from socialgym.config import RUNTIME_PARAMS

    for param in RUNTIME_PARAMS:
        for label, value in RUNTIME_VALUES:
            case("values", f"runtime parameter {param} = {label}", _runtime_param_case(param, value),
                 quick=label in ("nan", "-1") or (param == "xi" and label == "1"))
        for text in FORK_VALUES:
            case("values", f"fork --set env.{param}={text}", _fork_param_case(param, text), timeout=90)
    for label, agents, weights, word in LAMBDA_CASES:
        case("values", f"set_lambdas: {label}", _lambdas_case(agents, weights, word),
             quick=label in ("agent -1", "weights negative"))
    for family, name, param, value in PARAM_ROWS:
        label = f"{name}.{param} = {one_line(repr(value), 30)}" if family in ("recommender", "rerank") else \
            f"policy {name}.{param} = {one_line(repr(value), 30)}"
        case("values", f"parameter {label}", _param_case(family, name, param, value),
             quick=(name, param) in (("popularity", "half_life"), ("random_replacement", "n"), ("random", "seed")),
             timeout=120)


# =============================================================================== 9. bounded LLM calls
MSG = [{"role": "user", "content": "hi"}]


def _body(content: str = "hello there", pad: int = 0) -> bytes:
    body = json.dumps({"id": "x", "object": "chat.completion", "usage": {"prompt_tokens": 3, "completion_tokens": 2},
                       "choices": [{"index": 0, "message": {"role": "assistant", "content": content}}]})
    return body.encode() + b" " * pad


def _client_case(responder: Callable, kwargs: dict, expect: str, words: Sequence[str], max_seconds: float,
                 max_requests: int | None = None, max_sent: int | None = None):
    """One chat request of an ``LLMClient(**kwargs)`` against a scripted loopback server.
    expect: "error" (an LLMError naming ``words``) or "ok"; within ``max_seconds`` either way."""
    def run(ctx):
        from socialgym.llm import LLMClient
        from socialgym.llm.client import LLMError
        from socialgym.llm.testing import FakeServer

        with FakeServer(responder) as server, LLMClient(server.base_url, "fake", **kwargs) as client:
            t0 = time.perf_counter()
            err = value = None
            try:
                value = client.run(client.chat(MSG))
            except LLMError as exc:
                err = exc
            except ProbeTimeout:
                raise
            except Exception as exc:  # noqa: BLE001
                raise Bad(f"unexpected {describe(exc)}{where(exc)}")
            elapsed = time.perf_counter() - t0
            n = len(server.requests)
            sent = server.body_bytes_sent
        if elapsed > max_seconds:
            raise Bad(f"took {elapsed:.1f} s (bound {max_seconds:g} s); {n} requests")
        if max_requests is not None and n > max_requests:
            raise Bad(f"{n} requests sent (at most {max_requests})")
        if max_sent is not None and sent > max_sent:
            raise Bad(f"the client read on: the server sent {sent / MiB:.1f} MiB")
        if expect == "ok":
            if err is not None:
                raise Bad(f"failed: {describe(err)}")
            return HANDLED, f"answered in {elapsed:.1f} s"
        if err is None:
            raise Bad(f"no error; the reply was {one_line(repr(value), 80)}")
        verdict = expect_clear(err, (LLMError,), words)
        return verdict[0], f"{verdict[1]} ({elapsed:.1f} s, {n} requests)"
    return run


def _retry_after(value: str, when: str = "always"):
    def responder(b, n):
        if when == "once" and n > 0:
            return None
        return _reply(status=429, error="rate limited", headers={"retry-after": value})
    return responder


def _client_cases() -> list[tuple]:
    """(name, responder, client keywords, expect, words, seconds, most requests, most bytes sent, quick)"""
    import gzip

    from socialgym.llm.testing import FakeReply

    trickle = _body("hello " * 40)
    bomb = gzip.compress(b'{"choices": [{"message": {"content": "' + b"a" * 30 * MiB + b'"}}]}')
    exact = _body(pad=1000)
    fast = {"backoff": 0.01, "max_backoff": 0.05}
    cases = []
    for backend in ("httpx", "aiohttp"):
        quick = backend == "httpx"
        cases += [
            (f"{backend}: a server that trickles its reply, 2 bytes / 50 ms",
             lambda b, n: FakeReply(raw=trickle, trickle=(2, 0.05)),
             {"timeout": 0.4, "max_retries": 1, "http_backend": backend, **fast}, "error", ["timed out", "0.4 s"],
             0.4 * 2 + 1.5, 2, None, quick),
            (f"{backend}: a server that stalls after the first byte",
             lambda b, n: FakeReply(raw=trickle, trickle=(1, 30.0)),
             {"timeout": 0.4, "max_retries": 0, "http_backend": backend}, "error", ["timed out"], 0.4 + 1.5, 1, None,
             False),
            (f"{backend}: a reply that never starts", lambda b, n: FakeReply(content="late", delay=30.0),
             {"timeout": 0.4, "max_retries": 1, "http_backend": backend, **fast}, "error", ["timed out"],
             0.4 * 2 + 1.5, 2, None, False),
            (f"{backend}: 30 MiB announced by Content-Length", lambda b, n: FakeReply(raw=b"x" * MiB, repeat=30),
             {"max_reply_bytes": MiB, "max_retries": 3, "http_backend": backend, **fast}, "error",
             ["max_reply_bytes=1048576"], 5.0, 1, 20 * MiB, quick),
            (f"{backend}: 30 MiB chunked, its size not announced",
             lambda b, n: FakeReply(raw=b"x" * MiB, repeat=30, chunked=True),
             {"max_reply_bytes": MiB, "max_retries": 3, "http_backend": backend, **fast}, "error",
             ["max_reply_bytes=1048576"], 5.0, 1, 20 * MiB, False),
            (f"{backend}: a gzip body that decodes to 30 MiB",
             lambda b, n: FakeReply(raw=bomb, headers={"content-encoding": "gzip"}),
             {"max_reply_bytes": MiB, "max_retries": 3, "http_backend": backend, **fast}, "error",
             ["max_reply_bytes=1048576"], 5.0, 1, None, False),
        ]
    cases += [
        ("a reply of exactly max_reply_bytes", lambda b, n: FakeReply(raw=exact),
         {"max_reply_bytes": len(exact), "max_retries": 0}, "ok", [], 5.0, 1, None, False),
        ("a reply one byte over max_reply_bytes", lambda b, n: FakeReply(raw=exact),
         {"max_reply_bytes": len(exact) - 1, "max_retries": 0}, "error", [f"max_reply_bytes={len(exact) - 1}"], 5.0,
         1, None, False),
    ]
    for value, words in (("3600", ["429", "3600 s", "max_retry_wait"]), ("86400", ["429", "86400", "max_retry_wait"]),
                         ("Thu, 01 Jan 2099 00:00:00 GMT", ["429"]), ("1e9", ["429"]), ("inf", ["429"])):
        cases.append((f"429 with Retry-After {value}", _retry_after(value), {"max_retries": 3, "max_retry_wait": 1},
                      "error", words, 1.5, 1, None, value == "3600"))
    for value in ("abc", "-5", "nan", ""):
        cases.append((f"429 with Retry-After {value!r}", _retry_after(value),
                      {"max_retries": 2, "max_retry_wait": 1, **fast}, "error", ["429"], 3.0, 3, None, False))
    cases.append(("429 with Retry-After 0.3, then an answer", _retry_after("0.3", "once"),
                  {"max_retries": 2, "max_retry_wait": 1, "backoff": 5.0, "max_backoff": 5.0}, "ok", [], 2.5, 2,
                  None, False))
    return cases


def _fatal_cli(responder_factory: Callable[[], Callable], words: Sequence[str]):
    """A run whose server refuses the model: exit 2, one line naming ``words``, the key nowhere."""
    def run(ctx):
        from socialgym.llm.testing import FakeServer

        folder = ctx.workdir("llm404")
        out = folder / "out"
        with FakeServer(responder_factory()) as server:
            path = folder / "c.yaml"
            path.write_text(yaml.safe_dump(llm_config(server.base_url)))
            res = cli(["run", str(path), "--out", str(out), "--quiet"])
        if out.exists():
            hits = files_containing(out, SECRET)
            if hits:
                raise Bad(f"the API key is on disk in {hits}")
        verdict = cli_clear(res, words, max_seconds=30)
        summary = json.loads((out / "summary.json").read_text()) if (out / "summary.json").exists() else {}
        if summary and summary.get("status") not in ("failed",):
            raise Bad(f"summary.json says {summary.get('status')!r}, not failed")
        return verdict
    return run


FB = {"run.max_fallback_share": 1.0}


def _fallback_reasons(words: Sequence[str]):
    """A check of llm_case: fallbacks.jsonl has every fallback, each with a reason naming the fault."""
    def check(server, summary, out) -> None:
        path = out / "fallbacks.jsonl"
        count = (summary.get("llm") or {}).get("fallbacks", 0)
        rows = [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []
        if len(rows) != count:
            raise Bad(f"fallbacks.jsonl has {len(rows)} rows, summary.json counts {count} fallbacks")
        blank = [r for r in rows if not str(r.get("reason") or "").strip()]
        if blank:
            raise Bad(f"{len(blank)} fallbacks without a reason: {one_line(json.dumps(blank[0]), 160)}")
        vague = [r for r in rows if not any(w.lower() in str(r["reason"]).lower() for w in words)]
        if vague:
            raise Bad(f"a reason names none of {list(words)}: {one_line(vague[0]['reason'], 160)}")
    return check


def _interview_case(fault: str):
    """``socialgym interview`` of a finished LLM run when its server is down, refuses the model or
    the key, fails every request, or answers with a body that is no JSON: one line and a non-zero
    exit (the last may instead be an answer with status ``fallback``, exit 0)."""
    def run(ctx):
        import io

        from socialgym.experiments import load_config, run_experiment
        from socialgym.llm.testing import FakeReply, FakeServer

        folder = ctx.workdir("interview")
        config = {"seed": 1, "env": {"n_agents": 2, "max_rounds": 1, "recommender": "random", "sentiment": "tone"},
                  "policy": {"groups": [{"name": "llm", "kind": "llm", "agents": 1},
                                        {"name": "bot", "kind": "greedy"}]},
                  "llm": {"model": "fake", "api_key": SECRET, "max_retries": 0, "cache": False, "timeout": 2},
                  "logging": {"report": False, "progress": False}}
        ask = ["interview", str(folder / "run"), "--agent", "agent_0", "Anything to add?"]
        faults = {"404": FakeReply(status=404, error="no such model: fake"),
                  "401": FakeReply(status=401, error=f"bad key {SECRET}"),
                  "500 always": FakeReply(status=500, error="boom"),
                  "a body that is no JSON": FakeReply(raw="<html>oops</html>", content_type="text/html")}
        with FakeServer() as server:
            config["llm"]["base_url"] = server.base_url
            with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
                run_experiment(load_config(config), folder / "run", progress=False)
            if fault != "down":
                server.responder = lambda b, n: faults[fault]
                res = cli(ask + ["--scale", "likert5"] if fault == "500 always" else ask)
        if fault == "down":
            res = cli(ask)
        if SECRET in res.stderr + res.stdout:
            raise Bad("the API key is in the output")
        if res.exc is not None:
            raise Bad(f"traceback: {describe(res.exc)}{where(res.exc)}")
        if res.rc == 0:
            try:
                record = json.loads(res.stdout)
            except ValueError:
                record = {}
            if fault == "a body that is no JSON" and record.get("status") == "fallback" and not res.stderr.strip():
                return FALLBACK, "exit 0 with status 'fallback' and an empty answer"
            raise Bad(f"exit 0: {one_line(res.stdout, 160)}")
        # a server that is down is exit status 6 (issue 43: the server is gone); the others 2
        return _one_line_any(res, [], status=(6,) if fault == "down" else (2,), max_seconds=20)
    return run


def _bounds() -> None:
    for name, reply, kwargs, expect, words, seconds, requests, sent, quick in _client_cases():
        case("bounds", f"client: {name}", _client_case(reply, kwargs, expect, words, seconds,
                                                        requests, sent), quick=quick, timeout=60)
    model_404 = {"error": {"message": "The model `fake` does not exist", "type": "invalid_request_error",
                           "code": "model_not_found"}}
    fatal = [
        ("404 on every request", lambda: faulty(lambda b, n: _reply(status=404, error="model fake not found")),
         ["404", "fake"]),
        ("404 after a successful request", lambda: (lambda b, n: None if n == 0 else _reply(
            status=404, error="model fake not found")), ["404"]),
        ("404 with OpenAI's model_not_found body", lambda: faulty(lambda b, n: _reply(status=404, body=model_404)),
         ["404", "fake"]),
        ("404 with an HTML body", lambda: faulty(lambda b, n: _reply(status=404, raw="<html>Not Found</html>",
                                                                     content_type="text/html")), ["404"]),
    ]
    for label, factory, words in fatal:
        case("bounds", f"run: {label} stops the run with one line", _fatal_cli(factory, words),
             quick=label == "404 on every request", timeout=90)
    slow = {"llm.timeout": 0.5, "llm.max_retries": 0, **FB}
    reasons = [
        ("500 always", lambda: faulty(lambda b, n: _reply(status=500, error="boom")), FB, ["500"]),
        ("429 asking for an hour", lambda: faulty(lambda b, n: _reply(status=429, error="slow down",
                                                                      headers={"retry-after": "3600"})),
         FB, ["429"]),
        ("a body that is no JSON", lambda: faulty(lambda b, n: _reply(raw="<html>oops</html>",
                                                                      content_type="text/html")), FB,
         ["json", "parse", "decode", "invalid", "no text"]),
        ("content that is no JSON", lambda: faulty(lambda b, n: _reply(content="Sure! Here is my plan.")),
         {**FB, "llm.max_repairs": 0}, ["json", "schema", "parse", "invalid"]),
        ("a reply past the timeout", lambda: faulty(lambda b, n: _reply(content=_schema_sample(b), delay=2.0)),
         slow, ["timed out", "timeout"]),
        ("a trickling reply", lambda: faulty(lambda b, n: _reply(raw=_body(_schema_sample(b) * 3), trickle=(4, 0.05))),
         slow, ["timed out", "timeout"]),
        ("a 5 MiB reply", lambda: faulty(lambda b, n: _reply(raw=b" " * MiB, repeat=5)), FB, ["max_reply_bytes"]),
    ]
    for label, factory, extra, words in reasons:
        case("bounds", f"fallbacks.jsonl: {label}", llm_case(factory, {FALLBACK}, extra=extra,
                                                             check=_fallback_reasons(words)),
             quick=label == "500 always", timeout=90)
    for fault in ("down", "404", "401", "500 always", "a body that is no JSON"):
        case("bounds", f"interview: the server {'is down' if fault == 'down' else 'answers ' + fault}",
             _interview_case(fault), quick=fault == "404", timeout=90)


# =============================================================================== 10. one line per failure
def _bad_out(cause: str):
    """(folder of the case) -> (the --out path, words the message must name one of, long name or None)."""
    def make(w: Path) -> tuple[Path, list[str], str | None]:
        if cause == "under a file":
            (w / "blocker").write_text("a file, not a folder")
            return w / "blocker" / "out", ["blocker"], None
        if cause == "an existing file":
            (w / "blocker").write_text("a file, not a folder")
            return w / "blocker", ["blocker"], None
        if cause == "a name of 256 bytes":
            name = "a" * 256
            return w / name, ["name too long", "too long"], name
        if cause == "a name of 256 bytes in UTF-8":
            name = "\u00e9" * 128
            return w / name, ["name too long", "too long"], name
        if cause == "a path of 4200 bytes":
            return w.joinpath(*["b" * 20] * 200) / "out", ["name too long", "too long"], None
        if cause == "a folder that cannot be written":
            if os.geteuid() != 0:
                ro = w / "read-only"
                ro.mkdir()
                ro.chmod(0o500)
                return ro / "out", ["read-only", "permission", "denied"], None
            return Path("/sys") / f"socialgym-probe-{os.getpid()}" / "out", ["permission", "denied", "read-only",
                                                                            "sys"], None
        raise ValueError(cause)
    return make


OUT_CAUSES = ("under a file", "an existing file", "a name of 256 bytes", "a name of 256 bytes in UTF-8",
              "a path of 4200 bytes", "a folder that cannot be written")


def _out_argv(ctx, command: str, out: Path) -> list[str]:
    base = str(_finished_run(ctx))
    cfg = _configs(ctx)
    return {
        "run": ["run", str(cfg["base"]), "--out", str(out), "--quiet"],
        "run with replicates": ["run", str(cfg["reps"]), "--out", str(out), "--quiet"],
        "fork": ["fork", base, "--at-round", "2", "--out", str(out), "--quiet"],
        "study": ["study", "soc-strategy", "--out", str(out), "--replicates", "1", "--quiet"],
        "compare --out": ["compare", base, base, "--out", str(out)],
        "demo --no-llm": ["demo", "--no-llm", "--out", str(out)],
        "moderation": _moderation_argv(out),
    }[command]


def _out_case(command: str, cause: str):
    def run(ctx):
        w = ctx.workdir("badout")
        try:
            out, words, long_name = _bad_out(cause)(w)
            res = cli(_out_argv(ctx, command, out))
        finally:
            for p in w.rglob("*"):
                with contextlib.suppress(OSError):
                    if p.is_dir() and not p.is_symlink():
                        p.chmod(0o700)
        if res.exc is not None:
            raise Bad(f"traceback: {describe(res.exc)}{where(res.exc)}")
        if long_name:       # the name the user typed, once, does not count against the message's length
            res.stderr = res.stderr.replace(long_name, "<name>")
        return _one_line_any(res, words, status=(4, 2), max_seconds=20)
    return run


KEY_FILES = {
    "text garbage": lambda p: p.write_text("zz not hex\n"),
    "binary garbage": lambda p: p.write_bytes(RNG_BYTES[:64]),
    "empty": lambda p: p.write_bytes(b""),
    "a directory": lambda p: p.mkdir(),
    "a dangling link": lambda p: p.symlink_to(p.parent / "nowhere" / "key"),
    "odd-length hex": lambda p: p.write_text("abc\n"),
    "hex with a NUL byte": lambda p: p.write_bytes(b"ab\x00cd" * 8),
}


def _key_case(label: str, command: str):
    def run(ctx):
        w = ctx.workdir("keyfile")
        key = w / "checkpoint.key"
        KEY_FILES[label](key)
        before = _tree(w)
        if command == "run":
            argv = ["run", str(_configs(ctx)["base"]), "--out", str(w / "out"), "--quiet"]
        elif command == "resume":
            d = ctx.fresh("keyfile-run")
            shutil.copytree(killed_run(ctx), d, symlinks=True)
            argv = ["resume", str(d), "--quiet"]
        else:
            argv = ["fork", str(_finished_run(ctx)), "--at-round", "2", "--out", str(w / "fork"), "--quiet"]
        res = _with_key_file(key, lambda: cli(argv))
        after = {k: v for k, v in _tree(w).items() if not k.startswith(("out", "fork"))}
        change = _diff(before, after)
        if change:
            raise Bad(f"the damaged key file was replaced or changed: {change}")
        if res.exc is not None:
            raise Bad(f"traceback: {describe(res.exc)}{where(res.exc)}")
        if res.rc == 0:
            return HANDLED, "accepted as a key (exit 0); the file unchanged"
        return _one_line_any(res, ["checkpoint.key", "key"], status=(2, 4), max_seconds=30)
    return run


def _csv_damage(kind: str) -> Callable[[Path], None]:
    def damage(path: Path) -> None:
        lines = path.read_bytes().split(b"\n")
        header = lines[0].split(b",")
        row = 2 if len(lines) > 3 else 1
        cells = lines[row].split(b",")
        value_col = len(header) - 1
        if kind == "round cell 'zz'":
            cells[0] = b"zz"
        elif kind == "round cell empty":
            cells[0] = b""
        elif kind == "value cell 'abc'":
            cells[value_col] = b"abc"
        elif kind == "value cell 'inf'":
            cells[value_col] = b"inf"
        elif kind == "a short row":
            cells = cells[:2]
        elif kind == "a long row":
            cells = cells + [b"1", b"2", b"3"]
        elif kind == "a byte that is no UTF-8":
            cells[value_col] = b"\xff\xfe"
        elif kind == "a cell of 1 MB":
            cells[value_col] = b"9" * 1_000_000
        elif kind == "header only":
            path.write_bytes(lines[0] + b"\n")
            return
        elif kind == "empty":
            path.write_bytes(b"")
            return
        elif kind == "binary garbage":
            path.write_bytes(RNG_BYTES)
            return
        elif kind == "no round column":
            header[0] = b"rnd"
            lines[0] = b",".join(header)
        elif kind == "deleted":
            path.unlink()
            return
        lines[row] = b",".join(cells)
        path.write_bytes(b"\n".join(lines))
    return damage


CSV_DAMAGES = ("round cell 'zz'", "round cell empty", "value cell 'abc'", "value cell 'inf'", "a short row",
               "a long row", "a byte that is no UTF-8", "a cell of 1 MB", "header only", "empty", "binary garbage",
               "no round column", "deleted")
REPORT_DAMAGES = ("round cell 'zz'", "value cell 'abc'", "a short row", "empty", "binary garbage", "deleted")


def _csv_case(command: str, name: str, damage: str):
    def run(ctx):
        d = ctx.fresh("damaged")
        shutil.copytree(_finished_run(ctx), d, symlinks=True)
        _csv_damage(damage)(d / name)
        argv = {"compare": ["compare", str(d), str(_finished_run(ctx)), "--out", str(ctx.fresh("cmp") / "c.csv")],
                "report": ["report", str(d)], "view": ["view", str(d)]}[command]
        res = cli(argv)
        if res.exc is not None:
            raise Bad(f"traceback: {describe(res.exc)}{where(res.exc)}")
        if res.rc == 0:
            return HANDLED, f"exit 0: {one_line(res.stdout, 120)}"
        return _one_line_any(res, [name], max_seconds=30)
    return run


def _ctrl_c_case(command: str, at: str):
    """Ctrl-C (SIGINT to the process group) while ``command`` is at ``at``; then resume."""
    def run(ctx):
        d = ctx.fresh("ctrlc")
        if command == "run":
            argv = ["run", _resume_config(ctx), "--out", d, "--quiet"]
        else:
            shutil.copytree(killed_run(ctx), d, symlinks=True)
            argv = ["resume", d, "--quiet"]
        p = Paused(ctx, argv, at)
        try:
            p.wait_ready()
            p.interrupt()
            rc, _, err = p.finish()
        finally:
            p.kill()
        lines = [x for x in err.splitlines() if x.strip()]
        problems = []
        if rc != 130:
            problems.append(f"exit status {rc}")
        if len(lines) != 1 or "Traceback" in err:
            problems.append(f"{len(lines)} stderr lines")
        elif "interrupted" not in lines[0]:
            problems.append("the line does not say interrupted")
        summary = json.loads((d / "summary.json").read_text()) if (d / "summary.json").exists() else {}
        if summary.get("status") != "interrupted":
            problems.append(f"summary.json status {summary.get('status')!r}")
        if problems:
            raise Bad("; ".join(problems) + f" | {one_line(lines[-1] if lines else '', 160)}")
        res = cli(["resume", str(d), "--quiet"])
        if res.rc != 0:
            raise Bad(f"resume after Ctrl-C failed: exit {res.rc}: {res.exc or one_line(res.stderr, 200)}")
        problem = same_outputs(d, reference_run(ctx))
        if problem:
            raise Bad(f"resumed after Ctrl-C: {problem}")
        return HANDLED, "exit 130, one line, summary 'interrupted'; resume gives the uninterrupted run's files"
    return run


def _ctrl_c_sweep(ctx):
    """Ctrl-C during a sweep (its runs in worker processes of the same process group)."""
    d = ctx.fresh("ctrlc-sweep")
    cfg = _resume_config(ctx, **{"run.replicates": 2, "run.workers": 1, "env.max_rounds": 12})
    proc = subprocess.Popen([sys.executable, "-m", "socialgym.cli", "run", str(cfg), "--out", str(d), "--quiet"],
                            cwd=ROOT, env=_child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=_default_sigint)
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and proc.poll() is None:
            summaries = list(d.glob("runs/*/rep_0/summary.json"))
            if summaries and (json.loads(summaries[0].read_text() or "{}").get("rounds_completed") or 0) >= 2:
                break
            time.sleep(0.02)
        if proc.poll() is not None:
            raise RuntimeError(f"probe setup: the sweep ended before the interrupt (exit {proc.returncode})")
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    except ValueError:
        raise RuntimeError("probe setup: a summary.json was half-written") from None
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
    lines = [x for x in err.splitlines() if x.strip()]
    if proc.returncode != 130 or len(lines) != 1 or "Traceback" in err:
        raise Bad(f"exit {proc.returncode}, {len(lines)} stderr lines: {one_line(' | '.join(lines[-3:]), 240)}")
    res = cli(["resume", str(d), "--quiet"])
    if res.rc != 0:
        raise Bad(f"resume after Ctrl-C failed: exit {res.rc}: {res.exc or one_line(res.stderr, 200)}")
    return HANDLED, "exit 130, one line; resume completed the sweep"


def _failures() -> None:
    commands = ("run", "run with replicates", "fork", "study", "compare --out", "demo --no-llm", "moderation")
    for cause in OUT_CAUSES:
        for command in commands:
            if (cause, command) == ("an existing file", "compare --out"):
                continue                            # compare --out names a file: it is written over
            case("failures", f"--out {cause}: {command}", _out_case(command, cause),
                 quick=command == "run" and cause in ("under a file", "a name of 256 bytes"), timeout=60)
    for label in KEY_FILES:
        for command in ("run", "resume", "fork"):
            case("failures", f"checkpoint key file {label}: {command}", _key_case(label, command),
                 quick=command == "resume" and label in ("text garbage", "a directory"), timeout=120)
    for name in ("rounds.csv", "network.csv"):
        for damage in CSV_DAMAGES:
            for command in ("compare", "view") + (("report",) if damage in REPORT_DAMAGES else ()):
                case("failures", f"{name} {damage}: {command}", _csv_case(command, name, damage),
                     quick=command == "compare" and damage in ("round cell 'zz'", "round cell empty"), timeout=90)
    for at in ("2:act", "2:outputs", "2:checkpoint", "3:checkpoint"):
        case("failures", f"Ctrl-C during a run at {at}", _ctrl_c_case("run", at), quick=at == "2:outputs",
             timeout=180)
    for at in ("3:outputs", "4:act"):
        case("failures", f"Ctrl-C during a resume at {at}", _ctrl_c_case("resume", at), timeout=180)
    case("failures", "Ctrl-C during a sweep", _ctrl_c_sweep, timeout=240)


# ------------------------------------------------------------------------------- text and config
# (raw, max_sentences, expected)
CLEAN_TEXT = [
    ("It costs 3.5 dollars. That is cheap. Really.", 2, "It costs 3.5 dollars. That is cheap."),
    ("Pi is 3.14159 and e is 2.71828 today.", 2, None),
    ("The rate fell to 0.25 percent. Then it rose.", 1, "The rate fell to 0.25 percent."),
    ("Prices rose 1,234.56 percent in 2023. 2024 was calmer. Third.", 2,
     "Prices rose 1,234.56 percent in 2023. 2024 was calmer."),
    ("Read https://example.org/a.b today. It helps. More.", 2, "Read https://example.org/a.b today. It helps."),
    ("See https://example.org/a.b. Then reply. Later.", 2, "See https://example.org/a.b. Then reply."),
    ("Visit www.example.co.uk/path?x=1.5&y=2 now. Done.", 1, "Visit www.example.co.uk/path?x=1.5&y=2 now."),
    ("Upgrade to v1.2.3 now. Python 3.11 is fast. Third one.", 2, "Upgrade to v1.2.3 now. Python 3.11 is fast."),
    ("Version 10.0.19045.3693 broke it. Roll back.", 1, "Version 10.0.19045.3693 broke it."),
    ("The server 10.0.0.1 is down. Use 10.0.0.2 instead.", 2, None),
    ("Mail ana.b@example.org today. Thanks. Bye.", 2, "Mail ana.b@example.org today. Thanks."),
    ("Write to first.last+tag@mail.example.com. Soon.", 1, "Write to first.last+tag@mail.example.com."),
    ("Dr. Smith agrees. The U.S. plan works. Third.", 2, "Dr. Smith agrees. The U.S. plan works."),
    ("Eat fruit, e.g. Apples and pears. Third sentence. Fourth.", 2,
     "Eat fruit, e.g. Apples and pears. Third sentence."),
    ("Some fruit, i.e. Apples, is good. Yes. No.", 2, "Some fruit, i.e. Apples, is good. Yes."),
    ("Apples, pears, etc. are fine. Yes. No.", 2, "Apples, pears, etc. are fine. Yes."),
    ("Mr. and Mrs. Lee came. They left. Bye.", 2, "Mr. and Mrs. Lee came. They left."),
    ("Prof. Ng vs. Dr. Wu: a debate. It was long.", 1, "Prof. Ng vs. Dr. Wu: a debate."),
    ("I moved to the U.S. Then I left. Bye.", 2, "I moved to the U.S. Then I left."),
    ("It costs 3.5 dollars and", 2, "It costs 3.5 dollars and"),
    ('She said "act now." We agree. Third.', 2, 'She said "act now." We agree.'),
    ("Wait...what?!No way.", 10, None),
    ("At 5 p.m. we meet. Be there.", 1, "At 5 p.m. we meet."),
    ("See fig. 3 and eq. 2 for details. Next.", 1, "See fig. 3 and eq. 2 for details."),
]


def _clean_text_case(raw: str, max_sentences: int, expected: str | None):
    def run(ctx):
        from socialgym.llm.text import clean_text

        want = raw if expected is None else expected
        got = clean_text(raw, 500, max_sentences=max_sentences)
        if got != want:
            raise Bad(f"clean_text gave {got!r}, expected {want!r}")
        whole = clean_text(raw, 500, max_sentences=10)
        if whole != raw:
            raise Bad(f"clean_text changed the text itself: {whole!r}")
        return HANDLED, f"kept: {one_line(got, 120)}"
    return run


LONE = "\ud800"
# (label, dotted changes to BASE_CONFIG or a callable returning the config, the key the message must name)
SURROGATE_CONFIGS = [
    ("env.topics[1]", {"env.topics": ["politics", "sp" + LONE + "rts"]}, "env.topics[1]"),
    ("env.topics[0], a low surrogate", {"env.topics": ["\udfff", "sports"]}, "env.topics[0]"),
    ("policy.groups[0].name", {"policy": {"groups": [{"name": "g" + LONE, "kind": "greedy", "agents": 2},
                                                     {"name": "r", "kind": "random"}]}}, "policy.groups[0].name"),
    ("run.name", {"run.name": "study " + LONE}, "run.name"),
    ("interventions[0].text", {"interventions": [{"kind": "post", "at_round": 2, "author": "agent_0",
                                                  "topic": "politics", "text": "Hello " + LONE}]},
     "interventions[0].text"),
    ("interventions[0].topic", {"interventions": [{"kind": "post", "at_round": 2, "author": "agent_0",
                                                   "topic": LONE}]}, "interventions[0].topic"),
    ("surveys[0].items[0].text", {"surveys": [{"name": "exit", "at_round": 2,
                                               "items": [{"id": "q", "text": "Fair? " + LONE}]}]},
     "surveys[0].items[0].text"),
    ("surveys[0].issue", {"surveys": [{"instrument": "stance", "at_round": 2, "topic": "politics",
                                       "issue": LONE}]}, "surveys[0].issue"),
    ("llm.model", {"llm": {"base_url": "http://127.0.0.1:9/v1", "model": "m" + LONE}}, "llm.model"),
    ("llm.api_key_env", {"llm": {"base_url": "http://127.0.0.1:9/v1", "model": "m", "api_key_env": "K" + LONE}},
     "llm.api_key_env"),
    ("a sweep value", {"sweep": {"run.name": ["a", LONE]}}, "sweep"),
    ("a mapping key", {"env.x" + LONE: 1}, "env"),
]


def _surrogate_file(changes: dict, key: str):
    def run(ctx):
        folder = ctx.workdir("utf8")
        path = folder / "config.yaml"
        path.write_text(json.dumps(merged(BASE_CONFIG, changes)), encoding="ascii")   # JSON escapes: \ud800
        out = folder / "out"
        return cli_clear(cli(["run", str(path), "--out", str(out), "--quiet"]), [key, "UTF-8"], out=out)
    return run


def _surrogate_set(item: str, key: str, command: str = "run"):
    def run(ctx):
        folder = ctx.workdir("utf8")
        out = folder / "out"
        if command == "fork":
            argv = ["fork", str(_finished_run(ctx)), "--at-round", "2", "--out", str(out), "--quiet", "--set", item]
        else:
            path = folder / "config.yaml"
            path.write_text(yaml.safe_dump(BASE_CONFIG))
            argv = ["run", str(path), "--out", str(out), "--quiet", "--set", item]
        return cli_clear(cli(argv), [key, "UTF-8"], out=out, max_seconds=10)
    return run


def _group_name_case(name: str, refused: bool):
    def run(ctx):
        from socialgym.experiments import ConfigError, load_config
        config = merged(BASE_CONFIG, {"policy": {"groups": [{"name": name, "kind": "greedy", "agents": 2},
                                                            {"name": "r", "kind": "random"}]},
                                      "interventions": [{"kind": "lambdas", "at_round": 2, "target": "all",
                                                         "lambdas": [1, 0, 0, 0, 0]}]})
        if refused:
            return _raises_clear(lambda: load_config(config), (ConfigError,), ["policy.groups[0].name", "reserved"])
        cfg = load_config(config)
        if [g.name for g in cfg.policy.groups] != [name, "r"]:
            raise Bad(f"groups became {[g.name for g in cfg.policy.groups]}")
        return HANDLED, f"the group {name!r} is accepted; target all still means every agent"
    return run


def _fork_key_case(item: str, refused: bool):
    def run(ctx):
        out = ctx.fresh("forkkey")
        res = cli(["fork", str(_finished_run(ctx)), "--at-round", "2", "--out", str(out), "--quiet", "--set", item])
        if SECRET in res.stderr + res.stdout:
            raise Bad("the key is in the output")
        if refused:
            return cli_clear(res, ["llm.api_key", "llm.api_key_env"], out=out, max_seconds=10)
        if res.rc != 0:
            raise Bad(f"refused: exit {res.rc}: {one_line(res.stderr, 200)}")
        hits = files_containing(out, SECRET)
        if hits:
            raise Bad(f"the key is on disk in {hits}")
        return HANDLED, "the fork ran"
    return run


def _text() -> None:
    for raw, n, expected in CLEAN_TEXT:
        case("failures", f"clean_text keeps: {one_line(raw, 50)}", _clean_text_case(raw, n, expected),
             quick=raw.startswith(("It costs 3.5 dollars.", "Mail", "Dr.")))
    for label, changes, key in SURROGATE_CONFIGS:
        case("failures", f"no UTF-8 in the config: {label}", _surrogate_file(changes, key),
             quick=label in ("run.name", "interventions[0].text"))
    sets = [
        ("--set run.name with a YAML escape", 'run.name="bad \\ud800 name"', "run.name", "run"),
        ("--set run.name with an undecodable byte", "run.name=caf\udce9", "run.name", "run"),
        ("--set interventions with a YAML escape", 'interventions=[{kind: post, at_round: 2, author: agent_0, '
                                                   'topic: politics, text: "x \\udfff"}]', "interventions[0].text",
         "run"),
        ("fork --set interventions with a YAML escape", 'interventions=[{kind: post, at_round: 3, author: agent_0, '
                                                        'topic: politics, text: "x \\ud800"}]',
         "interventions[0].text", "fork"),
        ("fork --set run.name with an undecodable byte", "run.name=caf\udce9", "run.name", "fork"),
    ]
    for label, item, key, command in sets:
        case("failures", f"no UTF-8 in the config: {label}", _surrogate_set(item, key, command), timeout=60)
    for name, refused in (("all", True), ("All", False), ("everyone", False), ("all_users", False)):
        case("failures", f"policy group named {name!r}", _group_name_case(name, refused), quick=name == "all")
    case("failures", "fork --set llm.api_key=... refused", _fork_key_case(f"llm.api_key={SECRET}", True), quick=True,
         timeout=60)
    case("failures", "fork --set llm.api_key_env=... honoured", _fork_key_case("llm.api_key_env=OTHER_KEY", False),
         timeout=60)
