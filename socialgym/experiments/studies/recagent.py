"""recagent's recommender experiments (information cocoons, Fig. 4; conformity, Fig. 5) with
scripted users.

    python -m socialgym.experiments.studies.recagent --out runs/recagent            # full design
    python -m socialgym.experiments.studies.recagent --out /tmp/recagent --quick    # tiny, < 30 s

Every MF run is :func:`socialgym.experiments.studies.cocoon.run_condition`: 50
:class:`~socialgym.baselines.topic_users.TopicUsers` with **three equally liked interests** each
(``make_preferences(interests_per_agent=3, interest_decay=1)``) among 8 topics, 50 rounds, 5 items
per recommended list, ``mf`` retrained every round on the items of the previous round
(``window=1``). From round 20 (recagent's start of the strategies):

- **Rec-Strategy**: ``random_replacement`` of N = 1 / 3 / 5 of the 5 items (feed and vote list),
  every round, or N = 1 every 1 / 5 / 10 rounds;
- **Soc-Strategy**: each user gets N = 1 / 3 / 5 friends who share none of its interests — a tie
  in the environment (``env.add_ties``) and a pull of its tastes toward theirs
  (``TopicUsers.add_friends``);
- both combined (N = 1 replaced, 1 friend).

Each seed is one independent run; a seed's conditions share preferences, friends and everything
before round 20 (common random numbers). The **conformity** experiment (no recommender): users
with exactly 1 / 3 / 5 friends rate one movie for 10 rounds, moving toward the friends they talk
with (``TopicUsers.conform``); AC = the share of (user, round) pairs whose score changed.

Writes ``summary.json`` (per-run values of every measure, see :func:`summary`) and
``curves.json`` (each condition's entropy and satisfaction per round, mean over seeds) to ``--out``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing
import os
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import numpy as np

from socialgym.baselines.topic_users import TopicUsers
from socialgym.experiments.studies.cocoon import CocoonArgs, run_condition
from socialgym.rundir import layout

COMMAND = "python -m socialgym.experiments.studies.recagent --out DIR"

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
    seeds: tuple[int, ...] = tuple(range(20))
    """One independent run per seed and condition."""
    conformity_rounds: int = 10
    """Rounds of the conformity experiment (recagent's AC sums over rounds 1-10)."""
    conformity_weight: float = 0.2
    """``TopicUsers.conform``: weight of each friend heard against the user's own opinion."""
    conformity_talk_prob: float = 0.2
    """``TopicUsers.conform``: chance that a user talks with a given friend in a round."""
    jobs: int = 2
    """Worker processes (one torch thread each)."""

    def cocoon_args(self) -> CocoonArgs:
        return CocoonArgs(agents=self.agents, rounds=self.rounds, topics=self.topics, feed_size=self.items_per_list,
                          intervene_from=self.intervene_from, recommender="mf",
                          recommender_kwargs={"window": self.mf_window}, interests_per_agent=self.interests,
                          interest_decay=1.0, concentration=self.concentration, rerank_phases=("act", "vote"),
                          friend_influence=self.friend_influence, seeds=self.seeds, out="")


QUICK = dict(agents=12, rounds=12, topics=6, intervene_from=6, seeds=(0, 1), conformity_rounds=6)


def _init_worker() -> None:
    import torch
    torch.set_num_threads(1)


def _one_run(job: tuple[CocoonArgs, str, int]) -> tuple[str, int, dict]:
    args, name, seed = job
    replace, friends, every = RUNS[name]
    return name, seed, run_condition(args, replace, seed, friends=friends, every=every)


def run_cocoon(args: RecAgentArgs) -> dict[str, list[dict]]:
    """Every MF condition of :data:`RUNS` on every seed: {condition: [run per seed]}."""
    cargs = args.cocoon_args()
    jobs = [(cargs, name, seed) for seed in args.seeds for name in RUNS]
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=max(1, args.jobs), mp_context=ctx, initializer=_init_worker) as pool:
        done = list(pool.map(_one_run, jobs))
    runs: dict[str, dict[int, dict]] = {}
    for name, seed, result in done:
        runs.setdefault(name, {})[seed] = result
    return {name: [runs[name][seed] for seed in args.seeds] for name in RUNS}


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
    "Soc-Strategy friends share none of the user's favourite topics and friendships are mutual (N = 1/3/5 gives "
    "about 1.9/4.9/7.1 friends per user with 50 users; few users qualify); a friendship is a tie of weight 0.5 "
    "in the environment plus a built-in pull of the user's tastes (each friend adds 0.25 x its preference row).",
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
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--quick", action="store_true", help="a tiny design for tests (12 users, 12 rounds, 2 seeds)")
    parser.add_argument("--seeds", type=int, nargs="+", help="override the seeds")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes")
    ns = parser.parse_args(argv)
    started = time.perf_counter()
    args = RecAgentArgs(**(QUICK if ns.quick else {}), jobs=ns.jobs)
    if ns.seeds:
        args = dataclasses.replace(args, seeds=tuple(ns.seeds))
    os.makedirs(ns.out, exist_ok=True)
    runs = run_cocoon(args)
    result = summary(args, runs, time.perf_counter() - started)
    result["wall_seconds"] = round(time.perf_counter() - started, 1)
    with open(os.path.join(ns.out, layout.SUMMARY), "w") as fh:
        json.dump(result, fh, indent=1)
    with open(os.path.join(ns.out, "curves.json"), "w") as fh:
        json.dump(curves(runs), fh)
    for name, m in result["measures"].items():
        print(name, {c: round(float(np.mean(v)), 3) for c, v in m["per_run"].items()})
    print(f"wrote {os.path.join(ns.out, layout.SUMMARY)} in {result['wall_seconds']} s")
    return result


__all__ = ["RecAgentArgs", "RUNS", "ALIASES", "regular_friends", "run_cocoon", "run_conformity", "measures",
           "summary", "curves", "main"]


if __name__ == "__main__":
    main()
