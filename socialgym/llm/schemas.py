"""JSON schemas built from the live observation, and the validators that check replies.

With ``ids="enum"`` every structured request sends a schema whose enums are the ids the agent
may use right now (listed posts, users, DMs), so that servers with constrained decoding cannot
produce an invalid plan. The plan is then a discriminated union per action type: one object
shape for POST, COM, a cold DM, NOT, and one per DM the agent may reply to (its recipient fixed
to that DM's author), so the grammar also forbids cross-field mistakes such as replying to a DM
while addressing someone else.

With ``ids="validate"`` the schemas have the same shapes but plain integer / string ids, so they
are identical from round to round: a server that puts the schema in front of the prompt
(OpenAI) can then reuse the cached prefix. The ids are checked after the reply, as always.

Replies are validated here anyway (not every server enforces schemas), with messages that
name the slot and the field, which go back to the model when it is re-prompted.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from socialgym.llm.sanitize import unencodable_strings
from socialgym.platform.actions import PUBLIC_TYPES, TONES
from socialgym.platform.validation import is_int

TEXT_MAX = 280
TOPIC_MAX = 40
TOPIC_PATTERN = r"^[A-Za-z][A-Za-z0-9 _-]{0,39}$"   # a word or short phrase, not free-form text
REASON_MAX = 160
TIP_MAX = 240
ID_MODES = ("enum", "validate")


@dataclass
class Checked:
    """A reply after validation: the usable value (possibly partial) and what was wrong."""

    value: Any
    errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors


def parse_json(reply: str) -> Any:
    """The JSON value in a reply; tolerates code fences and prose around one object. A value
    with a string UTF-8 cannot encode (an escaped lone surrogate, ``"\\ud800"``) is invalid too:
    it would break every file and prompt it reached."""
    if not isinstance(reply, str) or not reply.strip():
        raise ValueError("the reply is empty")
    try:       # strict=False: raw newlines inside strings, which grammar-constrained models emit
        return _encodable_value(json.loads(reply, strict=False))
    except json.JSONDecodeError as err:
        first = err
    except RecursionError:      # "[[[[..." nested past the interpreter's limit
        raise ValueError("the reply nests arrays or objects too deeply") from None
    text = re.sub(r"```(?:json)?", "", reply)
    start, end = text.find("{"), text.rfind("}")
    if start >= 0 and end > start:
        try:
            return _encodable_value(json.loads(text[start:end + 1], strict=False))
        except (json.JSONDecodeError, RecursionError):
            pass
    raise ValueError(f"the reply is not valid JSON ({first.msg} at char {first.pos})")


def _encodable_value(value: Any) -> Any:
    if unencodable_strings(value):
        raise ValueError("the reply is not valid text: it escapes a lone surrogate (such as \\ud800); "
                         "write plain characters")
    return value


def _enum(values: Sequence, nullable: bool = False) -> dict:
    """An enum with its JSON type. Nullable enums are an ``anyOf`` with null: grammar converters
    (llama.cpp's among them) honour ``type`` over ``enum`` when ``type`` is a list."""
    kind = "integer" if all(isinstance(v, int) for v in values) else "string"
    schema = {"type": kind, "enum": list(values)}
    return {"anyOf": [schema, {"type": "null"}]} if nullable else schema


def _obj(properties: dict) -> dict:
    return {"type": "object", "properties": properties, "required": list(properties),
            "additionalProperties": False}


# ---------------------------------------------------------------------------- plan
@dataclass(frozen=True)
class PlanContext:
    """What one agent may do this round, as shown in its prompt."""

    agent: str
    round: int
    n_actions: int
    users: tuple[str, ...]                 # ids listed in the prompt (never the agent itself)
    posts: tuple[int, ...]                 # commentable item ids listed in the prompt
    dms: tuple[tuple[int, str], ...]       # (DM id, author) the agent may reply to
    with_text: bool = True                 # plan and texts in one reply
    text_max: int = TEXT_MAX               # characters per text
    topics: tuple[str, ...] | None = None  # allowed topics; None = any short phrase (new topics)
    ids: str = "enum"                      # "enum": ids as enums; "validate": a schema stable across rounds

    @property
    def post_only(self) -> bool:
        return self.round == 1


def plan_schema(ctx: PlanContext) -> dict:
    if ctx.ids not in ID_MODES:
        raise ValueError(f"ids must be one of {ID_MODES}, got {ctx.ids!r}")
    if ctx.ids == "validate":
        return _stable_plan_schema(ctx)
    text = {"text": {"type": "string", "maxLength": ctx.text_max}} if ctx.with_text else {}
    tone = {"tone": _enum(list(TONES))}
    topic = {"topic": _enum(list(ctx.topics)) if ctx.topics else {"type": "string", "pattern": TOPIC_PATTERN}}
    mention = {"mention": _enum(list(ctx.users), nullable=True)} if ctx.users else {"mention": {"type": "null"}}
    variants = [_obj({"type": _enum(["POST"]), **topic, **mention, **tone, **text})]
    if not ctx.post_only:
        if ctx.posts:
            variants.append(_obj({"type": _enum(["COM"]), "target_id": _enum(list(ctx.posts)),
                                  **mention, **tone, **text}))
        for dm_id, author in ctx.dms:
            variants.append(_obj({"type": _enum(["DM"]), "recipient": _enum([author]),
                                  "target_id": _enum([dm_id]), **topic, **tone, **text}))
        if ctx.users:
            variants.append(_obj({"type": _enum(["DM"]), "recipient": _enum(list(ctx.users)),
                                  "target_id": {"type": "null"}, **topic, **tone, **text}))
        variants.append(_obj({"type": _enum(["NOT"])}))
    return _actions(variants, ctx.n_actions)


def _stable_plan_schema(ctx: PlanContext) -> dict:
    """The same four shapes every round: ids, round 1's POST-only rule and a closed topic list
    are checked after the reply."""
    text = {"text": {"type": "string", "maxLength": ctx.text_max}} if ctx.with_text else {}
    tone = {"tone": _enum(list(TONES))}
    topic = {"topic": {"type": "string", "pattern": TOPIC_PATTERN}}
    mention = {"mention": {"anyOf": [{"type": "string"}, {"type": "null"}]}}
    variants = [_obj({"type": _enum(["POST"]), **topic, **mention, **tone, **text}),
                _obj({"type": _enum(["COM"]), "target_id": {"type": "integer"}, **mention, **tone, **text}),
                _obj({"type": _enum(["DM"]), "recipient": {"type": "string"},
                      "target_id": {"anyOf": [{"type": "integer"}, {"type": "null"}]}, **topic, **tone, **text}),
                _obj({"type": _enum(["NOT"])})]
    return _actions(variants, ctx.n_actions)


def _actions(variants: list[dict], n: int) -> dict:
    item = variants[0] if len(variants) == 1 else {"anyOf": variants}
    return _obj({"actions": {"type": "array", "items": item, "minItems": n, "maxItems": n}})


def check_plan(value: Any, ctx: PlanContext) -> Checked:
    """Validate a plan reply; ``value`` of the result is a list of (slot, env action or None)."""
    if not isinstance(value, dict) or not isinstance(value.get("actions"), list):
        return Checked([], ['the reply must be an object {"actions": [...]}'])
    raw = value["actions"]
    errors = []
    if len(raw) != ctx.n_actions:
        errors.append(f"expected exactly {ctx.n_actions} actions, got {len(raw)}")
    slots = []
    for i, action in enumerate(raw[:ctx.n_actions]):
        try:
            slots.append(_check_action(action, ctx))
        except ValueError as err:
            errors.append(f"action {i + 1}: {err}")
            slots.append(None)
    return Checked(slots, errors)


_KEYS = {"POST": {"type", "topic", "mention", "tone", "text"},
         "COM": {"type", "target_id", "mention", "tone", "text", "topic"},
         "DM": {"type", "recipient", "target_id", "topic", "tone", "text"},
         "NOT": {"type"}}


def _check_action(action: Any, ctx: PlanContext) -> dict:
    if not isinstance(action, dict):
        raise ValueError(f"must be an object, got {type(action).__name__}")
    kind = action.get("type")
    if kind not in _KEYS:
        raise ValueError(f"type must be one of POST, COM, DM, NOT, got {kind!r}")
    if ctx.post_only and kind != "POST":
        raise ValueError(f"round 1 allows only POST, got {kind}")
    extra = set(action) - _KEYS[kind] - {"mention_flag"}
    if extra:
        raise ValueError(f"{kind} does not take {sorted(extra)}")
    if kind == "NOT":
        return {"type": "NOT"}
    out: dict = {"type": kind, "tone": _tone(action.get("tone", "neutral"))}
    text = action.get("text", "")
    if text is None:
        text = ""
    if not isinstance(text, str):
        raise ValueError(f"text must be a string, got {type(text).__name__}")
    out["text"] = text[:ctx.text_max]
    if kind in ("POST", "DM") or action.get("topic") is not None:
        out["topic"] = _topic(action.get("topic"))
        if ctx.topics and out["topic"] not in ctx.topics:
            raise ValueError(f"topic {out['topic']!r} is not one of {list(ctx.topics)}")
    if kind == "COM":
        target = action.get("target_id")
        if not is_int(target, numpy=False) or target not in ctx.posts:
            raise ValueError(f"target_id {target!r} is not one of the listed post ids {list(ctx.posts)}")
        out["target_id"] = int(target)
    if kind in PUBLIC_TYPES:
        mention = action.get("mention")
        if mention is not None and mention not in ctx.users:
            raise ValueError(f"mention {mention!r} is not one of the listed users")
        out["mention"] = mention
    if kind == "DM":
        recipient, target = action.get("recipient"), action.get("target_id")
        if target is None:
            if recipient not in ctx.users:
                raise ValueError(f"recipient {recipient!r} is not one of the listed users")
            out["target_id"] = None
        else:
            authors = dict(ctx.dms)
            if not is_int(target, numpy=False) or target not in authors:
                raise ValueError(f"target_id {target!r} is not one of your DM ids {list(authors)} "
                                 f"(use null for a cold DM)")
            if recipient != authors[target]:
                raise ValueError(f"a reply to DM {target} must go to its author {authors[target]}, "
                                 f"not {recipient!r}")
            out["target_id"] = int(target)
        out["recipient"] = recipient
    return out


def _tone(tone: Any) -> str:
    if tone not in TONES:
        raise ValueError(f"tone must be one of {list(TONES)}, got {tone!r}")
    return tone


def _topic(topic: Any) -> str:
    if not isinstance(topic, str) or not re.match(TOPIC_PATTERN, topic.strip()):
        raise ValueError(f"topic must be a short phrase of letters, digits, spaces, '_' or '-' "
                         f"starting with a letter, got {topic!r}")
    return topic.strip()


# ---------------------------------------------------------------------------- votes
def vote_schema(item_ids: Sequence[int], stances: Sequence[str] | None = None, ids: str = "enum") -> dict:
    """``{"votes": {"<id>": 1|0|-1, ...}}`` (``ids="enum"``: one required key per item) or the
    stable list form ``{"votes": [{"id": int, "vote": 1|0|-1}, ...]}`` (``ids="validate"``),
    plus the agent's current stance when ``stances`` is given (the reflect step)."""
    vote = {"type": "integer", "enum": [1, 0, -1]}
    if ids == "validate":
        votes = {"type": "array", "items": _obj({"id": {"type": "integer"}, "vote": vote})}
    elif ids == "enum":
        votes = _obj({str(i): vote for i in item_ids})
    else:
        raise ValueError(f"ids must be one of {ID_MODES}, got {ids!r}")
    return _obj({"votes": votes, **({"stance": _enum(list(stances))} if stances else {})})


def reflect_schema(stances: Sequence[str]) -> dict:
    return _obj({"stance": _enum(list(stances))})


def check_stance(value: Any, stances: Sequence[str]) -> Checked:
    stance = value.get("stance") if isinstance(value, dict) else None
    if stance not in stances:
        return Checked(None, [f"stance must be one of {list(stances)}, got {stance!r}"])
    return Checked(stance)


def check_vote_reply(value: Any, item_ids: Sequence[int], stances: Sequence[str]) -> Checked:
    """Votes and stance together; ``value`` of the result is ``(votes, stance or None)``."""
    votes = check_votes(value, item_ids)
    stance = check_stance(value, stances)
    return Checked((votes.value, stance.value), votes.errors + stance.errors)


def check_votes(value: Any, item_ids: Sequence[int]) -> Checked:
    """Missing ids count as 0 (specification §1); unknown ids and values outside -1/0/1 are errors."""
    votes = value.get("votes") if isinstance(value, dict) else None
    if isinstance(votes, list):     # the paper's form: [{"id": 42, "vote": 1}, ...]
        try:
            votes = {str(v["id"]): v["vote"] for v in votes}
        except (TypeError, KeyError):
            return Checked({}, ['each vote must be {"id": <item id>, "vote": 1 | 0 | -1}'])
    if not isinstance(votes, dict):
        return Checked({}, ['the reply must be {"votes": {"<id>": 1 | 0 | -1, ...}}'])
    allowed = {str(i): int(i) for i in item_ids}
    out, errors = {}, []
    for key, vote in votes.items():
        if str(key) not in allowed:
            errors.append(f"{key!r} is not one of the item ids {list(item_ids)}")
        elif not is_int(vote, numpy=False) or vote not in (-1, 0, 1):
            errors.append(f"vote on {key} must be 1, 0 or -1, got {vote!r}")
        else:
            out[allowed[str(key)]] = vote
    return Checked(out, errors)


# ---------------------------------------------------------------------------- tie ratings
def tie_schema(peers: Sequence[str]) -> dict:
    rating = _obj({"score": {"type": "integer", "enum": [0, 1, 2, 3, 4, 5]},
                   "reason": {"type": "string", "maxLength": REASON_MAX}})
    return _obj({"ratings": _obj({p: rating for p in peers})})


def check_ties(value: Any, peers: Sequence[str]) -> Checked:
    """``value`` of the result maps peer -> score in 0..5 for the peers rated correctly."""
    ratings = value.get("ratings") if isinstance(value, dict) else None
    if isinstance(ratings, list):   # the paper's form: [{"peer": ..., "score": ..., "reason": ...}]
        try:
            ratings = {r["peer"]: r for r in ratings}
        except (TypeError, KeyError):
            return Checked({}, ['each rating must be {"peer": ..., "score": 0-5, "reason": ...}'])
    if not isinstance(ratings, dict):
        return Checked({}, ['the reply must be {"ratings": {"<peer>": {"score": 0-5, "reason": ...}}}'])
    out, errors = {}, []
    for peer, rating in ratings.items():
        score = rating.get("score") if isinstance(rating, dict) else rating
        if peer not in peers:
            errors.append(f"{peer!r} is not one of your peers {list(peers)}")
        elif not is_int(score, numpy=False) or not 0 <= score <= 5:
            errors.append(f"score for {peer} must be an integer 0-5, got {score!r}")
        else:
            out[peer] = score
    missing = [p for p in peers if p not in out and p not in ratings]
    if missing:
        errors.append(f"no rating for {missing}")
    return Checked(out, errors)


# ---------------------------------------------------------------------------- coach tips
def tips_schema() -> dict:
    return _obj({"tips": {"type": "array", "minItems": 3, "maxItems": 5,
                          "items": {"type": "string", "minLength": 1, "maxLength": TIP_MAX}}})


def check_tips(value: Any) -> Checked:
    tips = value.get("tips") if isinstance(value, dict) else None
    if not isinstance(tips, list) or not all(isinstance(t, str) for t in tips):
        return Checked([], ['the reply must be {"tips": [string, ...]}'])
    tips = [t.strip()[:TIP_MAX] for t in tips if t.strip()]
    if not 3 <= len(tips) <= 5:
        return Checked(tips, [f"give 3 to 5 non-empty tips, got {len(tips)}"])
    return Checked(tips)


# ---------------------------------------------------------------------------- survey
def survey_schema(n_items: int) -> dict:
    answer = {"type": "integer", "enum": [1, 2, 3, 4, 5]}
    return _obj({"answers": _obj({f"q{i + 1}": answer for i in range(n_items)})})


def check_survey(value: Any, n_items: int) -> Checked:
    answers = value.get("answers") if isinstance(value, dict) else None
    if not isinstance(answers, dict):
        return Checked({}, ['the reply must be {"answers": {"q1": 1-5, ...}}'])
    out, errors = {}, []
    for i in range(n_items):
        a = answers.get(f"q{i + 1}")
        if not is_int(a, numpy=False) or not 1 <= a <= 5:
            errors.append(f"q{i + 1} must be an integer 1-5, got {a!r}")
        else:
            out[i] = a
    return Checked(out, errors)


# ---------------------------------------------------------------------------- surveys during a run
def answers_schema(items: Mapping[str, Sequence[int]]) -> dict:
    """``{"answers": {"<item id>": one of the item's values, ...}}``: the numeric items of one
    survey (``socialgym.experiments.run.surveys``), each an integer enum of its scale."""
    return _obj({"answers": _obj({str(k): _enum(list(v)) for k, v in items.items()})})


def check_answers(value: Any, items: Mapping[str, Sequence[int]]) -> Checked:
    """``value`` of the result maps item id -> answer for the items answered correctly; a
    missing, unknown or out-of-scale answer is an error naming the item."""
    answers = value.get("answers") if isinstance(value, dict) else None
    if not isinstance(answers, dict):
        keys = ", ".join(f'"{k}": ...' for k in list(items)[:3])
        return Checked({}, [f'the reply must be {{"answers": {{{keys}}}}} with one integer per question'])
    out, errors = {}, []
    for key, allowed in items.items():
        a = answers.get(key)
        if not is_int(a, numpy=False) or a not in allowed:
            errors.append(f"{key} must be an integer from {min(allowed)} to {max(allowed)}, got {a!r}")
        else:
            out[key] = a
    extra = [k for k in answers if k not in items]
    if extra:
        errors.append(f"{extra[0]!r} is not one of the question ids {list(items)}")
    return Checked(out, errors)
