"""A project in a folder whose name holds ``#``, ``?`` or ``%`` (``~/C#/app``): SQLite opens
files by URI in a few places (read-only checks, the line watchers), and there such a
character ended the path — the open failed or named another file. Each place now
percent-encodes the path (``lifeline.store.sqlite_open.file_uri``)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tests.support.mesh_procs import (
    cli,
    free_port,
    join_mesh,
    log_note,
    serve,
    shared_node,
    wait_for_entry,
)

ODD = "C#?x%20y"  # each breaks a URI's path: a fragment, a query, an escape


def test_lifeline_context_s_ledger_is_refused_untouched_in_any_folder(tmp_path: Path) -> None:
    ledger = tmp_path / ODD / ".lifeline" / "ledger.db"
    ledger.parent.mkdir(parents=True)
    with sqlite3.connect(ledger) as conn:  # its table, as lifeline-context 0.6.1 makes it
        conn.execute(
            "CREATE TABLE entries (id TEXT PRIMARY KEY, ts TEXT, kind TEXT, dedup_key TEXT, "
            "parents TEXT, payload TEXT)"
        )
    conn.close()
    before = ledger.read_bytes()
    done = cli("lifeline", ledger.parent.parent, "context", check=False)
    assert done.returncode == 2 and "is a ledger of lifeline-context" in done.stderr, done.stderr
    assert ledger.read_bytes() == before  # was: our tables and WAL mode added to it


@pytest.mark.slow
def test_serve_announces_a_write_made_in_any_folder(tmp_path: Path) -> None:
    """The line watcher of `serve` reads the line by URI: in such a folder it could not,
    and a write reached the peers only at the next periodic sync (a minute or more)."""
    a, b = tmp_path / ODD / "a", tmp_path / ODD / "b"
    files = {root: shared_node(root) for root in (a, b)}
    join_mesh(a, [b])
    ports = {a: free_port(), b: free_port()}
    with (
        serve(a, "--listen", f"127.0.0.1:{ports[a]}", "--no-discovery"),
        serve(
            b,
            "--listen",
            f"127.0.0.1:{ports[b]}",
            "--no-discovery",
            "--peer",
            f"127.0.0.1:{ports[a]}",
        ),
    ):
        wait_for_entry(files[b], log_note(a, "first"))  # the start-up sync
        wait_for_entry(files[b], log_note(a, "announced"), deadline_s=10.0)
