"""What the realism scorecard reads from one run directory, as arrays (``load_run_data``).

From ``events.jsonl``: every POST, COM and DM (sender, recipient, content id, replied-to id,
topic, sentiment) and every vote; from ``rounds.csv``: the agents and who acted in each round;
from ``ties/``: the last tie matrix. Missing pieces are recorded in ``RunData.missing`` (the
scorecard shows the facts that need them as not measurable), never guessed.
"""

from __future__ import annotations


from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from socialgym.platform.actions import ACTION_TYPES
from socialgym.rundir import Run, layout
from socialgym.rundir.files import to_int64

CONTENT_KINDS = ("POST", "COM", "DM")
OUT_OF_RANGE = "events whose id, target_id or round is not an integer in 0..2**63-1"
ACTIVE_COLUMNS = ("POST", "COM", "DM")
"""rounds.csv's count columns whose sum > 0 makes an agent active in a round."""
assert set(ACTIVE_COLUMNS) <= set(ACTION_TYPES)


@dataclass
class RunData:
    """One run's columns. Agent references are indices into ``agents``; -1 = none."""

    path: Path
    agents: list[str]
    kind: np.ndarray                 # per content item: index into CONTENT_KINDS
    content_id: np.ndarray
    sender: np.ndarray
    recipient: np.ndarray
    target: np.ndarray               # replied-to content id, -1 for a POST or a new DM
    topic: np.ndarray                # object array of topic names
    sentiment: np.ndarray
    round: np.ndarray                # per content item: its round
    vote_item: np.ndarray
    vote_value: np.ndarray
    active: np.ndarray | None        # (rounds, agents) bool, None without rounds.csv
    active_rounds: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # the round of each row
    ties: Any = None                 # scipy CSR of the last tie matrix
    missing: list[str] = field(default_factory=list)

    @property
    def n_agents(self) -> int:
        return len(self.agents)

    def of_kind(self, *kinds: str) -> np.ndarray:
        """Boolean mask of the content items of these kinds."""
        return np.isin(self.kind, [CONTENT_KINDS.index(k) for k in kinds])

    def main_topics(self) -> np.ndarray:
        """Each agent's most frequent topic over its POSTs (ties: the first in name order);
        "" for an agent that never posted."""
        posts = self.of_kind("POST") & (self.sender >= 0)
        out = np.full(self.n_agents, "", dtype=object)
        if not posts.any():
            return out
        names, codes = np.unique(self.topic[posts].astype(str), return_inverse=True)
        counts = np.zeros((self.n_agents, names.size), np.int64)
        np.add.at(counts, (self.sender[posts], codes), 1)
        posted = counts.sum(axis=1) > 0
        out[posted] = names[np.argmax(counts[posted], axis=1)]
        return out


def load_run_data(run_dir: str | Path) -> RunData:
    """Read one run directory. Raises FileNotFoundError when it is no run directory (no
    ``rounds.csv`` and no ``events.jsonl``) and ValueError (``RunFileError``) for a file socialgym
    did not write."""
    path = Path(run_dir)
    if not path.is_dir():
        raise FileNotFoundError(f"{path} is not a directory")
    run = Run(path)
    if not run.table(layout.ROUNDS)[0] and not run.events and {layout.ROUNDS, layout.EVENTS} <= set(run.missing):
        raise FileNotFoundError(f"{path} is not a run directory: it has neither {layout.ROUNDS} nor {layout.EVENTS}")
    run.check(layout.ROUNDS, layout.EVENTS)
    missing: list[str] = [f"{name} names no round (left out)" for name in run.stray]
    summary_agents = (run.summary or {}).get("agents")
    order = [str(a) for a in summary_agents] if isinstance(summary_agents, list) and summary_agents else None
    agents, active, active_rounds = _read_rounds(run, missing, order)
    index = {a: i for i, a in enumerate(agents)}
    columns = _read_events(run, index, agents, missing)
    data = RunData(path=path, agents=agents, active=active, active_rounds=active_rounds, missing=missing, **columns)
    found = run.last_ties(len(agents) or None)
    run.check(layout.TIES)
    data.ties = None if found is None else found[1]
    missing += [f"no {name}" for name in (layout.TIES,) if name in run.missing]
    return data


def _read_rounds(run: Run, missing: list[str], order: list[str] | None
                 ) -> tuple[list[str], np.ndarray | None, np.ndarray]:
    if layout.ROUNDS in run.missing:
        missing.append(f"no {layout.ROUNDS}")
        return [], None, np.zeros(0, np.int64)
    header, rows = run.table(layout.ROUNDS)
    need = ("round", "agent", *ACTIVE_COLUMNS)
    absent = [c for c in need if c not in header]
    if absent:
        raise run.damage(layout.ROUNDS, f"lacks the column(s) {', '.join(absent)}: not a {layout.ROUNDS} socialgym wrote")
    col = {c: header.index(c) for c in need}
    rows = [r for r in rows if len(r) >= len(header)]
    seen = {r[col["agent"]] for r in rows}
    # the env's order when summary.json gives it (agents it lacks go last), else agent_2 before agent_10
    agents = [a for a in order if a in seen] + sorted(seen - set(order), key=_agent_order) if order \
        else sorted(seen, key=_agent_order)
    numbered = [(_round_cell(r[col["round"]]), r) for r in rows]         # each round cell parsed once
    unreadable = sum(rnd is None for rnd, _ in numbered)
    if unreadable:
        missing.append(f"{unreadable} {layout.ROUNDS} row(s) whose round is not a whole number (left out)")
    numbered = [(rnd, r) for rnd, r in numbered if rnd is not None]
    rounds = sorted({rnd for rnd, _ in numbered})
    if not rounds:
        return agents, None, np.zeros(0, np.int64)
    a_index, r_index = {a: i for i, a in enumerate(agents)}, {r: i for i, r in enumerate(rounds)}
    active = np.zeros((len(rounds), len(agents)), bool)
    for rnd, r in numbered:
        acted = sum(_count(r[col[c]]) for c in ACTIVE_COLUMNS) > 0
        active[r_index[rnd], a_index[r[col["agent"]]]] |= acted
    return agents, active, np.asarray(rounds, np.int64)


def _read_events(run: Run, index: dict[str, int], agents: list[str], missing: list[str]) -> dict:
    rows: list[tuple] = []
    votes: list[tuple[int, int]] = []
    uncounted: dict[str, int] = {}
    if layout.EVENTS in run.missing:
        missing.append(f"no {layout.EVENTS}")
    else:
        for event in run.events:
            if event is None:
                continue
            kind = event.get("kind")
            if kind == "INTERVENTION" and event.get("intervention") == "post":     # an injected POST
                event = {**event, "kind": "POST", "sender": event.get("author")}
                kind = "POST"
            if kind in CONTENT_KINDS + ("VOTE",) and any(
                    event.get(k) is not None and _int(event.get(k)) < 0 for k in ("id", "round", "target_id")):
                uncounted[OUT_OF_RANGE] = uncounted.get(OUT_OF_RANGE, 0) + 1
                continue
            if kind == "COM" and _int(event.get("target_id")) < 0:
                uncounted["COM without target_id"] = uncounted.get("COM without target_id", 0) + 1
                continue
            if kind in CONTENT_KINDS:
                rows.append((CONTENT_KINDS.index(kind), _int(event.get("id")), _agent(event.get("sender"), index, agents),
                             _agent(event.get("recipient"), index, agents), _int(event.get("target_id")),
                             str(event.get("topic", "")), _float(event.get("sentiment")), _int(event.get("round"), 0)))
            elif kind == "VOTE":
                votes.append((_int(event.get("id")), _int(event.get("value"), 0)))
    missing += [f"{n} {what} (left out)" for what, n in uncounted.items()]
    kinds, ids, send, recv, target, topic, sent, rnd = (list(c) for c in zip(*rows)) if rows else ([],) * 8
    vote_item, vote_value = (list(c) for c in zip(*votes)) if votes else ([], [])
    return dict(kind=np.asarray(kinds, np.int64), content_id=np.asarray(ids, np.int64),
                sender=np.asarray(send, np.int64), recipient=np.asarray(recv, np.int64),
                target=np.asarray(target, np.int64), topic=np.asarray(topic, dtype=object),
                sentiment=np.asarray(sent, np.float64), round=np.asarray(rnd, np.int64), vote_item=np.asarray(vote_item, np.int64),
                vote_value=np.asarray(vote_value, np.int64))


def _agent(value: Any, index: dict[str, int], agents: list[str]) -> int:
    """Index of an agent id; an agent seen only in events.jsonl (no rounds.csv) is added."""
    if value is None:
        return -1
    name = str(value)
    if name not in index:
        index[name] = len(agents)
        agents.append(name)
    return index[name]


def _agent_order(name: str) -> tuple:
    """agent_2 before agent_10; other names after, in text order."""
    head, _, tail = name.rpartition("_")
    return (0, head, int(tail), "") if tail.isdigit() else (1, "", 0, name)


def _int(value: Any, default: int = -1) -> int:
    """An id, round or vote value (see ``to_int64``), else ``default``."""
    value = to_int64(value)
    return default if value is None else value


def _round_cell(cell: str) -> int | None:
    """A rounds.csv round: ASCII digits within int64 (``str.isdigit`` also takes "²"), else None."""
    value = to_int64(cell, text=True)
    return value if value is not None and value >= 0 else None


def _float(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else float("nan")


def _count(cell: str) -> float:
    try:
        return float(cell)
    except ValueError:
        return 0.0
