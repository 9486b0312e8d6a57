"""``LLMPolicy``: LLM-driven agents for the feed environment (SPEC §8, paper App. A).

It implements the batched policy protocol (``act(observations) -> actions``) for every agent
it is given, with all agents' requests concurrent (bounded by the client). Per agent and round:

1. **reflect** on the previous round from the new observation (rewards, best round, DMs and
   mentions received) into bounded memory;
2. optionally get **coach** tips (agents chosen by ``coached``);
3. **plan** the N actions with the Plan prompt, under a JSON schema built from the live
   observation (enums of the listed user, post and DM ids) — by default the same reply also
   carries each action's text (``execute="joint"``: one call, which small local models need);
   ``execute="separate"`` plans first and then writes all texts in a second call;
4. **vote** on the vote items with the Vote prompt (a schema with one required key per item).

Invalid replies are re-prompted with the validation error (``client.max_repairs`` times);
what is still invalid falls back — an action slot to NOT (in round 1, where NOT is not
allowed, to a plain POST), a vote to 0 — and every fallback is recorded in
``client.usage.fallbacks`` with its reason.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from socialgym.agents.coach import Coach
from socialgym.agents.memory import AgentMemory, _clip
from socialgym.agents.persona import Persona, generate_personas, load_personas
from socialgym.config import REWARD_NAMES
from socialgym.llm.prompts import PromptSet
from socialgym.llm.schemas import (
    PlanContext, check_plan, check_texts, check_votes, plan_schema, texts_schema, vote_schema,
)
from socialgym.llm.usage import Fallback

_MENTION = re.compile(r"@([A-Za-z0-9_\-]+)")


class LLMPolicy:
    def __init__(self, client, personas: Sequence[Persona] | Mapping[str, Persona] | str | Path | None = None,
                 coach: Coach | None = None, *, coached: bool | Iterable[str] | Callable[[str], bool] = True,
                 prompts: PromptSet | None = None, execute: str = "joint", max_users: int = 8,
                 max_posts: int = 6, max_dms: int = 3, max_vote_items: int = 8, max_topics: int = 10,
                 item_chars: int = 100, text_chars: int = 280, new_topics: bool = True,
                 memory: Mapping[str, int] | None = None, seed: int = 0,
                 plan_tokens: int | None = None, vote_tokens: int | None = None) -> None:
        if execute not in ("joint", "separate"):
            raise ValueError(f"execute must be 'joint' or 'separate', got {execute!r}")
        for name, value in (("max_users", max_users), ("max_posts", max_posts), ("max_dms", max_dms),
                            ("max_vote_items", max_vote_items), ("max_topics", max_topics)):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        self.client = client
        self.prompts = prompts or (coach.prompts if coach is not None else PromptSet())
        self.coach = coach
        # a one-shot iterable (e.g. a generator) is read once, here
        self._coached = coached if isinstance(coached, bool) or callable(coached) else frozenset(coached)
        self.execute = execute
        self.max_users, self.max_posts, self.max_dms = max_users, max_posts, max_dms
        self.max_vote_items, self.max_topics, self.item_chars = max_vote_items, max_topics, item_chars
        self.text_chars, self.new_topics = text_chars, new_topics
        self.memory_kwargs = dict(memory or {})
        self.seed = seed
        self.plan_tokens, self.vote_tokens = plan_tokens, vote_tokens
        if isinstance(personas, (str, Path)):
            personas = load_personas(personas)
        self._persona_arg = personas
        self.personas: dict[str, Persona] = {}
        self.memories: dict[str, AgentMemory] = {}
        self.tips: dict[str, list[str]] = {}           # the last tips each coached agent got
        self.rng = np.random.default_rng(seed)

    # checkpoints pickle this object without its client (sockets, a loop thread, the API key);
    # the runner attaches a fresh client after loading
    def __getstate__(self) -> dict:
        return {**self.__dict__, "client": None}

    # ------------------------------------------------------------------ protocol
    def act(self, observations: dict[str, Any]) -> dict[str, Any]:
        return self.client.run(self.aact(observations))

    async def aact(self, observations: dict[str, Any]) -> dict[str, Any]:
        self._assign(list(observations))
        agents = list(observations)
        if not agents:
            return {}
        step = self._plan if observations[agents[0]]["phase"] == "act" else self._vote
        results = await asyncio.gather(*(step(a, observations[a]) for a in agents))
        return dict(zip(agents, results))

    def reset(self) -> None:
        """Forget memories (personas stay)."""
        self.memories.clear()
        self.tips.clear()
        self.rng = np.random.default_rng(self.seed)

    @property
    def fallbacks(self) -> list[Fallback]:
        return self.client.usage.fallbacks

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
    def _assign(self, agents: list[str]) -> None:
        new = [a for a in agents if a not in self.personas]
        if not new:
            return
        given = self._persona_arg
        if given is None:
            extra = generate_personas(len(self.personas) + len(new), seed=self.seed)[len(self.personas):]
            self.personas.update(zip(new, extra))
        elif isinstance(given, Mapping):
            missing = [a for a in new if a not in given]
            if missing:
                raise ValueError(f"no persona for agent(s) {missing[:5]}")
            self.personas.update({a: given[a] for a in new})
        else:
            given = list(given)
            if len(self.personas) + len(new) > len(given):
                raise ValueError(f"{len(given)} personas for {len(self.personas) + len(new)} agents; "
                                 f"give one persona per agent")
            self.personas.update(zip(new, given[len(self.personas):]))
        for a in new:
            self.memories[a] = AgentMemory(**self.memory_kwargs)

    # ------------------------------------------------------------------ act phase
    def _users_shown(self, agent: str, obs: dict) -> list[str]:
        """Peers listed in the prompt: DM senders, feed authors, known peers, then a seeded sample."""
        users = obs["users"]
        picked = dict.fromkeys(d["author"] for d in obs["dms"][:self.max_dms])
        picked.update(dict.fromkeys(it["author"] for it in obs["feed"][:self.max_posts]))
        picked.update(dict.fromkeys(self.memories[agent].known_peers(self.max_users)))
        picked.pop(agent, None)
        shown = [u for u in picked if u in users][:self.max_users]
        if len(shown) < self.max_users and len(users) > len(shown):
            order = self.rng.permutation(len(users))[:self.max_users + len(shown)]
            for j in order.tolist():
                u = users[j]
                if u not in picked:
                    shown.append(u)
                    picked[u] = None
                if len(shown) >= self.max_users:
                    break
        return shown

    def _plan_messages(self, agent: str, obs: dict, ctx: PlanContext, tip: list[str] | None) -> list[dict]:
        p, mem, pr = self.personas[agent], self.memories[agent], self.prompts
        lambdas = obs["lambdas"]
        active = [c for c in REWARD_NAMES if lambdas.get(c, 0) > 0]
        system = pr.render(
            "plan_system", n_actions=ctx.n_actions, reward_docs="\n".join(f"- {pr.reward_docs[c]}" for c in active),
            name=p.name, role=p.role, description=p.description, stance=p.stance, style=p.style,
            personality=p.personality(), weights=", ".join(f"{c} {lambdas[c]:.2f}" for c in active))
        last = obs["last_rewards"]
        last_line = ("none yet" if obs["round"] == 1 else
                     ", ".join(f"{c} {last[c]:.2f}" for c in REWARD_NAMES) + f", total {last['total']:.2f}")
        topics = self._topics(agent, obs)
        dms = "\n".join(f"- DM id {d['id']} from {d['author']} [{d['topic']}]: {_clip(d['text'], self.item_chars)}"
                        for d in obs["dms"][:self.max_dms]) or "- none"
        posts = "\n".join(f"- id {it['id']} by {it['author']} [{it['topic']}] ({it['likes']} likes): "
                          f"{_clip(it['text'], self.item_chars)}" for it in obs["feed"][:self.max_posts]) or "- none"
        user = pr.render(
            "plan_user", round=obs["round"], best=mem.best_line(), last_rewards=last_line,
            tip=("Coach tips: " + " ".join(tip) + "\n") if tip else "", memory=mem.prompt_block(),
            users=", ".join(ctx.users) or "none", topics=", ".join(topics),
            dms=dms, posts=posts, n_actions=ctx.n_actions,
            round_rule=" Round 1: every action must be a POST." if ctx.post_only else "")
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]

    def _topics(self, agent: str, obs: dict) -> list[str]:
        """Topics offered in the prompt: the persona's interests, the feed's, then the vocabulary."""
        interests = self.personas[agent].interests
        return list(dict.fromkeys([*interests, *(it["topic"] for it in obs["feed"]), *obs["topics"]]))[:self.max_topics]

    async def _plan(self, agent: str, obs: dict) -> dict:
        mem = self.memories[agent]
        mem.observe(obs)                                   # reflect on the last round
        users = self._users_shown(agent, obs)
        ctx = PlanContext(agent=agent, round=obs["round"], n_actions=obs["n_actions"], users=tuple(users),
                          posts=tuple(it["id"] for it in obs["feed"][:self.max_posts]),
                          dms=tuple((d["id"], d["author"]) for d in obs["dms"][:self.max_dms]),
                          with_text=self.execute == "joint", text_max=self.text_chars,
                          topics=None if self.new_topics else tuple(self._topics(agent, obs)))
        tip = None
        if self.is_coached(agent) and obs["round"] > 1:
            reply = await self.coach.tips(obs, mem, users)
            if reply.ok:
                tip = reply.checked.value
                self.tips[agent] = tip
            else:
                self._fallback(agent, obs["round"], "coach", None, reply.error, "no tip")
        tokens = self.plan_tokens or (40 + (50 + self.text_chars // 2) * ctx.n_actions if ctx.with_text
                                      else 40 + 50 * ctx.n_actions)
        reply = await self.client.complete_json(
            self._plan_messages(agent, obs, ctx, tip), plan_schema(ctx), lambda v: check_plan(v, ctx),
            name="plan", agent=agent, round=obs["round"], purpose="plan", max_tokens=tokens,
            repair=self.prompts.repair)
        slots = list(reply.checked.value) if reply.checked is not None else []
        actions = []
        for i in range(ctx.n_actions):
            action = slots[i] if i < len(slots) else None
            if action is None:
                action = self._fallback_action(obs)
                self._fallback(agent, obs["round"], "plan", i, reply.error or "no action in this slot", action)
            actions.append(action)
        if self.execute == "separate":
            await self._write_texts(agent, obs, actions)
        env_actions = [self._to_env(a, agent, obs) for a in actions]
        mem.record_actions(obs["round"], env_actions, {it["id"]: it["author"] for it in obs["feed"]})
        return {"actions": env_actions}

    async def _write_texts(self, agent: str, obs: dict, actions: list[dict]) -> None:
        todo = [a for a in actions if a["type"] != "NOT"]
        if not todo:
            return
        p = self.personas[agent]
        lines = []
        for k, a in enumerate(todo):
            target = (f" replying to item {a['target_id']}" if a.get("target_id") is not None else "")
            who = f" to {a['recipient']}" if a.get("recipient") else ""
            mention = f", mention @{a['mention']}" if a.get("mention") else ""
            lines.append(f"{k + 1}. {a['type']}{who}{target} on {a.get('topic') or 'the post topic'}, "
                         f"tone {a['tone']}{mention}")
        messages = [{"role": "system", "content": self.prompts.render(
                        "write_system", name=p.name, role=p.role, description=p.description,
                        stance=p.stance, style=p.style)},
                    {"role": "user", "content": self.prompts.render("write_user", actions="\n".join(lines))}]
        n = len(todo)
        reply = await self.client.complete_json(messages, texts_schema(n), lambda v: check_texts(v, n),
                                                name="texts", agent=agent, round=obs["round"], purpose="write",
                                                max_tokens=80 * n + 20, repair=self.prompts.repair)
        texts = reply.checked.value if reply.ok else []
        if not reply.ok:
            self._fallback(agent, obs["round"], "write", None, reply.error, "empty texts (tone sets sentiment)")
        for k, a in enumerate(todo):
            a["text"] = texts[k] if k < len(texts) else ""

    def _fallback_action(self, obs: dict) -> dict:
        if obs["round"] == 1:     # NOT is invalid in round 1 (SPEC §1): a plain POST instead
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
        if kind in ("POST", "COM"):
            mention = a.get("mention")
            if mention and f"@{mention}" not in text:       # the plan asked for a literal @mention
                text = f"@{mention} {text}".strip()
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

    # ------------------------------------------------------------------ vote phase
    async def _vote(self, agent: str, obs: dict) -> dict:
        items = obs["vote_items"][:self.max_vote_items]
        if not items:
            return {"votes": {}}
        p, mem = self.personas[agent], self.memories[agent]
        lines = "\n".join(f"- {it['id']} {it['author']}: {_clip(it['text'], self.item_chars) or '(' + it['topic'] + ')'}"
                          + (f" | {mem.relationship_line(it['author'])}" if it["author"] in mem.relationships else "")
                          for it in items)
        messages = [{"role": "system", "content": self.prompts.render(
                        "vote_system", name=p.name, role=p.role, personality=p.personality(), stance=p.stance)},
                    {"role": "user", "content": self.prompts.render(
                        "vote_user", items=lines, relationship_header=", relationship")}]
        ids = [it["id"] for it in items]
        reply = await self.client.complete_json(
            messages, vote_schema(ids), lambda v: check_votes(v, ids), name="votes", agent=agent,
            round=obs["round"], purpose="vote", max_tokens=self.vote_tokens or 16 + 10 * len(ids),
            repair=self.prompts.repair)
        votes = dict(reply.checked.value) if reply.checked is not None else {}
        if not reply.ok:
            self._fallback(agent, obs["round"], "vote", None, reply.error,
                           f"0 on {len(ids) - len(votes)} of {len(ids)} items")
        mem.record_votes(votes, items)
        return {"votes": votes}

    def _fallback(self, agent, rnd, purpose, slot, reason, used) -> None:
        self.client.usage.record_fallback(Fallback(agent, rnd, purpose, slot, str(reason), used))
