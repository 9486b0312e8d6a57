"""Scripted discussion policies: template users per role and a rule-based moderator.

They need no model, so a whole discussion runs in milliseconds: for tests, for smoke runs and
as opponents when training a moderator. Both implement the discussion's per-turn policy
protocol (``socialgym.baselines.protocol.DiscussionPolicy``): ``policy.act(agent, observation,
info)``; what they read is ``info["view"]``.
"""

from __future__ import annotations

import numpy as np

_ARGUMENTS = (
    "I think {topic_word} matters because the evidence from other countries shows mixed results.",
    "Consider the data: rules like this tend to work when they are enforced fairly.",
    "However, we should ask who decides what counts as harmful, since mistakes will happen.",
    "For example, small forums cannot afford the moderation that big platforms can.",
    "Research suggests clear rules reduce harassment, but transparency is just as important.",
)
_COMMUNITY = (
    "Let's keep this respectful, everyone; our community works because we listen to each other.",
    "Please remember the rules here: argue the point, not the person.",
    "Good points on both sides; I'd like us to stay on topic and civil.",
)
_TROLL = (
    "What a pathetic take, you clearly have no idea what you are talking about.",
    "Only an idiot would believe this garbage.",
    "LOL, more brainwashed sheep repeating the same stupid talking points.",
    "Nobody cares about your ridiculous opinion, loser.",
)
_RETORTS = (
    "That is a ridiculous thing to say and you know it.",
    "Stop being so ignorant and read what I wrote.",
)
_CALM = ("Fair enough, I'll keep it civil. My point is that the rules need clear limits.",
         "Sorry, I got carried away. I still think the policy needs safeguards.")


class ScriptedUser:
    """Comments from templates by role.

    A troll insults the last speaker. A normal user argues, but with probability
    ``p_provoked`` answers a toxic comment (mean toxicity >= 3) aimed at them in kind — the
    paper's users "may feel provoked". A warned user calms down. Community members appeal to
    the rules. Every comment @mentions the user it answers.
    """

    def __init__(self, seed: int = 0, p_provoked: float = 0.5) -> None:
        self.seed = seed
        self.p_provoked = p_provoked
        self.rng = np.random.default_rng(seed)

    def reset(self) -> None:
        self.rng = np.random.default_rng(self.seed)

    def act(self, agent: str, observation, info: dict) -> str:
        view = info["view"]
        me = view["username"]
        users = [c for c in view["comments"] if not c["moderator"]]
        last = users[-1] if users else None
        target = last["author"] if last is not None and last["author"] != me else None
        prefix = f"@{target} " if target else ""
        role = view["role"]
        pick = lambda options: options[int(self.rng.integers(len(options)))]   # noqa: E731
        if role == "troll":
            return prefix + pick(_TROLL)
        if view["warnings"]:
            return prefix + pick(_CALM)
        if role == "community":
            return prefix + pick(_COMMUNITY)
        attacked = (last is not None and (last.get("toxicity") or 0) >= 3
                    and (me in last["mentions"] or not last["mentions"]))
        if attacked and self.rng.random() < self.p_provoked:
            return prefix + pick(_RETORTS)
        word = view["topic"].split()[0].lower() if view["topic"].split() else "this"
        return prefix + pick(_ARGUMENTS).format(topic_word=word)


class ScriptedModerator:
    """Warns the author of a toxic latest user comment, bans one already warned ``ban_at``
    times; otherwise silent (or, with ``always_respond``, a short neutral reply)."""

    def __init__(self, threshold: float = 3.0, ban_at: int | None = 1, always_respond: bool = False) -> None:
        self.threshold = threshold
        self.ban_at = ban_at
        self.always_respond = always_respond

    def act(self, agent: str, observation, info: dict):
        view = info["view"]
        users = [c for c in view["comments"] if not c["moderator"]]
        last = users[-1] if users else None
        if last is not None and last["toxicity"] is not None and last["toxicity"] >= self.threshold \
                and last["author"] in view["users"]:
            name = last["author"]
            if self.ban_at is not None and view["warned"].get(name, 0) >= self.ban_at:
                return {"text": f"@{name} you were warned; you are banned for repeated toxicity.", "ban": name}
            return {"text": f"@{name} please keep it civil; this is a warning.", "warn": name}
        if self.always_respond and last is not None:
            return f"@{last['author']} thanks, please keep the discussion on topic."
        return ""
