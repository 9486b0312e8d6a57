"""LLM budgets: what a run may spend, what it has spent, and what its next round will cost.

    budget = Budget.from_mapping({"requests": 5000, "usd": 5.0})        # llm.budget
    prices = check_prices({"gpt-4o-mini": {"prompt": 0.15, "completion": 0.6}})   # USD per 1M tokens
    spent = spend(client.usage, prices)          # what was sent: cache hits cost nothing
    nxt = predict_next_round(client.usage, prices)
    limit = budget.passed_by(spent + nxt)        # "requests", "usd", ... or None

**Spend** counts the logical requests that went to a server (a cache hit is free; a request
the client refused to send after the server rejected the key is free too; a request that failed
after its retries counts, with the tokens the server reported: none) and their prompt and
completion tokens as the server reported them. Dollars: each request's tokens at its model's
price (``Call.model``; a call without one is priced as ``default_model``).

**The next round's prediction** is the largest spend of one completed round so far, counting
every request of that round, cached or not (a round replayed from the cache after a resume
would otherwise look cheap): rounds grow as memories and feeds fill, so the largest past round
is a better guess than the mean. It is a prediction, not a bound: a round that grows past the
largest so far (early rounds grow fastest) can take the spend past a limit by that growth.
Before any round was completed there is nothing to go by here; the experiment runner then
simulates round 1 against the estimator's stand-in model
(``socialgym.experiments.run.standin``), whose tokens are characters / 4 (a real tokenizer
counts more: docs/experiments.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import Any, Callable, Iterable, Mapping

from socialgym.platform.validation import is_int, show

BUDGET_KEYS = ("requests", "prompt_tokens", "completion_tokens", "usd")
"""The limits ``llm.budget`` may set; all but ``usd`` are whole numbers."""
PRICE_KEYS = ("prompt", "completion")
"""A model's prices in ``llm.prices``: USD per 1,000,000 prompt / completion tokens."""
TOKENS_PER_PRICE = 1_000_000
MAX_LIMIT = 10**15
"""Largest limit accepted (a budget beyond it is no limit, and floats lose whole numbers)."""


class BudgetError(ValueError):
    """A bad budget or price; the message names the key (``llm.budget.usd``)."""


@dataclass(frozen=True)
class Spend:
    """Requests and tokens, and their price in USD (None: some model has no price)."""

    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    usd: float | None = 0.0

    def __add__(self, other: "Spend") -> "Spend":
        usd = None if self.usd is None or other.usd is None else self.usd + other.usd
        return Spend(self.requests + other.requests, self.prompt_tokens + other.prompt_tokens,
                     self.completion_tokens + other.completion_tokens, usd)

    def times(self, k: float) -> "Spend":
        """This spend ``k`` times over (whole numbers rounded up)."""
        usd = None if self.usd is None else self.usd * k
        return Spend(math.ceil(self.requests * k), math.ceil(self.prompt_tokens * k),
                     math.ceil(self.completion_tokens * k), usd)

    def largest(self, other: "Spend") -> "Spend":
        """Each field's larger value."""
        usd = None if self.usd is None or other.usd is None else max(self.usd, other.usd)
        return Spend(max(self.requests, other.requests), max(self.prompt_tokens, other.prompt_tokens),
                     max(self.completion_tokens, other.completion_tokens), usd)

    def get(self, key: str) -> float | None:
        return getattr(self, key)

    def to_dict(self) -> dict:
        out = {"requests": self.requests, "prompt_tokens": self.prompt_tokens,
               "completion_tokens": self.completion_tokens}
        if self.usd is not None:
            out["usd"] = round(self.usd, 6)
        return out


@dataclass(frozen=True)
class Budget:
    """Upper limits on a run's spend; None: no limit on that quantity."""

    requests: int | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    usd: float | None = None

    @classmethod
    def from_mapping(cls, mapping: Mapping | None, where: str = "llm.budget") -> "Budget":
        """A budget from ``{key: positive number}`` (:data:`BUDGET_KEYS`); a :class:`BudgetError`
        naming the key for anything else."""
        if mapping is None:
            return cls()
        if not isinstance(mapping, Mapping):
            raise BudgetError(f"{where} must be a mapping of limits ({', '.join(BUDGET_KEYS)}), got {show(mapping)}")
        values = {}
        for key, value in mapping.items():
            if key not in BUDGET_KEYS:
                raise BudgetError(f"unknown key {show(f'{where}.{key}')}; allowed in {where}: {', '.join(BUDGET_KEYS)}")
            values[key] = check_limit(f"{where}.{key}", key, value)
        return cls(**values)

    @classmethod
    def parse(cls, text: str, where: str = "--budget") -> dict:
        """``"requests=500,usd=2.5"`` as ``{"requests": 500, "usd": 2.5}`` (checked like
        ``llm.budget``; the keys given, not a whole budget)."""
        if not isinstance(text, str) or not text.strip():
            raise BudgetError(f"{where} expects key=value[,key=value...] with keys {', '.join(BUDGET_KEYS)}, "
                              f"got {show(text)}")
        out: dict[str, Any] = {}
        for part in text.split(","):
            key, sep, value = part.partition("=")
            key = key.strip()
            if not sep or not key:
                raise BudgetError(f"{where}: {show(part.strip())} is not key=value (e.g. {where} requests=500,usd=5)")
            if key not in BUDGET_KEYS:
                raise BudgetError(f"{where}: unknown limit {show(key)}; allowed: {', '.join(BUDGET_KEYS)}")
            if key in out:
                raise BudgetError(f"{where}: {key} is given twice")
            out[key] = check_limit(f"{where} {key}", key, _number(value.strip()))
        return out

    def limits(self) -> dict:
        """The limits that are set, ``{key: value}``."""
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}

    def __bool__(self) -> bool:
        return bool(self.limits())

    def updated(self, changes: Mapping[str, Any]) -> "Budget":
        """This budget with the limits in ``changes`` replaced (others kept)."""
        return replace(self, **dict(changes))

    def passed_by(self, amount: Spend) -> str | None:
        """The first limit (in :data:`BUDGET_KEYS` order) that ``amount`` is above, or None."""
        for key, limit in self.limits().items():
            value = amount.get(key)
            if value is not None and value > limit:
                return key
        return None


def check_limit(where: str, key: str, value: Any) -> int | float:
    """One limit: a positive whole number (``usd``: a positive number) up to :data:`MAX_LIMIT`."""
    if key == "usd":
        ok = not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value) \
            and 0 < value <= MAX_LIMIT
        if not ok:
            raise BudgetError(f"{where} must be a positive number of US dollars, got {show(value)}")
        return float(value)
    if not is_int(value, numpy=False) or not 0 < value <= MAX_LIMIT:
        raise BudgetError(f"{where} must be a positive whole number (at most {MAX_LIMIT:.0e}), got {show(value)}")
    return int(value)


def _number(text: str) -> Any:
    """A number written on the command line (``500``, ``2.5``, ``1e6``), else the text."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        value = float(text)
    except ValueError:
        return text
    return int(value) if math.isfinite(value) and value.is_integer() and "." not in text else value


def check_prices(mapping: Mapping | None, where: str = "llm.prices") -> dict[str, dict[str, float]]:
    """``{model: {prompt: USD per 1M tokens, completion: ...}}``, both prices given, each a
    finite number >= 0; a :class:`BudgetError` naming the key otherwise."""
    if mapping is None:
        return {}
    if not isinstance(mapping, Mapping):
        raise BudgetError(f"{where} must map model names to {{prompt, completion}} prices, got {show(mapping)}")
    out = {}
    for model, price in mapping.items():
        here = f"{where}.{model}"
        if not isinstance(model, str) or not model.strip():
            raise BudgetError(f"{where}: a model name must be a non-empty string, got {show(model)}")
        if not isinstance(price, Mapping):
            raise BudgetError(f"{here} must be {{prompt: USD, completion: USD}} per 1M tokens, got {show(price)}")
        unknown = [k for k in price if k not in PRICE_KEYS]
        if unknown:
            raise BudgetError(f"unknown key {show(f'{here}.{unknown[0]}')}; allowed: {', '.join(PRICE_KEYS)}")
        for key in PRICE_KEYS:
            value = price.get(key)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or not 0 <= value <= MAX_LIMIT:
                raise BudgetError(f"{here}.{key} must be a number >= 0 (USD per 1M tokens), got {show(value)}")
        out[model] = {k: float(price[k]) for k in PRICE_KEYS}
    return out


def cost(prompt_tokens: int, completion_tokens: int, price: Mapping[str, float]) -> float:
    """USD of these tokens at ``price`` (per 1M tokens)."""
    return (prompt_tokens * price["prompt"] + completion_tokens * price["completion"]) / TOKENS_PER_PRICE


def price_of(prices: Mapping, model: str | None) -> Mapping[str, float] | None:
    """The price of ``model``; for a pool of models (a cache hit records the pool's names joined
    by commas: which one first answered is not kept) the price of its dearest member, so a
    budget errs on the safe side; None when a model has no price."""
    if model is None or model in prices:
        return prices.get(model)
    members = [prices.get(m) for m in model.split(",")]
    if "," not in model or any(p is None for p in members):
        return None
    return max(members, key=lambda p: cost(1_000_000, 1_000_000, p))


def was_sent(call: Any) -> bool:
    """Whether a usage record is a request that reached a server (not a cache hit, not refused
    before sending)."""
    return not call.cached and call.attempts > 0


def spend(usage: Any, prices: Mapping | None = None, *, default_model: str | None = None,
          keep: Callable[[Any], bool] | None = None) -> Spend:
    """What the requests in ``usage`` (``client.usage``) that were sent cost; ``keep`` selects
    the records to count (a fork counts only its own rounds). ``usd`` is None when ``prices``
    is None or a model with requests has no price."""
    calls = [c for c in _calls(usage) if was_sent(c) and (keep is None or keep(c))]
    return total(calls, prices, default_model)


def spend_by_model(usage: Any, prices: Mapping | None = None, *, default_model: str | None = None,
                   keep: Callable[[Any], bool] | None = None) -> dict[str, Spend]:
    """:func:`spend`, split by model (``"?"`` for records that name none)."""
    groups: dict[str, list] = {}
    for c in _calls(usage):
        if was_sent(c) and (keep is None or keep(c)):
            groups.setdefault(model_of(c, default_model) or "?", []).append(c)
    return {m: total(calls, prices, default_model) for m, calls in groups.items()}


def total(calls: Iterable[Any], prices: Mapping | None = None, default_model: str | None = None) -> Spend:
    """The spend of these usage records, whatever they are (cached or not)."""
    requests = prompt = completion = 0
    usd: float | None = 0.0 if prices is not None else None
    for c in calls:
        requests += 1
        prompt += c.prompt_tokens
        completion += c.completion_tokens
        if usd is not None and (c.prompt_tokens or c.completion_tokens):     # no tokens: nothing to price
            price = price_of(prices, model_of(c, default_model))
            usd = None if price is None else usd + cost(c.prompt_tokens, c.completion_tokens, price)
    return Spend(requests, prompt, completion, usd)


def round_volumes(usage: Any, prices: Mapping | None = None, *, default_model: str | None = None) -> dict[int, Spend]:
    """Round -> the spend of every request made in it, cached or not (rounds >= 1; requests made
    before round 1, such as the persona survey, belong to no round)."""
    by_round: dict[int, list] = {}
    for c in _calls(usage):
        if isinstance(c.round, int) and c.round >= 1:
            by_round.setdefault(c.round, []).append(c)
    return {r: total(calls, prices, default_model) for r, calls in sorted(by_round.items())}


def predict_next_round(usage: Any, prices: Mapping | None = None, *, default_model: str | None = None,
                       before: int | None = None) -> Spend | None:
    """The largest spend of one round so far (rounds before ``before`` only, when given), or
    None before any round was played. See the module docstring for why the largest."""
    rounds = [s for r, s in round_volumes(usage, prices, default_model=default_model).items()
              if before is None or r < before]
    if not rounds:
        return None
    out = rounds[0]
    for s in rounds[1:]:
        out = out.largest(s)
    return out


def model_of(call: Any, default: str | None = None) -> str | None:
    """The model a usage record was served by (``Call.model``), else ``default``."""
    return getattr(call, "model", None) or default


def _calls(usage: Any) -> list:
    return list(usage.calls)       # a copy: the client's loop thread may append meanwhile


def format_amount(key: str, value: float | None) -> str:
    """A limit or spend for one line of text: ``$1.23``, ``12,345 prompt tokens``, ``80 requests``."""
    if value is None:
        return "?"
    if key == "usd":
        return f"${value:,.4f}" if 0 < value < 0.01 else f"${value:,.2f}"
    return f"{int(value):,} {key.replace('_', ' ')}"


def suggest(key: str, value: float) -> str:
    """A value for ``--budget key=...`` at least ``value``: rounded up to whole requests/tokens or
    to cents."""
    if key == "usd":
        return f"{math.ceil(value * 100) / 100:.2f}"
    return str(math.ceil(value))


__all__ = ["BUDGET_KEYS", "PRICE_KEYS", "BudgetError", "Budget", "Spend", "check_prices", "check_limit", "cost",
           "spend", "total", "round_volumes", "predict_next_round", "model_of", "was_sent", "format_amount",
           "suggest"]
