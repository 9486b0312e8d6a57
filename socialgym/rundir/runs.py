"""Reading and writing the files of a run directory by what they are, not by their names.

The runner, recorder, fork, sweep and the studies write through these (and the names in
:mod:`socialgym.rundir.layout`); writers are atomic. A run's files are read through
:class:`socialgym.rundir.run.Run`; the readers left here (summary, run info, the sweep manifest)
forgive what a killed run leaves behind (a missing or half-written file gives ``default``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from socialgym.rundir import layout
from socialgym.rundir.files import read_json, write_json


# ---------------------------------------------------------------------------------- what a folder is
def is_sweep(path: Path) -> bool:
    """A sweep (or study) directory: it has the sweep manifest."""
    return (Path(path) / layout.SWEEP).exists()


def kind_of(path: Path) -> str | None:
    """What a directory holds: ``"study"``, ``"sweep"``, ``"moderation experiment"``, ``"run"``, or
    None (missing, empty, or none of these)."""
    path = Path(path)
    if (path / layout.STUDY_CONFIG).exists():
        return "study"
    if (path / layout.SWEEP).exists():
        return "sweep"
    if (path / layout.DISCUSSIONS).exists():
        return "moderation experiment"
    if (path / layout.RUN_INFO).exists() or (path / layout.CONFIG).exists() or was_started(path):
        return "run"
    return None


def was_started(path: Path) -> bool:
    """Something ran in ``path``: it has a summary or a checkpoint."""
    return (Path(path) / layout.SUMMARY).exists() or (Path(path) / layout.CHECKPOINT).exists()


# ---------------------------------------------------------------------------------- small JSON files
def read_summary(run: Path, default: Any = None) -> Any:
    """summary.json, or ``default`` when it is missing or not JSON."""
    return read_json(Path(run) / layout.SUMMARY, default)


def write_summary(run: Path, summary: dict, *, default=None) -> None:
    write_json(Path(run) / layout.SUMMARY, summary, default=default, ensure_ascii=True)


def status(run: Path) -> str | None:
    """The run's status from its summary (running, complete, failed), None without one."""
    summary = read_summary(run)
    return summary.get("status") if isinstance(summary, dict) else None


def read_run_info(run: Path, default: Any = None) -> Any:
    """run.json: the run's id, sweep condition, replicate, seed, config changes, fork origin."""
    return read_json(Path(run) / layout.RUN_INFO, default)


def write_run_info(run: Path, info: dict) -> None:
    write_json(Path(run) / layout.RUN_INFO, info, default=str, ensure_ascii=True)


def write_personas(run: Path, personas: dict) -> None:
    write_json(Path(run) / layout.PERSONAS, personas)


class RunDirError(RuntimeError):
    """A file of an output directory is malformed or points outside it; the message names it."""


class RunFileError(RunDirError, ValueError):
    """A file of a run directory is damaged (:class:`socialgym.rundir.run.Run`); the message names it."""


_JOB_OUT = re.compile(r"runs/c\d+(-[A-Za-z0-9._=,+-]*)?/rep_\d+")
_CONDITION_ID = re.compile(r"c\d+(-[A-Za-z0-9._=,+-]*)?")


def read_sweep(path: Path, default: Any = None) -> Any:
    """sweep.json: a sweep's manifest (``default`` when missing or not JSON). Every job's folder and
    condition id are checked to be the form socialgym writes (``runs/<condition_id>/rep_<k>``,
    inside the sweep): a manifest edited to lead reads or writes elsewhere raises
    :class:`RunDirError`."""
    manifest = read_json(Path(path) / layout.SWEEP, default)
    if manifest is default:
        return manifest
    jobs = manifest.get("jobs") if isinstance(manifest, dict) else None
    if not isinstance(jobs, list):
        raise RunDirError(f"{Path(path) / layout.SWEEP} has no job list: it was not written by socialgym")
    for i, job in enumerate(jobs):
        ok = isinstance(job, dict) and isinstance(job.get("out"), str) and isinstance(job.get("condition_id"), str)
        if not ok or not _JOB_OUT.fullmatch(job["out"]) or not _CONDITION_ID.fullmatch(job["condition_id"]) \
                or job["out"].split("/")[1] != job["condition_id"] \
                or (job.get("fork_from") is not None and not _JOB_OUT.fullmatch(str(job["fork_from"]))):
            raise RunDirError(f"{Path(path) / layout.SWEEP}: job {i} names a folder socialgym does not write "
                              f"({str(job.get('out') if isinstance(job, dict) else job)[:80]!r}); the manifest was "
                              "edited: restore it or start a new sweep")
    return manifest


def write_sweep(path: Path, manifest: dict) -> None:
    write_json(Path(path) / layout.SWEEP, manifest, default=str, ensure_ascii=True)


# ---------------------------------------------------------------------------------- per-round files
def load_tie_matrix(path: Path, n: int | None = None):
    """The tie matrix in ``path`` (a scipy ``save_npz`` file) as CSR, every array checked before
    scipy touches it: scipy's own loader bounds nothing, and its arithmetic on an index past the
    matrix (or a negative one) crashes the process or corrupts its heap. ``n``: the run's number of
    agents, when known. ValueError naming the file and what is wrong."""
    import numpy as np
    import scipy.sparse as sp

    def bad(why: str) -> ValueError:
        return ValueError(f"could not read the tie matrix {path}: {why}")

    try:
        with np.load(path, allow_pickle=False) as npz:
            arrays = {key: npz[key] for key in npz.files}
    except Exception as exc:                 # a truncated or foreign file: say which
        raise bad(f"{type(exc).__name__}: {exc}") from None
    fmt = arrays.get("format")
    fmt = fmt.item() if isinstance(fmt, np.ndarray) and fmt.size == 1 else None
    fmt = fmt.decode("ascii", "replace") if isinstance(fmt, bytes) else fmt
    if fmt not in ("csr", "csc", "coo"):
        raise bad(f"not a sparse matrix of a known format (format {fmt!r})")
    shape = arrays.get("shape")
    if shape is None or shape.shape != (2,) or shape.dtype.kind not in "iu":
        raise bad("no shape of two integers")
    rows, cols = (int(x) for x in shape)
    if rows != cols or rows < 0 or rows > 10**8 or (n is not None and rows != n):
        raise bad(f"shape {rows} x {cols}, not the square matrix of the run's "
                  f"{n if n is not None else 'agents'}")
    need = ("row", "col", "data") if fmt == "coo" else ("indices", "indptr", "data")
    if any(key not in arrays or arrays[key].ndim != 1 for key in need):
        raise bad(f"missing or misshapen arrays (a {fmt} matrix needs {', '.join(need)})")
    data = arrays["data"]
    if data.dtype.kind not in "iuf" or not np.isfinite(data).all():
        raise bad("weights that are not finite numbers")
    for key in need[:-1]:
        if arrays[key].dtype.kind not in "iu":
            raise bad(f"{key} that are not integers")
    if fmt == "coo":
        row, col = arrays["row"], arrays["col"]
        if not (len(row) == len(col) == len(data)):
            raise bad("row, col and data of different lengths")
        if len(row) and (row.min() < 0 or row.max() >= rows or col.min() < 0 or col.max() >= cols):
            raise bad("an index outside the matrix")
        return sp.coo_matrix((data, (row, col)), shape=(rows, cols)).tocsr()
    indices, indptr = arrays["indices"], arrays["indptr"]
    if len(indptr) != rows + 1 or (len(indptr) and (indptr[0] != 0 or indptr[-1] != len(indices)
                                                   or (np.diff(indptr) < 0).any())):
        raise bad("an index pointer that does not fit the matrix")
    if len(indices) != len(data):
        raise bad("indices and data of different lengths")
    if len(indices) and (indices.min() < 0 or indices.max() >= cols):
        raise bad("an index outside the matrix")
    make = sp.csr_matrix if fmt == "csr" else sp.csc_matrix
    return make((data, indices, indptr), shape=(rows, cols)).tocsr()
