"""A run's LLM spending: the budget check at every round boundary, the spend in the progress
line and in summary.json, and ``socialgym resume DIR --budget`` (``llm.budget``; the arithmetic is
``socialgym.llm.budget``'s).

Before each round the runner asks :meth:`Spending.check`: when what was spent plus the
prediction of the next round would pass a limit, the run stops there — its checkpoint written,
``summary.json`` saying ``"status": "budget"`` with the reason under ``stopped`` — and
``socialgym resume DIR --budget requests=N,usd=X`` raises the limit (:func:`set_budget`) and
continues. A fork counts only its own rounds (those after the round it was forked at); each job
of a sweep has its own budget.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from socialgym.config import FeedConfig
from socialgym.experiments.define import ConfigError, ExperimentConfig, dump_yaml, from_dict, load_config, thaw, to_dict
from socialgym.experiments.errors import RunError
from socialgym.llm.budget import (Budget, Spend, format_amount, predict_next_round, round_volumes, spend, suggest)
from socialgym.rundir import layout, read_summary, read_sweep

BUDGET_STATUS = "budget"
"""``summary.json``'s status of a run that stopped before a round that would pass its budget."""


@dataclass
class Stop:
    """Why a run stops before round ``before_round``: ``status`` goes to summary.json."""

    status: str
    before_round: int
    message: str = ""
    details: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"reason": self.status, "before_round": self.before_round, **self.details,
                **({"message": self.message} if self.message else {})}


class Spending:
    """The budget and prices of one run (``cfg.llm``), applied to its client's usage log.
    ``first_round`` gives the usage log of a stand-in run of round 1 (the runner's estimate),
    asked for once, when round 1 is next and a budget is set."""

    def __init__(self, cfg: ExperimentConfig, meta: Mapping, out: Path,
                 first_round: Callable[[], Any] | None = None) -> None:
        llm = cfg.llm
        self.budget = Budget.from_mapping(thaw(llm.budget) if llm is not None else None)
        self.prices = thaw(llm.prices) if llm is not None and llm.prices else None
        self.default_model = cfg.default_model()
        fork = meta.get("fork") if isinstance(meta.get("fork"), Mapping) else {}
        self.since = int(fork.get("at_round") or 0)
        self.max_rounds = int(cfg.env.get("max_rounds", FeedConfig.max_rounds))
        self.out = Path(out)
        self.first_round = first_round
        self._first: Spend | None = None

    # ------------------------------------------------------------------ amounts
    def spent(self, usage) -> Spend:
        """What this run sent (a fork: in its own rounds only)."""
        keep = None
        if self.since:
            keep = lambda c: isinstance(c.round, int) and c.round > self.since     # noqa: E731
        return spend(usage, self.prices, default_model=self.default_model, keep=keep)

    def predicted(self, r: int, usage) -> tuple[Spend, str]:
        """The prediction of round ``r``'s spend and what it is based on."""
        nxt = predict_next_round(usage, self.prices, default_model=self.default_model, before=r)
        if nxt is not None:
            return nxt, "the largest round so far"
        if self._first is None:
            self._first = Spend(usd=0.0 if self.prices is not None else None)
            if self.first_round is not None:
                try:
                    rounds = round_volumes(self.first_round(), self.prices, default_model=self.default_model)
                except Exception as exc:        # noqa: BLE001 -- the estimate must not end the run
                    print(f"socialgym: warning: round 1 could not be estimated for the budget check "
                          f"({type(exc).__name__}: {' '.join(str(exc).split())[:200]}); it is not predicted",
                          file=sys.stderr)
                    rounds = {}
                self._first = rounds.get(1, self._first)
        return self._first, "the estimate of round 1"

    # ------------------------------------------------------------------ the check
    def check(self, r: int, usage) -> Stop | None:
        """None when round ``r`` may be played; else why not."""
        if not self.budget or usage is None:
            return None
        spent = self.spent(usage)
        nxt, basis = self.predicted(r, usage)
        if "usd" in self.budget.limits() and (spent.usd is None or nxt.usd is None):
            raise RunError("llm.budget.usd: some requests went to a model without a price in llm.prices "
                           f"(priced: {', '.join(self.prices or {}) or 'none'})")
        key = self.budget.passed_by(spent + nxt)
        if key is None:
            return None
        limit = self.budget.limits()[key]
        left = max(1, self.max_rounds - r + 1)
        enough = spent.get(key) + nxt.get(key) * left
        message = (f"budget: stopped before round {r} of {self.max_rounds}: {format_amount(key, spent.get(key))} spent + "
                   f"{format_amount(key, nxt.get(key))} predicted for round {r} ({basis}) would pass "
                   f"llm.budget.{key} = {format_amount(key, limit)}; continue with `socialgym resume {self.out} "
                   f"--budget {key}={suggest(key, enough)}` ({'the' if left == 1 else 'all'} {left} round"
                   f"{'' if left == 1 else 's'} left at that rate)")
        details = {"limit": key, "budget": self.budget.limits(), "spent": spent.to_dict(),
                   "predicted": nxt.to_dict(), "prediction": basis}
        return Stop(BUDGET_STATUS, r, message, details)

    # ------------------------------------------------------------------ reports
    def summary(self, usage) -> dict:
        """summary.json's ``llm.spent``: requests sent and their tokens (and USD with prices)."""
        return {"spent": self.spent(usage).to_dict()}

    def progress(self, usage) -> str:
        """The progress line's LLM part: requests sent, tokens, USD; against the budget's limits."""
        spent, limits = self.spent(usage), self.budget.limits()

        def part(key: str, text: str) -> str:
            return f"{text}/{_short(key, limits[key])}" if key in limits else text
        text = (f" | LLM {part('requests', str(spent.requests))} req"
                f" {part('prompt_tokens', _short('', spent.prompt_tokens))}+"
                f"{part('completion_tokens', _short('', spent.completion_tokens))} tok")
        if spent.usd is not None:
            text += f" {part('usd', _short('usd', spent.usd))}"
        return text


def _short(key: str, value: float) -> str:
    if key == "usd":
        return f"${value:.2f}" if value >= 0.01 or value == 0 else f"${value:.4f}"
    value = int(value)
    for size, unit in ((10**9, "G"), (10**6, "M"), (10**3, "k")):
        if value >= size:
            return f"{value / size:.1f}{unit}"
    return str(value)


# ---------------------------------------------------------------------------------- resume --budget
def set_budget(run_dir: str | Path, changes: Mapping[str, Any]) -> list[str]:
    """Write the limits in ``changes`` into the config.yaml of a run (or a sweep's, and every job's
    that is not complete), checked as a config. Returns the changed keys (``llm.budget.usd``).
    A checkpointed run accepts the change on resume and records it in run.json's ``config_changes``."""
    root = Path(run_dir)
    paths = [root / layout.CONFIG]
    manifest = read_sweep(root)
    if manifest is not None:
        for job in manifest.get("jobs", []):
            path = root / str(job.get("out", "")) / layout.CONFIG
            if path.is_file() and (read_summary(path.parent) or {}).get("status") != "complete":
                paths.append(path)
    if not paths[0].is_file():
        raise RunError(f"{root} is not a run or sweep directory (no {layout.CONFIG})")
    changed: list[str] = []
    for path in paths:
        changed = _set_budget_file(path, changes) or changed
    return changed


def _set_budget_file(path: Path, changes: Mapping[str, Any]) -> list[str]:
    cfg = load_config(path)
    if not cfg.uses_llm():
        raise ConfigError(f"--budget: {path} makes no LLM requests (no llm or archetype policy, no LLM tie scorer)")
    raw = to_dict(cfg, redact=False)
    llm = dict(raw.get("llm") or {})
    old = dict(llm.get("budget") or {})
    llm["budget"] = {**old, **dict(changes)}
    raw["llm"] = llm
    try:
        new = from_dict(raw)
    except ConfigError as exc:
        raise ConfigError(f"--budget: {exc}") from None
    keys = [f"llm.budget.{k}" for k in changes if old.get(k) != changes[k]]
    if keys:
        dump_yaml(new, path)
    return keys


def budget_stops(sweep_dir: str | Path) -> list[dict]:
    """The summaries of a sweep's jobs that stopped for their budget."""
    root = Path(sweep_dir)
    found = []
    for job in (read_sweep(root) or {}).get("jobs", []):
        summary = read_summary(root / str(job.get("out", ""))) or {}
        if summary.get("status") == BUDGET_STATUS:
            found.append(summary)
    return found


# ---------------------------------------------------------------------------------- the progress line
class Progress:
    """One status line: round, agents, LLM requests, tokens and USD so far (against the budget
    when one is set), mean reward, ties. Redrawn in place on a terminal, one line per round
    otherwise (logs, CI)."""

    def __init__(self, enabled: bool, rounds: int, agents: int, spending: Spending | None = None) -> None:
        self.enabled, self.rounds, self.agents = enabled, rounds, agents
        self.spending = spending
        self.tty = enabled and sys.stderr.isatty()
        self.t0 = time.perf_counter()

    def update(self, r: int, network: Mapping, usage) -> None:
        if not self.enabled:
            return
        width = 20
        filled = int(width * r / max(1, self.rounds))
        llm = self.spending.progress(usage) if usage is not None and self.spending is not None else ""
        line = (f"[{'#' * filled}{'.' * (width - filled)}] round {r}/{self.rounds} | {self.agents} agents{llm} | "
                f"mean reward {network.get('mean_total', float('nan')):.3f} | ties {network.get('n_ties', 0)} | "
                f"{time.perf_counter() - self.t0:.1f}s")
        if self.tty:
            sys.stderr.write("\r" + line)
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()

    def close(self) -> None:
        if self.tty:
            sys.stderr.write("\n")


__all__ = ["BUDGET_STATUS", "Stop", "Spending", "Progress", "set_budget", "budget_stops"]
