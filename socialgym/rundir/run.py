"""One run directory, read once: :class:`Run`, the reader of a run's files for everything above
``rundir`` (the report, the viewer, ``compare``, ``validate``, sweeps, forks, the studies).
"""

from __future__ import annotations

import csv
import math
import os
from functools import cached_property
from pathlib import Path

import numpy as np

from socialgym.rundir import layout
from socialgym.rundir.files import read_csv, read_json, read_jsonl
from socialgym.rundir.runs import RunFileError, load_tie_matrix

_UNREADABLE = object()


def _json_file(name: str, doc: str) -> cached_property:
    """A JSON object file of the run, read on first use (:meth:`Run._json`)."""
    reader = cached_property(lambda run: run._json(name))
    reader.__doc__ = doc
    return reader


class Run:
    """A run directory (``socialgym run``, ``resume``, ``fork``), each file read on first use and kept.

    One error policy for every reader of a run:

    - a **missing** file gives an empty value — None (``summary``, ``info``, ``personas``,
      ``config_text``, ``ties(r)``, ``last_ties()``, ``decisions()``), ``{}`` (``config``,
      ``survey_means()``), ``[]`` (``rounds``, ``network``, ``events``, ``surveys``, ``lines(name)``) —
      and its name is added to ``missing``;
    - a **damaged** file — JSON that is no JSON object, a CSV file the csv module refuses, YAML
      that is no mapping, a tie or decision file that fails its checks (ids and indices past the
      matrix or int64 included), a file that cannot be read to its end — gives the same empty
      value (a JSON-lines file: the lines before the damage) and is recorded in ``damaged``: its
      name in the run -> a message naming the file. What a reader finds wrong in a file's content
      it records the same way (:meth:`damage`).
    - What a killed run leaves is read, not refused: a CSV file's last line cut inside a character
      (its bytes read as U+FFFD), a CSV row with the cells it has, a JSON-lines line that is no JSON
      object (None). Elsewhere bytes that are not UTF-8 make a CSV file damaged; in JSON and JSON
      lines they are read as U+FFFD.

    Lenient use (the report, the viewer, ``validate``: they show what is wrong) reads ``missing``
    and ``damaged`` (:meth:`notice` words one without the run's path). Strict use calls
    :meth:`require` (a missing file: FileNotFoundError) or :meth:`check` (a damaged file:
    :class:`RunFileError`, a ValueError naming the file) for the files it cannot do without.
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self.missing: list[str] = []
        self.damaged: dict[str, str] = {}
        self._tables: dict[str, tuple[list[str], list[list[str]]]] = {}
        self._lines: dict[str, list[dict | None]] = {}
        self._done: set[str] = set()             # folders read (ties, decisions): not read again by check

    def __repr__(self) -> str:
        return f"Run({str(self.path)!r})"

    # ------------------------------------------------------------------------------ the policy
    def _present(self, name: str) -> bool:
        if (self.path / name).is_file():
            return True
        if name not in self.missing:
            self.missing.append(name)
        return False

    def damage(self, name: str, why: str) -> RunFileError:
        """Record that ``name`` is damaged (``why``); the error to raise where the reader cannot go on."""
        message = f"{self.path / name}: {why}"
        self.damaged.setdefault(name, message)
        return RunFileError(message)

    def notice(self, name: str) -> str | None:
        """What is wrong with ``name`` (or the first damaged file in folder ``name``), the file
        named relative to the run; None when nothing is."""
        found = self._damage_of(name)
        return None if found is None else found.replace(f"{self.path}{os.sep}", "")

    def _damage_of(self, name: str) -> str | None:
        return next((m for k, m in self.damaged.items() if k == name or k.startswith(name + "/")), None)

    def _read(self, name: str) -> None:
        reader = _READERS.get(name)
        if reader is None:
            raise KeyError(f"Run has no reader of {name}")
        value = None if name in self._done else getattr(self, reader)
        if callable(value):
            value()

    def check(self, *names: str) -> None:
        """Read ``names`` and raise :class:`RunFileError` for the first that is damaged."""
        for name in names:
            self._read(name)
            if (found := self._damage_of(name)) is not None:
                raise RunFileError(found)

    def require(self, *names: str) -> None:
        """FileNotFoundError for the first of ``names`` that is missing, then :meth:`check`."""
        for name in names:
            self._read(name)
            if name in self.missing:
                raise FileNotFoundError(f"{name} not found in run directory {self.path}")
        self.check(*names)

    # ------------------------------------------------------------------------------ JSON, YAML
    def _json(self, name: str) -> dict | None:
        if not self._present(name):
            return None
        value = read_json(self.path / name, _UNREADABLE, errors="replace")
        if not isinstance(value, dict):
            self.damage(name, "not JSON" if value is _UNREADABLE else "not a JSON object")
            return None
        return value

    summary = _json_file(layout.SUMMARY, "summary.json: status, problems, rounds completed, agents, groups, final means.")
    info = _json_file(layout.RUN_INFO, "run.json: the run's id, sweep condition, replicate, seed, config changes, fork origin.")
    personas = _json_file(layout.PERSONAS, "personas.json: each agent's persona.")

    @cached_property
    def config_text(self) -> str | None:
        """config.yaml as written (the resolved config, secrets removed)."""
        if not self._present(layout.CONFIG):
            return None
        try:
            return (self.path / layout.CONFIG).read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            self.damage(layout.CONFIG, f"cannot be read ({type(exc).__name__})")
            return None

    @cached_property
    def config(self) -> dict:
        """config.yaml as a mapping (``{}`` when missing or damaged)."""
        if self.config_text is None:
            return {}
        try:
            import yaml
            value = yaml.safe_load(self.config_text)
        except Exception:                      # noqa: BLE001 - any YAML problem is a damaged file
            value = _UNREADABLE
        if not isinstance(value, dict):
            self.damage(layout.CONFIG, "not a YAML mapping")
            return {}
        return value

    # ------------------------------------------------------------------------------ CSV, JSON lines
    def table(self, name: str) -> tuple[list[str], list[list[str]]]:
        """(header, rows) of a CSV file of the run (empty lines left out; a row may be shorter or
        longer than the header: a line being written when the run stopped)."""
        if name not in self._tables:
            self._tables[name] = [], []
            if self._present(name):
                try:
                    try:
                        self._tables[name] = read_csv(self.path / name)
                    except UnicodeDecodeError:           # a line cut inside a character, or no text at all
                        if not _cut_last_line(self.path / name):
                            raise
                        self._tables[name] = read_csv(self.path / name, errors="replace")
                except (OSError, csv.Error, UnicodeDecodeError) as exc:
                    self.damage(name, f"not a CSV file socialgym wrote ({type(exc).__name__}: {str(exc)[:80]})")
        return self._tables[name]

    def records(self, name: str) -> list[dict[str, str]]:
        """The rows of a CSV file of the run as dicts keyed by its header (a short row: the cells it has)."""
        header, rows = self.table(name)
        return [dict(zip(header, row)) for row in rows]

    rounds = property(lambda self: self.records(layout.ROUNDS), doc="rounds.csv: one record per agent and round.")
    network = property(lambda self: self.records(layout.NETWORK), doc="network.csv: one record per round.")
    surveys = property(lambda self: self.records(layout.SURVEYS), doc="surveys.csv: one record per agent, item and round.")

    def lines(self, name: str) -> list[dict | None]:
        """A JSON-lines file of the run: each non-empty line's object, None for a line that is no
        JSON object."""
        if name not in self._lines:
            self._lines[name] = found = []
            if self._present(name):
                try:
                    found.extend(value for value, _ in read_jsonl(self.path / name))
                except OSError as exc:
                    self.damage(name, f"could not be read to the end ({type(exc).__name__})")
        return self._lines[name]

    events = property(lambda self: self.lines(layout.EVENTS),
                      doc="events.jsonl: posts, comments, DMs, votes, tie updates and interventions.")

    def survey_means(self) -> dict[str, tuple[str, dict[int, float], int]]:
        """surveys.csv read back: ``"<survey>.<item>"`` -> (scale, {round: mean numeric answer},
        number of answers), over the agents that answered (status ok); free-text items and cells
        that are no number are left out."""
        sums: dict[str, dict[int, list[float]]] = {}
        scales: dict[str, str] = {}
        for row in self.surveys:
            try:
                r, value = int(row.get("round") or ""), float(row.get("answer") or "")
            except ValueError:
                continue
            if row.get("status") != "ok" or row.get("scale") == "text" or not math.isfinite(value):
                continue
            key = f"{row.get('survey')}.{row.get('item')}"
            scales[key] = str(row.get("scale"))
            sums.setdefault(key, {}).setdefault(r, []).append(value)
        return {k: (scales[k], {r: float(np.mean(v)) for r, v in by_round.items()}, sum(map(len, by_round.values())))
                for k, by_round in sums.items()}

    # ------------------------------------------------------------------------------ per-round files
    @cached_property
    def tie_files(self) -> dict[int, Path]:
        """round -> tie matrix file, in round order."""
        return layout.tie_files(self.path)

    @property
    def tie_rounds(self) -> list[int]:
        return list(self.tie_files)

    @cached_property
    def stray(self) -> list[str]:
        """Files in ``ties/``, ``decisions/`` and ``snapshots/`` named like no round's (left out)."""
        return [p.relative_to(self.path).as_posix() for p in layout.stray_round_files(self.path)]

    def ties(self, round: int, n: int | None = None):
        """W after ``round`` as CSR (checked by ``load_tie_matrix``; ``n``: the number of agents
        when known), None when there is no file for the round or it is damaged."""
        name = f"{layout.TIES}/round_{int(round):04d}.npz"
        file = self.tie_files.get(int(round))
        if file is None:
            self._present(name)                  # recorded as missing
            return None
        try:
            return load_tie_matrix(file, n)
        except ValueError as exc:
            self.damaged.setdefault(name, str(exc))
            return None

    def last_ties(self, n: int | None = None):
        """(round, W) of the latest tie matrix; None without any (``ties`` missing) or when it is damaged."""
        self._done.add(layout.TIES)
        if not self.tie_files:
            self._present(layout.TIES)
            return None
        number = max(self.tie_files)
        W = self.ties(number, n)
        return None if W is None else (number, W)

    def decisions(self):
        """The logged decisions (``rundir.decisions.read_decisions``): ({phase: Decisions}, unmapped
        counts); None without any (``decisions`` missing) or when one is damaged."""
        from socialgym.rundir.decisions import read_decisions

        self._done.add(layout.DECISIONS)
        if not layout.decision_files(self.path):
            self._present(layout.DECISIONS)
            return None
        try:
            return read_decisions([self.path])
        except ValueError as exc:
            self.damaged.setdefault(layout.DECISIONS, str(exc))
            return None


def _cut_last_line(path: Path) -> bool:
    """The bytes of ``path`` that are not UTF-8 lie in its last line, not its header (a line being
    written when the run stopped)."""
    data = path.read_bytes()
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return b"\n" in data[:exc.start] and b"\n" not in data[exc.start:].rstrip(b"\r\n")
    return True


_READERS = {layout.SUMMARY: "summary", layout.RUN_INFO: "info", layout.PERSONAS: "personas", layout.CONFIG: "config",
            layout.ROUNDS: "rounds", layout.NETWORK: "network", layout.SURVEYS: "surveys", layout.EVENTS: "events",
            layout.TIES: "last_ties", layout.DECISIONS: "decisions"}


def survey_means(run: str | os.PathLike) -> dict[str, tuple[str, dict[int, float], int]]:
    """:meth:`Run.survey_means` of the run in ``run``."""
    return Run(run).survey_means()
