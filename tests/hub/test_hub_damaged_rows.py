"""A damaged row on a hub, or an altered one on a laptop, never stops the mesh (decision
0111): real hub processes on a real PostgreSQL over mutual TLS, a laptop that joined, every
command run as a user runs it. The damaged copy is refused alone, with a warning naming
what to do; everything else syncs both ways; commands on the hub root skip the row and
`show` names it; the viewer leaves it and its descendants out instead of failing."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

import asyncpg
import pytest

from tests.support.hub_roots import hub_mesh, life, line_ids, mesh, page, viewer
from tests.support.pg_server import fresh_database

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


async def _damage_signature(url: str, entry_id: str) -> None:
    """Flip a bit of the author signature stored for ``entry_id``."""
    conn = await asyncpg.connect(url)
    try:
        att, item = await conn.fetchrow(
            "SELECT id, item FROM attestations WHERE role = 'author' AND subject = $1", entry_id
        )
        item = bytes(item)
        await conn.execute(
            "UPDATE attestations SET item = $1 WHERE id = $2",
            item[:-1] + bytes([item[-1] ^ 1]),
            att,
        )
    finally:
        await conn.close()


async def _damage(url: str, entry_id: str, doc: str) -> None:
    """Overwrite an entry's stored document, as a bad restore or a stray UPDATE would."""
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(
            "UPDATE entries SET doc = $1 WHERE id = $2", doc, bytes.fromhex(entry_id)
        )
    finally:
        await conn.close()


def _decide(root: Path, *summaries: str) -> list[str]:
    return [
        life(root, "log", "--kind", "decision", "--summary", s).stdout.strip() for s in summaries
    ]


def test_a_damaged_hub_row_is_refused_alone_and_the_rest_syncs_both_ways(
    pg_server: str, tmp_path: Path
) -> None:
    url = asyncio.run(fresh_database(pg_server))
    with hub_mesh(tmp_path, url) as (hub_a, _hub_b, laptop, _sync_a, sync_b):
        first, damaged, child = _decide(hub_a, "keep okapi", "damaged ibex", "after ibex")
        (later,) = _decide(hub_a, "later zebra")
        asyncio.run(_damage(url, damaged, '{"id": "' + damaged + '", "kind": 5}'))

        synced = mesh(laptop, "sync", sync_b, "--json")
        [report] = json.loads(synced.stdout)
        assert report["refused"] == 1, synced
        assert "inadmissible entries item" in report["refusals"][0]
        assert "refused 1 item" in synced.stderr and "lifeline-mesh verify" in synced.stderr
        held = line_ids(laptop)
        assert first in held and damaged not in held
        # its descendants cannot be stored without it: left out, counted, asked again later
        assert child not in held and later not in held

        # the laptop's own work still reaches the hub, and a second sync says the same
        (mine,) = _decide(laptop, "laptop decides: yak")
        again = mesh(laptop, "sync", sync_b, "--json")
        assert json.loads(again.stdout)[0]["refused"] == 1
        assert mine in line_ids(hub_a)

        # on the hub root: reads skip the row with a warning, `show` names it
        context = life(hub_a, "context")
        assert "keep okapi" in context.stdout and "damaged ibex" not in context.stdout
        shown = life(hub_a, "show", damaged[:12], check=False)
        assert shown.returncode != 0
        assert "cannot be decoded" in shown.stderr and "lifeline verify" in shown.stderr
        report = json.loads(mesh(hub_a, "verify", "--json", check=False).stdout)
        checks = {f["check"] for line in report["lines"] for f in line["findings"]}
        assert "corrupt-row" in checks
        # `recover` rebuilds line files: on a hub root it says where the line is and what
        # repairs it, instead of claiming the line does not exist
        recover = life(hub_a, "recover", check=False)
        assert recover.returncode == 2 and "kept in the hub's database" in recover.stderr
        assert "backup" in recover.stderr and "does not exist" not in recover.stderr

        # the viewer shows what it can, without the damaged row and its descendants
        with viewer(hub_a) as base:
            history = page(base + "lines/ledger/history")
            assert "keep okapi" in history and "laptop decides: yak" in history
            assert "damaged ibex" not in history


def test_an_altered_row_on_a_laptop_is_refused_by_the_hub_and_the_rest_is_stored(
    pg_server: str, tmp_path: Path
) -> None:
    url = asyncio.run(fresh_database(pg_server))
    with hub_mesh(tmp_path, url) as (hub_a, _hub_b, laptop, _sync_a, sync_b):
        mesh(laptop, "sync", sync_b, "--json")
        altered, kept = _decide(laptop, "laptop ibex", "laptop okapi")
        # someone edits the laptop's file: the row keeps its id, its content no longer hashes
        with sqlite3.connect(laptop / ".lifeline" / "ledger.db") as db:
            db.execute("UPDATE entries SET summary = 'rewritten' WHERE id = ?", (altered,))
        (other,) = _decide(hub_a, "hub decides: gnu")

        pushed = mesh(laptop, "sync", sync_b, "--json")
        [report] = json.loads(pushed.stdout)
        assert other in line_ids(laptop)  # the pull went on
        held = line_ids(hub_a)
        assert altered not in held and kept not in held  # refused, and its child with it
        assert report["refused"] == 0  # the laptop received nothing inadmissible
        # ...and is told that the hub refused its altered row (decision 0112)
        assert report["refused_there"] == 1
        assert "does not match its content" in report["refusals_there"][0]
        assert f"{sync_b} refused 1 item this node sent" in pushed.stderr, pushed.stderr
        status = json.loads(mesh(hub_a, "status", "--json").stdout)
        assert status["lines"][0]["entries"] == len(held)


def test_a_signature_altered_on_a_laptop_is_refused_by_the_hub_with_its_entry(
    pg_server: str, tmp_path: Path
) -> None:
    """The hub refuses the signature and the entry it signs, rather than storing the entry
    as an unsigned copy; `verify` on the hub notes the refused copy and its sender."""
    url = asyncio.run(fresh_database(pg_server))
    with hub_mesh(tmp_path, url) as (hub_a, _hub_b, laptop, _sync_a, sync_b):
        mesh(laptop, "sync", sync_b, "--json")
        (signed,) = _decide(laptop, "laptop signs gnu")
        with sqlite3.connect(laptop / ".lifeline" / "ledger.db") as db:
            att, item = db.execute(
                "SELECT id, item FROM attestations WHERE role = 'author' AND subject = ?",
                (signed,),
            ).fetchone()
            db.execute(
                "UPDATE attestations SET item = ? WHERE id = ?",
                (item[:-1] + bytes([item[-1] ^ 1]), att),
            )
        mesh(laptop, "sync", sync_b, "--json")
        assert signed not in line_ids(hub_a)  # never stored unsigned
        verified = mesh(hub_a, "verify", "--json", check=False)
        about = [
            f
            for line in json.loads(verified.stdout)["lines"]
            for f in line["findings"]
            if f["subject"] == signed
        ]
        # recorded with its sender, as any refused copy (decision 0048): a note, no failure
        [note] = about
        assert note["check"] == "refused-copy" and note["severity"] == "note", note
        assert "its author signature was refused" in note["detail"], note


def test_a_damaged_signature_on_a_hub_is_refused_with_the_entry_it_signs(
    pg_server: str, tmp_path: Path
) -> None:
    """A signature that no longer verifies is refused alone; the entry it signed is refused
    with it (never stored unsigned), its descendants wait, the rest syncs."""
    url = asyncio.run(fresh_database(pg_server))
    with hub_mesh(tmp_path, url) as (hub_a, _hub_b, laptop, _sync_a, sync_b):
        first, signed, child = _decide(hub_a, "keep okapi", "signed ibex", "after ibex")
        asyncio.run(_damage_signature(url, signed))
        synced = mesh(laptop, "sync", sync_b, "--json")
        [report] = json.loads(synced.stdout)
        assert report["refused"] == 1, synced
        assert "does not verify" in report["refusals"][0]
        assert "refused 1 item" in synced.stderr
        held = line_ids(laptop)
        assert first in held and signed not in held and child not in held
        (mine,) = _decide(laptop, "laptop decides: yak")
        mesh(laptop, "sync", sync_b, "--json")
        assert mine in line_ids(hub_a)
        verified = mesh(laptop, "verify", "--json", check=False)
        assert json.loads(verified.stdout)["ok"], verified.stdout  # nothing bad got in
