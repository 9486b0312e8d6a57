"""Unit tests of ``socialgym.llm.text``: cleaning a model's plain-text reply and reading a bullet list."""

from __future__ import annotations

import pytest


# ============================================================================ plain texts
@pytest.mark.parametrize("raw, expected", [
    ('Sure! Here is the post: "Solar is cheap now. Agree?"', "Solar is cheap now. Agree?"),
    ("Post: Wind farms work. They really do. And more", "Wind farms work. They really do."),
    ("@Ana @ClimateFan\nThe climate matters to all of us.", "The climate matters to all of us."),
    ("Here's a short reply to Ben:\n\nThanks for sharing!\n\nSecond paragraph here.", "Thanks for sharing!"),
    ("I love #gardening and #food.", "I love gardening and food."),
    ("One. Two. Three.", "One. Two."),                                 # at most two sentences
    ("   ", ""),
    ("@only @handles", ""),
    ('She said "act now." We agree.', 'She said "act now." We agree.'),      # a closer between sentences
    ("'Tis the season, isn't it?", "'Tis the season, isn't it?"),              # a leading apostrophe
    ('"Climate change is real," she said.', '"Climate change is real," she said.'),   # a quoted phrase
    ("Hey @someone, how are you?", "Hey, how are you?"),
    ("Dear Ani,\n\nI hope you are well. More here.", "Dear Ani, I hope you are well. More here."),  # a greeting
    ("Hi there\n\nSolar is cheap now.", "Hi there, Solar is cheap now."),
    ("Done.\n\nSecond paragraph.", "Done."),                                 # a sentence is no greeting
    ("Solar power\n\nIt is cheap now.", "Solar power"),                      # nor a title
    ("A: Solar is cheap now.", "Solar is cheap now."),                         # a bare answer label
    ("Ana: Solar is cheap now.", "Ana: Solar is cheap now."),                  # a name is no label
])
def test_clean_text_cases(raw, expected):
    from socialgym.llm.text import clean_text
    assert clean_text(raw, 200) == expected


def test_clean_text_cuts_at_sentence_then_word_boundaries():
    from socialgym.llm.text import clean_text
    assert clean_text("Short one. " + "word " * 60, 40) == "Short one."          # the 2nd sentence is too long
    long = "alpha beta gamma delta epsilon zeta eta theta"
    out = clean_text(long, 20)                                                   # no sentence fits: a word cut
    assert out == "alpha beta gamma…" and len(out) <= 20
    with pytest.raises(ValueError, match="max_chars"):
        clean_text("x", 0)


def test_parse_bullets():
    from socialgym.llm.text import parse_bullets
    raw = "Here are the tips:\n- DM agent_1 about energy now\n2) Comment on the top post\n* ok\n• Post a question on food"
    assert parse_bullets(raw) == ["DM agent_1 about energy now", "Comment on the top post", "Post a question on food"]
    assert parse_bullets(None) == []
