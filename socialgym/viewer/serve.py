"""``socialgym view DIR --serve``: the viewer page on loopback, and nothing else.

The page is self-contained (its data, script and style are inside it), so the server answers
only ``/`` and ``/viewer.html`` with the page's bytes: never another file of the run directory
(its checkpoint, LLM cache, config) nor a file a link there points to. It listens on 127.0.0.1
only and answers only requests whose ``Host`` names that address (or ``localhost``) and its
port, so a web page that rebinds its own host name to 127.0.0.1 cannot read it.
"""

from __future__ import annotations

import http.server
from pathlib import Path

from socialgym.viewer.page import CSP


def page_server(page: str | Path, port: int = 0) -> http.server.ThreadingHTTPServer:
    """A server (not yet serving: call ``serve_forever``) of the page at ``page``, read now."""
    body = Path(page).read_bytes()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), _PageHandler)
    bound = server.server_address[1]
    server.page = body
    server.hosts = {f"127.0.0.1:{bound}", f"localhost:{bound}"}
    server.paths = {"/", f"/{Path(page).name}"}
    return server


class _PageHandler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:        # noqa: N802 -- the http.server interface
        self._answer(head=False)

    def do_HEAD(self) -> None:       # noqa: N802
        self._answer(head=True)

    def _answer(self, head: bool) -> None:
        if self.headers.get("Host", "") not in self.server.hosts:
            self.send_error(403, "this server answers only requests for 127.0.0.1")
            return
        if self.path.split("?", 1)[0] not in self.server.paths:
            self.send_error(404, "only the viewer page is served")
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(self.server.page)))
        self.send_header("Content-Security-Policy", CSP)
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        if not head:
            self.wfile.write(self.server.page)

    def log_message(self, *args) -> None:
        pass
