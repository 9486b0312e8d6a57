"""``LLMClient``: an OpenAI-compatible chat client for agent populations.

Over the official ``openai`` async client, for any OpenAI-compatible server (OpenAI, vLLM,
llama.cpp, Ollama):

- bounded concurrency (one semaphore around every HTTP request);
- retries with exponential backoff on 429, 5xx, timeouts, connection errors and malformed
  200 replies (no JSON, no ``choices[0].message``, content neither text nor null, text UTF-8
  cannot encode); the openai client's own retries are off, so every attempt is counted. A
  request that still fails raises ``LLMError``, which the ``complete_*`` methods turn into an
  error reply (a policy's recorded fallback);
- bounded attempts: ``timeout`` is a deadline for one whole HTTP attempt (connect, send, the
  reply's head and all of its body), not only for each read, so a server that trickles bytes
  cannot hold a request: past the deadline the attempt is a timeout (retried, then ``LLMError``);
  a reply larger than ``max_reply_bytes`` is refused while it is read (at its Content-Length, or
  once that many bytes arrived, or would be decoded from gzip/deflate), never stored whole: a
  failed request naming the cap, not retried; a ``Retry-After`` (429/503) up to
  ``max_retry_wait`` seconds is waited for, a longer one fails the request at once, naming it;
- 401/403 (a wrong or missing API key) raise ``LLMAuthError`` at once, and every later request
  of the client too: a run must stop, not fall back on every request; so does a 404 (an unknown
  model, or no chat endpoint at ``base_url``), as ``LLMModelError``; both are ``LLMFatalError``;
- a dead server is named, not papered over with stand-ins: with ``server_check`` set (the
  embedded model's process watch, set by ``open_client``), a failed connection to a server whose
  process has exited raises ``LLMServerDown`` at once (its signal or exit code, the end of its
  log), and every later request too; ``outage(round)`` says whether every request of a round
  failed to connect (every endpoint down), which the experiment runner turns into the same stop;
- structured output: a JSON schema goes with every request that expects JSON, in the form the
  server takes. ``structured="auto"`` tries ``json_schema`` (OpenAI, vLLM, llama.cpp's server)
  on the first request, and if the server rejects that form, ``json_object`` with a ``schema``
  (llama-cpp-python's server), and then the schema in the prompt only. Only a definite
  rejection downgrades: a 400/422 about the format, or the request-validation error (a 500)
  llama-cpp-python's server answers an unknown ``response_format`` with; other 5xx are
  transient and retried;
- validation of every JSON reply, re-prompting with the error up to ``max_repairs`` times;
- an optional on-disk response cache that replays a run exactly;
- request and token accounting per agent, round and purpose (``client.usage``);
- several servers at once (``endpoints=``): per-agent affinity, binding, a breaker per server
  and failover, in :mod:`socialgym.llm.router` (docs/servers.md).

The API key comes from ``api_key=`` or ``OPENAI_API_KEY``. It is held only by the openai
client object and never appears in ``repr``, ``config()``, the cache, logs or errors: every text
from the server that is kept (errors, usage records, format rejections, transcripts) is
redacted first (``socialgym.llm.sanitize.redact``), since servers echo a wrong key.

All requests run on one event loop in a background thread, so the synchronous policy API
(``policy.act``) works from plain scripts and from notebooks that already run a loop.
"""

from __future__ import annotations

import asyncio
import datetime
import email.utils
import importlib
import json
import os
import random
import threading
import time
import zlib
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Iterable, Mapping, Sequence

from socialgym.llm.cache import ResponseCache, request_key
from socialgym.llm.prompts import REPAIR
from socialgym.llm.errors import LLMAuthError, LLMError, LLMFatalError, LLMModelError, LLMServerDown  # noqa: F401
from socialgym.llm.outage import Reach, no_server
from socialgym.llm.router import Endpoint, EndpointState, RouteContext, Router, client_endpoints, is_loopback  # noqa: F401
from socialgym.llm.sanitize import encodable, one_line, scrub, unencodable_strings
from socialgym.llm.schemas import Checked, parse_json
from socialgym.llm.usage import Call, Usage
from socialgym.platform.validation import check_int, is_int, is_number, show

STRUCTURED_MODES = ("auto", "json_schema", "json_object", "prompt")
_FORMAT_HINTS = ("response_format", "json_schema", "json_object", "schema")
_AUTH_STATUSES = (401, 403)
DEFAULT_MAX_REPLY_BYTES = 4 * 2**20
"""``max_reply_bytes``' default, 4 MiB: a reply of ``max_tokens`` = 512 is a few kB."""


@dataclass
class TextReply:
    """The outcome of a plain-text request: the cleaned text (``""`` on failure) and any error."""

    text: str
    raw: str | None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass
class JSONReply:
    """The outcome of a JSON request: the last validated value (maybe partial) and any error."""

    checked: Checked | None
    raw: str | None
    repairs: int
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.checked is not None and self.checked.ok


class _LoopThread:
    """An event loop running forever in a daemon thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="socialgym-llm", daemon=True)
        self.thread.start()

    def run(self, coro: Awaitable) -> Any:
        if threading.current_thread() is self.thread:
            raise RuntimeError("LLMClient.run() called from its own event loop; await the coroutine instead")
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result()
        except BaseException:          # Ctrl-C in the caller: stop the work in the loop too
            future.cancel()
            raise

    def stop(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()


class LLMClient:
    """See the module docstring. ``cache`` is a path (file or directory) or a ``ResponseCache``.

    ``timeout``: seconds one HTTP attempt may take in all (the openai client's per-read timeout
    too). ``max_reply_bytes``: the largest reply body read (default 4 MiB); a larger one is a
    failed request, not retried. ``max_retry_wait``: the longest ``Retry-After`` waited for, in
    seconds (default 60); a server asking for more fails the request at once.
    ``allow_plain_http``: send a key over plain ``http://`` to a host other than this machine
    (refused by default, a ValueError naming the host).

    ``endpoints``: several servers instead of ``base_url``/``model``/``api_key`` (see
    :mod:`socialgym.llm.router` and docs/servers.md); ``base_url`` and ``model`` then report the
    first one's. ``breaker_failures`` retryable failures in a row take an endpoint out of use for
    ``breaker_cooldown`` seconds; ``max_concurrency`` caps all endpoints together."""

    def __init__(self, base_url: str | None = None, model: str | None = None, api_key: str | None = None, *,
                 endpoints: Sequence[Endpoint | Mapping] | None = None, breaker_failures: int = 3,
                 breaker_cooldown: float = 30.0, max_concurrency: int = 16, timeout: float = 60.0, max_retries: int = 3,
                 temperature: float = 0.7, max_tokens: int = 512, cache: str | os.PathLike | ResponseCache | None = None,
                 structured: str = "auto", max_repairs: int = 3, seed: int | None = None,
                 backoff: float = 0.5, max_backoff: float = 8.0, strict_schema: bool = True,
                 extra_body: dict | None = None, http_backend: str = "auto", local: bool = False,
                 max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES, max_retry_wait: float = 60.0,
                 allow_plain_http: bool = False) -> None:
        if endpoints is None and (not model or not isinstance(model, str)):
            raise ValueError("model must be a non-empty string (the server's model name)")
        if structured not in STRUCTURED_MODES:
            raise ValueError(f"structured must be one of {STRUCTURED_MODES}, got {structured!r}")
        for name, value, low in (("max_concurrency", max_concurrency, 1), ("max_retries", max_retries, 0),
                                 ("max_repairs", max_repairs, 0), ("max_tokens", max_tokens, 1),
                                 ("max_reply_bytes", max_reply_bytes, 1)):
            check_int(name, value, low, numpy=False)
        for name, value in (("timeout", timeout), ("backoff", backoff), ("max_backoff", max_backoff)):
            if not is_number(value, numpy=False) or value <= 0:
                raise ValueError(f"{name} must be a positive number, got {value!r}")
        if not is_number(max_retry_wait, numpy=False) or max_retry_wait < 0:
            raise ValueError(f"max_retry_wait must be a number of seconds >= 0, got {max_retry_wait!r}")
        if http_backend not in ("auto", "httpx", "aiohttp"):
            raise ValueError(f"http_backend must be 'auto', 'httpx' or 'aiohttp', got {http_backend!r}")
        if http_backend == "auto":     # aiohttp scales better with many concurrent requests
            try:
                import aiohttp  # noqa: F401
                http_backend = "aiohttp"
            except ImportError:
                http_backend = "httpx"
        self.http_backend = http_backend
        self.router = Router(client_endpoints(base_url, model, api_key, max_concurrency, endpoints, allow_plain_http),
                             structured=structured, breaker_failures=breaker_failures,
                             breaker_cooldown=breaker_cooldown)
        """Which server serves each request; it alone holds the API keys."""
        self.base_url, self.model = self.router.states[0].base_url, self.router.states[0].model
        self.max_concurrency = max_concurrency
        self.timeout = float(timeout)
        self.max_retries = max_retries
        self.max_reply_bytes = int(max_reply_bytes)
        self.max_retry_wait = float(max_retry_wait)
        self.temperature = float(temperature)
        self.max_tokens = max_tokens
        self.structured = structured
        self.max_repairs = max_repairs
        self.seed = seed
        self.backoff = float(backoff)
        self.max_backoff = float(max_backoff)
        self.strict_schema = strict_schema
        self.extra_body = dict(extra_body or {})
        self.local = bool(local)
        """The model is a local GGUF file (the embedded model, or ``local_server(path)``): small,
        so policies with ``generation="auto"`` plan under a schema and write texts plainly."""
        self.cache = cache if isinstance(cache, ResponseCache) or cache is None else ResponseCache(cache)
        self.usage = Usage()
        self._occurrences: dict[str, int] = {}
        self._jitter = random.Random(0)            # only spreads retry timing; never touches results
        self._loop: _LoopThread | None = None
        self._sem: asyncio.Semaphore | None = None
        self._in_flight = 0
        # (error class, message, status, base_url) once a server refused the key or the model: nothing more is sent
        self._fatal: tuple[type, str, int, str] | None = None
        self.peak_in_flight = 0
        self.transcript: Callable[[dict], None] | None = None
        """Called with every logical request's prompt and reply (the runner's transcripts.jsonl)."""
        self.server_check: Callable[[], str | None] | None = None
        """None while the server's process lives, else why it died (``LocalServer.failure``)."""
        self._reach = Reach()          # per round: requests sent, and those that found no server

    # ------------------------------------------------------------------ lifecycle
    def config(self) -> dict:
        """The client's settings, safe to log (no key)."""
        return {"base_url": self.base_url, "model": self.model, "max_concurrency": self.max_concurrency,
                "timeout": self.timeout, "max_retries": self.max_retries, "temperature": self.temperature,
                "max_tokens": self.max_tokens, "structured": self.structured, "mode": self.mode,
                "max_repairs": self.max_repairs, "seed": self.seed, "local": self.local,
                "max_reply_bytes": self.max_reply_bytes, "max_retry_wait": self.max_retry_wait,
                "cache": str(self.cache.path) if self.cache is not None else None,
                "endpoints": self.router.describe(), "breaker_failures": self.router.breaker_failures,
                "breaker_cooldown": self.router.breaker_cooldown}

    @property
    def mode(self) -> str | None:
        """The structured-output form found (or set) for the first endpoint; each endpoint
        finds its own (``endpoint_stats``, ``config()["endpoints"]``)."""
        return self.router.states[0].mode

    @property
    def format_rejections(self) -> list[str]:
        """What the server said when it refused a form (several endpoints: prefixed by name)."""
        states = self.router.states
        if len(states) == 1:
            return states[0].format_rejections
        return [f"{s.name}: {r}" for s in states for r in s.format_rejections]

    def bind(self, agents: Iterable[str], endpoints: Sequence[str]) -> None:
        """Send ``agents``' requests only to the endpoints named ``endpoints`` (ValueError for an
        unknown name); other agents, and requests without one, may use every endpoint."""
        self.router.bind(agents, endpoints)

    @property
    def route_events(self) -> list[dict]:
        """Every failover and breaker change so far (plain dicts; see socialgym.llm.router)."""
        return self.router.events

    @property
    def on_route_event(self) -> Callable[[dict], None] | None:
        """Called with each new route event (the runner writes them to a file)."""
        return self.router.on_event

    @on_route_event.setter
    def on_route_event(self, callback: Callable[[dict], None] | None) -> None:
        self.router.on_event = callback

    def endpoint_stats(self) -> dict[str, dict]:
        """Per endpoint name: requests sent, attempts failed, failovers from it, peak in flight,
        agents assigned, breaker state."""
        return self.router.stats()

    def state_dict(self) -> dict:
        """What a checkpoint needs to continue exactly: the response cache's position (how often
        each request was sent, which picks the cached reply of a repeated request), the usage
        log, the detected structured-output forms, the route events and agents' endpoints."""
        return {"occurrences": dict(self._occurrences), "usage": self.usage, "mode": self.mode,
                "format_rejections": list(self.format_rejections), **self.router.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self._occurrences = dict(state["occurrences"])
        self.usage = state["usage"]
        self.router.load_state_dict(state, restore_modes=self.structured == "auto")

    def __repr__(self) -> str:
        more = f", endpoints={list(self.router.by_name)}" if len(self.router.states) > 1 else ""
        return (f"LLMClient(base_url={self.base_url!r}, model={self.model!r}, "
                f"structured={self.mode or self.structured!r}{more})")

    def run(self, coro: Awaitable) -> Any:
        """Run a coroutine on the client's loop and wait for it (the sync bridge)."""
        if self._loop is None:
            self._loop = _LoopThread()
        return self._loop.run(coro)

    def close(self) -> None:
        if self._loop is not None:
            for state in self.router.states:
                if state.api is not None:
                    try:
                        self._loop.run(state.api.close())
                    except Exception:   # closing a broken connection pool must not hide the real error
                        pass
                    state.api = None
            self._loop.stop()
            self._loop = None
            self._sem = None
        if self.cache is not None:
            self.cache.close()

    def __enter__(self) -> "LLMClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _ensure(self) -> None:
        if self._sem is None:
            import openai   # imported lazily: the core package does not need it

            # the openai client's own defaults (limits, redirects), with the reply-size hook
            make = openai.DefaultAioHttpClient if self.http_backend == "aiohttp" else openai.DefaultAsyncHttpxClient

            def api(base_url: str, key: str) -> Any:
                http = make(timeout=self.timeout, event_hooks={"response": [self._cap_reply]})
                return openai.AsyncOpenAI(base_url=base_url, api_key=key, timeout=self.timeout, max_retries=0,
                                          http_client=http)

            for state in self.router.states:      # each server: its own key, connections, limit, form lock
                state.open_api(api)
                state.sem = asyncio.Semaphore(state.endpoint.max_concurrency)
                state.detect = asyncio.Lock()
            self._sem = asyncio.Semaphore(self.max_concurrency)

    # ------------------------------------------------------------------ requests
    async def chat(self, messages: Sequence[dict], *, schema: dict | None = None, name: str = "reply",
                   agent: str | None = None, round: int | None = None, purpose: str = "chat",
                   max_tokens: int | None = None, seed: int | None = None) -> str:
        """One logical request (cache, then HTTP with retries); returns the reply text. ``seed``
        replaces the client's ``seed`` for this request (sent, and part of the cache key). Raises
        ``LLMError`` when it fails, ``LLMFatalError`` when the server refuses the key or the model.
        The cache key holds the model name(s) of the agent's pool, not the serving endpoint's."""
        max_tokens = max_tokens or self.max_tokens
        if seed is not None and not is_int(seed):
            raise ValueError(f"seed must be an integer or None, got {show(seed)}")
        seed = self.seed if seed is None else int(seed)
        messages = list(messages)
        if unencodable_strings(messages):    # a lone surrogate cannot be sent, hashed or logged
            messages = scrub(messages)
        model = self.router.cache_model(agent)
        payload = {"model": model, "messages": messages, "temperature": self.temperature,
                   "max_tokens": max_tokens, "seed": seed, "schema": schema}
        key = None
        if self.cache is not None:
            base = request_key(payload, 0)
            n = self._occurrences.get(base, 0)
            self._occurrences[base] = n + 1
            key = request_key(payload, n)
            hit = self.cache.get(key)
            if hit is not None:
                self.usage.record(Call(agent, round, purpose, hit[1], hit[2], 0.0, True, 0, True, model=model))
                self._log(agent, round, purpose, messages, hit[0], True)
                return hit[0]
        if self._fatal is not None:               # the key or the model was refused: send nothing more
            self.usage.record(Call(agent, round, purpose, 0, 0, 0.0, False, 0, False, self._fatal[1], model))
            raise self._fatal_exception()
        self._ensure()
        start = time.perf_counter()
        try:
            text, pt, ct, attempts, served = await self._with_retries(
                messages, schema, name, max_tokens, seed, RouteContext(agent, round, purpose))
        except (LLMError, LLMFatalError) as err:
            self.usage.record(Call(agent, round, purpose, 0, 0, time.perf_counter() - start, False,
                                   getattr(err, "attempts", 1), False, str(err), model, getattr(err, "endpoint", None)))
            self._reach.count(round, getattr(err, "unreachable", False), str(err))
            raise
        self._reach.count(round, False)
        self.usage.record(Call(agent, round, purpose, pt, ct, time.perf_counter() - start, False, attempts, True,
                               model=served.model, endpoint=served.name))
        if key is not None:
            self.cache.put(key, text, pt, ct)
        self._log(agent, round, purpose, messages, text, False)
        return text

    def _log(self, agent, round, purpose, messages, reply, cached) -> None:
        if self.transcript is not None:   # always writable as UTF-8, never holding the key
            entry = {"agent": agent, "round": round, "purpose": purpose, "cached": cached,
                     "messages": list(messages), "reply": reply}
            self.transcript(self._safe(entry))

    def _safe(self, value: Any) -> Any:
        """``value`` (a JSON-like record) with lone surrogates replaced and the keys redacted."""
        router = self.router

        def walk(v):
            if isinstance(v, str):
                return router.redact(v) if router.holds_key(v) else v
            if isinstance(v, dict):
                return {k: walk(x) for k, x in v.items()}
            if isinstance(v, (list, tuple)):
                return [walk(x) for x in v]
            return v

        return walk(scrub(value))

    def _clean(self, text: Any, limit: int = 300) -> str:
        """Text from the server, fit to be kept: key redacted, encodable, one line, cut."""
        return one_line(scrub(self.router.redact(text)), limit)

    def outage(self, round: int) -> str | None:
        """Why round ``round`` shows the server gone, or None: the embedded server's process
        exited (``server_check``), or every request the round sent found no server on any endpoint."""
        dead = self.server_check() if self.server_check is not None else None
        return dead or self._reach.outage(round, ", ".join(state.base_url for state in self.router.states))

    def _fatal_exception(self) -> LLMFatalError:
        cls, message, status, base_url = self._fatal
        return cls(message, status=status, base_url=base_url)

    async def complete_json(self, messages: Sequence[dict], schema: dict, check: Callable[[Any], Checked], *,
                            name: str = "reply", agent: str | None = None, round: int | None = None,
                            purpose: str = "json", max_tokens: int | None = None,
                            repair: str = REPAIR, seed: int | None = None) -> JSONReply:
        """Ask for JSON matching ``schema``; validate with ``check``; re-prompt with the error
        (the re-prompts go with the same ``seed``, see :meth:`chat`)."""
        messages = list(messages)
        best: Checked | None = None
        raw = None
        for attempt in range(self.max_repairs + 1):
            try:
                raw = await self.chat(messages, schema=schema, name=name, agent=agent, round=round,
                                      purpose=purpose, max_tokens=max_tokens, seed=seed)
            except LLMError as err:          # (an LLMFatalError is not one: it ends the run)
                return JSONReply(best, None, attempt, f"request failed: {err}")
            try:
                checked = check(parse_json(raw))
            except ValueError as err:
                checked = Checked(None, [str(err)])
            if checked.ok:
                return JSONReply(checked, raw, attempt)
            if checked.value is not None:
                best = checked
            if attempt == self.max_repairs:
                error = "; ".join(checked.errors)
                return JSONReply(best, raw, attempt,
                                 f"invalid after {self.max_repairs} re-prompts: {error}")
            self.usage.record_repair()
            messages += [{"role": "assistant", "content": raw},
                         {"role": "user", "content": repair.format(error="; ".join(checked.errors))}]
        raise AssertionError("unreachable")

    async def complete_text(self, messages: Sequence[dict], *, clean: Callable[[str], str] | None = None,
                            agent: str | None = None, round: int | None = None, purpose: str = "text",
                            max_tokens: int | None = None, allow_empty: bool = False,
                            seed: int | None = None) -> TextReply:
        """Ask for plain text (no schema); ``clean`` turns the reply into the usable text. A failed
        request, or (unless ``allow_empty``) a reply with nothing usable in it, gives
        ``TextReply("", raw, error)``."""
        try:
            raw = await self.chat(messages, name=purpose, agent=agent, round=round, purpose=purpose,
                                  max_tokens=max_tokens, seed=seed)
        except LLMError as err:
            return TextReply("", None, f"request failed: {err}")
        text = clean(raw) if clean is not None else raw.strip()
        if not text and not allow_empty:
            return TextReply("", raw, f"no usable text in the reply {raw[:80]!r}")
        return TextReply(text, raw)

    # ------------------------------------------------------------------ internals
    async def _attempt(self, ep: EndpointState, messages, schema, name, max_tokens, seed):
        """One HTTP attempt on ``ep`` in its structured-output form. The first structured request
        to each server finds that form: only a definite rejection moves on to the next one, and
        a form refused once stays refused (the error of any other failure is raised)."""
        import openai

        if schema is None or ep.mode is not None:
            return await self._post(ep, messages, schema, name, max_tokens, ep.mode or "prompt", seed)
        async with ep.detect:
            if ep.mode is None:
                refused = {r.split(":", 1)[0] for r in ep.format_rejections}
                for mode in [m for m in ("json_schema", "json_object") if m not in refused] + ["prompt"]:
                    try:
                        result = await self._post(ep, messages, schema, name, max_tokens, mode, seed)
                    except openai.APIStatusError as err:
                        detail = self._describe(err)
                        if mode == "prompt" or not _format_rejected(err.status_code, detail):
                            raise
                        ep.format_rejections.append(f"{mode}: {detail}")
                        continue
                    ep.mode = mode
                    return result
        # the form was found while this request waited: send it outside the lock
        return await self._post(ep, messages, schema, name, max_tokens, ep.mode, seed)

    async def _with_retries(self, messages, schema, name, max_tokens, seed, route: RouteContext):
        """(text, prompt tokens, completion tokens, attempts, the endpoint that answered). A
        retryable failure moves to another healthy endpoint of the pool at once (not counted
        against ``max_retries``); with none, it is retried with backoff as with one server."""
        import openai

        attempts = failovers = 0
        while True:
            if self._fatal is not None:            # another request found the key or model refused
                raise self._fatal_exception()
            ep = self.router.take(route)
            attempts += 1
            final = False               # a reply too large: the next attempt would get the same
            unreachable = False         # no server to connect to (refused, reset; not a timeout)
            try:
                text, pt, ct = await self._attempt(ep, messages, schema, name, max_tokens, seed)
            except openai.APIStatusError as err:
                status, detail, delay = err.status_code, self._describe(err), _retry_after(err)
            except (openai.APITimeoutError, openai.APIConnectionError) as err:
                status, detail, delay = None, self._clean(f"{type(err).__name__}: {err}{_root_cause(err)}"), None
                unreachable = no_server(err)
            except (_BadReply, _Deadline) as err:
                status, detail, delay = None, str(err), None
            except _ReplyTooLarge as err:
                status, detail, delay, final = None, str(err), None, True
            except BaseException:                  # cancelled: a half-open trial is let go
                self.router.abandon(ep, route)
                raise
            else:
                self.router.answered(ep, route)
                return text, pt, ct, attempts, ep
            finally:
                ep.pending -= 1
            # decided outside the except clauses: no exception raised here carries the openai
            # error (and the server's unredacted body) as its context
            if unreachable and self.server_check is not None:
                dead = self.server_check()
                if dead is not None:           # the process is gone: no retry can reach it
                    self._fatal = (LLMServerDown, dead, None, ep.base_url)
                    raise self._fatal_exception()
            retryable = not final and (status is None or status in (408, 409, 429) or status >= 500)
            if not retryable:                      # the server answered: it is up
                self.router.answered(ep, route)
            if status in _AUTH_STATUSES:
                self._fatal = (LLMAuthError, self._auth_message(status, detail, ep), status, ep.base_url)
                raise self._fatal_exception()
            if status == 404:
                self._fatal = (LLMModelError, self._not_found_message(detail, ep), status, ep.base_url)
                raise self._fatal_exception()
            if status is not None and ep.mode not in (None, "prompt") and schema is not None \
                    and _format_rejected(status, detail):
                raise _failed(f"the server rejected response_format {ep.mode!r}: {detail}", attempts, ep)
            if retryable:
                self.router.failed(ep, route, detail)
                if self.router.failover(ep, route, detail) is not None:
                    failovers += 1
                    continue
            if not retryable or attempts - failovers > self.max_retries:
                raise _failed(f"{detail} (after {attempts} attempt(s))", attempts, ep, unreachable)
            if delay is not None and delay > self.max_retry_wait:     # say so rather than stall the run
                raise _failed(f"{detail}: the server asked to wait {delay:g} s before retrying (Retry-After), "
                              f"more than max_retry_wait={self.max_retry_wait:g} s; not retried "
                              f"(after {attempts} attempt(s))", attempts, ep)
            if delay is None:
                delay = min(self.max_backoff, self.backoff * 2 ** (attempts - failovers - 1))
                delay *= 0.5 + self._jitter.random()
            await asyncio.sleep(delay)

    def _where(self, ep: EndpointState) -> str:
        named = f" (endpoint {ep.name})" if len(self.router.states) > 1 else ""
        return f"the LLM server at {ep.base_url}{named}"

    def _auth_message(self, status: int, detail: str, ep: EndpointState) -> str:
        what = "refused the API key" if status == 401 else "refused access with this API key"
        return (f"{self._where(ep)} {what} ({detail}): check the API key "
                "(llm.api_key_env, default OPENAI_API_KEY, or llm.api_key); the run stops here "
                "instead of falling back on every request")

    def _not_found_message(self, detail: str, ep: EndpointState) -> str:
        what = (f"does not serve the model {ep.model!r}" if "model" in detail.lower()
                else "answered 404 Not Found to a chat completion")
        hint = ("check llm.model (the server's /v1/models lists what it serves)" if "model" in detail.lower()
                else "check llm.base_url (an OpenAI-compatible server's usually ends in /v1) and llm.model")
        return f"{self._where(ep)} {what} ({detail}): {hint}; the run stops here instead of falling back on every request"

    def _describe(self, err) -> str:
        body = err.body
        if isinstance(body, dict):
            body = body.get("error", body)
            if isinstance(body, dict):       # OpenAI's {"error": {"message"}}, FastAPI's {"detail"}
                body = body.get("message", body.get("detail", body))
        return f"HTTP {err.status_code}: {self._clean(body if body is not None else err.message)}"

    async def _post(self, ep: EndpointState, messages, schema, name, max_tokens, mode, seed):
        import openai

        kwargs: dict = {"model": ep.model, "messages": list(messages), "temperature": self.temperature,
                        "max_tokens": max_tokens}
        if seed is not None:
            kwargs["seed"] = seed
        if schema is not None and mode == "json_schema":
            kwargs["response_format"] = {"type": "json_schema", "json_schema": {
                "name": name, "schema": schema, "strict": self.strict_schema}}
        elif schema is not None and mode == "json_object":
            kwargs["response_format"] = {"type": "json_object", "schema": schema}
        elif schema is not None:        # "prompt": the server takes no schema, so the model reads it
            last = dict(kwargs["messages"][-1])
            last["content"] = f"{last['content']}\nYour JSON must match this schema: {json.dumps(schema)}"
            kwargs["messages"][-1] = last
        kwargs.update(self.extra_body)
        unreadable = late = None
        async with ep.sem, self._sem:          # the endpoint's limit, then the client's
            if self._fatal is not None:        # refused while this request waited: send nothing
                raise self._fatal_exception()
            self._in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self._in_flight)
            ep.begin()
            try:
                # the client's documented low-level post: our body is plain JSON already, and the
                # typed create() would spend ~1 ms per request re-walking messages and schema.
                # httpx's timeout bounds each read; the whole attempt gets ``timeout`` in all
                response = await _within(self.timeout, ep.api.post("/chat/completions", body=kwargs, cast_to=dict))
            except (openai.APIStatusError, openai.APIConnectionError, _ReplyTooLarge):
                raise
            except asyncio.TimeoutError:
                late = f"timed out: no complete reply within the timeout of {self.timeout:g} s (one attempt's deadline)"
            except Exception as err:   # e.g. a 200 whose body is no JSON (or no UTF-8): a failed attempt
                unreadable = f"{type(err).__name__}: {err}"
            finally:
                self._in_flight -= 1
                ep.end()
        if late is not None:
            raise _Deadline(late)
        if unreadable is not None:
            raise _BadReply(f"no readable reply from the server ({self._clean(unreadable, 200)})")
        return self._read_reply(response)

    async def _cap_reply(self, response: Any) -> None:
        """The HTTP client's response hook, before the body is read: a reply whose Content-Length
        is above ``max_reply_bytes`` is refused unread; any other reads its body through a
        :class:`_CappedStream`, which stops at the cap."""
        cap = self.max_reply_bytes
        announced = response.headers.get("content-length", "")
        if announced.strip().isdigit() and int(announced) > cap:
            raise _ReplyTooLarge(f"the server's reply (HTTP {response.status_code}) is {int(announced)} bytes "
                                 f"(Content-Length), more than max_reply_bytes={cap}; refused unread")
        base = importlib.import_module(type(response).__module__.partition(".")[0]).AsyncByteStream
        if base not in _CAPPED_TYPES:        # httpx's stream class (httpx or httpx2, as openai uses)
            _CAPPED_TYPES[base] = type("CappedStream", (_CappedStream, base), {})
        encoding = response.headers.get("content-encoding", "").strip().lower()
        response.stream = _CAPPED_TYPES[base](response.stream, cap, response.status_code, encoding)

    def _read_reply(self, response: Any) -> tuple[str, int, int]:
        """(text, prompt_tokens, completion_tokens) of a 200 reply; ``_BadReply`` when it is not
        a chat completion. Token counts that are missing or malformed count as 0."""
        choices = response.get("choices") if isinstance(response, dict) else None
        first = choices[0] if isinstance(choices, list) and choices else None
        message = first.get("message") if isinstance(first, dict) else None
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(message, dict) or not (content is None or isinstance(content, str)):
            raise _BadReply(f"the server's reply has no text in choices[0].message.content: "
                            f"{self._clean(_short(response), 200)}")
        text = self.router.strip_keys(content or "")     # a server that echoes a key into the reply itself
        if not encodable(text):
            raise _BadReply("the server's reply text cannot be encoded as UTF-8 (it holds a lone "
                            "surrogate such as \\ud800)")
        usage = response.get("usage")
        return text, _tokens(usage, "prompt_tokens"), _tokens(usage, "completion_tokens")


class _BadReply(Exception):
    """A 200 reply that is not a usable chat completion: a failed attempt, retried."""


class _Deadline(Exception):
    """An attempt that outlasted ``timeout`` in all (a slow or trickling server): retried."""


class _ReplyTooLarge(Exception):
    """A reply larger than ``max_reply_bytes``: a failed attempt, not retried. Raised inside the
    HTTP client (its response hook or body stream), which then drops the connection."""


_CAPPED_TYPES: dict[type, type] = {}


class _CappedStream:
    """A reply body that raises ``_ReplyTooLarge`` as soon as more than ``cap`` bytes arrived,
    or (gzip/deflate) would be decoded: the decoded size is counted in bounded pieces, never
    kept, so a small compressed body cannot expand past the cap either. Mixed into the HTTP
    library's ``AsyncByteStream`` (see ``LLMClient._cap_reply``)."""

    def __init__(self, stream: Any, cap: int, status: int, encoding: str) -> None:
        self._stream, self._cap, self._status = stream, cap, status
        self._inflate = zlib.decompressobj(32 + zlib.MAX_WBITS) if encoding in ("gzip", "deflate") else None
        self.received = self.decoded = 0

    async def __aiter__(self):
        chunks = self._stream.__aiter__()
        try:
            async for chunk in chunks:
                self.received += len(chunk)
                if self.received > self._cap or self._decodes_past_cap(chunk):
                    raise _ReplyTooLarge(f"the server's reply (HTTP {self._status}) is larger than max_reply_bytes="
                                         f"{self._cap}: stopped reading after {self.received} bytes"
                                         + (f" ({self.decoded} decoded)" if self._inflate is not None else ""))
                yield chunk
        finally:
            if hasattr(chunks, "aclose"):
                await chunks.aclose()

    def _decodes_past_cap(self, chunk: bytes) -> bool:
        try:
            while chunk and self._inflate is not None:
                self.decoded += len(self._inflate.decompress(chunk, 65536))
                if self.decoded > self._cap:
                    return True
                chunk = self._inflate.unconsumed_tail
        except zlib.error:          # not gzip/zlib after all: the HTTP library reports it; count bytes
            self._inflate = None
        return False

    async def aclose(self) -> None:
        await self._stream.aclose()


def _failed(message: str, attempts: int, ep: EndpointState, unreachable: bool = False) -> LLMError:
    err = LLMError(message)
    err.attempts, err.endpoint = attempts, ep.name
    err.unreachable = unreachable           # the last attempt found no server to connect to
    return err


async def _within(seconds: float, coro: Awaitable) -> Any:
    """``await coro``, or ``TimeoutError`` once ``seconds`` have passed (it is cancelled)."""
    if hasattr(asyncio, "timeout"):           # Python 3.11+: no extra task per request
        async with asyncio.timeout(seconds):
            return await coro
    return await asyncio.wait_for(coro, seconds)


def _root_cause(err: BaseException) -> str:
    """`` (Type: message)`` of the first error behind ``err`` (a refused connection, a DNS
    failure), which the openai client's "Connection error." hides; "" when there is none."""
    root, seen = err, 0
    while (root.__cause__ or root.__context__) is not None and seen < 10:
        root, seen = root.__cause__ or root.__context__, seen + 1
    return f" ({type(root).__name__}: {root})" if root is not err and str(root) else ""


def _short(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False)[:1000]
    except (TypeError, ValueError):
        return repr(value)[:1000]


def _tokens(usage: Any, field: str) -> int:
    """A token count from a reply's ``usage``; 0 (unknown) when missing or not a count."""
    value = usage.get(field) if isinstance(usage, dict) else None
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            return 0
    if not is_number(value, numpy=False) or value < 0 or value >= 2**53:
        return 0                  # >= 2**53: no real count; it would overflow SQLite and float sums
    return int(value)


def _format_rejected(status: int, detail: str) -> bool:
    """Whether an error is the server definitely refusing the ``response_format`` form: a
    400/422 about the format, or the request-validation error that llama-cpp-python's server
    sends as a 500 ("1 validation error: ... response_format.type Input should be ..."). Any
    other 5xx, whatever it says, is transient: retried, never a reason to downgrade for good."""
    text = detail.lower()
    if status in (400, 422):
        return any(hint in text for hint in _FORMAT_HINTS)
    if status == 500:
        return "response_format" in text and ("validation error" in text or "input should be" in text)
    return False


def _retry_after(err) -> float | None:
    """Seconds the server asks to wait: ``Retry-After`` as a number, or as an HTTP date."""
    try:
        header = err.response.headers.get("retry-after")
    except AttributeError:
        return None
    try:
        value = float(header)
    except (TypeError, ValueError):
        try:
            when = email.utils.parsedate_to_datetime(header)
            value = (when - datetime.datetime.now(datetime.timezone.utc)).total_seconds()
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
        value = max(value, 0.0)
    return value if value >= 0 else None      # NaN fails the test too; max_retry_wait bounds the rest
