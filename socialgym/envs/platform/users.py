"""The scripted population of the platform tasks: users with topic tastes, a stance group and tone.

This is the *user model* under which every platform result is stated. It is a rule, so what a
ranking does to these users follows from the rules below; they are written to carry the two
mechanisms Milli et al. (PNAS Nexus 2025) discuss — people engage with provoking content, and
replies across the divide are often hostile — at strengths chosen here, not measured.

Each user ``i`` has a stance group ``g_i = i % groups``, a main topic drawn uniformly (weight
``concentration``, the other topics sharing the rest; ``r[c] = pref[c] / max pref``) and reads
every shown item's topic, author, tone (sentiment < 0: *hostile*) and its tie to the author.
For a shown item the **comment probability** is

    p = clip(base + gain * r[topic] + tie_gain * tie + provocation * out + arousal * hostile, 0, 1)

where ``out`` = 1 if the author is of another group. **Act phase**, per slot: round 1 or with
probability ``p_post`` a POST on a topic drawn from ``pref`` (tone supportive if ``r >= 0.5``,
else neutral); otherwise the slot takes the next feed item by ``p`` (as ``TopicUsers`` does) and
comments with probability ``p``. A comment's tone: on an out-group item critical with
probability ``hostility``, on an in-group item with probability ``in_hostility``; otherwise
supportive if ``r >= 0.5``, else neutral. **Vote phase**, per vote item: like with probability
``(base + gain * r + tie_gain * tie) * (1 - out_like_cut * out)``; dislike with probability
``dislike_prob * (1 - r) + out_dislike * out`` (capped at what is left); else no vote.
No DMs. Whether a user acts at all does not depend on what it was shown (no churn).

All draws come from ``self.rng`` (``seed``); the draws of one call have fixed shapes.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from socialgym.envs.feed.encoding import FIELDS, ActionLayout
from socialgym.platform.actions import COM, NOT, POST, TONES
from socialgym.platform.validation import check_seed

_TYPE, _TARGET, _TOPIC, _TONE = (FIELDS.index(f) for f in ("type", "target_slot", "topic", "tone"))
_SUPPORTIVE, _NEUTRAL, _CRITICAL = (TONES.index(t) for t in ("supportive", "neutral", "critical"))

DEFAULTS = dict(groups=2, concentration=0.6, p_post=0.3, base=0.05, gain=0.5, tie_gain=0.3, provocation=0.25,
                arousal=0.15, hostility=0.6, in_hostility=0.05, dislike_prob=0.2, out_like_cut=0.5,
                out_dislike=0.3)
"""The user model's parameters (module docstring) as the platform tasks use them."""
PROBABILITIES = ("concentration", "p_post", "hostility", "in_hostility", "dislike_prob", "out_like_cut")


class StanceUsers:
    """Scripted users of the platform tasks (module docstring). ``act(env)`` returns the
    ``(n_agents, L)`` action matrix for ``env.step_arrays`` in either phase."""

    def __init__(self, layout: ActionLayout, n_topics: int, seed: int | None = None, **params: Any) -> None:
        unknown = sorted(set(params) - set(DEFAULTS))
        if unknown:
            raise TypeError(f"StanceUsers: unknown parameter(s) {unknown}; known: {sorted(DEFAULTS)}")
        p = {**DEFAULTS, **params}
        for name, value in p.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise ValueError(f"StanceUsers: {name} must be a finite number >= 0, got {value!r}")
            if name in PROBABILITIES and value > 1:
                raise ValueError(f"StanceUsers: {name} is a probability (or share) in [0, 1], got {value!r}")
        if int(p["groups"]) != p["groups"] or not 1 <= p["groups"] <= layout.n_agents:
            raise ValueError(f"StanceUsers: groups must be an integer in [1, n_agents], got {p['groups']!r}")
        if p["concentration"] == 0:
            raise ValueError("StanceUsers: concentration must lie in (0, 1]")
        if int(n_topics) < 1:
            raise ValueError(f"StanceUsers: the platform needs at least one topic, got {n_topics!r}")
        check_seed(seed, "seed")
        self.params = p
        self.layout = layout
        n = layout.n_agents
        self.n_topics = int(n_topics)
        self.rng = np.random.default_rng(seed)
        self.stances = np.arange(n) % int(p["groups"])
        main = self.rng.integers(0, self.n_topics, n)
        rest = (1 - p["concentration"]) / (self.n_topics - 1) if self.n_topics > 1 else 0.0
        pref = np.full((n, self.n_topics), rest)
        pref[np.arange(n), main] = p["concentration"] if self.n_topics > 1 else 1.0
        self.preferences = pref
        self.relative = pref / pref.max(axis=1, keepdims=True)
        self.cdf = np.cumsum(pref, axis=1) / pref.sum(axis=1, keepdims=True)

    # ---------------------------------------------------------------- what a user reads of an item
    def _items(self, env: Any, ids: np.ndarray) -> tuple[np.ndarray, ...]:
        """(present, r[topic], tie, out-group, hostile) of shown items ``ids`` (n, S)."""
        content = env.content
        present = ids >= 0
        safe = np.where(present, ids, 0)
        n = ids.shape[0]
        rows = np.broadcast_to(np.arange(n)[:, None], ids.shape)
        if not len(content):
            z = np.zeros(ids.shape)
            return present, z, z, z, z
        author = content.column("author")[safe]
        topic = content.column("topic")[safe]
        r = np.where(topic < self.n_topics, self.relative[rows, np.minimum(topic, self.n_topics - 1)], 0.0)
        tie = np.zeros(ids.shape)
        tie[present] = env.tie_weights(rows[present], author[present])
        out = (self.stances[author] != self.stances[rows]).astype(float)
        hostile = (content.column("sentiment")[safe] < 0).astype(float)
        return present, r * present, tie, out * present, hostile * present

    def comment_probability(self, r, tie, out, hostile) -> np.ndarray:
        p = self.params
        return np.clip(p["base"] + p["gain"] * r + p["tie_gain"] * tie + p["provocation"] * out
                       + p["arousal"] * hostile, 0.0, 1.0)

    # ---------------------------------------------------------------- decisions
    def act(self, env: Any) -> np.ndarray:
        return self._act(env) if env.phase == "act" else self._vote(env)

    def _act(self, env: Any) -> np.ndarray:
        lay, p, rng = self.layout, self.params, self.rng
        n, slots = lay.n_agents, lay.n_actions
        feed = np.asarray(env.act_feeds)
        u_post, u_topic, u_com, u_tone = (rng.random((n, slots)) for _ in range(4))
        jitter = rng.random(feed.shape)
        present, r, tie, out, hostile = self._items(env, feed)
        prob = np.where(present, self.comment_probability(r, tie, out, hostile), -1.0)
        order = np.lexsort((jitter, -prob), axis=-1)
        n_present = present.sum(axis=1)
        post = np.ones((n, slots), bool) if env.round == 1 else u_post < p["p_post"]
        consider = ~post
        rank = (np.cumsum(consider, axis=1) - 1) % np.maximum(n_present, 1)[:, None]
        slot = np.take_along_axis(order, rank, axis=1)
        com = consider & (n_present > 0)[:, None] & (u_com < np.take_along_axis(prob, slot, axis=1))
        post_topic = np.minimum((u_topic[:, :, None] >= self.cdf[:, None, :]).sum(axis=2), self.n_topics - 1)
        r_post = np.take_along_axis(self.relative, post_topic, axis=1)
        r_item = np.take_along_axis(r, slot, axis=1)
        out_item = np.take_along_axis(out, slot, axis=1) > 0
        critical = u_tone < np.where(out_item, p["hostility"], p["in_hostility"])
        kind = np.where(post, POST, np.where(com, COM, NOT))
        tone = np.where(np.where(post, r_post, r_item) >= 0.5, _SUPPORTIVE, _NEUTRAL)
        tone = np.where(com & critical, _CRITICAL, tone)
        tone = np.where(kind == NOT, _NEUTRAL, tone)
        matrix = np.tile(lay.slot_noop, (n, slots, 1))
        matrix[..., _TYPE] = kind
        matrix[..., _TARGET] = np.where(kind == COM, slot, 0)
        matrix[..., _TOPIC] = np.where(kind == POST, post_topic, 0)
        matrix[..., _TONE] = tone
        out_matrix = np.zeros((n, lay.length), np.int64)
        out_matrix[:, :lay.act_length] = matrix.reshape(n, -1)
        out_matrix[:, lay.act_length:] = 1                                     # no vote
        return out_matrix

    def _vote(self, env: Any) -> np.ndarray:
        lay, p = self.layout, self.params
        items = np.asarray(env.vote_lists)
        u = self.rng.random(items.shape)
        present, r, tie, out, _ = self._items(env, items)
        like = np.clip(p["base"] + p["gain"] * r + p["tie_gain"] * tie, 0, 1) * (1 - p["out_like_cut"] * out)
        dislike = np.minimum(p["dislike_prob"] * (1 - r) + p["out_dislike"] * out, 1 - like)
        vote = np.where(u < like, 1, np.where(u < like + dislike, -1, 0)) * present
        out_matrix = np.zeros((lay.n_agents, lay.length), np.int64)
        out_matrix[:, :lay.act_length] = np.tile(lay.slot_noop, lay.n_actions)
        out_matrix[:, lay.act_length:] = vote + 1
        return out_matrix
