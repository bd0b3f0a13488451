"""`lifeline-mesh sync` says how far a pull is on a terminal, and nothing when piped or
asked for JSON: a real `serve` and real `sync` processes, stderr on a pseudo-terminal."""

from __future__ import annotations

import re
import sqlite3
import subprocess
import sys
from pathlib import Path

from tests.support.mesh_procs import serve_insecure
from tests.support.recon_helpers import chain
from tests.support.sync_helpers import make_node, write
from tests.support.terminal import on_a_terminal


def _sync(root: Path, address: str) -> list[str]:
    return [sys.executable, "-m", "lifeline_mesh", "--root", str(root), "sync", address]


async def test_a_pull_draws_its_counter_on_a_terminal_only(tmp_path: Path) -> None:
    await write(make_node(tmp_path / "b"), chain(1500, "pulled", body="why " * 20))
    for name in ("a", "piped", "json"):
        make_node(tmp_path / name)
    with serve_insecure(tmp_path / "b") as (_proc, address):
        code, drawn = on_a_terminal([*_sync(tmp_path / "a", address), "--insecure"])
        assert code == 0, drawn
        # redrawn at most every 0.2 s: some count of the 1,500, then cleared
        shown = re.findall(rf"line 'ledger' from {re.escape(address)}: ([\d,]+) entries and", drawn)
        assert shown and 0 < int(shown[-1].replace(",", "")) <= 1500, drawn
        assert drawn.endswith("\r\x1b[K")  # cleared before the report (on stdout)
        piped = subprocess.run(
            [*_sync(tmp_path / "piped", address), "--insecure"], capture_output=True, text=True
        )
        assert piped.returncode == 0 and piped.stderr == "", piped.stderr
        quiet = [*_sync(tmp_path / "json", address), "--insecure", "--json"]
        code, drawn = on_a_terminal(quiet)
        assert code == 0 and drawn == ""
    with sqlite3.connect(tmp_path / "json" / ".lifeline" / "ledger.db") as conn:
        assert conn.execute("SELECT count(*) FROM entries").fetchone()[0] == 1500
