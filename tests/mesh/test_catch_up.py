"""One catch-up session a link, not one each way (decision 0089), with real `serve` nodes.

When a link comes back — a partition healed, a node started with a peer — both ends get a
fresh Watch call, and each used to start a session at once, whatever the other was doing:
two sessions on the link at the same time, each carrying the same backlog both ways and
verifying every entry's signature twice. The lab's LAN of 12, half cut off for 5 minutes,
received each write four times over (decision 0089's timeline). Now the session a fresh
call asks for waits while the node runs another one, and a session the peer dialed to us
that was running when the call opened (or began since) answers it.

Two nodes of one mesh (mutual TLS on 127.0.0.1), node a with node b as its static peer (b
watches it back, decision 0066), in touch; b stops, and while it is down each node gets
``BACKLOG`` signed writes the other lacks; b starts again on the same port. Both ends get
their fresh calls as a's redialled Watch call reaches b. Once both hold every write, the
sessions of that reunion (each node logs its sessions with ``--log-format json`` and
metrics on) must have carried each write about once: on the tree before, both ends caught
up at once and the entries received were about twice the backlog.
"""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime
from pathlib import Path

import pytest

from lifeline.home import Home
from lifeline.ledger import Draft, Ledger
from lifeline.plugins import load_append_hooks
from lifeline.store.sqlite import SqliteStore
from tests.support.mesh_procs import first_line, free_ports, join_mesh, shared_node

pytestmark = [pytest.mark.slow, pytest.mark.serial]  # two nodes verifying 600 signatures

BACKLOG = 300  # writes on each node before they meet
# Entries received over all sessions, per entry either node lacked: ~1.0 now (a few
# writes cross twice when both nodes' sessions overlap at start-up: a's first session
# begins before b's watch back, decision 0066), 1.5-2 when both ends caught up at once.
RECEIVED_PER_ENTRY_BOUND = 1.25
CONVERGE_S = 180.0  # generous: the machine is shared
SESSION = re.compile(r"session (in|out) with \S+ on line ledger: sent (\d+), received (\d+)")


async def _write(root: Path, n: int, what: str) -> None:
    """``n`` signed notes on ``root``'s line, as `lifeline log` writes them."""
    async with await SqliteStore.open(root / ".lifeline" / "ledger.db") as store:
        ledger = Ledger(store, hooks=load_append_hooks(Home(root)))
        for k in range(n):
            body = f"{root.name} {what} {k}: what was decided and why, in a sentence or two."
            await ledger.append(Draft(kind="note", summary=f"{root.name} {what} {k}", body=body))


def _ids(line: Path) -> set[str]:
    conn = sqlite3.connect(f"file:{line}?mode=ro", uri=True, timeout=30)
    try:
        return {row[0] for row in conn.execute("SELECT id FROM entries")}
    finally:
        conn.close()


@contextmanager
def _serve(root: Path, log: Path, *args: str) -> Iterator[subprocess.Popen[str]]:
    """`serve` logging its sessions as JSON to ``log`` (a file: a pipe could fill)."""
    argv = [sys.executable, "-m", "lifeline_mesh", "--root", str(root), "serve"]
    argv += ["--no-discovery", "--log-format", "json", "--metrics-listen", "127.0.0.1:0"]
    with log.open("w") as err:
        proc = subprocess.Popen([*argv, *args], stdout=subprocess.PIPE, stderr=err, text=True)
    try:
        first = first_line(proc, 60, "serve")
        assert first.startswith("listening on "), (first, log.read_text()[-2000:])
        yield proc
    finally:
        proc.terminate()
        try:
            proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()


def _after(log: Path, since: str) -> list[tuple[str, int, int]]:
    """(direction, sent, received) of the sessions ``log`` recorded at ``since`` or later."""
    out = []
    for text in log.read_text().splitlines():
        if text.startswith("{"):
            event = json.loads(text)
            found = SESSION.search(event["message"])
            if found and event["ts"] >= since:
                out.append((found[1], int(found[2]), int(found[3])))
    return out


def _converge(lines: list[Path], everything: set[str]) -> None:
    end = time.monotonic() + CONVERGE_S
    while not all(_ids(line) >= everything for line in lines):
        assert time.monotonic() < end, "the two nodes did not converge"
        time.sleep(0.5)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def test_a_link_that_comes_back_is_caught_up_by_one_session(tmp_path: Path) -> None:
    roots = [tmp_path / "a", tmp_path / "b"]
    lines = [shared_node(root) for root in roots]
    join_mesh(roots[0], roots[1:])
    port_a, port_b = free_ports(2)
    b_args = ["--listen", f"127.0.0.1:{port_b}"]
    with ExitStack() as stack:
        b = stack.enter_context(_serve(roots[1], tmp_path / "b1.log", *b_args))
        stack.enter_context(
            _serve(
                roots[0],
                tmp_path / "a.log",
                *["--listen", f"127.0.0.1:{port_a}", "--peer", f"127.0.0.1:{port_b}"],
            )
        )
        for root in roots:  # in touch: a write of each crosses
            asyncio.run(_write(root, 1, "first"))
        _converge(lines, _ids(lines[0]) | _ids(lines[1]))
        b.terminate()
        b.communicate(timeout=60)
        for root in roots:  # b is down: a's writes wait, and b's were made offline
            asyncio.run(_write(root, BACKLOG, "backlog"))
        everything = _ids(lines[0]) | _ids(lines[1])
        lacking = sum(len(everything - _ids(line)) for line in lines)
        assert lacking == 2 * BACKLOG
        back = _now()
        stack.enter_context(_serve(roots[1], tmp_path / "b2.log", *b_args))
        _converge(lines, everything)
        # The sessions running as they converged end and are logged: a session that
        # began beside the one that brought it all carries what it carries.
        time.sleep(5.0)
    sessions = _after(tmp_path / "a.log", back) + _after(tmp_path / "b2.log", back)
    received = sum(r for _, _, r in sessions)
    assert received >= lacking, sessions
    assert received <= RECEIVED_PER_ENTRY_BOUND * lacking, (
        f"{received} entries received for {lacking} lacking: {sessions}"
    )
