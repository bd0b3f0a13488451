"""A serving node folds its lines' read models after a large load (decision 0103): a real
`serve` process that took thousands of entries leaves nothing for the next `context` or
`recall` to fold; small loads are left to the readers; a line that was loaded while no
`serve` ran is folded when `serve` starts."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from lifeline.store.sqlite import SqliteStore
from lifeline.truth.upkeep import rows_behind
from lifeline_mesh.node.read_upkeep import FOLD_AFTER, QUIET_S, ReadUpkeep
from tests.support.mesh_procs import serve_insecure
from tests.support.recon_helpers import chain
from tests.support.sync_helpers import make_node, write


async def _behind(line_file: Path) -> int:
    async with await SqliteStore.open(line_file, create=False) as store:
        return await rows_behind(store)


async def _until_folded(line_file: Path, deadline_s: float = 60.0) -> float:
    started = time.monotonic()
    while (left := await _behind(line_file)) > 0:
        assert time.monotonic() - started < deadline_s, f"{left} rows still behind"
        await asyncio.sleep(0.2)
    return time.monotonic() - started


async def test_serve_folds_after_a_large_sync_and_leaves_small_ones(tmp_path: Path) -> None:
    make_node(tmp_path / "b")  # serves the line
    a = make_node(tmp_path / "a")
    line = chain(FOLD_AFTER + 400, "load", body="why refund s3")
    await write(a, line[: FOLD_AFTER + 390])
    line_file = tmp_path / "b" / ".lifeline" / "ledger.db"
    with serve_insecure(tmp_path / "b") as (_proc, address):
        [report] = await a.sync(address, ["ledger"])
        assert report.entries_sent == FOLD_AFTER + 390
        await _until_folded(line_file)
        await write(a, line[FOLD_AFTER + 390 :])
        [report] = await a.sync(address, ["ledger"])
        assert report.entries_sent == 10
        await asyncio.sleep(QUIET_S + 2.0)
        assert await _behind(line_file) == 10  # the next reader folds these (~1 ms)


async def test_serve_folds_a_line_loaded_while_it_was_stopped(tmp_path: Path) -> None:
    b = make_node(tmp_path / "b")
    await write(b, chain(FOLD_AFTER + 1, "import"))
    line_file = tmp_path / "b" / ".lifeline" / "ledger.db"
    assert await _behind(line_file) == FOLD_AFTER + 1
    with serve_insecure(tmp_path / "b"):
        await _until_folded(line_file)


async def test_sessions_in_a_row_fold_once_when_the_line_is_quiet(tmp_path: Path) -> None:
    folder = tmp_path / ".lifeline"
    b = make_node(tmp_path)
    await write(b, chain(30, "q"))
    upkeep = ReadUpkeep(lambda name: b.home.lines.files.open(name), threshold=10, quiet_s=0.3)
    try:
        for _ in range(4):  # four sessions of 8, 0.1 s apart: one fold, after the last
            upkeep.admitted("ledger", 8)
            await asyncio.sleep(0.1)
        assert upkeep.runs == []
        await upkeep.idle()
        assert [(line, rows) for line, rows, _s in upkeep.runs] == [("ledger", 30)]
        assert await _behind(folder / "ledger.db") == 0
        assert not upkeep.admitted("ledger", 9)  # under the threshold: nothing runs
        upkeep.check(["absent"])  # a shared line not made yet: no fold, no error
        await upkeep.idle()
        assert len(upkeep.runs) == 1 and not (folder / "absent.db").exists()
    finally:
        await upkeep.close()


async def test_a_stopped_node_keeps_the_parts_it_folded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lifeline.truth import upkeep as parts

    b = make_node(tmp_path)
    await write(b, chain(400, "stop"))
    monkeypatch.setattr(parts, "FOLD_PART", 20)
    started = asyncio.Event()
    real = parts._fold_part

    def slow(conn: object, rows: int) -> int:
        started.set()
        time.sleep(0.02)
        return real(conn, rows)  # type: ignore[arg-type]

    monkeypatch.setattr(parts, "_fold_part", slow)
    upkeep = ReadUpkeep(lambda name: b.home.lines.files.open(name), threshold=10, quiet_s=0)
    upkeep.check(["ledger"])
    await asyncio.wait_for(started.wait(), 10)
    await asyncio.sleep(0.1)
    await upkeep.close()
    left = await _behind(tmp_path / ".lifeline" / "ledger.db")
    assert 0 < left < 400  # some parts committed, the rest left for a reader


async def test_lines_far_behind_at_start_are_folded_one_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lifeline_mesh.node import read_upkeep

    names = ["a", "b", "c"]
    b = make_node(tmp_path, shared=tuple(names))
    for name in names:
        await write(b, chain(20, name), line=name)
    spans: list[tuple[float, float]] = []
    real = read_upkeep.fold_line

    async def timed(store: SqliteStore, part: int | None = None) -> int:
        started = time.monotonic()
        rows = await real(store, part)
        spans.append((started, time.monotonic()))
        return rows

    monkeypatch.setattr(read_upkeep, "fold_line", timed)
    upkeep = ReadUpkeep(lambda name: b.home.lines.files.open(name), threshold=10)
    upkeep.check(names)
    await upkeep.idle()
    assert sorted(line for line, _rows, _s in upkeep.runs) == names
    spans.sort()
    assert all(end <= nxt for (_, end), (nxt, _) in itertools.pairwise(spans))
    for name in names:
        assert await _behind(tmp_path / ".lifeline" / f"{name}.db") == 0


async def test_rows_other_processes_write_are_folded_by_the_sweep(tmp_path: Path) -> None:
    """An import or `lifeline sessions` writes beside `serve`, which hears of no session:
    the sweep looks at every shared line again and folds the one now far behind."""
    b = make_node(tmp_path)
    line_file = tmp_path / ".lifeline" / "ledger.db"
    upkeep = ReadUpkeep(lambda name: b.home.lines.files.open(name), threshold=10, quiet_s=0)
    upkeep.sweep(lambda: ["ledger"], every_s=0.2)
    try:
        await write(b, chain(5, "few"))  # under the threshold: left to the readers
        await asyncio.sleep(0.6)
        assert await _behind(line_file) == 5 and upkeep.runs == []
        await write(b, chain(30, "many"))
        deadline = time.monotonic() + 20
        while not upkeep.runs:  # recorded once the fold's store is closed
            assert time.monotonic() < deadline, "not folded"
            await asyncio.sleep(0.05)
        assert await _behind(line_file) == 0
    finally:
        await upkeep.close()
    assert [rows for _line, rows, _s in upkeep.runs] == [35]


async def test_the_sweep_outlives_a_config_it_cannot_read(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from lifeline.errors import ConfigError

    b = make_node(tmp_path)
    await write(b, chain(30, "later"))
    calls = [0]

    def lines() -> list[str]:
        calls[0] += 1
        if calls[0] == 1:
            raise ConfigError("config.json is being rewritten")
        return ["ledger"]

    upkeep = ReadUpkeep(lambda name: b.home.lines.files.open(name), threshold=10, quiet_s=0)
    upkeep.sweep(lines, every_s=0.1)
    try:
        deadline = time.monotonic() + 20
        while not upkeep.runs:
            assert time.monotonic() < deadline, "not folded"
            await asyncio.sleep(0.05)
    finally:
        await upkeep.close()
    assert "could not list the lines to fold" in caplog.text


async def test_a_read_only_line_is_left_to_its_readers(tmp_path: Path) -> None:
    """A line in a folder `serve` cannot write opens read-only: nothing to fold, no
    record and no log line every minute."""
    b = make_node(tmp_path)
    await write(b, chain(30, "ro"))

    @asynccontextmanager
    async def read_only(name: str) -> AsyncIterator[SqliteStore]:
        async with b.home.lines.files.open(name) as store:
            store.read_only = True  # as SqliteStore.open leaves a line it cannot write
            yield store

    upkeep = ReadUpkeep(read_only, threshold=10, quiet_s=0)
    upkeep.check(["ledger"])
    await upkeep.idle()
    await upkeep.close()
    assert upkeep.runs == []
    assert await _behind(tmp_path / ".lifeline" / "ledger.db") == 30
