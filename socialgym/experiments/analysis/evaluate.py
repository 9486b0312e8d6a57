"""Compare policies on the feed environment: same seeds, same configuration, same lambdas.

    python -m socialgym.experiments.analysis.evaluate --model runs/ppo/model.pt --episodes 10 --out runs/ppo/eval
    python -m socialgym.experiments.analysis.evaluate --model runs/ppo/model.pt --base-url http://127.0.0.1:8000/v1 --llm-model qwen2.5

Every policy plays the same episodes of a registered task (seeds ``seed .. seed+episodes-1``;
λ one-hot, or on the mixed task drawn from each episode's seed), and the table reports, per policy, the mean
over episodes and agents of each reward component and of the total (summed over rounds), with
a 95 % t-interval of the total over episodes. Writes ``evaluation.csv``, ``evaluation.md`` and,
given the training log, ``learning_curve.png``. LLM agents join when ``--base-url`` is given
(``--embedded`` starts the embedded model).
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np

from socialgym.config import REWARD_NAMES
from socialgym.experiments.analysis.statistics import t_half_width


def play(env, policy, seed: int) -> np.ndarray:
    """One episode through the ParallelEnv API; returns each agent's components summed over
    rounds, (n, 5)."""
    obs, _ = env.reset(seed=seed)
    if hasattr(policy, "reset"):
        policy.reset()
    total = np.zeros((len(env.possible_agents), len(REWARD_NAMES)))
    while env.agents:
        obs, rewards, terms, truncs, infos = env.step(policy.act(obs))
        comps = env.last_round.components if "reward_components" in infos[env.possible_agents[0]] else None
        if comps is not None:
            total += comps
    return total


def evaluate(policies: dict[str, Callable[[], Any]], task: str, *, overrides: dict | None = None,
             episodes: int = 5, seed: int = 10_000) -> list[dict]:
    """``policies``: name -> factory of a batched policy; ``task``: a registered task id
    (``socialgym.tasks.TASKS``) whose environment every policy plays, with ``overrides`` (FeedConfig
    keywords, e.g. ``n_agents`` for another population). Episode ``e`` resets with ``seed + e``,
    so every policy meets the same λ (one-hot, or the mixed task's draw from that seed). An
    episode's return is the mean over agents of the λ-weighted total summed over rounds. Returns
    one row per policy: mean of each component, ``total`` with its 95 % t-interval over
    episodes, and the per-episode ``returns``."""
    import socialgym

    rows = []
    kwargs = {**(overrides or {}), "obs_format": "both"}       # structured for scripted/LLM, numeric for torch
    for name, make_policy in policies.items():
        policy = make_policy()
        env = socialgym.make(task, **kwargs)
        if hasattr(policy, "check_env"):
            policy.check_env(env)
        totals, comps = [], []
        for e in range(episodes):
            c = play(env, policy, seed + e)
            comps.append(c.mean(0))
            totals.append(float((c * env.lambdas).sum(1).mean()))
        totals = np.array(totals)
        rows.append({"policy": name, "episodes": episodes,
                     **{c: float(v) for c, v in zip(REWARD_NAMES, np.mean(comps, axis=0))},
                     "total": float(totals.mean()), "total_ci95": t_half_width(totals), "returns": totals.tolist()})
    return rows


def write_table(rows: list[dict], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "evaluation.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=[k for k in rows[0] if k != "returns"], extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    lines = ["| policy | " + " | ".join(REWARD_NAMES) + " | total (λ-weighted) |",
             "|---|" + "---:|" * (len(REWARD_NAMES) + 1)]
    for r in rows:
        lines.append(f"| {r['policy']} | " + " | ".join(f"{r[c]:.3f}" for c in REWARD_NAMES)
                     + f" | {r['total']:.3f} ± {r['total_ci95']:.3f} |")
    (out / "evaluation.md").write_text("\n".join(lines) + "\n")


def learning_curve(log_csv: Path, out_png: Path, baselines: dict[str, float] | None = None) -> None:
    from socialgym.rundir.files import read_records
    from socialgym.experiments.analysis.plotting import figure, save

    rows = read_records(log_csv)
    x = [int(r["episodes"]) for r in rows]
    fig = figure(7, 4)
    ax = fig.add_subplot()
    ax.plot(x, [float(r["return_mean"]) for r in rows], label="PPO (training episodes)")
    for name, value in (baselines or {}).items():
        ax.axhline(value, linestyle="--", linewidth=1, label=f"{name} (evaluation)")
    ax.set_xlabel("training episodes")
    ax.set_ylabel("mean return per agent (λ-weighted, summed over rounds)")
    ax.legend(fontsize=8)
    save(fig, out_png)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m socialgym.experiments.analysis.evaluate", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="a PPO model.pt (its training task and sizes are used)")
    parser.add_argument("--task", default=None, help="a task id or objective (default: the model's, else mixed)")
    parser.add_argument("--n-agents", type=int, default=None,
                        help="play with this many agents (a trained policy acts at any population size)")
    parser.add_argument("--out", default=None, help="default: the model's directory / eval")
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--seed", type=int, default=10_000, help="evaluation seeds (apart from training's)")
    parser.add_argument("--base-url", default=None, help="add LLM agents from this OpenAI-compatible server")
    parser.add_argument("--llm-model", default=None)
    parser.add_argument("--embedded", action="store_true", help="add LLM agents on the embedded model")
    parser.add_argument("--api-key-env", default="OPENAI_API_KEY")
    a = parser.parse_args(argv)
    from socialgym.baselines import GreedyPolicy, RandomPolicy
    from socialgym.training.ppo import Args, size_overrides, task_of
    from socialgym.training.torch_policy import TorchPolicy

    if a.model:
        from socialgym.training.torch_policy import read_model_file
        try:
            saved = read_model_file(a.model).get("args", {})
        except (OSError, ValueError) as exc:
            parser.error(str(exc))
        args = Args(**{k: v for k, v in saved.items() if k in {f.name for f in dataclasses.fields(Args)}})
    else:
        args = Args()
    if a.task:
        args = dataclasses.replace(args, task=a.task)
    try:
        task = task_of(args).id
    except ValueError as exc:
        parser.error(str(exc))
    overrides = size_overrides(args) | ({"n_agents": a.n_agents} if a.n_agents else {})
    policies: dict[str, Callable[[], Any]] = {"random": lambda: RandomPolicy(seed=a.seed),
                                              "greedy": lambda: GreedyPolicy(seed=a.seed)}
    if a.model:
        try:
            TorchPolicy.load(a.model, seed=a.seed)           # a bad file fails here, in one line
        except (OSError, ValueError) as exc:
            parser.error(str(exc))
        policies["ppo"] = lambda: TorchPolicy.load(a.model, seed=a.seed)
    out = Path(a.out) if a.out else (Path(a.model).parent / "eval" if a.model else Path("runs/eval"))
    with contextlib.ExitStack() as stack:
        if a.base_url or a.embedded:
            policies["llm"] = _llm_factory(a, stack)
        try:
            rows = evaluate(policies, task, overrides=overrides, episodes=a.episodes, seed=a.seed)
        except ValueError as exc:
            parser.error(str(exc))
    write_table(rows, out)
    if a.model and (Path(a.model).parent / "train_log.csv").exists():
        learning_curve(Path(a.model).parent / "train_log.csv", out / "learning_curve.png",
                       {r["policy"]: r["total"] for r in rows})
    print(f"{task}{' with ' + str(overrides) if overrides else ''}, seeds {a.seed}..{a.seed + a.episodes - 1}")
    print((out / "evaluation.md").read_text())
    (out / "evaluation.json").write_text(json.dumps(rows, indent=2))
    return 0


def _llm_factory(a, stack: contextlib.ExitStack):
    from socialgym.agents import LLMPolicy
    from socialgym.agents.demo import COMPACT_POLICY
    from socialgym.llm import open_client

    if a.embedded:       # one request at a time: the embedded server runs one anyway
        client = stack.enter_context(open_client(None, max_concurrency=1))
    else:
        client = stack.enter_context(open_client(a.base_url, a.llm_model, api_key_env=a.api_key_env,
                                                 max_concurrency=16))
    return lambda: LLMPolicy(client, **COMPACT_POLICY, seed=a.seed)


__all__ = ["play", "evaluate", "write_table", "learning_curve", "main"]


if __name__ == "__main__":
    sys.exit(main())
