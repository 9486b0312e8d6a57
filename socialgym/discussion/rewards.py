"""Discussion rewards: the moderation game for the moderator, per-role terms for users.

Both are computed by one fold over the discussion's events (``RewardTracker``), so the
environment's live rewards (annotator running during the episode) and ``score_discussion``
(annotations made afterwards) give the same numbers.

**Moderator** (paper App. A.4.4, "Moderation Game"; points from ``ModerationScores``):

- ``intervene`` at a moderator turn that is not silent (any reply, warning or ban);
- ``warn`` for each warning ("threaten a ban"), ``ban`` for each ban;
- at every annotated user comment with mean toxicity >= ``toxic_threshold``: ``toxic``
  ("the discussion shows signs of toxicity");
- at every annotated user comment below the threshold: ``civil``, unless the moderator warned
  or banned someone within the last ``authority_window`` turns (civil "without appealing to
  your authority");
- ``recovery`` when a user whose previous comment was toxic, and whom a moderator intervention
  addressed after it (@mentioned, warned, or answered as the latest comment's author), now
  writes a comment below the threshold ("successfully improve participant behaviour through
  intervention"); once per toxic comment.

**Users**: a weighted sum of per-comment terms, weights per role (``ROLE_REWARDS``), all on
0..1 scales (``(score - 1) / 4`` for the 1..5 annotations):

- ``argument_quality``: the argument quality of the user's own comment;
- ``toxicity``: the toxicity of the user's own comment;
- ``provoked_toxicity``: the toxicity of a later comment that answers the user — credited to the
  users it @mentions, or, mentioning no user, to the author of the previous user comment;
  never to a banned user;
- ``warned`` (1 per warning received) and ``banned`` (1 when banned).

A troll (default weights) is paid for the toxicity it provokes; a community member pays for it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Iterable, Mapping

from socialgym.platform.validation import check_finite

MODERATOR_TERMS = ("intervene", "warn", "ban", "toxic", "civil", "recovery")
USER_TERMS = ("argument_quality", "toxicity", "provoked_toxicity", "warned", "banned")

ROLE_REWARDS: Mapping[str, Mapping[str, float]] = MappingProxyType({
    "normal": MappingProxyType({"argument_quality": 1.0, "toxicity": -0.5, "warned": -0.5, "banned": -5.0}),
    "community": MappingProxyType({"argument_quality": 1.0, "toxicity": -1.0, "provoked_toxicity": -0.5,
                                   "warned": -1.0, "banned": -5.0}),
    "troll": MappingProxyType({"provoked_toxicity": 1.0, "toxicity": 0.25, "banned": -2.0}),
})


@dataclass(frozen=True)
class ModerationScores:
    """Points of the moderation game (paper App. A.4.4 defaults) and when a comment is toxic."""

    civil: float = 10.0
    intervene: float = -10.0
    warn: float = -10.0
    recovery: float = 15.0
    toxic: float = -8.0
    ban: float = -5.0
    toxic_threshold: float = 3.0       # mean toxicity 3 = "Almost Toxic" or worse
    authority_window: int = 4          # turns during which a warning/ban voids "civil"

    def __post_init__(self) -> None:
        for f in fields(self):
            check_finite(f"moderation score {f.name}", getattr(self, f.name), numpy=False)
        if not 1.0 <= self.toxic_threshold <= 5.0:
            raise ValueError(f"toxic_threshold must be within the 1..5 toxicity scale, got {self.toxic_threshold}")
        if self.authority_window < 0 or int(self.authority_window) != self.authority_window:
            raise ValueError(f"authority_window must be a non-negative integer, got {self.authority_window}")

    @classmethod
    def coerce(cls, value: "ModerationScores | Mapping[str, float] | None") -> "ModerationScores":
        if value is None:
            return cls()
        if isinstance(value, cls):
            return value
        if not isinstance(value, Mapping):
            raise TypeError(f"moderator_rewards must be a mapping or ModerationScores, got {type(value).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(value) - known)
        if unknown:
            raise ValueError(f"unknown moderator reward key(s) {unknown}; known: {sorted(known)}")
        return cls(**dict(value))

    def points(self) -> dict[str, float]:
        return {t: float(getattr(self, t)) for t in MODERATOR_TERMS}


def check_role_rewards(role_rewards: Mapping[str, Mapping[str, float]] | None) -> dict[str, dict[str, float]]:
    """Defaults merged with overrides (per role); unknown terms are errors."""
    merged = {role: dict(weights) for role, weights in ROLE_REWARDS.items()}
    for role, weights in dict(role_rewards or {}).items():
        if role not in ROLE_REWARDS:
            raise ValueError(f"role_rewards names unknown role {role!r}; roles are {list(ROLE_REWARDS)}")
        if not isinstance(weights, Mapping):
            raise TypeError(f"role_rewards[{role!r}] must be a mapping of term -> weight")
        unknown = sorted(set(weights) - set(USER_TERMS))
        if unknown:
            raise ValueError(f"role_rewards[{role!r}] has unknown term(s) {unknown}; known: {list(USER_TERMS)}")
        for term, w in weights.items():
            check_finite(f"role_rewards[{role!r}][{term!r}]", w, numpy=False)
        merged[role] = {**merged.get(role, {}), **{t: float(w) for t, w in weights.items()}}
    return merged


def _unit(score: float) -> float:
    return (score - 1.0) / 4.0


@dataclass
class RewardTracker:
    """The fold. Feed it events in turn order; each call returns ``{agent: {term: value}}``
    (raw term values; ``weighted`` turns them into rewards)."""

    roles: Mapping[str, str]                    # user agent -> role
    moderator: str | None
    scores: ModerationScores = field(default_factory=ModerationScores)
    role_rewards: Mapping[str, Mapping[str, float]] = field(default_factory=lambda: check_role_rewards(None))
    _last_toxic: dict = field(default_factory=dict)     # user -> was their last comment toxic
    _answered: dict = field(default_factory=dict)       # user -> moderator intervened since that comment
    _last_authority: int | None = None
    _last_user_author: str | None = None
    _banned: set = field(default_factory=set)

    def moderator_turn(self, turn: int, spoke: bool, warned: Iterable[str] = (), banned: Iterable[str] = (),
                       mentions: Iterable[str] = ()) -> dict:
        """A moderator turn. It addresses the users it @mentions, warns or bans — or, a reply
        mentioning nobody, the author of the latest user comment (the comment it answers)."""
        warned, banned = list(warned), list(banned)
        out: dict[str, dict[str, float]] = {}
        if self.moderator is None:
            return out
        intervened = spoke or bool(warned) or bool(banned)
        terms = {"intervene": float(intervened), "warn": float(len(warned)), "ban": float(len(banned))}
        out[self.moderator] = terms
        if warned or banned:
            self._last_authority = turn
        addressed = {m for m in mentions if m in self.roles} | set(warned) | set(banned)
        if spoke and not addressed and self._last_user_author is not None:
            addressed = {self._last_user_author}
        for user in addressed:
            if self._last_toxic.get(user, False):
                self._answered[user] = True
        self._banned.update(banned)
        for user in warned:
            out.setdefault(user, {})["warned"] = out.get(user, {}).get("warned", 0.0) + 1.0
        for user in banned:
            out.setdefault(user, {})["banned"] = 1.0
        return out

    def user_comment(self, turn: int, author: str, mentions: Iterable[str], toxicity: float | None,
                     argument_quality: float | None) -> dict:
        """An annotated user comment (``toxicity``/``argument_quality`` = the annotators' means;
        ``None`` or NaN = not annotated, which gives no annotation-based terms)."""
        out: dict[str, dict[str, float]] = {}
        previous_author, self._last_user_author = self._last_user_author, author
        annotated = toxicity is not None and not math.isnan(toxicity)
        if not annotated:
            return out
        mine = out.setdefault(author, {})
        mine["toxicity"] = _unit(toxicity)
        if argument_quality is not None and not math.isnan(argument_quality):
            mine["argument_quality"] = _unit(argument_quality)
        targets = [m for m in dict.fromkeys(mentions) if m != author and m in self.roles]
        if not targets and previous_author is not None and previous_author != author:
            targets = [previous_author]
        targets = [t for t in targets if t not in self._banned]   # a banned user is out of the game
        for target in targets:
            terms = out.setdefault(target, {})
            terms["provoked_toxicity"] = terms.get("provoked_toxicity", 0.0) + _unit(toxicity)
        toxic = toxicity >= self.scores.toxic_threshold
        if self.moderator is not None:
            recent = (self._last_authority is not None
                      and turn - self._last_authority <= self.scores.authority_window)
            recovered = (not toxic and self._last_toxic.get(author, False) and self._answered.get(author, False))
            out[self.moderator] = {"toxic": float(toxic), "civil": float(not toxic and not recent),
                                   "recovery": float(recovered)}
        self._last_toxic[author] = toxic
        self._answered[author] = False
        return out

    def weighted(self, terms: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
        """Rewards from raw term values: points for the moderator, role weights for users."""
        out = {}
        points = self.scores.points()
        for agent, values in terms.items():
            if agent == self.moderator:
                out[agent] = sum(points[t] * v for t, v in values.items())
            else:
                weights = self.role_rewards.get(self.roles[agent], {})
                out[agent] = sum(weights.get(t, 0.0) * v for t, v in values.items())
        return out


def score_discussion(events: Iterable[Mapping], roles: Mapping[str, str], moderator: str | None,
                     scores: ModerationScores | Mapping | None = None,
                     role_rewards: Mapping[str, Mapping[str, float]] | None = None) -> dict:
    """Per-agent totals of reward and of every term over a finished (annotated) discussion.

    ``events`` are the environment's turn records (``env.turn_log``) with ``toxicity`` and
    ``argument_quality`` filled in (e.g. by ``socialgym.annotation.annotate_discussion``).
    Returns ``{"rewards": {agent: total}, "terms": {agent: {term: total}}, "per_turn": [...]}``.
    """
    tracker = RewardTracker(dict(roles), moderator, ModerationScores.coerce(scores), check_role_rewards(role_rewards))
    totals: dict[str, float] = {a: 0.0 for a in [*roles, *([moderator] if moderator else [])]}
    term_totals: dict[str, dict[str, float]] = {a: {} for a in totals}
    per_turn = []
    for event in events:
        if event["agent"] == moderator:
            terms = tracker.moderator_turn(event["turn"], bool(event["text"]), event.get("warned", ()),
                                           event.get("banned", ()), event.get("mentions", ()))
        elif event["text"]:
            terms = tracker.user_comment(event["turn"], event["agent"], event.get("mentions", ()),
                                         event.get("toxicity"), event.get("argument_quality"))
        else:
            terms = {}
        rewards = tracker.weighted(terms)
        per_turn.append(rewards)
        for agent, value in rewards.items():
            totals[agent] += value
        for agent, values in terms.items():
            for term, v in values.items():
                term_totals[agent][term] = term_totals[agent].get(term, 0.0) + v
    return {"rewards": totals, "terms": term_totals, "per_turn": per_turn}
