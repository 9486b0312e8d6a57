"""The moderation-strategy experiment script: scripted pipeline, resume, errors, and the
embedded model end to end with a tiny configuration."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from capabilities import need_embedded_model, need_module

from socialgym.cli import main as cli
from socialgym.discussion import STRATEGIES
from socialgym.experiments.studies import moderation

TINY = ["--discussions", "2", "--turns", "6", "--users", "4", "--annotators", "3"]


def _comments(out: Path) -> list[dict]:
    with open(out / "comments.csv", newline="") as f:
        return list(csv.DictReader(f))


def test_scripted_pipeline_writes_tables_and_plots(tmp_path):
    out = tmp_path / "mod"
    assert cli(["moderation", "--no-llm", "--out", str(out), "--quiet", *TINY]) == 0
    records = [json.loads(line) for line in (out / "discussions.jsonl").read_text().splitlines()]
    assert sorted(r["key"] for r in records) == sorted(f"{s}/{i}" for s in STRATEGIES for i in range(2))
    # common random numbers: discussion i has the same users, roles and topic under every strategy
    for i in range(2):
        same = [r for r in records if r["index"] == i]
        assert len({json.dumps([r["users"], r["roles"], r["topic"]]) for r in same}) == 1
        assert sorted(same[0]["roles"].values()).count("troll") == 1
    rows = _comments(out)
    assert len(rows) == sum(1 for r in records for t in r["turns"] if t["agent"] != "moderator" and t["text"])
    # the pairwise table is the difference of per-strategy means of comments.csv
    tox = {s: np.mean([float(r["toxicity"]) for r in rows if r["strategy"] == s]) for s in STRATEGIES}
    table = list(csv.DictReader(open(out / "pairwise_toxicity.csv")))
    cell = next(t for t in table if t["a"] == "no_moderator" and t["b"] == "moderation_game")
    assert float(cell["diff"]) == pytest.approx(tox["no_moderator"] - tox["moderation_game"])
    ols = list(csv.DictReader(open(out / "ols_toxicity.csv")))
    assert [r["name"] for r in ols][:2] == ["Intercept", "no_instructions"]
    assert any(r["name"] == "moderation_game×time" for r in ols)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["discussions"] == 12 and summary["strategies"]["no_moderator"]["interventions"] == 0
    assert summary["strategies"]["moderation_game"]["interventions"] > 0
    for name in ("pairwise_toxicity", "pairwise_argument_quality", "toxicity_by_turn", "diversity",
                 "comment_length", "interventions"):
        assert (out / "plots" / f"{name}.png").stat().st_size > 1000
    assert "| No Moderator |" in (out / "summary.md").read_text()


def test_rerun_resumes_and_a_cut_last_line_is_redone(tmp_path):
    out = tmp_path / "mod"
    args = ["moderation", "--no-llm", "--out", str(out), "--quiet", "--strategies", "no_moderator,rules_only",
            "--discussions", "2", "--turns", "4", "--users", "3"]
    assert cli(args) == 0
    path = out / "discussions.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    assert len(lines) == 4
    path.write_text("".join(lines[:2]) + lines[2][:40])          # killed while writing the third record
    assert cli(args) == 0
    again = path.read_text().splitlines()
    assert len(again) == 4
    assert sorted(json.loads(x)["key"] for x in again) == sorted(json.loads(x)["key"] for x in lines)
    assert json.loads(again[2])["turns"] == json.loads(lines[2])["turns"]     # the redone one is identical
    assert cli(args) == 0 and len(path.read_text().splitlines()) == 4       # nothing left to do


def test_resume_refuses_another_configuration(tmp_path, capsys):
    out = tmp_path / "mod"
    base = ["moderation", "--no-llm", "--out", str(out), "--quiet", "--strategies", "no_moderator,rules_only",
            "--discussions", "1", "--users", "3"]
    assert cli([*base, "--turns", "3"]) == 0
    assert cli([*base, "--turns", "5"]) == 2
    assert "differs in ['max_turns']" in capsys.readouterr().err
    assert cli([*base, "--turns", "3", "--parallel", "2"]) == 0        # harmless settings may change
    assert cli([*base, "--turns", "3", "--max-concurrency", "3", "--no-cache"]) == 0
    assert cli([*base, "--turns", "3", "--temperature", "0.2"]) == 2   # the llm section is compared key by key
    assert "differs in ['llm.temperature']" in capsys.readouterr().err


def test_the_llm_settings_are_a_config_llm_section(tmp_path, capsys):
    from socialgym.experiments.define import LLMConfig, llm_section

    cfg = moderation.ModerationExperiment()
    assert isinstance(cfg.llm, LLMConfig) and (cfg.llm.max_concurrency, cfg.llm.max_tokens) == (8, 160)
    # the config's own checks, named as in a config
    assert cli(["moderation", "--out", str(tmp_path / "x"), "--temperature", "nan"]) == 2
    assert "llm.temperature" in capsys.readouterr().err and not (tmp_path / "x").exists()
    with pytest.raises(ValueError, match="llm.budget does not apply to the moderation experiment"):
        moderation.ModerationExperiment(llm=llm_section({"budget": {"requests": 10}}))
    with pytest.raises(TypeError, match="llm must be an LLMConfig"):
        moderation.ModerationExperiment(llm={"temperature": 0.5})
    # a key given in the llm section never reaches the saved configuration
    out = tmp_path / "mod"
    keyed = moderation.ModerationExperiment(no_llm=True, strategies=("no_moderator",), discussions=1, users=3,
                                            max_turns=2, llm=llm_section({"api_key": "sk-not-a-real-key-4242"}))
    moderation.run_experiment(keyed, out, progress=False)
    saved = (out / "config.json").read_text()
    assert "sk-not-a-real-key-4242" not in saved and json.loads(saved)["llm"]["max_tokens"] == 512   # as given


def test_argument_errors_exit_2(capsys):
    assert cli(["moderation", "--out", "/tmp/x", "--strategies", "no_moderator,shouting"]) == 2
    assert "unknown strategies ['shouting']" in capsys.readouterr().err
    assert cli(["moderation", "--out", "/tmp/x", "--users", "3", "--trolls", "2", "--community", "2"]) == 2
    with pytest.raises(ValueError, match="discussions must be an integer >= 1"):
        moderation.ModerationExperiment(discussions=0)
    assert cli(["moderation", "--out", "/tmp/x", "--seed", "-1"]) == 2
    assert "seed must be an integer >= 0" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_embedded_model_end_to_end(tmp_path):
    """The script on the embedded SmolLM2 model (llama.cpp), all six strategies, tiny sizes."""
    need_embedded_model()
    need_module("openai")
    out = tmp_path / "embedded"
    done = subprocess.run([sys.executable, "-m", "socialgym.experiments.studies.moderation", "--out", str(out),
                           "--discussions", "1", "--turns", "2", "--users", "2", "--community", "0",
                           "--annotators", "2", "--max-tokens", "48", "--comment-chars", "300"],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    records = [json.loads(line) for line in (out / "discussions.jsonl").read_text().splitlines()]
    assert sorted(r["strategy"] for r in records) == sorted(STRATEGIES)
    summary = json.loads((out / "summary.json").read_text())
    llm = summary["llm"]
    # per strategy: 2 user turns; moderated ones add 2 moderator turns; 2 annotators per user comment
    n_comments = summary["comments"]
    assert llm["requests"] >= 6 * 2 + 5 * 2 + 2 * n_comments
    for r in records:
        for t in r["turns"]:
            if t["agent"] != "moderator" and t["text"]:
                ratings = [x for x in t["toxicity_ratings"] if x is not None]
                assert all(1 <= x <= 5 for x in ratings)
    assert (out / "pairwise_toxicity.md").exists() and (out / "ols_toxicity.md").exists()
    assert (out / "plots" / "toxicity_by_turn.png").exists()
