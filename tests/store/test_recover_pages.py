"""A line file SQLite cannot open or walk at all — truncated, its first pages overwritten, its
header page destroyed — still gives back what its pages hold: `lifeline recover` scans the
pages, keeps every entry whose id verifies, keeps the damaged file, and says how to get the
rest back; `verify` on such a file names `recover` and the re-sync."""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from lifeline.entry import Entry
from lifeline.ledger import Draft, Ledger
from lifeline.page_scan import scan_entry_rows
from lifeline.store.sqlite import SqliteStore
from tests.support.clirun import lifeline
from tests.support.mesh_procs import SYNC_JSON, cli, serve_insecure, shared_node

PAGE = 4096
COUNT = 300


async def _fill(path: Path) -> None:
    async with await SqliteStore.open(path) as store:
        ledger = Ledger(store)
        for n in range(COUNT):
            # every tenth body is longer than a page: its row continues on overflow pages
            body = f"body {n} " + ("x" * 9000 if n % 10 == 0 else "y" * 200)
            await ledger.append(Draft(kind="note", summary=f"entry {n}", body=body))


def _truncate(path: Path) -> None:
    size = path.stat().st_size
    with path.open("r+b") as fh:
        fh.truncate(size // 2 // PAGE * PAGE)


def _overwrite_first(path: Path) -> None:
    with path.open("r+b") as fh:
        fh.write(b"\x00" * PAGE * 2 + os.urandom(PAGE * 2))


def _destroy_header(path: Path) -> None:
    with path.open("r+b") as fh:
        fh.write(os.urandom(PAGE))


def _history(root: Path) -> list[dict[str, object]]:
    out = lifeline(root, "history", "--json")
    assert out.returncode == 0, out.stderr
    rows: list[dict[str, object]] = json.loads(out.stdout)
    return rows


@pytest.mark.parametrize("damage", [_truncate, _overwrite_first, _destroy_header])
def test_recover_reads_the_pages_sqlite_cannot(
    tmp_path: Path, damage: Callable[[Path], None]
) -> None:
    assert lifeline(tmp_path, "init").returncode == 0
    line = tmp_path / ".lifeline" / "ledger.db"
    asyncio.run(_fill(line))
    original = {str(e["id"]) for e in _history(tmp_path)}
    assert len(original) >= COUNT
    before = line.read_bytes()
    for side in (".db-wal", ".db-shm"):
        assert not (tmp_path / ".lifeline" / f"ledger{side}").exists()  # all in the file
    damage(line)

    verify = lifeline(tmp_path, "verify")
    assert verify.returncode != 0
    assert verify.stderr.count("\n") == 1, verify.stderr
    assert "lifeline --line ledger recover" in verify.stderr
    assert "lifeline-mesh sync" in verify.stderr

    done = lifeline(tmp_path, "recover")
    assert done.returncode == 0, done.stderr
    assert "recovered line 'ledger': kept" in done.stdout
    assert "lifeline-mesh sync PEER" in done.stderr
    counts = re.search(r"kept (\d+) .*; (\d+) rows? lost .*, (\d+) left out", done.stdout)
    assert counts, done.stdout
    kept, lost, orphans = (int(n) for n in counts.groups())
    assert kept + lost + orphans == len(original)  # every row accounted for
    assert kept > 0

    damaged = list((tmp_path / ".lifeline").glob("ledger.db.damaged-*Z"))
    assert len(damaged) == 1 and damaged[0].read_bytes() != before  # the damaged bytes, kept
    assert stat.S_IMODE(damaged[0].stat().st_mode) == 0o600

    rows = _history(tmp_path)
    assert len(rows) == kept
    ids = {str(e["id"]) for e in rows}
    assert ids <= original  # nothing invented
    for row in rows:  # every id still matches its content
        assert (
            Entry(
                str(row["id"]),
                str(row["ts"]),
                str(row["kind"]),
                str(row["author"]),
                str(row["agent"]),
                str(row["provider"]),
                str(row["model"]),
                str(row["summary"]),
                str(row["body"]),
                tuple(row["parents"]),  # type: ignore[arg-type]
                row.get("dedup_key"),  # type: ignore[arg-type]
            ).id
            == row["id"]
        )
    assert any(len(str(r["body"])) > PAGE for r in rows)  # overflow chains were followed
    assert lifeline(tmp_path, "verify").returncode == 0
    assert lifeline(tmp_path, "context").returncode == 0
    assert lifeline(tmp_path, "log", "--kind", "note", "--summary", "after").returncode == 0


@pytest.mark.slow
def test_recover_then_sync_from_a_peer_brings_back_the_rest(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    asyncio.run(_fill(shared_node(a)))
    line = shared_node(b)
    with serve_insecure(a) as (_proc, address):
        cli("lifeline_mesh", b, *SYNC_JSON, address)
        original = {str(e["id"]) for e in _history(b)}
        assert original == {str(e["id"]) for e in _history(a)}
        _truncate(line)
        mesh_verify = cli("lifeline_mesh", b, "verify", check=False)
        assert mesh_verify.returncode != 0 and mesh_verify.stderr.count("\n") == 1
        assert "lifeline --line ledger recover" in mesh_verify.stderr
        assert "lifeline-mesh sync PEER" in mesh_verify.stderr

        done = lifeline(b, "recover")
        assert done.returncode == 0, done.stderr
        assert 0 < len(_history(b)) < len(original)
        cli("lifeline_mesh", b, *SYNC_JSON, address)
    assert {str(e["id"]) for e in _history(b)} == original
    assert lifeline(b, "verify").returncode == 0


def test_the_page_scan_survives_any_bytes(tmp_path: Path) -> None:
    """Garbage where pages should be — random bytes, pages that claim to be leaves with
    wild cell pointers and lengths — yields no row and raises nothing."""
    rng = random.Random(36)
    junk = tmp_path / "junk.db"
    for _ in range(40):
        pages = []
        for _ in range(8):
            page = bytearray(rng.randbytes(PAGE))
            page[0] = 0x0D  # a "leaf" with whatever follows
            pages.append(bytes(page))
        junk.write_bytes(b"".join(pages))
        scan = scan_entry_rows(junk)
        assert scan.rows == []
    junk.write_bytes(b"")
    assert scan_entry_rows(junk).rows == []
