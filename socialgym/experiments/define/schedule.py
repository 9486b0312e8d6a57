"""When and to whom a scheduled entry of a config applies: one validator for interventions and
surveys (and one reading of the rounds it gives).

A schedule is ``at_round: r``, or ``every: k`` with ``from`` and ``until`` (default: the run's
last round): the rounds ``from, from + k, ... <= until``. ``from`` defaults to 1 for an
intervention and to ``every`` for a survey (a survey every 5 rounds is first asked after round
5). A target is ``all``, a policy group's name, or a list of distinct agent ids; a policy group
may not take a name a target gives a meaning to (:data:`RESERVED_TARGETS`).

Each check raises the caller's error class (``InterventionError``, ``SurveyError``) with a
one-line message naming the key (``interventions[2].every ...``).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from socialgym.platform.validation import is_int, show

SCHEDULE_KEYS = ("at_round", "every", "from", "until")
RESERVED_TARGETS = {"all": "every agent"}
"""Targets with a meaning of their own, and that meaning; no policy group may be named so."""


def check_schedule(spec: Mapping, where: str, max_rounds: int | None, error: type[Exception], *,
                   first: str = "one") -> dict:
    """The schedule of ``spec`` made explicit (``{"at_round": r}`` or ``{"every": k, "from": f}``
    with ``until`` when given). ``first``: what ``from`` defaults to, ``"one"`` (round 1) or
    ``"every"`` (round ``every``). ``max_rounds`` None checks no upper bound."""
    if "at_round" in spec:
        if any(k in spec for k in ("every", "from", "until")):
            raise error(f"{where}: give at_round or every (with optional from/until), not both")
        return {"at_round": check_round(spec["at_round"], f"{where}.at_round", max_rounds, error)}
    if "every" not in spec:
        raise error(f"{where} needs at_round (or every, with optional from/until)")
    every = spec["every"]
    if not is_int(every, numpy=False) or every < 1:
        raise error(f"{where}.every must be a positive integer, got {show(every)}")
    start = spec.get("from", 1 if first == "one" else every)
    if max_rounds is not None and "from" not in spec and start > max_rounds:
        raise error(f"{where}.every {every} is beyond env.max_rounds ({max_rounds}): it would never apply")
    out = {"every": every, "from": check_round(start, f"{where}.from", max_rounds, error)}
    if "until" in spec:
        out["until"] = check_round(spec["until"], f"{where}.until", max_rounds, error)
        if out["until"] < out["from"]:
            raise error(f"{where}.until ({out['until']}) is before {where}.from ({out['from']})")
    return out


def check_round(value: Any, name: str, max_rounds: int | None, error: type[Exception]) -> int:
    if not is_int(value, numpy=False) or value < 1:
        raise error(f"{name} must be a round number (an integer >= 1), got {show(value)}")
    if max_rounds is not None and value > max_rounds:
        raise error(f"{name} {value} is beyond env.max_rounds ({max_rounds})")
    return value


def check_target(value: Any, name: str, agents: Sequence[str], groups: Sequence[str],
                 error: type[Exception]) -> Any:
    """``all``, a group name (one of ``groups``) or a list of distinct known agent ids."""
    if isinstance(value, str) and value in RESERVED_TARGETS:
        return value
    if isinstance(value, str):
        if value not in groups:
            raise error(f"{name}: unknown group {show(value)}; groups: {', '.join(groups) or 'none defined'} "
                        f"(or give all, or a list of agent ids)")
        return value
    if isinstance(value, Sequence) and not isinstance(value, (bytes, Mapping)) and len(value):
        known, seen = set(agents), set()
        for a in value:
            if not isinstance(a, str) or a not in known:
                span = f"{agents[0]} .. {agents[-1]}" if agents else "none"
                raise error(f"{name}: unknown agent {show(a)} (agents are {span})")
            if a in seen:
                raise error(f"{name} lists {a} twice")
            seen.add(a)
        return list(value)
    raise error(f"{name} must be all, a group name or a non-empty list of agent ids, got {show(value)}")


def rounds_of(spec: Mapping, max_rounds: int) -> list[int]:
    """The rounds at which a (checked) entry applies, ascending."""
    if spec.get("at_round") is not None:
        return [int(spec["at_round"])]
    start, until = int(spec.get("from", 1)), int(spec.get("until", max_rounds))
    return list(range(start, min(until, max_rounds) + 1, int(spec["every"])))


def due(specs: Sequence[Mapping], r: int, max_rounds: int) -> list[Mapping]:
    """The entries that apply at round ``r``, in list order."""
    return [s for s in specs if _applies(s, r, max_rounds)]


def _applies(spec: Mapping, r: int, max_rounds: int) -> bool:
    if spec.get("at_round") is not None:
        return r == int(spec["at_round"])
    start, until = int(spec.get("from", 1)), min(int(spec.get("until", max_rounds)), max_rounds)
    return start <= r <= until and (r - start) % int(spec["every"]) == 0
