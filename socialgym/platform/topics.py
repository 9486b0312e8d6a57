"""The topic vocabulary: configured topics plus every new topic introduced so far (SPEC §2)."""

from __future__ import annotations

from socialgym.config import normalise_topic


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

    def state_dict(self) -> list[str]:
        return list(self._names)

    @classmethod
    def from_state(cls, names: list[str]) -> "TopicVocabulary":
        return cls(tuple(names))
