"""Hand-computed tests of socialgym.metrics.exposure (specification §5; recagent; agentsociety2 §7.4).

Formulas used for the expected values (all worked out by hand in the comments below):
  * entropy  H_u = -sum_c f_{u,c} ln f_{u,c}   (natural log, 0 ln 0 = 0), f = counts / row sum
  * platform entropy = mean of H_u over viewers with any exposure
  * deep-cocoon share = #{measured u : H_u < threshold} / #{measured u}; default threshold 0.5 ln K
  * Gini  G = sum_i sum_j |x_i - x_j| / (2 n^2 mean)   (double sum over ordered pairs)
  * cross-cutting share of viewer u = #{shown items whose author's group != u's group} / #{shown}
"""

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from socialgym.metrics import (author_exposure_gini, cross_cutting_by_group, cross_cutting_share,
                               deep_cocoon_share, exposure_metrics, gini, mean_topic_entropy,
                               topic_counts, topic_entropy)

TOL = dict(rel=1e-12, abs=1e-12)
LN2, LN3, LN4 = math.log(2), math.log(3), math.log(4)


# --------------------------------------------------------------------------- topic_counts
def test_topic_counts_ignores_padding():
    topics = np.array([[0, 2, 2, -1],     # one 0, two 2s        -> [1, 0, 2]
                       [1, -1, -1, -1],   # one 1                -> [0, 1, 0]
                       [-1, -1, -1, -1]])  # nothing shown       -> [0, 0, 0]
    counts = topic_counts(topics, 3)
    assert counts.dtype == np.int64
    assert counts.tolist() == [[1, 0, 2], [0, 1, 0], [0, 0, 0]]


def test_topic_counts_empty_window():
    assert topic_counts(np.empty((2, 0), dtype=int), 3).tolist() == [[0, 0, 0], [0, 0, 0]]


@pytest.mark.parametrize("bad", [3, -2, 7])
def test_topic_counts_rejects_out_of_range_id(bad):
    with pytest.raises(ValueError, match=rf"topics.*{bad}"):
        topic_counts(np.array([[0, bad]]), 3)


@pytest.mark.parametrize("topics", [np.array([0, 1]), np.zeros((1, 2, 2), dtype=int)])
def test_topic_counts_rejects_non_2d(topics):
    with pytest.raises(ValueError, match="topics"):
        topic_counts(topics, 3)


def test_topic_counts_rejects_float_ids():
    with pytest.raises(ValueError, match="topics"):
        topic_counts(np.array([[0.5, 1.0]]), 3)


# --------------------------------------------------------------------------- entropy
COUNTS = np.array([[2, 2, 0, 0],   # f = (1/2, 1/2)          -> H = ln 2
                   [1, 1, 1, 1],   # f = (1/4 x 4)           -> H = ln 4
                   [3, 0, 0, 0],   # f = (1)                 -> H = 0
                   [2, 1, 1, 0],   # f = (1/2, 1/4, 1/4)     -> -(0.5 ln .5 + 2 * .25 ln .25)
                                   #   = 0.5 ln 2 + 0.5 ln 4 = 1.5 ln 2 = 1.0397207708...
                   [0, 0, 0, 0]])  # no exposure             -> nan
H_EXPECTED = [LN2, LN4, 0.0, 1.5 * LN2]


def test_topic_entropy_by_hand():
    h = topic_entropy(COUNTS)
    assert h[:4].tolist() == pytest.approx(H_EXPECTED, **TOL)
    assert h[3] == pytest.approx(1.0397207708399179, **TOL)
    assert math.isnan(h[4])


def test_topic_entropy_uses_frequencies_not_counts():
    # [4, 4] and [1, 1] have the same frequencies (1/2, 1/2) -> both ln 2
    assert topic_entropy(np.array([[4, 4], [1, 1]])).tolist() == pytest.approx([LN2, LN2], **TOL)


@pytest.mark.parametrize("counts", [np.array([1, 2]), np.array([[1, -1]]), np.array([[1.0, np.inf]])])
def test_topic_entropy_rejects_bad_counts(counts):
    with pytest.raises(ValueError, match="counts"):
        topic_entropy(counts)


def test_mean_topic_entropy_over_measured_users():
    # (ln 2 + ln 4 + 0 + 1.5 ln 2) / 4 = (1 + 2 + 0 + 1.5) ln 2 / 4 = 1.125 ln 2; the nan row is skipped
    assert mean_topic_entropy(topic_entropy(COUNTS)) == pytest.approx(1.125 * LN2, **TOL)
    assert mean_topic_entropy(topic_entropy(COUNTS)) == pytest.approx(0.779790578129938, **TOL)


def test_mean_topic_entropy_all_nan():
    assert math.isnan(mean_topic_entropy([np.nan, np.nan]))
    assert math.isnan(mean_topic_entropy([]))


# --------------------------------------------------------------------------- deep cocoon share
def test_deep_cocoon_share_overall():
    h = topic_entropy(COUNTS)  # [0.693, 1.386, 0, 1.040, nan]
    # threshold 0.8: below are ln 2 and 0 -> 2 of 4 measured viewers
    assert deep_cocoon_share(h, 0.8) == pytest.approx(0.5, **TOL)
    # threshold 1.1: ln 2, 0, 1.5 ln 2 (=1.0397) -> 3 of 4
    assert deep_cocoon_share(h, 1.1) == pytest.approx(0.75, **TOL)
    # threshold 0: strict inequality, H = 0 is not < 0 -> 0 of 4
    assert deep_cocoon_share(h, 0.0) == 0.0


def test_deep_cocoon_share_by_group():
    h = topic_entropy(COUNTS)
    groups = ["a", "b", "a", "b", "c"]
    # threshold 0.8: a = viewers 0 (ln 2, deep), 2 (0, deep)           -> 2/2 = 1
    #                b = viewers 1 (ln 4, no), 3 (1.0397, no)          -> 0/2 = 0
    #                c = viewer 4, no exposure                         -> nan
    out = deep_cocoon_share(h, 0.8, groups)
    assert set(out) == {"a", "b", "c"}
    assert out["a"] == 1.0 and out["b"] == 0.0 and math.isnan(out["c"])
    # integer labels come back as Python ints
    out = deep_cocoon_share(h, 1.1, [0, 0, 1, 1, 1])
    # threshold 1.1: group 0 = {ln 2 deep, ln 4 no} -> 1/2; group 1 = {0 deep, 1.0397 deep, nan} -> 2/2
    assert out == {0: 0.5, 1: 1.0}


def test_deep_cocoon_share_edge_cases():
    assert math.isnan(deep_cocoon_share([np.nan], 1.0))
    with pytest.raises(ValueError, match="groups"):
        deep_cocoon_share([0.1, 0.2], 1.0, groups=["a"])


# --------------------------------------------------------------------------- Gini
@pytest.mark.parametrize("values, expected", [
    # [0,0,0,1]: ordered pairs with |diff| = 1: 3 x 2 = 6; n = 4, mean = 1/4 -> 6 / (2*16*0.25) = 0.75
    ([0, 0, 0, 1], 0.75),
    # equal values -> every |x_i - x_j| = 0
    ([1, 1, 1, 1], 0.0),
    # [1,2,3,4]: unordered diffs 1+2+3+1+2+1 = 10, ordered 20; mean 2.5 -> 20 / (2*16*2.5) = 0.25
    ([1, 2, 3, 4], 0.25),
    # [3,1]: ordered diffs 2+2 = 4; n = 2, mean 2 -> 4 / (2*4*2) = 0.25  (order irrelevant)
    ([3, 1], 0.25),
    # one value -> 0
    ([5], 0.0),
    # all zeros -> defined as 0
    ([0, 0, 0], 0.0),
    # one non-zero of n = 5 -> (n-1)/n = 0.8
    ([0, 0, 7, 0, 0], 0.8),
])
def test_gini_by_hand(values, expected):
    assert gini(values) == pytest.approx(expected, **TOL)


@pytest.mark.parametrize("values", [[1, -1], [1, np.nan], [np.inf, 1]])
def test_gini_rejects_negative_or_non_finite(values):
    with pytest.raises(ValueError):
        gini(values)


def test_author_exposure_gini_counts_never_shown_authors():
    authors = np.array([[1, 1, -1],
                        [1, 2, -1]])
    # exposures per agent 0..3 = [0, 3, 1, 0] (agents 0 and 3 never shown still count)
    # unordered |diffs|: (0,3)=3 (0,1)=1 (0,0)=0 (3,1)=2 (3,0)=3 (1,0)=1 -> 10, ordered 20
    # n = 4, mean = 4/4 = 1 -> G = 20 / (2*16*1) = 0.625   (only [3, 1] would give 0.25)
    assert author_exposure_gini(authors, 4) == pytest.approx(0.625, **TOL)


def test_author_exposure_gini_rejects_unknown_author():
    with pytest.raises(ValueError, match="authors.*4"):
        author_exposure_gini(np.array([[0, 4]]), 4)


# --------------------------------------------------------------------------- cross-cutting exposure
# 4 agents, agents 0,1 in L and 2,3 in R. Row i = items shown to agent i (author ids).
AUTHORS = np.array([[1, 2, 3, -1],    # viewer 0 (L): 3 shown, authors 2,3 are R   -> 2/3
                    [0, 0, -1, -1],   # viewer 1 (L): 2 shown, both by L           -> 0/2 = 0
                    [0, 3, -1, -1],   # viewer 2 (R): 2 shown, author 0 is L       -> 1/2
                    [-1, -1, -1, -1]])  # viewer 3 (R): nothing shown              -> nan
GROUPS = ["L", "L", "R", "R"]


def test_cross_cutting_share_by_hand():
    share = cross_cutting_share(AUTHORS, GROUPS)
    assert share[:3].tolist() == pytest.approx([2 / 3, 0.0, 0.5], **TOL)
    assert math.isnan(share[3])


def test_cross_cutting_by_group_by_hand():
    # L: (2/3 + 0) / 2 = 1/3;  R: viewer 2 only (viewer 3 is nan) = 1/2
    assert cross_cutting_by_group(AUTHORS, GROUPS) == pytest.approx({"L": 1 / 3, "R": 0.5}, **TOL)
    # same with integer labels
    assert cross_cutting_by_group(AUTHORS, [0, 0, 1, 1]) == pytest.approx({0: 1 / 3, 1: 0.5}, **TOL)


def test_cross_cutting_rejects_bad_groups_and_authors():
    with pytest.raises(ValueError, match="groups"):
        cross_cutting_share(AUTHORS, ["L", "L", "R"])
    with pytest.raises(ValueError, match="authors"):
        cross_cutting_share(np.array([[0, 2], [1, -1]]), ["L", "R"])  # author 2 of 2 agents


# --------------------------------------------------------------------------- exposure_metrics bundle
TOPICS = np.array([[0, 1, 2, -1],     # counts [1,1,1] -> ln 3 = 1.0986
                   [0, 0, -1, -1],    # counts [2,0,0] -> 0
                   [1, 2, -1, -1],    # counts [0,1,1] -> ln 2 = 0.6931
                   [-1, -1, -1, -1]])  # nothing        -> nan


def test_exposure_metrics_with_groups():
    out = exposure_metrics(TOPICS, AUTHORS, n_topics=3, n_agents=4, groups=GROUPS)
    # mean entropy = (ln 3 + 0 + ln 2) / 3 = ln 6 / 3 = 0.5972531564...
    assert out["mean_topic_entropy"] == pytest.approx(math.log(6) / 3, **TOL)
    # default threshold 0.5 ln 3 = 0.5493: only viewer 1 (H = 0) is below -> 1/3
    assert out["deep_cocoon_threshold"] == pytest.approx(0.5 * LN3, **TOL)
    assert out["deep_cocoon_share"] == pytest.approx(1 / 3, **TOL)
    # L: viewer 0 (ln 3, no), viewer 1 (0, yes) -> 1/2;  R: viewer 2 (ln 2, no), viewer 3 nan -> 0
    assert out["deep_cocoon_share_by_group"] == {"L": 0.5, "R": 0.0}
    # author exposures per agent: 0 -> 3 (viewer 1 twice, viewer 2 once), 1 -> 1, 2 -> 1, 3 -> 2
    # [3,1,1,2]: unordered diffs 2+2+1+0+1+1 = 7, ordered 14; mean 7/4 -> 14 / (2*16*1.75) = 0.25
    assert out["author_exposure_gini"] == pytest.approx(0.25, **TOL)
    assert out["cross_cutting_share_by_group"] == pytest.approx({"L": 1 / 3, "R": 0.5}, **TOL)
    # overall: (2/3 + 0 + 1/2) / 3 = (7/6) / 3 = 7/18
    assert out["cross_cutting_share"] == pytest.approx(7 / 18, **TOL)
    # plain Python values, string labels, JSON round-trip
    assert all(type(v) in (float, dict) for v in out.values())
    assert json.loads(json.dumps(out)) == out


def test_exposure_metrics_int_groups_become_strings_and_explicit_threshold():
    out = exposure_metrics(TOPICS, AUTHORS, 3, 4, groups=[0, 0, 1, 1], threshold=0.7)
    # threshold 0.7: viewer 1 (0) and viewer 2 (ln 2 = 0.693) are below -> 2/3
    assert out["deep_cocoon_share"] == pytest.approx(2 / 3, **TOL)
    # group 0: {ln 3 no, 0 yes} -> 1/2; group 1: {ln 2 yes, nan} -> 1
    assert out["deep_cocoon_share_by_group"] == {"0": 0.5, "1": 1.0}
    assert set(out["cross_cutting_share_by_group"]) == {"0", "1"}


def test_exposure_metrics_without_groups_or_inputs():
    out = exposure_metrics(TOPICS, AUTHORS, 3, 4)
    assert set(out) == {"mean_topic_entropy", "deep_cocoon_share", "deep_cocoon_threshold",
                        "author_exposure_gini"}
    assert set(exposure_metrics(None, AUTHORS, 3, 4)) == {"author_exposure_gini"}
    assert "author_exposure_gini" not in exposure_metrics(TOPICS, None, 3, 4)


def test_exposure_metrics_validation():
    with pytest.raises(ValueError, match="same shape"):
        exposure_metrics(TOPICS, AUTHORS[:, :3], 3, 4)
    with pytest.raises(ValueError, match="groups"):
        exposure_metrics(TOPICS, AUTHORS, 3, 4, groups=["L", "R"])
    with pytest.raises(ValueError, match="topics"):
        exposure_metrics(TOPICS[:3], None, 3, 4, groups=GROUPS)
    with pytest.raises(ValueError, match="topics"):
        exposure_metrics(TOPICS[0], None, 3, 4)
    with pytest.raises(ValueError, match="authors"):
        exposure_metrics(None, AUTHORS, 3, 3)  # author id 3 with only 3 agents


# --------------------------------------------------------------------------- scale (vectorised path)
def test_exposure_metrics_at_100k_agents():
    rng = np.random.default_rng(0)
    n, m, k = 100_000, 20, 10
    topics = rng.integers(-1, k, size=(n, m))
    authors = np.where(topics >= 0, rng.integers(0, n, size=(n, m)), -1)
    out = exposure_metrics(topics, authors, k, n, groups=rng.integers(0, 3, size=n))
    assert 0 < out["mean_topic_entropy"] <= math.log(k)
    assert 0 <= out["author_exposure_gini"] < 1
    # with 3 random equal-sized groups about 2/3 of authors are out-group
    assert out["cross_cutting_share"] == pytest.approx(2 / 3, abs=0.01)


# --------------------------------------------------------------------------- properties
@settings(deadline=None, max_examples=100)
@given(st.integers(1, 8).flatmap(
    lambda k: hnp.arrays(np.int64, st.tuples(st.integers(1, 6), st.just(k)),
                         elements=st.integers(0, 20))))
def test_entropy_between_zero_and_ln_k(counts):
    h = topic_entropy(counts)
    empty = counts.sum(axis=1) == 0
    assert np.array_equal(np.isnan(h), empty)
    assert np.all(h[~empty] >= 0)
    assert np.all(h[~empty] <= math.log(counts.shape[1]) + 1e-12)


@settings(deadline=None, max_examples=100)
@given(st.lists(st.floats(0, 1e6, allow_nan=False, allow_infinity=False), min_size=1, max_size=40))
def test_gini_in_unit_interval_and_matches_double_sum(values):
    g = gini(values)
    n = len(values)
    assert 0 <= g < 1
    assert g <= (n - 1) / n + 1e-12
    # the defining double sum, computed here independently
    x = np.asarray(values)
    if x.sum() > 0:
        ref = np.abs(x[:, None] - x[None, :]).sum() / (2 * n * n * x.mean())
        assert g == pytest.approx(ref, rel=1e-9, abs=1e-9)
