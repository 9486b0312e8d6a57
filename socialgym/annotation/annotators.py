"""Annotators: k LLM annotator personas (paper App. A.3), and offline stand-ins.

``LLMAnnotators`` gives each of k personas (SocioDemographic Backgrounds, no usernames) the
paper's annotator instructions, the comment and the h comments before it, and asks for
toxicity and argument quality on 1..5 under a JSON schema (integer enums, so a server with
constrained decoding cannot answer out of range). A reply that is still invalid after the
client's re-prompts is read in the paper's own text format (``Toxicity=4 ArgumentQuality=1``)
if possible; otherwise that annotator's rating is missing (NaN) and the fallback is recorded
in ``client.usage.fallbacks`` — a comment's mean and nDFU use the ratings that exist.

``ScriptedAnnotator`` (your functions) and ``LexiconAnnotator`` (a keyword heuristic) need no
server: for tests, for smoke runs and for RL training where an LLM per step is too slow. The
lexicon is a crude proxy, not a validated toxicity classifier.
"""

from __future__ import annotations

import asyncio
import re
from typing import Callable, Sequence

import numpy as np

from socialgym.annotation.base import SCALE, Annotation, AnnotationRequest
from socialgym.discussion.prompts import ANNOTATOR_ACTOR
from socialgym.discussion.sdb import SDB, generate_sdbs, sdb_block
from socialgym.llm.schemas import Checked
from socialgym.llm.usage import Fallback
from socialgym.platform.validation import is_int

ANNOTATION_SCHEMA = {
    "type": "object",
    "properties": {"toxicity": {"type": "integer", "enum": list(SCALE)},
                   "argument_quality": {"type": "integer", "enum": list(SCALE)}},
    "required": ["toxicity", "argument_quality"],
    "additionalProperties": False,
}
_TEXT_FORM = (re.compile(r"toxicity\s*[=:]\s*([1-5])", re.I),
              re.compile(r"argument\s*_?\s*quality\s*[=:]\s*([1-5])", re.I))


def check_annotation(value) -> Checked:
    """``{"toxicity": 1..5, "argument_quality": 1..5}`` (integers)."""
    if not isinstance(value, dict):
        return Checked(None, [f"the reply must be a JSON object, got {type(value).__name__}"])
    errors, out = [], {}
    for key in ("toxicity", "argument_quality"):
        v = value.get(key)
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        if not is_int(v, numpy=False) or v not in SCALE:
            errors.append(f"{key} must be an integer from 1 to 5, got {v!r}")
        else:
            out[key] = v
    extra = sorted(set(value) - {"toxicity", "argument_quality"})
    if extra:
        errors.append(f"unexpected key(s) {extra}")
    return Checked(out if len(out) == 2 else None, errors)


def parse_text_form(raw: str | None) -> tuple[int, int] | None:
    """The paper's output format, ``Toxicity=4 ArgumentQuality=1``, if the reply has it."""
    if not raw:
        return None
    tox, aq = (p.search(raw) for p in _TEXT_FORM)
    return (int(tox.group(1)), int(aq.group(1))) if tox and aq else None


class LLMAnnotators:
    """``k`` annotator personas over one ``LLMClient``; ``annotate`` sends all requests at once."""

    def __init__(self, client, personas: int | Sequence[SDB] = 10, *, seed: int = 0,
                 instructions: str = ANNOTATOR_ACTOR, with_sdb: bool = True, max_tokens: int = 24,
                 text_chars: int = 600) -> None:
        if isinstance(personas, int):
            if personas < 1:
                raise ValueError(f"personas must be >= 1 annotators, got {personas}")
            personas = generate_sdbs(personas, seed=seed + 7919)     # apart from the users' draws
        self.personas = list(personas)
        if not self.personas:
            raise ValueError("LLMAnnotators needs at least one persona")
        self.client = client
        self.k = len(self.personas)
        self.instructions = instructions
        self.with_sdb = with_sdb
        self.max_tokens = max_tokens
        self.text_chars = text_chars

    def __getstate__(self) -> dict:          # picklable without the client (sockets, key)
        return {**self.__dict__, "client": None}

    def messages(self, persona: SDB, request: AnnotationRequest) -> list[dict]:
        background = f"\n\nYour background:\n{sdb_block(persona, with_username=False)}" if self.with_sdb else ""
        system = (f"{self.instructions}{background}\n\nReply only with JSON: "
                  '{"toxicity": <1-5>, "argument_quality": <1-5>}')
        clip = self.text_chars
        context = "\n".join(f"User {a} posted: {t[:clip]}" for a, t in request.context) or "(no earlier comments)"
        user = (f"Discussion topic: {request.topic}\nEarlier comments:\n{context}\n\n"
                f"Annotate this comment:\nUser {request.author} posted: {request.text[:clip]}")
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]

    async def _rate(self, j: int, request: AnnotationRequest) -> tuple[float, float]:
        reply = await self.client.complete_json(
            self.messages(self.personas[j], request), ANNOTATION_SCHEMA, check_annotation, name="annotation",
            agent=f"annotator_{j}", round=request.comment_id, purpose="annotate", max_tokens=self.max_tokens)
        if reply.ok:
            v = reply.checked.value
            return float(v["toxicity"]), float(v["argument_quality"])
        parsed = parse_text_form(reply.raw)
        if parsed is not None:
            return float(parsed[0]), float(parsed[1])
        self.client.usage.record_fallback(Fallback(f"annotator_{j}", request.comment_id, "annotate", None,
                                                   str(reply.error), "missing rating (NaN)"))
        return float("nan"), float("nan")

    async def aannotate(self, requests: Sequence[AnnotationRequest]) -> list[Annotation]:
        ratings = await asyncio.gather(*(self._rate(j, r) for r in requests for j in range(self.k)))
        values = np.array(ratings, dtype=np.float64).reshape(len(requests), self.k, 2)
        return [Annotation(v[:, 0], v[:, 1]) for v in values]

    def annotate(self, requests: Sequence[AnnotationRequest]) -> list[Annotation]:
        if not requests:
            return []
        return self.client.run(self.aannotate(requests))


class ScriptedAnnotator:
    """Annotators given as functions ``request -> (toxicity, argument_quality)`` (one per annotator)."""

    def __init__(self, *raters: Callable[[AnnotationRequest], tuple[float, float]]) -> None:
        if not raters:
            raise ValueError("ScriptedAnnotator needs at least one rater function")
        self.raters = raters
        self.k = len(raters)
        self.calls = 0

    def annotate(self, requests: Sequence[AnnotationRequest]) -> list[Annotation]:
        self.calls += 1
        out = []
        for r in requests:
            pairs = np.array([rater(r) for rater in self.raters], dtype=np.float64).reshape(self.k, 2)
            out.append(Annotation(pairs[:, 0], pairs[:, 1]))
        return out


TOXIC_WORDS = frozenset((
    "idiot", "idiots", "stupid", "moron", "morons", "dumb", "shut", "pathetic", "clown", "clowns",
    "snowflake", "snowflakes", "trash", "garbage", "loser", "losers", "hate", "disgusting", "liar",
    "liars", "ignorant", "fool", "fools", "joke", "ridiculous", "brainwashed", "sheep", "crap",
))
ARGUMENT_MARKERS = ("because", "evidence", "since", "therefore", "for example", "for instance", "research",
                    "data", "studies", "however", "on the other hand", "consider", "suggests")


class LexiconAnnotator:
    """k keyword annotators of differing strictness (offline, deterministic).

    Toxicity: 1 + the number of insult words (capped at 5); annotator ``j`` adds ``strictness[j]``
    to any comment with at least one such word, so the raters disagree on borderline cases.
    Argument quality: 1 + argument markers found + 1 for >= 15 words + 1 for >= 40 words,
    minus 1 if the comment is toxic (>= 3), within 1..5.
    """

    def __init__(self, k: int = 3, strictness: Sequence[int] | None = None) -> None:
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        self.k = k
        self.strictness = list(strictness) if strictness is not None else [j % 2 for j in range(k)]
        if len(self.strictness) != k:
            raise ValueError(f"strictness needs {k} values, got {len(self.strictness)}")

    def rate(self, text: str) -> np.ndarray:
        words = re.findall(r"[a-z']+", text.lower())
        hits = sum(w in TOXIC_WORDS for w in words)
        lowered = text.lower()
        markers = sum(m in lowered for m in ARGUMENT_MARKERS)
        out = np.empty((self.k, 2))
        for j, s in enumerate(self.strictness):
            tox = min(5, 1 + hits + (s if hits else 0))
            aq = 1 + markers + (len(words) >= 15) + (len(words) >= 40) - (tox >= 3)
            out[j] = tox, min(5, max(1, aq))
        return out

    def annotate(self, requests: Sequence[AnnotationRequest]) -> list[Annotation]:
        return [Annotation(*self.rate(r.text).T) for r in requests]


def annotate_discussion(env, annotator, *, include_moderator: bool = True) -> dict:
    """Rate every comment of a finished discussion in one call and attach the results to the
    environment (``env.turn_log`` rows get ``toxicity``/``argument_quality``).

    Returns ``{content id: Annotation}``."""
    base = getattr(env, "unwrapped", env)
    ids = [cid for cid in base.comment_ids
           if include_moderator or base.turn_log[base._turn_of[cid]]["agent"] != base.moderator]
    annotations = annotator.annotate([base.request(cid) for cid in ids])
    if len(annotations) != len(ids):
        raise ValueError(f"the annotator returned {len(annotations)} annotations for {len(ids)} comments")
    result = dict(zip(ids, annotations))
    base.set_annotations(result)
    return result
