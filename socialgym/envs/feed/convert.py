"""A structured decision written in the numeric encoding (``encoding.ActionLayout``): what an LLM
or scripted agent chose, as the vector a neural policy would have had to output.

Behaviour cloning (``socialgym distill``) learns from these. Not every structured choice has a
numeric twin: a new topic (numeric actions pick from the vocabulary), a mention of someone
outside the feed, a COM on an item not in the feed. Such a component is marked *not relevant*
(it is left out of the loss and of the agreement) and counted, never silently mapped to
something else; the other components of the same decision still count.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Mapping

import numpy as np

from socialgym.envs.feed.encoding import FIELDS, NO_VOTE, ActionLayout
from socialgym.platform.actions import ACTION_TYPES, TONES
from socialgym.platform.topics import normalise_topic

_TYPE, _TARGET, _RECIPIENT, _REPLY, _TOPIC, _TONE = range(len(FIELDS))


def _agent_index(name: Any) -> int | None:
    head, _, index = str(name).rpartition("_")
    return int(index) if head == "agent" and index.isdigit() else None


def numeric_relevant(obs: Mapping, vector: Any, layout: ActionLayout, phase: str) -> tuple[np.ndarray, np.ndarray]:
    """A numeric action (a neural policy's) -> (the vector, which components its choice fixed):
    the same components a structured choice of that type fixes."""
    vector = np.asarray(vector, np.int64).reshape(-1)
    if vector.shape != (layout.length,):
        raise ValueError(f"a numeric action has {layout.length} components, got shape {vector.shape}")
    relevant = np.zeros(layout.length, bool)
    if phase == "vote":
        relevant[layout.act_length: layout.act_length + min(len(obs["vote_items"]), layout.vote_feed_size)] = True
        return vector, relevant
    n_feed = min(len(obs["feed"]), layout.feed_size)
    for s in range(layout.n_actions):
        base, code = s * layout.slot_width, int(vector[s * layout.slot_width])
        if not 0 <= code < len(ACTION_TYPES):
            raise ValueError(f"action type {code} outside [0, {len(ACTION_TYPES)})")
        kind = ACTION_TYPES[code]
        relevant[base + _TYPE] = True
        if kind == "NOT":
            continue
        relevant[base + _TONE] = True
        relevant[base + _TARGET] = kind == "COM"
        relevant[base + _REPLY] = kind == "DM"
        relevant[base + _RECIPIENT] = kind == "DM" and vector[base + _REPLY] == 0
        relevant[base + _TOPIC] = kind in ("POST", "DM")
        if kind in ("POST", "COM"):
            relevant[base + len(FIELDS): base + len(FIELDS) + n_feed] = True
    return vector, relevant


def _topic_index(topic: Any, topics: Mapping[str, int]) -> int | None:
    """A topic as the parser reads it: a string (stripped, lower-cased) or a vocabulary index."""
    if isinstance(topic, str):
        return topics.get(normalise_topic(topic))
    if isinstance(topic, (int, np.integer)) and not isinstance(topic, (bool, np.bool_)) and 0 <= topic < len(topics):
        return int(topic)
    return None


def act_to_numeric(obs: Mapping, payload: Any, layout: ActionLayout, me: int,
                   unmapped: Counter | None = None) -> tuple[np.ndarray, np.ndarray]:
    """One agent's act-phase payload ``{"actions": [...]}`` (or a numeric vector) and the structured
    observation it answered -> (the numeric action (L,), which of its components the choice
    fixed (L,) bool).

    ``unmapped`` (optional) counts the components that had no numeric twin, by field name."""
    if not isinstance(payload, Mapping):
        return numeric_relevant(obs, payload, layout, "act")
    unmapped = unmapped if unmapped is not None else Counter()
    vector, relevant = layout.noop.copy(), np.zeros(layout.length, bool)
    actions = payload.get("actions") if isinstance(payload, Mapping) else None
    if not isinstance(actions, (list, tuple)):
        unmapped["payload"] += 1
        return vector, relevant
    feed_ids = [it["id"] for it in obs["feed"]]
    feed_authors = [_agent_index(it["author"]) for it in obs["feed"]]
    inbox_ids = [d["id"] for d in obs["dms"]][: layout.dm_inbox_size]
    topics = {normalise_topic(t): i for i, t in enumerate(obs["topics"])}
    by_id = {d["id"]: d for d in obs["dms"]}
    for s, action in enumerate(list(actions)[: layout.n_actions]):
        base = s * layout.slot_width
        kind = str(action.get("type", "")).strip().upper() if isinstance(action, Mapping) else ""
        if kind not in ACTION_TYPES:
            unmapped["type"] += 1
            continue
        k = ACTION_TYPES.index(kind)
        vector[base + _TYPE], relevant[base + _TYPE] = k, True
        if kind == "NOT":
            continue
        tone = str(action.get("tone") or "neutral").strip().lower()
        if tone in TONES:
            vector[base + _TONE], relevant[base + _TONE] = TONES.index(tone), True
        if kind == "COM":
            if action.get("target_id") in feed_ids:
                vector[base + _TARGET], relevant[base + _TARGET] = feed_ids.index(action["target_id"]), True
            else:
                unmapped["target_slot"] += 1
        topic = action.get("topic")
        if kind == "DM":
            target = action.get("target_id")
            if target is not None and topic is None and target in by_id:
                topic = by_id[target]["topic"]             # a reply inherits its DM's topic
            if target is not None:
                if target in inbox_ids:
                    vector[base + _REPLY], relevant[base + _REPLY] = inbox_ids.index(target) + 1, True
                else:
                    unmapped["reply_slot"] += 1
            else:
                relevant[base + _REPLY] = True             # a new DM: reply slot 0
                r = _agent_index(action.get("recipient"))
                if r is not None and r != me and 0 <= r < layout.n_agents:
                    vector[base + _RECIPIENT] = (r - me - 1) % layout.n_agents
                    relevant[base + _RECIPIENT] = True
                else:
                    unmapped["recipient"] += 1
        if kind in ("POST", "DM"):
            index = _topic_index(topic, topics)
            if index is not None and index < layout.max_topics:
                vector[base + _TOPIC], relevant[base + _TOPIC] = index, True
            else:
                unmapped["topic"] += 1
        if kind in ("POST", "COM"):
            named = {_agent_index(m) for m in (action.get("mentions") or ())}
            named.discard(me)
            for j in range(layout.feed_size):
                column = base + len(FIELDS) + j
                if j < len(feed_ids):
                    vector[column], relevant[column] = int(feed_authors[j] in named), True
            outside = len(named - set(feed_authors))
            if outside:
                unmapped["mentions"] += outside
    return vector, relevant


def votes_to_numeric(obs: Mapping, payload: Any, layout: ActionLayout,
                     unmapped: Counter | None = None) -> tuple[np.ndarray, np.ndarray]:
    """One agent's vote payload ``{"votes": {id: -1|0|1}}`` (or a numeric vector) -> (numeric
    action (L,), relevant (L,)): every shown vote item is a decision, an item left out is a 0
    (no vote)."""
    if not isinstance(payload, Mapping):
        return numeric_relevant(obs, payload, layout, "vote")
    unmapped = unmapped if unmapped is not None else Counter()
    vector, relevant = layout.noop.copy(), np.zeros(layout.length, bool)
    votes = payload.get("votes") if isinstance(payload, Mapping) else None
    if votes is not None and not isinstance(votes, Mapping):
        unmapped["votes"] += 1
        return vector, relevant
    given = {}
    for key, value in (votes or {}).items():
        try:
            given[int(key)] = int(np.sign(float(value)))
        except (TypeError, ValueError):
            unmapped["votes"] += 1
    for v, item in enumerate(obs["vote_items"][: layout.vote_feed_size]):
        column = layout.act_length + v
        vector[column], relevant[column] = given.get(item["id"], 0) + NO_VOTE, True
    return vector, relevant
