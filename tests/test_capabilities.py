"""tests/capabilities.py: a missing capability skips locally and fails under CI, naming what is
missing and the command that installs it; a not-applicable test skips everywhere; and no test
skips any other way (issue 43, "test tiers that hide nothing")."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

import capabilities
from capabilities import CAPABILITY, NOT_APPLICABLE, need_module, not_applicable

TESTS = Path(__file__).resolve().parent
ABSENT = "socialgym_no_such_module_for_the_tests"


@pytest.mark.parametrize("value", ["", "0", "false", "no"])
def test_a_missing_module_skips_locally_naming_it_and_the_install(monkeypatch, value):
    monkeypatch.setenv("CI", value)
    with pytest.raises(pytest.skip.Exception) as err:
        need_module(ABSENT)
    assert str(err.value.msg).startswith(CAPABILITY) and ABSENT in err.value.msg and "make install" in err.value.msg


@pytest.mark.parametrize("value", ["true", "1", "TRUE"])
def test_under_ci_a_missing_capability_fails(monkeypatch, value):
    monkeypatch.setenv("CI", value)
    with pytest.raises(pytest.fail.Exception, match=f"{CAPABILITY}.*{ABSENT}.*make install.*CI=true"):
        need_module(ABSENT)
    monkeypatch.setattr(capabilities.shutil, "which", lambda name: None)
    with pytest.raises(pytest.fail.Exception, match="node .*apt-get install nodejs"):
        capabilities.need_node()
    with pytest.raises(pytest.fail.Exception, match="chromium .*make browser"):
        capabilities.need_chromium()


def test_the_extras_name_their_install(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setitem(capabilities.EXTRA_OF, ABSENT, "torch")
    with pytest.raises(pytest.skip.Exception, match=rf"'{ABSENT}' \(extra 'torch'\).*make install .*\.\[torch\]"):
        need_module(ABSENT)
    monkeypatch.delitem(sys.modules, "llama_cpp", raising=False)       # put back when the test ends
    monkeypatch.setattr(capabilities.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(pytest.skip.Exception, match=r"'llama_cpp' \(extra 'local'\).*\.\[local\]"):
        capabilities.need_embedded_model()


@pytest.fixture
def fresh_wordlist():
    """load_wordlist() caches what it read: not across this test's stand-in lists."""
    import socialgym.metrics.language as language

    language.load_wordlist.cache_clear()
    yield language
    language.load_wordlist.cache_clear()


def test_the_word_list_is_a_capability(monkeypatch, tmp_path, fresh_wordlist):
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setattr(fresh_wordlist, "WORDLIST_PATHS", (str(tmp_path / "none"),))
    monkeypatch.delenv("SOCIALGYM_WORDLIST", raising=False)
    with pytest.raises(pytest.skip.Exception, match="English word list.*make wordlist"):
        capabilities.need_wordlist()
    (tmp_path / "words").write_text("Sun\nwarm\n")
    monkeypatch.setenv("SOCIALGYM_WORDLIST", str(tmp_path / "words"))
    fresh_wordlist.load_wordlist.cache_clear()
    assert capabilities.need_wordlist() == frozenset({"sun", "warm"})


def test_an_installed_module_that_fails_to_import_is_an_error(monkeypatch, tmp_path):
    (tmp_path / "socialgym_broken_for_the_tests.py").write_text("raise ImportError('broken inside')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("CI", "")
    with pytest.raises(ImportError, match="broken inside"):
        need_module("socialgym_broken_for_the_tests")


def test_not_applicable_skips_even_under_ci(monkeypatch):
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.skip.Exception, match=f"^{NOT_APPLICABLE}a race"):
        not_applicable("a race")


# every way pytest offers to skip or expect a failure, outside tests/capabilities.py
_SKIP = re.compile(r"pytest\.importorskip\(|pytest\.skip\(|pytest\.mark\.skip(if)?\b|pytest\.xfail\(|"
                   r"pytest\.mark\.xfail\b|unittest\.skip")


def test_every_skip_goes_through_capabilities():
    """A skip elsewhere could hide a missing install (or a broken import of socialgym itself)
    from CI: need_module/need_* for a capability, not_applicable(reason) for the rest."""
    offenders = []
    for path in sorted(TESTS.rglob("*.py")):
        if path.name in ("capabilities.py", "test_capabilities.py"):
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if _SKIP.search(line):
                offenders.append(f"{path.relative_to(TESTS)}:{number}: {line.strip()}")
    assert offenders == [], "skips outside tests/capabilities.py:\n" + "\n".join(offenders)
