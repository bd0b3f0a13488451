"""The truth tables of a hub's line (decision 0077), through real processes on a real
PostgreSQL: two hub processes serve one database over mutual TLS; writes made on either
process's root and a laptop's sync admitted by a `serve` process are folded into the tables
by their own transactions (the tables are current before anyone reads), `context` on each
process's root reads them and shows both sides' writes, and a row edited in SQL — which
`context` then shows, as it reads the tables — is found by `lifeline-mesh verify`, which
rebuilds the tables from the entries."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import asyncpg
import pytest

from tests.support.hub_roots import hub_mesh as _hub_mesh
from tests.support.hub_roots import life as _life
from tests.support.hub_roots import mesh as _mesh
from tests.support.mesh_procs import log_note
from tests.support.pg_server import fresh_database

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


async def _sql(url: str, sql: str, *args: object) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(url)
    try:
        return list(await conn.fetch(sql, *args))
    finally:
        await conn.close()


def _folded(url: str) -> tuple[int, int]:
    """(rows the truth tables cover, rows of the line)."""
    (row,) = asyncio.run(
        _sql(
            url,
            "SELECT coalesce(c.last_seq, -1), l.next_seq - 1 FROM lines l"
            " LEFT JOIN truth_core c USING (line_id) WHERE l.name = 'ledger'",
        )
    )
    return int(row[0]), int(row[1])


def test_hub_processes_keep_the_truth_tables_and_verify_checks_them(
    pg_server: str, tmp_path: Path
) -> None:
    url = asyncio.run(fresh_database(pg_server))
    with _hub_mesh(tmp_path, url) as (hub_a, hub_b, laptop, _sync_a, sync_b):
        assert "0 entries" in _life(hub_a, "context").stdout  # the first read folds
        _life(hub_a, "log", "--kind", "decision", "--summary", "Queue: written on A")
        _life(hub_b, "log", "--kind", "open", "--summary", "Which region? asked on B")
        log_note(laptop, "laptop note: the walrus index")
        _mesh(laptop, "sync", sync_b, "--json")  # admitted by serve process B
        covered, rows = _folded(url)
        assert covered == rows >= 3, (covered, rows)  # folded by the writers themselves

        for root in (hub_a, hub_b):
            context = _life(root, "context").stdout
            assert "Queue: written on A" in context, context
            assert "Which region? asked on B" in context
            assert "walrus index" in context

        # a row edited in SQL: context reads the tables, so it shows the lie ...
        (decision,) = asyncio.run(
            _sql(url, "SELECT id FROM truth_items WHERE summary = $1", b"Queue: written on A")
        )
        asyncio.run(
            _sql(url, "UPDATE truth_items SET summary = $1 WHERE id = $2", b"Queue: forged",
                 decision[0])
        )  # fmt: skip
        assert "Queue: forged" in _life(hub_a, "context").stdout

        # ... until verify, on the other process's root, finds it and rebuilds the tables
        found = _mesh(hub_b, "verify", "--json", check=False)
        assert found.returncode == 1, found.stderr
        (line,) = json.loads(found.stdout)["lines"]
        checks = {(f["check"], f["subject"]) for f in line["findings"]}
        assert ("truth-row", bytes(decision[0]).decode()) in checks, checks
        assert any(c == "truth-rebuilt" for c, _s in checks), checks
        context = _life(hub_a, "context").stdout
        assert "Queue: written on A" in context and "forged" not in context
        assert json.loads(_mesh(hub_a, "verify", "--json").stdout)["ok"]
