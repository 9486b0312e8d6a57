"""Constructor parameters checked without building anything: one rule per parameter.

Each recommender and re-ranker class declares its own constructor keywords in ``PARAMS`` (a
dict name -> :class:`Param`; the wrapped ``base`` of a re-ranker is not a parameter). Its
constructor checks the values it is given against its own ``PARAMS`` (:func:`check_own`), and
the classmethod ``check_params(**kwargs)`` (:meth:`socialgym.recommenders.base.Recommender.check_params`)
checks a whole set of keywords — of the class and of its bases — without constructing it
(:func:`check_keywords`): an unknown or missing keyword is a ``TypeError``, a bad value a
:class:`ParamError`. So a config, an intervention and plain Python obey the same rules,
and the matrix-factorisation model's are checked without importing torch.

``PARAM_LIMITS``: upper limits of the parameters that size arrays or loops (the MF model's
``dim``, ``epochs`` ...), enforced by every way of building. :class:`ParamError` and
:func:`check_seed_param` are shared with the policies' ``check_params`` (``LLMPolicy``,
``RandomPolicy``, ``GreedyPolicy``, ``TopicUsers``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from socialgym.config import MAX_FEED_SIZE, MAX_ROUNDS, MAX_TOPICS
from socialgym.platform.validation import check_seed, is_int, is_number, show

PARAM_LIMITS: dict[str, int] = {
    "dim": 4096, "epochs": 1000, "batch_size": 10_000_000, "replay_rounds": MAX_ROUNDS,
    "max_candidates": 1_000_000, "cell_budget": 1_000_000_000, "sample_block": 100_000,
    "max_social_candidates": 1_000_000, "overfetch": 100, "n": MAX_FEED_SIZE,
    "n_head": MAX_TOPICS, "n_tail": MAX_TOPICS, "window": MAX_ROUNDS, "every": MAX_ROUNDS,
    "start_round": MAX_ROUNDS, "candidates": 10_000,
}
"""Upper limits of the recommender and re-ranker parameters that size arrays or loops."""

PHASES = ("act", "vote")


class ParamError(ValueError):
    """A bad parameter value. ``param`` names the parameter (``"dim"``, ``"components"``) and the
    message starts with that name, so a caller can put its own key in front:
    ``f"env.recommender_kwargs.{exc}"``."""

    def __init__(self, param: str, message: str) -> None:
        super().__init__(message)
        self.param = param


@dataclass(frozen=True)
class Param:
    """One constructor keyword's rule.

    kind: ``"int"`` (an integer; a float with an integral value counts, since the constructors
    take ``int(value)``), ``"number"`` (a finite real number) or ``"custom"`` (``check(name,
    value)`` decides). low / low_open: the lower bound (``>`` when ``low_open``); high: the upper
    limit; none_ok: None is allowed (a default meaning "off" or "all"); required: the keyword
    has no default.
    """

    kind: str = "number"
    low: float | None = None
    low_open: bool = False
    high: float | None = None
    none_ok: bool = False
    required: bool = False
    check: Callable[[str, Any], None] | None = None

    def validate(self, name: str, value: Any) -> None:
        """Nothing, or a :class:`ParamError` naming ``name``."""
        if value is None and self.none_ok:
            return
        if self.check is not None:
            self.check(name, value)
            return
        ok = _is_integral(value) if self.kind == "int" else is_number(value)
        if ok and self.low is not None:
            ok = value > self.low if self.low_open else value >= self.low
        if not ok:
            what = "an integer" if self.kind == "int" else "a finite number"
            bound = "" if self.low is None else f" with {name} {'>' if self.low_open else '>='} {_num(self.low)}"
            raise ParamError(name, f"{name} must be {'None or ' if self.none_ok else ''}{what}{bound}, "
                                   f"got {show(value)}")
        if self.high is not None and value > self.high:
            raise ParamError(name, f"{name} must be at most {_num(self.high)}, got {show(value)}")


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def _is_integral(value: Any) -> bool:
    if is_int(value):
        return True
    return (isinstance(value, (float, np.floating)) and math.isfinite(value)
            and float(value).is_integer())


def limited(kind: str, name: str, low: float, **options: Any) -> Param:
    """A :class:`Param` whose upper limit is ``PARAM_LIMITS[name]``."""
    return Param(kind, low=low, high=PARAM_LIMITS[name], **options)


def declared_params(cls: type) -> dict[str, Param] | None:
    """Every keyword ``cls`` and its bases declare (``PARAMS``), bases first; None when some class
    of the hierarchy has its own ``__init__`` without ``PARAMS`` (a user's subclass): its keywords
    are then unknown here."""
    specs: dict[str, Param] = {}
    for klass in reversed(cls.__mro__):
        own = klass.__dict__.get("PARAMS")
        if own is None:
            if "__init__" in klass.__dict__ and klass is not object:
                return None
            continue
        specs.update(own)
    return specs


def check_keywords(cls: type, kwargs: Mapping[str, Any], *, skip: Iterable[str] = ()) -> None:
    """What ``cls(**kwargs)`` would reject about ``kwargs`` (the wrapped recommender of a
    re-ranker aside), without constructing it: a TypeError for an unknown or a missing keyword, a
    :class:`ParamError` for a bad value. ``skip``: keywords the caller checks itself."""
    skip = set(skip)
    specs = declared_params(cls)
    if specs is None:               # a user's subclass: only the values of the keywords declared above it
        for klass in cls.__mro__:
            for name, spec in (klass.__dict__.get("PARAMS") or {}).items():
                if name in kwargs and name not in skip:
                    spec.validate(name, kwargs[name])
        return
    unknown = [k for k in kwargs if k not in specs]
    if unknown:
        own_first = dict.fromkeys(name for klass in cls.__mro__ for name in klass.__dict__.get("PARAMS") or ())
        raise TypeError(f"{cls.__name__}() got an unexpected keyword argument {unknown[0]!r}; "
                        f"allowed: {', '.join(own_first) or 'none'}")
    missing = [k for k, spec in specs.items() if spec.required and k not in kwargs and k not in skip]
    if missing:
        raise TypeError(f"{cls.__name__}() missing required parameter {missing[0]!r}")
    for name, spec in specs.items():
        if name in kwargs and name not in skip:
            spec.validate(name, kwargs[name])


def check_own(cls: type, **values: Any) -> None:
    """The values a constructor of ``cls`` was given, against ``cls``'s own ``PARAMS`` (its bases
    check theirs in their own constructors)."""
    specs = cls.__dict__["PARAMS"]
    for name, value in values.items():
        specs[name].validate(name, value)


# ---------------------------------------------------------------------------------- shared rules
def check_phases(name: str, value: Any) -> None:
    """A re-ranker's ``phases``: a list (or tuple) of ``"act"`` / ``"vote"``."""
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise ParamError(name, f"{name} must be a list among {PHASES}, got {show(value)}")
    if isinstance(value, Iterator):          # one-shot: the constructor reads it once, as it is
        return
    bad = [p for p in value if not isinstance(p, str) or p not in PHASES]
    if bad:
        raise ParamError(name, f"{name} must be among {PHASES}, got {show(bad)}")


def stances_problem(value: Any) -> str | None:
    """Why ``value`` is not one stance label per agent in agent order (a string would be read
    character by character, a set or mapping has no agent order), or None. Every way stances come
    in (the seat, the platform agent, the bridging ranker, the stance penalty) asks this."""
    if isinstance(value, (str, bytes, Mapping, set, frozenset)) or not isinstance(value, Iterable) \
            or (isinstance(value, np.ndarray) and value.ndim != 1):
        return (f"one label per agent, in agent order (a list, tuple or 1-D array), got {type(value).__name__} "
                f"{show(value, 60)}")
    return None


def check_stances(name: str, value: Any) -> None:
    """``StancePenalty``'s ``stances``: one hashable label per agent (None / NaN = unknown)."""
    problem = stances_problem(value)
    if problem:
        raise ParamError(name, f"{name} must be {problem}")
    if isinstance(value, Iterator):
        return
    for i, label in enumerate(value):
        try:
            hash(label)
        except TypeError:
            raise ParamError(name, f"{name}[{i}] must be a label (a string, a number or None), "
                                   f"got {show(label)}") from None


def check_user_mask(name: str, value: Any) -> None:
    """A quota re-ranker's ``users``: one boolean (or 0/1) per agent, True where the viewer's
    feed is re-ranked (None, allowed by the rule itself, means every viewer)."""
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise ParamError(name, f"{name} must be None or a list of one boolean per agent, got {show(value)}")
    if isinstance(value, Iterator):
        return
    for i, flag in enumerate(value):
        if not (isinstance(flag, (bool, np.bool_)) or (is_int(flag) and flag in (0, 1))):
            raise ParamError(name, f"{name}[{i}] must be a boolean (True: re-rank this viewer's feed), "
                                   f"got {show(flag)}")


def check_seed_param(seed: Any, name: str = "seed") -> None:
    """A policy's seed: None or an integer >= 0 (``socialgym.platform.validation.check_seed``),
    as a :class:`ParamError` naming ``name``."""
    try:
        check_seed(seed, name)
    except (TypeError, ValueError) as exc:
        raise ParamError(name, str(exc)) from None


__all__ = ["PARAM_LIMITS", "PHASES", "Param", "ParamError", "check_keywords", "check_own", "check_phases",
           "check_seed_param", "check_stances", "check_user_mask", "declared_params", "limited"]
