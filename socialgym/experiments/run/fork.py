"""Starting from a run's snapshot: forks (the run continued from its state after round ``t``
with a changed configuration) and interviews (a question to one of its agents in that state).

    socialgym fork runs/base --at-round 19 --out runs/soc --set 'interventions=[{kind: add_ties, at_round: 20, soc_strategy: 3}]'
    socialgym compare runs/base runs/soc

    from socialgym.experiments.run.fork import fork_run
    fork_run("runs/base", 19, "runs/soc", overrides=["env.recommender=mf"])

A run keeps the checkpoint of every round in ``snapshots/round_NNNN.pkl`` (``run.snapshots``).
A fork copies what the original had after round ``t`` — its output files cut back to that
round, the tie matrices, personas.json, the LLM response cache — and the snapshot (the
environment with its recommender and RNG states, the policies with their memories and RNGs, the
LLM client's cache position), re-signed under a new run id, then resumes. Rounds ``1..t`` of the
fork are the original's; with no change, rounds ``t+1..`` are too, byte for byte (LLM runs
replay the original's replies from the copied cache; only transcripts.jsonl marks them cached).

What a fork can change, and how (:func:`socialgym.experiments.define.loading.fork_config`):

- ``interventions`` and ``surveys``: those of rounds ``<= t`` happened already and must stay as
  they were; new ones may start at ``t+1``;
- ``env.recommender`` / ``env.recommender_kwargs`` / ``env.rerank`` and the tie-dynamics
  parameters (``half_life``, ``xi``, ``delta_max``, ``b_rec``): written into the fork's config as
  interventions at round ``t+1`` (``env`` itself keeps describing rounds ``1..t``);
- ``policy.coach`` and a group's ``coach``: a ``coach`` intervention at ``t+1``;
- the ``llm``, ``logging`` and ``run`` sections: they take effect in the fork.

Anything else (the number of agents, the seed, a policy's kind ...) describes the state the fork
starts from and cannot change: a one-line :class:`~socialgym.experiments.define.schema.ConfigError`.
``run.json`` of the fork records ``fork: {of, run_id, at_round, changes}``.

:func:`interview_run` (``socialgym interview DIR --agent agent_3 --round 10 "question"``) loads
the snapshot of a round, starts the run's LLM (the embedded model, or its server) and puts the
question to the agent with its persona and memory of that round; the run directory is only
read (no cache, log or file is written there).
"""

from __future__ import annotations

import shutil
import sqlite3
import uuid
from pathlib import Path
from typing import Iterable, Mapping

from socialgym.experiments.run.checkpoint import CheckpointError, keep_snapshot, read_checkpoint, write_checkpoint
from socialgym.experiments.define import (ConfigError, ExperimentConfig, dump_yaml, fork_config, from_dict,
                                         load_config, to_dict)
from socialgym.experiments.run.recorder import verify_outputs
from socialgym.experiments.run.runner import CHECKPOINT, CHECKPOINT_VERSION, RunError, config_digest, resume_experiment
from socialgym.rundir import Run, layout, write_run_info, writes


# ---------------------------------------------------------------------------------- forking
@writes("fork", "out")
def fork_run(src: str | Path, at_round: int, out: str | Path, *, overrides: Iterable[str] = (),
             config: ExperimentConfig | Mapping | None = None, condition: Mapping | None = None,
             replicate: int | None = None, trust: bool = False, resume: bool = True,
             progress: bool | None = None) -> dict:
    """Fork the run in ``src`` after round ``at_round`` into ``out`` (which must not hold a run)
    and, with ``resume`` (default), play the remaining rounds. The fork's config is the one rounds
    1..t ran with, changed by ``overrides`` (``key.path=value``, as ``--set``) or replaced by
    ``config`` (a whole config: a sweep cell's), through
    :func:`~socialgym.experiments.define.loading.fork_config`. Returns the summary (with ``resume=False``:
    ``{"status": "forked", ...}``)."""
    src, out = Path(src), Path(out)
    if not isinstance(at_round, int) or isinstance(at_round, bool):
        raise RunError(f"--at-round must be an integer, got {at_round!r}")
    meta = _run_meta(src)
    if not layout.snapshot_path(src, at_round).is_file():
        origin = meta.get("fork") or {}
        if isinstance(origin, dict) and isinstance(origin.get("at_round"), int) and at_round < origin["at_round"]:
            # rounds before a fork's start are its origin's: fork from there, with this fork's config
            # (its own changes start after at_round, so the origin accepts them)
            _check_origin(src, origin, trust)
            if config is None:
                try:
                    config = load_config(src / layout.CONFIG, list(overrides))
                except ConfigError as exc:
                    raise RunError(f"fork: {exc}") from None
            return fork_run(origin["of"], at_round, out, config=config, condition=condition,
                            replicate=replicate, trust=trust, resume=resume, progress=progress)
    state = load_snapshot(src, at_round, trust=trust)
    if not state["env"].agents:
        raise RunError(f"the run ended at round {at_round}: nothing to continue (--at-round must lie in "
                       f"[1, {at_round - 1}])")
    try:
        base = from_dict(state["config"])
        if config is None:
            target = load_config(state["config"], list(overrides))
        else:
            target = config if isinstance(config, ExperimentConfig) else load_config(config)
        cfg, changes = fork_config(base, target, at_round)
    except ConfigError as exc:
        raise RunError(f"fork: {exc}") from None
    if out.exists() and any(out.iterdir()):
        raise RunError(f"{out} is not empty: a fork needs a new directory")
    final, out = out, out.parent / f".{out.name}.forking"     # built aside, renamed when whole
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    _copy_outputs(src, out, state)
    fork_meta = {"run_id": uuid.uuid4().hex,
                 "condition": dict(condition) if condition is not None else dict(meta.get("condition") or {}),
                 "replicate": replicate if replicate is not None else meta.get("replicate", 0),
                 "seed": meta.get("seed", base.seed),
                 "fork": {"of": str(src.resolve()), "run_id": meta.get("run_id"), "at_round": at_round,
                          "changes": changes}}
    write_run_info(out, fork_meta)
    dump_yaml(cfg, out / layout.CONFIG)
    state = {**state, "run_id": fork_meta["run_id"], "config": to_dict(cfg),
             "config_sha256": config_digest(out / layout.CONFIG), "fork": fork_meta["fork"]}
    write_checkpoint(out / CHECKPOINT, state)
    if cfg.run.snapshots:
        keep_snapshot(out, at_round)
    if final.exists():
        final.rmdir()
    out = out.rename(final)
    if not resume:
        return {"status": "forked", "rounds_completed": at_round, "changes": changes}
    return resume_experiment(out, progress=progress, trust=trust)


def interview_run(src: str | Path, agent: str, question: str, *, round: int | None = None, scale: str = "text",
                  trust: bool = False) -> dict:
    """Ask ``agent`` of the run in ``src`` a question from its state after ``round`` (default:
    the last checkpoint); returns ``surveys.interview``'s record with the run's path. Nothing in
    ``src`` is written."""
    import tempfile

    from socialgym.experiments.run.runner import open_llm_client
    from socialgym.experiments.run.surveys import interview, is_llm_agent

    src = Path(src)
    state = load_snapshot(src, round, trust=trust)
    env, policy = state["env"], state["policy"]
    if agent not in env.possible_agents:
        raise RunError(f"interview: {src} has no agent {agent!r} (agents: {', '.join(env.possible_agents[:5])}"
                       f"{' ...' if len(env.possible_agents) > 5 else ''})")
    if not is_llm_agent(policy, agent):
        raise RunError(f"interview: {agent} is not an LLM agent (only LLM agents can be interviewed)")
    try:
        cfg = from_dict(state["config"])
    except ConfigError as exc:
        raise RunError(f"interview: the snapshot's config: {exc}") from None
    with tempfile.TemporaryDirectory(prefix="socialgym-interview-") as tmp, \
            open_llm_client(cfg.llm, int(_run_meta(src).get("seed", cfg.seed)), Path(tmp) / "llm_server.log",
                            None) as client:
        try:
            record = interview(policy, agent, question, client, round=int(state["round"]), scale=scale)
        except ValueError as exc:
            raise RunError(str(exc)) from None
    return {**record, "run": str(src)}


def _run_meta(src: Path) -> dict:
    run = Run(src)
    if not (src / layout.CONFIG).is_file() or run.info is None:
        why = run.notice(layout.RUN_INFO) or f"no {layout.CONFIG} / {layout.RUN_INFO}"
        raise RunError(f"{src} is not a run directory ({why})")
    return run.info


def _check_origin(src: Path, origin: dict, trust: bool) -> None:
    """The origin a fork's run.json names is the one its first snapshot (signed) recorded: an
    edited run.json cannot lead a fork of a fork to read another directory."""
    try:
        signed = load_snapshot(src, origin["at_round"], trust=trust).get("fork")
    except RunError as exc:
        raise RunError(f"{src} is a fork whose origin cannot be verified: {exc}") from None
    if not isinstance(signed, dict) or signed.get("of") != origin.get("of") \
            or signed.get("run_id") != origin.get("run_id"):
        raise RunError(f"{src / layout.RUN_INFO} names an origin ({str(origin.get('of'))[:120]}) that its signed "
                       "snapshot does not: the file was changed; restore it")


def load_snapshot(src: str | Path, at_round: int | None = None, *, trust: bool = False) -> dict:
    """The verified state of the run in ``src`` after round ``at_round`` (default: its last
    checkpoint): signature, format, run id and round checked; raises :class:`RunError` saying
    which snapshots exist when that one does not."""
    src = Path(src)
    meta = _run_meta(src)
    path = src / CHECKPOINT if at_round is None else layout.snapshot_path(src, at_round)
    if not path.is_file():
        done = list(layout.snapshot_files(src))
        have = f"snapshots of rounds {done[0]}..{done[-1]}" if done else "no snapshots (run.snapshots was off?)"
        raise RunError(f"{path} not found: {src} has {have}; the state after round {at_round} is needed")
    try:
        state = read_checkpoint(path, trust=trust)
    except CheckpointError as exc:
        raise RunError(str(exc)) from None
    if not isinstance(state, dict) or state.get("version") != CHECKPOINT_VERSION:
        raise RunError(f"{path} has checkpoint format {state.get('version') if isinstance(state, dict) else None}, "
                       f"this socialgym reads {CHECKPOINT_VERSION}")
    if state.get("run_id") != meta.get("run_id") or (at_round is not None and state.get("round") != at_round):
        raise RunError(f"{path} belongs to another run or round (run id {state.get('run_id')}, round "
                       f"{state.get('round')}): it was copied from elsewhere")
    return state


def _copy_outputs(src: Path, out: Path, state: dict) -> None:
    """The original's outputs as they were after the snapshot's round, checked against its digests."""
    for name, size in state["sizes"].items():
        with open(src / name, "rb") as f, open(out / name, "wb") as g:
            remaining = size
            while remaining > 0:
                chunk = f.read(min(1 << 20, remaining))
                if not chunk:
                    break
                g.write(chunk)
                remaining -= len(chunk)
    (out / layout.TIES).mkdir(exist_ok=True)
    for key in state["digests"]:
        if key.startswith(layout.TIES + "/"):
            shutil.copyfile(src / key, out / key)
    for name in state.get("files", {}):
        shutil.copyfile(src / name, out / name)
    cache = src / layout.LLM_CACHE
    if cache.is_file():            # sqlite's backup: a consistent copy even while another process writes
        with sqlite3.connect(cache) as a, sqlite3.connect(out / layout.LLM_CACHE) as b:
            a.backup(b)
        a.close()
        b.close()
    try:
        verify_outputs(out, state["sizes"], state["digests"])
    except (ValueError, OSError) as exc:
        raise RunError(f"cannot fork: {src} changed since that round ({exc})") from None


__all__ = ["fork_run", "load_snapshot", "interview_run"]
