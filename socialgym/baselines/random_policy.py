"""Uniformly random *valid* actions and votes, for structured or numeric observations."""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np

from socialgym.platform.actions import TONES
from socialgym.platform.validation import is_number, show
from socialgym.recommenders.params import ParamError, check_seed_param

NEW_TOPICS = 4   # how many new topics the structured policy picks from when the vocabulary is empty


class RandomPolicy:
    """Valid random behaviour in both phases.

    Structured observations get structured actions (random type among those possible, random
    feed item / peer / topic / tone, a mention now and then, votes in {-1, 0, +1}). Numeric
    observations get numeric vectors sampled under the action masks — vectorised over agents
    that share a mask (they share the mask object), so it stays cheap at 100,000 agents.
    """

    def __init__(self, seed: int | None = None, mention_prob: float = 0.2) -> None:
        RandomPolicy.check_params(seed=seed, mention_prob=mention_prob)
        self.rng = np.random.default_rng(seed)
        self.mention_prob = mention_prob

    def act(self, observations: dict[str, Any]) -> dict[str, Any]:
        structured = {a: o for a, o in observations.items() if "feed" in o and isinstance(o["feed"], list)}
        numeric = {a: o for a, o in observations.items() if a not in structured}
        actions = {a: self._structured(o) for a, o in structured.items()}
        if numeric:
            actions.update(self._numeric(numeric))
        return actions

    @classmethod
    def check_params(cls, **params: Any) -> None:
        """Raise what ``RandomPolicy(**params)`` would raise about its keywords, building nothing: a
        TypeError for an unknown one, a ``ParamError`` (a ValueError naming it) for a bad value —
        ``seed`` None or an integer >= 0, ``mention_prob`` a number in [0, 1]."""
        check_scripted_params(RandomPolicy, params, "mention_prob")

    # ---- numeric ---------------------------------------------------------------------------
    def _numeric(self, observations: dict[str, Any]) -> dict[str, np.ndarray]:
        agents = list(observations)
        for agent in agents:
            if "action_mask" not in observations[agent]:
                raise ValueError("RandomPolicy needs action masks for numeric observations "
                                 "(construct the env with action_masks=True)")
        matrix = self.sample_masks([observations[a]["action_mask"] for a in agents])
        return dict(zip(agents, matrix))

    def sample_masks(self, masks: list[tuple]) -> np.ndarray:
        """One masked uniform sample per agent, as an (agents, L) matrix (for ``step_arrays``).

        Agents whose masks are the same object are sampled together, one numpy call per
        dimension, so the cost grows with the number of distinct masks, not of agents.
        """
        groups: dict[int, list[int]] = {}
        for row, mask in enumerate(masks):
            groups.setdefault(id(mask), []).append(row)
        out = np.empty((len(masks), len(masks[0]) if masks else 0), dtype=np.int64)
        for rows in groups.values():
            mask = masks[rows[0]]
            rows_arr = np.asarray(rows)
            for d, m in enumerate(mask):
                allowed = np.flatnonzero(m)
                if len(allowed) == 0:
                    allowed = np.zeros(1, np.int64)  # gymnasium's convention: all-masked -> 0
                out[rows_arr, d] = allowed[self.rng.integers(len(allowed), size=len(rows))]
        return out

    # ---- structured ------------------------------------------------------------------------
    def _structured(self, obs: dict[str, Any]) -> dict[str, Any]:
        if obs["phase"] == "vote":
            return {"votes": {item["id"]: int(self.rng.integers(-1, 2)) for item in obs["vote_items"]}}
        return {"actions": [self._one_action(obs) for _ in range(obs["n_actions"])]}

    def _one_action(self, obs: dict[str, Any]) -> dict[str, Any]:
        rng = self.rng
        topics, peers, feed, dms = obs["topics"], obs["users"], obs["feed"], obs["dms"]
        tone = TONES[int(rng.integers(len(TONES)))]
        choices = ["POST"] if obs["round"] == 1 else ["POST", "DM", "NOT"] + (["COM"] if feed else [])
        kind = choices[int(rng.integers(len(choices)))]
        if kind == "POST":
            return {"type": "POST", "topic": self._topic(topics),
                    "mentions": self._mentions(peers), "tone": tone}
        if kind == "COM":
            target = feed[int(rng.integers(len(feed)))]
            return {"type": "COM", "target_id": target["id"], "mentions": self._mentions(peers), "tone": tone}
        if kind == "DM":
            if dms and rng.random() < 0.5:
                dm = dms[int(rng.integers(len(dms)))]
                return {"type": "DM", "recipient": dm["author"], "target_id": dm["id"], "tone": tone}
            return {"type": "DM", "recipient": peers[int(rng.integers(len(peers)))],
                    "topic": self._topic(topics), "tone": tone}
        return {"type": "NOT"}

    def _topic(self, topics) -> str:
        """A random topic of the vocabulary; with an empty one (specification §2: the configured list may
        be empty) a new topic ``new_topic_0`` .. ``new_topic_3``, as any agent may introduce."""
        if len(topics):
            return topics[int(self.rng.integers(len(topics)))]
        return f"new_topic_{int(self.rng.integers(NEW_TOPICS))}"

    def _mentions(self, peers) -> list[str]:
        if len(peers) and self.rng.random() < self.mention_prob:
            return [peers[int(self.rng.integers(len(peers)))]]
        return []


def check_probability(name: str, value: Any) -> None:
    """A probability parameter of the scripted policies: a finite number in [0, 1]."""
    if not is_number(value) or not 0 <= value <= 1:
        raise ParamError(name, f"{name} must be a number in [0, 1], got {show(value)}")


def check_scripted_params(cls: type, params: dict, probability: str) -> None:
    """The keywords of a scripted policy: known to ``cls``'s constructor, ``seed`` None or an
    integer >= 0, and its one probability parameter in [0, 1]."""
    inspect.signature(cls).bind_partial(**params)
    if "seed" in params:
        check_seed_param(params["seed"])
    if probability in params:
        check_probability(probability, params[probability])
