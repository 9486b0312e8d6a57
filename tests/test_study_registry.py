"""``socialgym study``: one registry of every study (issue 45, part). ``--list`` names each with
one line; the runner-driven ones take the study command's options; the own-loop ones get the rest
of the command line (their own ``--help``), and their bad arguments are one line, exit 2."""

from __future__ import annotations

import pytest

from socialgym.cli import main
from socialgym.experiments.studies.registry import STUDIES

DOCUMENTED = ("ties-coach", "soc-strategy", "misinformation", "recagent", "agentsociety", "cocoon", "moderation",
              "platform-objectives", "co-adaptation")


def test_list_names_every_documented_study_in_one_line_each(capsys):
    assert main(["study", "--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == [s.name for s in STUDIES]
    assert set(DOCUMENTED) <= {line.split()[0] for line in lines}
    assert all(len(line.split(None, 1)) == 2 for line in lines)        # a name and a summary
    assert main(["study"]) == 0 and capsys.readouterr().out.splitlines() == lines


@pytest.mark.parametrize("name", [s.name for s in STUDIES if s.own_loop])
def test_an_own_loop_study_shows_its_own_arguments(capsys, name):
    with pytest.raises(SystemExit) as stop:
        main(["study", name, "--help"])
    assert stop.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: socialgym ") and "--out" in out


@pytest.mark.parametrize("name", [s.name for s in STUDIES if s.args])
def test_a_studys_arguments_are_a_dataclass_with_a_docstring_per_field(capsys, name):
    import dataclasses

    from socialgym.experiments.studies.registry import STUDY, field_docs

    cls = STUDY[name].args_class()
    docs = field_docs(cls)
    fields = [f.name for f in dataclasses.fields(cls)]
    assert [f for f in fields if not docs.get(f)] == []               # every field says what it is
    with pytest.raises(SystemExit):
        main(["study", name, "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    skipped = {"cocoon": {"recommender_kwargs", "rerank_phases"},        # mappings and phase lists: Python only
               "moderation": {"llm", "max_turns", "topics"}}.get(name, set())  # --turns; the llm options; seed texts
    for f in fields:                       # each an option (moderation: --turns, and the llm section's own)
        if f not in skipped:
            assert f"--{f.replace('_', '-')}" in shown, f


@pytest.mark.parametrize("argv, message", [
    (["study", "co-adaptation", "--iterations", "-1", "--out", "x"], "iterations must be an integer >= 1"),
    (["study", "co-adaptation", "--platform-objective", "likes", "--out", "x"], "platform objective must be one of"),
    (["study", "ties-coach"], "study ties-coach: --out DIR is required"),
])
def test_bad_study_arguments_are_one_line(tmp_path, capsys, argv, message):
    argv = [str(tmp_path / "x") if a == "x" else a for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not (tmp_path / "x").exists()


@pytest.mark.slow
def test_an_own_loop_study_runs_through_the_study_command(tmp_path, capsys):
    out = tmp_path / "as"
    assert main(["study", "agentsociety", "--out", str(out), "--quick"]) == 0
    assert any(out.iterdir())
