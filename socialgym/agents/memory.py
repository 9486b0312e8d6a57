"""Bounded agent memory (SPEC §8): conversation, relationship per peer, opinion, best round.

recagent finds simulation quality falling as memory grows, so everything that reaches a
prompt is bounded: the last ``conversation_limit`` interactions, the ``relationships_in_prompt``
most recent peers (each summarised in one line of counts and the last exchange), and the last
``opinion_limit`` opinion entries (one per round: what the agent stood for and how it went).
Older interactions are not lost entirely: they stay in the per-peer counts.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass


def _clip(text: str | None, n: int) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= n else text[:n - 1] + "…"


@dataclass
class Relationship:
    sent: int = 0            # my DMs, comments and mentions addressed to them
    received: int = 0        # their DMs and mentions addressed to me
    likes_given: int = 0
    dislikes_given: int = 0
    last_round: int = 0
    last: str = ""           # the most recent exchange, shortened

    def summary(self) -> str:
        parts = [f"you->them {self.sent}", f"them->you {self.received}"]
        if self.likes_given or self.dislikes_given:
            parts.append(f"you liked {self.likes_given}/disliked {self.dislikes_given}")
        if self.last:
            parts.append(f"last (round {self.last_round}): {self.last}")
        return ", ".join(parts)


class AgentMemory:
    def __init__(self, *, conversation_limit: int = 8, opinion_limit: int = 3,
                 relationships_in_prompt: int = 5, text_chars: int = 80) -> None:
        self.conversation: deque[str] = deque(maxlen=conversation_limit)
        self.opinions: deque[str] = deque(maxlen=opinion_limit)
        self.relationships: dict[str, Relationship] = {}
        self.relationships_in_prompt = relationships_in_prompt
        self.text_chars = text_chars
        self.best: tuple[int, float, str] | None = None
        self.last_actions: list[str] = []
        self.recent_topics: deque[tuple[str, ...]] = deque(maxlen=3)
        self.recent_partners: deque[tuple[str, ...]] = deque(maxlen=3)
        self._reflected = 0

    def _rel(self, peer: str) -> Relationship:
        rel = self.relationships.get(peer)
        if rel is None:
            rel = self.relationships[peer] = Relationship()
        return rel

    # ---- what the agent sees -------------------------------------------------------------
    def observe(self, obs: dict) -> None:
        """Reflect on the previous round from an act-phase observation: its rewards (best round,
        opinion entry), the DMs received and the public items that mention the agent."""
        rnd, me = obs["round"], obs["agent"]
        if rnd > 1 and self._reflected < rnd - 1:
            self._reflected = rnd - 1
            total = float(obs["last_rewards"].get("total", 0.0))
            summary = "; ".join(self.last_actions) or "nothing"
            if self.best is None or total > self.best[1]:
                self.best = (rnd - 1, total, summary)
            topics = ", ".join(self.recent_topics[-1]) if self.recent_topics else "none"
            self.opinions.append(f"round {rnd - 1}: engaged on {topics}; score {total:.2f}")
        for dm in obs.get("dms", []):
            rel = self._rel(dm["author"])
            rel.received += 1
            rel.last_round, rel.last = dm["round"], f"they DM'd: {_clip(dm['text'], self.text_chars)}"
            self.conversation.append(f"r{dm['round']} {dm['author']} DM'd you: {_clip(dm['text'], self.text_chars)}")
        for item in obs.get("feed", []):
            if me in (item.get("mentions") or []) and item["round"] >= rnd - 1:
                rel = self._rel(item["author"])
                rel.received += 1
                rel.last_round, rel.last = item["round"], f"they mentioned you: {_clip(item['text'], self.text_chars)}"
                self.conversation.append(f"r{item['round']} {item['author']} mentioned you: "
                                         f"{_clip(item['text'], self.text_chars)}")

    # ---- what the agent did --------------------------------------------------------------
    def record_actions(self, rnd: int, actions: list[dict], authors: dict[int, str]) -> None:
        """``authors`` maps the ids of items the agent could target to their authors."""
        summaries, topics, partners = [], [], []
        for a in actions:
            kind = a["type"]
            if kind == "NOT":
                summaries.append("NOT")
                continue
            peer = a.get("recipient") if kind == "DM" else authors.get(a.get("target_id")) if kind == "COM" else None
            text = _clip(a.get("text"), self.text_chars)
            topic = a.get("topic") or "(post's topic)"
            summaries.append(f"{kind}{' to ' + peer if peer else ''} on {topic} ({a.get('tone', 'neutral')})")
            if a.get("topic"):
                topics.append(a["topic"])
            for p in ([peer] if peer else []) + list(a.get("mentions") or []):
                rel = self._rel(p)
                rel.sent += 1
                rel.last_round, rel.last = rnd, f"you {kind}: {text}"
                partners.append(p)
            self.conversation.append(f"r{rnd} you {kind}{' to ' + peer if peer else ''}: {text}")
        self.last_actions = summaries
        self.recent_topics.append(tuple(dict.fromkeys(topics)))
        self.recent_partners.append(tuple(dict.fromkeys(partners)))

    def record_votes(self, votes: dict[int, int], items: list[dict]) -> None:
        by_id = {it["id"]: it for it in items}
        for cid, v in votes.items():
            if v and cid in by_id:
                rel = self._rel(by_id[cid]["author"])
                if v > 0:
                    rel.likes_given += 1
                else:
                    rel.dislikes_given += 1

    # ---- what goes into prompts ----------------------------------------------------------
    def known_peers(self, k: int | None = None) -> list[str]:
        """Peers by most recent interaction (most recent first)."""
        peers = sorted(self.relationships, key=lambda p: -self.relationships[p].last_round)
        return peers if k is None else peers[:k]

    def prompt_block(self) -> str:
        lines = []
        if self.conversation:
            lines.append("Recent interactions: " + " | ".join(self.conversation))
        peers = self.known_peers(self.relationships_in_prompt)
        if peers:
            lines.append("Relationships: " + " | ".join(f"{p}: {self.relationships[p].summary()}" for p in peers))
        if self.opinions:
            lines.append("Your recent stance: " + " | ".join(self.opinions))
        return "\n".join(lines) + ("\n" if lines else "")

    def relationship_line(self, peer: str) -> str:
        rel = self.relationships.get(peer)
        return rel.summary() if rel else "no history"

    def best_line(self) -> str:
        if self.best is None:
            return "No best round yet."
        rnd, total, summary = self.best
        return f"Your best was round {rnd} with score {total:.2f} when you did: {summary}."
