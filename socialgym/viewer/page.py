"""``viewer.html``: one self-contained page that replays a run directory.

The run's data (:func:`socialgym.viewer.data.load_run` or, for a moderation run,
:func:`socialgym.viewer.discussion.load_discussions`) is embedded once as
``<script type="application/json" id="sg-data">``; ``viewer.js`` and ``viewer.css`` (hand-written,
next to this module) are inlined. The Content-Security-Policy forbids every resource but the
inline script and styles and ``data:`` images, so the page opens offline from the file system and
cannot reach the network. Every text from the run's files is inserted with ``textContent``.
"""

from __future__ import annotations

import html
import json
import math
import os
from pathlib import Path
from typing import Any

from socialgym.viewer.data import ViewerError, check_run_dir, load_run
from socialgym.rundir import layout
from socialgym.rundir.files import atomic_write

CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'unsafe-inline'"
_ASSETS = ("viewer.js", "viewer.css")

FEED_BODY = """
<header>
 <h1><span class="muted">socialgym viewer:</span> <span id="run-name">{name}</span></h1>
 <div id="run-meta" class="muted"></div>
 {report_link}
</header>
<ul id="notices" hidden></ul>
<section id="controls">
 <div class="control round-control">
  <label for="round">Round</label>
  <input id="round" type="range" min="1" max="{T}" step="1" value="1" list="intervention-rounds">
  <datalist id="intervention-rounds"></datalist>
  <span id="round-label">round 1 of {T}</span>
  <span class="hint muted">(← / → keys)</span>
 </div>
 <div class="control filters">
  <label>agent <select id="filter-agent"><option value="">all</option></select></label>
  <label>topic <select id="filter-topic"><option value="">all</option></select></label>
  <label>group <select id="filter-group"><option value="">all</option></select></label>
  <label>type <select id="filter-kind"><option value="">all</option><option value="POST">POST</option>
   <option value="COM">COM</option><option value="DM">DM</option></select></label>
  <label>search <input id="search" type="search" placeholder="text in posts, comments, DMs"></label>
  <label class="toggle"><input id="dm-toggle" type="checkbox"> show DMs</label>
 </div>
</section>
<div id="layout">
 <aside id="agents-panel">
  <h2>Agents</h2>
  <ul id="agents"></ul>
 </aside>
 <section id="timeline-panel">
  <h2>Timeline <span id="round-summary" class="muted"></span></h2>
  <div id="timeline"></div>
  <div id="timeline-more"></div>
  <h3 id="dms-heading">Direct messages <span id="dm-count" class="muted"></span></h3>
  <div id="dms" hidden></div>
 </section>
 <section id="graph-panel">
  <h2>Tie graph</h2>
  <svg id="graph" viewBox="0 0 1000 1000" role="img" aria-label="tie graph"></svg>
  <div class="control">
   <label for="theta">θ</label>
   <input id="theta" type="number" min="0" max="1" step="0.05" value="{theta}">
   <span class="muted">edges where W_ud = (W + Wᵀ)/2 ≥ θ</span>
  </div>
  <div id="graph-metrics"></div>
  <div id="graph-note" class="muted"></div>
  <ul id="legend"></ul>
 </section>
</div>
<section id="agent-page" hidden>
 <button id="close-agent" type="button" title="close (Esc)">× close</button>
 <div id="agent-content"></div>
</section>
<details id="config"><summary>{config_file}</summary><pre id="config-text"></pre></details>
"""

DISCUSSION_BODY = """
<header>
 <h1><span class="muted">socialgym viewer:</span> <span id="run-name">{name}</span></h1>
 <div id="run-meta" class="muted">a moderation run: threaded discussions per strategy</div>
</header>
<ul id="notices" hidden></ul>
<section id="discussions">
 <div class="control">
  <label>strategy <select id="strategy"></select></label>
  <label>discussion <select id="discussion"></select></label>
 </div>
 <table id="d-summary"></table>
 <div id="d-header"></div>
 <ul id="d-users"></ul>
 <div id="d-thread"></div>
</section>
"""


def _asset(name: str) -> str:
    try:
        return Path(__file__).with_name(name).read_text(encoding="utf-8")
    except OSError:
        raise ViewerError(f"{name} is missing from the installed socialgym.viewer package: reinstall socialgym") \
            from None


def _clean(value: Any) -> Any:
    """JSON-safe: non-finite floats become null (JSON has no NaN)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def embed_json(data: Any) -> str:
    """JSON that is safe inside a <script> element: no '<', '>' or '&' survives literally."""
    text = json.dumps(_clean(data), ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return (text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def render(data: dict) -> str:
    """The whole page for a loaded run (feed or discussion)."""
    name = html.escape(str(data.get("title", "run")))
    if data.get("kind") == "discussion":
        body = DISCUSSION_BODY.format(name=name)
    else:
        link = (f'<a id="report-link" href="{layout.REPORT}">{layout.REPORT}</a> (summary tables and plots)'
                if data.get("report") else "")
        body = FEED_BODY.format(name=name, T=int(data["T"]), theta=data.get("theta", 0.1), report_link=link,
                                config_file=layout.CONFIG)
    return "\n".join([
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>socialgym viewer: {name}</title>",
        f"<style>{_asset('viewer.css')}</style>",
        "</head>",
        f'<body class="kind-{html.escape(str(data.get("kind")))}">',
        body,
        f'<script type="application/json" id="sg-data">{embed_json(data)}</script>',
        f"<script>{_asset('viewer.js')}</script>",
        "</body>",
        "</html>",
        "",
    ])


def load(run_dir: str | os.PathLike) -> dict:
    """The page's data for a run directory (feed or moderation run); ViewerError if none."""
    path = Path(run_dir)
    check_run_dir(path)
    try:
        if (path / layout.DISCUSSIONS).is_file():
            from socialgym.viewer.discussion import load_discussions
            return load_discussions(path)
        return load_run(path)
    except ViewerError:
        raise
    except MemoryError:
        raise ViewerError(f"{path}: not enough memory to read the run") from None
    except Exception as exc:            # noqa: BLE001 - a damaged file must not end in a traceback
        raise ViewerError(f"could not read the run directory {path}: {type(exc).__name__}: {exc}") from None


def build_viewer(run_dir: str | os.PathLike, out: str | os.PathLike | None = None) -> Path:
    """Write ``viewer.html`` for a run directory (default ``run_dir/viewer.html``; ``out`` a file
    path, or a directory to write ``viewer.html`` into). Returns its path.

    Raises :class:`ViewerError` (a ``ValueError`` with a one-line message) for a directory that is
    no run: missing, a sweep root, or without rounds.csv / events.jsonl / discussions.jsonl. A
    partial run (killed, transcripts or events not logged, tie matrices missing, damaged lines)
    gets a page whose ``#notices`` says what is missing."""
    data = load(run_dir)
    target = Path(run_dir) / layout.VIEWER if out is None else Path(out)
    if target.is_dir():
        target = target / layout.VIEWER
    text = render(data)
    try:
        atomic_write(target, text)           # a reader never sees half a page
    except OSError as exc:
        raise ViewerError(f"could not write {target}: {exc.strerror or exc}") from None
    return target
