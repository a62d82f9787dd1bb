"""The browser side of the HTML report tests: Debian's chromium and firefox-esr through Playwright,
one browser per test module, each report opened in a fresh context with every request recorded
and all but the file itself refused; helpers comparing the page with ``pyprof summarize --format
json``.

Chromium is driven over CDP; Firefox over WebDriver BiDi (Playwright's ``moz-firefox`` channel
with ``executable_path``, which drives a stock Firefox, where ``p.firefox.launch()`` alone wants
Playwright's own patched build). Neither downloads a browser."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from child import ROOT

TRACES = ROOT / "tests" / "fixtures" / "traces"
CASES = ROOT / "tests" / "fixtures" / "stats_cases"
CHROMIUM = os.environ.get("PYPROF_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
FIREFOX = os.environ.get("PYPROF_FIREFOX") or shutil.which("firefox-esr") or shutil.which("firefox") \
    or "/usr/bin/firefox-esr"
# ``@pytest.mark.parametrize("browser", EACH_BROWSER, indirect=True)``: Chromium, then Firefox. The
# Chromium case is None, the key of the unparametrized ``browser``, so the module's Chromium serves it.
EACH_BROWSER = [pytest.param(None, id="chromium"), pytest.param("firefox", id="firefox")]
HIGHLIGHT_RGB = (214, 39, 40)  # timeline.js HIGHLIGHT, #d62728
# Run before the page's own scripts: records what the page's CSP refused. Chromium logs every
# refusal on the console; Firefox ESR 153 not all (none for an <img> in the HTML itself).
PROBE_JS = """window.__pyprofProbe = {refused: []};
document.addEventListener('securitypolicyviolation',
  e => window.__pyprofProbe.refused.push(e.violatedDirective + ' ' + e.blockedURI));"""


@pytest.fixture(scope="module")
def browser(request):
    """Chromium, or with EACH_BROWSER's parametrization each browser in turn (pytest closes one
    before it opens the next)."""
    kind = getattr(request, "param", None) or "chromium"
    exe, var, deb = {"chromium": (CHROMIUM, "PYPROF_CHROMIUM", "chromium"),
                     "firefox": (FIREFOX, "PYPROF_FIREFOX", "firefox-esr")}[kind]
    if not os.path.exists(exe):
        pytest.fail(f"no {kind} at {exe}; fix: run scripts/setup.sh (it installs Debian's {deb}), "
                    f"or set {var} to a {kind} binary")
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        if kind == "chromium":
            b = p.chromium.launch(executable_path=exe)
        else:
            b = p.firefox.launch(channel="moz-firefox", executable_path=exe)
        yield b
        b.close()


class Page:
    """One report opened in a fresh context: the page, its requests and its errors."""

    def __init__(self, browser, path: Path, width: int = 1280):
        self.url = path.resolve().as_uri()
        self.kind = browser.browser_type.name
        self.context = browser.new_context(viewport={"width": width, "height": 900})
        self.context.add_init_script(PROBE_JS)
        self.requests: list[str] = []
        self.refused: list[str] = []
        self.errors: list[str] = []

        def route(r):
            if r.request.url == self.url:
                r.continue_()
            else:
                self.refused.append(r.request.url)
                r.abort()
        self.context.route("**/*", route)
        self.page = self.context.new_page()
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.goto(self.url)
        # Not wait_for_function: once its first check is false it polls with eval, which the
        # report's CSP (no unsafe-eval) refuses on a slow machine.
        self.page.wait_for_selector("body[data-ready]", state="attached", timeout=30000)
        self.ready = self.page.evaluate("document.body.dataset.ready")

    def js(self, expr: str):
        return self.page.evaluate(expr)

    def close(self) -> None:
        self.context.close()

    def check_clean(self) -> None:
        """Built without error, nothing on the console, nothing requested but the file itself."""
        assert self.ready == "1", self.js("pyprofReport.errors")
        assert self.errors == [], self.errors
        # Chromium's request log holds the file:// navigation; Firefox's (WebDriver BiDi network
        # events) holds no file:// request, only network ones, so there it is empty. Firefox ESR
        # 153 also loads a file:// subresource despite the CSP, unseen: only Chromium catches that.
        assert self.requests == ([self.url] if self.kind == "chromium" else []), self.requests
        assert self.refused == []
        assert self.js("window.__pyprofProbe.refused") == []
        assert self.js("performance.getEntriesByType('resource').map(e => e.name)") == []


@pytest.fixture()
def open_report(browser):
    pages: list[Page] = []

    def opener(path: Path, width: int = 1280) -> Page:
        p = Page(browser, path, width)
        pages.append(p)
        return p
    yield opener
    for p in pages:
        p.close()


ROWS_JS = """(fi) => [...document.querySelectorAll(`table.ops[data-file="${fi}"] tbody tr[data-key]`)].map(tr => ({
  key: JSON.parse(tr.dataset.key), count: +tr.dataset.count, total_us: +tr.dataset.totalUs,
  bookkeeping: tr.dataset.bookkeeping === "1", cells: [...tr.cells].map(td => td.textContent)}))"""
TOTAL_JS = """(fi) => { const tr = document.querySelector(`table.ops[data-file="${fi}"] tfoot tr`);
  return {count: +tr.dataset.count, total_us: +tr.dataset.totalUs, cells: [...tr.cells].map(td => td.textContent)}; }"""
RED_PIXELS_JS = """([r, g, b]) => { const c = document.getElementById('timeline');
  const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data; let n = 0;
  for (let i = 0; i < d.length; i += 4) if (d[i] === r && d[i+1] === g && d[i+2] === b) n++;
  return n; }"""


def check_table(page: Page, summary: dict, fi: int = 0) -> None:
    """The table's rows and totals are summarize's operators, figure for figure."""
    rows = page.page.evaluate(ROWS_JS, fi)
    ops = summary["operators"]
    assert len(rows) == len(ops)
    # As floats: a JavaScript number comes back as the int it prints as (1.8e19 as 18446744073709552000).
    want = sorted(([o["category"], o["name"], o["device"]], o["count"], float(o["total_us"])) for o in ops)
    assert sorted((r["key"], r["count"], float(r["total_us"])) for r in rows) == want
    by_key = {(o["category"], o["name"], o["device"]): o for o in ops}
    for r in rows:
        o = by_key[tuple(r["key"])]
        dev, cat, name, calls, total, share = r["cells"][:6]
        assert (dev, cat, name) == (o["device"] or "host", o["category"], o["name"])
        assert int(calls) == o["count"]
        assert total == f"{o['total_us'] / 1e3:.3f}"
        assert share == f"{o['share_pct']:.2f}"
        assert r["cells"][6:] == [f"{o[k] / 1e3:.3f}" for k in
                                  ("mean_us", "p50_us", "p90_us", "p99_us", "min_us", "max_us")]
    total = page.page.evaluate(TOTAL_JS, fi)
    assert total["count"] == sum(o["count"] for o in ops)
    assert float(total["total_us"]) == float(sum(o["total_us"] for o in ops))
    assert total["cells"][2] == f"{sum(o['total_us'] for o in ops) / 1e3:.3f}"
    # Rows in the page's default order: total time descending, as summarize sorts each group,
    # the engine's bookkeeping after compute, marked as summarize marks it.
    assert [r["bookkeeping"] for r in rows] == sorted(r["bookkeeping"] for r in rows)
    assert all(r["bookkeeping"] == by_key[tuple(r["key"])]["bookkeeping"] for r in rows)
    for part in (False, True):
        totals = [r["total_us"] for r in rows if r["bookkeeping"] == part]
        assert totals == sorted(totals, reverse=True)


def check_notes(page: Page, summary: dict) -> None:
    text = page.js("document.getElementById('notes').textContent")
    for note in summary["notes"]:
        assert note in text
    if not summary["notes"]:
        assert "no repairs or notes" in text


