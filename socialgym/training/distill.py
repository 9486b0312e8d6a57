"""Behaviour cloning: a ``TorchPolicy`` network trained to choose what logged agents chose.

The data are decision logs (``socialgym.rundir.decisions``): numeric observations and the
structured choices of LLM (or any) agents written in the numeric encoding. The network is the
PPO baseline's (:class:`~socialgym.training.torch_policy.ActorCritic`), so the result is an
ordinary ``model.pt`` that ``TorchPolicy.load`` reads and a ``torch`` / ``distilled`` policy group
runs. Only the actor is trained: the loss is the cross-entropy of every component the choice
fixed (a COM's target slot, a new DM's recipient, each shown vote item ...), under the same
action masks the policy acts with. New DMs' recipients are learnt as the network addresses
peers: the author of a feed slot, or "someone not in my feed".

``agreement`` measures what behaviour cloning promises: on held-out decisions, how often the
network's most likely choice is the logged one, per decision (an act slot with every component
it fixed; one vote) and per component.

    args = Args(epochs=40)
    actor, stats = behaviour_clone(train_decisions, args)
    save_policy(Path("model.pt"), actor, layout, args)
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from socialgym.envs.feed.encoding import FEED_ITEM_FEATURES, FIELDS, DM_FEATURES, MaskCache
from socialgym.training.torch_policy import Actor, ActorCritic, Heads, RunningNorm, encode, torch

_AUTHOR, _PRESENT = FEED_ITEM_FEATURES.index("author"), FEED_ITEM_FEATURES.index("present")
_DM_PRESENT = DM_FEATURES.index("present")


@dataclass(frozen=True)
class Args:
    """Behaviour-cloning settings (stored whole in the model file)."""

    epochs: int = 100
    """Passes over the training decisions."""
    batch_size: int = 128
    lr: float = 2e-3
    hidden: int = 128
    """Width of the network's two hidden layers (as the PPO baseline's ``hidden``)."""
    weight_decay: float = 1e-5
    seed: int = 0


@dataclass
class Prepared:
    """One phase's decisions in the network's terms."""

    x: np.ndarray            # (n, features) raw features (encode)
    mask: np.ndarray         # (n, K, M) allowed values per head
    target: np.ndarray       # (n, K) the logged value per head
    weight: np.ndarray       # (n, K) 1 where the logged choice fixed the head and the mask allows it
    phase: int


def heads_for(layout) -> Heads:
    """The heads of a layout, peers addressed by observation, every topic index of the layout."""
    return Heads.for_layout(layout)


def prepare(decisions, heads: Heads) -> Prepared:
    """Features, masks, targets and weights of a phase's ``Decisions``. A target its mask forbids
    (e.g. a topic that entered the vocabulary later in that step) gets weight 0."""
    lay, obs = decisions.layout, decisions.obs
    phase = 0 if decisions.phase == "act" else 1

    def present(a, col):
        return (np.asarray(a)[..., col] > 0).sum(-1)
    n_feed, n_dms = present(obs["feed"], _PRESENT), present(obs["dms"], _DM_PRESENT)
    n_votes = present(obs["vote_items"], _PRESENT)
    first = np.asarray(obs["self"])[:, 0] == 1
    cache = MaskCache(lay)
    tuples = [cache.get(bool(phase), bool(f), int(a), int(b), int(c), int(t))
              for f, a, b, c, t in zip(first, n_feed, n_dms, n_votes, decisions.n_topics)]
    mask = heads.masks(tuples, obs["feed"], decisions.agent)
    target = np.array(decisions.action, np.int64, copy=True)
    weight = decisions.relevant.astype(np.float32)
    F = heads.feed_size
    authors = np.asarray(obs["feed"])[:, :, _AUTHOR].astype(np.int64)
    in_feed = (np.asarray(obs["feed"])[:, :, _PRESENT] > 0) & (authors != decisions.agent[:, None])
    for k in heads.peer_components:        # recipient index -> the feed slot of that agent, else F
        who = (decisions.agent + 1 + target[:, k]) % np.maximum(decisions.n_agents, 1)
        hit = in_feed & (authors == who[:, None])
        target[:, k] = np.where(hit.any(1), hit.argmax(1), F)
    rows = np.arange(len(target))[:, None]
    allowed = mask[rows, np.arange(heads.K)[None, :], np.minimum(target, heads.M - 1)] & (target < heads.M)
    weight = np.where(allowed, weight, 0.0).astype(np.float32)
    return Prepared(encode(obs), mask, np.minimum(target, heads.M - 1), weight, phase)


def behaviour_clone(decisions: dict, args: Args, heads: Heads | None = None) -> tuple[Actor, dict]:
    """Train a network on ``decisions`` (phase -> ``Decisions``); returns the actor (network, heads,
    feature normaliser) and training statistics (decisions per phase, final loss)."""
    present = [d for d in decisions.values() if len(d)]
    if not present:
        raise ValueError("no decisions to learn from")
    heads = heads or heads_for(present[0].layout)
    parts = [prepare(d, heads) for d in present]
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    norm = RunningNorm(parts[0].x.shape[1])
    norm.update(np.concatenate([p.x for p in parts]))
    net = ActorCritic(parts[0].x.shape[1], heads.K, heads.M, args.hidden)
    optimiser = torch.optim.Adam(net.actor.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    tensors = [(torch.from_numpy(norm(p.x)), torch.from_numpy(p.mask), torch.from_numpy(p.target),
                torch.from_numpy(p.weight)) for p in parts]
    last = float("nan")
    for _ in range(args.epochs):
        losses = []
        for x, mask, target, weight in tensors:
            order = torch.from_numpy(rng.permutation(len(x)))
            for start in range(0, len(x), args.batch_size):
                b = order[start:start + args.batch_size]
                logp, _ = net(x[b], mask[b])
                picked = logp.gather(-1, target[b].unsqueeze(-1)).squeeze(-1)
                loss = -(picked * weight[b]).sum(-1).mean()
                optimiser.zero_grad()
                loss.backward()
                optimiser.step()
                losses.append(float(loss.detach()))
        last = float(np.mean(losses)) if losses else last
    net.eval()
    actor = Actor(net, heads, norm, seed=args.seed)
    stats = {"decisions": {d.phase: len(d) for d in decisions.values()}, "final_loss": last,
             "args": dataclasses.asdict(args)}
    return actor, stats


@torch.no_grad()
def predict(actor: Actor, prepared: Prepared) -> np.ndarray:
    """The network's most likely value of every head (n, K)."""
    x = torch.from_numpy(actor.norm(prepared.x) if actor.norm is not None else prepared.x)
    logp, _ = actor.net(x, torch.from_numpy(prepared.mask))
    return logp.argmax(-1).numpy()


def agreement(actor: Actor, decisions: dict) -> dict:
    """How often the network's most likely choice equals the logged one, on ``decisions``.

    A *decision* is one act slot (it agrees when the type and every other component the logged
    choice fixed agree) or one shown vote item. Returns counts and shares per phase, overall,
    and per component field (``type``, ``target_slot``, ``recipient`` (as a peer), ``reply_slot``,
    ``topic``, ``tone``, ``mention``, ``vote``)."""
    heads = actor.heads
    out: dict = {"fields": {}}
    hits_all = total_all = 0
    field_hits: dict[str, list[int]] = {}
    for d in decisions.values():
        if not len(d):
            continue
        p = prepare(d, heads)
        same = predict(actor, p) == p.target
        fixed = p.weight > 0
        lay = d.layout
        if p.phase == 0:
            slots = np.arange(lay.act_length).reshape(lay.n_actions, lay.slot_width)
            per_slot = [(fixed[:, s[0]], (same[:, s] | ~fixed[:, s]).all(1)) for s in slots]
            decided = np.concatenate([f for f, _ in per_slot])
            agreed = np.concatenate([a for _, a in per_slot])[decided]
            names = [FIELDS[c] if c < len(FIELDS) else "mention" for c in range(lay.slot_width)] * lay.n_actions
        else:
            decided = fixed[:, lay.act_length:].ravel()
            agreed = same[:, lay.act_length:].ravel()[decided]
            names = [None] * lay.act_length + ["vote"] * lay.vote_feed_size
        n, hits = int(decided.sum()), int(agreed.sum())
        out[d.phase] = {"decisions": n, "agreed": hits, "share": hits / n if n else float("nan")}
        hits_all, total_all = hits_all + hits, total_all + n
        for c, name in enumerate(names):
            if name is not None and fixed[:, c].any():
                h = field_hits.setdefault(name, [0, 0])
                h[0] += int(same[fixed[:, c], c].sum())
                h[1] += int(fixed[:, c].sum())
    out["overall"] = {"decisions": total_all, "agreed": hits_all,
                      "share": hits_all / total_all if total_all else float("nan")}
    out["fields"] = {k: {"components": v[1], "share": v[0] / v[1]} for k, v in field_hits.items()}
    return out
