"""``socialgym study cocoon``: information cocoons under matrix factorisation, and recagent's
Rec-Strategy (random items in the feed) against them, with scripted users.

Reproduces the qualitative result of recagent (Fig. 4a/4d): under MF retrained every round the
mean topic entropy of what each agent is recommended falls from its peak; replacing 1, 3 or 5 of
the feed's items with random ones every round restores it, more so the more items are replaced.

    socialgym study cocoon --out runs/cocoon                       # 50 agents, 50 rounds, 3 replicates
    socialgym study cocoon --out runs/cocoon-small --agents 20 --rounds 12 --intervene-from 6 --replicates 1

A study is an ordinary sweep: one condition per strategy (an ``interventions`` list: a ``rerank``
with ``random_replacement`` from round ``intervene_from``, and for the Soc-Strategy an ``add_ties``
with ``soc_strategy`` and ``influence``), ``replicates`` seeds each with common random numbers,
every run a run directory under ``runs/`` that ``socialgym report``, ``view``, ``compare`` and
``validate`` read. The analysis reads the curves back from the runs (``network.csv``'s exposure
metrics, ``surveys.csv``'s satisfaction) and writes ``results.json``, ``entropy.png`` and
``deep_cocoon.png`` beside them; ``study.json`` keeps the arguments and the condition names.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

import numpy as np

from socialgym.rundir import Run, layout, read_sweep
from socialgym.rundir.files import read_json, write_json


@dataclass(frozen=True)
class CocoonArgs:
    agents: int = 50
    """Number of scripted users (``topic_users``)."""
    rounds: int = 50
    """Rounds per run."""
    topics: int = 8
    """Number of topics (item categories)."""
    feed_size: int = 5
    """Items recommended to each agent per round, in the feed and the vote list (recagent: 5)."""
    replacements: tuple[int, ...] = (1, 3, 5)
    """Rec-Strategy levels: how many of the feed's items are replaced by random ones."""
    intervene_from: int = 20
    """First round of every strategy (recagent applied them after 20 rounds)."""
    every: int = 1
    """Apply the replacement every this many rounds."""
    seed: int = 0
    """Seed of replicate 0; replicate k runs with ``seed + k`` in every condition."""
    replicates: int = 3
    """Runs per condition; curves are averaged over them."""
    recommender: str = "mf"
    """The recommender under study (any registered name)."""
    recommender_kwargs: dict = field(default_factory=dict)
    """Its parameters (MF: dim, epochs, lr, window ...)."""
    interests_per_agent: int = 1
    """Favourite topics per scripted user (drawn from the run's seed)."""
    interest_decay: float = 0.5
    """Weight ratio between successive favourites; 1 = multi-interest users liking all equally."""
    concentration: float = 0.8
    """Share of a user's preference weight on its favourites."""
    rerank_phases: tuple[str, ...] = ("act",)
    """Lists the Rec-Strategy acts on: the feed only, or ("act", "vote") for the vote items too."""
    friends: int = 0
    """Soc-Strategy condition ("friends N"): from round ``intervene_from`` each user is befriended with
    this many users who share none of its favourite topics (mutual, so some get more); 0 = none."""
    friend_weight: float = 0.5
    """Weight of the Soc-Strategy ties."""
    friend_influence: float = 0.25
    """How far each new friend pulls a user's tastes (``TopicUsers.add_friends``)."""
    workers: int | None = None
    """Parallel runs (None: one per core)."""

    def conditions(self) -> dict[str, tuple[int, int, int]]:
        """Condition name -> (items replaced, friends added, every): no intervention, each
        replacement level, and the Soc-Strategy when ``friends``."""
        out = {"no intervention": (0, 0, self.every), **{f"replace {n}": (n, 0, self.every) for n in self.replacements}}
        if self.friends:
            out[f"friends {self.friends}"] = (0, self.friends, self.every)
        return out


def strategy(args: CocoonArgs, replace: int, friends: int, every: int) -> list[dict]:
    """The interventions of one condition: Rec-Strategy ``replace`` items every ``every`` rounds,
    Soc-Strategy ``friends`` friends, both from round ``args.intervene_from``."""
    start = args.intervene_from
    out = []
    if replace:
        out.append({"kind": "rerank", "at_round": start, "rerank": [
            {"kind": "random_replacement", "n": replace, "every": every, "start_round": start,
             "phases": list(args.rerank_phases)}]})
    if friends:
        out.append({"kind": "add_ties", "at_round": start, "soc_strategy": friends, "weight": args.friend_weight,
                    "influence": args.friend_influence})
    return out


def study_config(args: CocoonArgs, conditions: Mapping[str, tuple[int, int, int]]):
    """The sweep: ``topic_users`` with drawn preferences under ``args.recommender``, one condition per
    strategy (the ``interventions`` key), a satisfaction survey every round."""
    from socialgym.experiments.define import load_config

    return load_config({
        "seed": args.seed,
        "env": {"n_agents": args.agents, "max_rounds": args.rounds, "topics": [f"topic_{i}" for i in range(args.topics)],
                "recommender": args.recommender, "recommender_kwargs": dict(args.recommender_kwargs),
                "feed_size": args.feed_size, "vote_feed_size": args.feed_size,
                "exposure_window": 1,           # each round's feeds: recagent's per-round entropy
                "sentiment": "tone"},
        "policy": {"kind": "topic_users", "params": {"interests_per_agent": args.interests_per_agent,
                                                     "interest_decay": args.interest_decay,
                                                     "concentration": args.concentration}},
        "surveys": [{"instrument": "satisfaction", "every": 1}],
        "logging": {"ties": False, "report": False},
        "run": {"replicates": args.replicates, "snapshots": False, **({"workers": args.workers} if args.workers else {})},
        "sweep": {"interventions": [strategy(args, *c) for c in conditions.values()]},
    })


def run_study(args: CocoonArgs, out: str | Path, conditions: Mapping[str, tuple[int, int, int]] | None = None,
              *, progress: bool | None = False) -> dict[str, list[dict]]:
    """Run every condition's replicates as a sweep in ``out`` and return :func:`read_curves`."""
    from socialgym.experiments.run.sweep import run_sweep

    conditions = dict(conditions or args.conditions())
    run_sweep(study_config(args, conditions), out, progress=progress)
    write_json(Path(out) / layout.STUDY_INFO, {"args": dataclasses.asdict(args), "conditions": {
        name: strategy(args, *c) for name, c in conditions.items()}})
    return read_curves(out)


def read_curves(out: str | Path) -> dict[str, list[dict]]:
    """Each condition's runs read back, in replicate order: per round from 2 (round 1's feed is
    empty) the mean topic entropy and deep-cocoon share of the round's feeds, the mean satisfaction
    of the agents shown vote items, and the run's re-ranking counts."""
    out = Path(out)
    info, manifest = read_json(out / layout.STUDY_INFO, None), read_sweep(out)
    if not isinstance(info, dict) or manifest is None:
        raise ValueError(f"{out} holds no cocoon study ({layout.STUDY_INFO} and {layout.SWEEP})")
    names = {json.dumps(v, sort_keys=True): k for k, v in info["conditions"].items()}
    runs: dict[str, list[tuple[int, dict]]] = {name: [] for name in info["conditions"]}
    for job in manifest["jobs"]:
        run = Run(out / job["out"])
        run.require(layout.NETWORK, layout.SUMMARY)
        rows = [r for r in run.network if int(r["round"]) >= 2]
        satisfaction = run.survey_means().get("satisfaction.satisfaction", (None, {}, 0))[1]
        name = names[json.dumps(job["condition"]["interventions"], sort_keys=True)]
        runs[name].append((job["replicate"], {
            "round": [int(r["round"]) for r in rows],
            "entropy": [float(r["mean_topic_entropy"]) for r in rows],
            "deep_cocoon_share": [float(r["deep_cocoon_share"]) for r in rows],
            "satisfaction": [satisfaction.get(int(r["round"]), float("nan")) for r in rows],
            "interventions": run.summary.get("interventions", {})}))
    return {name: [r for _, r in sorted(rs, key=lambda x: x[0])] for name, rs in runs.items()}


def analyze(out: str | Path) -> dict:
    """results.json and the two figures from the study's runs."""
    out = Path(out)
    args = read_json(out / layout.STUDY_INFO, {})["args"]
    results = {"args": args, "conditions": {}}
    for label, runs in read_curves(out).items():
        ent = np.mean([r["entropy"] for r in runs], axis=0)
        after = np.array(runs[0]["round"]) >= args["intervene_from"]
        results["conditions"][label] = {
            "round": runs[0]["round"], "entropy": ent.tolist(),
            "deep_cocoon_share": np.mean([r["deep_cocoon_share"] for r in runs], axis=0).tolist(),
            "peak_entropy": float(ent.max()), "final_entropy": float(ent[-5:].mean()),
            "mean_entropy_after_intervention": float(ent[after].mean()) if after.any() else None,
            "replaced_items": [r["interventions"].get("RandomReplacement", {}).get("total", {}).get("replaced", 0)
                               for r in runs],
        }
    base = results["conditions"]["no intervention"]
    base["drop_from_peak"] = 1 - base["final_entropy"] / base["peak_entropy"]
    write_json(out / "results.json", results)
    plot(results, out)
    return results


def plot(results: dict, out: str | Path) -> list[Path]:
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
                     f"mean of {args['replicates']} replicates")
        ax.legend()
        path = Path(out) / name
        save(fig, path, dpi=120)
        paths.append(path)
    return paths


def add_arguments(parser: argparse.ArgumentParser, defaults=CocoonArgs()) -> None:
    """One option per field of :class:`CocoonArgs` (the field's docstring is its help)."""
    from socialgym.experiments.studies.registry import add_dataclass_arguments
    add_dataclass_arguments(parser, defaults, skip=("recommender_kwargs", "rerank_phases"))


def main(argv: list[str] | None = None) -> dict:
    from socialgym.experiments.studies.registry import dataclass_from_namespace

    parser = argparse.ArgumentParser(prog="socialgym study cocoon", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="runs/cocoon", help="the study directory (a new one)")
    add_arguments(parser)
    ns = parser.parse_args(argv)
    args = dataclass_from_namespace(CocoonArgs, ns)
    run_study(args, ns.out)
    results = analyze(ns.out)
    for label, cond in results["conditions"].items():
        after = cond["mean_entropy_after_intervention"]
        print(f"{label:>16}: peak {cond['peak_entropy']:.3f}, final {cond['final_entropy']:.3f}"
              + (f", mean from round {args.intervene_from} {after:.3f}" if after is not None else ""))
    print(f"study: {ns.out} (results.json, entropy.png, deep_cocoon.png; a run directory per job under runs/)")
    return results


__all__ = ["CocoonArgs", "strategy", "study_config", "run_study", "read_curves", "analyze", "plot", "main"]


if __name__ == "__main__":
    main()
