"""The guard on local writes believes a recent sound check of a large line file (decision
0104): the verdict is kept beside the file, and believed only for the same file (device,
inode, not smaller) within RECHECK_S; a small file is checked before every write; damage
met by a read or a write says to run `recover`."""

from __future__ import annotations

import json
import os
import shutil
import stat
import time
from pathlib import Path

import pytest

from lifeline.errors import StoreError
from lifeline.ledger import Draft, Ledger
from lifeline.store import sqlite_check
from lifeline.store.sqlite import SqliteStore
from lifeline.store.sqlite_check import RECHECK_S, DamagedLine, require_intact
from tests.support.damage import PAGE, damage_pages


async def _line(path: Path, count: int = 60) -> Path:
    async with await SqliteStore.open(path) as store:
        ledger = Ledger(store)
        for n in range(count):
            await ledger.append(Draft(kind="note", summary=f"entry {n}", body=f"{n} " * 700))
    return path


def _verdict(path: Path) -> Path:
    return path.with_name(path.name + "-checked")


@pytest.fixture
def large(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every file counts as large (a real one would take ~40k entries to build)."""
    monkeypatch.setattr(sqlite_check, "ALWAYS_CHECKED_BYTES", 0)


async def test_a_sound_check_is_believed_for_an_hour(tmp_path: Path, large: None) -> None:
    line = await _line(tmp_path / "ledger.db")
    await require_intact(line, "ledger")
    kept = json.loads(_verdict(line).read_text())
    assert kept["ino"] == line.stat().st_ino and kept["size"] == line.stat().st_size
    assert stat.S_IMODE(_verdict(line).stat().st_mode) == 0o600
    damage_pages(line)  # in place: the same file, the same size
    await require_intact(line, "ledger")  # believed: not read again within the hour
    kept["at"] = time.time() - RECHECK_S - 1
    _verdict(line).write_text(json.dumps(kept))
    with pytest.raises(DamagedLine, match="recover"):
        await require_intact(line, "ledger")  # an hour later: checked, and refused


async def test_a_replaced_or_shrunk_file_is_checked_again(tmp_path: Path, large: None) -> None:
    line = await _line(tmp_path / "ledger.db")
    await require_intact(line, "ledger")
    copy = tmp_path / "copy.db"
    shutil.copyfile(line, copy)
    damage_pages(copy)
    os.replace(copy, line)  # another file under the same name (a restore, a bad copy)
    with pytest.raises(DamagedLine):
        await require_intact(line, "ledger")
    sound = await _line(tmp_path / "sound.db", 5)
    await require_intact(sound, "sound")
    kept = json.loads(_verdict(sound).read_text())
    _verdict(sound).write_text(json.dumps({**kept, "size": kept["size"] + PAGE}))
    before = _verdict(sound).stat().st_mtime_ns
    time.sleep(0.01)
    await require_intact(sound, "sound")  # smaller than when checked: checked again
    assert _verdict(sound).stat().st_mtime_ns != before


async def test_a_damaged_verdict_means_a_check(tmp_path: Path, large: None) -> None:
    line = await _line(tmp_path / "ledger.db")
    _verdict(line).write_text("{not json")
    damage_pages(line)
    with pytest.raises(DamagedLine):
        await require_intact(line, "ledger")


async def test_a_small_file_is_checked_before_every_write(tmp_path: Path) -> None:
    line = await _line(tmp_path / "ledger.db")
    assert line.stat().st_size <= sqlite_check.ALWAYS_CHECKED_BYTES
    await require_intact(line, "ledger")
    assert not _verdict(line).exists()
    damage_pages(line)
    with pytest.raises(DamagedLine):
        await require_intact(line, "ledger")


async def test_damage_met_by_a_read_says_to_recover(tmp_path: Path) -> None:
    line = await _line(tmp_path / "ledger.db")
    damage_pages(line)
    with pytest.raises(StoreError, match="lifeline --line ledger recover"):
        async with await SqliteStore.open(line, create=False) as store:
            [e async for e in store.stream()]
