"""The topic vocabulary: configured topics plus every new topic introduced so far (specification §2).

Topics are short labels, not text: a topic string must be non-empty once normalised (stripped,
lower-cased), at most :data:`MAX_TOPIC_CHARS` characters long, free of control characters
(C0, DEL, C1: NUL, newlines, tabs, escape sequences ...) and encodable as UTF-8 (no lone
surrogates). :func:`topic_problem` says what is wrong with one; the environment's action
validation turns that into an invalid action (specification §6), and the vocabulary refuses it.

An integer topic is an index into the vocabulary — the same meaning as the ``topic`` field of
the numeric action encoding: valid when ``0 <= index < len(vocabulary)`` (bools are not
indices).
"""

from __future__ import annotations

import re

from socialgym.platform.validation import utf8_problem

MAX_TOPIC_CHARS = 64
"""The longest topic label accepted, in characters of the normalised form; longer strings are
free text, not a topic (specification §6). ``socialgym.config`` lists it with the other size limits."""

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def normalise_topic(topic: str) -> str:
    """Topic strings are compared stripped and lower-cased (specification §2)."""
    return topic.strip().lower()


def topic_problem(topic: str) -> str | None:
    """Why the topic string ``topic`` is not acceptable, or None when it is."""
    key = normalise_topic(topic)
    if not key:
        return "topic must be a non-empty string"
    if len(key) > MAX_TOPIC_CHARS:
        return f"topic has {len(key)} characters, more than MAX_TOPIC_CHARS={MAX_TOPIC_CHARS}"
    bad = _CONTROL.search(key)
    if bad:
        return f"topic contains the control character {bad.group()!r} at position {bad.start()}"
    return utf8_problem(key)


class TopicVocabulary:
    """Maps normalised topic strings to dense integer ids, in order of first appearance."""

    def __init__(self, initial: tuple[str, ...] = ()) -> None:
        self._names: list[str] = []
        self._index: dict[str, int] = {}
        for topic in initial:
            self.add(topic)

    def add(self, topic: str) -> int:
        key = normalise_topic(topic)
        idx = self._index.get(key)
        if idx is None:
            problem = topic_problem(key)
            if problem:
                raise ValueError(f"{problem}: {topic[:MAX_TOPIC_CHARS + 16]!r}")
            idx = len(self._names)
            self._names.append(key)
            self._index[key] = idx
        return idx

    def get(self, topic: str) -> int | None:
        return self._index.get(normalise_topic(topic))

    def name(self, idx: int) -> str:
        return self._names[idx]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def truncate(self, size: int) -> None:
        """Forget every topic added after the vocabulary had ``size`` entries (step rollback)."""
        for key in self._names[size:]:
            del self._index[key]
        del self._names[size:]

    def state_dict(self) -> list[str]:
        return list(self._names)

    @classmethod
    def from_state(cls, names: list[str]) -> "TopicVocabulary":
        vocab = cls()
        for key in names:            # restored as saved, without re-validating old checkpoints
            if key not in vocab._index:
                vocab._index[key] = len(vocab._names)
                vocab._names.append(key)
        return vocab
