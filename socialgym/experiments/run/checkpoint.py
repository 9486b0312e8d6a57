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

:func:`check_checkpoint` is what ``resume`` checks before it trusts a checkpoint and the files
beside it (the run id, the config it was made with, every output's digest).
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
from typing import Any, Mapping

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
    restart = "to start the run over, delete it and resume again"
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


# ---------------------------------------------------------------------------------- checks on resume
ROUTING_ONLY = ("llm.", "logging.", "run.", "interventions", "surveys")
"""Flattened config keys whose change takes effect in a resumed run (the rest is in the checkpoint)."""
BUDGET_KEYS_PREFIX = "llm.budget"
"""A change of these keys alone needs no ``--allow-config-change`` (``resume --budget`` makes it)."""


def config_digest(path: Path) -> str:
    """SHA-256 of a run's config.yaml as the checkpoint records it."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def check_checkpoint(out: Path, checkpoint: dict, cfg, meta: dict, allow_config_change: bool) -> None:
    """The checkpoint belongs to the run in ``out``, was made with its config (an edited config
    is refused unless ``allow_config_change``, or the edit changed only ``llm.budget``; either
    is recorded in run.json's ``config_changes``), and the outputs on disk are what it recorded.
    Raises ``RunError`` naming what differs."""
    from socialgym.experiments.define import to_dict
    from socialgym.experiments.errors import RunError
    from socialgym.experiments.run.recorder import verify_outputs
    from socialgym.rundir import write_run_info

    if checkpoint.get("run_id") != meta.get("run_id"):
        raise RunError(f"{out / layout.CHECKPOINT} belongs to another run (run id {checkpoint.get('run_id')}, "
                       f"{out / layout.RUN_INFO} says {meta.get('run_id')}): it was copied from elsewhere")
    if checkpoint.get("config_sha256") != config_digest(out / layout.CONFIG):
        old, new = flatten(checkpoint.get("config") or {}), flatten(to_dict(cfg))
        changed = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
        shown = ", ".join(changed[:8]) + (f" and {len(changed) - 8} more" if len(changed) > 8 else "")
        budget_only = bool(changed) and all(k.startswith(BUDGET_KEYS_PREFIX) for k in changed)
        if not allow_config_change and not budget_only:
            raise RunError(f"{out / layout.CONFIG} changed since the checkpoint ({shown or 'formatting only'}): "
                           "restore it, or pass --allow-config-change to continue with the checkpoint's "
                           "environment and policies (only llm, logging and run settings and the interventions and "
                           "surveys of later rounds take effect)")
        if not budget_only:
            env_side = [k for k in changed if not k.startswith(ROUTING_ONLY)
                        and not _routing_only(k, checkpoint.get("config") or {}, to_dict(cfg))]
            print(f"socialgym: warning: {layout.CONFIG} changed since the checkpoint ({shown}); continuing "
                  f"(--allow-config-change){'; these keys do not take effect: ' + ', '.join(env_side) if env_side else ''}",
                  file=sys.stderr)
        meta.setdefault("config_changes", []).append({"round": checkpoint.get("round"), "keys": changed})
        write_run_info(out, meta)
        checkpoint["config_sha256"] = config_digest(out / layout.CONFIG)
    try:
        verify_outputs(out, checkpoint["sizes"], checkpoint["digests"])
        for name, digest in checkpoint.get("files", {}).items():
            path = out / name
            if not path.exists() or hashlib.sha256(path.read_bytes()).hexdigest() != digest:
                raise ValueError(f"{path} is {'missing' if not path.exists() else 'changed'}")
    except ValueError as exc:
        raise RunError(f"cannot resume: {exc}; restore the file, or delete {out / layout.CHECKPOINT} to restart "
                       f"the run from round 0") from None


def _routing_only(key: str, old: dict, new: dict) -> bool:
    """``policy.groups`` changed only in which servers the groups use (``endpoints``/``model``):
    that takes effect, like the llm section."""
    from socialgym.experiments.define.forks import GROUP_ROUTING

    if key != "policy.groups":
        return False

    def strip(cfg: dict) -> list:
        groups = (cfg.get("policy") or {}).get("groups") or []
        return [{k: v for k, v in g.items() if k not in GROUP_ROUTING} for g in groups if isinstance(g, dict)]
    return strip(old) == strip(new)


def flatten(tree: Any, prefix: str = "") -> dict:
    """A nested mapping as {"a.b.c": leaf} (lists are leaves)."""
    if isinstance(tree, Mapping):
        flat = {}
        for k, v in tree.items():
            flat.update(flatten(v, f"{prefix}{k}."))
        return flat or {prefix.rstrip("."): {}}
    return {prefix.rstrip("."): tree}
