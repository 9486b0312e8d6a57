"""The README's picture of the run viewer: `socialgym demo`'s run, replayed at round 3, one agent open.

    python benchmarks/screenshot_viewer.py                      # runs the demo, writes docs/images/viewer.png
    python benchmarks/screenshot_viewer.py --run runs/demo-3    # an existing run directory instead

Runs ``socialgym demo`` (6 LLM agents x 4 rounds on the embedded model) in a fresh temporary
directory as a user would, or takes ``--run``; builds its page (``socialgym view``: DIR/viewer.html),
opens it in headless Chromium through Selenium (Debian's ``chromium`` and ``chromium-driver``,
``make browser``; nothing is downloaded), moves the round slider to round 3 (the last round of a
shorter run), opens the page of the agent that wrote most in that round (or ``--agent``) and
saves a PNG of the window.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _browser import headless_chrome, missing  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def busiest_agent(run_dir: Path, rnd: int) -> str | None:
    """The agent with most posts, comments and DMs in round ``rnd`` (ties: the first in order)."""
    counts: Counter = Counter()
    for line in (run_dir / "events.jsonl").read_text(encoding="utf-8").splitlines():
        try:
            e = json.loads(line)
        except ValueError:                     # a last line cut short by a kill
            continue
        if e.get("round") == rnd and e.get("kind") in ("POST", "COM", "DM"):
            counts[e["sender"]] += 1 + bool(e.get("text"))
    return max(counts, key=lambda a: counts[a]) if counts else None


def rounds_completed(run_dir: Path) -> int:
    try:
        return int(json.loads((run_dir / "summary.json").read_text())["rounds_completed"])
    except (OSError, ValueError, KeyError, TypeError):
        return len(list((run_dir / "ties").glob("round_*.npz")))


def screenshot(run_dir: Path, out: Path, *, rnd: int = 3, agent: str | None = None,
               width: int = 1600, height: int = 1000) -> Path:
    from selenium.webdriver.support.ui import WebDriverWait

    from socialgym.viewer import build_viewer

    page = Path(build_viewer(run_dir))
    rnd = max(1, min(rnd, rounds_completed(run_dir) or rnd))
    agent = agent or busiest_agent(run_dir, rnd)
    out.parent.mkdir(parents=True, exist_ok=True)
    with headless_chrome(width, height) as driver:
        driver.get(page.as_uri())
        wait = WebDriverWait(driver, 15)
        wait.until(lambda d: d.execute_script("return document.readyState === 'complete'"))
        driver.execute_script("""
const el = document.querySelector('input#round');
el.value = String(arguments[0]);
el.dispatchEvent(new Event('input', {bubbles: true}));
el.dispatchEvent(new Event('change', {bubbles: true}));""", rnd)
        if agent:
            link = driver.find_element("css selector", f".agent-link[data-agent='{agent}']")
            driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", link)
            link.click()
            wait.until(lambda d: d.execute_script(
                "const p = document.querySelector('#agent-page');"
                "return p && p.getAttribute('data-agent') === arguments[0] && p.checkVisibility()", agent))
        driver.execute_script("window.scrollTo(0, 0)")
        if not driver.save_screenshot(str(out)):
            raise RuntimeError(f"the browser wrote no screenshot to {out}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", default=None, help="an existing run directory instead of a fresh demo run")
    parser.add_argument("--out", default=str(ROOT / "docs" / "images" / "viewer.png"), help="the PNG to write")
    parser.add_argument("--round", type=int, default=3, help="the round shown (default 3)")
    parser.add_argument("--agent", default=None, help="the agent whose page is open (default: the busiest)")
    parser.add_argument("--width", type=int, default=1600)
    parser.add_argument("--height", type=int, default=1000)
    args = parser.parse_args(argv)
    reason = missing()
    if reason:
        print(f"screenshot_viewer: {reason}", file=sys.stderr)
        return 2
    tmp = None
    if args.run is None:
        tmp = Path(tempfile.mkdtemp(prefix="socialgym-viewer-"))
        run_dir = tmp / "demo"
        subprocess.run([sys.executable, "-m", "socialgym.cli", "demo", "--out", str(run_dir)], check=True, cwd=ROOT)
    else:
        run_dir = Path(args.run)
    try:
        path = screenshot(run_dir, Path(args.out), rnd=args.round, agent=args.agent,
                          width=args.width, height=args.height)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"viewer of {run_dir if tmp is None else 'a fresh `socialgym demo` run'} at round {args.round}: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
