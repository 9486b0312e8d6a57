"""Unit tests of ``socialgym.metrics.language``: the share of a text's words that are English."""

from __future__ import annotations

import numpy as np
import pytest
from capabilities import need_wordlist


# ============================================================================ English measure
def test_english_word_share_by_hand():
    from socialgym.metrics.language import english_share, english_word_share, words_of
    words = frozenset({"the", "sun", "is", "warm", "it's", "maya"})
    assert words_of("@agent_2 The sun is warm! 42") == ["The", "sun", "is", "warm"]
    assert english_word_share("@agent_2 The sun is warm", words) == 1.0
    assert english_word_share("The sun es caliente", words) == 0.5               # 2 of 4
    assert english_word_share("Maya's sun", words) == 1.0                         # possessive of a listed word
    assert np.isnan(english_word_share("@agent_3 1.0.2", words))                  # no words at all
    # 4 texts: 1.0, 0.5, no words, 0.8 (4 of 5) -> English-like: 1st and 4th
    result = english_share(["the sun is warm", "the sun es caliente", "@agent_1 12",
                            "it's the sun is hot"], words)
    assert result == {"texts": 4, "english_like": 2, "share": 0.5, "median_word_share": pytest.approx(0.65)}


def test_the_system_word_list_reads_as_lower_cased_words():
    """The English word list itself (Debian's wamerican; ``make wordlist``), as load_wordlist()
    reads it for the English-likeness checks of agents' texts."""
    from socialgym.metrics.language import english_share

    words = need_wordlist()
    assert len(words) > 50_000 and all(w == w.lower() for w in words)
    assert {"the", "sun", "is", "warm", "discussion", "platform"} <= words
    result = english_share(["The sun is warm today", "xqzv blorf gnarp"], words)
    assert (result["texts"], result["english_like"]) == (2, 1)
