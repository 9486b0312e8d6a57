"""Sizes: the limit on n_agents stops typos only; whether a size fits memory is said before allocating."""

from __future__ import annotations

import pytest

import socialgym
from socialgym.config import MAX_AGENTS
from socialgym.platform.validation import check_memory, memory_estimate


def test_ten_million_agents_are_within_the_limit():
    assert MAX_AGENTS >= 10_000_000


def test_memory_estimate_by_hand():
    # 1,000,000 x (1,400 + 110 x 30 shown slots + 220 x 3 actions x 6 rounds) = 8.66e9 bytes
    assert memory_estimate(1_000_000, 3, 6, 30) == 8_660_000_000


def test_a_size_that_does_not_fit_is_refused_with_the_numbers():
    with pytest.raises(MemoryError, match=r"n_agents=2,000,000 .* about 17\.3 GB .* 4\.0 GB available"):
        check_memory(2_000_000, 3, 6, 30, available=4_000_000_000)
    check_memory(2_000_000, 3, 6, 30, available=20_000_000_000)        # fits: no error
    # a small population is refused too when its rounds do not fit: 1,000 x (1,400 + 110 x 30 +
    # 220 x 3 x 10,000) = 6.6047e9 bytes, 6.6 GB against 4.0 GB
    with pytest.raises(MemoryError, match=r"n_agents=1,000 .* about 6\.6 GB .* 4\.0 GB available"):
        check_memory(1_000, 3, 10_000, 30, available=4_000_000_000)
    check_memory(1_000, 3, 10_000, 30, available=7_000_000_000)         # fits: no error


def test_the_environment_checks_before_allocating():
    with pytest.raises(MemoryError, match="n_agents=10,000,000"):
        socialgym.parallel_env(n_agents=10_000_000, n_actions=3, max_rounds=100_000)


def test_top_k_excluding_own_by_hand():
    """Items 0..5 newest last, authored by agents 0, 1, 1, 2, 0, 3; ranking newest first."""
    import numpy as np

    from socialgym.recommenders.base import top_k_excluding_own

    authors = np.array([0, 1, 1, 2, 0, 3])
    ranked = np.array([5, 4, 3, 2, 1, 0])
    out = top_k_excluding_own(ranked, np.array([0, 1, 2, 3, 4]), authors, 3)
    assert out.tolist() == [[5, 3, 2],      # agent 0 authored 4 (and 0)
                            [5, 4, 3],      # agent 1 authored 2 and 1, beyond its first three
                            [5, 4, 2],      # agent 2 authored 3
                            [4, 3, 2],      # agent 3 authored 5
                            [5, 4, 3]]      # agent 4 authored nothing
    short = top_k_excluding_own(np.array([1, 0]), np.array([0, 1]), authors, 3)
    assert short.tolist() == [[1, -1, -1], [0, -1, -1]]    # a pool of two: each agent sees the other's item


def test_unique_inverse_is_numpys():
    import numpy as np

    from socialgym.rowops import unique_inverse

    rng = np.random.default_rng(1)
    for keys in (np.zeros(0, np.int64), np.array([5]), rng.integers(0, 50, 1000),
                 np.concatenate([np.repeat(np.arange(100), 7) * 1000 + rng.integers(0, 1000, 700),
                                 rng.integers(0, 10**5, 300)])):
        want_u, want_inv = np.unique(keys, return_inverse=True)
        got_u, got_inv = unique_inverse(keys)
        assert got_u.tolist() == want_u.tolist() and got_inv.tolist() == want_inv.ravel().tolist()
    assert unique_inverse(np.array([3, 1, 3, 2]))[1].tolist() == [2, 0, 2, 1]   # by hand
