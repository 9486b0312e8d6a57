"""Tie files are checked before scipy touches them (issue 44, first class): a ties/round_NNNN.npz
with an index past the matrix or a negative one once crashed `report` and `view` with SIGSEGV
(scipy's loader bounds nothing; its arithmetic then reads and writes outside the arrays)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from socialgym.experiments import load_config, run_experiment
from socialgym.rundir.runs import load_tie_matrix

ROOT = Path(__file__).resolve().parents[1]
RUN = {"seed": 1, "env": {"n_agents": 6, "max_rounds": 2, "recommender": "random"},
       "policy": {"kind": "greedy"}, "logging": {"report": False, "progress": False}}


def _save_csr(path: Path, data, indices, indptr, shape) -> None:
    """What scipy's save_npz writes, with the arrays as given (nothing checked)."""
    np.savez(path, format=np.array(b"csr"), shape=np.array(shape), data=np.asarray(data, dtype=np.float64),
             indices=np.asarray(indices, dtype=np.int32), indptr=np.asarray(indptr, dtype=np.int32))


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("ties") / "run"
    run_experiment(load_config(RUN), out)
    return out


def test_a_sound_file_reads_as_scipy_wrote_it(run_dir):
    path = run_dir / "ties" / "round_0002.npz"
    W = load_tie_matrix(path, 6)
    assert (W != sp.load_npz(path).tocsr()).nnz == 0 and W.shape == (6, 6)


@pytest.mark.parametrize("indices, indptr, why", [
    ([0, 7], [0, 1, 2, 2, 2, 2, 2], "an index outside the matrix"),          # past the 6 x 6 matrix
    ([0, -3], [0, 1, 2, 2, 2, 2, 2], "an index outside the matrix"),         # negative
    ([0, 1], [0, 1, 5, 2, 2, 2, 2], "an index pointer that does not fit"),   # decreasing pointer
    ([0, 1], [0, 1, 2, 2, 2, 2], "an index pointer that does not fit"),      # one row short
], ids=["past", "negative", "decreasing", "short"])
def test_a_damaged_file_is_one_error_naming_it(tmp_path, indices, indptr, why):
    path = tmp_path / "round_0001.npz"
    _save_csr(path, [1.0, 2.0], indices, indptr, (6, 6))
    with pytest.raises(ValueError, match=why) as err:
        load_tie_matrix(path)
    assert str(path) in str(err.value)


def test_shape_and_weights_are_checked(tmp_path):
    path = tmp_path / "t.npz"
    _save_csr(path, [1.0], [0], [0, 1, 1], (2, 3))
    with pytest.raises(ValueError, match="shape 2 x 3"):
        load_tie_matrix(path)
    _save_csr(path, [np.nan], [0], [0, 1, 1], (2, 2))
    with pytest.raises(ValueError, match="not finite"):
        load_tie_matrix(path)
    _save_csr(path, [1.0], [0], [0, 1, 1], (2, 2))
    with pytest.raises(ValueError, match="square matrix of the run's 6"):
        load_tie_matrix(path, 6)
    path.write_bytes(b"PK\x03\x04 not a zip")
    with pytest.raises(ValueError, match="could not read the tie matrix"):
        load_tie_matrix(path)


@pytest.mark.parametrize("bad_index", [10**6, -(2**31)], ids=["past", "negative"])
def test_report_view_and_validate_do_not_crash_on_a_bad_index(run_dir, tmp_path, bad_index):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(run_dir, run)
    _save_csr(run / "ties" / "round_0002.npz", [1.0, 2.0], [0, bad_index], [0, 1, 2, 2, 2, 2, 2], (6, 6))
    for command in (["report", str(run)], ["view", str(run)], ["validate", str(run), "--out", str(tmp_path / "v")]):
        proc = subprocess.run([sys.executable, "-m", "socialgym.cli", *command], capture_output=True, text=True,
                              cwd=ROOT, timeout=300)
        assert proc.returncode in (0, 2), (command, proc.returncode, proc.stderr[-2000:])   # never a signal
        assert "Traceback" not in proc.stderr, (command, proc.stderr[-2000:])
        if proc.returncode == 2:
            errors = [line for line in proc.stderr.splitlines() if line.startswith("socialgym: error:")]
            assert len(errors) == 1 and "round_0002.npz" in errors[0] and "outside the matrix" in errors[0]
    assert "outside the matrix" in (run / "report.html").read_text()
