"""Information cocoons under a matrix-factorisation recommender, and recagent's Rec-Strategy.

Reproduces, with scripted users instead of LLM agents, the qualitative result of recagent
(Fig. 4a/4d): under MF retrained every round the mean topic entropy of what each agent is
recommended falls from its peak; replacing 1, 3 or 5 of the feed's items with random ones every
round restores it, more so the more items are replaced.

    python -m socialgym.experiments.studies.cocoon --out runs/cocoon          # 50 agents, 50 rounds
    python -m socialgym.experiments.studies.cocoon --rounds 12 --agents 20 --seeds 0

Writes ``entropy.png`` (mean entropy per round, one line per condition, mean over seeds),
``deep_cocoon.png`` (share of agents in a deep cocoon) and ``results.json`` (every curve and
the summary numbers) to ``--out``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
from dataclasses import dataclass, field

import numpy as np

import socialgym
from socialgym.baselines.topic_users import TopicUsers


@dataclass(frozen=True)
class CocoonArgs:
    agents: int = 50
    """Number of scripted users."""
    rounds: int = 50
    """Rounds per run."""
    topics: int = 8
    """Number of topics (item categories)."""
    feed_size: int = 5
    """Items recommended to each agent per round (recagent recommends 5 items per list)."""
    replacements: tuple[int, ...] = (1, 3, 5)
    """Rec-Strategy levels: how many of the feed's items are replaced by random ones."""
    intervene_from: int = 20
    """First round whose feed is re-ranked (recagent applied its strategies after 20 rounds)."""
    every: int = 1
    """Apply the replacement every this many rounds."""
    seeds: tuple[int, ...] = (0, 1, 2)
    """One run per seed and condition; curves are averaged over seeds."""
    recommender: str = "mf"
    """The recommender under study (any registered name)."""
    recommender_kwargs: dict = field(default_factory=dict)
    """Its parameters (MF: dim, epochs, lr, ...)."""
    interests_per_agent: int = 1
    """Favourite topics per scripted user (``TopicUsers.make_preferences``)."""
    interest_decay: float = 0.5
    """Weight ratio between successive favourites; 1 = multi-interest users liking all equally."""
    concentration: float = 0.8
    """Share of a user's preference weight on its favourites."""
    rerank_phases: tuple[str, ...] = ("act",)
    """Lists the Rec-Strategy acts on: the feed only, or ("act", "vote") for the vote items too."""
    friends: int = 0
    """Soc-Strategy: at the start of round ``intervene_from`` each user is befriended with this
    many users who share none of its favourite topics (mutual, so some get more)."""
    friend_weight: float = 0.5
    """Weight of the Soc-Strategy ties in the environment's tie matrix."""
    friend_influence: float = 0.25
    """``TopicUsers.add_friends`` influence: how far each friend pulls a user's tastes."""
    out: str = "runs/cocoon"
    """Output directory for the plots and results.json."""


def different_interest_friends(prefs: np.ndarray, m: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """For every user, ``m`` users (uniformly, without repeats) sharing none of its favourite
    topics (the topics above the row's minimum weight); mutual pairs ``(src, dst)``, both
    directions, without repeats. Users with fewer such peers get all of them."""
    prefs = np.asarray(prefs, float)
    fav = prefs > prefs.min(axis=1, keepdims=True) + 1e-12
    fav[~fav.any(axis=1)] = True
    disjoint = (fav.astype(int) @ fav.T.astype(int)) == 0
    n = len(prefs)
    src, dst = [], []
    for v in range(n):
        others = np.flatnonzero(disjoint[v])
        chosen = rng.choice(others, size=min(m, len(others)), replace=False) if len(others) and m else []
        src.extend([v] * len(chosen))
        dst.extend(int(c) for c in chosen)
    src, dst = np.asarray(src, np.int64), np.asarray(dst, np.int64)
    keys = np.unique(np.concatenate([src * n + dst, dst * n + src]))
    return keys // n, keys % n


def run_condition(args: CocoonArgs, replace: int, seed: int, *, friends: int | None = None,
                  every: int | None = None) -> dict:
    """One run; returns per-round mean topic entropy, deep-cocoon share and mean satisfaction
    (``Surveys.satisfaction_rule``, 1-10) of the recommendations. ``replace``: Rec-Strategy items
    per list; ``friends`` / ``every`` override ``args.friends`` / ``args.every``. Preferences and
    friends depend on ``seed`` only, so conditions on one seed share them (common random numbers)."""
    from socialgym.experiments.run.surveys import Surveys

    friends = args.friends if friends is None else friends
    every = args.every if every is None else every
    prefs = TopicUsers.make_preferences(args.agents, args.topics, rng=seed,
                                        interests_per_agent=args.interests_per_agent,
                                        concentration=args.concentration, interest_decay=args.interest_decay)
    rerank = ([{"kind": "random_replacement", "n": replace, "every": every,
                "start_round": args.intervene_from, "phases": list(args.rerank_phases)}] if replace else [])
    env = socialgym.parallel_env(
        n_agents=args.agents, max_rounds=args.rounds, topics=[f"topic_{i}" for i in range(args.topics)],
        recommender=args.recommender, recommender_kwargs=dict(args.recommender_kwargs), rerank=rerank,
        feed_size=args.feed_size, vote_feed_size=args.feed_size, obs_format="numeric",
        agent_interests=prefs, exposure_window=1, sentiment="tone", seed=seed)
    users = TopicUsers.for_env(env, prefs, seed=seed)
    obs, _ = env.reset(seed=seed)
    rounds, entropy, deep, satisfaction = [], [], [], []
    befriended = not friends
    while env.agents:
        if not befriended and env.phase == "act" and env.round >= args.intervene_from:
            src, dst = different_interest_friends(prefs, friends, np.random.default_rng([seed, 20]))
            env.add_ties(src, dst, args.friend_weight)
            users.add_friends(src, dst, args.friend_influence)
            befriended = True
        obs, *_ = env.step(users.act(obs))
        if env.phase == "act" and env.round > 2:      # a vote step closed round env.round - 1
            m = env.exposure_metrics()                 # its feed (round 1's feed is empty)
            rounds.append(env.round - 1)
            entropy.append(m["mean_topic_entropy"])
            deep.append(m["deep_cocoon_share"])
            sat = Surveys.satisfaction_rule(env)
            satisfaction.append(float(sat[sat > 0].mean()) if sat is not None and (sat > 0).any() else float("nan"))
    return {"round": rounds, "entropy": entropy, "deep_cocoon_share": deep, "satisfaction": satisfaction,
            "interventions": env.intervention_stats()}


def run(args: CocoonArgs) -> dict:
    conditions = {"no intervention": 0, **{f"replace {n}": n for n in args.replacements}}
    results = {"args": dataclasses.asdict(args), "conditions": {}}
    for label, n in conditions.items():
        runs = [run_condition(args, n, seed) for seed in args.seeds]
        ent = np.mean([r["entropy"] for r in runs], axis=0)
        deep = np.mean([r["deep_cocoon_share"] for r in runs], axis=0)
        after = np.array(runs[0]["round"]) >= args.intervene_from
        results["conditions"][label] = {
            "replace": n, "round": runs[0]["round"], "entropy": ent.tolist(),
            "deep_cocoon_share": deep.tolist(),
            "peak_entropy": float(ent.max()), "final_entropy": float(ent[-5:].mean()),
            "mean_entropy_after_intervention": float(ent[after].mean()) if after.any() else None,
            "replaced_items": [r["interventions"].get("RandomReplacement", {}).get("total", {}).get("replaced", 0)
                               for r in runs],
        }
    base = results["conditions"]["no intervention"]
    base["drop_from_peak"] = 1 - base["final_entropy"] / base["peak_entropy"]
    return results


def plot(results: dict, out: str) -> list[str]:
    from socialgym.experiments.analysis.plotting import figure, save

    paths = []
    args = results["args"]
    for key, ylabel, name in (("entropy", "mean topic entropy of the feed (nats)", "entropy.png"),
                              ("deep_cocoon_share", "share of agents in a deep cocoon", "deep_cocoon.png")):
        fig = figure(7, 4, layout="tight")
        ax = fig.add_subplot()
        for label, cond in results["conditions"].items():
            ax.plot(cond["round"], cond[key], label=label)
        ax.axvline(args["intervene_from"], color="grey", linestyle=":", linewidth=1)
        ax.set_xlabel("round")
        ax.set_ylabel(ylabel)
        ax.set_title(f"{args['recommender']} recommender, {args['agents']} scripted users, "
                     f"mean of {len(args['seeds'])} seeds")
        ax.legend()
        path = os.path.join(out, name)
        save(fig, path, dpi=120)
        paths.append(path)
    return paths


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    defaults = CocoonArgs()
    parser.add_argument("--agents", type=int, default=defaults.agents)
    parser.add_argument("--rounds", type=int, default=defaults.rounds)
    parser.add_argument("--topics", type=int, default=defaults.topics)
    parser.add_argument("--feed-size", type=int, default=defaults.feed_size)
    parser.add_argument("--replacements", type=int, nargs="+", default=list(defaults.replacements))
    parser.add_argument("--intervene-from", type=int, default=defaults.intervene_from)
    parser.add_argument("--every", type=int, default=defaults.every)
    parser.add_argument("--seeds", type=int, nargs="+", default=list(defaults.seeds))
    parser.add_argument("--recommender", default=defaults.recommender)
    parser.add_argument("--out", default=defaults.out)
    ns = parser.parse_args(argv)
    args = CocoonArgs(agents=ns.agents, rounds=ns.rounds, topics=ns.topics, feed_size=ns.feed_size,
                      replacements=tuple(ns.replacements), intervene_from=ns.intervene_from,
                      every=ns.every, seeds=tuple(ns.seeds), recommender=ns.recommender, out=ns.out)
    os.makedirs(args.out, exist_ok=True)
    results = run(args)
    with open(os.path.join(args.out, "results.json"), "w") as fh:
        json.dump(results, fh, indent=2)
    paths = plot(results, args.out)
    for label, cond in results["conditions"].items():
        after = cond["mean_entropy_after_intervention"]
        print(f"{label:>16}: peak {cond['peak_entropy']:.3f}, final {cond['final_entropy']:.3f}"
              + (f", mean from round {args.intervene_from} {after:.3f}" if after is not None else ""))
    print("wrote", ", ".join(paths + [os.path.join(args.out, "results.json")]))


__all__ = ["CocoonArgs", "different_interest_friends", "run_condition", "run", "plot", "main"]


if __name__ == "__main__":
    main()
