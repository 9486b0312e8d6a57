"""``DiscussionConfig``: the frozen configuration of a discussion environment.

The substrate (turns, context, moderation powers, rewards) is configured here; who takes
part (personas, LLM or scripted policies, moderation strategy) is the scenario, chosen by
the policies you run against it.
"""

from __future__ import annotations

import dataclasses
import re
import warnings
from dataclasses import InitVar, dataclass, field
from typing import Any, Callable, Mapping, Sequence

from socialgym.config import INVALID_MODES
from socialgym.discussion.rewards import ModerationScores, check_role_rewards
from socialgym.discussion.turn_taking import TURN_TAKING
from socialgym.platform.validation import is_int

ROLES = ("normal", "community", "troll")
MODERATOR = "moderator"
USERNAME = re.compile(r"^[A-Za-z0-9_\-]{1,32}$")
DEFAULT_TOPIC = ("Social media platforms should be legally required to remove hate speech within "
                 "24 hours, even if that means deleting some legitimate posts by mistake.")


@dataclass(frozen=True)
class DiscussionConfig:
    """Every field can also be passed as a keyword to ``socialgym.discussion_env``.

    - ``n_users``: users ``user_0 … user_{n-1}``;
    - ``roles``: one of ``normal``/``community``/``troll`` per user (a sequence, or a mapping
      ``{agent: role}`` for the non-normal ones); default all ``normal``;
    - ``usernames``: the names users are shown and @mentioned by (default the agent ids);
    - ``topic``: the seed opinion, the thread's opening post;
    - ``max_turns``: user turns per episode (with a moderator, each is followed by a
      moderator turn, so the episode has ``2 * max_turns`` turns);
    - ``context_length``: h, how many of the latest comments a speaker sees (paper eq. 2);
    - ``turn_taking``: ``paper`` (eq. 3), ``round_robin``, ``random``, or a function
      ``(history, active, rng) -> user index``;
    - ``moderator``: whether the ``moderator`` agent takes part;
    - ``ban_after_warnings``: the environment bans a user at this many warnings (None: never);
    - ``comment_chars``: the longest comment accepted;
    - ``invalid_actions``: ``strict`` raises on a malformed action; ``lenient`` falls back (a
      too long comment is cut, a non-string one becomes a pass, a bad warn/ban target or
      mention is dropped) and records why in ``infos[agent]["invalid"]`` (records as the feed
      environment's: dicts, here ``{"agent", "turn", "field", "reason"}``). The same keyword as
      the feed environment's; ``invalid`` is its deprecated alias;
    - ``moderator_rewards``: the moderation game's points (``ModerationScores`` or a mapping);
    - ``role_rewards``: per-role weights of the user reward terms, merged over the defaults.
    """

    n_users: int = 7
    roles: Sequence[str] | Mapping[str, str] | None = None
    usernames: Sequence[str] | None = None
    topic: str = DEFAULT_TOPIC
    max_turns: int = 14
    context_length: int = 4
    turn_taking: str | Callable = "paper"
    moderator: bool = True
    ban_after_warnings: int | None = 3
    comment_chars: int = 1500
    invalid_actions: str = "strict"
    moderator_rewards: ModerationScores | Mapping[str, float] | None = None
    role_rewards: Mapping[str, Mapping[str, float]] | None = None
    seed: int | None = None
    invalid: InitVar[str | None] = None
    """Deprecated alias of ``invalid_actions`` (a DeprecationWarning)."""
    # filled in by __post_init__
    user_roles: tuple[str, ...] = field(init=False)
    names: tuple[str, ...] = field(init=False)
    scores: ModerationScores = field(init=False)
    weights: Mapping[str, Mapping[str, float]] = field(init=False)

    def __post_init__(self, invalid: str | None) -> None:
        if invalid is not None:
            warnings.warn("the discussion config's invalid= is deprecated: use invalid_actions= (the feed "
                          "environment's name)", DeprecationWarning, stacklevel=3)
            if self.invalid_actions not in ("strict", invalid):
                raise TypeError(f"discussion config: invalid={invalid!r} is the deprecated name of "
                                f"invalid_actions={self.invalid_actions!r}; give only invalid_actions")
            object.__setattr__(self, "invalid_actions", invalid)

        def bad(name: str, value: Any, want: str) -> ValueError:
            return ValueError(f"discussion config {name} must be {want}, got {value!r}")

        n = self.n_users
        if not is_int(n, numpy=False) or n < 2:
            raise bad("n_users", n, "an integer >= 2")
        for name, low in (("max_turns", 1), ("context_length", 1), ("comment_chars", 1)):
            value = getattr(self, name)
            if not is_int(value, numpy=False) or value < low:
                raise bad(name, value, f"an integer >= {low}")
        b = self.ban_after_warnings
        if b is not None and (not is_int(b, numpy=False) or b < 1):
            raise bad("ban_after_warnings", b, "None or an integer >= 1")
        if not isinstance(self.topic, str) or not self.topic.strip():
            raise bad("topic", self.topic, "a non-empty string")
        if not callable(self.turn_taking) and self.turn_taking not in TURN_TAKING:
            raise bad("turn_taking", self.turn_taking, f"one of {TURN_TAKING} or a function")
        if self.invalid_actions not in INVALID_MODES:
            raise bad("invalid_actions", self.invalid_actions, f"one of {INVALID_MODES}")
        s = self.seed
        if s is not None and (not is_int(s, numpy=False) or s < 0):
            raise bad("seed", s, "None or an integer >= 0")
        if isinstance(self.usernames, str):
            raise bad("usernames", self.usernames, f"a sequence of {n} names")
        if not isinstance(self.moderator, bool):
            raise bad("moderator", self.moderator, "True or False")
        agents = [f"user_{i}" for i in range(n)]
        roles = self.roles
        if roles is None:
            user_roles = ["normal"] * n
        elif isinstance(roles, Mapping):
            unknown = sorted(set(roles) - set(agents))
            if unknown:
                raise ValueError(f"discussion config roles names unknown user(s) {unknown}; users are user_0..user_{n - 1}")
            user_roles = [roles.get(a, "normal") for a in agents]
        elif isinstance(roles, str) or len(roles) != n:
            raise bad("roles", roles, f"a sequence of {n} roles or a mapping {{agent: role}}")
        else:
            user_roles = list(roles)
        for a, r in zip(agents, user_roles):
            if r not in ROLES:
                raise ValueError(f"discussion config roles: {a} has role {r!r}; roles are {ROLES}")
        names = list(self.usernames) if self.usernames is not None else agents
        if len(names) != n:
            raise bad("usernames", self.usernames, f"{n} names")
        for name in names:
            if not isinstance(name, str) or not USERNAME.match(name) or name == MODERATOR:
                raise ValueError(f"discussion config usernames: {name!r} is not a valid @mention name "
                                 f"(letters, digits, _ or -, 1-32 characters, not 'moderator')")
        if len(set(names)) != n:
            raise ValueError("discussion config usernames must be unique")
        object.__setattr__(self, "user_roles", tuple(user_roles))
        object.__setattr__(self, "names", tuple(names))
        object.__setattr__(self, "scores", ModerationScores.coerce(self.moderator_rewards))
        object.__setattr__(self, "weights", check_role_rewards(self.role_rewards))

    @classmethod
    def build(cls, config: "DiscussionConfig | None" = None, **overrides) -> "DiscussionConfig":
        init = {f.name for f in dataclasses.fields(cls) if f.init}
        unknown = sorted(set(overrides) - init - {"invalid"})       # (invalid: a deprecated alias)
        if unknown:
            raise TypeError(f"unknown discussion config key(s) {unknown}; known: {sorted(init)}")
        if config is None:
            return cls(**overrides)
        return dataclasses.replace(config, **overrides) if overrides else config
