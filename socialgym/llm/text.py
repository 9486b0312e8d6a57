"""Plain (unconstrained) text replies: cleaning a model's message text, reading a bullet list.

Small models write fluent sentences when asked plainly, but wrap them in habits of chat
models: a lead-in ("Sure! Here is the post:"), quotes, a "Post:" label, stray @handles, a
second paragraph, a sentence cut off by the token limit. ``clean_text`` keeps the message
itself, cut at a sentence boundary to the configured length.
"""

from __future__ import annotations

import re
from typing import Collection

_LEAD_IN = re.compile(
    r"^\s*(?:(?:sure|okay|ok|certainly|absolutely|of course)\b[!,.]*\s+)?"
    r"(?:(?:here(?:'s| is| are)|below is)\b[^:\n]{0,80}:|"
    r"(?:public |private |my |your |short )?(?:post|comment|reply|message|dm|text|response|answer|tweet|a)"
    r"(?: text)?\s*:)?\s*", re.IGNORECASE)
_QUOTES = {'"': '"', "\u201c": "\u201d", "'": "'", "\u2018": "\u2019"}
_HANDLE = re.compile(r"(?<![\w@])@[\w.\-]+")
# a run of sentence-ending marks with the closing quotes / brackets after it, then whitespace or the end
_END = re.compile(r"(?<![.!?\u2026])[.!?\u2026]+[\"'\u201d\u2019)]*(?=\s|$)")
_CLOSERS = "\"'\u201d\u2019)"
_OPENERS = "\"'\u201c\u2018(["
_NEXT = re.compile(r"\s*[\"'\u201c\u2018(\[]*(.?)", re.DOTALL)     # the first character of the next word
ABBREVIATIONS = frozenset({
    "mr", "mrs", "ms", "mx", "dr", "prof", "rev", "hon", "gen", "col", "capt", "lt", "sgt", "gov", "sen",
    "e.g", "i.e", "cf", "vs", "viz", "approx", "fig", "vol", "eq"})
"""Abbreviations (lower-cased, without their last period) that a period after never ends a
sentence with, except at the end of the text: titles before a name and Latin abbreviations."""
ENDING_ABBREVIATIONS = frozenset({"etc", "al", "inc", "ltd", "co", "corp", "jr", "sr", "st", "ave", "dept"})
"""Abbreviations that often end a sentence too: with their period, like an initialism (``U.S.``),
they end one only before a word that does not start with a lowercase letter."""
_INITIALISM = re.compile(r"[A-Za-z]{1,3}(?:\.[A-Za-z]{1,3})+")
_GREETING = re.compile(r"(?:dear|hi|hey|hello|greetings|good (?:morning|afternoon|evening))\b", re.IGNORECASE)
_BULLET = re.compile(r"^\s*(?:[-*\u2022]|\d+[.)])\s*")


def clean_text(raw: str | None, max_chars: int, *, max_sentences: int = 2, keep: Collection[str] = ()) -> str:
    """The message in a plain reply, at most ``max_chars`` characters and ``max_sentences``
    sentences (as :func:`split_sentences` finds them: a period inside a number, URL or
    abbreviation ends none); ``""`` when nothing usable is left. @handles are removed unless
    their name is in ``keep`` (the feed's policy writes a planned @mention itself, with the id
    the environment knows; a discussion keeps @username addressing of its participants)."""
    if max_chars < 1:
        raise ValueError(f"max_chars must be >= 1, got {max_chars!r}")
    text = (raw or "").replace("**", "").replace("```", "").strip()
    for _ in range(2):                                    # "Sure! Here's a post:\n\nPost: ..."
        text = _LEAD_IN.sub("", text, count=1).strip()
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", text) if p.strip()]
    if len(paragraphs) > 1 and _salutation(paragraphs[0]):    # "Dear Ani,\n\nI hope ..." is one message
        paragraphs[:2] = [f"{paragraphs[0].rstrip(' ,')}, {paragraphs[1]}"]
    text = paragraphs[0] if paragraphs else ""
    if text[:1] in _QUOTES and _wrapped(text):            # a quoted message: what is inside
        text = text[1:text.rfind(_QUOTES[text[0]])]
    text = _HANDLE.sub(lambda m: m.group(0) if m.group(0)[1:].rstrip(".-") in keep else "", text)
    text = re.sub(r"\s+([,.!?;:])", r"\1", text)          # "Hey @x, how" -> "Hey, how"
    text = re.sub(r"#(\w)", r"\1", text)                  # hashtags read as words
    text = _unpaired_quotes(" ".join(text.split()).strip(" -:,;"))
    return _cut(text, max_chars, max_sentences)


def _salutation(paragraph: str) -> bool:
    """Whether a paragraph is only a greeting ("Dear Ani,", "Hi there"): a greeting word, at most
    three words and no sentence end."""
    return len(paragraph.split()) <= 3 and bool(_GREETING.match(paragraph)) and \
        not re.search(r"[.!?\u2026][\"'\u201d\u2019)]*$", paragraph)


def _unpaired_quotes(text: str) -> str:
    """Drop a quote mark left alone at either end (the other half was cut away)."""
    for mark in ('"', "\u201c", "\u201d"):
        if text.count(mark) % 2 and len(text.replace('"', "")) == len(text) - 1 or \
                mark != '"' and text.count("\u201c") != text.count("\u201d"):
            text = text.strip(mark).strip()
    return text


def _wrapped(text: str) -> bool:
    """Whether the whole text is one quotation: it opens with a quote whose closer comes at the
    end (after the message's own punctuation), not a quoted phrase inside a sentence."""
    closer = _QUOTES[text[0]]
    end = text.rfind(closer)
    return end > 0 and not text[end + 1:].strip(" .!?\u2026") and \
        (closer != "'" or not text[1:2].isalpha() or text[end - 1:end] in ".!?\u2026")


def split_sentences(text: str) -> list[str]:
    """``text`` (whitespace already collapsed) as its sentences, each stripped; joined with one
    space they give ``text`` back. A sentence ends at a run of ``.``, ``!``, ``?`` or ``…`` (with
    the closing quotes or brackets right after it) that is followed by whitespace or the end of
    the text; a mark inside a word never ends one, so numbers (``3.5``), URLs, e-mail addresses
    and version numbers (``v1.2.3``, ``Python 3.11``) stay whole. Abbreviations are the
    exception for a period followed by more text: after one of :data:`ABBREVIATIONS` (``Dr.
    Smith``, ``e.g. Paris``) it never ends a sentence; after an initialism (``U.S.``, ``a.m.``)
    or one of :data:`ENDING_ABBREVIATIONS` (``etc.``) it ends one only before a word that does
    not start with a lowercase letter (``the U.S. plan`` goes on, ``in the U.S. Then`` ends)."""
    sentences, start, end = [], 0, len(text.rstrip())
    for m in _END.finditer(text):
        if m.end() < end and not _ends_sentence(text, m):
            continue
        if text[start:m.end()].strip():
            sentences.append(text[start:m.end()].strip())
        start = m.end()
    if text[start:].strip():
        sentences.append(text[start:].strip())
    return sentences


def _ends_sentence(text: str, m: re.Match) -> bool:
    """Whether the mark run ``m``, followed by whitespace and more text, ends a sentence."""
    if m.group(0).rstrip(_CLOSERS) != ".":                # !, ?, an ellipsis: always
        return True
    i = m.start()
    while i > 0 and not text[i - 1].isspace():           # the word before: linear over all matches
        i -= 1
    word = text[i:m.start()].lstrip(_OPENERS)
    if word.lower() in ABBREVIATIONS:
        return False
    if word.lower() in ENDING_ABBREVIATIONS or _INITIALISM.fullmatch(word):
        return not _NEXT.match(text, m.end()).group(1).islower()
    return True


def _cut(text: str, max_chars: int, max_sentences: int) -> str:
    sentences = split_sentences(text)
    complete = [s for s in sentences if re.search(r"[.!?\u2026][\"'\u201d\u2019)]*$", s)]
    if complete and not re.search(r"[.!?\u2026][\"'\u201d\u2019)]*$", sentences[-1]):
        sentences = sentences[:-1]                        # drop a sentence the token limit cut off
    out = ""
    for s in sentences[:max_sentences]:
        candidate = f"{out} {s}".strip()
        if len(candidate) > max_chars:
            break
        out = candidate
    if out:
        return out
    first = sentences[0] if sentences else ""
    if len(first) <= max_chars:
        return first
    cut = first[:max_chars - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > max_chars // 2 else cut).rstrip(" ,;:") + "\u2026"


def parse_bullets(raw: str | None, *, max_items: int = 5, max_chars: int = 240) -> list[str]:
    """The items of a plain bullet or numbered list (a reply to "one tip per line")."""
    items = []
    for line in (raw or "").splitlines():
        line = _BULLET.sub("", line.replace("**", "")).strip()
        if len(line.split()) >= 3 and not line.endswith(":"):
            items.append(line[:max_chars])
    return items[:max_items]


GENERATION_MODES = ("auto", "joint", "split")


def resolve_generation(generation: str, client) -> str:
    """``joint`` or ``split`` for a client: ``auto`` is ``split`` for a local GGUF model
    (``LLMClient(local=True)`` or a model name ending in ``.gguf``), ``joint`` otherwise."""
    if generation not in GENERATION_MODES:
        raise ValueError(f"generation must be one of {GENERATION_MODES}, got {generation!r}")
    if generation != "auto":
        return generation
    local = getattr(client, "local", False) or str(getattr(client, "model", "")).lower().endswith(".gguf")
    return "split" if local else "joint"
