"""PPO for the platform's seat: a Plackett-Luce ranking policy over retrieved candidates.

One readable file in the CleanRL manner. The policy (``socialgym.recommenders.learned.
PlatformPolicy``) scores every (viewer, candidate) pair with one small MLP shared by all pairs
(input: the pair's ranking features only, so a trained scorer deploys as a recommender) and
draws each viewer's feed as a Plackett-Luce slate: the ``feed_size`` candidates, one after another,
each with probability ``softmax(score)`` over those not yet taken (sampled with Gumbel top-k). The
log-probability of a slate is the sum of those log-softmaxes, so PPO's ratio is exact.

Credit: the platform objectives split per viewer (``socialgym.rewards.platform``) and average to
the platform's reward, so each viewer's slate is trained on its own share with a per-viewer value
baseline (GAE over the episode's rounds; the value network also reads the platform aggregates),
all viewers sharing the parameters — as the users' PPO
does with agents. The slate reaches the environment as scores (``action_form="scores"``): 1 for
the first item, falling with the position, -1 for everything not drawn.

    python -m socialgym.training.platform_ppo --objective welfare --iterations 150 --out runs/platform/welfare

Training seed k plays the episodes seeded 10_000 k + 0, 1, 2, ...; held-out evaluations use
seeds outside that range.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import numpy as np

from socialgym.envs.platform.env import PlatformEnv
from socialgym.recommenders.learned import PlatformPolicy, as_tensors, slate_scores, torch_module
from socialgym.rewards.platform import platform_weights


@dataclass
class Args:
    objective: str = "engagement"          # a platform objective (socialgym.rewards.platform)
    iterations: int = 120                  # PPO updates
    episodes_per_iteration: int = 4        # episodes collected per update
    lr: float = 3e-3
    gamma: float = 0.95
    gae_lambda: float = 0.9
    clip: float = 0.2
    epochs: int = 4
    minibatches: int = 4
    value_coef: float = 0.5
    hidden: int = 64
    seed: int = 0                          # training seed: torch, episode seeds 10_000 * seed + k
    threads: int = 1                       # torch threads (0 = torch's default)
    out: str | None = None                 # where policy.pt (with these args) and curve.json go


def viewer_gae(rewards: np.ndarray, values: np.ndarray, gamma: float, lam: float) -> np.ndarray:
    """Per-viewer advantages over one episode: rewards, values (T, n); the episode ends at T."""
    adv = np.zeros_like(rewards)
    last = np.zeros(rewards.shape[1])
    for t in range(len(rewards) - 1, -1, -1):
        next_value = values[t + 1] if t + 1 < len(rewards) else 0.0
        delta = rewards[t] + gamma * next_value - values[t]
        last = delta + gamma * lam * last
        adv[t] = last
    return adv


def update(policy: PlatformPolicy, optim, batch: dict, args: Args, gen) -> None:
    """``args.epochs`` clipped PPO passes over a batch: ``obs`` (observations), ``slate`` (drawn
    slates, tensors), ``logp`` (their log-probabilities at drawing), ``adv`` / ``ret`` (per step
    and viewer, arrays)."""
    torch = torch_module()
    tensors = as_tensors(batch["obs"])
    slate_t, old_logp = torch.stack(batch["slate"]), torch.stack(batch["logp"])
    adv_t = torch.as_tensor(np.concatenate(batch["adv"]), dtype=torch.float32)
    ret_t = torch.as_tensor(np.concatenate(batch["ret"]), dtype=torch.float32)
    adv_t = (adv_t - adv_t.mean()) / (adv_t.std() + 1e-8)
    steps = len(batch["obs"])
    for _ in range(args.epochs):
        for idx in torch.randperm(steps, generator=gen).chunk(args.minibatches):
            logits, value = policy.logits_values(*(t[idx] for t in tensors))
            logp = policy.slate_logprob(logits, slate_t[idx])
            ratio = torch.exp(logp - old_logp[idx])
            a = adv_t[idx]
            pg = -torch.min(ratio * a, ratio.clamp(1 - args.clip, 1 + args.clip) * a).mean()
            loss = pg + args.value_coef * ((value - ret_t[idx]) ** 2).mean()
            optim.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), 0.5)
            optim.step()


def train(args: Args, env_kwargs: dict | None = None, log=print) -> tuple[PlatformPolicy, list[dict]]:
    """Train a policy on ``PlatformEnv(args.objective, action_form="scores", **env_kwargs)``;
    returns it and the learning curve (mean platform reward per episode, per iteration)."""
    torch = torch_module()
    if args.threads:
        torch.set_num_threads(args.threads)
    env = PlatformEnv(args.objective, action_form="scores", **(env_kwargs or {}))
    weights = platform_weights(args.objective)
    k = env.feed_env.config.feed_size
    policy = PlatformPolicy(args.hidden, args.seed)
    optim = torch.optim.Adam(policy.parameters(), lr=args.lr)
    gen = torch.Generator().manual_seed(args.seed)
    curve, episode = [], 0
    start = time.perf_counter()
    for it in range(args.iterations):
        frac = 1.0 - it / args.iterations
        for group in optim.param_groups:
            group["lr"] = args.lr * frac
        batch = {key: [] for key in ("obs", "slate", "logp", "adv", "ret")}
        returns = []
        for _ in range(args.episodes_per_iteration):
            obs, _ = env.reset(seed=10_000 * args.seed + episode)
            episode += 1
            observations, slates, logps, values, rewards = [], [], [], [], []
            done = False
            while not done:
                with torch.no_grad():
                    logits, value = policy.logits_values(*as_tensors([obs]))
                    slate = policy.draw_slate(logits, k, gen)
                    logp = policy.slate_logprob(logits, slate)
                observations.append(obs)
                slates.append(slate[0])
                logps.append(logp[0])
                values.append(value[0].numpy())
                obs, reward, _, done, _ = env.step(slate_scores(slate[0].numpy(), obs["mask"].shape))
                rewards.append(env.last_per_viewer @ weights)
            r, v = np.array(rewards), np.array(values)
            adv = viewer_gae(r, v, args.gamma, args.gae_lambda)
            batch["obs"] += observations
            batch["slate"] += slates
            batch["logp"] += logps
            batch["adv"].append(adv)
            batch["ret"].append(adv + v)
            returns.append(float(r.mean(axis=1).sum()))
        update(policy, optim, batch, args, gen)
        curve.append({"iteration": it + 1, "episodes": episode, "mean_return": float(np.mean(returns)),
                      "seconds": round(time.perf_counter() - start, 2)})
        if log and (it + 1) % 10 == 0:
            log(f"iteration {it + 1}/{args.iterations}: mean platform return {np.mean(returns):.3f}")
    if args.out:
        out = Path(args.out)
        policy.save(out / "policy.pt", asdict(args))
        (out / "curve.json").write_text(json.dumps(curve, indent=1))
    return policy, curve


def parse_args(argv: list[str] | None = None) -> Args:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for f in fields(Args):
        kind = type(f.default) if f.default is not None else str
        parser.add_argument(f"--{f.name.replace('_', '-')}", type=kind, default=f.default)
    return Args(**vars(parser.parse_args(argv)))


if __name__ == "__main__":
    train(parse_args())
