"""PPO with parameter sharing on the registered feed tasks — a single-file baseline (CleanRL style).

One network acts for every agent of every environment. Its input is the numeric observation
(``obs_format="numeric"``) including the agent's reward weights ``lambda`` (on the ``mixed``
task they are redrawn per agent every episode, so one policy learns to serve different tasks).
The action is the environment's MultiDiscrete vector, one categorical head per component,
masked with the environment's action masks (so every sampled action is valid), act components
scored at act steps and vote components at vote steps. A round is two decisions (act, then
vote); the round's reward arrives with the vote step. Advantages are GAE over each agent's 2·T
decisions.

What makes it learn (the ablation table in docs/training.md measures each):

- **batched rollouts**: ``num_envs`` platforms stepped as one array computation
  (``socialgym.vector.make_vec``), one network call for all their agents, only the phase's heads
  sampled (``sample_phase``);
- **team spirit** (as in OpenAI Five): the reward an agent learns from is
  ``(1 - team_spirit) * own + team_spirit * mean over its population``. Likes, mentions and
  supportive messages pay the *receiver*, so with purely selfish rewards a shared policy has no
  reason to give them; the reported returns are always the agents' own;
- **observation normalisation** (running mean and variance, clipped), **learning-rate
  annealing**, large batches, separate actor and critic bodies;
- **peers addressed by what is observed**: the DM-recipient head chooses *the author of feed
  slot j* (j < F) or *a random other agent* (F), not an agent index, so the network's size
  does not depend on the population and a policy trained at 20 agents acts at 50.

    python -m socialgym.training.ppo --task mixed                  # the mixed task (350 iterations)
    python -m socialgym.training.ppo --task SOC --iterations 100
    python -m socialgym.training.ppo --help

Writes ``OUT/model.pt`` (weights, normaliser and the per-agent interface they fit),
``OUT/train_log.csv`` (one row per iteration; ``eval_return`` every ``eval_every``) and
``OUT/args.json``; ``--wandb`` logs the same rows to wandb. ``TorchPolicy.load(OUT/model.pt)``
plugs the result into any run (batched policy protocol). The network, its features, action heads,
model file and ``TorchPolicy`` are in ``socialgym.training.torch_policy``; this file is the
training: arguments, rollouts, GAE, the PPO update, logging and the command line.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import sys
import time
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from socialgym.config import REWARD_NAMES

# first, since without torch it raises an ImportError that says how to install it
from socialgym.training.torch_policy import (Actor, ActorCritic, Heads, RunningNorm, evaluate_phase, feature_size,
                                              save_policy)

import torch
from torch import nn

VALIDATION_SEED = 20_000
"""Seeds of the in-training evaluation (``eval_return``); the tables' held-out seeds start at
10,000 (``socialgym.experiments.analysis.evaluate``) and training seeds are drawn at or above 2**20."""


@dataclass(frozen=True)
class Args:
    """Training arguments (each is a ``--flag`` on the command line)."""

    task: str = "mixed"
    """A registered task: its objective (SOC, INF, PRE, COORD, EMO, mixed) or its full id
    (socialgym/feed-mixed-v0, socialgym/feed-SOC-large-v0, ...)."""
    n_agents: int | None = None
    """Override the task's number of agents (None: the task's; results then no longer carry
    the task id). Likewise the next five."""
    n_actions: int | None = None
    """Override the task's actions per agent per round (N)."""
    max_rounds: int | None = None
    """Override the task's rounds per episode (T)."""
    feed_size: int | None = None
    """Override the task's feed size (also the number of mention flags per action)."""
    vote_feed_size: int | None = None
    """Override the task's vote-feed size."""
    dm_inbox_size: int | None = None
    """Override the task's DM inbox size."""
    iterations: int = 350
    """PPO iterations (collect num_envs episodes, then update)."""
    num_envs: int = 16
    """Environments stepped together; each iteration collects one episode from each."""
    learning_rate: float = 2e-3
    """Adam step size (at the start, with anneal_lr)."""
    anneal_lr: bool = True
    """Decay the step size linearly to 0 over the iterations."""
    team_spirit: float = 0.8
    """Weight of the population's mean reward in the reward an agent learns from (0: selfish)."""
    normalize_obs: bool = True
    """Normalise features by their running mean and variance (clipped to +-5)."""
    gamma: float = 0.9
    """Discount per decision (two decisions per round)."""
    gae_lambda: float = 0.8
    """GAE smoothing."""
    clip: float = 0.2
    """PPO ratio clip."""
    epochs: int = 2
    """Passes over each batch (the update's cost is proportional: two passes at twice the step
    size of the four before issue 31 reach the same scores in half the update time)."""
    minibatch: int = 2048
    """Decisions per gradient step."""
    entropy_coef: float = 0.003
    """Entropy bonus weight."""
    value_coef: float = 0.5
    """Value loss weight."""
    max_grad_norm: float = 0.5
    """Gradient clipping."""
    hidden: int = 128
    """Width of the two hidden layers of the actor and of the critic."""
    eval_every: int = 10
    """Every this many iterations, play eval_episodes episodes on the validation seeds
    (20000...) and log eval_return (0: never)."""
    eval_episodes: int = 8
    """Episodes of each in-training evaluation."""
    seed: int = 0
    """Seeds the environments' seeds, the random peers and torch."""
    out: str = "runs/ppo"
    """Where model.pt, train_log.csv and args.json go."""
    device: str = "cpu"
    """torch device: cpu, cuda (an error if CUDA is not available) or auto."""
    wandb: bool = False
    """Log iterations to wandb (offline mode, in OUT/wandb; needs socialgym[wandb])."""
    wandb_project: str = "socialgym-ppo"
    """wandb project name."""
    threads: int = 0
    """torch CPU threads (0: torch's default, one per core; 1 when several trainings share the cores)."""


# ---------------------------------------------------------------------------- the task
def task_of(args: Args):
    """The registered :class:`socialgym.tasks.Task` that ``args.task`` names."""
    from socialgym.tasks import OBJECTIVES, TASKS, task_id

    if args.task in TASKS:
        return TASKS[args.task]
    if args.task in OBJECTIVES:
        return TASKS[task_id(args.task)]
    raise ValueError(f"unknown task {args.task!r}: give an objective ({', '.join(OBJECTIVES)}) or a task id "
                     f"({', '.join(TASKS)})")


def size_overrides(args: Args) -> dict:
    return {k: getattr(args, k) for k in ("n_agents", "n_actions", "max_rounds", "feed_size", "vote_feed_size",
                                          "dm_inbox_size") if getattr(args, k) is not None}


def env_kwargs(args: Args) -> dict:
    """The FeedConfig keywords of the training set-up, λ left out (the task's own rule sets it)."""
    config = {k: v for k, v in task_of(args).config.items() if k != "lambdas"}
    return {**config, **size_overrides(args), "obs_format": "numeric"}


def make_env(args: Args, **overrides: Any):
    """The task's environment with the size overrides (λ by the task: one-hot, or redrawn)."""
    return task_of(args).make(**{**size_overrides(args), "obs_format": "numeric", **overrides})


# ---------------------------------------------------------------------------- training
def make_vec_env(args: Args, num_envs: int):
    """``num_envs`` platforms of the task stepped as one (``socialgym.vector``), no auto-reset:
    each rollout resets them with its own seeds."""
    from socialgym.vector import make_vec

    return make_vec(task_of(args).id, num_envs, autoreset=False, **size_overrides(args))


def rollout(venv, seeds: list[int], actor: Actor, *, team_spirit: float = 0.0, record: bool = True,
            deterministic: bool = False) -> dict:
    """One episode of every platform of ``venv`` (a ``socialgym.vector.FeedVecEnv``, reset with
    ``seeds``), all agents acting through ``actor`` in one forward pass per decision. Arrays are
    [step, env * agent]. ``returns``: each episode's mean λ-weighted return per agent;
    ``components``: per episode, the mean of each component summed over rounds."""
    obs, _ = venv.reset(seed=list(seeds))
    E, n = venv.num_envs, venv.n_agents
    me = np.tile(np.arange(n), E)
    steps: dict[str, list] = {k: [] for k in ("raw", "x", "mask", "phase", "actions", "logp", "value", "reward")}
    returns = np.zeros((E, n))
    components = np.zeros((E, n, len(REWARD_NAMES)))
    done = False
    while not done:
        out = actor.step([obs], me=[me], n_agents=[n], deterministic=deterministic)
        obs, r, _, truncated, info = venv.step_arrays(out["env_actions"][0])
        done = bool(truncated.all())
        own = np.asarray(r, np.float32).reshape(E, n)
        returns += own
        if info.get("reward_components") is not None:
            components += np.asarray(info["reward_components"]).reshape(E, n, -1)
        if record:
            learned = (1.0 - team_spirit) * own + team_spirit * own.mean(axis=1, keepdims=True)
            for k in ("raw", "x", "mask", "phase", "actions", "logp", "value"):
                steps[k].append(out[k])
            steps["reward"].append(torch.from_numpy(learned.reshape(-1)).to(actor.device))
    result = {"returns": returns.mean(1), "components": components.mean(1)}
    if record:
        result.update({"raw": np.stack(steps["raw"]), "x": torch.stack(steps["x"]), "mask": torch.stack(steps["mask"]),
                       "phase": torch.tensor(steps["phase"], device=actor.device),
                       "actions": torch.stack(steps["actions"]), "logp": torch.stack(steps["logp"]),
                       "value": torch.stack(steps["value"]), "reward": torch.stack(steps["reward"])})
    return result


def gae(reward: torch.Tensor, value: torch.Tensor, gamma: float, lam: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Advantages and returns over [step, agent] arrays of one finished episode."""
    T = len(reward)
    adv = torch.zeros_like(reward)
    last = torch.zeros_like(reward[0])
    for t in reversed(range(T)):
        next_value = value[t + 1] if t + 1 < T else torch.zeros_like(value[t])
        delta = reward[t] + gamma * next_value - value[t]
        last = delta + gamma * lam * last
        adv[t] = last
    return adv, adv + value


def _device(name: str) -> str:
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda: CUDA is not available to this torch build (use --device cpu or auto)")
    if name not in ("cpu", "cuda"):
        raise ValueError(f"--device must be cpu, cuda or auto, got {name!r}")
    return name


def check_args(args: Args) -> None:
    task_of(args)
    positive = ("iterations", "num_envs", "epochs", "minibatch", "hidden", "eval_episodes")
    for name in positive:
        if getattr(args, name) < 1:
            raise ValueError(f"{name} must be at least 1, got {getattr(args, name)}")
    if not 0.0 <= args.team_spirit <= 1.0:
        raise ValueError(f"team_spirit must lie in [0, 1], got {args.team_spirit}")
    if args.eval_every < 0:
        raise ValueError(f"eval_every must be 0 (never) or positive, got {args.eval_every}")


LOG_FIELDS = ["iteration", "episodes", "decisions", "return_mean", *[f"{c}_mean" for c in REWARD_NAMES],
              "eval_return", "learning_rate", "policy_loss", "value_loss", "entropy", "approx_kl", "seconds"]


def train(args: Args, *, progress: bool = True) -> dict:
    """Train; returns ``{"log": rows, "model": path}``. See the module docstring."""
    check_args(args)
    device = _device(args.device)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "args.json").write_text(json.dumps(dataclasses.asdict(args), indent=2))
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    envs = make_vec_env(args, args.num_envs)
    validation = make_vec_env(args, args.eval_episodes) if args.eval_every else None
    layout = envs.layout
    heads = Heads.for_layout(layout, len(envs.config.topics))
    n_features = feature_size(layout.feed_size, layout.dm_inbox_size, layout.vote_feed_size)
    net = ActorCritic(n_features, heads.K, heads.M, args.hidden).to(device)
    actor = Actor(net, heads, RunningNorm(n_features) if args.normalize_obs else None, device, args.seed)
    optimizer = torch.optim.Adam(net.parameters(), lr=args.learning_rate, eps=1e-5)
    logger = _wandb(args, out) if args.wandb else None
    rows = []
    log_path = out / "train_log.csv"
    with open(log_path, "w", newline="") as f:
        csv.writer(f).writerow(LOG_FIELDS)
    start = time.perf_counter()
    for it in range(1, args.iterations + 1):
        lr = args.learning_rate * (1.0 - (it - 1) / args.iterations if args.anneal_lr else 1.0)
        for group in optimizer.param_groups:
            group["lr"] = lr
        seeds = rng.integers(2**20, 2**31, size=args.num_envs).tolist()
        net.eval()
        ep = rollout(envs, seeds, actor, team_spirit=args.team_spirit)
        if actor.norm is not None:           # statistics of what was seen; applied from the next rollout
            actor.norm.update(ep["raw"].reshape(-1, n_features))
        adv, ret = gae(ep["reward"], ep["value"], args.gamma, args.gae_lambda)
        T, B = ep["reward"].shape
        batch = {"x": ep["x"].reshape(T * B, -1), "mask": ep["mask"].reshape(T * B, heads.K, heads.M),
                 "phase": ep["phase"].repeat_interleave(B), "actions": ep["actions"].reshape(T * B, -1),
                 "logp": ep["logp"].reshape(-1), "adv": adv.reshape(-1), "ret": ret.reshape(-1)}
        net.train()
        stats = ppo_update(net, optimizer, batch, heads, args, actor.generator)
        eval_return = float("nan")
        if args.eval_every and (it % args.eval_every == 0 or it == args.iterations):
            net.eval()
            seeds = list(range(VALIDATION_SEED, VALIDATION_SEED + args.eval_episodes))
            eval_return = float(rollout(validation, seeds, actor, record=False)["returns"].mean())
        row = {"iteration": it, "episodes": it * args.num_envs, "decisions": T * B,
               "return_mean": float(ep["returns"].mean()),
               **{f"{c}_mean": float(v) for c, v in zip(REWARD_NAMES, ep["components"].mean(0))},
               "eval_return": eval_return, "learning_rate": lr,
               **stats, "seconds": round(time.perf_counter() - start, 2)}
        rows.append(row)
        with open(log_path, "a", newline="") as f:
            csv.writer(f).writerow([row[k] for k in LOG_FIELDS])
        if logger is not None:
            logger.log({k: v for k, v in row.items() if not (isinstance(v, float) and np.isnan(v))}, step=it)
        if progress:
            shown = f"  eval {eval_return:7.3f}" if not np.isnan(eval_return) else ""
            print(f"iter {it:>4}  return {row['return_mean']:7.3f}{shown}  entropy {row['entropy']:6.3f}  "
                  f"kl {row['approx_kl']:.4f}  {row['seconds']:7.1f} s", flush=True)
        save_policy(out / "model.pt", actor, layout, args)     # every iteration: no lost run
    if logger is not None:
        logger.finish()
    return {"log": rows, "model": str(out / "model.pt")}


def ppo_update(net, optimizer, b: dict, heads: Heads, args: Args, generator) -> dict:
    """``args.epochs`` passes over the batch ``b`` in shuffled minibatches: clipped policy loss, value
    loss and entropy bonus, one Adam step each; returns the mean losses, entropy and approximate KL.
    A minibatch's act and vote decisions are scored by their own phase's heads only
    (``evaluate_phase``)."""
    n = len(b["adv"])
    adv = (b["adv"] - b["adv"].mean()) / (b["adv"].std() + 1e-8)
    pl = vl = ent = kl = 0.0
    steps = 0
    for _ in range(args.epochs):
        order = torch.randperm(n, generator=generator, device=generator.device)
        for s in range(0, n, args.minibatch):
            mb = order[s:s + args.minibatch]
            is_vote = b["phase"][mb].bool()
            idx = torch.cat([mb[~is_vote], mb[is_vote]])          # act decisions first, then votes
            split = int((~is_vote).sum())
            parts = [evaluate_phase(net, b["x"][rows], b["mask"][rows], b["actions"][rows], heads.phase_components(p))
                     for p, rows in ((0, idx[:split]), (1, idx[split:])) if len(rows)]
            logp, entropy, value = (torch.cat(t) for t in zip(*parts))
            ratio = (logp - b["logp"][idx]).exp()
            a = adv[idx]
            policy_loss = torch.max(-a * ratio, -a * ratio.clamp(1 - args.clip, 1 + args.clip)).mean()
            value_loss = 0.5 * ((value - b["ret"][idx]) ** 2).mean()
            loss = policy_loss + args.value_coef * value_loss - args.entropy_coef * entropy.mean()
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(net.parameters(), args.max_grad_norm)
            optimizer.step()
            with torch.no_grad():
                kl += ((ratio - 1) - (logp - b["logp"][idx])).mean().item()
            pl, vl, ent, steps = pl + policy_loss.item(), vl + value_loss.item(), ent + entropy.mean().item(), steps + 1
    return {"policy_loss": pl / steps, "value_loss": vl / steps, "entropy": ent / steps, "approx_kl": kl / steps}


def _wandb(args: Args, out: Path):
    try:
        import wandb
    except ImportError:
        raise ImportError("--wandb needs the wandb extra: pip install 'socialgym[wandb]'") from None
    return wandb.init(project=args.wandb_project, dir=str(out), mode="offline", config=dataclasses.asdict(args),
                      settings=wandb.Settings(save_code=False, disable_git=True, x_disable_meta=True)
                      if hasattr(wandb, "Settings") else None)


# ---------------------------------------------------------------------------- command line
def parse_args(argv: list[str] | None = None) -> Args:
    parser = argparse.ArgumentParser(prog="python -m socialgym.training.ppo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    docs = field_docs()
    hints = typing.get_type_hints(Args)
    for f in dataclasses.fields(Args):
        flag = f"--{f.name.replace('_', '-')}"
        kind = hints[f.name]
        if kind is bool:
            action = argparse.BooleanOptionalAction if f.default else "store_true"
            parser.add_argument(flag, action=action, default=f.default, help=docs.get(f.name))
            continue
        if typing.get_origin(kind) in (typing.Union, getattr(__import__("types"), "UnionType", ())):
            kind = next(k for k in typing.get_args(kind) if k is not type(None))
        parser.add_argument(flag, type=kind, default=f.default, help=docs.get(f.name))
    args = Args(**vars(parser.parse_args(argv)))
    try:
        check_args(args)
    except ValueError as exc:
        parser.error(str(exc))
    return args


def field_docs() -> dict[str, str]:
    """The docstring under each field of ``Args`` (the source is the documentation)."""
    import ast
    import inspect

    tree = ast.parse(inspect.getsource(Args))
    body = tree.body[0].body
    docs = {}
    for node, nxt in zip(body, body[1:]):
        if isinstance(node, ast.AnnAssign) and isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant):
            docs[node.target.id] = " ".join(str(nxt.value.value).split())
    return docs


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        result = train(args)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    last = result["log"][-1]
    print(f"trained {args.iterations} iterations in {last['seconds']:.1f} s; final training return "
          f"{last['return_mean']:.3f}, validation return {last['eval_return']:.3f}; saved {result['model']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
