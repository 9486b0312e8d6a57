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

Every run (one seed) gives, per measure, the mean over its last third of rounds. Writes
``summary.json`` (format in :func:`summary`) to ``--out``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import time
from dataclasses import dataclass

import numpy as np

import socialgym
from socialgym.baselines.topic_users import TopicUsers
from socialgym.metrics import (
    cross_cutting_share, deep_cocoon_share, default_cocoon_threshold, topic_counts, topic_entropy,
)
from socialgym.platform.actions import COM, POST
from socialgym.platform.validation import check_int, is_int, is_number
from socialgym.recommenders.registry import QUOTA_KINDS
from socialgym.rundir import layout
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
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    """One independent run per seed; the same seed in every condition."""

    def __post_init__(self) -> None:
        for name in ("agents", "rounds", "topics", "feed_size", "n_head", "n_tail", "polar_agents", "polar_rounds",
                     "polar_topics", "polar_feed"):
            check_int(name, getattr(self, name), 1, 1_000_000, numpy=False)
        for name in ("share", "strength", "cross_interest"):
            if not is_number(getattr(self, name), numpy=False) or not 0 <= getattr(self, name) <= 1:
                raise ValueError(f"{name} must be a number in [0, 1], got {getattr(self, name)!r}")
        if not self.seeds or any(not is_int(x, numpy=False) or x < 0 for x in self.seeds):
            raise ValueError(f"seeds must be integers >= 0, got {self.seeds!r}")


QUICK = dict(agents=60, rounds=6, topics=12, feed_size=6, n_head=3, n_tail=3,
             polar_agents=40, polar_rounds=6, polar_feed=8, seeds=(0, 1))


# --------------------------------------------------------------------------- populations
def cocoon_population(args: StudyArgs, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(preferences (n, K), group label per agent): equal thirds, agent i in group i mod 3."""
    rng = np.random.default_rng(seed)
    labels = np.array([GROUPS[i % len(GROUPS)][0] for i in range(args.agents)])
    prefs = np.zeros((args.agents, args.topics))
    for label, favourites, weight in GROUPS:
        rows = np.flatnonzero(labels == label)
        prefs[rows] = TopicUsers.make_preferences(len(rows), args.topics, rng, interests_per_agent=favourites,
                                                  concentration=weight)
    return prefs, labels


def camp_population(args: StudyArgs, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(preferences (n, K), camp index per agent): camp c = i mod 2 holds ``1 - cross_interest``
    of its weight on its half of the (even number of) topics, drawn as in ``make_preferences``
    (one favourite), and spreads ``cross_interest`` evenly over the other half."""
    n, k = args.polar_agents, args.polar_topics
    if k < 2 or k % 2:
        raise ValueError(f"polar_topics must be an even number >= 2, got {k}")
    half = k // 2
    camp = np.arange(n) % 2
    own = TopicUsers.make_preferences(n, half, np.random.default_rng(seed))
    prefs = np.full((n, k), args.cross_interest / half)
    left = camp == 0
    prefs[left, :half] = (1 - args.cross_interest) * own[left]
    prefs[~left, half:] = (1 - args.cross_interest) * own[~left]
    return prefs, camp


def _env(recommender: str, prefs: np.ndarray, rerank: list, seed: int, rounds: int, feed: int):
    k = prefs.shape[1]
    return socialgym.parallel_env(
        n_agents=len(prefs), max_rounds=rounds, topics=[f"topic_{i}" for i in range(k)], max_topics=max(k, 32),
        recommender=recommender, rerank=rerank, feed_size=feed, vote_feed_size=feed,
        obs_format="numeric", agent_interests=prefs, exposure_window=1, sentiment="tone", seed=seed)


def _play(env, prefs: np.ndarray, seed: int, on_round) -> None:
    """Run the episode with scripted users; ``on_round(env)`` after every vote step."""
    users = TopicUsers.for_env(env, prefs, seed=seed)
    obs, _ = env.reset(seed=seed)
    while env.agents:
        phase = env.phase
        obs, *_ = env.step_arrays(users.act_arrays(obs))
        if phase == "vote":
            on_round(env)


# --------------------------------------------------------------------------- runs
def cocoon_run(args: StudyArgs, condition: str, seed: int) -> dict[str, list[float]]:
    """One run of the cocoon part; per-round series (rounds 2.. with a feed)."""
    prefs, labels = cocoon_population(args, seed)
    rerank = [] if condition == "base" else [
        {"kind": condition, "share": args.share, "n_head": args.n_head, "n_tail": args.n_tail,
         "users": (labels == TARGET_GROUP).tolist()}]
    env = _env(args.recommender, prefs, rerank, seed, args.rounds, args.feed_size)
    threshold = default_cocoon_threshold(args.topics)
    favourite = prefs > prefs.min(axis=1, keepdims=True)
    series: dict[str, list[float]] = {}

    def on_round(env) -> None:
        topics = env.last_round.batch.feed_topics
        if not (topics >= 0).any():
            return
        h = topic_entropy(topic_counts(topics, args.topics))
        add = (lambda key, value: series.setdefault(key, []).append(float(value)))
        add("deep_cocoon_share", deep_cocoon_share(h, threshold))
        for label, share in deep_cocoon_share(h, threshold, labels).items():
            add(f"deep_cocoon_share:{label}", share)
        shown = topics >= 0
        off = shown & ~np.take_along_axis(favourite, np.maximum(topics, 0), axis=1)
        for label in np.unique(labels):
            rows = labels == label
            add(f"topic_entropy:{label}", np.nanmean(h[rows]))
            add(f"non_favourite_share:{label}", off[rows].sum() / max(shown[rows].sum(), 1))

    _play(env, prefs, seed, on_round)
    return series


def polar_run(args: StudyArgs, condition: str, seed: int) -> dict[str, list[float]]:
    """One run of the polarisation part; per-round cross-cutting shares."""
    prefs, camp = camp_population(args, seed)
    rerank = [] if condition == "base" else [{"kind": "stance_penalty", "stances": camp.tolist(),
                                              "strength": args.strength}]
    env = _env(args.polar_recommender, prefs, rerank, seed, args.polar_rounds, args.polar_feed)
    series: dict[str, list[float]] = {}

    def on_round(env) -> None:
        batch = env.last_round.batch
        if not (batch.feed >= 0).any():
            return
        author = env.content.column("author")
        shown = np.where(batch.feed >= 0, author[np.maximum(batch.feed, 0)], -1)
        com = batch.kind == COM
        sender, target = batch.sender[com].astype(np.int64), batch.target_id[com]
        in_feed = (batch.feed[sender] == target[:, None]).any(axis=1)
        picked = camp[author[target[in_feed]]] != camp[sender[in_feed]]
        add = (lambda key, value: series.setdefault(key, []).append(float(value)))
        add("supply", _supply_share(env, camp, batch.round))
        add("shown", np.nanmean(cross_cutting_share(shown, camp)))
        add("chosen", picked.mean() if len(picked) else np.nan)

    _play(env, prefs, seed, on_round)
    return series


def _supply_share(env, camp: np.ndarray, rnd: int) -> float:
    """Mean over viewers of the other camp's share of the round's pool (public items of earlier
    rounds, the viewer's own left out)."""
    content = env.content
    public = np.isin(content.column("kind"), (POST, COM)) & (content.column("round") < rnd)
    authors = content.column("author")[public].astype(np.int64)
    own = np.bincount(authors, minlength=len(camp))
    per_camp = np.bincount(camp[authors], minlength=2)
    same = per_camp[camp] - own
    other = per_camp[1 - camp]
    total = same + other
    return float(np.mean(other[total > 0] / total[total > 0]))


# --------------------------------------------------------------------------- summary
def _last_third(values: list[float]) -> float:
    v = np.asarray(values, float)
    tail = v[len(v) - max(len(v) // 3, 1):]
    return float(np.nanmean(tail)) if np.isfinite(tail).any() else float("nan")


def _first_third(values: list[float]) -> float:
    v = np.asarray(values, float)
    return float(np.nanmean(v[:max(len(v) // 3, 1)]))


def cocoon_measures(args: StudyArgs) -> dict:
    runs = {c: [cocoon_run(args, c, s) for s in args.seeds] for c in ("base",) + STRATEGIES}
    conditions = list(runs)
    measures: dict = {"deep_cocoon_share": {
        "description": "share of all users whose round feed has topic entropy < 0.5 ln K (deep cocoon), "
                       "mean over the run's last third of rounds; fraction 0-1",
        "per_run": {c: [_last_third(r["deep_cocoon_share"]) for r in runs[c]] for c in conditions}}}
    for label, _, _ in GROUPS:
        measures[f"deep_cocoon_share:{label}"] = {
            "description": f"share of the {label}-interest group in a deep cocoon (feed topic entropy "
                           f"< 0.5 ln K), mean over the run's last third of rounds; fraction 0-1",
            "per_run": {c: [_last_third(r[f"deep_cocoon_share:{label}"]) for r in runs[c]] for c in conditions}}
        measures[f"entropy_drop:{label}"] = {
            "description": f"mean feed topic entropy of the {label} group in the run's first third of rounds "
                           f"minus in its last third (> 0: a cocoon forms); nats",
            "per_run": {c: [_first_third(r[f"topic_entropy:{label}"]) - _last_third(r[f"topic_entropy:{label}"])
                            for r in runs[c]] for c in conditions}}
        measures[f"non_favourite_share:{label}"] = {
            "description": f"share of the {label} group's feed items on topics outside each user's favourites "
                           f"(its tail topics), mean over the run's last third of rounds; fraction 0-1",
            "per_run": {c: [_last_third(r[f"non_favourite_share:{label}"]) for r in runs[c]] for c in conditions}}
    return measures


def polar_measures(args: StudyArgs) -> dict:
    runs = {c: [polar_run(args, c, s) for s in args.seeds] for c in ("base", "stance_penalty")}
    last = {c: [{k: _last_third(v) for k, v in r.items()} for r in rs] for c, rs in runs.items()}
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


def summary(args: StudyArgs, command: str, started: float) -> dict:
    """The study's summary: ``study``, ``command``, ``wall_seconds``, ``population``, ``design``,
    ``measures`` ({name: {description, per_run: {condition: [one float per seed]}}}), ``notes``."""
    measures = {**cocoon_measures(args), **polar_measures(args)}
    design = {"agents": args.agents, "rounds": args.rounds, "runs": len(args.seeds), "seeds": list(args.seeds),
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
]


def main(argv: list[str] | None = None) -> dict:
    from socialgym.experiments.studies.registry import add_dataclass_arguments, dataclass_from_namespace

    parser = argparse.ArgumentParser(prog="socialgym study agentsociety", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help=f"output directory for {layout.SUMMARY}")
    parser.add_argument("--quick", action="store_true", help="a tiny design (seconds), for tests")
    add_dataclass_arguments(parser, StudyArgs())
    ns = parser.parse_args(argv)
    started = time.time()
    args = dataclass_from_namespace(StudyArgs, ns)
    if ns.quick:
        args = dataclasses.replace(args, **QUICK)
    command = "socialgym study agentsociety --out DIR" + (" --quick" if ns.quick else "")
    result = summary(args, command, started)
    result["wall_seconds"] = round(time.time() - started, 2)
    os.makedirs(ns.out, exist_ok=True)
    path = os.path.join(ns.out, layout.SUMMARY)
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(result, fh, indent=2)
    print(f"wrote {path} in {result['wall_seconds']:.1f} s")
    return result


__all__ = ["StudyArgs", "STRATEGIES", "GROUPS", "cocoon_population", "camp_population", "cocoon_run",
           "polar_run", "cocoon_measures", "polar_measures", "summary", "main"]

if __name__ == "__main__":
    main()
