"""A hub (`serve --store postgresql://…`, mutual TLS) takes from a member's ``Push`` only
the cross-line parents of the entries it carries, and never replaces a declaration it holds
(the line-file case: tests/mesh/test_hostile_push.py). Real processes, a real PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import asyncpg
import pytest

from lifeline.entry import Entry
from lifeline.errors import LifelineError
from lifeline.ledger import utc_now
from tests.support.hostile_push import held_entry, push
from tests.support.mesh_procs import cli, join_mesh, shared_node
from tests.support.pg_server import fresh_database, hub

pytestmark = pytest.mark.slow


async def _hub_rows(url: str) -> tuple[dict[str, str], int]:
    """The hub's declarations (id -> line) and its number of entries."""
    conn = await asyncpg.connect(url)
    try:
        rows = await conn.fetch("SELECT id, line FROM externals")
        count = await conn.fetchval("SELECT count(*) FROM entries")
        return {bytes(r[0]).hex(): r[1] for r in rows}, int(count)
    finally:
        await conn.close()


@pytest.mark.timeout(900)  # real processes: minutes when the machine is loaded
def test_a_hub_declares_only_a_pushs_parents_and_never_moves_one(
    pg_server: str, tmp_path: Path
) -> None:
    url = asyncio.run(fresh_database(pg_server))
    a, h, b = (tmp_path / n for n in ("a", "hub", "b"))
    for root in (a, h, b):
        shared_node(root)
    join_mesh(a, [h, b])
    cli("lifeline", a, "--line", "design", "init")
    made = cli("lifeline", a, "--line", "design", "log", "--kind", "decision", "--json",
               "--summary", "Design: one queue per tenant").stdout  # fmt: skip
    design = str(json.loads(made)["id"])
    made = cli("lifeline", a, "log", "--kind", "decision", "--json", "--summary",
               "Queues: per tenant", "--parents", f"design:{design}").stdout  # fmt: skip
    uses = str(json.loads(made)["id"])
    with hub(h, url, insecure=False) as (_proc, address):
        cli("lifeline_mesh", a, "sync", address)
        cli("lifeline_mesh", b, "sync", address)
        declared, before = asyncio.run(_hub_rows(url))
        assert declared == {design: "design"}
        carrier = held_entry(b / ".lifeline" / "ledger.db", uses)
        moved = [(bytes.fromhex(design), "bogus"), (bytes.fromhex(uses), "bogus")]
        stray = [(os.urandom(32), "zz") for _ in range(2000)]
        assert push(b, address, [carrier], [*moved, *stray]) == (0, 0)
        child = Entry.create(ts=utc_now(), kind="note", summary="B's", parents=(design, uses))
        assert push(b, address, [child], [*moved, *stray])[0] == 1
        with pytest.raises(LifelineError, match="not 32"):
            push(b, address, [child], [(os.urandom(2_000_000), "huge")])
        assert asyncio.run(_hub_rows(url)) == ({design: "design"}, before + 1)
