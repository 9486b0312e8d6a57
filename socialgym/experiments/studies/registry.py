"""Every study the package ships, by the name ``socialgym study NAME`` takes.

A study is either **runner-driven** — configs run through the experiment runner and its sweeps,
judged by ``ties_coach`` / ``fork_studies`` (``ties-coach``, ``soc-strategy``,
``misinformation``) or by ``platform_objectives`` — or **own-loop**: a module with its own
``main(argv)`` and arguments (``recagent``, ``agentsociety``, ``cocoon``, ``moderation``,
``co-adaptation``), to which ``socialgym study NAME ...`` hands the rest of the command line
(``socialgym study NAME --help`` shows that study's arguments). Each entry's one-line summary is
the first paragraph of its module's docstring, so it is written once.
"""

from __future__ import annotations

import importlib
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
    StudyEntry("platform-objectives", f"{_STUDIES}.platform_objectives", False),
    StudyEntry("recagent", f"{_STUDIES}.recagent", True),
    StudyEntry("agentsociety", f"{_STUDIES}.agentsociety", True),
    StudyEntry("cocoon", f"{_STUDIES}.cocoon", True),
    StudyEntry("moderation", f"{_STUDIES}.moderation", True),
    StudyEntry("co-adaptation", f"{_STUDIES}.coadaptation", True),
)
STUDY = {s.name: s for s in STUDIES}
RUNNER_STUDIES = tuple(s.name for s in STUDIES if not s.own_loop)


def study_listing() -> str:
    """``socialgym study --list``: every study, one line each."""
    width = max(len(s.name) for s in STUDIES)
    return "\n".join(f"{s.name:<{width}}  {s.summary()}" for s in STUDIES)


__all__ = ["StudyEntry", "STUDIES", "STUDY", "RUNNER_STUDIES", "study_listing"]
