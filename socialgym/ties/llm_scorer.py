"""``LLMTieScorer``: tie evidence from the Tie-Update prompt (paper App. A, specification §4).

After each round, every agent with active ties rates each peer it interacted with 0–5 from the
round's transcript of their exchanges; ``score / 5`` replaces the heuristic evidence
``G_theta``. One request per rating agent, all concurrent. A peer left unrated after the
re-prompts gets 0 (the prompt's "if unsure, choose 0"), recorded in
``client.usage.fallbacks`` (purpose ``tie``).
"""

from __future__ import annotations

import asyncio
from typing import Any, Mapping

import numpy as np

from socialgym.llm.prompts import PromptSet
from socialgym.llm.schemas import check_ties, tie_schema
from socialgym.llm.usage import Fallback
from socialgym.platform.actions import RoundTranscript
from socialgym.ties.dynamics import TieSignals


def _line(e: dict, chars: int) -> str:
    text = " ".join((e.get("text") or "").split())[:chars]
    if e["kind"] == "VOTE":
        return f"{e['sender']} {'liked' if e['value'] > 0 else 'disliked'} {e['recipient']}'s item {e['id']}"
    to = f" to {e['recipient']}" if e.get("recipient") else ""
    mentions = f" mentioning {', '.join(e['mentions'])}" if e.get("mentions") else ""
    said = text or "(no text, sentiment %+.1f)" % e["sentiment"]
    return f"{e['sender']} {e['kind']}{to}{mentions} [{e['topic']}]: {said}"


class LLMTieScorer:
    """Use as ``parallel_env(..., tie_scorer=LLMTieScorer(client))``."""

    def __init__(self, client, prompts: PromptSet | None = None, *, personas: Mapping[str, Any] | None = None,
                 max_lines: int = 12, text_chars: int = 100, max_tokens: int | None = None) -> None:
        self.client = client
        self.prompts = prompts or PromptSet()
        self.personas = dict(personas or {})
        self.max_lines = max_lines
        self.text_chars = text_chars
        self.max_tokens = max_tokens
        self.last_scores: list[tuple[str, str, int]] = []    # (rater, peer, 0..5) of the last round

    # checkpoints pickle this object without its client (sockets, a loop thread, the API key);
    # the runner attaches a fresh client after loading
    def __getstate__(self) -> dict:
        return {**self.__dict__, "client": None}

    def transcript(self, rater: str, peers: set[str], entries: list[dict]) -> str:
        lines = []
        for e in entries:
            parties = {e["sender"], e.get("recipient"), *e.get("mentions", ())}
            if rater in parties and parties & peers:
                lines.append(_line(e, self.text_chars))
        return "\n".join(lines[-self.max_lines:]) or "(no text)"

    def score(self, signals: TieSignals, transcript: RoundTranscript) -> np.ndarray:
        evidence = np.zeros(len(signals))
        if len(signals) == 0:
            return evidence
        names, entries, rnd = transcript.agent_ids, transcript.entries, transcript.round
        groups: dict[int, list[int]] = {}
        for k, v in enumerate(signals.src.tolist()):
            groups.setdefault(v, []).append(k)

        async def rate(v: int, rows: list[int]):
            rater = names[v]
            peers = [names[u] for u in signals.dst[rows].tolist()]
            persona = self.personas.get(rater)
            messages = [
                {"role": "system", "content": self.prompts.render(
                    "tie_system", name=getattr(persona, "name", rater))},
                {"role": "user", "content": self.prompts.render(
                    "tie_user", peers=", ".join(peers), transcript=self.transcript(rater, set(peers), entries))}]
            reply = await self.client.complete_json(
                messages, tie_schema(peers), lambda value: check_ties(value, peers), name="tie_ratings",
                agent=rater, round=rnd, purpose="tie", max_tokens=self.max_tokens or 20 + 45 * len(peers),
                repair=self.prompts.repair)
            return rater, rows, peers, reply

        async def all_ratings():
            return await asyncio.gather(*(rate(v, rows) for v, rows in groups.items()))

        self.last_scores = []
        for rater, rows, peers, reply in self.client.run(all_ratings()):
            scores = reply.checked.value if reply.checked is not None else {}
            for k, peer in zip(rows, peers):
                if peer in scores:
                    evidence[k] = scores[peer] / 5.0
                    self.last_scores.append((rater, peer, scores[peer]))
                else:
                    self.client.usage.record_fallback(Fallback(
                        rater, rnd, "tie", None, reply.error or f"no rating for {peer}", f"evidence 0 for {peer}"))
        return evidence
