"""Small array operations shared by samplers (recommenders, tie seeding) and the tie update."""

from __future__ import annotations

import numpy as np


def repeats_in_rows(values: np.ndarray) -> np.ndarray:
    """True at every occurrence of a value after its first in the same row (left to right)."""
    order = np.argsort(values, axis=1, kind="stable")
    srt = np.take_along_axis(values, order, axis=1)
    dup_sorted = np.zeros(values.shape, bool)
    dup_sorted[:, 1:] = srt[:, 1:] == srt[:, :-1]
    dup = np.zeros(values.shape, bool)
    np.put_along_axis(dup, order, dup_sorted, axis=1)
    return dup


def first_per_row(ok: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The first ``m`` True cells of each row: (rows, cols, position 0..m-1 within the row)."""
    position = np.cumsum(ok, axis=1) - 1
    rows, cols = np.nonzero(ok & (position < m))
    return rows, cols, position[rows, cols]


def unique_inverse(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(keys, return_inverse=True)`` for a 1-D integer array, by a stable argsort: the
    tie update's pair keys come in long sorted runs (votes in voter order), which the stable sort
    exploits — 2.7x faster than ``np.unique`` on 10M such keys."""
    keys = np.asarray(keys)
    if len(keys) == 0:
        return keys.copy(), np.zeros(0, np.int64)
    order = np.argsort(keys, kind="stable")
    srt = keys[order]
    first = np.empty(len(srt), bool)
    first[0] = True
    np.not_equal(srt[1:], srt[:-1], out=first[1:])
    inverse = np.empty(len(keys), np.int64)
    inverse[order] = np.cumsum(first) - 1
    return srt[first], inverse
