"""What the embedded model's llama.cpp was built for, and whether that build runs anywhere.

llama.cpp built with its default ``GGML_NATIVE=ON`` compiles for the build machine's own CPU:
on a CPU that reports AMX, its matrix kernels use AMX tile instructions, which fault in a
virtual machine whose host does not hand the tile state over (a general-protection fault at
``ldtilecfg``: the server dies at its first request). ``make install`` therefore builds it with
``GGML_NATIVE=OFF`` and an explicit instruction set (AVX2, FMA, F16C on x86-64), and checks the
result with this module::

    python -m socialgym.llm.build          # the features built in; exit 1 when AMX is in the library

``socialgym doctor`` shows the same facts.
"""

from __future__ import annotations

import hashlib
import platform
import re
import shutil
import subprocess
import sys
from pathlib import Path

# every AMX instruction's mnemonic as objdump prints it (AMX-TILE, AMX-INT8, AMX-BF16, AMX-FP16)
AMX_MNEMONICS = ("ldtilecfg", "sttilecfg", "tileloadd", "tileloaddt1", "tilestored", "tilezero", "tilerelease",
                 "tdpbssd", "tdpbsud", "tdpbusd", "tdpbuud", "tdpbf16ps", "tdpfp16ps")
_AMX = re.compile(r"\s(" + "|".join(AMX_MNEMONICS) + r")\s")
_ZMM = re.compile(r"%zmm\d")


class BuildCheckError(RuntimeError):
    """The library cannot be checked here (no llama-cpp-python, no objdump)."""


def cpu_libraries() -> list[Path]:
    """llama.cpp's CPU backend libraries inside the installed ``llama_cpp`` package (one, or
    one per CPU variant in a build with dynamically loaded backends)."""
    try:
        import llama_cpp
    except ImportError:
        raise BuildCheckError("llama-cpp-python is not installed (the 'local' extra: make install)") from None
    lib = Path(llama_cpp.__file__).parent / "lib"
    found, seen = [], set()
    for path in sorted(lib.glob("*ggml-cpu*")):    # wheels hold copies where the build had links
        if path.is_file() and not path.is_symlink():
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            if digest not in seen:
                seen.add(digest)
                found.append(path)
    if not found:
        raise BuildCheckError(f"no ggml CPU library in {lib}")
    return found


def disassemble(path: str | Path) -> str:
    objdump = shutil.which("objdump")
    if objdump is None:
        raise BuildCheckError("objdump is not installed (Debian: apt-get install binutils)")
    done = subprocess.run([objdump, "-d", "--no-show-raw-insn", str(path)], capture_output=True, text=True,
                          errors="replace", check=False)
    if done.returncode != 0:
        raise BuildCheckError(f"objdump could not read {path}: {done.stderr.strip()[:200]}")
    return done.stdout


def amx_instructions(path: str | Path, text: str | None = None) -> dict[str, int]:
    """How often each AMX mnemonic occurs in the disassembly of ``path`` (``text``, when already
    disassembled; empty: none)."""
    counts: dict[str, int] = {}
    for match in _AMX.finditer(disassemble(path) if text is None else text):
        counts[match.group(1)] = counts.get(match.group(1), 0) + 1
    return counts


def uses_avx512(path: str | Path, text: str | None = None) -> bool:
    return _ZMM.search(disassemble(path) if text is None else text) is not None


def built_features() -> list[str]:
    """The CPU features llama.cpp was compiled with, as it reports them itself (``AVX2``, ``FMA``...)."""
    import llama_cpp

    info = llama_cpp.llama_print_system_info()
    text = info.decode(errors="replace") if isinstance(info, bytes) else str(info)
    return [name.strip() for name, value in re.findall(r"([A-Za-z0-9_ ]+?)\s*=\s*(\d+)", text) if value != "0"]


def cpu_flags() -> set[str]:
    """This machine's CPU flags (Linux's /proc/cpuinfo; empty elsewhere)."""
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return set()
    for line in text.splitlines():
        if line.startswith(("flags", "Features")):
            return set(line.split(":", 1)[1].split())
    return set()


def check_portable() -> dict:
    """The built libraries' facts: ``{"libraries": [...], "amx": {mnemonic: count}, "avx512": bool,
    "features": [...], "machine": "x86_64"}``; ``ok`` is False when AMX instructions are in them
    on x86-64."""
    libraries = cpu_libraries()
    amx: dict[str, int] = {}
    avx512 = False
    for path in libraries:
        text = disassemble(path)                 # once per library: the slow part
        for name, count in amx_instructions(path, text).items():
            amx[name] = amx.get(name, 0) + count
        avx512 = avx512 or uses_avx512(path, text)
    machine = platform.machine()
    return {"libraries": [str(p) for p in libraries], "amx": amx, "avx512": avx512, "features": built_features(),
            "machine": machine, "ok": not amx}


def main(argv: list[str] | None = None) -> int:
    try:
        facts = check_portable()
    except BuildCheckError as exc:
        print(f"socialgym.llm.build: error: {exc}", file=sys.stderr)
        return 2
    print(f"llama.cpp CPU library: {', '.join(facts['libraries'])}")
    print(f"built with: {' '.join(facts['features']) or '(nothing reported)'}; AVX-512 instructions: "
          f"{'yes' if facts['avx512'] else 'none'}; AMX instructions: "
          f"{', '.join(f'{k} x{v}' for k, v in sorted(facts['amx'].items())) or 'none'}")
    if not facts["ok"]:
        print("socialgym.llm.build: error: the llama.cpp CPU library holds AMX instructions: it was built for this "
              "machine's own CPU and faults where AMX is not usable; rebuild it portably with `make llama` "
              "(GGML_NATIVE=OFF)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
