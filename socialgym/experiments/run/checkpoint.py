"""Authenticated run checkpoints: only checkpoints this user's socialgym wrote are unpickled.

A checkpoint holds the whole simulation (environment, policies, RNG states), which only
pickle can store; but unpickling a file runs whatever code the file names. So every checkpoint
carries an HMAC-SHA256 of its payload under a key that belongs to the user and lives outside
run directories; ``read_checkpoint`` checks it before anything is deserialised. A run
directory received from someone else therefore fails with a message instead of running code;
``socialgym resume --trust`` skips the check (with a warning) for files one trusts.

The key file: ``$SOCIALGYM_KEY_FILE`` if set, else ``$XDG_CONFIG_HOME/socialgym/checkpoint.key``
(``~/.config/...``), created on first use with mode 0600. Process pools and Ray workers on the
same machine read the same file; on a cluster, point ``SOCIALGYM_KEY_FILE`` at a shared copy.

File layout: ``MAGIC`` line, the hex MAC line, then the pickle bytes.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import pickle
import secrets
import sys
import tempfile
from pathlib import Path
from typing import Any

from socialgym.rundir import layout
from socialgym.rundir.files import own_dir

MAGIC = b"SOCIALGYM-CHECKPOINT 3\n"
_MAC_LINE = 64 + 1                      # sha256 hex digest and its newline


class CheckpointError(RuntimeError):
    """A checkpoint that must not be, or cannot be, loaded; the message says what to do."""


def key_path() -> Path:
    explicit = os.environ.get("SOCIALGYM_KEY_FILE")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config"
    return Path(base) / "socialgym" / "checkpoint.key"


def _key() -> bytes:
    path = key_path()
    try:
        text = path.read_text(encoding="utf-8", errors="replace").strip()
    except IsADirectoryError:
        raise CheckpointError(f"the checkpoint key {path} is a folder, not a key file; remove it to make a "
                              "new key") from None
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        text = secrets.token_hex(32)
        try:                              # O_EXCL: two processes starting at once agree on one key
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            text = path.read_text().strip()
        else:
            with os.fdopen(fd, "w") as f:
                f.write(text + "\n")
    try:
        key = bytes.fromhex(text)
    except ValueError:
        key = b""
    if len(key) < 16:
        raise CheckpointError(f"the checkpoint key {path} is damaged (expected hex digits); delete it to make "
                              "a new one (checkpoints signed with the old key will then need --trust)")
    return key


def _mac(payload: bytes) -> bytes:
    return hmac.new(_key(), payload, hashlib.sha256).hexdigest().encode()


def write_checkpoint(path: Path, state: Any, *, before_rename=None) -> None:
    """Pickle ``state`` to ``path`` atomically (write, fsync, rename), signed with the user's key.
    ``before_rename`` is called between the fsync and the rename (fault injection in tests)."""
    payload = pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)
    fd, tmp = tempfile.mkstemp(dir=Path(path).parent, prefix=f".{Path(path).name}.", suffix=".tmp")
    try:                                  # a new file: never written through a link planted in the run
        with os.fdopen(fd, "wb") as f:
            f.write(MAGIC + _mac(payload) + b"\n")
            f.write(payload)
            f.flush()
            os.fsync(f.fileno())
        if before_rename is not None:
            before_rename()
        os.replace(tmp, path)             # atomic: the old checkpoint or the new one, never half
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def keep_snapshot(run_dir: Path, round: int, checkpoint: str = layout.CHECKPOINT) -> Path:
    """Keep the run's current checkpoint file as the snapshot of ``round``: a hard link (the next
    checkpoint is a new file renamed over the old name, so the link keeps this one's bytes at no
    cost), or a copy where the filesystem has no hard links. Replaces an older snapshot of the
    same round (a run restarted from round 0)."""
    source, path = Path(run_dir) / checkpoint, layout.snapshot_path(run_dir, round)
    own_dir(path.parent)                  # a linked snapshots/ folder is refused
    tmp = path.with_suffix(".tmp")
    tmp.unlink(missing_ok=True)
    try:
        os.link(source, tmp)
    except OSError:
        import shutil
        shutil.copyfile(source, tmp)
    os.replace(tmp, path)
    return path


def read_checkpoint(path: Path, *, trust: bool = False) -> Any:
    """The state saved by :func:`write_checkpoint`, after its MAC was verified (``trust`` skips the
    check and warns). Raises :class:`CheckpointError` naming the file and what to do."""
    path = Path(path)
    restart = f"to start the run over, delete it and resume again"
    data = path.read_bytes()
    verified = False
    if not data.startswith(MAGIC):
        if data.startswith(b"\x80"):          # a bare pickle: socialgym before checkpoint format 3
            reason = "was written by an older socialgym (unsigned format)"
        else:
            reason = "is not a socialgym checkpoint or is damaged (bad header)"
        if not trust or not data.startswith(b"\x80"):
            raise CheckpointError(f"{path} {reason}; {restart}"
                                  + ("; if you trust its origin, `socialgym resume --trust`" if
                                     data.startswith(b"\x80") else ""))
        payload = data
    else:
        mac, payload = data[len(MAGIC):len(MAGIC) + _MAC_LINE], data[len(MAGIC) + _MAC_LINE:]
        if len(mac) != _MAC_LINE or mac[-1:] != b"\n":
            raise CheckpointError(f"{path} is damaged (truncated header); {restart}")
        verified = hmac.compare_digest(mac[:-1], _mac(payload))
        if not verified:
            if not trust:
                raise CheckpointError(
                    f"{path} was not written by this user's socialgym (bad signature): it may come from someone "
                    f"else or be damaged, and opening it could run code; if you trust it, resume --trust; "
                    f"otherwise {restart}")
    if not verified:
        print(f"socialgym: warning: loading {path} without checking its signature (--trust): "
              "a checkpoint can run code when it is opened", file=sys.stderr)
    try:
        return pickle.loads(payload)
    except Exception as exc:              # a signed file that fails to load: damaged on disk, or a code change
        raise CheckpointError(f"{path} cannot be loaded ({type(exc).__name__}: {str(exc)[:80]}); {restart}") \
            from None
