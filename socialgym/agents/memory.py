"""Agent memory (specification §8): conversation, relationship per peer, opinion, best round.

What is *kept* and what reaches a *prompt* are separate (recagent finds simulation quality
falling as the memory in a prompt grows):

- **conversation** keeps, for the whole run, every interaction the agent takes part in and
  sees: its own posts, comments, DMs and mentions, the DMs it receives and the posts and
  comments that mention it (it is pickled with the policy, so checkpoints carry it);
- **relationships** keep per-peer counts (sent, received, likes and dislikes given), the topics
  exchanged and the last exchange;
- **opinions** keep one stance entry per round, written by the model in the reflect step (the
  stance it declares with its votes), and **best** the best round with its score and actions.

The prompt gets a bounded view (:meth:`AgentMemory.prompt_block`, at most ``max_chars``
characters): the ``recent`` latest interactions verbatim; older ones as one summary line per
peer, for the ``peers_in_prompt`` peers that recagent's forgetting curve keeps most alive; and
the last ``opinions_in_prompt`` stance entries. recagent forgets a memory with probability
``g = 1 - (s + r) / 2 * max(r ** beta, delta)`` (``s`` importance, ``r`` recency, both in
(0, 1]); the view ranks peers by the retention ``1 - g`` of their strongest older interaction and
drops peers whose retention is below ``forget_below`` (deterministic, so runs replay exactly).
Recency is ``1 / (1 + age in rounds)``; importance is 1 for a DM received, 0.8 for a mention or
a DM sent, 0.6 for a comment, 0.3 for a post. With the defaults (``beta`` 2, ``delta`` 0.2,
``forget_below`` 0.065) a peer known only through comments drops out of the view 20 rounds after
the last one, while DMs and mentions stay eligible (the view still shows only the top peers).
The default ``max_chars`` of 420 keeps the view under 130 tokens, also when it is dense in
ids and numbers (about 3.5 characters a token).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

IMPORTANCE = {("in", "DM"): 1.0, ("in", "MENTION"): 0.8, ("out", "DM"): 0.8, ("out", "MENTION"): 0.8,
              ("out", "COM"): 0.6, ("out", "POST"): 0.3}


def clip_text(text: str | None, n: int) -> str:
    """``text`` on one line, cut to ``n`` characters with an ellipsis."""
    text = " ".join((text or "").split())
    return text if len(text) <= n else text[:n - 1] + "…"


@dataclass(frozen=True)
class Interaction:
    """One thing the agent did or received. ``peer`` is None for a post addressed to nobody."""

    round: int
    direction: str        # "out" (the agent did it) or "in" (addressed to the agent)
    kind: str             # POST, COM, DM or MENTION
    peer: str | None
    topic: str | None
    text: str

    @property
    def importance(self) -> float:
        return IMPORTANCE.get((self.direction, self.kind), 0.3)

    def line(self, chars: int) -> str:
        who = "you" if self.direction == "out" else self.peer
        to = {("out", "DM"): f" DM to {self.peer}", ("out", "COM"): f" commented on {self.peer}'s post",
              ("out", "MENTION"): f" mentioned {self.peer}", ("in", "DM"): " sent you a DM",
              ("in", "MENTION"): " mentioned you"}
        what = to.get((self.direction, self.kind), " posted")
        topic = f" [{self.topic}]" if self.topic else ""
        return f"r{self.round} {who}{what}{topic}: {clip_text(self.text, chars) or '(no text)'}"


@dataclass
class Relationship:
    sent: int = 0            # my DMs, comments and mentions addressed to them
    received: int = 0        # their DMs, comments and mentions addressed to me
    likes_given: int = 0
    dislikes_given: int = 0
    last_round: int = 0
    last: str = ""           # the most recent exchange, shortened
    topics: dict[str, None] = field(default_factory=dict)   # exchanged topics, insertion-ordered

    def brief(self) -> str:
        """The counts that are not 0 (the vote prompt's relationship column)."""
        counts = (("sent", self.sent), ("got", self.received), ("liked", self.likes_given),
                  ("disliked", self.dislikes_given))
        return ", ".join(f"{name} {n}" for name, n in counts if n)

    def summary(self) -> str:
        parts = [f"sent {self.sent}", f"got {self.received}"]
        if self.likes_given or self.dislikes_given:
            parts.append(f"liked {self.likes_given}, disliked {self.dislikes_given}")
        if self.topics:
            parts.append("topics " + ", ".join(list(self.topics)[-3:]))
        if self.last:
            parts.append(f"last (round {self.last_round}): {self.last}")
        return ", ".join(parts)


class AgentMemory:
    def __init__(self, *, recent: int = 3, peers_in_prompt: int = 3, opinions_in_prompt: int = 3,
                 text_chars: int = 48, max_chars: int = 420, beta: float = 2.0, delta: float = 0.2,
                 forget_below: float = 0.065) -> None:
        for name, value in (("recent", recent), ("peers_in_prompt", peers_in_prompt),
                            ("opinions_in_prompt", opinions_in_prompt)):
            if not isinstance(value, int) or value < 0:
                raise ValueError(f"memory {name} must be a non-negative integer, got {value!r}")
        for name, value in (("text_chars", text_chars), ("max_chars", max_chars)):
            if not isinstance(value, int) or value < 8:
                raise ValueError(f"memory {name} must be an integer >= 8, got {value!r}")
        if not beta > 1 or not 0 < delta < 1 or not 0 <= forget_below < 1:
            raise ValueError(f"memory forgetting needs beta > 1, 0 < delta < 1, 0 <= forget_below < 1; "
                             f"got beta={beta!r}, delta={delta!r}, forget_below={forget_below!r}")
        self.recent, self.peers_in_prompt, self.opinions_in_prompt = recent, peers_in_prompt, opinions_in_prompt
        self.text_chars, self.max_chars = text_chars, max_chars
        self.beta, self.delta, self.forget_below = float(beta), float(delta), float(forget_below)
        self.conversation: list[Interaction] = []          # everything, never cut
        self.opinions: list[tuple[int, str]] = []           # (round, stance) from the reflect step
        self.relationships: dict[str, Relationship] = {}
        self.best: tuple[int, float, str] | None = None
        self.last_actions: list[str] = []
        self.recent_topics: deque[tuple[str, ...]] = deque(maxlen=3)
        self.recent_partners: deque[tuple[str, ...]] = deque(maxlen=3)
        self.round = 0
        self._reflected = 0

    def _rel(self, peer: str) -> Relationship:
        rel = self.relationships.get(peer)
        if rel is None:
            rel = self.relationships[peer] = Relationship()
        return rel

    def _remember(self, item: Interaction) -> None:
        self.conversation.append(item)
        if item.peer is None:
            return
        rel = self._rel(item.peer)
        if item.direction == "out":
            rel.sent += 1
        else:
            rel.received += 1
        if item.topic:
            rel.topics.pop(item.topic, None)
            rel.topics[item.topic] = None
        if item.round >= rel.last_round:
            rel.last_round = item.round
            verb = "you " + item.kind if item.direction == "out" else f"they {item.kind}"
            rel.last = f"{verb}: {clip_text(item.text, self.text_chars)}"

    # ---- what the agent sees -------------------------------------------------------------
    def observe(self, obs: dict) -> None:
        """Take in an act-phase observation: the previous round's total (best round), the DMs
        received and the recent public items that mention the agent."""
        rnd, me = obs["round"], obs["agent"]
        self.round = rnd
        if rnd > 1 and self._reflected < rnd - 1:
            self._reflected = rnd - 1
            total = float(obs["last_rewards"].get("total", 0.0))
            summary = "; ".join(self.last_actions) or "nothing"
            if self.best is None or total > self.best[1]:
                self.best = (rnd - 1, total, summary)
        for dm in obs.get("dms", []):
            self._remember(Interaction(dm["round"], "in", "DM", dm["author"], dm.get("topic"), dm["text"]))
        for item in obs.get("feed", []):
            if me in (item.get("mentions") or []) and item["round"] >= rnd - 1:
                self._remember(Interaction(item["round"], "in", "MENTION", item["author"], item.get("topic"),
                                           item["text"]))

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
            topic = a.get("topic")
            summaries.append(f"{kind}{' to ' + peer if peer else ''}{' on ' + topic if topic else ''} "
                             f"({a.get('tone', 'neutral')})")
            if topic:
                topics.append(topic)
            text = a.get("text") or ""
            self._remember(Interaction(rnd, "out", kind, peer, topic, text))
            for m in a.get("mentions") or []:
                if m != peer:
                    self._remember(Interaction(rnd, "out", "MENTION", m, topic, text))
            partners += ([peer] if peer else []) + list(a.get("mentions") or [])
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

    def record_stance(self, rnd: int, stance: str) -> None:
        """The reflect step's opinion entry: the stance the model declared at the end of ``rnd``."""
        self.opinions.append((rnd, stance))

    # ---- what goes into prompts ----------------------------------------------------------
    def known_peers(self, k: int | None = None) -> list[str]:
        """Peers by most recent interaction (most recent first)."""
        peers = sorted(self.relationships, key=lambda p: -self.relationships[p].last_round)
        return peers if k is None else peers[:k]

    def retention(self, item: Interaction, now: int | None = None) -> float:
        """recagent's ``1 - g(M)``: high for recent and important interactions."""
        age = max(0, (self.round if now is None else now) - item.round)
        r = 1.0 / (1.0 + age)
        return (item.importance + r) / 2.0 * max(r ** self.beta, self.delta)

    def older_peers(self) -> list[tuple[str, float]]:
        """Peers of the interactions older than the verbatim window, most retained first."""
        cut = len(self.conversation) - self.recent
        best: dict[str, float] = {}
        for item in self.conversation[:max(0, cut)]:
            if item.peer is not None:
                best[item.peer] = max(best.get(item.peer, 0.0), self.retention(item))
        ranked = sorted(best.items(), key=lambda pr: (-pr[1], pr[0]))
        return [(p, r) for p, r in ranked if r >= self.forget_below][:self.peers_in_prompt]

    def prompt_block(self) -> str:
        """The bounded memory view (at most ``max_chars`` characters, ending in a newline when
        not empty). Slow-changing parts first (peer summaries, stances), the latest last; when
        the view is too long, the older parts are shortened first, so the newest exchange stays."""
        peers = self.older_peers()
        parts = [("Earlier, by peer: " + " | ".join(f"{p}: {self.relationships[p].summary()}" for p, _ in peers))
                 if peers else "",
                 ("Your stance after each round: " + "; ".join(
                     f"r{r} {s}" for r, s in self.opinions[-self.opinions_in_prompt:]))
                 if self.opinions and self.opinions_in_prompt else "",
                 ("Recent exchanges: " + " | ".join(i.line(self.text_chars) for i in self.conversation[-self.recent:]))
                 if self.recent and self.conversation else ""]
        budget = self.max_chars - 1                      # the final newline
        for i in range(len(parts)):                      # oldest first: cut each to what the later parts leave
            later = sum(len(p) + 1 for p in parts[i + 1:] if p)
            room = budget - later - sum(len(p) + 1 for p in parts[:i] if p)
            if len(parts[i]) > room:
                parts[i] = parts[i][:room - 1] + "…" if room > 20 else ""
        block = "\n".join(p for p in parts if p)[:budget]
        return block + "\n" if block else ""

    def relationship_line(self, peer: str) -> str:
        rel = self.relationships.get(peer)
        return rel.summary() if rel else "no history"

    def best_line(self) -> str:
        if self.best is None:
            return "No best round yet."
        rnd, total, summary = self.best
        return f"Your best round so far: round {rnd}, score {total:.2f}, when you did: {summary}."
