"""Weights & Biases logging of a simulation run (the optional extra ``socialgym[wandb]``).

``WandbLogger`` mirrors what the runner writes into a run directory (rounds.csv, network.csv,
ties, sample posts; see ``docs/experiments.md``) as one wandb run, kept under
``<run_dir>/wandb/``. It is configured by the ``logging.wandb`` section of an experiment config::

    logging:
      wandb: {project: my-study, mode: offline, tags: [pilot], graph_every: 5}

Offline mode (the default) never touches the network; ``wandb sync <run_dir>/wandb/offline-run-*``
uploads such a run later. The run records neither code, git state, command line, host metadata,
system metrics nor console output, and the config it is given is stripped of anything that looks
like a credential.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import random
import re
import warnings
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from socialgym.experiments.define import WandbConfig, wandb_section
from socialgym.rundir.files import finite_number
from socialgym.rundir.layout import ACTION_COUNTS, REWARD_COLUMNS
from socialgym.llm.sanitize import drop_secrets
from socialgym.platform.actions import PUBLIC_TYPES

__all__ = ["ALLOWED_SETTINGS", "WandbLogger"]

LLM_KEYS: Mapping[str, str] = {"llm_calls": "llm/calls", "prompt_tokens": "llm/prompt_tokens",
                               "completion_tokens": "llm/completion_tokens"}
POST_COLUMNS: tuple[str, ...] = ("round", "sender", "kind", "topic", "text")
ALLOWED_SETTINGS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(WandbConfig))

# wandb.Table refuses to log more rows than this (Table.MAX_ROWS) outside artifacts.
MAX_TABLE_ROWS = 10_000
MAX_TEXT_CHARS = 2_000
# networkx lays out more nodes with a slow sparse algorithm (seconds per figure), and a
# picture of more agents is a hairball anyway
MAX_GRAPH_NODES = 500
_AGENT_INDEX = re.compile(r"(\d+)$")

_MISSING_WANDB = "logging.wandb is configured but wandb is not installed: pip install 'socialgym[wandb]'"

def _mean(values: Sequence[Any]) -> float | None:
    xs = [x for x in map(finite_number, values) if x is not None]
    return sum(xs) / len(xs) if xs else None


def _key_part(label: Any) -> str:
    # a '/' inside a group name would add a level to wandb's panel grouping
    return str(label).replace("/", "_")


@contextlib.contextmanager
def _env_default(name: str, value: str) -> Iterator[None]:
    """Set the environment variable ``name`` for the duration of the block unless it is set."""
    if name in os.environ:
        yield
        return
    os.environ[name] = value
    try:
        yield
    finally:
        os.environ.pop(name, None)


class WandbLogger:
    """One simulation run as one wandb run, stored under ``run_dir/wandb``.

    ``settings`` is the ``logging.wandb`` config section (a ``WandbConfig``, or a mapping
    checked by ``wandb_section``; see ``ALLOWED_SETTINGS``); ``config`` the resolved experiment
    config, logged as the run config after ``drop_secrets``. ``name``
    and ``group``, when given, take precedence over the settings' ones. ``groups`` maps agent ids
    (``agent_<i>``) to group labels for the tie graph's colours; ``log_round`` also learns them
    from the rows' ``group`` column.

    Use ``log_round`` once per round, then ``finish`` (or use the logger as a context manager).
    """

    def __init__(self, settings: WandbConfig | Mapping, run_dir: str | Path, config: Mapping,
                 name: str | None = None, group: str | None = None,
                 groups: Mapping[str, str] | None = None) -> None:
        checked = settings if isinstance(settings, WandbConfig) else wandb_section(settings)
        s = {**dataclasses.asdict(checked), "tags": list(checked.tags)}
        self.settings = s
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._groups: dict[str, str] = {str(a): str(g) for a, g in (groups or {}).items() if g}
        self._posts: list[list[Any]] = []
        self._last_round = 0
        self._last_ties = None
        self._graph_round: int | None = None     # round of the last tie graph logged
        self._layout: dict[int, Any] | None = None
        self._graph_ok = True
        self._finished = False
        with contextlib.ExitStack() as stack:
            if s["mode"] != "online":
                # crash reporting would contact its server: older wandb reads the switch when it
                # is imported, wandb-core when its service process starts (in wandb.init)
                stack.enter_context(_env_default("WANDB_ERROR_REPORTING", "false"))
            try:
                import wandb
            except ImportError:
                raise RuntimeError(_MISSING_WANDB) from None
            self._wandb = wandb
            self.run = self._init_run(s, config, name or s["name"], group or s["group"])

    def _init_run(self, s: Mapping[str, Any], config: Mapping, name: str | None, group: str | None):
        wandb = self._wandb
        # every one of these exists since wandb 0.19.10; should a later wandb rename one,
        # Settings() fails loudly rather than the run quietly recording more
        private = {
            # nothing about the code, the repository, the command line (which may carry secrets),
            # the host or the console output goes into the run
            "save_code": False, "disable_code": True, "disable_git": True,
            "x_disable_meta": True, "x_disable_machine_info": True, "x_save_requirements": False,
            # system metrics probe cloud metadata endpoints; a simulation does not need them
            "x_disable_stats": True,
            "console": "off",
            "disable_job_creation": True,
            # only where the run is saved, not the history of every metric at finish()
            "quiet": True,
        }
        return wandb.init(
            project=s["project"], entity=s["entity"], name=name, group=group,
            tags=s["tags"] or None, config=drop_secrets(config), dir=str(self.run_dir),
            mode=s["mode"],
            # several loggers may live in one process (a sweep's runs, tests): never hand back
            # or finish another logger's run
            reinit="create_new",
            settings=wandb.Settings(**private),
        )

    # --------------------------------------------------------------------------------- rounds
    def log_round(self, round: int, rows: Sequence[Mapping], network: Mapping, ties=None,
                  posts: Sequence[Mapping] = ()) -> None:
        """Log round ``round`` at ``step=round``: reward means (overall and per group), action
        totals, the network row, LLM usage, histograms, and a sample of ``posts`` for the posts
        table (logged by ``finish``); every ``graph_every`` rounds also the tie graph."""
        if self._finished:
            raise RuntimeError("WandbLogger.log_round after finish()")
        round = int(round)
        wandb = self._wandb
        data: dict[str, Any] = {}
        for row in rows:
            label = row.get("group")
            if label:
                self._groups[str(row.get("agent"))] = str(label)
        self._rewards(rows, data)
        for key in ACTION_COUNTS:
            xs = [x for x in (finite_number(r.get(key)) for r in rows) if x is not None]
            if xs:
                data[f"actions/{key}"] = sum(xs)
        fallbacks = [x for x in (finite_number(r.get("fallbacks")) for r in rows) if x is not None]
        if fallbacks:
            data["llm/fallbacks"] = sum(fallbacks)
        for key, value in (network or {}).items():
            x = finite_number(value)
            if key == "round" or x is None:
                continue
            if key in LLM_KEYS:
                data[LLM_KEYS[key]] = x
            elif ":" in key:   # deep_cocoon_share:<group> and the like
                metric, label = key.split(":", 1)
                data[f"network_by_group/{_key_part(label)}/{metric}"] = x
            else:
                data[f"network/{key}"] = x
        if self.settings["histograms"]:
            totals = np.array([x for x in (finite_number(r.get("total")) for r in rows) if x is not None])
            if totals.size:
                data["hist/agent_total"] = wandb.Histogram(totals, num_bins=min(64, max(1, totals.size)))
            strengths = self._tie_values(ties)
            if strengths.size:
                data["hist/tie_strength"] = wandb.Histogram(strengths, num_bins=64)
        self._sample_posts(round, posts)
        if ties is not None:
            self._last_ties = ties
        every = self.settings["graph_every"]
        if every and ties is not None and round % every == 0:
            image = self._graph_image(ties, round)
            if image is not None:
                data["graph/ties"] = image
                self._graph_round = round
        self.run.log(data, step=round)
        self._last_round = max(self._last_round, round)

    def _rewards(self, rows: Sequence[Mapping], data: dict[str, Any]) -> None:
        for key in REWARD_COLUMNS:
            m = _mean([r.get(key) for r in rows])
            if m is not None:
                data[f"rewards/{key}"] = m
        by_group: dict[str, list[Mapping]] = {}
        for r in rows:
            label = r.get("group")
            if label:
                by_group.setdefault(str(label), []).append(r)
        for label, members in sorted(by_group.items()):
            for key in REWARD_COLUMNS:
                m = _mean([r.get(key) for r in members])
                if m is not None:
                    data[f"rewards_by_group/{_key_part(label)}/{key}"] = m

    @staticmethod
    def _tie_values(ties) -> np.ndarray:
        """The finite non-zero tie strengths of ``ties`` (sparse or dense; empty when None)."""
        if ties is None:
            return np.zeros(0)
        if sp.issparse(ties):
            values = np.asarray(ties.data, dtype=float)
        else:
            values = np.asarray(ties, dtype=float).ravel()
            values = values[values != 0]
        return values[np.isfinite(values)]

    def _sample_posts(self, round: int, posts: Sequence[Mapping]) -> None:
        k = self.settings["sample_posts"]
        room = MAX_TABLE_ROWS - len(self._posts)
        candidates = [p for p in posts if p.get("kind") in PUBLIC_TYPES and p.get("text")]
        k = min(k, room, len(candidates))
        if k <= 0:
            return
        # its own generator, seeded by the round: the sample is reproducible and the
        # simulation's random streams are untouched
        picked = sorted(random.Random(round).sample(range(len(candidates)), k))
        for i in picked:
            p = candidates[i]
            topic = p.get("topic")
            # one type per column: wandb.Table rejects a column mixing e.g. None and str
            self._posts.append([round, str(p.get("sender", "")), str(p.get("kind")),
                                "" if topic is None else str(topic), str(p["text"])[:MAX_TEXT_CHARS]])

    # ---------------------------------------------------------------------------------- graph
    def _graph_image(self, ties, round: int):
        """The tie graph as a ``wandb.Image`` (None when it cannot be drawn)."""
        if not self._graph_ok:
            return None
        n = ties.shape[0]
        if n > MAX_GRAPH_NODES:
            warnings.warn(f"wandb tie graph skipped: {n} agents, more than {MAX_GRAPH_NODES} to lay out",
                          RuntimeWarning, stacklevel=3)
            self._graph_ok = False
            return None
        try:
            pixels = self._draw_ties(ties, round)
        except ImportError:
            warnings.warn("wandb tie graph skipped: matplotlib is not installed "
                          "(pip install 'socialgym[plot]')", RuntimeWarning, stacklevel=3)
            self._graph_ok = False
            return None
        except Exception as exc:   # a figure must never abort a long simulation
            warnings.warn(f"wandb tie graph of round {round} skipped: {exc!r}", RuntimeWarning, stacklevel=3)
            return None
        return self._wandb.Image(pixels, caption=f"round {round}")

    def _draw_ties(self, ties, round: int) -> np.ndarray:
        """The tie graph of ``ties`` (a sparse or dense n x n matrix) as an RGB array: nodes
        coloured by group, edge width proportional to |W_ij|."""
        import networkx as nx

        from socialgym.experiments.analysis.plotting import figure

        W = sp.coo_matrix(ties)
        n = W.shape[0]
        G = nx.DiGraph()
        G.add_nodes_from(range(n))
        keep = (W.row != W.col) & np.isfinite(W.data) & (W.data != 0)
        G.add_weighted_edges_from(zip(W.row[keep].tolist(), W.col[keep].tolist(), np.abs(W.data[keep]).tolist()))
        # start from the previous layout so that consecutive graphs are comparable
        init = self._layout if self._layout is not None and len(self._layout) == n else None
        pos = nx.spring_layout(G, pos=init, seed=0, weight="weight") if n else {}
        self._layout = pos

        labels = self._node_groups(n)
        names = sorted({g for g in labels if g})
        colour = {g: f"C{i % 10}" for i, g in enumerate(names)}
        fig = figure(6, 6, layout=None, dpi=100)
        ax = fig.add_subplot()
        ax.set_axis_off()
        ax.set_title(f"ties after round {round}: {n} agents, {G.number_of_edges()} ties")
        if G.number_of_edges():
            w = np.array([d["weight"] for _, _, d in G.edges(data=True)])
            nx.draw_networkx_edges(G, pos, ax=ax, arrows=False, alpha=0.4, edge_color="0.35",
                                   width=0.2 + 1.8 * w / w.max())
        if n:
            nx.draw_networkx_nodes(G, pos, ax=ax, node_size=max(15.0, min(120.0, 4000.0 / n)),
                                   node_color=[colour.get(g, "0.6") for g in labels], alpha=0.9)
        for g in names:
            ax.scatter([], [], color=colour[g], label=g)
        if names:
            ax.legend(loc="upper right", fontsize="small", frameon=False)
        fig.canvas.draw()
        return np.asarray(fig.canvas.buffer_rgba())[..., :3].copy()

    def _node_groups(self, n: int) -> list[str]:
        """Group label of node i (agent_<i>), '' when unknown."""
        labels = [""] * n
        for agent, label in self._groups.items():
            m = _AGENT_INDEX.search(agent)
            if m and int(m.group(1)) < n:
                labels[int(m.group(1))] = label
        return labels

    # --------------------------------------------------------------------------------- finish
    def finish(self, ties=None, groups: Mapping[str, str] | None = None, exit_code: int | None = None) -> None:
        """Log the posts table and the final tie graph (of ``ties``, else of the last round's;
        skipped when ``graph_every`` already drew the last round) at the last round's step, then
        finish the wandb run. Idempotent."""
        if self._finished:
            return
        self._finished = True
        try:
            if groups:
                self._groups.update({str(a): str(g) for a, g in groups.items() if g})
            data: dict[str, Any] = {}
            if self._posts:
                # built once at the end: a logged Table is immutable, re-logging a grown one
                # would store every intermediate copy
                data["samples/posts"] = self._wandb.Table(columns=list(POST_COLUMNS), data=self._posts)
            final = ties if ties is not None else self._last_ties
            # the runner hands over the same W it logged last: do not draw that graph twice
            if final is not None and not (self._graph_round == self._last_round and self._last_round):
                image = self._graph_image(final, self._last_round)
                if image is not None:
                    data["graph/ties"] = image
            if data:
                self.run.log(data, step=self._last_round)
        finally:
            self.run.finish(exit_code=exit_code)

    def __enter__(self) -> WandbLogger:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.finish(exit_code=1 if exc_type is not None else None)
