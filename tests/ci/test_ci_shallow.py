"""`ci run` pulls shallow by default (decision 0063), against a real serving CA holder whose
line has history: the job gets the truth without the history, its entry is pushed and
admitted on the node; `--full-history` pulls everything."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from lifeline.home import Home
from lifeline.ledger import Draft, Ledger
from lifeline.store.sqlite import SqliteStore
from lifeline_mesh.notary.sign import append_hook_factory
from tests.support.ci_helpers import Hub, job
from tests.support.mesh_procs import has_entry

NOTES = 80  # more than the Recent section keeps: the oldest are history


async def _history(root: Path) -> None:
    hook = append_hook_factory(Home(root))
    async with await SqliteStore.open(Home(root).line_path("ledger")) as store:
        ledger = Ledger(store, hooks=[hook] if hook else [])
        for n in range(NOTES):
            await ledger.append(Draft(kind="note", summary=f"old note {n}", agent="t"))


def _count(line_file: Path, sql: str) -> int:
    conn = sqlite3.connect(f"file:{line_file}?mode=ro", uri=True)
    try:
        return int(conn.execute(sql).fetchone()[0])
    finally:
        conn.close()


def test_ci_run_takes_the_truth_shallow_and_pushes_what_it_wrote(hub: Hub, tmp_path: Path) -> None:
    asyncio.run(_history(hub.root))
    total = _count(hub.line_file, "SELECT count(*) FROM entries")
    token = hub.credential("gha")
    write = "lifeline log --kind test --summary 'CI: shallow job passes' --agent ci --json"
    done = job(tmp_path / "job", token, "ci", "run", "--", "sh", "-c", f"{write} > id.txt")
    assert done.returncode == 0, done.stderr
    assert "in force (shallow: no history)" in done.stderr
    assert "pushed line 'ledger' back" in done.stderr
    runner_line = tmp_path / "job" / ".lifeline" / "ledger.db"
    held = _count(runner_line, "SELECT count(*) FROM entries")
    assert held < total  # the old notes stayed on the node
    assert _count(runner_line, "SELECT count(*) FROM shallow_boundary") == 1
    context = (tmp_path / "job" / ".lifeline" / "ci" / "lifeline-context.md").read_text()
    assert "Payments use Postgres" in context
    written = (tmp_path / "job" / "id.txt").read_text().split('"id": "')[1][:64]
    assert has_entry(hub.line_file, written)  # admitted on the serving node

    full = job(tmp_path / "full", token, "ci", "run", "--full-history", "--", "true")
    assert full.returncode == 0, full.stderr
    assert "shallow" not in full.stderr
    assert _count(
        tmp_path / "full" / ".lifeline" / "ledger.db", "SELECT count(*) FROM entries"
    ) == (total + 1)
