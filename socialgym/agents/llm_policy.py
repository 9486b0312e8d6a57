"""``LLMPolicy``: LLM-driven agents for the feed environment (specification §8, paper App. A).

It implements the batched policy protocol (``act(observations) -> actions``) for every agent
it is given, with all agents' requests concurrent (bounded by the client). Per agent and round:

1. take in the new observation (the last round's score for the best round, DMs and mentions
   received) into memory (``socialgym.agents.memory``);
2. optionally get **coach** tips (agents chosen by ``coached``);
3. **plan** the N actions with the Plan prompt, under a JSON schema (``schema_ids``: the listed
   ids as enums, or a schema that stays the same every round and ids checked after the reply);
4. **execute**, by ``generation``:

   - ``"joint"``: the plan's JSON also carries each action's text (one request; for capable
     models);
   - ``"split"``: the plan's fields are all closed choices (type, target, recipient, topic,
     tone, mention); then one short *plain* text request per POST/COM/DM, with the persona as
     its stable prefix, none for NOT. Each agent's text requests start as soon as its own plan
     arrives. Small models write fluent text only this way: inside grammar-constrained JSON
     they do not;
   - ``"auto"`` (default): ``split`` for a local GGUF model (``LLMClient(local=True)``, which the
     embedded model's runs set), ``joint`` otherwise;

5. **vote** on the vote items with the Vote prompt, and **reflect**: the same reply states the
   agent's current stance on its persona's issue, which becomes the round's opinion entry.

What an agent sees is configurable and reported: ``max_users``, ``max_posts``, ``max_dms``,
``max_vote_items``, ``max_topics`` (None shows everything); a list that is cut says in the prompt
how many entries were left out.

Invalid replies are re-prompted with the validation error (``client.max_repairs`` times);
what is still invalid falls back — an action slot to NOT (in round 1, where NOT is not
allowed, to a plain POST), a vote to 0, a failed text to an empty text (the tone then gives the
sentiment, specification §1) — and every fallback is recorded in ``client.usage.fallbacks`` with its
reason.
"""

from __future__ import annotations

import asyncio
import inspect
import re
import zlib
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from socialgym.agents.coach import Coach
from socialgym.agents.memory import AgentMemory, clip_text
from socialgym.agents.persona import STANCES, Persona, load_personas, personas_for
from socialgym.config import MAX_TEXT_CHARS, REWARD_NAMES
from socialgym.llm.prompts import PromptSet
from socialgym.llm.schemas import (
    PlanContext, check_plan, check_stance, check_vote_reply, plan_schema, reflect_schema, vote_schema,
)
from socialgym.llm.text import GENERATION_MODES, clean_text, resolve_generation
from socialgym.llm.usage import Fallback
from socialgym.platform.actions import PUBLIC_TYPES
from socialgym.platform.validation import check_int, is_int, show
from socialgym.recommenders.params import ParamError, check_seed_param

_MENTION = re.compile(r"@([A-Za-z0-9_\-]+)")
SCHEMA_ID_MODES = ("auto", "enum", "validate")
TOKEN_PARAMS = ("plan_tokens", "vote_tokens", "text_tokens")
MAX_REPLY_TOKENS = 1_000_000
"""Largest ``plan_tokens`` / ``vote_tokens`` / ``text_tokens`` (None: sized from the request)."""
VIEW_CAPS = ("max_users", "max_posts", "max_dms", "max_vote_items", "max_topics")
MAX_OWN_POSTS = 20
"""Largest ``own_posts``: a POST's text request quotes at most this many of the agent's posts."""
CONVERSATION_SHOWN = 3
"""A DM's text request quotes the latest messages with its recipient, at most this many."""
SEEN_ITEMS_KEPT = 5_000
"""Items (author, text) kept for the thread heads of comments on comments."""


def list_users(users: Sequence[str]) -> str:
    """The users one may address, as a range ("agent_0 to agent_19 except agent_4") when they are
    numbered names of one prefix with at most one gap, else listed."""
    found = [re.fullmatch(r"(.*?)(\d+)", u) for u in users]
    if len(users) < 4 or not all(found) or len({m.group(1) for m in found}) > 1 \
            or any(m.group(2) != str(int(m.group(2))) for m in found):
        return ", ".join(users) or "none"
    prefix, numbers = found[0].group(1), sorted(int(m.group(2)) for m in found)
    gaps = sorted(set(range(numbers[0], numbers[-1] + 1)) - set(numbers))
    if len(gaps) > 1 or len(numbers) != len(users):
        return ", ".join(users)
    return f"{prefix}{numbers[0]} to {prefix}{numbers[-1]}" + (f" except {prefix}{gaps[0]}" if gaps else "")


def place_mention(text: str, handle: str, name: str) -> str:
    """``text`` with the @``handle`` where a person would put it: in place of the first use of
    the mentioned person's name (full, else first name), else at the end."""
    for said in dict.fromkeys((name, name.split()[0] if name.split() else name)):
        if said and said != handle:
            found = re.search(rf"(?<![\w@]){re.escape(said)}(?!\w)", text)
            if found:
                return f"{text[:found.start()]}@{handle}{text[found.end():]}"
    return f"{text} @{handle}".strip()


def _cut(items: Sequence, cap: int | None) -> tuple[list, int]:
    """The first ``cap`` items (all when ``cap`` is None) and how many were left out."""
    items = list(items)
    if cap is None or len(items) <= cap:
        return items, 0
    return items[:cap], len(items) - cap


def _left_out(n: int, what: str) -> str:
    return f" ({n} more {what} not listed)" if n else ""


def _check_chars(name: str, value: Any) -> None:
    """``item_chars`` / ``text_chars``: an integer in [10, MAX_TEXT_CHARS]."""
    if is_int(value, numpy=False) and value > MAX_TEXT_CHARS:
        raise ParamError(name, f"{name} must be at most MAX_TEXT_CHARS = {MAX_TEXT_CHARS}, got {value}")
    try:
        check_int(name, value, 10, numpy=False)
    except ValueError as exc:
        raise ParamError(name, str(exc)) from None


def _check_memory(memory: Any) -> None:
    """``memory``: AgentMemory's keywords, checked by AgentMemory itself (a few empty lists)."""
    if not isinstance(memory, Mapping):
        raise ParamError("memory", f"memory must be a mapping of AgentMemory settings (recent, beta, ...), "
                                   f"got {show(memory)}")
    try:
        AgentMemory(**memory)
    except TypeError as exc:
        raise TypeError(f"memory: {exc}") from None
    except ValueError as exc:
        raise ParamError("memory", f"memory: {exc}") from None


class LLMPolicy:
    def __init__(self, client, personas: Sequence[Persona] | Mapping[str, Persona] | str | Path | None = None,
                 coach: Coach | None = None, *, coached: bool | Iterable[str] | Callable[[str], bool] = True,
                 prompts: PromptSet | None = None, generation: str = "auto", schema_ids: str = "auto",
                 max_users: int | None = None, max_posts: int | None = None, max_dms: int | None = None,
                 max_vote_items: int | None = None, max_topics: int | None = 10, item_chars: int = 40,
                 text_chars: int = 200, new_topics: bool = True, memory: Mapping[str, Any] | None = None,
                 seed: int = 0, plan_tokens: int | None = None, vote_tokens: int | None = None,
                 text_tokens: int | None = None, own_posts: int = 2) -> None:
        LLMPolicy.check_params(generation=generation, schema_ids=schema_ids, max_users=max_users,
                               max_posts=max_posts, max_dms=max_dms, max_vote_items=max_vote_items,
                               max_topics=max_topics, item_chars=item_chars, text_chars=text_chars,
                               new_topics=new_topics, memory=memory, seed=seed, plan_tokens=plan_tokens,
                               vote_tokens=vote_tokens, text_tokens=text_tokens, own_posts=own_posts)
        self.client = client
        self.prompts = prompts or (coach.prompts if coach is not None else PromptSet())
        self.coach = coach
        # a one-shot iterable (e.g. a generator) is read once, here
        self._coached = coached if isinstance(coached, bool) or callable(coached) else frozenset(coached)
        self.generation, self.schema_ids = generation, schema_ids
        self.max_users, self.max_posts, self.max_dms = max_users, max_posts, max_dms
        self.max_vote_items, self.max_topics, self.item_chars = max_vote_items, max_topics, item_chars
        self.text_chars, self.new_topics = text_chars, new_topics
        self.memory_kwargs = dict(memory or {})
        self.seed = seed
        self.plan_tokens, self.vote_tokens, self.text_tokens = plan_tokens, vote_tokens, text_tokens
        self.own_posts = own_posts
        if isinstance(personas, (str, Path)):
            personas = load_personas(personas)
        self._persona_arg = personas
        self.personas: dict[str, Persona] = {}
        self.memories: dict[str, AgentMemory] = {}
        self.tips: dict[str, list[str]] = {}           # the last tips each coached agent got
        self._seen: dict[int, tuple[str, str]] = {}    # item id -> (author, text), for thread heads
        self.rng = np.random.default_rng(seed)

    @classmethod
    def check_params(cls, **params: Any) -> None:
        """Raise what ``LLMPolicy(client, personas, **params)`` would raise about these keywords,
        with no client, personas or coach (they are not checked here): a TypeError for an unknown
        keyword, a ``ParamError`` (a ValueError naming the parameter) for a bad value."""
        inspect.signature(LLMPolicy).bind_partial(**params)
        for name in TOKEN_PARAMS:
            value = params.get(name)
            if value is not None and (not is_int(value, numpy=False) or not 1 <= value <= MAX_REPLY_TOKENS):
                raise ParamError(name, f"{name} must be null or an integer in [1, {MAX_REPLY_TOKENS}], "
                                       f"got {show(value)}")
        if "new_topics" in params and not isinstance(params["new_topics"], bool):
            raise ParamError("new_topics", f"new_topics must be true or false, got {show(params['new_topics'])}")
        for name in ("item_chars", "text_chars"):
            if name in params:
                _check_chars(name, params[name])
        for name, modes in (("generation", GENERATION_MODES), ("schema_ids", SCHEMA_ID_MODES)):
            if name in params and (not isinstance(params[name], str) or params[name] not in modes):
                raise ParamError(name, f"{name} must be one of {modes}, got {show(params[name])}")
        for name in VIEW_CAPS:
            value = params.get(name)
            if value is not None and (not is_int(value, numpy=False) or value < 1):
                raise ParamError(name, f"{name} must be a positive integer or None (show all), got {show(value)}")
        if "own_posts" in params and (not is_int(params["own_posts"], numpy=False)
                                      or not 0 <= params["own_posts"] <= MAX_OWN_POSTS):
            raise ParamError("own_posts", f"own_posts must be an integer in [0, {MAX_OWN_POSTS}], "
                                          f"got {show(params['own_posts'])}")
        if params.get("memory") is not None:
            _check_memory(params["memory"])
        if "seed" in params:
            check_seed_param(params["seed"])

    # checkpoints pickle this object without its client (sockets, a loop thread, the API key);
    # the runner attaches a fresh client after loading
    def __getstate__(self) -> dict:
        return {**self.__dict__, "client": None}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update({"_seen": {}, "own_posts": 2, **state})    # checkpoints from before issue 30

    # ------------------------------------------------------------------ modes
    @property
    def generation_mode(self) -> str:
        """``joint`` or ``split`` (``auto`` resolved against the client)."""
        return resolve_generation(self.generation, self.client)

    @property
    def id_mode(self) -> str:
        """``enum`` or ``validate`` (``auto``: ``validate`` where the server caches the schema with
        the prompt, i.e. OpenAI's API; ``enum`` for grammar-constrained servers)."""
        if self.schema_ids != "auto":
            return self.schema_ids
        return "validate" if "api.openai.com" in str(getattr(self.client, "base_url", "")) else "enum"

    # ------------------------------------------------------------------ protocol
    def act(self, observations: dict[str, Any]) -> dict[str, Any]:
        return self.client.run(self.aact(observations))

    async def aact(self, observations: dict[str, Any]) -> dict[str, Any]:
        self.assign_personas(list(observations))
        agents = list(observations)
        if not agents:
            return {}
        step = self._plan if observations[agents[0]]["phase"] == "act" else self._vote
        results = await asyncio.gather(*(step(a, observations[a]) for a in agents))
        return dict(zip(agents, results))

    def reset(self) -> None:
        """Forget memories (personas stay)."""
        self.memories = {a: AgentMemory(**self.memory_kwargs) for a in self.memories}
        self.tips.clear()
        self._seen.clear()
        self.rng = np.random.default_rng(self.seed)

    @property
    def fallbacks(self) -> list[Fallback]:
        return self.client.usage.fallbacks

    def set_coached(self, agents) -> None:
        """The agents the coach advises from now on (a ``coach`` intervention's switch)."""
        self._coached = frozenset(agents)

    def is_coached(self, agent: str) -> bool:
        if self.coach is None:
            return False
        c = self._coached
        if isinstance(c, bool):
            return c
        if callable(c):
            return bool(c(agent))
        return agent in c

    # ------------------------------------------------------------------ personas
    def assign_personas(self, agents: list[str]) -> None:
        """Give each of ``agents`` that has none yet its persona (as the first act step does; a
        survey before round 1 needs them)."""
        new = [a for a in agents if a not in self.personas]
        if not new:
            return
        self.personas.update(personas_for(new, self._persona_arg, len(self.personas), self.seed))
        for a in new:
            self.memories[a] = AgentMemory(**self.memory_kwargs)

    def _name(self, agent: str) -> str:
        """How a peer is called in a text request: its persona's name when this policy knows it."""
        p = self.personas.get(agent)
        return p.name if p is not None else agent

    # ------------------------------------------------------------------ prompt parts
    def persona_block(self, agent: str) -> str:
        """Who the agent is: the whole system message of its text requests."""
        p = self.personas[agent]
        return self.prompts.render("persona", name=p.name, role=p.role, description=p.description,
                                   stance=p.stance, style=p.style, personality=p.personality())

    def system_prompt(self, agent: str, obs: dict) -> str:
        """The system message of the plan and vote requests: the game and the five reward parts
        in plain words (the same for every agent, so a server's prefix cache shares them across
        agents), then the agent's persona and weights (the same every round while its weights
        stay). The reply formats are in the user messages."""
        pr, lambdas = self.prompts, obs["lambdas"]
        active = [c for c in REWARD_NAMES if lambdas.get(c, 0) > 0]
        game = pr.render("game", n_actions=obs["n_actions"])
        rewards = pr.render("rewards", reward_docs="\n".join(f"- {pr.reward_docs[c]}" for c in REWARD_NAMES))
        goal = pr.render("goal", active_comps=", ".join(active) or "none",
                         active_weights=", ".join(f"{c} {lambdas[c]:.2f}" for c in active) or "none")
        return f"{game}\n{rewards}\n{self.persona_block(agent)}\n{goal}"

    def _users_shown(self, agent: str, obs: dict) -> tuple[list[str], int]:
        """Peers listed in the prompt and how many were left out. All of them unless ``max_users``
        cuts the list; then DM senders, feed authors and known peers come first, the rest is a
        seeded sample. Listed in the observation's order, so an uncut list is the same every round."""
        users = [u for u in obs["users"] if u != agent]
        if self.max_users is None or len(users) <= self.max_users:
            return users, 0
        picked = dict.fromkeys(d["author"] for d in obs["dms"])
        picked.update(dict.fromkeys(it["author"] for it in obs["feed"]))
        picked.update(dict.fromkeys(self.memories[agent].known_peers()))
        allowed = set(users)
        chosen = [u for u in picked if u in allowed][:self.max_users]
        if len(chosen) < self.max_users:
            rest = [u for u in users if u not in set(chosen)]
            order = self.rng.permutation(len(rest))[:self.max_users - len(chosen)]
            chosen += [rest[j] for j in order.tolist()]
        keep = set(chosen)
        return [u for u in users if u in keep], len(users) - len(chosen)

    def _topics(self, agent: str, obs: dict) -> tuple[list[str], int]:
        """Topics offered in the prompt: the persona's interests, the feed's, then the vocabulary."""
        interests = self.personas[agent].interests
        return _cut(dict.fromkeys([*interests, *(it["topic"] for it in obs["feed"]), *obs["topics"]]),
                    self.max_topics)

    def _plan_messages(self, agent: str, obs: dict, ctx: PlanContext, tip: list[str] | None,
                       feed: list[dict], dms: list[dict], cuts: dict[str, int]) -> list[dict]:
        mem, pr = self.memories[agent], self.prompts
        last = obs["last_rewards"]
        last_line = ("none yet" if obs["round"] == 1 else
                     ", ".join(f"{c} {last[c]:.2f}" for c in REWARD_NAMES) + f", total {last['total']:.2f}")
        topics, topics_cut = self._topics(agent, obs)
        dm_lines = "\n".join(f"- DM id {d['id']} from {d['author']} [{d['topic']}]: {clip_text(d['text'], self.item_chars)}"
                             for d in dms) or "- none"
        post_lines = "\n".join(f"- id {it['id']} by {it['author']} [{it['topic']}] {it['likes']} likes: "
                               f"{clip_text(it['text'], self.item_chars)}" for it in feed) or "- none"
        if cuts["dms"]:
            dm_lines += f"\n- ({cuts['dms']} more DMs not listed)"
        if cuts["posts"]:
            post_lines += f"\n- ({cuts['posts']} more posts not listed)"
        user = pr.render(
            "plan_user", users=list_users(ctx.users) + _left_out(cuts["users"], "users"),
            best=mem.best_line(), memory=mem.prompt_block(), round=obs["round"],
            last_actions="; ".join(mem.last_actions) or "none", last_rewards=last_line,
            tip=("Coach's tips: " + " ".join(tip) + "\n") if tip else "",
            topics=", ".join(topics) + _left_out(topics_cut, "topics"), dms=dm_lines, posts=post_lines,
            topics_note="" if self.new_topics else " (choose one)",
            n_actions=ctx.n_actions,
            format=pr.render("plan_format", n_actions=ctx.n_actions,
                             text_rule=pr.render("text_rule") if self.generation_mode == "joint" else "",
                             topic_rule=pr.render("topic_rule_open" if self.new_topics else "topic_rule_closed")),
            round_rule=" This is round 1: every action must be a POST." if ctx.post_only else "")
        return [{"role": "system", "content": self.system_prompt(agent, obs)}, {"role": "user", "content": user}]

    # ------------------------------------------------------------------ act phase
    async def _plan(self, agent: str, obs: dict) -> dict:
        mem = self.memories[agent]
        mem.observe(obs)
        self._remember_items(obs)
        split = self.generation_mode == "split"
        users, users_cut = self._users_shown(agent, obs)
        feed, posts_cut = _cut(obs["feed"], self.max_posts)
        dms, dms_cut = _cut(obs["dms"], self.max_dms)
        ctx = PlanContext(agent=agent, round=obs["round"], n_actions=obs["n_actions"], users=tuple(users),
                          posts=tuple(it["id"] for it in feed), dms=tuple((d["id"], d["author"]) for d in dms),
                          with_text=not split, text_max=self.text_chars, ids=self.id_mode,
                          topics=None if self.new_topics else tuple(self._topics(agent, obs)[0]))
        # new_topics=False: offered topics are an enum in "enum" mode, checked after the reply in
        # "validate" mode (whose schema must not change from round to round)
        tip = None
        if self.is_coached(agent) and obs["round"] > 1:
            reply = await self.coach.tips(obs, mem, users, plain=split)
            if reply.ok:
                tip = reply.checked.value
                self.tips[agent] = tip
            else:
                self._fallback(agent, obs["round"], "coach", None, reply.error, "no tip")
        tokens = self.plan_tokens or (40 + 45 * ctx.n_actions if split else
                                      40 + (50 + self.text_chars // 2) * ctx.n_actions)
        cuts = {"users": users_cut, "posts": posts_cut, "dms": dms_cut}
        reply = await self.client.complete_json(
            self._plan_messages(agent, obs, ctx, tip, feed, dms, cuts), plan_schema(ctx),
            lambda v: check_plan(v, ctx), name="plan", agent=agent, round=obs["round"], purpose="plan",
            max_tokens=tokens, repair=self.prompts.repair, seed=self.request_seed(agent, obs["round"], "plan"))
        slots = list(reply.checked.value) if reply.checked is not None else []
        actions = []
        for i in range(ctx.n_actions):
            action = slots[i] if i < len(slots) else None
            if action is None:
                action = self._fallback_action(obs)
                self._fallback(agent, obs["round"], "plan", i, reply.error or "no action in this slot", action)
            actions.append(action)
        if split:                      # this agent's texts go out now, whatever the others are doing
            by_id = {it["id"]: it for it in feed} | {d["id"]: d for d in dms}
            await asyncio.gather(*(self._write(agent, obs, i, a, by_id) for i, a in enumerate(actions)
                                   if a["type"] != "NOT"))
        env_actions = [self._to_env(a, agent, obs) for a in actions]
        mem.record_actions(obs["round"], env_actions, {it["id"]: it["author"] for it in obs["feed"]})
        return {"actions": env_actions}

    def text_messages(self, agent: str, action: dict, items: Mapping[int, dict]) -> list[dict]:
        """The plain text request of one planned action: the persona, then one short instruction
        with what the text answers (the item answered cut to ``text_chars``, the rest to
        ``item_chars``): a COM gets the post it replies to
        and, when that is a comment, the post above it; a DM the recent messages with its
        recipient (and the DM it answers); a POST the agent's own recent posts, so that it does
        not repeat itself."""
        # the item answered is quoted up to text_chars (whole, as a rule); context up to item_chars
        pr, kind, tone, chars = self.prompts, action["type"], action["tone"], self.text_chars
        target = items.get(action.get("target_id")) if action.get("target_id") is not None else None
        mention = action.get("mention") if kind in PUBLIC_TYPES else None
        if mention is not None and target is not None and mention == target["author"]:
            mention = None             # a comment answers its post's author anyway
        mention = f" that mentions {self._name(mention)}" if mention else ""
        if kind == "POST":
            user = pr.render("text_post", topic=action["topic"], tone=tone, mention=mention,
                             recent=self._own_posts(agent))
        elif kind == "COM":
            user = pr.render("text_comment", author=self._name(target["author"]), tone=tone, mention=mention,
                             content=clip_text(target["text"], chars) or f"(a post about {target['topic']})",
                             topic=action.get("topic") or target["topic"], thread=self._thread_head(target))
        elif target is not None:       # a DM that answers a DM
            user = pr.render("text_dm_reply", recipient=self._name(action["recipient"]), tone=tone,
                             conversation=self._conversation(agent, action["recipient"], skip=target["text"]),
                             content=clip_text(target["text"], chars) or f"(a message about {target['topic']})")
        else:
            user = pr.render("text_dm", recipient=self._name(action["recipient"]), topic=action["topic"], tone=tone,
                             conversation=self._conversation(agent, action["recipient"]))
        return [{"role": "system", "content": self.persona_block(agent)}, {"role": "user", "content": user}]

    def _own_posts(self, agent: str) -> str:
        """The agent's ``own_posts`` latest posts, quoted (none when 0)."""
        if not self.own_posts:
            return ""
        posts = [i.text for i in self.memories[agent].conversation if i.direction == "out" and i.kind == "POST"
                 and i.text][-self.own_posts:]
        return ("Your recent posts: " + " | ".join(f'"{clip_text(t, self.item_chars)}"' for t in posts) + "\n"
                if posts else "")

    def _thread_head(self, target: dict) -> str:
        head = self._seen.get(target.get("target_id")) if target.get("type") == "COM" else None
        if head is None:
            return ""
        return f'{self._name(head[0])} posted: "{clip_text(head[1], self.item_chars)}"\n'

    def _conversation(self, agent: str, peer: str, skip: str | None = None) -> str:
        """The latest DMs between the agent and ``peer``, oldest first (without the one answered)."""
        lines = [i for i in self.memories[agent].conversation
                 if i.kind == "DM" and i.peer == peer and i.text and not (i.direction == "in" and i.text == skip)]
        if not lines:
            return ""
        said = [f"- {'you' if i.direction == 'out' else self._name(peer)}: \"{clip_text(i.text, self.item_chars)}\""
                for i in lines[-CONVERSATION_SHOWN:]]
        return f"Your latest messages with {self._name(peer)}:\n" + "\n".join(said) + "\n"

    def _remember_items(self, obs: dict) -> None:
        """Keep (author, text) of the items shown, for the post a comment's target answers."""
        for it in (*obs["feed"], *obs["dms"], *obs.get("vote_items", ())):
            self._seen[it["id"]] = (it["author"], it["text"])
        while len(self._seen) > SEEN_ITEMS_KEPT:
            del self._seen[next(iter(self._seen))]

    def request_seed(self, agent: str, rnd: int, purpose: str, slot: int | None = None) -> int:
        """The sampling seed of one request: different for every (agent, round, purpose, slot),
        so equal prompts do not give equal texts, and the same in a rerun with the same seed."""
        return zlib.crc32(f"{self.seed}|{agent}|{rnd}|{purpose}|{slot}".encode()) & 0x7FFFFFFF

    async def _write(self, agent: str, obs: dict, slot: int, action: dict, items: Mapping[int, dict]) -> None:
        reply = await self.client.complete_text(
            self.text_messages(agent, action, items), clean=lambda raw: clean_text(raw, self.text_chars),
            agent=agent, round=obs["round"], purpose="write",
            max_tokens=self.text_tokens or self.text_chars // 4 + 8,
            seed=self.request_seed(agent, obs["round"], "write", slot))
        action["text"] = reply.text
        if not reply.ok:
            self._fallback(agent, obs["round"], "write", slot, reply.error, "empty text (the tone sets the sentiment)")

    def _fallback_action(self, obs: dict) -> dict:
        if obs["round"] == 1:     # NOT is invalid in round 1 (specification §1): a plain POST instead
            persona = self.personas[obs["agent"]]
            topic = (persona.interests or tuple(obs["topics"]) or ("general",))[0]
            return {"type": "POST", "topic": topic, "tone": "neutral", "text": "", "mention": None}
        return {"type": "NOT"}

    def _to_env(self, a: dict, agent: str, obs: dict) -> dict:
        kind = a["type"]
        if kind == "NOT":
            return {"type": "NOT"}
        text = a.get("text") or ""
        out: dict = {"type": kind, "tone": a["tone"]}
        if kind in PUBLIC_TYPES:
            mention = a.get("mention")
            if mention and f"@{mention}" not in text:       # the plan asked for a literal @mention
                text = place_mention(text, mention, self._name(mention))
            users = obs["users"]
            found = [m for m in _MENTION.findall(text) if m != agent and m in users]
            out["mentions"] = list(dict.fromkeys(([mention] if mention else []) + found))
        if kind == "COM":
            out["target_id"] = a["target_id"]
        if kind == "DM":
            out["recipient"], out["target_id"] = a["recipient"], a.get("target_id")
        if a.get("topic"):
            out["topic"] = a["topic"]
        out["text"] = text
        return out

    # ------------------------------------------------------------------ vote phase (+ reflect)
    async def _vote(self, agent: str, obs: dict) -> dict:
        p, mem, pr = self.personas[agent], self.memories[agent], self.prompts
        items, cut = _cut(obs["vote_items"], self.max_vote_items)
        system = {"role": "system", "content": self.system_prompt(agent, obs)}
        stances = ", ".join(STANCES)
        if not items:       # nothing to vote on: the reflect step alone
            reply = await self.client.complete_json(
                [system, {"role": "user", "content": pr.render("reflect_user", round=obs["round"], issue=p.issue,
                                                                stances=stances)}],
                reflect_schema(STANCES), lambda v: check_stance(v, STANCES), name="reflect", agent=agent,
                round=obs["round"], purpose="reflect", max_tokens=24, repair=pr.repair,
                seed=self.request_seed(agent, obs["round"], "reflect"))
            if reply.ok:
                mem.record_stance(obs["round"], reply.checked.value)
            else:
                self._fallback(agent, obs["round"], "reflect", None, reply.error, "no stance entry")
            return {"votes": {}}
        known = [it["author"] in mem.relationships and mem.relationships[it["author"]].brief() != "" for it in items]
        lines = "\n".join(f"- {it['id']} {it['author']}: {clip_text(it['text'], self.item_chars) or '(' + it['topic'] + ')'}"
                          + (f" | {mem.relationships[it['author']].brief()}" if k else "") for it, k in zip(items, known))
        if cut:
            lines += f"\n- ({cut} more items not listed; they count as 0)"
        fmt = pr.render("vote_format_list" if self.id_mode == "validate" else "vote_format_keyed")
        user = pr.render("vote_user", round=obs["round"], items=lines, issue=p.issue, stances=stances, format=fmt,
                         relationship_header=", relationship" if any(known) else "",
                         relationship_hint=" and relationships" if any(known) else "")
        ids = [it["id"] for it in items]
        reply = await self.client.complete_json(
            [system, {"role": "user", "content": user}], vote_schema(ids, STANCES, self.id_mode),
            lambda v: check_vote_reply(v, ids, STANCES), name="votes", agent=agent, round=obs["round"],
            purpose="vote", max_tokens=self.vote_tokens or 32 + (16 if self.id_mode == "validate" else 10) * len(ids),
            repair=pr.repair, seed=self.request_seed(agent, obs["round"], "vote"))
        votes, stance = reply.checked.value if reply.checked is not None else ({}, None)
        votes = dict(votes)
        if not reply.ok:
            self._fallback(agent, obs["round"], "vote", None, reply.error,
                           f"0 on {len(ids) - len(votes)} of {len(ids)} items"
                           + ("; no stance entry" if stance is None else ""))
        mem.record_votes(votes, items)
        if stance is not None:
            mem.record_stance(obs["round"], stance)
        return {"votes": votes}

    def _fallback(self, agent, rnd, purpose, slot, reason, used) -> None:
        self.client.usage.record_fallback(Fallback(agent, rnd, purpose, slot, str(reason), used))
