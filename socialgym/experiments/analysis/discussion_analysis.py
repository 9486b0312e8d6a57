"""Statistics behind the LLM-facilitators paper's Fig. 4 and Table 1.

* :func:`pairwise_mean_differences`: the mean of a per-comment score (e.g. toxicity) in every
  pair of conditions (e.g. facilitation strategies), each with a pooled-variance Student's
  t-test (Fig. 4).
* :func:`ols` and :func:`strategy_time_ols`: ordinary least squares with classical standard
  errors, and the design of Table 1 (strategy dummies, dialogue turn, and their interactions,
  against a reference strategy).

Plain numpy/scipy so that reports need neither pandas nor statsmodels.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

__all__ = [
    "stars",
    "PairwiseTable",
    "pairwise_mean_differences",
    "OLSResult",
    "ols",
    "strategy_time_ols",
]

STAR_LEGEND = "· p < 0.1, * p < 0.05, ** p < 0.01, *** p < 0.001"


def stars(p: float) -> str:
    """Significance marker used in the paper: "***" p<0.001, "**" <0.01, "*" <0.05, "·" <0.1.

    Empty for larger or NaN p.
    """
    if p is None or math.isnan(p):
        return ""
    if p < 0.001:
        return "***"
    if p < 0.01:
        return "**"
    if p < 0.05:
        return "*"
    if p < 0.1:
        return "·"
    return ""


def _readonly(a: np.ndarray) -> np.ndarray:
    # The result dataclasses are frozen; make their arrays read-only too.
    a.setflags(write=False)
    return a


def _fmt(x: float, decimals: int) -> str:
    return "n/a" if not math.isfinite(x) else f"{x:.{decimals}f}"


def _fmt_p(p: float, decimals: int) -> str:
    if not math.isfinite(p):
        return "n/a"
    floor = 10.0**-decimals
    return f"<{floor:.{decimals}f}" if p < floor else f"{p:.{decimals}f}"


def _resolve_order(present: Sequence[str], order: Sequence[Any] | None, what: str) -> list[str]:
    """The labels in the requested order; ``order`` must name exactly the present labels."""
    if order is None:
        return sorted(present)
    wanted = [str(x) for x in order]
    if len(set(wanted)) != len(wanted):
        raise ValueError(f"order repeats a {what}: {wanted}")
    missing = sorted(set(wanted) - set(present))
    extra = sorted(set(present) - set(wanted))
    if missing or extra:
        raise ValueError(
            f"order must list each {what} in the data exactly once; "
            f"not in the data: {missing}, not in order: {extra}"
        )
    return wanted


# --------------------------------------------------------------------------- pairwise (Fig. 4)
@dataclass(frozen=True, eq=False)
class PairwiseTable:
    """Mean differences between groups with pairwise Student's t-test p-values.

    ``diff[i, j] = mean[i] - mean[j]``; ``p[i, j]`` is the two-sided equal-variance t-test of
    groups i and j (symmetric), NaN on the diagonal and wherever a group has fewer than two
    values.
    """

    labels: tuple[str, ...]
    diff: np.ndarray
    p: np.ndarray
    n: tuple[int, ...]
    mean: np.ndarray

    def to_rows(self) -> list[dict[str, Any]]:
        """One dict per unordered pair i < j (the table is antisymmetric in diff, symmetric in p)."""
        rows = []
        k = len(self.labels)
        for i in range(k):
            for j in range(i + 1, k):
                p = float(self.p[i, j])
                rows.append(
                    {
                        "a": self.labels[i],
                        "b": self.labels[j],
                        "mean_a": float(self.mean[i]),
                        "mean_b": float(self.mean[j]),
                        "diff": float(self.diff[i, j]),
                        "p": p,
                        "stars": stars(p),
                        "n_a": self.n[i],
                        "n_b": self.n[j],
                    }
                )
        return rows

    def to_markdown(self, decimals: int = 3) -> str:
        """The k x k matrix as a markdown table: cell (i, j) is mean_i - mean_j with stars."""
        head = "| | " + " | ".join(self.labels) + " |"
        rule = "|---|" + "---:|" * len(self.labels)
        lines = [head, rule]
        for i, label in enumerate(self.labels):
            cells = []
            for j in range(len(self.labels)):
                if i == j:
                    cells.append("—")
                else:
                    cells.append(_fmt(float(self.diff[i, j]), decimals) + stars(float(self.p[i, j])))
            lines.append(f"| {label} (n={self.n[i]}) | " + " | ".join(cells) + " |")
        lines.append("")
        lines.append(f"Cell (row i, column j) = mean(i) − mean(j); Student's t-test: {STAR_LEGEND}")
        return "\n".join(lines)


def pairwise_mean_differences(
    values: Sequence[float] | np.ndarray,
    groups: Sequence[Any] | np.ndarray,
    order: Sequence[Any] | None = None,
) -> PairwiseTable:
    """Mean differences and pooled-variance t-tests between every pair of groups (Fig. 4).

    ``values`` and ``groups`` are parallel 1-D sequences (e.g. a toxicity score and the strategy
    of each comment); group labels are compared as strings. NaN values are dropped. ``order``
    fixes the row/column order and must list every group in the data exactly once; by default
    the labels are sorted.
    """
    v = np.asarray(values, dtype=float)
    g = np.asarray(groups)
    if v.ndim != 1 or g.ndim != 1 or v.shape != g.shape:
        raise ValueError(
            f"values and groups must be 1-D of equal length, got shapes {v.shape} and {g.shape}"
        )
    g = g.astype(str)
    present, codes = np.unique(g, return_inverse=True)
    labels = _resolve_order(present.tolist(), order, "group")
    # re-map the sorted-unique codes onto the requested order
    pos = {lab: i for i, lab in enumerate(labels)}
    remap = np.array([pos[lab] for lab in present.tolist()], dtype=np.intp)
    codes = remap[codes.reshape(-1)]
    k = len(labels)

    ok = ~np.isnan(v)
    v, codes = v[ok], codes[ok]
    n = np.bincount(codes, minlength=k)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.bincount(codes, weights=v, minlength=k) / n
        # two-pass sum of squares about each group's mean (stabler than E[x^2] - E[x]^2)
        ss = np.bincount(codes, weights=(v - mean[codes]) ** 2, minlength=k)
        diff = mean[:, None] - mean[None, :]
        df = n[:, None] + n[None, :] - 2
        pooled = (ss[:, None] + ss[None, :]) / df
        se = np.sqrt(pooled * (1.0 / n[:, None] + 1.0 / n[None, :]))
        t = diff / se  # zero variance in both groups: +-inf (p = 0) or 0/0 (p = NaN)
    p = 2.0 * stats.t.sf(np.abs(t), np.maximum(df, 1))
    small = n < 2
    p[small, :] = np.nan
    p[:, small] = np.nan
    np.fill_diagonal(p, np.nan)
    return PairwiseTable(
        labels=tuple(labels),
        diff=_readonly(diff),
        p=_readonly(p),
        n=tuple(int(x) for x in n),
        mean=_readonly(mean),
    )


# --------------------------------------------------------------------------- OLS (Table 1)
@dataclass(frozen=True, eq=False)
class OLSResult:
    """Ordinary least squares fit with classical (homoskedastic) standard errors."""

    names: tuple[str, ...]
    coef: np.ndarray
    se: np.ndarray
    t: np.ndarray
    p: np.ndarray
    r2: float
    adj_r2: float
    n: int
    df_resid: int

    def __getitem__(self, name: str) -> float:
        """Coefficient by name."""
        return float(self.coef[self.names.index(name)])

    def to_rows(self) -> list[dict[str, Any]]:
        """One dict per regressor: name, coef, se, t, p, stars."""
        return [
            {
                "name": name,
                "coef": float(self.coef[i]),
                "se": float(self.se[i]),
                "t": float(self.t[i]),
                "p": float(self.p[i]),
                "stars": stars(float(self.p[i])),
            }
            for i, name in enumerate(self.names)
        ]

    def to_markdown(self, decimals: int = 3) -> str:
        """Coefficient table like the paper's Table 1 (coefficient with stars), plus SE, t, p."""
        lines = ["| Variable | Coefficient | Std. err. | t | p |", "|---|---:|---:|---:|---:|"]
        for row in self.to_rows():
            lines.append(
                f"| {row['name']} | {_fmt(row['coef'], decimals)}{row['stars']} | "
                f"{_fmt(row['se'], decimals)} | {_fmt(row['t'], 2)} | {_fmt_p(row['p'], decimals)} |"
            )
        lines.append("")
        lines.append(
            f"n = {self.n}, R² = {_fmt(self.r2, decimals)}, "
            f"Adj. R² = {_fmt(self.adj_r2, decimals)}; {STAR_LEGEND}"
        )
        return "\n".join(lines)


def ols(
    y: Sequence[float] | np.ndarray, X: Sequence[Sequence[float]] | np.ndarray, names: Sequence[str]
) -> OLSResult:
    """Least-squares fit of ``y`` on the columns of ``X`` (include an intercept column yourself).

    Standard errors are classical: ``sigma^2 (X'X)^-1`` with ``sigma^2 = RSS / (n - k)``; p-values
    are two-sided from Student's t with ``n - k`` degrees of freedom. R^2 is centred when the
    columns of X span a constant (an intercept, or a full set of dummies) and uncentred
    otherwise, as statsmodels does; adj. R^2 follows the same convention.

    Raises ValueError for non-finite input, ``n <= k`` or a rank-deficient X.
    """
    yv = np.asarray(y, dtype=float)
    Xm = np.asarray(X, dtype=float)
    if yv.ndim != 1:
        raise ValueError(f"y must be 1-D, got shape {yv.shape}")
    if Xm.ndim != 2 or Xm.shape[0] != yv.shape[0]:
        raise ValueError(f"X must be 2-D with {yv.shape[0]} rows, got shape {Xm.shape}")
    n, k = Xm.shape
    names = tuple(str(s) for s in names)
    if len(names) != k:
        raise ValueError(f"{len(names)} names for {k} columns of X")
    if k == 0:
        raise ValueError("X has no columns")
    if not (np.isfinite(yv).all() and np.isfinite(Xm).all()):
        raise ValueError("y and X must be finite (drop rows with NaN first)")
    if n <= k:
        raise ValueError(f"need more observations than regressors: n = {n}, k = {k}")

    coef, _, rank, _ = np.linalg.lstsq(Xm, yv, rcond=None)
    if rank < k:
        raise ValueError(
            f"X is rank-deficient (rank {rank} < {k} columns): some regressors are collinear, "
            "e.g. a dummy with no observations or one duplicating another column"
        )
    resid = yv - Xm @ coef
    rss = float(resid @ resid)
    df_resid = n - k
    sigma2 = rss / df_resid
    # (X'X)^-1 = R^-1 R^-T from X = QR: avoids forming X'X, whose condition number is squared.
    r = np.linalg.qr(Xm, mode="r")
    r_inv = np.linalg.inv(r)
    xtx_inv_diag = np.einsum("ij,ij->i", r_inv, r_inv)
    se = np.sqrt(sigma2 * xtx_inv_diag)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = coef / se  # a noiseless fit has se = 0: t = +-inf and p = 0
    p = 2.0 * stats.t.sf(np.abs(t), df_resid)

    ones = np.ones(n)
    const_resid = ones - Xm @ np.linalg.lstsq(Xm, ones, rcond=None)[0]
    has_const = bool(np.abs(const_resid).max() <= 1e-8)
    tss = float(((yv - yv.mean()) ** 2).sum()) if has_const else float(yv @ yv)
    if tss > 0:
        r2 = 1.0 - rss / tss
        adj_r2 = 1.0 - (n - int(has_const)) / df_resid * (1.0 - r2)
    else:  # y constant: R^2 is undefined
        r2 = adj_r2 = float("nan")
    return OLSResult(
        names=names,
        coef=_readonly(coef),
        se=_readonly(se),
        t=_readonly(t),
        p=_readonly(p),
        r2=float(r2),
        adj_r2=float(adj_r2),
        n=int(n),
        df_resid=int(df_resid),
    )


def strategy_time_ols(
    y: Sequence[float] | np.ndarray,
    strategy: Sequence[Any] | np.ndarray,
    turn: Sequence[float] | np.ndarray,
    reference: str = "no_moderator",
    order: Sequence[Any] | None = None,
) -> OLSResult:
    """Table 1's regression: ``y ~ strategy + time + strategy:time`` against ``reference``.

    Columns, in this order: "Intercept", one dummy per non-reference strategy, "time" (the
    dialogue turn), and "<strategy>×time" per non-reference strategy. The intercept and "time"
    are then the reference strategy's level and slope; each dummy and interaction is the
    difference from it. ``order`` sets the order of the non-reference strategies (it may also
    name the reference, which is skipped) and must cover every strategy in the data; by default
    they are sorted. Rows with NaN ``y`` are dropped first.
    """
    yv = np.asarray(y, dtype=float)
    s = np.asarray(strategy)
    tv = np.asarray(turn, dtype=float)
    if not (yv.ndim == s.ndim == tv.ndim == 1) or not (yv.shape == s.shape == tv.shape):
        raise ValueError(
            f"y, strategy and turn must be 1-D of equal length, got shapes "
            f"{yv.shape}, {s.shape}, {tv.shape}"
        )
    s = s.astype(str)
    reference = str(reference)
    keep = ~np.isnan(yv)
    yv, s, tv = yv[keep], s[keep], tv[keep]
    if not np.isfinite(tv).all():
        raise ValueError("turn must be finite where y is not NaN")
    present = np.unique(s).tolist()
    if reference not in present:
        raise ValueError(
            f"reference strategy {reference!r} has no rows with a non-NaN y; strategies: {present}"
        )
    others_present = [x for x in present if x != reference]
    if order is not None:
        order = [str(x) for x in order if str(x) != reference]
    others = _resolve_order(others_present, order, "non-reference strategy")

    # one dummy column per non-reference strategy, built in one broadcast comparison
    dummies = (s[:, None] == np.asarray(others, dtype=str)[None, :]).astype(float)
    X = np.column_stack([np.ones(yv.size), dummies, tv, dummies * tv[:, None]])
    names = ["Intercept", *others, "time", *(f"{x}×time" for x in others)]
    return ols(yv, X, names)
