"""``LLMTieScorer``: tie evidence from the Tie-Update prompt (paper App. A, specification §4).

After each round, every agent with active ties rates each peer it interacted with 0–5 from the
round's transcript of their exchanges (every line of the round that involves the rater and one of
the peers, texts in full, up to ``transcript_tokens`` estimated tokens: when a round holds more,
its earliest lines are left out and the prompt says how many); ``score / 5`` replaces the heuristic evidence
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


TRANSCRIPT_TOKENS = 1024
"""Default bound on the tokens of transcript in one Tie-Update prompt (``llm.tie_transcript_tokens``)."""


def estimated_tokens(text: str) -> int:
    """Tokens of ``text`` estimated as one per 4 characters (English under BPE tokenisers), plus
    one for the line break: a bound that needs no tokenizer and errs long for plain English."""
    return -(-len(text) // 4) + 1


def _line(e: dict, chars: int | None) -> str:
    text = " ".join((e.get("text") or "").split())
    text = text[:chars] if chars is not None else text
    if e["kind"] == "VOTE":
        return f"{e['sender']} {'liked' if e['value'] > 0 else 'disliked'} {e['recipient']}'s item {e['id']}"
    to = f" to {e['recipient']}" if e.get("recipient") else ""
    mentions = f" mentioning {', '.join(e['mentions'])}" if e.get("mentions") else ""
    said = text or "(no text, sentiment %+.1f)" % e["sentiment"]
    return f"{e['sender']} {e['kind']}{to}{mentions} [{e['topic']}]: {said}"


class LLMTieScorer:
    """Use as ``parallel_env(..., tie_scorer=LLMTieScorer(client))``."""

    def __init__(self, client, prompts: PromptSet | None = None, *, personas: Mapping[str, Any] | None = None,
                 transcript_tokens: int = TRANSCRIPT_TOKENS, text_chars: int | None = None,
                 max_tokens: int | None = None) -> None:
        if isinstance(transcript_tokens, bool) or not isinstance(transcript_tokens, int) or transcript_tokens < 32:
            raise ValueError(f"transcript_tokens must be an integer >= 32, got {transcript_tokens!r}")
        self.client = client
        self.prompts = prompts or PromptSet()
        self.personas = dict(personas or {})
        self.transcript_tokens = transcript_tokens
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
        budget, kept = self.transcript_tokens, 0
        for line in reversed(lines):                 # the latest lines are kept when the round is long
            budget -= estimated_tokens(line)
            if budget < 0:
                break
            kept += 1
        left_out = len(lines) - kept
        shown = lines[left_out:]
        if left_out:
            shown.insert(0, f"({left_out} earlier lines of this round left out)")
        return "\n".join(shown) or "(no text)"

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
