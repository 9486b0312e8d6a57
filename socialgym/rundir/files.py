"""Reading and writing the small files of a run directory: JSON, JSON lines, CSV, and the
numbers in their cells. Shared by the runner, sweeps, studies, the moderation experiment, the
report, the viewer and the wandb logger.

Writers are atomic (a temporary file renamed over the target: a reader sees the old file or the
new one, never half of one); readers forgive what a killed run leaves behind (a missing file, a
half-written last line) and say so in their return value rather than raising.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import math
import os
import stat
import tempfile
from pathlib import Path
from typing import Any, Iterator, Sequence


# ---------------------------------------------------------------------------------- JSON
def read_json(path: Path, default: Any = None, *, errors: str = "strict") -> Any:
    """The JSON value in ``path``; ``default`` when the file is missing, cannot be read or is
    not JSON (``errors="replace"`` reads bytes that are not UTF-8 as U+FFFD instead)."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8", errors=errors))
    except (OSError, ValueError):
        return default


def atomic_write(path: Path, data: str | bytes) -> None:
    """Write ``data`` to ``path`` atomically and without following a link: a new temporary file
    beside it (created exclusively: a link planted under any name is never written through),
    then renamed over ``path`` (a link at ``path`` is replaced, not followed). A reader sees the
    old file or the new one, never half."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o644)
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def open_append(path: Path):
    """``path`` opened for appending text (created when missing), refusing a link (``OSError``)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    return os.fdopen(fd, "a", newline="", encoding="utf-8")


def truncate(path: Path, size: int) -> None:
    """Cut ``path`` to ``size`` bytes, refusing a link (``OSError``): a link planted in a run
    directory never makes a resume cut another file."""
    fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW)
    try:
        os.ftruncate(fd, size)
    finally:
        os.close(fd)


def own_dir(path: Path) -> Path:
    """The folder ``path`` inside an output directory, created when missing; a link there is
    refused (``OSError``), so nothing is written through it to another place."""
    path = Path(path)
    if path.is_symlink():
        raise OSError(f"{path} is a link: socialgym writes only into folders of its own (remove the link)")
    path.mkdir(parents=True, exist_ok=True)
    return path


def own_file(path: Path) -> Path:
    """``path``, a file that something outside socialgym's writers (a library appending to it)
    will open in place: when it exists it must be a regular file with one name, else ``OSError``
    (a symbolic link would redirect the writes, a hard link would change another file)."""
    path = Path(path)
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return path
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
        what = "a link" if stat.S_ISLNK(info.st_mode) else "not a regular file" if not stat.S_ISREG(info.st_mode) \
            else f"a hard link ({info.st_nlink} names)"
        raise OSError(f"{path} is {what}: socialgym writes only files of its own (remove it)")
    return path


def finite_json(value: Any) -> Any:
    """``value`` with every NaN or infinite float (in nested dicts, lists and tuples) made None, so
    that it is strict JSON: a statistic that could not be computed is null, never ``NaN``."""
    if isinstance(value, dict):
        return {k: finite_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_json(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def write_json(path: Path, value: Any, *, default=None, ensure_ascii: bool = False) -> None:
    """``value`` as indented JSON, atomically (:func:`atomic_write`)."""
    atomic_write(path, json.dumps(value, indent=1, ensure_ascii=ensure_ascii, default=default) + "\n")


def read_jsonl(path: Path) -> Iterator[tuple[dict | None, int]]:
    """(the object, or None when the line is not a JSON object; its line number) for every
    non-empty line of a JSON-lines file. Bytes that are not UTF-8 are read as U+FFFD."""
    with Path(path).open(encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except ValueError:
                yield None, number
                continue
            yield (value if isinstance(value, dict) else None), number


# ---------------------------------------------------------------------------------- CSV
def read_csv(path: Path, *, errors: str = "strict") -> tuple[list[str], list[list[str]]]:
    """(header, rows) of a CSV file, empty lines left out (rows may be shorter or longer than
    the header: a line being written when a run stopped); ``([], [])`` when the file is missing.
    Raises OSError, csv.Error or (``errors="strict"``) UnicodeDecodeError."""
    path = Path(path)
    if not path.exists():
        return [], []
    with path.open(newline="", encoding="utf-8", errors=errors) as f:
        reader = csv.reader(f)
        header = next(reader, [])
        return header, [row for row in reader if row]


def read_records(path: Path) -> list[dict[str, str]]:
    """The rows of a CSV file as dicts keyed by its header."""
    with Path(path).open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def write_csv(path: Path, header: Sequence[str], rows: Sequence[Sequence]) -> None:
    """A CSV file, atomically; floats written exactly (``repr``), NaN as an empty cell."""
    buffer = io.StringIO(newline="")
    writer = csv.writer(buffer)
    writer.writerow(header)
    for row in rows:
        writer.writerow(["" if isinstance(v, float) and math.isnan(v) else
                         repr(v) if isinstance(v, float) else v for v in row])
    atomic_write(path, buffer.getvalue())


# ---------------------------------------------------------------------------------- numbers
def to_float(value: Any, default: Any = math.nan) -> Any:
    """``value`` (a number, or text such as a CSV cell) as a float — NaN and infinities
    included; ``default`` for anything else: None, empty or other text, bools."""
    if isinstance(value, bool):
        return default
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        return default


def finite_number(value: Any) -> float | None:
    """``value`` as a finite float (see :func:`to_float`), or None (None, '', NaN, inf and
    non-numbers alike)."""
    x = to_float(value)
    return x if math.isfinite(x) else None


INT64_MAX = 2**63 - 1


def to_int64(value: Any, *, text: bool = False) -> int | None:
    """``value`` as an integer that fits numpy's int64 (an id, round or count read from a run's
    files), or None: bools, non-integral or non-finite floats, numbers past ±(2**63 - 1) (a file
    edited to hold 2**70 is a missing value, not an OverflowError when the column becomes an
    array), and other types. ``text``: a string of ASCII digits (optionally signed) counts too."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float):
        value = int(value) if math.isfinite(value) and value.is_integer() else None
    elif isinstance(value, str) and text:
        cell = value.strip()
        digits = cell[1:] if cell[:1] in "+-" else cell
        value = int(cell) if digits.isascii() and digits.isdigit() and len(digits) <= 19 else None
    elif not isinstance(value, int):
        return None
    return value if value is not None and -INT64_MAX <= value <= INT64_MAX else None


__all__ = ["atomic_write", "open_append", "truncate", "own_dir", "own_file", "read_json", "write_json", "read_jsonl", "read_csv", "read_records", "write_csv", "to_float",
           "finite_number", "to_int64", "INT64_MAX"]
