"""LLM participants of the discussion environment: users, the moderator, the moderator's coach.

Each prompt follows the paper's eq. 2: the speaker's instruction prompt (actor prompt, role
instructions, SocioDemographic Background; App. A.4) followed by the opening post and the
last h comments. ``generation`` works as for the feed's ``LLMPolicy``:

- ``"joint"``: replies are JSON under a schema: a user writes ``{"comment": ...}``; the
  moderator's reply is a discriminated union of four shapes — respond, stay silent, warn @user,
  ban @user — whose ``user`` is an enum of the users still in the discussion, so a server with
  constrained decoding cannot name a stranger or attach a ban to a silent turn;
- ``"split"``: a user's comment is asked for as plain text (an empty reply is silence); the
  moderator first chooses its move under the same union without the text, then, unless silent,
  writes its text in a plain request;
- ``"auto"`` (default): ``split`` for a local GGUF model (``LLMClient(local=True)``), else ``joint``.

Replies still invalid after the client's re-prompts fall back (a user passes, the moderator
stays silent; a failed moderator text leaves a warn/ban with the bare @mention) and the fallback
is recorded in ``client.usage.fallbacks``, as in the feed environment.

``LLMDiscussant`` and ``LLMModerator`` implement the per-turn protocol
``socialgym.baselines.protocol.DiscussionPolicy``: they are called as
``policy.act(agent, observation, info)`` and read ``info["view"]``.
"""

from __future__ import annotations

import dataclasses
from typing import Mapping, Sequence

from socialgym.discussion.prompts import (
    MODERATION_GAME_SCORES, MODERATOR_ACTOR, ROLE_INSTRUCTIONS, USER_ACTOR, moderator_instructions,
)
from socialgym.discussion.rewards import MODERATOR_TERMS, ModerationScores
from socialgym.discussion.sdb import SDB, generate_sdbs, sdb_block
from socialgym.llm.schemas import Checked, check_tips, tips_schema
from socialgym.llm.text import clean_text, resolve_generation
from socialgym.llm.usage import Fallback

def _conversation(view: dict, chars: int) -> str:
    lines = [f"Post: {view['topic']}"]
    for c in view["comments"]:
        lines.append(f"{c['author']}{' (moderator)' if c['moderator'] else ''}: {c['text'][:chars]}")
    return "\n".join(lines)


def _fallback(client, agent, turn, purpose, reason, used) -> None:
    client.usage.record_fallback(Fallback(agent, turn, purpose, None, str(reason), used))


# ---------------------------------------------------------------------------- users
def comment_schema(max_chars: int) -> dict:
    return {"type": "object", "properties": {"comment": {"type": "string", "maxLength": max_chars}},
            "required": ["comment"], "additionalProperties": False}


def check_comment(value, max_chars: int) -> Checked:
    if not isinstance(value, dict) or not isinstance(value.get("comment"), str):
        return Checked(None, ['the reply must be {"comment": "<text>"}'])
    extra = sorted(set(value) - {"comment"})
    text = value["comment"]
    errors = [f"unexpected key(s) {extra}"] if extra else []
    if len(text) > max_chars:
        errors.append(f"comment is {len(text)} characters; at most {max_chars}")
        text = text[:max_chars]
    return Checked(text, errors)


class LLMDiscussant:
    """LLM users. ``sdbs``: one background per user (by username or in agent order), or None
    to draw them (``generate_sdbs``). The role's instructions (A.4.3) become the SDB's special
    instructions unless ``roles=False`` (the paper's no-roles ablation)."""

    def __init__(self, client, sdbs: Mapping[str, SDB] | Sequence[SDB] | None = None, *,
                 instructions: str = USER_ACTOR, roles: bool = True, with_sdb: bool = True, seed: int = 0,
                 max_chars: int = 600, max_tokens: int = 160, context_chars: int = 600,
                 generation: str = "auto") -> None:
        resolve_generation(generation, client)               # a bad mode fails here
        self.client, self.generation = client, generation
        self._sdbs = dict(sdbs) if isinstance(sdbs, Mapping) else (list(sdbs) if sdbs is not None else None)
        self.assigned: dict[str, SDB] = {}
        self.instructions, self.roles, self.with_sdb, self.seed = instructions, roles, with_sdb, seed
        self.max_chars, self.max_tokens, self.context_chars = max_chars, max_tokens, context_chars

    def __getstate__(self) -> dict:
        return {**self.__dict__, "client": None}

    def sdb(self, agent: str, view: dict) -> SDB:
        key = f"{agent}/{view['username']}"        # the same object may serve several discussions
        if key not in self.assigned:
            given = self._sdbs
            if isinstance(given, dict):
                sdb = given.get(view["username"]) or given.get(agent)
                if sdb is None:
                    raise ValueError(f"no SDB for {agent} ({view['username']})")
            else:
                index = int(agent.rsplit("_", 1)[-1])
                pool = given if given is not None else generate_sdbs(index + 1, seed=self.seed)
                if index >= len(pool):
                    raise ValueError(f"{len(pool)} SDBs for user index {index}; give one per user")
                sdb = pool[index]
            self.assigned[key] = dataclasses.replace(sdb, username=view["username"])
        return self.assigned[key]

    def messages(self, agent: str, view: dict) -> list[dict]:
        sdb = self.sdb(agent, view)
        role_text = ROLE_INSTRUCTIONS[view["role"]] if self.roles else ""
        sdb = dataclasses.replace(sdb, special_instructions=role_text or sdb.special_instructions)
        background = f"\n\n{sdb_block(sdb)}" if self.with_sdb else f"\n\nUsername: {view['username']}"
        warned = (f"\nThe moderator has warned you {view['warnings']} time(s)." if view["warnings"] else "")
        fmt = ("Reply with your comment only (an empty reply means you stay silent)."
               if resolve_generation(self.generation, self.client) == "split" else
               'Reply only with JSON: {"comment": "<your comment>"} (an empty comment means you stay silent).')
        system = f"{self.instructions}{background}{warned}\n\n{fmt}"
        user = (f"{_conversation(view, self.context_chars)}\n\n"
                f"Write your next comment as {view['username']}.")
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]

    def act(self, agent: str, observation, info: dict) -> str:
        view = info["view"]
        limit = min(self.max_chars, view.get("comment_chars", self.max_chars))     # never above the env's
        if resolve_generation(self.generation, self.client) == "split":
            text = self.client.run(self.client.complete_text(
                self.messages(agent, view),
                clean=lambda raw: clean_text(raw, limit, max_sentences=4, keep=set(view["users"]) | {"moderator"}),
                agent=agent, round=view["turn"], purpose="comment", max_tokens=self.max_tokens, allow_empty=True))
            if not text.ok:
                _fallback(self.client, agent, view["turn"], "comment", text.error, "pass (no comment)")
            return text.text
        reply = self.client.run(self.client.complete_json(
            self.messages(agent, view), comment_schema(limit), lambda v: check_comment(v, limit),
            name="comment", agent=agent, round=view["turn"], purpose="comment", max_tokens=self.max_tokens))
        if reply.ok:
            return reply.checked.value
        if reply.checked is not None and reply.checked.value:          # too long: keep the cut text
            _fallback(self.client, agent, view["turn"], "comment", reply.error, "comment cut to max_chars")
            return reply.checked.value
        _fallback(self.client, agent, view["turn"], "comment", reply.error, "pass (no comment)")
        return ""


# ---------------------------------------------------------------------------- moderator
def moderator_schema(users: Sequence[str], max_chars: int, with_text: bool = True) -> dict:
    """The moderator's move; ``with_text=False`` (split generation) leaves the text for later."""
    text = {"text": {"type": "string", "minLength": 1, "maxLength": max_chars}} if with_text else {}
    variants = [
        {"type": "object", "properties": {"action": {"type": "string", "enum": ["respond"]}, **text},
         "required": ["action", *text], "additionalProperties": False},
        {"type": "object", "properties": {"action": {"type": "string", "enum": ["silent"]}},
         "required": ["action"], "additionalProperties": False},
    ]
    if users:
        for kind in ("warn", "ban"):
            variants.append({"type": "object", "properties": {
                "action": {"type": "string", "enum": [kind]}, "user": {"type": "string", "enum": list(users)},
                **text}, "required": ["action", "user", *text], "additionalProperties": False})
    return {"anyOf": variants}


def check_moderation(value, users: Sequence[str], max_chars: int, with_text: bool = True) -> Checked:
    """The reply as the environment's moderator action (``{"text", "warn", "ban"}``). Without
    text (split generation) it is the chosen move, ``{"move": "respond" | "silent" | "warn" |
    "ban", "user": ...}``, whose text is written next."""
    if not isinstance(value, dict):
        return Checked(None, ["the reply must be a JSON object with an action"])
    kind = value.get("action")
    if kind == "silent":
        ok = [] if set(value) <= {"action", "text"} else ["silent takes no other keys"]
        return Checked({"text": ""} if with_text else {"move": "silent"}, ok)
    if kind not in ("respond", "warn", "ban"):
        return Checked(None, [f"action must be respond, silent, warn or ban; got {kind!r}"])
    if not with_text:
        if kind == "respond":
            return Checked({"move": "respond"})
        user = value.get("user")
        if user not in users:
            return Checked(None, [f"user must be one of {list(users)}; got {user!r}"])
        return Checked({"move": kind, "user": user})
    text = value.get("text")
    if not isinstance(text, str) or not text.strip():
        return Checked(None, [f"a {kind} action needs a non-empty text"])
    errors = []
    if len(text) > max_chars:
        errors.append(f"text is {len(text)} characters; at most {max_chars}")
        text = text[:max_chars]
    if kind == "respond":
        return Checked({"text": text}, errors)
    user = value.get("user")
    if user not in users:
        return Checked({"text": text}, errors + [f"user must be one of {list(users)}; got {user!r}"])
    return Checked({"text": text, kind: user}, errors)


class LLMModerator:
    """The LLM moderator under one of the paper's strategies (``socialgym.discussion.prompts.STRATEGIES``
    except ``no_moderator``). ``coach``: a ``ModeratorCoach`` asked for tips every
    ``coach_every`` moderator turns from the moderation-game outcomes so far.

    ``scores`` are the points written into the moderation-game prompt: pass the environment's
    (``env.unwrapped.config.scores``) when you changed ``moderator_rewards``, so that the prompt
    and the reward agree. ``outcomes`` counts what the moderator did and what the environment
    reported to it at its turns (bans the warning limit triggers are not among them)."""

    def __init__(self, client, strategy: str = "no_instructions", sdb: SDB | None = None, *,
                 scores: ModerationScores | Mapping[str, float] | None = None, coach: "ModeratorCoach | None" = None,
                 coach_every: int = 4, with_sdb: bool = True, max_chars: int = 600, max_tokens: int = 200,
                 context_chars: int = 600, seed: int = 0, generation: str = "auto") -> None:
        resolve_generation(generation, client)               # a bad mode fails here
        self.client, self.generation = client, generation
        self.strategy = strategy
        self.scores = ModerationScores.coerce(scores)
        game = {k: self.scores.points()[k] for k in MODERATION_GAME_SCORES}
        self.instructions = moderator_instructions(strategy, game)       # validates the strategy
        self.sdb = sdb or generate_sdbs(1, seed=seed + 104729)[0]
        self.coach, self.coach_every = coach, coach_every
        self.with_sdb, self.max_chars, self.max_tokens, self.context_chars = with_sdb, max_chars, max_tokens, context_chars
        self.reset()

    def __getstate__(self) -> dict:
        return {**self.__dict__, "client": None}

    def reset(self) -> None:
        self.outcomes = {t: 0.0 for t in MODERATOR_TERMS}
        self.turns = 0
        self.tips: list[str] = []

    def system(self) -> str:
        """Actor prompt, strategy, background and coach tips (the output format comes after)."""
        sdb = dataclasses.replace(self.sdb, username="moderator")
        background = f"\n\n{sdb_block(sdb)}" if self.with_sdb else ""
        tips = ("\n\nCoach tips: " + " ".join(self.tips)) if self.tips else ""
        return f"{MODERATOR_ACTOR}\n\n{self.instructions}{background}{tips}"

    def messages(self, view: dict) -> list[dict]:
        """The moderator's turn: in split generation, the move only (its text comes next)."""
        warned = ", ".join(f"{u} ({n} warning{'s' * (n > 1)})" for u, n in view["warned"].items()) or "nobody"
        if resolve_generation(self.generation, self.client) == "split":
            fmt = ("First choose your move. Reply only with JSON, one of: "
                   '{"action": "respond"}, {"action": "silent"}, '
                   '{"action": "warn", "user": "<username>"}, {"action": "ban", "user": "<username>"}.')
        else:
            fmt = ("Reply only with JSON, one of: "
                   '{"action": "respond", "text": "..."}, {"action": "silent"}, '
                   '{"action": "warn", "user": "<username>", "text": "..."}, '
                   '{"action": "ban", "user": "<username>", "text": "..."}.')
        user = (f"{_conversation(view, self.context_chars)}\n\nUsers: {', '.join(view['users']) or 'none'}. "
                f"Warned so far: {warned}.\nYour move as the moderator.")
        return [{"role": "system", "content": f"{self.system()}\n\n{fmt}"}, {"role": "user", "content": user}]

    def act(self, agent: str, observation, info: dict) -> dict:
        view = info["view"]
        for term, value in info.get("reward_terms", {}).items():
            self.outcomes[term] = self.outcomes.get(term, 0.0) + value
        self.turns += 1
        if self.coach is not None and self.turns % self.coach_every == 0:
            reply = self.client.run(self.coach.atips(self.outcomes, self.scores, view["turn"]))
            if reply.ok:
                self.tips = list(reply.checked.value)
            else:
                _fallback(self.client, agent, view["turn"], "coach", reply.error, "no tip")
        users = view["users"]
        limit = min(self.max_chars, view.get("comment_chars", self.max_chars))
        split = resolve_generation(self.generation, self.client) == "split"
        messages = self.messages(view)
        reply = self.client.run(self.client.complete_json(
            messages, moderator_schema(users, limit, with_text=not split),
            lambda v: check_moderation(v, users, limit, with_text=not split), name="moderation", agent=agent,
            round=view["turn"], purpose="moderate", max_tokens=40 if split else self.max_tokens))
        if reply.ok:
            action = reply.checked.value
            if split:
                move = action
                action = {"text": ""} if move["move"] == "silent" else \
                    self._write(agent, view, messages[1]["content"], move, limit)
        else:
            action = {"text": ""}
            _fallback(self.client, agent, view["turn"], "moderate", reply.error, "silent")
        self.outcomes["intervene"] += bool(action["text"])
        self.outcomes["warn"] += "warn" in action
        self.outcomes["ban"] += "ban" in action
        return action


    def _write(self, agent: str, view: dict, situation: str, move: dict, limit: int) -> dict:
        """Split generation: the moderator's text for the move it chose, asked for plainly in one
        user message (chat templates that require alternating roles accept it)."""
        target = move.get("user")
        what = {"warn": f"a warning to @{target}", "ban": f"a message announcing that @{target} is banned"}
        kind = move["move"] if move["move"] in what else None
        ask = (f"Now write {what[kind]}" if kind else "Now write your reply to the discussion") + \
            ", as the moderator. One to three sentences. Reply with the text only."
        prefix = f"@{target} " if kind else ""
        text = self.client.run(self.client.complete_text(
            [{"role": "system", "content": self.system()}, {"role": "user", "content": f"{situation}\n\n{ask}"}],
            clean=lambda raw: clean_text(raw, max(10, limit - len(prefix)), max_sentences=3, keep=set(view["users"])),
            agent=agent, round=view["turn"], purpose="moderate_text", max_tokens=self.max_tokens))
        if not text.ok:
            used = "silent" if kind is None else f"{kind} with the bare @mention"
            _fallback(self.client, agent, view["turn"], "moderate_text", text.error, used)
        if kind is not None:
            body = text.text if f"@{target}" in text.text else f"{prefix}{text.text}".strip()
            return {"text": body[:limit], kind: target}
        return {"text": text.text}


class ModeratorCoach:
    """Tips for the moderator from its moderation-game outcomes so far (coaching in context,
    as the feed environment's coach does for users)."""

    SYSTEM = ("You coach an online discussion moderator who plays a scored moderation game. "
              "Give 3-5 short, concrete tips that would raise the moderator's score from here. "
              'Reply only with JSON: {"tips": ["...", "..."]}.')

    def __init__(self, client, *, max_tokens: int = 200) -> None:
        self.client = client
        self.max_tokens = max_tokens

    def __getstate__(self) -> dict:
        return {**self.__dict__, "client": None}

    def messages(self, outcomes: Mapping[str, float], scores: ModerationScores) -> list[dict]:
        points = scores.points()
        lines = "\n".join(f"- {t}: {outcomes.get(t, 0):g} times, {points[t]:+g} points each" for t in MODERATOR_TERMS)
        total = sum(points[t] * outcomes.get(t, 0) for t in MODERATOR_TERMS)
        user = (f"Outcomes so far (score {total:+g}):\n{lines}\n"
                "intervene = any reply; warn/ban = disciplinary actions; toxic = a toxic user comment; "
                "civil = a civil comment without recent warnings or bans; recovery = a toxic user "
                "turned civil after an intervention.")
        return [{"role": "system", "content": self.SYSTEM}, {"role": "user", "content": user}]

    async def atips(self, outcomes: Mapping[str, float], scores: ModerationScores, turn: int | None = None):
        return await self.client.complete_json(self.messages(outcomes, scores), tips_schema(), check_tips,
                                               name="coach_tips", agent="moderator", round=turn,
                                               purpose="coach", max_tokens=self.max_tokens)
