"""The viewer over HTTP (real uvicorn on 127.0.0.1 port 0): every page, escaping of hostile
entries, the token, the listen rules, and the static copy."""

from __future__ import annotations

import asyncio
import re
import socket
import subprocess
from pathlib import Path

import pytest

from lifeline.errors import ConfigError
from lifeline_mesh.transport.addresses import listen_socket
from lifeline_mesh.ui.server import check_listen
from tests.support.clirun import lifeline
from tests.support.mesh_procs import cli
from tests.support.ui_project import HUGE_BODY_CHARS, Project, build_project
from tests.support.ui_server import fetch, running_viewer

TOKEN = "0123456789abcdef-token"


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Project:
    return build_project(tmp_path_factory.mktemp("ui") / "project")


@pytest.fixture(scope="module")
def base(project: Project) -> str:
    with running_viewer(project.root) as url:
        yield url  # type: ignore[misc]


def _get(base: str, path: str) -> str:
    status, body, headers = fetch(base + path)
    assert status == 200, (path, status, body[:500])
    assert "script-src 'self'" in headers["content-security-policy"]
    assert headers["x-content-type-options"] == "nosniff"
    assert re.fullmatch(r"app;dur=\d+\.\d", headers["server-timing"])  # the server's own time
    return body


def test_home_redirects_to_the_default_line(base: str) -> None:
    status, _body, headers = fetch(base + "/")
    assert status == 307 and headers["location"] == "/lines/ledger/"


def test_truth_lists_decisions_opens_threads_pins_with_links(base: str, project: Project) -> None:
    html = _get(base, "/lines/ledger/")
    ids = project.ids
    assert f'href="/lines/ledger/entries/{ids["fix"]}"' in html  # the correction in force
    assert "Database: PostgreSQL 16 with logical replicas" in html
    assert f'href="/lines/ledger/entries/{ids["db"]}"' not in html  # superseded: not in force
    assert "Which region for the EU tenants?" in html
    assert "pick Frankfurt" in html and f'/entries/{ids["cp2"]}"' in html  # live checkpoint
    assert f'/entries/{ids["cp1"]}"' not in html
    assert f'/entries/{ids["queue"]}"' in html and "pinned by" in html
    assert 'role="search"' in html


def test_search_hits_are_anchored_to_entries(base: str, project: Project) -> None:
    html = _get(base, "/lines/ledger/search?q=webhook+retries")
    assert f'href="/lines/ledger/entries/{project.ids["left"]}"' in html
    assert 'id="hit-' in html
    assert "0 hits" in _get(base, "/lines/ledger/search?q=zzzzqqq")


def test_entry_shows_fields_body_links_signatures_and_supersession(
    base: str, project: Project
) -> None:
    ids = project.ids
    html = _get(base, f"/lines/ledger/entries/{ids['db'][:10]}")
    assert "<strong>cross-row ACID</strong>" in html  # markdown rendered
    assert f'href="/lines/ledger/entries/{ids["fix"]}"' in html and "Superseded by" in html
    assert f'href="/lines/ledger/entries/{ids["bootstrap"]}"' in html  # parent chain
    assert "<td>author</td>" in html and "<td>yes</td>" in html  # a valid author signature
    merge = _get(base, f"/lines/ledger/entries/{ids['merge']}")
    assert f'/entries/{ids["left"]}"' in merge and f'/entries/{ids["right"]}"' in merge


def test_history_pages_and_filters(base: str, project: Project) -> None:
    html = _get(base, "/lines/ledger/history")
    assert html.count('<tr class="superseded">') == 1  # the original decision
    decisions = _get(base, "/lines/ledger/history?kind=decision")
    assert "Queue: SQS" in decisions and "Refund status page" not in decisions
    bob = _get(base, "/lines/ledger/history?author=bob&agent=claude")
    assert "pick Frankfurt" in bob and "Queue: SQS" in bob and "Payments service" not in bob
    thread = _get(base, "/lines/ledger/history?thread=eu-region")
    assert "measure latency" in thread and "Queue: SQS" not in thread
    assert "No entry matches." in _get(base, "/lines/ledger/history?since=2030-01-01")
    assert "A huge body" in _get(base, "/lines/ledger/history?since=2026-02-01&until=2026-02-01")
    status, body, _h = fetch(base + "/lines/ledger/history?since=yesterday")
    assert status == 400 and "is not a date" in body


@pytest.fixture(scope="module")
def long_line(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """120 entries in a chain; entries 5 and 100 are fixes, the rest notes."""
    import asyncio

    from lifeline.entry import Entry
    from lifeline.store.sqlite import SqliteStore

    root = tmp_path_factory.mktemp("long")

    async def fill() -> None:
        (root / ".lifeline").mkdir()
        async with await SqliteStore.open(root / ".lifeline" / "ledger.db") as store:
            prev: tuple[str, ...] = ()
            batch = []
            for n in range(120):
                e = Entry.create(
                    ts=f"2026-01-01T00:00:{n // 10:02d}.{n:06d}Z",
                    kind="fix" if n in (5, 100) else "note",
                    summary=f"entry number {n:03d}",
                    body="",
                    author="t",
                    parents=prev,
                )
                prev = (e.id,)
                batch.append(e)
            await store.append_many(batch)

    asyncio.run(fill())
    return root


def _walk(url: str, path: str) -> tuple[list[str], int]:
    """Follow "Older entries" from ``path``: (entry numbers seen, pages)."""
    seen: list[str] = []
    pages = 0
    while path:
        html = _get(url, path.replace("&amp;", "&"))
        pages += 1
        seen += re.findall(r"entry number (\d{3})", html)
        found = re.search(r'href="([^"]+)" rel="next"', html)
        path = found.group(1) if found else ""
    return seen, pages


def test_history_pages_by_keyset(long_line: Path) -> None:
    with running_viewer(long_line) as url:
        seen, pages = _walk(url, "/lines/ledger/history")
    assert seen == [f"{n:03d}" for n in range(119, -1, -1)] and pages == 3


def test_a_filtered_page_scans_a_bounded_window(
    long_line: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lifeline_mesh.ui import reader

    monkeypatch.setattr(reader, "SCAN_BUDGET", 30)
    with running_viewer(long_line) as url:
        first = _get(url, "/lines/ledger/history?kind=fix")
        assert "entry number 100" in first and "among these 30 entries" not in first
        seen, pages = _walk(url, "/lines/ledger/history?kind=fix")
        assert "No entry of kind" not in _get(url, "/lines/ledger/history?kind=fix")
        assert "No entry matches." in _get(url, "/lines/ledger/history?kind=milestone")
    assert seen == ["100", "005"] and pages == 4  # windows of 30 over 120 entries


def test_graph_draws_forks_merges_and_corrections(base: str, project: Project) -> None:
    ids = project.ids
    svg = _get(base, f"/lines/ledger/graph/{ids['note']}")
    assert "<svg" in svg and "fork-ring" in svg and "<polygon" in svg  # fork and merge
    assert svg.count('<a href="/lines/ledger/graph/') >= 4
    fixed = _get(base, f"/lines/ledger/graph/{ids['fix']}")
    assert 'class="edge correction"' in fixed and 'class="node kind-decision superseded' in fixed


def test_mesh_shows_node_members_peers_lines(base: str) -> None:
    html = _get(base, "/mesh")
    assert "demo-mesh" in html and "(this node)" in html and "CA" in html
    assert "127.0.0.1:7411" in html and "4210/18877 bytes" in html and 'class="failing"' in html
    assert '<svg xmlns="http://www.w3.org/2000/svg" class="topology"' in html
    assert 'href="/lines/ledger/"' in html


def test_hostile_text_is_escaped_everywhere(base: str, project: Project) -> None:
    pages = [
        "/lines/ledger/",
        f"/lines/ledger/entries/{project.ids['hostile']}",
        "/lines/ledger/history",
        f"/lines/ledger/graph/{project.ids['hostile']}",
        "/mesh",
        "/lines/ledger/search?q=%3Cscript%3Ehostile",
    ]
    for path in pages:
        html = _get(base, path)
        assert "<script>window" not in html, path
        assert not re.search(r"(href|src)=\"\s*(javascript|data|vbscript):", html, re.I), path
        assert "onerror=" not in html.replace("onerror=&#34;", "").replace("onerror=&quot;", ""), (
            path
        )
    entry = _get(base, f"/lines/ledger/entries/{project.ids['hostile']}")
    assert "&lt;script&gt;window.__pwned = 1&lt;/script&gt;" in entry
    assert 'href="https://example.org/docs"' in entry  # safe links keep their target
    assert "[here](javascript:window.__pwned=2)" in entry  # an unsafe one stays text
    assert "&lt;i&gt;mallory&lt;/i&gt;" in entry


def test_a_huge_body_is_cut_with_a_marker(base: str, project: Project) -> None:
    html = _get(base, f"/lines/ledger/entries/{project.ids['huge']}")
    assert "more characters not shown" in html
    assert len(html) < HUGE_BODY_CHARS


def test_unknown_things_get_a_page_that_says_so(base: str) -> None:
    for path, status in [
        ("/lines/nope/", 404),
        ("/lines/ledger/entries/ffffffffffff", 404),
        ("/lines/ledger/entries/xyz", 404),
        ("/lines/BAD NAME/", 400),
        ("/lines/ledger/history?before=zzz", 400),
    ]:
        code, body, _h = fetch(base + path.replace(" ", "%20"))
        assert code == status, (path, code)
        assert "<h1>" in body


def test_token_is_required_when_set(project: Project) -> None:
    with running_viewer(project.root, token=TOKEN) as url:
        assert fetch(url + "/mesh")[0] == 401
        assert fetch(url + "/mesh", {"Authorization": "Bearer wrong-token-1234567"})[0] == 401
        assert fetch(url + "/mesh", {"Authorization": f"Bearer {TOKEN}"})[0] == 200
        status, _b, headers = fetch(url + f"/mesh?token={TOKEN}")
        assert status == 303 and headers["location"] == "/mesh"
        cookie = headers["set-cookie"].split(";")[0]
        assert "HttpOnly" in headers["set-cookie"]
        assert fetch(url + "/mesh", {"Cookie": cookie})[0] == 200
        # the cookie is a key of this process, not the token: a browser sends it to every
        # port of the host, so another program there must not learn the token from it
        assert TOKEN not in headers["set-cookie"]
        assert fetch(url + "/mesh", {"Cookie": f"lifeline_ui_session={TOKEN}"})[0] == 401
    with running_viewer(project.root, token=TOKEN) as again:  # a new process: a new key
        assert fetch(again + "/mesh", {"Cookie": cookie})[0] == 401


def test_listen_rules() -> None:
    assert check_listen("127.0.0.1:0", remote=False, token=None) == ("127.0.0.1", 0)
    assert check_listen("[::1]:80", remote=False, token=None) == ("::1", 80)
    with pytest.raises(ConfigError, match="not a loopback address"):
        check_listen("0.0.0.0:8470", remote=False, token=TOKEN)
    with pytest.raises(ConfigError, match="needs a token"):
        check_listen("0.0.0.0:8470", remote=True, token=None)
    with pytest.raises(ConfigError, match="shorter than 16"):
        check_listen("0.0.0.0:8470", remote=True, token="short")
    assert check_listen("0.0.0.0:8470", remote=True, token=TOKEN) == ("0.0.0.0", 8470)


def _cli(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return cli("lifeline_mesh", root, *args, check=False)


def test_cli_refuses_a_public_address_without_flag_and_token(tmp_path: Path) -> None:
    done = _cli(tmp_path, "ui", "--listen", "0.0.0.0:0")
    assert done.returncode == 2 and "not a loopback address" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_static_copy_has_every_page_with_relative_links(project: Project, tmp_path: Path) -> None:
    out = tmp_path / "site"
    done = _cli(project.root, "ui", "--static", str(out))
    assert done.returncode == 0, done.stderr
    index = out / "lines" / "ledger" / "index.html"
    assert index.exists() and (out / "mesh.html").exists() and (out / "assets/style.css").exists()
    for entry_id in project.ids.values():
        assert (out / "lines/ledger/entries" / f"{entry_id}.html").exists()
        assert (out / "lines/ledger/graph" / f"{entry_id}.html").exists()
    assert (out / "sessions.html").exists() and (out / "lines/sessions/unfinished.html").exists()
    assert len(list((out / "lines/sessions/sessions").glob("*.html"))) > 5
    broken = []
    for page in out.rglob("*.html"):
        # an entry's body is its author's text (a transcript part may link "/en/…"): the
        # viewer's own links are what must be relative
        text = re.sub(r'<section class="body".*?</section>', "", page.read_text(), flags=re.S)
        assert 'href="/' not in text and 'src="/' not in text, page
        assert "<form" not in text, page
        for link in re.findall(r'(?:href|src)="([^"#?]+)"', text):
            if link.startswith(("http:", "https:", "mailto:")):
                continue
            if not (page.parent / link).exists():
                broken.append((str(page.relative_to(out)), link))
    assert broken == []


def test_mesh_links_verify_findings_to_their_entries(tmp_path: Path) -> None:
    import shutil
    import sqlite3

    from tests.support.ui_project import build_project

    project = build_project(tmp_path / "p")
    victim = project.ids["queue"]
    conn = sqlite3.connect(project.root / ".lifeline" / "ledger.db")
    with conn:  # altered after it was written: its id no longer matches its content
        conn.execute("UPDATE entries SET summary = 'Queue: Kafka' WHERE id = ?", (victim,))
    conn.close()
    out = tmp_path / "site"
    done = _cli(project.root, "ui", "--static", str(out))
    assert done.returncode == 0, done.stderr
    mesh = (out / "mesh.html").read_text()
    assert "Line ledger: <strong>2 failures</strong>" in mesh and "(s)" not in mesh
    assert f'href="lines/ledger/entries/{victim}.html"' in mesh
    shutil.rmtree(out)


def test_accepted_connections_send_without_waiting_for_acks() -> None:
    """The viewer's (and the remote MCP's) listening socket names TCP as its protocol, so
    asyncio sets TCP_NODELAY on every accepted connection. With protocol 0 it did not, and
    each response after the first on a kept-alive connection waited 40 ms for a delayed ACK."""

    async def accepted_nodelay() -> int:
        sock = listen_socket("127.0.0.1", 0, hint="")
        seen: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        class Probe(asyncio.Protocol):
            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                conn = transport.get_extra_info("socket")
                seen.set_result(conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
                transport.close()

        server = await asyncio.get_running_loop().create_server(Probe, sock=sock)
        _reader, writer = await asyncio.open_connection(*sock.getsockname()[:2])
        try:
            return await asyncio.wait_for(seen, 10)
        finally:
            writer.close()
            server.close()
            await server.wait_closed()

    assert asyncio.run(accepted_nodelay()) != 0


def test_a_line_of_one_entry_reads_1_entry_on_truth_and_history(tmp_path: Path) -> None:
    assert lifeline(tmp_path, "init").returncode == 0
    assert lifeline(tmp_path, "log", "--kind", "note", "--summary", "only").returncode == 0
    with running_viewer(tmp_path) as url:
        truth = _get(url, "/lines/ledger/")
        history = _get(url, "/lines/ledger/history")
    assert '<p class="meta">1 entry · head' in truth, truth
    assert '<p class="meta">1 entry in the line;' in history, history
    assert "1 entries" not in truth + history
