"""Keeping secrets and unencodable text out of everything the LLM layer stores.

Settings that hold a credential (a key named ``api_key``, ``*token*``, ``*secret*``,
``*password*``) are left out of every config a run writes or logs: :func:`drop_secrets`.

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
from collections.abc import Mapping
from os import PathLike
from typing import Any

REDACTED = "***"
SECRET_KEY = re.compile(r"api_key|token|secret|password", re.IGNORECASE)
"""A setting whose name matches holds a credential (``api_key``, ``hf_token``, ``Auth_Token``...)."""
NOT_SECRET = frozenset({"api_key_env", "max_tokens", "text_tokens", "plan_tokens", "vote_tokens", "prompt_tokens",
                        "completion_tokens", "tie_transcript_tokens"})
"""Names that match :data:`SECRET_KEY` but hold no secret: ``api_key_env`` names the
environment variable the key is read from (a resumed run needs it); the others count tokens
(``llm.max_tokens``, ``llm.tie_transcript_tokens``, the LLM policy's limits, usage, budgets)."""
NAMED_BY_DATA = frozenset({"prices"})
"""Mappings whose keys are names of things, not settings (``llm.prices``: model names), kept
whatever they look like; their values are still searched."""
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


def drop_secrets(value: Any) -> Any:
    """A plain-data copy of ``value`` without any mapping key that names a credential
    (:data:`SECRET_KEY`, in any case, except :data:`NOT_SECRET`), at any depth: mappings become
    dicts with string keys, lists and tuples lists, paths strings."""
    return _drop(value, False)


def _drop(value: Any, names: bool) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _drop(v, str(k) in NAMED_BY_DATA) for k, v in value.items()
                if names or str(k) in NOT_SECRET or not SECRET_KEY.search(str(k))}
    if isinstance(value, (list, tuple)):
        return [_drop(v, False) for v in value]
    if isinstance(value, PathLike):
        return str(value)
    return value


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
