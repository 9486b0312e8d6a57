"""Turn-taking functions: who speaks at each user turn of a discussion (paper §3.2).

A turn-taking function picks the next user from the users still allowed to speak, given the
users who spoke at the earlier user turns (moderator turns are not part of this history: with
a moderator present the environment alternates user / moderator turns itself).

``paper`` is eq. 3: the first two speakers are drawn uniformly; afterwards, with probability
0.6 a random user other than the last speaker, and with probability 0.4 the speaker of two
turns ago, which makes the comment chains of real threads (a user answering the reply to
their own comment). Two cases eq. 3 leaves open are settled here: if the speaker of two turns
ago has been banned, the 0.6 branch is taken; if only one user is left, that user speaks.
"""

from __future__ import annotations

from typing import Callable, Protocol, Sequence

import numpy as np

TURN_TAKING = ("paper", "round_robin", "random")


class TurnTaker(Protocol):
    def __call__(self, history: Sequence[int], active: Sequence[int], rng: np.random.Generator) -> int:
        """The index of the next user; ``history`` holds earlier speakers, ``active`` the allowed ones."""


def paper_turn(history: Sequence[int], active: Sequence[int], rng: np.random.Generator,
               p_return: float = 0.4) -> int:
    """Eq. 3 of the paper (``p_return`` = 0.4 is its probability of ``t(i-2)``)."""
    if len(history) < 2:
        return int(active[rng.integers(len(active))])
    previous, before = history[-1], history[-2]
    if rng.random() < p_return and before in active:
        return int(before)
    others = [u for u in active if u != previous]
    if not others:                      # one user left: nobody else can answer
        return int(previous)
    return int(others[rng.integers(len(others))])


def round_robin_turn(history: Sequence[int], active: Sequence[int], rng: np.random.Generator) -> int:
    """Users in index order, then again; banned users are skipped."""
    if not history:
        return int(active[0])
    later = [u for u in active if u > history[-1]]
    return int(later[0] if later else active[0])


def random_turn(history: Sequence[int], active: Sequence[int], rng: np.random.Generator) -> int:
    """Uniform over the active users at every turn (repeats allowed)."""
    return int(active[rng.integers(len(active))])


_BUILTIN: dict[str, TurnTaker] = {"paper": paper_turn, "round_robin": round_robin_turn, "random": random_turn}


def make_turn_taker(spec: str | Callable) -> TurnTaker:
    """A built-in by name (``paper``, ``round_robin``, ``random``) or your own function."""
    if callable(spec):
        return spec
    if spec not in _BUILTIN:
        raise ValueError(f"turn_taking must be one of {TURN_TAKING} or a function "
                         f"(history, active, rng) -> user index; got {spec!r}")
    return _BUILTIN[spec]
