"""Keeping secrets and unencodable text out of everything the LLM layer stores.

Servers echo what they were sent: a wrong API key comes back in the 401's message ("Incorrect
API key provided: sk-..."), some proxies echo the ``Authorization`` header. Every text that came
from a server and is kept (error messages, usage records, fallback reasons, checkpoint state,
transcripts) goes through :func:`redact` first.

A model can also write an escaped lone surrogate (``"\\ud800"``): JSON decodes it into a Python
string that UTF-8 cannot encode, so it breaks the cache, the hash of a prompt and every file it
is written to. :func:`encodable` tells such text apart; :func:`scrub` replaces the surrogates
with U+FFFD where a record must be written anyway (transcripts, error texts).
"""

from __future__ import annotations

import re
from typing import Any

REDACTED = "***"
_BEARER = re.compile(r"(?i)\b(bearer\s+)[^\s\"'`,;]+")
_OPENAI_KEY = re.compile(r"\bsk-[A-Za-z0-9_\-]{16,}")
_SURROGATE = re.compile("[\ud800-\udfff]")


def redact(text: Any, *secrets: str | None) -> str:
    """``text`` with every secret replaced by ``***``, and any ``Bearer <token>`` and OpenAI-style
    key (``sk-...``) masked too. Secrets of 8 characters or more are replaced wherever they occur;
    shorter ones (not real keys, but still never echoed) only where they stand as a whole token,
    so that a test key ``"k"`` does not garble every word with a k in it."""
    text = text if isinstance(text, str) else str(text)
    for secret in sorted({s for s in secrets if isinstance(s, str) and s}, key=len, reverse=True):
        if len(secret) >= 8:
            text = text.replace(secret, REDACTED)
        else:
            text = re.sub(rf"(?<![\w.\-]){re.escape(secret)}(?![\w\-])", REDACTED, text)
    text = _BEARER.sub(lambda m: m.group(1) + REDACTED, text)
    return _OPENAI_KEY.sub(REDACTED, text)


def encodable(text: str) -> bool:
    """Whether ``text`` can be written as UTF-8 (no lone surrogate in it)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def unencodable_strings(value: Any) -> bool:
    """Whether any string in a JSON value (keys included) cannot be written as UTF-8."""
    if isinstance(value, str):
        return not encodable(value)
    if isinstance(value, dict):
        return any(unencodable_strings(k) or unencodable_strings(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return any(unencodable_strings(v) for v in value)
    return False


def scrub(value: Any) -> Any:
    """A copy of ``value`` (a string or a JSON-like structure) in which every lone surrogate is
    U+FFFD, so that it can be written as UTF-8. Values without any are returned as they are."""
    if isinstance(value, str):
        return value if encodable(value) else _SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {scrub(k): scrub(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(scrub(v) for v in value)
    return value


def one_line(text: str, limit: int = 300) -> str:
    """Whitespace collapsed, cut to ``limit`` characters (after redaction, never before: a cut
    could leave half a key that no longer matches)."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 3] + "..."
