"""Decision logs: what chosen agents saw and chose each round, kept for behaviour cloning.

A run with ``logging.decisions`` writes ``decisions/round_NNNN.npz`` after each round
(:class:`DecisionLog`). Each phase (``act``, ``vote``) holds, for the logged agents: their index,
their numeric observation (``self``, ``feed``, ``dms``, ``vote_items``: the arrays a neural policy
reads), the structured choice written in the numeric encoding and which of its components the
choice fixed (``socialgym.envs.feed.convert``), and the vocabulary size (the topic mask). The
file also holds the action layout, so a reader needs nothing else. :func:`read_decisions` joins
the files of several runs into one set of arrays.
"""

from __future__ import annotations

import dataclasses
import io
import json
from collections import Counter
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np

from socialgym.baselines.kinds import kinds_where
from socialgym.envs.feed.convert import act_to_numeric, votes_to_numeric
from socialgym.envs.feed.encoding import PHASES, ActionLayout
from socialgym.rundir import layout as files
from socialgym.rundir.files import atomic_write

OBS_KEYS = ("self", "feed", "dms", "vote_items")
LAYOUT_FIELDS = tuple(f.name for f in dataclasses.fields(ActionLayout))
DECISION_FORMAT = 1
DECISION_MODES = ("none", "llm", "all")
"""``logging.decisions``: no logs, the LLM-driven agents' (policy kinds ``LLM_KINDS``), every agent's."""
LLM_KINDS = kinds_where(llm_logged=True)


class DecisionLog:
    """Collects one round's decisions of the agents ``logged`` (indices into the env's agents),
    phase by phase, and writes them as one file. Needs observations with a numeric part
    (``obs_format="both"``)."""

    def __init__(self, layout: ActionLayout, agents: Iterable[str], logged: Iterable[int]) -> None:
        self.layout, self.agents = layout, list(agents)
        self.logged = np.asarray(sorted(set(int(i) for i in logged)), np.int64)
        self.unmapped: Counter = Counter()
        self._phases: dict[str, dict] = {}
        self._last_phase: str | None = None

    def observe(self, observations: Mapping[str, Any], actions: Mapping[str, Any], n_topics: int) -> None:
        """The logged agents' observations and the actions they answered with (before the step)."""
        rows = {k: [] for k in (*OBS_KEYS, "action", "relevant")}
        agent_ids, phase = [], None
        for i in self.logged.tolist():
            agent = self.agents[i]
            obs = observations.get(agent)
            if obs is None or agent not in actions:
                continue            # not acting this step (a finished or removed agent)
            numeric = obs.get("numeric")
            if numeric is None:
                raise ValueError("decision logs need numeric observations (obs_format='both')")
            phase = obs["phase"]
            try:
                if phase == "act":
                    vector, relevant = act_to_numeric(obs, actions[agent], self.layout, i, self.unmapped)
                else:
                    vector, relevant = votes_to_numeric(obs, actions[agent], self.layout, self.unmapped)
            except (TypeError, ValueError):     # a malformed action: the env records it as invalid
                self.unmapped["payload"] += 1
                continue
            for k in OBS_KEYS:
                rows[k].append(np.asarray(numeric[k], np.float32))
            rows["action"].append(vector)
            rows["relevant"].append(relevant)
            agent_ids.append(i)
        self._last_phase = phase
        if not agent_ids:
            return
        self._phases[phase] = {"agent": np.asarray(agent_ids, np.int64), "n_topics": np.int64(n_topics),
                               **{k: np.stack(v) for k, v in rows.items()}}

    def drop_invalid(self, infos: Mapping[str, Any]) -> None:
        """After the step just observed: a choice the env refused (``infos[agent]["invalid"]``)
        taught nothing that happened, so its components stop counting — the act slot named, or
        the agent's whole act or vote part when no slot is named. Counted as ``invalid``."""
        phase = self._last_phase
        data = self._phases.get(phase) if phase is not None else None
        if data is None:
            return
        w, L = self.layout.slot_width, self.layout.act_length
        for row, i in enumerate(data["agent"].tolist()):
            for rec in (infos.get(self.agents[i]) or {}).get("invalid") or ():
                if rec.get("phase") != phase:
                    continue
                slot = rec.get("slot")
                if phase == "act" and isinstance(slot, int) and 0 <= slot < self.layout.n_actions:
                    data["relevant"][row, slot * w:(slot + 1) * w] = False
                else:
                    data["relevant"][row, slice(0, L) if phase == "act" else slice(L, None)] = False
                self.unmapped["invalid"] += 1

    def write(self, run: Path, round: int) -> None:
        """This round's file (atomically); the collected decisions are then cleared."""
        arrays: dict[str, np.ndarray] = {"format": np.int64(DECISION_FORMAT), "round": np.int64(round),
                                         "layout": np.asarray([getattr(self.layout, f) for f in LAYOUT_FIELDS],
                                                              np.int64)}
        for phase, data in self._phases.items():
            arrays.update({f"{phase}_{k}": v for k, v in data.items()})
        arrays["unmapped"] = np.asarray(json.dumps(dict(self.unmapped)))
        buffer = io.BytesIO()
        np.savez_compressed(buffer, **arrays)
        path = files.decision_path(run, round)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, buffer.getvalue())
        self._phases, self.unmapped, self._last_phase = {}, Counter(), None


def decision_log(env, kinds, mode: str) -> DecisionLog | None:
    """The decision log of a run whose agents have policy ``kinds``, under ``logging.decisions``
    ``mode``; None when nothing is logged."""
    if mode not in DECISION_MODES:
        raise ValueError(f"logging.decisions must be one of {DECISION_MODES}, got {mode!r}")
    logged = [i for i, k in enumerate(kinds) if mode == "all" or (mode == "llm" and k in LLM_KINDS)]
    return DecisionLog(env.layout, env.possible_agents, logged) if logged else None


def clear_decisions(run: Path, after_round: int) -> None:
    """Delete the decision files of rounds after ``after_round`` (a resume replays them)."""
    for r, path in files.decision_files(run).items():
        if r > after_round:
            path.unlink()


@dataclasses.dataclass
class Decisions:
    """The decisions of one phase from one or more runs, row-aligned."""

    phase: str
    layout: ActionLayout
    run: np.ndarray           # index of the run directory each row comes from
    round: np.ndarray
    agent: np.ndarray
    n_topics: np.ndarray
    n_agents: np.ndarray      # the population size of each row's run (new DMs' recipients are relative to it)
    obs: dict                 # OBS_KEYS -> stacked arrays
    action: np.ndarray        # (rows, L) the numeric encoding of the choice
    relevant: np.ndarray      # (rows, L) which components the choice fixed

    def __len__(self) -> int:
        return len(self.agent)

    def select(self, rows: np.ndarray) -> "Decisions":
        return dataclasses.replace(self, run=self.run[rows], round=self.round[rows], agent=self.agent[rows],
                                   n_topics=self.n_topics[rows], n_agents=self.n_agents[rows],
                                   obs={k: v[rows] for k, v in self.obs.items()},
                                   action=self.action[rows], relevant=self.relevant[rows])


def read_decisions(runs: Iterable[str | Path]) -> tuple[dict[str, Decisions], Counter]:
    """The act and vote decisions of every round of ``runs`` (each a run directory with a
    ``decisions`` folder), and the components that had no numeric twin, summed. Raises
    ``ValueError`` naming the run when one has none or the runs' layouts differ (a network fits
    one per-agent layout; the population size may differ)."""
    parts: dict[str, list[dict]] = {p: [] for p in PHASES}
    unmapped: Counter = Counter()
    lay0, widths = None, {}
    for r_index, run in enumerate(runs):
        found = files.decision_files(Path(run))
        if not found:
            raise ValueError(f"{run}: no decision logs (run it with logging.decisions: llm or all)")
        for rnd, path in found.items():
            data = load_decision_file(path)
            lay = ActionLayout(*(int(v) for v in data["layout"]))
            if lay0 is not None and interface_of(lay) != interface_of(lay0):
                raise ValueError(f"{path}: its agents' layout {interface_of(lay)} differs from the first run's "
                                 f"{interface_of(lay0)}")
            for k, shape in ((k, data[f"{p}_{k}"].shape[1:]) for p in PHASES if f"{p}_agent" in data
                             for k in OBS_KEYS):
                if widths.setdefault(k, shape) != shape:
                    raise ValueError(f"{path}: its {k!r} observations have shape {shape} per agent, the first "
                                     f"file's {widths[k]}")
            lay0 = lay0 or lay
            unmapped.update(data["unmapped"])
            for phase in PHASES:
                if f"{phase}_agent" in data:
                    rows = {k[len(phase) + 1:]: v for k, v in data.items() if k.startswith(phase + "_")}
                    n = len(rows["agent"])
                    rows.update(run=np.full(n, r_index), round=np.full(n, rnd),
                                n_topics=np.full(n, int(rows["n_topics"])), n_agents=np.full(n, lay.n_agents))
                    parts[phase].append(rows)
    out = {}
    for phase, chunks in parts.items():
        if not chunks:
            continue
        cat = {k: np.concatenate([c[k] for c in chunks]) for k in chunks[0]}
        out[phase] = Decisions(phase, lay0, cat["run"], cat["round"], cat["agent"], cat["n_topics"],
                               cat["n_agents"], {k: cat[k] for k in OBS_KEYS}, cat["action"], cat["relevant"])
    return out, unmapped


_PHASE_KEYS = ("agent", "n_topics", *OBS_KEYS, "action", "relevant")
_MAX_DECISION_FILE = 1 << 31
"""A decision file's largest size (2 GiB; a round of 100k logged agents is well under it): a
larger one is refused before numpy inflates it."""


def load_decision_file(path: Path) -> dict[str, Any]:
    """One ``decisions/round_NNNN.npz``, every array checked against the file's own layout before
    anything computes with it: ``ValueError`` naming the file and what is wrong for a damaged,
    truncated or edited file (not a zip, a missing or extra array, a wrong dtype or shape, an
    agent index or a choice outside the layout, a non-finite observation). Returns the arrays,
    ``unmapped`` as a dict."""
    path = Path(path)

    def bad(why: str) -> ValueError:
        return ValueError(f"{path}: not a usable decision log ({why})")

    if path.stat().st_size > _MAX_DECISION_FILE:
        raise bad(f"{path.stat().st_size:,} bytes, more than the {_MAX_DECISION_FILE:,} a decision file may have")
    try:
        with np.load(path, allow_pickle=False) as npz:
            data = {k: npz[k] for k in npz.files}
    except Exception as exc:    # BadZipFile, EOFError, zlib.error, ValueError (pickled array), OSError
        raise bad(f"cannot be read: {type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else ''}") \
            from None

    def integer(name: str, shape: tuple = ()) -> np.ndarray:
        value = data.get(name)
        if value is None:
            raise bad(f"array {name!r} is missing")
        if value.dtype.kind not in "iu" or value.shape != shape:
            raise bad(f"{name!r} must be integers of shape {shape}, got {value.dtype} {value.shape}")
        return value

    if int(integer("format")) != DECISION_FORMAT:
        raise bad(f"format {int(data['format'])}, expected {DECISION_FORMAT}")
    integer("round")
    raw = integer("layout", (len(LAYOUT_FIELDS),))
    if (raw < 0).any() or (raw > 1 << 31).any() or raw[0] < 2:
        raise bad(f"layout {raw.tolist()} is not a valid action layout")
    lay = ActionLayout(*(int(v) for v in raw))
    known = {"format", "round", "layout", "unmapped"} | {f"{p}_{k}" for p in PHASES for k in _PHASE_KEYS}
    if set(data) - known:
        raise bad(f"unknown arrays {sorted(set(data) - known)[:5]}")
    unmapped = data.get("unmapped")
    try:
        counts = json.loads(str(unmapped)) if unmapped is not None and unmapped.dtype.kind == "U" else None
    except ValueError:
        counts = None
    if not isinstance(counts, dict) or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0
                                               for v in counts.values()):
        raise bad("'unmapped' must be a JSON object of counts")
    data["unmapped"] = counts
    for phase in PHASES:
        _check_phase(data, phase, lay, bad)
    return data


_OBS_DIMS = {"self": 2, "feed": 3, "dms": 3, "vote_items": 3}


def _check_phase(data: dict, phase: str, lay: ActionLayout, bad) -> None:
    """One phase's arrays of a decision file against its layout (``bad(why)`` makes the error)."""
    present = [k for k in _PHASE_KEYS if f"{phase}_{k}" in data]
    if not present:
        return
    if len(present) != len(_PHASE_KEYS):
        missing = sorted(set(_PHASE_KEYS) - set(present))
        raise bad(f"phase {phase!r} lacks {', '.join(missing)}")
    agent = data[f"{phase}_agent"]
    n = len(agent) if agent.ndim == 1 else -1
    if agent.dtype.kind not in "iu" or n < 0:
        raise bad(f"'{phase}_agent' must be a vector of integers")
    if n and (agent.min() < 0 or agent.max() >= lay.n_agents):
        raise bad(f"'{phase}_agent' holds an agent index outside 0..{lay.n_agents - 1}")
    topics = data[f"{phase}_n_topics"]
    if topics.dtype.kind not in "iu" or topics.shape != ():
        raise bad(f"'{phase}_n_topics' must be one integer, got {topics.dtype} {topics.shape}")
    if not 0 <= int(topics) <= lay.max_topics:
        raise bad(f"'{phase}_n_topics' {int(topics)} is outside 0..{lay.max_topics}")
    for k in OBS_KEYS:
        v = data[f"{phase}_{k}"]
        if v.dtype.kind != "f" or v.ndim != _OBS_DIMS[k] or len(v) != n:
            raise bad(f"'{phase}_{k}' must be floats with {_OBS_DIMS[k]} dimensions and {n} rows, "
                      f"got {v.dtype} {v.shape}")
        if not np.isfinite(v).all():
            raise bad(f"'{phase}_{k}' holds NaN or infinite values")
    action, relevant = data[f"{phase}_action"], data[f"{phase}_relevant"]
    if action.dtype.kind not in "iu" or action.shape != (n, lay.length):
        raise bad(f"'{phase}_action' must be integers of shape ({n}, {lay.length}), got {action.dtype} "
                  f"{action.shape}")
    if relevant.dtype != bool or relevant.shape != (n, lay.length):
        raise bad(f"'{phase}_relevant' must be booleans of shape ({n}, {lay.length}), got {relevant.dtype} "
                  f"{relevant.shape}")
    if n and ((action < 0) | (action >= lay.nvec)).any():
        column = int(np.argwhere((action < 0) | (action >= lay.nvec))[0, 1])
        raise bad(f"'{phase}_action' holds a choice outside its range in column {column}")


def interface_of(lay: ActionLayout) -> tuple:
    """The per-agent part of a layout (all but the population size): what one network fits."""
    return tuple(getattr(lay, f) for f in LAYOUT_FIELDS if f != "n_agents")
