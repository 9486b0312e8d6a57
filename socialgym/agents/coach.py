"""The coach (paper App. A, specification §8): tips that go into an agent's plan prompt.

The coach ranks the reward components by how far the agent's last score falls below its
target weight, ``gap_c = lambda_c - R_c`` (components with ``lambda_c = 0`` are not goals and
are left out), and asks the model for 3–5 concrete tips addressing the largest gaps first:
as JSON ``{"tips": [...]}``, or (``plain=True``, the policy's split generation) as plain lines,
which small models write far better than strings inside a JSON grammar.
"""

from __future__ import annotations

from typing import Mapping, Sequence

from socialgym.config import REWARD_NAMES
from socialgym.llm.prompts import PromptSet
from socialgym.llm.schemas import Checked, check_tips, tips_schema
from socialgym.llm.text import parse_bullets


def coach_priorities(last_rewards: Mapping[str, float], lambdas: Mapping[str, float]) -> list[tuple[str, float]]:
    """``[(component, gap), ...]`` with ``gap = lambda - last reward``, largest gap first.

    Ties keep the order SOC, INF, PRE, COORD, EMO.
    """
    gaps = [(c, float(lambdas.get(c, 0.0)) - float(last_rewards.get(c, 0.0)))
            for c in REWARD_NAMES if float(lambdas.get(c, 0.0)) > 0]
    order = {c: i for i, c in enumerate(REWARD_NAMES)}
    return sorted(gaps, key=lambda cg: (-cg[1], order[cg[0]]))


class Coach:
    """``Coach(client)``; ``LLMPolicy(client, coach=Coach(client), coached=...)`` uses it."""

    def __init__(self, client, prompts: PromptSet | None = None, *, max_tokens: int = 256) -> None:
        self.client = client
        self.prompts = prompts or PromptSet()
        self.max_tokens = max_tokens

    # checkpoints pickle this object without its client (sockets, a loop thread, the API key);
    # the runner attaches a fresh client after loading
    def __getstate__(self) -> dict:
        return {**self.__dict__, "client": None}

    def messages(self, obs: dict, memory, users: Sequence[str], plain: bool = False) -> list[dict]:
        priorities = coach_priorities(obs["last_rewards"], obs["lambdas"])
        focus = ", ".join(f"{c} (gap {g:+.2f})" for c, g in priorities) or "none"
        docs = self.prompts.reward_docs
        guidelines = " ".join(docs[c] for c, _ in priorities[:2])
        dm_senders = sorted({d["author"] for d in obs.get("dms", [])})
        partners = [p for rnd in memory.recent_partners for p in rnd]
        recent = [t for rnd in list(memory.recent_topics)[-3:] for t in rnd]
        user = self.prompts.render(
            "coach_user", focus=focus, guidelines=guidelines, users=", ".join(users) or "none",
            dm_last_senders=", ".join(dm_senders) or "none",
            recent_partners=", ".join(dict.fromkeys(partners)) or "none",
            seen_topics=", ".join(obs["topics"][:20]) or "none", last_recent=", ".join(dict.fromkeys(recent)) or "none",
            format=self.prompts.render("coach_format_text" if plain else "coach_format_json"))
        return [{"role": "system", "content": self.prompts.render("coach_system")},
                {"role": "user", "content": user}]

    async def tips(self, obs: dict, memory, users: Sequence[str], plain: bool = False):
        """The reply of the coach request; ``reply.ok`` and ``reply.checked.value`` (the tips)
        whether it came as JSON or, with ``plain``, as lines of text."""
        messages = self.messages(obs, memory, users, plain)
        if not plain:
            return await self.client.complete_json(
                messages, tips_schema(), check_tips, name="coach_tips", agent=obs["agent"], round=obs["round"],
                purpose="coach", max_tokens=self.max_tokens, repair=self.prompts.repair)
        reply = await self.client.complete_text(messages, clean=lambda raw: "\n".join(parse_bullets(raw)),
                                                agent=obs["agent"], round=obs["round"], purpose="coach",
                                                max_tokens=self.max_tokens)
        return PlainTips(reply.text.split("\n") if reply.ok else [], reply.error)


class PlainTips:
    """A plain-text coach reply in the shape of a JSON one (``ok``, ``checked.value``, ``error``)."""

    def __init__(self, tips: list[str], error: str | None) -> None:
        self.checked = Checked(tips)
        self.error = error

    @property
    def ok(self) -> bool:
        return self.error is None and bool(self.checked.value)
