"""Seeding the tie graph: recagent's Soc-Strategy (friends with different interests)."""

from __future__ import annotations

from typing import Any

import numpy as np

from socialgym.rowops import first_per_row, repeats_in_rows


def main_interests(interests: Any, n_agents: int) -> np.ndarray:
    """Integer interest label per agent from an (n, K) preference matrix (its argmax) or from
    n labels (any hashable values)."""
    arr = np.asarray(interests, dtype=object if not _numeric(interests) else None)
    if arr.ndim == 2:
        if arr.shape[0] != n_agents:
            raise ValueError(f"agent_interests has {arr.shape[0]} rows for {n_agents} agents")
        values = arr.astype(np.float64)
        if not np.all(np.isfinite(values)) or (values < 0).any():
            raise ValueError("agent_interests (a preference matrix) must be finite and >= 0")
        return values.argmax(axis=1)
    if arr.ndim == 1:
        if len(arr) != n_agents:
            raise ValueError(f"agent_interests has {len(arr)} labels for {n_agents} agents")
        _, codes = np.unique(arr.astype(str), return_inverse=True)
        return codes
    raise ValueError("agent_interests must be an (n_agents, n_topics) matrix or n_agents labels")


def different_interest_ties(interests: Any, m: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """For every agent, ``m`` distinct agents whose main interest differs, chosen uniformly.

    Returns directed pairs (src, dst) in both directions (a friendship is mutual), without
    repeats. Agents with fewer than ``m`` differently-minded peers get all of them.
    """
    if m < 0:
        raise ValueError(f"m must be >= 0, got {m}")
    labels = np.asarray(interests)
    n = len(labels)
    if m == 0 or n < 2:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    draws = rng.integers(0, n, size=(n, 4 * m + 8))
    ok = labels[draws] != labels[:, None]
    src, col, _ = first_per_row(ok & ~repeats_in_rows(draws), m)
    dst = draws[src, col]
    short = np.flatnonzero(np.bincount(src, minlength=n) < m)
    if len(short):   # rare: few differently-minded agents; choose exactly among all of them
        extra_src, extra_dst = [], []
        for v in short.tolist():
            others = np.flatnonzero(labels != labels[v])
            chosen = rng.choice(others, size=min(m, len(others)), replace=False) if len(others) else []
            extra_src.append(np.full(len(chosen), v))
            extra_dst.append(np.asarray(chosen, np.int64))
        keep = ~np.isin(src, short)
        src = np.concatenate([src[keep], *extra_src])
        dst = np.concatenate([dst[keep], *extra_dst])
    keys = np.unique(np.concatenate([src * n + dst, dst * n + src]))
    return keys // n, keys % n


def _numeric(values: Any) -> bool:
    try:
        return np.asarray(values).dtype.kind in "biuf"
    except (TypeError, ValueError):
        return False
