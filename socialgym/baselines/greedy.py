"""A hand-written heuristic that pursues each agent's reward weights (structured observations).

Each act phase splits the N slots among three action families in proportion to the weights
they serve (largest remainder), then fills them:

- POST  ~ lambda_PRE + lambda_INF: a topic it has not posted about yet (fresh topics feed
  others' INF, which they return), @-mentioning an ally (their COORD);
- COM   ~ lambda_SOC + lambda_EMO/2: allies' feed items first, @-mentioning the author;
- DM    ~ lambda_SOC/2 + lambda_COORD + lambda_EMO/2: replies to last round's DM senders first
  (COORD's reciprocity term), then new DMs to allies.
Round 1 is all POSTs (specification §1). Every message is supportive: EMO rewards what one *receives*,
and kindness is returned. Votes: like allies' items, items that mention it and items on topics
it posts about; no dislikes. Allies: agents that DMed it or mentioned it, and authors it liked.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from socialgym.baselines.random_policy import check_scripted_params


def _apportion(weights: dict[str, float], slots: int) -> dict[str, int]:
    """Largest-remainder split of ``slots`` action slots in proportion to ``weights``."""
    total = sum(weights.values())
    if total <= 0:
        return {k: (slots if k == "POST" else 0) for k in weights}
    quotas = {k: slots * w / total for k, w in weights.items()}
    counts = {k: int(q) for k, q in quotas.items()}
    for k in sorted(quotas, key=lambda k: (-(quotas[k] - counts[k]), k))[: slots - sum(counts.values())]:
        counts[k] += 1
    return counts


class GreedyPolicy:
    def __init__(self, seed: int | None = None, b: float = 0.5) -> None:
        GreedyPolicy.check_params(seed=seed, b=b)
        self.rng = np.random.default_rng(seed)
        self.b = b                       # the b_* the agents assume (the env default)
        self.allies: dict[str, dict[str, float]] = {}
        self.posted_topics: dict[str, set[str]] = {}

    @classmethod
    def check_params(cls, **params: Any) -> None:
        """Raise what ``GreedyPolicy(**params)`` would raise about its keywords, building nothing: a
        TypeError for an unknown one, a ``ParamError`` (a ValueError naming it) for a bad value —
        ``seed`` None or an integer >= 0, ``b`` a number in [0, 1]."""
        check_scripted_params(GreedyPolicy, params, "b")

    def reset(self) -> None:
        self.allies.clear()
        self.posted_topics.clear()

    def act(self, observations: dict[str, Any]) -> dict[str, Any]:
        out = {}
        for agent, obs in observations.items():
            if not isinstance(obs.get("feed"), list):
                raise ValueError("GreedyPolicy reads structured observations "
                                 "(obs_format='structured' or 'both')")
            self._learn(agent, obs)
            out[agent] = self._vote(agent, obs) if obs["phase"] == "vote" else self._plan(agent, obs)
        return out

    # ---- memory --------------------------------------------------------------------------------
    def _learn(self, agent: str, obs: dict[str, Any]) -> None:
        allies = self.allies.setdefault(agent, {})
        for dm in obs["dms"]:
            allies[dm["author"]] = allies.get(dm["author"], 0.0) + 1.0
        for item in obs["feed"] + obs["vote_items"]:
            if agent in item["mentions"]:
                allies[item["author"]] = allies.get(item["author"], 0.0) + 1.0

    def _top_allies(self, agent: str, k: int) -> list[str]:
        allies = self.allies.get(agent, {})
        return sorted(allies, key=lambda a: (-allies[a], a))[:k]

    # ---- act -----------------------------------------------------------------------------------
    def _plan(self, agent: str, obs: dict[str, Any]) -> dict[str, Any]:
        lam, n_actions = obs["lambdas"], obs["n_actions"]
        posted = self.posted_topics.setdefault(agent, set())
        topics = list(obs["topics"]) or ["general"]
        fresh = [t for t in topics if t not in posted]
        if not fresh:       # every topic covered: start a new cycle
            posted.clear()
            fresh = topics
        fresh = [fresh[j] for j in self.rng.permutation(len(fresh))]
        allies = self._top_allies(agent, n_actions)
        if obs["round"] == 1:
            counts = {"POST": n_actions, "COM": 0, "DM": 0}
        else:
            counts = _apportion({
                "POST": lam["PRE"] + lam["INF"],
                "COM": (lam["SOC"] + lam["EMO"] / 2) if obs["feed"] else 0.0,
                "DM": lam["SOC"] / 2 + lam["COORD"] + lam["EMO"] / 2,
            }, n_actions)
        actions: list[dict] = []
        # DMs: answer last round's senders first (COORD reciprocity), then write to allies
        senders: dict[str, dict] = {}
        for dm in obs["dms"]:
            senders.setdefault(dm["author"], dm)
        others = obs["users"]
        strangers = [others[int(j)] for j in self.rng.choice(len(others), min(n_actions, len(others)), replace=False)]
        peers = [p for p in dict.fromkeys(allies + strangers) if p not in senders]
        dm_targets = [("reply", s, dm) for s, dm in senders.items()] + [("new", p, None) for p in peers]
        for kind, who, dm in dm_targets[: counts["DM"]]:
            action = {"type": "DM", "recipient": who, "tone": "supportive"}
            if kind == "reply":
                action["target_id"] = dm["id"]
            else:
                action["topic"] = fresh[0]
            actions.append(action)
        # comments: allies' items first, each with an @mention of its author
        ally_rank = {a: k for k, a in enumerate(allies)}
        jitter = self.rng.random(len(obs["feed"]))
        order = sorted(range(len(obs["feed"])),
                       key=lambda j: (ally_rank.get(obs["feed"][j]["author"], len(ally_rank)), jitter[j]))
        feed = [obs["feed"][j] for j in order]
        for item in feed[: counts["COM"]]:
            actions.append({"type": "COM", "target_id": item["id"], "mentions": [item["author"]],
                            "tone": "supportive"})
        # posts on topics not yet posted about, mentioning allies; then fill remaining slots
        k = 0
        while len(actions) < n_actions:
            # POST slots, plus any slot a family could not fill (fewer DM partners than slots)
            topic = fresh[k % len(fresh)]
            mentions = [allies[k % len(allies)]] if allies and lam["COORD"] > 0 else []
            actions.append({"type": "POST", "topic": topic, "mentions": mentions, "tone": "supportive"})
            posted.add(topic)
            k += 1
        return {"actions": actions}

    # ---- vote ----------------------------------------------------------------------------------
    def _vote(self, agent: str, obs: dict[str, Any]) -> dict[str, Any]:
        allies = self.allies.get(agent, {})
        shared_topics = self.posted_topics.get(agent, set())
        votes = {}
        for item in obs["vote_items"]:
            if item["author"] in allies or agent in item["mentions"] or item["topic"] in shared_topics:
                votes[item["id"]] = 1
                allies[item["author"]] = allies.get(item["author"], 0.0) + 0.5
        return {"votes": votes}
