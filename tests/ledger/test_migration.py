"""Switching from lifeline-context loses nothing: history over local caps, zone-less ts,
markdown-only projects (external anchors), the `.lifeline/` folder as the import path, and
the caps of config.json on MCP writes. Tests against the real 0.6.1 are in
tests/ledger/test_lc_interop.py."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
from pathlib import Path
from typing import Any

from lifeline.entry import Entry, normalize_ts
from lifeline.home import Home
from lifeline.lines import EXTERNAL_ANCHOR
from lifeline.store.sqlite import SqliteStore
from lifeline.validate import HARD_LIMITS
from lifeline.wording import count
from lifeline_mesh.notary.rules import Policy, check_attestations
from lifeline_mesh.notary.signers import FileSigners
from tests.support.clirun import lifeline
from tests.support.mcp_client import mcp_client, new_project, tool_error
from tests.support.mesh_procs import cli, serve_insecure, shared_node

REDIS = "584d0d181f11617bd98eecb258d86f595a5912250b7c0534964ff6fc47e86a03"


def _copy_project(lc_fixture: Path, dest: Path, *, markdown_only: bool = False) -> Path:
    project = dest / "old"
    project.mkdir(parents=True)
    if markdown_only:
        for name in ("LIFELINE.md", "LIFELINE.research.md"):
            shutil.copy(lc_fixture / name, project / name)
        return project
    (project / ".lifeline").mkdir()
    for name in ("ledger.db", "research.db"):
        shutil.copy(lc_fixture / ".lifeline" / name, project / ".lifeline" / name)
    return project


def _add_row(db: Path, entry: Entry) -> None:
    """Append a row the way lifeline-context stores one (payload = the entry as JSON)."""
    conn = sqlite3.connect(db)
    payload = json.dumps(entry.to_dict() | {"parents": list(entry.parents)})
    conn.execute(
        "INSERT INTO entries (id, ts, kind, dedup_key, parents, payload) VALUES (?,?,?,?,?,?)",
        (entry.id, entry.ts, entry.kind, None, json.dumps(list(entry.parents)), payload),
    )
    conn.commit()
    conn.close()


async def _ids(root: Path, line: str = "ledger") -> dict[str, Entry]:
    async with await SqliteStore.open(Home(root).line_path(line)) as store:
        return {e.id: e async for e in store.stream()}


async def test_import_keeps_history_over_local_caps_and_reads_zoneless_ts(
    tmp_path: Path, lc_fixture: Path, lc_expected: dict[str, list[dict[str, Any]]]
) -> None:
    project = _copy_project(lc_fixture, tmp_path)
    conn = sqlite3.connect(project / ".lifeline" / "ledger.db")
    (seq, ts) = conn.execute("SELECT seq, ts FROM entries ORDER BY seq LIMIT 1 OFFSET 1").fetchone()
    naive = normalize_ts(ts)[:-1]  # "...000000" without the zone, as its migrate wrote it
    conn.execute("UPDATE entries SET ts = ? WHERE seq = ?", (naive, seq))
    conn.commit()
    conn.close()
    target = tmp_path / "new"
    Home(target).settings_path.parent.mkdir(parents=True)
    Home(target).settings_path.write_text(json.dumps({"limits": {"body_bytes": 40}}))

    done = lifeline(target, "import", str(project / ".lifeline"), "--json")  # the folder works
    assert done.returncode == 0, done.stderr
    report = next(r for r in json.loads(done.stdout) if r["line"] == "ledger")
    expected = lc_expected["ledger"]
    assert report["added"] == len(expected) and report["rejected"] == []
    long_bodies = {e["id"] for e in expected if len(e["body"].encode()) > 40}
    assert set(report["over_local_caps"]) == long_bodies and long_bodies
    stored = await _ids(target)
    assert set(stored) == {e["id"] for e in expected}
    assert stored[expected[1]["id"]].ts == normalize_ts(naive + "Z")  # read as UTC
    (tmp_path / "again").mkdir()
    text = lifeline(tmp_path / "again", "import", str(project))
    assert "exceed this project's size caps" not in text.stdout  # default caps: none over
    again = tmp_path / "third"
    Home(again).settings_path.parent.mkdir(parents=True)
    Home(again).settings_path.write_text(json.dumps({"limits": {"body_bytes": 40}}))
    shown = lifeline(again, "import", str(project)).stdout
    verb = "exceeds" if len(long_bodies) == 1 else "exceed"
    assert f"{count(len(long_bodies), 'entry', 'entries')} {verb} this project's size" in shown


async def test_the_hard_cap_still_protects_the_store(tmp_path: Path, lc_fixture: Path) -> None:
    project = _copy_project(lc_fixture, tmp_path)
    db = project / ".lifeline" / "ledger.db"
    huge = Entry.create(
        ts="2026-03-01T00:00:00Z",
        kind="note",
        summary="a paste too far",
        body="x" * (HARD_LIMITS.body_bytes + 1),
        author="ana",
        parents=(REDIS,),
    )
    child = Entry.create(ts="2026-03-02T00:00:00Z", kind="note", summary="c", parents=(huge.id,))
    _add_row(db, huge)
    _add_row(db, child)
    target = tmp_path / "new"
    target.mkdir()
    done = lifeline(target, "import", str(project), "--json")
    assert done.returncode == 1
    report = next(r for r in json.loads(done.stdout) if r["line"] == "ledger")
    reasons = {r["id"]: r["reason"] for r in report["rejected"]}
    assert set(reasons) == {huge.id, child.id} and "over the cap" in reasons[huge.id]
    assert huge.id not in await _ids(target)


async def test_a_markdown_only_project_keeps_every_reproducible_entry(
    tmp_path: Path, lc_fixture: Path, lc_expected: dict[str, list[dict[str, Any]]]
) -> None:
    project = _copy_project(lc_fixture, tmp_path, markdown_only=True)
    view = project / "LIFELINE.md"
    view.write_text(view.read_text(encoding="utf-8").replace("Cache: Redis", "Cache: Valkey"))
    target = tmp_path / "new"
    target.mkdir()
    done = lifeline(target, "import", str(project), "--json")
    assert done.returncode == 1  # the unreproducible entry is still reported
    report = next(r for r in json.loads(done.stdout) if r["line"] == "ledger")
    assert [r["id"] for r in report["rejected"]] == [REDIS]
    assert report["anchors"] == [REDIS]
    assert report["added"] == len(lc_expected["ledger"]) - 1  # its descendants are kept
    async with await SqliteStore.open(Home(target).line_path("ledger")) as store:
        assert (await store.externals())[REDIS] == EXTERNAL_ANCHOR
    verified = lifeline(target, "verify")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert re.search(r"\(\d+ parent links? to external anchors\)", verified.stdout)
    (tmp_path / "txt").mkdir()
    text = lifeline(tmp_path / "txt", "import", str(project)).stdout
    assert "1 parent could not be reproduced from the markdown and is declared" in text
    rendered = lifeline(target, "render", "--stdout").stdout
    assert f"- {REDIS} is an external anchor" in rendered
    assert lifeline(target, "render").returncode == 0
    copy = lifeline(target, "--line", "copy", "ingest", str(target / "LIFELINE.md"))
    assert copy.returncode == 0, copy.stderr
    assert lifeline(target, "--line", "copy", "verify").returncode == 0


def test_render_for_lifeline_context_reads_back_here(tmp_path: Path, lc_fixture: Path) -> None:
    assert lifeline(tmp_path, "import", str(lc_fixture)).returncode == 0
    odd = lifeline(tmp_path, "log", "--kind", "note", "--summary", "by nobody", "--author", "")
    assert odd.returncode == 0, odd.stderr
    after = lifeline(tmp_path, "log", "--kind", "note", "--summary", "after nobody")
    assert after.returncode == 0
    done = lifeline(tmp_path, "render", "--format", "lifeline-context")
    assert done.returncode == 0, done.stderr
    assert "1 entry of line 'ledger' cannot be written" in done.stderr
    assert "and was left out, with 1 descendant;" in done.stderr
    text = (tmp_path / "LIFELINE.md").read_text(encoding="utf-8")
    assert text.count("<!-- lifeline:end -->") == text.count("### #") > 10
    back = tmp_path / "back"
    back.mkdir()
    shutil.copy(tmp_path / "LIFELINE.md", tmp_path / "view.md")
    ingested = lifeline(back, "ingest", str(tmp_path / "view.md"), "--json")
    assert ingested.returncode == 0, ingested.stderr
    assert json.loads(ingested.stdout)[0]["rejected"] == []


async def test_mcp_writes_honour_the_caps_of_config_json(tmp_path: Path) -> None:
    root = await new_project(tmp_path, {"default": "direct"})
    Home(root).settings_path.write_text(json.dumps({"limits": {"body_bytes": 10}}))
    async with mcp_client(root) as client:
        said = await tool_error(client, "append", kind="note", summary="s", body="x" * 50)
        assert "over the cap of 10" in said


def test_timing_of_unsigned_entries_is_a_note_unless_signatures_are_required() -> None:
    parent = Entry.create(ts="2026-02-01T00:00:00Z", kind="open", summary="q")
    # lifeline-context's approve stamps the approved entry with its proposal's earlier ts
    approved = Entry.create(
        ts="2026-01-31T00:00:00Z", kind="decision", summary="a", parents=(parent.id,)
    )
    signers = FileSigners([])
    verdict = check_attestations([parent, approved], [], signers, Policy())
    timing = [f for f in verdict.findings if f.check == "ts-before-parent"]
    assert [(f.subject, f.severity) for f in timing] == [(approved.id, "note")]
    strict = check_attestations([parent, approved], [], signers, Policy(require_signed=True))
    assert {f.severity for f in strict.findings if f.check == "ts-before-parent"} == {"fail"}


def test_every_imported_line_takes_a_new_log(tmp_path: Path, lc_fixture: Path) -> None:
    assert lifeline(tmp_path, "import", str(lc_fixture)).returncode == 0
    for line in ("ledger", "research"):
        wrote = lifeline(tmp_path, "--line", line, "log", "--kind", "note", "--summary", "next")
        assert wrote.returncode == 0, wrote.stderr
        assert lifeline(tmp_path, "--line", line, "verify").returncode == 0


async def test_a_project_migrates_in_place_with_its_folder_moved_aside(
    tmp_path: Path, lc_fixture: Path, lc_expected: dict[str, list[dict[str, Any]]]
) -> None:
    project = _copy_project(lc_fixture, tmp_path)
    (project / ".lifeline").rename(project / ".lifeline-context")
    done = lifeline(project, "import", str(project / ".lifeline-context"))
    assert done.returncode == 0, done.stderr
    assert set(await _ids(project)) == {e["id"] for e in lc_expected["ledger"]}
    assert lifeline(project, "verify").returncode == 0


def test_a_line_with_an_external_anchor_syncs_to_a_peer(tmp_path: Path, lc_fixture: Path) -> None:
    """A markdown-only project imported with an anchor (a parent nobody can reproduce)
    syncs whole to another node, the anchor declared there too (was: the peer refused the
    session, "peer declared an external in a bad line: '(anchor)'", so the line never
    synced). Real `import`, `serve` and `sync` processes."""
    project = _copy_project(lc_fixture, tmp_path, markdown_only=True)
    view = project / "LIFELINE.md"
    view.write_text(view.read_text(encoding="utf-8").replace("Cache: Redis", "Cache: Valkey"))
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    assert lifeline(a, "import", str(project)).returncode == 1  # the anchor is reported
    shared_node(b)
    cli("lifeline", b, "--line", "research", "init")  # ledger's entries cite research's
    for root in (a, b):
        for line in ("ledger", "research"):
            cli("lifeline_mesh", root, "share", line)
    with serve_insecure(a) as (_, address):
        synced = cli("lifeline_mesh", b, "sync", address, "--insecure", check=False)
    assert synced.returncode == 0, synced.stderr
    with sqlite3.connect(Home(b).line_path("ledger")) as conn:
        held = {row[0] for row in conn.execute("SELECT id FROM entries")}
    with sqlite3.connect(Home(a).line_path("ledger")) as conn:
        assert held == {row[0] for row in conn.execute("SELECT id FROM entries")}
    verified = lifeline(b, "verify")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert re.search(r"\(\d+ parent links? to external anchors\)", verified.stdout)
