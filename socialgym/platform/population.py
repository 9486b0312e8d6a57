"""The population's given structure: each agent's main interest and the seed tie graph.

Both come from the feed config (``agent_interests``, ``seed_graph``), which checks them with
these functions when it is made — the platform layer reads them without the tie machinery.
"""

from __future__ import annotations

from typing import Any

import numpy as np


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


def favourite_topics(interests: Any, n_agents: int) -> np.ndarray:
    """An ``(n_agents, K)`` boolean matrix of each agent's favourite topics: from a preference
    matrix, every topic liked as much as the agent's top one (so a multi-interest user with equal
    favourites has all of them); from labels, the one label (K = the number of distinct labels)."""
    arr = np.asarray(interests, dtype=object if not _numeric(interests) else None)
    if arr.ndim == 2:
        main_interests(interests, n_agents)             # the shape and value checks
        values = arr.astype(np.float64)
        return values >= values.max(axis=1, keepdims=True) - 1e-12
    codes = main_interests(interests, n_agents)
    return np.eye(int(codes.max(initial=0)) + 1, dtype=bool)[codes]


def seed_graph_pairs(matrix: Any, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The off-diagonal non-zero entries of an n x n tie matrix (dense or sparse) as sorted pair
    keys ``src * n + dst`` and their weights, which must lie in [0, 1]."""
    import scipy.sparse as sp          # (here: the config imports this module)

    coo = sp.coo_matrix(matrix)
    if coo.shape != (n, n):
        raise ValueError(f"seed_graph must be {n} x {n}, got {coo.shape}")
    coo.sum_duplicates()
    off_diag = (coo.row != coo.col) & (coo.data != 0)
    keys = coo.row[off_diag].astype(np.int64, copy=False) * n + coo.col[off_diag]
    values = coo.data[off_diag].astype(np.float64, copy=False)
    if not np.all(np.isfinite(values)) or values.min(initial=0) < 0 or values.max(initial=0) > 1:
        raise ValueError("seed_graph weights must lie in [0, 1]")
    order = np.argsort(keys)
    return keys[order], values[order]


def _numeric(values: Any) -> bool:
    try:
        return np.asarray(values).dtype.kind in "biuf"
    except (TypeError, ValueError):
        return False


__all__ = ["favourite_topics", "main_interests", "seed_graph_pairs"]
