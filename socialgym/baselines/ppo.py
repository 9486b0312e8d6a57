"""PPO with parameter sharing on the feed environment — a single-file baseline (CleanRL style).

One network acts for every agent. Its input is the numeric observation (``obs_format="numeric"``)
including the agent's reward weights ``lambda``, which are redrawn per agent every episode
(``--lambdas dirichlet``), so one policy learns to serve different tasks. The action is the
environment's MultiDiscrete vector: one categorical head per component, masked with the
environment's action masks (so every sampled action is valid), act-phase components scored at
act steps and vote components at vote steps. A round is two decisions (act, then vote); the
round's reward arrives with the vote step. Advantages are GAE over each agent's 2·T decisions.

Rollouts use the batched ``env.step_arrays`` (no per-agent Python dicts), so collection stays
cheap; the update is standard clipped PPO with a value head and an entropy bonus.

    python -m socialgym.baselines.ppo --iterations 60 --out runs/ppo
    python -m socialgym.baselines.ppo --help

Writes ``OUT/model.pt`` (weights + the environment layout they fit), ``OUT/train_log.csv``
(one row per iteration) and ``OUT/args.json``; ``--wandb`` logs the same rows to wandb.
``TorchPolicy.load(OUT/model.pt)`` plugs the result into any run (batched policy protocol).
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from socialgym.config import REWARD_NAMES
from socialgym.tasks import draw_lambdas

try:
    import torch
    from torch import nn
except ImportError as err:      # the core package does not need torch
    raise ImportError("the PPO baseline needs torch: pip install torch==2.13.0 (CPU build), "
                      "or pip install 'socialgym[torch]'") from err


@dataclass(frozen=True)
class Args:
    """Training arguments (each is a ``--flag`` on the command line)."""

    n_agents: int = 20
    """Agents in the environment (the network is shared by all of them)."""
    n_actions: int = 2
    """Actions per agent per round (N)."""
    max_rounds: int = 10
    """Rounds per episode (T); each round is an act and a vote decision."""
    feed_size: int = 6
    """Items in each feed (also the number of mention flags per action)."""
    vote_feed_size: int = 6
    """Items offered in the vote phase."""
    dm_inbox_size: int = 4
    """DMs shown per round."""
    recommender: str = "chronological"
    """The environment's recommender."""
    lambdas: str = "dirichlet"
    """'dirichlet': redraw every agent's reward weights each episode (one policy, many tasks);
    'uniform': all weights 0.2."""
    iterations: int = 60
    """PPO iterations (collect, then update)."""
    episodes_per_iteration: int = 4
    """Episodes collected per iteration (each gives n_agents * 2 * max_rounds decisions)."""
    learning_rate: float = 3e-4
    """Adam step size."""
    gamma: float = 0.95
    """Discount per decision (two decisions per round)."""
    gae_lambda: float = 0.9
    """GAE smoothing."""
    clip: float = 0.2
    """PPO ratio clip."""
    epochs: int = 4
    """Passes over each batch."""
    minibatch: int = 512
    """Decisions per gradient step."""
    entropy_coef: float = 0.01
    """Entropy bonus weight."""
    value_coef: float = 0.5
    """Value loss weight."""
    max_grad_norm: float = 0.5
    """Gradient clipping."""
    hidden: int = 128
    """Width of the two hidden layers."""
    seed: int = 0
    """Seeds the environment, the lambda draws and torch."""
    out: str = "runs/ppo"
    """Where model.pt, train_log.csv and args.json go."""
    wandb: bool = False
    """Log iterations to wandb (offline mode, in OUT/wandb; needs socialgym[wandb])."""
    wandb_project: str = "socialgym-ppo"
    """wandb project name."""
    threads: int = 1
    """torch CPU threads (0: torch's default; small networks run fastest on one)."""


# ---------------------------------------------------------------------------- features
def env_kwargs(args: Args) -> dict:
    return {"n_agents": args.n_agents, "n_actions": args.n_actions, "max_rounds": args.max_rounds,
            "feed_size": args.feed_size, "vote_feed_size": args.vote_feed_size,
            "dm_inbox_size": args.dm_inbox_size, "recommender": args.recommender, "obs_format": "numeric"}


def feature_size(feed: int, dms: int, votes: int) -> int:
    return 13 + 8 * feed + 4 * dms + 8 * votes


def encode(obs: dict, max_rounds: int) -> np.ndarray:
    """Stacked numeric observations -> (n, features) float32.

    Author and topic ids are dropped (identifiers, not magnitudes); counts are log-scaled and
    ages are in episodes. Kept: progress, phase, the 5 lambdas, the 6 last rewards; per feed and
    vote item present, is_comment, likes, dislikes, age, tie_out, tie_in, mentions_me; per DM
    present, sentiment, tie_out, tie_in.
    """
    s = np.asarray(obs["self"], np.float32)
    n = len(s)
    scale = 1.0 / max(1, max_rounds)
    head = np.concatenate([s[:, :1] * scale, s[:, 2:3], s[:, 3:14]], axis=1)

    def items(x):
        x = np.asarray(x, np.float32)
        feats = [x[..., 0], x[..., 3], np.log1p(np.maximum(x[..., 4], 0)), np.log1p(np.maximum(x[..., 5], 0)),
                 x[..., 6] * scale, x[..., 7], x[..., 8], x[..., 9]]
        return np.stack(feats, axis=-1).reshape(n, -1)

    d = np.asarray(obs["dms"], np.float32)
    dms = np.stack([d[..., 0], d[..., 3], d[..., 4], d[..., 5]], axis=-1).reshape(n, -1)
    return np.concatenate([head, items(obs["feed"]), dms, items(obs["vote_items"])], axis=1)


def stack_observations(observations: dict[str, Any], agents: list[str]) -> dict:
    """Per-agent numeric observations (``obs_format="numeric"``, or ``"both"``'s ``obs["numeric"]``)
    -> the stacked arrays ``step_arrays`` returns."""
    rows = [observations[a].get("numeric", observations[a]) for a in agents]
    out = {k: np.stack([np.asarray(r[k], np.float32) for r in rows]) for k in ("self", "feed", "dms", "vote_items")}
    out["phase"] = int(rows[0]["phase"]) if rows else 0
    out["action_mask"] = [observations[a]["action_mask"] for a in agents]
    return out


class Heads:
    """The MultiDiscrete action as K categorical heads padded to the largest size M."""

    def __init__(self, nvec: np.ndarray, act_length: int) -> None:
        self.nvec = np.asarray(nvec, np.int64)
        self.K, self.M = len(self.nvec), int(self.nvec.max())
        self.act_length = act_length
        self.padding = np.arange(self.M)[None, :] < self.nvec[:, None]          # (K, M)
        phase = np.zeros((2, self.K), np.float32)
        phase[0, :act_length] = 1.0                                             # act step: act components
        phase[1, act_length:] = 1.0                                             # vote step: votes
        self.phase_weight = phase

    def masks(self, mask_tuples: list) -> np.ndarray:
        """(n, K, M) bool from the environment's per-agent mask tuples (shared between agents
        whose masks are equal, so each distinct tuple is expanded once)."""
        if not mask_tuples:
            return np.zeros((0, self.K, self.M), bool)
        ids = np.fromiter((id(m) for m in mask_tuples), np.int64, len(mask_tuples))
        unique, first, inverse = np.unique(ids, return_index=True, return_inverse=True)
        rows = np.zeros((len(unique), self.K, self.M), bool)
        for r, i in enumerate(first.tolist()):
            for k, m in enumerate(mask_tuples[i]):
                rows[r, k, : len(m)] = np.asarray(m, bool)
        rows &= self.padding
        # every env mask row allows a value (unused components allow their no-op) except round 1
        # with an empty topic list, where no numeric action is valid: take 0 there, the env says why
        rows[..., 0] |= ~rows.any(-1)
        return rows[inverse]


def _layer(i: int, o: int, std: float = float(np.sqrt(2))) -> nn.Linear:
    layer = nn.Linear(i, o)
    nn.init.orthogonal_(layer.weight, std)
    nn.init.zeros_(layer.bias)
    return layer


class ActorCritic(nn.Module):
    """Shared body; K masked categorical heads (padded to M) and a value head."""

    def __init__(self, n_features: int, K: int, M: int, hidden: int) -> None:
        super().__init__()
        self.K, self.M = K, M
        self.body = nn.Sequential(_layer(n_features, hidden), nn.Tanh(), _layer(hidden, hidden), nn.Tanh())
        self.logits = _layer(hidden, K * M, 0.01)
        self.value = _layer(hidden, 1, 1.0)

    def forward(self, x: torch.Tensor, mask: torch.Tensor):
        h = self.body(x)
        logits = self.logits(h).view(-1, self.K, self.M).masked_fill(~mask, -1e9)
        return torch.log_softmax(logits, dim=-1), self.value(h).squeeze(-1)


def _evaluate(net: ActorCritic, x, mask, phase_w, actions=None, generator=None, greedy=False):
    """Log-probability, entropy (over the components that matter in this phase) and value; samples
    actions when none are given."""
    logp_all, value = net(x, mask)
    if actions is None:
        if greedy:
            actions = logp_all.argmax(-1)
        else:
            probs = logp_all.exp().view(-1, net.M)
            actions = torch.multinomial(probs, 1, generator=generator).view(-1, net.K)
    logp = logp_all.gather(-1, actions.unsqueeze(-1)).squeeze(-1)
    entropy = -(logp_all.exp() * logp_all.masked_fill(~mask, 0.0)).sum(-1)
    return actions, (logp * phase_w).sum(-1), (entropy * phase_w).sum(-1), value


# ---------------------------------------------------------------------------- the policy
class TorchPolicy:
    """A trained network in the batched policy protocol: ``act({agent: obs}) -> {agent: action}``.

    Needs numeric observations (``obs_format="numeric"``, or ``"both"`` to mix with LLM and
    scripted agents that read the structured part) with action masks, from an environment of
    the layout it was trained on (agents, actions, feed, inbox and vote sizes, topics).
    """

    def __init__(self, net: ActorCritic, heads: Heads, layout: dict, max_rounds: int, *,
                 deterministic: bool = False, seed: int = 0) -> None:
        self.net, self.heads, self.layout, self.max_rounds = net, heads, dict(layout), max_rounds
        self.deterministic = deterministic
        self.seed = seed
        self.generator = torch.Generator().manual_seed(seed)
        self.net.eval()

    @classmethod
    def load(cls, path: str | Path, *, deterministic: bool = False, seed: int = 0) -> "TorchPolicy":
        data = read_model_file(path)
        try:
            heads = Heads(np.asarray(data["nvec"], dtype=np.int64), data["act_length"])
            net = ActorCritic(data["n_features"], heads.K, heads.M, data["hidden"])
            net.load_state_dict(data["state_dict"])
        except (RuntimeError, TypeError, ValueError, IndexError) as exc:
            first = str(exc).strip().splitlines()[0][:120] if str(exc).strip() else type(exc).__name__
            raise ValueError(f"{path}: its weights do not fit the network it describes ({first})") from None
        return cls(net, heads, data["layout"], data["max_rounds"], deterministic=deterministic, seed=seed)

    def check_env(self, env) -> None:
        """Raise a clear error if ``env``'s action layout differs from the training one."""
        base = getattr(env, "unwrapped", env)
        lay = dataclasses.asdict(base.layout)
        if lay != self.layout:
            diff = {k: (self.layout.get(k), lay.get(k)) for k in lay if lay.get(k) != self.layout.get(k)}
            raise ValueError(f"this policy was trained on another layout; (trained, env): {diff}")
        if base.config.obs_format == "structured" or not base.config.action_masks:
            raise ValueError("TorchPolicy needs obs_format='numeric' or 'both' and action_masks=True")

    def reset(self) -> None:
        self.generator = torch.Generator().manual_seed(self.seed)

    # checkpoints of a run pickle the policy; torch generators do not pickle, their state does
    def __getstate__(self) -> dict:
        return {**self.__dict__, "generator": self.generator.get_state()}

    def __setstate__(self, state: dict) -> None:
        generator = torch.Generator()
        generator.set_state(state["generator"])
        self.__dict__.update({**state, "generator": generator})

    def act(self, observations: dict[str, Any]) -> dict[str, Any]:
        agents = list(observations)
        if not agents:
            return {}
        first = observations[agents[0]]
        if "numeric" not in first and "self" not in first:
            raise ValueError("TorchPolicy needs numeric observations: build the env with "
                             "obs_format='numeric' or 'both'")
        if "action_mask" not in first:
            raise ValueError("TorchPolicy needs action masks (action_masks=True)")
        stacked = stack_observations(observations, agents)
        actions = self.act_arrays(stacked)
        return {a: actions[i] for i, a in enumerate(agents)}

    @torch.no_grad()
    def act_arrays(self, stacked: dict) -> np.ndarray:
        """Stacked observations (as ``step_arrays`` returns) -> the (n, L) action matrix."""
        x = torch.from_numpy(encode(stacked, self.max_rounds))
        if x.shape[1] != self.net.body[0].in_features:
            raise ValueError(f"observation has {x.shape[1]} features; the policy expects "
                             f"{self.net.body[0].in_features} (another feed/inbox/vote size?)")
        mask = torch.from_numpy(self.heads.masks(stacked["action_mask"]))
        w = torch.from_numpy(self.heads.phase_weight[int(stacked["phase"])]).expand(len(x), -1)
        actions, *_ = _evaluate(self.net, x, mask, w, generator=self.generator, greedy=self.deterministic)
        return actions.numpy().astype(np.int64)


def read_model_file(path: str | Path) -> dict:
    """A model.pt written by :func:`save_policy`, read with ``weights_only=True``: tensors and
    plain containers only, so a file from someone else cannot run code when it is opened."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no trained policy at {path}")
    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:   # pickle.UnpicklingError for disallowed globals, RuntimeError for damage
        # (torch's own message suggests weights_only=False: exactly what must not be done with it)
        raise ValueError(f"{path} is not a socialgym PPO model file: it holds objects other than tensors "
                         f"and plain values, or is damaged ({type(exc).__name__}; read with weights_only=True)") \
            from None
    if not isinstance(data, dict) or data.get("format") != "socialgym-ppo-1":
        raise ValueError(f"{path} is not a socialgym PPO model file")
    fields = {"state_dict": dict, "nvec": list, "act_length": int, "n_features": int, "hidden": int,
              "layout": dict, "max_rounds": int, "args": dict}
    for name, kind in fields.items():
        if not isinstance(data.get(name), kind) or isinstance(data.get(name), bool):
            raise ValueError(f"{path} is not a complete socialgym PPO model file: {name!r} is missing or not "
                             f"a {kind.__name__}")
    return data


def save_policy(path: Path, net: ActorCritic, heads: Heads, layout: dict, args: Args, n_features: int) -> None:
    tmp = path.with_suffix(".tmp")
    torch.save({"format": "socialgym-ppo-1", "state_dict": net.state_dict(), "nvec": heads.nvec.tolist(),
                "act_length": heads.act_length, "n_features": n_features, "hidden": args.hidden,
                "layout": layout, "max_rounds": args.max_rounds, "args": dataclasses.asdict(args)}, tmp)
    tmp.replace(path)


# ---------------------------------------------------------------------------- training
def collect(env, net: ActorCritic, heads: Heads, args: Args, seed: int, generator) -> dict:
    """One episode of every agent with the current network; arrays indexed [step, agent]."""
    obs_dict, _ = env.reset(seed=seed)
    obs = stack_observations(obs_dict, env.possible_agents)
    xs, masks, phases, acts, logps, values, rewards, components = [], [], [], [], [], [], [], []
    done = False
    while not done:
        x = torch.from_numpy(encode(obs, args.max_rounds))
        mask = torch.from_numpy(heads.masks(obs["action_mask"]))
        phase = int(obs["phase"])
        w = torch.from_numpy(heads.phase_weight[phase]).expand(len(x), -1)
        with torch.no_grad():
            a, logp, _, v = _evaluate(net, x, mask, w, generator=generator)
        obs, r, _, done, info = env.step_arrays(a.numpy().astype(np.int64))
        xs.append(x), masks.append(mask), phases.append(phase), acts.append(a), logps.append(logp), values.append(v)
        rewards.append(torch.as_tensor(r, dtype=torch.float32))
        if info.get("reward_components") is not None:
            components.append(np.asarray(info["reward_components"]))
    return {"x": torch.stack(xs), "mask": torch.stack(masks), "phase": torch.tensor(phases),
            "actions": torch.stack(acts), "logp": torch.stack(logps), "value": torch.stack(values),
            "reward": torch.stack(rewards), "components": np.stack(components)}


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


def train(args: Args, *, progress: bool = True) -> dict:
    """Train; returns ``{"log": rows, "model": path}``. See the module docstring."""
    import socialgym

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "args.json").write_text(json.dumps(dataclasses.asdict(args), indent=2))
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    generator = torch.Generator().manual_seed(args.seed)
    probe = socialgym.parallel_env(**env_kwargs(args), seed=args.seed)
    layout = dataclasses.asdict(probe.layout)
    heads = Heads(probe.layout.nvec, probe.layout.act_length)
    n_features = feature_size(args.feed_size, args.dm_inbox_size, args.vote_feed_size)
    net = ActorCritic(n_features, heads.K, heads.M, args.hidden)
    optimizer = torch.optim.Adam(net.parameters(), lr=args.learning_rate, eps=1e-5)
    phase_weight = torch.from_numpy(heads.phase_weight)
    logger = _wandb(args, out) if args.wandb else None
    rows = []
    log_path = out / "train_log.csv"
    fields = ["iteration", "episodes", "decisions", "return_mean", *[f"{c}_mean" for c in REWARD_NAMES],
              "policy_loss", "value_loss", "entropy", "approx_kl", "seconds"]
    with open(log_path, "w", newline="") as f:
        csv.writer(f).writerow(fields)
    start = time.perf_counter()
    for it in range(1, args.iterations + 1):
        batches, episode_returns, comps = [], [], []
        for e in range(args.episodes_per_iteration):
            seed = int(rng.integers(2**31))
            lambdas = draw_lambdas(args.n_agents, rng, args.lambdas)
            env = socialgym.parallel_env(**env_kwargs(args), lambdas=lambdas, seed=seed)
            ep = collect(env, net, heads, args, seed, generator)
            adv, ret = gae(ep["reward"], ep["value"], args.gamma, args.gae_lambda)
            T, n = ep["reward"].shape
            batches.append({"x": ep["x"].reshape(T * n, -1), "mask": ep["mask"].reshape(T * n, heads.K, heads.M),
                            "phase": ep["phase"].repeat_interleave(n), "actions": ep["actions"].reshape(T * n, -1),
                            "logp": ep["logp"].reshape(-1), "adv": adv.reshape(-1), "ret": ret.reshape(-1)})
            episode_returns.append(ep["reward"].sum(0).mean().item())        # per agent, summed over rounds
            comps.append(ep["components"].sum(0).mean(0))                     # per component, summed over rounds
        b = {k: torch.cat([x[k] for x in batches]) for k in batches[0]}
        stats = _update(net, optimizer, b, phase_weight, args, generator)
        row = {"iteration": it, "episodes": it * args.episodes_per_iteration, "decisions": len(b["adv"]),
               "return_mean": float(np.mean(episode_returns)),
               **{f"{c}_mean": float(v) for c, v in zip(REWARD_NAMES, np.mean(comps, axis=0))},
               **stats, "seconds": round(time.perf_counter() - start, 2)}
        rows.append(row)
        with open(log_path, "a", newline="") as f:
            csv.writer(f).writerow([row[k] for k in fields])
        if logger is not None:
            logger.log(row, step=it)
        if progress:
            print(f"iter {it:>4}  return {row['return_mean']:8.3f}  entropy {row['entropy']:6.3f}  "
                  f"kl {row['approx_kl']:.4f}  {row['seconds']:7.1f} s", flush=True)
        save_policy(out / "model.pt", net, heads, layout, args, n_features)     # every iteration: no lost run
    if logger is not None:
        logger.finish()
    return {"log": rows, "model": str(out / "model.pt")}


def _update(net, optimizer, b: dict, phase_weight: torch.Tensor, args: Args, generator) -> dict:
    n = len(b["adv"])
    adv = (b["adv"] - b["adv"].mean()) / (b["adv"].std() + 1e-8)
    w_all = phase_weight[b["phase"]]
    pl = vl = ent = kl = 0.0
    steps = 0
    for _ in range(args.epochs):
        order = torch.randperm(n, generator=generator)
        for s in range(0, n, args.minibatch):
            idx = order[s:s + args.minibatch]
            _, logp, entropy, value = _evaluate(net, b["x"][idx], b["mask"][idx], w_all[idx], b["actions"][idx])
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
    parser = argparse.ArgumentParser(prog="python -m socialgym.baselines.ppo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    docs = _field_docs()
    for f in dataclasses.fields(Args):
        flag = f"--{f.name.replace('_', '-')}"
        if f.type in ("bool", bool):
            parser.add_argument(flag, action="store_true", help=docs.get(f.name))
        else:
            kind = {"int": int, "float": float, "str": str}[f.type if isinstance(f.type, str) else f.type.__name__]
            parser.add_argument(flag, type=kind, default=f.default, help=docs.get(f.name))
    return Args(**vars(parser.parse_args(argv)))


def _field_docs() -> dict[str, str]:
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
    result = train(args)
    last = result["log"][-1]
    print(f"trained {args.iterations} iterations in {last['seconds']:.1f} s; final mean return "
          f"{last['return_mean']:.3f}; saved {result['model']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
