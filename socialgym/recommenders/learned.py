"""A learned ranker: the Plackett-Luce scoring model the platform's PPO trains, and the recommender
that deploys a trained one in any feed environment.

:class:`PlatformPolicy` holds two small networks. The **scorer** maps one (viewer, candidate)'s
ranking features (``socialgym.recommenders.features``) to a logit — the same network for every
pair, so it needs nothing but the features and deploys anywhere. The **value** network (used in
training only) maps a viewer's mean candidate features and the platform's aggregates to a value.
A feed is a Plackett-Luce slate: ``k`` candidates drawn one after another without replacement,
each with probability ``softmax(logit)`` over those left (Gumbel top-k); greedy play takes the
``k`` highest logits.

:class:`LearnedRanker` (registered as ``"learned"``, parameter ``path``: a ``policy.pt`` written
by ``socialgym.training.platform_ppo``) ranks the retrieved candidates by the scorer's logits:
``socialgym.parallel_env(recommender="learned", recommender_kwargs={"path": ".../policy.pt"})``.
Needs torch (imported when a policy is built or loaded).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from socialgym.recommenders.features import DEFAULT_CANDIDATES, N_FEATURES
from socialgym.recommenders.params import Param, ParamError
from socialgym.recommenders.seat import CandidateRanker

N_AGGREGATES = 8
"""Platform aggregates the value network reads (``socialgym.envs.platform.env.PLATFORM_FEATURES``)."""


def torch_module():
    import torch
    return torch


class PlatformPolicy:
    """The scorer and value networks (module docstring); :meth:`act` gives the platform tasks'
    ``scores`` action."""

    def __init__(self, hidden: int = 64, seed: int | None = 0, n_aggregates: int = N_AGGREGATES) -> None:
        """``seed``: seeds torch's global generator before the weights are drawn (None: leaves it)."""
        torch = torch_module()
        nn = torch.nn
        if seed is not None:
            torch.manual_seed(seed)
        self.scorer = nn.Sequential(nn.Linear(N_FEATURES, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh(),
                                    nn.Linear(hidden, 1))
        self.value = nn.Sequential(nn.Linear(N_FEATURES + n_aggregates, hidden), nn.Tanh(), nn.Linear(hidden, 1))
        self.hidden, self.n_aggregates = hidden, n_aggregates

    def parameters(self):
        return [*self.scorer.parameters(), *self.value.parameters()]

    def logits(self, feats, mask):
        """(..., C) logits of candidates with features ``feats`` (..., C, F); -inf where ``mask`` is 0."""
        return self.scorer(feats).squeeze(-1).masked_fill(mask <= 0, float("-inf"))

    def logits_values(self, feats, mask, platform):
        """(T, n, C) masked logits and (T, n) values for stacked observations."""
        torch = torch_module()
        pooled = (feats * mask[..., None]).sum(2) / mask.sum(2, keepdim=True).clamp(min=1)
        plat = platform[:, None, :].expand(*pooled.shape[:2], platform.shape[-1])
        return self.logits(feats, mask), self.value(torch.cat([pooled, plat], dim=-1)).squeeze(-1)

    @staticmethod
    def slate_logprob(logits, slate):
        """Plackett-Luce log-probability of ordered slates ``slate`` (T, n, k; -1 = no item)."""
        torch = torch_module()
        logp = torch.zeros(slate.shape[:2], dtype=logits.dtype)
        remaining = logits.clone()
        for j in range(slate.shape[2]):
            pick = slate[..., j]
            valid = pick >= 0
            index = pick.clamp(min=0)[..., None]
            norm = torch.logsumexp(remaining, dim=-1)
            chosen = remaining.gather(-1, index).squeeze(-1)
            logp = logp + torch.where(valid & torch.isfinite(norm), chosen - norm, torch.zeros_like(norm))
            remaining = remaining.scatter(-1, index, torch.where(valid[..., None], float("-inf"),
                                                                 remaining.gather(-1, index)))
        return logp

    @staticmethod
    def draw_slate(logits, k: int, generator=None, greedy: bool = False):
        """(..., k) candidate indices: Gumbel top-k (a Plackett-Luce draw) or the k best; -1 past
        the valid candidates."""
        torch = torch_module()
        keys = logits
        if not greedy:
            u = torch.rand(logits.shape, generator=generator).clamp(1e-9, 1 - 1e-9)
            keys = logits - torch.log(-torch.log(u))
        top = torch.topk(keys, min(k, logits.shape[-1]), dim=-1)
        return torch.where(torch.isfinite(top.values), top.indices, torch.full_like(top.indices, -1))

    def act(self, obs: dict, k: int, greedy: bool = True, generator=None) -> np.ndarray:
        """The ``scores`` action (n, C) for one observation of a platform task."""
        torch = torch_module()
        with torch.no_grad():
            feats, mask, _ = as_tensors([obs])
            slate = self.draw_slate(self.logits(feats, mask), k, generator, greedy)[0]
        return slate_scores(slate.numpy(), obs["mask"].shape)

    def save(self, path: Path, args: dict) -> None:
        torch = torch_module()
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save({"scorer": self.scorer.state_dict(), "value": self.value.state_dict(), "hidden": self.hidden,
                    "n_aggregates": self.n_aggregates, "args": dict(args)}, path)

    @classmethod
    def load(cls, path: str | Path) -> PlatformPolicy:
        torch = torch_module()
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"no trained platform policy at {path} (written by socialgym.training.platform_ppo)")
        state = torch.load(path, weights_only=True)
        with torch.random.fork_rng():            # the drawn weights are overwritten: leave torch's RNG as it was
            policy = cls(hidden=int(state["hidden"]), seed=None, n_aggregates=int(state["n_aggregates"]))
        policy.scorer.load_state_dict(state["scorer"])
        policy.value.load_state_dict(state["value"])
        return policy


def slate_scores(slate: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """Scores in [-1, 1] that make a platform task show ``slate`` (n, k) in order: 1 for the
    first, falling by position, -1 for candidates not drawn."""
    scores = np.full(shape, -1.0, np.float32)
    k = slate.shape[1]
    rows, pos = np.nonzero(slate >= 0)
    scores[rows, slate[rows, pos]] = 1.0 - pos / max(k, 1)
    return scores


def as_tensors(observations: list[dict]):
    """(candidates, mask, platform) of platform-task observations, stacked as torch tensors."""
    torch = torch_module()
    return (torch.as_tensor(np.stack([o["candidates"] for o in observations])),
            torch.as_tensor(np.stack([o["mask"] for o in observations])),
            torch.as_tensor(np.stack([o["platform"] for o in observations])))


class LearnedRanker(CandidateRanker):
    """Ranks the retrieved candidates by a trained :class:`PlatformPolicy`'s logits (greedy)."""

    name = "learned"
    PARAMS = {"path": Param("custom", required=True, check=lambda n, v: _check_path(v))}

    def __init__(self, path: str, candidates: int = DEFAULT_CANDIDATES, window: int = 3, stances: Any = None) -> None:
        super().__init__(candidates, window, stances)
        _check_path(path)
        self.path = str(path)
        self.policy = PlatformPolicy.load(path)

    def score_candidates(self, request, cand, feats, rng) -> np.ndarray:
        torch = torch_module()
        with torch.no_grad():
            return self.policy.logits(torch.as_tensor(feats), torch.as_tensor((cand >= 0).astype(np.float32))).numpy()


def _check_path(value: Any) -> None:
    if not isinstance(value, (str, Path)) or not str(value):
        raise ParamError("path", f"path must name a policy.pt file, got {value!r}")
