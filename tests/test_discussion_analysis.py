"""Hand-computed tests of the Fig. 4 / Table 1 statistics (socialgym.experiments.analysis.discussion_analysis).

* pairwise_mean_differences: means by hand, p against scipy.stats.ttest_ind (pooled variance)
* ols: a five-point simple regression solved by hand, and noiseless data from known coefficients
* strategy_time_ols: recovers Table 1's coefficients from noiseless data built from them
"""

import math

import numpy as np
import pytest
from scipy import stats

from socialgym.experiments.analysis.discussion_analysis import (
    OLSResult,
    PairwiseTable,
    ols,
    pairwise_mean_differences,
    stars,
    strategy_time_ols,
)

TOL = dict(rel=1e-10, abs=1e-10)


# --------------------------------------------------------------------------- stars
@pytest.mark.parametrize(
    "p, s",
    [(0.0, "***"), (0.0009, "***"), (0.001, "**"), (0.0099, "**"), (0.01, "*"), (0.049, "*"),
     (0.05, "·"), (0.099, "·"), (0.1, ""), (0.7, ""), (math.nan, "")],
)
def test_stars(p, s):
    assert stars(p) == s


# --------------------------------------------------------------------------- pairwise differences
A = [1.0, 2.0, 3.0]  # mean 2
B = [4.0, 5.0, np.nan]  # NaN dropped -> [4, 5], mean 4.5
C = [2.0, 2.5, 3.5, 4.0]  # mean 3


def _data():
    values = A + B + C
    groups = ["a"] * 3 + ["b"] * 3 + ["c"] * 4
    return values, groups


def test_pairwise_hand_means_and_scipy_p():
    tab = pairwise_mean_differences(*_data())
    assert isinstance(tab, PairwiseTable)
    assert tab.labels == ("a", "b", "c")
    assert tab.n == (3, 2, 4)
    np.testing.assert_allclose(tab.mean, [2.0, 4.5, 3.0])
    # diff[i, j] = mean_i - mean_j
    expected = np.array([[0.0, -2.5, -1.0], [2.5, 0.0, 1.5], [1.0, -1.5, 0.0]])
    np.testing.assert_allclose(tab.diff, expected, atol=1e-12)
    groups = {"a": A, "b": [4.0, 5.0], "c": C}
    for i, li in enumerate(tab.labels):
        assert math.isnan(tab.p[i, i])
        for j, lj in enumerate(tab.labels):
            if i != j:
                ref = stats.ttest_ind(groups[li], groups[lj], equal_var=True).pvalue
                assert tab.p[i, j] == pytest.approx(ref, rel=1e-10)


def test_pairwise_hand_t_statistic():
    # a = [1, 2, 3], b = [4, 5]: ss_a = 2, ss_b = 0.5, pooled var = 2.5 / 3
    # se = sqrt(2.5/3 * (1/3 + 1/2)) = sqrt(25/36) = 5/6; t = -2.5 / (5/6) = -3, df = 3
    tab = pairwise_mean_differences(A + B, ["a"] * 3 + ["b"] * 3)
    assert tab.p[0, 1] == pytest.approx(2 * stats.t.sf(3.0, 3), rel=1e-12)
    assert tab.p[1, 0] == tab.p[0, 1]


def test_pairwise_order_and_small_groups():
    values, groups = _data()
    values = values + [7.0]
    groups = groups + ["d"]  # a single value: mean defined, p NaN
    tab = pairwise_mean_differences(values, groups, order=["d", "c", "b", "a"])
    assert tab.labels == ("d", "c", "b", "a")
    assert tab.n == (1, 4, 2, 3)
    assert tab.diff[0, 3] == pytest.approx(7.0 - 2.0)
    assert np.isnan(tab.p[0, :]).all() and np.isnan(tab.p[:, 0]).all()
    assert not np.isnan(tab.p[1, 2])
    with pytest.raises(ValueError, match="not in order"):
        pairwise_mean_differences(values, groups, order=["a", "b", "c"])
    with pytest.raises(ValueError, match="not in the data"):
        pairwise_mean_differences(values, groups, order=["a", "b", "c", "d", "e"])


def test_pairwise_zero_variance_like_scipy():
    # constant groups: different means -> t = inf, p = 0; equal means -> 0/0, p = NaN
    tab = pairwise_mean_differences([1, 1, 2, 2, 1, 1], ["a", "a", "b", "b", "c", "c"])
    assert tab.p[0, 1] == 0.0 == stats.ttest_ind([1, 1], [2, 2]).pvalue
    assert math.isnan(tab.p[0, 2])


def test_pairwise_matches_scipy_random():
    rng = np.random.default_rng(3)
    labels = np.array(["x", "y", "z", "w"])
    g = labels[rng.integers(0, 4, 400)]
    v = rng.normal(size=400) + (g == "y") * 0.3
    v[rng.random(400) < 0.05] = np.nan
    tab = pairwise_mean_differences(v, g)
    for i, li in enumerate(tab.labels):
        for j, lj in enumerate(tab.labels):
            vi = v[(g == li) & ~np.isnan(v)]
            vj = v[(g == lj) & ~np.isnan(v)]
            assert tab.diff[i, j] == pytest.approx(vi.mean() - vj.mean(), **TOL)
            if i != j:
                assert tab.p[i, j] == pytest.approx(stats.ttest_ind(vi, vj).pvalue, rel=1e-9)


def test_pairwise_rows_and_markdown():
    tab = pairwise_mean_differences(*_data())
    rows = tab.to_rows()
    assert [(r["a"], r["b"]) for r in rows] == [("a", "b"), ("a", "c"), ("b", "c")]
    assert rows[0]["diff"] == pytest.approx(-2.5) and rows[0]["n_b"] == 2
    assert rows[0]["stars"] == stars(rows[0]["p"])
    md = tab.to_markdown(decimals=2)
    assert "| a (n=3) | — | -2.50" in md
    assert "-1.50" in md and "1.50" in md
    with pytest.raises(ValueError):
        pairwise_mean_differences([1.0, 2.0], ["a"])


def test_pairwise_is_frozen():
    tab = pairwise_mean_differences(*_data())
    with pytest.raises(AttributeError):
        tab.labels = ("z",)
    with pytest.raises(ValueError):
        tab.diff[0, 1] = 0.0  # read-only array


# --------------------------------------------------------------------------- OLS
def test_ols_simple_regression_by_hand():
    # x = 1..5, y = [2, 4, 5, 4, 5]; x̄ = 3, ȳ = 4
    # Sxx = 4+1+0+1+4 = 10; Sxy = (-2)(-2) + (-1)(0) + 0(1) + 1(0) + 2(1) = 6
    # slope = 0.6, intercept = 4 - 0.6*3 = 2.2
    # fitted = [2.8, 3.4, 4.0, 4.6, 5.2]; resid = [-.8, .6, 1, -.6, -.2]; RSS = 2.4
    # TSS = 4+0+1+0+1 = 6; R² = 1 - 2.4/6 = 0.6; adj R² = 1 - 0.4 * 4/3 = 7/15
    # sigma² = 2.4/3 = 0.8; SE(slope) = sqrt(.8/10) = sqrt(.08)
    # SE(intercept) = sqrt(.8 * (1/5 + 9/10)) = sqrt(.88)
    x = np.arange(1.0, 6.0)
    y = np.array([2.0, 4.0, 5.0, 4.0, 5.0])
    res = ols(y, np.column_stack([np.ones(5), x]), ["Intercept", "x"])
    assert isinstance(res, OLSResult)
    np.testing.assert_allclose(res.coef, [2.2, 0.6], rtol=1e-12)
    np.testing.assert_allclose(res.se, [math.sqrt(0.88), math.sqrt(0.08)], rtol=1e-12)
    np.testing.assert_allclose(res.t, [2.2 / math.sqrt(0.88), 0.6 / math.sqrt(0.08)], rtol=1e-12)
    assert res.p[1] == pytest.approx(2 * stats.t.sf(0.6 / math.sqrt(0.08), 3), rel=1e-12)
    assert res.r2 == pytest.approx(0.6, **TOL)
    assert res.adj_r2 == pytest.approx(7 / 15, **TOL)
    assert (res.n, res.df_resid) == (5, 3)
    assert res["x"] == pytest.approx(0.6)
    # the same numbers from scipy's own simple regression
    lr = stats.linregress(x, y)
    assert res.p[1] == pytest.approx(lr.pvalue, rel=1e-10)
    assert res.se[0] == pytest.approx(lr.intercept_stderr, rel=1e-10)


def test_ols_noiseless_recovers_coefficients():
    rng = np.random.default_rng(7)
    n = 60
    X = np.column_stack([np.ones(n), rng.normal(size=n), rng.integers(0, 2, n), rng.uniform(0, 10, n)])
    beta = np.array([2.164, -0.43, 1.25, -0.012])
    res = ols(X @ beta, X, ["Intercept", "a", "b", "c"])
    np.testing.assert_allclose(res.coef, beta, rtol=1e-10, atol=1e-12)
    assert res.r2 == pytest.approx(1.0, abs=1e-12)
    assert res.adj_r2 == pytest.approx(1.0, abs=1e-12)
    assert (res.p < 1e-6).all()


def test_ols_matches_normal_equations_with_noise():
    rng = np.random.default_rng(11)
    n, k = 200, 4
    X = np.column_stack([np.ones(n), rng.normal(size=(n, k - 1))])
    y = X @ np.array([1.0, 0.5, 0.0, -2.0]) + rng.normal(size=n)
    res = ols(y, X, list("abcd"))
    xtx_inv = np.linalg.inv(X.T @ X)
    coef = xtx_inv @ X.T @ y
    resid = y - X @ coef
    sigma2 = resid @ resid / (n - k)
    np.testing.assert_allclose(res.coef, coef, rtol=1e-9)
    np.testing.assert_allclose(res.se, np.sqrt(sigma2 * np.diag(xtx_inv)), rtol=1e-9)
    np.testing.assert_allclose(res.p, 2 * stats.t.sf(np.abs(coef / res.se), n - k), rtol=1e-9)
    tss = ((y - y.mean()) ** 2).sum()
    assert res.r2 == pytest.approx(1 - resid @ resid / tss, rel=1e-10)


def test_ols_without_intercept_uses_uncentred_r2():
    # y = 2x exactly through the origin; uncentred TSS = sum(y²)
    x = np.array([1.0, 2.0, 3.0, 4.0])
    y = np.array([2.0, 4.1, 5.9, 8.0])
    res = ols(y, x[:, None], ["x"])
    b = (x @ y) / (x @ x)
    rss = ((y - b * x) ** 2).sum()
    assert res.coef[0] == pytest.approx(b)
    assert res.r2 == pytest.approx(1 - rss / (y @ y))
    assert res.adj_r2 == pytest.approx(1 - 4 / 3 * (rss / (y @ y)))


def test_ols_errors():
    X = np.column_stack([np.ones(4), [1.0, 2.0, 3.0, 4.0]])
    with pytest.raises(ValueError, match="rank-deficient"):
        ols([1.0, 2.0, 3.0, 4.0], np.column_stack([X, 2 * X[:, 1]]), ["c", "x", "2x"])
    with pytest.raises(ValueError, match="more observations"):
        ols([1.0, 2.0], X[:2], ["c", "x"])
    with pytest.raises(ValueError, match="names"):
        ols([1.0, 2.0, 3.0, 4.0], X, ["c"])
    with pytest.raises(ValueError, match="finite"):
        ols([1.0, np.nan, 3.0, 4.0], X, ["c", "x"])
    with pytest.raises(ValueError):
        ols([1.0, 2.0, 3.0], X, ["c", "x"])


def test_ols_rows_and_markdown():
    x = np.arange(1.0, 6.0)
    y = np.array([2.0, 4.0, 5.0, 4.0, 5.0])
    res = ols(y, np.column_stack([np.ones(5), x]), ["Intercept", "x"])
    rows = res.to_rows()
    assert [r["name"] for r in rows] == ["Intercept", "x"]
    assert rows[1]["coef"] == pytest.approx(0.6) and rows[1]["stars"] == stars(rows[1]["p"])
    md = res.to_markdown()
    assert "| x | 0.600" in md
    assert "R² = 0.600" in md and "Adj. R² = 0.467" in md


# --------------------------------------------------------------------------- Table 1 design
TABLE1 = {
    "Intercept": 2.164,
    "fac_guid": -0.230,
    "mod_guid": -0.277,
    "rl_game": -0.435,
    "no_instructions": -0.426,
    "rules_only": -0.461,
    "time": -0.012,
    "fac_guid×time": -0.023,
    "mod_guid×time": -0.023,
    "rl_game×time": -0.011,
    "no_instructions×time": -0.003,
    "rules_only×time": -0.008,
}
STRATEGIES = ["no_moderator", "fac_guid", "mod_guid", "rl_game", "no_instructions", "rules_only"]


def _table1_data(noise=0.0, seed=0):
    rng = np.random.default_rng(seed)
    strategy, turn = [], []
    for s in STRATEGIES:
        for t in range(15):
            strategy += [s] * 3
            turn += [t] * 3
    strategy = np.array(strategy)
    turn = np.array(turn, dtype=float)
    y = TABLE1["Intercept"] + TABLE1["time"] * turn
    for s in STRATEGIES[1:]:
        d = strategy == s
        y = y + d * (TABLE1[s] + TABLE1[f"{s}×time"] * turn)
    return y + noise * rng.normal(size=y.size), strategy, turn


def test_strategy_time_ols_recovers_table1():
    y, strategy, turn = _table1_data()
    order = ["fac_guid", "mod_guid", "rl_game", "no_instructions", "rules_only"]
    res = strategy_time_ols(y, strategy, turn, reference="no_moderator", order=order)
    assert res.names == ("Intercept", *order, "time", *(f"{s}×time" for s in order))
    for name, value in TABLE1.items():
        assert res[name] == pytest.approx(value, abs=1e-10)
    assert res.r2 == pytest.approx(1.0, abs=1e-12)
    assert res.n == y.size and res.df_resid == y.size - 12


def test_strategy_time_ols_default_order_and_nan_rows():
    y, strategy, turn = _table1_data(noise=0.1, seed=5)
    y[::7] = np.nan
    res = strategy_time_ols(y, strategy, turn)
    others = sorted(STRATEGIES[1:])
    assert res.names == ("Intercept", *others, "time", *(f"{s}×time" for s in others))
    keep = ~np.isnan(y)
    assert res.n == keep.sum()
    # same fit as building the design by hand
    D = np.column_stack([(strategy[keep] == s).astype(float) for s in others])
    X = np.column_stack([np.ones(keep.sum()), D, turn[keep], D * turn[keep][:, None]])
    ref = ols(y[keep], X, res.names)
    np.testing.assert_allclose(res.coef, ref.coef, rtol=1e-10)
    np.testing.assert_allclose(res.se, ref.se, rtol=1e-10)
    # order may name the reference too; it is skipped
    res2 = strategy_time_ols(y, strategy, turn, order=["no_moderator", *others])
    assert res2.names == res.names


def test_strategy_time_ols_errors():
    y, strategy, turn = _table1_data()
    with pytest.raises(ValueError, match="reference"):
        strategy_time_ols(y, strategy, turn, reference="nobody")
    y2 = y.copy()
    y2[strategy == "no_moderator"] = np.nan  # the reference loses all its rows
    with pytest.raises(ValueError, match="no_moderator"):
        strategy_time_ols(y2, strategy, turn)
    with pytest.raises(ValueError, match="not in order"):
        strategy_time_ols(y, strategy, turn, order=["fac_guid"])
    with pytest.raises(ValueError):
        strategy_time_ols(y[:-1], strategy, turn)
    # a strategy observed at a single turn: its dummy and interaction are collinear
    single = (strategy != "rl_game") | (turn == 3)
    with pytest.raises(ValueError, match="rank-deficient"):
        strategy_time_ols(y[single], strategy[single], turn[single])
