"""The platform's action checked against its declared space, ``Box(-1, 1, shape)``, before the seat
ranks by it (``PlatformEnv`` and the ``"platform"`` agent of ``PlatformAgentEnv``).

An action whose values lie outside the box (3e38 is finite in float64 but overflows the float32
feature scores, so every feed would come out empty), holds NaN or an infinity, has the wrong
shape or is no array of real numbers is *invalid*. ``strict``: a one-line ValueError, worded as
the feed environment's invalid actions are ("invalid action of platform, field 'weights': ...",
the value quoted). Lenient: the action is repaired and a record ``{"phase", "slot", "field",
"reason"}`` returned for ``infos["platform"]["invalid"]`` — values outside the box, infinities
included, are clipped into it; an action that cannot be clipped (NaN, wrong shape, not numbers)
is dropped, so the seat ranks as without an action (equal scores: newest first).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from socialgym.platform.validation import show

PLATFORM = "platform"


def _as_array(action: Any) -> np.ndarray | None:
    """``action`` as an ndarray (a torch tensor detached and moved to the CPU), None if it is none."""
    try:
        if type(action).__module__.split(".")[0] == "torch" and callable(getattr(action, "detach", None)):
            action = action.detach().cpu().numpy()
        return np.asarray(action)
    except Exception:               # noqa: BLE001 -- ragged lists, broken __array__: not an array
        return None


def check_platform_action(action: Any, space: spaces.Box, field: str, *, strict: bool,
                          phase: str = "vote") -> tuple[np.ndarray | None, list[dict]]:
    """``(float64 array for the seat, or None for "no action", records)`` (module docstring).
    ``field``: the action form (``"weights"`` / ``"scores"``), named in messages and records."""
    a = _as_array(action)
    low, high = float(space.low.flat[0]), float(space.high.flat[0])
    box = f"Box({low:g}, {high:g}, {space.shape})"
    drop = clip = None
    if a is None or a.dtype.kind not in "biuf":
        drop = f"must be an array of real numbers, got {type(action).__name__} {show(action, 60)}"
    elif a.shape != space.shape:
        drop = f"must have shape {space.shape} (the action space {box}), got shape {a.shape}"
    else:
        a = a.astype(np.float64)
        nan = np.isnan(a)
        outside = ~nan & ((a < low) | (a > high))
        if nan.any():
            at = tuple(int(i) for i in np.argwhere(nan)[0])
            drop = f"entry {list(at)} is nan ({int(nan.sum())} NaN entries); the action space is {box}"
        elif outside.any():
            at = tuple(int(i) for i in np.argwhere(outside)[0])
            clip = (f"entry {list(at)} is {float(a[at])!r}, outside the action space {box} "
                    f"({int(outside.sum())} entries outside [{low:g}, {high:g}])")
    reason = drop or clip
    if reason is None:
        return a, []
    if strict:
        raise ValueError(f"invalid action of {PLATFORM}, field {field!r}: {reason}")
    if drop:
        return None, [{"phase": phase, "slot": None, "field": field,
                       "reason": f"{reason}; ignored (ranked as without an action: newest first)"}]
    return np.clip(a, low, high), [{"phase": phase, "slot": None, "field": field,
                                    "reason": f"{reason}; clipped into [{low:g}, {high:g}]"}]


__all__ = ["PLATFORM", "check_platform_action"]
