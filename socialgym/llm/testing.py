"""A scripted OpenAI-compatible HTTP server on loopback, for tests and overhead benchmarks.

It speaks ``POST /v1/chat/completions`` (and ``GET /v1/models``). By default every reply is a
random instance of the request's JSON schema (so a run "works" as if the model always obeyed
the schema); a ``responder`` function can script anything else: malformed JSON, wrong ids,
HTTP errors, slow replies. It records every request body and the peak number of requests in
flight at once.

    with FakeServer(latency=0.2) as server:
        client = LLMClient(server.base_url, model="fake", api_key="test")

Real network code, real HTTP: the openai client cannot tell it from a real server.
"""

from __future__ import annotations

import json
import random
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

_WORDS = ("great point", "I agree", "interesting", "not sure about this", "thanks for sharing",
          "what do you think", "love this", "good question")


@dataclass
class FakeReply:
    """A scripted answer: ``content`` as the assistant message, or an HTTP error."""

    content: str | None = None
    status: int = 200
    error: str = "scripted error"
    delay: float = 0.0
    headers: dict | None = None


def schema_of(body: dict) -> dict | None:
    fmt = body.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        return (fmt.get("json_schema") or {}).get("schema")
    return fmt.get("schema")


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
    """``responder(body, n) -> str | FakeReply | None`` (None: a schema-valid random reply)."""

    def __init__(self, responder: Callable[[dict, int], Any] | None = None, *, latency: float = 0.0,
                 seed: int = 0, reject_json_schema: bool = False, model: str = "fake-model") -> None:
        self.responder = responder
        self.latency = latency
        self.reject_json_schema = reject_json_schema
        self.model = model
        self.requests: list[dict] = []
        self.headers: list[dict] = []
        self.in_flight = 0
        self.peak_in_flight = 0
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> "FakeServer":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:   # quiet
                pass

            def do_GET(self) -> None:
                self._send(200, {"object": "list", "data": [{"id": server.model, "object": "model"}]})

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                with server._lock:
                    n = len(server.requests)
                    server.requests.append(body)
                    server.headers.append(dict(self.headers))
                    server.in_flight += 1
                    server.peak_in_flight = max(server.peak_in_flight, server.in_flight)
                try:
                    status, payload, headers = server._answer(body, n)
                finally:
                    with server._lock:
                        server.in_flight -= 1
                self._send(status, payload, headers)

            def _send(self, status: int, payload: dict, headers: dict | None = None) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, str(v))
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):   # the client timed out and left
                    pass

        class Server(ThreadingHTTPServer):
            request_queue_size = 256     # the default backlog of 5 drops bursts of new connections

        self._httpd = Server(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True, name="fake-llm")
        self._thread.start()

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def _answer(self, body: dict, n: int) -> tuple[int, dict, dict | None]:
        fmt = (body.get("response_format") or {}).get("type")
        if self.reject_json_schema and fmt == "json_schema":
            # what llama-cpp-python's server says to the OpenAI form
            return 500, {"error": {"message": "1 validation error: response_format.type Input should be "
                                              "'text' or 'json_object'", "type": "internal_server_error"}}, None
        reply = self.responder(body, n) if self.responder is not None else None
        if not isinstance(reply, FakeReply):
            reply = FakeReply(content=reply)
        time.sleep(self.latency + reply.delay)
        if reply.status != 200:
            return reply.status, {"error": {"message": reply.error, "type": "scripted"}}, reply.headers
        content = reply.content
        if content is None:
            schema = schema_of(body)
            with self._lock:
                content = json.dumps(sample_schema(schema, self._rng)) if schema else "hello"
        prompt_chars = sum(len(str(m.get("content", ""))) for m in body.get("messages", []))
        usage = {"prompt_tokens": prompt_chars // 4 + 1, "completion_tokens": len(content) // 4 + 1}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        return 200, {"id": f"chatcmpl-{n}", "object": "chat.completion", "created": int(time.time()),
                     "model": body.get("model", self.model),
                     "choices": [{"index": 0, "finish_reason": "stop",
                                  "message": {"role": "assistant", "content": content}}],
                     "usage": usage}, reply.headers


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
