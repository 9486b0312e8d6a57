"""PNG plots and a self-contained HTML report of one run directory.

``build_report(run_dir)`` reads (through ``socialgym.rundir.Run``) the files the runner writes (``rounds.csv``,
``network.csv``, ``summary.json``, and, when present, ``config.yaml``, ``ties/round_*.npz`` and
``events.jsonl``), draws ``plots/*.png`` and writes ``report.html``. The HTML inlines the PNGs as
``data:`` URIs and its CSS, and its Content-Security-Policy forbids every other resource, so the
file opens offline and can be mailed or archived on its own.

Only numpy is imported at module level: matplotlib, scipy and networkx are imported by the
functions that need them, so importing this module stays light. Figures come from
``socialgym.experiments.analysis.plotting``.
"""

from __future__ import annotations

import base64
import html
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from socialgym.rundir.files import atomic_write, own_dir, to_float
from socialgym.experiments.analysis.plotting import figure, save
from socialgym.experiments.analysis.realism import realism_html
from socialgym.experiments.analysis.tiers import tiers_html
from socialgym.rundir import Run, layout
from socialgym.rundir.layout import REWARD_COLUMNS

# network.png panels; the cocoon metrics are NaN until a feed was shown, so they are drawn only
# when they hold at least one number
NETWORK_PANELS = ("density", "clustering", "modularity", "lcc_fraction", "mean_tie")
COCOON_PANELS = ("mean_topic_entropy", "deep_cocoon_share")
TIE_THRESHOLD = 0.1          # the default of socialgym.metrics.network_metrics
LAYOUT_SEED = 0              # spring layout seed: the same ties always give the same picture
MAX_DRAWN_NODES = 300        # larger graphs: draw the best-connected nodes only
OPTIONAL_PLOTS = ("learning_curves.png", "rewards_by_group.png", "surveys.png")

_CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"
_CSS = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; padding: 0 1em;
       color: #222; line-height: 1.4; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; }
h2 { font-size: 1.25em; border-bottom: 1px solid #ccc; padding-bottom: 0.2em; margin-top: 1.6em; }
.problem { background: #fdecea; border-left: 4px solid #c0392b; padding: 0.5em 0.8em; }
table { border-collapse: collapse; margin: 0.5em 0 1em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.7em; text-align: left; vertical-align: top; }
th { background: #f3f3f3; font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.tables { display: flex; flex-wrap: wrap; gap: 2em; }
figure { margin: 1.2em 0; }
figure img { max-width: 100%; height: auto; border: 1px solid #ddd; }
figcaption { font-size: 0.92em; color: #444; margin-top: 0.3em; }
pre { background: #f7f7f7; border: 1px solid #ddd; padding: 0.8em; overflow-x: auto;
      font-size: 0.88em; }
.muted { color: #777; }
"""


# --------------------------------------------------------------------------- reading the run

@dataclass
class _LoadedRun:
    """Everything the report needs, read once from the run directory."""

    path: Path
    summary: dict
    rounds: dict[str, list[str]]                 # rounds.csv column -> raw cells
    network: dict[str, list[str]] | None         # network.csv, None when absent
    config_text: str | None
    ties: Any = None                             # scipy CSR of the last ties/round_*.npz
    ties_round: int | None = None
    ties_note: str = ""                          # why there is no tie matrix, if there is none
    info: dict = field(default_factory=dict)     # run.json
    personas: dict = field(default_factory=dict)
    surveys: dict = field(default_factory=dict)  # Run.survey_means()
    events: dict[str, int] | None = None         # events.jsonl: count per kind
    interventions: list = field(default_factory=list)    # events.jsonl: (round, kind) per intervention
    agent_groups: dict[str, str] = field(default_factory=dict)
    damaged: list[str] = field(default_factory=list)     # Run.damaged: what could not be read, in words

    def column(self, name: str) -> np.ndarray:
        """A rounds.csv column as floats (NaN for empty or non-numeric cells)."""
        return _floats(self.rounds.get(name, [""] * self.n_rows))

    @property
    def n_rows(self) -> int:
        return len(self.rounds.get("round", []))

    @property
    def group_labels(self) -> list[str]:
        return sorted({g for g in self.agent_groups.values() if g})


def _columns(table: tuple[list[str], list[list[str]]]) -> dict[str, list[str]]:
    """Columns of a CSV file (header order kept; a repeated name keeps its first column); short
    rows (a line being written) are padded."""
    header, rows = table
    rows = [row + [""] * (len(header) - len(row)) for row in rows]
    columns: dict[str, list[str]] = {}
    for j, name in enumerate(header):
        columns.setdefault(name, [row[j] for row in rows])
    return columns


def _floats(cells: list[str]) -> np.ndarray:
    out = np.array([to_float(cell) for cell in cells], dtype=float)
    out[~np.isfinite(out)] = np.nan              # inf would break the axis limits
    return out


def _load(run_dir: str | os.PathLike) -> _LoadedRun:
    run = Run(run_dir)
    run.require(layout.ROUNDS, layout.SUMMARY)
    network = _columns(run.table(layout.NETWORK))
    loaded = _LoadedRun(path=run.path, summary=run.summary, rounds=_columns(run.table(layout.ROUNDS)),
                        network=None if layout.NETWORK in run.missing else network, config_text=run.config_text,
                        info=run.info or {}, personas=run.personas or {}, surveys=run.survey_means())
    if layout.EVENTS not in run.missing:         # events per kind; unreadable lines as "(unreadable)"
        loaded.events = {}
        for event in run.events:
            kind = "(unreadable)" if event is None else str(event.get("kind", "(no kind)"))
            loaded.events[kind] = loaded.events.get(kind, 0) + 1
            if kind == "INTERVENTION" and isinstance(event.get("round"), int):
                loaded.interventions.append((event["round"], str(event.get("intervention", ""))))
    groups = run.summary.get("groups")
    if isinstance(groups, dict):
        loaded.agent_groups = {str(a): "" if g is None else str(g) for a, g in groups.items()}
    for agent, group in zip(loaded.rounds.get("agent", []), loaded.rounds.get("group", [])):
        if group:
            loaded.agent_groups[agent] = group
    found = run.last_ties()                      # a damaged file: said in the plot
    if found is None:
        loaded.ties_note = (run.notice(layout.TIES)
                            or f"no tie matrices ({layout.TIES}/round_*.npz) in the run directory")
    else:
        loaded.ties_round, loaded.ties = found
    loaded.damaged = [run.notice(name) for name in run.damaged]
    return loaded


# --------------------------------------------------------------------------- numbers

def _round_means(rounds: np.ndarray, values: np.ndarray,
                 mask: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Distinct rounds (sorted) and the mean of the finite values of each; NaN when none."""
    keep = np.isfinite(rounds) if mask is None else np.isfinite(rounds) & mask
    xs, inverse = np.unique(rounds[keep], return_inverse=True)
    v = values[keep]
    finite = np.isfinite(v)
    sums = np.bincount(inverse, weights=np.where(finite, v, 0.0), minlength=len(xs))
    counts = np.bincount(inverse, weights=finite.astype(float), minlength=len(xs))
    with np.errstate(invalid="ignore", divide="ignore"):
        return xs, sums / counts


def _undirected_ties(W: Any):
    """The undirected tie graph exactly as ``socialgym.metrics.network_metrics`` builds it:
    weights ``(W + W^T)/2``, edges where that is >= TIE_THRESHOLD."""
    from socialgym.metrics import undirected_graph
    return undirected_graph(W, TIE_THRESHOLD)


def _summary_final(run: _LoadedRun, key: str) -> dict:
    """summary.json's final[key], {} when absent or not an object (e.g. a running run)."""
    final = run.summary.get("final")
    value = final.get(key) if isinstance(final, dict) else None
    return value if isinstance(value, dict) else {}


def _final_rewards(run: _LoadedRun) -> dict[str, Any]:
    """summary.json's final mean rewards, else the means of the last round in rounds.csv."""
    final = _summary_final(run, "rewards")
    if final:
        return final
    rounds = run.column("round")
    if not np.isfinite(rounds).any():
        return {}
    last = rounds == np.nanmax(rounds)
    return {name: float(_round_means(rounds, run.column(name), last)[1][0])
            for name in REWARD_COLUMNS if name in run.rounds}


def _final_network(run: _LoadedRun) -> dict[str, Any]:
    """summary.json's final network metrics, else the last row of network.csv."""
    final = _summary_final(run, "network")
    if final:
        return final
    if not run.network or not run.network.get("round"):
        return {}
    return {name: cells[-1] for name, cells in run.network.items() if name != "round"}


# --------------------------------------------------------------------------- plotting

def _plain(text: Any) -> str:
    """A label from the files, shown literally: a '$' would otherwise start mathtext."""
    return str(text).replace("$", r"\$")


def _integer_rounds(ax, rounds: np.ndarray, marks=()) -> None:
    """Round numbers on the x axis: integer ticks only, and room around a single round; a dotted
    vertical line at each round with a scheduled intervention (``marks``: (round, kind) pairs)."""
    for r in sorted({m[0] for m in marks}):
        ax.axvline(r, color="#c0392b", ls=":", lw=1, alpha=0.8)
    from matplotlib.ticker import MaxNLocator
    ax.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))
    finite = rounds[np.isfinite(rounds)]
    if len(finite) and finite.max() - finite.min() < 1:    # else the ticks would be 0.95, 0.96...
        ax.set_xlim(finite.min() - 0.5, finite.max() + 0.5)
    ax.set_xlabel("round")
    ax.grid(alpha=0.3)


def _message(ax, text: str) -> None:
    ax.text(0.5, 0.5, _plain(text), ha="center", va="center", wrap=True, color="#666",
            transform=ax.transAxes)
    ax.set_xticks([])
    ax.set_yticks([])


def _message_plot(path: Path, title: str, text: str) -> None:
    """A placeholder figure that says why the plot is empty."""
    fig = figure(6, 3)
    ax = fig.add_subplot()
    ax.set_title(title)
    _message(ax, text)
    save(fig, path)


def _plot_rewards(run: _LoadedRun, path: Path) -> None:
    rounds = run.column("round")
    names = [n for n in REWARD_COLUMNS if n in run.rounds]
    if not np.isfinite(rounds).any() or not names:
        _message_plot(path, "Mean reward per agent and round", f"{layout.ROUNDS} holds no rewards yet")
        return
    fig = figure(8, 4.5)
    ax = fig.add_subplot()
    for name in names:
        xs, ys = _round_means(rounds, run.column(name))
        total = name == "total"
        ax.plot(xs, ys, marker="o", ms=3, lw=2.4 if total else 1.4, label=name,
                color="black" if total else None, ls="--" if total else "-")
    ax.set_title("Mean reward per agent and round" + (" (dotted: interventions)" if run.interventions else ""))
    ax.set_ylabel("reward")
    _integer_rounds(ax, rounds, run.interventions)
    ax.legend(loc="best", fontsize="small", ncols=2)
    save(fig, path)


def _plot_surveys(run: _LoadedRun, path: Path, means: dict) -> None:
    fig = figure(8, 4.5)
    ax = fig.add_subplot()
    for key, (scale, by_round, _) in sorted(means.items()):
        xs = sorted(by_round)
        ax.plot(xs, [by_round[r] for r in xs], marker="o", ms=4, label=f"{key} ({scale})")
    ax.set_title("Mean survey answer per round" + (" (dotted: interventions)" if run.interventions else ""))
    ax.set_ylabel("mean answer")
    _integer_rounds(ax, np.array(sorted({r for _, b, _ in means.values() for r in b}), float), run.interventions)
    ax.legend(loc="best", fontsize="small")
    save(fig, path)


def _plot_split(run: _LoadedRun, path: Path, title: str, masks: list[tuple[str, np.ndarray]]) -> None:
    """One small panel per reward column, one line per (label, row mask)."""
    rounds = run.column("round")
    names = [n for n in REWARD_COLUMNS if n in run.rounds]
    if not names:
        _message_plot(path, title, f"{layout.ROUNDS} has no reward columns")
        return
    fig = figure(11, 6)
    axes = fig.subplots(2, 3, sharex=True).ravel()
    for ax, name in zip(axes, names):
        values = run.column(name)
        for label, mask in masks:
            xs, ys = _round_means(rounds, values, mask)
            ax.plot(xs, ys, marker="o", ms=3, lw=1.4, label=_plain(label))
        ax.set_title(name)
        _integer_rounds(ax, rounds, run.interventions)
    for ax in axes[len(names):]:
        ax.set_visible(False)
    axes[0].legend(fontsize="small")
    fig.suptitle(title)
    save(fig, path)


def _plot_network(run: _LoadedRun, path: Path) -> str:
    """Network metrics over rounds; returns a caption remark on what was left out."""
    title = "Network metrics per round"
    if not run.network or not run.network.get("round"):
        _message_plot(path, title, f"no {layout.NETWORK} rows in the run directory")
        return f"{layout.NETWORK} is missing or empty."
    rounds = _floats(run.network["round"])
    panels = [n for n in NETWORK_PANELS if n in run.network]
    skipped = []
    for name in COCOON_PANELS:
        if name in run.network and np.isfinite(_floats(run.network[name])).any():
            panels.append(name)
        else:
            skipped.append(name)
    if not panels:
        _message_plot(path, title, f"{layout.NETWORK} has none of the plotted columns")
        return f"{layout.NETWORK} has none of the plotted columns."
    ncols = min(3, len(panels))
    nrows = -(-len(panels) // ncols)
    fig = figure(3.7 * ncols, 2.9 * nrows)
    axes = np.atleast_1d(fig.subplots(nrows, ncols, squeeze=False)).ravel()
    for ax, name in zip(axes, panels):
        values = _floats(run.network[name])
        ax.set_title(name)
        _integer_rounds(ax, rounds, run.interventions)
        if not np.isfinite(values).any():
            _message(ax, "no data")
            continue
        ax.plot(rounds, values, marker="o", ms=3, color="black", label="all")
        if name == "deep_cocoon_share":          # per-group shares, when the run has groups
            for column in run.network:
                if column.startswith("deep_cocoon_share:"):
                    ax.plot(rounds, _floats(run.network[column]), marker=".", lw=1, ls="--",
                            label=_plain(column.split(":", 1)[1]))
            if len(ax.get_lines()) > 1:
                ax.legend(fontsize="x-small")
    for ax in axes[len(panels):]:
        ax.set_visible(False)
    fig.suptitle(title)
    save(fig, path)
    return f"Not drawn (no values yet): {', '.join(skipped)}." if skipped else ""


def _plot_degree(run: _LoadedRun, path: Path) -> None:
    title = "Degree distribution of the final tie graph"
    if run.ties is None:
        _message_plot(path, title, run.ties_note)
        return
    try:
        ud = _undirected_ties(run.ties)
    except ValueError as exc:                    # negative or non-finite weights
        _message_plot(path, title, f"invalid tie matrix: {exc}")
        return
    degrees = np.diff(ud.indptr)
    if len(degrees) == 0:
        _message_plot(path, title, "the tie matrix has no agents")
        return
    histogram = np.bincount(degrees)
    fig = figure(7, 4)
    ax = fig.add_subplot()
    ax.bar(np.arange(len(histogram)), histogram, color="#4c72b0", width=0.8)
    ax.set_xlabel("degree (undirected ties)")
    ax.set_ylabel("agents")
    ax.set_title(f"{title} (round {run.ties_round}); mean degree {degrees.mean():.2f}")
    from matplotlib.ticker import MaxNLocator
    ax.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))
    ax.yaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))
    ax.set_xlim(-0.6, len(histogram) - 0.4)
    ax.grid(axis="y", alpha=0.3)
    save(fig, path)


def _plot_ties_graph(run: _LoadedRun, path: Path) -> str:
    """The final tie graph; returns a caption remark (sampling, no edges)."""
    title = "Final tie graph"
    if run.ties is None:
        _message_plot(path, title, run.ties_note)
        return ""
    try:
        ud = _undirected_ties(run.ties)
    except ValueError as exc:
        _message_plot(path, title, f"invalid tie matrix: {exc}")
        return ""
    n = ud.shape[0]
    if n == 0:
        _message_plot(path, title, "the tie matrix has no agents")
        return ""
    import networkx as nx
    G = nx.from_scipy_sparse_array(ud)          # edge attribute "weight" = (W + W^T)/2
    remark = ""
    if n > MAX_DRAWN_NODES:                      # layout cost and legibility both need a cap
        degree = np.diff(ud.indptr)
        kept = np.argsort(-degree, kind="stable")[:MAX_DRAWN_NODES]
        G = G.subgraph(kept.tolist()).copy()
        remark = f"Only the {MAX_DRAWN_NODES} best-connected of {n} agents are drawn."

    labels = [run.agent_groups.get(f"agent_{i}", "") for i in range(n)]
    present = sorted({labels[v] for v in G.nodes})
    import matplotlib as mpl
    palette = mpl.colormaps["tab10" if len(present) <= 10 else "tab20"]
    colour = {g: palette(k % palette.N) for k, g in enumerate(present)}

    fig = figure(8, 7)
    ax = fig.add_subplot()
    pos = nx.spring_layout(G, seed=LAYOUT_SEED)
    weights = np.array([d.get("weight", 1.0) for _, _, d in G.edges(data=True)])
    if len(weights):
        nx.draw_networkx_edges(G, pos, ax=ax, width=0.4 + 3.0 * weights / weights.max(),
                               edge_color="#888888", alpha=0.7)
    single = not any(present)                    # no group labels: one colour, no legend
    nodes = list(G.nodes)
    nx.draw_networkx_nodes(G, pos, ax=ax, nodelist=nodes, node_size=260 if len(nodes) <= 40 else 40,
                           node_color=["#4c72b0" if single else colour[labels[v]] for v in nodes],
                           edgecolors="white", linewidths=0.8)
    if len(nodes) <= 40:
        nx.draw_networkx_labels(G, pos, ax=ax, labels={v: str(v) for v in nodes}, font_size=8,
                                font_color="white")
    if not single:
        from matplotlib.lines import Line2D
        handles = [Line2D([], [], ls="", marker="o", ms=9, color=colour[g],
                          label=_plain(g) if g else "(no group)") for g in present]
        ax.legend(handles=handles, title="group", loc="best", fontsize="small")
    if not len(weights):
        remark = f"{remark} No pair of agents has a tie >= {TIE_THRESHOLD}.".strip()
        ax.text(0.5, 0.02, f"no ties >= {TIE_THRESHOLD}", ha="center", color="#666",
                transform=ax.transAxes)
    ax.set_title(f"{title} (round {run.ties_round})")
    ax.set_axis_off()
    save(fig, path)
    return remark


# --------------------------------------------------------------------------- HTML

def _fmt(value: Any) -> str:
    """A value from the files as short text (escaping happens where the HTML is built)."""
    if value is None or value == "":
        return "–"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        return f"{value:,}" if abs(value) >= 10_000 else str(value)
    if isinstance(value, float):
        if np.isnan(value):
            return "n/a"
        if np.isinf(value):
            return str(value)
        return str(int(value)) if value.is_integer() and abs(value) < 1e15 else f"{value:.4g}"
    if isinstance(value, str):
        try:
            return _fmt(float(value))            # numbers from CSV cells arrive as text
        except ValueError:
            return value
    return json.dumps(value, sort_keys=True, default=str)


def _is_number(text: str) -> bool:
    try:
        float(text.replace(",", ""))
    except ValueError:
        return False
    return True


def _table(rows: list[tuple[Any, Any]], header: tuple[str, str] | None = None) -> str:
    out = ["<table>"]
    if header:
        out.append(f"<tr><th>{html.escape(header[0])}</th><th>{html.escape(header[1])}</th></tr>")
    for key, value in rows:
        text = _fmt(value)
        cls = ' class="num"' if _is_number(text) else ""
        out.append(f"<tr><th>{html.escape(str(key))}</th><td{cls}>{html.escape(text)}</td></tr>")
    out.append("</table>")
    return "\n".join(out)


def _problems(run: _LoadedRun) -> list:
    """summary.json's ``problems`` (e.g. too many LLM fallbacks) and the files that could not be read."""
    problems = run.summary.get("problems")
    return (problems if isinstance(problems, list) else []) + run.damaged


def _summary_rows(run: _LoadedRun) -> list[tuple[str, Any]]:
    s = run.summary
    rounds_text = _fmt(s.get("rounds_completed"))
    if s.get("max_rounds") is not None:
        rounds_text += f" of {_fmt(s.get('max_rounds'))}"
    n_agents = s.get("n_agents", len(s.get("agents") or set(run.rounds.get("agent", []))))
    rows: list[tuple[str, Any]] = [
        ("status", s.get("status")),
        ("rounds", rounds_text),
        ("agents", n_agents),
    ]
    if run.group_labels:
        sizes = {g: 0 for g in run.group_labels}
        for g in run.agent_groups.values():
            if g:
                sizes[g] += 1
        rows.append(("groups", ", ".join(f"{g} ({k})" for g, k in sizes.items())))
    if "coached" in run.rounds and "agent" in run.rounds:
        agents = np.array(run.rounds["agent"], dtype=object)
        rows.append(("coached agents", len(set(agents[run.column("coached") == 1]))))
    if run.rounds.get("policy"):
        rows.append(("policies", ", ".join(sorted(set(run.rounds["policy"]) - {""}))))
    rows += [("seed", s.get("seed")), ("replicate", s.get("replicate"))]
    condition = s.get("condition")
    if isinstance(condition, dict) and condition:
        rows.append(("condition", "; ".join(f"{k} = {_fmt(v)}" for k, v in condition.items())))
    else:
        rows.append(("condition", "–" if not condition else condition))
    llm = s.get("llm")
    if isinstance(llm, dict) and llm:
        rows.append(("LLM usage", ", ".join(f"{k.replace('_', ' ')}: {_fmt(v)}"
                                            for k, v in llm.items())))
    else:
        rows.append(("LLM usage", "none"))
    seconds = s.get("seconds")
    rows.append(("wall time", f"{seconds:.1f} s" if isinstance(seconds, (int, float))
                 and not isinstance(seconds, bool) else seconds))
    if run.events is not None:
        rows.append(("events", ", ".join(f"{k}: {v}" for k, v in sorted(run.events.items()))
                     or "none"))
    if run.interventions:        # dotted lines in the per-round plots
        rows.append(("interventions", ", ".join(f"round {r}: {k}" for r, k in run.interventions)))
    fork = _fork_info(run.info)
    if fork:
        rows.append(("forked from", fork))
    return rows


def _fork_info(info: dict) -> str:
    """run.json's ``fork`` record, in words (empty for a run that is no fork)."""
    fork = info.get("fork")
    if not isinstance(fork, dict):
        return ""
    changes = fork.get("changes") or []
    return (f"{fork.get('of')} after round {fork.get('at_round')}; "
            + ("changes: " + "; ".join(str(c) for c in changes) if changes else "no change"))


def _data_uri(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def _html(run: _LoadedRun, figures: list[tuple[Path, str]]) -> str:
    name = run.path.resolve().name
    title = f"socialgym run report: {name}"
    final_rewards = _final_rewards(run)
    final_network = _final_network(run)
    reward_rows = [(k, final_rewards[k]) for k in REWARD_COLUMNS if k in final_rewards]
    reward_rows += [(k, v) for k, v in final_rewards.items() if k not in REWARD_COLUMNS]
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{html.escape(title)}</title>",
        f"<style>{_CSS}</style>",
        "</head>",
        "<body>",
        f"<h1>{html.escape(title)}</h1>",
        f'<p class="muted">{html.escape(str(run.path.resolve()))}</p>',
        *(f'<p class="problem"><b>Problem:</b> {html.escape(str(p))}</p>' for p in _problems(run)),
        *([f'<p class="viewer"><a href="{layout.VIEWER}">Open the viewer</a>: the run replayed round by round '
           '(posts, comments and DMs, what each agent saw, its votes, rewards and ties).</p>']
          if (run.path / layout.VIEWER).is_file() else []),
        "<h2>Run summary</h2>",
        _table(_summary_rows(run)),
        "<h2>Final values</h2>",
        '<div class="tables">',
        "<div><h3>Mean reward (last round)</h3>",
        _table(reward_rows, ("component", "mean")) if reward_rows
        else '<p class="muted">No rewards recorded.</p>',
        "</div>",
        "<div><h3>Network metrics (last round)</h3>",
        _table(list(final_network.items()), ("metric", "value")) if final_network
        else '<p class="muted">No network metrics recorded.</p>',
        "</div>",
        "</div>",
        "<h2>Plots</h2>",
    ]
    for path, caption in figures:
        parts.append(f'<figure><img src="{_data_uri(path)}" alt="{html.escape(path.name)}">'
                     f"<figcaption><b>{html.escape(path.name)}</b>: {html.escape(caption)}"
                     "</figcaption></figure>")
    parts.append(tiers_html(run.path))
    parts.append(realism_html([run.path]))
    personas = _personas_table(run.personas)
    if personas:
        parts += ["<h2>Personas</h2>", personas]
    parts.append("<h2>Configuration</h2>")
    if run.config_text is None:
        parts.append(f'<p class="muted">No {layout.CONFIG} in the run directory.</p>')
    else:
        parts.append(f"<pre>{html.escape(run.config_text)}</pre>")
    parts += ["</body>", "</html>", ""]
    return "\n".join(parts)


def _personas_table(personas: dict) -> str:
    """Who each agent is, with the intended Big Five and, after a survey, the measured ones."""
    if not personas:
        return ""

    def five(scores) -> str:
        if not isinstance(scores, dict):
            return "not measured"
        return " ".join(f"{k} {_fmt(v)}" for k, v in scores.items())

    head = ("agent", "name", "role", "stance", "Big Five (intended)", "Big Five (measured)", "λ")
    rows = ["<table>", "<tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr>"]
    for agent, p in personas.items():
        if not isinstance(p, dict):
            continue
        lam = p.get("lambdas")
        cells = (agent, p.get("name", ""), p.get("role", ""), p.get("stance", ""), five(p.get("big_five")),
                 five(p.get("big_five_measured")),
                 " ".join(f"{k} {_fmt(v)}" for k, v in lam.items()) if isinstance(lam, dict) else "uniform")
        rows.append("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in cells) + "</tr>")
    rows.append("</table>")
    return "\n".join(rows)


# --------------------------------------------------------------------------- entry point

def build_report(run_dir: str | os.PathLike) -> Path:
    """Write ``plots/*.png`` and a self-contained ``report.html`` for a run directory.

    Plots: rewards.png, network.png, degree.png, ties_graph.png always (with a note inside when
    their data is missing); learning_curves.png only when the run has both coached and
    uncoached agents, rewards_by_group.png only when agents have group labels.
    Raises FileNotFoundError when rounds.csv or summary.json is missing, RunFileError (a ValueError)
    when one is damaged; other damaged files are listed as problems. Returns the path of
    report.html.
    """
    run = _load(run_dir)
    plots = run.path / layout.PLOTS
    own_dir(plots)
    figures: list[tuple[Path, str]] = []         # (png, caption) in report order

    _plot_rewards(run, plots / "rewards.png")
    figures.append((plots / "rewards.png", "mean over agents of each reward component (SOC, INF, "
                    "PRE, COORD, EMO) and of the lambda-weighted total, per round."))

    coached, uncoached = run.column("coached") == 1, run.column("coached") == 0
    if coached.any() and uncoached.any():
        _plot_split(run, plots / "learning_curves.png", "Coached vs uncoached agents",
                    [("coached", coached), ("uncoached", uncoached)])
        figures.append((plots / "learning_curves.png", "mean reward per round of coached and "
                        "of uncoached agents, one panel per component."))

    if run.group_labels and "agent" in run.rounds:
        row_groups = np.array([run.agent_groups.get(a, "") for a in run.rounds["agent"]],
                              dtype=object)
        masks = [(g, row_groups == g) for g in run.group_labels]
        if (row_groups == "").any():
            masks.append(("(no group)", row_groups == ""))
        _plot_split(run, plots / "rewards_by_group.png", "Reward by group", masks)
        figures.append((plots / "rewards_by_group.png", "mean reward per round of each group "
                        "of agents, one panel per component."))

    surveys = run.surveys
    if surveys:
        _plot_surveys(run, plots / "surveys.png", surveys)
        figures.append((plots / "surveys.png", "mean numeric answer per survey item and round, over the agents "
                        f"that answered ({layout.SURVEYS}; " + ", ".join(f"{k}: {n} answers" for k, (_, _, n)
                                                                   in sorted(surveys.items())) + ")."))

    remark = _plot_network(run, plots / "network.png")
    figures.append((plots / "network.png", "network metrics of the tie graph per round (from "
                    f"{layout.NETWORK}). {remark}".strip()))

    graph_text = f"undirected graph with an edge where (W + W^T)/2 >= {TIE_THRESHOLD}"
    _plot_degree(run, plots / "degree.png")
    figures.append((plots / "degree.png", f"degree distribution of the final tie matrix "
                    f"({graph_text}, as in socialgym.metrics.network_metrics)."))

    remark = _plot_ties_graph(run, plots / "ties_graph.png")
    figures.append((plots / "ties_graph.png", f"final tie graph ({graph_text}); spring layout "
                    f"with seed {LAYOUT_SEED}, edge width proportional to the tie weight, node "
                    f"colour = group, node labels = agent index. {remark}".strip()))

    written = {p.name for p, _ in figures}
    for name in OPTIONAL_PLOTS:                  # a stale plot from an earlier build would mislead
        if name not in written:
            (plots / name).unlink(missing_ok=True)

    report = run.path / layout.REPORT
    atomic_write(report, _html(run, figures))       # a reader never sees half a report
    return report
