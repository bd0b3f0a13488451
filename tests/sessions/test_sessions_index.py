"""The sessions index over a line that is not SQLite (a hub's PostgreSQL line reads the same
way: the store port only): built in memory from the entries, it gives the figures and hits
of the index kept beside a SQLite line, on real transcripts of the three tools."""

from __future__ import annotations

from pathlib import Path

from lifeline.sessions.finder import opened_index, search
from lifeline.sessions.prices import load_prices
from lifeline.sessions.usage import GROUPS, usage_report
from lifeline.store.memory import MemoryStore
from lifeline.store.sqlite import SqliteStore
from tests.support.sessions_support import FIXTURES, run_cli


async def test_an_index_built_from_the_store_port_answers_as_the_file_does(
    tmp_path: Path,
) -> None:
    root = tmp_path / "p"
    root.mkdir()
    tools = [str(FIXTURES / tool) for tool in ("claude-code", "codex", "gemini")]
    done = run_cli(root, "sessions", "ingest", *tools)
    assert done.returncode == 0, done.stderr
    sqlite = await SqliteStore.open(root / ".lifeline" / "sessions.db", create=False)
    memory = MemoryStore()
    await memory.append_many([e async for e in sqlite.stream()])
    prices = load_prices()
    try:
        async with opened_index(sqlite) as on_file, opened_index(memory) as in_memory:
            assert on_file.db.execute("PRAGMA database_list").fetchone()[2]  # a file
            assert in_memory.db.execute("PRAGMA database_list").fetchone()[2] == ""
            for by in GROUPS:
                a = usage_report(on_file, prices, by=by).as_json()
                b = usage_report(in_memory, prices, by=by).as_json()
                assert a == b and a["total"]["tokens"]["total"] > 30_000_000, by
            for query in ("lmstudio endpoint", "apply_patch", "gemini", "the test"):
                hits = await search(sqlite, on_file, query, limit=30)
                assert hits, query
                assert hits == await search(memory, in_memory, query, limit=30), query
    finally:
        await sqlite.close()
