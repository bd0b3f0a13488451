"""A damaged line file: writes are refused, verify says so, and the recovery path works end
to end (recover what reads, then ingest LIFELINE.md written before the damage)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from lifeline.ledger import Draft, Ledger
from lifeline.store.sqlite import SqliteStore
from tests.support.clirun import lifeline
from tests.support.damage import damage_pages


async def _fill(path: Path, count: int) -> None:
    async with await SqliteStore.open(path) as store:
        ledger = Ledger(store)
        for n in range(count):
            await ledger.append(Draft(kind="note", summary=f"entry {n}", body=f"{n} " * 700))


def _ids(root: Path) -> set[str]:
    out = lifeline(root, "history", "--json")
    assert out.returncode == 0, out.stderr
    return {e["id"] for e in json.loads(out.stdout)}


def test_a_damaged_line_refuses_writes_and_recovers(tmp_path: Path) -> None:
    assert lifeline(tmp_path, "init").returncode == 0
    line = tmp_path / ".lifeline" / "ledger.db"
    asyncio.run(_fill(line, 80))
    original = _ids(tmp_path)
    assert lifeline(tmp_path, "render").returncode == 0  # LIFELINE.md, before the damage
    damage_pages(line)

    refused = lifeline(tmp_path, "log", "--kind", "note", "--summary", "into the damage")
    assert refused.returncode == 2, refused.stdout
    assert refused.stderr.count("\n") == 1 and "line 'ledger' is damaged" in refused.stderr
    assert "lifeline --line ledger recover" in refused.stderr
    checkpoint = lifeline(tmp_path, "checkpoint", "--thread", "t", "--done", "x", "--next", "y")
    assert checkpoint.returncode == 2 and "is damaged" in checkpoint.stderr
    verify = lifeline(tmp_path, "verify")
    assert verify.returncode == 1 and "sqlite-integrity" in verify.stdout, verify

    recovered = lifeline(tmp_path, "recover")
    assert recovered.returncode == 0, recovered.stderr
    assert "recovered line 'ledger': kept" in recovered.stdout
    assert list((tmp_path / ".lifeline").glob("ledger.db.damaged-*"))  # kept for later
    kept = _ids(tmp_path)
    assert kept < original  # some were lost with the pages, none was invented
    assert lifeline(tmp_path, "verify").returncode == 0
    assert "ingest" in recovered.stderr

    ingested = lifeline(tmp_path, "ingest", str(tmp_path / "LIFELINE.md"))
    assert ingested.returncode == 0, ingested.stderr
    assert _ids(tmp_path) == original
    assert lifeline(tmp_path, "verify").returncode == 0
    assert lifeline(tmp_path, "log", "--kind", "note", "--summary", "after").returncode == 0


def test_recover_on_a_sound_line_changes_nothing(tmp_path: Path) -> None:
    assert lifeline(tmp_path, "init").returncode == 0
    done = lifeline(tmp_path, "recover")
    assert done.returncode == 0 and "nothing to recover" in done.stdout
    assert not list((tmp_path / ".lifeline").glob("*.damaged-*"))
