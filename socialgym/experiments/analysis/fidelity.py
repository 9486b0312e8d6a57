"""How alike two sets of agents behave: LLM agents and the policy distilled from them.

:func:`fidelity` compares the same agents of two runs of one config — the original (LLM) run
and its replay with the distilled policy in their place (``socialgym distill --report``) — on:

- **action types**: shares of POST, COM, DM, NOT among their action slots (rounds.csv);
- **targets**: what an action answers — a COM on feed slot j (its rank in the feed), a DM reply,
  a new DM to an author in one's feed or to someone else (decision logs);
- **tones**: supportive / neutral / critical among actions that have one (decision logs);
- **votes**: like / no vote / dislike among the shown vote items (decision logs);
- **rewards**: mean of each reward component per agent-round, and the per-agent-round totals'
  distributions (rounds.csv);
- **ties**: out-degree and out-strength of their ties after the last round, and the share of
  their ties returned (tie matrices).

Each line gives both values and a distance: total variation for the distributions (0 = equal,
1 = disjoint), the 1-Wasserstein distance for the totals, the Kolmogorov-Smirnov statistic for
the degree distributions, the absolute difference for means and shares.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Iterable

import numpy as np

from socialgym.config import REWARD_NAMES
from socialgym.envs.feed.encoding import FIELDS, ActionLayout
from socialgym.platform.actions import ACTION_TYPES, TONES
from socialgym.rundir import Run, layout
from socialgym.rundir.files import to_float

VOTES = ("dislike", "no vote", "like")


def total_variation(p: dict, q: dict) -> float:
    """Half the L1 distance between two distributions given as counts (normalised here)."""
    keys = sorted(set(p) | set(q))
    a = np.array([p.get(k, 0) for k in keys], float)
    b = np.array([q.get(k, 0) for k in keys], float)
    if a.sum() == 0 or b.sum() == 0:
        return float("nan")
    return float(0.5 * np.abs(a / a.sum() - b / b.sum()).sum())


def _shares(counts: dict) -> dict:
    total = sum(counts.values())
    return {k: v / total for k, v in counts.items()} if total else {}


def decision_counts(run: Path, agents: Iterable[int]) -> dict[str, Counter]:
    """Targets, tones and votes of ``agents`` (indices) from a run's decision logs."""
    wanted = set(int(a) for a in agents)
    run = Run(run)
    found = run.decisions()
    run.require(layout.DECISIONS)
    decisions, _ = found
    out = {"target": Counter(), "tone": Counter(), "vote": Counter()}
    act = decisions.get("act")
    if act is not None:
        lay: ActionLayout = act.layout
        rows = np.isin(act.agent, list(wanted))
        feed_authors = act.obs["feed"][rows][:, :, 1].astype(np.int64)
        present = act.obs["feed"][rows][:, :, 0] > 0
        for s in range(lay.n_actions):
            slot = act.action[rows][:, s * lay.slot_width:(s + 1) * lay.slot_width]
            fixed = act.relevant[rows][:, s * lay.slot_width:(s + 1) * lay.slot_width]
            me = act.agent[rows]
            n = act.n_agents[rows]
            for i in range(len(slot)):
                kind = ACTION_TYPES[slot[i, 0]] if fixed[i, 0] else None
                if kind is None or kind == "NOT":
                    continue
                if fixed[i, FIELDS.index("tone")]:
                    out["tone"][TONES[slot[i, FIELDS.index("tone")]]] += 1
                if kind == "COM" and fixed[i, 1]:
                    out["target"][f"COM on feed slot {slot[i, 1] + 1}"] += 1
                elif kind == "DM" and slot[i, 3] > 0:
                    out["target"]["DM reply"] += 1
                elif kind == "DM" and fixed[i, 2]:
                    who = (me[i] + 1 + slot[i, 2]) % n[i]
                    in_feed = bool((present[i] & (feed_authors[i] == who)).any())
                    out["target"]["new DM to a feed author" if in_feed else "new DM to another"] += 1
    vote = decisions.get("vote")
    if vote is not None:
        lay = vote.layout
        rows = np.isin(vote.agent, list(wanted))
        values = vote.action[rows][:, lay.act_length:]
        fixed = vote.relevant[rows][:, lay.act_length:]
        for code, name in enumerate(VOTES):
            out["vote"][name] += int(((values == code) & fixed).sum())
    return out


def round_rows(run: Path, agents: Iterable[int]) -> list[dict]:
    names = {f"agent_{int(a)}" for a in agents}
    run = Run(run)
    run.require(layout.ROUNDS)
    return [r for r in run.rounds if r.get("agent") in names]


def tie_stats(run: Path, agents: Iterable[int]) -> dict:
    """Out-degree and out-strength of ``agents`` in the last tie matrix, and their returned share."""
    run = Run(run)
    last = run.last_ties()
    run.check(layout.TIES)
    if last is None:
        return {}
    W = last[1]
    idx = np.asarray(sorted(set(int(a) for a in agents)), np.int64)
    out_rows = W[idx]
    degree = np.diff(out_rows.indptr)
    strength = np.asarray(out_rows.sum(axis=1)).ravel()
    coo = out_rows.tocoo()
    back = np.asarray(W[coo.col, idx[coo.row]]).ravel() > 0 if coo.nnz else np.zeros(0, bool)
    return {"degree": degree, "strength": strength,
            "returned": float(back.mean()) if len(back) else float("nan")}


def fidelity(original: Path, replay: Path, agents: Iterable[int]) -> list[dict]:
    """The comparison lines (statistic, original, replay, distance, measure) for ``agents``."""
    from scipy.stats import ks_2samp, wasserstein_distance

    agents = sorted(set(int(a) for a in agents))
    lines: list[dict] = []

    def dist(name: str, a: dict, b: dict) -> None:
        lines.append({"statistic": name, "original": _shares(a), "replay": _shares(b),
                      "distance": total_variation(a, b), "measure": "total variation"})

    ra, rb = round_rows(original, agents), round_rows(replay, agents)
    types = [Counter({t: sum(int(to_float(r.get(t), 0)) for r in rows) for t in ACTION_TYPES}) for rows in (ra, rb)]
    dist("action types", *types)
    da, db = decision_counts(original, agents), decision_counts(replay, agents)
    for key, label in (("target", "targets"), ("tone", "tones"), ("vote", "votes")):
        dist(label, da[key], db[key])
    for c in (*REWARD_NAMES, "total"):
        a = np.array([to_float(r.get(c)) for r in ra], float)
        b = np.array([to_float(r.get(c)) for r in rb], float)
        ma, mb = float(np.nanmean(a)) if len(a) else float("nan"), float(np.nanmean(b)) if len(b) else float("nan")
        lines.append({"statistic": f"mean {c} reward", "original": ma, "replay": mb, "distance": abs(ma - mb),
                      "measure": "absolute difference"})
    a = np.array([to_float(r.get("total")) for r in ra], float)
    b = np.array([to_float(r.get("total")) for r in rb], float)
    if len(a) and len(b):
        lines.append({"statistic": "total reward per agent-round", "original": _summary(a), "replay": _summary(b),
                      "distance": float(wasserstein_distance(a[np.isfinite(a)], b[np.isfinite(b)])),
                      "measure": "1-Wasserstein"})
    ta, tb = tie_stats(original, agents), tie_stats(replay, agents)
    if ta and tb:
        lines.append({"statistic": "tie out-degree", "original": _summary(ta["degree"]),
                      "replay": _summary(tb["degree"]),
                      "distance": float(ks_2samp(ta["degree"], tb["degree"]).statistic), "measure": "KS statistic"})
        sa, sb = float(ta["strength"].mean()), float(tb["strength"].mean())
        lines.append({"statistic": "mean tie out-strength", "original": sa, "replay": sb, "distance": abs(sa - sb),
                      "measure": "absolute difference"})
        lines.append({"statistic": "share of ties returned", "original": ta["returned"], "replay": tb["returned"],
                      "distance": abs(ta["returned"] - tb["returned"]), "measure": "absolute difference"})
    return lines


def _summary(x: np.ndarray) -> dict:
    x = np.asarray(x, float)
    return {"mean": float(np.mean(x)), "median": float(np.median(x)), "n": int(len(x))}


def _show(value) -> str:
    if isinstance(value, dict):
        if "mean" in value:
            return f"mean {value['mean']:.3g}, median {value['median']:.3g} (n={value['n']})"
        return ", ".join(f"{k} {v:.0%}" for k, v in sorted(value.items(), key=lambda kv: -kv[1])[:6]) or "none"
    return "n/a" if value is None or (isinstance(value, float) and np.isnan(value)) else f"{value:.3g}"


def fidelity_markdown(report: dict) -> str:
    """The fidelity report (:func:`socialgym.experiments.run.distill.distill`'s result) as Markdown."""
    a = report["agreement"]
    out = [f"Distilled from {len(report['train_runs'])} run(s); held out: {len(report['heldout_runs'])}. "
           f"Training rows (one per agent and step): act {report['train_decisions'].get('act', 0)}, "
           f"vote {report['train_decisions'].get('vote', 0)}.", "",
           "**Agreement on held-out decisions** (the network's most likely choice = the logged one):", "",
           "| decisions | held out | agreed | share |", "|---|---:|---:|---:|"]
    for key in ("act", "vote", "overall"):
        if key in a:
            out.append(f"| {key} | {a[key]['decisions']} | {a[key]['agreed']} | {_show(a[key]['share'])} |")
    out += ["", "| component | held out | share agreed |", "|---|---:|---:|"]
    out += [f"| {k} | {v['components']} | {_show(v['share'])} |" for k, v in a["fields"].items()]
    if report.get("unmapped"):
        out += ["", "Choices with no numeric twin (left out of training and agreement): "
                + ", ".join(f"{k} {v}" for k, v in sorted(report["unmapped"].items()) if v) + "."]
    for run in report.get("replays", []):
        out += ["", f"**Replay of `{run['run']}`** ({run['agents']} agents replaced by the distilled policy):", "",
                "| statistic | logged agents | distilled | distance | measure |", "|---|---|---|---:|---|"]
        out += [f"| {ln['statistic']} | {_show(ln['original'])} | {_show(ln['replay'])} | {_show(ln['distance'])} "
                f"| {ln['measure']} |" for ln in run["lines"]]
    return "\n".join(out) + "\n"
