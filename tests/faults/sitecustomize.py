"""The crash tests' kill switch, in the Python processes the tests start. Test-only.

tests/conftest.py puts this directory on PYTHONPATH, so every Python subprocess of a test
session (``python -m socialgym.cli ...``, sweep workers started with "spawn") runs this file at
start-up. With ``SOCIALGYM_KILL_AT="<round>:<act|outputs|checkpoint>"`` in its environment the
process installs a runner fault hook (``socialgym.experiments.run.runner._fault_hook``) that makes
it SIGKILL itself at that point of that round: after the act step; after the round's files are
written, before the checkpoint; after the new checkpoint is written, before it replaces the old
one. Without the variable it does nothing and imports nothing.

A sitecustomize further down sys.path (the interpreter's own, if any) is run as well.
"""

import os


def _arm(spec: str) -> None:
    import signal

    from socialgym.experiments.run import runner

    r, point = spec.split(":")
    target = (int(r), point)

    def kill(r: int, point: str) -> None:
        if (r, point) == target:
            os.kill(os.getpid(), signal.SIGKILL)

    runner._fault_hook = kill


def _chain() -> None:
    """Run the next sitecustomize on sys.path, which this module shadows."""
    import importlib.machinery
    import importlib.util
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


_chain()
if os.environ.get("SOCIALGYM_KILL_AT"):
    _arm(os.environ["SOCIALGYM_KILL_AT"])
