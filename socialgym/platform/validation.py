"""Checks shared across the package: scalar settings (integers, finite numbers, ranges), seeds,
text encodability, use before ``reset()``, and how a bad value is quoted in a message.

The scalar checks are the one place that says what counts as an integer (``int``, with
``numpy=True`` numpy's integers too; never a bool) and as a number (a finite ``int`` or
``float``, numpy's with ``numpy=True``; never a bool). Callers whose messages have their own
wording use the predicates :func:`is_int` and :func:`is_number`; the others raise through
:func:`check_int`, :func:`check_finite` and :func:`check_range`.
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

MAX_SHOWN_CHARS = 80
"""Longest value quoted in an error message (cut with "…")."""


class NotResetError(RuntimeError):
    """An environment's state was asked for (``step``, ``tie_matrix``, ``network_metrics``,
    ``observe`` ...) before the first ``reset()`` created it."""

    def __init__(self, env: Any, what: str) -> None:
        super().__init__(f"{type(env).__name__}.{what}: the environment has no state yet; "
                         f"call reset() first")


def show(value: Any, limit: int = MAX_SHOWN_CHARS) -> str:
    """``repr(value)`` on one line (a numpy array's repr spans several), cut to ``limit`` characters
    with "…" (error messages stay one short line)."""
    try:
        text = repr(value)
    except Exception:                            # noqa: BLE001 -- a broken or huge __repr__
        text = f"<{type(value).__name__}>"
    # every line break str.splitlines knows (a custom __repr__ may hold \r or \f), with the indent around it
    text = re.sub(r"\s*[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]\s*", " ", text)
    return text if len(text) <= limit else text[:max(limit - 1, 0)] + "…"


def is_int(value: Any, *, numpy: bool = True) -> bool:
    """Whether ``value`` is an integer: an ``int`` (with ``numpy``, also a numpy integer), not a bool."""
    return not isinstance(value, bool) and isinstance(value, (int, np.integer) if numpy else int)


def is_number(value: Any, *, numpy: bool = True) -> bool:
    """Whether ``value`` is a finite real number: an ``int`` or ``float`` (with ``numpy``, also
    numpy's), not a bool, NaN or an infinity."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating) if numpy
                                                 else (int, float)):
        return False
    return is_int(value) or math.isfinite(value)


def check_int(name: str, value: Any, low: int, high: int | None = None, *, limit: str | None = None,
              numpy: bool = True) -> int:
    """``value`` as an int, or a ValueError "``name`` must be an integer >= low [and <= high
    (limit)], got ..." when it is no integer (:func:`is_int`) or out of range."""
    if not is_int(value, numpy=numpy) or value < low or (high is not None and value > high):
        upper = "" if high is None else f" and <= {high}" + (f" ({limit})" if limit else "")
        raise ValueError(f"{name} must be an integer >= {low}{upper}, got {show(value)}")
    return int(value)


def check_finite(name: str, value: Any, *, numpy: bool = True) -> float:
    """``value`` as a float, or a ValueError "``name`` must be a finite number, got ..."
    when it is no finite number (:func:`is_number`)."""
    if not is_number(value, numpy=numpy):
        raise ValueError(f"{name} must be a finite number, got {show(value)}")
    return float(value)


def check_range(name: str, value: Any, low: float, high: float, *, low_open: bool = False,
                high_open: bool = False) -> float:
    """``value`` as a float in [low, high] — ``(`` / ``)`` with ``low_open`` / ``high_open`` —
    or a ValueError that names ``name`` and the interval."""
    x = check_finite(name, value)
    if not ((x > low if low_open else x >= low) and (x < high if high_open else x <= high)):
        raise ValueError(f"{name} must lie in {'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}, "
                         f"got {show(value)}")
    return x


def check_seed(seed: Any, name: str = "seed") -> int | None:
    """``seed`` as a Python int (or None): any integer >= 0 (Python or numpy; numpy seeds
    any size of non-negative integer). Bools, floats, strings and other objects are a
    TypeError, negative integers a ValueError; both messages name ``name``."""
    if seed is None:
        return None
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"{name} must be None or an integer >= 0, got {type(seed).__name__} {show(seed, 60)}")
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


# Bytes per agent of the state and observation arrays, and per stored action, fitted to the peak
# memory of benchmarks/bench_env.py (step_arrays, 3 actions, feed and vote feed 10, 6 rounds:
# 0.94 GB at 100k agents, 7.6 GB at 1M); docs/benchmarks.md has the measurements.
_BYTES_PER_AGENT = 1_400
_BYTES_PER_SHOWN_SLOT = 110
_BYTES_PER_ACTION = 220


def memory_estimate(n_agents: int, n_actions: int, max_rounds: int, shown_slots: int) -> int:
    """Rough peak bytes of a feed environment stepped through a whole episode with numeric
    observations: per-agent arrays (``shown_slots`` = feed + vote feed + inbox slots per agent)
    plus every stored action (content, mentions, ties) of ``max_rounds`` rounds."""
    per_agent = _BYTES_PER_AGENT + _BYTES_PER_SHOWN_SLOT * shown_slots + _BYTES_PER_ACTION * n_actions * max_rounds
    return int(n_agents) * per_agent


def available_memory() -> int | None:
    """Bytes this machine can still allocate (Linux ``MemAvailable``), or None where unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def check_memory(n_agents: int, n_actions: int, max_rounds: int, shown_slots: int,
                 available: int | None = None) -> None:
    """A MemoryError naming the sizes when :func:`memory_estimate` exceeds the memory available
    (``available``, default :func:`available_memory`), raised before anything is allocated —
    at any number of agents (a small population with a huge horizon or many actions can need
    more than the machine has). Nothing is refused where the available memory is unknown."""
    available = available_memory() if available is None else available
    need = memory_estimate(n_agents, n_actions, max_rounds, shown_slots)
    if available is not None and need > available:
        raise MemoryError(f"n_agents={n_agents:,} with {n_actions} actions over {max_rounds} rounds needs about "
                          f"{need / 1e9:.1f} GB (socialgym.platform.validation.memory_estimate); this machine has "
                          f"{available / 1e9:.1f} GB available. Use fewer agents, actions or rounds.")
