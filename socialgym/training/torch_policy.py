"""The runtime of a trained PPO network: what loading a ``model.pt`` and acting with it needs.

``socialgym.training.ppo`` trains the network; this module holds what training and acting share,
and everything a trained policy needs without the training script:

- the **model file** (``MODEL_FORMAT``): :func:`save_policy` writes it, :func:`read_model_file`
  reads it with ``weights_only=True`` (tensors and plain values only, so opening a file from
  someone else runs no code); ``INTERFACE`` names the per-agent layout a network fits;
- the **features**: :func:`encode` turns stacked numeric observations
  (:func:`stack_observations`) into the network's input, :class:`RunningNorm` normalises them;
- the **actions**: :class:`Heads`, the MultiDiscrete action as masked categorical heads, peers
  addressed by what the agent observes (so a network acts at any population size);
- the **network**: :class:`ActorCritic`, and :func:`evaluate_actions` (log-probabilities,
  entropy and value; samples when no actions are given);
- :class:`Actor`, one decision of every agent of several environments, and :class:`TorchPolicy`,
  a trained network in the batched policy protocol (``TorchPolicy.load("runs/ppo/model.pt")``).
"""

from __future__ import annotations

import dataclasses
import os
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
INTERFACE = ("n_actions", "feed_size", "dm_inbox_size", "max_topics", "vote_feed_size")
"""The per-agent action layout a network fits; the population size is not part of it."""


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

    def phase_components(self, phase: int) -> tuple[slice, int]:
        """The components that matter at an act (0) or vote (1) step, and the widest of them."""
        which = slice(0, self.act_length) if phase == 0 else slice(self.act_length, self.K)
        return which, int(self.nvec[which].max())

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
        # x - logsumexp(x): the same as log_softmax, twice as fast on CPU for rows of a few values
        return logits - logits.logsumexp(-1, keepdim=True), self.critic(x).squeeze(-1)


def gumbel_argmax(logp: torch.Tensor, generator) -> torch.Tensor:
    """One sample per row of the last axis of log-probabilities (the Gumbel-max trick: faster
    on CPU than ``torch.multinomial`` for many rows of a few values; masked values, at -1e9,
    are never drawn)."""
    u = torch.rand(logp.shape, generator=generator, device=logp.device)
    return (logp - torch.log(-torch.log(u))).argmax(-1)


def phase_log_probs(net: ActorCritic, x, mask, components: tuple[slice, int]):
    """Log-probabilities of the heads that matter in one phase and the value: ``components`` is
    ``(slice of components, widest of them)`` (:meth:`Heads.phase_components`); only those heads
    are normalised (the rest of the decision is forced by the masks), which is what makes a
    vote step cheap. Returns ``(logp_all (n, k, width), value (n,))``."""
    which, width = components
    logits = net.actor(x).view(-1, net.K, net.M)[:, which, :width].masked_fill(~mask[:, which, :width], -1e9)
    return logits - logits.logsumexp(-1, keepdim=True), net.critic(x).squeeze(-1)


@torch.no_grad()
def sample_phase(net: ActorCritic, x, mask, components: tuple[slice, int], generator=None, greedy: bool = False):
    """Actions, log-probability and value of one decision of a single phase: the phase's heads
    are sampled (:func:`phase_log_probs`), every other component takes its one allowed value
    (the env's no-op for that phase). The log-probability equals :func:`evaluate_actions`' with
    the phase's weights."""
    logp_all, value = phase_log_probs(net, x, mask, components)
    chosen = logp_all.argmax(-1) if greedy else gumbel_argmax(logp_all, generator)
    actions = mask.to(torch.uint8).argmax(-1)
    actions[:, components[0]] = chosen
    return actions, logp_all.gather(-1, chosen.unsqueeze(-1)).squeeze(-1).sum(-1), value


def evaluate_phase(net: ActorCritic, x, mask, actions, components: tuple[slice, int]):
    """Log-probability, entropy and value of decisions of one phase (the PPO update's fast path;
    the same numbers as :func:`evaluate_actions` with that phase's weights)."""
    logp_all, value = phase_log_probs(net, x, mask, components)
    chosen = actions[:, components[0]]
    logp = logp_all.gather(-1, chosen.unsqueeze(-1)).squeeze(-1).sum(-1)
    which, width = components
    entropy = -(logp_all.exp() * logp_all.masked_fill(~mask[:, which, :width], 0.0)).sum(-1).sum(-1)
    return logp, entropy, value


def evaluate_actions(net: ActorCritic, x, mask, phase_w, actions=None, generator=None, greedy=False):
    """Log-probability, entropy (over the components that matter in this phase) and value; samples
    actions when none are given."""
    logp_all, value = net(x, mask)
    if actions is None:
        actions = logp_all.argmax(-1) if greedy else gumbel_argmax(logp_all, generator)
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
        actions, logp, value = sample_phase(self.net, xt, mt, self.heads.phase_components(phase), self.generator,
                                            deterministic)
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
        self.source: Path | None = None
        """The model file it was loaded from (:meth:`load`), named in its errors."""
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
        policy = cls(Actor(net, heads, norm), data["interface"], deterministic=deterministic, seed=seed)
        policy.source = Path(path)
        return policy

    def check_env(self, env) -> None:
        """Raise a clear error if ``env``'s per-agent interface differs from the training one."""
        base = getattr(env, "unwrapped", env)
        lay = dataclasses.asdict(base.layout)
        diff = {k: (self.interface.get(k), lay.get(k)) for k in INTERFACE if lay.get(k) != self.interface.get(k)}
        if diff:
            where = f"{self.source}: " if getattr(self, "source", None) else ""     # older pickles lack it
            raise ValueError(f"{where}this policy was trained on another layout; (trained, env): {diff}")
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


# ---------------------------------------------------------------------------- the model file
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
                         "index); retrain it with python -m socialgym.training.ppo")
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
    _check_finite(path, data)
    return data


def _check_finite(path: Path, data: dict) -> None:
    """A network with a NaN or infinite weight (a diverged training run, or a damaged file) acts
    on garbage: every choice it makes would be the same undefined argmax, so it is refused."""
    for name, tensor in data["state_dict"].items():
        if not isinstance(tensor, torch.Tensor):
            raise ValueError(f"{path} is not a complete socialgym PPO model file: state_dict[{name!r}] is not a tensor")
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            bad = int((~torch.isfinite(tensor)).sum())
            raise ValueError(f"{path}: weight {name!r} has {bad} of {tensor.numel()} values NaN or infinite "
                             "(a diverged or damaged model); retrain it")
    for name in ("obs_mean", "obs_var"):
        values = data[name]
        if values is None:
            continue
        try:
            array = np.asarray(values, dtype=float)
        except (TypeError, ValueError):
            raise ValueError(f"{path}: {name} holds values that are not numbers") from None
        if not np.isfinite(array).all() or (name == "obs_var" and (array < 0).any()):
            raise ValueError(f"{path}: {name} holds NaN, infinite{' or negative' if name == 'obs_var' else ''} "
                             "values (a diverged or damaged model); retrain it")


def save_policy(path: Path, actor: Actor, layout, args: Any) -> None:
    """Write ``actor`` (network, heads, normaliser) to ``path`` in ``MODEL_FORMAT``: ``layout`` is the
    environment's action layout, ``args`` the training ``Args`` (a dataclass, stored whole; its
    ``hidden`` is the network's width). Written to a new temporary file beside it (created
    exclusively: a link planted under any name is never written through), then renamed: no half file."""
    import tempfile

    path = Path(path)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    tmp = Path(name)
    lay = dataclasses.asdict(layout)
    norm = actor.norm
    model = {"format": MODEL_FORMAT, "state_dict": {k: v.cpu() for k, v in actor.net.state_dict().items()},
             "env_nvec": [int(v) for v in layout.nvec], "act_length": int(layout.act_length),
             "peer_components": list(actor.heads.peer_components),
             "widths": {str(k): w for k, w in actor.heads.widths.items()}, "n_features": actor.net.n_features,
             "hidden": args.hidden, "interface": {k: int(lay[k]) for k in INTERFACE},
             "obs_mean": None if norm is None else norm.mean.tolist(),
             "obs_var": None if norm is None else norm.var.tolist(),
             "args": dataclasses.asdict(args)}
    try:
        os.chmod(tmp, 0o644)
        torch.save(model, tmp)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    tmp.replace(path)

