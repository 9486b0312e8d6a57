"""Data collection for one run: the files of a run directory, written round by round.

Kept apart from the step logic (as Mesa keeps its DataCollector apart from the model): the
runner hands over the environment after each round, the recorder reads what it needs.

Crash safety: every file is append-only; after each round the recorder flushes and fsyncs
them and reports their sizes, which the checkpoint stores. ``resume`` cuts every file back to
those sizes, so a round half-written when the process died is written again, never twice.

Integrity: the recorder also keeps a SHA-256 of each text file's content so far (updated
from the bytes each round appended, so the cost does not grow with the file) and of each tie
matrix it wrote; the checkpoint stores them and ``resume`` checks the files against them
(:func:`verify_outputs`) before trusting the files on disk.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import os
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from socialgym.config import REWARD_NAMES
from socialgym.platform.actions import ACTION_TYPES, PUBLIC_TYPES
from socialgym.rundir import layout
from socialgym.rundir.files import atomic_write, open_append, own_dir, truncate
from socialgym.rundir.layout import EXPOSURE_METRICS, NETWORK_METRICS, ROUND_COLUMNS, SURVEY_COLUMNS, TEXT_FILES


class RunRecorder:
    def __init__(self, out: Path, *, agents: Sequence[str], groups: Sequence[str], kinds: Sequence[str],
                 coached: Sequence[bool], events: bool = True, ties: bool = True, transcripts: bool = False,
                 surveys: bool = False, llm: bool = False, routes: bool = False, fallbacks_written: int = 0,
                 network_every: int = 1, max_rounds: int | None = None,
                 tie_digests: Mapping[str, str] | None = None) -> None:
        self.out = Path(out)
        self.agents = list(agents)
        self.groups = list(groups)
        self.kinds = list(kinds)
        self.coached = [int(bool(c)) for c in coached]
        self.events, self.ties, self.transcripts = events, ties, transcripts
        self.network_every, self.max_rounds = network_every, max_rounds
        self.group_names = sorted({g for g in self.groups if g})
        self.network_columns = layout.network_columns(self.group_names)
        own_dir(self.out / layout.TIES)
        self._files: dict[str, io.TextIOWrapper] = {}
        self._hashes: dict[str, Any] = {}
        self._hashed: dict[str, int] = {}
        self.tie_digests: dict[str, str] = dict(tie_digests or {})
        self._writes = {layout.EVENTS: events, layout.TRANSCRIPTS: transcripts, layout.SURVEYS: surveys,
                        layout.INTERVIEWS: surveys, layout.FALLBACKS: llm, layout.ROUTES: routes}
        self._fallbacks_written = fallbacks_written     # usage.fallbacks already in fallbacks.jsonl
        for name in TEXT_FILES:
            path = self.out / name
            if not self._writes.get(name, True) and not (path.exists() and path.stat().st_size):
                continue           # off and never written; one with rounds in it (a fork's copy) stays tracked
            fresh = not path.exists() or path.stat().st_size == 0
            self._hashes[name], self._hashed[name] = _file_digest(path)
            self._files[name] = open_append(path)
            if fresh and name.endswith(".csv"):
                columns = {layout.ROUNDS: ROUND_COLUMNS, layout.SURVEYS: SURVEY_COLUMNS}.get(name, self.network_columns)
                self._files[name].write(",".join(columns) + "\n")
        self._last_network: dict[str, Any] = {}
        self._fallbacks_seen = 0

    # ------------------------------------------------------------------ per round
    def transcript_line(self, entry: Mapping) -> None:
        """One LLM request (called from the client's loop thread; one line per call)."""
        f = self._files.get(layout.TRANSCRIPTS)
        if f is not None and self.transcripts:
            f.write(json.dumps(entry, ensure_ascii=False, default=str) + "\n")

    def route_line(self, entry: Mapping) -> None:
        """One event of the LLM router (a failover, a breaker opening or closing), from the
        client's loop thread; one line each in llm_routes.jsonl."""
        f = self._files.get(layout.ROUTES)
        if f is not None:
            f.write(json.dumps(entry, ensure_ascii=False, default=str) + "\n")

    def event(self, entry: Mapping) -> None:
        """One extra line of events.jsonl (e.g. an applied intervention), when events are kept."""
        f = self._files.get(layout.EVENTS)
        if f is not None and self.events:
            f.write(json.dumps(entry, ensure_ascii=False, default=str) + "\n")

    def record_fallbacks(self, usage) -> None:
        """Every fallback of the LLM usage log not written yet, one line each in fallbacks.jsonl:
        agent, round, purpose, slot, the reason and what was used instead."""
        f = self._files.get(layout.FALLBACKS)
        if f is None or usage is None:
            return
        for fb in usage.fallbacks[self._fallbacks_written:]:
            f.write(json.dumps({"agent": fb.agent, "round": fb.round, "purpose": fb.purpose, "slot": fb.slot,
                                "reason": fb.reason, "used": fb.used}, ensure_ascii=False, default=str) + "\n")
        self._fallbacks_written = len(usage.fallbacks)

    def record_survey(self, rows: Sequence[Mapping], interviews: Sequence[Mapping]) -> None:
        """A round's survey answers: surveys.csv rows and, for free-text items, interviews.jsonl."""
        self._write_csv(layout.SURVEYS, SURVEY_COLUMNS, rows)
        f = self._files[layout.INTERVIEWS]
        for entry in interviews:
            f.write(json.dumps(entry, ensure_ascii=False, default=str) + "\n")

    def record_round(self, env, usage=None) -> tuple[list[dict], dict, list[dict]]:
        """Write the round the env just closed; returns (rounds rows, network row, public posts)."""
        rec = env.last_round
        r = rec.round
        n = len(self.agents)
        batch = rec.batch
        counts = np.zeros((n, len(ACTION_TYPES)), np.int64)
        np.add.at(counts, (batch.sender.astype(np.int64), batch.kind.astype(np.int64)), 1)
        counts[:, ACTION_TYPES.index("NOT")] += env.config.n_actions - counts.sum(axis=1)   # NOTs are not stored
        voter = batch.vote_voter.astype(np.int64)
        up = np.bincount(voter[batch.vote_value > 0], minlength=n)
        down = np.bincount(voter[batch.vote_value < 0], minlength=n)
        fallbacks = np.zeros(n, np.int64)
        if usage is not None:
            index = {a: i for i, a in enumerate(self.agents)}
            for f in usage.fallbacks[self._fallbacks_seen:]:     # only those since the last round
                if f.round == r and f.agent in index:
                    fallbacks[index[f.agent]] += 1
            self._fallbacks_seen = len(usage.fallbacks)
        rows = []
        for i, agent in enumerate(self.agents):
            row = {"round": r, "agent": agent, "group": self.groups[i], "policy": self.kinds[i],
                   "coached": self.coached[i]}
            row.update(zip(REWARD_NAMES, rec.components[i].tolist()))
            row["total"] = float(rec.totals[i])
            row.update(zip(ACTION_TYPES, counts[i].tolist()))
            row.update(votes_up=int(up[i]), votes_down=int(down[i]), invalid=len(rec.invalid.get(i, [])),
                       fallbacks=int(fallbacks[i]))
            rows.append(row)
        self._write_csv(layout.ROUNDS, ROUND_COLUMNS, rows)

        W = env.tie_matrix()
        network = {"round": r}
        if r % self.network_every == 0 or r == self.max_rounds or not self._last_network:
            metrics = env.network_metrics()
            self._last_network = {k: metrics.get(k) for k in NETWORK_METRICS}
        network.update(self._last_network)
        network.update(n_ties=int(W.nnz), mean_tie=float(W.data.mean()) if W.nnz else 0.0,
                       max_tie=float(W.data.max()) if W.nnz else 0.0)
        exposure = env.exposure_metrics()
        for key in EXPOSURE_METRICS:
            network[key] = exposure.get(key)
        for g in self.group_names:
            for metric in layout.GROUP_EXPOSURE_METRICS:
                network[f"{metric}:{g}"] = (exposure.get(f"{metric}_by_group") or {}).get(g)
        network["mean_total"] = float(rec.totals.mean())
        total = usage.total() if usage is not None else {}
        network.update(llm_calls=int(total.get("requests", 0)), prompt_tokens=int(total.get("prompt_tokens", 0)),
                       completion_tokens=int(total.get("completion_tokens", 0)))
        self._write_csv(layout.NETWORK, self.network_columns, [network])

        transcript = env.round_transcript()
        posts = [e for e in transcript if e["kind"] in PUBLIC_TYPES]
        if self.events:
            f = self._files[layout.EVENTS]
            for e in transcript:
                f.write(json.dumps({"round": r, **e}, ensure_ascii=False) + "\n")
            t = rec.ties
            for s, d, before, after, ev in zip(t.src.tolist(), t.dst.tolist(), t.before.tolist(),
                                               t.after.tolist(), t.evidence.tolist()):
                f.write(json.dumps({"round": r, "kind": "TIE", "src": self.agents[s], "dst": self.agents[d],
                                    "before": before, "after": after, "evidence": ev}) + "\n")
        if self.ties:
            import scipy.sparse as sp

            path = layout.tie_path(self.out, r)
            buffer = io.BytesIO()
            sp.save_npz(buffer, W.astype(np.float32).tocsr(), compressed=True)
            self.tie_digests[path.name] = hashlib.sha256(buffer.getvalue()).hexdigest()
            atomic_write(path, buffer.getvalue())
        return rows, network, posts

    def _write_csv(self, name: str, columns: Sequence[str], rows: Sequence[Mapping]) -> None:
        writer = csv.writer(self._files[name], lineterminator="\n")
        for row in rows:
            writer.writerow([_cell(row.get(c)) for c in columns])

    # ------------------------------------------------------------------ durability
    def sync(self) -> dict[str, int]:
        """Flush and fsync every file; their sizes (the checkpoint's truncation points)."""
        sizes = {}
        for name, f in self._files.items():
            f.flush()
            os.fsync(f.fileno())
            sizes[name] = f.tell()
            with open(self.out / name, "rb") as g:     # this round's bytes, back from the page cache
                g.seek(self._hashed[name])
                chunk = g.read(sizes[name] - self._hashed[name])
            self._hashes[name].update(chunk)
            self._hashed[name] += len(chunk)
        return sizes

    def digests(self) -> dict[str, str]:
        """SHA-256 of each text file's content up to the last :meth:`sync` and of each tie matrix."""
        return {**{name: h.hexdigest() for name, h in self._hashes.items()},
                **{f"{layout.TIES}/{k}": v for k, v in self.tie_digests.items()}}

    def close(self) -> None:
        for f in self._files.values():
            f.close()
        self._files = {}


def truncate_outputs(out: Path, sizes: Mapping[str, int], rounds_done: int) -> None:
    """Cut the run's files back to a checkpoint: text files to their recorded sizes, tie
    matrices of later rounds deleted (an empty ``sizes`` means: nothing was completed)."""
    out = Path(out)
    for name in TEXT_FILES:
        path = out / name
        if not path.exists():
            continue
        if name in sizes:
            truncate(path, sizes[name])
        else:
            path.unlink()
    for path in (out / layout.TIES).glob("round_*.npz"):
        stem = path.name[len("round_"):].split(".")[0]
        if not stem.isdigit() or int(stem) > rounds_done:
            path.unlink()


def verify_outputs(out: Path, sizes: Mapping[str, int], digests: Mapping[str, str]) -> None:
    """Check the run's files against a checkpoint: each text file at least as long as recorded
    with the recorded digest of that prefix, each tie matrix present and unchanged. Raises
    ``ValueError`` naming the first file that differs (the caller turns it into a RunError)."""
    out = Path(out)
    for name, size in sizes.items():
        path = out / name
        if not path.exists():
            raise ValueError(f"{path} is missing (the checkpoint recorded {size} bytes)")
        actual = path.stat().st_size
        if actual < size:
            raise ValueError(f"{path} has {actual} bytes, fewer than the {size} the checkpoint recorded")
        if name in digests:
            h, _ = _file_digest(path, limit=size)
            if h.hexdigest() != digests[name]:
                raise ValueError(f"{path} differs from what this run wrote (its first {size} bytes changed)")
    for key, digest in digests.items():
        if not key.startswith(layout.TIES + "/"):
            continue
        path = out / key
        if not path.exists():
            raise ValueError(f"{path} is missing")
        if hashlib.sha256(path.read_bytes()).hexdigest() != digest:
            raise ValueError(f"{path} differs from what this run wrote")


def _file_digest(path: Path, limit: int | None = None):
    """(sha256 object over the file's first ``limit`` bytes or all of it, bytes read)."""
    h, n = hashlib.sha256(), 0
    if not path.exists():
        return h, 0
    with open(path, "rb") as f:
        while limit is None or n < limit:
            chunk = f.read(1 << 20 if limit is None else min(1 << 20, limit - n))
            if not chunk:
                break
            h.update(chunk)
            n += len(chunk)
    return h, n


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, float):
        return "nan" if math.isnan(value) else repr(value)
    return value
