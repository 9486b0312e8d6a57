"""Write a generated table into a doc between markers, so that numbers in docs come from runs.

    <!-- NAME:begin -->
    ...everything here is replaced...
    <!-- NAME:end -->
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs"


def write_section(doc: str, name: str, markdown: str) -> Path:
    path = DOCS / doc
    text = path.read_text(encoding="utf-8")
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    if begin not in text or end not in text:
        raise ValueError(f"{path} has no {begin} ... {end} markers")
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    path.write_text(f"{head}{begin}\n{markdown.strip()}\n{end}{tail}", encoding="utf-8")
    return path


def machine() -> str:
    """The machine a benchmark ran on, as the docs name it ("x86_64, 2 cores")."""
    return f"{platform.machine()}, {os.cpu_count()} cores"
