"""The discussion environment: a PettingZoo AEC env of a threaded discussion (paper §3).

One turn = one speaker. Users ``user_0 …`` are picked by the turn-taking function (eq. 3 by
default); when the ``moderator`` takes part, every user turn is followed by a moderator turn,
and an empty reply means the moderator stays silent. Each speaker sees the opening post and
the last h comments (eq. 2). The moderator can warn and ban users; a banned user never speaks
again and leaves the episode (terminated). Comments are stored in the platform's
``ContentStore`` (kind COM, replying to the comment of the first user they @mention, or to the
latest comment), so discussion and feed share one content model.

With an ``annotator`` the environment rates every comment as it is written (live annotation)
and pays the rewards of ``socialgym.discussion.rewards`` during the episode; without one the
rewards are 0 and ``score_discussion`` computes them after annotating the finished transcript.
"""

from __future__ import annotations

import copy
import math
import re
import string
import warnings
from typing import Any

import numpy as np
from gymnasium import spaces
from pettingzoo import AECEnv

from socialgym.annotation.base import AnnotationRequest
from socialgym.discussion.config import MODERATOR, ROLES, DiscussionConfig
from socialgym.discussion.rewards import RewardTracker
from socialgym.discussion.turn_taking import make_turn_taker
from socialgym.platform.actions import COM, POST, RoundBatch
from socialgym.platform.content import ContentStore
from socialgym.platform.validation import NotResetError, check_seed, utf8_problem

_MENTION = re.compile(r"@([A-Za-z0-9_\-]+)")
SELF_FEATURES = ("progress", "is_moderator", "warnings", "active_users", "live_annotation",
                 "role_normal", "role_community", "role_troll")
SLOT_FEATURES = ("present", "toxicity", "argument_quality", "annotated", "by_self", "by_moderator",
                 "mentions_self")


class CommentText(spaces.Text):
    """Any string of at most ``max_length`` characters.

    gymnasium's ``Text`` only admits strings over its character set; comments are free text
    (punctuation, emoji, any script), so membership here checks type and length only. Samples
    are drawn from letters, digits and a little punctuation.
    """

    def __init__(self, max_length: int, seed=None) -> None:
        super().__init__(max_length=max_length, min_length=0,
                         charset=string.ascii_letters + string.digits + " .,!?'@_", seed=seed)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"CommentText({self.max_length})"


class InvalidRecord(dict):
    """Why an action was invalid (lenient mode), in ``infos[agent]["invalid"]`` and the turn
    log: a dict like the feed environment's records, ``{"agent", "turn", "field", "reason"}``.

    ``str(record)`` is the message a strict error names ("user_0, turn 3, text: ..."). Records
    were that string before they were dicts; comparing one with a string or looking for a
    substring in it still reads the message, with a DeprecationWarning (use ``record["reason"]``).
    """

    def __str__(self) -> str:
        return f"{self['agent']}, turn {self['turn']}, {self['field']}: {self['reason']}"

    def _as_message(self) -> str:
        warnings.warn("reading an invalid-action record as a string is deprecated: records are dicts "
                      "{agent, turn, field, reason}", DeprecationWarning, stacklevel=3)
        return str(self)

    def __eq__(self, other: object) -> bool:
        return self._as_message() == other if isinstance(other, str) else dict.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __contains__(self, item: object) -> bool:
        if dict.__contains__(self, item):
            return True
        return isinstance(item, str) and item in self._as_message()

    __hash__ = None      # a dict


class DiscussionEnv(AECEnv):
    metadata = {"name": "socialgym_discussion_v0", "render_modes": ["human", "ansi"], "is_parallelizable": False}

    def __init__(self, config: DiscussionConfig | None = None, *, annotator=None, render_mode: str | None = None,
                 **overrides) -> None:
        super().__init__()
        if render_mode not in (None, *self.metadata["render_modes"]):
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']} or None")
        if annotator is not None and not callable(getattr(annotator, "annotate", None)):
            raise TypeError("annotator must have an annotate(requests) method (see socialgym.annotation)")
        self.config = c = DiscussionConfig.build(config, **overrides)
        self.annotator = annotator
        self.render_mode = render_mode
        self.users = [f"user_{i}" for i in range(c.n_users)]
        self.possible_agents = self.users + ([MODERATOR] if c.moderator else [])
        self.moderator = MODERATOR if c.moderator else None
        self.roles = dict(zip(self.users, c.user_roles))
        self.usernames = dict(zip(self.possible_agents, (*c.names, MODERATOR)))
        self._agent_of = {name: agent for agent, name in self.usernames.items()}
        self._turn_taker = make_turn_taker(c.turn_taking)
        self.rng = np.random.default_rng(c.seed)
        h = c.context_length
        self.feature_names = SELF_FEATURES + tuple(f"c{k}_{f}" for k in range(h) for f in SLOT_FEATURES)
        context_chars = len(c.topic) + 16 + h * (c.comment_chars + 40)
        observation = spaces.Dict({
            "observation": spaces.Box(0.0, 1.0, (len(self.feature_names),), np.float32),
            "context": CommentText(context_chars)})
        self.observation_spaces = {a: observation for a in self.possible_agents}
        comment = CommentText(c.comment_chars)
        self.action_spaces = {a: comment for a in self.users}
        if self.moderator:
            self.action_spaces[MODERATOR] = spaces.Dict({
                "text": comment, "warn": spaces.Discrete(c.n_users + 1), "ban": spaces.Discrete(c.n_users + 1)})
        self.agents: list[str] = []

    # ------------------------------------------------------------------ spaces
    def observation_space(self, agent: str) -> spaces.Space:
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> spaces.Space:
        return self.action_spaces[agent]

    # ------------------------------------------------------------------ episode
    def _require_state(self, what: str) -> None:
        """NotResetError (a RuntimeError) when ``what`` needs the state ``reset()`` creates."""
        if "store" not in vars(self):
            raise NotResetError(self, what)

    def reset(self, seed: int | None = None, options: dict | None = None) -> None:
        """Start a discussion. ``seed``: None (keep the RNG stream) or an integer >= 0
        (TypeError / ValueError naming ``seed`` otherwise)."""
        seed = check_seed(seed, "seed")
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        c = self.config
        self.turn = 0
        self.store = ContentStore(capacity=64)
        self._append(-1, POST, c.topic, [], -1, -1)           # the opening post (author -1: the seed)
        self.user_turns = 0
        self.history: list[int] = []                         # user index of every user turn
        self.active = list(range(c.n_users))
        self.warnings = np.zeros(c.n_users, np.int64)
        self.banned = np.zeros(c.n_users, bool)
        self.turn_log: list[dict] = []
        self.comment_ids: list[int] = []                     # content ids of comments, in order
        self._annotation: dict[int, Any] = {}                # content id -> Annotation
        self._turn_of: dict[int, int] = {}                   # content id -> index into turn_log
        self.tracker = RewardTracker(self.roles, self.moderator, c.scores, c.weights)
        self.agents = list(self.possible_agents)
        self.rewards = {a: 0.0 for a in self.agents}
        self._cumulative_rewards = {a: 0.0 for a in self.agents}
        self.terminations = {a: False for a in self.agents}
        self.truncations = {a: False for a in self.agents}
        self.infos = {a: {} for a in self.agents}
        self._skip_agent_selection = None
        self.agent_selection = self._next_user()
        self._set_view()

    def step(self, action: Any) -> None:
        """One turn. Atomic: if anything raises (a strict invalid action, the annotator, the
        turn-taking function) the environment is left exactly as it was, so the turn can be
        retried."""
        self._require_state("step")
        snapshot = self._snapshot()
        try:
            self._step(action)
        except BaseException:
            self._restore(snapshot)
            raise

    # Everything a turn may change. The discussion is LLM-sized (a few users, hundreds of turns),
    # so plain copies of the per-turn containers cost nothing next to one model call.
    _SCALARS = ("turn", "user_turns", "agent_selection", "_skip_agent_selection")
    _CONTAINERS = ("agents", "history", "active", "warnings", "banned", "turn_log", "comment_ids", "_annotation",
                   "_turn_of", "rewards", "_cumulative_rewards", "terminations", "truncations", "infos")

    def _snapshot(self) -> tuple:
        state = {k: getattr(self, k) for k in self._SCALARS}
        state.update({k: copy.copy(getattr(self, k)) for k in self._CONTAINERS})
        state["infos"] = {a: dict(info) for a, info in self.infos.items()}
        return (state, self.store.checkpoint(), copy.deepcopy(self.tracker), self.rng.bit_generator.state)

    def _restore(self, snapshot: tuple) -> None:
        state, mark, tracker, rng_state = snapshot
        self.__dict__.update(state)
        self.store.rollback(mark)
        self.tracker = tracker
        self.rng.bit_generator.state = rng_state

    def _step(self, action: Any) -> None:
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            self._set_view()
            return
        invalid: list[InvalidRecord] = []
        # validate first: a strict error leaves the environment as it was
        if agent == self.moderator:
            parsed = self._parse_moderator(action, invalid)
        else:
            parsed = self._parse_user(agent, action, invalid)
        # live annotation before any state changes, so an annotator error leaves the env as it was
        annotation = self._annotate_live(agent, parsed[0]) if parsed[0] else None
        self._cumulative_rewards[agent] = 0.0
        self.turn += 1
        if agent == self.moderator:
            terms, record = self._moderator_step(*parsed, annotation)
        else:
            terms, record = self._user_step(agent, *parsed, annotation)
        record["invalid"] = invalid
        self.turn_log.append(record)
        rewards = self.tracker.weighted(terms)
        self.rewards = {a: float(rewards.get(a, 0.0)) for a in self.agents}
        self.infos = {a: {"turn": self.turn, "reward_terms": dict(terms.get(a, {}))} for a in self.agents}
        self.infos[agent]["invalid"] = invalid
        self._advance(agent)
        self._accumulate_rewards()
        self._deads_step_first()
        self._set_view()
        if self.render_mode == "human":
            print(self._render_turn(record))

    # ------------------------------------------------------------------ turns
    def _user_step(self, agent: str, text: str, mentions: list[str], annotation) -> tuple[dict, dict]:
        idx = self.users.index(agent)
        record = self._record(agent, text, mentions)
        self.history.append(idx)
        self.user_turns += 1
        if not text:                      # a pass: nothing is written, nothing to rate
            return {}, record
        cid = self._comment(agent, text, mentions, annotation)
        record["content_id"] = cid
        tox = annotation.mean_toxicity if annotation is not None else None
        aq = annotation.mean_argument_quality if annotation is not None else None
        record.update(toxicity=tox, argument_quality=aq)
        return self.tracker.user_comment(self.turn, agent, [m for m in mentions if m in self.roles], tox, aq), record

    def _moderator_step(self, text: str, mentions: list[str], warn: list[str], ban: list[str],
                        annotation) -> tuple[dict, dict]:
        banned: list[str] = []
        warned: list[str] = []
        for user in warn:
            i = self.users.index(user)
            self.warnings[i] += 1
            warned.append(user)
            limit = self.config.ban_after_warnings
            if limit is not None and self.warnings[i] >= limit and user not in ban:
                ban.append(user)            # the environment enforces the warning limit
        for user in ban:
            i = self.users.index(user)
            self.banned[i] = True
            self.active.remove(i)
            self.terminations[user] = True
            banned.append(user)
        record = self._record(MODERATOR, text, mentions, warned=warned, banned=banned)
        if text:
            record["content_id"] = self._comment(MODERATOR, text, mentions, annotation)
            if annotation is not None:
                record.update(toxicity=annotation.mean_toxicity, argument_quality=annotation.mean_argument_quality)
        return self.tracker.moderator_turn(self.turn, bool(text), warned, banned, mentions), record

    def _advance(self, acted: str) -> None:
        c = self.config
        if not self.active:                       # everyone was banned
            for a in self.agents:
                self.terminations[a] = True
            return
        if acted != MODERATOR and self.moderator:
            self.agent_selection = MODERATOR
            return
        if self.user_turns >= c.max_turns:
            for a in self.agents:
                self.truncations[a] = True
            return
        self.agent_selection = self._next_user()

    def _next_user(self) -> str:
        pick = self._turn_taker(list(self.history), list(self.active), self.rng)
        if isinstance(pick, (bool, np.bool_)) or not isinstance(pick, (int, np.integer)) or int(pick) not in self.active:
            raise ValueError(f"the turn-taking function returned {pick!r}; it must return the index of an "
                             f"active user, one of {self.active}")
        return self.users[int(pick)]

    # ------------------------------------------------------------------ actions
    def _fail(self, agent: str, field: str, message: str, invalid: list[InvalidRecord]) -> None:
        record = InvalidRecord(agent=agent, turn=self.turn + 1, field=field, reason=message)
        if self.config.invalid_actions == "strict":
            raise ValueError(f"invalid action by {record}")
        invalid.append(record)

    def _text(self, agent: str, text: Any, invalid: list[InvalidRecord]) -> str:
        if text is None:
            return ""
        if not isinstance(text, str):
            self._fail(agent, "text", f"must be a string, got {type(text).__name__}", invalid)
            return ""
        problem = utf8_problem(text)
        if problem:
            self._fail(agent, "text", f"{problem} (lenient: the turn is a pass)", invalid)
            return ""
        limit = self.config.comment_chars
        if len(text) > limit:
            self._fail(agent, "text", f"{len(text)} characters, more than comment_chars={limit} "
                                      f"(lenient: cut to {limit})", invalid)
            text = text[:limit]
        return text.strip()

    def _mentions(self, agent: str, text: str, explicit: Any, invalid: list[InvalidRecord]) -> list[str]:
        names = [self._agent_of[m] for m in _MENTION.findall(text) if m in self._agent_of]
        if explicit is not None:
            if isinstance(explicit, str) or not hasattr(explicit, "__iter__"):
                explicit = [explicit]
            for m in explicit:
                target = (self._agent_of.get(m) or (m if m in self.usernames else None)) if isinstance(m, str) else None
                if target is None:
                    self._fail(agent, "mentions", f"{m!r} is not a participant", invalid)
                else:
                    names.append(target)
        return [m for m in dict.fromkeys(names) if m != agent]

    def _parse_user(self, agent: str, action: Any, invalid: list[InvalidRecord]) -> tuple[str, list[str]]:
        explicit = None
        if isinstance(action, dict):
            unknown = sorted(set(action) - {"text", "mentions"})
            if unknown:
                self._fail(agent, "action", f"unknown key(s) {unknown}; a user action has text and mentions", invalid)
            text, explicit = action.get("text", ""), action.get("mentions")
        elif isinstance(action, str):
            text = action
        else:
            self._fail(agent, "action", f"must be the comment text (str) or {{'text': ..., 'mentions': [...]}}, "
                                        f"got {type(action).__name__}", invalid)
            return "", []
        text = self._text(agent, text, invalid)
        mentions = self._mentions(agent, text, explicit, invalid)   # checked even for a pass
        return text, (mentions if text else [])

    def _targets(self, field: str, value: Any, invalid: list[InvalidRecord]) -> list[str]:
        """warn/ban targets: None or 0 (nobody), a user index + 1 (the Discrete encoding), a
        username or agent id, or a list of these; each must be a user still in the discussion."""
        if value is None:
            return []
        values = list(value) if isinstance(value, (list, tuple)) else [value]
        out = []
        for v in values:
            if isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)):
                if int(v) == 0:
                    continue
                user = self.users[int(v) - 1] if 1 <= int(v) <= len(self.users) else None
            elif isinstance(v, str):
                user = self._agent_of.get(v) or (v if v in self.roles else None)
            else:
                user = None
            if user is None or user not in self.roles:
                self._fail(MODERATOR, field, f"{v!r} is not a user (give a username, an agent id, or "
                                             f"1..{len(self.users)})", invalid)
            elif self.banned[self.users.index(user)]:
                self._fail(MODERATOR, field, f"{user} is already banned", invalid)
            elif user not in out:
                out.append(user)
        return out

    def _parse_moderator(self, action: Any, invalid: list[InvalidRecord]):
        if isinstance(action, str):
            action = {"text": action}
        if not isinstance(action, dict):
            self._fail(MODERATOR, "action", "must be the reply text (str, '' = silent) or "
                                            f"{{'text', 'warn', 'ban'}}, got {type(action).__name__}", invalid)
            return "", [], [], []
        unknown = sorted(set(action) - {"text", "mentions", "warn", "ban"})
        if unknown:
            self._fail(MODERATOR, "action", f"unknown key(s) {unknown}; the moderator's keys are "
                                            "text, mentions, warn, ban", invalid)
        text = self._text(MODERATOR, action.get("text", ""), invalid)
        mentions = self._mentions(MODERATOR, text, action.get("mentions"), invalid)   # checked even when silent
        mentions = mentions if text else []
        ban = self._targets("ban", action.get("ban"), invalid)
        warn = [u for u in self._targets("warn", action.get("warn"), invalid) if u not in ban]
        return text, mentions, warn, ban

    # ------------------------------------------------------------------ content and annotation
    def _append(self, author: int, kind: int, text: str, mentions: list[int], target: int, target_author: int) -> int:
        batch = RoundBatch(n_agents=len(self.possible_agents), n_actions=1, round=self.turn,
                           sender=np.array([author], np.int32), kind=np.array([kind], np.int8),
                           recipient=np.array([target_author], np.int32), target_id=np.array([target], np.int64),
                           topic=np.zeros(1, np.int32), sentiment=np.zeros(1),
                           mention_action=np.zeros(len(mentions), np.int64),
                           mention_agent=np.array(mentions, np.int32))
        return int(self.store.append_batch(batch, [text])[0])

    def _comment(self, agent: str, text: str, mentions: list[str], annotation=None) -> int:
        index = self.possible_agents.index
        target = 0
        authors = self.store.column("author")
        if mentions:                     # reply to the latest comment of the first user mentioned
            first = index(mentions[0])
            mine = [cid for cid in self.comment_ids if authors[cid] == first]
            target = mine[-1] if mine else (self.comment_ids[-1] if self.comment_ids else 0)
        elif self.comment_ids:
            target = self.comment_ids[-1]
        cid = self._append(index(agent), COM, text, [index(m) for m in mentions], target, int(authors[target]))
        self.comment_ids.append(cid)
        self._turn_of[cid] = len(self.turn_log)
        if annotation is not None:
            self._annotation[cid] = annotation
        return cid

    def request(self, cid: int) -> AnnotationRequest:
        """What an annotator reads for comment ``cid``: it and the h comments before it."""
        self._require_state("request")
        pos = self.comment_ids.index(cid)
        authors, texts = self.store.column("author"), self.store.texts
        name = self.usernames[self.possible_agents[int(authors[cid])]]
        return self._request(cid, name, texts[cid], self.comment_ids[max(0, pos - self.config.context_length):pos])

    def _request(self, cid: int, name: str, text: str, before: list[int]) -> AnnotationRequest:
        authors, texts = self.store.column("author"), self.store.texts
        return AnnotationRequest(cid, name, text,
                                 tuple((self.usernames[self.possible_agents[int(authors[j])]], texts[j])
                                       for j in before), self.config.topic)

    def _annotate_live(self, agent: str, text: str):
        """Rate the comment ``agent`` is about to write (it gets content id ``len(store)``)."""
        if self.annotator is None:
            return None
        before = self.comment_ids[max(0, len(self.comment_ids) - self.config.context_length):]
        annotations = self.annotator.annotate([self._request(len(self.store), self.usernames[agent], text, before)])
        if len(annotations) != 1:
            raise ValueError(f"the annotator returned {len(annotations)} annotations for 1 comment")
        return annotations[0]

    def _record(self, agent: str, text: str, mentions: list[str], warned=(), banned=()) -> dict:
        return {"turn": self.turn, "user_turn": self.user_turns + (agent != MODERATOR), "agent": agent,
                "username": self.usernames[agent], "role": self.roles.get(agent, MODERATOR), "text": text,
                "mentions": list(mentions), "warned": list(warned), "banned": list(banned),
                "content_id": None, "toxicity": None, "argument_quality": None}

    # ------------------------------------------------------------------ observations
    def _slots(self, agent: str) -> list[int]:
        """Content ids of the last h comments, most recent first."""
        return self.comment_ids[::-1][: self.config.context_length]

    def observe(self, agent: str) -> dict:
        self._require_state("observe")
        c = self.config
        me = self.possible_agents.index(agent)
        obs = np.zeros(len(self.feature_names), np.float32)
        obs[0] = self.user_turns / c.max_turns
        obs[1] = agent == MODERATOR
        if agent in self.roles:
            i = self.users.index(agent)
            obs[2] = min(1.0, self.warnings[i] / (c.ban_after_warnings or 3))
            obs[5 + ROLES.index(self.roles[agent])] = 1.0
        obs[3] = len(self.active) / c.n_users
        obs[4] = self.annotator is not None
        authors = self.store.column("author")
        mod = len(self.users)
        for k, cid in enumerate(self._slots(agent)):
            base = len(SELF_FEATURES) + k * len(SLOT_FEATURES)
            a = self._annotation.get(cid)
            tox = a.mean_toxicity if a is not None else math.nan
            aq = a.mean_argument_quality if a is not None else math.nan
            obs[base:base + len(SLOT_FEATURES)] = (
                1.0, 0.0 if math.isnan(tox) else (tox - 1) / 4, 0.0 if math.isnan(aq) else (aq - 1) / 4,
                float(not math.isnan(tox)), authors[cid] == me, authors[cid] == mod,
                me in self.store.mentions_of(cid))
        return {"observation": obs, "context": self.context(agent)}

    def context(self, agent: str | None = None) -> str:
        """The text a speaker reads: the opening post and the last h comments (eq. 2)."""
        self._require_state("context")
        authors, texts = self.store.column("author"), self.store.texts
        lines = [f"Post: {self.config.topic}"]
        for cid in reversed(self._slots(agent)):
            lines.append(f"{self.usernames[self.possible_agents[int(authors[cid])]]}: {texts[cid]}")
        return "\n".join(lines)

    def view(self, agent: str) -> dict:
        """The structured form of what ``agent`` sees now (policies read ``infos[agent]["view"]``)."""
        self._require_state("view")
        authors, texts = self.store.column("author"), self.store.texts
        comments = []
        for cid in reversed(self._slots(agent)):
            author = self.possible_agents[int(authors[cid])]
            a = self._annotation.get(cid)
            comments.append({"id": cid, "turn": self.turn_log[self._turn_of[cid]]["turn"],
                             "author": self.usernames[author], "moderator": author == MODERATOR,
                             "text": texts[cid],
                             "mentions": [self.usernames[self.possible_agents[m]] for m in self.store.mentions_of(cid)],
                             "toxicity": None if a is None else _finite(a.mean_toxicity),
                             "argument_quality": None if a is None else _finite(a.mean_argument_quality)})
        i = self.users.index(agent) if agent in self.roles else None
        return {"topic": self.config.topic, "agent": agent, "username": self.usernames[agent],
                "role": self.roles.get(agent, MODERATOR), "turn": self.turn + 1, "user_turn": self.user_turns,
                "max_turns": self.config.max_turns, "comment_chars": self.config.comment_chars, "comments": comments,
                "users": [self.usernames[self.users[u]] for u in self.active if self.users[u] != agent],
                "warnings": int(self.warnings[i]) if i is not None else 0,
                "warned": {self.usernames[self.users[u]]: int(self.warnings[u]) for u in self.active if self.warnings[u]},
                "banned": [self.usernames[u] for u, b in zip(self.users, self.banned) if b]}

    def _set_view(self) -> None:
        agent = self.agent_selection
        if agent in self.infos and not (self.terminations[agent] or self.truncations[agent]):
            self.infos[agent]["view"] = self.view(agent)
            if agent == MODERATOR:       # PettingZoo's convention: which warn/ban targets are valid now
                mask = np.concatenate([[1], ~self.banned]).astype(np.int8)
                self.infos[agent]["action_mask"] = {"text": None, "warn": mask, "ban": mask.copy()}

    # ------------------------------------------------------------------ results
    def last(self, observe: bool = True):
        self._require_state("last")
        return super().last(observe)

    def annotation(self, cid: int):
        self._require_state("annotation")
        return self._annotation.get(cid)

    def set_annotations(self, annotations: dict) -> None:
        """Attach annotations made after the episode (``{content id: Annotation}``)."""
        self._require_state("set_annotations")
        for cid, a in annotations.items():
            if cid not in self._turn_of:
                raise KeyError(f"content id {cid} is not a comment of this discussion")
            self._annotation[cid] = a
            self.turn_log[self._turn_of[cid]].update(toxicity=a.mean_toxicity,
                                                     argument_quality=a.mean_argument_quality)

    def transcript(self) -> str:
        self._require_state("transcript")
        return "\n".join(self._render_turn(r) for r in self.turn_log)

    def _render_turn(self, r: dict) -> str:
        actions = "".join(f" [warns @{self.usernames[u]}]" for u in r["warned"])
        actions += "".join(f" [bans @{self.usernames[u]}]" for u in r["banned"])
        body = r["text"] if r["text"] else "(silent)"
        score = f"  (toxicity {r['toxicity']:.2f})" if r.get("toxicity") is not None else ""
        return f"[{r['turn']:>3}] {r['username']}: {body}{actions}{score}"

    def render(self) -> str | None:
        if self.render_mode is None:
            return None
        self._require_state("render")
        text = f"Post: {self.config.topic}\n" + self.transcript()
        if self.render_mode == "ansi":
            return text
        print(text)
        return None

    def close(self) -> None:
        pass


def _finite(x: float) -> float | None:
    return None if math.isnan(x) else float(x)
