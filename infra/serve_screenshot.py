"""A PNG of a running ``deepsent serve``'s search page, recorded in docs/screenshots/manifest.json.

Usage (with ``deepsent serve`` answering at URL, e.g. on the store of ``make run``)::

    .venv/bin/python infra/serve_screenshot.py [--url http://127.0.0.1:8000] [--query "cordless drill"]

The page asked is ``/?q=QUERY&k=10`` (the served default mode beside BM25); what served it is its ``/readyz``
answer, merged into the manifest (``infra/screenshot_manifest.py``) with the commit and the time. Headless Chromium
(``infra/install-chromium.sh``) through Playwright, as ``infra/screenshots.py``.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import urllib.parse
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from screenshots import CHROMIUM, CHROMIUM_FLAGS, VIEWPORT  # noqa: E402  (infra/ is a folder of scripts)

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from infra import screenshot_manifest as manifest  # noqa: E402

SHOT = "serve-search-page.png"


def take(url: str, query: str, out: Path) -> Path:
    """Screenshot the page of ``query`` at ``url`` into ``out`` and record it; the PNG's path."""
    from playwright.sync_api import sync_playwright

    with urllib.request.urlopen(f"{url}/readyz", timeout=10) as answer:  # noqa: S310 (a loopback URL we were given)
        facts = json.load(answer)
    path = "/?" + urllib.parse.urlencode({"q": query, "k": 10})
    out.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page(viewport=VIEWPORT)
            page.goto(url + path)
            page.wait_for_load_state("load")
            page.screenshot(path=str(out / SHOT), full_page=True)
        finally:
            browser.close()
    taken_at = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    manifest.record(out, {SHOT: manifest.serve_page_entry(path, facts, taken_at, manifest.git_commit(ROOT))})
    return out / SHOT


def main(argv: list[str] | None = None) -> int:
    """Take the screenshot and say where it went."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--query", default="cordless drill")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    args = parser.parse_args(argv)
    print(take(args.url.rstrip("/"), args.query, args.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
