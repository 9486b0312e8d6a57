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

# rounds.csv, one row per agent and round (read by the report, the viewer, wandb and sweeps)
REWARD_COLUMNS = (*REWARD_NAMES, "total")
ACTION_COUNTS = (*ACTION_TYPES, "votes_up", "votes_down", "invalid")
"""The agent's actions of the round by type (NOTs included), its votes and its invalid actions."""
COUNT_COLUMNS = (*ACTION_COUNTS, "fallbacks")
ROUND_COLUMNS = ("round", "agent", "group", "policy", "coached", *REWARD_COLUMNS, *COUNT_COLUMNS)
NETWORK_METRICS = ("n_edges", "density", "clustering", "lcc_fraction", "avg_shortest_path", "modularity",
                   "homophily", "directed_density", "directed_clustering")
EXPOSURE_METRICS = ("mean_topic_entropy", "deep_cocoon_share", "author_exposure_gini", "cross_cutting_share")
SURVEY_COLUMNS = ("round", "agent", "group", "policy", "survey", "item", "scale", "answer", "status", "source")
"""surveys.csv, one row per agent, item and round (socialgym.experiments.surveys)."""
TEXT_FILES = ("rounds.csv", "network.csv", "events.jsonl", "transcripts.jsonl", "surveys.csv", "interviews.jsonl")


class RunRecorder:
    def __init__(self, out: Path, *, agents: Sequence[str], groups: Sequence[str], kinds: Sequence[str],
                 coached: Sequence[bool], events: bool = True, ties: bool = True, transcripts: bool = False,
                 surveys: bool = False,
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
        self.network_columns = ("round", *NETWORK_METRICS, "n_ties", "mean_tie", "max_tie", *EXPOSURE_METRICS,
                                *(f"{m}:{g}" for m in ("deep_cocoon_share", "cross_cutting_share")
                                  for g in self.group_names),
                                "mean_total", "llm_calls", "prompt_tokens", "completion_tokens")
        (self.out / "ties").mkdir(parents=True, exist_ok=True)
        self._files: dict[str, io.TextIOWrapper] = {}
        self._hashes: dict[str, Any] = {}
        self._hashed: dict[str, int] = {}
        self.tie_digests: dict[str, str] = dict(tie_digests or {})
        self._writes = {"events.jsonl": events, "transcripts.jsonl": transcripts, "surveys.csv": surveys,
                        "interviews.jsonl": surveys}
        for name in TEXT_FILES:
            path = self.out / name
            if not self._writes.get(name, True) and not (path.exists() and path.stat().st_size):
                continue           # off and never written; one with rounds in it (a fork's copy) stays tracked
            fresh = not path.exists() or path.stat().st_size == 0
            self._hashes[name], self._hashed[name] = _file_digest(path)
            self._files[name] = open(path, "a", newline="", encoding="utf-8")
            if fresh and name.endswith(".csv"):
                columns = {"rounds.csv": ROUND_COLUMNS, "surveys.csv": SURVEY_COLUMNS}.get(name, self.network_columns)
                self._files[name].write(",".join(columns) + "\n")
        self._last_network: dict[str, Any] = {}
        self._fallbacks_seen = 0

    # ------------------------------------------------------------------ per round
    def transcript_line(self, entry: Mapping) -> None:
        """One LLM request (called from the client's loop thread; one line per call)."""
        f = self._files.get("transcripts.jsonl")
        if f is not None and self.transcripts:
            f.write(json.dumps(entry, ensure_ascii=False, default=str) + "\n")

    def event(self, entry: Mapping) -> None:
        """One extra line of events.jsonl (e.g. an applied intervention), when events are kept."""
        f = self._files.get("events.jsonl")
        if f is not None and self.events:
            f.write(json.dumps(entry, ensure_ascii=False, default=str) + "\n")

    def record_survey(self, rows: Sequence[Mapping], interviews: Sequence[Mapping]) -> None:
        """A round's survey answers: surveys.csv rows and, for free-text items, interviews.jsonl."""
        self._write_csv("surveys.csv", SURVEY_COLUMNS, rows)
        f = self._files["interviews.jsonl"]
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
        self._write_csv("rounds.csv", ROUND_COLUMNS, rows)

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
            network[f"deep_cocoon_share:{g}"] = (exposure.get("deep_cocoon_share_by_group") or {}).get(g)
            network[f"cross_cutting_share:{g}"] = (exposure.get("cross_cutting_share_by_group") or {}).get(g)
        network["mean_total"] = float(rec.totals.mean())
        total = usage.total() if usage is not None else {}
        network.update(llm_calls=int(total.get("requests", 0)), prompt_tokens=int(total.get("prompt_tokens", 0)),
                       completion_tokens=int(total.get("completion_tokens", 0)))
        self._write_csv("network.csv", self.network_columns, [network])

        transcript = env.round_transcript()
        posts = [e for e in transcript if e["kind"] in PUBLIC_TYPES]
        if self.events:
            f = self._files["events.jsonl"]
            for e in transcript:
                f.write(json.dumps({"round": r, **e}, ensure_ascii=False) + "\n")
            t = rec.ties
            for s, d, before, after, ev in zip(t.src.tolist(), t.dst.tolist(), t.before.tolist(),
                                               t.after.tolist(), t.evidence.tolist()):
                f.write(json.dumps({"round": r, "kind": "TIE", "src": self.agents[s], "dst": self.agents[d],
                                    "before": before, "after": after, "evidence": ev}) + "\n")
        if self.ties:
            import scipy.sparse as sp

            path = self.out / "ties" / f"round_{r:04d}.npz"
            tmp = path.with_suffix(".tmp.npz")
            sp.save_npz(tmp, W.astype(np.float32).tocsr(), compressed=True)
            self.tie_digests[path.name] = hashlib.sha256(tmp.read_bytes()).hexdigest()
            os.replace(tmp, path)
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
                **{f"ties/{k}": v for k, v in self.tie_digests.items()}}

    def close(self) -> None:
        for f in self._files.values():
            f.close()
        self._files = {}


def survey_means(path: Path) -> dict[str, tuple[str, dict[int, float], int]]:
    """surveys.csv read back: ``"<survey>.<item>"`` -> (scale, {round: mean numeric answer}, number
    of answers), over the agents that answered (status ok); free-text items and cells that are
    no number are left out (the report, sweeps and ``compare`` read answers through this)."""
    sums: dict[str, dict[int, list[float]]] = {}
    scales: dict[str, str] = {}
    if not Path(path).is_file():
        return {}
    with open(path, newline="", encoding="utf-8", errors="replace") as f:
        for row in csv.DictReader(f):
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


def truncate_outputs(out: Path, sizes: Mapping[str, int], rounds_done: int) -> None:
    """Cut the run's files back to a checkpoint: text files to their recorded sizes, tie
    matrices of later rounds deleted (an empty ``sizes`` means: nothing was completed)."""
    out = Path(out)
    for name in TEXT_FILES:
        path = out / name
        if not path.exists():
            continue
        if name in sizes:
            with open(path, "r+b") as f:
                f.truncate(sizes[name])
        else:
            path.unlink()
    for path in (out / "ties").glob("round_*.npz"):
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
        if not key.startswith("ties/"):
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
