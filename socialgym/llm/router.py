"""Several OpenAI-compatible servers behind one ``LLMClient``: endpoints, pools, routing, breakers.

An :class:`Endpoint` names one server (its address, model, key, concurrency and weight). The
client's :class:`Router` decides, per HTTP attempt, which endpoint serves it:

- pools: ``bind(agents, names)`` keeps those agents on the named endpoints; every other request
  may use all of them;
- affinity: an agent's first request assigns it to the healthy endpoint of its pool with the
  fewest agents per unit of weight (ties: fewest requests in flight per weight, then list order),
  and it stays there while that endpoint is healthy (the server's prefix cache keeps its prompt);
  requests without an agent go to the healthy endpoint with the fewest in flight per weight;
- a breaker per endpoint: ``breaker_failures`` retryable failures in a row open it (skipped) for
  ``breaker_cooldown`` seconds; then one trial request is let through (half-open), whose success
  closes it and whose failure opens it again;
- failover: an attempt that fails retryably moves at once to another healthy endpoint of the
  pool (the agent's affinity with it), at most once from each endpoint per request.

Every failover and breaker change is an event (a plain dict) in ``Router.events``, also handed to
``Router.on_event``. The keys stay in this module: events, stats and errors hold none.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import math
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence
from urllib.parse import urlparse

from socialgym.llm.sanitize import one_line, redact
from socialgym.platform.validation import is_int, is_number, show

NO_KEY = "no-key-required"
"""The key sent to a loopback server that needs none (the openai client wants some key)."""


@dataclass(frozen=True)
class Endpoint:
    """One OpenAI-compatible server. ``api_key`` is kept out of ``repr``; without it the key is
    read from the environment variable ``api_key_env``, else ``OPENAI_API_KEY``; a loopback
    server may go without any. ``name`` defaults to ``e<i>``, its place in the client's list."""

    base_url: str
    model: str
    name: str | None = None
    api_key_env: str | None = None
    api_key: str | None = field(default=None, repr=False)
    max_concurrency: int = 16
    weight: float = 1.0
    allow_plain_http: bool = False
    """Send the key over plain ``http://`` to a host that is not this machine (refused by default:
    anyone on the path reads it); for a private network you trust."""

    def __post_init__(self) -> None:
        for field_name in ("base_url", "model"):
            value = getattr(self, field_name)
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"Endpoint {field_name} must be a non-empty string, got {show(value)}")
        for field_name in ("name", "api_key_env"):
            value = getattr(self, field_name)
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise ValueError(f"Endpoint {field_name} must be a non-empty string or None, got {show(value)}")
        if self.api_key is not None and not isinstance(self.api_key, str):
            raise ValueError(f"Endpoint api_key must be a string or None, got a {type(self.api_key).__name__}")
        if not is_int(self.max_concurrency) or self.max_concurrency < 1:
            raise ValueError(f"Endpoint max_concurrency must be an integer >= 1, got {show(self.max_concurrency)}")
        if not is_number(self.weight) or self.weight <= 0 or not math.isfinite(self.weight):
            raise ValueError(f"Endpoint weight must be a finite number > 0, got {show(self.weight)}")
        if not isinstance(self.allow_plain_http, bool):
            raise ValueError(f"Endpoint allow_plain_http must be true or false, got {show(self.allow_plain_http)}")
        object.__setattr__(self, "max_concurrency", int(self.max_concurrency))
        object.__setattr__(self, "weight", float(self.weight))

    @classmethod
    def from_mapping(cls, value: Mapping[str, Any]) -> "Endpoint":
        """An endpoint from a plain mapping with the field names as keys."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(str(k) for k in value if k not in known)
        if unknown:
            raise ValueError(f"unknown endpoint key(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        return cls(**{str(k): v for k, v in value.items()})

    def key(self) -> str:
        """The API key for this server (never logged): ``api_key``, else the variable ``api_key_env``,
        else (no variable named) ``OPENAI_API_KEY``: a named variable that is unset never falls back
        to another server's key. A loopback server may go without one. ValueError when none is found."""
        if self.api_key_env:
            key = self.api_key or os.environ.get(self.api_key_env)
        else:
            key = self.api_key or os.environ.get("OPENAI_API_KEY")
        if key:
            if plain_http_remote(self.base_url) and not self.allow_plain_http:
                raise PlainHttpKeyError(
                    f"endpoint {self.name or self.base_url}: refusing to send an API key over plain http to "
                    f"{urlparse(self.base_url).hostname} ({self.base_url}); use https, or set "
                    "llm.allow_plain_http: true if that network is private and yours")
            return key
        if is_loopback(self.base_url):
            return NO_KEY
        where = f"the environment variable {self.api_key_env}" if self.api_key_env else "OPENAI_API_KEY"
        raise ValueError(f"no API key for endpoint {self.name or self.base_url}: set {where}, or give "
                         f"it api_key (only loopback servers may go without one; base_url is {self.base_url})")


def as_endpoints(endpoints: Iterable[Endpoint | Mapping[str, Any]]) -> tuple[Endpoint, ...]:
    """``endpoints`` as named ``Endpoint``s: mappings converted, the unnamed named ``e<i>`` by
    their place; ValueError for an empty list or a name used twice."""
    if isinstance(endpoints, (str, bytes, Mapping)):
        raise ValueError(f"endpoints must be a list of Endpoint or of mappings, got {show(endpoints)}")
    out = []
    for i, e in enumerate(endpoints):
        if isinstance(e, Mapping):
            e = Endpoint.from_mapping(e)
        elif not isinstance(e, Endpoint):
            raise ValueError(f"endpoints[{i}] must be an Endpoint or a mapping, got {show(e)}")
        out.append(e if e.name is not None else dataclasses.replace(e, name=f"e{i}"))
    if not out:
        raise ValueError("endpoints must name at least one server")
    names = [e.name for e in out]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"endpoint names must be unique; used more than once: {', '.join(twice)}")
    return tuple(out)


def client_endpoints(base_url: str | None, model: str | None, api_key: str | None, max_concurrency: int,
                     endpoints: Iterable[Endpoint | Mapping[str, Any]] | None,
                     allow_plain_http: bool = False) -> tuple[Endpoint, ...]:
    """An ``LLMClient``'s endpoints: ``endpoints``, or the one server ``base_url`` (default
    ``OPENAI_BASE_URL``, else OpenAI's) named "e0", with ``api_key`` or ``OPENAI_API_KEY``.
    ``allow_plain_http`` allows it for every endpoint (see ``Endpoint.allow_plain_http``)."""
    if endpoints is not None:
        if base_url is not None or model is not None or api_key is not None:
            raise ValueError("give either endpoints= or base_url/model/api_key, not both (each Endpoint has "
                             "its own base_url, model and key)")
        found = as_endpoints(endpoints)
        return tuple(dataclasses.replace(e, allow_plain_http=True) for e in found) if allow_plain_http is True \
            else found
    base_url = base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"
    key = api_key or os.environ.get("OPENAI_API_KEY")
    if not key and not is_loopback(base_url):
        raise ValueError("no API key: pass api_key= or set OPENAI_API_KEY "
                         f"(only loopback servers may go without one; base_url is {base_url})")
    return (Endpoint(base_url, model, name="e0", api_key=key, max_concurrency=max_concurrency,
                     allow_plain_http=allow_plain_http),)


class PlainHttpKeyError(ValueError):
    """A key would go over plain http to another machine (``Endpoint.allow_plain_http``)."""


def plain_http_remote(url: str | None) -> bool:
    """Whether ``url`` is plain ``http://`` to a host other than this machine."""
    return urlparse(url or "").scheme.lower() == "http" and not is_loopback(url)


def is_loopback(url: str | None) -> bool:
    """Whether ``url`` names this machine (localhost or a loopback address)."""
    host = urlparse(url or "").hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class EndpointState:
    """One endpoint at run time: its openai client and semaphore (set up by the client on its
    loop), its structured-output form, its load and its breaker."""

    def __init__(self, endpoint: Endpoint, index: int, structured: str) -> None:
        self.endpoint = endpoint
        self.index = index
        self.name: str = endpoint.name
        self.base_url = endpoint.base_url
        self.model = endpoint.model
        self.weight = endpoint.weight
        self._key = endpoint.key()
        self.api: Any = None
        self.sem: Any = None
        self.detect: Any = None
        self.mode: str | None = None if structured == "auto" else structured
        self.format_rejections: list[str] = []     # what this server said when it refused a form
        self.pending = 0          # attempts routed here and not finished (waiting or sending)
        self.in_flight = 0        # attempts being sent (inside the semaphores)
        self.peak_in_flight = 0
        self.agents = 0           # agents whose affinity is here
        self.sent = 0
        self.failed = 0
        self.failovers = 0
        self.state = "closed"
        self.failures = 0         # retryable failures in a row
        self.opened_at = 0.0

    def open_api(self, make: Callable[[str, str], Any]) -> None:
        """Create the openai client with ``make(base_url, key)`` (the key is handed over only here)."""
        self.api = make(self.base_url, self._key)

    def begin(self) -> None:
        self.sent += 1
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)

    def end(self) -> None:
        self.in_flight -= 1

    def __repr__(self) -> str:
        return f"EndpointState(name={self.name!r}, base_url={self.base_url!r}, model={self.model!r}, state={self.state!r})"


@dataclass
class RouteContext:
    """One logical request as the router sees it."""

    agent: str | None
    round: int | None = None
    purpose: str = "chat"
    failed_from: set = field(default_factory=set)    # endpoints already failed over from
    next: EndpointState | None = None                # the failover target of the next attempt
    trial: EndpointState | None = None               # the endpoint this request is the half-open trial of


class Router:
    """Which endpoint serves each attempt; see the module docstring. Runs on the client's loop
    (``take`` and the outcome calls never await), so its counts need no lock."""

    def __init__(self, endpoints: Sequence[Endpoint], *, structured: str = "auto", breaker_failures: int = 3,
                 breaker_cooldown: float = 30.0, clock: Callable[[], float] = time.monotonic) -> None:
        if not is_int(breaker_failures) or breaker_failures < 1:
            raise ValueError(f"breaker_failures must be an integer >= 1, got {show(breaker_failures)}")
        if not is_number(breaker_cooldown) or breaker_cooldown < 0:
            raise ValueError(f"breaker_cooldown must be a number of seconds >= 0, got {show(breaker_cooldown)}")
        self.states = [EndpointState(e, i, structured) for i, e in enumerate(as_endpoints(endpoints))]
        self.by_name = {s.name: s for s in self.states}
        self.breaker_failures = int(breaker_failures)
        self.breaker_cooldown = float(breaker_cooldown)
        self.clock = clock
        self.bindings: dict[str, tuple[str, ...]] = {}
        self.assigned: dict[str, str] = {}
        self.events: list[dict] = []
        self.on_event: Callable[[dict], None] | None = None
        self._keys = tuple(s._key for s in self.states)

    # ---- keys -------------------------------------------------------------------------
    def redact(self, text: Any) -> str:
        """``text`` with every endpoint's key (and anything key-like) masked."""
        return redact(text, *self._keys)

    def holds_key(self, text: str) -> bool:
        return any(k in text for k in self._keys)

    def strip_keys(self, text: str) -> str:
        """``text`` with every key of 8 characters or more replaced by ``***`` (a server echoing
        a key into a reply); other text is left exactly as it is."""
        for key in self._keys:
            if len(key) >= 8 and key in text:
                text = text.replace(key, "***")
        return text

    # ---- pools ------------------------------------------------------------------------
    def bind(self, agents: Iterable[str], names: Sequence[str]) -> None:
        """Send ``agents``' requests only to the endpoints ``names``."""
        if isinstance(names, str):
            names = [names]
        names = tuple(names)
        unknown = [n for n in names if n not in self.by_name]
        if unknown or not names:
            raise ValueError(f"unknown endpoint name(s) {', '.join(map(str, unknown)) or '(none given)'}; "
                             f"known: {', '.join(self.by_name)}")
        if isinstance(agents, str):
            agents = [agents]
        for agent in agents:
            self.bindings[agent] = names

    def pool(self, agent: str | None) -> list[EndpointState]:
        names = self.bindings.get(agent) if agent is not None else None
        return self.states if names is None else [self.by_name[n] for n in names]

    def cache_model(self, agent: str | None) -> str:
        """The model name(s) of ``agent``'s pool, sorted and joined: the cache key's model, the
        same whichever endpoint serves the request."""
        return ",".join(sorted({s.model for s in self.pool(agent)}))

    # ---- choosing ---------------------------------------------------------------------
    def usable(self, s: EndpointState, now: float) -> bool:
        if s.state == "closed":
            return True
        return s.state == "open" and now - s.opened_at >= self.breaker_cooldown

    def take(self, route: RouteContext) -> EndpointState:
        """The endpoint for ``route``'s next attempt, counted as pending (the caller takes the
        count back when the attempt is over)."""
        now = self.clock()
        target, route.next = route.next, None
        if target is None:
            target = self._choose(route.agent, self.pool(route.agent), now)
        if target.state == "open" and now - target.opened_at >= self.breaker_cooldown:
            target.state, route.trial = "half_open", target
            self._event("breaker_half_open", target, route, f"cooldown of {self.breaker_cooldown:g} s over; "
                                                           "one trial request")
        target.pending += 1
        return target

    def _choose(self, agent: str | None, pool: list[EndpointState], now: float) -> EndpointState:
        usable = [s for s in pool if self.usable(s, now)]
        if agent is None:
            return min(usable or pool, key=lambda s: (s.pending / s.weight, s.index))
        current = self.by_name.get(self.assigned.get(agent, ""))
        if current in usable or (not usable and current in pool):
            return current          # affinity; or, nothing healthy, stay and retry as usual
        if not usable:
            return min(pool, key=lambda s: (s.pending / s.weight, s.index))
        best = min(usable, key=lambda s: (s.agents / s.weight, s.pending / s.weight, s.index))
        self._assign(agent, best)
        return best

    def _assign(self, agent: str, target: EndpointState) -> None:
        old = self.by_name.get(self.assigned.get(agent, ""))
        if old is not None:
            old.agents -= 1
        target.agents += 1
        self.assigned[agent] = target.name

    # ---- outcomes ---------------------------------------------------------------------
    def abandon(self, s: EndpointState, route: RouteContext) -> None:
        """The attempt on ``s`` ended without an outcome (cancelled): a trial is let go, and the
        endpoint is open again, ready for the next trial."""
        if route.trial is s:
            route.trial = None
            if s.state == "half_open":          # opened_at stays: the next request may try again
                s.state = "open"
                self._event("breaker_open", s, route, "the trial request was cancelled")

    def answered(self, s: EndpointState, route: RouteContext) -> None:
        """The server answered (a reply, or an error no retry mends): it is alive."""
        s.failures = 0
        if route.trial is s:
            route.trial = None
        if s.state != "closed":
            s.state = "closed"
            self._event("breaker_closed", s, route, "a request succeeded")

    def failed(self, s: EndpointState, route: RouteContext, reason: str) -> None:
        """An attempt on ``s`` failed in a retryable way."""
        s.failed += 1
        s.failures += 1
        if route.trial is s:
            route.trial = None
        if s.state == "half_open" or (s.state == "closed" and s.failures >= self.breaker_failures):
            s.state, s.opened_at = "open", self.clock()
            self._event("breaker_open", s, route, f"{s.failures} failed attempt(s) in a row: {reason}")

    def failover(self, s: EndpointState, route: RouteContext, reason: str) -> EndpointState | None:
        """Another healthy endpoint of the pool for the next attempt, or None (none is, or this
        request already failed over from ``s``). The agent's affinity moves with it."""
        if s.name in route.failed_from:
            return None
        now = self.clock()
        others = [o for o in self.pool(route.agent) if o is not s and self.usable(o, now)]
        if not others:
            return None
        route.failed_from.add(s.name)
        tried = route.failed_from              # endpoints this request has not failed on come first
        if route.agent is None:
            target = min(others, key=lambda o: (o.name in tried, o.pending / o.weight, o.index))
        else:
            target = min(others, key=lambda o: (o.name in tried, o.agents / o.weight, o.pending / o.weight, o.index))
            self._assign(route.agent, target)
        s.failovers += 1
        route.next = target
        self._event("failover", s, route, reason, to=target.name)
        return target

    def _event(self, kind: str, s: EndpointState, route: RouteContext, reason: str, to: str | None = None) -> None:
        event = {"time": time.time(), "kind": kind, "endpoint": s.name, "to": to, "agent": route.agent,
                 "round": route.round, "purpose": route.purpose, "reason": one_line(self.redact(reason), 300)}
        self.events.append(event)
        if self.on_event is not None:
            self.on_event(dict(event))

    # ---- reporting and checkpoints ------------------------------------------------------
    def stats(self) -> dict[str, dict]:
        return {s.name: {"base_url": s.base_url, "model": s.model, "weight": s.weight, "requests": s.sent,
                         "failed": s.failed, "failovers": s.failovers, "peak_in_flight": s.peak_in_flight,
                         "agents": s.agents, "state": s.state} for s in self.states}

    def describe(self) -> list[dict]:
        """The endpoints' settings, safe to log (no key)."""
        return [{"name": s.name, "base_url": s.base_url, "model": s.model, "api_key_env": s.endpoint.api_key_env,
                 "max_concurrency": s.endpoint.max_concurrency, "weight": s.weight, "mode": s.mode}
                for s in self.states]

    def state_dict(self) -> dict:
        """The route events, the agents' endpoints and each endpoint's structured-output form."""
        return {"route_events": [dict(e) for e in self.events], "assigned": dict(self.assigned),
                "endpoint_modes": {s.name: {"mode": s.mode, "format_rejections": list(s.format_rejections)}
                                   for s in self.states}}

    def load_state_dict(self, state: Mapping, *, restore_modes: bool) -> None:
        """Continue from ``state`` (a client's ``state_dict``). A checkpoint from before there
        were endpoints holds one ``mode``: the first endpoint's."""
        self.events = [dict(e) for e in state.get("route_events", [])]
        for s in self.states:
            s.agents = 0
        self.assigned = {}
        for agent, name in state.get("assigned", {}).items():
            if name in self.by_name:
                self._assign(agent, self.by_name[name])
        modes = state.get("endpoint_modes")
        if modes is None:
            modes = {self.states[0].name: {"mode": state.get("mode"),
                                           "format_rejections": state.get("format_rejections", [])}}
        for name, saved in modes.items():
            if name in self.by_name:
                if restore_modes:
                    self.by_name[name].mode = saved["mode"]
                self.by_name[name].format_rejections = list(saved["format_rejections"])
