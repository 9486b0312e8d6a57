"""Prompts and docs say the papers' content in the project's own words: the shared verbatim
check (passages of 10+ words repeated from a paper) finds nothing in the package."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from capabilities import not_applicable

ROOT = Path(__file__).resolve().parents[1]
HOOK = ROOT.parent / "shared" / "hooks" / "verbatim.py"


def test_no_passage_repeats_a_paper_word_for_word():
    if not HOOK.is_file():
        not_applicable("shared/hooks/verbatim.py is not beside the checkout")
    out = subprocess.run([sys.executable, str(HOOK), "socialgym"], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""
