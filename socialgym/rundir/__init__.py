"""The run directory: the one home of its format.

``layout`` names every file and column of a run, sweep, study or moderation directory;
``files`` reads and writes JSON, JSON lines and CSV atomically and forgivingly; ``runs`` writes
a run's small files by what they are (its summary, run info, personas; the sweep manifest) and
says what a directory holds; ``lock`` gives one writer per directory;
``run.Run`` reads one run directory with one error policy (a missing file is empty, a damaged one
recorded or raised, naming it). Everything that reads or writes a run — the runner and recorder,
sweeps and forks, the studies, the report, ``compare`` and the viewer — goes through this package.

Layer: above the policies, below the viewer and the experiments (it imports only the platform).
"""

from socialgym.rundir import layout
from socialgym.rundir.lock import DirectoryBusy, writer_lock, writes
from socialgym.rundir.runs import (RunDirError, RunFileError, is_sweep, kind_of, read_run_info, read_summary, read_sweep, status,
                                   was_started, write_personas, write_run_info, write_summary, write_sweep)
from socialgym.rundir.run import Run, survey_means

__all__ = ["layout", "Run", "RunDirError", "RunFileError", "DirectoryBusy", "writer_lock", "writes", "kind_of", "is_sweep",
           "was_started", "read_summary", "write_summary", "status", "read_run_info", "write_run_info", "write_personas",
           "read_sweep", "write_sweep", "survey_means"]
