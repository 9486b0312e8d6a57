"""Is a text English? The share of its words found in a standard English word list.

A text is *English-like* when at least ``threshold`` (80 %) of its words, @mentions removed,
are in the list; a text with no words at all is not. The list is Debian's ``wamerican``
(``/usr/share/dict/american-english``; ``apt-get install wamerican``), or any one-word-a-line
file given by path or by ``SOCIALGYM_WORDLIST``. Used to check that LLM agents write language
(docs/llm.md), not as a reward.
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path
from typing import Iterable

import numpy as np

WORDLIST_PATHS = ("/usr/share/dict/american-english", "/usr/share/dict/words")
_MENTION = re.compile(r"@\S+")
_WORD = re.compile(r"[A-Za-z]+(?:['\u2019][A-Za-z]+)*")


@functools.lru_cache(maxsize=4)
def load_wordlist(path: str | None = None) -> frozenset[str]:
    """The lower-cased words of ``path``, ``$SOCIALGYM_WORDLIST`` or the first system list found."""
    candidates = [path] if path else [os.environ.get("SOCIALGYM_WORDLIST")] + list(WORDLIST_PATHS)
    for candidate in candidates:
        if candidate and Path(candidate).is_file():
            text = Path(candidate).read_text(encoding="utf-8", errors="replace")
            return frozenset(w.strip().lower() for w in text.splitlines() if w.strip())
    raise FileNotFoundError(f"no English word list at {path or ', '.join(WORDLIST_PATHS)}: install Debian's "
                            f"wamerican (apt-get install wamerican) or set SOCIALGYM_WORDLIST to a word-a-line file")


def words_of(text: str) -> list[str]:
    """The words of ``text`` with @mentions removed (letters and inner apostrophes; no digits)."""
    return _WORD.findall(_MENTION.sub(" ", text or "").replace("\u2019", "'"))


def english_word_share(text: str, words: frozenset[str]) -> float:
    """The share of ``text``'s words in ``words`` (NaN when it has none)."""
    found = words_of(text)
    if not found:
        return float("nan")
    return sum(w.lower() in words or w.lower().removesuffix("'s") in words for w in found) / len(found)


def english_share(texts: Iterable[str], words: frozenset[str] | None = None, threshold: float = 0.8) -> dict:
    """``{"texts", "english_like", "share", "median_word_share"}`` over ``texts`` (empty texts
    count, as not English-like)."""
    words = load_wordlist() if words is None else words
    shares = np.array([english_word_share(t, words) for t in texts], dtype=float)
    like = int(np.sum(np.nan_to_num(shares, nan=0.0) >= threshold)) if len(shares) else 0
    return {"texts": int(len(shares)), "english_like": like,
            "share": like / len(shares) if len(shares) else float("nan"),
            "median_word_share": float(np.median(np.nan_to_num(shares, nan=0.0))) if len(shares) else float("nan")}
