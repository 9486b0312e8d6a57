"""agentsociety2 §7.4 and §7.5 with scripted users: cocoons per group under three quota
re-rankers, and the stance penalty's effect on cross-cutting exposure.

    socialgym study agentsociety --out runs/agentsociety          # default (--help: every option)
    socialgym study agentsociety --out /tmp/as --quick            # seconds

**Cocoons (§7.4).** Scripted :class:`~socialgym.baselines.topic_users.TopicUsers` in three
interest-breadth groups (a stand-in for the paper's age groups; "narrow" users, one strong
favourite, play its most cocoon-prone 50+ cohort) under a matrix-factorisation recommender
refitted every round, 35 topics as the paper's 35 categories. Conditions: the base recommender
and each of the three strategies (``tail_quota_transfer``, ``efficiency_boost``,
``underserved_boost``: 30% of the top-10 topics' slots to 10 target topics), aimed, as in the
paper, at the cocoon-prone group only. A viewer is in a deep cocoon when the topic entropy of
its round's feed is below ``0.5 ln K`` (``socialgym.metrics.deep_cocoon_share``).

**Polarisation (§7.5).** Two camps of equal size whose interests lie mostly on their own half of
the topics, so that what users pick leans to their camp. Conditions: a feed ranked by recency
(``chronological``, as the paper's feed of followed outlets) and the same with
``stance_penalty`` (``strength`` 0.4, the paper's ``algorithm_filter_strength``). Per round:
the cross-cutting share (author of the other camp) of the pool (the supply), of the feed
(shown) and of the feed items users comment on (chosen). The gap between consumption and
supply splits exactly into ranking (shown - supply) and choice (chosen - shown), in points.

Each part is a sweep through the experiment runner (``cocoon/`` and ``polar/`` under ``--out``:
one condition per ``env.rerank``, ``replicates`` runs each on common random numbers), so every
run is an ordinary run directory (``report``, ``view``, ``compare``, ``validate``). The measures
are read back from the runs — ``network.csv``'s exposure metrics per round and group, the pool
and the comments from ``events.jsonl`` — and every run gives, per measure, the mean over its last
third of rounds. Writes ``summary.json`` (format in :func:`summary`) to ``--out``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from socialgym.metrics import default_cocoon_threshold
from socialgym.platform.validation import check_int, is_number
from socialgym.recommenders.registry import QUOTA_KINDS
from socialgym.rundir import Run, layout, read_sweep
from socialgym.rundir.files import finite_json

STRATEGIES = QUOTA_KINDS
GROUPS = (("narrow", 1, 0.9), ("medium", 2, 0.8), ("broad", 4, 0.7))
"""Interest-breadth groups: (label, favourite topics, weight of the favourites)."""
TARGET_GROUP = "narrow"
CAMPS = ("left", "right")


@dataclass(frozen=True)
class StudyArgs:
    agents: int = 1000
    """Scripted users of the cocoon part (a third per interest-breadth group)."""
    rounds: int = 12
    """Rounds of the cocoon part (the paper: 10 rounds)."""
    topics: int = 35
    """Topics (the paper: 35 categories)."""
    feed_size: int = 10
    """Feed items per user and round in the cocoon part."""
    share: float = 0.3
    """Share of the top topics' slots each strategy moves to the target topics (the paper: 30%)."""
    n_head: int = 10
    """Top topics the slots come from (the paper: top-10)."""
    n_tail: int = 10
    """Target topics the slots go to (the paper: 10)."""
    polar_agents: int = 200
    """Users of the polarisation part (the paper: 200, 100 per camp)."""
    polar_rounds: int = 16
    """Rounds of the polarisation part (the paper: 8 weekly steps)."""
    polar_topics: int = 8
    """Topics of the polarisation part (an even number: each camp's interests lie on its half)."""
    polar_feed: int = 20
    """Feed items per user and round (the paper: up to 20 posts)."""
    strength: float = 0.4
    """The stance penalty (the paper's algorithm_filter_strength = 0.4)."""
    cross_interest: float = 0.15
    """Weight of the other camp's half of the topics in each user's preferences."""
    recommender: str = "mf"
    """The cocoon part's recommender (learns from engagement, refitted every round)."""
    polar_recommender: str = "chronological"
    """The polarisation part's base ranking (the paper: a feed ranked by recency, then penalised)."""
    seed: int = 0
    """Seed of replicate 0; replicate k runs with ``seed + k`` in every condition."""
    replicates: int = 5
    """Independent runs per condition."""
    workers: int | None = None
    """Parallel runs (None: one per core)."""

    def __post_init__(self) -> None:
        for name in ("agents", "rounds", "topics", "feed_size", "n_head", "n_tail", "polar_agents", "polar_rounds",
                     "polar_topics", "polar_feed"):
            check_int(name, getattr(self, name), 1, 1_000_000, numpy=False)
        for name in ("share", "strength", "cross_interest"):
            if not is_number(getattr(self, name), numpy=False) or not 0 <= getattr(self, name) <= 1:
                raise ValueError(f"{name} must be a number in [0, 1], got {getattr(self, name)!r}")
        check_int("seed", self.seed, 0, 2**31 - 1, numpy=False)
        check_int("replicates", self.replicates, 1, 10_000, numpy=False)
        if self.polar_topics < 2 or self.polar_topics % 2 or self.polar_agents % 2:
            raise ValueError(f"polar_topics and polar_agents must be even (two camps, two halves of the topics), "
                             f"got {self.polar_topics} and {self.polar_agents}")
        if self.agents < len(GROUPS):
            raise ValueError(f"agents must be at least {len(GROUPS)} (one per interest-breadth group), got {self.agents}")


QUICK = dict(agents=60, rounds=6, topics=12, feed_size=6, n_head=3, n_tail=3,
             polar_agents=40, polar_rounds=6, polar_feed=8, replicates=2)


# --------------------------------------------------------------------------- the two sweeps
def _sizes(n: int, parts: int) -> list[int]:
    return [n // parts + (1 if i < n % parts else 0) for i in range(parts)]


def _sweep(args: StudyArgs, env: dict, groups: list[dict], reranks: list[list]):
    from socialgym.experiments.define import load_config

    return load_config({
        "seed": args.seed, "env": {**env, "exposure_window": 1, "sentiment": "tone"},
        "policy": {"groups": groups}, "logging": {"ties": False, "report": False, "progress": False},
        "run": {"replicates": args.replicates, "snapshots": False, **({"workers": args.workers} if args.workers else {})},
        "sweep": {"env.rerank": reranks}})


def cocoon_config(args: StudyArgs):
    """§7.4: three ``topic_users`` groups of equal size (narrow, medium, broad: 1, 2, 4 favourites
    drawn from each group's seed) under ``args.recommender``; conditions: no re-ranking and each
    quota strategy aimed at the target group (``users``: its agents)."""
    sizes = _sizes(args.agents, len(GROUPS))
    groups = [{"name": label, "kind": "topic_users", "agents": size,
               "params": {"interests_per_agent": favourites, "concentration": weight}}
              for (label, favourites, weight), size in zip(GROUPS, sizes)]
    target = [g["name"] == TARGET_GROUP for g in groups for _ in range(g["agents"])]
    env = {"n_agents": args.agents, "max_rounds": args.rounds, "topics": [f"topic_{i}" for i in range(args.topics)],
           "max_topics": max(args.topics, 32), "recommender": args.recommender, "feed_size": args.feed_size,
           "vote_feed_size": args.feed_size}
    return _sweep(args, env, groups, [[], *([{"kind": kind, "share": args.share, "n_head": args.n_head,
                                               "n_tail": args.n_tail, "users": target}] for kind in STRATEGIES)])


def camp_population(args: StudyArgs, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(preferences (n, K), camp index per agent): camp c = i mod 2 holds ``1 - cross_interest``
    of its weight on its half of the (even number of) topics, drawn as in ``make_preferences``
    (one favourite), and spreads ``cross_interest`` evenly over the other half. The camps
    alternate so that a recency-ranked feed mixes them (authors post in index order)."""
    from socialgym.baselines.topic_users import TopicUsers

    n, k = args.polar_agents, args.polar_topics
    half = k // 2
    camp = np.arange(n) % 2
    own = TopicUsers.make_preferences(n, half, np.random.default_rng(seed))
    prefs = np.full((n, k), args.cross_interest / half)
    left = camp == 0
    prefs[left, :half] = (1 - args.cross_interest) * own[left]
    prefs[~left, half:] = (1 - args.cross_interest) * own[~left]
    return prefs, camp


def polar_config(args: StudyArgs):
    """§7.5: two alternating camps (:func:`camp_population`, drawn once from ``args.seed``; the
    platform's ``agent_groups``) of ``topic_users`` under ``args.polar_recommender``; conditions:
    no re-ranking and the stance penalty by camp."""
    prefs, camp = camp_population(args, args.seed)
    env = {"n_agents": args.polar_agents, "max_rounds": args.polar_rounds,
           "topics": [f"topic_{i}" for i in range(args.polar_topics)], "max_topics": max(args.polar_topics, 32),
           "recommender": args.polar_recommender, "feed_size": args.polar_feed, "vote_feed_size": args.polar_feed,
           "agent_interests": prefs.tolist(), "agent_groups": [CAMPS[c] for c in camp]}
    groups = [{"name": "camps", "kind": "topic_users", "agents": args.polar_agents}]
    return _sweep(args, env, groups, [[], [{"kind": "stance_penalty", "stances": camp.tolist(),
                                            "strength": args.strength}]])


def run_study(args: StudyArgs, out: str | Path, progress: bool | None = False) -> dict[str, dict]:
    """Both sweeps into ``out/cocoon`` and ``out/polar``; returns :func:`read_runs` of each."""
    from socialgym.experiments.run.sweep import run_sweep

    for part, config in (("cocoon", cocoon_config), ("polar", polar_config)):
        run_sweep(config(args), Path(out) / part, progress=progress)
    return {part: read_runs(Path(out) / part) for part in ("cocoon", "polar")}


def read_runs(sweep: Path) -> dict[str, list[Run]]:
    """Condition -> its runs in replicate order: ``base`` (no re-ranking) or the re-ranker's kind."""
    manifest = read_sweep(sweep)
    if manifest is None:
        raise ValueError(f"{sweep} holds no sweep ({layout.SWEEP})")
    runs: dict[str, list[tuple[int, Run]]] = {}
    for job in manifest["jobs"]:
        rerank = job["condition"]["env.rerank"]
        run = Run(sweep / job["out"])
        run.require(layout.NETWORK, layout.SUMMARY)
        runs.setdefault(rerank[0]["kind"] if rerank else "base", []).append((job["replicate"], run))
    return {c: [r for _, r in sorted(rs, key=lambda x: x[0])] for c, rs in runs.items()}


def _series(run: Run, column: str) -> list[float]:
    """A network.csv column per round from round 2 (round 1's feeds are empty)."""
    return [float(r[column]) if r.get(column) not in (None, "") else float("nan")
            for r in run.network if int(r["round"]) >= 2]


def polar_series(run: Run, camp: np.ndarray) -> dict[str, list[float]]:
    """Per round from 2: the other camp's share of the pool (public items of earlier rounds, the
    viewer's own left out; mean over viewers), of the feed (network.csv) and of the items users
    comment on (every comment targets an item of the commenter's feed)."""
    index = lambda agent: int(str(agent).rpartition("_")[2])          # noqa: E731  agent_12 -> 12
    items = [(e["round"], index(e["sender"])) for e in run.events if e and e.get("kind") in ("POST", "COM")]
    c_round, c_sender, c_target = np.array([(e["round"], index(e["sender"]), index(e["recipient"])) for e in run.events
                                            if e and e.get("kind") == "COM" and e.get("recipient")],
                                           np.int64).reshape(-1, 3).T
    rounds = np.array([r for r, _ in items], np.int64)
    authors = np.array([a for _, a in items], np.int64)
    out: dict[str, list[float]] = {"supply": [], "chosen": [],
                                   "shown": _series(run, "cross_cutting_share")}
    for r in sorted({int(row["round"]) for row in run.network if int(row["round"]) >= 2}):
        pool = authors[rounds < r]
        own = np.bincount(pool, minlength=len(camp))
        per_camp = np.bincount(camp[pool], minlength=2)
        same, other = per_camp[camp] - own, per_camp[1 - camp]
        total = same + other
        out["supply"].append(float(np.mean(other[total > 0] / total[total > 0])) if (total > 0).any() else float("nan"))
        now = c_round == r
        out["chosen"].append(float(np.mean(camp[c_sender[now]] != camp[c_target[now]])) if now.any() else float("nan"))
    return out


# --------------------------------------------------------------------------- summary
def _last_third(values: list[float]) -> float:
    v = np.asarray(values, float)
    tail = v[len(v) - max(len(v) // 3, 1):]
    return float(np.nanmean(tail)) if np.isfinite(tail).any() else float("nan")


def _first_third(values: list[float]) -> float:
    v = np.asarray(values, float)
    return float(np.nanmean(v[:max(len(v) // 3, 1)]))


def cocoon_measures(runs: dict[str, list[Run]]) -> dict:
    conditions = ["base", *STRATEGIES]
    measures: dict = {"deep_cocoon_share": {
        "description": "share of all users whose round feed has topic entropy < 0.5 ln K (deep cocoon), "
                       "mean over the run's last third of rounds; fraction 0-1",
        "per_run": {c: [_last_third(_series(r, "deep_cocoon_share")) for r in runs[c]] for c in conditions}}}
    for label, _, _ in GROUPS:
        measures[f"deep_cocoon_share:{label}"] = {
            "description": f"share of the {label}-interest group in a deep cocoon (feed topic entropy "
                           f"< 0.5 ln K), mean over the run's last third of rounds; fraction 0-1",
            "per_run": {c: [_last_third(_series(r, f"deep_cocoon_share:{label}")) for r in runs[c]]
                        for c in conditions}}
        entropy = {c: [_series(r, f"mean_topic_entropy:{label}") for r in runs[c]] for c in conditions}
        measures[f"entropy_drop:{label}"] = {
            "description": f"mean feed topic entropy of the {label} group in the run's first third of rounds "
                           f"minus in its last third (> 0: a cocoon forms); nats",
            "per_run": {c: [_first_third(e) - _last_third(e) for e in entropy[c]] for c in conditions}}
    return measures


def polar_measures(runs: dict[str, list[Run]], args: StudyArgs) -> dict:
    camp = np.arange(args.polar_agents) % 2
    last = {c: [{k: _last_third(v) for k, v in polar_series(r, camp).items()} for r in rs] for c, rs in runs.items()}
    what = {"supply": "of the candidate pool (public items of earlier rounds, own left out)",
            "shown": "of the feed items shown", "chosen": "of the feed items users comment on"}
    measures = {f"cross_cutting_{key}": {
        "description": f"share of items by the other camp {text}, mean over the run's last third of rounds; "
                       f"fraction 0-1",
        "per_run": {c: [r[key] for r in last[c]] for c in last}} for key, text in what.items()}
    gaps = {"gap_ranking_pp": ("ranking: cross-cutting share shown minus supplied", "shown", "supply"),
            "gap_choice_pp": ("choice: cross-cutting share chosen minus shown", "chosen", "shown"),
            "gap_total_pp": ("total: cross-cutting share chosen minus supplied (= ranking + choice)",
                             "chosen", "supply")}
    for name, (text, a, b) in gaps.items():
        measures[name] = {"description": f"{text}, from the run's last-third means; percentage points",
                          "per_run": {c: [100 * (r[a] - r[b]) for r in last[c]] for c in last}}
    return measures


def summary(args: StudyArgs, runs: dict[str, dict], command: str, started: float) -> dict:
    """The study's summary: ``study``, ``command``, ``wall_seconds``, ``population``, ``design``,
    ``measures`` ({name: {description, per_run: {condition: [one float per replicate]}}}), ``notes``."""
    measures = {**cocoon_measures(runs["cocoon"]), **polar_measures(runs["polar"], args)}
    design = {"agents": args.agents, "rounds": args.rounds, "runs": args.replicates,
              "seeds": list(range(args.seed, args.seed + args.replicates)),
              "topics": args.topics, "feed_size": args.feed_size, "recommender": args.recommender,
              "groups": [g[0] for g in GROUPS], "target_group": TARGET_GROUP,
              "share": args.share, "n_head": args.n_head, "n_tail": args.n_tail,
              "polar_agents": args.polar_agents, "polar_rounds": args.polar_rounds,
              "polar_topics": args.polar_topics, "polar_recommender": args.polar_recommender, "polar_feed_size": args.polar_feed,
              "stance_penalty_strength": args.strength, "cross_interest": args.cross_interest,
              "deep_cocoon_threshold": default_cocoon_threshold(args.topics)}
    return {"study": "agentsociety", "command": command, "wall_seconds": round(time.time() - started, 2),
            "population": "scripted users", "design": design, "measures": finite_json(measures), "notes": NOTES}


NOTES = [
    "scripted TopicUsers instead of rule agents fitted to a short-video dataset (no data set, no LLM)",
    "items are posts written by the users themselves, not 86,201 pre-existing videos",
    "groups by interest breadth (narrow/medium/broad favourites) stand in for age groups; 'narrow' plays 50+",
    "matrix factorisation refitted every round stands in for the DIN recommender; no pretraining on logs",
    "deep cocoon = topic entropy of the round's feed below 0.5 ln K; the paper gives no cut-off",
    "the efficiency boost's rho is shrunk to the viewer's mean; UnderServedBoost's potential = rho x (1 - v/max v)",
    "§7.4 scale: fewer agents than 10,000 (time budget), at least the paper's 10 rounds",
    "§7.5: no subscription offers (control/pro/counter); 'choice' = what users comment on among the feed",
    "§7.5: camps by interests (own half of the topics), not ideology scores; outlets are users",
    "§7.5: gaps are measured against the pool's supply, not against a control condition",
    "§7.5: the feed draws on every user's posts (recency order), not only on followed outlets",
    "§7.5: the camps' preferences are drawn once from the study's seed; replicates differ in the users' "
    "choices and the ranking's draws",
]


def main(argv: list[str] | None = None) -> dict:
    from socialgym.experiments.studies.registry import add_dataclass_arguments, dataclass_from_namespace

    parser = argparse.ArgumentParser(prog="socialgym study agentsociety", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="the study directory (a new one)")
    parser.add_argument("--quick", action="store_true", help="a tiny design (seconds), for tests")
    add_dataclass_arguments(parser, StudyArgs())
    ns = parser.parse_args(argv)
    started = time.time()
    args = dataclass_from_namespace(StudyArgs, ns)
    if ns.quick:
        args = dataclasses.replace(args, **QUICK)
    command = "socialgym study agentsociety --out DIR" + (" --quick" if ns.quick else "")
    runs = run_study(args, ns.out)
    result = summary(args, runs, command, started)
    result["wall_seconds"] = round(time.time() - started, 2)
    path = Path(ns.out) / layout.SUMMARY
    path.write_text(json.dumps(result, indent=2, allow_nan=False), encoding="utf-8")
    print(f"wrote {path} in {result['wall_seconds']:.1f} s (run directories under cocoon/ and polar/)")
    return result


__all__ = ["StudyArgs", "STRATEGIES", "GROUPS", "CAMPS", "cocoon_config", "polar_config", "run_study", "read_runs",
           "camp_population", "polar_series", "cocoon_measures", "polar_measures", "summary", "main"]

if __name__ == "__main__":
    main()
