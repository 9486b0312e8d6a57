"""Unit tests of ``socialgym.llm.prompts``: ``PromptSet`` overrides, field checks and rendering."""

from __future__ import annotations

import pytest

from socialgym.llm import prompts as prompts_mod
from socialgym.llm.prompts import PromptSet


# ============================================================================ PromptSet
def test_prompt_override_unknown_field():
    with pytest.raises(ValueError) as info:
        PromptSet().replace(vote_user="You are {nmae}.")
    assert "'vote_user'" in str(info.value) and "nmae" in str(info.value)


def test_prompt_replace_unknown_template():
    with pytest.raises(ValueError, match="vote_sytem"):
        PromptSet().replace(vote_sytem="hi")
    with pytest.raises(ValueError, match="bogus"):
        PromptSet.from_mapping({"bogus": "x"})


def test_prompt_invalid_format_and_missing_reward_doc():
    with pytest.raises(ValueError, match="repair"):
        PromptSet().replace(repair="broken {")
    with pytest.raises(ValueError, match="EMO"):
        PromptSet().replace(reward_docs={k: "x" for k in ("SOC", "INF", "PRE", "COORD")})


def test_prompt_render_fills_fields():
    p = PromptSet()
    assert p.render("repair", error="bad id") == "Your reply was not valid: bad id\nReply again with JSON only, fixing this."
    assert p.render("tie_user", peers="a, b", transcript="T") == \
        "Your peers this round: a, b\nTranscript of the last round:\nT\nRate each peer."
    assert p.render("coach_format_json") == 'Reply with JSON only: {"tips": ["...", ...]}.'   # {{ }} unescaped
    q = p.replace(text_post="Do: {topic}, {tone}")
    assert q.render("text_post", topic="climate", tone="critical") == "Do: climate, critical"
    assert p.text_post == prompts_mod.TEXT_POST                     # the original is unchanged


def test_prompt_from_dir(tmp_path):
    (tmp_path / "tie_user.txt").write_text("Peers: {peers}\n\n")
    (tmp_path / "notes.md").write_text("ignored: not a .txt file {whatever}")
    p = PromptSet.from_dir(tmp_path)
    assert p.tie_user == "Peers: {peers}"                              # trailing newlines stripped
    assert p.render("tie_user", peers="x") == "Peers: x"
    assert p.vote_user == prompts_mod.VOTE_USER


def test_prompt_from_dir_rejects_unknown_file_and_field(tmp_path):
    (tmp_path / "bogus.txt").write_text("hi")
    with pytest.raises(ValueError, match="bogus.txt"):
        PromptSet.from_dir(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    (other / "tie_system.txt").write_text("You are {name} on {platform}.")
    with pytest.raises(ValueError) as info:
        PromptSet.from_dir(other)
    assert "'tie_system'" in str(info.value) and "platform" in str(info.value)
    with pytest.raises(FileNotFoundError):
        PromptSet.from_dir(tmp_path / "nope")
