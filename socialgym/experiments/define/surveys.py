"""Surveys in a config: the instruments, scales and items, and the check of each survey.

In a config, ``surveys:`` is a list of mappings (docs/experiments.md)::

    surveys:
      - instrument: stance                # built-in: mini_ipip | stance | satisfaction | trust
        every: 3                          # or at_round: r; optional from / until
        target: all                       # all | a policy group's name | a list of agent ids
        topic: climate                    # stance only, required: the platform topic of the issue
        issue: action on climate change   # stance only, optional: how the issue is worded
      - name: exit                        # a custom questionnaire: name and items
        at_round: 10
        scale: likert5                    # optional: the scale of items that give none (default likert5)
        items:
          - {id: fair, text: "The feed showed me a fair mix of views.", scale: likert5}
          - {id: rating, text: "How would you rate this platform?", scale: "0-10"}
          - {id: change, text: "What would you change about your feed?", scale: text}

When and whom: :mod:`socialgym.experiments.define.schedule` (``from`` defaults to ``every``).
Who answers and how: :mod:`socialgym.experiments.run.surveys`.
"""

from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

from socialgym.experiments.define.schedule import SCHEDULE_KEYS, check_schedule, check_target, rounds_of
from socialgym.platform.topics import topic_problem
from socialgym.platform.validation import show, utf8_problem

SCALES: dict[str, tuple[int, ...] | None] = {
    "likert5": tuple(range(1, 6)), "0-10": tuple(range(0, 11)), "1-10": tuple(range(1, 11)), "text": None,
}
INSTRUMENTS = ("mini_ipip", "stance", "satisfaction", "trust")
MAX_TEXT_CHARS = 500
"""The longest item text, issue wording or interview question, in characters."""
MAX_ITEMS = 50
"""The most items a custom questionnaire may have."""
MAX_ANSWER_CHARS = 1000
"""The longest free-text answer a hook may give."""
LLM_ANSWER_CHARS = 400
"""An LLM agent's free-text answer is cut to this many characters (and three sentences)."""
_ID = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,39}$")
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,39}$")

# how each scale is explained in a prompt; built-in instruments explain theirs in their own terms
_SCALE_HINTS = {
    "likert5": "1 strongly disagree, 2 disagree, 3 neither agree nor disagree, 4 agree, 5 strongly agree",
    "0-10": "an integer from 0, the lowest, to 10, the highest",
    "1-10": "an integer from 1, the lowest, to 10, the highest",
    "text": "your own words",
}
_INSTRUMENT_HINTS = {
    "mini_ipip": "how well this describes you: 1 very inaccurate, 2 moderately inaccurate, 3 neither, "
                 "4 moderately accurate, 5 very accurate",
    "stance": "1 strongly against, 2 against, 3 neither for nor against, 4 for, 5 strongly for",
    "satisfaction": "1 not satisfied at all, up to 10 completely satisfied",
    "trust": "0 no trust at all, up to 10 complete trust",
}
_SATISFACTION = "How satisfied are you with the posts your feed shows you?"
_TRUST = "How much do you trust the other users of this platform?"
_STANCE = "Where do you stand on {issue}?"


class SurveyError(ValueError):
    """A bad survey; the one-line message names it (``surveys[1].items[0].scale ...``)."""


# ---------------------------------------------------------------------------------- items
def items_of(spec: Mapping, issue: str | None = None) -> list[dict]:
    """The items of a (checked) survey: ``{"id", "text", "scale"}`` dicts in order. ``issue``
    words a stance item (default: the spec's ``issue``, else its ``topic``)."""
    instrument = spec.get("instrument")
    if instrument is None:
        return [{"id": it["id"], "text": it["text"], "scale": it["scale"]} for it in spec["items"]]
    if instrument == "mini_ipip":
        from socialgym.agents.persona import MINI_IPIP
        return [{"id": f"ipip_{i + 1}", "text": text, "scale": "likert5"} for i, (text, _, _) in enumerate(MINI_IPIP)]
    if instrument == "stance":
        wording = issue or spec.get("issue") or spec["topic"]
        return [{"id": "stance", "text": _STANCE.format(issue=wording), "scale": "likert5"}]
    if instrument == "satisfaction":
        return [{"id": "satisfaction", "text": _SATISFACTION, "scale": "1-10"}]
    if instrument == "trust":
        return [{"id": "trust", "text": _TRUST, "scale": "0-10"}]
    raise SurveyError(f"unknown instrument {instrument!r}; one of {', '.join(INSTRUMENTS)}")


def scale_hint(spec: Mapping, scale: str) -> str:
    """How a survey's scale is explained to an LLM agent."""
    return _INSTRUMENT_HINTS.get(spec.get("instrument"), _SCALE_HINTS[scale])


def survey_rounds(spec: Mapping, max_rounds: int) -> list[int]:
    """The rounds after which a (checked) survey is administered."""
    return rounds_of(spec, max_rounds)


# ---------------------------------------------------------------------------------- validation
def check_surveys(raw: Any, *, max_rounds: int | None, agents: Sequence[str],
                  groups: Mapping[str, Sequence[str]] | Sequence[str] = ()) -> list[dict]:
    """Validate the config's ``surveys`` list; returns it normalised (plain dicts: a built-in's
    ``name`` filled in, ``from`` made explicit for ``every``, ``target`` filled in, every item's
    ``scale`` explicit). Checking the result again gives it back unchanged. ``groups``: policy
    group name -> its agent ids (or just the names); ``max_rounds`` None checks no upper bound.
    Raises :class:`SurveyError` with a one-line message naming the key."""
    if raw is None:
        return []
    if isinstance(raw, (str, bytes, Mapping)) or not isinstance(raw, Sequence):
        raise SurveyError(f"surveys must be a list of mappings, got {show(raw)}")
    names = list(groups) if isinstance(groups, Mapping) else list(dict.fromkeys(g for g in groups if g))
    out: list[dict] = []
    seen: dict[str, int] = {}
    for i, spec in enumerate(raw):
        where = f"surveys[{i}]"
        spec = _check_one(spec, where, max_rounds, list(agents), names)
        if spec["name"] in seen:
            raise SurveyError(f"{where}.name {spec['name']!r} is used by surveys[{seen[spec['name']]}] too; "
                              f"survey names must be unique (give each survey its own name)")
        seen[spec["name"]] = i
        out.append(spec)
    return out


def _check_one(spec: Any, where: str, max_rounds: int | None, agents: list[str], groups: list[str]) -> dict:
    if not isinstance(spec, Mapping):
        raise SurveyError(f"{where} must be a mapping (an instrument, or a name and items), got {show(spec)}")
    for key in spec:
        if not isinstance(key, str):
            raise SurveyError(f"{where}: keys must be strings, got {show(key)}")
    instrument = spec.get("instrument")
    if "instrument" in spec and instrument not in INSTRUMENTS:
        raise SurveyError(f"{where}.instrument must be one of {', '.join(INSTRUMENTS)}, got {show(instrument)}")
    if instrument is None:
        allowed = ("name", "items", "scale", *SCHEDULE_KEYS, "target")
        what = "a custom questionnaire"
    else:
        allowed = ("instrument", "name", *SCHEDULE_KEYS, "target")
        allowed += ("topic", "issue") if instrument == "stance" else ()
        what = f"instrument {instrument}"
    for key in spec:
        if key not in allowed:
            raise SurveyError(f"unknown key {where}.{key} for {what}; allowed: {', '.join(allowed)}")
    out: dict = {}
    if instrument is not None:
        out["instrument"] = instrument
    # name
    if "name" in spec:
        name = spec["name"]
        if not isinstance(name, str) or not _NAME.match(name):
            raise SurveyError(f"{where}.name must be a word of at most 40 letters, digits, '_' or '-' starting "
                              f"with a letter, got {show(name)}")
        out["name"] = name
    elif instrument is None:
        raise SurveyError(f"{where}.name is required for a custom questionnaire (one without instrument)")
    else:
        out["name"] = instrument
    # when
    out.update(check_schedule(spec, where, max_rounds, SurveyError, first="every"))
    # whom
    out["target"] = check_target(spec.get("target", "all"), f"{where}.target", agents, groups, SurveyError)
    # what
    if instrument == "stance":
        if "topic" not in spec:
            raise SurveyError(f"{where}.topic is required for instrument stance (the platform topic the issue "
                              f"is about)")
        topic = spec["topic"]
        if not isinstance(topic, str):
            raise SurveyError(f"{where}.topic must be a string, got {show(topic)}")
        problem = topic_problem(topic)
        if problem:
            raise SurveyError(f"{where}.topic: {problem}")
        out["topic"] = topic
        if "issue" in spec:
            out["issue"] = _text(spec["issue"], f"{where}.issue")
    if instrument is None:
        default_scale = spec.get("scale", "likert5")
        if default_scale not in SCALES:
            raise SurveyError(f"{where}.scale must be one of {', '.join(SCALES)}, got {show(default_scale)}")
        out["items"] = _items(spec.get("items"), f"{where}.items", default_scale)
    return out


def _text(value: Any, name: str, limit: int = MAX_TEXT_CHARS) -> str:
    if not isinstance(value, str) or not value.strip():
        raise SurveyError(f"{name} must be a non-empty string, got {show(value)}")
    if len(value) > limit:
        raise SurveyError(f"{name} has {len(value)} characters, more than the {limit} allowed")
    if utf8_problem(value):                                 # e.g. a lone surrogate: no answer could be stored
        raise SurveyError(f"{name}: {utf8_problem(value)}")
    return value


def _items(value: Any, where: str, default_scale: str) -> list[dict]:
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence) or not value:
        raise SurveyError(f"{where} must be a non-empty list of {{id, text, scale}} mappings, got {show(value)}")
    if len(value) > MAX_ITEMS:
        raise SurveyError(f"{where} has {len(value)} items, more than the {MAX_ITEMS} allowed")
    out, seen = [], {}
    for j, item in enumerate(value):
        here = f"{where}[{j}]"
        if not isinstance(item, Mapping):
            raise SurveyError(f"{here} must be a mapping {{id, text, scale}}, got {show(item)}")
        for key in item:
            if key not in ("id", "text", "scale"):
                raise SurveyError(f"unknown key {here}.{key}; allowed: id, text, scale")
        for key in ("id", "text"):
            if key not in item:
                raise SurveyError(f"{here}.{key} is required")
        item_id = item["id"]
        if not isinstance(item_id, str) or not _ID.match(item_id):
            raise SurveyError(f"{here}.id must be a word of at most 40 letters, digits or '_' starting with a "
                              f"letter, got {show(item_id)}")
        if item_id in seen:
            raise SurveyError(f"{here}.id {item_id!r} is used by {where}[{seen[item_id]}] too; item ids must "
                              f"be unique within a survey")
        seen[item_id] = j
        scale = item.get("scale", default_scale)
        if scale not in SCALES:
            raise SurveyError(f"{here}.scale must be one of {', '.join(SCALES)}, got {show(scale)}")
        out.append({"id": item_id, "text": _text(item["text"], f"{here}.text"), "scale": scale})
    return out


__all__ = ["INSTRUMENTS", "SCALES", "SurveyError", "check_surveys", "items_of", "scale_hint", "survey_rounds"]
