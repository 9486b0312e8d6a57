"""Validation of agents' actions (specification §1, §6) into the columnar round batch.

Structured actions (dicts) are checked one agent at a time — parsing free-form input is
inherently per agent; numeric actions (integer vectors) are checked for all agents at once.
Both end in the same columns. An invalid slot raises (``strict``) or becomes NOT with a record
(``lenient``); nothing is dropped silently.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np

from socialgym.config import normalise_topic
from socialgym.envs.feed.encoding import FIELDS, ActionLayout
from socialgym.platform.actions import ACTION_TYPES, COM, DM, NOT, POST, TONE_SENTIMENT, TONES, RoundActions
from socialgym.platform.content import ContentStore
from socialgym.platform.topics import TopicVocabulary, topic_problem
from socialgym.platform.validation import utf8_problem

_ACTION_KEYS = {
    POST: {"type", "topic", "text", "mentions", "tone"},
    COM: {"type", "target_id", "topic", "text", "mentions", "tone"},
    DM: {"type", "recipient", "target_id", "topic", "text", "tone"},
    NOT: {"type"},
}
_ALL_KEYS = set().union(*_ACTION_KEYS.values())


_ID_PATTERN = re.compile(r"-?[0-9]+", re.ASCII)
_MISSING = object()      # an agent without a payload in a step's dict


class InvalidAction(Exception):
    def __init__(self, slot: int | None, field: str, reason: str) -> None:
        super().__init__(reason)
        self.slot, self.field, self.reason = slot, field, reason

    def record(self, phase: str) -> dict:
        return {"phase": phase, "slot": self.slot, "field": self.field, "reason": self.reason}


def _is_empty(value: Any) -> bool:
    """None, "" or an empty list/tuple: a field that says nothing (never compares arrays)."""
    return value is None or (isinstance(value, (str, list, tuple)) and len(value) == 0)


def invalid_error(agent: str, err: InvalidAction) -> ValueError:
    where = f"slot {err.slot}" if err.slot is not None else "payload"
    return ValueError(f"invalid action of {agent}, {where}, field {err.field!r}: {err.reason}")


def invalid_handler(agent_ids: tuple[str, ...], invalid: dict, phase: str, strict: bool):
    """``handle(agent, err)`` for one step's invalid actions: raises :func:`invalid_error`
    (``strict``) or appends ``err.record(phase)`` to ``invalid[agent]`` (lenient)."""

    def handle(agent: int, err: InvalidAction) -> None:
        if strict:
            raise invalid_error(agent_ids[agent], err)
        invalid.setdefault(agent, []).append(err.record(phase))
    return handle


def route_payloads(agent_ids: tuple[str, ...], actions: Mapping, key: str, missing: str, handle,
                   structured) -> tuple[np.ndarray, list]:
    """Route every agent's payload of one step, in agent order: a missing or undecodable one
    to ``handle``, a structured one to ``structured(agent, payload)``; the numeric ones are
    returned (agent indices, vectors) for one vectorised parse."""
    numeric_agents, numeric_vectors = [], []
    for i, agent in enumerate(agent_ids):
        payload = actions.get(agent, _MISSING)
        if payload is _MISSING:
            handle(i, InvalidAction(None, key, missing))
            continue
        try:
            vector = payload if isinstance(payload, np.ndarray) else numeric_payload(payload, key)
        except InvalidAction as err:
            handle(i, err)
            continue
        if vector is not None:
            numeric_agents.append(i)
            numeric_vectors.append(vector)
        else:
            structured(i, payload)
    return np.asarray(numeric_agents, np.int64), numeric_vectors


@dataclass
class SlotColumns:
    """Accumulates parsed actions (NOTs omitted). The structured parser appends one action at a
    time to the lists (``topic`` holds ids or new topic strings); the numeric parser appends
    whole arrays as one chunk (``add_chunk``), so no per-action Python objects are made on the
    scale path. Rows are numbered list rows first, then the chunks in order."""

    sender: list = field(default_factory=list)
    slot: list = field(default_factory=list)
    kind: list = field(default_factory=list)
    target_id: list = field(default_factory=list)
    recipient: list = field(default_factory=list)
    topic: list = field(default_factory=list)
    sentiment: list = field(default_factory=list)
    text: list = field(default_factory=list)
    # mentions as pairs (row in these columns, mentioned agent), in chunks of arrays
    mention_row: list = field(default_factory=list)
    mention_agent: list = field(default_factory=list)
    chunks: list = field(default_factory=list)

    _COLUMNS = (("sender", np.int64), ("slot", np.int64), ("kind", np.int8), ("target_id", np.int64),
                ("recipient", np.int32), ("topic", np.int32), ("sentiment", np.float64))

    def add_chunk(self, mention_row: np.ndarray | None = None, mention_agent: np.ndarray | None = None,
                  **columns: np.ndarray) -> None:
        """Numeric actions as arrays (every column of ``_COLUMNS``); ``mention_row`` counts rows
        within this chunk."""
        self.chunks.append((columns, mention_row, mention_agent))

    def _column(self, name: str, dtype) -> np.ndarray:
        parts = [np.asarray(getattr(self, name) if name != "topic" else
                            [t if isinstance(t, int) else -1 for t in self.topic], dtype)]
        return np.concatenate(parts + [np.asarray(c[name], dtype) for c, _, _ in self.chunks])

    def to_actions(self, vocab: TopicVocabulary, n_agents: int, n_actions: int,
                   round: int) -> tuple[RoundActions, list]:
        """The round's actions: columns in (agent, slot) order, new topics added to ``vocab`` in
        that order; and their texts in the same order."""
        sender, slot = self._column("sender", np.int64), self._column("slot", np.int64)
        order = np.lexsort((slot, sender))
        topic_ids = self._column("topic", np.int32)
        listed = len(self.sender)
        if any(not isinstance(t, int) for t in self.topic):     # new topics, in (agent, slot) order
            for k in order[order < listed].tolist():
                if not isinstance(self.topic[k], int):
                    topic_ids[k] = vocab.add(self.topic[k])
        position = np.empty(len(order), dtype=np.int64)
        position[order] = np.arange(len(order))          # old row -> row in (agent, slot) order
        rows, agents = list(self.mention_row), list(self.mention_agent)
        offset = listed
        for columns, m_row, m_agent in self.chunks:
            if m_row is not None and len(m_row):
                rows.append(np.asarray(m_row, np.int64) + offset)
                agents.append(m_agent)
            offset += len(columns["sender"])
        m_row = position[np.concatenate(rows)] if rows else np.zeros(0, np.int64)
        m_agent = np.concatenate(agents) if agents else np.zeros(0, np.int64)
        m_order = np.argsort(m_row, kind="stable")
        actions = RoundActions(
            n_agents=n_agents, n_actions=n_actions, round=round,
            sender=sender.astype(np.int32)[order],
            kind=self._column("kind", np.int8)[order],
            recipient=self._column("recipient", np.int32)[order],
            target_id=self._column("target_id", np.int64)[order],
            topic=topic_ids[order],
            sentiment=self._column("sentiment", np.float64)[order],
            mention_action=m_row[m_order],
            mention_agent=m_agent[m_order].astype(np.int32, copy=False),
        )
        if not any(t is not None for t in self.text):
            return actions, [None] * len(order)
        texts = np.array(self.text + [None] * (len(order) - listed), dtype=object)
        return actions, texts[order].tolist()


@dataclass(frozen=True)
class RoundState:
    """What the parsers read of the platform during one step: the content store and the topic
    vocabulary as they stand before the step, and each agent's (row's) lists of content ids
    (-1 = empty slot)."""

    round: int
    layout: ActionLayout
    max_text_chars: int
    agent_ids: tuple[str, ...]
    agent_index: Mapping[str, int]
    content: ContentStore
    vocab: TopicVocabulary
    feed: np.ndarray                    # (n, feed_size)
    inbox: np.ndarray                   # (n, dm_inbox_size), newest first
    vote_items: np.ndarray              # (n, vote_feed_size)
    sentiment_scorer: Callable[[str], float] | None     # s(a) of a text; None: by tone only


class ActParser:
    """Parses act-phase payloads against the platform state of one round."""

    def __init__(self, state: RoundState) -> None:
        self.state = state
        self.n = state.layout.n_agents
        self.n_actions = state.layout.n_actions
        self.first_round = state.round == 1
        self.max_text = state.max_text_chars

    # ---- structured -------------------------------------------------------------------------
    def parse_structured(self, agent: int, payload: Any, out: SlotColumns, on_invalid) -> None:
        """Parse one agent's ``{"actions": [...]}``; ``on_invalid(err)`` raises or records."""
        if not isinstance(payload, Mapping) or "actions" not in payload:
            on_invalid(InvalidAction(None, "actions",
                                     f"act-phase action must be a dict {{'actions': [...]}} or a numeric "
                                     f"vector, got {_short(payload)}"))
            return
        extra = set(payload) - {"actions"}
        if extra:
            on_invalid(InvalidAction(None, sorted(extra)[0], f"unexpected key(s) {sorted(extra)} in act payload"))
        actions = payload["actions"]
        if isinstance(actions, (str, bytes, Mapping)) or not hasattr(actions, "__len__"):
            on_invalid(InvalidAction(None, "actions", f"'actions' must be a list, got {_short(actions)}"))
            return
        actions = list(actions)
        if len(actions) != self.n_actions:
            on_invalid(InvalidAction(None, "actions",
                                     f"expected exactly {self.n_actions} actions, got {len(actions)}"))
            actions = actions[: self.n_actions]  # lenient: extra ones recorded above, missing = NOT
        for slot, action in enumerate(actions):
            try:
                self._parse_one(agent, slot, action, out)
            except InvalidAction as err:
                on_invalid(err)

    def _parse_one(self, agent: int, slot: int, action: Any, out: SlotColumns) -> None:
        kind = self._kind(slot, action)
        if kind == NOT:
            return
        text, tone_idx = self._text_and_tone(slot, action)
        target_id, recipient, inherited = self._target(agent, slot, kind, action)
        topic = action.get("topic")
        # a COM (and a DM reply) without a topic takes its target's (specification §1); a given one is checked
        topic = inherited if topic is None and inherited is not None else self._topic(slot, topic)
        mentions = self._mentions(agent, slot, action) if kind != DM else []

        scorer = self.state.sentiment_scorer
        sentiment = scorer(text) if text and scorer is not None else float(TONE_SENTIMENT[tone_idx])
        out.sender.append(agent)
        out.slot.append(slot)
        out.kind.append(kind)
        out.target_id.append(target_id)
        out.recipient.append(recipient)
        out.topic.append(topic)
        out.sentiment.append(sentiment)
        out.text.append(text if text else None)
        if mentions:
            out.mention_row.append(np.full(len(mentions), len(out.sender) - 1, dtype=np.int64))
            out.mention_agent.append(np.asarray(mentions, dtype=np.int64))

    def _kind(self, slot: int, action: Any) -> int:
        """The action's type (an index into ACTION_TYPES), its keys checked against that type."""
        if not isinstance(action, Mapping):
            raise InvalidAction(slot, "type", f"action must be a dict, got {_short(action)}")
        kind_name = action.get("type")
        if not isinstance(kind_name, str) or kind_name.strip().upper() not in ACTION_TYPES:
            raise InvalidAction(slot, "type", f"type must be one of {list(ACTION_TYPES)}, got {_short(kind_name)}")
        kind = ACTION_TYPES.index(kind_name.strip().upper())
        unknown = set(action) - _ALL_KEYS
        if unknown:
            names = sorted(unknown, key=repr)       # keys of any type (an int beside a str must not crash)
            raise InvalidAction(slot, str(names[0])[:40], f"unknown key(s) {[str(k)[:40] for k in names[:5]]}")
        stray = sorted((k for k in set(action) - _ACTION_KEYS[kind] if not _is_empty(action[k])), key=repr)
        if stray:
            raise InvalidAction(slot, stray[0], f"{ACTION_TYPES[kind]} takes no {stray}")
        if self.first_round and kind != POST:
            raise InvalidAction(slot, "type", f"round 1 allows only POST (nothing exists yet), got {ACTION_TYPES[kind]}")
        return kind

    def _text_and_tone(self, slot: int, action: Mapping) -> tuple[str | None, int]:
        """The action's text (None or a checked string) and its tone (an index into TONES)."""
        text = action.get("text")
        if text is not None and not isinstance(text, str):
            raise InvalidAction(slot, "text", f"text must be a string, got {_short(text)}")
        if text is not None and len(text) > self.max_text:
            raise InvalidAction(slot, "text", f"text has {len(text)} characters, more than max_text_chars={self.max_text}")
        problem = utf8_problem(text) if text else None
        if problem:
            raise InvalidAction(slot, "text", f"text is {problem}")
        tone = action.get("tone")
        if tone is None:
            tone_idx = TONES.index("neutral")
        elif isinstance(tone, str) and tone.strip().lower() in TONES:
            tone_idx = TONES.index(tone.strip().lower())
        else:
            raise InvalidAction(slot, "tone", f"tone must be one of {list(TONES)}, got {_short(tone)}")
        return text, tone_idx

    def _target(self, agent: int, slot: int, kind: int, action: Mapping) -> tuple[int, int, int | None]:
        """(target id, recipient, the topic a COM or DM reply inherits from its target or None);
        -1 for a target or recipient the action has not."""
        state = self.state
        target_id, recipient, inherited = -1, -1, None
        if kind == COM:
            target_id = self._content_id(slot, action.get("target_id"), "target_id", required=True)
            feed = state.feed[agent]
            if not (feed == target_id).any():
                raise InvalidAction(slot, "target_id",
                                    f"{target_id} is not a public item in this agent's feed "
                                    f"(feed ids: {feed[feed >= 0].tolist()})")
            recipient = int(state.content.column("author")[target_id])
            inherited = int(state.content.column("topic")[target_id])
        elif kind == DM:
            recipient = self._agent(slot, action.get("recipient"), "recipient")
            if recipient == agent:
                raise InvalidAction(slot, "recipient", "an agent cannot send a DM to itself")
            if action.get("target_id") is not None:
                target_id = self._content_id(slot, action.get("target_id"), "target_id", required=True)
                col = state.content
                if col.column("kind")[target_id] != DM or col.column("recipient")[target_id] != agent:
                    raise InvalidAction(slot, "target_id", f"{target_id} is not a DM addressed to this agent")
                if col.column("author")[target_id] != recipient:
                    raise InvalidAction(slot, "target_id",
                                        f"DM {target_id} was sent by {state.agent_ids[col.column('author')[target_id]]}, "
                                        f"so a reply to it must go to them, not {state.agent_ids[recipient]}")
                inherited = int(col.column("topic")[target_id])
        return target_id, recipient, inherited

    def _mentions(self, agent: int, slot: int, action: Mapping) -> list[int]:
        """The agents a POST or COM mentions, in order, each once; a self-mention is ignored."""
        mentions: list[int] = []
        raw_mentions = action.get("mentions")
        if raw_mentions is not None:
            if isinstance(raw_mentions, (str, bytes, Mapping)) or not hasattr(raw_mentions, "__iter__"):
                raise InvalidAction(slot, "mentions", f"mentions must be a list of agent ids, got {_short(raw_mentions)}")
            for m in raw_mentions:
                idx = self._agent(slot, m, "mentions")
                if idx != agent and idx not in mentions:  # a self-mention is ignored (specification §1)
                    mentions.append(idx)
        return mentions

    def _content_id(self, slot: int, value: Any, name: str, required: bool) -> int:
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
            raise InvalidAction(slot, name, f"{name} must be an integer content id, got {_short(value)}")
        value = int(value)
        if not 0 <= value < len(self.state.content):
            raise InvalidAction(slot, name, f"{value} is not a known content id")
        return value

    def _agent(self, slot: int, value: Any, name: str) -> int:
        idx = self.state.agent_index.get(value) if isinstance(value, str) else None
        if idx is None:
            raise InvalidAction(slot, name, f"{_short(value)} is not a known agent id")
        return idx

    def _topic(self, slot: int, topic: Any) -> int | str:
        """A topic given by the agent: a vocabulary index (as in the numeric encoding: an integer,
        not a bool, in ``0 .. len(vocabulary) - 1`` as it stands before this step) or a topic
        string (``socialgym.platform.topics.topic_problem``); returns the index of a known topic
        or the normalised new string."""
        vocab = self.state.vocab
        if isinstance(topic, (int, np.integer)) and not isinstance(topic, (bool, np.bool_)):
            if not 0 <= topic < len(vocab):
                known = f"indices 0 .. {len(vocab) - 1}" if len(vocab) else "the vocabulary is empty"
                raise InvalidAction(slot, "topic", f"topic index {int(topic)} is not in the vocabulary ({known})")
            return int(topic)
        if not isinstance(topic, str):
            raise InvalidAction(slot, "topic", f"topic must be a non-empty string or a vocabulary index, "
                                               f"got {_short(topic)}")
        problem = topic_problem(topic)
        if problem:
            raise InvalidAction(slot, "topic", problem)
        known = vocab.get(topic)
        return known if known is not None else normalise_topic(topic)

    # ---- numeric ----------------------------------------------------------------------------
    def parse_numeric(self, agents: np.ndarray, vectors, out: SlotColumns, on_invalid) -> None:
        """Vectorised decoding of numeric actions (a list of vectors or one (a, L) matrix);
        ``on_invalid(agent, err)`` raises or records."""
        state, lay = self.state, self.state.layout
        agents, matrix = stack_numeric(agents, vectors, lay, "actions", on_invalid)
        if not len(agents):
            return
        act, _ = lay.split(matrix)
        n_agents, n_slots, _ = act.shape
        kind = act[:, :, 0]
        invalid = np.full((n_agents, n_slots), -1, dtype=np.int64)      # first bad column per slot
        why = np.full((n_agents, n_slots), -1, dtype=np.int64)          # index into reasons
        reasons: list[str] = []

        def flag(mask: np.ndarray, column: int, reason: str) -> None:
            hit = mask & (invalid < 0)
            if hit.any():
                invalid[hit] = column
                why[hit] = len(reasons)
                reasons.append(reason)

        in_range = (act >= 0) & (act < lay.slot_nvec)
        if not in_range.all():   # rare: flag and neutralise out-of-range entries
            for column in range(lay.slot_width):
                flag(~in_range[:, :, column], column, f"value outside [0, {lay.slot_nvec[column]})")
            act = np.where(in_range, act, 0)
        kind = act[:, :, 0]
        if self.first_round:
            flag(kind != POST, 0, "round 1 allows only POST (nothing exists yet)")
        feed = state.feed[agents]                                         # (a, F)
        feed_slot = act[:, :, 1]
        target = np.take_along_axis(feed, feed_slot, axis=1)
        flag((kind == COM) & (target < 0), 1, "the feed slot is empty")
        inbox = state.inbox[agents]                                       # (a, D)
        reply = act[:, :, 3]
        replied = np.where(reply > 0, np.take_along_axis(inbox, np.maximum(reply - 1, 0), axis=1), -1)
        flag((kind == DM) & (reply > 0) & (replied < 0), 3, "the inbox slot is empty")
        topic = act[:, :, 4]
        flag(((kind == POST) | (kind == DM)) & (topic >= len(state.vocab)), 4,
             f"topic index beyond the vocabulary of {len(state.vocab)} topics")
        mention_flags = act[:, :, len(FIELDS):].astype(bool)             # (a, N, F)
        empty_mention = mention_flags & (feed[:, None, :] < 0)
        for j in range(lay.feed_size):
            flag(((kind == POST) | (kind == COM)) & empty_mention[:, :, j], len(FIELDS) + j,
                 "mentions the author of an empty feed slot")

        for a, s in zip(*np.nonzero(invalid >= 0)):
            column = int(invalid[a, s])
            on_invalid(int(agents[a]), InvalidAction(int(s), lay.field_name(column), reasons[why[a, s]]))
        keep = (invalid < 0) & (kind != NOT)
        a_idx, s_idx = np.nonzero(keep)
        sender = agents[a_idx]
        k = kind[a_idx, s_idx]
        authors = state.content.column("author")
        topics_col = state.content.column("topic")
        tgt = target[a_idx, s_idx]
        rep = replied[a_idx, s_idx]
        # recipient r of a new DM: the (r+1)-th agent after the sender on its platform (one
        # platform: sender - local == 0; several stepped as one, socialgym.vector: its block)
        local = sender % self.n
        new_dm_recipient = sender - local + (local + 1 + act[a_idx, s_idx, 2]) % self.n
        recipient = np.select([k == COM, (k == DM) & (rep >= 0), k == DM],
                              [_take(authors, tgt), _take(authors, rep), new_dm_recipient], -1)
        target_id = np.select([k == COM, k == DM], [tgt, rep], -1)
        topic_ids = np.where(k == COM, _take(topics_col, tgt), topic[a_idx, s_idx])
        sentiment = TONE_SENTIMENT[act[a_idx, s_idx, 5]]
        flags = mention_flags[a_idx, s_idx] & ((k == POST) | (k == COM))[:, None]
        rows = agents_m = None
        if flags.any():
            rows, agents_m = _unique_mentions(np.where(flags, _take(authors, feed[a_idx]), -1), sender)
        out.add_chunk(rows, agents_m, sender=sender, slot=s_idx, kind=k, target_id=target_id, recipient=recipient,
                      topic=topic_ids, sentiment=sentiment)



def _take(column: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """column[ids] with -1 where an id is -1 (empty slot)."""
    out = np.full(ids.shape, -1, dtype=np.int64)
    ok = ids >= 0
    out[ok] = column[ids[ok]]
    return out


def _unique_mentions(mentioned: np.ndarray, sender: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(row, agent) pairs of an (m, F) matrix of mentioned agents (-1 = none): repeats within a
    row and self-mentions (specification §1) removed."""
    mentioned = np.where(mentioned == sender[:, None], -1, mentioned)
    srt = np.sort(mentioned, axis=1)
    keep = srt >= 0
    keep[:, 1:] &= srt[:, 1:] != srt[:, :-1]
    rows, cols = np.nonzero(keep)
    return rows.astype(np.int64, copy=False), srt[rows, cols].astype(np.int64, copy=False)


def numeric_payload(payload: Any, field: str) -> np.ndarray | None:
    """One agent's numeric action as an ndarray, or None when ``payload`` is not numeric (a
    structured payload, or something that is neither: the structured parser reports it).

    Accepted: an ``np.ndarray``; a list or tuple of numbers; a torch tensor (detached and moved
    to the CPU with ``.cpu()``, so a CUDA tensor works too, at the cost of a device-to-host copy
    per agent — pass one matrix to ``step_arrays`` to copy once); any other object with
    ``__array__`` (``np.asarray``). torch itself is never imported here. Shape and dtype are
    checked afterwards (``stack_numeric``); a list that numpy cannot turn into an array (ragged
    rows) or an object whose conversion fails is an ``InvalidAction`` of the agent.
    """
    if isinstance(payload, np.ndarray):
        return payload
    if isinstance(payload, (Mapping, str, bytes)):
        return None
    if isinstance(payload, (list, tuple)):
        if payload and isinstance(payload[0], Mapping):
            return None     # a list of action dicts: a structured payload missing {"actions": ...}
        try:
            return np.asarray(payload)
        except (ValueError, TypeError, OverflowError) as err:
            raise InvalidAction(None, field, f"numeric action must be a flat list of integers, got a "
                                             f"{type(payload).__name__} numpy cannot read as one array "
                                             f"(ragged or nested rows?): {_first_line(err)}") from None
    try:
        if _is_tensor(payload):
            return payload.detach().cpu().numpy()
        if hasattr(payload, "__array__"):
            return np.asarray(payload)
    except Exception as err:   # noqa: BLE001 - any conversion failure is this agent's invalid action
        raise InvalidAction(None, field, f"numeric action of type {type(payload).__name__} could not be "
                                         f"converted to a numpy array: {_first_line(err)}") from None
    return None


def numeric_matrix(actions: Any) -> np.ndarray:
    """``step_arrays``' action matrix as an ndarray: an ndarray, a nested list, a torch tensor
    (detached, moved to the CPU) or any object with ``__array__``; ValueError if it cannot be
    converted (e.g. ragged rows)."""
    if isinstance(actions, np.ndarray):
        return actions
    try:
        if _is_tensor(actions):
            return actions.detach().cpu().numpy()
        return np.asarray(actions)
    except Exception as err:   # noqa: BLE001
        raise ValueError(f"step_arrays could not convert the actions ({type(actions).__name__}) to a numpy "
                         f"integer matrix (ragged rows?): {_first_line(err)}") from None


def _is_tensor(x: Any) -> bool:
    """A torch tensor (or a look-alike), recognised without importing torch."""
    return (type(x).__module__.split(".")[0] == "torch" and callable(getattr(x, "detach", None))
            and callable(getattr(x, "cpu", None)) and callable(getattr(x, "numpy", None)))


def _first_line(err: Exception) -> str:
    text = str(err).strip()
    return (text.splitlines()[0][:160] if text else type(err).__name__)


def stack_numeric(agents: np.ndarray, vectors: list, lay: ActionLayout, field: str,
                  on_invalid) -> tuple[np.ndarray, np.ndarray]:
    """Stack numeric action vectors into an (a, L) int64 matrix, reporting malformed ones.

    The common case (all well-formed) is checked with whole-matrix operations; only when that
    fails are the vectors examined one by one to name the offending agents.
    """
    agents = np.asarray(agents, dtype=np.int64)
    if isinstance(vectors, np.ndarray) and vectors.ndim == 2 and vectors.shape[1] == lay.length \
            and vectors.dtype.kind in "iu":
        return agents, vectors.astype(np.int64, copy=False)   # already one integer matrix
    if not len(vectors):
        return agents, np.zeros((0, lay.length), np.int64)
    shape = (lay.length,)
    matrix = None
    if all(isinstance(v, np.ndarray) and v.shape == shape for v in vectors):
        # concatenate + reshape: much cheaper than np.stack's per-array expand_dims at 100k agents
        matrix = np.concatenate(vectors).reshape(len(vectors), lay.length)
    if matrix is not None and (
            matrix.dtype.kind in "iub"
            or (matrix.dtype.kind == "f" and np.all(np.isfinite(matrix)) and np.all(matrix == np.round(matrix)))):
        return agents, matrix.astype(np.int64, copy=False)
    ok, rows = [], []
    for agent, vec in zip(agents.tolist(), vectors):
        arr = np.asarray(vec)
        bad = _numeric_shape_error(arr, lay)
        if bad:
            on_invalid(agent, InvalidAction(None, field, bad))
        else:
            ok.append(agent)
            rows.append(arr)
    if not rows:
        return np.zeros(0, np.int64), np.zeros((0, lay.length), np.int64)
    return np.asarray(ok, np.int64), np.stack(rows).astype(np.int64, copy=False)


def _numeric_shape_error(arr: np.ndarray, lay: ActionLayout) -> str | None:
    if arr.shape != (lay.length,):
        return f"numeric action must have shape ({lay.length},), got {arr.shape}"
    if arr.dtype.kind in "iu":
        return None
    if arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)):
            return "numeric action contains NaN or infinity"
        if not np.all(arr == np.round(arr)):
            return "numeric action must hold whole numbers"
        return None
    if arr.dtype.kind == "b":
        return None
    return f"numeric action must be an integer array, got dtype {arr.dtype}"


def parse_votes(state: RoundState, agent: int, payload: Any, on_invalid) -> dict[int, int]:
    """Structured vote payload -> {content id: +1/-1} for the agent's vote items (numeric
    vote vectors are decoded for all agents at once by ``parse_numeric_votes``).

    Keys are ids or their decimal strings (JSON), so several keys may name one item (``17``,
    ``"17"``, ``" 17"``): if they give the same value they count as one vote; if they differ the
    item gets no vote and each conflicting key is an invalid vote (field ``votes[17]``)."""
    items = state.vote_items[agent]
    allowed = {int(i) for i in items if i >= 0}
    if not isinstance(payload, Mapping) or "votes" not in payload:
        on_invalid(InvalidAction(None, "votes", f"vote-phase action must be {{'votes': {{id: +1|-1|0}}}} "
                                               f"or a numeric vector, got {_short(payload)}"))
        return {}
    extra = set(payload) - {"votes"}
    if extra:
        on_invalid(InvalidAction(None, sorted(extra)[0], f"unexpected key(s) {sorted(extra)} in vote payload"))
    raw = payload["votes"]
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        on_invalid(InvalidAction(None, "votes", f"'votes' must be a dict id -> +1/-1/0, got {_short(raw)}"))
        return {}
    votes: dict[int, int] = {}
    given: dict[int, tuple] = {}      # item -> (first key naming it, its value); value None: conflict
    for key, value in raw.items():
        try:
            item = _vote_key(key)
            if item not in allowed:
                raise InvalidAction(None, f"votes[{key!r}]",
                                    f"{item} is not one of this agent's vote items {sorted(allowed)}")
            if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer, float, np.floating)) \
                    or (isinstance(value, (float, np.floating)) and not math.isfinite(value)) \
                    or value not in (-1, 0, 1):
                raise InvalidAction(None, f"votes[{key!r}]", f"vote value must be +1, -1 or 0, got {_short(value)}")
            if item in given:
                # several keys name one item (17 and "17", or "17" and " 17"): equal values count
                # once; different ones are invalid and the item gets no vote at all
                first_key, first_value = given[item]
                if first_value is not None and first_value == value:
                    continue
                given[item] = (first_key, None)
                votes.pop(item, None)
                raise InvalidAction(None, f"votes[{item}]",
                                    f"conflicting votes on item {item}: keys {first_key!r} and {key!r} give "
                                    f"different values; no vote is counted on {item}")
            given[item] = (key, value)
        except InvalidAction as err:
            on_invalid(err)
            continue
        if value != 0:
            votes[item] = int(value)
    return votes


def parse_numeric_votes(state: RoundState, agents: np.ndarray, matrix: np.ndarray,
                        on_invalid) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Decode the numeric vote codes (0/1/2 = vote -1/0/+1 on vote slot v) of many agents (rows
    of ``matrix``) into the (voters, items, values) of their non-zero votes;
    ``on_invalid(agent, err)`` raises or records."""
    if len(agents):
        codes = matrix[:, state.layout.act_length:]
        slots = state.vote_items[agents]
        bad = ~np.isin(codes, (0, 1, 2)) | ((codes != 1) & (slots < 0))
        for a, v in zip(*np.nonzero(bad)):
            reason = ("vote code must be 0, 1 or 2" if codes[a, v] not in (0, 1, 2)
                      else "a non-zero vote on an empty vote slot")
            on_invalid(int(agents[a]), InvalidAction(int(v), "votes", f"{reason}, got {codes[a, v]}"))
        cast = (codes != 1) & ~bad
        a_idx, v_idx = np.nonzero(cast)
        return (agents[a_idx].astype(np.int32, copy=False), slots[a_idx, v_idx],
                (codes[a_idx, v_idx] - 1).astype(np.int8, copy=False))
    return np.zeros(0, np.int32), np.zeros(0, np.int64), np.zeros(0, np.int8)


def collect_votes(state: RoundState, actions: Mapping, handle) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every agent's vote payload of one step (structured or numeric) -> the (voters, items,
    values) of the non-zero votes; ``handle(agent, err)`` raises or records."""
    voter_parts, item_parts, value_parts = [], [], []

    def structured(i: int, payload) -> None:
        votes = parse_votes(state, i, payload, lambda err: handle(i, err))
        if votes:
            voter_parts.append(np.full(len(votes), i, np.int32))
            item_parts.append(np.fromiter(votes.keys(), np.int64, len(votes)))
            value_parts.append(np.fromiter(votes.values(), np.int8, len(votes)))
    numeric_agents, numeric_vectors = route_payloads(
        state.agent_ids, actions, "votes", "no votes given for this agent (send {'votes': {}})", handle, structured)
    agents, matrix = stack_numeric(numeric_agents, numeric_vectors, state.layout, "votes", handle)
    parts = parse_numeric_votes(state, agents, matrix, handle)
    for part, out in zip(parts, (voter_parts, item_parts, value_parts)):
        out.append(part)
    return np.concatenate(voter_parts), np.concatenate(item_parts), np.concatenate(value_parts)


def _vote_key(key: Any) -> int:
    # JSON objects only have string keys, so "17" is accepted for id 17.
    if isinstance(key, (int, np.integer)) and not isinstance(key, (bool, np.bool_)):
        return int(key)
    if isinstance(key, str) and _ID_PATTERN.fullmatch(key.strip()):
        return int(key.strip())
    raise InvalidAction(None, f"votes[{_short(key)}]", f"vote key must be a content id, got {_short(key)}")


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} chars)"
