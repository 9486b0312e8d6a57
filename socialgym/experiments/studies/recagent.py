"""recagent's recommender experiments (information cocoons, Fig. 4; conformity, Fig. 5) with
scripted users.

    socialgym study recagent --out runs/recagent            # full design
    socialgym study recagent --out /tmp/recagent --quick    # tiny, < 1 min

The MF runs are one sweep of ``socialgym study cocoon``'s kind (:func:`cocoon.run_study`: every run
a run directory under ``runs/``): 50 ``topic_users`` with **three equally liked interests** each
(drawn: ``interests_per_agent=3, interest_decay=1``) among 8 topics, 50 rounds, 5 items per
recommended list, ``mf`` retrained every round on the items of the previous round
(``window=1``). From round 20 (recagent's start of the strategies):

- **Rec-Strategy**: ``random_replacement`` of N = 1 / 3 / 5 of the 5 items (feed and vote list),
  every round, or N = 1 every 1 / 5 / 10 rounds;
- **Soc-Strategy**: each user gets N = 1 / 3 / 5 friends who share none of its interests — an
  ``add_ties`` intervention with ``soc_strategy: N`` (ties of weight 0.5) and ``influence`` (a
  pull of its tastes toward theirs, ``TopicUsers.add_friends``);
- both combined (N = 1 replaced, 1 friend).

Each replicate is one independent run; a replicate's conditions share seed, preferences and
everything before round 20 (common random numbers). The **conformity** experiment (no recommender): users
with exactly 1 / 3 / 5 friends rate one movie for 10 rounds, moving toward the friends they talk
with (``TopicUsers.conform``); AC = the share of (user, round) pairs whose score changed.

Writes, beside the sweep's runs, ``results.json`` (per-run values of every measure, see
:func:`summary`) and ``curves.json`` (each condition's entropy and satisfaction per round, mean
over replicates).
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from socialgym.baselines.topic_users import TopicUsers
from socialgym.experiments.studies.cocoon import CocoonArgs, run_study
from socialgym.rundir.files import write_json

COMMAND = "socialgym study recagent --out DIR"
RESULTS, CURVES = "results.json", "curves.json"

# condition -> (items replaced, friends added, intervene every); aliases share runs
RUNS = {"none": (0, 0, 1), "replace_1": (1, 0, 1), "replace_3": (3, 0, 1), "replace_5": (5, 0, 1),
        "friends_1": (0, 1, 1), "friends_3": (0, 3, 1), "friends_5": (0, 5, 1), "both": (1, 1, 1),
        "every_5": (1, 0, 5), "every_10": (1, 0, 10)}
ALIASES = {"rec": "replace_1", "every_1": "replace_1", "soc": "friends_1"}
ENTROPY_CONDITIONS = ("none", "replace_1", "replace_3", "replace_5", "rec", "soc", "both",
                      "friends_1", "friends_3", "friends_5", "every_1", "every_5", "every_10")
SATISFACTION_CONDITIONS = ("none", "replace_1", "replace_3", "replace_5", "every_1", "every_5", "every_10",
                           "soc", "both")
CONFORMITY_FRIENDS = (1, 3, 5)


@dataclass(frozen=True)
class RecAgentArgs:
    agents: int = 50
    """Scripted users (recagent deployed 50 agents)."""
    rounds: int = 50
    """Rounds per run (recagent ran 50)."""
    topics: int = 8
    """Item categories."""
    items_per_list: int = 5
    """Items per recommended list (recagent's MF recommends 5)."""
    intervene_from: int = 20
    """First round of every strategy (recagent: after 20 rounds)."""
    interests: int = 3
    """Equally liked favourite topics per user (multi-interest users)."""
    concentration: float = 0.8
    """Share of a user's preference weight on its favourites."""
    mf_window: int = 1
    """MF ranks the items of the last ``mf_window`` rounds (a fresh catalogue each round)."""
    friend_influence: float = 0.25
    """``TopicUsers.add_friends``: how far each added friend pulls a user's tastes."""
    seed: int = 0
    """Seed of replicate 0; replicate k runs with ``seed + k`` in every condition."""
    replicates: int = 20
    """Independent runs per condition."""
    conformity_rounds: int = 10
    """Rounds of the conformity experiment (recagent's AC sums over rounds 1-10)."""
    conformity_weight: float = 0.2
    """``TopicUsers.conform``: weight of each friend heard against the user's own opinion."""
    conformity_talk_prob: float = 0.2
    """``TopicUsers.conform``: chance that a user talks with a given friend in a round."""
    workers: int | None = None
    """Parallel runs (None: one per core)."""

    @property
    def seeds(self) -> tuple[int, ...]:
        return tuple(range(self.seed, self.seed + self.replicates))

    def cocoon_args(self) -> CocoonArgs:
        return CocoonArgs(agents=self.agents, rounds=self.rounds, topics=self.topics, feed_size=self.items_per_list,
                          intervene_from=self.intervene_from, recommender="mf",
                          recommender_kwargs={"window": self.mf_window}, interests_per_agent=self.interests,
                          interest_decay=1.0, concentration=self.concentration, rerank_phases=("act", "vote"),
                          friend_influence=self.friend_influence, seed=self.seed, replicates=self.replicates,
                          workers=self.workers)


QUICK = dict(agents=12, rounds=12, topics=6, intervene_from=6, replicates=2, conformity_rounds=6)


def run_cocoon(args: RecAgentArgs, out: str | Path) -> dict[str, list[dict]]:
    """Every MF condition of :data:`RUNS`, ``args.replicates`` runs each, as a sweep in ``out``:
    {condition: [run per replicate]}."""
    return run_study(args.cocoon_args(), out, RUNS)


def regular_friends(n: int, degree: int, rng: np.random.Generator) -> np.ndarray:
    """An (n, n) 0/1 adjacency matrix in which every user has exactly ``degree`` friends: users
    in random order on a ring, each tied to its ``degree // 2`` nearest on either side and, for
    an odd degree (n even), to the user opposite."""
    if not 0 <= degree < n or (degree % 2 and n % 2):
        raise ValueError(f"no {degree}-regular friendship graph on {n} users")
    order = rng.permutation(n)
    adj = np.zeros((n, n), np.int64)
    offsets = list(range(1, degree // 2 + 1)) + ([n // 2] if degree % 2 else [])
    for k in offsets:
        a, b = order, np.roll(order, -k)
        adj[a, b] = adj[b, a] = 1
    return adj


def run_conformity(args: RecAgentArgs, friends: int, seed: int) -> float:
    """recagent's attitude change AC(i) for users that all have ``friends`` friends: the share of
    (user, round r in 1..R) with a score at r different from r - 1."""
    rng = np.random.default_rng([seed, 5, friends])
    prefs = TopicUsers.make_preferences(args.agents, args.topics, rng=seed, interests_per_agent=args.interests,
                                        concentration=args.concentration, interest_decay=1.0)
    users = TopicUsers(prefs, seed=seed)
    opinion = users.opinion_of(int(rng.integers(args.topics)), rng)
    adj = regular_friends(args.agents, friends, rng)
    score = TopicUsers.rating_scores(opinion)
    changed = 0
    for _ in range(args.conformity_rounds):
        opinion, new = TopicUsers.conform(opinion, adj, rng, weight=args.conformity_weight,
                                          talk_prob=args.conformity_talk_prob)
        changed += int((new != score).sum())
        score = new
    return changed / (args.agents * args.conformity_rounds)


def _after(run: dict, key: str, start: int) -> float:
    values = np.asarray(run[key], float)[np.asarray(run["round"]) >= start]
    return float(np.nanmean(values))


def _drop_from_peak(run: dict) -> tuple[float, float]:
    """(peak, fall): peak of the 3-round moving mean of the entropy, fall = 1 - last-5 mean / peak."""
    e = np.asarray(run["entropy"], float)
    peak = float(np.convolve(e, np.ones(3) / 3, mode="valid").max()) if len(e) >= 3 else float(e.max())
    return peak, float(1 - e[-5:].mean() / peak) if peak > 0 else float("nan")


def _per_run(runs: dict[str, list[dict]], conditions, value) -> dict[str, list[float]]:
    return {c: [round(value(r), 6) for r in runs[ALIASES.get(c, c)]] for c in conditions}


def measures(args: RecAgentArgs, runs: dict[str, list[dict]]) -> dict:
    start, last = args.intervene_from, args.rounds
    span = f"rounds {start}-{last}"
    aliases = "; rec = replace_1 = every_1 and soc = friends_1 are the same runs"
    conformity = {f"friends_{k}": [round(run_conformity(args, k, s), 6) for s in args.seeds]
                  for k in CONFORMITY_FRIENDS}
    return {
        "entropy_peak": {
            "description": "peak of the 3-round moving mean of the per-round feed topic entropy E (nats), rounds 2-"
                           f"{last}, no intervention", "per_run": _per_run(runs, ("none",), lambda r: _drop_from_peak(r)[0])},
        "entropy_drop_from_peak": {
            "description": f"1 - (mean E of rounds {last - 4}-{last}) / entropy_peak, fraction, no intervention "
                           "(recagent: about 0.085)",
            "per_run": _per_run(runs, ("none",), lambda r: _drop_from_peak(r)[1])},
        "entropy_after": {
            "description": f"mean over {span} of the per-round feed topic entropy E (nats, recagent's formula over "
                           f"each round's 5-item feeds){aliases}",
            "per_run": _per_run(runs, ENTROPY_CONDITIONS, lambda r: _after(r, "entropy", start))},
        "satisfaction_after": {
            "description": f"mean over {span} and users of the scripted satisfaction rule 1 + round(9 x liked share "
                           f"of the round's recommended vote items), scale 1-10{aliases}",
            "per_run": _per_run(runs, SATISFACTION_CONDITIONS, lambda r: _after(r, "satisfaction", start))},
        "conformity": {
            "description": f"recagent's attitude change AC(i): share of (user, round 1-{args.conformity_rounds}) "
                           "whose 1-10 movie score changed from the round before, every user with i friends",
            "per_run": conformity},
    }


NOTES = [
    "Scripted TopicUsers, not LLM agents: they comment on and like items with a probability rising with their "
    "preference for the item's topic; no searching, chatting or broadcasting.",
    "Users have 3 equally liked interests among 8 topics (TopicUsers.make_preferences interests_per_agent=3, "
    "interest_decay=1); recagent's agents take their interests from profiles.",
    "Items are posts made by the users each round, not a movie catalogue; MF ranks the previous round's posts "
    "(window=1) by viewer x (author + topic) factors, retrained after every round on all exposures.",
    "Entropy is computed on each round's 5-item feed (exposure window 1 round), not cumulatively.",
    "Rec-Strategy replaces items in both recommended lists (feed and vote items), so the satisfaction rule, which "
    "reads the vote items, sees it.",
    "The frequency study (every 1/5/10 rounds) replaces 1 item per list; recagent does not restate N there.",
    "Soc-Strategy friends share none of the user's favourite topics and friendships are mutual (so a user gets "
    "N or more friends; few users qualify): an add_ties intervention, a tie of weight 0.5 in the environment plus "
    "a pull of the user's tastes (influence: each friend adds 0.25 x its preference row).",
    "Satisfaction is the scripted rule (liked share of the vote items mapped to 1-10), not an agent's rating.",
    "Seeds: independent runs with common random numbers across conditions; recagent reports no replicates.",
]


def summary(args: RecAgentArgs, runs: dict[str, list[dict]], wall: float) -> dict:
    design = {"agents": args.agents, "rounds": args.rounds, "runs": len(args.seeds), "items_per_list": args.items_per_list,
              "recommender": "mf", "intervene_from": args.intervene_from, "topics": args.topics,
              "interests_per_user": args.interests, "mf_window": args.mf_window, "seeds": list(args.seeds),
              "replaced_items": [1, 3, 5], "intervene_every": [1, 5, 10], "friends_added": [1, 3, 5],
              "friend_tie_weight": 0.5, "friend_influence": args.friend_influence,
              "conformity_rounds": args.conformity_rounds, "conformity_weight": args.conformity_weight,
              "conformity_talk_prob": args.conformity_talk_prob}
    return {"study": "recagent", "command": COMMAND, "wall_seconds": round(wall, 1), "population": "scripted users",
            "design": design, "measures": measures(args, runs), "notes": list(NOTES) + [conformity_note(args)]}


def conformity_note(args: RecAgentArgs) -> str:
    return ("Conformity is built in by construction (TopicUsers.conform: each round a user talks with each friend "
            f"with probability {args.conformity_talk_prob} and averages its opinion with the scores heard, weight "
            f"{args.conformity_weight} each); every user has exactly i friends (ring graph), {args.agents} users rate "
            "one movie of a random topic, no recommender; recagent let 5 well-connected agents watch it first.")


def curves(runs: dict[str, list[dict]]) -> dict:
    return {name: {"round": rs[0]["round"],
                   "entropy": np.mean([r["entropy"] for r in rs], axis=0).round(4).tolist(),
                   "satisfaction": np.nanmean([r["satisfaction"] for r in rs], axis=0).round(3).tolist()}
            for name, rs in runs.items()}


def main(argv: list[str] | None = None) -> dict:
    from socialgym.experiments.studies.registry import add_dataclass_arguments, dataclass_from_namespace

    parser = argparse.ArgumentParser(prog="socialgym study recagent", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="the study directory (a new one)")
    parser.add_argument("--quick", action="store_true", help="a tiny design for tests (12 users, 12 rounds, 2 replicates)")
    add_dataclass_arguments(parser, RecAgentArgs())
    ns = parser.parse_args(argv)
    started = time.perf_counter()
    args = dataclass_from_namespace(RecAgentArgs, ns)
    if ns.quick:
        args = dataclasses.replace(args, **QUICK)
    runs = run_cocoon(args, ns.out)
    result = summary(args, runs, time.perf_counter() - started)
    result["wall_seconds"] = round(time.perf_counter() - started, 1)
    write_json(Path(ns.out) / RESULTS, result)
    write_json(Path(ns.out) / CURVES, curves(runs))
    for name, m in result["measures"].items():
        print(name, {c: round(float(np.mean(v)), 3) for c, v in m["per_run"].items()})
    print(f"wrote {Path(ns.out) / RESULTS} in {result['wall_seconds']} s (a run directory per job under runs/)")
    return result


__all__ = ["RecAgentArgs", "RUNS", "ALIASES", "RESULTS", "CURVES", "regular_friends", "run_cocoon", "run_conformity",
           "measures", "summary", "curves", "main"]


if __name__ == "__main__":
    main()
