"""Reuse of large observation arrays once the caller has let go of them.

At 100k agents a round's feature arrays are ~100 MB. Fresh arrays that large are fresh memory
maps, and first-touching their pages cost more than computing the features (0.2 s per round,
against ~4 ms at 10k agents, whose arrays come from the allocator's heap). The pool hands back
an array it allocated earlier only when nothing outside the pool refers to it any more —
neither the array nor a view of it (views hold a reference to their base) — so an observation
a caller keeps (in a replay buffer, a list, a torch tensor made by ``from_numpy``) is never
overwritten.
"""

from __future__ import annotations

import sys

import numpy as np

# getrefcount sees: the pool's list entry, the loop variable and its own argument
_UNREFERENCED = 3


class BufferPool:
    def __init__(self, per_key: int = 3) -> None:
        self.per_key = per_key
        self._arrays: dict[str, list[np.ndarray]] = {}

    def empty(self, key: str, shape: tuple, dtype) -> np.ndarray:
        """An uninitialised array, reused if a released one of this key, shape and dtype exists."""
        arrays = self._arrays.setdefault(key, [])
        dtype = np.dtype(dtype)
        for arr in arrays:
            if sys.getrefcount(arr) <= _UNREFERENCED and arr.shape == shape and arr.dtype == dtype:
                return arr
        fresh = np.empty(shape, dtype)
        if len(arrays) >= self.per_key:
            arrays.pop(0)          # the caller still holds it; it is simply no longer pooled
        arrays.append(fresh)
        return fresh

    def clear(self) -> None:
        self._arrays.clear()
