"""Information-cocoon and exposure metrics (specification §5; recagent paper; agentsociety2 paper §7.4).

All functions are pure and vectorised over viewers (no per-agent Python loops), so they stay
fast at 100,000 agents. Inputs are "exposure windows": a ``(n_viewers, m)`` integer array whose
row i lists the topic ids (or author ids) of the items shown to viewer i over a window, with
``-1`` marking an empty slot (rows are padded to a common width).

* topic entropy (recagent): ``H_u = -sum_c f_{u,c} ln f_{u,c}`` with natural logs (nats),
  ``f_{u,c}`` = share of topic c among the items shown to u; the platform figure is the mean
  over users with any exposure. Lower = deeper cocoon.
* deep-cocoon share (agentsociety2 §7.4, "proportion of users falling into deep information
  cocoons"): the paper gives no numeric cut-off, so a viewer is in a deep cocoon when its
  entropy is below an absolute threshold; the default is ``0.5 * ln K``, i.e. an effective
  number of topics ``exp(H) < sqrt(K)``.
* Gini of author exposure and cross-cutting (out-group author) exposure.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from scipy.special import entr

# Default deep-cocoon threshold as a fraction of the maximum entropy ln(K).
DEFAULT_COCOON_FRACTION = 0.5


# --------------------------------------------------------------------------- validation helpers
def _id_matrix(a: Any, name: str, upper: int) -> np.ndarray:
    """2-D integer array with every entry in [-1, upper) (-1 = empty slot)."""
    arr = np.asarray(a)
    if arr.ndim != 2:
        raise ValueError(f"{name} must be a 2-D (n_viewers, m) array, got shape {arr.shape}")
    if arr.size == 0:  # np.asarray([[]]) is float; an empty window is still valid
        return arr.astype(np.int64)
    if not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"{name} must hold integer ids, got dtype {arr.dtype}")
    bad = (arr < -1) | (arr >= upper)
    if bad.any():
        raise ValueError(f"{name} holds id {arr[bad][0]} outside [0, {upper}) (use -1 for an empty slot)")
    return arr.astype(np.int64, copy=False)


def _group_codes(groups: Any, n: int, name: str = "groups") -> tuple[list, np.ndarray]:
    """(labels as Python scalars, integer code per entry) for a length-n label sequence."""
    g = np.asarray(groups)
    if g.ndim != 1 or len(g) != n:
        raise ValueError(f"{name} must be 1-D of length {n}, got shape {g.shape}")
    labels, codes = np.unique(g, return_inverse=True)
    return labels.tolist(), codes.ravel()


def _nan_ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """num / den with nan where den == 0 (no warning)."""
    out = np.full(np.shape(num), np.nan)
    np.divide(num, den, out=out, where=den > 0)
    return out


# --------------------------------------------------------------------------- topic entropy
def topic_counts(topics: np.ndarray, n_topics: int) -> np.ndarray:
    """(n_viewers, n_topics) int64 counts of each topic in each viewer's window; -1 slots ignored."""
    if int(n_topics) != n_topics or n_topics < 0:
        raise ValueError(f"n_topics must be a non-negative integer, got {n_topics!r}")
    n_topics = int(n_topics)
    t = _id_matrix(topics, "topics", n_topics)
    n, m = t.shape
    valid = t >= 0
    # One bincount over flat (viewer, topic) cells instead of a loop over viewers.
    rows = np.broadcast_to(np.arange(n)[:, None], (n, m))[valid]
    flat = np.bincount(rows * n_topics + t[valid], minlength=n * n_topics)
    return flat.reshape(n, n_topics).astype(np.int64, copy=False)


def topic_entropy(counts: np.ndarray) -> np.ndarray:
    """Shannon entropy in nats (natural log) of each row's topic frequencies.

    ``H = -sum_c f_c ln f_c`` with ``f_c = counts_c / sum(counts)`` and ``0 ln 0 = 0``; rows with
    no exposure (all zeros) give nan. Result lies in ``[0, ln K]``.
    """
    c = np.asarray(counts, dtype=float)
    if c.ndim != 2:
        raise ValueError(f"counts must be a 2-D (n, K) array, got shape {c.shape}")
    if not np.all(np.isfinite(c)) or (c < 0).any():
        raise ValueError("counts must be finite and non-negative")
    totals = c.sum(axis=1)
    f = _nan_ratio(c, totals[:, None])
    h = entr(f).sum(axis=1)  # entr(x) = -x ln x, entr(0) = 0
    h[totals == 0] = np.nan
    return h


def _nanmean(x: Any) -> float:
    """Mean of the non-nan entries; nan (without a RuntimeWarning) if there are none."""
    e = np.asarray(x, dtype=float)
    measured = ~np.isnan(e)
    return float(e[measured].mean()) if measured.any() else float("nan")


def mean_topic_entropy(entropy: Any) -> float:
    """Platform cocoon figure: mean entropy over viewers with exposure (nan if none)."""
    return _nanmean(entropy)


def default_cocoon_threshold(n_topics: int) -> float:
    """``DEFAULT_COCOON_FRACTION * ln K`` (0 for K <= 1, where nobody can be below it)."""
    return DEFAULT_COCOON_FRACTION * float(np.log(n_topics)) if n_topics > 1 else 0.0


def deep_cocoon_share(entropy: Any, threshold: float, groups: Sequence[Any] | None = None):
    """Share of measured viewers (entropy not nan) whose entropy is strictly below ``threshold``.

    With ``groups`` (one label per viewer) returns ``{label: share}``; a group with no measured
    viewer maps to nan.
    """
    e = np.asarray(entropy, dtype=float).ravel()
    measured = ~np.isnan(e)
    deep = measured & (e < threshold)
    if groups is None:
        return float(deep.sum() / measured.sum()) if measured.any() else float("nan")
    labels, codes = _group_codes(groups, len(e))
    k = len(labels)
    share = _nan_ratio(np.bincount(codes, weights=deep, minlength=k),
                       np.bincount(codes, weights=measured, minlength=k))
    return {lab: float(s) for lab, s in zip(labels, share)}


# --------------------------------------------------------------------------- inequality
def gini(values: Any, *, all_zero: float = 0.0) -> float:
    """Gini coefficient ``G = sum_i sum_j |x_i - x_j| / (2 n^2 mean)`` of non-negative values.

    0 = perfectly equal, ``(n-1)/n`` when one of n values holds everything; empty -> nan. An
    all-zero sample has no mean to divide by: ``all_zero`` says what it is (0.0 by default, as
    for exposure, where nobody shown is equality; the realism facts pass NaN: no posts at all
    cannot say how unequal posting is). Computed in O(n log n) from the sorted values:
    ``G = 2 sum_i i x_(i) / (n sum x) - (n+1)/n`` (i = 1..n, ascending).
    """
    x = np.asarray(values, dtype=float).ravel()
    if not np.all(np.isfinite(x)) or (x < 0).any():
        raise ValueError("gini needs finite non-negative values")
    n = len(x)
    if n == 0:
        return float("nan")
    total = x.sum()
    if total == 0:
        return float(all_zero)
    ranks = np.arange(1, n + 1)
    g = 2.0 * np.dot(ranks, np.sort(x)) / (n * total) - (n + 1) / n
    return float(max(g, 0.0))  # clip float round-off below 0 for equal values


def author_exposure_gini(authors: np.ndarray, n_agents: int) -> float:
    """Gini of how often each of the ``n_agents`` authors was shown (never shown counts as 0)."""
    a = _id_matrix(authors, "authors", int(n_agents))
    return gini(np.bincount(a[a >= 0], minlength=int(n_agents)))


# --------------------------------------------------------------------------- cross-cutting exposure
def cross_cutting_share(authors: np.ndarray, groups: Sequence[Any]) -> np.ndarray:
    """Per viewer: share of shown items (author >= 0) whose author is in another group.

    Row i is viewer (agent) i; ``groups`` is indexed by agent id, so it labels both viewers and
    authors and must have one entry per row. nan for viewers shown nothing.
    """
    g = np.asarray(groups)
    n_rows = np.shape(authors)[0] if np.ndim(authors) else 0
    _, codes = _group_codes(g, n_rows)  # check groups first: a short list would misreport ids
    a = _id_matrix(authors, "authors", len(g))
    valid = a >= 0
    author_group = codes[np.where(valid, a, 0)]  # index 0 is a placeholder for empty slots
    cross = valid & (author_group != codes[:, None])
    return _nan_ratio(cross.sum(axis=1).astype(float), valid.sum(axis=1).astype(float))


def cross_cutting_by_group(authors: np.ndarray, groups: Sequence[Any]) -> dict:
    """``{label: mean over the group's viewers of the per-viewer cross-cutting share}`` (nan-aware)."""
    share = cross_cutting_share(authors, groups)
    labels, codes = _group_codes(groups, len(share))
    measured = ~np.isnan(share)
    k = len(labels)
    mean = _nan_ratio(np.bincount(codes, weights=np.where(measured, share, 0.0), minlength=k),
                      np.bincount(codes, weights=measured, minlength=k))
    return {lab: float(v) for lab, v in zip(labels, mean)}


# --------------------------------------------------------------------------- logging bundle
def exposure_metrics(topics: np.ndarray | None, authors: np.ndarray | None, n_topics: int,
                     n_agents: int, groups: Sequence[Any] | None = None,
                     threshold: float | None = None) -> dict:
    """All exposure metrics as plain Python floats / dicts (JSON-serialisable, str group labels).

    Keys: ``mean_topic_entropy``, ``deep_cocoon_share``, ``deep_cocoon_threshold`` (from
    ``topics``), ``author_exposure_gini`` (from ``authors``); with ``groups`` also
    ``deep_cocoon_share_by_group``, ``cross_cutting_share_by_group`` and ``cross_cutting_share``
    (mean over viewers). Keys whose input is None are omitted. ``threshold`` defaults to
    ``default_cocoon_threshold(n_topics)`` = 0.5 ln K. ``mean_topic_entropy_by_group`` also comes
    with ``groups``. With ``groups``, rows are agents
    0..n_agents-1, so ``len(groups) == n_agents == n_viewers``.
    """
    t = None if topics is None else np.asarray(topics)
    a = None if authors is None else np.asarray(authors)
    if t is not None and a is not None and t.shape != a.shape:
        raise ValueError(f"topics and authors must have the same shape, got {t.shape} and {a.shape}")
    if groups is not None:
        if len(groups) != n_agents:
            raise ValueError(f"groups must have length n_agents={n_agents}, got {len(groups)}")
        for name, arr in (("topics", t), ("authors", a)):
            if arr is not None and arr.ndim == 2 and arr.shape[0] != n_agents:
                raise ValueError(f"{name} must have one row per agent ({n_agents}) when groups "
                                 f"are given, got {arr.shape[0]} rows")
    thr = default_cocoon_threshold(n_topics) if threshold is None else float(threshold)

    out: dict = {}
    if t is not None:
        h = topic_entropy(topic_counts(t, n_topics))
        out["mean_topic_entropy"] = mean_topic_entropy(h)
        out["deep_cocoon_share"] = deep_cocoon_share(h, thr)
        out["deep_cocoon_threshold"] = thr
        if groups is not None:
            out["deep_cocoon_share_by_group"] = {
                str(k): v for k, v in deep_cocoon_share(h, thr, groups).items()}
            labels = np.asarray(groups)
            out["mean_topic_entropy_by_group"] = {str(k): mean_topic_entropy(h[labels == k]) for k in np.unique(labels)}
    if a is not None:
        out["author_exposure_gini"] = author_exposure_gini(a, n_agents)
        if groups is not None:
            out["cross_cutting_share_by_group"] = {
                str(k): v for k, v in cross_cutting_by_group(a, groups).items()}
            out["cross_cutting_share"] = _nanmean(cross_cutting_share(a, groups))
    return out
