"""Matrix factorisation on implicit feedback, updated incrementally after every round (torch).

Why this model. Items on this platform are posts and comments created every round, so an
agent x item matrix is always cold: by the time an item could be recommended it has at most
the votes of its own round. The interactions that persist are agent x author and agent x
topic, so an item's latent vector is composed from its author's and its topic's:

    score(v, item) = u_v . (a_author + t_topic) + b_author + b_topic

Feedback is implicit and the platform knows every exposure, so each shown item (act-phase feed
and vote-phase items) is a training example: positive if the viewer commented on it or liked
it, negative otherwise (a dislike is a negative with weight ``dislike_weight``). Loss: weighted
binary cross-entropy with L2 regularisation; positives are re-weighted by the
negative/positive ratio (capped) so sparse engagement is not drowned out.

Incremental training: after every round the model takes ``epochs`` passes of Adam over this
round's exposures plus those of the previous ``replay_rounds - 1`` rounds, starting from the
current parameters (warm start). New agents/topics get fresh rows.

Why torch and not a CF library: the well-kept implicit-feedback libraries (e.g. ``implicit``)
factorise a fixed user x item matrix and treat every unobserved cell as a weak negative. Here
items are always new (so composed author/topic factors are needed), the true negatives are the
observed exposures, and training must warm-start every round — a few lines of torch, CPU-only,
deterministic under the environment's seed. torch is an optional extra
(``pip install socialgym[torch]``); the other recommenders need only numpy.
"""

from __future__ import annotations

import importlib.util
import sys
from collections import deque

import numpy as np

from socialgym.platform.actions import COM
from socialgym.recommenders.base import FeedRequest
from socialgym.recommenders.params import Param, check_own, limited
from socialgym.recommenders.scored import ScoredRecommender

TORCH_MISSING = ("the 'mf' recommender needs torch: pip install 'socialgym[torch]' "
                 "(or pip install torch==2.13.0 for the CPU build)")


def _torch():
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise ImportError(TORCH_MISSING) from exc
    return torch


def check_torch() -> None:
    """The ImportError that building the model would raise when torch is not installed, found
    without importing torch (``importlib.util.find_spec``)."""
    if "torch" in sys.modules:
        return
    try:
        found = importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise ImportError(TORCH_MISSING)


class MatrixFactorization(ScoredRecommender):
    """Implicit-feedback MF over viewer x (author + topic) factors; see the module docstring.

    dim: latent size. epochs / lr / weight_decay / batch_size: Adam passes per round over the
    replayed exposures. replay_rounds: how many recent rounds of exposures each update trains
    on. dislike_weight: weight of a disliked exposure (a negative). max_pos_weight: cap on the
    positive re-weighting. init_scale: std of the initial factors.
    """

    name = "mf"
    # checked before torch is imported: ``MatrixFactorization.check_params(dim=10**8)`` needs no torch
    PARAMS = {
        "dim": limited("int", "dim", 1), "epochs": limited("int", "epochs", 1),
        "lr": Param("number", low=0), "weight_decay": Param("number", low=0),
        "batch_size": limited("int", "batch_size", 1), "replay_rounds": limited("int", "replay_rounds", 1),
        "dislike_weight": Param("number", low=0), "max_pos_weight": Param("number", low=0),
        "init_scale": Param("number", low=0),
    }

    def __init__(self, dim: int = 16, epochs: int = 2, lr: float = 0.05, weight_decay: float = 1e-4,
                 batch_size: int = 32768, replay_rounds: int = 3, dislike_weight: float = 2.0,
                 max_pos_weight: float = 20.0, init_scale: float = 0.1, **kwargs) -> None:
        super().__init__(**kwargs)
        check_own(MatrixFactorization, dim=dim, epochs=epochs, lr=lr, weight_decay=weight_decay,
                  batch_size=batch_size, replay_rounds=replay_rounds, dislike_weight=dislike_weight,
                  max_pos_weight=max_pos_weight, init_scale=init_scale)
        self.dim, self.epochs, self.lr = int(dim), int(epochs), float(lr)
        self.weight_decay, self.batch_size = float(weight_decay), int(batch_size)
        self.replay_rounds, self.dislike_weight = int(replay_rounds), float(dislike_weight)
        self.max_pos_weight, self.init_scale = float(max_pos_weight), float(init_scale)
        self.torch = _torch()
        self.reset()

    # ---- state ---------------------------------------------------------------------------------
    def reset(self) -> None:
        self.params: dict | None = None          # name -> torch tensor (leaf, requires grad)
        self.optimizer = None
        self.replay: deque = deque(maxlen=self.replay_rounds)
        self.updates = 0
        self._numpy_cache: dict | None = None

    def _ensure(self, n_agents: int, n_topics: int, gen) -> None:
        torch = self.torch
        n_topics = max(n_topics, 1)
        if self.params is not None and n_topics <= self.params["topic"].shape[0]:
            return
        def init(rows):  # noqa: E306
            return torch.randn(rows, self.dim, generator=gen, dtype=torch.float32) * self.init_scale
        if self.params is None:
            # topic factors start at zero: no topic is favoured before any feedback, so early
            # lists mix topics (the author factors differ) and any cocoon is learnt, not seeded
            self.params = {"user": init(n_agents), "author": init(n_agents),
                           "topic": torch.zeros(n_topics, self.dim),
                           "b_author": torch.zeros(n_agents), "b_topic": torch.zeros(n_topics)}
        else:  # the vocabulary grew: new topic rows, old ones kept
            extra = n_topics - self.params["topic"].shape[0]
            self.params["topic"] = torch.cat([self.params["topic"].detach(), torch.zeros(extra, self.dim)])
            self.params["b_topic"] = torch.cat([self.params["b_topic"].detach(), torch.zeros(extra)])
        for p in self.params.values():
            p.requires_grad_(True)
        self.optimizer = torch.optim.Adam(list(self.params.values()), lr=self.lr)
        self._numpy_cache = None

    # ---- learning ------------------------------------------------------------------------------
    def update(self, content, batch, rng) -> None:
        torch = self.torch
        gen = torch.Generator().manual_seed(int(rng.integers(2 ** 62)))
        n = batch.n_agents
        topic_col, author_col = content.column("topic"), content.column("author")
        self._ensure(n, int(topic_col.max(initial=0)) + 1, gen)

        shown = np.concatenate([batch.feed, batch.vote_feed], axis=1)
        viewer = np.broadcast_to(np.arange(n)[:, None], shown.shape)[shown >= 0].astype(np.int64)
        item = shown[shown >= 0]
        # engagement of this round: comments (on feed items) and votes (on vote items)
        key_n = len(content)
        engaged_keys = np.concatenate([
            batch.sender[batch.kind == COM].astype(np.int64) * key_n + batch.target_id[batch.kind == COM],
            batch.vote_voter[batch.vote_value > 0].astype(np.int64) * key_n + batch.vote_item[batch.vote_value > 0]])
        disliked_keys = batch.vote_voter[batch.vote_value < 0].astype(np.int64) * key_n + \
            batch.vote_item[batch.vote_value < 0]
        keys = viewer * key_n + item
        label = np.isin(keys, engaged_keys).astype(np.float32)
        weight = np.where(np.isin(keys, disliked_keys), self.dislike_weight, 1.0).astype(np.float32)
        self.replay.append((viewer, author_col[item].astype(np.int64), topic_col[item].astype(np.int64),
                            label, weight))
        self._train(gen)
        self.updates += 1
        self._numpy_cache = None

    def _train(self, gen) -> None:
        torch = self.torch
        v, a, t, y, w = (torch.from_numpy(np.concatenate(col)) for col in zip(*self.replay))
        if len(v) == 0:
            return
        n_pos = float(y.sum())
        pos_weight = min(self.max_pos_weight, max(1.0, (len(y) - n_pos) / max(n_pos, 1.0)))
        w = torch.where(y > 0, w * pos_weight, w)
        p = self.params
        embed = torch.nn.functional.embedding
        for _ in range(self.epochs):
            perm = torch.randperm(len(v), generator=gen)
            for start in range(0, len(v), self.batch_size):
                idx = perm[start:start + self.batch_size]
                vb, ab, tb = v[idx], a[idx], t[idx]
                # F.embedding: its backward is a fast dense scatter (plain indexing's is not)
                u_vec, a_vec, t_vec = embed(vb, p["user"]), embed(ab, p["author"]), embed(tb, p["topic"])
                bias = embed(ab, p["b_author"][:, None]) + embed(tb, p["b_topic"][:, None])
                logits = (u_vec * (a_vec + t_vec)).sum(1) + bias[:, 0]
                loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, y[idx], weight=w[idx])
                reg = self.weight_decay * (u_vec.square().sum(1) + a_vec.square().sum(1)
                                           + t_vec.square().sum(1)).mean()
                self.optimizer.zero_grad(set_to_none=True)
                (loss + reg).backward()
                self.optimizer.step()

    # ---- ranking -------------------------------------------------------------------------------
    def _arrays(self) -> dict:
        if self._numpy_cache is None:
            self._numpy_cache = {k: p.detach().numpy().copy() for k, p in self.params.items()}
        return self._numpy_cache

    def score(self, request: FeedRequest, viewers: np.ndarray, cand: np.ndarray) -> np.ndarray:
        if self.params is None:                  # before the first update: no preference yet
            return np.zeros(cand.shape)
        P = self._arrays()
        content = request.content
        user = P["user"][viewers]
        n_topics = P["topic"].shape[0]
        if cand.ndim == 2 and cand.strides[0] == 0:      # every viewer scores the same items
            author = content.column("author")[cand[0]]
            topic = np.minimum(content.column("topic")[cand[0]], n_topics - 1)
            item_vec = P["author"][author] + P["topic"][topic]
            return user @ item_vec.T + (P["b_author"][author] + P["b_topic"][topic])
        author = content.column("author")[cand]
        topic = np.minimum(content.column("topic")[cand], n_topics - 1)   # topics newer than the model
        # u.(a + t) = u.a + u.t: the topic term is a small (viewers, topics) product; the author
        # term gathers (rows, C, dim) factors, in blocks that stay a few MB.
        by_topic = user @ P["topic"].T
        out = by_topic[np.arange(len(viewers))[:, None], topic] + P["b_author"][author] + P["b_topic"][topic]
        step = max(1, 65_536 // max(1, cand.shape[1]))
        for s in range(0, len(viewers), step):
            out[s:s + step] += np.einsum("vd,vcd->vc", user[s:s + step], P["author"][author[s:s + step]])
        return out

    def predict(self, viewers: np.ndarray, authors: np.ndarray, topics: np.ndarray) -> np.ndarray:
        """Model logits for aligned arrays of (viewer, author, topic) — for analysis and tests."""
        P = self._arrays()
        return (P["user"][viewers] * (P["author"][authors] + P["topic"][topics])).sum(1) \
            + P["b_author"][authors] + P["b_topic"][topics]

    def state_dict(self) -> dict:
        if self.params is None:
            return {"params": None, "replay": list(self.replay), "updates": self.updates}
        return {"params": {k: p.detach().numpy().copy() for k, p in self.params.items()},
                "optimizer": self.optimizer.state_dict(), "replay": list(self.replay),
                "updates": self.updates}

    # checkpoints pickle the environment and its recommender: the torch module is re-imported
    # and the model goes through state_dict (tensors as arrays, the optimiser's moments included)
    def __getstate__(self) -> dict:
        skip = ("torch", "params", "optimizer", "replay", "updates", "_numpy_cache")
        state = {k: v for k, v in self.__dict__.items() if k not in skip}
        state["_model"] = self.state_dict()
        return state

    def __setstate__(self, state: dict) -> None:
        state = dict(state)
        model = state.pop("_model")
        self.__dict__.update(state)
        self.torch = _torch()
        self.load_state_dict(model)

    def load_state_dict(self, state: dict) -> None:
        torch = self.torch
        self.reset()
        self.replay.extend(state["replay"])
        self.updates = state["updates"]
        if state["params"] is not None:
            self.params = {k: torch.from_numpy(np.array(v)).requires_grad_(True)
                           for k, v in state["params"].items()}
            self.optimizer = torch.optim.Adam(list(self.params.values()), lr=self.lr)
            self.optimizer.load_state_dict(state["optimizer"])
