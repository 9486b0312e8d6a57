"""Run one experiment (one condition, one replicate) into a run directory, round by round.

    from socialgym.experiments import load_config, run_experiment, resume_experiment
    summary = run_experiment(load_config("study.yaml"), "runs/study")
    summary = resume_experiment("runs/study")          # after a crash or a kill

The platform (``socialgym.parallel_env``) is the substrate; the config's policy groups are the
scenario that populates it. After every round the runner hands the environment to the
:class:`~socialgym.experiments.run.recorder.RunRecorder` (data collection) and then saves a
checkpoint atomically (write, fsync, rename): the environment with its recommender model and
all RNG states, the policies with their memories and RNGs, the last observations, the LLM
client's cache position and usage log, and the sizes of the output files. Killing the process
at any moment loses at most the round in progress; ``resume`` cuts the files back to the last
checkpoint and continues, producing the same files as an uninterrupted run (for LLM policies
with the response cache on: requests the lost round had already sent replay from the cache).

Resume trusts nothing it has not checked: the checkpoint is signed with the user's key and
verified before it is unpickled (``checkpoint.py``); it names the run it belongs to (the
``run_id`` of run.json), the config it was made with and a digest of every output file, and
resume stops with a message naming the file when any of them differs. ``summary.json`` is
rewritten from the checkpoint, and a missing report is rebuilt.

Before each round the run's LLM spending is checked against ``llm.budget`` (``spending.py``):
a round that would pass a limit is not started, and the run stops with ``"status": "budget"``.
:func:`simulate` plays a config against a given client (the estimator's stand-in model).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import shutil
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from socialgym.baselines.kinds import KIND
from socialgym.config import REWARD_NAMES, FeedConfig
from socialgym.experiments.define import ExperimentConfig, LLMConfig, dump_yaml, load_config, thaw, to_dict
from socialgym.experiments.run.checkpoint import (CheckpointError, check_checkpoint, config_digest, keep_snapshot,
                                                  read_checkpoint, write_checkpoint)
from socialgym.rundir.files import to_float
from socialgym.experiments.run.recorder import RunRecorder, truncate_outputs
from socialgym.experiments.run.servers import (bind_groups, check_llm_keys, check_model_files, client_settings, listen,
                                               run_endpoints)
from socialgym.experiments.run.spending import BUDGET_STATUS, Progress, Spending, Stop, set_budget
from socialgym.experiments.errors import RunError
from socialgym.llm.client import LLMServerDown
from socialgym.rundir.decisions import clear_decisions, decision_log
from socialgym.rundir import (kind_of, layout, read_run_info, read_summary, was_started, write_personas, write_run_info,
                              write_summary, writer_lock)

CHECKPOINT = layout.CHECKPOINT
CHECKPOINT_VERSION = 3      # 2: LLM agents with full memory (issue 14); 3: signed, with run id and digests


# ---------------------------------------------------------------------------------- public API
def run_experiment(cfg: ExperimentConfig, out: str | Path, *, condition: Mapping | None = None,
                   replicate: int = 0, progress: bool | None = None) -> dict:
    """Run ``cfg`` (a single cell: its ``sweep`` section is ignored here, see ``sweep.py``) into
    ``out``, which must not hold a run already. Returns the summary (also summary.json)."""
    out = Path(out)
    with writer_lock(out, "run"):
        kind = kind_of(out)
        if kind not in (None, "run"):
            raise RunError(f"{out} holds a {kind}, not a run: give another --out")
        if was_started(out):
            raise RunError(f"{out} already holds a run: use `socialgym resume {out}` or another --out")
        if cfg.uses_llm():
            check_llm_keys(cfg)                # a missing or exposed key leaves no directory behind
        check_model_files(cfg)                 # so does a missing, damaged or NaN model file
        out.mkdir(parents=True, exist_ok=True)
        meta = {"run_id": uuid.uuid4().hex, "condition": dict(condition or {}), "replicate": replicate,
                "seed": cfg.seed}
        write_run_info(out, meta)
        dump_yaml(cfg, out / layout.CONFIG)        # last: its presence marks a resumable run directory
        return _RunExecution(cfg, out, meta, progress).execute(checkpoint=None)


def resume_experiment(out: str | Path, *, progress: bool | None = None, trust: bool = False,
                      allow_config_change: bool = False, budget: Mapping | None = None) -> dict:
    """Continue the run in ``out`` from its last completed round; a completed run is checked
    against its checkpoint, its summary rewritten from it and a missing report rebuilt.

    ``trust`` loads a checkpoint whose signature does not match this user's key (one from
    someone else: it can run code); ``allow_config_change`` continues although config.yaml was
    edited since the checkpoint (only its llm, logging and run sections and the interventions and
    surveys of later rounds take effect: the environment and policies come from the checkpoint).
    ``budget`` (``{"requests": 500, "usd": 5.0}``, as ``--budget``) sets those limits of
    ``llm.budget`` in config.yaml first, recorded in run.json's ``config_changes``."""
    out = Path(out)
    with writer_lock(out, "resume"):
        return _resume(out, progress, trust, allow_config_change, budget)


def simulate(cfg: ExperimentConfig, out: str | Path, client, *, seed: int | None = None,
             until_round: int | None = None) -> dict:
    """Play ``cfg`` into the new folder ``out`` with ``client`` (a stand-in model's: the
    estimator, the budget's round-1 prediction), stopping before round ``until_round + 1`` when
    given; no budget check, no crash hooks. The caller owns ``client`` (its usage log is the
    result); returns the summary."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    meta = {"run_id": uuid.uuid4().hex, "condition": {}, "replicate": 0, "seed": cfg.seed if seed is None else seed}
    write_run_info(out, meta)
    dump_yaml(cfg, out / layout.CONFIG)

    def boundary(r: int, usage) -> Stop | None:
        return Stop("stopped", r) if until_round is not None and r > until_round else None
    return _RunExecution(cfg, out, meta, False, client=client, boundary=boundary).execute(checkpoint=None)


def _resume(out: Path, progress: bool | None, trust: bool, allow_config_change: bool,
            budget: Mapping | None = None) -> dict:
    if kind_of(out) not in (None, "run"):
        raise RunError(f"{out} holds a {kind_of(out)}, not a run")
    if not (out / layout.CONFIG).exists():
        raise RunError(f"{out} is not a run directory (no {layout.CONFIG})")
    changed = set_budget(out, budget) if budget else []
    cfg = load_config(out / layout.CONFIG)
    meta = read_run_info(out)
    if not isinstance(meta, dict) or not isinstance(meta.get("condition", {}), dict):
        raise RunError(f"{out / layout.RUN_INFO} is missing or not a JSON object: this directory was not written by "
                       f"`socialgym run`, or its {layout.RUN_INFO} was damaged")
    meta.setdefault("condition", {})
    meta.setdefault("replicate", 0)
    meta.setdefault("seed", cfg.seed)
    checkpoint = None
    if (out / CHECKPOINT).exists():
        try:
            checkpoint = read_checkpoint(out / CHECKPOINT, trust=trust)
        except CheckpointError as exc:
            raise RunError(str(exc)) from None
        if not isinstance(checkpoint, dict) or checkpoint.get("version") != CHECKPOINT_VERSION:
            version = checkpoint.get("version") if isinstance(checkpoint, dict) else None
            raise RunError(f"{out / CHECKPOINT} has format {version}, this socialgym writes {CHECKPOINT_VERSION}; "
                           f"delete it to restart the run from round 0")
        check_checkpoint(out, checkpoint, cfg, meta, allow_config_change)
    elif changed:                           # nothing checkpointed yet: the run starts over, with the new limits
        meta.setdefault("config_changes", []).append({"round": 0, "keys": changed})
        write_run_info(out, meta)
    if checkpoint is None and (read_summary(out) or {}).get("status") == "complete":
        if not cfg.run.checkpoint:       # nothing to verify against: the run said so itself
            return read_summary(out)
        raise RunError(f"{out / layout.SUMMARY} says the run is complete but {out / CHECKPOINT} is missing: "
                       "the directory was changed; restore the checkpoint or start a new run")
    return _RunExecution(cfg, out, meta, progress).execute(checkpoint=checkpoint)


# ---------------------------------------------------------------------------------- one run
class _RunExecution:
    """One execution of a run: build (or restore from a checkpoint) the environment and the
    policies, play the remaining rounds with a checkpoint after each, then write the summary."""

    def __init__(self, cfg: ExperimentConfig, out: Path, meta: dict, progress: bool | None, *,
                 client=None, boundary: Callable[[int, Any], Stop | None] | None = None) -> None:
        self.cfg, self.out, self.meta = cfg, out, meta
        self.show_progress = cfg.logging.progress if progress is None else progress
        self.seed = int(meta.get("seed", cfg.seed))
        self._files: dict | None = None
        self.given_client, self.client = client, None        # given: a stand-in's (simulate)
        self.spending = Spending(cfg, meta, out, self._first_round)
        self.boundary = boundary or self.spending.check        # asked before every round
        self.endpoint_stats = None

    def execute(self, checkpoint: dict | None) -> dict:
        if checkpoint is not None and self.cfg.run.snapshots and \
                not layout.snapshot_path(self.out, checkpoint["round"]).exists():
            keep_snapshot(self.out, checkpoint["round"])     # killed between the checkpoint and its link
        if checkpoint is not None and not checkpoint["env"].agents:
            return self._complete(checkpoint)
        try:
            return self._execute(checkpoint)
        except KeyboardInterrupt:          # Ctrl-C: resumable from the last checkpoint, and summary.json says so
            self._mark_failed(None)
            raise
        except LLMServerDown as exc:       # the server died: named, and resumable from the last round kept
            done = (read_summary(self.out) or {}).get("rounds_completed", 0)
            down = LLMServerDown(f"{exc}; the run stopped with {done} round(s) kept: `socialgym resume {self.out}` "
                                 f"continues from there once the server runs", base_url=exc.base_url)
            self._mark_failed(down)
            raise down from None
        except Exception as exc:           # the run stops here: say so in summary.json (resume retries)
            self._mark_failed(exc)
            raise

    def _execute(self, checkpoint: dict | None) -> dict:
        cfg, out = self.cfg, self.out
        wandb = None
        if cfg.logging.wandb is not None:   # fail before any work when the extra is missing
            wandb = _wandb_logger(cfg, out, self.meta)
        with contextlib.ExitStack() as stack:
            if wandb is not None:    # a failing run still closes its wandb run, marked failed
                stack.callback(wandb.finish, exit_code=1)     # (a no-op after the normal finish)
            client = self._client(stack)
            early: dict[str, list] = {"transcript": [], "route": []}   # before the recorder exists (the survey)
            if client is not None:
                listen(client, cfg, early["transcript"].append, early["route"].append)
            env, policy, obs, table, done_rounds, seconds, surveys = self._start(checkpoint, client)
            recorder = self._recorder(checkpoint, env, table, surveys, client)
            stack.callback(recorder.close)
            if client is not None:
                for entry in early["transcript"]:
                    recorder.transcript_line(entry)
                for entry in early["route"]:
                    recorder.route_line(entry)
                listen(client, cfg, recorder.transcript_line, recorder.route_line)
            usage = client.usage if client is not None else None
            self._write_summary(env, table, "running", done_rounds, seconds, usage)
            state = {"obs": obs, "seconds": seconds, "stop": None}
            self._play(env, policy, table, client, recorder, surveys, wandb, state)
            obs, seconds, stop = state["obs"], state["seconds"], state["stop"]
            if stop is not None:
                summary = self._stopped(stop, env, policy, obs, table, client, recorder, seconds, surveys, checkpoint)
                if wandb is not None and stop.status == BUDGET_STATUS:    # resumable, not failed
                    wandb.finish(exit_code=0)
            else:   # the last round's time, which the checkpoint holds too: a resume rewrites the same summary
                summary = self._write_summary(env, table, "complete", env.config.max_rounds, seconds, usage)
                if wandb is not None:
                    wandb.finish(env.tie_matrix(), dict(zip(env.possible_agents, table["group"])))
        if cfg.logging.report and (stop is None or stop.status == BUDGET_STATUS):
            build_pages(out)
        return summary

    def _play(self, env, policy, table, client, recorder, surveys, wandb, state: dict) -> None:
        """The remaining rounds, each with its files and checkpoint; ``state`` holds the last
        observations, the run's seconds and (when a round boundary said so) why it stopped."""
        cfg = self.cfg
        usage = client.usage if client is not None else None
        bar = Progress(self.show_progress, env.config.max_rounds, len(env.possible_agents), self.spending)
        started = time.perf_counter() - state["seconds"]
        groups = _group_members(env, table)
        obs = state["obs"]
        if cfg.logging.decisions != "none" and env.config.obs_format == "structured":
            raise RunError("logging.decisions: this run's environment was built (and checkpointed) without "
                           "numeric observations, which decision logs keep; start a new run to log decisions")
        decisions = decision_log(env, table["kind"], cfg.logging.decisions)
        while env.agents:
            r = env.round
            state["stop"] = self.boundary(r, usage) if usage is not None else None
            if state["stop"] is not None:
                break
            obs = self._intervene(env, obs, recorder, groups, policy, table, client)   # this round's
            if surveys is not None:
                surveys.observe(env)                                  # what the round's feeds show
            obs = _step(env, policy, obs, decisions)                  # act phase
            self._fault(r, "act")
            obs = _step(env, policy, obs, decisions)                  # vote phase
            self._check_server(r, client)                            # nothing of a round without a server is kept
            rows, network, posts = recorder.record_round(env, usage)
            if decisions is not None:
                decisions.write(self.out, r)
            if surveys is not None and surveys.due(r, env.config.max_rounds):
                recorder.record_survey(*surveys.administer(r, env, policy, client))
            recorder.record_fallbacks(usage)                          # with their reasons
            sizes = recorder.sync()
            self._fault(r, "outputs")
            if wandb is not None:
                wandb.log_round(r, rows, network, env.tie_matrix(), posts)
            state["obs"], state["seconds"] = obs, time.perf_counter() - started
            if cfg.run.checkpoint:
                self._checkpoint(env, policy, obs, table, client, sizes, recorder.digests(), r, state["seconds"],
                                 surveys)
            self._write_summary(env, table, "running", r, state["seconds"], usage)
            bar.update(r, network, usage)
        bar.close()

    def _recorder(self, checkpoint, env, table, surveys, client) -> RunRecorder:
        cfg = self.cfg
        return RunRecorder(self.out, agents=env.possible_agents, groups=table["group"], kinds=table["kind"],
                           coached=table["coached"], events=cfg.logging.events, ties=cfg.logging.ties,
                           surveys=surveys is not None, llm=client is not None,
                           fallbacks_written=len(client.usage.fallbacks) if checkpoint and client else 0,
                           transcripts=cfg.logging.transcripts and client is not None,
                           routes=client is not None and bool(cfg.llm and cfg.llm.endpoints),
                           network_every=cfg.logging.network_every, max_rounds=env.config.max_rounds,
                           tie_digests={k[len(layout.TIES) + 1:]: v for k, v in checkpoint["digests"].items()
                                        if k.startswith(layout.TIES + "/")} if checkpoint else None)

    def _stopped(self, stop: Stop, env, policy, obs, table, client, recorder, seconds, surveys, checkpoint) -> dict:
        """The run stops before round ``stop.before_round`` (its budget, or simulate's last
        round): a fresh run that stops before round 1 checkpoints its start, so that resume
        continues from there; the summary says why (``stopped``)."""
        if self.cfg.run.checkpoint and checkpoint is None and stop.before_round == 1:
            self._checkpoint(env, policy, obs, table, client, recorder.sync(), recorder.digests(), 0, seconds, surveys)
        summary = self._summary(env, table, stop.status, stop.before_round - 1, seconds,
                                client.usage if client is not None else None)
        summary["stopped"] = stop.to_dict()
        self._store_summary(summary)
        return summary

    def _check_server(self, r: int, client) -> None:
        """Stop before round ``r`` is recorded when its server is gone (``LLMClient.outage``):
        the embedded server's process exited, or no request of the round reached any server.
        The round's stand-in answers are not kept; a resume plays the round again."""
        if client is None or self.given_client is not None:
            return
        down = client.outage(r)
        if down is not None:
            raise LLMServerDown(f"round {r}: {down}", base_url=client.base_url)

    def _first_round(self):
        """The usage log of a stand-in run of this config's round 1 (the budget's prediction of
        round 1, ``socialgym.experiments.run.standin``)."""
        import tempfile

        from socialgym.experiments.run.standin import stand_in_client, stand_in_config

        with tempfile.TemporaryDirectory(prefix="socialgym-estimate-") as tmp, \
                stand_in_client(self.cfg, self.seed) as client:
            simulate(stand_in_config(self.cfg), Path(tmp) / "run", client, seed=self.seed, until_round=1)
            return client.usage

    def _fault(self, r: int, point: str) -> None:
        if self.given_client is None:          # never in a stand-in's simulation
            _fault(r, point)

    def _start(self, checkpoint: dict | None, client):
        """The run's state at its first round to play: built anew (outputs cleared) or restored
        from ``checkpoint`` (outputs cut back to it); with the surveys that follow it."""
        if checkpoint is None:
            truncate_outputs(self.out, {}, 0)
            clear_decisions(self.out, 0)
            shutil.rmtree(self.out / layout.SNAPSHOTS, ignore_errors=True)      # a restart's stale ones
            env, policy, table = self._build(client)
            obs, _ = env.reset(seed=self.seed)
            done_rounds, seconds = 0, 0.0
            surveys = None
        else:
            truncate_outputs(self.out, checkpoint["sizes"], checkpoint["round"])
            clear_decisions(self.out, checkpoint["round"])
            env, policy, obs = checkpoint["env"], checkpoint["policy"], checkpoint["obs"]
            table = checkpoint["table"]
            _attach(client, policy, env)
            if client is not None and checkpoint["llm"] is not None:
                client.load_state_dict(checkpoint["llm"])
            done_rounds, seconds = checkpoint["round"], checkpoint["seconds"]
            surveys = checkpoint.get("surveys")
        if self.cfg.surveys:
            from socialgym.experiments.run.surveys import Surveys
            specs = [thaw(s) for s in self.cfg.surveys]
            if surveys is None:        # (a fork that adds surveys: their exposure counts from here)
                surveys = Surveys(specs, list(env.possible_agents), list(table["group"]), list(table["kind"]))
            surveys.specs = specs      # the config's: a fork may have changed later rounds' surveys
        else:
            surveys = None
        return env, policy, obs, table, done_rounds, seconds, surveys

    def _intervene(self, env, obs, recorder, groups, policy, table, client):
        """Apply the interventions scheduled for the current round (before its act step), log
        each in events.jsonl, and return the observations of the changed platform. Which ones
        are due follows from the round number alone, so a resume needs no state for them (the
        coach's switches are in the checkpointed policy and table)."""
        from socialgym.experiments.define.interventions import FEED_KINDS
        from socialgym.experiments.define.schedule import due
        from socialgym.experiments.run.interventions import apply_intervention, set_coach, target_indices

        specs = due(self.cfg.interventions, env.round, env.config.max_rounds)
        if not specs:
            return obs
        for spec in specs:
            if spec["kind"] == "coach":
                agents = [env.possible_agents[i] for i in target_indices(env, spec.get("target", "all"), groups)]
                llm_agents = [a for a, k in zip(env.possible_agents, table["kind"]) if k == "llm"]

                def make_coach():
                    from socialgym.agents import Coach
                    return Coach(client)
                coached = set(set_coach(policy, agents, spec["enabled"], llm_agents, make_coach))
                table["coached"][:] = [a in coached for a in env.possible_agents]
                recorder.coached = [int(c) for c in table["coached"]]
                entry = {"kind": "INTERVENTION", "intervention": "coach", "target": spec.get("target", "all"),
                         "enabled": spec["enabled"], "n_agents": len(agents)}
            else:
                entry = apply_intervention(env, spec, groups, policy)
            recorder.event({"round": env.round, **entry})
        return env.refresh_feeds(feeds=any(s["kind"] in FEED_KINDS for s in specs))

    # ------------------------------------------------------------------ construction
    def _client(self, stack: contextlib.ExitStack):
        if not self.cfg.uses_llm():
            return None
        if self.given_client is not None:
            self.client = self.given_client
        else:
            cache = self.out / layout.LLM_CACHE if (self.cfg.llm or LLMConfig()).cache else None
            self.client = stack.enter_context(open_llm_client(self.cfg.llm, self.seed, self.out / "llm_server.log", cache))
        bind_groups(self.client, self.cfg)
        return self.client

    def _build(self, client):
        """The environment and the scenario: policy groups over contiguous agent ranges."""
        import socialgym
        from socialgym.agents import PolicyMix

        cfg = self.cfg
        groups = cfg.policy_groups()
        n = sum(g.agents for g in groups)
        agents = [f"agent_{i}" for i in range(n)]
        env_kwargs = cfg.feed_kwargs()
        labels, kinds, coached, start = [], [], [], 0
        owners: dict[Any, list[str]] = {}
        lambdas = None
        personas = self._personas(n)
        if personas is not None and cfg.personas.survey:
            personas = self._survey(client, groups, personas, agents)
        if personas is not None:
            write_personas(self.out, {a: p.to_dict() for a, p in zip(agents, personas)})
        if any(g.lambdas is not None for g in groups):
            from socialgym.config import FeedConfig
            lambdas = np.vstack([FeedConfig.from_kwargs(n_agents=max(2, g.agents), lambdas=g.lambdas)
                                 .lambda_matrix()[: g.agents] for g in groups])
        elif "lambdas" not in env_kwargs and personas is not None:
            from socialgym.agents.persona import lambdas_matrix
            lambdas = lambdas_matrix(personas)
        if lambdas is not None:
            env_kwargs["lambdas"] = lambdas
        llm_agents, coached_agents, group_of = [], [], {}
        for g in groups:
            mine = agents[start:start + g.agents]
            start += g.agents
            labels += [g.name if len(groups) > 1 or cfg.policy.groups else ""] * len(mine)
            kinds += [g.kind] * len(mine)
            coached += [g.coach] * len(mine)
            if g.kind == "llm":
                llm_agents += mine
                coached_agents += mine if g.coach else []
            elif g.kind == "archetype":
                owners[self._archetypes(client, g, personas, mine, len(owners))] = mine
            else:
                owner = self._scripted(g, len(owners))
                owners[owner] = mine
                group_of[id(owner)] = g
        if llm_agents:
            owners[self._llm_policy(client, groups, personas, agents, coached_agents)] = llm_agents
        drawn = [(o, m) for o, m in owners.items() if getattr(group_of.get(id(o)), "kind", None) == "topic_users"]
        if env_kwargs.get("agent_interests") is None and drawn:   # drawn tastes, each group's own rows: the platform's
            rows = env_kwargs["agent_interests"] = np.array(drawn[0][0].preferences)
            for owner, mine in drawn[1:]:
                span = slice(agents.index(mine[0]), agents.index(mine[0]) + len(mine))
                rows[span] = owner.preferences[span]
        if cfg.policy.groups and "agent_groups" not in env_kwargs:
            env_kwargs["agent_groups"] = labels
        if cfg.llm is not None and cfg.llm.tie_scorer:
            from socialgym.ties.llm_scorer import LLMTieScorer
            env_kwargs["tie_scorer"] = LLMTieScorer(client, personas=dict(zip(agents, personas))
                                                    if personas is not None else None,
                                                    transcript_tokens=cfg.llm.tie_transcript_tokens)
        if any(KIND[g.kind].numeric for g in groups) or cfg.logging.decisions != "none":
            env_kwargs["obs_format"] = "both"        # they read ties (numeric); decision logs keep numeric obs
        env = socialgym.parallel_env(**env_kwargs, seed=self.seed)
        for owner in owners:
            if hasattr(owner, "check_env"):
                try:
                    owner.check_env(env)
                except ValueError as exc:
                    g = group_of.get(id(owner))
                    raise RunError(f"policy group {g.name!r} ({g.kind}): {exc}" if g else str(exc)) from None
        policy = next(iter(owners)) if len(owners) == 1 else PolicyMix(owners)
        return env, policy, {"group": labels, "kind": kinds, "coached": coached}

    def _personas(self, n: int):
        source = self.cfg.personas.source
        if source is None and not self.cfg.uses_llm():
            return None
        from socialgym.agents.persona import generate_personas, load_personas

        if source is None:          # interests from the run's topics; a topic label per agent is its main one
            env = self.cfg.env
            personas = generate_personas(n, seed=self.seed, **({"topics": list(env["topics"])} if env.get("topics")
                                                                 else {}))
            labels = env.get("agent_interests")
            topics = set(env.get("topics") or ())
            if labels is not None and len(labels) == n and all(isinstance(x, str) and x in topics for x in labels):
                from socialgym.agents.persona import with_main_interest
                personas = [with_main_interest(p, t) for p, t in zip(personas, labels)]
            return personas
        try:
            personas = load_personas(source)
        except (OSError, ValueError) as exc:
            raise RunError(f"personas: {exc}") from None
        if len(personas) < n:
            raise RunError(f"personas {source} has {len(personas)} personas for {n} agents")
        return personas[:n]

    def _survey(self, client, groups, personas, agents):
        """The Mini-IPIP pre-survey for the LLM agents, through the run's model (specification §8)."""
        from socialgym.agents.persona import administer_mini_ipip

        llm, start = [], 0
        for g in groups:
            if g.kind == "llm":
                llm += range(start, start + g.agents)
            start += g.agents
        measured = administer_mini_ipip(client, [personas[i] for i in llm], agents=[agents[i] for i in llm])
        personas = list(personas)
        for i, p in zip(llm, measured):
            personas[i] = p
        return personas

    def _scripted(self, group, index: int):
        from socialgym.baselines import GreedyPolicy, RandomPolicy

        params = {"seed": self.seed * 1000 + index, **dict(group.params)}
        if KIND[group.kind].model_file:         # a trained or distilled network (training.torch_policy)
            path = params.pop("path", None)
            if not path:
                raise RunError(f"policy group {group.name!r} ({group.kind}): params.path must name a model.pt")
            from socialgym.training.torch_policy import TorchPolicy
            try:
                return TorchPolicy.load(path, **params)
            except (OSError, ValueError, TypeError) as exc:
                raise RunError(f"policy group {group.name!r} ({group.kind}): {exc}") from None
        if group.kind == "topic_users":        # recagent-style users with topic preferences
            from socialgym.baselines.topic_users import TopicUsers
            env = self.cfg.env
            topics = env.get("topics", FeedConfig.topics)
            if env.get("agent_interests") is not None:
                return TopicUsers.from_interests(env["agent_interests"], topics, **params)
            n_topics = min(len(topics), int(env.get("max_topics", FeedConfig.max_topics)))
            n = sum(g.agents for g in self.cfg.policy_groups())
            return TopicUsers(n_topics=n_topics, n_agents=n, **params)       # preferences drawn from its seed
        if group.kind == "social_users":       # scripted users with every action, calibratable
            return self._social_users(group, params)
        cls = {"random": RandomPolicy, "greedy": GreedyPolicy}[group.kind]
        try:
            return cls(**params)
        except TypeError as exc:
            raise RunError(f"policy group {group.name!r} ({group.kind}): bad params {dict(group.params)}: {exc}") \
                from None

    def _social_users(self, group, params: dict):
        """SocialUsers with rows for every env agent: a named population's parameters (``population``)
        overridden by the group's own; preferences from env.agent_interests when given, else drawn
        over the env's topics."""
        from socialgym.baselines.social_users import SocialUsers, load_population
        env = self.cfg.env
        try:
            source = params.pop("population", None)
            if source is not None:
                params = {**load_population(source), **params}
            topics = env.get("topics", FeedConfig.topics)
            if env.get("agent_interests") is not None:
                return SocialUsers.from_interests(env["agent_interests"], topics, **params)
            n_topics = min(len(topics), int(env.get("max_topics", FeedConfig.max_topics)))
            return SocialUsers(n_topics=n_topics, n_agents=int(env.get("n_agents", FeedConfig.n_agents)), **params)
        except (TypeError, ValueError) as exc:
            raise RunError(f"policy group {group.name!r} (social_users): {exc}") from None

    def _archetypes(self, client, group, personas, mine, index: int):
        """An archetype policy over one group's agents: k LLM plans per round, whatever its size."""
        from socialgym.agents.archetype import ArchetypePolicy

        who = {a: personas[int(a.rpartition("_")[2])] for a in mine}
        try:
            return ArchetypePolicy(client, who, **{"seed": self.seed * 1000 + index, **dict(group.params)})
        except (TypeError, ValueError) as exc:
            raise RunError(f"policy group {group.name!r} (archetype): bad params {dict(group.params)}: {exc}") \
                from None

    def _llm_policy(self, client, groups, personas, agents, coached_agents):
        from socialgym.agents import Coach, LLMPolicy

        params = {}
        for g in groups:
            if g.kind == "llm":
                params.update(dict(g.params))
        coach = Coach(client) if coached_agents else None
        try:
            return LLMPolicy(client, dict(zip(agents, personas)), coach=coach, coached=coached_agents,
                             seed=self.seed, **params)
        except (TypeError, ValueError) as exc:
            raise RunError(f"llm policy: bad params {params}: {exc}") from None

    # ------------------------------------------------------------------ persistence
    def _checkpoint(self, env, policy, obs, table, client, sizes, digests, r, seconds, surveys=None) -> None:
        if self._files is None:                # outputs written once, before round 1
            self._files = {name: hashlib.sha256((self.out / name).read_bytes()).hexdigest()
                           for name in (layout.PERSONAS,) if (self.out / name).exists()}
        state = {"version": CHECKPOINT_VERSION, "run_id": self.meta.get("run_id"),
                 "config_sha256": config_digest(self.out / layout.CONFIG), "config": to_dict(self.cfg),
                 "round": r, "env": env, "policy": policy, "obs": obs,
                 "table": table, "llm": client.state_dict() if client is not None else None,
                 "sizes": sizes, "digests": digests, "files": self._files, "seconds": seconds,
                 "surveys": surveys, "endpoints": self._endpoints()}
        write_checkpoint(self.out / CHECKPOINT, state, before_rename=lambda: self._fault(r, "checkpoint"))
        if self.cfg.run.snapshots:
            keep_snapshot(self.out, r)

    def _complete(self, checkpoint: dict) -> dict:
        """A finished run resumed: the checkpoint was verified against the files; the summary is
        rewritten from it if it differs, and a missing report is built."""
        env, table = checkpoint["env"], checkpoint["table"]
        usage = checkpoint["llm"]["usage"] if checkpoint["llm"] is not None else None
        self.endpoint_stats = checkpoint.get("endpoints")
        summary = self._summary(env, table, "complete", env.config.max_rounds, checkpoint["seconds"], usage)
        on_disk = read_summary(self.out)
        if json.loads(json.dumps(summary, default=_json_default)) != on_disk:
            if on_disk is not None and on_disk.get("status") == "complete":
                print(f"socialgym: warning: {self.out / layout.SUMMARY} did not match the checkpoint; rewritten",
                      file=sys.stderr)
            self._store_summary(summary)
        if self.cfg.logging.report and not (self.out / layout.REPORT).exists():
            build_pages(self.out)
        return summary

    def _mark_failed(self, exc: Exception | None) -> None:
        """summary.json says why the run stopped: ``failed`` with the error, or (``exc`` None, a
        Ctrl-C) ``interrupted``; either way ``socialgym resume`` continues from the last round."""
        summary = read_summary(self.out)
        if isinstance(summary, dict):
            if exc is None:
                summary.update(status="interrupted", error=f"interrupted (Ctrl-C); `socialgym resume {self.out}` "
                                                           "continues from the last completed round")
            else:
                summary.update(status="failed", error=f"{type(exc).__name__}: {str(exc)[:500]}")
            self._store_summary(summary)

    def _write_summary(self, env, table, status, rounds_done, seconds, usage) -> dict:
        summary = self._summary(env, table, status, rounds_done, seconds, usage)
        self._store_summary(summary)
        return summary

    def _store_summary(self, summary: dict) -> None:
        write_summary(self.out, summary, default=_json_default)

    def _summary(self, env, table, status, rounds_done, seconds, usage) -> dict:
        final: dict = {}
        rec = env.last_round
        if rec is not None:
            rewards = dict(zip(REWARD_NAMES, rec.components.mean(axis=0).tolist()))
            rewards["total"] = float(rec.totals.mean())
            final = {"rewards": rewards, "network": self._last_network()}
        llm, problems = None, []
        if usage is not None:
            t = usage.total()
            share = fallback_share(usage)
            llm = {"requests": t["requests"], "cached": t["cached"], "prompt_tokens": t["prompt_tokens"],
                   "completion_tokens": t["completion_tokens"], "fallbacks": len(usage.fallbacks),
                   "repairs": usage.repairs, "fallback_share": round(share, 4),
                   "max_fallback_share": self.cfg.run.max_fallback_share, **self.spending.summary(usage)}
            if self._endpoints() is not None:
                llm["endpoints"] = self._endpoints()
            if status == "complete" and t["requests"] and share > self.cfg.run.max_fallback_share:
                problems.append(f"{share:.0%} of the LLM tasks (an agent's plan, texts, votes... in a round) "
                                f"fell back ({len(usage.fallbacks)} fallbacks), more than run.max_fallback_share="
                                f"{self.cfg.run.max_fallback_share:g}: the LLM agents' behaviour is largely "
                                "stand-ins; the reasons are in the transcripts and the usage log")
        summary = {"status": status, "rounds_completed": int(rounds_done), "max_rounds": env.config.max_rounds,
                   "n_agents": len(env.possible_agents), "agents": list(env.possible_agents),
                   "groups": {a: g for a, g in zip(env.possible_agents, table["group"]) if g},
                   "seed": self.seed, "condition": self.meta.get("condition", {}),
                   "replicate": self.meta.get("replicate", 0), "final": final, "llm": llm,
                   "seconds": round(float(seconds), 3),
                   **({"interventions": stats} if (stats := env.intervention_stats()) else {})}
        if problems:       # the run finished but its results should not be used as they are
            summary["problems"] = problems
        return summary

    def _endpoints(self):
        """Per-endpoint statistics of this execution's client (runs with ``llm.endpoints``)."""
        if self.client is not None and self.cfg.llm is not None and self.cfg.llm.endpoints:
            return self.client.endpoint_stats()
        return self.endpoint_stats

    def _last_network(self) -> dict:
        """The last row of network.csv (read back, so a resumed run reports the same)."""
        path = self.out / layout.NETWORK
        if not path.exists():
            return {}
        with open(path, "rb") as f:               # only the file's tail: the header and last line
            header = f.readline().decode().rstrip("\n").split(",")
            f.seek(max(0, path.stat().st_size - 65536))
            lines = f.read().decode(errors="replace").splitlines()
        if not lines or lines[-1].split(",")[0] in ("round", ""):
            return {}
        return {k: _number(v) for k, v in zip(header, lines[-1].split(","))}


def build_pages(out: Path) -> Path:
    """The pages a person reads: viewer.html (the run replayed: what the agents wrote, saw and
    built), then report.html, which links it. Returns the report's path."""
    from socialgym.experiments.analysis.report import build_report
    from socialgym.viewer import ViewerError, build_viewer

    out = Path(out)
    with writer_lock(out, "report"):
        if (out / layout.ROUNDS).is_file() and (out / layout.SUMMARY).is_file():   # else the report says why
            try:
                build_viewer(out)
            except ViewerError as exc:       # the report says what it can; the viewer says why not
                print(f"socialgym: warning: no viewer: {exc}", file=sys.stderr)
        return build_report(out)


def fallback_share(usage) -> float:
    """The share of LLM tasks that fell back: a task is one (agent, round, purpose) — an agent's
    plan, its texts, its votes, its coach tip in one round — and it fell back when any of its
    slots did. (Counting fallbacks per request would exceed 1: one failed plan falls back in
    each of its N slots.)"""
    failed = {(f.agent, f.round, f.purpose) for f in usage.fallbacks}
    tasks = {(c.agent, c.round, c.purpose) for c in usage.calls} | failed
    return len(failed) / len(tasks) if tasks else 0.0


def open_llm_client(llm: LLMConfig | None, seed: int, server_log: Path, cache: Path | None):
    """The client of an llm section (a run's, a study's own; no ``base_url``: the embedded model,
    served until the context ends) as a context manager, its key rules checked first."""
    from socialgym.llm import open_client

    llm = check_llm_keys(llm or LLMConfig())
    if llm.endpoints:
        return open_client(endpoints=run_endpoints(llm), **client_settings(llm, seed, cache))
    return open_client(
        llm.base_url, llm.model, api_key=llm.api_key, api_key_env=llm.api_key_env, n_ctx=llm.n_ctx,
        server_log=server_log, max_concurrency=llm.max_concurrency, timeout=llm.timeout,
        max_retries=llm.max_retries, temperature=llm.temperature, max_tokens=llm.max_tokens,
        structured=llm.structured, max_repairs=llm.max_repairs, seed=seed, cache=cache,
        max_reply_bytes=llm.max_reply_bytes, max_retry_wait=llm.max_retry_wait, allow_plain_http=llm.allow_plain_http)


def _attach(client, policy, env) -> None:
    """Give the objects loaded from a checkpoint the run's fresh LLM client."""
    policies = getattr(policy, "policies", [policy])
    for p in policies:
        if hasattr(p, "client"):
            p.client = client
        coach = getattr(p, "coach", None)
        if coach is not None and hasattr(coach, "client"):
            coach.client = client
    scorer = getattr(env, "tie_scorer", None)
    if scorer is not None and hasattr(scorer, "client"):
        scorer.client = client


def _group_members(env, table) -> dict:
    """Policy group name -> its agent ids (the targets of interventions)."""
    groups: dict = {}
    for agent, name in zip(env.possible_agents, table["group"]):
        if name:
            groups.setdefault(name, []).append(agent)
    return groups


def _wandb_logger(cfg: ExperimentConfig, out: Path, meta: dict):
    from socialgym.experiments.run.wandb_log import WandbLogger

    w = cfg.logging.wandb
    return WandbLogger(w, out, to_dict(cfg, redact=True), name=w.name or cfg.run.name or out.name,
                       group=w.group or (json.dumps(meta["condition"]) if meta["condition"] else None))


# ---------------------------------------------------------------------------------- helpers
# A seam for the crash tests, None (nothing happens) outside them. When set, the runner calls
# ``_fault_hook(round, point)`` at the three points where a crash is hardest to recover from:
# "act" (after the round's act step), "outputs" (the round's files written, its checkpoint not
# yet) and "checkpoint" (the new checkpoint written, not yet renamed over the old one). The
# tests install a hook that SIGKILLs the process there (tests/faults/sitecustomize.py).
_fault_hook: Callable[[int, str], None] | None = None


def _step(env, policy, obs, decisions):
    """One step of the policy's actions; with decision logs, they are logged, and what the env
    refused is taken out again."""
    actions = policy.act(obs)
    if decisions is not None:
        decisions.observe(obs, actions, len(env.vocab))
    obs, _, _, _, infos = env.step(actions)
    if decisions is not None:
        decisions.drop_invalid(infos)
    return obs


def _fault(r: int, point: str) -> None:
    if _fault_hook is not None:
        _fault_hook(r, point)


def _number(text: str):
    """A CSV cell: a float, None (empty or NaN), or the text when it is no number."""
    value = to_float(text, None)
    if value is None:
        return text or None
    return None if value != value else value


def _json_default(value):
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return float(value)
    return str(value)


__all__ = ["run_experiment", "resume_experiment", "simulate", "RunError"]
