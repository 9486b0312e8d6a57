"""Every study the package ships, by the name ``socialgym study NAME`` takes.

A study is either **runner-driven through the study command** — configs run through the
experiment runner and its sweeps, judged by ``ties_coach`` / ``fork_studies`` (``ties-coach``,
``soc-strategy``, ``misinformation``) or by ``platform_objectives`` — or has **its own arguments**:
a module with an ``Args``-like dataclass (a docstring per field, which :func:`add_dataclass_arguments`
turns into options) and ``main(argv)``, to which ``socialgym study NAME ...`` hands the rest of the
command line (``socialgym study NAME --help`` shows them). ``cocoon``, ``recagent`` and
``agentsociety`` build sweep configs from their arguments and run them through the runner like
the others; ``moderation``, ``co-adaptation`` and ``platform-objectives`` still play their own
loops (``writes_runs`` False: their outputs are not run directories yet). Each entry's one-line summary is the first paragraph of its
module's docstring, so it is written once.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import importlib
import inspect
import textwrap
from dataclasses import dataclass


@dataclass(frozen=True)
class StudyEntry:
    name: str
    module: str
    """The module that holds the study (its docstring gives the summary)."""
    own_loop: bool
    """True: the module's ``main(argv)`` runs it; False: the ``study`` command's options (``--out``,
    ``--scale``, ``--replicates`` ...) run it through the experiment runner."""
    summary_override: str | None = None
    """For the runner-driven studies that share a module: what this one is."""
    writes_runs: bool = True
    """Its runs are run directories that ``report``, ``compare``, ``validate`` and ``view`` read."""
    args: str | None = None
    """The module's arguments dataclass (a docstring per field, each an option of its ``--help``)."""

    def args_class(self):
        return getattr(importlib.import_module(self.module), self.args) if self.args else None

    def summary(self) -> str:
        """One line: the override, else the first paragraph of the module's docstring."""
        if self.summary_override:
            return self.summary_override
        doc = (importlib.import_module(self.module).__doc__ or "").strip()
        first = " ".join(doc.split("\n\n", 1)[0].split())
        if first.startswith("``") and "``: " in first:          # "``socialgym study x``: what it is"
            first = first.split("``: ", 1)[1]
        return first.rstrip(".")

    def main(self, argv: list[str]):
        """Run an own-loop study with ``argv`` (its own command line)."""
        if not self.own_loop:
            raise TypeError(f"study {self.name} runs through the study command's options, not its own main")
        return importlib.import_module(self.module).main(argv)


_STUDIES = "socialgym.experiments.studies"
STUDIES: tuple[StudyEntry, ...] = (
    StudyEntry("ties-coach", f"{_STUDIES}.ties_coach", False,
               "the core paper's coach x tie-scoring study: rewards, ties and the claims table"),
    StudyEntry("soc-strategy", f"{_STUDIES}.ties_coach", False,
               "recagent's Soc-Strategy (adding friends) at round 20, as a fork against its control"),
    StudyEntry("misinformation", f"{_STUDIES}.ties_coach", False,
               "a false claim at round 5 and its correction at round 8, with a stance survey"),
    StudyEntry("platform-objectives", f"{_STUDIES}.platform_objectives", False, writes_runs=False),
    StudyEntry("recagent", f"{_STUDIES}.recagent", True, args="RecAgentArgs"),
    StudyEntry("agentsociety", f"{_STUDIES}.agentsociety", True, args="StudyArgs"),
    StudyEntry("cocoon", f"{_STUDIES}.cocoon", True, args="CocoonArgs"),
    StudyEntry("moderation", f"{_STUDIES}.moderation", True, writes_runs=False, args="ModerationExperiment"),
    StudyEntry("co-adaptation", f"{_STUDIES}.coadaptation", True, writes_runs=False, args="Args"),
)
STUDY = {s.name: s for s in STUDIES}
RUNNER_STUDIES = tuple(s.name for s in STUDIES if not s.own_loop)


# ---------------------------------------------------------------------------------- Args -> options
def field_docs(cls) -> dict[str, str]:
    """A dataclass's field docstrings (the string literal under each field), by field name."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    body = tree.body[0].body
    docs = {}
    for node, after in zip(body, body[1:]):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and isinstance(after, ast.Expr) \
                and isinstance(after.value, ast.Constant) and isinstance(after.value.value, str):
            docs[node.target.id] = " ".join(after.value.value.split())
    return docs


def add_dataclass_arguments(parser: argparse.ArgumentParser, defaults, skip: tuple[str, ...] = ()) -> None:
    """One ``--option`` per field of the dataclass instance ``defaults`` (its docstring is the help,
    its value the default): numbers and strings typed, tuples as lists, booleans as flags."""
    docs = field_docs(type(defaults))
    for f in dataclasses.fields(defaults):
        if f.name in skip:
            continue
        value, name = getattr(defaults, f.name), "--" + f.name.replace("_", "-")
        help_text = f"{docs.get(f.name, '')} (default: {value!r})".replace("%", "%%")
        if isinstance(value, bool):
            parser.add_argument(name, action=argparse.BooleanOptionalAction, default=value, help=help_text)
        elif isinstance(value, tuple):
            kind = type(value[0]) if value else int
            parser.add_argument(name, type=kind, nargs="+", default=list(value), help=help_text)
        else:
            kind = type(value) if value is not None else {"int": int, "float": float}.get(
                str(f.type).split("|")[0].strip(), str)
            parser.add_argument(name, type=kind, default=value, help=help_text)


def dataclass_from_namespace(cls, ns: argparse.Namespace):
    """The dataclass ``cls`` from parsed options (lists back to tuples); fields without an option keep
    their defaults."""
    given = {f.name: getattr(ns, f.name) for f in dataclasses.fields(cls) if hasattr(ns, f.name)}
    return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in given.items()})


def study_listing() -> str:
    """``socialgym study --list``: every study, one line each."""
    width = max(len(s.name) for s in STUDIES)
    return "\n".join(f"{s.name:<{width}}  {s.summary()}" for s in STUDIES)


__all__ = ["StudyEntry", "STUDIES", "STUDY", "RUNNER_STUDIES", "study_listing", "field_docs",
           "add_dataclass_arguments", "dataclass_from_namespace"]
