"""The test suite on the newest versions pyproject.toml allows (`make test-latest`), recorded.

Run with the interpreter of the environment to test (``make test-latest`` uses
``.venv-latest``, installed without the lock):

    .venv-latest/bin/python benchmarks/test_latest.py --lock requirements/lock.txt
    .venv-latest/bin/python benchmarks/test_latest.py --lock requirements/lock.txt --write-lock

It runs the whole suite with this interpreter (as `make test` does, pytest's own settings from
pyproject.toml), then writes what it got into docs/benchmarks.md (section ``test_latest``) and
benchmarks/results_test_latest.json: the date, the machine, the wall time, the counts of passed,
failed, errored and skipped tests, the failures' names, and every installed distribution whose
version differs from the lock (or that the lock lacks). Exit status: pytest's.

``--locked`` (with ``.venv``'s interpreter): the fast tier (``make test-fast``'s selection), then
the whole suite, on the locked versions, recorded in the README (section ``test_suite``) and
benchmarks/results_test_suite.json.

``--write-lock`` instead writes the lock from this environment (after a green run here):
``pip freeze`` without the editable socialgym, torch without its local version label.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from importlib import metadata
from pathlib import Path

from _docs import machine, write_section

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).resolve().parent / "results_test_latest.json"
RESULTS_LOCKED = Path(__file__).resolve().parent / "results_test_suite.json"
FAST_TIER = ["-m", "not slow", "-n", "2", "--dist", "loadfile"]     # make test-fast's selection
LOCK_HEADER = """\
# The versions the test suite passes on (Python 3.11, Linux x86-64), used as pip constraints by
# make install / make demo / make test. Regenerate with `make lock` after `make test-latest` passes.
# torch is the CPU build (make installs torch==2.13.0 first; no local version label here).
"""


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def read_lock(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line:
            name, version = line.split("==", 1)
            pins[_canonical(name)] = version.strip()
    return pins


def installed() -> dict[str, str]:
    found = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if name and _canonical(name) not in ("socialgym", "pip", "setuptools", "wheel"):
            found[_canonical(name)] = dist.version
    return found


def differences(lock: dict[str, str], have: dict[str, str]) -> list[dict]:
    rows = []
    for name in sorted(set(lock) | set(have)):
        locked, now = lock.get(name), have.get(name)
        if now is not None and locked is not None and now.split("+")[0] == locked.split("+")[0]:
            continue
        rows.append({"package": name, "lock": locked, "latest": now})
    return rows


def run_suite(extra: list[str]) -> dict:
    with tempfile.TemporaryDirectory(prefix="socialgym-latest-") as tmp:
        junit = Path(tmp) / "junit.xml"
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "pytest", f"--junitxml={junit}", *extra], cwd=ROOT)
        seconds = time.perf_counter() - start
        counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
        failed: list[str] = []
        if junit.is_file():
            root = ET.parse(junit).getroot()
            for suite in root.iter("testsuite"):
                for key in counts:
                    counts[key] += int(suite.get(key, 0))
            for case in root.iter("testcase"):
                if case.find("failure") is not None or case.find("error") is not None:
                    failed.append(f"{case.get('classname')}::{case.get('name')}")
    passed = counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"]
    return {"returncode": proc.returncode, "seconds": round(seconds, 1), "passed": passed,
            "failed": counts["failures"], "errors": counts["errors"], "skipped": counts["skipped"],
            "failed_tests": failed}


def markdown(result: dict) -> str:
    outcome = "passed" if result["returncode"] == 0 else f"FAILED (pytest exit status {result['returncode']})"
    lines = [f"`make test-latest` on {result['date']} ({result['machine']}, Python {result['python']}): "
             f"**{outcome}** — {result['passed']} passed, {result['failed']} failed, {result['errors']} errors, "
             f"{result['skipped']} skipped in {result['seconds'] / 60:.1f} min.", ""]
    if result["failed_tests"]:
        lines += ["Failed: " + ", ".join(f"`{t}`" for t in result["failed_tests"][:20]), ""]
    diff = result["differences"]
    if diff:
        lines += ["Versions it got that differ from `requirements/lock.txt`:", "", "| package | lock | latest |",
                  "|---|---|---|"]
        lines += [f"| {d['package']} | {d['lock'] or '—'} | {d['latest'] or '—'} |" for d in diff]
    else:
        lines += ["It got exactly the versions of `requirements/lock.txt` (no newer release was allowed or out)."]
    return "\n".join(lines)


def locked_markdown(result: dict) -> str:
    def outcome(run: dict) -> str:
        return "all passed" if run["returncode"] == 0 else f"FAILED, pytest exit status {run['returncode']}"
    fast = result["fast_tier"]
    return (f"Measured on the locked versions ({result['date']}, {result['machine']}, Python {result['python']}, "
            f"CI={result['ci']}; written by `benchmarks/test_latest.py --locked`): `make test`, the full suite: "
            f"{result['passed']} passed, {result['failed']} failed, {result['errors']} errors, {result['skipped']} "
            f"skipped in {result['seconds'] / 60:.1f} min ({outcome(result)}); `make test-fast`: {fast['passed']} "
            f"passed, {fast['failed']} failed, {fast['skipped']} skipped in {fast['seconds'] / 60:.1f} min "
            f"({outcome(fast)}).")


def write_lock(lock: Path) -> None:
    pins = []
    for name, version in sorted(installed().items()):
        pins.append(f"{name}=={version.split('+')[0] if name == 'torch' else version}")
    lock.write_text(LOCK_HEADER + "\n".join(pins) + "\n")
    print(f"wrote {lock} ({len(pins)} pins)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lock", type=Path, default=ROOT / "requirements" / "lock.txt")
    parser.add_argument("--write-lock", action="store_true", help="write the lock from this environment and stop")
    parser.add_argument("--locked", action="store_true",
                        help="this environment holds the lock's versions (.venv): record the suite's time and counts "
                             "in the README instead (section test_suite)")
    parser.add_argument("pytest_args", nargs="*", help="more arguments for pytest (after --)")
    args = parser.parse_args(argv)
    if args.write_lock:
        write_lock(args.lock)
        return 0
    fast = run_suite(FAST_TIER + args.pytest_args) if args.locked else None
    result = run_suite(args.pytest_args)
    result["fast_tier"] = fast
    result.update(date=datetime.date.today().isoformat(), machine=machine(), python=platform.python_version(),
                  ci=os.environ.get("CI", "unset"),
                  differences=differences(read_lock(args.lock), installed()))
    if args.locked:
        text = locked_markdown(result)
        RESULTS_LOCKED.write_text(json.dumps(result, indent=2) + "\n")
        write_section("../README.md", "test_suite", text)
    else:
        text = markdown(result)
        RESULTS.write_text(json.dumps(result, indent=2) + "\n")
        write_section("benchmarks.md", "test_latest", text)
    print(text)
    return result["returncode"]


if __name__ == "__main__":
    sys.exit(main())
