"""A scripted OpenAI-compatible HTTP server on loopback, for tests and overhead benchmarks.

It speaks ``POST /v1/chat/completions`` (and ``GET /v1/models``). By default every reply is a
random instance of the request's JSON schema (so a run "works" as if the model always obeyed
the schema); a ``responder`` function can script anything else: malformed JSON, wrong ids,
HTTP errors, slow replies, malformed completions (a whole body of any JSON value, or raw bytes
that are no JSON at all; odd ``usage`` fields), bodies trickled a few bytes at a time, huge
bodies (sent piece by piece, with or without a Content-Length). It records every request body,
the peak number of requests in flight at once and how many body bytes it got out.

    with FakeServer(latency=0.2) as server:
        client = LLMClient(server.base_url, model="fake", api_key="test")

``deterministic=True`` makes the default reply a pure function of the request (its messages,
schema, seed and max_tokens), through a ``random.Random`` seeded by a SHA-256 of their canonical
JSON: equal requests get byte-equal replies from any number of servers, in any order (a text
request gets a short English sentence picked that way). ``kill()`` stops listening and drops
every open connection at once, from any thread: requests in flight see a connection error, and
later ones are refused; ``kill_after=n`` makes the server kill itself when its n-th request
arrives (that request is dropped too). Several of them stand for a pool of servers, one dying.

Real network code, real HTTP: the openai client cannot tell it from a real server.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

_WORDS = ("great point", "I agree", "interesting", "not sure about this", "thanks for sharing",
          "what do you think", "love this", "good question")
_SENTENCES = ("That is a fair point, and I had not thought of it.", "I read the whole thread and mostly agree.",
              "The numbers here look off to me.", "Thanks for sharing this with everyone.",
              "I would like to see a source for that claim.", "This changed my mind a little.",
              "We keep coming back to the same question.", "Good news for the neighbourhood, I think.")


_DEFAULT = object()


@dataclass
class FakeReply:
    """A scripted answer: ``content`` as the assistant message, or an HTTP error.

    ``body`` replaces the whole response body with any JSON value (sent with ``status``);
    ``raw`` sends these bytes (or this text) verbatim instead, JSON or not, with ``content_type``;
    ``usage`` replaces the completion's ``usage`` (any JSON value; ``None`` sends ``null``).

    How the body goes out (after the head, which is sent at once): ``trickle=(n, pause)`` sends
    it ``n`` bytes at a time, ``pause`` seconds apart (a server that keeps a request alive byte by
    byte); ``repeat`` sends it that many times over, without ever holding the whole (``raw=b"x" *
    2**20, repeat=30``: 30 MiB); ``chunked`` uses ``Transfer-Encoding: chunked`` and sends no
    Content-Length (a body whose size is not announced)."""

    content: str | None = None
    status: int = 200
    error: str = "scripted error"
    delay: float = 0.0
    headers: dict | None = None
    body: Any = _DEFAULT
    raw: bytes | str | None = None
    content_type: str = "application/json"
    usage: Any = _DEFAULT
    trickle: tuple[int, float] | None = None
    repeat: int = 1
    chunked: bool = False

    @property
    def streamed(self) -> bool:
        """Whether the body goes out piece by piece (``trickle``, ``repeat`` or ``chunked``)."""
        return self.trickle is not None or self.repeat != 1 or self.chunked


def schema_of(body: dict) -> dict | None:
    fmt = body.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        return (fmt.get("json_schema") or {}).get("schema")
    return fmt.get("schema")


def request_rng(body: dict) -> random.Random:
    """A generator seeded by the request's messages, schema, seed and max_tokens alone."""
    fields = {"messages": body.get("messages"), "schema": schema_of(body), "seed": body.get("seed"),
              "max_tokens": body.get("max_tokens")}
    blob = json.dumps(fields, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return random.Random(int.from_bytes(hashlib.sha256(blob.encode("utf-8", "surrogatepass")).digest()[:8], "big"))


def sample_schema(schema: dict, rng: random.Random) -> Any:
    """A random instance of the subset of JSON schema the LLM layer emits."""
    if "anyOf" in schema:
        return sample_schema(rng.choice(schema["anyOf"]), rng)
    if "enum" in schema:
        return rng.choice(schema["enum"])
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = kind[0]
    if kind == "object":
        return {k: sample_schema(v, rng) for k, v in schema.get("properties", {}).items()}
    if kind == "array":
        n = schema.get("minItems", 1)
        n = rng.randint(n, schema.get("maxItems", n))
        return [sample_schema(schema.get("items", {"type": "string"}), rng) for _ in range(n)]
    if kind == "string":
        return rng.choice(_WORDS)[:schema.get("maxLength", 100)] or "x"
    if kind == "integer":
        return rng.randint(schema.get("minimum", 0), schema.get("maximum", 5))
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "null":
        return None
    return "ok"


class FakeServer:
    """``responder(body, n) -> str | FakeReply | None`` (None: a schema-valid random reply;
    with ``deterministic``, one that depends on the request alone). ``kill_after``: see the
    module docstring.

    One asyncio loop in a daemon thread speaks HTTP/1.1 with keep-alive; latency is an
    ``asyncio.sleep``, so a thousand slow requests cost no threads and the server adds little
    time of its own to what an overhead benchmark measures. The responder runs on that loop:
    it must return quickly (script delays with ``FakeReply.delay``, never ``time.sleep``).
    """

    def __init__(self, responder: Callable[[dict, int], Any] | None = None, *, latency: float = 0.0,
                 seed: int = 0, reject_json_schema: bool = False, model: str = "fake-model",
                 deterministic: bool = False, kill_after: int | None = None) -> None:
        if kill_after is not None and (isinstance(kill_after, bool) or not isinstance(kill_after, int) or kill_after < 1):
            raise ValueError(f"kill_after must be an integer >= 1 or None, got {kill_after!r}")
        self.responder = responder
        self.deterministic = deterministic
        self.kill_after = kill_after
        self.killed = False
        self.latency = latency
        self.reject_json_schema = reject_json_schema
        self.model = model
        self.requests: list[dict] = []
        self.replies: dict[int, str] = {}      # request index -> the content sent back
        self.headers: list[dict] = []
        self.in_flight = 0
        self.peak_in_flight = 0
        self.body_bytes_sent = 0               # bytes of streamed bodies handed to the socket
        self._rng = random.Random(seed)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.AbstractServer | None = None
        self._thread: threading.Thread | None = None
        self._address: tuple[str, int] | None = None
        self._connections: dict[asyncio.Task, asyncio.StreamWriter] = {}

    @property
    def base_url(self) -> str:
        host, port = self._address
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> "FakeServer":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True, name="fake-llm")
        self._thread.start()
        started = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._connection, "127.0.0.1", 0, backlog=1024), self._loop)
        self._server = started.result(10)
        self._address = self._server.sockets[0].getsockname()[:2]

    def kill(self) -> None:
        """Stop listening and drop every open connection now (from any thread)."""
        if self._loop is None or self.killed:
            return
        if threading.current_thread() is self._thread:
            self._kill_now()
            return
        done = threading.Event()

        def kill_and_tell() -> None:
            self._kill_now()
            done.set()

        self._loop.call_soon_threadsafe(kill_and_tell)
        done.wait(10)

    def _kill_now(self) -> None:
        self.killed = True
        self._server.close()
        for task, writer in list(self._connections.items()):
            writer.transport.abort()          # a reset, not a polite close
            if task is not asyncio.current_task():     # (the killing request returns by itself)
                task.cancel()

    def stop(self) -> None:
        if self._loop is None:
            return
        async def close() -> None:
            self._server.close()
            for task in [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]:
                task.cancel()
        asyncio.run_coroutine_threadsafe(close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()
        self._loop = None

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.killed:
            writer.transport.abort()
            return
        task = asyncio.current_task()
        self._connections[task] = writer
        try:
            while True:                                   # keep-alive: one request after another
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                method, path = lines[0].split(" ")[:2]
                headers = {}
                for line in lines[1:]:
                    if ":" in line:
                        k, v = line.split(":", 1)
                        headers[k.strip().lower()] = v.strip()
                raw = await reader.readexactly(int(headers.get("content-length", 0) or 0))
                content_type = "application/json"
                if method == "GET":
                    status, payload, extra = 200, {"object": "list", "data": [{"id": self.model, "object": "model"}]}, None
                else:
                    status, payload, extra = await self._post(json.loads(raw or b"{}"), headers)
                if isinstance(payload, _Raw):
                    data, content_type = payload.data, payload.content_type
                else:
                    data = json.dumps(payload).encode()
                streamed = isinstance(payload, _Raw) and payload.reply is not None and payload.reply.streamed
                size = len(data) * (payload.reply.repeat if streamed else 1)
                out = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}", f"content-type: {content_type}",
                       "transfer-encoding: chunked" if streamed and payload.reply.chunked else f"content-length: {size}"]
                out += [f"{k}: {v}" for k, v in (extra or {}).items()]
                head = ("\r\n".join(out) + "\r\n\r\n").encode("latin-1")
                if streamed:
                    writer.write(head)
                    await self._send_body(writer, data, payload.reply)
                else:
                    writer.write(head + data)
                await writer.drain()
                if headers.get("connection", "").lower() == "close":
                    return
        except (ConnectionError, asyncio.CancelledError):    # the client timed out and left, stop() or kill()
            return
        finally:
            self._connections.pop(task, None)
            writer.close()

    async def _send_body(self, writer: asyncio.StreamWriter, data: bytes, reply: FakeReply) -> None:
        step, pause = reply.trickle or (max(len(data), 1), 0.0)
        for _ in range(reply.repeat):
            for i in range(0, len(data), max(int(step), 1)):
                piece = data[i:i + max(int(step), 1)]
                writer.write(b"%x\r\n%s\r\n" % (len(piece), piece) if reply.chunked else piece)
                await writer.drain()          # raises once the client has hung up
                self.body_bytes_sent += len(piece)
                if pause:
                    await asyncio.sleep(pause)
        if reply.chunked:
            writer.write(b"0\r\n\r\n")

    async def _post(self, body: dict, headers: dict) -> tuple[int, dict, dict | None]:
        n = len(self.requests)
        self.requests.append(body)
        self.headers.append(headers)
        if self.kill_after is not None and n + 1 >= self.kill_after:
            self._kill_now()
            raise ConnectionResetError("the fake server was killed")
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            status, payload, extra, reply = await self._answer(body, n)
        finally:
            self.in_flight -= 1
        if reply is not None and reply.streamed:
            if not isinstance(payload, _Raw):
                payload = _Raw(json.dumps(payload).encode(), "application/json")
            payload.reply = reply
        return status, payload, extra

    async def _answer(self, body: dict, n: int) -> tuple[int, Any, dict | None, FakeReply | None]:
        fmt = (body.get("response_format") or {}).get("type")
        if self.reject_json_schema and fmt == "json_schema":
            # what llama-cpp-python's server says to the OpenAI form
            return 500, {"error": {"message": "1 validation error: response_format.type Input should be "
                                              "'text' or 'json_object'", "type": "internal_server_error"}}, None, None
        reply = self.responder(body, n) if self.responder is not None else None
        if not isinstance(reply, FakeReply):
            reply = FakeReply(content=reply)
        await asyncio.sleep(self.latency + reply.delay)
        if reply.raw is not None:
            data = reply.raw.encode("utf-8", "surrogatepass") if isinstance(reply.raw, str) else bytes(reply.raw)
            return reply.status, _Raw(data, reply.content_type), reply.headers, reply
        if reply.body is not _DEFAULT:
            return reply.status, reply.body, reply.headers, reply
        if reply.status != 200:
            return reply.status, {"error": {"message": reply.error, "type": "scripted"}}, reply.headers, reply
        content = reply.content
        if content is None and self.deterministic:
            rng, schema = request_rng(body), schema_of(body)
            content = json.dumps(sample_schema(schema, rng)) if schema else rng.choice(_SENTENCES)
        elif content is None:
            schema = schema_of(body)
            content = json.dumps(sample_schema(schema, self._rng)) if schema else "hello"
        self.replies[n] = content
        prompt_chars = sum(len(str(m.get("content", ""))) for m in body.get("messages", []))
        usage = {"prompt_tokens": prompt_chars // 4 + 1, "completion_tokens": len(content) // 4 + 1}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        if reply.usage is not _DEFAULT:
            usage = reply.usage
        return 200, {"id": f"chatcmpl-{n}", "object": "chat.completion", "created": int(time.time()),
                     "model": body.get("model", self.model),
                     "choices": [{"index": 0, "finish_reason": "stop",
                                  "message": {"role": "assistant", "content": content}}],
                     "usage": usage}, reply.headers, reply


@dataclass
class _Raw:
    data: bytes
    content_type: str
    reply: FakeReply | None = None


_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
            408: "Request Timeout", 409: "Conflict", 422: "Unprocessable Entity", 429: "Too Many Requests",
            500: "Internal Server Error", 502: "Bad Gateway", 503: "Service Unavailable"}


def _serve_forever(latency: float, seed: int, conn) -> None:
    server = FakeServer(latency=latency, seed=seed)
    server.start()
    conn.send(server.base_url)
    conn.recv()          # block until the parent says stop (or dies)
    server.stop()


class FakeServerProcess:
    """A ``FakeServer`` (schema-valid random replies) in its own process, so that benchmarks do
    not share the interpreter lock with the client they measure, as with a real server."""

    def __init__(self, latency: float = 0.0, seed: int = 0) -> None:
        self.latency, self.seed = latency, seed
        self.base_url: str | None = None

    def __enter__(self) -> "FakeServerProcess":
        import multiprocessing as mp

        ctx = mp.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=_serve_forever, args=(self.latency, self.seed, child), daemon=True)
        self._proc.start()
        if not self._conn.poll(30):
            self._proc.kill()
            raise RuntimeError("the fake server process did not start")
        self.base_url = self._conn.recv()
        return self

    def __exit__(self, *exc) -> None:
        try:
            self._conn.send("stop")
        except (BrokenPipeError, OSError):
            pass
        self._proc.join(5)
        if self._proc.is_alive():
            self._proc.kill()
