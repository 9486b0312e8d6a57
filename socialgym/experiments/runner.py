"""Run one experiment (one condition, one replicate) into a run directory, round by round.

    from socialgym.experiments import load_config, run_experiment, resume_experiment
    summary = run_experiment(load_config("study.yaml"), "runs/study")
    summary = resume_experiment("runs/study")          # after a crash or a kill

The platform (``socialgym.parallel_env``) is the substrate; the config's policy groups are the
scenario that populates it. After every round the runner hands the environment to the
:class:`~socialgym.experiments.recorder.RunRecorder` (data collection) and then saves a
checkpoint atomically (write, fsync, rename): the environment with its recommender model and
all RNG states, the policies with their memories and RNGs, the last observations, the LLM
client's cache position and usage log, and the sizes of the output files. Killing the process
at any moment loses at most the round in progress; ``resume`` cuts the files back to the last
checkpoint and continues, producing the same files as an uninterrupted run (for LLM policies
with the response cache on: requests the lost round had already sent replay from the cache).
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import signal
import sys
import time
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from socialgym.config import REWARD_NAMES
from socialgym.experiments.config import ExperimentConfig, LLMConfig, dump_yaml, load_config, to_dict
from socialgym.experiments.recorder import RunRecorder, truncate_outputs

CHECKPOINT = "checkpoint.pkl"
CHECKPOINT_VERSION = 2      # 2: LLM agents with generation modes and the full memory (issue 14)


class RunError(RuntimeError):
    """A run cannot start or continue (e.g. resume of a directory that is not a run)."""


# ---------------------------------------------------------------------------------- public API
def run_experiment(cfg: ExperimentConfig, out: str | Path, *, condition: Mapping | None = None,
                   replicate: int = 0, progress: bool | None = None) -> dict:
    """Run ``cfg`` (a single cell: its ``sweep`` section is ignored here, see ``sweep.py``) into
    ``out``, which must not hold a run already. Returns the summary (also summary.json)."""
    out = Path(out)
    if (out / "summary.json").exists() or (out / CHECKPOINT).exists():
        raise RunError(f"{out} already holds a run: use `socialgym resume {out}` or another --out")
    out.mkdir(parents=True, exist_ok=True)
    meta = {"condition": dict(condition or {}), "replicate": replicate, "seed": cfg.seed}
    (out / "run.json").write_text(json.dumps(meta, indent=1, default=str) + "\n")
    dump_yaml(cfg, out / "config.yaml")        # last: its presence marks a resumable run directory
    return _Run(cfg, out, meta, progress).execute(checkpoint=None)


def resume_experiment(out: str | Path, *, progress: bool | None = None) -> dict:
    """Continue the run in ``out`` from its last completed round (a completed run is left as is)."""
    out = Path(out)
    if not (out / "config.yaml").exists():
        raise RunError(f"{out} is not a run directory (no config.yaml)")
    summary = _read_json(out / "summary.json")
    if summary and summary.get("status") == "complete":
        return summary
    cfg = load_config(out / "config.yaml")
    meta = _read_json(out / "run.json") or {"condition": {}, "replicate": 0, "seed": cfg.seed}
    checkpoint = None
    if (out / CHECKPOINT).exists():
        with open(out / CHECKPOINT, "rb") as f:
            checkpoint = pickle.load(f)
        if checkpoint.get("version") != CHECKPOINT_VERSION:
            raise RunError(f"{out / CHECKPOINT} has format {checkpoint.get('version')}, this socialgym "
                           f"writes {CHECKPOINT_VERSION}")
    return _Run(cfg, out, meta, progress).execute(checkpoint=checkpoint)


# ---------------------------------------------------------------------------------- one run
class _Run:
    def __init__(self, cfg: ExperimentConfig, out: Path, meta: dict, progress: bool | None) -> None:
        self.cfg, self.out, self.meta = cfg, out, meta
        self.show_progress = cfg.logging.progress if progress is None else progress
        self.seed = int(meta.get("seed", cfg.seed))

    def execute(self, checkpoint: dict | None) -> dict:
        cfg, out = self.cfg, self.out
        wandb = None
        if cfg.logging.wandb is not None:   # fail before any work when the extra is missing
            wandb = _wandb_logger(cfg, out, self.meta)
        with contextlib.ExitStack() as stack:
            if wandb is not None:    # a failing run still closes its wandb run, marked failed
                stack.callback(wandb.finish, exit_code=1)     # (a no-op after the normal finish)
            client = self._client(stack)
            if checkpoint is None:
                truncate_outputs(out, {}, 0)
                env, policy, table = self._build(client)
                obs, _ = env.reset(seed=self.seed)
                done_rounds, seconds = 0, 0.0
            else:
                truncate_outputs(out, checkpoint["sizes"], checkpoint["round"])
                env, policy, obs = checkpoint["env"], checkpoint["policy"], checkpoint["obs"]
                table = checkpoint["table"]
                _attach(client, policy, env)
                if client is not None and checkpoint["llm"] is not None:
                    client.load_state_dict(checkpoint["llm"])
                done_rounds, seconds = checkpoint["round"], checkpoint["seconds"]
            recorder = RunRecorder(out, agents=env.possible_agents, groups=table["group"], kinds=table["kind"],
                                   coached=table["coached"], events=cfg.logging.events, ties=cfg.logging.ties,
                                   transcripts=cfg.logging.transcripts and client is not None,
                                   network_every=cfg.logging.network_every, max_rounds=env.config.max_rounds)
            stack.callback(recorder.close)
            if client is not None and cfg.logging.transcripts:
                client.transcript = recorder.transcript_line
            bar = _Progress(self.show_progress, env.config.max_rounds, len(env.possible_agents))
            usage = client.usage if client is not None else None
            self._write_summary(env, table, "running", done_rounds, seconds, usage)
            fault = _fault_plan()
            started = time.perf_counter() - seconds
            while env.agents:
                r = env.round
                obs, _, _, _, _ = env.step(policy.act(obs))               # act phase
                _fault(fault, r, "act")
                obs, _, _, _, _ = env.step(policy.act(obs))               # vote phase
                rows, network, posts = recorder.record_round(env, usage)
                sizes = recorder.sync()
                _fault(fault, r, "outputs")
                if wandb is not None:
                    wandb.log_round(r, rows, network, env.tie_matrix(), posts)
                seconds = time.perf_counter() - started
                if cfg.run.checkpoint:
                    self._checkpoint(env, policy, obs, table, client, sizes, r, seconds, fault)
                self._write_summary(env, table, "running", r, seconds, usage)
                bar.update(r, network, usage)
            bar.close()
            summary = self._write_summary(env, table, "complete", env.config.max_rounds,
                                          time.perf_counter() - started, usage)
            if wandb is not None:
                wandb.finish(env.tie_matrix(), dict(zip(env.possible_agents, table["group"])))
        if cfg.logging.report:
            from socialgym.experiments.report import build_report
            build_report(out)
        return summary

    # ------------------------------------------------------------------ construction
    def _client(self, stack: contextlib.ExitStack):
        cfg = self.cfg
        if not cfg.uses_llm():
            return None
        from socialgym.llm import LLMClient

        llm = cfg.llm or LLMConfig()
        if llm.base_url is None:            # the embedded model, served for the length of the run
            from socialgym.llm import local_server

            server = stack.enter_context(local_server(n_ctx=llm.n_ctx, log_path=self.out / "llm_server.log"))
            base_url, model, key = server.base_url, llm.model or server.model, server.api_key
        else:
            base_url, model = llm.base_url, llm.model
            key = llm.api_key or os.environ.get(llm.api_key_env)
        client = LLMClient(base_url, model, api_key=key, max_concurrency=llm.max_concurrency,
                           timeout=llm.timeout, max_retries=llm.max_retries, temperature=llm.temperature,
                           max_tokens=llm.max_tokens, structured=llm.structured, max_repairs=llm.max_repairs,
                           seed=self.seed, cache=self.out / "llm_cache.sqlite" if llm.cache else None,
                           local=llm.base_url is None)
        stack.callback(client.close)
        return client

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
            _write_json(self.out / "personas.json", {a: p.to_dict() for a, p in zip(agents, personas)})
        if any(g.lambdas is not None for g in groups):
            from socialgym.config import FeedConfig
            lambdas = np.vstack([FeedConfig.from_kwargs(n_agents=max(2, g.agents), lambdas=g.lambdas)
                                 .lambda_matrix()[: g.agents] for g in groups])
        elif "lambdas" not in env_kwargs and personas is not None:
            from socialgym.agents.persona import lambdas_matrix
            lambdas = lambdas_matrix(personas)
        if lambdas is not None:
            env_kwargs["lambdas"] = lambdas
        llm_agents, coached_agents = [], []
        for g in groups:
            mine = agents[start:start + g.agents]
            start += g.agents
            labels += [g.name if len(groups) > 1 or cfg.policy.groups else ""] * len(mine)
            kinds += [g.kind] * len(mine)
            coached += [g.coach] * len(mine)
            if g.kind == "llm":
                llm_agents += mine
                coached_agents += mine if g.coach else []
            else:
                owners[self._scripted(g, len(owners))] = mine
        if llm_agents:
            owners[self._llm_policy(client, groups, personas, agents, coached_agents)] = llm_agents
        if cfg.policy.groups and "agent_groups" not in env_kwargs:
            env_kwargs["agent_groups"] = labels
        if cfg.llm is not None and cfg.llm.tie_scorer:
            from socialgym.ties.llm_scorer import LLMTieScorer
            env_kwargs["tie_scorer"] = LLMTieScorer(client, personas=dict(zip(agents, personas))
                                                    if personas is not None else None)
        if any(g.kind == "torch" for g in groups):     # trained networks read the numeric part
            env_kwargs["obs_format"] = "both"
        env = socialgym.parallel_env(**env_kwargs, seed=self.seed)
        for owner in owners:
            if hasattr(owner, "check_env"):
                try:
                    owner.check_env(env)
                except ValueError as exc:
                    raise RunError(str(exc)) from None
        policy = next(iter(owners)) if len(owners) == 1 else PolicyMix(owners)
        return env, policy, {"group": labels, "kind": kinds, "coached": coached}

    def _personas(self, n: int):
        source = self.cfg.personas.source
        if source is None and not self.cfg.uses_llm():
            return None
        from socialgym.agents.persona import generate_personas, load_personas

        if source is None:
            return generate_personas(n, seed=self.seed)
        try:
            personas = load_personas(source)
        except (OSError, ValueError) as exc:
            raise RunError(f"personas: {exc}") from None
        if len(personas) < n:
            raise RunError(f"personas {source} has {len(personas)} personas for {n} agents")
        return personas[:n]

    def _survey(self, client, groups, personas, agents):
        """The Mini-IPIP pre-survey for the LLM agents, through the run's model (SPEC §8)."""
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
        if group.kind == "torch":              # a trained network (socialgym.baselines.ppo)
            path = params.pop("path", None)
            if not path:
                raise RunError(f"policy group {group.name!r} (torch): params.path must name a model.pt")
            from socialgym.baselines.ppo import TorchPolicy
            try:
                return TorchPolicy.load(path, **params)
            except (OSError, ValueError, TypeError) as exc:
                raise RunError(f"policy group {group.name!r} (torch): {exc}") from None
        cls = {"random": RandomPolicy, "greedy": GreedyPolicy}[group.kind]
        try:
            return cls(**params)
        except TypeError as exc:
            raise RunError(f"policy group {group.name!r} ({group.kind}): bad params {dict(group.params)}: {exc}") \
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
    def _checkpoint(self, env, policy, obs, table, client, sizes, r, seconds, fault) -> None:
        state = {"version": CHECKPOINT_VERSION, "round": r, "env": env, "policy": policy, "obs": obs,
                 "table": table, "llm": client.state_dict() if client is not None else None,
                 "sizes": sizes, "seconds": seconds}
        path = self.out / CHECKPOINT
        tmp = path.with_suffix(".tmp")
        with open(tmp, "wb") as f:
            pickle.dump(state, f, protocol=pickle.HIGHEST_PROTOCOL)
            f.flush()
            os.fsync(f.fileno())
        _fault(fault, r, "checkpoint")
        os.replace(tmp, path)                 # atomic: the old checkpoint or the new one, never half

    def _write_summary(self, env, table, status, rounds_done, seconds, usage) -> dict:
        final: dict = {}
        rec = env.last_round
        if rec is not None:
            rewards = dict(zip(REWARD_NAMES, rec.components.mean(axis=0).tolist()))
            rewards["total"] = float(rec.totals.mean())
            final = {"rewards": rewards, "network": self._last_network()}
        llm = None
        if usage is not None:
            t = usage.total()
            llm = {"requests": t["requests"], "cached": t["cached"], "prompt_tokens": t["prompt_tokens"],
                   "completion_tokens": t["completion_tokens"], "fallbacks": len(usage.fallbacks),
                   "repairs": usage.repairs}
        summary = {"status": status, "rounds_completed": int(rounds_done), "max_rounds": env.config.max_rounds,
                   "n_agents": len(env.possible_agents), "agents": list(env.possible_agents),
                   "groups": {a: g for a, g in zip(env.possible_agents, table["group"]) if g},
                   "seed": self.seed, "condition": self.meta.get("condition", {}),
                   "replicate": self.meta.get("replicate", 0), "final": final, "llm": llm,
                   "seconds": round(float(seconds), 3)}
        tmp = self.out / "summary.json.tmp"
        tmp.write_text(json.dumps(summary, indent=1, default=_json_default) + "\n")
        os.replace(tmp, self.out / "summary.json")
        return summary


    def _last_network(self) -> dict:
        """The last row of network.csv (read back, so a resumed run reports the same)."""
        path = self.out / "network.csv"
        if not path.exists():
            return {}
        with open(path, "rb") as f:               # only the file's tail: the header and last line
            header = f.readline().decode().rstrip("\n").split(",")
            f.seek(max(0, path.stat().st_size - 65536))
            lines = f.read().decode(errors="replace").splitlines()
        if not lines or lines[-1].split(",")[0] in ("round", ""):
            return {}
        return {k: _number(v) for k, v in zip(header, lines[-1].split(","))}


def _write_json(path: Path, value) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(value, indent=1, ensure_ascii=False) + "\n")
    os.replace(tmp, path)


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


def _wandb_logger(cfg: ExperimentConfig, out: Path, meta: dict):
    import dataclasses

    from socialgym.experiments.wandb_log import WandbLogger

    settings = {k: v for k, v in dataclasses.asdict(cfg.logging.wandb).items() if v is not None}
    settings["tags"] = list(settings.get("tags", ()))
    name = cfg.logging.wandb.name or cfg.run.name or out.name
    return WandbLogger(settings, out, to_dict(cfg, redact=True), name=name,
                       group=cfg.logging.wandb.group or (json.dumps(meta["condition"]) if meta["condition"] else None))


# ---------------------------------------------------------------------------------- helpers
class _Progress:
    """One status line: round, agents, LLM calls and tokens so far, mean reward, ties. Redrawn
    in place on a terminal, one line per round otherwise (logs, CI)."""

    def __init__(self, enabled: bool, rounds: int, agents: int) -> None:
        self.enabled, self.rounds, self.agents = enabled, rounds, agents
        self.tty = enabled and sys.stderr.isatty()
        self.t0 = time.perf_counter()

    def update(self, r: int, network: Mapping, usage) -> None:
        if not self.enabled:
            return
        width = 20
        filled = int(width * r / max(1, self.rounds))
        llm = ""
        if usage is not None:
            t = usage.total()
            llm = f" | LLM {t['requests']} calls {t['prompt_tokens'] + t['completion_tokens']} tok"
        line = (f"[{'#' * filled}{'.' * (width - filled)}] round {r}/{self.rounds} | {self.agents} agents{llm} | "
                f"mean reward {network.get('mean_total', float('nan')):.3f} | ties {network.get('n_ties', 0)} | "
                f"{time.perf_counter() - self.t0:.1f}s")
        if self.tty:
            sys.stderr.write("\r" + line)
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()

    def close(self) -> None:
        if self.tty:
            sys.stderr.write("\n")


def _fault_plan() -> tuple[int, str] | None:
    """Fault injection for the crash tests: SOCIALGYM_KILL_AT="<round>:<act|outputs|checkpoint>"
    makes the process SIGKILL itself at that point (after the act step; after the round's files
    are written but before the checkpoint; after the new checkpoint is written but before it
    replaces the old one)."""
    spec = os.environ.get("SOCIALGYM_KILL_AT")
    if not spec:
        return None
    r, point = spec.split(":")
    return int(r), point


def _fault(plan, r: int, point: str) -> None:
    if plan is not None and plan == (r, point):
        os.kill(os.getpid(), signal.SIGKILL)


def _read_json(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _number(text: str):
    if text == "":
        return None
    try:
        value = float(text)
    except ValueError:
        return text
    return None if value != value else value


def _json_default(value):
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return float(value)
    return str(value)


__all__ = ["run_experiment", "resume_experiment", "RunError"]
