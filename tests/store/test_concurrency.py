"""Several processes appending to one line at once lose nothing; opens of a new line at
once all get it (a `serve` session and its fold sweep, two CLIs)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from lifeline.ledger import Draft, Ledger
from lifeline.store.sqlite import SqliteStore
from tests.support.clirun import lifeline

# Each writer opens the line itself and appends one entry per transaction.
SINGLE = """
import asyncio, sys
from lifeline.ledger import Draft, Ledger
from lifeline.store.sqlite import SqliteStore

async def main(path, tag, n):
    async with await SqliteStore.open(path) as store:
        ledger = Ledger(store)
        for i in range(n):
            await ledger.append(Draft(kind="note", summary=f"{tag} {i}"))

asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
"""

BATCH = """
import asyncio, sys
from lifeline.ledger import Draft, Ledger
from lifeline.store.sqlite import SqliteStore

async def main(path, n, size):
    async with await SqliteStore.open(path) as store:
        ledger = Ledger(store)
        for start in range(0, n, size):
            drafts = [Draft(kind="note", summary=f"batch {i}") for i in range(start, start + size)]
            await ledger.append_many(drafts)

asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))
"""

WRITERS, EACH, BATCHED = 4, 50, 1000


@pytest.mark.slow
def test_concurrent_writers_lose_nothing(tmp_path: Path) -> None:
    assert lifeline(tmp_path, "init").returncode == 0
    db = str(tmp_path / ".lifeline" / "ledger.db")
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", SINGLE, db, f"w{n}", str(EACH)],
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(WRITERS)
    ]
    procs.append(
        subprocess.Popen(
            [sys.executable, "-c", BATCH, db, str(BATCHED), "100"],
            stderr=subprocess.PIPE,
            text=True,
        )
    )
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    history = json.loads(lifeline(tmp_path, "history", "--json").stdout)
    summaries = {e["summary"] for e in history}
    assert len(history) == WRITERS * EACH + BATCHED
    assert {f"w{n} {i}" for n in range(WRITERS) for i in range(EACH)} <= summaries
    assert {f"batch {i}" for i in range(BATCHED)} <= summaries
    verified = lifeline(tmp_path, "verify", "--json")
    assert verified.returncode == 0, verified.stdout
    assert json.loads(verified.stdout)["entries"] == WRITERS * EACH + BATCHED


async def test_opens_of_a_new_line_at_once_all_get_it(tmp_path: Path) -> None:
    # They race to switch the new file to WAL mode: SQLite answers the losers "database is
    # locked" without waiting, and an open that failed once removed the file under the rest.
    async def append_one(path: Path, n: int) -> None:
        async with await SqliteStore.open(path) as store:
            await Ledger(store).append(Draft(kind="note", summary=f"opened {n}"))

    for round_ in range(40):
        path = tmp_path / f"line{round_}.db"
        await asyncio.gather(*(append_one(path, n) for n in range(5)))
        async with await SqliteStore.open(path, create=False) as store:
            assert {e.summary async for e in store.stream()} == {f"opened {n}" for n in range(5)}
