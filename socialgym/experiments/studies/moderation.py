"""The moderation-strategy experiment (paper §4–§5, Algorithm 1): the six strategies compared
over several synthetic discussions, annotated by k LLM annotators.

    socialgym moderation --out runs/moderation                     # embedded model, tiny run
    socialgym moderation --base-url http://127.0.0.1:8000/v1 --model qwen2.5 \\
        --discussions 20 --turns 14 --users 7 --annotators 10 --out runs/moderation

For discussion ``i`` every strategy gets the same users (SDBs drawn from a pool), roles, topic
and seeds, so strategies are compared on common random numbers. Each finished discussion is
appended to ``discussions.jsonl`` at once (fsynced): re-running with the same ``--out`` skips
what is done, and the LLM response cache replays what was sent. Then:

- ``comments.csv``: one row per user comment (strategy, discussion, turn, role, mean toxicity
  and argument quality, their nDFU, words);
- ``pairwise_toxicity.md/.csv``, ``pairwise_argument_quality.md/.csv``: mean differences
  between strategies with Student's t-test stars (paper Fig. 4 / Fig. 9; cell = row − column);
- ``ols_toxicity.md/.csv``, ``ols_argument_quality.md/.csv``: OLS of the score on strategy,
  turn and strategy × turn, reference "no moderator" (paper Tables 1–2); ``time`` is the user
  turn (1..max_turns), comparable with and without a moderator;
- ``summary.md``/``summary.json``: per strategy means of toxicity, argument quality, ROUGE-L
  diversity, comment length and moderator interventions; LLM usage and fallbacks;
- ``plots/``: both pairwise heatmaps, toxicity over turns, diversity, comment lengths,
  interventions.

``--no-llm`` runs the same pipeline with scripted users, the rule-based moderator (the same
for all five moderated strategies) and the lexicon annotators: a check of the machinery, not
of the strategies.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import dataclasses
import json
import os
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from socialgym.discussion import (
    MODERATOR, STRATEGIES, STRATEGY_LABELS, comment_lengths, diversity, generate_sdbs, run_discussion,
    score_discussion,
)
from socialgym.experiments.analysis.discussion_analysis import pairwise_mean_differences, stars, strategy_time_ols
from socialgym.experiments.define import LLMConfig, llm_section
from socialgym.rundir.files import to_float
from socialgym.llm.sanitize import drop_secrets
from socialgym.platform.validation import check_int
from socialgym.rundir import kind_of, layout, writes

SEED_OPINIONS = (
    "Social media platforms should be legally required to remove hate speech within 24 hours.",
    "Remote work is better for society than working from the office.",
    "Cities should ban private cars from their centres.",
    "Nuclear power is the best way to fight climate change.",
    "University education should be free for everyone.",
    "Schools should ban smartphones during the school day.",
    "Vaccination should be mandatory for children attending public schools.",
)


@dataclass(frozen=True)
class ModerationExperiment:
    """Arguments of the experiment (each is also a command-line option)."""

    strategies: tuple[str, ...] = STRATEGIES
    """Strategies to compare (``socialgym.discussion.STRATEGIES``); the reference of the OLS is no_moderator."""
    discussions: int = 2
    """Discussions per strategy."""
    users: int = 7
    """Users per discussion, sampled from the SDB pool (the paper: 7 of 30)."""
    pool: int = 30
    """Size of the pool of user SDBs."""
    trolls: int = 1
    """Trolls per discussion (roles, App. A.4.3)."""
    community: int = 1
    """Community members per discussion; the rest are normal users."""
    max_turns: int = 14
    """User turns per discussion (each followed by a moderator turn when there is one)."""
    context_length: int = 4
    """h: the comments each speaker and annotator sees."""
    turn_taking: str = "paper"
    """paper (eq. 3), round_robin or random."""
    annotators: int = 10
    """k LLM annotator personas rating every user comment."""
    topics: tuple[str, ...] = SEED_OPINIONS
    """Seed opinions; each discussion draws one."""
    seed: int = 0
    """Seeds SDBs, roles, topics, turn-taking and the LLM's sampling seed."""
    llm: LLMConfig = field(default_factory=lambda: LLMConfig(max_concurrency=8, max_tokens=160))
    """The LLM server and its settings, a config's ``llm`` section (no ``base_url``: the embedded
    SmolLM2 model; ``max_tokens``: per comment or moderator reply; ``cache``: the response cache in
    OUT/llm_cache.sqlite, exact replays on resume). Its seed is the experiment's."""
    generation: str = "auto"
    """LLM users and moderator: 'split' (moves under a schema, texts asked for plainly), 'joint'
    (texts inside the JSON reply), or 'auto' (split for the embedded model)."""
    comment_chars: int = 600
    """Longest comment accepted."""
    parallel: int = 1
    """Discussions run at once (threads sharing one client; useful with real servers)."""
    no_llm: bool = False
    """Scripted users, rule-based moderator and lexicon annotators (a pipeline check)."""

    def __post_init__(self) -> None:
        unknown = [s for s in self.strategies if s not in STRATEGIES]
        if unknown or not self.strategies:
            raise ValueError(f"unknown strategies {unknown}; choose from {STRATEGIES}")
        for name, high in (("discussions", 100_000), ("users", 1_000), ("pool", 100_000), ("max_turns", 10_000),
                           ("context_length", 10_000), ("annotators", 1_000), ("comment_chars", 1_000_000),
                           ("parallel", 1_024)):
            check_int(name, getattr(self, name), 1, high, numpy=False)      # bounded: 10**30 would never end
        for name, high in (("trolls", 1_000), ("community", 1_000), ("seed", 2**32 - 1)):
            check_int(name, getattr(self, name), 0, high, numpy=False)
        if self.turn_taking not in ("paper", "round_robin", "random"):
            raise ValueError(f"turn_taking must be paper, round_robin or random, got {self.turn_taking!r}")
        if not isinstance(self.llm, LLMConfig):
            raise TypeError(f"llm must be an LLMConfig (socialgym.experiments.define.llm_section(mapping) makes one), "
                            f"got {type(self.llm).__name__}")
        unused = [name for name in ("budget", "prices", "tie_scorer") if getattr(self.llm, name)]
        if unused:                             # the experiment has no rounds to stop at, no ties to score
            raise ValueError(f"llm.{unused[0]} does not apply to the moderation experiment; leave it out")
        if self.llm.base_url is not None and not self.llm.model and not self.llm.endpoints:
            raise ValueError("--model is required with --base-url")
        if self.users < 2 or self.users > self.pool:
            raise ValueError(f"users must be between 2 and pool={self.pool}, got {self.users}")
        if self.trolls < 0 or self.community < 0 or self.trolls + self.community > self.users:
            raise ValueError(f"trolls + community ({self.trolls} + {self.community}) must be <= users ({self.users})")
        if not self.topics:
            raise ValueError("topics must not be empty")


# fields that may change between a run and its resumption (they do not change results)
_RESUMABLE = frozenset({"parallel", "llm.max_concurrency", "llm.cache"})


@dataclass
class _Job:
    strategy: str
    index: int
    seed: int
    topic: str
    usernames: list[str]
    roles: list[str]
    sdb_ids: list[int] = field(default_factory=list)

    @property
    def key(self) -> str:
        return f"{self.strategy}/{self.index}"


def plan_jobs(cfg: ModerationExperiment) -> tuple[list[_Job], list]:
    """Algorithm 1: per discussion index, users (SDBs) sampled from the pool, roles and a topic
    — shared by every strategy."""
    pool = generate_sdbs(cfg.pool, seed=cfg.seed)
    jobs = []
    for i in range(cfg.discussions):
        rng = np.random.default_rng([cfg.seed, i])
        ids = sorted(rng.choice(cfg.pool, cfg.users, replace=False).tolist())
        roles = ["troll"] * cfg.trolls + ["community"] * cfg.community
        roles += ["normal"] * (cfg.users - len(roles))
        roles = [roles[j] for j in rng.permutation(cfg.users)]
        topic = cfg.topics[int(rng.integers(len(cfg.topics)))]
        for s in cfg.strategies:
            jobs.append(_Job(s, i, cfg.seed * 100_003 + i, topic, [pool[j].username for j in ids], roles, ids))
    return jobs, pool


def _client(cfg: ModerationExperiment, out: Path, stack: contextlib.ExitStack):
    from socialgym.experiments.run.runner import open_llm_client

    return stack.enter_context(open_llm_client(cfg.llm, cfg.seed, out / "llm_server.log",
                                               out / layout.LLM_CACHE if cfg.llm.cache else None))


def _json_safe(value):
    """NaN (a comment no annotator could rate) as null: discussions.jsonl stays standard JSON."""
    if isinstance(value, float) and value != value:
        return None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_safe(v) for v in value]
    return value


def run_one(job: _Job, cfg: ModerationExperiment, pool: Sequence, client) -> dict:
    """One discussion: play it, annotate every user comment, score it; a JSON-ready record."""
    import socialgym
    from socialgym.annotation import LexiconAnnotator, LLMAnnotators, annotate_discussion

    moderated = job.strategy != "no_moderator"
    env = socialgym.discussion_env(
        n_users=cfg.users, roles=job.roles, usernames=job.usernames, topic=job.topic, max_turns=cfg.max_turns,
        context_length=cfg.context_length, turn_taking=cfg.turn_taking, moderator=moderated,
        comment_chars=cfg.comment_chars, invalid_actions="lenient", seed=job.seed)
    if cfg.no_llm:
        from socialgym.baselines.discussion import ScriptedModerator, ScriptedUser
        policies: dict[str, Any] = {"users": ScriptedUser(seed=job.seed)}
        if moderated:
            policies[MODERATOR] = ScriptedModerator()
        annotator = LexiconAnnotator(min(cfg.annotators, 5))
        env.unwrapped.annotator = annotator          # live: the scripted moderator reads toxicity
    else:
        from socialgym.agents.discussion import LLMDiscussant, LLMModerator
        sdbs = {job.usernames[u]: pool[j] for u, j in enumerate(job.sdb_ids)}
        policies = {"users": LLMDiscussant(client, sdbs, max_chars=cfg.comment_chars, max_tokens=cfg.llm.max_tokens,
                                           generation=cfg.generation)}
        if moderated:
            policies[MODERATOR] = LLMModerator(client, job.strategy, scores=env.unwrapped.config.scores,
                                               max_chars=cfg.comment_chars, max_tokens=cfg.llm.max_tokens,
                                               seed=cfg.seed, generation=cfg.generation)
        annotator = LLMAnnotators(client, cfg.annotators, seed=cfg.seed, max_tokens=24)
    start = time.perf_counter()
    result = run_discussion(env, policies, seed=job.seed)
    base = env.unwrapped
    if not cfg.no_llm:
        annotate_discussion(base, annotator, include_moderator=False)
    scored = score_discussion(base.turn_log, base.roles, base.moderator, base.config.scores, base.config.weights)
    ratings = {cid: base.annotation(cid).summary() for cid in base.comment_ids if base.annotation(cid) is not None}
    turns = []
    for row in base.turn_log:
        row = dict(row)
        extra = ratings.get(row["content_id"]) if row["content_id"] is not None else None
        if extra is not None and row["agent"] != MODERATOR:
            row.update(extra)
        turns.append(row)
    user_texts = [r["text"] for r in base.turn_log if r["agent"] != MODERATOR and r["text"]]
    div = diversity(user_texts)
    return _json_safe({"key": job.key, "strategy": job.strategy, "index": job.index, "seed": job.seed, "topic": job.topic,
            "users": dict(zip(base.users, job.usernames)), "roles": base.roles,
            "turns": turns, "diversity": None if np.isnan(div) else div,
            "interventions": sum(1 for r in base.turn_log if r["agent"] == MODERATOR and
                                 (r["text"] or r["warned"] or r["banned"])),
            "bans": sum(len(r["banned"]) for r in base.turn_log), "returns": result["returns"],
            "scores": scored["rewards"], "seconds": round(time.perf_counter() - start, 3)})


@writes("moderation", "out")
def run_experiment(cfg: ModerationExperiment, out: str | Path, *, progress: bool = True) -> dict:
    out = Path(out)
    if kind_of(out) not in (None, "moderation experiment"):
        raise ValueError(f"{out} holds a {kind_of(out)}, not a moderation experiment: give another --out")
    out.mkdir(parents=True, exist_ok=True)
    config = drop_secrets(json.loads(json.dumps(dataclasses.asdict(cfg), default=list)))   # never a key on disk
    saved = out / "config.json"
    path = out / layout.DISCUSSIONS
    if saved.exists() and path.exists():
        # resuming: the finished discussions must come from the same experiment
        old = json.loads(saved.read_text())
        flat_old, flat_new = _flat(old), _flat(config)
        changed = sorted(k for k in flat_old.keys() | flat_new.keys()
                         if k not in _RESUMABLE and flat_old.get(k) != flat_new.get(k))
        if changed:
            raise ValueError(f"{out} holds discussions of another configuration (differs in {changed}); "
                             "use a new --out")
    saved.write_text(json.dumps(config, indent=2))
    done = {r["key"] for r in _recover(path)}
    jobs, pool = plan_jobs(cfg)
    todo = [j for j in jobs if j.key not in done]
    t0 = time.perf_counter()
    with contextlib.ExitStack() as stack:
        client = None if cfg.no_llm else _client(cfg, out, stack)
        with open(path, "a", encoding="utf-8") as sink, ThreadPoolExecutor(cfg.parallel) as workers:
            # one discussion per thread at most cfg.parallel at once; results come back in order
            for n, record in enumerate(workers.map(lambda j: run_one(j, cfg, pool, client), todo), len(done) + 1):
                sink.write(json.dumps(record) + "\n")
                sink.flush()
                os.fsync(sink.fileno())
                if progress:
                    print(f"[{n}/{len(jobs)}] {record['key']}: {len(record['turns'])} turns, "
                          f"{record['interventions']} interventions, {record['seconds']:.1f} s", flush=True)
        usage = None
        if client is not None:
            total = client.usage.total()
            usage = {**{k: total[k] for k in ("requests", "cached", "prompt_tokens", "completion_tokens", "failed")},
                     "fallbacks": len(client.usage.fallbacks),
                     "fallbacks_by_purpose": dict(Counter(f.purpose for f in client.usage.fallbacks))}
    summary = analyse(out, usage=usage)
    summary["seconds"] = round(time.perf_counter() - t0, 1)
    (out / layout.SUMMARY).write_text(json.dumps(summary, indent=2))
    return summary


def _flat(config: dict) -> dict:
    """The saved configuration with the llm section's keys as ``llm.<key>``."""
    llm = config.get("llm") if isinstance(config.get("llm"), dict) else {}
    return {**{k: v for k, v in config.items() if k != "llm"}, **{f"llm.{k}": v for k, v in llm.items()}}


def _recover(path: Path) -> list[dict]:
    """The finished discussions of an earlier (maybe killed) run. A last line cut short by a
    kill mid-write is removed, so that discussion runs again."""
    if not path.exists():
        return []
    data = path.read_bytes()
    records, good = [], 0
    for line in data.splitlines(keepends=True):
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            break
        if not line.endswith(b"\n"):
            records.pop()
            break
        good += len(line)
    if good < len(data):
        with open(path, "r+b") as f:
            f.truncate(good)
    return records


# ---------------------------------------------------------------------------- analysis
COMMENT_COLUMNS = ("strategy", "discussion", "turn", "user_turn", "agent", "username", "role", "toxicity",
                   "argument_quality", "ndfu_toxicity", "ndfu_argument_quality", "words")


def load_records(out: str | Path) -> list[dict]:
    path = Path(out) / layout.DISCUSSIONS
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def comment_rows(records: Sequence[Mapping]) -> list[dict]:
    rows = []
    for rec in records:
        turns = [t for t in rec["turns"] if t["agent"] != MODERATOR and t["text"]]
        for t, words in zip(turns, comment_lengths([t["text"] for t in turns]).tolist()):
            rows.append({"strategy": rec["strategy"], "discussion": rec["index"], "turn": t["turn"],
                         "user_turn": t["user_turn"], "agent": t["agent"], "username": t["username"],
                         "role": t["role"], "toxicity": to_float(t.get("toxicity")),
                         "argument_quality": to_float(t.get("argument_quality")),
                         "ndfu_toxicity": to_float(t.get("ndfu_toxicity")),
                         "ndfu_argument_quality": to_float(t.get("ndfu_argument_quality")),
                         "words": words})
    return rows


def analyse(out: str | Path, usage: dict | None = None) -> dict:
    """Tables, OLS and plots from ``discussions.jsonl`` (can be re-run on its own)."""
    out = Path(out)
    records = load_records(out)
    rows = comment_rows(records)
    for stale in [*out.glob("pairwise_*.*"), *out.glob("ols_*.*")]:      # from an earlier analysis
        stale.unlink()
    with open(out / "comments.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=COMMENT_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    present = [s for s in STRATEGIES if any(r["strategy"] == s for r in records)]
    strategy = np.array([r["strategy"] for r in rows])
    turn = np.array([r["user_turn"] for r in rows], dtype=float)
    summary: dict[str, Any] = {"discussions": len(records), "comments": len(rows), "strategies": {}, "llm": usage}
    tables = []
    for metric in ("toxicity", "argument_quality"):
        y = np.array([r[metric] for r in rows], dtype=float)
        if len(present) >= 2 and np.isfinite(y).any():
            table = pairwise_mean_differences(y, strategy, order=[s for s in present if (strategy == s).any()])
            _write_rows(out / f"pairwise_{metric}.csv", table.to_rows())
            (out / f"pairwise_{metric}.md").write_text(table.to_markdown() + "\n")
            tables.append((metric, table))
        if "no_moderator" in present:
            try:
                fit = strategy_time_ols(y, strategy, turn, order=[s for s in present if (strategy == s).any()])
            except ValueError as err:           # e.g. too few comments for the design
                (out / f"ols_{metric}.md").write_text(f"OLS not estimable: {err}\n")
                summary[f"ols_{metric}"] = f"not estimable: {err}"
            else:
                _write_rows(out / f"ols_{metric}.csv", fit.to_rows())
                (out / f"ols_{metric}.md").write_text(fit.to_markdown() + "\n")
                summary[f"ols_{metric}"] = {"adj_r2": _clean(fit.adj_r2), "n": fit.n,
                                            "coef": {n: _clean(c) for n, c in zip(fit.names, fit.coef)}}
    for s in present:
        recs = [r for r in records if r["strategy"] == s]
        mine = [r for r in rows if r["strategy"] == s]
        summary["strategies"][s] = {
            "label": STRATEGY_LABELS[s], "discussions": len(recs), "comments": len(mine),
            "toxicity": _mean([r["toxicity"] for r in mine]),
            "argument_quality": _mean([r["argument_quality"] for r in mine]),
            "ndfu_toxicity": _mean([r["ndfu_toxicity"] for r in mine]),
            "diversity": _mean([r["diversity"] for r in recs if r["diversity"] is not None]),
            "words": _mean([r["words"] for r in mine]),
            "interventions": _mean([r["interventions"] for r in recs]),
            "bans": _mean([r["bans"] for r in recs])}
    _write_summary_md(out, summary)
    try:
        _plots(out, records, rows, present, tables)
    except ImportError:
        summary["plots"] = "skipped: matplotlib is not installed (pip install 'socialgym[plot]')"
    return summary


def _mean(values) -> float | None:
    v = np.array([x for x in values if x is not None], dtype=float)
    v = v[np.isfinite(v)]
    return float(v.mean()) if len(v) else None


def _clean(x) -> float | None:
    return None if x is None or not np.isfinite(x) else float(x)


def _write_rows(path: Path, rows: list[dict]) -> None:
    if not rows:
        path.write_text("")
        return
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def _write_summary_md(out: Path, summary: dict) -> None:
    fmt = lambda x: "–" if x is None else f"{x:.3f}"    # noqa: E731
    lines = ["# Moderation strategies", "",
             f"{summary['discussions']} discussions, {summary['comments']} user comments.", "",
             "| strategy | discussions | comments | toxicity | argument quality | nDFU toxicity | diversity "
             "| words | interventions | bans |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for s, v in summary["strategies"].items():
        lines.append(f"| {v['label']} | {v['discussions']} | {v['comments']} | {fmt(v['toxicity'])} | "
                     f"{fmt(v['argument_quality'])} | {fmt(v['ndfu_toxicity'])} | {fmt(v['diversity'])} | "
                     f"{fmt(v['words'])} | {fmt(v['interventions'])} | {fmt(v['bans'])} |")
    for metric in ("toxicity", "argument_quality"):
        for kind in ("pairwise", "ols"):
            path = out / f"{kind}_{metric}.md"
            if path.exists():
                title = {"pairwise": "Mean differences (row − column)", "ols": "OLS on strategy × turn"}[kind]
                lines += ["", f"## {title}: {metric.replace('_', ' ')}", "", path.read_text().rstrip()]
    if summary.get("llm"):
        u = summary["llm"]
        lines += ["", f"LLM: {u['requests']} requests ({u['cached']} cached), {u['prompt_tokens']} prompt + "
                      f"{u['completion_tokens']} completion tokens, {u['fallbacks']} fallbacks "
                      f"{u['fallbacks_by_purpose'] or ''}"]
    (out / "summary.md").write_text("\n".join(lines) + "\n")


def _plots(out: Path, records, rows, present, tables) -> None:
    from socialgym.discussion import mean_by_turn
    from socialgym.experiments.analysis.plotting import figure, save

    plots = out / "plots"
    plots.mkdir(exist_ok=True)
    labels = [STRATEGY_LABELS[s] for s in present]
    for metric, table in tables:
        k = len(table.labels)
        fig = figure(1.2 * k + 2, 1.0 * k + 1.5)
        ax = fig.add_subplot()
        lim = np.nanmax(np.abs(table.diff)) if np.isfinite(table.diff).any() else 1.0
        im = ax.imshow(table.diff, cmap="RdBu_r", vmin=-lim or -1, vmax=lim or 1)
        for i in range(k):
            for j in range(k):
                if i != j and np.isfinite(table.diff[i, j]):
                    ax.text(j, i, f"{table.diff[i, j]:.2f}{stars(table.p[i, j])}", ha="center", va="center",
                            fontsize=8)
        names = [STRATEGY_LABELS.get(s, s) for s in table.labels]
        ax.set_xticks(range(k), names, rotation=40, ha="right")
        ax.set_yticks(range(k), names)
        ax.set_title(f"{metric.replace('_', ' ')}: row − column")
        fig.colorbar(im, ax=ax)
        save(fig, plots / f"pairwise_{metric}.png")
    fig = figure(7, 4)
    ax = fig.add_subplot()
    for s, label in zip(present, labels):
        mine = [r for r in rows if r["strategy"] == s]
        t, m, _ = mean_by_turn([r["toxicity"] for r in mine], [r["user_turn"] for r in mine]) if mine \
            else (np.array([]), np.array([]), None)
        ax.plot(t, m, marker="o", label=label)
    ax.set_xlabel("user turn")
    ax.set_ylabel("mean toxicity (1-5)")
    ax.legend(fontsize=8)
    save(fig, plots / "toxicity_by_turn.png")
    for name, values, xlabel in (
            ("diversity", lambda s: [r["diversity"] for r in records if r["strategy"] == s and r["diversity"] is not None],
             "ROUGE-L diversity per discussion"),
            ("comment_length", lambda s: [r["words"] for r in rows if r["strategy"] == s], "words per comment"),
            ("interventions", lambda s: [r["interventions"] for r in records if r["strategy"] == s],
             "moderator interventions per discussion")):
        fig = figure(7, 4)
        ax = fig.add_subplot()
        data = [values(s) for s in present]
        ax.boxplot([d if d else [np.nan] for d in data], tick_labels=labels)
        ax.set_ylabel(xlabel)
        ax.tick_params(axis="x", labelrotation=30)
        save(fig, plots / f"{name}.png")


# ---------------------------------------------------------------------------- command line
def add_arguments(parser: argparse.ArgumentParser) -> None:
    from socialgym.llm.text import GENERATION_MODES

    d = ModerationExperiment()
    parser.add_argument("--out", required=True, help="output directory (re-run the same to resume)")
    parser.add_argument("--strategies", default=",".join(d.strategies), help="comma-separated strategies")
    for name in ("discussions", "users", "pool", "trolls", "community", "annotators", "parallel", "seed",
                 "context_length", "comment_chars"):
        parser.add_argument(f"--{name.replace('_', '-')}", type=int, default=getattr(d, name))
    for name in ("max_concurrency", "max_tokens"):
        parser.add_argument(f"--{name.replace('_', '-')}", type=int, default=getattr(d.llm, name))
    parser.add_argument("--turns", type=int, default=d.max_turns, help="user turns per discussion")
    parser.add_argument("--turn-taking", default=d.turn_taking, choices=("paper", "round_robin", "random"))
    parser.add_argument("--temperature", type=float, default=d.llm.temperature)
    parser.add_argument("--generation", choices=GENERATION_MODES, default=d.generation,
                        help="LLM texts: split (plain requests), joint (inside the JSON), auto (split for the "
                             "embedded model)")
    parser.add_argument("--base-url", default=None, help="OpenAI-compatible server (default: embedded model)")
    parser.add_argument("--model", default=None)
    parser.add_argument("--api-key-env", default=d.llm.api_key_env)
    parser.add_argument("--no-cache", action="store_true")
    parser.add_argument("--no-llm", action="store_true", help="scripted users/moderator, lexicon annotators")
    parser.add_argument("--quiet", action="store_true")


def from_arguments(args) -> ModerationExperiment:
    llm = {"base_url": args.base_url, "model": args.model, "api_key_env": args.api_key_env,
           "max_concurrency": args.max_concurrency, "temperature": args.temperature, "max_tokens": args.max_tokens,
           "cache": not args.no_cache}
    return ModerationExperiment(
        strategies=tuple(s.strip() for s in args.strategies.split(",") if s.strip()),
        discussions=args.discussions, users=args.users, pool=args.pool, trolls=args.trolls,
        community=args.community, annotators=args.annotators, parallel=args.parallel, seed=args.seed,
        context_length=args.context_length, comment_chars=args.comment_chars, max_turns=args.turns,
        turn_taking=args.turn_taking, generation=args.generation, llm=llm_section(llm), no_llm=args.no_llm)


def run_command(args) -> int:
    """``socialgym moderation`` with parsed arguments (``add_arguments``): run, print where the
    results are, write the viewer. Exit status 2 for a bad argument."""
    try:
        cfg = from_arguments(args)
        summary = run_experiment(cfg, args.out, progress=not args.quiet)
    except ValueError as err:
        print(f"socialgym: error: {err}", file=sys.stderr)
        return 2
    print(f"{summary['discussions']} discussions, {summary['comments']} comments in {summary['seconds']} s; "
          f"see {Path(args.out) / 'summary.md'}")
    from socialgym.viewer import ViewerError, build_viewer
    try:
        print(f"viewer: {build_viewer(args.out).resolve()}")
    except ViewerError as err:
        print(f"socialgym moderation: warning: no viewer: {err}", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m socialgym.experiments.studies.moderation`` = ``socialgym moderation``."""
    parser = argparse.ArgumentParser(prog="socialgym moderation", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    return run_command(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
