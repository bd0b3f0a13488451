"""Shallow join (decision 0063) through the real CLIs over mutual TLS: A creates the mesh,
holds a line with history and serves; B joins and takes the line shallow (`sync --shallow`),
reads it (context, log, verify, history), writes on it and pushes (`sync --push`); the
entry is admitted on A and reaches C, a full node; a later full `sync` deepens B. Then the
refusals: a runner never stores a snapshot that was forged, signed by a revoked node, whose
entry signature does not match, or whose tip set misses an entry (tests/support/
hostile_shallow.py serves the altered ones from a real process)."""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from lifeline.home import Home
from lifeline.store.sqlite import SqliteStore
from tests.support.history_lines import fill_history_line
from tests.support.mcp_client import mcp_client, tool_text
from tests.support.mesh_procs import cli, first_line, has_entry, serve_with_join_port

pytestmark = pytest.mark.slow

OLD_NOTES = 90  # more than the Recent section keeps: the oldest are history, not truth


async def _fill(root: Path) -> None:
    """A's line: a decision, old notes, a checkpoint, an open question, a newer decision."""
    await fill_history_line(root, OLD_NOTES, newer_decision=True)


def _rows(root: Path, sql: str) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(f"file:{Home(root).line_path('ledger')}?mode=ro", uri=True)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def _count(root: Path) -> int:
    return int(str(_rows(root, "SELECT count(*) FROM entries")[0][0]))


def _boundary(root: Path) -> int:
    return int(str(_rows(root, "SELECT count(*) FROM shallow_boundary")[0][0]))


async def _mcp_context(root: Path) -> str:
    async with mcp_client(root) as client:
        return tool_text(await client.call_tool("context", {}))


@pytest.fixture
def mesh(tmp_path: Path) -> Iterator[tuple[Path, Path, Path, str]]:
    """A (the mesh's creator, serving, holding the line), B and C (members)."""
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    for root in (a, b, c):
        root.mkdir()
        cli("lifeline", root, "init")
        cli("lifeline_mesh", root, "share", "ledger")
    cli("lifeline_mesh", a, "init", "--new-mesh", "team")
    asyncio.run(_fill(a))
    with serve_with_join_port(a) as (address, join_address):
        for root in (b, c):
            token = cli("lifeline_mesh", a, "invite", "--address", join_address).stdout.strip()
            cli("lifeline_mesh", root, "join", token)
        yield a, b, c, address


def test_a_shallow_node_reads_writes_pushes_and_deepens(
    mesh: tuple[Path, Path, Path, str],
) -> None:
    a, b, c, address = mesh
    total = _count(a)
    out = cli("lifeline_mesh", b, "sync", "--shallow", address, "--json").stdout
    report = json.loads(out)[0]
    assert report["role"] == "shallow", report
    held = _count(b)
    assert held == report["entries_added"] < total  # the truth, not the history
    assert _boundary(b) == 1  # the oldest note kept names a parent that is not here

    context = cli("lifeline", b, "context").stdout
    for text in ("Database: PostgreSQL", "Queue: Redis streams", "Which queue for refunds?"):
        assert text in context
    assert "billing" in context  # the thread's newest checkpoint: ## Resume
    assert "Redis streams" in cli("lifeline", b, "recall", "Redis").stdout
    assert "Queue: Redis streams" in asyncio.run(_mcp_context(b))  # MCP reads it too

    history = cli("lifeline", b, "history")
    assert "old note 89" in history.stdout and "old note 0" not in history.stdout
    assert "is shallow" in history.stderr and "older history is not here" in history.stderr

    verified = cli("lifeline", b, "verify")  # exit 0: absent parents are no damage
    assert "all ids and parents verify" in verified.stdout
    assert "shallow: 1 parent link leads to older history" in verified.stdout
    mesh_verify = cli("lifeline_mesh", b, "verify")
    assert "OK:" in mesh_verify.stdout, mesh_verify.stdout
    assert "is shallow" in mesh_verify.stdout and "verifies)" in mesh_verify.stdout

    written = json.loads(
        cli("lifeline", b, "log", "--kind", "note", "--summary", "found on B", "--json").stdout
    )["id"]
    cli("lifeline", b, "checkpoint", "--thread", "billing", "--done", "refunds on B")
    assert "refunds on B" in cli("lifeline", b, "resume").stdout
    pushed = json.loads(cli("lifeline_mesh", b, "sync", "--push", address, "--json").stdout)[0]
    assert pushed["role"] == "push" and pushed["entries_sent"] == 2, pushed
    assert has_entry(Home(a).line_path("ledger"), written)  # admitted on the serving node
    tips = _rows(a, "SELECT id FROM tips")
    assert tips == _rows(b, "SELECT id FROM tips")  # written on the real tips: one chain
    assert "refunds on B" in cli("lifeline", a, "resume").stdout

    cli("lifeline_mesh", c, "sync", address)  # C, a full node, takes everything from A
    assert has_entry(Home(c).line_path("ledger"), written)
    assert _count(c) == total + 2 and _boundary(c) == 0

    deepened = json.loads(cli("lifeline_mesh", b, "sync", address, "--json").stdout)[0]
    assert deepened["entries_added"] == total - held, deepened
    assert _count(b) == total + 2 and _boundary(b) == 0
    assert _rows(b, "SELECT id FROM tips") == tips
    history = cli("lifeline", b, "history")
    assert "old note 0" in history.stdout and "shallow" not in history.stderr
    assert "shallow" not in cli("lifeline", b, "verify").stdout


def _hostile(root: Path, mode: str) -> Iterator[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.support.hostile_shallow", str(root), mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        first = first_line(proc, 60, "hostile_shallow")
        assert first.startswith("listening on "), (first, proc.stderr and proc.stderr.read())
        yield first.split()[-1]
    finally:
        proc.kill()
        proc.communicate(timeout=30)


@pytest.fixture(scope="module")
def lab_made(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The two roots of ``lab``, made once for the module (eight CLI runs and a filled
    line); each test gets copies (a root holds no absolute path)."""
    made = tmp_path_factory.mktemp("lab")
    for root in (made / "a", made / "b"):
        root.mkdir()
        cli("lifeline", root, "init")
        cli("lifeline_mesh", root, "init")
        cli("lifeline_mesh", root, "share", "ledger")
    asyncio.run(_fill(made / "a"))
    return made


@pytest.fixture
def lab(lab_made: Path, tmp_path: Path) -> tuple[Path, Path]:
    """A node holding a signed line with history, and an empty node (no mesh: plain text),
    fresh copies for this test."""
    a, b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(lab_made / "a", a)
    shutil.copytree(lab_made / "b", b)
    return a, b


@pytest.mark.parametrize(
    ("mode", "says"),
    [
        ("forged", "signature by"),
        ("other-key", "carries another node's key"),
        ("entry-ts", "its signature does not match"),
        ("author-signature", "does not verify"),
        ("missing-tip", "is not among its entries"),
    ],
)
def test_an_altered_snapshot_is_refused_and_nothing_is_stored(
    lab: tuple[Path, Path], mode: str, says: str
) -> None:
    a, b = lab
    for address in _hostile(a, mode):
        done = cli("lifeline_mesh", b, "sync", "--insecure", "--shallow", address, check=False)
        assert done.returncode != 0
        error = done.stderr.strip()
        assert says in error and len(error.splitlines()) == 1, error
    assert _count(b) == 0 and _boundary(b) == 0
    assert _rows(b, "SELECT count(*) FROM attestations") == [(0,)]


def test_an_item_of_a_snapshot_refused_alone_is_reported(lab: tuple[Path, Path]) -> None:
    """A statement the joiner's notary refuses alone (a later state claiming fewer entries:
    a rollback) is left out and the rest stored, as in a full sync (decision 0111) — and,
    as there, counted in the report and warned of. It used to be dropped silently."""
    a, b = lab
    for address in _hostile(a, "rollback"):
        done = cli("lifeline_mesh", b, "sync", "--insecure", "--shallow", address, "--json")
        [report] = json.loads(done.stdout)
        assert report["entries_added"] == _count(b) > 0, report  # the rest is stored
        assert report["refused"] == 1, report
        assert "the peer sent" in report["refusals"][0], report
        assert "rolled back; refused" in report["refusals"][0], report
        warned = f"warning: line 'ledger': refused 1 item from {address} (the peer sent"
        assert warned in done.stderr and "the rest is stored" in done.stderr, done.stderr


def test_a_snapshot_signed_by_a_revoked_node_is_refused(tmp_path: Path) -> None:
    """B holds the mesh's CA and revoked A; A still serves (plain text, a lab): B refuses
    what A signed before storing any of it."""
    a, b = tmp_path / "a", tmp_path / "b"
    for root in (a, b):
        root.mkdir()
        cli("lifeline", root, "init")
        cli("lifeline_mesh", root, "share", "ledger")
    cli("lifeline_mesh", a, "init")
    cli("lifeline_mesh", b, "init", "--new-mesh", "team")
    asyncio.run(_fill(a))
    a_id = json.loads(cli("lifeline_mesh", a, "id", "--json").stdout)["node_id"]
    cli("lifeline_mesh", b, "revoke", a_id, "--reason", "laptop lost")
    proc = subprocess.Popen(
        [sys.executable, "-m", "lifeline_mesh", "--root", str(a), "serve", "--insecure"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        address = first_line(proc, 60, "serve").split()[-1]
        done = cli("lifeline_mesh", b, "sync", "--insecure", "--shallow", address, check=False)
    finally:
        proc.kill()
        proc.communicate(timeout=30)
    assert done.returncode != 0
    assert f"signed by node {a_id}, revoked at" in done.stderr, done.stderr
    assert _count(b) == 0


async def _entry_on_an_absent_parent(root: Path) -> str:
    """B stores, signed, an entry naming a parent nobody holds, recorded on B's boundary as
    if older history (the ledger's own write path refuses such a parent): what a hostile
    shallow node could try to push."""
    from lifeline.entry import Entry
    from lifeline.store.shallow import record_boundary
    from lifeline_mesh.home.identity import NodeIdentity
    from lifeline_mesh.home.node_home import NodeHome
    from lifeline_mesh.notary.sign import sign_entries

    absent = "ab" * 32
    entry = Entry.create(
        ts="2026-12-03T12:00:00Z", kind="note", summary="on history nobody has", parents=(absent,)
    )
    async with await SqliteStore.open(Home(root).line_path("ledger")) as store:
        await store.run_write(lambda conn: record_boundary(conn, {absent: 7}))
        await store.append_many([entry])
        await sign_entries(store, NodeIdentity.of(NodeHome(root)), [entry])
    return entry.id


def test_a_push_naming_history_the_node_lacks_is_refused(
    mesh: tuple[Path, Path, Path, str],
) -> None:
    a, b, _c, address = mesh
    cli("lifeline_mesh", b, "sync", "--shallow", address)
    forged = asyncio.run(_entry_on_an_absent_parent(b))
    done = cli("lifeline_mesh", b, "sync", "--push", address, check=False)
    assert done.returncode != 0
    error = done.stderr.strip()
    assert "names parent abababababab, which is not in this line" in error, error
    assert len(error.splitlines()) == 1
    assert not has_entry(Home(a).line_path("ledger"), forged)


def test_a_push_carrying_a_signature_that_does_not_verify_is_refused(
    mesh: tuple[Path, Path, Path, str],
) -> None:
    """A push is answered: a signature that does not verify refuses it with the reason
    (a session would refuse that item alone and store the rest; a push caller would not
    hear of it), and the entry it signs is not stored."""
    a, b, _c, address = mesh
    cli("lifeline_mesh", b, "sync", "--shallow", address)
    note = json.loads(
        cli("lifeline", b, "log", "--kind", "note", "--summary", "altered later", "--json").stdout
    )["id"]
    with sqlite3.connect(Home(b).line_path("ledger")) as db:
        att, item = db.execute(
            "SELECT id, item FROM attestations WHERE role = 'author' AND subject = ?", (note,)
        ).fetchone()
        db.execute(
            "UPDATE attestations SET item = ? WHERE id = ?",
            (item[:-1] + bytes([item[-1] ^ 1]), att),
        )
    done = cli("lifeline_mesh", b, "sync", "--push", address, check=False)
    assert done.returncode != 0
    assert "refused the push" in done.stderr and "does not verify" in done.stderr, done.stderr
    assert not has_entry(Home(a).line_path("ledger"), note)
