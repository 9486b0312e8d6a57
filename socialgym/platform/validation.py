"""Checks shared by the environments: seeds, text encodability, and use before ``reset()``."""

from __future__ import annotations

from typing import Any

import numpy as np


class NotResetError(RuntimeError):
    """An environment's state was asked for (``step``, ``tie_matrix``, ``network_metrics``,
    ``observe`` ...) before the first ``reset()`` created it."""

    def __init__(self, env: Any, what: str) -> None:
        super().__init__(f"{type(env).__name__}.{what}: the environment has no state yet; "
                         f"call reset() first")


def check_seed(seed: Any, name: str = "seed") -> int | None:
    """``seed`` as a Python int (or None): any integer >= 0 (Python or numpy; numpy seeds
    any size of non-negative integer). Bools, floats, strings and other objects are a
    TypeError, negative integers a ValueError; both messages name ``name``."""
    if seed is None:
        return None
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"{name} must be None or an integer >= 0, got {type(seed).__name__} {_short(seed)}")
    if seed < 0:
        raise ValueError(f"{name} must be None or an integer >= 0, got {int(seed)}")
    return int(seed)


def utf8_problem(text: str) -> str | None:
    """Why ``text`` cannot be stored as UTF-8 (a lone surrogate such as ``"\\ud800"``, e.g. from
    an escaped JSON string), or None when it can."""
    if text.isascii():
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"not valid UTF-8: {exc.reason} {text[exc.start:exc.end]!r} at character {exc.start}"
    return None


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."
