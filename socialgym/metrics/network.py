"""Network metrics of the tie matrix (specification §7, paper App. C).

Undirected metrics use the binary graph of ``W_ud = (W + W^T)/2 >= threshold``; the directed
variants use the weighted W itself. Components and shortest paths come from
``scipy.sparse.csgraph`` (linear-time BFS), clustering and modularity from networkx.
"""

from __future__ import annotations

from typing import Any, Sequence

import networkx as nx
import numpy as np
import scipy.sparse as sp
from scipy.sparse import csgraph


def _as_sparse(W: Any) -> sp.csr_matrix:
    M = sp.csr_matrix(W, dtype=float)
    if M.shape[0] != M.shape[1]:
        raise ValueError(f"W must be square, got shape {M.shape}")
    if M.nnz and (not np.all(np.isfinite(M.data)) or M.data.min() < 0):
        raise ValueError("W must hold finite non-negative weights")
    M.setdiag(0)
    M.eliminate_zeros()
    return M


def undirected_graph(W: Any, threshold: float = 0.1) -> sp.csr_matrix:
    """Weighted adjacency of the binary undirected graph: ``W_ud`` where ``W_ud >= threshold``."""
    M = _as_sparse(W)
    ud = ((M + M.T) * 0.5).tocsr()
    ud.data[ud.data < threshold] = 0
    ud.eliminate_zeros()
    return ud


THETAS = tuple(round(0.05 * k, 2) for k in range(1, 11))
"""The post-hoc threshold sweep of the core paper's Figs. 3-4: theta = 0.05, 0.10, ..., 0.50."""


LARGE_GRAPH = 5_000
"""Above this many agents the exact all-pairs path average, networkx's clustering and the CNM
partition take minutes (100,000 agents: over ten); ``network_metrics(..., large="sample")`` then
samples the paths, counts triangles with sparse products and leaves modularity out."""
SAMPLED_SOURCES = 500
"""Sources of the sampled path average on a large graph (seeded)."""


def network_metrics(W: Any, threshold: float = 0.1, groups: Sequence[Any] | None = None,
                    *, max_path_sources: int | None = None, seed: int = 0, large: str = "exact") -> dict:
    """density, clustering, lcc_fraction, avg_shortest_path, modularity, homophily,
    degree_histogram, directed_density, directed_clustering (see ``docs/metrics.md``).

    ``max_path_sources``: for very large graphs, average shortest paths from this many sampled
    sources (seeded) instead of all nodes; None = exact. ``large="sample"``: on a graph of more
    than ``LARGE_GRAPH`` nodes, ``SAMPLED_SOURCES`` path sources, the same clustering from sparse
    triangle counts, and no modularity (None; ``large_graph`` in the result says so).
    """
    M = _as_sparse(W)
    if large == "sample" and M.shape[0] > LARGE_GRAPH:
        sources = SAMPLED_SOURCES if max_path_sources is None else min(max_path_sources, SAMPLED_SOURCES)
        return {**_metrics(M, ((M + M.T) * 0.5).tocsr(), threshold, groups, sources, seed, float(M.sum()),
                           _directed_clustering(M), large=True), "large_graph": True}
    return _metrics(M, ((M + M.T) * 0.5).tocsr(), threshold, groups, max_path_sources, seed,
                    float(M.sum()), _directed_clustering(M))


def theta_sweep(W: Any, thetas: Sequence[float] = THETAS, groups: Sequence[Any] | None = None,
                *, max_path_sources: int | None = None, seed: int = 0) -> list[dict]:
    """``network_metrics`` at each threshold, ``theta`` added to each row. The matrix is checked,
    symmetrised and its directed metrics computed once for all thresholds."""
    M = _as_sparse(W)
    sym = ((M + M.T) * 0.5).tocsr()
    total, directed = float(M.sum()), _directed_clustering(M)
    return [{"theta": float(t), **_metrics(M, sym, float(t), groups, max_path_sources, seed, total, directed)}
            for t in thetas]


def _metrics(M: sp.csr_matrix, sym: sp.csr_matrix, threshold: float, groups, max_path_sources, seed,
             total_weight: float, directed_clustering: float, large: bool = False) -> dict:
    n = M.shape[0]
    ud = sym.copy()
    ud.data[ud.data < threshold] = 0
    ud.eliminate_zeros()
    binary = ud.copy()
    binary.data[:] = 1.0
    n_edges = binary.nnz // 2
    degrees = np.asarray(binary.sum(axis=1)).ravel().astype(int)

    n_comp, labels = csgraph.connected_components(binary, directed=False)
    sizes = np.bincount(labels)
    largest = int(np.argmax(sizes)) if n else 0
    lcc_nodes = np.flatnonzero(labels == largest)

    G = None if large else nx.from_scipy_sparse_array(binary)
    result = {
        "n_nodes": n,
        "n_edges": n_edges,
        "density": 2.0 * n_edges / (n * (n - 1)) if n > 1 else 0.0,
        "clustering": 0.0 if not n else _sparse_clustering(binary, degrees) if large
        else float(nx.average_clustering(G)),
        "lcc_fraction": len(lcc_nodes) / n if n else 0.0,
        "avg_shortest_path": _avg_shortest_path(binary, lcc_nodes, max_path_sources, seed),
        "modularity": None if large else _modularity(G, n_edges),
        "homophily": None if groups is None else _homophily(ud, groups),
        "degree_histogram": np.bincount(degrees, minlength=1).tolist() if n else [],
        "directed_density": total_weight / (n * (n - 1)) if n > 1 else 0.0,
        "directed_clustering": directed_clustering,
    }
    return result


def _avg_shortest_path(binary: sp.csr_matrix, nodes: np.ndarray, max_sources: int | None, seed: int) -> float:
    if len(nodes) < 2:
        return 0.0
    sub = binary[nodes][:, nodes]
    sources = np.arange(len(nodes))
    if max_sources is not None and len(nodes) > max_sources:
        sources = np.random.default_rng(seed).choice(len(nodes), max_sources, replace=False)
    total, count = 0.0, 0
    for start in range(0, len(sources), 256):   # bounded memory: 256 BFS rows at a time
        d = csgraph.shortest_path(sub, unweighted=True, directed=False, indices=sources[start:start + 256])
        finite = np.isfinite(d) & (d > 0)
        total += d[finite].sum()
        count += finite.sum()
    return float(total / count) if count else 0.0


def _sparse_clustering(binary: sp.csr_matrix, degrees: np.ndarray, block: int = 2048) -> float:
    """networkx's ``average_clustering`` of the binary graph (0 for degree < 2) from triangle
    counts: row v of (A @ A) * A sums to twice v's triangles; rows in blocks bound the memory."""
    A = binary.tocsr()
    A.data[:] = 1.0
    tri = np.zeros(A.shape[0])
    for start in range(0, A.shape[0], block):
        rows = A[start:start + block]
        tri[start:start + block] = np.asarray((rows @ A).multiply(rows).sum(axis=1)).ravel() / 2
    possible = degrees * (degrees - 1) / 2
    local = np.divide(tri, possible, out=np.zeros_like(tri), where=possible > 0)
    return float(local.mean())


def _modularity(G: nx.Graph, n_edges: int) -> float:
    """Modularity of networkx's greedy (Clauset-Newman-Moore) partition; 0 without edges."""
    if n_edges == 0:
        return 0.0
    communities = nx.community.greedy_modularity_communities(G)
    return float(nx.community.modularity(G, communities))


def _homophily(ud: sp.csr_matrix, groups: Sequence[Any]) -> float:
    """W_cross / (E (1 - sum_r p_r^2)); < 1 homophily, 1 random mixing, > 1 heterophily."""
    labels = np.asarray(list(groups), dtype=object)
    n = ud.shape[0]
    if len(labels) != n:
        raise ValueError(f"groups must have one label per agent ({n}), got {len(labels)}")
    _, codes = np.unique(labels.astype(str), return_inverse=True)
    upper = sp.triu(ud, k=1).tocoo()
    total = float(upper.data.sum())
    cross = float(upper.data[codes[upper.row] != codes[upper.col]].sum())
    shares = np.bincount(codes) / n
    expected = 1.0 - float(np.sum(shares ** 2))
    if total == 0 or expected == 0:
        return float("nan")
    return cross / (total * expected)


def _directed_clustering(M: sp.csr_matrix) -> float:
    """mean_u sum_{v != v'} W_uv W_vv' W_v'u / (k_u (k_u - 1)), k_u = number of out-neighbours."""
    n = M.shape[0]
    if n == 0:
        return 0.0
    cycles = np.asarray((M @ M).multiply(M.T).sum(axis=1)).ravel()   # (W^3)_uu, zero diagonal
    k = np.diff(M.indptr).astype(float)
    local = np.zeros(n)
    ok = k >= 2
    local[ok] = cycles[ok] / (k[ok] * (k[ok] - 1))
    return float(local.mean())
