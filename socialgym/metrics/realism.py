"""The statistics of the realism scorecard (docs/realism.md), as pure functions over arrays.

Each takes the plain columns a run directory holds (who acted, on what, with which sentiment;
the tie matrix) and returns one number, or NaN where the run has too little of the thing to
measure it (a tail fit of five users, a thread-length trend without threads). Reading run
directories and comparing with published values is ``socialgym.experiments.analysis.realism``.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

MIN_TAIL_VALUES = 20
"""A tail exponent needs at least this many positive values (and 3 distinct ones)."""
NEGATIVE_BELOW = -0.05
"""A text (or tone) counts as negative below this sentiment: VADER's usual cut for the compound
score; a scripted action's tone gives -1 (critical), 0 or +1, so only critical ones count."""


def tail_exponent(values: Any, min_span: float = 10.0) -> float:
    """Exponent alpha of a discrete power-law tail ``p(x) ~ x^-alpha`` fitted by maximum
    likelihood to the positive values, with the lower cut-off x_min chosen by the
    Kolmogorov-Smirnov distance (Clauset, Shalizi & Newman 2009, via the ``powerlaw`` package).

    ``inf`` when the fitted tail spans less than ``min_span`` (largest value < min_span x x_min):
    values packed in a narrow range have no heavy tail, and the fit's alpha means nothing there.
    NaN with fewer than ``MIN_TAIL_VALUES`` positive values or fewer than 3 distinct ones, or
    when fewer than ``MIN_TAIL_VALUES`` of them lie in the fitted tail (x >= x_min)."""
    x = np.asarray(values, dtype=np.float64).ravel()
    x = x[np.isfinite(x) & (x > 0)]
    if x.size < MIN_TAIL_VALUES or np.unique(x).size < 3:
        return math.nan
    try:
        import powerlaw
    except ImportError:
        raise ImportError("the tail facts need the powerlaw package: pip install 'socialgym[realism]'") from None

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")       # powerlaw warns about its optimiser's start values
        fit = powerlaw.Fit(x, discrete=True, verbose=False)
        alpha, xmin = float(fit.power_law.alpha), float(fit.xmin)
    if x.max() < min_span * xmin:
        return math.inf
    if np.count_nonzero(x >= xmin) < MIN_TAIL_VALUES:      # a tail of a handful of values says little
        return math.nan
    return alpha if math.isfinite(alpha) else math.nan


def reciprocity(sender: Any, recipient: Any) -> float:
    """Share of directed interaction edges whose reverse edge exists (KONECT's reciprocity): with
    an edge a -> b wherever a interacted with b at least once, the share of edges a -> b for which
    b -> a is an edge too. Self-interactions and negative indices are left out; NaN without
    edges. (The share of connected *pairs* that are mutual, p, relates to it as 2p / (1 + p).)"""
    s, r = np.asarray(sender, np.int64).ravel(), np.asarray(recipient, np.int64).ravel()
    if s.shape != r.shape:
        raise ValueError(f"sender and recipient must have the same length, got {s.size} and {r.size}")
    keep = (s != r) & (s >= 0) & (r >= 0)
    s, r = s[keep], r[keep]
    if s.size == 0:
        return math.nan
    edges = np.unique(np.stack([s, r], axis=1), axis=0)
    forward = edges[:, 0] * (int(edges.max()) + 1) + edges[:, 1]
    backward = edges[:, 1] * (int(edges.max()) + 1) + edges[:, 0]
    return float(np.isin(backward, forward).mean())


def thread_roots(ids: Any, targets: Any) -> np.ndarray:
    """The root of each public item's thread: a POST is its own root, a COM inherits its
    target's root (comments on comments included). ``ids`` are content ids, ``targets`` the
    replied-to id (-1 for a POST). A COM whose target is not among ``ids`` gets root -1."""
    ids, targets = np.asarray(ids, np.int64).ravel(), np.asarray(targets, np.int64).ravel()
    if ids.shape != targets.shape:
        raise ValueError(f"ids and targets must have the same length, got {ids.size} and {targets.size}")
    order = np.argsort(ids, kind="stable")
    sorted_ids = ids[order]
    parent = np.full(ids.size, -1, np.int64)            # index of the target, -1 = none
    pos = np.searchsorted(sorted_ids, targets)
    found = (targets >= 0) & (pos < ids.size)
    found[found] = sorted_ids[pos[found]] == targets[found]
    parent[found] = order[pos[found]]
    # pointer doubling: after k passes each item points 2**k steps up its chain, so log2(n) passes
    # reach every root; an item on a reply cycle (a crafted file) never reaches a POST and gets -1
    up = np.where(found, parent, np.arange(ids.size))
    for _ in range(max(1, ids.size.bit_length())):
        nxt = up[up]
        if np.array_equal(nxt, up):
            break
        up = nxt
    root = np.where(targets[up] < 0, up, -1) if ids.size else up
    return np.where(root >= 0, ids[np.maximum(root, 0)], -1)


def thread_sizes(ids: Any, targets: Any) -> tuple[np.ndarray, np.ndarray]:
    """(root ids, comments in each root's thread), one entry per POST (0 for a post nobody
    commented on), from :func:`thread_roots`."""
    ids, targets = np.asarray(ids, np.int64).ravel(), np.asarray(targets, np.int64).ravel()
    roots = thread_roots(ids, targets)
    posts = np.sort(ids[targets < 0])
    comments = roots[(targets >= 0) & (roots >= 0)]
    counts = np.zeros(posts.size, np.int64)
    np.add.at(counts, np.searchsorted(posts, comments), 1)
    return posts, counts


def negativity_trend(ids: Any, targets: Any, sentiment: Any, min_threads: int = 3) -> float:
    """Spearman correlation, over threads with at least one comment, between the thread's length
    (comments) and the share of its comments that are negative (sentiment below
    ``NEGATIVE_BELOW``): > 0 when longer threads are more negative. NaN with fewer than
    ``min_threads`` such threads or when either side is constant."""
    ids, targets = np.asarray(ids, np.int64).ravel(), np.asarray(targets, np.int64).ravel()
    sentiment = np.asarray(sentiment, np.float64).ravel()
    if sentiment.shape != ids.shape:
        raise ValueError(f"sentiment must have one value per item ({ids.size}), got {sentiment.size}")
    roots = thread_roots(ids, targets)
    is_comment = (targets >= 0) & (roots >= 0) & ~np.isnan(sentiment)     # a comment without a score says nothing
    threads, inverse = np.unique(roots[is_comment], return_inverse=True)
    if threads.size < min_threads:
        return math.nan
    length = np.bincount(inverse, minlength=threads.size).astype(np.float64)
    negative = np.bincount(inverse, weights=(sentiment[is_comment] < NEGATIVE_BELOW).astype(np.float64),
                           minlength=threads.size) / length
    if np.ptp(length) == 0 or np.ptp(negative) == 0:
        return math.nan
    from scipy.stats import spearmanr
    return float(spearmanr(length, negative).statistic)


def active_share(active: Any) -> float:
    """Mean over rounds of the share of agents who acted (a POST, COM or DM): ``active`` is a
    (rounds, agents) boolean matrix. NaN without rounds or agents."""
    a = np.asarray(active, dtype=bool)
    if a.ndim != 2 or a.size == 0:
        return math.nan
    return float(a.mean(axis=1).mean())


def group_assortativity(edges: Any, groups: Any) -> float:
    """Newman's assortativity coefficient of an undirected graph by a categorical label:
    ``r = (sum_i e_ii - sum_i a_i^2) / (1 - sum_i a_i^2)``, with ``e`` the share of edge ends
    joining label i to label j (each undirected edge counted both ways). 1 = every edge inside
    a group, 0 = random mixing, < 0 = across groups. ``edges``: (m, 2) node indices;
    ``groups``: one label per node. NaN without edges or with one label among the edges."""
    e = np.asarray(edges, np.int64)
    labels = np.asarray(groups, dtype=object)
    if e.size == 0:
        return math.nan
    if e.ndim != 2 or e.shape[1] != 2:
        raise ValueError(f"edges must be an (m, 2) array of node indices, got shape {e.shape}")
    if labels.ndim != 1 or e.min() < 0 or e.max() >= len(labels):
        raise ValueError(f"edges must index the {len(labels)} labels of groups (0..{len(labels) - 1}), "
                         f"got indices {int(e.min())}..{int(e.max())}")
    _, codes = np.unique(labels.astype(str), return_inverse=True)
    a, b = codes[e[:, 0]], codes[e[:, 1]]
    k = int(codes.max()) + 1
    mix = np.zeros((k, k))
    np.add.at(mix, (a, b), 1.0)
    np.add.at(mix, (b, a), 1.0)
    mix /= mix.sum()
    ends = mix.sum(axis=1)
    expected = float(np.sum(ends ** 2))
    if expected >= 1.0:
        return math.nan
    return float((np.trace(mix) - expected) / (1.0 - expected))
