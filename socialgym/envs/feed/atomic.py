"""Atomic steps of the feed environment: a step either completes or leaves the env exactly as it was.

A mixin of :class:`socialgym.envs.feed.env.FeedEnv`: ``_atomic_step`` wraps a step, takes a
snapshot before it (``_snapshot``) and restores it on any exception (``_restore``).
"""

from __future__ import annotations

import contextlib
import copy
import gc

# Attributes a step rebinds (never writes in place), restored by reference when a step fails.
_STEP_ATTRS = ("round", "phase", "agents", "_feed", "_vote_items", "_inbox", "_inbox_ids", "_inbox_ptr",
               "_prev_dm_sender", "_prev_dm_recipient", "_last", "_pending", "last_round", "_seen_feed",
               "_seen_any")


class AtomicSteps:
    """Snapshot and rollback of the state a step changes (see the module docstring)."""

    @contextlib.contextmanager
    def _atomic_step(self):
        """A step either completes or leaves the env exactly as it was (restored from a
        snapshot on any exception). The step allocates O(n) small containers and no reference
        cycles, so the cyclic GC is paused meanwhile: its repeated full scans cost much at 100k
        agents."""
        snapshot = self._snapshot()
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            yield
        except BaseException:
            self._restore(snapshot)
            raise
        finally:
            if gc_was_enabled:
                gc.enable()

    def atomic(self):
        """A block of several steps (and feed rebuilds) that either completes or leaves the env as
        it was before the block: ``with env.atomic(): ...`` (the platform tasks' round)."""
        return self._atomic_step()

    def _snapshot(self) -> tuple:
        """What :meth:`_restore` needs to undo a step, taken before it: references to the
        attributes a step rebinds (arrays are never written in place once published), the
        content store's size and this round's vote counters, the vocabulary size, the tie
        tables' arrays, the RNG state, the invalid-action records of a round in its vote phase
        (the vote step adds to them) and a deep copy of the recommender's ``state_dict`` (a
        recommender without ``state_dict``/``load_state_dict``, or whose state cannot be copied,
        keeps whatever it changed). O(this round's items), not O(episode), apart from the
        recommender's state (empty for chronological and random)."""
        votes_from, pending_invalid = None, None
        if self._pending is not None:
            actions, _, invalid = self._pending
            if len(actions.content_id):
                votes_from = int(actions.content_id[0])
            pending_invalid = {k: list(v) for k, v in invalid.items()}
        rec = self.recommender
        rec_state = None
        if callable(getattr(rec, "state_dict", None)) and callable(getattr(rec, "load_state_dict", None)):
            try:
                rec_state = copy.deepcopy(rec.state_dict())
            except Exception:            # noqa: BLE001 - a state that cannot be copied is not rolled back
                rec_state = None
        w, e = self.ties.weights, self.ties.likes_ema
        return ({k: self.__dict__[k] for k in _STEP_ATTRS}, self.rng.bit_generator.state,
                self.content.checkpoint(votes_from), len(self.vocab),
                (w, w.keys, w.values, e, e.keys, e.values),      # PairTable.replace rebinds its arrays
                tuple(self._shown_history), pending_invalid, rec_state)

    def _restore(self, snapshot: tuple) -> None:
        attrs, rng_state, content_mark, n_topics, ties, shown, pending_invalid, rec_state = snapshot
        self.__dict__.update(attrs)
        self.rng.bit_generator.state = rng_state
        self.content.rollback(content_mark)
        self.vocab.truncate(n_topics)
        w, wk, wv, e, ek, ev = ties
        self.ties.weights, self.ties.likes_ema = w, e
        w.keys, w.values, e.keys, e.values = wk, wv, ek, ev
        self._shown_history.clear()
        self._shown_history.extend(shown)
        if pending_invalid is not None:
            invalid = self._pending[2]
            invalid.clear()
            invalid.update(pending_invalid)
        if rec_state is not None:
            self.recommender.load_state_dict(rec_state)
