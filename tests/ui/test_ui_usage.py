"""The viewer's token usage page (a bar chart drawn on the server as SVG) and its message
search over the sessions line, fetched over HTTP from a real `lifeline-mesh ui` process on
127.0.0.1 port 0, on the real transcripts (tests/support/ui_sessions.py), hostile text
included; and the usage page in headless Chromium (the chart is drawn, no script runs)."""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.browser import chromium, require_browser
from tests.support.sessions_support import run_cli
from tests.support.ui_project import Project, build_project
from tests.support.ui_server import fetch
from tests.support.ui_sessions import HOSTILE_NATIVE

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Project:
    return build_project(tmp_path_factory.mktemp("ui-usage") / "project")


@pytest.fixture(scope="module")
def base(project: Project) -> Iterator[str]:
    command = [sys.executable, "-m", "lifeline_mesh", "--root", str(project.root)]
    proc = subprocess.Popen(
        [*command, "ui", "--listen", "127.0.0.1:0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("viewer on "):
                yield line[len("viewer on ") :].strip().rstrip("/")
                break
        else:
            raise AssertionError(f"the viewer did not start: {proc.communicate()[1]}")
    finally:
        proc.terminate()
        proc.communicate(timeout=60)


def _get(base: str, path: str, status: int = 200) -> str:
    got, body, headers = fetch(base + path)
    assert got == status, (path, got, body[:500])
    assert "script-src 'self'" in headers["content-security-policy"]
    return body


def _cli_usage(project: Project, *args: str) -> dict[str, Any]:
    done = run_cli(project.root, "sessions", "usage", *args, "--json")
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def test_usage_page_draws_the_cli_figures_as_svg(project: Project, base: str) -> None:
    for by in ("day", "model", "tool", "session", "project"):
        page = _get(base, f"/lines/sessions/usage?by={by}")
        report = _cli_usage(project, "--by", by)
        (svg,) = re.findall(r"<svg [^>]*class=\"usage\".*?</svg>", page, re.S)
        assert svg.count('<g class="bar">') == len(report["rows"]) > 0, by
        total = report["total"]["tokens"]["total"]
        row = re.search(r'<tr class="total">(.*?)</tr>', page, re.S)
        assert row is not None and f"{total:,}" in row.group(1), by
        assert f"{report['total']['cost']:,.2f}" in row.group(1)
        for line in report["rows"][:5]:  # each bar says its figures, escaped
            assert f"{line['tokens']['total']:,} tokens" in svg
    page = _get(base, "/lines/sessions/usage?by=model")
    assert "No price known for" in page and "gemini-3-flash-preview" in page
    assert "Prices as of 2025-" in page
    tool = _get(base, "/lines/sessions/usage?by=day&tool=codex&since=2025-01-01")
    codex = _cli_usage(project, "--by", "day", "--tool", "codex", "--since", "2025-01-01")
    assert tool.count('<g class="bar">') == len(codex["rows"])
    bad = _get(base, "/lines/sessions/usage?by=week", 400)
    assert "by='week' is not one of" in html.unescape(bad)
    worse = _get(base, "/lines/sessions/usage?since=yesterday-ish", 400)
    assert "is not a date" in worse
    for far in ("99999999999999999999d", "999999d", "%C2%B2d"):  # OverflowError before
        assert "is not a date" in _get(base, f"/lines/sessions/usage?since={far}", 400)


def test_hostile_session_text_is_escaped_in_chart_and_table(base: str) -> None:
    page = _get(base, "/lines/sessions/usage?by=session")
    assert "<script>window.__pwned" not in page and "hunter2-secret" not in page
    assert "&lt;script&gt;" in page  # the hostile session's title, as text


def test_search_finds_messages_and_links_into_the_transcript(base: str) -> None:
    page = _get(base, "/lines/sessions/sessions-search?q=lmstudio+endpoints&tool=codex")
    links = re.findall(r'href="(/lines/sessions/sessions/[0-9a-f]{64}\?from=(\d+))"', page)
    assert links and "tool" in page
    href, offset = links[0]
    transcript = _get(base, html.unescape(href))
    assert f"Items from {offset}." in transcript and "lmstudio" in transcript.casefold()

    hostile = _get(base, "/lines/sessions/sessions-search?q=login+password")
    assert "&lt;script&gt;window.__pwned = 5&lt;/script&gt;" in hostile
    assert "hunter2-secret" not in hostile and "[REDACTED:env-secret]" in hostile
    none = _get(base, "/lines/sessions/sessions-search?q=zzqqxxnotaword")
    assert "No message matches." in none
    # the line's own search goes to its messages, not to its 48 KB parts
    got, _body, headers = fetch(base + "/lines/sessions/search?q=lmstudio")
    assert got == 307 and headers["location"] == "/lines/sessions/sessions-search?q=lmstudio"
    assert _get(base, "/lines/ledger/search?q=PostgreSQL").count("hit") >= 1
    listing = _get(base, "/lines/sessions/sessions")
    assert 'href="/lines/sessions/usage"' in listing
    assert 'href="/lines/sessions/sessions-search"' in listing
    assert HOSTILE_NATIVE  # the hostile session is part of the line searched above


@pytest.mark.browser
def test_usage_page_in_a_browser(base: str) -> None:
    require_browser()
    with chromium() as browser:
        browser.get(base + "/lines/sessions/usage?by=tool")
        from selenium.webdriver.common.by import By

        bars = browser.find_elements(By.CSS_SELECTOR, "svg.usage g.bar")
        assert len(bars) == 3
        widths = [
            float(r.get_attribute("width"))
            for r in browser.find_elements(By.CSS_SELECTOR, "svg.usage rect")
        ]
        assert max(widths) > 100 and all(w > 0 for w in widths)
        fill = browser.execute_script(
            "return getComputedStyle(document.querySelector('svg.usage rect')).fill"
        )
        assert fill.startswith("rgb(")  # the stylesheet reached the chart (no inline style)
        assert browser.execute_script("return window.__pwned === undefined")
