"""The author's signature commits with its entry (issue 14): a writer killed with SIGKILL at
any point leaves each entry either absent or stored with its author attestation.

The writer is a real subprocess: the ledger with the installed append hooks (the notary's
signer), writing batches (pipelined chunks and small batches) and single entries as fast
as it can, until it is killed at a random moment.
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lifeline.home import Home
from tests.test_sync_e2e import cli

WRITER = """
import asyncio, sys
from pathlib import Path
from lifeline.home import Home
from lifeline.ledger import Draft, Ledger
from lifeline.plugins import load_append_hooks
from lifeline.store.sqlite import SqliteStore

async def main(root: Path) -> None:
    home = Home(root)
    async with await SqliteStore.open(home.line_path("ledger")) as store:
        ledger = Ledger(store, hooks=load_append_hooks(home))
        n = 0
        while True:
            size = (1, 40, 600)[n % 3]  # one entry, a batch, a pipelined batch
            drafts = [Draft(kind="note", summary=f"w{n}-{k}") for k in range(size)]
            if size == 1:
                await ledger.append(drafts[0])
            else:
                await ledger.append_many(drafts)
            n += 1
            print(n, flush=True)

asyncio.run(main(Path(sys.argv[1])))
"""


def _unsigned(root: Path) -> tuple[int, int]:
    """(entries stored, entries without an author attestation)."""
    conn = sqlite3.connect(Home(root).line_path("ledger"))
    try:
        stored = conn.execute("SELECT count(*) FROM entries").fetchone()[0]
        missing = conn.execute(
            "SELECT count(*) FROM entries WHERE id NOT IN"
            " (SELECT subject FROM attestations WHERE role = 'author')"
        ).fetchone()[0]
    finally:
        conn.close()
    return int(stored), int(missing)


@pytest.mark.slow
def test_sigkill_of_a_writer_never_leaves_an_entry_unsigned(tmp_path: Path) -> None:
    root = tmp_path / "p"
    root.mkdir()
    cli("lifeline", root, "init")
    cli("lifeline_mesh", root, "init")
    rng = random.Random(int(os.environ.get("KILL_SEED", "14")))
    runs = int(os.environ.get("KILL_RUNS", "12"))
    before = 0
    for _run in range(runs):
        proc = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(root)], stdout=subprocess.PIPE, text=True
        )
        assert proc.stdout is not None
        for _ in range(rng.randint(1, 7)):  # a random number of writes done...
            assert proc.stdout.readline(), "the writer died on its own"
        time.sleep(rng.uniform(0, 0.05))  # ...and a random moment inside the next ones
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        stored, missing = _unsigned(root)
        assert missing == 0, f"{missing} of {stored} entries have no author attestation"
        assert stored > before  # the writer got somewhere each run
        before = stored
