"""One writer per output directory: an exclusive lock held while a command writes there.

Every command that writes a run, sweep or study directory — run, resume, fork, sweep, study,
report, compare — holds :func:`writer_lock` on it for as long as it writes. A second writer is
refused at once with one line naming the holder (its process id, command and start time).

The lock is an ``flock`` on a file beside the directory (``.<name>.socialgym-lock`` in its parent):
the operating system drops it when the holding process ends, however it ends (a killed run leaves
no stale lock), and the directory itself stays exactly what the run wrote (a fork can build its
directory aside and rename it into place). A process may take the lock of a directory it holds
already (a sweep's resume of its own runs, a run's report at its end).
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import functools
import inspect
import json
import os
import stat
from pathlib import Path
from typing import Iterator

from socialgym.rundir.runs import RunDirError

_HELD: dict[str, int] = {}          # directories this process holds: path -> depth


class DirectoryBusy(RuntimeError):
    """Another process is writing the directory; the message names it and what to do."""


def lock_path(directory: Path) -> Path:
    directory = Path(directory).resolve()
    return directory.parent / f".{directory.name}.socialgym-lock"


@contextlib.contextmanager
def writer_lock(directory: str | Path, command: str) -> Iterator[None]:
    """Hold the directory's writer lock for the ``with`` block (``command`` says who holds it)."""
    directory = Path(directory)
    key = str(directory.resolve())
    if key in _HELD:                              # this process holds it already
        _HELD[key] += 1
        try:
            yield
        finally:
            _HELD[key] -= 1
        return
    path = lock_path(directory)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:   # a hard link: writing it changes another file
            raise RunDirError(f"{path} is not a lock file of socialgym's own (a regular file with one link): "
                              "remove it, then run again")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise DirectoryBusy(f"{directory} is being written by {_holder(fd)}: wait for it to end, or write "
                                f"to another directory") from None
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps({"pid": os.getpid(), "command": command,
                                 "since": datetime.datetime.now().isoformat(timespec="seconds")}).encode())
        _HELD[key] = 1
        try:
            yield
        finally:
            del _HELD[key]
    finally:
        os.close(fd)                              # closing the descriptor drops the lock


def _holder(fd: int) -> str:
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        info = json.loads(os.read(fd, 4096) or b"{}")
    except (OSError, ValueError):
        info = {}
    if not isinstance(info, dict) or "pid" not in info:
        return "another socialgym process"
    return f"`socialgym {info.get('command', '?')}` (process {info.get('pid')}, since {info.get('since', '?')})"


def writes(command: str, directory: str):
    """Decorator: the function writes the directory passed as its parameter ``directory`` and runs
    holding that directory's writer lock (``@writes("sweep", "out")``)."""
    def decorate(function):
        signature = inspect.signature(function)

        @functools.wraps(function)
        def locked(*args, **kwargs):
            target = signature.bind(*args, **kwargs).arguments[directory]
            with writer_lock(target, command):
                return function(*args, **kwargs)
        return locked
    return decorate
