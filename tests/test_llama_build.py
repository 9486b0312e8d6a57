"""The embedded model's llama.cpp is built portably (issue 43): no AMX tile instruction in its CPU
library on x86-64 — a native build on a CPU with AMX faults at its first request in virtual machines
whose host does not pass the tile state on — and the check that says so finds AMX where it is."""

from __future__ import annotations

import platform
import shutil
import subprocess

import pytest
from capabilities import missing, need_module, not_applicable

from socialgym.llm import build

X86 = platform.machine() in ("x86_64", "AMD64")


def _need_objdump() -> None:
    if shutil.which("objdump") is None:
        missing("objdump", "apt-get install binutils")


def test_the_installed_cpu_library_holds_no_amx_instruction():
    need_module("llama_cpp")
    _need_objdump()
    if not X86:
        not_applicable("AMX is an x86-64 extension")
    libraries = build.cpu_libraries()
    assert libraries and all(p.name.startswith("libggml-cpu") for p in libraries)
    for path in libraries:
        assert build.amx_instructions(path) == {}, path
        assert not build.uses_avx512(path), f"{path} uses AVX-512: not the portable AVX2 build"


def test_the_build_reports_the_portable_instruction_set():
    need_module("llama_cpp")
    if not X86:
        not_applicable("the explicit instruction set is x86-64's")
    features = build.built_features()
    assert {"AVX", "AVX2", "FMA", "F16C"} <= set(features), features
    assert not any(f.startswith(("AVX512", "AMX")) for f in features), features


def test_the_check_finds_amx_in_a_library_that_has_it(tmp_path):
    """The null: a library compiled with AMX tile instructions must fail the same check."""
    _need_objdump()
    if not X86:
        not_applicable("AMX is an x86-64 extension")
    if shutil.which("gcc") is None:
        missing("gcc", "apt-get install gcc")
    source = tmp_path / "tiles.c"
    source.write_text("#include <immintrin.h>\n"
                      "void configure(const void *cfg) { _tile_loadconfig(cfg); _tile_zero(0); _tile_release(); }\n")
    library = tmp_path / "libtiles.so"
    done = subprocess.run(["gcc", "-O2", "-mamx-tile", "-shared", "-fPIC", str(source), "-o", str(library)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.fail(f"gcc could not compile AMX intrinsics (needs gcc >= 11): {done.stderr[:300]}")
    assert build.amx_instructions(library) == {"ldtilecfg": 1, "tilezero": 1, "tilerelease": 1}
    plain = tmp_path / "libplain.so"
    (tmp_path / "plain.c").write_text("int twice(int x) { return 2 * x; }\n")
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", str(tmp_path / "plain.c"), "-o", str(plain)], check=True)
    assert build.amx_instructions(plain) == {}


def test_the_command_fails_on_an_amx_build(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(build, "check_portable", lambda: {"libraries": [str(tmp_path / "libggml-cpu.so")],
                                                          "amx": {"ldtilecfg": 3}, "avx512": True,
                                                          "features": ["AVX2", "AMX_INT8"], "machine": "x86_64",
                                                          "ok": False})
    assert build.main([]) == 1
    out, err = capsys.readouterr()
    assert "ldtilecfg x3" in out and "make llama" in err and "GGML_NATIVE=OFF" in err
