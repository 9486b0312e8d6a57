"""Issue 44's cases of the reliability probe ("Hardening III", part 5: the probe grows with the surface).

``benchmarks/probe_reliability.py`` imports this module and calls :func:`register` with itself, as
it does ``probe_hardening``: the cases join its list under one category per surface added since
the old probe, and are classified by its rules (a clear error is one line, the documented type or
exit status, naming what is wrong; nothing changed that should not have). Each category is a table
of failure classes crossed with the ways into that surface:

- ``platform`` — the platform's seat (``PlatformEnv``, the ``platform-*`` tasks) and the
  ``"platform"`` agent beside the users (``parallel_env(platform_agent=True)``): actions outside
  the declared ``Box(-1, 1)`` (±3e38, ±inf, NaN, wrong shapes, dtypes, strings, None, mappings)
  x the seat, the agent in strict mode and in lenient mode, in both action forms: strict refuses
  with one line naming the platform and the field, and the failed step leaves no trace (the next
  good step equals a fresh environment's); lenient clips or drops, records why in
  ``infos["platform"]["invalid"]`` and steps exactly as the repaired action would. Seeds (numpy
  integers as Python's; negatives, bools, floats, strings refused) x the constructor and both
  resets; ``max_rounds`` 1 and other sizes; use before reset and after the episode.
- ``batched`` — ``socialgym.vector.make_vec`` / ``FeedVecEnv`` and ``BatchedFeedEnv``: bad
  ``num_envs`` / ``platforms``; sizes that cannot fit in memory refused with MemoryError within
  2 s (in a child process under a memory limit); reset seeds; ``step_arrays`` matrices of wrong
  shapes (a transposed 3-D matrix included), dtypes and values, strict and lenient, each failed
  step followed by a good one that must equal a fresh vector environment's; settings a batch
  cannot hold.
- ``flatobs`` — ``FlatObservation`` wrapped around what it cannot read (no env, a text env, an
  AEC env, the platform seat or agent, a discussion env, itself, a vector env), ``split`` and
  ``flatten`` misused, use before reset and after the episode, seeds through the wrapper, and its
  promise that every observation lies in its declared ``Box``.
- ``validate`` — ``socialgym validate`` on damaged run directories: tie files (an index past the
  matrix, negative or 2**40, a shape not square or of another size, NaN / infinite / text
  weights, a broken index pointer, a foreign format, truncated, not a zip, a name with digits that
  are not decimal or past int64) x ``validate`` and ``validate --out``; ``events.jsonl`` ids,
  targets, rounds and vote values past int64, fractional, text, true, NaN or 1e400; reply cycles
  and a 30,000-deep reply chain (fast); rounds.csv rounds past int64; not a run, a sweep whose
  manifest leads outside; links planted at ``--out``'s four file names. Each command runs in a
  forked child, so that a crash (SIGSEGV) is an outcome, not the end of the probe: exit 2 with one
  line naming the file, or exit 0 with a ``note:`` saying what was left out.
- ``report_view`` — ``socialgym report`` and ``socialgym view`` on the same damaged tie files and
  overflowing ids (in a child too): one line, or exit 0 with a new notice on the page
  (``viewer.html``'s ``#notices``) naming what could not be read.
- ``calibrate`` — targets files (not UTF-8, 400 digits, NaN / inf / 1e400, negative bands for a
  share, wrong types, empty, a directory, binary) refused before ``--out`` exists; a damaged
  ``search.json`` or ``search.log`` on resume; ``--name`` colliding with the output names; links
  (symbolic to a file or folder outside, hard to a file outside) planted at every output name:
  nothing outside changes.
- ``distill`` — truncated or edited decision files (BadZipFile, missing, extra or misshapen
  arrays, wrong dtypes, indices past the layout, non-finite observations, names past int64 or
  with non-decimal digits); the same run given for training and held out (the same path, a copy,
  a link, a trailing slash); a ``distilled`` policy group whose model holds NaN / infinite
  weights or statistics, or fits another layout: one line, never a run that exits 0; links
  planted at ``--out``, ``fidelity.*``, ``replays/`` and a replay's files: nothing outside
  changes.
- ``cli_numbers`` — every numeric option of the commands (``--seed``, ``--port``, ``--hidden``,
  ``--epochs``, ``--holdout``, ``--trials``, ``--seeds``, ``--minutes``, ``--workers``,
  ``--at-round``, ``--round``, ``--replicates``, ``--text-chars``, ``--throughput``,
  ``--budget``, moderation's sizes, ``python -m socialgym.demo --rounds``) x negatives, zero,
  fractions, NaN, infinities and numbers past every range: exit 2 with one line (argparse's usage
  line before its message counts as one), quickly.
- ``llm_config`` — platform objective weights (``{}``, ``"1"``, ``True``, NaN, infinities, 10**400,
  unknown names) and stances given as one string, a set, a mapping or nested lists x every way in
  (``platform_weights``, the seat, the platform agent, the bridging ranker, a stance-penalty
  re-ranker): all refuse, naming the value; an API key sent over plain http to a host that is
  not this machine (config, ``--base-url`` of moderation and study, endpoints, URL tricks)
  refused unless ``allow_plain_http``; ``llm.budget``, ``llm.prices`` and ``llm.endpoints``
  values; ``socialgym estimate --json`` strict JSON (no Infinity / NaN) where a value could
  overflow.
- ``locks`` — the writer lock file planted as a hard link to a file outside, a symbolic link to a
  file or folder outside, a directory or a FIFO x every command that takes the lock (run, a sweep,
  resume, fork, report, compare, calibrate, moderation, distill's replays): refused with one
  line, the outside file unchanged.
- ``hybrid`` — hybrid policy groups (``policy:`` tiers llm / archetype / distilled / trained /
  scripted mixed): unknown tiers, tiers and kinds that disagree, archetype parameters, counts and
  shares that cannot add up, endpoints bound to non-LLM groups, a distilled group without a
  usable model file: through the config loader and the CLI (``estimate`` for LLM tiers, ``run``
  otherwise), one line naming the group's key.
"""

from __future__ import annotations

import contextlib
import copy
import json
import math
import os
import re
import resource
import select
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np
import yaml

import probe_hardening as H  # noqa: E402  (benchmarks/ is on sys.path; its register() has run first)

if TYPE_CHECKING:     # bound by register(): the probe runs as __main__, so it is never imported by name
    from probe_reliability import (BASE_CONFIG, CLEAR, DELETE, FALLBACK, HANDLED, MISUSE, ROOT, SECRET, Bad,
                                   ProbeTimeout, _finished_run, _ok, _raises_clear, baseline, call_main, canon, case,
                                   cli, cli_clear, complete_run, config_case, describe, expect_clear, files_containing,
                                   killed_run, merged, message_problem, one_line, where)

# What this module takes from probe_reliability (bound by register(); see its docstring).
_SHARED = ("case", "cli", "cli_clear", "call_main", "Bad", "ProbeTimeout", "CLEAR", "FALLBACK", "HANDLED",
           "describe", "where", "one_line", "message_problem", "expect_clear", "_raises_clear", "_ok", "merged",
           "BASE_CONFIG", "DELETE", "SECRET", "_finished_run", "killed_run", "complete_run", "canon", "baseline",
           "config_case", "MISUSE", "files_containing", "ROOT")
PRECIOUS = H.PRECIOUS
DROP = object()
"""In a table of edits: remove the key (the probe's DELETE is bound only when register() runs)."""
MAX_HUGE_SECONDS = 2.0
"""A size that cannot fit in memory must be refused within this time."""


def register(probe) -> None:
    """Bind the probe's framework into this module and add issue 44's cases to its list (one
    category per surface: see this module's docstring and the probe's ``CATEGORIES``)."""
    g = globals()
    for name in _SHARED:
        g[name] = getattr(probe, name)
    for add in (_platform, _batched, _flatobs, _validate, _report_view, _calibrate, _distill, _cli_numbers,
                _llm_config, _locks, _hybrid):
        add()


# =============================================================================== shared helpers
def _vm_bytes() -> int:
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def _isolated(body: Callable[[], tuple[str, str]], timeout: float, memory_gib: float | None = None
              ) -> tuple[str, str]:
    """Run ``body`` (a whole case: it classifies and raises Bad) in a forked child process, so
    that a crash of the process (SIGSEGV in a native library, the kernel's OOM killer) or a hang is
    an outcome of the case, not the end of the probe. ``memory_gib``: the child's address space is
    limited to what it has now plus this much (an allocation past it is a MemoryError, not a
    machine in swap). The child inherits the parent's imports, so a fork costs milliseconds."""
    read_fd, write_fd = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:                                     # ------------------------------- the child
        try:
            os.close(read_fd)
            signal.setitimer(signal.ITIMER_REAL, 0)
            if memory_gib is not None:
                limit = _vm_bytes() + int(memory_gib * 2**30)
                resource.setrlimit(resource.RLIMIT_AS, (limit, resource.getrlimit(resource.RLIMIT_AS)[1]))
            try:
                outcome, detail = body()
                answer = {"outcome": outcome, "detail": detail}
            except Bad as exc:
                answer = {"bad": str(exc)}
            except BaseException as exc:  # noqa: BLE001 -- an exception the case did not expect
                answer = {"bad": f"unexpected {describe(exc)}{where(exc)}"}
            data = json.dumps(answer).encode()
            view = memoryview(data)
            while view:
                view = view[os.write(write_fd, view):]
        finally:
            os._exit(0)
    os.close(write_fd)                               # ------------------------------- the parent
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise Bad(f"hang: no result after {timeout:.0f} s")
            ready, _, _ = select.select([read_fd], [], [], min(left, 0.5))
            if ready:
                chunk = os.read(read_fd, 1 << 16)
                if not chunk:
                    break
                chunks.append(chunk)
        _, status = os.waitpid(pid, 0)
        pid = 0
    finally:
        os.close(read_fd)
        if pid:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(OSError):
                os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        raise Bad(f"crash: the process was killed by {signal.Signals(os.WTERMSIG(status)).name}")
    if not chunks:
        raise Bad(f"crash: the process ended without a result (exit status {os.waitstatus_to_exitcode(status)})")
    answer = json.loads(b"".join(chunks))
    if "bad" in answer:
        raise Bad(answer["bad"])
    return answer["outcome"], answer["detail"]


def _outside(w: Path) -> Path:
    """A folder outside the case's output with a file and a folder a planted link points to."""
    out = w / "outside"
    (out / "victim-dir").mkdir(parents=True, exist_ok=True)
    (out / "victim.txt").write_bytes(PRECIOUS)
    (out / "victim-dir" / "kept.txt").write_bytes(PRECIOUS)
    return out


LINK_KINDS = ("a symbolic link to a file outside", "a hard link to a file outside")
FOLDER_LINK = "a symbolic link to a folder outside"


def _plant(link: Path, kind: str, outside: Path) -> None:
    """Put ``kind`` at ``link`` (replacing what is there)."""
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.is_symlink() or link.is_file():
        link.unlink()
    elif link.is_dir():
        shutil.rmtree(link)
    if kind == "a symbolic link to a file outside":
        link.symlink_to(outside / "victim.txt")
    elif kind == "a hard link to a file outside":
        os.link(outside / "victim.txt", link)
    elif kind == FOLDER_LINK:
        link.symlink_to(outside / "victim-dir", target_is_directory=True)
    elif kind == "a dangling symbolic link":
        link.symlink_to(outside / "ghost.txt")
    elif kind == "a directory":
        link.mkdir()
    elif kind == "a FIFO":
        os.mkfifo(link)
    else:
        raise ValueError(kind)


def _usage_clear(res, names: Sequence[str] = (), *, max_seconds: float = 10.0) -> tuple[str, str]:
    """A refused command line: exit 2, no traceback, and either socialgym's one line or argparse's
    usage line(s) followed by one ``prog: error: ...`` line, that names ``names``."""
    if res.exc is not None:
        raise Bad(f"traceback: {describe(res.exc)}{where(res.exc)}")
    lines = res.lines()
    msg = lines[-1] if lines else ""
    problems = []
    if res.rc != 2:
        problems.append(f"exit status {res.rc}")
    head = lines[:-1]
    if head and not (head[0].startswith("usage:") and all(x.startswith(" ") for x in head[1:])):
        problems.append(f"{len(lines)} stderr lines")
    if lines and ": error:" not in msg:
        problems.append("the last stderr line is no error message")
    problem = message_problem(msg, names)
    if problem:
        problems.append(problem)
    if res.seconds > max_seconds:
        problems.append(f"took {res.seconds:.1f} s")
    if problems:
        raise Bad("; ".join(problems) + f" | {one_line(msg or res.stdout[-300:], 200)}")
    return CLEAR, one_line(msg, 240)


def _write_yaml(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path


def _exit_words(res) -> str:
    lines = res.lines()
    return f"exit {res.rc}: {one_line(lines[-1] if lines else res.stdout[-200:], 160)}"


# =============================================================================== platform
PLATFORM_ENV = dict(n_agents=5, max_rounds=4, feed_size=3, vote_feed_size=3, sentiment="tone")
PLATFORM_CANDIDATES = 10


def _seat(**kw):
    from socialgym.envs.platform.env import PlatformEnv

    form = kw.pop("action_form", "weights")
    objective = kw.pop("objective", "welfare")
    return PlatformEnv(objective, action_form=form, candidates=kw.pop("candidates", PLATFORM_CANDIDATES),
                       **{**PLATFORM_ENV, **kw})


def _agent_env(mode: str = "strict", form: str = "weights", **kw):
    import socialgym

    cfg = {**PLATFORM_ENV, "n_agents": 4, "max_rounds": 3, **kw}
    return socialgym.parallel_env(platform_agent=True, invalid_actions=mode, platform_action_form=form,
                                  platform_candidates=PLATFORM_CANDIDATES, **cfg)


def _good_action(shape: tuple) -> np.ndarray:
    return np.linspace(-0.9, 0.7, int(np.prod(shape))).reshape(shape).astype(np.float32)


def _agent_actions(env, obs, platform: Any = None, include: bool = True) -> dict:
    users = {a: obs[a] for a in env.feed_env.agents}
    acts = baseline(env.feed_env, users)
    if include:
        acts["platform"] = platform
    return acts


def _agent_at_vote(mode: str, form: str):
    """The platform agent's env in round 1's vote phase (where its action ranks round 2)."""
    env = _agent_env(mode, form)
    obs, _ = env.reset(seed=0)
    obs, *_ = env.step(_agent_actions(env, obs, np.zeros(env.action_space("platform").shape, np.float32)))
    return env, obs


def _strip_invalid(step: tuple) -> Any:
    obs, rewards, terms, truncs, infos = step
    infos = {a: {k: v for k, v in (i or {}).items() if not (a == "platform" and k == "invalid")}
             for a, i in infos.items()}
    return canon((obs, rewards, terms, truncs, infos))


def _full(value: float):
    return lambda s: np.full(s, value)


def _one(value: float):
    def make(s):
        a = _good_action(s).astype(np.float64)
        a.flat[0] = value
        return a
    return make


# (label, builder(shape) -> action, lenient fate: "valid", "clip" or "drop")
PLATFORM_ACTIONS = [
    ("3e38", _full(3e38), "clip"), ("-3e38", _full(-3e38), "clip"), ("one entry 3e38", _one(3e38), "clip"),
    ("1e300 (past float32)", _full(1e300), "clip"), ("inf", _full(math.inf), "clip"),
    ("-inf", _full(-math.inf), "clip"), ("1.0000001", _full(1.0000001), "clip"), ("-1.5", _full(-1.5), "clip"),
    ("int64 2**62", lambda s: np.full(s, 2**62, np.int64), "clip"),
    ("uint64 max", lambda s: np.full(s, 2**64 - 1, np.uint64), "clip"),
    ("nan", _full(math.nan), "drop"), ("one nan", _one(math.nan), "drop"),
    ("numpy float32 nan", lambda s: np.full(s, np.nan, np.float32), "drop"),
    ("one entry more", lambda s: np.zeros(s[:-1] + (s[-1] + 1,)), "drop"),
    ("an extra axis", lambda s: np.zeros((1,) + s), "drop"), ("a scalar 0.5", lambda s: 0.5, "drop"),
    ("an empty array", lambda s: np.zeros(0), "drop"), ("complex numbers", lambda s: np.full(s, 0.5 + 0.5j), "drop"),
    ("an array of strings", lambda s: np.full(s, "0.5"), "drop"), ("a string", lambda s: "0.5", "drop"),
    ("None", lambda s: None, "drop"), ("a dict", lambda s: {"weights": 0.5}, "drop"),
    ("a ragged list", lambda s: [[0.5], [0.5, 0.5]], "drop"),
    ("an object array", lambda s: np.empty(s, object), "drop"),
    ("datetime64", lambda s: np.zeros(s, "datetime64[s]"), "drop"),
    ("valid: float32 inside the box", _good_action, "valid"),
    ("valid: exactly -1 and 1", lambda s: np.where(np.arange(int(np.prod(s))).reshape(s) % 2, 1.0, -1.0), "valid"),
    ("valid: a list of floats", lambda s: _good_action(s).tolist(), "valid"),
    ("valid: float16", lambda s: _good_action(s).astype(np.float16), "valid"),
    ("valid: integers 0 and 1", lambda s: (np.arange(int(np.prod(s))).reshape(s) % 2).astype(np.int64), "valid"),
]
SCORES_ACTIONS = ("3e38", "nan", "one entry more", "a string", "valid: float32 inside the box")
PLATFORM_QUICK = {("seat", "weights", "3e38"), ("agent lenient", "weights", "nan")}


def _platform_action_case(route: str, form: str, build: Callable, fate: str):
    def run(ctx):
        if route == "seat":
            env = _seat(action_form=form)
            env.reset(seed=0)
            shape = env.action_space.shape
            good = _good_action(shape)
            action = build(shape)
            try:
                env.step(action)
            except ProbeTimeout:
                raise
            except Exception as exc:  # noqa: BLE001
                if fate == "valid":
                    raise Bad(f"a valid action refused: {describe(exc)}{where(exc)}")
                verdict = expect_clear(exc, (ValueError, TypeError), ["platform", form])
                fresh = _seat(action_form=form)
                fresh.reset(seed=0)
                if canon(env.step(good)) != canon(fresh.step(good)):
                    raise Bad("after the refused step the next good step differs from a fresh environment's")
                return verdict[0], verdict[1] + "; the next step is a fresh environment's"
            if fate != "valid":
                raise Bad(f"an action outside Box(-1, 1) accepted ({one_line(repr(action), 60)})")
            return HANDLED, "accepted"
        mode = "strict" if route == "agent strict" else "lenient"
        env, obs = _agent_at_vote(mode, form)
        shape = env.action_space("platform").shape
        good = _good_action(shape)
        action = build(shape)
        try:
            step = env.step(_agent_actions(env, obs, action))
        except ProbeTimeout:
            raise
        except Exception as exc:  # noqa: BLE001
            if fate == "valid":
                raise Bad(f"a valid action refused: {describe(exc)}{where(exc)}")
            verdict = expect_clear(exc, (ValueError, TypeError), ["platform", form])
            fresh, fresh_obs = _agent_at_vote(mode, form)
            if canon(env.step(_agent_actions(env, obs, good))) != canon(
                    fresh.step(_agent_actions(fresh, fresh_obs, good))):
                raise Bad("after the refused step the next good step differs from a fresh environment's")
            return verdict[0], verdict[1] + "; the next step is a fresh environment's"
        record = (step[4].get("platform") or {}).get("invalid")
        if fate == "valid":
            if record:
                raise Bad(f"a valid action recorded as invalid: {one_line(record, 160)}")
            return HANDLED, "accepted"
        if mode == "strict":
            raise Bad(f"strict mode accepted an action outside Box(-1, 1) ({one_line(repr(action), 60)})"
                      + (f", recording {one_line(record, 100)}" if record else ""))
        if not record:
            raise Bad(f"an action outside Box(-1, 1) accepted silently ({one_line(repr(action), 60)})")
        text = json.dumps(record, default=str)
        if form not in text:
            raise Bad(f"the record does not name the field {form!r}: {one_line(text, 160)}")
        fresh, fresh_obs = _agent_at_vote(mode, form)
        if fate == "clip":
            repaired = np.clip(np.asarray(action, np.float64), -1.0, 1.0)
            twin = fresh.step(_agent_actions(fresh, fresh_obs, repaired))
        else:
            twin = fresh.step(_agent_actions(fresh, fresh_obs, include=False))
        if _strip_invalid(step) != _strip_invalid(twin):
            what = "the clipped action" if fate == "clip" else "no platform action"
            raise Bad(f"recorded, but the step differs from a step with {what}")
        return FALLBACK, one_line(text, 240)
    return run


SEEDS = [(np.int64(3), "ok"), (np.uint32(3), "ok"), (-1, "error"), (True, "error"), (1.5, "error"), ("3", "error"),
         (np.int64(-1), "error"), ([3], "error"), (math.nan, "error"), (np.float64(3.0), "error")]


def _platform_seed_case(route: str, seed: Any, expect: str):
    def run(ctx):
        def trajectory(s):
            if route == "agent reset":
                env = _agent_env("strict")
                obs, _ = env.reset(seed=s)
                shape = env.action_space("platform").shape
                return canon([obs, env.step(_agent_actions(env, obs, _good_action(shape)))])
            if route == "seat constructor":
                env = _seat(seed=s)
                first = env.reset()
            else:
                env = _seat()
                first = env.reset(seed=s)
            return canon([first, env.step(_good_action(env.action_space.shape))])
        if expect == "ok":
            try:
                got = trajectory(seed)
            except ProbeTimeout:
                raise
            except Exception as exc:  # noqa: BLE001
                raise Bad(f"seed {seed!r} refused: {describe(exc)}{where(exc)}")
            if got != trajectory(3):
                raise Bad(f"seed {seed!r} gives another episode than seed 3")
            return HANDLED, "the same episode as seed 3"
        return _raises_clear(lambda: trajectory(seed), (ValueError, TypeError), ["seed"])
    return run


def _platform_rounds_case(route: str, rounds: Any, expect: str):
    def run(ctx):
        def play():
            if route == "seat":
                env = _seat(max_rounds=rounds)
                env.reset(seed=0)
                steps, done = 0, False
                while not done:
                    *_, done, _ = env.step(_good_action(env.action_space.shape))
                    steps += 1
                    if steps > 50:
                        raise Bad("the episode does not end")
                return steps
            env = _agent_env("strict", max_rounds=rounds)
            obs, _ = env.reset(seed=0)
            steps = 0
            while env.agents:
                obs, *_ = env.step(_agent_actions(env, obs, _good_action(env.action_space("platform").shape)))
                steps += 1
                if steps > 50:
                    raise Bad("the episode does not end")
            return steps
        if expect == "either":
            try:
                steps = play()
            except ProbeTimeout:
                raise
            except Bad:
                raise
            except Exception as exc:  # noqa: BLE001
                return expect_clear(exc, (ValueError,), ["max_rounds"])
            return HANDLED, f"an episode of {steps} step(s)"
        return _raises_clear(play, (ValueError, TypeError), ["max_rounds"])
    return run


def _platform_misuse() -> list[tuple[str, Callable, bool]]:
    def seat_before_reset():
        return _raises_clear(lambda: _seat().step(_good_action(_seat().action_space.shape)), (RuntimeError,),
                             ["reset"])

    def seat_after_end():
        env = _seat(max_rounds=2)
        env.reset(seed=0)
        env.step(_good_action(env.action_space.shape))
        return _raises_clear(lambda: env.step(_good_action(env.action_space.shape)), (RuntimeError,), ["reset"])

    def agent_before_reset():
        env = _agent_env()
        return _raises_clear(lambda: env.step({}), (RuntimeError,), ["reset"])

    def agent_after_end():
        env = _agent_env(max_rounds=1)
        obs, _ = env.reset(seed=0)
        while env.agents:
            obs, *_ = env.step(_agent_actions(env, obs, _good_action(env.action_space("platform").shape)))
        return _raises_clear(lambda: env.step(_agent_actions(env, obs, None)), (RuntimeError,), ["reset"])

    def agent_not_a_dict():
        env = _agent_env()
        env.reset(seed=0)
        return _raises_clear(lambda: env.step([1, 2]), (TypeError, ValueError), ["dict"])

    rows = [("seat: step before reset", seat_before_reset, True),
            ("seat: step after the episode", seat_after_end, False),
            ("agent: step before reset", agent_before_reset, False),
            ("agent: step after the episode", agent_after_end, False),
            ("agent: step with a list", agent_not_a_dict, False)]
    for label, kw, key in [("action_form 'bogus'", {"action_form": "bogus"}, "action_form"),
                           ("candidates 0", {"candidates": 0}, "candidates"),
                           ("candidates -1", {"candidates": -1}, "candidates"),
                           ("candidates 1.5", {"candidates": 1.5}, "candidates"),
                           ("candidates 10**9", {"candidates": 10**9}, "candidates"),
                           ("window -1", {"window": -1}, "window"),
                           ("n_agents 1", {"n_agents": 1}, "n_agents")]:
        rows.append((f"seat: {label}", lambda kw=kw, key=key: _raises_clear(
            lambda: _seat(**kw), (ValueError, TypeError, MemoryError), [key]), False))
    return rows


def _platform() -> None:
    for route in ("seat", "agent strict", "agent lenient"):
        for form in ("weights", "scores"):
            for label, build, fate in PLATFORM_ACTIONS:
                if form == "scores" and label not in SCORES_ACTIONS:
                    continue
                case("platform", f"{route} ({form}): {label}", _platform_action_case(route, form, build, fate),
                     quick=(route, form, label) in PLATFORM_QUICK, timeout=30)
    for route in ("seat constructor", "seat reset", "agent reset"):
        for seed, expect in SEEDS:
            case("platform", f"{route}: seed {seed!r} ({type(seed).__name__})",
                 _platform_seed_case(route, seed, expect),
                 quick=(route, expect) == ("seat reset", "ok") and isinstance(seed, np.int64), timeout=30)
    for route in ("seat", "agent"):
        for rounds, expect in ((1, "either"), (2, "either"), (0, "error"), (-1, "error"), (1.5, "error"),
                               (True, "error")):
            case("platform", f"{route}: max_rounds={rounds!r}", _platform_rounds_case(route, rounds, expect),
                 timeout=30)
    for label, fn, quick in _platform_misuse():
        case("platform", label, lambda ctx, fn=fn: fn(), quick=quick, timeout=30)


# =============================================================================== batched
VEC = dict(n_agents=4, max_rounds=3)


def _vec(num: Any = 2, **kw):
    import socialgym.vector

    return socialgym.vector.make_vec("socialgym/feed-SOC-v0", num, **{**VEC, **kw})


def _zero_step(venv) -> np.ndarray:
    return np.zeros((venv.num_envs * venv.n_agents, venv.layout.length), np.int64)


def _huge_case(label: str, build: Callable[[], Any]):
    def body():
        t0 = time.perf_counter()
        try:
            built = build()
        except ProbeTimeout:
            raise
        except (MemoryError, ValueError) as exc:
            seconds = time.perf_counter() - t0
            verdict = expect_clear(exc, (MemoryError, ValueError))
            if seconds > MAX_HUGE_SECONDS:
                raise Bad(f"refused after {seconds:.1f} s (limit {MAX_HUGE_SECONDS:g} s): {verdict[1]}")
            return verdict[0], f"{verdict[1]} ({seconds:.2f} s)"
        except Exception as exc:  # noqa: BLE001
            raise Bad(f"unexpected {describe(exc)}{where(exc)}")
        seconds = time.perf_counter() - t0
        raise Bad(f"a size that cannot fit in memory accepted ({type(built).__name__} built in {seconds:.1f} s)")

    def run(ctx):
        return _isolated(body, timeout=30, memory_gib=4)
    return run


HUGE = [
    ("make_vec num_envs=10**12", lambda: _vec(10**12)),
    ("make_vec num_envs=10**9", lambda: _vec(10**9)),
    ("make_vec num_envs=10**8, max_rounds=100000", lambda: _vec(10**8, max_rounds=100_000)),
    ("make_vec num_envs=10**5, n_agents=10**5", lambda: _vec(10**5, n_agents=10**5)),
    ("make_vec num_envs=10**5, n_actions=100, max_rounds=1000", lambda: _vec(10**5, n_actions=100, max_rounds=1000)),
    ("make_vec num_envs=10**6, feed_size=1000, n_agents=1000", lambda: _vec(10**6, feed_size=1000, n_agents=1000)),
    ("BatchedFeedEnv platforms=10**12", lambda: _batched_env(10**12)),
    ("BatchedFeedEnv platforms=10**7, max_rounds=100000", lambda: _batched_env(10**7, n_agents=20,
                                                                                max_rounds=100_000)),
]


def _num_envs_case(value: Any, expect: str, route: str):
    def run(ctx):
        build = (lambda: _vec(value)) if route == "make_vec" else (lambda: _batched_env(value))
        if expect == "ok":
            def go():
                env = build()
                if route == "make_vec":
                    env.reset(seed=0)
                    env.step_arrays(_zero_step(env))
                else:
                    env.reset_arrays(seed=0)
            return _ok(go)
        return _raises_clear(build, (ValueError, TypeError), ["num_envs" if route == "make_vec" else "platforms"])
    return run


def _vec_seed_case(seed: Any, expect: str):
    def run(ctx):
        if expect == "ok":
            a, b = _vec(), _vec()
            try:
                got = canon(a.reset(seed=seed))
            except ProbeTimeout:
                raise
            except Exception as exc:  # noqa: BLE001
                raise Bad(f"seed {seed!r} refused: {describe(exc)}{where(exc)}")
            if got != canon(b.reset(seed=3)):
                raise Bad(f"seed {seed!r} starts other platforms than seed 3")
            return HANDLED, "the platforms of seed 3"
        return _raises_clear(lambda: _vec().reset(seed=seed), (ValueError, TypeError), ["seed"])
    return run


def _matrix(kind: str) -> Callable[[Any], Any]:
    def make(v) -> Any:
        rows, L = v.num_envs * v.n_agents, v.layout.length
        return {
            "a row short": lambda: np.zeros((rows - 1, L), np.int64),
            "a row more": lambda: np.zeros((rows + 1, L), np.int64),
            "a column short": lambda: np.zeros((rows, L - 1), np.int64),
            "a column more": lambda: np.zeros((rows, L + 1), np.int64),
            "3-D transposed (n_agents, num_envs, L)": lambda: np.zeros((v.n_agents, v.num_envs, L), np.int64),
            "3-D of another platform size": lambda: np.zeros((v.num_envs, v.n_agents - 1, L), np.int64),
            "1-D": lambda: np.zeros(rows * L, np.int64),
            "4-D": lambda: np.zeros((v.num_envs, v.n_agents, L, 1), np.int64),
            "empty": lambda: np.zeros((0, L), np.int64),
            "floats": lambda: np.zeros((rows, L)),
            "floats with a NaN": lambda: np.full((rows, L), np.nan),
            "strings": lambda: np.full((rows, L), "0"),
            "objects": lambda: np.zeros((rows, L), object),
            "booleans": lambda: np.zeros((rows, L), bool),
            "None": lambda: None,
            "a dict": lambda: {"agent_0": [0] * L},
            "a scalar": lambda: 0,
            "valid: uint8": lambda: np.zeros((rows, L), np.uint8),
            "valid: int32": lambda: np.zeros((rows, L), np.int32),
            "valid: nested lists": lambda: np.zeros((rows, L), np.int64).tolist(),
            "valid: (num_envs, n_agents, L)": lambda: np.zeros((v.num_envs, v.n_agents, L), np.int64),
        }[kind]()
    return make


MATRICES = ("a row short", "a row more", "a column short", "a column more", "3-D transposed (n_agents, num_envs, L)",
            "3-D of another platform size", "1-D", "4-D", "empty", "floats", "floats with a NaN", "strings", "objects",
            "booleans", "None", "a dict", "a scalar", "valid: uint8", "valid: int32", "valid: nested lists",
            "valid: (num_envs, n_agents, L)")


def _vec_step_case(kind: str):
    def run(ctx):
        v = _vec()
        v.reset(seed=0)
        matrix = _matrix(kind)(v)
        try:
            v.step_arrays(matrix)
        except ProbeTimeout:
            raise
        except Exception as exc:  # noqa: BLE001
            if kind.startswith("valid"):
                raise Bad(f"a valid matrix refused: {describe(exc)}{where(exc)}")
            verdict = expect_clear(exc, (ValueError, TypeError), ["step_arrays"])
            fresh = _vec()
            fresh.reset(seed=0)
            if canon(v.step_arrays(_zero_step(v))) != canon(fresh.step_arrays(_zero_step(fresh))):
                raise Bad("after the refused step the next good step differs from a fresh vector environment's")
            return verdict[0], verdict[1] + "; the next step is a fresh environment's"
        if not kind.startswith("valid"):
            raise Bad(f"a matrix of the wrong shape or type accepted ({kind})")
        return HANDLED, "accepted"
    return run


def _vec_value_case(label: str, value: int, mode: str):
    """Values outside a dimension's range: strict refuses naming the row, lenient records."""
    def run(ctx):
        v = _vec(invalid_actions=mode)
        v.reset(seed=0)
        matrix = _zero_step(v)
        matrix[3, 0] = value
        try:
            _, _, _, _, info = v.step_arrays(matrix)
        except ProbeTimeout:
            raise
        except Exception as exc:  # noqa: BLE001
            if mode == "lenient":
                raise Bad(f"lenient mode raised: {describe(exc)}{where(exc)}")
            verdict = expect_clear(exc, (ValueError,), ["agent_3"])
            fresh = _vec(invalid_actions=mode)
            fresh.reset(seed=0)
            if canon(v.step_arrays(_zero_step(v))) != canon(fresh.step_arrays(_zero_step(fresh))):
                raise Bad("after the refused step the next good step differs from a fresh vector environment's")
            return verdict
        invalid = (info or {}).get("invalid") or {}
        if mode == "strict":
            raise Bad(f"strict mode accepted {label}")
        if "agent_3" not in invalid:
            raise Bad(f"{label} accepted without a record for row 3 (info['invalid'] {one_line(invalid, 100)})")
        return FALLBACK, one_line(invalid["agent_3"], 200)
    return run


def _batched_env(platforms: Any, **kw):
    from socialgym.envs.feed.batched import BatchedFeedEnv

    return BatchedFeedEnv(platforms, **{"obs_format": "numeric", **VEC, **kw})


def _vec_misuse() -> list[tuple[str, Callable]]:
    def step_before_reset():
        v = _vec()
        return _raises_clear(lambda: v.step_arrays(_zero_step(v)), (RuntimeError,), ["reset"])

    def step_after_end():
        v = _vec(autoreset=False)
        v.reset(seed=0)
        for _ in range(2 * VEC["max_rounds"]):
            v.step_arrays(_zero_step(v))
        return _raises_clear(lambda: v.step_arrays(_zero_step(v)), (RuntimeError,), ["reset"])

    rows = [("step_arrays before reset", step_before_reset), ("step_arrays after the episode (autoreset=False)",
                                                                step_after_end)]
    for label, kw, key in [("make_vec of an unknown task", {"task": "socialgym/feed-XYZ-v0"}, "feed-XYZ"),
                           ("make_vec obs_format='structured'", {"obs_format": "structured"}, "obs_format"),
                           ("make_vec lambdas", {"lambdas": [1, 0, 0, 0, 0]}, "lambdas"),
                           ("make_vec agent_groups", {"agent_groups": ["a", "b", "a", "b"]}, "agent_groups"),
                           ("make_vec recommender with state (mf)", {"recommender": "mf"}, "recommender"),
                           ("make_vec rerank", {"rerank": [{"kind": "random_replacement", "n": 1}]}, "rerank")]:
        def build(kw=kw):
            import socialgym.vector
            kw = dict(kw)
            task = kw.pop("task", "socialgym/feed-SOC-v0")
            return socialgym.vector.make_vec(task, 2, **{**VEC, **kw})
        rows.append((label, lambda build=build, key=key: _raises_clear(build, (ValueError, TypeError), [key])))
    rows.append(("BatchedFeedEnv.step(dict)", lambda: _raises_clear(
        lambda: (lambda e: (e.reset(seed=0), e.step({}))[1])(_batched_env(2)), (TypeError, ValueError),
        ["step_arrays"])))
    rows.append(("BatchedFeedEnv.add_ties across platforms", lambda: _raises_clear(
        lambda: (lambda e: (e.reset(seed=0), e.add_ties([0], [5], [0.5]))[1])(_batched_env(2)), (ValueError,),
        ["platforms"])))
    return rows


def _batched() -> None:
    for value, expect in ((0, "error"), (-1, "error"), (1.5, "error"), (True, "error"), ("2", "error"),
                          (None, "error"), (np.float64(2.0), "error"), ([2], "error"), (np.int64(2), "ok")):
        for route in ("make_vec", "BatchedFeedEnv"):
            key = "num_envs" if route == "make_vec" else "platforms"
            case("batched", f"{route}: {key}={value!r} ({type(value).__name__})", _num_envs_case(value, expect, route),
                 quick=(route, value) == ("make_vec", 0), timeout=30)
    for label, build in HUGE:
        case("batched", f"too large for memory: {label}", _huge_case(label, build),
             quick=label == "make_vec num_envs=10**12", timeout=45)
    for seed, expect in ((-1, "error"), (True, "error"), (1.5, "error"), ("3", "error"), ([0], "error"),
                         ([0, -1], "error"), ([0, 1.5], "error"), (np.int64(3), "ok")):
        case("batched", f"reset(seed={seed!r})", _vec_seed_case(seed, expect), timeout=30)
    for kind in MATRICES:
        case("batched", f"step_arrays: {kind}", _vec_step_case(kind),
             quick=kind in ("a row short", "3-D transposed (n_agents, num_envs, L)"), timeout=30)
    for label, value in (("-5", -5), ("2**62", 2**62), ("a value past the dimension", 10**6)):
        for mode in ("strict", "lenient"):
            case("batched", f"step_arrays {mode}: a choice {label}", _vec_value_case(label, value, mode), timeout=30)
    for label, fn in _vec_misuse():
        case("batched", label, lambda ctx, fn=fn: fn(), timeout=30)


# =============================================================================== flatobs
FLAT_ENV = dict(n_agents=3, max_rounds=3, sentiment="tone", feed_size=3, vote_feed_size=3)


def _numeric_env(**kw):
    import socialgym

    return socialgym.parallel_env(**{**FLAT_ENV, "obs_format": "numeric", **kw})


def _flat_play(w, seed: Any = 0) -> list:
    obs, _ = w.reset(seed=seed)
    trace = [canon(obs)]
    steps = 0
    while w.agents:
        acts = {a: np.zeros(w.action_space(a).shape, np.int64) for a in w.agents}
        obs, *_ = w.step(acts)
        trace.append(canon(obs))
        steps += 1
        if steps > 50:
            raise Bad("the episode does not end")
    return trace


def _flat_wrap_case(label: str, make: Callable[[], Any], expect: str):
    """Wrap what ``make`` builds; "error": a clear ValueError/TypeError at construction or at the
    first reset/step, naming FlatObservation (never an AttributeError/KeyError from inside, nor a
    TypeError about unpacking); "step_arrays": the batched env's own refusal of ``step``; "ok": a
    whole episode."""
    def run(ctx):
        from socialgym import FlatObservation

        def go():
            w = FlatObservation(make())
            _flat_play(w)
            return w
        if expect == "ok":
            return _ok(go)
        return _raises_clear(go, (ValueError, TypeError, RuntimeError),
                             ["step_arrays"] if expect == "step_arrays" else ["FlatObservation"])
    return run


def _flat_cases() -> list[tuple[str, Callable, bool]]:
    def wrapper(**kw):
        from socialgym import FlatObservation
        return FlatObservation(_numeric_env(**kw))

    def split_wrong(ctx, shape: Callable[[Any], tuple]):
        w = wrapper()
        return _raises_clear(lambda: w.split(np.zeros(shape(w), np.float32)), (ValueError,), [])

    def flatten_missing(ctx, key):
        w = wrapper()
        obs, _ = w.env.reset(seed=0)
        o = dict(obs["agent_0"])
        o.pop(key)
        return _raises_clear(lambda: w.flatten(o), (ValueError, KeyError), [key])

    def in_space(ctx, kw):
        w = wrapper(**kw)
        obs, _ = w.reset(seed=0)
        steps = 0
        while True:
            for a, v in obs.items():
                space = w.observation_space(a)
                if v.shape != space.shape or v.dtype != space.dtype:
                    raise Bad(f"{a}'s observation has {v.dtype} {v.shape}, the space {space.dtype} {space.shape}")
                outside = np.flatnonzero((v < space.low) | (v > space.high) | np.isnan(v))
                if outside.size:
                    i = int(outside[0])
                    raise Bad(f"step {steps}: {a}'s entry {i} is {float(v[i])!r}, outside [{float(space.low[i])}, "
                              f"{float(space.high[i])}] ({outside.size} entries outside the declared Box)")
            if not w.agents:
                break
            obs, *_ = w.step({a: np.zeros(w.action_space(a).shape, np.int64) for a in w.agents})
            steps += 1
        return HANDLED, f"{steps} steps, every observation inside its Box"

    def seed_equal(ctx):
        a, b = wrapper(), wrapper()
        if _flat_play(a, np.int64(3)) != _flat_play(b, 3):
            raise Bad("seed np.int64(3) gives another episode than seed 3 through the wrapper")
        return HANDLED, "np.int64(3) as 3"

    rows = [
        ("split of a vector 3 long", lambda ctx: split_wrong(ctx, lambda w: (3,)), False),
        ("split of a batch one entry short", lambda ctx: split_wrong(
            ctx, lambda w: (2, w.observation_space("agent_0").shape[0] - 1)), False),
        ("flatten without 'self'", lambda ctx: flatten_missing(ctx, "self"), False),
        ("flatten without 'action_mask'", lambda ctx: flatten_missing(ctx, "action_mask"), False),
        ("flatten without 'vote_items'", lambda ctx: flatten_missing(ctx, "vote_items"), False),
        ("step before reset", lambda ctx: _raises_clear(lambda: wrapper().step({}), (RuntimeError,), ["reset"]), False),
        ("reset(seed=-1)", lambda ctx: _raises_clear(lambda: wrapper().reset(seed=-1), (ValueError, TypeError),
                                                     ["seed"]), False),
        ("reset(seed=np.int64(3)) as 3", seed_equal, False),
        ("observations inside the declared Box", lambda ctx: in_space(ctx, {}), True),
        ("observations inside the declared Box (no action masks)", lambda ctx: in_space(ctx, {"action_masks": False}),
         False),
        ("observations inside the declared Box (obs_format both)", lambda ctx: in_space(ctx, {"obs_format": "both"}),
         False),
        ("observations inside the declared Box (12 rounds, 6 agents)", lambda ctx: in_space(
            ctx, {"max_rounds": 12, "n_agents": 6}), False),
    ]
    return rows


def _flat_wraps() -> list[tuple[str, Callable, str]]:
    def socialgym_():
        import socialgym
        return socialgym

    def platform_task():
        socialgym = socialgym_()
        return socialgym.make("socialgym/platform-welfare-v0", n_agents=5, max_rounds=3, candidates=10)

    def discussion():
        from socialgym.envs import discussion_v0
        return discussion_v0.raw_env()

    def vec():
        return _vec()

    def batched():
        return _batched_env(2)

    def flat_twice():
        from socialgym import FlatObservation
        return FlatObservation(_numeric_env())

    return [
        ("None", lambda: None, "error"), ("a dict", lambda: {"obs_format": "numeric"}, "error"),
        ("a structured (text) env", lambda: socialgym_().parallel_env(**FLAT_ENV), "error"),
        ("an AEC env", lambda: socialgym_().make("socialgym/feed-SOC-v0", aec=True, obs_format="numeric", n_agents=3,
                                                 max_rounds=3), "error"),
        ("the platform task (PlatformEnv)", platform_task, "error"),
        ("the platform agent's env", lambda: socialgym_().parallel_env(
            platform_agent=True, obs_format="numeric", platform_candidates=10, **FLAT_ENV), "error"),
        ("a discussion env", discussion, "error"), ("itself (FlatObservation twice)", flat_twice, "error"),
        ("a vector env (make_vec)", vec, "error"), ("a batched env", batched, "step_arrays"),
        ("valid: a numeric env", _numeric_env, "ok"),
        ("valid: obs_format both", lambda: _numeric_env(obs_format="both"), "ok"),
        ("valid: no action masks", lambda: _numeric_env(action_masks=False), "ok"),
        ("valid: a registered task", lambda: socialgym_().make("socialgym/feed-SOC-v0", obs_format="numeric",
                                                               n_agents=3, max_rounds=3), "ok"),
    ]


def _flatobs() -> None:
    for label, make, expect in _flat_wraps():
        case("flatobs", f"wrap {label}", _flat_wrap_case(label, make, expect),
             quick=label in ("a structured (text) env", "None"), timeout=30)
    for label, fn, quick in _flat_cases():
        case("flatobs", label, fn, quick=quick, timeout=30)


# =============================================================================== damaged run directories
def _csr(n: int) -> dict:
    """A valid tie matrix of ``n`` agents in scipy's save_npz layout."""
    return {"indices": np.array([1, 2, 0], np.int32), "indptr": np.array([0, 2, 3] + [3] * (n - 2), np.int32),
            "format": np.array(b"csr"), "shape": np.array([n, n], np.int64),
            "data": np.array([0.5, 0.25, 0.75], np.float32)}


def _savez(path: Path, arrays: dict) -> None:
    with open(path, "wb") as f:
        np.savez(f, **arrays)


def _tie_edit(**changes):
    def damage(path: Path, n: int) -> None:
        arrays = _csr(n)
        for k, v in changes.items():
            if v is DROP:
                arrays.pop(k)
            else:
                arrays[k] = v(n) if callable(v) else v
        _savez(path, arrays)
    return damage


def _tie_bytes(make: Callable[[bytes], bytes]):
    def damage(path: Path, n: int) -> None:
        path.write_bytes(make(path.read_bytes()))
    return damage


def _tie_renamed(name: str):
    def damage(path: Path, n: int) -> None:
        shutil.copy(path, path.parent / name)
        path.unlink()
    return damage


def _tie_directory(path: Path, n: int) -> None:
    path.unlink()
    path.mkdir()


def _tie_coo(**changes):
    def damage(path: Path, n: int) -> None:
        arrays = {"row": np.array([0, 1], np.int32), "col": np.array([1, 0], np.int32),
                  "format": np.array(b"coo"), "shape": np.array([n, n], np.int64),
                  "data": np.array([0.5, 0.5], np.float32)}
        arrays.update({k: v(n) if callable(v) else v for k, v in changes.items()})
        _savez(path, arrays)
    return damage


def _pickled(path: Path, n: int) -> None:
    arrays = _csr(n)
    arrays["data"] = np.array([{"x": 1}, 2, 3], dtype=object)
    with open(path, "wb") as f:
        np.savez(f, **arrays)


# label -> damage(path of the last tie file, n agents); the file it leaves (for the message)
TIE_DAMAGES: dict[str, tuple[Callable[[Path, int], None], str]] = {
    "an index past the matrix": (_tie_edit(indices=lambda n: np.array([1, n + 5, 0], np.int32)), "round_0004.npz"),
    "an index 2**40": (_tie_edit(indices=np.array([1, 2**40, 0], np.int64)), "round_0004.npz"),
    "a negative index": (_tie_edit(indices=np.array([1, -1, 0], np.int32)), "round_0004.npz"),
    "a coo row past the matrix": (_tie_coo(row=lambda n: np.array([0, n + 3], np.int32)), "round_0004.npz"),
    "a shape not square": (_tie_edit(shape=lambda n: np.array([n, n + 1], np.int64)), "round_0004.npz"),
    "a shape of another size": (_tie_edit(shape=lambda n: np.array([n + 2, n + 2], np.int64),
                                          indptr=lambda n: np.array([0, 2, 3] + [3] * n, np.int32)),
                                "round_0004.npz"),
    "a shape 10**12 x 10**12": (_tie_edit(shape=np.array([10**12, 10**12], np.int64)), "round_0004.npz"),
    "a negative shape": (_tie_edit(shape=np.array([-4, -4], np.int64)), "round_0004.npz"),
    "a NaN weight": (_tie_edit(data=np.array([0.5, np.nan, 0.75], np.float32)), "round_0004.npz"),
    "an infinite weight": (_tie_edit(data=np.array([0.5, np.inf, 0.75], np.float64)), "round_0004.npz"),
    "weights as text": (_tie_edit(data=np.array(["a", "b", "c"])), "round_0004.npz"),
    "weights pickled objects": (_pickled, "round_0004.npz"),
    "an index pointer past the data": (_tie_edit(indptr=lambda n: np.array([0, 2, 9] + [9] * (n - 2), np.int32)),
                                       "round_0004.npz"),
    "a decreasing index pointer": (_tie_edit(indptr=lambda n: np.array([0, 3, 2] + [3] * (n - 2), np.int32)),
                                   "round_0004.npz"),
    "float indices": (_tie_edit(indices=np.array([1.0, 2.0, 0.0])), "round_0004.npz"),
    "format 'bsr'": (_tie_edit(format=np.array(b"bsr")), "round_0004.npz"),
    "no format": (_tie_edit(format=DROP), "round_0004.npz"),
    "truncated": (_tie_bytes(lambda b: b[: len(b) // 2]), "round_0004.npz"),
    "not a zip": (_tie_bytes(lambda b: b"not a zip file\n"), "round_0004.npz"),
    "empty": (_tie_bytes(lambda b: b""), "round_0004.npz"),
    "a directory": (_tie_directory, "round_0004.npz"),
    "named with superscript digits (round_²³.npz)": (_tie_renamed("round_\u00b2\u00b3.npz"),
                                                     "round_\u00b2\u00b3.npz"),
    "named past int64 (round_<2**70>.npz)": (_tie_renamed(f"round_{2**70}.npz"), f"round_{2**70}.npz"),
}
VALID_TIE_CONTENT = ("named past int64 (round_<2**70>.npz)",)
"""Damages that leave a valid matrix (only its name is odd): read, or left out with a word."""
REPORT_TIE_DAMAGES = ("an index past the matrix", "a negative index", "a shape not square", "a shape 10**12 x 10**12",
                      "a NaN weight", "truncated", "a directory", "named with superscript digits (round_²³.npz)",
                      "named past int64 (round_<2**70>.npz)", "weights pickled objects")


def _damaged_copy(ctx, damage: Callable[[Path], None]) -> Path:
    d = ctx.fresh("damaged")
    shutil.copytree(_finished_run(ctx), d, symlinks=True)
    for name in ("report.html", "viewer.html"):
        with contextlib.suppress(FileNotFoundError):
            (d / name).unlink()
    damage(d)
    return d


def _tie_damage(label: str) -> Callable[[Path], None]:
    fn, _ = TIE_DAMAGES[label]

    def damage(d: Path) -> None:
        n = len(json.loads((d / "summary.json").read_text())["agents"])
        fn(d / "ties" / "round_0004.npz", n)
    return damage


def _events_edit(kind: str, field: str, value: Any, raw: str | None = None):
    """The first ``kind`` event's ``field`` set to ``value`` (``raw``: the JSON text written instead,
    for values Python's json would not write: 2**70 it writes, NaN and 1e400 it reads)."""
    def damage(d: Path) -> None:
        path = d / "events.jsonl"
        lines = path.read_text(encoding="utf-8").splitlines()
        for i, line in enumerate(lines):
            event = json.loads(line)
            if event.get("kind") == kind:
                event[field] = "@VALUE@"
                lines[i] = json.dumps(event).replace('"@VALUE@"', raw if raw is not None else json.dumps(value))
                break
        else:
            raise RuntimeError(f"probe setup: no {kind} event in the finished run")
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return damage


def _events_append(make: Callable[[list[dict]], list[dict]]):
    def damage(d: Path) -> None:
        path = d / "events.jsonl"
        events = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]
        extra = make(events)
        with path.open("a", encoding="utf-8") as f:
            for e in extra:
                f.write(json.dumps(e) + "\n")
    return damage


def _com(i: int, target: int, rnd: int = 4, sender: str = "agent_1") -> dict:
    return {"round": rnd, "kind": "COM", "sender": sender, "recipient": "agent_0", "mentions": [], "id": i,
            "target_id": target, "topic": "politics", "sentiment": -0.5, "text": "re"}


def _self_reply(events: list[dict]) -> list[dict]:
    top = max(e.get("id", 0) for e in events if isinstance(e.get("id"), int)) + 1
    return [_com(top, top)]


def _two_cycle(events: list[dict]) -> list[dict]:
    top = max(e.get("id", 0) for e in events if isinstance(e.get("id"), int)) + 1
    return [_com(top, top + 1), _com(top + 1, top)]


def _long_chain(events: list[dict], n: int = 30_000) -> list[dict]:
    top = max(e.get("id", 0) for e in events if isinstance(e.get("id"), int)) + 1
    post = next(e["id"] for e in events if e.get("kind") == "POST")
    return [_com(top + k, post if k == 0 else top + k - 1, sender=f"agent_{k % 3}") for k in range(n)]


# (label, damage) of events.jsonl: ids, targets, rounds and vote values that cannot be int64
EVENT_VALUES = [("2**70", 2**70, None), ("-2**70", -(2**70), None), ("2**63", 2**63, None), ("1.5", 1.5, None),
                ("'7' (text)", "7", None), ("true", True, None), ("NaN", None, "NaN"), ("1e400", None, "1e400"),
                ("a list", [1], None)]
EVENT_FIELDS = [("COM", "id"), ("COM", "target_id"), ("COM", "round"), ("VOTE", "id")]
"""(A VOTE's value is read by no fact of the scorecard: the viewer's rows below edit it.)"""
REPORT_EVENT_ROWS = [("COM", "id", "2**70"), ("COM", "target_id", "2**70"), ("COM", "round", "2**70"),
                     ("COM", "target_id", "1e400"), ("VOTE", "value", "2**70"), ("VOTE", "id", "NaN")]
CHAINS = [("a comment replying to itself", _self_reply), ("two comments replying to each other", _two_cycle),
          ("a reply chain 30,000 deep", _long_chain)]


def _rounds_round(value: str):
    def damage(d: Path) -> None:
        path = d / "rounds.csv"
        lines = path.read_text(encoding="utf-8").splitlines()
        cells = lines[1].split(",")
        cells[0] = value
        lines[1] = ",".join(cells)
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return damage


def _validate_check(res, words: Sequence[str], note_words: Sequence[str] | None, max_seconds: float = 20.0):
    """validate's outcome on a damaged directory: exit 2 with one line naming one of ``words``,
    or exit 0 with a ``note:`` line naming one of ``note_words`` (what was left out; None: valid
    data, exit 0 is enough)."""
    if res.exc is not None:
        raise Bad(f"traceback: {describe(res.exc)}{where(res.exc)}")
    if res.seconds > max_seconds:
        raise Bad(f"took {res.seconds:.1f} s ({_exit_words(res)})")
    if res.rc == 0 and note_words is None:
        return HANDLED, f"exit 0 in {res.seconds:.1f} s"
    if res.rc == 0:
        notes = [x for x in res.stdout.splitlines() if x.startswith("note:")]
        hit = [x for x in notes if any(w.lower() in x.lower() for w in note_words)]
        if not hit:
            raise Bad(f"exit 0 and no note names the damage ({', '.join(note_words)}): the damaged data read silently")
        return HANDLED, f"exit 0, {one_line(hit[0], 200)}"
    return H._one_line_any(res, words, max_seconds=max_seconds)


def _validate_case(damage: Callable[[Path], None], words: Sequence[str], note_words: Sequence[str] | None,
                   with_out: bool = False, max_seconds: float = 20.0):
    def run(ctx):
        d = _damaged_copy(ctx, damage)
        out = ctx.fresh("scorecard") if with_out else None

        def body():
            res = cli(["validate", str(d)] + (["--out", str(out)] if out else []))
            return _validate_check(res, words, note_words, max_seconds)
        return _isolated(body, timeout=max_seconds + 30, memory_gib=6)
    return run


def _validate_misc() -> list[tuple[str, Callable]]:
    def not_a_dir(ctx):
        f = ctx.workdir("file") / "file.txt"
        f.write_text("x")
        return H._one_line_any(cli(["validate", str(f)]), ["file.txt"])

    def empty(ctx):
        d = ctx.workdir("empty")
        return H._one_line_any(cli(["validate", str(d)]), [d.name])

    def missing(ctx):
        return H._one_line_any(cli(["validate", str(ctx.fresh("nowhere"))]), ["nowhere"])

    def sweep_escape(ctx):
        w = ctx.workdir("sweep-validate")
        d = w / "sweep"
        shutil.copytree(H._template(ctx, "sweep"), d, symlinks=True)
        outside = w / "escape" / "rep_0"
        shutil.copytree(_finished_run(ctx), outside, symlinks=True)
        manifest = json.loads((d / "sweep.json").read_text())
        manifest["jobs"][1]["out"] = "../escape/rep_0"
        (d / "sweep.json").write_text(json.dumps(manifest), encoding="utf-8")
        inside = len({p.parent for p in d.rglob("rounds.csv")})
        res = cli(["validate", str(d)])
        if res.exc is None and res.rc == 0:
            m = re.search(r"over (\d+) runs?\b", res.stdout)
            if m is None or int(m.group(1)) != inside or "escape" in res.stdout:
                raise Bad(f"validate scored {m.group(1) if m else '?'} runs, the sweep holds {inside}: it followed "
                          "sweep.json's job folder ../escape/rep_0 outside")
            return HANDLED, f"exit 0: the {inside} runs inside the sweep scored, the manifest's folder not followed"
        return H._one_line_any(res, ["sweep.json"])

    def sweep_manifest_list(ctx):
        d = ctx.fresh("sweep-validate")
        shutil.copytree(H._template(ctx, "sweep"), d, symlinks=True)
        (d / "sweep.json").write_text("[1, 2]", encoding="utf-8")
        res = cli(["validate", str(d)])
        if res.exc is None and res.rc == 0:
            return HANDLED, "exit 0 (the runs found by their folders)"
        return H._one_line_any(res, ["sweep.json"])

    return [("not a directory", not_a_dir), ("an empty directory", empty), ("a missing directory", missing),
            ("a sweep whose job folder leads outside", sweep_escape), ("a sweep whose sweep.json is a list",
                                                                      sweep_manifest_list)]


def _run_beside(outside: Path, argv: list[str], what: str = "a write went through the link to outside"):
    """``cli(argv)`` with every file under ``outside`` compared before and after: Bad when one
    changed or the command ended in a traceback; otherwise the result, for the caller's verdict."""
    before = H._tree(outside)
    res = cli(argv)
    change = H._diff(before, H._tree(outside))
    if change:
        raise Bad(f"{what} ({H._status(res)}): {change}")
    if res.exc is not None:
        raise Bad(f"traceback: {describe(res.exc)}{where(res.exc)}")
    return res


def _validate_link_case(name: str, kind: str):
    def run(ctx):
        w = ctx.workdir("validate-links")
        outside = _outside(w)
        out = w / "card"
        _plant(out / name, kind, outside)
        res = _run_beside(outside, ["validate", str(_finished_run(ctx)), "--out", str(out)])
        if res.rc == 0:
            return HANDLED, f"exit 0; {name} {'still a link' if (out / name).is_symlink() else 'a file of its own'}"
        return H._one_line_any(res, [], status=(2, 4))
    return run


def _validate() -> None:
    for label, (_, fname) in TIE_DAMAGES.items():
        notes = None if label in VALID_TIE_CONTENT else ["tie"]
        case("validate", f"tie file {label}", _validate_case(_tie_damage(label), [fname, "ties"], notes),
             quick=label == "an index past the matrix", timeout=90)
    for label in ("an index past the matrix", "a NaN weight", "truncated"):
        case("validate", f"tie file {label}: validate --out", _validate_case(
            _tie_damage(label), [TIE_DAMAGES[label][1], "ties"], ["tie"], with_out=True), timeout=90)
    for kind, fld in EVENT_FIELDS:
        for label, value, raw in EVENT_VALUES:
            case("validate", f"events.jsonl {kind} {fld} {label}", _validate_case(
                _events_edit(kind, fld, value, raw), ["events.jsonl"], ["event"]),
                quick=(kind, fld, label) == ("COM", "id", "2**70"), timeout=90)
    for label, make in CHAINS:
        case("validate", f"events.jsonl {label}", _validate_case(_events_append(make), ["events.jsonl"], None,
                                                                 max_seconds=15), timeout=90)
    for label, value in (("2**70", str(2**70)), ("-1", "-1"), ("1e400", "1e400")):
        case("validate", f"rounds.csv round {label}", _validate_case(_rounds_round(value), ["rounds.csv"],
                                                                     ["rounds.csv", "round"]), timeout=90)
    for label, fn in _validate_misc():
        case("validate", label, fn, timeout=90)
    for name in ("realism.md", "realism.json", "realism.csv", "realism.html"):
        for kind in LINK_KINDS:
            case("validate", f"--out with {kind} at {name}", _validate_link_case(name, kind), timeout=60)


# =============================================================================== report / view
_DATA = re.compile(r'<script type="application/json" id="sg-data">(.*?)</script>', re.S)


def _page_notices(page: Path) -> list[str] | None:
    try:
        m = _DATA.search(page.read_text(encoding="utf-8"))
        data = json.loads(m.group(1)) if m else None
    except (OSError, ValueError):
        return None
    notices = data.get("notices") if isinstance(data, dict) else None
    return [str(x) for x in notices] if isinstance(notices, list) else None


def _baseline_notices(ctx) -> list[str]:
    def build() -> list[str]:
        d = _damaged_copy(ctx, lambda d: None)
        res = cli(["view", str(d)])
        if res.rc != 0:
            raise RuntimeError(f"probe setup: view of the finished run failed: {res.exc or res.stderr[-300:]}")
        return _page_notices(d / "viewer.html") or []
    return ctx.cached("baseline-notices", build)


def _page_case(command: str, damage: Callable[[Path], None], words: Sequence[str], max_seconds: float = 30.0,
               notice: bool = True):
    """``command`` (view or report) on a damaged copy of the finished run: one line naming one of
    ``words``, or exit 0 with a notice on viewer.html that the undamaged run's page lacks (report:
    or, when it wrote no viewer, a warning line naming one of ``words``). ``notice`` False: the
    data are valid (a reply cycle, a deep chain), exit 0 in time is enough."""
    def run(ctx):
        known = set(_baseline_notices(ctx))
        d = _damaged_copy(ctx, damage)

        def body():
            res = cli([command, str(d)])
            if res.exc is not None:
                raise Bad(f"traceback: {describe(res.exc)}{where(res.exc)}")
            if res.seconds > max_seconds:
                raise Bad(f"took {res.seconds:.1f} s ({_exit_words(res)})")
            if res.rc == 0 and not notice:
                return HANDLED, f"exit 0 in {res.seconds:.1f} s"
            if res.rc == 0:
                page = d / "viewer.html"
                notices = _page_notices(page)
                warned = [x for x in res.lines() if "warning" in x]
                if notices is None and command == "report" and warned:
                    if len(warned) > 1 or not any(w_.lower() in warned[0].lower() for w_ in words):
                        raise Bad(f"exit 0, no viewer, and the warning names none of {list(words)}: "
                                  f"{one_line(warned[0], 200)}")
                    return HANDLED, f"exit 0; {one_line(warned[0], 200)}"
                if notices is None:
                    raise Bad(f"exit 0 but {page.name} is missing or holds no notices")
                new = [x for x in notices if x not in known]
                if not new:
                    raise Bad(f"exit 0 and {page.name} shows no notice of the damage (the damaged data read silently)")
                return HANDLED, f"exit 0; notice: {one_line(new[0], 200)}"
            return H._one_line_any(res, words, max_seconds=max_seconds)
        return _isolated(body, timeout=max_seconds + 30, memory_gib=6)
    return run


def _report_view() -> None:
    for command in ("view", "report"):
        for label in TIE_DAMAGES if command == "view" else REPORT_TIE_DAMAGES:
            fname = TIE_DAMAGES[label][1]
            case("report_view", f"{command}: tie file {label}",
                 _page_case(command, _tie_damage(label), [fname, "ties"]),
                 quick=(command, label) == ("view", "an index past the matrix"), timeout=90)
        for kind, fld, label in REPORT_EVENT_ROWS:
            value, raw = next((v, r) for lab, v, r in EVENT_VALUES if lab == label)
            case("report_view", f"{command}: events.jsonl {kind} {fld} {label}",
                 _page_case(command, _events_edit(kind, fld, value, raw), ["events.jsonl"]), timeout=90)
        for label, make in CHAINS:
            case("report_view", f"{command}: events.jsonl {label}",
                 _page_case(command, _events_append(make), ["events.jsonl"], max_seconds=20, notice=False), timeout=90)
        case("report_view", f"{command}: rounds.csv round 2**70", _page_case(
            command, _rounds_round(str(2**70)), ["rounds.csv"]), timeout=90)


# =============================================================================== calibrate
CAL_CONFIG = {"seed": 0, "env": {"n_agents": 6, "max_rounds": 3, "recommender": "random", "sentiment": "tone"},
              "policy": {"kind": "social_users"}, "logging": {"report": False, "progress": False}}
CAL_TARGETS = "facts: {reciprocity: reference, clustering: [0.1, 0.2]}\nparams: [activity]\n"
CAL_ARGS = ("--trials", "1", "--minutes", "0.2", "--seeds", "1", "--eval-seeds", "1", "--workers", "1")


def _cal_files(ctx) -> tuple[Path, Path]:
    def build():
        folder = ctx.workdir("calibrate-inputs")
        cfg = _write_yaml(folder / "config.yaml", CAL_CONFIG)
        targets = folder / "targets.yaml"
        targets.write_text(CAL_TARGETS, encoding="utf-8")
        return cfg, targets
    return ctx.cached("calibrate-inputs", build)


def _cal_argv(ctx, out: Path, targets: Path | None = None, extra: Sequence[str] = (), args=CAL_ARGS) -> list[str]:
    cfg, default_targets = _cal_files(ctx)
    return ["calibrate", str(cfg), "--targets", str(targets or default_targets), "--out", str(out), *args, *extra]


def _cal_template(ctx) -> Path:
    def build() -> Path:
        out = ctx.fresh("calibration")
        res = cli(_cal_argv(ctx, out))
        if res.rc != 0:
            raise RuntimeError(f"probe setup: the calibration failed: {res.exc or res.stderr[-300:]}")
        return out
    return ctx.cached("calibration", build)


# (label, the targets file's bytes, words one of which the message names)
TARGETS = [
    ("not UTF-8", "facts: {clustering: reference}  # caf\xe9\n".encode("latin-1"), ["targets"]),
    ("a band of 400 digits", ("facts: {clustering: [0, " + "9" * 400 + "]}\n").encode(), ["clustering"]),
    ("a NaN band", b"facts: {clustering: [.nan, 0.2]}\n", ["clustering"]),
    ("an infinite band", b"facts: {clustering: [0.1, .inf]}\n", ["clustering"]),
    ("a band of 1e400", b"facts: {clustering: [0.1, 1.0e+400]}\n", ["clustering"]),
    ("a band of -inf", b"facts: {clustering: [-.inf, 0.2]}\n", ["clustering"]),
    ("a negative band for a share", b"facts: {clustering: [-0.5, -0.1]}\n", ["clustering"]),
    ("a band low > high", b"facts: {clustering: [0.3, 0.1]}\n", ["clustering"]),
    ("a band of strings", b"facts: {clustering: ['0.1', '0.2']}\n", ["clustering"]),
    ("a band of booleans", b"facts: {clustering: [true, true]}\n", ["clustering"]),
    ("a band of three numbers", b"facts: {clustering: [0.1, 0.2, 0.3]}\n", ["clustering"]),
    ("a band a mapping", b"facts: {clustering: {low: 0.1, high: 0.2}}\n", ["clustering"]),
    ("facts a list", b"facts: [clustering]\n", ["facts"]),
    ("an unknown fact", b"facts: {gravity: reference}\n", ["gravity"]),
    ("params a string", b"facts: {clustering: reference}\nparams: activity\n", ["params"]),
    ("params naming the seed", b"facts: {clustering: reference}\nparams: [seed]\n", ["seed"]),
    ("empty", b"", ["targets"]), ("binary garbage", bytes(range(256)) * 4, ["targets"]),
    ("a YAML bomb", ("a: &a [x,x,x,x,x,x,x,x,x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)},"
        f"*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)}]\n" for i in range(8))
        + "facts: *i\n").encode(), ["targets"]),
    ("JSON with NaN", b'{"facts": {"clustering": [NaN, 0.2]}}', ["clustering", "targets"]),
]


def _targets_case(data: bytes, words: Sequence[str]):
    def run(ctx):
        w = ctx.workdir("targets")
        path = w / "targets.yaml"
        path.write_bytes(data)
        out = w / "out"
        res = cli(_cal_argv(ctx, out, path))
        if out.exists():
            raise Bad(f"--out was created for a bad targets file ({_exit_words(res)})")
        return H._one_line_any(res, words)
    return run


def _targets_dir_case(ctx):
    w = ctx.workdir("targets")
    (w / "targets.yaml").mkdir()
    res = cli(_cal_argv(ctx, w / "out", w / "targets.yaml"))
    return H._one_line_any(res, ["targets"], status=(2, 4))


# (label, damage of the calibration folder, words, expect: "error" or "either")
def _write_file(name: str, data: bytes | Callable[[bytes], bytes]):
    def damage(d: Path) -> None:
        path = d / name
        path.write_bytes(data(path.read_bytes()) if callable(data) else data)
    return damage


def _replace_dir(name: str):
    def damage(d: Path) -> None:
        (d / name).unlink()
        (d / name).mkdir()
    return damage


SEARCH_DAMAGES = [
    ("search.json truncated", _write_file("search.json", lambda b: b[: len(b) // 2]), ["search.json"], "error"),
    ("search.json empty", _write_file("search.json", b""), ["search.json"], "error"),
    ("search.json binary garbage", _write_file("search.json", bytes(range(256))), ["search.json"], "error"),
    ("search.json a list", _write_file("search.json", b"[1, 2, 3]"), ["search.json"], "error"),
    ("search.json with wrong types", _write_file("search.json", lambda b: json.dumps(
        {k: str(v) for k, v in json.loads(b).items()}).encode()), ["search.json", "search"], "error"),
    ("search.json with NaN seeds", _write_file("search.json", lambda b: json.dumps(
        {**json.loads(b), "seeds": float("nan")}).encode()), ["search.json", "search"], "error"),
    ("search.json a directory", _replace_dir("search.json"), ["search.json"], "error"),
    ("search.log truncated", _write_file("search.log", lambda b: b[: len(b) // 2]), ["search.log"], "either"),
    ("search.log binary garbage", _write_file("search.log", bytes(range(256)) * 8), ["search.log"], "either"),
    ("search.log lines that are JSON but not a journal", _write_file("search.log", b'{"op_code": 99}\n[1]\n"x"\n'),
     ["search.log"], "either"),
    ("search.log empty", _write_file("search.log", b""), ["search.log"], "either"),
]


def _search_case(damage: Callable[[Path], None], words: Sequence[str], expect: str):
    def run(ctx):
        d = ctx.fresh("calibration")
        shutil.copytree(_cal_template(ctx), d, symlinks=True)
        damage(d)
        res = cli(_cal_argv(ctx, d))
        if res.exc is not None:
            raise Bad(f"traceback: {describe(res.exc)}{where(res.exc)}")
        if res.rc == 0:
            if expect == "error":
                raise Bad(f"the damaged calibration was resumed as it was ({one_line(res.stdout[-200:], 120)})")
            return HANDLED, "exit 0: resumed"
        return H._one_line_any(res, words, status=(2, 4), max_seconds=30)
    return run


CAL_LINK_NAMES = ("search.log", "search.json", "calibration.json", "calibration.md", "calibrated.json",
                  "before/realism.html", "after/realism.json", "before/", "trials/", "eval_before/",
                  "trials/trial_0000/")


def _cal_link_case(name: str, kind: str):
    def run(ctx):
        w = ctx.workdir("calibrate-links")
        outside = _outside(w)
        out = w / "cal"
        _plant(out / name.rstrip("/"), kind, outside)
        res = _run_beside(outside, _cal_argv(ctx, out))
        if res.rc == 0:
            link = out / name.rstrip("/")
            return HANDLED, f"exit 0; {name} {'still a link' if link.is_symlink() else 'one of its own'}; " \
                            "nothing outside changed"
        return H._one_line_any(res, [], status=(2, 4), max_seconds=30)
    return run


def _cal_name_case(name: str):
    def run(ctx):
        from socialgym.baselines.social_users import load_population

        out = ctx.fresh("calibrate-name")
        res = cli(_cal_argv(ctx, out, extra=["--name", name]))
        if res.exc is not None:
            raise Bad(f"traceback: {describe(res.exc)}{where(res.exc)}")
        if res.rc != 0:
            return H._one_line_any(res, ["name", name], max_seconds=30)
        try:
            load_population(str(out / f"{name}.json"))
        except Exception as exc:  # noqa: BLE001
            raise Bad(f"exit 0, but the population {name}.json cannot be loaded: {describe(exc)}")
        result = json.loads((out / "calibration.json").read_text())
        if not isinstance(result, dict) or "population" not in result:
            raise Bad(f"exit 0, but --name {name} wrote the population over calibration.json")
        again = cli(_cal_argv(ctx, out, extra=["--name", name]))
        if again.rc != 0:
            raise Bad(f"exit 0, but the same command then fails to resume: {_exit_words(again)}")
        return HANDLED, "exit 0; the population and the result kept apart; resumes"
    return run


def _calibrate() -> None:
    for label, data, words in TARGETS:
        case("calibrate", f"targets {label}", _targets_case(data, words), quick=label == "a band of 400 digits",
             timeout=60)
    case("calibrate", "targets a directory", _targets_dir_case, timeout=60)
    for label, damage, words, expect in SEARCH_DAMAGES:
        case("calibrate", f"resume with {label}", _search_case(damage, words, expect), timeout=120)
    for name in CAL_LINK_NAMES:
        kinds = (FOLDER_LINK,) if name.endswith("/") else LINK_KINDS
        for kind in kinds:
            case("calibrate", f"{kind} at {name}", _cal_link_case(name, kind), timeout=120)
    for name in ("search", "calibration", "../escape", "before"):
        case("calibrate", f"--name {name}", _cal_name_case(name), timeout=120)


# =============================================================================== distill
DISTILL_ARGS = ("--epochs", "1", "--hidden", "8")


def _decision_runs(ctx) -> tuple[Path, Path]:
    """Two small runs with decision logs of every agent (seeds 0 and 1), named a and b."""
    def build():
        folder = ctx.workdir("decision-runs")
        runs = []
        for seed, name in ((0, "a"), (1, "b")):
            cfg = _write_yaml(folder / f"{name}.yaml", merged(BASE_CONFIG, {
                "seed": seed, "env.max_rounds": 3, "logging.decisions": "all"}))
            res = cli(["run", str(cfg), "--out", str(folder / name), "--quiet"])
            if res.rc != 0:
                raise RuntimeError(f"probe setup: the decision run failed: {res.exc or res.stderr[-300:]}")
            runs.append(folder / name)
        return tuple(runs)
    return ctx.cached("decision-runs", build)


def _model(ctx) -> Path:
    """A model distilled from the two decision runs (written once)."""
    def build() -> Path:
        a, b = _decision_runs(ctx)
        out = ctx.workdir("model") / "model.pt"
        res = cli(["distill", str(a), str(b), "--out", str(out), *DISTILL_ARGS])
        if res.rc != 0:
            raise RuntimeError(f"probe setup: distill failed: {res.exc or res.stderr[-300:]}")
        return out
    return ctx.cached("distilled-model", build)


def _decision_edit(**changes):
    def damage(path: Path) -> None:
        with np.load(path, allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
        for k, v in changes.items():
            if v is DROP:
                arrays.pop(k)
            else:
                arrays[k] = v(arrays) if callable(v) else v
        with open(path, "wb") as f:
            np.savez_compressed(f, **arrays)
    return damage


def _decision_rename(name: str):
    def damage(path: Path) -> None:
        path.rename(path.parent / name)
    return damage


def _set_first(key: str, value: Any):
    def change(arrays: dict) -> np.ndarray:
        a = arrays[key].copy()
        a.flat[0] = value
        return a
    return change


def _decision_dir(path: Path) -> None:
    path.unlink()
    path.mkdir()


def _decision_pickle(path: Path) -> None:
    with np.load(path, allow_pickle=False) as npz:
        arrays = {k: npz[k] for k in npz.files}
    arrays["act_agent"] = np.array([{"x": 1}] * len(arrays["act_agent"]), dtype=object)
    with open(path, "wb") as f:
        np.savez(f, **arrays)


# label -> (damage of decisions/round_0002.npz, the name the message must give)
DECISION_DAMAGES: dict[str, tuple[Callable[[Path], None], str]] = {
    "truncated (BadZipFile)": (lambda p: p.write_bytes(p.read_bytes()[: p.stat().st_size // 2]), "round_0002.npz"),
    "empty": (lambda p: p.write_bytes(b""), "round_0002.npz"),
    "not a zip": (lambda p: p.write_bytes(b"plain text\n"), "round_0002.npz"),
    "a directory": (_decision_dir, "round_0002.npz"),
    "act_action missing": (_decision_edit(act_action=DROP), "round_0002.npz"),
    "layout missing": (_decision_edit(layout=DROP), "round_0002.npz"),
    "an extra array": (_decision_edit(extra=np.zeros(3)), "round_0002.npz"),
    "act_action floats": (_decision_edit(act_action=lambda a: a["act_action"].astype(np.float64)), "round_0002.npz"),
    "act_action a column short": (_decision_edit(act_action=lambda a: a["act_action"][:, :-1]), "round_0002.npz"),
    "act_action a choice past its range": (_decision_edit(act_action=_set_first("act_action", 10**6)),
                                           "round_0002.npz"),
    "act_agent past the layout": (_decision_edit(act_agent=_set_first("act_agent", 10**6)), "round_0002.npz"),
    "act_agent negative": (_decision_edit(act_agent=_set_first("act_agent", -1)), "round_0002.npz"),
    "act_self NaN": (_decision_edit(act_self=_set_first("act_self", np.nan)), "round_0002.npz"),
    "act_self infinite": (_decision_edit(act_self=_set_first("act_self", np.inf)), "round_0002.npz"),
    "act_self a row short": (_decision_edit(act_self=lambda a: a["act_self"][:-1]), "round_0002.npz"),
    "act_relevant integers": (_decision_edit(act_relevant=lambda a: a["act_relevant"].astype(np.int64)),
                              "round_0002.npz"),
    "act_n_topics 2**40": (_decision_edit(act_n_topics=np.int64(2**40)), "round_0002.npz"),
    "layout negative": (_decision_edit(layout=lambda a: -a["layout"]), "round_0002.npz"),
    "layout 2**40": (_decision_edit(layout=lambda a: np.full_like(a["layout"], 2**40)), "round_0002.npz"),
    "format 2": (_decision_edit(format=np.int64(2)), "round_0002.npz"),
    "format uint64 max": (_decision_edit(format=np.uint64(2**64 - 1)), "round_0002.npz"),
    "unmapped not JSON": (_decision_edit(unmapped=np.asarray("{not json")), "round_0002.npz"),
    "a pickled object array": (_decision_pickle, "round_0002.npz"),
    "named with superscript digits (round_²³.npz)": (_decision_rename("round_\u00b2\u00b3.npz"),
                                                     "round_\u00b2\u00b3.npz"),
    "named past int64 (round_<2**70>.npz)": (_decision_rename(f"round_{2**70}.npz"), f"round_{2**70}.npz"),
    "round uint64 max inside": (_decision_edit(round=np.uint64(2**64 - 1)), "round_0002.npz"),
}
VALID_DECISION_CONTENT = ("named past int64 (round_<2**70>.npz)", "round uint64 max inside")
"""Damages that leave the decisions themselves valid (only a round number is odd): training on
them is no bad outcome, nor is a clear refusal."""


def _distill_damage_case(label: str, which: str):
    fn, fname = DECISION_DAMAGES[label]

    def run(ctx):
        a, b = _decision_runs(ctx)
        w = ctx.workdir("distill-damaged")
        runs = {"a": w / "a", "b": w / "b"}
        shutil.copytree(a, runs["a"], symlinks=True)
        shutil.copytree(b, runs["b"], symlinks=True)
        fn(runs[which] / "decisions" / "round_0002.npz")
        out = w / "model.pt"
        res = cli(["distill", str(runs["a"]), str(runs["b"]), "--out", str(out), *DISTILL_ARGS])
        if res.exc is None and res.rc == 0 and label in VALID_DECISION_CONTENT:
            return HANDLED, "exit 0: the decisions (valid but for a round number) trained the model"
        if res.exc is None and res.rc == 0:
            raise Bad(f"the damaged decision file was used: exit 0 ({one_line(res.stdout[-200:], 120)})")
        if out.exists():
            raise Bad(f"a model was written from a damaged decision log ({_exit_words(res)})")
        return H._one_line_any(res, [fname], max_seconds=60)
    return run


def _same_run_case(second: str):
    def run(ctx):
        a, _ = _decision_runs(ctx)
        w = ctx.workdir("distill-twice")
        other = {"the same path": lambda: str(a), "a trailing slash": lambda: str(a) + "/",
                 "a path through ..": lambda: str(a.parent / ".." / a.parent.name / a.name)}
        if second == "a copy":
            shutil.copytree(a, w / "copy", symlinks=True)
            path = str(w / "copy")
        elif second == "a symbolic link":
            (w / "link").symlink_to(a, target_is_directory=True)
            path = str(w / "link")
        else:
            path = other[second]()
        out = w / "model.pt"
        res = cli(["distill", str(a), path, "--out", str(out), *DISTILL_ARGS])
        if res.exc is None and res.rc == 0:
            raise Bad("the same run trained and was held out: exit 0")
        if out.exists():
            raise Bad(f"a model was written ({_exit_words(res)})")
        return H._one_line_any(res, ["twice", "same run", "copy"], max_seconds=30)
    return run


def _distill_misuse() -> list[tuple[str, Callable]]:
    def no_decisions(ctx):
        out = ctx.fresh("distill") / "model.pt"
        a, _ = _decision_runs(ctx)
        return H._one_line_any(cli(["distill", str(a), str(_finished_run(ctx)), "--out", str(out), *DISTILL_ARGS]),
                               ["decision"])

    def a_sweep(ctx):
        out = ctx.fresh("distill") / "model.pt"
        a, _ = _decision_runs(ctx)
        return H._one_line_any(cli(["distill", str(a), str(H._template(ctx, "sweep")), "--out", str(out),
                                    *DISTILL_ARGS]), ["run directory"])

    def holdout_all(ctx):
        a, b = _decision_runs(ctx)
        return H._one_line_any(cli(["distill", str(a), str(b), "--out", str(ctx.fresh("d") / "m.pt"), "--holdout",
                                    "2", *DISTILL_ARGS]), ["holdout"])

    def out_a_directory(ctx):
        a, b = _decision_runs(ctx)
        out = ctx.workdir("distill-out")
        return H._one_line_any(cli(["distill", str(a), str(b), "--out", str(out), *DISTILL_ARGS]), [out.name],
                               status=(2, 4))

    return [("a run without decision logs", no_decisions), ("a sweep given as a run", a_sweep),
            ("--holdout as many as the runs", holdout_all), ("--out an existing directory", out_a_directory)]


def _nan_model(kind: str):
    """(model path, folder) -> writes a damaged copy of the distilled model."""
    def make(src: Path, dst: Path) -> None:
        import torch

        model = torch.load(src, map_location="cpu", weights_only=False)
        sd = model["state_dict"]
        if kind == "every weight NaN":
            model["state_dict"] = {k: torch.full_like(v, float("nan")) if v.is_floating_point() else v
                                   for k, v in sd.items()}
        elif kind == "one weight infinite":
            first = next(k for k, v in sd.items() if v.is_floating_point())
            sd[first] = sd[first].clone()
            sd[first].view(-1)[0] = float("inf")
        elif kind == "obs_mean NaN":
            model["obs_mean"] = [float("nan")] * len(model["obs_mean"] or [0.0])
        elif kind == "obs_var negative":
            model["obs_var"] = [-1.0] * len(model["obs_var"] or [0.0])
        elif kind == "another layout":
            model["interface"] = {**model["interface"], "n_actions": int(model["interface"]["n_actions"]) + 3}
        else:
            raise ValueError(kind)
        torch.save(model, dst)
    return make


NAN_MODELS = ("every weight NaN", "one weight infinite", "obs_mean NaN", "obs_var negative", "another layout")


def _distilled_group_case(kind: str):
    def run(ctx):
        w = ctx.workdir("nan-model")
        model = w / "model.pt"
        _nan_model(kind)(_model(ctx), model)
        cfg = _write_yaml(w / "config.yaml", merged(BASE_CONFIG, {"env.max_rounds": 2, "policy.groups": [
            {"name": "distilled", "policy": "distilled", "agents": 2, "params": {"path": str(model)}},
            {"name": "rest", "kind": "greedy"}]}))
        out = w / "out"
        res = cli(["run", str(cfg), "--out", str(out), "--quiet"])
        if res.exc is None and res.rc == 0:
            raise Bad(f"a run with a distilled group whose model has {kind} exited 0")
        return H._one_line_any(res, ["model.pt"], max_seconds=30)
    return run


# (name under the output, kinds); "out:" names are --out's folder, "report:" names --report DIR's
DISTILL_LINKS = [("out:model.pt", LINK_KINDS), ("report:fidelity.json", LINK_KINDS),
                 ("report:fidelity.md", LINK_KINDS), ("report:replays/", (FOLDER_LINK,)),
                 ("report:replays/00-b/", (FOLDER_LINK,)),
                 ("report:replays/00-b/events.jsonl", ("a hard link to a file outside",)),
                 ("report:replays/00-b/rounds.csv", ("a hard link to a file outside",))]


def _distill_link_case(name: str, kind: str):
    def run(ctx):
        a, b = _decision_runs(ctx)
        w = ctx.workdir("distill-links")
        outside = _outside(w)
        where_, rel = name.split(":", 1)
        base = w / ("out" if where_ == "out" else "report")
        base.mkdir()
        _plant(base / rel.rstrip("/"), kind, outside)
        res = _run_beside(outside, ["distill", str(a), str(b), "--out", str(w / "out" / "model.pt"),
                                    "--report", str(w / "report"), *DISTILL_ARGS])
        if res.rc == 0:
            return HANDLED, "exit 0; nothing outside changed"
        return H._one_line_any(res, [], status=(2, 4), max_seconds=60)
    return run


def _distill() -> None:
    for label in DECISION_DAMAGES:
        for which in ("a", "b"):
            if which == "b" and label not in ("truncated (BadZipFile)", "act_agent past the layout", "act_self NaN",
                                              "named past int64 (round_<2**70>.npz)"):
                continue
            role = "training" if which == "a" else "held-out"
            case("distill", f"{role} decision file {label}", _distill_damage_case(label, which),
                 quick=(label, which) == ("truncated (BadZipFile)", "a"), timeout=120)
    for second in ("the same path", "a trailing slash", "a path through ..", "a copy", "a symbolic link"):
        case("distill", f"one run trains and is held out: {second}", _same_run_case(second), timeout=60)
    for label, fn in _distill_misuse():
        case("distill", label, fn, timeout=60)
    for kind in NAN_MODELS:
        case("distill", f"a distilled group whose model has {kind}", _distilled_group_case(kind), timeout=120)
    for name, kinds in DISTILL_LINKS:
        for kind in kinds:
            case("distill", f"{kind} at {name}", _distill_link_case(name, kind), timeout=120)


# =============================================================================== CLI numbers
def _numbers_rows() -> list[tuple[str, Callable[[Any, Path], list[str]], list[str], str]]:
    """(label, argv(ctx, folder), words the message names, route: "cli" or "demo")."""
    def distill(*opt):
        return lambda c, w: ["distill", *map(str, _decision_runs(c)), "--out", str(w / "m.pt"), *opt]

    def calibrate(*opt):
        def argv(c, w):
            args = list(CAL_ARGS)
            for k in range(0, len(opt), 2):
                if opt[k] in args:
                    args[args.index(opt[k]) + 1] = opt[k + 1]
                else:
                    args += [opt[k], opt[k + 1]]
            return _cal_argv(c, w / "cal", args=tuple(args))
        return argv

    def view(port):
        return lambda c, w: ["view", str(_finished_run(c)), "--serve", "--port", port]

    def fork(r):
        return lambda c, w: ["fork", str(_finished_run(c)), "--at-round", r, "--out", str(w / "fork"), "--quiet"]

    def interview(r):
        return lambda c, w: ["interview", str(_finished_run(c)), "--agent", "agent_0", "--round", r, "why?"]

    def study(*opt):
        return lambda c, w: ["study", "soc-strategy", "--out", str(w / "study"), "--quiet", *opt]

    def estimate(*opt):
        return lambda c, w: ["estimate", str(_write_yaml(w / "c.yaml", merged(BASE_CONFIG, {}))), *opt]

    def resume(budget):
        def argv(c, w):
            d = w / "run"
            shutil.copytree(_finished_run(c), d, symlinks=True)
            return ["resume", str(d), "--quiet", "--budget", budget]
        return argv

    def moderation(*opt):
        return lambda c, w: ["moderation", "--out", str(w / "mod"), "--no-llm", "--discussions", "1", "--turns", "3",
                             "--users", "3", "--quiet", *opt]

    big = str(10**30)
    rows = [
        ("distill --seed -1", distill("--seed", "-1"), ["--seed"], "cli"),
        ("distill --seed 2**32", distill("--seed", str(2**32)), ["--seed"], "cli"),
        ("distill --hidden 0", distill("--hidden", "0"), ["--hidden"], "cli"),
        ("distill --hidden -1", distill("--hidden", "-1"), ["--hidden"], "cli"),
        ("distill --hidden 1.5", distill("--hidden", "1.5"), ["--hidden"], "cli"),
        ("distill --hidden abc", distill("--hidden", "abc"), ["--hidden"], "cli"),
        ("distill --hidden 10**30", distill("--hidden", big), ["--hidden"], "cli"),
        ("distill --hidden ''", distill("--hidden", ""), ["--hidden"], "cli"),
        ("distill --epochs 0", distill("--epochs", "0"), ["--epochs"], "cli"),
        ("distill --epochs 10**30", distill("--epochs", big), ["--epochs"], "cli"),
        ("distill --holdout -1", distill("--holdout", "-1"), ["--holdout"], "cli"),
        ("distill --holdout 10**30", distill("--holdout", big), ["holdout"], "cli"),
        ("calibrate --seed -1", calibrate("--seed", "-1"), ["--seed"], "cli"),
        ("calibrate --seed 2**32", calibrate("--seed", str(2**32)), ["--seed"], "cli"),
        ("calibrate --trials 0", calibrate("--trials", "0"), ["trials"], "cli"),
        ("calibrate --trials -5", calibrate("--trials", "-5"), ["trials"], "cli"),
        ("calibrate --trials 1.5", calibrate("--trials", "1.5"), ["trials"], "cli"),
        ("calibrate --seeds 0", calibrate("--seeds", "0"), ["seeds"], "cli"),
        ("calibrate --seeds 10**9", calibrate("--seeds", str(10**9)), ["seeds"], "cli"),
        ("calibrate --eval-seeds 0", calibrate("--eval-seeds", "0"), ["eval-seeds"], "cli"),
        ("calibrate --eval-seeds 10**9", calibrate("--eval-seeds", str(10**9)), ["eval-seeds"], "cli"),
        ("calibrate --workers 0", calibrate("--workers", "0"), ["workers"], "cli"),
        ("calibrate --workers -1", calibrate("--workers", "-1"), ["workers"], "cli"),
        ("calibrate --minutes nan", calibrate("--minutes", "nan"), ["minutes"], "cli"),
        ("calibrate --minutes inf", calibrate("--minutes", "inf"), ["minutes"], "cli"),
        ("calibrate --minutes -1", calibrate("--minutes", "-1"), ["minutes"], "cli"),
        ("view --port 70000", view("70000"), ["--port"], "cli"),
        ("view --port -1", view("-1"), ["--port"], "cli"),
        ("view --port 1.5", view("1.5"), ["--port"], "cli"),
        ("view --port 10**30", view(big), ["--port"], "cli"),
        ("fork --at-round -1", fork("-1"), ["--at-round"], "cli"),
        ("fork --at-round 10**30", fork(big), ["round"], "cli"),
        ("interview --round -1", interview("-1"), ["--round"], "cli"),
        ("interview --round 10**30", interview(big), ["round"], "cli"),
        ("study --replicates 0", study("--replicates", "0"), ["--replicates"], "cli"),
        ("study --replicates 10**30", study("--replicates", big), ["--replicates"], "cli"),
        ("study --fork-at -1", study("--fork-at", "-1"), ["--fork-at"], "cli"),
        ("estimate --text-chars 0", estimate("--text-chars", "0"), ["--text-chars"], "cli"),
        ("estimate --text-chars 10**30", estimate("--text-chars", big), ["--text-chars"], "cli"),
        ("estimate --throughput 0,5", estimate("--throughput", "0,5"), ["--throughput"], "cli"),
        ("estimate --throughput nan,nan", estimate("--throughput", "nan,nan"), ["--throughput"], "cli"),
        ("estimate --throughput 1e400,1", estimate("--throughput", "1e400,1"), ["--throughput"], "cli"),
        ("estimate --throughput -1,5", estimate("--throughput", "-1,5"), ["--throughput"], "cli"),
        ("estimate --throughput 1,2,3", estimate("--throughput", "1,2,3"), ["--throughput"], "cli"),
        ("resume --budget requests=-1", resume("requests=-1"), ["requests"], "cli"),
        ("resume --budget usd=nan", resume("usd=nan"), ["usd"], "cli"),
        ("resume --budget requests=1e400", resume("requests=1e400"), ["requests"], "cli"),
        ("resume --budget requests=10**30", resume(f"requests={big}"), ["requests"], "cli"),
        ("resume --budget requests=1.5", resume("requests=1.5"), ["requests"], "cli"),
        ("moderation --turns 0", moderation("--turns", "0"), ["turns"], "cli"),
        ("moderation --discussions 0", moderation("--discussions", "0"), ["discussions"], "cli"),
        ("moderation --users -1", moderation("--users", "-1"), ["users"], "cli"),
        ("moderation --seed -1", moderation("--seed", "-1"), ["seed"], "cli"),
        ("moderation --discussions 10**30", moderation("--discussions", big), ["discussions"], "cli"),
        ("moderation --turns 10**30", moderation("--turns", big), ["turns"], "cli"),
        ("moderation --parallel 0", moderation("--parallel", "0"), ["parallel"], "cli"),
        ("python -m socialgym.demo --rounds 0", lambda c, w: ["--rounds", "0"], ["rounds"], "demo"),
        ("python -m socialgym.demo --rounds -5", lambda c, w: ["--rounds", "-5"], ["rounds"], "demo"),
        ("python -m socialgym.demo --agents 1", lambda c, w: ["--agents", "1"], ["agents"], "demo"),
        ("python -m socialgym.demo --rounds 10**30", lambda c, w: ["--rounds", big], ["rounds"], "demo"),
    ]
    return rows


def _numbers_case(argv: Callable[[Any, Path], list[str]], names: Sequence[str], route: str, seconds: float):
    """The command in a forked child under a memory limit: a number that is accepted and then
    used (``list(range(10**9))`` seeds) must not take the machine's memory with it."""
    def run(ctx):
        w = ctx.workdir("numbers")
        args = argv(ctx, w)                     # fixtures (runs, configs) are built here, in the probe
        if args and args[0] == "distill":
            import socialgym.training.distill  # noqa: F401 -- torch loaded before the memory limit

        def body():
            if route == "demo":
                import socialgym.demo
                res = call_main(socialgym.demo.main, args)
            else:
                res = cli(args)
            made = [p.name for p in w.iterdir() if p.name not in ("c.yaml", "run")
                    and not p.name.endswith(".socialgym-lock")]     # a writer's lock file stays by design
            verdict = _usage_clear(res, names, max_seconds=seconds)
            if made:
                raise Bad(f"the refused command created {made}: {verdict[1]}")
            return verdict
        return _isolated(body, timeout=seconds + 3, memory_gib=3)
    return run


def _cli_numbers() -> None:
    for label, argv, names, route in _numbers_rows():
        seconds = 8.0 if "10**" in label else 10.0         # a huge number accepted may run on: stop it early
        case("cli_numbers", label, _numbers_case(argv, names, route, seconds),
             quick=label in ("distill --hidden 0", "view --port 70000"), timeout=60)


# =============================================================================== llm_config
OBJECTIVES = [("{}", {}), ("{'engagement': '1'}", {"engagement": "1"}), ("{'engagement': True}", {"engagement": True}),
              ("{'engagement': nan}", {"engagement": math.nan}), ("{'engagement': inf}", {"engagement": math.inf}),
              ("{'engagement': -inf}", {"engagement": -math.inf}), ("{'engagement': 10**400}", {"engagement": 10**400}),
              ("{'engagement': numpy nan}", {"engagement": np.float64("nan")}),
              ("{'engagement': [1]}", {"engagement": [1]}), ("{'engagement': None}", {"engagement": None}),
              ("{'nope': 1}", {"nope": 1}), ("'nope'", "nope"), ("5", 5), ("['engagement']", ["engagement"]),
              ("{'engagement': 0}", {"engagement": 0}), ("{'engagement': 1e308, 'welfare': 1e308}",
                                                         {"engagement": 1e308, "welfare": 1e308})]


def _objective_case(value: Any):
    def run(ctx):
        from socialgym.rewards.platform import platform_weights

        routes = {"platform_weights": lambda: platform_weights(value),
                  "PlatformEnv": lambda: _seat(objective=value),
                  "the platform agent": lambda: _agent_env(platform_objective=value)}
        return H._agree(routes, "objective", {r: ["weight", "engagement", "nope"] for r in routes})
    return run


STANCE_VALUES = [("one string", "abab"), ("bytes", b"abab"), ("a set", {"a"}), ("a mapping", {"agent_0": "a"}),
                 ("an integer", 5), ("nested lists", [["a"], ["b"], ["a"], ["b"]]),
                 ("one label short", ["a", "b", "a"]),
                 ("a 2-D array", np.array([["a", "b"], ["a", "b"]]))]


def _stances_case(value: Any):
    def run(ctx):
        from socialgym.recommenders import make_recommender

        import socialgym

        n = 4
        routes = {
            "PlatformEnv": lambda: _seat(stances=value, n_agents=n),
            "the platform agent": lambda: _agent_env(platform_stances=value, n_agents=n),
            "a stance-penalty re-ranker": lambda: socialgym.parallel_env(
                **{**PLATFORM_ENV, "n_agents": n}, rerank=[{"kind": "stance_penalty", "stances": value}]),
        }
        if not (isinstance(value, list) and len(value) != n):     # a ranker alone does not know n
            routes["the bridging ranker"] = lambda: make_recommender("bridging", stances=value)
        verdict = H._agree(routes, "stances")
        if verdict[0] != CLEAR:
            raise Bad(f"stances given as {type(value).__name__} accepted by every way in")
        return verdict
    return run


# (label, llm section, names, route: "run" or a command)
REMOTE = "http://10.0.0.5:8000/v1"
KEY = "@KEY@"
"""Stands for the probe's SECRET in a table written before register() binds it."""


def _with_key(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _with_key(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_with_key(v) for v in value]
    return SECRET if value == KEY else value
PLAIN_HTTP = [
    ("llm.api_key, a private address", {"base_url": REMOTE, "model": "m", "api_key": KEY}, "config"),
    ("llm.api_key, a domain", {"base_url": "http://example.com/v1", "model": "m", "api_key": KEY}, "config"),
    ("llm.api_key, a domain that starts with localhost", {
        "base_url": "http://localhost.attacker.example:8000/v1", "model": "m", "api_key": KEY}, "config"),
    ("llm.api_key, a domain that starts with 127.0.0.1", {
        "base_url": "http://127.0.0.1.nip.io:8000/v1", "model": "m", "api_key": KEY}, "config"),
    ("llm.api_key, userinfo naming loopback", {
        "base_url": "http://127.0.0.1:80@10.0.0.5:8000/v1", "model": "m", "api_key": KEY}, "config"),
    ("llm.api_key, HTTP in capitals", {"base_url": "HTTP://10.0.0.5:8000/v1", "model": "m", "api_key": KEY},
     "config"),
    ("the key in llm.api_key_env's variable", {"base_url": REMOTE, "model": "m", "api_key_env": "PROBE_KEY"}, "config"),
    ("an endpoint's key", {"endpoints": [{"name": "a", "base_url": REMOTE, "model": "m", "api_key_env": "PROBE_KEY"}]},
     "config"),
    ("an endpoint among https ones", {"endpoints": [
        {"name": "a", "base_url": "https://api.example.com/v1", "model": "m", "api_key_env": "PROBE_KEY"},
        {"name": "b", "base_url": REMOTE, "model": "m", "api_key_env": "PROBE_KEY"}]}, "config"),
    ("allow_plain_http 'yes' (a string)", {"base_url": REMOTE, "model": "m", "api_key": KEY,
                                           "allow_plain_http": "yes"}, "config"),
    ("moderation --base-url with OPENAI_API_KEY set", {}, "moderation"),
    ("study --base-url with OPENAI_API_KEY set", {}, "study"),
]


@contextlib.contextmanager
def _env_vars(**values):
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _plain_http_case(llm: dict, route: str):
    def run(ctx):
        w = ctx.workdir("plain-http")
        out = w / "out"
        with _env_vars(PROBE_KEY=SECRET, OPENAI_API_KEY=SECRET):
            if route == "config":
                cfg = _write_yaml(w / "config.yaml", merged(BASE_CONFIG, {
                    "policy": {"kind": "llm"}, "env.max_rounds": 1,
                    "llm": {**_with_key(llm), **({} if "endpoints" in llm else {"timeout": 2, "max_retries": 0})}}))
                res = cli(["run", str(cfg), "--out", str(out), "--quiet"])
            elif route == "moderation":
                res = cli(["moderation", "--out", str(out), "--base-url", REMOTE, "--model", "m", "--discussions", "1",
                           "--turns", "2", "--users", "2", "--quiet"])
            else:
                res = cli(["study", "soc-strategy", "--scale", "llm", "--out", str(out), "--replicates", "1",
                           "--base-url", REMOTE, "--model", "m", "--quiet"])
        if res.exc is not None:
            raise Bad(f"traceback: {describe(res.exc)}{where(res.exc)}")
        if out.exists() and files_containing(out, SECRET):
            raise Bad(f"the API key is on disk in {files_containing(out, SECRET)}")
        if res.rc == 0:
            raise Bad("the key was sent over plain http to another machine (exit 0)")
        lines = res.lines()
        msg = lines[-1] if lines else ""
        words = ["http", "allow_plain_http"]
        if not any(w_ in msg for w_ in words) or res.rc != 2:
            raise Bad(f"not refused as plain http: {_exit_words(res)}")
        return H._one_line_any(res, words, max_seconds=15)
    return run


# (label, dotted changes to the llm config of an llm run, words)
def _llm_base() -> dict:
    return {"policy": {"kind": "llm"}, "env.max_rounds": 1,
            "llm": {"base_url": "http://127.0.0.1:9/v1", "model": "m", "timeout": 2, "max_retries": 0}}


def _eps(*endpoints: dict) -> dict:
    """An llm section of ``endpoints`` only (loopback servers that refuse at once)."""
    return {"llm": {"endpoints": list(endpoints), "timeout": 2, "max_retries": 0}}


EP = {"name": "a", "base_url": "http://127.0.0.1:9/v1", "model": "m"}
LLM_VALUES = [
    ("budget requests -1", {"llm.budget": {"requests": -1}}, ["requests"]),
    ("budget usd NaN", {"llm.budget": {"usd": math.nan}}, ["usd"]),
    ("budget usd infinite", {"llm.budget": {"usd": math.inf}}, ["usd"]),
    ("budget requests 1.5", {"llm.budget": {"requests": 1.5}}, ["requests"]),
    ("budget requests '10'", {"llm.budget": {"requests": "10"}}, ["requests"]),
    ("budget requests 10**30", {"llm.budget": {"requests": 10**30}}, ["requests"]),
    ("budget an unknown limit", {"llm.budget": {"tokens": 5}}, ["tokens"]),
    ("budget a list", {"llm.budget": [1, 2]}, ["budget"]),
    ("budget usd without prices", {"llm.budget": {"usd": 1.0}}, ["prices"]),
    ("prices negative", {"llm.prices": {"m": {"prompt": -1, "completion": 1}}}, ["prompt"]),
    ("prices NaN", {"llm.prices": {"m": {"prompt": math.nan, "completion": 1}}}, ["prompt"]),
    ("prices a string", {"llm.prices": "cheap"}, ["prices"]),
    ("prices without completion", {"llm.prices": {"m": {"prompt": 1}}}, ["completion"]),
    ("endpoints a string", {"llm": {"endpoints": "http://127.0.0.1:9/v1"}}, ["endpoints"]),
    ("endpoint ftp://", _eps({**EP, "base_url": "ftp://127.0.0.1/v1"}), ["base_url"]),
    ("endpoint without a model", _eps({"name": "a", "base_url": "http://127.0.0.1:9/v1"}), ["model"]),
    ("endpoint without a name", _eps({"base_url": "http://127.0.0.1:9/v1", "model": "m"}), ["name"]),
    ("endpoint names twice", _eps({**EP, "name": "a"}, {**EP, "name": "a", "base_url": "http://127.0.0.1:8/v1"}),
     ["'a'", "unique"]),
    ("endpoint weight 0", _eps({**EP, "weight": 0}), ["weight"]),
    ("endpoint weight NaN", _eps({**EP, "weight": math.nan}), ["weight"]),
    ("endpoint weight '1'", _eps({**EP, "weight": "1"}), ["weight"]),
    ("endpoint max_concurrency 0", _eps({**EP, "max_concurrency": 0}), ["max_concurrency"]),
    ("endpoint max_concurrency True", _eps({**EP, "max_concurrency": True}), ["max_concurrency"]),
    ("endpoint an unknown key", _eps({**EP, "colour": 1}), ["colour"]),
    ("endpoint api_key_env 'BAD-NAME'", _eps({**EP, "api_key_env": "BAD-NAME"}), ["api_key_env"]),
    ("endpoint allow_plain_http 'yes'", _eps({**EP, "allow_plain_http": "yes"}), ["allow_plain_http"]),
    ("endpoints beside base_url", {"llm.endpoints": [EP]}, ["base_url"]),
    ("max_concurrency 0", {"llm.max_concurrency": 0}, ["max_concurrency"]),
    ("timeout NaN", {"llm.timeout": math.nan}, ["timeout"]),
    ("timeout -1", {"llm.timeout": -1}, ["timeout"]),
    ("max_reply_bytes 0", {"llm.max_reply_bytes": 0}, ["max_reply_bytes"]),
    ("max_retry_wait inf", {"llm.max_retry_wait": math.inf}, ["max_retry_wait"]),
    ("temperature NaN", {"llm.temperature": math.nan}, ["temperature"]),
    ("max_tokens 10**30", {"llm.max_tokens": 10**30}, ["max_tokens"]),
]


# (label, changes to BASE_CONFIG (an llm run against a stand-in), estimate argv extras)
ESTIMATES = [
    ("--throughput 1e-300,1e-300", {}, ["--throughput", "1e-300,1e-300"]),
    ("--throughput 1e308,1e308", {}, ["--throughput", "1e308,1e308"]),
    ("prices 1e308 per 1M tokens", {"llm.prices": {"m": {"prompt": 1e308, "completion": 1e308}}}, []),
    ("prices 1e308 and a throughput of 1e-300", {"llm.prices": {"m": {"prompt": 1e308, "completion": 1e308}}},
     ["--throughput", "1e-300,1e-300"]),
    ("budget usd 1e308", {"llm.prices": {"m": {"prompt": 1, "completion": 1}}, "llm.budget": {"usd": 1e308}}, []),
]


def _estimate_case(changes: dict, extra: Sequence[str]):
    def run(ctx):
        w = ctx.workdir("estimate")
        cfg = _write_yaml(w / "c.yaml", merged(BASE_CONFIG, {
            "policy": {"kind": "llm"}, "env.max_rounds": 1, "env.n_agents": 3,
            "llm": {"base_url": "http://127.0.0.1:9/v1", "model": "m"}, **changes}))
        res = cli(["estimate", str(cfg), "--json", *extra])
        if res.exc is not None:
            raise Bad(f"traceback: {describe(res.exc)}{where(res.exc)}")
        if res.rc != 0:
            return H._one_line_any(res, [], max_seconds=60)

        def constant(name):
            raise ValueError(f"{name} is not JSON")
        try:
            json.loads(res.stdout, parse_constant=constant)
        except ValueError as exc:
            raise Bad(f"estimate --json printed no strict JSON: {exc}") from None
        return HANDLED, "strict JSON"
    return run


def _llm_config() -> None:
    for label, value in OBJECTIVES:
        case("llm_config", f"platform objective {label}", _objective_case(value),
             quick=label == "{'engagement': '1'}", timeout=30)
    for label, value in STANCE_VALUES:
        case("llm_config", f"stances {label}", _stances_case(value), quick=label == "one string", timeout=30)
    for label, llm, route in PLAIN_HTTP:
        case("llm_config", f"plain http: {label}", _plain_http_case(llm, route),
             quick=label == "llm.api_key, a private address", timeout=60)
    for label, changes, names in LLM_VALUES:
        case("llm_config", f"llm.{label}", config_case({**_llm_base(), **copy.deepcopy(changes)}, "error", names),
             timeout=60)
    for label, changes, extra in ESTIMATES:
        case("llm_config", f"estimate --json: {label}", _estimate_case(changes, extra), timeout=90)


# =============================================================================== locks
LOCK_KINDS = ("a hard link to a file outside", "a symbolic link to a file outside", FOLDER_LINK, "a directory",
              "a FIFO")
LOCK_COMMANDS = ("run", "run of a sweep", "resume", "fork", "report", "compare", "calibrate", "moderation",
                 "distill --report (a replay)")


def _lock_case(command: str, kind: str):
    def run(ctx):
        from socialgym.rundir.lock import lock_path

        w = ctx.workdir("locks")
        outside = _outside(w)
        d = w / "target"
        cfgs = H._configs(ctx)
        if command in ("resume", "report", "compare"):
            shutil.copytree(killed_run(ctx) if command == "resume" else _finished_run(ctx), d, symlinks=True)
        argv = {
            "run": lambda: ["run", str(cfgs["base"]), "--out", str(d), "--quiet"],
            "run of a sweep": lambda: ["run", str(cfgs["sweep"]), "--out", str(d), "--quiet"],
            "resume": lambda: ["resume", str(d), "--quiet"],
            "fork": lambda: ["fork", str(_finished_run(ctx)), "--at-round", "2", "--out", str(d), "--quiet"],
            "report": lambda: ["report", str(d)],
            "compare": lambda: ["compare", str(_finished_run(ctx)), str(d)],
            "calibrate": lambda: _cal_argv(ctx, d),
            "moderation": lambda: H._moderation_argv(d),
            "distill --report (a replay)": lambda: ["distill", *map(str, _decision_runs(ctx)), "--out",
                                                    str(w / "m.pt"), "--report", str(d), *DISTILL_ARGS],
        }[command]()
        target = d / "replays" / "00-b" if command.startswith("distill") else d
        if command.startswith("distill"):
            (d / "replays").mkdir(parents=True)
        lock = lock_path(target)
        _plant(lock, kind, outside)
        res = _run_beside(outside, argv, "the planted lock changed a file outside")
        if res.rc == 0:
            raise Bad(f"a lock file planted as {kind} was taken as a lock (exit 0)")
        return H._one_line_any(res, [lock.name, "lock"], status=(2, 3, 4), max_seconds=60)
    return run


def _locks() -> None:
    for command in LOCK_COMMANDS:
        for kind in LOCK_KINDS:
            case("locks", f"{command}: the lock file {kind}", _lock_case(command, kind),
                 quick=(command, kind) == ("run", "a hard link to a file outside"), timeout=120)


# =============================================================================== hybrid
HYBRID_ENV = {"n_agents": 6, "max_rounds": 1, "recommender": "random", "sentiment": "tone", "feed_size": 3,
              "vote_feed_size": 3}


def _groups(*groups: dict) -> dict:
    return {"env": HYBRID_ENV, "policy": {"groups": list(groups)}}


LLM_G = {"name": "llm", "policy": "llm", "agents": 2}
ARCH_G = {"name": "arch", "policy": "archetype", "agents": 2, "params": {"k": 1, "pool_size": 1}}
REST = {"name": "rest", "policy": "scripted"}
# (label, changes, words one of which the message names)
HYBRID = [
    ("an unknown tier", _groups({"name": "x", "policy": "smart", "agents": 2}, REST), ["policy"]),
    ("tier llm with kind archetype", _groups({"name": "x", "policy": "llm", "kind": "archetype", "agents": 2}, REST),
     ["policy", "kind"]),
    ("tier scripted with kind llm", _groups({"name": "x", "policy": "scripted", "kind": "llm", "agents": 2}, REST),
     ["policy", "kind"]),
    ("tier a list", _groups({"name": "x", "policy": ["llm"], "agents": 2}, REST), ["policy"]),
    ("archetype k 0", _groups({**ARCH_G, "params": {"k": 0}}, REST), ["k"]),
    ("archetype k -1", _groups({**ARCH_G, "params": {"k": -1}}, REST), ["k"]),
    ("archetype k 1.5", _groups({**ARCH_G, "params": {"k": 1.5}}, REST), ["k"]),
    ("archetype k '3'", _groups({**ARCH_G, "params": {"k": "3"}}, REST), ["k"]),
    ("archetype k true", _groups({**ARCH_G, "params": {"k": True}}, REST), ["k"]),
    ("archetype k 10**9", _groups({**ARCH_G, "params": {"k": 10**9}}, REST), ["k"]),
    ("archetype pool_size 0", _groups({**ARCH_G, "params": {"pool_size": 0}}, REST), ["pool_size"]),
    ("archetype texts 'bogus'", _groups({**ARCH_G, "params": {"texts": "bogus"}}, REST), ["texts"]),
    ("archetype an unknown parameter", _groups({**ARCH_G, "params": {"colour": 1}}, REST), ["colour"]),
    ("archetype params a string", _groups({**ARCH_G, "params": "k=2"}, REST), ["params"]),
    ("archetype params.client", _groups({**ARCH_G, "params": {"client": "x"}}, REST), ["client"]),
    ("archetype coached", _groups({**ARCH_G, "coach": True}, REST), ["coach"]),
    ("archetype bound to endpoints", _groups({**ARCH_G, "endpoints": ["a"]}, REST), ["endpoints"]),
    ("archetype text_chars 5", _groups({**ARCH_G, "params": {"text_chars": 5}}, REST), ["text_chars"]),
    ("share 1.5", _groups({**LLM_G, "agents": None, "share": 1.5}, REST), ["share"]),
    ("share -0.5", _groups({**LLM_G, "agents": None, "share": -0.5}, REST), ["share"]),
    ("share NaN", _groups({**LLM_G, "agents": None, "share": math.nan}, REST), ["share"]),
    ("share '0.5'", _groups({**LLM_G, "agents": None, "share": "0.5"}, REST), ["share"]),
    ("share true", _groups({**LLM_G, "agents": None, "share": True}, REST), ["share"]),
    ("agents and share", _groups({**LLM_G, "share": 0.5}, REST), ["share", "agents"]),
    ("agents 0", _groups({**LLM_G, "agents": 0}, REST), ["agents"]),
    ("agents '2'", _groups({**LLM_G, "agents": "2"}, REST), ["agents"]),
    ("agents 2.5", _groups({**LLM_G, "agents": 2.5}, REST), ["agents"]),
    ("agents 10**30", _groups({**LLM_G, "agents": 10**30}, REST), ["agents"]),
    ("two groups take the rest", _groups(LLM_G, {**ARCH_G, "agents": None}, REST), ["rest", "agents", "groups"]),
    ("counts past n_agents", _groups({**LLM_G, "agents": 4}, {**ARCH_G, "agents": 4}), ["n_agents", "groups"]),
    ("shares that do not add up", _groups({**LLM_G, "agents": None, "share": 0.4},
                                          {**ARCH_G, "agents": None, "share": 0.4}), ["share", "n_agents"]),
    ("groups an empty list", _groups(), ["groups"]),
    ("groups a mapping", {"env": HYBRID_ENV, "policy": {"groups": {"llm": LLM_G}}}, ["groups"]),
    ("two groups of one name", _groups(LLM_G, {**ARCH_G, "name": "llm"}, REST), ["llm", "name"]),
    ("decisions 'some'", {**_groups(LLM_G, REST), "logging.decisions": "some"}, ["decisions"]),
    ("distilled without a path", _groups({"name": "d", "policy": "distilled", "agents": 2}, REST), ["path"]),
    ("distilled path a directory", _groups({"name": "d", "policy": "distilled", "agents": 2,
                                            "params": {"path": "/tmp"}}, REST), ["path"]),
    ("distilled path a number", _groups({"name": "d", "policy": "distilled", "agents": 2, "params": {"path": 5}},
                                        REST), ["path"]),
    ("distilled coached", _groups({"name": "d", "policy": "distilled", "agents": 2, "coach": True,
                                   "params": {"path": "@MODEL@"}}, REST), ["coach"]),
    ("distilled with an unknown parameter", _groups({"name": "d", "policy": "distilled", "agents": 2,
                                                     "params": {"path": "@MODEL@", "colour": 1}}, REST), ["colour"]),
    ("distilled group lambdas NaN", _groups({"name": "d", "policy": "distilled", "agents": 2, "lambdas": [math.nan] * 5,
                                           "params": {"path": "@MODEL@"}}, REST), ["lambdas"]),
]


def _resolve_model(value: Any, model: str) -> Any:
    if isinstance(value, dict):
        return {k: _resolve_model(v, model) for k, v in value.items()}
    if isinstance(value, list):
        return [_resolve_model(v, model) for v in value]
    return model if value == "@MODEL@" else value


def _hybrid_case(changes: dict, words: Sequence[str]):
    def run(ctx):
        from socialgym.experiments import ConfigError, load_config

        text = json.dumps(changes, default=str)
        model = str(_model(ctx)) if "@MODEL@" in text else ""
        data = merged(BASE_CONFIG, _resolve_model(changes, model))
        w = ctx.workdir("hybrid")
        cfg = _write_yaml(w / "config.yaml", data)
        try:
            load_config(data)
            loaded = None
        except ProbeTimeout:
            raise
        except ConfigError as exc:
            loaded = exc
        except Exception as exc:  # noqa: BLE001
            raise Bad(f"load_config: unexpected {describe(exc)}{where(exc)}")
        llm_tier = any(t in text for t in ('"llm"', '"archetype"'))
        out = w / "out"
        argv = ["estimate", str(cfg)] if llm_tier else ["run", str(cfg), "--out", str(out), "--quiet"]
        res = cli(argv)
        if loaded is None:
            raise Bad(f"load_config accepted the config ({argv[0]}: {_exit_words(res)})")
        problem = message_problem(str(loaded), [])
        if problem:
            raise Bad(f"load_config: {problem}: {describe(loaded)}")
        if not any(x.lower() in str(loaded).lower() for x in words):
            raise Bad(f"load_config's message names none of {list(words)}: {one_line(str(loaded), 200)}")
        if res.exc is None and res.rc == 0:
            raise Bad(f"load_config refused it ({one_line(str(loaded), 120)}) but `socialgym {argv[0]}` exited 0")
        if out.exists():
            raise Bad(f"{out.name} was created for a bad config ({_exit_words(res)})")
        return H._one_line_any(res, words, max_seconds=10)
    return run


def _hybrid() -> None:
    for label, changes, words in HYBRID:
        case("hybrid", label, _hybrid_case(changes, words), quick=label == "archetype k 0", timeout=60)
