"""A read that must fold the whole line into the truth tables (the first after an upgrade
that changed them) says so on a terminal, and nothing when stderr is not one (issue 21)."""

from __future__ import annotations

import asyncio
import os
import pty
import sqlite3
import subprocess
import sys
from pathlib import Path

from lifeline.entry import Entry
from lifeline.store.sqlite import SqliteStore
from lifeline.truth.table import SHOWN_FOLD
from tests.support.clirun import lifeline

N = SHOWN_FOLD + 5_000


async def _line(root: Path) -> None:
    (root / ".lifeline").mkdir(parents=True)
    async with await SqliteStore.open(root / ".lifeline" / "ledger.db") as store:
        parent: tuple[str, ...] = ()
        for start in range(0, N, 5_000):
            batch = []
            for i in range(start, start + 5_000):
                kind = "decision" if i % 10 == 0 else "note"
                entry = Entry.create(
                    ts=f"2026-01-01T{i // 3600:02d}:{i // 60 % 60:02d}:{i % 60:02d}.000000Z",
                    kind=kind,
                    summary=f"{kind} {i}",
                    body="because it was measured",
                    parents=parent,
                )
                parent = (entry.id,)
                batch.append(entry)
            await store.append_many(batch)


def _forget_the_tables(root: Path) -> None:
    """As after an upgrade that changed the tables: the next read folds every row."""
    with sqlite3.connect(root / ".lifeline" / "ledger.db") as conn:
        conn.execute("DELETE FROM truth_core")


def _on_a_terminal(root: Path, *args: str) -> tuple[int, str, str]:
    """Run with stderr on a pseudo-terminal (stdout piped); returns code, stdout, stderr."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "lifeline", "--root", str(root), *args],
        stdout=subprocess.PIPE,
        stderr=follower,
        text=True,
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 4096)
        except OSError:  # EIO: the terminal's other end closed
            break
        if not data:
            break
        chunks.append(data)
    out = proc.stdout.read() if proc.stdout else ""
    code = proc.wait(timeout=120)
    os.close(leader)
    return code, out, b"".join(chunks).decode(errors="replace")


def test_a_full_fold_shows_progress_on_a_terminal_only(tmp_path: Path) -> None:
    asyncio.run(_line(tmp_path))
    lifeline(tmp_path, "context")  # the tables, built once
    _forget_the_tables(tmp_path)
    code, out, err = _on_a_terminal(tmp_path, "context", "--budget", "2000")
    assert code == 0 and "decision" in out
    assert "bringing the read tables up to date" in err and f"/{N:,}" in err
    assert err.endswith("\r\x1b[K")  # cleared before the command's own output
    _forget_the_tables(tmp_path)
    piped = lifeline(tmp_path, "context", "--budget", "2000")
    assert piped.returncode == 0 and piped.stderr == ""
    assert piped.stdout == out
