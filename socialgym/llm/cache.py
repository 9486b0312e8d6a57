"""On-disk response cache: a run with the cache on can be replayed exactly, with no server.

The key hashes the model, the messages, the sampling parameters, the schema and an occurrence
number (the n-th identical request of this client gets the n-th stored reply), so that even
identical prompts sent twice replay the replies they got the first time. The API key and the
server address are never part of the key or of the stored data.

Text UTF-8 cannot encode (a lone surrogate, which a model can write as an escape) never breaks
the key (it hashes the surrogates' own code points) and is never stored: ``put`` skips such a
reply, which the client already treats as a failed attempt.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from pathlib import Path
from typing import Any

from socialgym.llm.sanitize import encodable


def request_key(payload: dict[str, Any], occurrence: int) -> str:
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    # surrogatepass: the same bytes as plain UTF-8 for every encodable text (so existing caches
    # keep their keys), and a lone surrogate hashes as its code point instead of raising
    return hashlib.sha256(f"{blob}#{occurrence}".encode("utf-8", "surrogatepass")).hexdigest()


class ResponseCache:
    """SQLite file of ``key -> (reply, prompt_tokens, completion_tokens)``."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        if self.path.is_dir():
            self.path = self.path / "responses.sqlite"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, reply TEXT NOT NULL, "
                         "prompt_tokens INTEGER, completion_tokens INTEGER)")
        self.hits = 0
        self.misses = 0

    def get(self, key: str) -> tuple[str, int, int] | None:
        with self._lock:
            row = self._db.execute("SELECT reply, prompt_tokens, completion_tokens FROM responses "
                                   "WHERE key = ?", (key,)).fetchone()
            if row is None:
                self.misses += 1
                return None
            if not isinstance(row[0], str) or not encodable(row[0]):   # a damaged or edited cache file
                self.misses += 1
                return None
            self.hits += 1
            return row[0], _count(row[1]), _count(row[2])

    def put(self, key: str, reply: str, prompt_tokens: int, completion_tokens: int) -> bool:
        """Store a reply; ``False`` (nothing stored) when it is not text UTF-8 can encode."""
        if not isinstance(reply, str) or not encodable(reply):
            return False
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?)",
                             (key, reply, _count(prompt_tokens), _count(completion_tokens)))
        return True

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __repr__(self) -> str:
        return f"ResponseCache({str(self.path)!r})"


def _count(value: Any) -> int:
    try:
        count = max(0, int(value or 0))
    except (TypeError, ValueError, OverflowError):
        return 0
    return count if count < 2**63 else 0        # SQLite's INTEGER; no real reply is near it
