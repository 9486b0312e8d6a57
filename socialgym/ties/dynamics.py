"""Tie dynamics (specification §4): activation, the four evidence signals, and the gated update.

``W[v, u]`` is the tie from v to u (row = source). After each vote phase:

    W[v,u] += min(delta_max, (1 - W[v,u]) * max(0, e - xi))   if v -> u was active this round
    W[v,u] *= (1 - delta),  delta = 1 - 2^(-1/half_life)     otherwise
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Protocol

import numpy as np
import scipy.sparse as sp

from socialgym.platform.actions import COM, DM, RoundBatch, RoundTranscript
from socialgym.rowops import unique_inverse
from socialgym.ties.pairs import PairTable


@dataclass
class TieSignals:
    """The active directed pairs of a round and their four signals (all arrays of equal length)."""

    src: np.ndarray
    dst: np.ndarray
    nov: np.ndarray
    appr: np.ndarray
    rec: np.ndarray
    aff: np.ndarray

    def __len__(self) -> int:
        return len(self.src)


class TieScorer(Protocol):
    """The seam for evidence ``e_t(v->u) in [0, 1]``: the heuristic ``G_theta`` or an LLM judge.

    ``transcript`` is the round being closed, a :class:`~socialgym.platform.actions.RoundTranscript`
    (``agent_ids``, ``round`` and its readable ``entries``), for scorers that read what was
    said; the second argument is passed positionally, so a scorer may name it as it likes.
    """

    def score(self, signals: TieSignals, transcript: RoundTranscript | None) -> np.ndarray: ...


class LogisticEvidence:
    """``G_theta``: e = sigmoid(bias + w_nov S_nov + w_appr S_appr + w_rec S_rec + w_aff S_aff).

    Non-negative weights make it monotone non-decreasing in every signal. The defaults
    (bias -2, nov 1, appr 2, rec 0.5, aff 2) give: a neutral mention with no likes either way
    e = sigmoid(-1.5) = 0.18 (a small gain over xi = 0.1); likes given and returned
    e = sigmoid(0.5) = 0.62 (a gain capped at delta_max); a dislike or a hostile DM
    e <= sigmoid(-3.5) = 0.03 (below xi: no gain, and no decay either, since the pair was active).
    """

    def __init__(self, weights: Mapping[str, float]) -> None:
        self.bias = float(weights["bias"])
        self.w = np.array([weights["nov"], weights["appr"], weights["rec"], weights["aff"]], float)

    def score(self, signals: TieSignals, transcript: RoundTranscript | None = None) -> np.ndarray:
        x = self.bias + (self.w[0] * signals.nov + self.w[1] * signals.appr
                         + self.w[2] * signals.rec + self.w[3] * signals.aff)
        return 1.0 / (1.0 + np.exp(-x))


@dataclass
class TieUpdate:
    """What one round did to the ties (for logging): the active pairs, their evidence, before/after."""

    src: np.ndarray
    dst: np.ndarray
    evidence: np.ndarray
    before: np.ndarray
    after: np.ndarray


class TieDynamics:
    """Owns W and the like-EMA ``Lh``; one :meth:`update` per round."""

    def __init__(self, n: int, *, xi: float, delta_max: float, decay: float, b_rec: float,
                 eps: float, scorer: TieScorer, prune_below: float = 1e-6,
                 seed_graph: Any = None) -> None:
        self.n = n
        self.xi, self.delta_max, self.decay, self.b_rec, self.eps = xi, delta_max, decay, b_rec, eps
        self.scorer = scorer
        self.prune_below = prune_below
        self.weights = PairTable(n) if seed_graph is None else PairTable.from_matrix(seed_graph, n)
        self.likes_ema = PairTable(n)

    def matrix(self) -> sp.csr_matrix:
        return self.weights.to_sparse()

    def signals(self, batch: RoundBatch, seen_topics: np.ndarray) -> TieSignals:
        """Activation and the four signals of every active pair, vectorised over the batch.

        ``seen_topics``: (n, >=K) booleans, topics each agent had seen before this round (its
        feeds, DMs received and own actions) — for S_nov. Also advances the like EMA.
        """
        n = self.n
        direct = (batch.kind == DM) | (batch.kind == COM)
        ment_src = batch.sender[batch.mention_action]
        ment_topic = batch.topic[batch.mention_action]
        voted = batch.vote_value != 0
        # one row per activating action: (v, u, topic of the action)
        src = np.concatenate([batch.sender[direct], ment_src, batch.vote_voter[voted]]).astype(np.int64, copy=False)
        dst = np.concatenate([batch.recipient[direct], batch.mention_agent, batch.vote_author[voted]]).astype(np.int64, copy=False)
        topic = np.concatenate([batch.topic[direct], ment_topic, batch.vote_topic[voted]])
        ok = (src != dst) & (dst >= 0)
        src, dst, topic = src[ok], dst[ok], topic[ok]
        keys, inverse = unique_inverse(src * n + dst)
        m = len(keys)

        # S_nov: some activating topic unseen by u before this round
        known = np.zeros(len(topic), bool)
        in_range = (topic >= 0) & (topic < seen_topics.shape[1])
        known[in_range] = seen_topics[dst[in_range], topic[in_range]]
        nov = (np.bincount(inverse, weights=~known & (topic >= 0), minlength=m) > 0).astype(float, copy=False)

        # S_appr from v's non-zero votes on u's items
        vote_keys = batch.vote_voter[voted].astype(np.int64, copy=False) * n + batch.vote_author[voted]
        vidx = np.searchsorted(keys, vote_keys)
        vals = batch.vote_value[voted]
        likes = np.bincount(vidx, weights=vals > 0, minlength=m)
        dislikes = np.bincount(vidx, weights=vals < 0, minlength=m)
        appr = (likes - dislikes) / np.maximum(1.0, likes + dislikes)

        # S_rec: EMA of likes both ways, updated with this round's likes first
        like_rows = vals > 0
        like_keys, like_counts = np.unique(vote_keys[like_rows], return_counts=True)
        ema_old = self.likes_ema.lookup(like_keys)
        self.likes_ema.replace(self.b_rec, like_keys,
                               self.b_rec * ema_old + (1 - self.b_rec) * like_counts,
                               self.prune_below)
        forward = self.likes_ema.lookup(keys)
        backward = self.likes_ema.lookup((keys % n) * n + keys // n)
        rec = 1.0 - np.abs(forward - backward) / (forward + backward + self.eps)

        # S_aff: mean DM sentiment v -> u, only when v cast no non-zero vote on u's items
        is_dm = batch.kind == DM
        dm_keys = batch.sender[is_dm].astype(np.int64, copy=False) * n + batch.recipient[is_dm]
        didx = np.searchsorted(keys, dm_keys)
        dm_count = np.bincount(didx, minlength=m)
        dm_sum = np.bincount(didx, weights=batch.sentiment[is_dm], minlength=m)
        aff = np.where((dm_count > 0) & (likes + dislikes == 0), dm_sum / np.maximum(dm_count, 1), 0.0)

        return TieSignals(keys // n, keys % n, nov, appr, rec, aff)

    def update(self, batch: RoundBatch, seen_topics: np.ndarray,
               transcript: RoundTranscript | None = None) -> TieUpdate:
        """Score the round's active pairs (``transcript`` goes to the scorer) and apply the gated
        update to W."""
        sig = self.signals(batch, seen_topics)
        keys = sig.src * self.n + sig.dst
        evidence = np.asarray(self.scorer.score(sig, transcript), dtype=float)
        if evidence.shape != (len(sig),) or not np.all(np.isfinite(evidence)) \
                or evidence.min(initial=0) < 0 or evidence.max(initial=0) > 1:
            raise ValueError(f"tie scorer {self.scorer!r} must return {len(sig)} finite values in [0, 1]")
        before = self.weights.lookup(keys)
        after = before + np.minimum(self.delta_max, (1 - before) * np.maximum(0.0, evidence - self.xi))
        self.weights.replace(1.0 - self.decay, keys, after, self.prune_below)
        return TieUpdate(sig.src, sig.dst, evidence, before, after)

    def state_dict(self) -> dict:
        return {"weights": self.weights.state_dict(), "likes_ema": self.likes_ema.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.weights = PairTable.from_state(state["weights"])
        self.likes_ema = PairTable.from_state(state["likes_ema"])
