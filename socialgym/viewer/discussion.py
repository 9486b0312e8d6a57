"""A moderation run directory (``socialgym moderation`` output) read into the viewer's dict.

One record per line of ``discussions.jsonl`` (see ``socialgym/experiments/studies/moderation.py``:
``run_one``): the strategy, the discussion index, topic, users and roles, and the turns with the
moderator's warnings and bans and the annotators' mean toxicity and argument quality per user
comment. Damaged lines are skipped and counted in ``notices``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from socialgym.discussion import MODERATOR, STRATEGIES, STRATEGY_LABELS
from socialgym.rundir.files import read_jsonl, to_float
from socialgym.viewer.data import FORMAT, plural, read_json_noting
from socialgym.rundir import layout

TURN_KEYS = ("turn", "user_turn", "agent", "username", "role", "text", "mentions", "warned", "banned",
             "content_id", "toxicity", "argument_quality", "toxicity_ratings", "argument_quality_ratings",
             "invalid")


def load_discussions(run_dir: str | Path) -> dict:
    path = Path(run_dir)
    notices: list[str] = []
    records, bad = [], 0
    try:
        for rec, _ in read_jsonl(path / layout.DISCUSSIONS):
            if rec is None or not isinstance(rec.get("turns"), list) or not isinstance(rec.get("strategy"), str):
                bad += 1
                continue
            records.append(_record(rec))
    except OSError as exc:
        notices.append(f"{layout.DISCUSSIONS} could not be read to the end ({type(exc).__name__}).")
    if bad:
        notices.append(f"{layout.DISCUSSIONS}: {plural(bad, 'line')} could not be read and were skipped (a line "
                       "being written when the run stopped?).")
    if not records:
        notices.append(f"No finished discussion in {layout.DISCUSSIONS} yet: nothing to show.")
    config = read_json_noting(path / "config.json", notices)
    config = config if isinstance(config, dict) else {}
    planned = config.get("discussions")
    strategies_cfg = config.get("strategies") if isinstance(config.get("strategies"), list) else None
    if isinstance(planned, int) and strategies_cfg:
        expected = planned * len(strategies_cfg)
        if len(records) < expected:
            notices.append(f"Only {len(records)} of the {expected} discussions are finished (the run was stopped, or "
                           "is still running; re-running `socialgym moderation` with the same --out continues it).")
    present = {r["strategy"] for r in records}
    order = [s for s in STRATEGIES if s in present] + sorted(present - set(STRATEGIES))
    records.sort(key=lambda r: (order.index(r["strategy"]), r["index"] if isinstance(r["index"], int) else 0))
    summary = []
    for s in order:
        recs = [r for r in records if r["strategy"] == s]
        tox = [t["toxicity"] for r in recs for t in r["turns"] if t["agent"] != MODERATOR and t["toxicity"] is not None]
        arg = [t["argument_quality"] for r in recs for t in r["turns"]
               if t["agent"] != MODERATOR and t["argument_quality"] is not None]
        summary.append({"strategy": s, "label": STRATEGY_LABELS.get(s, s), "discussions": len(recs),
                        "comments": sum(1 for r in recs for t in r["turns"] if t["agent"] != MODERATOR and t["text"]),
                        "toxicity": sum(tox) / len(tox) if tox else None,
                        "argument_quality": sum(arg) / len(arg) if arg else None,
                        "interventions": sum(r["interventions"] or 0 for r in recs),
                        "bans": sum(r["bans"] or 0 for r in recs)})
    return {"format": FORMAT, "kind": "discussion", "title": path.resolve().name, "path": str(path.resolve()),
            "report": False, "strategies": order, "labels": {s: STRATEGY_LABELS.get(s, s) for s in order},
            "discussions": records, "summary": summary, "moderator": MODERATOR, "notices": notices}


def _invalid_line(record: Any) -> str:
    """An invalid-action record as one line: ``field: reason`` (records are dicts; older files
    hold the message string)."""
    if isinstance(record, dict) and "field" in record and "reason" in record:
        return f"{record['field']}: {record['reason']}"
    return record if isinstance(record, str) else json.dumps(record)


def _record(rec: dict) -> dict:
    turns = []
    for t in rec["turns"]:
        if not isinstance(t, dict):
            continue
        row: dict[str, Any] = {k: t.get(k) for k in TURN_KEYS}
        row["agent"] = str(row["agent"]) if row["agent"] is not None else ""
        row["username"] = str(row["username"]) if row["username"] is not None else row["agent"]
        row["text"] = row["text"] if isinstance(row["text"], str) else ""
        for key in ("mentions", "warned", "banned", "toxicity_ratings", "argument_quality_ratings", "invalid"):
            row[key] = row[key] if isinstance(row[key], list) else []
        row["warned"] = [str(u) for u in row["warned"]]
        row["banned"] = [str(u) for u in row["banned"]]
        for key in ("toxicity", "argument_quality"):
            row[key] = to_float(row[key], None)
        if row["invalid"]:
            row["invalid"] = [_invalid_line(x) for x in row["invalid"]]
        turns.append(row)
    users = rec.get("users") if isinstance(rec.get("users"), dict) else {}
    roles = rec.get("roles") if isinstance(rec.get("roles"), dict) else {}
    return {"key": str(rec.get("key", "")), "strategy": rec["strategy"], "index": rec.get("index"),
            "topic": str(rec.get("topic") or ""), "users": {str(k): str(v) for k, v in users.items()},
            "roles": {str(k): str(v) for k, v in roles.items()}, "turns": turns,
            "diversity": to_float(rec.get("diversity"), None), "interventions": rec.get("interventions"),
            "bans": rec.get("bans"), "seed": rec.get("seed")}
