"""Users and platform learning at the same time: the users' PPO and the platform's PPO on one feed.

    socialgym study co-adaptation --out runs/coadaptation --iterations 200

The feed environment carries the platform as an agent (``socialgym.envs.platform.agent``): in each
vote step the platform ranks the next round's feed (Plackett-Luce, ``socialgym.baselines.
platform_ppo``), the users act on what they are shown with the users' PPO policy
(``socialgym.training.ppo``: the same network, heads and update). Each iteration plays
``episodes`` episodes with both policies sampling, then updates both — the users on their own
λ-weighted rewards (team spirit as in ``ppo.Args``), the platform on its objective, each viewer's
share of the round its feed was shown in. ``curves.json`` holds both learning curves per iteration.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from socialgym.training import platform_ppo
from socialgym.training.ppo import Args as UserArgs
from socialgym.training.ppo import gae, ppo_update, rollout
from socialgym.training.torch_policy import Actor, ActorCritic, Heads, RunningNorm, feature_size
from socialgym.envs.platform.agent import PlatformAgentEnv
from socialgym.platform.validation import check_int
from socialgym.recommenders.learned import PlatformPolicy, as_tensors, slate_scores
from socialgym.rewards.platform import platform_weights

CONFIG = dict(n_agents=20, n_actions=2, max_rounds=10, feed_size=5, vote_feed_size=5, dm_inbox_size=2,
              obs_format="numeric", topics=("politics", "sports", "science", "music", "food", "travel"),
              max_topics=6)


@dataclass
class Args:
    iterations: int = 200
    """Training iterations (each plays ``episodes`` episodes, then updates both policies)."""
    episodes: int = 4
    """Episodes per iteration; both policies update on them."""
    platform_objective: str = "engagement"
    """What the platform's PPO maximises (``socialgym.rewards.platform.platform_weights`` names them)."""
    seed: int = 0
    """Seeds both networks, the episodes and the sampling."""
    out: str = "runs/coadaptation"
    """Output directory (curves.json)."""

    def __post_init__(self) -> None:
        for name, low, high in (("iterations", 1, 1_000_000), ("episodes", 1, 10_000), ("seed", 0, 2**32 - 1)):
            check_int(name, getattr(self, name), low, high, numpy=False)
        platform_weights(self.platform_objective)          # a known objective, else a ValueError naming it


class PlatformDriver:
    """A one-platform stand-in for ``socialgym.vector.FeedVecEnv`` (what ``ppo.rollout`` steps) in
    which the platform policy ranks the next feed at every vote step and its transitions are kept."""

    num_envs = 1

    def __init__(self, policy: PlatformPolicy, objective: str, generator) -> None:
        self.env = PlatformAgentEnv(platform_objective=objective, platform_action_form="scores",
                                    platform_stances=[0, 1] * (CONFIG["n_agents"] // 2), **CONFIG)
        self.feed_env = self.env.feed_env
        self.n_agents, self.layout, self.config = self.feed_env.config.n_agents, self.feed_env.layout, \
            self.feed_env.config
        self.policy, self.generator = policy, generator
        self.weights = platform_weights(objective)
        self.k = self.config.feed_size

    def reset(self, seed=None, options=None):
        self.env.reset(seed=seed[0] if isinstance(seed, list) else seed)
        self.steps: list[dict] = []
        return self.feed_env.observe_arrays(), {}

    def step_arrays(self, actions):
        import torch
        env = self.feed_env
        voting = env.phase == "vote"
        if voting and env.round < env.config.max_rounds:        # rank the next round's feed
            obs = self.env.platform_observation()
            with torch.no_grad():
                logits, value = self.policy.logits_values(*as_tensors([obs]))
                slate = self.policy.draw_slate(logits, self.k, self.generator)
                logp = self.policy.slate_logprob(logits, slate)
            self.env.seat.set_action(slate_scores(slate[0].numpy(), obs["mask"].shape), self.n_agents)
            self.steps.append({"obs": obs, "slate": slate[0], "logp": logp[0], "value": value[0].numpy()})
        obs, rewards, term, trunc, info = env.step_arrays(np.asarray(actions).reshape(self.n_agents, -1))
        if voting:
            record = env.last_round
            per_viewer = self.env.score_closed_round()
            ranked = [s for s in self.steps if "reward" not in s]
            if ranked and record.round >= 2:                      # the feed of this round was ranked last vote step
                ranked[0]["reward"] = per_viewer @ self.weights
        return obs, rewards, term, np.array([trunc]), info

    def platform_episode(self) -> dict:
        done = [s for s in self.steps if "reward" in s]
        r = np.array([s["reward"] for s in done])
        v = np.array([s["value"] for s in done])
        return {"steps": done, "rewards": r, "values": v}


def run(args: Args, log=print) -> dict:
    import torch
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    gen = torch.Generator().manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    p_args = platform_ppo.Args(objective=args.platform_objective, seed=args.seed)
    platform = PlatformPolicy(p_args.hidden, args.seed)
    p_optim = torch.optim.Adam(platform.parameters(), lr=p_args.lr)
    driver = PlatformDriver(platform, args.platform_objective, gen)
    u_args = UserArgs(seed=args.seed)
    heads = Heads.for_layout(driver.layout, len(driver.config.topics))
    n_features = feature_size(driver.layout.feed_size, driver.layout.dm_inbox_size, driver.layout.vote_feed_size)
    net = ActorCritic(n_features, heads.K, heads.M, u_args.hidden)
    actor = Actor(net, heads, RunningNorm(n_features), "cpu", args.seed)
    u_optim = torch.optim.Adam(net.parameters(), lr=u_args.learning_rate, eps=1e-5)
    curves, start = [], time.perf_counter()
    for it in range(1, args.iterations + 1):
        frac = 1.0 - (it - 1) / args.iterations
        for group in u_optim.param_groups:
            group["lr"] = u_args.learning_rate * frac
        for group in p_optim.param_groups:
            group["lr"] = p_args.lr * frac
        user_batches, p_batch = [], {key: [] for key in ("obs", "slate", "logp", "adv", "ret")}
        user_returns, platform_returns = [], []
        net.eval()
        for _ in range(args.episodes):
            ep = rollout(driver, [int(rng.integers(2**20, 2**31))], actor, team_spirit=u_args.team_spirit)
            actor.norm.update(ep["raw"].reshape(-1, n_features))
            adv, ret = gae(ep["reward"], ep["value"], u_args.gamma, u_args.gae_lambda)
            T, B = ep["reward"].shape
            user_batches.append({"x": ep["x"].reshape(T * B, -1), "mask": ep["mask"].reshape(T * B, heads.K, heads.M),
                                 "phase": ep["phase"].repeat_interleave(B), "actions": ep["actions"].reshape(T * B, -1),
                                 "logp": ep["logp"].reshape(-1), "adv": adv.reshape(-1), "ret": ret.reshape(-1)})
            user_returns.append(float(ep["returns"].mean()))
            pe = driver.platform_episode()
            p_adv = platform_ppo.viewer_gae(pe["rewards"], pe["values"], p_args.gamma, p_args.gae_lambda)
            p_batch["obs"] += [s["obs"] for s in pe["steps"]]
            p_batch["slate"] += [s["slate"] for s in pe["steps"]]
            p_batch["logp"] += [s["logp"] for s in pe["steps"]]
            p_batch["adv"].append(p_adv)
            p_batch["ret"].append(p_adv + pe["values"])
            platform_returns.append(float(pe["rewards"].mean(axis=1).sum()))
        net.train()
        ppo_update(net, u_optim, {k: torch.cat([b[k] for b in user_batches]) for k in user_batches[0]}, heads,
                   u_args, actor.generator)
        platform_ppo.update(platform, p_optim, p_batch, p_args, gen)
        curves.append({"iteration": it, "users_return": float(np.mean(user_returns)),
                       "platform_return": float(np.mean(platform_returns)),
                       "seconds": round(time.perf_counter() - start, 1)})
        if log and it % 10 == 0:
            log(f"iteration {it}: users {curves[-1]['users_return']:.3f}, platform {curves[-1]['platform_return']:.3f}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    result = {"args": vars(args), "config": {k: list(v) if isinstance(v, tuple) else v for k, v in CONFIG.items()},
              "curves": curves}
    (out / "curves.json").write_text(json.dumps(result, indent=1))
    return result


def main(argv: list[str] | None = None) -> None:
    from socialgym.experiments.studies.registry import add_dataclass_arguments, dataclass_from_namespace

    parser = argparse.ArgumentParser(prog="socialgym study co-adaptation", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_dataclass_arguments(parser, Args())
    run(dataclass_from_namespace(Args, parser.parse_args(argv)))


if __name__ == "__main__":
    main()
