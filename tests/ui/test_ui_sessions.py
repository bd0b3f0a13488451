"""The viewer's Sessions pages over HTTP (real uvicorn on 127.0.0.1 port 0) on a line the
real CLI ingested (tests/support/ui_sessions.py), hostile transcript text included; and the Entry
page's witnessed time from a state statement a real two-node sync produced."""

from __future__ import annotations

import json
import re
import sqlite3
import time
from pathlib import Path

import pytest

from lifeline.home import Home
from lifeline_mesh.ui import sessions_view
from lifeline_mesh.ui.sections import sessions as sessions_section
from tests.support.mesh_procs import SYNC_JSON, cli, serve_insecure, signed_node
from tests.support.sessions_support import run_cli
from tests.support.ui_project import Project, build_project
from tests.support.ui_server import fetch, running_viewer
from tests.support.ui_sessions import HOSTILE_NATIVE, SUBAGENT_PARENT

CODEX_CRASHED = "019a93b9-f380-7600-98ff-940e6b99603c"


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Project:
    return build_project(tmp_path_factory.mktemp("ui-sessions") / "project")


@pytest.fixture(scope="module")
def base(project: Project) -> str:
    with running_viewer(project.root) as url:
        yield url  # type: ignore[misc]


def _get(base: str, path: str, status: int = 200) -> str:
    got, body, headers = fetch(base + path)
    assert got == status, (path, got, body[:500])
    assert "script-src 'self'" in headers["content-security-policy"]
    return body


def _until(base: str, path: str, pending: str) -> str:
    """The page once it no longer shows ``pending`` (work it started in the background)."""
    deadline = time.monotonic() + 60
    while pending in (html := _get(base, path)):
        assert time.monotonic() < deadline, f"{path} still shows {pending!r} after 60 s"
        time.sleep(0.1)  # polling a background task the page started, not synchronising
    return html


def _listed(root: Path, *args: str) -> list[dict[str, object]]:
    done = run_cli(root, "sessions", *args, "--json")
    assert done.returncode == 0, done.stderr
    found: list[dict[str, object]] = json.loads(done.stdout)
    return found


def _session_links(html: str) -> list[str]:
    return re.findall(r'href="/lines/sessions/sessions/([0-9a-f]{64})"', html)


def test_the_list_shows_every_session_and_filters_by_status_tool_and_scope(
    base: str, project: Project
) -> None:
    every = _listed(project.root, "list")
    html = _get(base, "/sessions")
    assert "Sessions of <em>sessions</em>" in html
    assert sorted(_session_links(html)) == sorted(str(s["id"]) for s in every)
    crashed = _get(base, "/lines/sessions/sessions?status=crashed")
    want = [str(s["id"]) for s in every if s["status"]["status"] == "crashed"]  # type: ignore[index]
    assert want and sorted(_session_links(crashed)) == sorted(want)
    codex = _get(base, "/lines/sessions/sessions?tool=codex")
    assert sorted(_session_links(codex)) == sorted(
        str(s["id"]) for s in every if s["tool"] == "codex"
    )
    scoped = _get(base, "/lines/sessions/sessions?scope=path:~/src/acme-api")
    assert len(_session_links(scoped)) == 1
    assert "1 session matching" in scoped
    here = _get(base, "/lines/sessions/sessions?scope=.")  # the project's own: none there
    assert _session_links(here) == [] and "0 sessions matching" in here
    assert "is not one of" in _get(base, "/lines/sessions/sessions?status=nope", 400)
    assert "not a page number" in _get(base, "/lines/sessions/sessions?page=-1", 400)
    assert "not a page number" in _get(base, "/lines/sessions/sessions?page=%C2%B2", 400)
    assert "not a page number" in _get(base, "/lines/sessions/sessions?page=" + "9" * 5000, 400)


def test_the_list_is_paged(base: str, project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sessions_view, "LIST_PAGE", 4)
    monkeypatch.setattr(sessions_section, "LIST_PAGE", 4)
    total = len(_listed(project.root, "list"))
    seen: list[str] = []
    path = "/lines/sessions/sessions"
    for _ in range(10):
        html = _get(base, path)
        links = _session_links(html)
        assert 0 < len(links) <= 4
        seen += links
        nxt = re.search(r'href="([^"]+)" rel="next"', html)
        if nxt is None:
            break
        path = nxt.group(1).replace("&amp;", "&")
    assert len(seen) == len(set(seen)) == total


def test_a_hostile_transcript_is_escaped_folded_and_shows_its_redactions(base: str) -> None:
    html = _get(base, f"/lines/sessions/sessions/{HOSTILE_NATIVE}")
    main = html[html.index("<main") :]
    for raw in ("<script>window", "<img src=x", "<svg onload", "<b>login"):
        assert raw not in main
    assert "&lt;script&gt;window.__pwned = 5&lt;/script&gt;" in main
    assert "hunter2" not in html
    assert '<mark class="redacted">[REDACTED:env-secret]</mark>' in main
    call = re.search(r'<details class="call"><summary>(.*?)</summary>(.*?)</details>', main, re.S)
    assert call is not None and "<code>Bash</code>" in call.group(1)
    assert "&lt;script&gt;window.__pwned = 7&lt;/script&gt; done" in call.group(2)
    assert 'href="javascript' not in main


def test_subagents_are_nested_under_the_call_that_ran_them(base: str) -> None:
    html = _get(base, f"/lines/sessions/sessions/{SUBAGENT_PARENT}")
    pattern = r'<section class="subagent" aria-label="Subagent a881341">(.*?)</section>'
    while (nested := re.search(pattern, html, re.S)) is None:  # the page with the call
        later = re.search(r'href="([^"]+)" rel="next">Later items', html)
        assert later is not None, "no page nests subagent a881341"
        html = _get(base, later.group(1).replace("&amp;", "&"))
    assert nested is not None
    assert '<ol class="transcript">' in nested.group(1)  # its own items, inside
    assert html.count('aria-label="Subagent a881341"') == 1


def test_unfinished_lists_what_the_cli_lists_with_what_was_outstanding(
    base: str, project: Project
) -> None:
    lost = _listed(project.root, "unfinished")
    html = _until(base, "/lines/sessions/unfinished", 'id="not-yet"')
    assert lost and _session_links(html) == [str(u["id"]) for u in lost]
    for u in lost:
        assert f'<span class="tag status-{u["state"]}">{u["state"]}</span>' in html
    assert "queued input" in html
    codex = next(u for u in lost if u["tool"] == "codex")
    assert codex["unconfirmed_edits"] and codex["last_failure"]
    assert f"<li>{codex['unconfirmed_edits'][0]}</li>" in html
    assert '<p class="last-failure"><code>shell(bash -lc rg -n &#34;OLLAMA&#34; -n)' in html


def test_a_bundle_is_the_resume_text_with_a_copy_button(base: str, project: Project) -> None:
    done = run_cli(project.root, "sessions", "resume", CODEX_CRASHED)
    html = _get(base, f"/lines/sessions/sessions/{CODEX_CRASHED}/bundle")
    if done.returncode == 0:
        assert 'data-copy="bundle-text"' in html
        text = re.search(r'<pre id="bundle-text" class="bundle">(.*?)</pre>', html, re.S)
        assert text is not None and "lifeline continuation bundle" in text.group(1)
        assert "&lt;!-- lifeline continuation bundle v1 --&gt;" in text.group(1)
    else:
        assert "Not ready to resume" in html
    never = _get(base, "/lines/sessions/sessions/1af7fc5e-8455-4414-9ccd-011d40f70b2a/bundle")
    assert "Not ready to resume" in never and 'data-copy="bundle-text"' not in never
    assert "Not found" in _get(base, "/lines/sessions/sessions/ffffffffffff", 404)


def test_no_sessions_line_says_how_to_get_one(tmp_path: Path) -> None:
    root = tmp_path / "empty"
    root.mkdir()
    cli("lifeline", root, "init")
    with running_viewer(root) as url:
        assert "lifeline sessions ingest" in _get(url, "/sessions")


@pytest.mark.slow
def test_witnessed_time_comes_from_a_state_statement_a_sync_produced(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    signed_node(a, "Database: PostgreSQL")
    signed_node(b, "Cache: redis")
    head = json.loads(cli("lifeline", a, "history", "--json").stdout)
    entry_id = next(e["id"] for e in head if e["summary"] == "Database: PostgreSQL")
    with serve_insecure(a) as (_proc, address):
        cli("lifeline_mesh", b, *SYNC_JSON, address)  # B admits A's entries: B signs a state
    b_node = cli("lifeline_mesh", b, "id").stdout.strip()
    with running_viewer(b) as url:
        html = _until(url, f"/lines/ledger/entries/{entry_id}", "not computed yet")
    witnessed = re.search(r'<dd id="witnessed">(.*?)</dd>', html, re.S)
    assert witnessed is not None
    assert f"by <code>{b_node}</code>" in witnessed.group(1), witnessed.group(1)
    state = re.search(r'<time datetime="([^"]+)">', witnessed.group(1))
    assert state is not None
    conn = sqlite3.connect(Home(b).line_path("ledger"))
    try:
        signed = conn.execute(
            "SELECT ts FROM statements WHERE role = 'state' AND node_id = ?", (b_node,)
        ).fetchall()
    finally:
        conn.close()
    assert state.group(1) in {str(r[0]) for r in signed}


def test_a_session_of_one_prompt_and_one_cut_output_reads_singular(
    base: str, project: Project
) -> None:
    one = next(s for s in _listed(project.root, "list") if s["turns"] == 1 and s["truncated"] == 1)
    html = _get(base, f"/lines/sessions/sessions/{one['id']}")
    fields = html[html.index('<dl class="fields">') : html.index("</dl>")]
    assert f"<dd>1 prompt, {one['item_count']} items</dd>" in fields, fields
    assert "<dd>1 output cut to the cap</dd>" in fields, fields
