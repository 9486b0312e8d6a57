"""A feed run directory read into one JSON-able dict: what the viewer page embeds.

``load_run(run_dir)`` reads what the experiment runner wrote (see
``socialgym/experiments/run/recorder.py``): ``summary.json``, ``run.json``, ``config.yaml``,
``personas.json``, ``rounds.csv``, ``network.csv``, ``events.jsonl``, ``transcripts.jsonl`` and
``ties/round_<NNNN>.npz``, through :class:`socialgym.rundir.Run`. Whatever is missing or unreadable
becomes a line of ``data["notices"]`` (a killed run, transcripts or events not logged, a damaged
line): the page says what it lacks.
A directory that is no run raises :class:`ViewerError` with a one-line message.

Big numeric columns are stored as little-endian binary arrays in base64 (``{"dtype": "<i4",
"b64": ...}``; :func:`decode` turns one back into numpy): a 1,000-agent run has hundreds of
thousands of tie weights and tie updates, and binary keeps the page small and exact (tie weights
as the float32 values of the ``.npz`` files, tie updates and sentiments as the float64 values of
``events.jsonl``). Texts stay JSON strings.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import numpy as np

from socialgym.config import MAX_ROUNDS, REWARD_NAMES
from socialgym.rundir.files import finite_number, read_json, to_float, to_int64
from socialgym.rundir.layout import COUNT_COLUMNS, REWARD_COLUMNS
from socialgym.platform.actions import CONTENT_TYPES
from socialgym.rundir import Run, is_sweep, layout

FORMAT = "socialgym-viewer/1"
THETA = 0.1                   # specification §4: W_ud >= theta, default 0.1 (socialgym.metrics.network_metrics)
LAYOUT_SEED = 0               # networkx spring_layout seed: the same ties give the same picture
SPRING_MAX_NODES = 2000       # above this the layout is a seeded random one (spring would take minutes)
TRANSCRIPT_BUDGET = 6_000_000  # characters of LLM prompts kept; beyond it prompts are shortened
PROMPT_CLIP = 1500            # a prompt's length once the budget is exceeded
MAX_CONFIG_CHARS = 20_000
MAX_PAGE_MB = 100             # a run whose page would be larger is refused (docs/viewer.md: limits)
MAX_ITEM_ID = 2**31 - 1       # the page keeps ids in int32 columns


class ViewerError(ValueError):
    """The directory cannot be shown (not a run, a sweep root, missing): a one-line message."""

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(str(message).split()))


# ------------------------------------------------------------------------------ helpers
def encode(values: Any, dtype: str) -> dict:
    """A numeric column as ``{"dtype", "b64"}`` (little-endian bytes in base64). A small integer
    type that cannot hold the values is widened to int32."""
    dt = np.dtype(dtype)
    values = np.asarray(values)
    if dt.kind in "iu" and dt.itemsize < 4 and values.size:
        info = np.iinfo(dt)
        if values.min() < info.min or values.max() > info.max:
            dt = np.dtype("<i4")
    arr = np.ascontiguousarray(values.astype(dt))
    return {"dtype": np.dtype(dtype).str, "b64": base64.b64encode(arr.tobytes()).decode("ascii")}


def decode(column: dict) -> np.ndarray:
    """The numpy array of an :func:`encode`-d column."""
    return np.frombuffer(base64.b64decode(column["b64"]), dtype=np.dtype(column["dtype"]))


_UNREADABLE = object()


def read_json_noting(path: Path, notices: list[str]) -> Any:
    """The JSON in ``path``, None when there is no such file or (with a notice) it cannot be read."""
    if not path.is_file():
        return None
    value = read_json(path, _UNREADABLE, errors="replace")
    if value is _UNREADABLE:
        notices.append(f"{path.name} could not be read; what it holds is not shown.")
        return None
    return value


def _int(value: Any) -> int | None:
    """A number or text cell as an int64 value (``to_int64``), else None."""
    return to_int64(value, text=True)


def _round(value: Any) -> int | None:
    """A round a run can have (1..MAX_ROUNDS), else None: a file edited to say round 2**62 must
    not make the page allocate that many rounds."""
    r = _int(value)
    return r if r is not None and 1 <= r <= MAX_ROUNDS else None


def _item_id(value: Any) -> int | None:
    """A content id the page can hold (0..2**31 - 1, its int32 columns), else None."""
    i = _int(value)
    return i if i is not None and 0 <= i <= MAX_ITEM_ID else None


def plural(n: int, word: str) -> str:
    """``3 rounds``, ``1 round``."""
    return f"{n} {word}{'' if n == 1 else 's'}"


class _Agents:
    """Agent name -> row index of the tie matrices (summary.json's order = the env's)."""

    def __init__(self, names: list[str]) -> None:
        self.names: list[str] = []
        self.index: dict[str, int] = {}
        self.unknown: set[str] = set()
        for name in names:
            self.add(name)

    def add(self, name: str) -> int:
        if name not in self.index:
            self.index[name] = len(self.names)
            self.names.append(name)
        return self.index[name]

    def get(self, name: Any, *, known_only: bool = False) -> int:
        """Index of ``name`` (-1 for None); an unseen name is appended (and remembered)."""
        if name is None:
            return -1
        name = str(name)
        if name not in self.index:
            if known_only:
                return -1
            self.unknown.add(name)
        return self.add(name)


# ------------------------------------------------------------------------------ entry point
def load_run(run_dir: str | Path) -> dict:
    """The viewer's data for a feed run directory (see the module docstring).

    Raises :class:`ViewerError` when ``run_dir`` is missing, a sweep (or study) root, or holds
    none of the files of a run."""
    path = Path(run_dir)
    check_run_dir(path)
    estimate = _page_estimate_mb(path)
    if estimate > MAX_PAGE_MB:
        raise ViewerError(f"{path} is too large for one viewer page (about {estimate:,.0f} MB estimated from "
                          f"{layout.EVENTS} and {layout.TIES}/, more than {MAX_PAGE_MB} MB): the viewer is meant for "
                          f"runs up to a few thousand agents x tens of rounds; use {layout.REPORT} and the files "
                          "themselves")
    notices: list[str] = []
    run = Run(path)
    summary = _read_summary(run, notices)
    config_text, config = _read_config(run, notices)
    logging_cfg = config.get("logging") if isinstance(config.get("logging"), dict) else {}
    rounds_cols = _read_rounds(run, notices)
    agents = _Agents(_agent_names(summary, rounds_cols))
    n_named = len(agents.names)
    events = _read_events(run, agents, notices, logging_cfg)
    transcripts = _read_transcripts(run, agents, notices, logging_cfg)
    ties_files = [r for r in run.tie_rounds if r >= 1]
    stray = [name for name in run.stray if name.startswith(f"{layout.TIES}/")]
    if stray:
        notices.append(f"Tie files whose name is no round's were left out: {', '.join(stray[:5])}"
                       f"{' ...' if len(stray) > 5 else ''}.")
    done = _round(summary.get("rounds_completed"))
    rounds_in_csv = [r for r in (_round(x) for x in (rounds_cols or {}).get("round", [])) if r is not None]
    T = max([0, *rounds_in_csv, *events["rounds"], *ties_files, *([done] if done else [])])
    if T == 0:
        notices.append("No round was completed yet: nothing to replay.")
    table = _agent_table(summary, rounds_cols, agents, n_named, T, notices)
    n = len(agents.names)
    personas = {str(k): v for k, v in (run.personas or {}).items() if isinstance(v, dict)}
    if layout.PERSONAS in run.damaged:
        notices.append(f"{layout.PERSONAS} could not be read; what it holds is not shown.")
    ties, tie_layout = _read_ties(run, n, T, ties_files, notices, logging_cfg)
    return {
        "format": FORMAT, "kind": "feed", "title": path.resolve().name, "path": str(path.resolve()),
        "report": (path / layout.REPORT).is_file(), "status": summary.get("status"), "rounds_completed": done,
        "max_rounds": _int(summary.get("max_rounds")), "T": max(T, 1), "rounds_shown": T,
        "seed": summary.get("seed"),
        "condition": summary.get("condition") if isinstance(summary.get("condition"), dict) else {},
        "llm": summary.get("llm") if isinstance(summary.get("llm"), dict) else None,
        "agents": agents.names, "groups": table["groups"], "policies": table["policies"],
        "coached": table["coached"], "group_names": sorted(set(table["groups"])), "topics": events["topics"],
        "personas": personas, "lambdas": _lambdas(personas, config, agents.names, table["groups"]),
        "rewards": {"columns": list(REWARD_COLUMNS), "values": encode(table["rewards"].ravel(), "<f8")},
        "counts": {"columns": list(COUNT_COLUMNS), "values": encode(table["counts"].ravel(), "<i4")},
        "items": events["items"], "votes": events["votes"], "tie_events": events["ties"], "ties": ties,
        "layout": tie_layout, "network": _read_network(run), "theta": THETA,
        "transcripts": transcripts, "has_events": events["present"], "interventions": events["interventions"],
        "has_transcripts": transcripts["present"], "config_text": config_text, "notices": notices,
    }


def _read_summary(run: Run, notices: list[str]) -> dict:
    """summary.json ({} without one), with a notice for a run that did not finish or had problems."""
    summary = run.summary or {}
    if layout.SUMMARY in run.damaged:
        notices.append(f"{layout.SUMMARY} could not be read; what it holds is not shown.")
    if layout.SUMMARY in run.missing:
        notices.append(f"No {layout.SUMMARY}: the run's status and settings are unknown.")
    status = summary.get("status")
    done, planned = _int(summary.get("rounds_completed")), _int(summary.get("max_rounds"))
    if status and status != "complete":
        what = {"running": "it was killed, or is still running", "failed": "it stopped with an error",
                "interrupted": "it was interrupted (Ctrl-C)",
                "budget": "it stopped before a round that would pass its LLM budget; "
                          "`--budget KEY=VALUE` on the resume command raises it"}.get(str(status), "it did not complete")
        text = (f"The run did not finish: {layout.SUMMARY} says status \"{status}\" after "
                f"{done if done is not None else '?'} of {planned if planned is not None else '?'} rounds "
                f"({what}). The rounds on disk are shown; `socialgym resume {run.path}` continues it.")
        if summary.get("error"):
            text += f" Error: {summary.get('error')}"
        notices.append(text)
    for problem in summary.get("problems") or [] if isinstance(summary.get("problems"), list) else []:
        notices.append(f"Problem recorded in {layout.SUMMARY}: {problem}")
    return summary


def _agent_names(summary: dict, rounds_cols: dict | None) -> list[str]:
    """summary.json's agent order is the env's (the rows of W); else rounds.csv's order."""
    names = [str(a) for a in summary.get("agents", []) if isinstance(a, (str, int))] \
        if isinstance(summary.get("agents"), list) else []
    if not names and rounds_cols:
        names = list(dict.fromkeys(rounds_cols.get("agent", [])))
    return names


def _agent_table(summary: dict, rounds_cols: dict | None, agents: _Agents, n_named: int, T: int,
                 notices: list[str]) -> dict:
    """Per agent its group, policy and coached flag; per round and agent its rewards and counts."""
    n = len(agents.names)
    groups, policies, coached = [""] * n, [""] * n, [0] * n
    summary_groups = summary.get("groups")
    if isinstance(summary_groups, dict):
        for a, g in summary_groups.items():
            if str(a) in agents.index and g is not None:
                groups[agents.index[str(a)]] = str(g)
    rewards = np.full((max(T, 1), n, len(REWARD_COLUMNS)), np.nan)
    counts = np.full((max(T, 1), n, len(COUNT_COLUMNS)), -1, dtype=np.int64)
    if rounds_cols:
        _fill_rounds(rounds_cols, agents, rewards, counts, groups, policies, coached, notices)
    if agents.unknown and n_named:
        notices.append(f"{plural(len(agents.unknown), 'agent')} in the files are not in {layout.SUMMARY}'s agent "
                       f"list (e.g. {sorted(agents.unknown)[0]}); their tie matrix rows may not match.")
    n = len(agents.names)                     # arrays sized before late additions: pad
    groups += [""] * (n - len(groups))
    policies += [""] * (n - len(policies))
    coached += [0] * (n - len(coached))
    if rewards.shape[1] < n:
        rewards = np.concatenate([rewards, np.full((rewards.shape[0], n - rewards.shape[1], rewards.shape[2]),
                                                   np.nan)], axis=1)
        counts = np.concatenate([counts, np.full((counts.shape[0], n - counts.shape[1], counts.shape[2]), -1,
                                                 dtype=np.int64)], axis=1)
    return {"groups": groups, "policies": policies, "coached": coached, "rewards": rewards, "counts": counts}


def _page_estimate_mb(path: Path) -> float:
    """The page's size in MB, roughly, from the files that dominate it (measured: a 1,000-agent x
    10-round scripted run has 21 MB of events.jsonl and 0.85 MB of ties/ and gives 11 MB)."""
    events = path / layout.EVENTS
    size = 0.5 * (events.stat().st_size if events.is_file() else 0)
    size += 4.5 * sum(p.stat().st_size for p in layout.tie_files(path).values())
    return size / 1e6


def check_run_dir(path: Path) -> None:
    """Raise :class:`ViewerError` unless ``path`` looks like a run (feed or moderation)."""
    if not path.exists():
        raise ViewerError(f"{path} does not exist")
    if not path.is_dir():
        raise ViewerError(f"{path} is not a directory (give a run directory)")
    if is_sweep(path):
        example = next(iter(sorted(path.glob("runs/*/rep_0"))), None)
        shown = example if example is not None else f"{path}/runs/<condition>/rep_0"
        raise ViewerError(f"{path} is a sweep: view its runs, e.g. socialgym view {shown}")
    if (path / layout.DISCUSSIONS).is_file():
        return
    if not any((path / name).is_file() for name in (f"{layout.ROUNDS}", f"{layout.EVENTS}")):
        if (path / layout.SUMMARY).is_file():
            raise ViewerError(f"{path} is not a run directory socialgym wrote: it has a {layout.SUMMARY} but no "
                              f"{layout.ROUNDS} or {layout.EVENTS} (a feed run) and no {layout.DISCUSSIONS} (a moderation run)")
        raise ViewerError(f"{path} is not a run directory: none of {layout.ROUNDS}, {layout.SUMMARY}, {layout.EVENTS} "
                          f"(or a moderation run's {layout.DISCUSSIONS}) is there")


# ------------------------------------------------------------------------------ config, rounds.csv
def _read_config(run: Run, notices: list[str]) -> tuple[str | None, dict]:
    text, config = run.config_text, run.config
    if text is None:
        return None, {}
    if layout.CONFIG in run.damaged and text.strip():       # an empty file is no settings, not damage
        notices.append(f"{layout.CONFIG} could not be parsed; settings from it (λ of groups, logging) are not used.")
    if len(text) > MAX_CONFIG_CHARS:
        text = text[:MAX_CONFIG_CHARS] + "\n… (cut)"
    return text, config


def _read_rounds(run: Run, notices: list[str]) -> dict[str, list[str]] | None:
    header, rows = run.table(layout.ROUNDS)
    if layout.ROUNDS in run.missing:
        notices.append(f"No {layout.ROUNDS}: rewards and action counts per round are not available.")
        return None
    if layout.ROUNDS in run.damaged:
        notices.append(f"{run.notice(layout.ROUNDS)}: rewards are not shown.")
        return None
    if not header:
        return None                           # empty: killed before its first round was written
    if "round" not in header or "agent" not in header:
        notices.append(f"{layout.ROUNDS} has no round/agent columns: rewards are not shown.")
        return None
    short = sum(1 for row in rows if len(row) != len(header))
    if short:
        notices.append(f"{layout.ROUNDS}: {plural(short, 'row')} with the wrong number of cells skipped "
                       "(a line being written when the run stopped?).")
    rows = [row for row in rows if len(row) == len(header)]
    missing = [c for c in ("SOC", "total", "POST") if c not in header]
    if missing:
        notices.append(f"{layout.ROUNDS} lacks the columns {', '.join(missing)} (a socialgym run's {layout.ROUNDS} has "
                       "them); those values are not shown.")
    return {name: [row[j] for row in rows] for j, name in reversed(list(enumerate(header)))}


def _fill_rounds(cols, agents: _Agents, rewards, counts, groups, policies, coached, notices) -> None:
    T, n = rewards.shape[0], rewards.shape[1]
    bad = 0
    for k, (r_cell, agent) in enumerate(zip(cols["round"], cols["agent"])):
        r = _round(r_cell)
        i = agents.get(agent, known_only=bool(agents.names))
        if r is None or not 1 <= r <= T or i < 0 or i >= n:
            bad += 1
            continue
        if "group" in cols and cols["group"][k]:
            groups[i] = cols["group"][k]
        if "policy" in cols and cols["policy"][k]:
            policies[i] = cols["policy"][k]
        if "coached" in cols and _int(cols["coached"][k]):
            coached[i] = 1
        for c, name in enumerate(REWARD_COLUMNS):
            if name in cols:
                rewards[r - 1, i, c] = to_float(cols[name][k])
        for c, name in enumerate(COUNT_COLUMNS):
            if name in cols:
                v = _int(cols[name][k])
                counts[r - 1, i, c] = -1 if v is None else v
    if bad:
        notices.append(f"{layout.ROUNDS}: {plural(bad, 'row')} name an unknown agent or round and were skipped.")


def _lambdas(personas: dict, config: dict, names: list[str], groups: list[str]) -> dict:
    """λ per agent with where it came from: personas.json, the config's group, or uniform."""
    out: dict[str, dict] = {}
    by_group: dict[str, Any] = {}
    policy = config.get("policy") if isinstance(config.get("policy"), dict) else {}
    for g in policy.get("groups") or [] if isinstance(policy.get("groups"), list) else []:
        if isinstance(g, dict) and g.get("lambdas") is not None:
            by_group[str(g.get("name"))] = g["lambdas"]
    env = config.get("env") if isinstance(config.get("env"), dict) else {}
    rewards = env.get("rewards") if isinstance(env.get("rewards"), dict) else {}
    default = rewards.get("lambdas")

    def as_dict(value) -> dict | None:
        if isinstance(value, dict):
            return {str(k): v for k, v in value.items()}
        if isinstance(value, (list, tuple)) and len(value) == len(REWARD_NAMES):
            return dict(zip(REWARD_NAMES, value))
        return None

    for i, name in enumerate(names):
        p = personas.get(name) or {}
        lam = as_dict(p.get("lambdas"))
        source = "persona"
        if lam is None and groups[i] in by_group:
            lam, source = as_dict(by_group[groups[i]]), f"group {groups[i]} in {layout.CONFIG}"
        if lam is None and default is not None and as_dict(default) is not None:
            lam, source = as_dict(default), f"env.rewards.lambdas in {layout.CONFIG}"
        if lam is None:
            lam, source = dict.fromkeys(REWARD_NAMES, 1 / len(REWARD_NAMES)), "uniform (default)"
        out[name] = {"values": lam, "source": source}
    return out


# ------------------------------------------------------------------------------ events.jsonl
def _read_events(run: Run, agents: _Agents, notices: list[str], logging_cfg: dict) -> dict:
    empty = {"present": False, "rounds": [], "topics": [], "interventions": [],
             "items": _items_table([], [], agents),
             "votes": _votes_table([]), "ties": _ties_table([])}
    lines = run.events
    if layout.EVENTS in run.missing:
        if logging_cfg.get("events") is False:
            notices.append(f"No {layout.EVENTS} (logging.events: false): no posts, comments, DMs, votes or tie updates "
                           "to show; rewards and tie matrices only.")
        else:
            notices.append(f"No {layout.EVENTS}: no posts, comments, DMs, votes or tie updates to show.")
        return empty
    items, votes, ties, interventions = [], [], [], []
    bad, other, unlinked = 0, 0, 0
    for e in lines:
        if e is None:
            bad += 1
            continue
        kind, r = e.get("kind"), _round(e.get("round"))
        if r is None:
            bad += 1
            continue
        if kind in CONTENT_TYPES:
            cid = _item_id(e.get("id"))
            if cid is None or not isinstance(e.get("sender"), str):
                bad += 1
                continue
            if kind == "COM" and _item_id(e.get("target_id")) is None:
                unlinked += 1
            items.append((r, kind, e))
        elif kind == "VOTE":
            cid, value = _item_id(e.get("id")), _int(e.get("value"))
            if cid is None or value is None or not isinstance(e.get("sender"), str):
                bad += 1
                continue
            votes.append((r, e["sender"], cid, e.get("recipient"), value))
        elif kind == "TIE":
            nums = [to_float(e.get(k), None) for k in ("before", "after", "evidence")]
            if not isinstance(e.get("src"), str) or not isinstance(e.get("dst"), str) or None in nums:
                bad += 1
                continue
            ties.append((r, e["src"], e["dst"], *nums))
        elif kind == "INTERVENTION":          # a scheduled intervention: marked on the round axis
            interventions.append([r, str(e.get("intervention", ""))])
            if e.get("intervention") == "post" and _item_id(e.get("id")) is not None \
                    and isinstance(e.get("author"), str):   # an injected post: a POST of its round
                items.append((r, "POST", {**e, "sender": e["author"], "kind": "POST"}))
        else:
            other += 1
    if layout.EVENTS in run.damaged:
        notices.append(f"{run.notice(layout.EVENTS)}.")
    if bad:
        notices.append(f"{layout.EVENTS}: {plural(bad, 'line')} could not be read (not JSON, or missing fields) and "
                       "were skipped.")
    if other:
        notices.append(f"{layout.EVENTS}: {plural(other, 'line')} of an unknown kind were ignored.")
    if unlinked:
        notices.append(f"{layout.EVENTS}: {plural(unlinked, 'comment')} without a readable target_id "
                       "(missing, or not an id) are shown as top-level posts.")
    topics = sorted({str(e.get("topic")) for _, _, e in items if e.get("topic") is not None})
    rounds = sorted({r for r, _, _ in items} | {v[0] for v in votes} | {t[0] for t in ties})
    return {"present": True, "rounds": rounds, "topics": topics, "interventions": interventions,
            "items": _items_table(items, topics, agents),
            "votes": _votes_table(votes, agents), "ties": _ties_table(ties, agents)}


def _items_table(items: list, topics: list[str], agents: _Agents) -> dict:
    topic_index = {t: k for k, t in enumerate(topics)}
    m = len(items)
    cols = {k: np.full(m, -1, np.int64) for k in ("id", "round", "kind", "author", "recipient", "target", "topic")}
    sentiment = np.full(m, np.nan)
    texts: list[str] = []
    m_row, m_agent = [], []
    for k, (r, kind, e) in enumerate(items):
        cols["id"][k] = _item_id(e.get("id"))
        cols["round"][k] = r
        cols["kind"][k] = CONTENT_TYPES.index(kind)
        cols["author"][k] = agents.get(e.get("sender"))
        rcp = e.get("recipient")
        cols["recipient"][k] = agents.get(rcp) if isinstance(rcp, str) else -1
        tgt = _item_id(e.get("target_id"))
        cols["target"][k] = -1 if tgt is None else tgt
        top = e.get("topic")
        cols["topic"][k] = topic_index.get(str(top), -1) if top is not None else -1
        sentiment[k] = to_float(e.get("sentiment"))
        text = e.get("text")
        texts.append(text if isinstance(text, str) else "" if text is None else str(text))
        mentions = e.get("mentions")
        if isinstance(mentions, list):
            for name in mentions:
                if isinstance(name, str):
                    m_row.append(k)
                    m_agent.append(agents.get(name))
    small = {"round": "<i2", "kind": "|u1"}
    out = {"n": m, **{k: encode(v, small.get(k, "<i4")) for k, v in cols.items()}, "sentiment": encode(sentiment, "<f8"),
           "text": texts, "mention_row": encode(m_row, "<i4"), "mention_agent": encode(m_agent, "<i4"),
           "kinds": list(CONTENT_TYPES)}
    return out


def _votes_table(votes: list, agents: _Agents | None = None) -> dict:
    m = len(votes)
    cols = {k: np.zeros(m, np.int64) for k in ("round", "voter", "item", "author", "value")}
    for k, (r, voter, item, author, value) in enumerate(votes):
        cols["round"][k] = r
        cols["voter"][k] = agents.get(voter)
        cols["item"][k] = item
        cols["author"][k] = agents.get(author) if isinstance(author, str) else -1
        cols["value"][k] = value
    small = {"round": "<i2", "value": "|i1"}
    return {"n": m, **{k: encode(v, small.get(k, "<i4")) for k, v in cols.items()}}


def _ties_table(ties: list, agents: _Agents | None = None) -> dict:
    m = len(ties)
    ints = {k: np.zeros(m, np.int64) for k in ("round", "src", "dst")}
    floats = {k: np.zeros(m) for k in ("before", "after", "evidence")}
    for k, (r, src, dst, before, after, evidence) in enumerate(ties):
        ints["round"][k], ints["src"][k], ints["dst"][k] = r, agents.get(src), agents.get(dst)
        floats["before"][k], floats["after"][k], floats["evidence"][k] = before, after, evidence
    return {"n": m, **{k: encode(v, "<i2" if k == "round" else "<i4") for k, v in ints.items()},
            **{k: encode(v, "<f8") for k, v in floats.items()}}


# ------------------------------------------------------------------------------ transcripts.jsonl
def _read_transcripts(run: Run, agents: _Agents, notices: list[str], logging_cfg: dict) -> dict:
    """Per agent, every LLM request: [round, purpose, cached, system prompt index, [[role, line ids], ...]
    (the messages after the system prompt), reply]. Prompts repeat most of their lines (instructions,
    the user list, the persona), so every distinct line is stored once in ``lines`` and a message is
    the list of its line numbers (joined with newlines again on the page); system prompts likewise."""
    records = run.lines(layout.TRANSCRIPTS)
    out: dict[str, Any] = {"present": False, "lines": [], "system": [], "entries": {}, "clipped": False}
    if layout.TRANSCRIPTS in run.missing:
        why = ("logging.transcripts: false" if logging_cfg.get("transcripts") is False
               else "logging.transcripts: false, or no LLM agents")
        notices.append(f"No {layout.TRANSCRIPTS} ({why}): the feeds the agents were shown, their plans, vote replies "
                       "and coach tips are not available (scripted agents send no LLM requests).")
        return out
    out["present"] = True
    systems: dict[str, int] = {}
    bad = 0
    rows: list[tuple[str, list]] = []
    for e in records:
        if e is None or not isinstance(e.get("messages"), list):
            bad += 1
            continue
        agent = e.get("agent")
        agent = str(agent) if agent is not None else "(none)"
        r = _round(e.get("round"))
        sys_k, rest = -1, []
        for msg in e["messages"]:
            if not isinstance(msg, dict):
                continue
            role, content = str(msg.get("role", "")), msg.get("content")
            content = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
            if role == "system" and sys_k < 0:
                sys_k = systems.setdefault(content, len(systems))
            else:
                rest.append([role, content])
        reply = e.get("reply")
        reply = reply if isinstance(reply, str) else "" if reply is None else json.dumps(reply, ensure_ascii=False)
        rows.append((agent, [r if r is not None else -1, str(e.get("purpose", "")), bool(e.get("cached")),
                             sys_k, rest, reply]))
    if layout.TRANSCRIPTS in run.damaged:
        notices.append(f"{run.notice(layout.TRANSCRIPTS)}.")
    if bad:
        notices.append(f"{layout.TRANSCRIPTS}: {plural(bad, 'line')} could not be read and were skipped.")
    system_texts = list(systems)
    size = sum(len(s) for s in system_texts) + sum(len(c) for _, row in rows for _, c in row[4]) \
        + sum(len(row[5]) for _, row in rows)
    if size > TRANSCRIPT_BUDGET:
        out["clipped"] = True
        system_texts = [_clip(s, PROMPT_CLIP) for s in system_texts]
        for _, row in rows:
            row[4] = [[role, _clip(c, PROMPT_CLIP)] for role, c in row[4]]
            row[5] = _clip(row[5], PROMPT_CLIP)
        notices.append(f"{layout.TRANSCRIPTS} is large ({size:,} characters of prompts and replies): each prompt and reply "
                       f"is cut to {PROMPT_CLIP:,} characters in this page; the file has them in full.")
    line_index: dict[str, int] = {}

    def lines(text: str) -> list[int]:
        return [line_index.setdefault(line, len(line_index)) for line in text.split("\n")]

    entries: dict[str, list] = {}
    for agent, row in rows:
        row[4] = [[role, lines(c)] for role, c in row[4]]
        entries.setdefault(agent, []).append(row)
    out["system"] = [lines(s) for s in system_texts]
    out["lines"], out["entries"] = list(line_index), entries
    return out


def transcript_text(data: dict, line_ids: list[int]) -> str:
    """A prompt of the page data back as text (its lines joined with newlines)."""
    table = data["transcripts"]["lines"]
    return "\n".join(table[k] for k in line_ids)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + " … (cut)"


# ------------------------------------------------------------------------------ ties, layout, network
def _read_ties(run: Run, n: int, T: int, files: list[int], notices: list[str],
               logging_cfg: dict) -> tuple[dict, dict]:
    """Per round the CSR arrays of W (float32, as stored), and node positions from a spring
    layout of the union over rounds of W_ud = (W + W^T)/2."""
    import scipy.sparse as sp

    rounds: dict[str, dict] = {}
    union = sp.csr_matrix((n, n), dtype=np.float64)
    unreadable, wrong = [], []
    for r in (r for r in files if r <= T):
        W = run.ties(r)
        if W is None:                       # a truncated, foreign or damaged file (never handed to scipy)
            unreadable.append(r)
            continue
        if W.shape != (n, n):
            wrong.append(r)
            continue
        W = W.astype(np.float32)
        W.sum_duplicates()
        W.sort_indices()
        rounds[str(r)] = {"indptr": encode(W.indptr, "<i4"), "indices": encode(W.indices, "<i4"),
                          "data": encode(W.data, "<f4")}
        W64 = W.astype(np.float64)
        union = union.maximum((W64 + W64.T) * 0.5)
    have = set(files)
    missing = [r for r in range(1, T + 1) if r not in have]
    if T and len(missing) == T:
        why = " (logging.ties: false)" if logging_cfg.get("ties") is False else ""
        notices.append(f"No tie matrices ({layout.TIES}/round_*.npz){why}: the tie graph and the agents' strongest ties are "
                       "not shown.")
    elif missing:
        notices.append(f"No tie matrix for {plural(len(missing), 'round')}: {_ranges(missing)}.")
    if unreadable:
        notices.append(f"Tie matrices that could not be read: rounds {_ranges(unreadable)}.")
    if wrong:
        notices.append(f"Tie matrices of another size than the {n} agents: rounds {_ranges(wrong)} (not shown).")
    return {"n": n, "rounds": rounds}, _layout(union, n)


def _layout(union, n: int) -> dict:
    """Node positions in a 1000 x 1000 box, computed once for all rounds."""
    if n == 0:
        return {"x": [], "y": [], "method": "none"}
    import networkx as nx

    if n == 1:
        pos = np.array([[0.0, 0.0]])
        method = "single node"
    elif union.nnz == 0:
        angles = 2 * np.pi * np.arange(n) / n
        pos = np.column_stack([np.cos(angles), np.sin(angles)])
        method = "circle (no ties in any round)"
    elif n <= SPRING_MAX_NODES:
        G = nx.Graph()
        G.add_nodes_from(range(n))
        coo = union.tocoo()
        G.add_weighted_edges_from((int(i), int(j), float(w)) for i, j, w in zip(coo.row, coo.col, coo.data) if i < j)
        positions = nx.spring_layout(G, seed=LAYOUT_SEED, weight="weight")
        pos = np.array([positions[i] for i in range(n)], dtype=float)
        method = f"networkx spring_layout (seed {LAYOUT_SEED}) over the union of all rounds' W_ud"
    else:
        pos = np.random.default_rng(LAYOUT_SEED).uniform(-1, 1, size=(n, 2))
        method = f"seeded random (more than {SPRING_MAX_NODES} agents)"
    lo, hi = pos.min(axis=0), pos.max(axis=0)
    span = float(max((hi - lo).max(), 1e-9))
    pos = 40 + 920 * (pos - lo) / span + (920 - 920 * (hi - lo) / span) / 2
    return {"x": [round(float(v), 1) for v in pos[:, 0]], "y": [round(float(v), 1) for v in pos[:, 1]],
            "method": method}


def _read_network(run: Run) -> dict:
    """network.csv's n_edges and density per round (computed by the run at theta = 0.1)."""
    out: dict[str, list] = {"round": [], "n_edges": [], "density": []}
    header, rows = run.table(layout.NETWORK)
    for row in rows:
        if len(row) != len(header):
            continue
        cells = dict(zip(header, row))
        r = _round(cells.get("round"))
        if r is None:
            continue
        out["round"].append(r)
        for key in ("n_edges", "density"):
            out[key].append(finite_number(cells.get(key, "")))
    return out


def _ranges(rounds: list[int]) -> str:
    parts, start, prev = [], None, None
    for r in sorted(rounds):
        if start is None:
            start = prev = r
        elif r == prev + 1:
            prev = r
        else:
            parts.append(f"{start}" if start == prev else f"{start}–{prev}")
            start = prev = r
    if start is not None:
        parts.append(f"{start}" if start == prev else f"{start}–{prev}")
    return ", ".join(parts)


# ------------------------------------------------------------------------------ for tests and scripts
def likes_dislikes(data: dict, item_id: int, upto_round: int) -> tuple[int, int]:
    """(+1 votes, -1 votes) on an item cast in rounds <= ``upto_round``: what the page shows."""
    v = data["votes"]
    if not v["n"]:
        return 0, 0
    item, rnd, value = decode(v["item"]), decode(v["round"]), decode(v["value"])
    mask = (item == item_id) & (rnd <= upto_round)
    return int((value[mask] > 0).sum()), int((value[mask] < 0).sum())


def tie_matrix(data: dict, round_: int):
    """W after ``round_`` as scipy CSR (float32), rebuilt from the page data; None when absent."""
    import scipy.sparse as sp

    entry = data["ties"]["rounds"].get(str(round_))
    if entry is None:
        return None
    n = data["ties"]["n"]
    return sp.csr_matrix((decode(entry["data"]), decode(entry["indices"]), decode(entry["indptr"])), shape=(n, n))
