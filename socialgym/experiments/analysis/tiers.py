"""Each tier's metrics side by side: how LLM agents, archetypes, distilled, trained and scripted
agents of one run behaved (docs/hybrid.md).

A tier is what a policy group's kind stands for (``socialgym.experiments.define.schema.tier_of``);
rounds.csv names each agent's kind. Per tier: its agents; mean reward per agent-round (total and
each component); actions and votes per agent-round; the share of agent-rounds with at least one
action that is not NOT; and from the last tie matrix its agents' mean out-degree and mean tie
strength (outgoing ties).
"""

from __future__ import annotations

import html
from pathlib import Path

import numpy as np

from socialgym.config import REWARD_NAMES
from socialgym.experiments.define.schema import TIERS, tier_of
from socialgym.platform.actions import ACTION_TYPES
from socialgym.rundir import Run, layout
from socialgym.rundir.files import to_float

ACTIVE_TYPES = tuple(t for t in ACTION_TYPES if t != "NOT")
ROWS = (("agents", "agents"), ("total", "mean total reward"),
        *((c, f"mean {c} reward") for c in REWARD_NAMES),
        *((t, f"{t} per agent-round") for t in ACTION_TYPES),
        ("votes_up", "likes per agent-round"), ("votes_down", "dislikes per agent-round"),
        ("active_share", "share of agent-rounds active"), ("out_degree", "mean out-degree (last round)"),
        ("tie_strength", "mean tie strength (last round)"))


def tier_table(run: str | Path) -> list[dict]:
    """One dict per tier present in the run (in ``TIERS`` order), keys as in ``ROWS`` plus ``tier``.
    FileNotFoundError without rounds.csv; RunFileError for it or a last tie file damaged."""
    run = Run(run)
    run.require(layout.ROUNDS)
    rows = run.rounds
    agent_tier: dict[str, str] = {}
    by_tier: dict[str, list[dict]] = {}
    for r in rows:
        tier = tier_of(r.get("policy", ""))
        agent_tier[r["agent"]] = tier
        by_tier.setdefault(tier, []).append(r)
    last = run.last_ties()
    run.check(layout.TIES)
    W = last[1] if last is not None else None
    out = []
    for tier in (t for t in TIERS if t in by_tier):
        mine = by_tier[tier]
        agents = sorted({r["agent"] for r in mine})
        row: dict = {"tier": tier, "agents": len(agents)}
        for key in ("total", *REWARD_NAMES, *ACTION_TYPES, "votes_up", "votes_down"):
            values = np.array([to_float(r.get(key)) for r in mine], float)
            row[key] = float(np.nanmean(values)) if np.isfinite(values).any() else None
        active = [sum(to_float(r.get(t), 0.0) for t in ACTIVE_TYPES) > 0 for r in mine]
        row["active_share"] = float(np.mean(active))
        row["out_degree"] = row["tie_strength"] = None
        if W is not None:
            idx = np.array([int(a.rpartition("_")[2]) for a in agents], np.int64)
            idx = idx[idx < W.shape[0]]
            sub = W[idx]
            sub.eliminate_zeros()              # a stored 0 is no tie
            row["out_degree"] = float(np.diff(sub.indptr).mean()) if len(idx) else None
            row["tie_strength"] = float(sub.data.mean()) if sub.nnz else 0.0
        out.append(row)
    return out


def _cell(value) -> str:
    if value is None:
        return "n/a"
    return f"{value:,}" if isinstance(value, int) else f"{value:.3g}"


def tier_markdown(rows: list[dict]) -> str:
    """The tiers side by side (a column per tier) as a Markdown table."""
    if not rows:
        return "No agents recorded."
    out = ["| | " + " | ".join(r["tier"] for r in rows) + " |", "|---|" + "---:|" * len(rows)]
    out += [f"| {label} | " + " | ".join(_cell(r.get(key)) for r in rows) + " |" for key, label in ROWS]
    return "\n".join(out)


def tiers_html(run: str | Path) -> str:
    """The report's section: the tiers side by side, only when the run has more than one tier."""
    try:
        rows = tier_table(run)
    except (OSError, ValueError, KeyError):      # no rounds.csv, a foreign one or an unreadable tie file
        return ""
    if len(rows) < 2:
        return ""
    head = "".join(f"<th>{html.escape(r['tier'])}</th>" for r in rows)
    body = "".join(f"<tr><td>{html.escape(label)}</td>" + "".join(f"<td>{html.escape(_cell(r.get(key)))}</td>"
                                                                 for r in rows) + "</tr>" for key, label in ROWS)
    return ('<h2>Tiers side by side</h2><p class="muted">Per agent-round unless said otherwise; the tier is how '
            "a group's agents decide (docs/hybrid.md).</p>"
            f'<table class="tiers"><thead><tr><th></th>{head}</tr></thead><tbody>{body}</tbody></table>')
