"""Hand-computed network-metric tests (specification §4 reporting, §7; docs/api-contract.md).

socialgym.metrics.network_metrics(W, threshold=0.1, groups=None):
  * binary undirected graph: W_ud = (W + W.T)/2, edge {u, v} iff W_ud[u, v] >= threshold
  * density, clustering, lcc_fraction, avg_shortest_path, degree_histogram, modularity on that graph
    (compared here with networkx run on a graph the test builds itself, and with hand numbers)
  * homophily = W_cross / (E * (1 - sum_r p_r^2)) with W_ud weights of the kept edges
  * directed_density / directed_clustering on the weighted directed W, no threshold
"""

import math

import numpy as np
import pytest

import networkx as nx
import scipy.sparse as sp

import socialgym.metrics as metrics
network_metrics = metrics.network_metrics

TOL = dict(rel=1e-9, abs=1e-9)

CONVERTERS = {
    "numpy": lambda a: np.asarray(a, dtype=float),
    "csr": lambda a: sp.csr_matrix(np.asarray(a, dtype=float)),
    "coo": lambda a: sp.coo_matrix(np.asarray(a, dtype=float)),
}


# --------------------------------------------------------------------------- reference graph (test side)
def reference_graph(W, threshold):
    """Binary undirected graph of specification §4, built independently of the package."""
    W = np.asarray(W, dtype=float)
    n = W.shape[0]
    ud = (W + W.T) / 2
    G = nx.Graph()
    G.add_nodes_from(range(n))
    for u in range(n):
        for v in range(u + 1, n):
            if ud[u, v] >= threshold:
                G.add_edge(u, v)
    return G


def networkx_reference(G):
    n = G.number_of_nodes()
    lcc = max(nx.connected_components(G), key=len)
    H = G.subgraph(lcc)
    if G.number_of_edges() == 0:
        mod = 0.0
    else:
        mod = nx.community.modularity(G, nx.community.greedy_modularity_communities(G))
    return {
        "density": nx.density(G),
        "clustering": nx.average_clustering(G),
        "lcc_fraction": len(lcc) / n,
        "avg_shortest_path": 0.0 if len(lcc) == 1 else nx.average_shortest_path_length(H),
        "modularity": mod,
        "degree_histogram": nx.degree_histogram(G),
    }


def as_list(h):
    return [int(x) for x in list(h)]


def check_against_networkx(res, W, threshold):
    ref = networkx_reference(reference_graph(W, threshold))
    for k in ("density", "clustering", "lcc_fraction", "avg_shortest_path", "modularity"):
        assert float(res[k]) == pytest.approx(ref[k], **TOL), k
    assert as_list(res["degree_histogram"]) == ref["degree_histogram"]


# --------------------------------------------------------------------------- graph A (5 nodes, asymmetric)
# Directed W (row = source):
#   W[0,1] = 0.3,  W[1,0] = 0.1   -> W_ud = 0.2            edge
#   W[1,2] = 0.2,  W[2,1] = 0.0   -> W_ud = 0.1 (== theta) edge (threshold edge case)
#   W[0,2] = 0.15, W[2,0] = 0.08  -> W_ud = 0.115          edge although W[2,0] < theta
#   W[2,3] = 0.5,  W[3,2] = 0.5   -> W_ud = 0.5            edge
#   W[4,3] = 0.15, W[3,4] = 0.0   -> W_ud = 0.075          NO edge although W[4,3] >= theta
# Edges {0,1}, {0,2}, {1,2}, {2,3}; node 4 isolated.
def graph_a():
    W = np.zeros((5, 5))
    W[0, 1], W[1, 0] = 0.3, 0.1
    W[1, 2], W[2, 1] = 0.2, 0.0
    W[0, 2], W[2, 0] = 0.15, 0.08
    W[2, 3], W[3, 2] = 0.5, 0.5
    W[4, 3], W[3, 4] = 0.15, 0.0
    return W


@pytest.mark.parametrize("fmt", list(CONVERTERS))
def test_graph_a_binary_metrics_by_hand(fmt):
    """density = 2*4/(5*4) = 0.4
    degrees 0:2 1:2 2:3 3:1 4:0 -> histogram [1, 1, 2, 1]
    clustering: node0 1, node1 1, node2 (nbrs 0,1,3; 1 link of 3 pairs) 1/3, node3 0, node4 0
                -> (1 + 1 + 1/3)/5 = 7/15 = 0.4666667
    lcc = {0,1,2,3} -> 4/5 = 0.8
    avg shortest path in lcc: 0-1 1, 0-2 1, 0-3 2, 1-2 1, 1-3 2, 2-3 1 -> 8/6 = 4/3"""
    res = network_metrics(CONVERTERS[fmt](graph_a()), threshold=0.1)
    assert float(res["density"]) == pytest.approx(0.4, **TOL)
    assert as_list(res["degree_histogram"]) == [1, 1, 2, 1]
    assert float(res["clustering"]) == pytest.approx(7 / 15, **TOL)
    assert float(res["lcc_fraction"]) == pytest.approx(0.8, **TOL)
    assert float(res["avg_shortest_path"]) == pytest.approx(4 / 3, **TOL)


@pytest.mark.parametrize("fmt", list(CONVERTERS))
def test_graph_a_matches_networkx(fmt):
    res = network_metrics(CONVERTERS[fmt](graph_a()), threshold=0.1)
    check_against_networkx(res, graph_a(), 0.1)


@pytest.mark.parametrize("fmt", list(CONVERTERS))
def test_graph_a_directed_density_and_clustering(fmt):
    """directed_density = sum W / (n(n-1)):
        0.3 + 0.1 + 0.2 + 0 + 0.15 + 0.08 + 0.5 + 0.5 + 0.15 = 1.98 -> 1.98/20 = 0.099
    directed_clustering: the only directed 3-cycle with all weights > 0 is 0->1->2->0:
        0.3*0.2*0.08 = 0.0048; it counts for u=0 (v=1, v'=2), u=1 (v=2, v'=0), u=2 (v=0, v'=1)
        k_0 = |{1,2}| = 2, k_1 = |{0,2}| = 2, k_2 = |{0,3}| = 2, k_3 = |{2}| = 1, k_4 = |{3}| = 1
        per node: 0.0048/2, 0.0048/2, 0.0048/2, 0, 0 -> mean = 0.0072/5 = 0.00144
        (for u=2: W20*W01*W12 = 0.08*0.3*0.2 uses v'=1 although W[2,1] = 0; every other ordered pair
         of each node has a zero factor)."""
    res = network_metrics(CONVERTERS[fmt](graph_a()), threshold=0.1)
    assert float(res["directed_density"]) == pytest.approx(0.099, **TOL)
    assert float(res["directed_clustering"]) == pytest.approx(0.00144, **TOL)


def test_graph_a_homophily_by_hand():
    """groups x x x y y -> p = (3/5, 2/5), 1 - (0.36 + 0.16) = 0.48
    kept edges with W_ud weights: {0,1} 0.2, {0,2} 0.115, {1,2} 0.1, {2,3} 0.5 -> E = 0.915
    cross-group: {2,3} 0.5 -> homophily = 0.5/(0.915*0.48) = 0.5/0.4392 = 1.1384335
    (the sub-threshold pair {3,4}, W_ud 0.075, is not an edge and does not count)."""
    res = network_metrics(graph_a(), threshold=0.1, groups=["x", "x", "x", "y", "y"])
    assert float(res["homophily"]) == pytest.approx(0.5 / (0.915 * 0.48), rel=1e-9)
    assert float(res["homophily"]) == pytest.approx(1.1384335, abs=1e-7)


def test_homophily_none_without_groups():
    res = network_metrics(graph_a(), threshold=0.1)
    assert res["homophily"] is None


# --------------------------------------------------------------------------- threshold edge cases
@pytest.mark.parametrize("fmt", list(CONVERTERS))
def test_threshold_equality_counts_as_edge(fmt):
    """threshold 0.25 (values exact in binary floating point):
    W[0,1] = 0.5,  W[1,0] = 0     -> W_ud 0.25  == 0.25 -> edge
    W[2,3] = W[3,2] = 0.25        -> W_ud 0.25  == 0.25 -> edge
    W[1,2] = 0.49, W[2,1] = 0     -> W_ud 0.245 <  0.25 -> no edge
    edges {0,1}, {2,3}: density = 2*2/(4*3) = 1/3, histogram [0, 4], clustering 0,
    lcc = 2/4 = 0.5 (two components of size 2; either gives avg path 1.0)."""
    W = np.zeros((4, 4))
    W[0, 1] = 0.5
    W[2, 3] = W[3, 2] = 0.25
    W[1, 2] = 0.49
    res = network_metrics(CONVERTERS[fmt](W), threshold=0.25)
    assert float(res["density"]) == pytest.approx(1 / 3, **TOL)
    assert as_list(res["degree_histogram"]) == [0, 4]
    assert float(res["clustering"]) == pytest.approx(0.0, **TOL)
    assert float(res["lcc_fraction"]) == pytest.approx(0.5, **TOL)
    assert float(res["avg_shortest_path"]) == pytest.approx(1.0, **TOL)
    check_against_networkx(res, W, 0.25)


def test_default_threshold_equality_counts_as_edge():
    """default threshold 0.1: W[0,1] = 0.2, W[1,0] = 0 -> W_ud = 0.1 -> edge; n = 2
    density = 2*1/(2*1) = 1, lcc 1.0, avg path 1.0, histogram [0, 2]."""
    W = np.array([[0.0, 0.2], [0.0, 0.0]])
    res = network_metrics(W)
    assert float(res["density"]) == pytest.approx(1.0, **TOL)
    assert float(res["lcc_fraction"]) == pytest.approx(1.0, **TOL)
    assert float(res["avg_shortest_path"]) == pytest.approx(1.0, **TOL)
    assert as_list(res["degree_histogram"]) == [0, 2]


@pytest.mark.parametrize("fmt", list(CONVERTERS))
def test_asymmetric_tie_edge_only_through_symmetrised_value(fmt):
    """n = 3, threshold 0.1:
    W[0,1] = 0.15, W[1,0] = 0.06 -> W_ud = 0.105 >= 0.1 -> edge (W[1,0] alone would not cross)
    W[1,2] = 0.18, W[2,1] = 0    -> W_ud = 0.09  <  0.1 -> no edge (W[1,2] alone would cross)
    edges {0,1}: density = 2/(3*2) = 1/3, histogram [1, 2], clustering 0, lcc 2/3, avg path 1.0
    directed_density = (0.15 + 0.06 + 0.18)/6 = 0.39/6 = 0.065 (no threshold)
    directed_clustering: k_0 = 1, k_1 = 2 (0 and 2) but no 3-cycle, k_2 = 0 -> 0."""
    W = np.zeros((3, 3))
    W[0, 1], W[1, 0] = 0.15, 0.06
    W[1, 2] = 0.18
    res = network_metrics(CONVERTERS[fmt](W), threshold=0.1)
    assert float(res["density"]) == pytest.approx(1 / 3, **TOL)
    assert as_list(res["degree_histogram"]) == [1, 2]
    assert float(res["clustering"]) == pytest.approx(0.0, **TOL)
    assert float(res["lcc_fraction"]) == pytest.approx(2 / 3, **TOL)
    assert float(res["avg_shortest_path"]) == pytest.approx(1.0, **TOL)
    assert float(res["directed_density"]) == pytest.approx(0.065, **TOL)
    assert float(res["directed_clustering"]) == pytest.approx(0.0, **TOL)
    check_against_networkx(res, W, 0.1)


# --------------------------------------------------------------------------- modularity, clustering, paths
@pytest.mark.parametrize("fmt", list(CONVERTERS))
def test_two_triangles_with_bridge(fmt):
    """Undirected weights 0.5 on {0,1},{0,2},{1,2},{3,4},{3,5},{4,5} and the bridge {2,3}; n = 6, m = 7.
    density = 2*7/(6*5) = 14/30 = 0.4666667
    degrees 2,2,3,3,2,2 -> histogram [0, 0, 4, 2]
    clustering: nodes 0,1,4,5 -> 1; nodes 2,3 -> 1/3 -> (4 + 2/3)/6 = 14/18 = 0.7777778
    avg path: 6 in-triangle pairs at 1; cross pairs: 2-3 1, {0,1}-3 2+2, 2-{4,5} 2+2, {0,1}-{4,5} 4*3
              -> (6 + 1 + 4 + 4 + 12)/15 = 27/15 = 1.8
    modularity of {0,1,2} | {3,4,5}: per community L_c = 3, d_c = 2+2+3 = 7
              Q = 2*(3/7 - (7/14)^2) = 2*(0.4285714 - 0.25) = 5/14 = 0.3571429"""
    W = np.zeros((6, 6))
    for u, v in [(0, 1), (0, 2), (1, 2), (3, 4), (3, 5), (4, 5), (2, 3)]:
        W[u, v] = W[v, u] = 0.5
    res = network_metrics(CONVERTERS[fmt](W), threshold=0.1)
    assert float(res["density"]) == pytest.approx(14 / 30, **TOL)
    assert as_list(res["degree_histogram"]) == [0, 0, 4, 2]
    assert float(res["clustering"]) == pytest.approx(14 / 18, **TOL)
    assert float(res["lcc_fraction"]) == pytest.approx(1.0, **TOL)
    assert float(res["avg_shortest_path"]) == pytest.approx(1.8, **TOL)
    assert float(res["modularity"]) == pytest.approx(5 / 14, rel=1e-9)
    check_against_networkx(res, W, 0.1)


@pytest.mark.parametrize("fmt", list(CONVERTERS))
def test_no_edges(fmt):
    """All ties below threshold (W[0,1] = 0.1 -> W_ud 0.05): no edges.
    density 0, clustering 0, lcc 1/4, avg path 0.0 (single-node component), modularity 0.0,
    histogram [4], homophily nan (E = 0), directed_density = 0.1/12, directed_clustering 0."""
    W = np.zeros((4, 4))
    W[0, 1] = 0.1
    res = network_metrics(CONVERTERS[fmt](W), threshold=0.1, groups=["x", "x", "y", "y"])
    assert float(res["density"]) == 0.0
    assert float(res["clustering"]) == 0.0
    assert float(res["lcc_fraction"]) == pytest.approx(0.25, **TOL)
    assert float(res["avg_shortest_path"]) == 0.0
    assert float(res["modularity"]) == 0.0
    assert as_list(res["degree_histogram"]) == [4]
    assert math.isnan(float(res["homophily"]))
    assert float(res["directed_density"]) == pytest.approx(0.1 / 12, **TOL)
    assert float(res["directed_clustering"]) == 0.0


def test_all_zero_matrix():
    res = network_metrics(np.zeros((3, 3)))
    assert float(res["density"]) == 0.0
    assert float(res["lcc_fraction"]) == pytest.approx(1 / 3, **TOL)
    assert float(res["avg_shortest_path"]) == 0.0
    assert float(res["modularity"]) == 0.0
    assert as_list(res["degree_histogram"]) == [3]
    assert float(res["directed_density"]) == 0.0
    assert float(res["directed_clustering"]) == 0.0
    assert res["homophily"] is None


# --------------------------------------------------------------------------- directed variants
@pytest.mark.parametrize("fmt", list(CONVERTERS))
def test_directed_metrics_uniform_triangle(fmt):
    """n = 3, every off-diagonal W = 0.5.
    directed_density = 6*0.5/6 = 0.5
    directed_clustering: for u = 0, k = 2, pairs (1,2), (2,1): 0.5^3 + 0.5^3 = 0.25 -> 0.25/(2*1) = 0.125;
    same for every node -> 0.125.  Undirected: triangle -> density 1, clustering 1."""
    W = np.full((3, 3), 0.5)
    np.fill_diagonal(W, 0.0)
    res = network_metrics(CONVERTERS[fmt](W))
    assert float(res["directed_density"]) == pytest.approx(0.5, **TOL)
    assert float(res["directed_clustering"]) == pytest.approx(0.125, **TOL)
    assert float(res["density"]) == pytest.approx(1.0, **TOL)
    assert float(res["clustering"]) == pytest.approx(1.0, **TOL)


def test_directed_cycle_with_out_degree_one_has_zero_directed_clustering():
    """W[0,1] = W[1,2] = W[2,0] = 1: every k_u = 1 < 2 -> directed_clustering 0 although the cycle
    exists; directed_density = 3/6 = 0.5.  W_ud = 0.5 on every pair -> undirected triangle."""
    W = np.zeros((3, 3))
    W[0, 1] = W[1, 2] = W[2, 0] = 1.0
    res = network_metrics(W)
    assert float(res["directed_clustering"]) == 0.0
    assert float(res["directed_density"]) == pytest.approx(0.5, **TOL)
    assert float(res["clustering"]) == pytest.approx(1.0, **TOL)
    check_against_networkx(res, W, 0.1)


@pytest.mark.parametrize("fmt", list(CONVERTERS))
def test_directed_clustering_mixed_out_degrees(fmt):
    """n = 4: W[0,1] = W[0,2] = W[0,3] = 1, W[1,2] = 1, W[2,0] = 0.5, W[2,1] = 0.5.
    k_0 = 3, k_1 = 1, k_2 = 2, k_3 = 0.
    u = 0: 0->1->2->0 = 1*1*0.5 = 0.5; 0->2->1->0 = 1*0.5*0 = 0; pairs with 3 are 0 -> 0.5/(3*2) = 1/12
    u = 1: k = 1 -> 0 (even though 1->2->0->1 = 0.5)
    u = 2: 2->0->1->2 = 0.5*1*1 = 0.5; 2->1->0->2 = 0.5*0 = 0 -> 0.5/(2*1) = 0.25
    u = 3: k = 0 -> 0
    directed_clustering = (1/12 + 0 + 1/4 + 0)/4 = (4/12)/4 = 1/12 = 0.0833333
    directed_density = (1 + 1 + 1 + 1 + 0.5 + 0.5)/12 = 5/12 = 0.4166667"""
    W = np.zeros((4, 4))
    W[0, 1] = W[0, 2] = W[0, 3] = 1.0
    W[1, 2] = 1.0
    W[2, 0] = 0.5
    W[2, 1] = 0.5
    res = network_metrics(CONVERTERS[fmt](W))
    assert float(res["directed_clustering"]) == pytest.approx(1 / 12, **TOL)
    assert float(res["directed_density"]) == pytest.approx(5 / 12, **TOL)
    check_against_networkx(res, W, 0.1)


# --------------------------------------------------------------------------- homophily
def test_homophily_only_within_group_edges_is_zero():
    """W_ud {0,1} = 0.4 (x-x), {2,3} = 0.2 (y-y), no cross edge -> W_cross = 0 -> homophily 0."""
    W = np.zeros((4, 4))
    W[0, 1] = W[1, 0] = 0.4
    W[2, 3] = W[3, 2] = 0.2
    res = network_metrics(W, groups=["x", "x", "y", "y"])
    assert float(res["homophily"]) == pytest.approx(0.0, abs=1e-12)


def test_homophily_complete_graph_two_groups():
    """K4 with all W = 0.3, groups x x y y: cross edges 0-2, 0-3, 1-2, 1-3 -> W_cross = 1.2;
    E = 6*0.3 = 1.8; 1 - (0.5^2 + 0.5^2) = 0.5 -> 1.2/(1.8*0.5) = 4/3 (heterophily > 1)."""
    W = np.full((4, 4), 0.3)
    np.fill_diagonal(W, 0.0)
    res = network_metrics(W, groups=["x", "x", "y", "y"])
    assert float(res["homophily"]) == pytest.approx(4 / 3, rel=1e-9)


def test_homophily_uses_symmetrised_weights_and_three_groups():
    """n = 3, groups 0, 1, 2 (all different), threshold 0.1:
    W[0,1] = 0.6, W[1,0] = 0.2 -> W_ud 0.4 ; W[1,2] = 0.3, W[2,1] = 0.1 -> W_ud 0.2 ; {0,2} none.
    E = 0.6, W_cross = 0.6 (every edge crosses), 1 - 3*(1/3)^2 = 2/3 -> 0.6/(0.6*2/3) = 1.5"""
    W = np.zeros((3, 3))
    W[0, 1], W[1, 0] = 0.6, 0.2
    W[1, 2], W[2, 1] = 0.3, 0.1
    res = network_metrics(W, groups=[0, 1, 2])
    assert float(res["homophily"]) == pytest.approx(1.5, rel=1e-9)


def test_homophily_weighted_mixed():
    """n = 4, groups a a b b, symmetric weights: {0,1} 0.8 (a-a), {0,2} 0.2 (a-b), {2,3} 0.4 (b-b).
    E = 1.4, W_cross = 0.2, 1 - 0.5 = 0.5 -> 0.2/(1.4*0.5) = 0.2/0.7 = 0.2857143 (< 1: homophily)."""
    W = np.zeros((4, 4))
    for (u, v), w in {(0, 1): 0.8, (0, 2): 0.2, (2, 3): 0.4}.items():
        W[u, v] = W[v, u] = w
    res = network_metrics(W, groups=["a", "a", "b", "b"])
    assert float(res["homophily"]) == pytest.approx(2 / 7, rel=1e-9)


def test_theta_sweep_equals_network_metrics_at_each_theta():
    """The sweep shares the symmetrisation and directed metrics across thresholds; every row must
    equal network_metrics at that theta (a random weighted W with varied tie strengths)."""
    from socialgym.metrics import THETAS, network_metrics, theta_sweep

    rng = np.random.default_rng(7)
    W = rng.random((25, 25)) * (rng.random((25, 25)) < 0.3)
    groups = [i % 3 for i in range(25)]
    rows = theta_sweep(W, groups=groups)
    assert [r["theta"] for r in rows] == list(THETAS) == [0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5]
    for row in rows:
        expected = network_metrics(W, row["theta"], groups)
        got = {k: v for k, v in row.items() if k != "theta"}
        assert got.pop("degree_histogram") == expected.pop("degree_histogram")
        assert got == pytest.approx(expected, nan_ok=True)
    densities = [r["density"] for r in rows]
    assert densities == sorted(densities, reverse=True) and densities[0] > densities[-1] > 0


@pytest.mark.slow
def test_large_graphs_sample_paths_count_triangles_and_leave_modularity_out():
    """Above LARGE_GRAPH nodes (large="sample"): the clustering from sparse triangle counts equals
    networkx's; the path average comes from sampled sources; modularity is not computed."""
    import networkx as nx
    import scipy.sparse as sp

    from socialgym.metrics.network import LARGE_GRAPH, network_metrics

    rng = np.random.default_rng(0)
    n = LARGE_GRAPH + 1000
    src = rng.integers(0, n, 30_000)
    dst = (src + rng.integers(1, 40, 30_000)) % n          # local links: many triangles
    W = sp.csr_matrix((np.full(len(src), 0.5), (src, dst)), shape=(n, n))
    large = network_metrics(W, large="sample")
    exact = network_metrics(W)
    G = nx.from_scipy_sparse_array(sp.csr_matrix((np.ones(len(src)), (src, dst)), shape=(n, n)) > 0)
    assert large["large_graph"] is True and "large_graph" not in exact
    assert large["clustering"] == pytest.approx(nx.average_clustering(G.to_undirected()), abs=1e-12)
    assert large["clustering"] == pytest.approx(exact["clustering"], abs=1e-12) and large["clustering"] > 0.05
    assert large["modularity"] is None and exact["modularity"] > 0
    assert large["avg_shortest_path"] == pytest.approx(exact["avg_shortest_path"], rel=0.05)
    assert {k: v for k, v in large.items() if k not in ("clustering", "avg_shortest_path", "modularity",
                                                         "large_graph")} == \
        {k: v for k, v in exact.items() if k not in ("clustering", "avg_shortest_path", "modularity")}
