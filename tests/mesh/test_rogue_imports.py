"""A rogue member cannot move an imported entry's ts (decision 0119).

Two real nodes over mutual TLS: H (the CA holder) holds lifeline-context's ledger (its
entries nobody signed, as `lifeline import` stores them) and attests them with
`lifeline-mesh sign --unsigned`; M, a member, syncs them
and then edits its own store by hand: two of them a minute earlier, and for the second its
own `imported` statement of that earlier ts, signed with its key. Its `sync` to H then
sends what any node's code sends of its store. Everything runs as a user runs it.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from lifeline.entry import Entry
from lifeline.home import Home
from lifeline.store.sqlite import SqliteStore
from tests.support.mesh_procs import (
    cli,
    free_port,
    free_ports,
    join_mesh,
    log_note,
    serve,
    shared_node,
)
from tests.support.rogue import (
    STORED_FORM,
    entry_ts,
    forge_author,
    forge_import,
    strip_and_backdate,
)

pytestmark = pytest.mark.slow


def _line(root: Path) -> Path:
    return root / ".lifeline" / "ledger.db"


async def _import_context(root: Path, rows: dict[str, list[dict[str, Any]]]) -> None:
    """lifeline-context's two lines, stored as an import stores them: unsigned."""
    lines = {name: [Entry.from_dict(row) for row in found] for name, found in rows.items()}
    home = {e.id: name for name, entries in lines.items() for e in entries}
    for name, entries in lines.items():
        async with await SqliteStore.open(Home(root).line_path(name)) as store:
            for parent in {p for e in entries for p in e.parents if home[p] != name}:
                await store.declare_external(parent, home[parent])
            await store.append_many(entries)


def _findings(report: dict[str, Any], check: str) -> list[dict[str, str]]:
    return [f for f in report["lines"][0]["findings"] if f["check"] == check]


def _imported(line_file: Path) -> list[str]:
    """The entries of the line an `imported` statement names, latest ts first."""
    with sqlite3.connect(line_file) as conn:
        rows = conn.execute(
            "SELECT id FROM entries WHERE id IN (SELECT subject FROM statements"
            " WHERE role = 'imported') ORDER BY ts DESC, id"
        ).fetchall()
    return [str(r[0]) for r in rows]


def test_a_member_cannot_move_an_entry_held_with_its_import_attestation(
    tmp_path: Path, lc_expected: dict[str, list[dict[str, Any]]]
) -> None:
    """M sends two attested entries a minute earlier, one with its own `imported`
    statement of that ts (signed as if a month ago). H keeps both at the ts it attested,
    refuses the copies and names M; `verify` on H passes, and notes M's statement."""
    roots = {n: tmp_path / n for n in "hm"}
    for root in roots.values():
        shared_node(root)
    join_mesh(roots["h"], [roots["m"]])
    m_id = cli("lifeline_mesh", roots["m"], "id").stdout.strip()
    asyncio.run(_import_context(roots["h"], lc_expected))
    log_note(roots["h"], "H signs what it writes: a line its nodes sign")
    cli("lifeline_mesh", roots["h"], "sign", "--unsigned")
    plain, forged = _imported(_line(roots["h"]))[:2]
    held = {e: entry_ts(_line(roots["h"]), e) for e in (plain, forged)}
    h_address = f"127.0.0.1:{free_port()}"
    with serve(roots["h"], "--listen", h_address, "--no-discovery"):
        cli("lifeline_mesh", roots["m"], "sync", h_address)
        early = {e: strip_and_backdate(_line(roots["m"]), e) for e in (plain, forged)}
        signed_at = dt.datetime.now(dt.UTC) - dt.timedelta(days=30)  # claims an old import
        forge_import(roots["m"], forged, early[forged], signed_at.strftime(STORED_FORM))
        for _ in range(2):  # and again: the refusal holds, the session still succeeds
            pushed = cli("lifeline_mesh", roots["m"], "sync", h_address, check=False)
            assert pushed.returncode == 0, pushed.stderr
    assert {e: entry_ts(_line(roots["h"]), e) for e in (plain, forged)} == held
    done = cli("lifeline_mesh", roots["h"], "verify", "--json", check=False)
    report = json.loads(done.stdout)
    assert done.returncode == 0, report
    assert not _findings(report, "ts-mismatch")
    refused = {f["subject"]: f["detail"] for f in _findings(report, "refused-copy")}
    assert set(refused) == {plain, forged}
    for entry, detail in refused.items():
        assert m_id in detail and early[entry] in detail and held[entry] in detail
    [conflict] = _findings(report, "import-conflict")
    assert conflict["subject"] == forged and m_id in conflict["detail"]
    assert early[forged] in conflict["detail"] and conflict["severity"] == "note"
    imported = {f["subject"]: f["detail"] for f in _findings(report, "imported")}
    assert m_id not in imported[forged]  # attested by H, at the ts H holds


async def _unattested(root: Path) -> list[str]:
    """An entry nobody signed or attested (an import whose importer never ran `sign
    --unsigned`) and a child of it, as a line file stores them; their ids."""
    root_entry = Entry.create(ts="2026-01-01T00:00:00.000000Z", kind="decision", summary="R")
    child = Entry.create(
        ts="2026-01-02T00:00:00.000000Z", kind="note", summary="on R", parents=(root_entry.id,)
    )
    async with await SqliteStore.open(_line(root)) as store:
        await store.append_many([root_entry, child])
    return [root_entry.id, child.id]


def test_a_members_import_statement_moves_no_entry_and_cuts_off_no_descendant(
    tmp_path: Path,
) -> None:
    """M signs an `imported` statement dating an entry nobody attested months later, after
    its child, and syncs it to A, which holds the entry, its child and a signed entry on
    them. A keeps every ts, a new member N takes all three from A, and `verify` on both
    notes M's claim (decision 0122). Before, A moved the entry to M's ts, and N refused the
    child and all that descends from it as dated before its parent, for good."""
    roots = {n: tmp_path / n for n in "amn"}
    for root in roots.values():
        shared_node(root)
    join_mesh(roots["a"], [roots["m"], roots["n"]])
    m_id = cli("lifeline_mesh", roots["m"], "id").stdout.strip()
    entry, child = asyncio.run(_unattested(roots["a"]))
    signed = log_note(roots["a"], "written on the imported entries, signed")
    held = entry_ts(_line(roots["a"]), entry)
    address = f"127.0.0.1:{free_port()}"
    with serve(roots["a"], "--listen", address, "--no-discovery"):
        cli("lifeline_mesh", roots["m"], "sync", address)
        forge_import(
            roots["m"], entry, "2026-06-01T00:00:00.000000Z", "2026-02-01T00:00:00.000000Z"
        )
        cli("lifeline_mesh", roots["m"], "sync", address)
        cli("lifeline_mesh", roots["n"], "sync", address)
    assert entry_ts(_line(roots["a"]), entry) == held
    assert [entry_ts(_line(roots["n"]), e) != "" for e in (entry, child, signed)] == [True] * 3
    for node in "an":
        done = cli(
            "lifeline_mesh", roots[node], "verify", "--allow-unsigned", "--json", check=False
        )
        report = json.loads(done.stdout)
        assert done.returncode == 0, report
        [conflict] = _findings(report, "import-conflict")
        assert conflict["subject"] == entry and m_id in conflict["detail"]
        assert report["lines"][0]["imported"] == 0  # M's claim does not make it imported


def test_a_members_author_signature_dated_after_a_child_held_is_refused(
    tmp_path: Path,
) -> None:
    """M signs, as its author, an entry nobody signed, dated months later, after its child,
    and syncs the signature to A, which holds the entry, its child and a signed entry on
    them. A refuses the signature alone (a child held says the entry was written earlier),
    keeps every ts, and a new member N takes all three from A. Before, signatures won
    (decision 0048): A moved the entry after its child, and N refused the child and all
    that descends from it as dated before its parent, for good."""
    roots = {n: tmp_path / n for n in "amn"}
    for root in roots.values():
        shared_node(root)
    join_mesh(roots["a"], [roots["m"], roots["n"]])
    entry, child = asyncio.run(_unattested(roots["a"]))
    signed = log_note(roots["a"], "written on the imported entries, signed")
    held = {e: entry_ts(_line(roots["a"]), e) for e in (entry, child, signed)}
    address = f"127.0.0.1:{free_port()}"
    with serve(roots["a"], "--listen", address, "--no-discovery"):
        cli("lifeline_mesh", roots["m"], "sync", address)
        forge_author(roots["m"], entry, "2026-06-01T00:00:00.000000Z")
        pushed = cli("lifeline_mesh", roots["m"], "sync", address, check=False)
        assert pushed.returncode == 0, pushed.stderr  # refused alone (M is told: below)
        cli("lifeline_mesh", roots["n"], "sync", address)
    assert {e: entry_ts(_line(roots["a"]), e) for e in held} == held
    assert {e: entry_ts(_line(roots["n"]), e) for e in held} == held
    for node in "an":
        done = cli(
            "lifeline_mesh", roots[node], "verify", "--allow-unsigned", "--json", check=False
        )
        assert done.returncode == 0, done.stdout


def test_a_member_whose_lone_author_signature_is_refused_is_told(tmp_path: Path) -> None:
    """The session that carries M's signature of the test above moves no entry, only that
    signature; it still ends with a closing round (decision 0126), whose ``EndOfTurn`` tells
    M that A refused it and why: in `sync --json` and in `sync`'s warning, and, when A pulls
    it from M's `serve`, in that serve's log. Before, only A's log said so."""
    roots = {n: tmp_path / n for n in "am"}
    for root in roots.values():
        shared_node(root)
    join_mesh(roots["a"], [roots["m"]])
    entry, child = asyncio.run(_unattested(roots["a"]))
    a_address, m_address = (f"127.0.0.1:{port}" for port in free_ports(2))
    with serve(roots["a"], "--listen", a_address, "--no-discovery"):
        cli("lifeline_mesh", roots["m"], "sync", a_address)
        forge_author(roots["m"], entry, "2026-06-01T00:00:00.000000Z")
        pushed = cli("lifeline_mesh", roots["m"], "sync", a_address, "--json")
        warned = cli("lifeline_mesh", roots["m"], "sync", a_address)
    [report] = json.loads(pushed.stdout)
    assert report["entries_sent"] == report["entries_received"] == 0, report
    assert report["signatures_sent"] == 1 and report["signatures_received"] == 0, report
    assert report["refused_there"] == 1, report
    child_ts = entry_ts(_line(roots["a"]), child)
    assert f"after a child of it held ({child_ts})" in report["refusals_there"][0], report
    assert f"{a_address} refused 1 item this node sent" in warned.stderr, warned.stderr
    assert "not its author's" in warned.stderr and "names its signer" in warned.stderr

    with serve(roots["m"], "--listen", m_address, "--no-discovery") as proc:
        pulled = cli("lifeline_mesh", roots["a"], "sync", m_address, "--json")
    [report] = json.loads(pulled.stdout)
    assert report["refused"] == 1 and "not its author's" in report["refusals"][0], report
    assert proc.stderr is not None
    log = proc.stderr.read()
    assert "refused 1 item this node sent" in log and "not its author's" in log, log
