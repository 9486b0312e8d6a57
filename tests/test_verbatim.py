"""Prompts and docs say the papers' content in the project's own words: the shared verbatim
check (passages of 10+ words repeated from a paper) finds nothing in the package."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HOOK = ROOT.parent / "shared" / "hooks" / "verbatim.py"


@pytest.mark.skipif(not HOOK.is_file(), reason="shared/hooks/verbatim.py is not beside the checkout")
def test_no_passage_repeats_a_paper_word_for_word():
    out = subprocess.run([sys.executable, str(HOOK), "socialgym"], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""
