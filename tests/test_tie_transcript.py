"""The LLM tie scorer's transcript: the round's lines with the rater's peers, texts in full, up to a token bound."""

import pytest

from socialgym.ties.llm_scorer import LLMTieScorer, estimated_tokens


def _dm(sender, recipient, text):
    return {"kind": "DM", "sender": sender, "recipient": recipient, "topic": "a", "text": text, "sentiment": 0.0}


def test_the_whole_round_is_shown_with_texts_in_full():
    long_text = "word " * 60                       # 300 characters: the old scorer cut texts at 100
    entries = [_dm("agent_1", "agent_0", f"message {k} " + long_text) for k in range(20)]
    entries.append(_dm("agent_2", "agent_3", "not between the rater and its peer"))
    scorer = LLMTieScorer(None, transcript_tokens=100_000)
    lines = scorer.transcript("agent_0", {"agent_1"}, entries).split("\n")
    assert len(lines) == 20                       # the old scorer kept the last 12
    assert lines[0] == "agent_1 DM to agent_0 [a]: message 0 " + ("word " * 60).strip()


def test_the_token_bound_keeps_the_latest_lines_and_says_how_many_were_left_out():
    entries = [_dm("agent_1", "agent_0", "x" * 73) for _ in range(10)]
    line = "agent_1 DM to agent_0 [a]: " + "x" * 73          # 100 characters
    assert estimated_tokens(line) == 26                       # ceil(100 / 4) + 1
    scorer = LLMTieScorer(None, transcript_tokens=80)         # room for 3 lines (78 tokens), not 4 (104)
    assert scorer.transcript("agent_0", {"agent_1"}, entries).split("\n") == \
        ["(7 earlier lines of this round left out)", line, line, line]


@pytest.mark.parametrize("bad", [0, 31, 2.5, True, "100"])
def test_a_bad_bound_is_refused(bad):
    with pytest.raises(ValueError, match="transcript_tokens must be an integer >= 32"):
        LLMTieScorer(None, transcript_tokens=bad)


def test_the_config_key_is_checked_and_reaches_the_scorer():
    from socialgym.experiments.define import ConfigError, load_config

    with pytest.raises(ConfigError, match="llm.tie_transcript_tokens must be an integer >= 32"):
        load_config({"env": {"n_agents": 3}, "policy": {"kind": "random"}, "llm": {"tie_transcript_tokens": 10}})
    cfg = load_config({"env": {"n_agents": 3}, "policy": {"kind": "random"}, "llm": {"tie_transcript_tokens": 500}})
    assert cfg.llm.tie_transcript_tokens == 500
