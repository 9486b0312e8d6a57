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

- **vectorised rollouts**: ``num_envs`` environments step together through ``step_arrays``,
  one network call for all their agents;
- **team spirit** (as in OpenAI Five): the reward an agent learns from is
  ``(1 - team_spirit) * own + team_spirit * mean over its population``. Likes, mentions and
  supportive messages pay the *receiver*, so with purely selfish rewards a shared policy has no
  reason to give them; the reported returns are always the agents' own;
- **observation normalisation** (running mean and variance, clipped), **learning-rate
  annealing**, large batches, separate actor and critic bodies;
- **peers addressed by what is observed**: the DM-recipient head chooses *the author of feed
  slot j* (j < F) or *a random other agent* (F), not an agent index, so the network's size
  does not depend on the population and a policy trained at 20 agents acts at 50.

    python -m socialgym.baselines.ppo --task mixed                  # the mixed task (500 iterations)
    python -m socialgym.baselines.ppo --task SOC --iterations 100
    python -m socialgym.baselines.ppo --help

Writes ``OUT/model.pt`` (weights, normaliser and the per-agent interface they fit),
``OUT/train_log.csv`` (one row per iteration; ``eval_return`` every ``eval_every``) and
``OUT/args.json``; ``--wandb`` logs the same rows to wandb. ``TorchPolicy.load(OUT/model.pt)``
plugs the result into any run (batched policy protocol).
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
from socialgym.envs.feed.encoding import DM_FEATURES, FEED_ITEM_FEATURES, SELF_FEATURES

try:
    import torch
    from torch import nn
except ImportError as err:      # the core package does not need torch
    raise ImportError("the PPO baseline needs torch: pip install torch==2.13.0 (CPU build), "
                      "or pip install 'socialgym[torch]'") from err

MODEL_FORMAT = "socialgym-ppo-2"
VALIDATION_SEED = 20_000
"""Seeds of the in-training evaluation (``eval_return``); the tables' held-out seeds start at
10,000 (``socialgym.experiments.evaluate``) and training seeds are drawn at or above 2**20."""
INTERFACE = ("n_actions", "feed_size", "dm_inbox_size", "max_topics", "vote_feed_size")
"""The per-agent action layout a network fits; the population size is not part of it."""


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
    iterations: int = 500
    """PPO iterations (collect num_envs episodes, then update)."""
    num_envs: int = 16
    """Environments stepped together; each iteration collects one episode from each."""
    learning_rate: float = 1e-3
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
    epochs: int = 4
    """Passes over each batch."""
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
    threads: int = 1
    """torch CPU threads (0: torch's default; small networks run fastest on one)."""


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


# ---------------------------------------------------------------------------- features
def feature_size(feed: int, dms: int, votes: int) -> int:
    return 14 + 8 * feed + 4 * dms + 8 * votes


_SELF = {name: i for i, name in enumerate(SELF_FEATURES)}
_ITEM = {name: i for i, name in enumerate(FEED_ITEM_FEATURES)}
_DM = {name: i for i, name in enumerate(DM_FEATURES)}
_LAMBDAS_AND_LAST = [_SELF[f"lambda_{c}"] for c in REWARD_NAMES] + [_SELF[f"last_{c}"] for c in REWARD_NAMES] \
    + [_SELF["last_total"]]


def encode(obs: dict) -> np.ndarray:
    """Stacked numeric observations -> (n, features) float32.

    Author and topic ids are dropped (identifiers, not magnitudes); counts are log-scaled,
    times are fractions of the episode (so the features mean the same at any horizon). Kept:
    progress, round-1 flag, phase, the 5 lambdas, the 6 last rewards; per feed and vote item
    present, is_comment, likes, dislikes, age, tie_out, tie_in, mentions_me; per DM present,
    sentiment, tie_out, tie_in. Features are picked by their names in
    ``socialgym.envs.feed.encoding``.
    """
    s = np.asarray(obs["self"], np.float32)
    n = len(s)
    rnd = s[:, _SELF["round"]: _SELF["round"] + 1]
    scale = 1.0 / np.maximum(s[:, _SELF["max_rounds"]: _SELF["max_rounds"] + 1], 1.0)
    head = np.concatenate([rnd * scale, (rnd == 1).astype(np.float32), s[:, [_SELF["phase"]]],
                           s[:, _LAMBDAS_AND_LAST]], axis=1)

    def items(x):
        x = np.asarray(x, np.float32)
        feats = [x[..., _ITEM["present"]], x[..., _ITEM["is_comment"]],
                 np.log1p(np.maximum(x[..., _ITEM["likes"]], 0)), np.log1p(np.maximum(x[..., _ITEM["dislikes"]], 0)),
                 x[..., _ITEM["age"]] * scale, x[..., _ITEM["tie_out"]], x[..., _ITEM["tie_in"]],
                 x[..., _ITEM["mentions_me"]]]
        return np.stack(feats, axis=-1).reshape(n, -1)

    d = np.asarray(obs["dms"], np.float32)
    dms = np.stack([d[..., _DM[k]] for k in ("present", "sentiment", "tie_out", "tie_in")], axis=-1).reshape(n, -1)
    return np.concatenate([head, items(obs["feed"]), dms, items(obs["vote_items"])], axis=1)


def stack_observations(observations: dict[str, Any], agents: list[str]) -> dict:
    """Per-agent numeric observations (``obs_format="numeric"``, or ``"both"``'s ``obs["numeric"]``)
    -> the stacked arrays ``step_arrays`` returns."""
    rows = [observations[a].get("numeric", observations[a]) for a in agents]
    out = {k: np.stack([np.asarray(r[k], np.float32) for r in rows]) for k in ("self", "feed", "dms", "vote_items")}
    out["phase"] = int(rows[0]["phase"]) if rows else 0
    out["action_mask"] = [observations[a]["action_mask"] for a in agents]
    return out


class RunningNorm:
    """Running mean and variance of the features (parallel-variance merge of each batch)."""

    def __init__(self, size: int, clip: float = 5.0) -> None:
        self.mean, self.var, self.count, self.clip = np.zeros(size), np.ones(size), 1e-4, clip

    def update(self, x: np.ndarray) -> None:
        m, v, k = x.mean(0), x.var(0), len(x)
        delta, total = m - self.mean, self.count + k
        self.mean = self.mean + delta * k / total
        self.var = (self.var * self.count + v * k + delta ** 2 * self.count * k / total) / total
        self.count = total

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return np.clip((x - self.mean) / np.sqrt(self.var + 1e-8), -self.clip, self.clip).astype(np.float32)


# ---------------------------------------------------------------------------- actions
class Heads:
    """The MultiDiscrete action as K categorical heads padded to the largest size M.

    ``peer_components`` are the DM-recipient components the network addresses by observation:
    value j < F is the author of feed slot j, value F a random other agent
    (:meth:`to_env` turns them into the environment's recipient index).
    """

    def __init__(self, nvec: np.ndarray, act_length: int, peer_components: tuple[int, ...] = (),
                 feed_size: int = 0, widths: dict[int, int] | None = None) -> None:
        self.env_nvec = np.asarray(nvec, np.int64).copy()
        self.nvec = self.env_nvec.copy()
        self.peer_components, self.feed_size = tuple(int(k) for k in peer_components), int(feed_size)
        self.nvec[list(self.peer_components)] = self.feed_size + 1
        self.widths = {int(k): int(w) for k, w in (widths or {}).items()}
        for k, w in self.widths.items():     # heads narrower than the env's component (topics in use)
            self.nvec[k] = min(w, self.nvec[k])
        self.K, self.M = len(self.nvec), int(self.nvec.max())
        self.act_length = act_length
        self.padding = np.arange(self.M)[None, :] < self.nvec[:, None]          # (K, M)
        phase = np.zeros((2, self.K), np.float32)
        phase[0, :act_length] = 1.0                                             # act step: act components
        phase[1, act_length:] = 1.0                                             # vote step: votes
        self.phase_weight = phase

    @classmethod
    def for_layout(cls, layout, n_topics: int | None = None) -> "Heads":
        """Heads of an environment layout, recipients addressed by observation; with
        ``n_topics``, the topic heads cover only the first ``n_topics`` topic indices (numeric
        actions cannot add topics, so a task's vocabulary is its configured list)."""
        slots = range(layout.n_actions)
        widths = {s * layout.slot_width + 4: n_topics for s in slots} if n_topics else None
        return cls(layout.nvec, layout.act_length, tuple(s * layout.slot_width + 2 for s in slots),
                   layout.feed_size, widths)

    def masks(self, mask_tuples: list, feed: np.ndarray | None = None, me: np.ndarray | None = None) -> np.ndarray:
        """(n, K, M) bool from the environment's per-agent mask tuples (expanded once per
        distinct tuple). With peer components, ``feed`` (n, F, features) gives the peers: feed
        slots present and not one's own (``me``: each row's agent index, default the row number),
        and always 'a random other' (F); where the env allows no DM choice the peer head allows
        only F."""
        return self.masks_and_dm(mask_tuples, feed, me)[0]

    def masks_and_dm(self, mask_tuples: list, feed: np.ndarray | None = None,
                     me: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`masks`, and (n, number of peer components) bool: whether each recipient is a
        real choice in the environment (False where DM is not possible, e.g. round 1)."""
        P = len(self.peer_components)
        if not mask_tuples:
            return np.zeros((0, self.K, self.M), bool), np.zeros((0, P), bool)
        ids = np.fromiter((id(m) for m in mask_tuples), np.int64, len(mask_tuples))
        unique, first, inverse = np.unique(ids, return_index=True, return_inverse=True)
        rows = np.zeros((len(unique), self.K, self.M), bool)
        dm = np.zeros((len(unique), P), bool)
        peer_at = {k: j for j, k in enumerate(self.peer_components)}
        for r, i in enumerate(first.tolist()):
            for k, m in enumerate(mask_tuples[i]):
                if k in peer_at:
                    dm[r, peer_at[k]] = len(m) > 1 and int(np.count_nonzero(m)) > 1
                else:
                    width = min(len(m), self.M)
                    rows[r, k, :width] = np.asarray(m[:width], bool)
        rows, dm = rows[inverse], dm[inverse]
        if P:
            n, F = len(rows), self.feed_size
            feed = np.asarray(feed, np.float32)
            me = (np.arange(n) if me is None else np.asarray(me))[:, None]
            peers = np.zeros((n, F + 1), bool)
            peers[:, :F] = (feed[:, :F, _ITEM["present"]] > 0) & (feed[:, :F, _ITEM["author"]] != me)
            peers[:, F] = True
            only_random = np.zeros(F + 1, bool)
            only_random[F] = True
            for j, k in enumerate(self.peer_components):
                rows[:, k, : F + 1] = np.where(dm[:, j, None], peers, only_random)
        rows &= self.padding
        # every env mask row allows a value (unused components allow their no-op) except round 1
        # with an empty topic list, where no numeric action is valid: take 0 there, the env says why
        rows[..., 0] |= ~rows.any(-1)
        return rows, dm

    def to_env(self, actions: np.ndarray, feed: np.ndarray, dm: np.ndarray, me: np.ndarray, n_agents: int,
               rng: np.random.Generator) -> np.ndarray:
        """Policy actions (n, K) -> the environment's numeric actions: each peer value becomes
        the recipient index ``(author - me - 1) mod n`` of the chosen feed author, or a uniform
        random other agent; where no DM is possible, the no-op 0."""
        out = np.array(actions, np.int64, copy=True)
        if not self.peer_components:
            return out
        rows = np.arange(len(out))
        authors = np.asarray(feed, np.float32)[:, :, _ITEM["author"]].astype(np.int64)
        for j, k in enumerate(self.peer_components):
            p = out[:, k]
            chosen = authors[rows, np.minimum(p, self.feed_size - 1)]
            random_other = rng.integers(0, max(1, n_agents - 1), size=len(out))
            value = np.where(p < self.feed_size, (chosen - me - 1) % n_agents, random_other)
            out[:, k] = np.where(dm[:, j], value, 0)
        return out


def _layer(i: int, o: int, std: float = float(np.sqrt(2))) -> nn.Linear:
    layer = nn.Linear(i, o)
    nn.init.orthogonal_(layer.weight, std)
    nn.init.zeros_(layer.bias)
    return layer


class ActorCritic(nn.Module):
    """Actor and critic with separate bodies; K masked categorical heads (padded to M)."""

    def __init__(self, n_features: int, K: int, M: int, hidden: int) -> None:
        super().__init__()
        self.K, self.M, self.n_features = K, M, n_features
        self.actor = nn.Sequential(_layer(n_features, hidden), nn.Tanh(), _layer(hidden, hidden), nn.Tanh(),
                                   _layer(hidden, K * M, 0.01))
        self.critic = nn.Sequential(_layer(n_features, hidden), nn.Tanh(), _layer(hidden, hidden), nn.Tanh(),
                                    _layer(hidden, 1, 1.0))

    def forward(self, x: torch.Tensor, mask: torch.Tensor):
        logits = self.actor(x).view(-1, self.K, self.M).masked_fill(~mask, -1e9)
        return torch.log_softmax(logits, dim=-1), self.critic(x).squeeze(-1)


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


class Actor:
    """What acting needs, shared by training, evaluation and :class:`TorchPolicy`: the network,
    its heads and normaliser, a device and the random streams (torch for the heads, numpy for
    'a random other agent')."""

    def __init__(self, net: ActorCritic, heads: Heads, norm: RunningNorm | None, device: str = "cpu",
                 seed: int = 0) -> None:
        self.net, self.heads, self.norm, self.device = net, heads, norm, torch.device(device)
        self.seed_streams(seed)

    def seed_streams(self, seed: int) -> None:
        self.generator = torch.Generator(device=self.device).manual_seed(seed)
        self.rng = np.random.default_rng(seed)

    def features(self, stacked: dict) -> np.ndarray:
        raw = encode(stacked)
        return self.norm(raw) if self.norm is not None else raw

    @torch.no_grad()
    def step(self, stacked_list: list[dict], *, me: list[np.ndarray] | None = None,
             n_agents: list[int] | None = None, deterministic: bool = False) -> dict:
        """One decision of every agent of several environments (lists of stacked observations, one
        phase). Returns the policy's tensors (for training) and each environment's action matrix."""
        x_np = np.concatenate([encode(o) for o in stacked_list])
        x = self.norm(x_np) if self.norm is not None else x_np
        me = me if me is not None else [np.arange(len(o["self"])) for o in stacked_list]
        masks, dms = zip(*(self.heads.masks_and_dm(o["action_mask"], o["feed"], mine)
                           for o, mine in zip(stacked_list, me)))
        mask = np.concatenate(masks)
        phase = int(stacked_list[0]["phase"])
        xt = torch.from_numpy(x).to(self.device)
        mt = torch.from_numpy(mask).to(self.device)
        w = torch.from_numpy(self.heads.phase_weight[phase]).to(self.device).expand(len(xt), -1)
        actions, logp, _, value = _evaluate(self.net, xt, mt, w, generator=self.generator, greedy=deterministic)
        a_np = actions.cpu().numpy().astype(np.int64)
        env_actions, start = [], 0
        for e, o in enumerate(stacked_list):
            n = len(o["self"])
            rows = slice(start, start + n)
            pop = n_agents[e] if n_agents is not None else n
            env_actions.append(self.heads.to_env(a_np[rows], o["feed"], dms[e], me[e], pop, self.rng))
            start += n
        return {"raw": x_np, "x": xt, "mask": mt, "phase": phase, "actions": actions, "logp": logp,
                "value": value, "env_actions": env_actions}


# ---------------------------------------------------------------------------- the policy
def _population_size(mask_tuple, heads: Heads) -> int:
    """The population size an observation comes from: its recipient mask has n - 1 values."""
    return len(mask_tuple[heads.peer_components[0]]) + 1 if heads.peer_components else 0


class TorchPolicy:
    """A trained network in the batched policy protocol: ``act({agent: obs}) -> {agent: action}``.

    Needs numeric observations (``obs_format="numeric"``, or ``"both"`` to mix with LLM and
    scripted agents that read the structured part) with action masks, from an environment with
    the per-agent interface it was trained on (actions per round, feed, inbox and vote sizes,
    topic width); any population size.
    """

    def __init__(self, actor: Actor, interface: dict, *, deterministic: bool = False, seed: int = 0) -> None:
        self.actor, self.interface = actor, dict(interface)
        self.deterministic, self.seed = deterministic, seed
        self.actor.net.eval()
        self.actor.seed_streams(seed)

    @property
    def net(self) -> ActorCritic:
        return self.actor.net

    @classmethod
    def load(cls, path: str | Path, *, deterministic: bool = False, seed: int = 0) -> "TorchPolicy":
        data = read_model_file(path)
        try:
            heads = Heads(np.asarray(data["env_nvec"], dtype=np.int64), data["act_length"],
                          tuple(data["peer_components"]), data["interface"]["feed_size"],
                          {int(k): int(w) for k, w in data["widths"].items()})
            net = ActorCritic(data["n_features"], heads.K, heads.M, data["hidden"])
            net.load_state_dict(data["state_dict"])
            norm = None
            if data["obs_mean"] is not None:
                norm = RunningNorm(data["n_features"])
                norm.mean, norm.var = np.asarray(data["obs_mean"], float), np.asarray(data["obs_var"], float)
                if norm.mean.shape != (data["n_features"],) or norm.var.shape != (data["n_features"],):
                    raise ValueError("normaliser statistics of the wrong length")
        except (RuntimeError, TypeError, ValueError, IndexError, KeyError) as exc:
            first = str(exc).strip().splitlines()[0][:120] if str(exc).strip() else type(exc).__name__
            raise ValueError(f"{path}: its weights do not fit the network it describes ({first})") from None
        return cls(Actor(net, heads, norm), data["interface"], deterministic=deterministic, seed=seed)

    def check_env(self, env) -> None:
        """Raise a clear error if ``env``'s per-agent interface differs from the training one."""
        base = getattr(env, "unwrapped", env)
        lay = dataclasses.asdict(base.layout)
        diff = {k: (self.interface.get(k), lay.get(k)) for k in INTERFACE if lay.get(k) != self.interface.get(k)}
        if diff:
            raise ValueError(f"this policy was trained on another layout; (trained, env): {diff}")
        if base.config.obs_format == "structured" or not base.config.action_masks:
            raise ValueError("TorchPolicy needs obs_format='numeric' or 'both' and action_masks=True")

    def reset(self) -> None:
        """Nothing to clear: the network keeps no memory. The random streams run on (they are
        seeded once, at construction), so successive episodes are independent draws, as for
        the scripted policies."""

    # checkpoints of a run pickle the policy; torch generators do not pickle, their state does
    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["actor"] = {**self.actor.__dict__, "generator": self.actor.generator.get_state(),
                          "device": str(self.actor.device)}
        return state

    def __setstate__(self, state: dict) -> None:
        saved = dict(state["actor"])
        actor = Actor.__new__(Actor)
        generator = torch.Generator()
        generator.set_state(saved.pop("generator"))
        actor.__dict__.update({**saved, "generator": generator, "device": torch.device(saved["device"])})
        self.__dict__.update({**state, "actor": actor})

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
        me = []
        for a in agents:
            head, _, index = str(a).rpartition("_")
            if head != "agent" or not index.isdigit():
                raise ValueError(f"TorchPolicy acts for agents named agent_<i>, got {a!r}")
            me.append(int(index))
        stacked = stack_observations(observations, agents)
        n = _population_size(stacked["action_mask"][0], self.actor.heads) or len(agents)
        actions = self.actor.step([stacked], me=[np.asarray(me)], n_agents=[n],
                                  deterministic=self.deterministic)["env_actions"][0]
        return {a: actions[i] for i, a in enumerate(agents)}

    def act_arrays(self, stacked: dict) -> np.ndarray:
        """Stacked observations of a whole population (as ``step_arrays`` returns) -> the (n, L)
        action matrix."""
        x = encode(stacked)
        if x.shape[1] != self.net.n_features:
            raise ValueError(f"observation has {x.shape[1]} features; the policy expects "
                             f"{self.net.n_features} (another feed/inbox/vote size?)")
        return self.actor.step([stacked], deterministic=self.deterministic)["env_actions"][0]


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
    if isinstance(data, dict) and data.get("format") == "socialgym-ppo-1":
        raise ValueError(f"{path} was written by an older socialgym (format socialgym-ppo-1, recipients by "
                         "index); retrain it with python -m socialgym.baselines.ppo")
    if not isinstance(data, dict) or data.get("format") != MODEL_FORMAT:
        raise ValueError(f"{path} is not a socialgym PPO model file")
    fields = {"state_dict": dict, "env_nvec": list, "act_length": int, "peer_components": list, "widths": dict, "n_features": int,
              "hidden": int, "interface": dict, "args": dict, "obs_mean": (list, type(None)),
              "obs_var": (list, type(None))}
    for name, kind in fields.items():
        if not isinstance(data.get(name), kind) or isinstance(data.get(name), bool):
            kinds = kind if isinstance(kind, tuple) else (kind,)
            raise ValueError(f"{path} is not a complete socialgym PPO model file: {name!r} is missing or not "
                             f"a {' or '.join(k.__name__ for k in kinds)}")
    if set(data["interface"]) != set(INTERFACE):
        raise ValueError(f"{path} is not a complete socialgym PPO model file: 'interface' must name {INTERFACE}")
    return data


def save_policy(path: Path, actor: Actor, layout, args: Args) -> None:
    tmp = path.with_suffix(".tmp")
    lay = dataclasses.asdict(layout)
    norm = actor.norm
    torch.save({"format": MODEL_FORMAT, "state_dict": {k: v.cpu() for k, v in actor.net.state_dict().items()},
                "env_nvec": [int(v) for v in layout.nvec], "act_length": int(layout.act_length),
                "peer_components": list(actor.heads.peer_components),
                "widths": {str(k): w for k, w in actor.heads.widths.items()}, "n_features": actor.net.n_features,
                "hidden": args.hidden, "interface": {k: int(lay[k]) for k in INTERFACE},
                "obs_mean": None if norm is None else norm.mean.tolist(),
                "obs_var": None if norm is None else norm.var.tolist(),
                "args": dataclasses.asdict(args)}, tmp)
    tmp.replace(path)


# ---------------------------------------------------------------------------- training
def rollout(envs: list, seeds: list[int], actor: Actor, *, team_spirit: float = 0.0, record: bool = True,
            deterministic: bool = False) -> dict:
    """One episode of every environment (reset with ``seeds``), all agents acting through
    ``actor``. Arrays are [step, env * agent]. ``returns``: each episode's mean λ-weighted return
    per agent; ``components``: per episode, the mean of each component summed over rounds."""
    stacked = [stack_observations(env.reset(seed=s)[0], env.possible_agents) for env, s in zip(envs, seeds)]
    n = len(envs[0].possible_agents)
    steps: dict[str, list] = {k: [] for k in ("raw", "x", "mask", "phase", "actions", "logp", "value", "reward")}
    returns = np.zeros((len(envs), n))
    components = np.zeros((len(envs), n, len(REWARD_NAMES)))
    done = False
    while not done:
        out = actor.step(stacked, deterministic=deterministic)
        rewards, stacked = [], []
        for e, env in enumerate(envs):
            obs, r, _, done, info = env.step_arrays(out["env_actions"][e])
            stacked.append(obs)
            r = np.asarray(r, np.float32)
            returns[e] += r
            if info.get("reward_components") is not None:
                components[e] += np.asarray(info["reward_components"])
            rewards.append((1.0 - team_spirit) * r + team_spirit * r.mean())
        if record:
            for k in ("raw", "x", "mask", "phase", "actions", "logp", "value"):
                steps[k].append(out[k])
            steps["reward"].append(torch.from_numpy(np.concatenate(rewards)).to(actor.device))
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
    envs = [make_env(args) for _ in range(args.num_envs)]
    validation = [make_env(args) for _ in range(args.eval_episodes)] if args.eval_every else []
    layout = envs[0].unwrapped.layout
    heads = Heads.for_layout(layout, len(envs[0].unwrapped.config.topics))
    n_features = feature_size(layout.feed_size, layout.dm_inbox_size, layout.vote_feed_size)
    net = ActorCritic(n_features, heads.K, heads.M, args.hidden).to(device)
    actor = Actor(net, heads, RunningNorm(n_features) if args.normalize_obs else None, device, args.seed)
    optimizer = torch.optim.Adam(net.parameters(), lr=args.learning_rate, eps=1e-5)
    phase_weight = torch.from_numpy(heads.phase_weight).to(device)
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
        stats = _update(net, optimizer, batch, phase_weight, args, actor.generator)
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


def _update(net, optimizer, b: dict, phase_weight: torch.Tensor, args: Args, generator) -> dict:
    n = len(b["adv"])
    adv = (b["adv"] - b["adv"].mean()) / (b["adv"].std() + 1e-8)
    w_all = phase_weight[b["phase"]]
    pl = vl = ent = kl = 0.0
    steps = 0
    for _ in range(args.epochs):
        order = torch.randperm(n, generator=generator, device=generator.device)
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
