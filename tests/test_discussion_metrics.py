"""Hand-computed tests of the discussion text metrics and of annotator polarisation (nDFU).

socialgym.discussion.metrics: tokenize, lcs_length (bit-parallel, checked against a plain
O(nm) DP), rouge_l, diversity (paper eq. 1), comment_lengths, mean_by_turn.
socialgym.annotation.polarization: histogram, ndfu (Pavlopoulos & Likas 2024).
"""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from socialgym.annotation.polarization import histogram, ndfu
from socialgym.discussion.metrics import (
    comment_lengths,
    diversity,
    lcs_length,
    mean_by_turn,
    rouge_l,
    tokenize,
)

TOL = dict(rel=1e-12, abs=1e-12)


# --------------------------------------------------------------------------- references (test side)
def lcs_dp(a, b):
    """Textbook O(len(a) * len(b)) dynamic programme."""
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b):
            cur.append(prev[j] + 1 if x == y else max(prev[j + 1], cur[j]))
        prev = cur
    return prev[-1]


def ndfu_loop(ratings, scale=(1, 2, 3, 4, 5)):
    """nDFU written straight from the definition, one item, with Python loops."""
    r = [x for x in ratings if not math.isnan(x)]
    if not r:
        return math.nan
    f = [sum(1 for x in r if x == c) / len(r) for c in scale]
    m = f.index(max(f))
    dfu = 0.0
    for i in range(m, len(f) - 1):  # walking right from the mode
        dfu = max(dfu, f[i + 1] - f[i])
    for i in range(m, 0, -1):  # walking left from the mode
        dfu = max(dfu, f[i - 1] - f[i])
    return dfu / f[m]


# --------------------------------------------------------------------------- tokenize
def test_tokenize_rouge_default():
    # lowercase; every run of non-[a-z0-9] (punctuation, dash, apostrophe) separates
    assert tokenize("Hello, World! It's 2024—OK?") == ["hello", "world", "it", "s", "2024", "ok"]
    # underscore and non-ASCII letters are separators too, as in rouge-score
    assert tokenize("snake_case café") == ["snake", "case", "caf"]
    # no stemming
    assert tokenize("Running runs ran") == ["running", "runs", "ran"]
    assert tokenize("") == []
    assert tokenize("  ...!!  ") == []


# --------------------------------------------------------------------------- LCS
def test_lcs_hand():
    assert lcs_length("ABCBDAB", "BDCABA") == 4  # classic CLRS example (BCBA)
    assert lcs_length([], ["a"]) == 0
    assert lcs_length(["a"], []) == 0
    assert lcs_length(["a", "b"], ["c", "d"]) == 0
    assert lcs_length(["x"] * 5, ["x"] * 3) == 3
    assert lcs_length(list("abcdef"), list("abcdef")) == 6


def test_lcs_across_word_boundaries():
    # longer than 64 and 128 symbols, so the bit vector spans several machine words
    rng = np.random.default_rng(0)
    for n, m in [(70, 65), (200, 150), (1, 300), (300, 1), (129, 129)]:
        a = rng.integers(0, 4, n).tolist()
        b = rng.integers(0, 4, m).tolist()
        assert lcs_length(a, b) == lcs_dp(a, b)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.integers(0, 5), max_size=90),
    st.lists(st.integers(0, 5), max_size=90),
)
def test_lcs_matches_dp(a, b):
    expected = lcs_dp(a, b)
    assert lcs_length(a, b) == expected
    assert lcs_length(b, a) == expected


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(["the", "a", "cat", "dog", "sat"]), max_size=30),
       st.lists(st.sampled_from(["the", "a", "cat", "mat", "ran"]), max_size=30))
def test_lcs_strings_match_dp(a, b):
    assert lcs_length(a, b) == lcs_dp(a, b)


# --------------------------------------------------------------------------- ROUGE-L
def test_rouge_l_hand():
    # a = [the, quick, brown, fox] (4), b = [the, fox, quick] (3); LCS = 2 ("the quick")
    # P = 2/3, R = 2/4, F1 = 2 * (1/3) / (7/6) = 4/7
    assert rouge_l("The quick brown fox", "the fox, quick!") == pytest.approx(4 / 7, **TOL)
    assert rouge_l("the fox, quick!", "The quick brown fox") == pytest.approx(4 / 7, **TOL)
    assert rouge_l("Same words here.", "same WORDS here") == pytest.approx(1.0, **TOL)
    # [a, b, c, d] vs [a, c]: LCS 2, P = 1, R = 1/2, F1 = 1 / 1.5 = 2/3
    assert rouge_l("a b c d", "a c") == pytest.approx(2 / 3, **TOL)


def test_rouge_l_zero_cases():
    assert rouge_l("", "anything") == 0.0
    assert rouge_l("anything", "") == 0.0
    assert rouge_l("!!!", "???") == 0.0
    assert rouge_l("one two", "three four") == 0.0


# --------------------------------------------------------------------------- diversity
def test_diversity_hand():
    # tokens: [the, cat, sat], [the, cat, ran], [a, dog]
    # R12: LCS 2 -> 2*2/(3+3) = 2/3; R13 = R23 = 0
    # div = 1 - 2/(3*2) * 2/3 = 1 - 2/9 = 7/9
    assert diversity(["The cat sat.", "the cat ran", "A dog"]) == pytest.approx(7 / 9, **TOL)


def test_diversity_extremes():
    assert diversity(["same text", "same text", "Same, text!"]) == pytest.approx(0.0, abs=1e-12)
    assert diversity(["alpha beta", "gamma delta", "epsilon"]) == 1.0
    # an empty comment shares nothing: pairs with it count R = 0
    # R("a b", "a b") = 1, other two pairs 0: div = 1 - 2/6 * 1 = 2/3
    assert diversity(["a b", "", "a b"]) == pytest.approx(2 / 3, **TOL)


def test_diversity_needs_two_comments():
    assert math.isnan(diversity([]))
    assert math.isnan(diversity(["only one"]))
    # two comments: div = 1 - R(c1, c2); [x, y, z] vs [x, z]: LCS 2 -> R = 4/5
    assert diversity(["x y z", "x z"]) == pytest.approx(1 / 5, **TOL)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.sampled_from(["a", "b", "c", "d", "E", "f,"]), max_size=80)
                .map(" ".join), min_size=2, max_size=7))
def test_diversity_matches_pairwise_rouge(comments):
    n = len(comments)
    pairs = [rouge_l(comments[i], comments[j]) for i in range(n) for j in range(i + 1, n)]
    assert diversity(comments) == pytest.approx(1 - sum(pairs) / len(pairs), **TOL)


# --------------------------------------------------------------------------- lengths, per-turn means
def test_comment_lengths_whitespace_words():
    out = comment_lengths(["Don't stop now", "", "  two\twords\n", "a-b c"])
    assert out.dtype == np.int64
    assert out.tolist() == [3, 0, 2, 2]
    assert comment_lengths([]).shape == (0,)


def test_mean_by_turn_hand():
    values = [1.0, 2.0, np.nan, 4.0, 5.0, np.nan]
    turns = [2, 0, 0, 2, 1, 3]
    # turn 0: {2, nan} -> 2 (n=1); turn 1: {5} -> 5; turn 2: {1, 4} -> 2.5; turn 3: {nan} -> nan, n=0
    t, m, c = mean_by_turn(values, turns)
    assert t.tolist() == [0, 1, 2, 3]
    np.testing.assert_allclose(m[:3], [2.0, 5.0, 2.5])
    assert math.isnan(m[3])
    assert c.dtype == np.int64 and c.tolist() == [1, 1, 2, 0]


def test_mean_by_turn_matches_loop():
    rng = np.random.default_rng(1)
    v = rng.normal(size=500)
    v[rng.random(500) < 0.1] = np.nan
    turns = rng.integers(0, 20, 500)
    t, m, c = mean_by_turn(v, turns)
    for ti, mi, ci in zip(t, m, c):
        sel = v[(turns == ti) & ~np.isnan(v)]
        assert ci == sel.size
        assert mi == pytest.approx(sel.mean(), rel=1e-12)


def test_mean_by_turn_errors_and_empty():
    with pytest.raises(ValueError):
        mean_by_turn([1.0, 2.0], [0])
    with pytest.raises(ValueError):
        mean_by_turn([1.0], [np.nan])
    t, m, c = mean_by_turn([], [])
    assert t.size == m.size == c.size == 0


# --------------------------------------------------------------------------- nDFU
@pytest.mark.parametrize(
    "ratings, expected",
    [
        # perfect agreement: f = [0, 0, 1, 0, 0], no rise away from the mode
        ([3, 3, 3], 0.0),
        # a single rating is trivially unimodal
        ([4], 0.0),
        # f = [.5, 0, 0, 0, .5], m = 0 (first max); right rises 0-.5, 0, 0, .5-0 = .5 -> .5/.5 = 1
        ([1, 1, 5, 5], 1.0),
        # f = [.25, .5, 0, 0, .25], m = 1; right: 0-.5 < 0, 0, .25 -> .25; left: .25-.5 < 0
        # DFU = .25, nDFU = .25/.5 = .5
        ([1, 2, 2, 5], 0.5),
        # f = [.25, 0, 0, 0, .75], m = 4; left: 0-.75, 0, 0, .25-0 = .25 -> .25/.75 = 1/3
        ([1, 5, 5, 5], 1 / 3),
        # uniform f = [.2]*5, m = 0; every step is 0 -> 0 (flat is not multimodal)
        ([1, 2, 3, 4, 5], 0.0),
        # f = [.5, 1/6, 1/3, 0, 0], m = 0; right: 1/6-1/2 < 0, 1/3-1/6 = 1/6, then falls
        # DFU = 1/6, nDFU = (1/6)/(1/2) = 1/3
        ([1, 1, 1, 2, 3, 3], 1 / 3),
        # f = [1/6, 0, 1/3, 0, 1/2], m = 4; left: 0-1/2, 1/3-0 = 1/3, 0-1/3, 1/6-0 = 1/6
        # DFU = 1/3, nDFU = (1/3)/(1/2) = 2/3
        ([1, 3, 3, 5, 5, 5], 2 / 3),
        # f = [0, .5, 0, .5, 0], m = 1; right: -.5, .5, -.5 -> .5; left: 0-.5 < 0 -> .5/.5 = 1
        ([2, 2, 4, 4], 1.0),
        # monotone decreasing f = [.4, .3, .2, .1, 0], m = 0, no rise -> 0
        ([1, 1, 1, 1, 2, 2, 2, 3, 3, 4], 0.0),
        # f = [0, .2, .6, 0, .2], m = 2; right: 0-.6, .2-0 = .2; left: .2-.6, 0-.2 -> .2/.6 = 1/3
        ([2, 3, 3, 3, 5], 1 / 3),
    ],
)
def test_ndfu_hand(ratings, expected):
    assert ndfu(ratings) == pytest.approx(expected, **TOL)
    assert ndfu_loop(ratings) == pytest.approx(expected, **TOL)  # the test's own reference agrees


def test_ndfu_ignores_nan_and_returns_float():
    out = ndfu([1, np.nan, 5, 5, np.nan, 1])
    assert isinstance(out, float) and out == pytest.approx(1.0)
    assert math.isnan(ndfu([np.nan, np.nan]))
    assert math.isnan(ndfu([]))


def test_ndfu_rows():
    R = np.array(
        [
            [3, 3, 3, np.nan],
            [1, 1, 5, 5],
            [np.nan] * 4,
            [1, 2, 2, 5],
            [5, 1, 5, 5],
        ]
    )
    out = ndfu(R)
    assert isinstance(out, np.ndarray) and out.shape == (5,)
    np.testing.assert_allclose(out[[0, 1, 3, 4]], [0.0, 1.0, 0.5, 1 / 3], rtol=1e-12)
    assert math.isnan(out[2])
    assert ndfu(np.empty((0, 10))).shape == (0,)


def test_ndfu_other_scales():
    # three-point scale: f = [.5, 0, .5] -> 1
    assert ndfu([-1, 1], scale=(-1, 0, 1)) == pytest.approx(1.0)
    # binary scale can never have a dip: f = [.5, .5] -> 0
    assert ndfu([0, 1], scale=(0, 1)) == 0.0
    # categories are taken in the given order: 0..10 with ratings at both ends
    assert ndfu([0, 0, 10, 10, 10], scale=range(11)) == pytest.approx((2 / 5) / (3 / 5))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.lists(st.sampled_from([1.0, 2.0, 3.0, 4.0, 5.0, math.nan]), min_size=6, max_size=6),
        min_size=1,
        max_size=12,
    )
)
def test_ndfu_vectorised_matches_loop(rows):
    R = np.array(rows)
    out = ndfu(R)
    for i, row in enumerate(rows):
        ref = ndfu_loop(row)
        if math.isnan(ref):
            assert math.isnan(out[i])
        else:
            assert out[i] == pytest.approx(ref, **TOL)
            assert 0.0 <= out[i] <= 1.0 + 1e-12
            assert ndfu(row) == pytest.approx(ref, **TOL)


def test_histogram():
    np.testing.assert_allclose(histogram([1, 2, 2, 5]), [0.25, 0.5, 0, 0, 0.25])
    H = histogram([[1, 1, np.nan], [np.nan, np.nan, np.nan]], scale=(1, 2))
    np.testing.assert_allclose(H[0], [1.0, 0.0])
    assert np.isnan(H[1]).all()


@pytest.mark.parametrize("bad, shown", [([0, 1, 2], "0"), ([1, 6], "6"), ([2.5, 3], "2.5")])
def test_ndfu_rejects_ratings_outside_scale(bad, shown):
    with pytest.raises(ValueError, match=shown):
        ndfu(bad)
    with pytest.raises(ValueError, match=shown):
        ndfu([bad, [1] * len(bad)])


def test_ndfu_bad_shapes_and_scales():
    with pytest.raises(ValueError):
        ndfu(np.ones((2, 2, 2)))
    with pytest.raises(ValueError):
        ndfu([1, 2], scale=(1, 1, 2))
    with pytest.raises(ValueError):
        ndfu([1, 2], scale=())
