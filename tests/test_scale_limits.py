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
    check_memory(99_999, 100, 100_000, 3_000, available=1)             # small populations are never refused


def test_the_environment_checks_before_allocating():
    with pytest.raises(MemoryError, match="n_agents=10,000,000"):
        socialgym.parallel_env(n_agents=10_000_000, n_actions=3, max_rounds=100_000)
