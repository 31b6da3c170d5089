"""Open the built website in headless Chromium (``make site-check``): what a reader's browser does with it.

Serves build/site/html on a local port and, with Playwright driving Debian's Chromium (``/usr/bin/chromium``, or
$CHROMIUM): opens the landing page and two chapter pages and fails on any console error or page error; unfolds a
folded solution by clicking it and checks that its code is then visible; searches for a chapter's subject and checks
that the results link that chapter. Screenshots go to build/site/screenshots (git-ignored). Exits 0 when all holds,
1 when something does not, 2 when the site is not built or Chromium is missing (saying what to install).
"""
from __future__ import annotations

import functools
import http.server
import os
import shutil
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HTML = ROOT / "build" / "site" / "html"
SHOTS = ROOT / "build" / "site" / "screenshots"
CHAPTERS = ["notebooks/04_frame_sharing.html", "notebooks/07c_your_own_dqn.html"]  # the second has a solution
SEARCH = ("frame sharing", "notebooks/04_frame_sharing.html")  # a query, and a page its results must link


def chromium() -> str | None:
    return os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")


def serve(folder: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    """``folder`` over HTTP on a free local port, in a background thread; returns the server and its address."""
    handler = functools.partial(QuietHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_port}/"


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


def check(base: str, browser) -> list[str]:
    """What went wrong in the browser, as sentences (none when the site works)."""
    problems: list[str] = []
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    page.on("console", lambda m: errors.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    page.on("response", lambda r: errors.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None)
    for name, path in [("landing", "index.html")] + [(Path(c).stem, c) for c in CHAPTERS]:
        errors.clear()
        page.goto(base + path, wait_until="networkidle")
        page.screenshot(path=str(SHOTS / f"{name}.png"))
        problems += [f"{path}: {e}" for e in errors]
        if name == "landing" and "DQN Memory Course" not in page.title():
            problems.append(f"index.html: title {page.title()!r}")

    page.goto(base + CHAPTERS[1], wait_until="networkidle")
    folded = page.locator("div.tag_solution details").first
    if folded.count() == 0:
        problems.append(f"{CHAPTERS[1]}: no folded solution found")
    else:
        code = folded.locator("div.cell_input")
        if code.is_visible():
            problems.append(f"{CHAPTERS[1]}: the solution's code is visible before it is unfolded")
        folded.locator("summary").click()
        code.wait_for(state="visible", timeout=5_000)
        folded.scroll_into_view_if_needed()
        page.screenshot(path=str(SHOTS / "solution-unfolded.png"))

    query, wanted = SEARCH
    page.goto(base + "search.html?q=" + query.replace(" ", "+"), wait_until="networkidle")
    try:
        page.wait_for_selector(f"#search-results a[href*='{Path(wanted).stem}']", timeout=15_000)
    except Exception:  # noqa: BLE001  (Playwright's TimeoutError: the result never came)
        problems.append(f"search for {query!r}: no result links {wanted}")
    page.screenshot(path=str(SHOTS / "search.png"))
    return problems


def main() -> int:
    if not (HTML / "index.html").exists():
        print("error: no website built: run `make site` first", file=sys.stderr)
        return 2
    exe = chromium()
    if exe is None:
        print("error: Chromium not found. Install Debian's package (`sudo apt-get install chromium`) or set "
              "$CHROMIUM to a Chromium or Chrome binary; Playwright's own browser download is not needed",
              file=sys.stderr)
        return 2
    from playwright.sync_api import sync_playwright

    SHOTS.mkdir(parents=True, exist_ok=True)
    server, base = serve(HTML)
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=exe, headless=True, args=["--no-sandbox"])
            try:
                problems = check(base, browser)
            finally:
                browser.close()
    finally:
        server.shutdown()
    for p in problems:
        print(f"site-check: {p}", file=sys.stderr)
    print(f"site-check: {'FAILED' if problems else 'ok'}: landing page, {len(CHAPTERS)} chapters, a folded solution "
          f"opened, a search; screenshots in {SHOTS.relative_to(ROOT)}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
