"""A sparse table of directed pair values, keyed by ``src * n + dst`` in sorted int64 arrays.

At 100,000 agents a dense n x n matrix is 80 GB; the platform only ever touches the pairs that
interacted, so ties live here and are handed out as ``scipy.sparse`` matrices.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from socialgym.platform.population import seed_graph_pairs


class PairTable:
    def __init__(self, n: int, keys: np.ndarray | None = None, values: np.ndarray | None = None) -> None:
        self.n = n
        self.keys = np.zeros(0, np.int64) if keys is None else np.asarray(keys, np.int64)
        self.values = np.zeros(0, np.float64) if values is None else np.asarray(values, np.float64)

    @classmethod
    def from_matrix(cls, matrix, n: int) -> "PairTable":
        """The seed graph (checked and made sparse by ``platform.population``) as a table."""
        return cls(n, *seed_graph_pairs(matrix, n))

    def __len__(self) -> int:
        return len(self.keys)

    def keys_of(self, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
        return np.asarray(src, np.int64) * self.n + np.asarray(dst, np.int64)

    def lookup(self, keys: np.ndarray, src_range: tuple[int, int] | None = None) -> np.ndarray:
        """Values at ``keys`` (0 where absent).

        ``src_range=(lo, hi)`` promises that every key's source lies in ``[lo, hi)``: the
        search is then confined to those rows, a slice small enough to stay in cache.
        """
        table_keys, table_values = self.keys, self.values
        if src_range is not None and len(table_keys):
            lo, hi = np.searchsorted(table_keys, [src_range[0] * self.n, src_range[1] * self.n])
            table_keys, table_values = table_keys[lo:hi], table_values[lo:hi]
        if len(table_keys) == 0:
            return np.zeros(len(keys))
        idx = np.searchsorted(table_keys, keys)
        idx_c = np.minimum(idx, len(table_keys) - 1)
        found = table_keys[idx_c] == keys
        return np.where(found, table_values[idx_c], 0.0)

    def replace(self, scale_others: float, keys: np.ndarray, values: np.ndarray,
                prune_below: float) -> None:
        """Multiply every stored value by ``scale_others`` except at ``keys`` (sorted, unique),
        which are set to ``values``; entries below ``prune_below`` are dropped.

        A merge of two sorted arrays: O(stored + len(keys) log stored), no global re-sort.
        """
        idx = np.searchsorted(self.keys, keys)
        hit = idx < len(self.keys)
        hit[hit] = self.keys[idx[hit]] == keys[hit]
        keep = np.ones(len(self.keys), dtype=bool)
        keep[idx[hit]] = False
        old_keys, old_vals = self.keys[keep], self.values[keep] * scale_others
        pos = np.searchsorted(old_keys, keys)
        all_keys = np.insert(old_keys, pos, keys)
        all_vals = np.insert(old_vals, pos, values)
        live = all_vals >= prune_below if prune_below > 0 else all_vals > 0
        self.keys, self.values = all_keys[live], all_vals[live]

    def to_sparse(self) -> sp.csr_matrix:
        rows, cols = np.divmod(self.keys, self.n)
        return sp.csr_matrix((self.values, (rows, cols)), shape=(self.n, self.n))

    def state_dict(self) -> dict:
        return {"n": self.n, "keys": self.keys.copy(), "values": self.values.copy()}

    @classmethod
    def from_state(cls, state: dict) -> "PairTable":
        return cls(int(state["n"]), state["keys"], state["values"])
