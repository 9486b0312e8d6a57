"""Headless Chromium through Selenium, with nothing downloaded at run time.

Debian's ``chromium`` and ``chromium-driver`` (``make browser`` installs both): the driver's path
is given to the service, so Selenium Manager (which would fetch a driver from the network) is
never asked. Shared by tests/test_viewer_browser.py and benchmarks/screenshot_viewer.py.

    reason = missing()           # None, or why no browser can be driven here
    with headless_chrome(1400, 1000) as driver:
        driver.get(path.as_uri())
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


def missing() -> str | None:
    """Why the browser cannot be driven on this machine, or None when it can."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium not installed: pip install -e '.[test]'"
    absent = [p for p in (CHROMIUM, CHROMEDRIVER) if not (os.path.isfile(p) and os.access(p, os.X_OK))]
    if absent:
        return (f"{' and '.join(absent)} not found: `make browser` (or apt-get install chromium "
                "chromium-driver) to run the browser tests")
    return None


@contextlib.contextmanager
def headless_chrome(width: int = 1400, height: int = 1000, *, profile: str | Path | None = None):
    """A headless Chromium WebDriver whose page viewport is ``width`` x ``height`` CSS pixels
    (closed on exit); raises RuntimeError when ``missing()``."""
    reason = missing()
    if reason:
        raise RuntimeError(reason)
    from selenium import webdriver

    # Selenium Manager is never needed (both paths are given); offline in case it is ever asked
    os.environ.setdefault("SE_OFFLINE", "true")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--disable-quic", "--no-first-run", "--no-default-browser-check",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-extensions", "--hide-scrollbars", "--force-device-scale-factor=1",
                f"--window-size={width},{height}"):
        options.add_argument(arg)
    tmp = None
    if profile is None:
        import tempfile
        tmp = tempfile.mkdtemp(prefix="socialgym-chromium-")
        profile = tmp
    options.add_argument(f"--user-data-dir={profile}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})   # console errors, for the tests
    service = webdriver.ChromeService(executable_path=CHROMEDRIVER)
    driver = webdriver.Chrome(options=options, service=service)
    try:
        driver.set_window_size(width, height)
        # the window's frame takes some of it: grow the window until the page's viewport is width x height
        inner_w, inner_h = driver.execute_script("return [window.innerWidth, window.innerHeight]")
        if (inner_w, inner_h) != (width, height):
            driver.set_window_size(2 * width - inner_w, 2 * height - inner_h)
        driver.set_page_load_timeout(60)
        yield driver
    finally:
        driver.quit()
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
