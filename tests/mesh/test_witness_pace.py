"""Rows taken over Watch calls are witnessed at most once per interval (decision 0091):
real line files, real signed entries written by `lifeline log`, a real node taking their
rows as its Watch calls would. The first taking is witnessed at once; those within the
interval are not, and one deferred statement, signed when the interval ends, witnesses the
state they left (its tips cover every entry taken). A session signs at its end, except on
a LAN of many nodes, where it is sampled too."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path

from lifeline.entry import Entry
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.node.live_rows import Taken
from lifeline_mesh.node.root import Node
from lifeline_mesh.node.witness_pace import WITNESSES, witness_share
from lifeline_mesh.notary.statement import decode
from lifeline_mesh.transport.announce import ChangeItems
from tests.support.mesh_procs import cli, signed_node
from tests.support.sync_helpers import serving

LINE = "ledger"


def _count(node: Node, table: str) -> int:
    with sqlite3.connect(node.home.line_path(LINE)) as conn:
        return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])


def _last_statement_tips(node: Node) -> list[str]:
    with sqlite3.connect(node.home.line_path(LINE)) as conn:
        raw = conn.execute("SELECT item FROM statements ORDER BY seq DESC LIMIT 1").fetchone()[0]
    return list(decode(bytes(raw)).summary_tips)


async def _write(node: Node, summary: str) -> ChangeItems:
    before = _count(node, "entries")
    cli("lifeline", node.home.root, "log", "--kind", "decision", "--summary", summary)
    [rows] = await node.rows.read(LINE, before, before + 1)
    return rows


async def test_rows_taken_within_the_interval_are_witnessed_once_later(tmp_path: Path) -> None:
    signed_node(tmp_path / "a", "first")
    signed_node(tmp_path / "b")
    a = Node(NodeHome(tmp_path / "a"), insecure=True)
    b = Node(NodeHome(tmp_path / "b"), insecure=True)
    b.parts.pace.every_s = 3.0
    [first] = await a.rows.read(LINE, 0, _count(a, "entries"))
    # written before the interval starts: three `lifeline log` processes may take longer
    # than the interval on a loaded machine
    later = [await _write(a, f"write {n}") for n in range(3)]
    assert await b.rows.take("node-a", first) is Taken.STORED
    assert _count(b, "statements") == 1  # the first taking: witnessed at once
    started = time.monotonic()
    for rows in later:
        assert await b.rows.take("node-a", rows) is Taken.STORED
    last = later[-1]
    assert _count(b, "statements") == 1  # within the interval: none more yet
    assert b.parts.pace.counts == {"signed": 1, "deferred": 1, "passed": 0}
    deadline = started + 30
    while _count(b, "statements") == 1:
        assert time.monotonic() < deadline, "the deferred statement was never signed"
        await asyncio.sleep(0.05)
    assert time.monotonic() - started >= 2.0  # not before the interval ended
    assert _count(b, "statements") == 2  # one statement for the three takings
    assert _last_statement_tips(b) == [Entry.from_json(last.entries[-1], check=False).id]


async def test_on_a_large_lan_a_node_witnesses_only_the_intervals_drawn(tmp_path: Path) -> None:
    """On a LAN of more than WITNESSES nodes a node witnesses an interval's rows with the
    chance WITNESSES / N (decision 0095): an interval not drawn leaves no statement, not
    even a deferred one; the next interval is drawn afresh."""
    assert witness_share(1) == witness_share(WITNESSES) == 1.0
    assert witness_share(30) == WITNESSES / 30
    signed_node(tmp_path / "a", "first")
    signed_node(tmp_path / "b")
    a = Node(NodeHome(tmp_path / "a"), insecure=True)
    b = Node(NodeHome(tmp_path / "b"), insecure=True)
    assert b._witness_share() == 1.0  # no LAN heard: every interval
    draws = iter([0.5, 0.1])  # against a share of 0.25: not drawn, then drawn
    pace = b.parts.pace
    pace.every_s, pace.share, pace.rand = 1.0, lambda: 0.25, lambda: next(draws)
    [first] = await a.rows.read(LINE, 0, _count(a, "entries"))
    second, third = await _write(a, "second"), await _write(a, "third")  # before the interval
    assert await b.rows.take("node-a", first) is Taken.STORED
    assert await b.rows.take("node-a", second) is Taken.STORED
    await asyncio.sleep(1.5)
    assert _count(b, "statements") == 0  # neither at once nor deferred
    assert await b.rows.take("node-a", third) is Taken.STORED
    assert _count(b, "statements") == 1  # the next interval was drawn: witnessed at once
    assert b.parts.pace.counts == {"signed": 1, "deferred": 0, "passed": 1}


async def test_on_a_large_lan_a_session_is_sampled_too(tmp_path: Path) -> None:
    """On a LAN of more than WITNESSES nodes a session's new entries are witnessed by the
    same draw as rows taken over Watch calls (decision 0098); with fewer nodes — and for
    `sync` from the command line, which hears no LAN — a session signs at its end."""
    signed_node(tmp_path / "a", "first", "second")
    signed_node(tmp_path / "b")
    a = Node(NodeHome(tmp_path / "a"), insecure=True)
    b = Node(NodeHome(tmp_path / "b"), insecure=True)
    pace = b.parts.pace
    pace.share, pace.rand = lambda: 0.25, lambda: 0.5  # an interval not drawn
    async with serving(a) as (_, address):
        [report] = await b.sync(address, [LINE])
        assert report.entries_added == 2
        assert _count(b, "statements") == 0
        assert pace.counts["passed"] == 1
        await _write(a, "third")
        pace.share = lambda: 1.0  # a small LAN: within the same interval, signed all the same
        [report] = await b.sync(address, [LINE])
        assert report.entries_added == 1
    assert _count(b, "statements") == 1
