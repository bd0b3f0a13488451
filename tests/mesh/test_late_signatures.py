"""An author signature that reaches a node after the entry it signs goes on to the peers
the entry went to, within seconds.

Three real `serve` nodes over mutual TLS. B holds C's entry without its signature (as a
session cut short leaves it) and relays it to A, its only peer. Then B takes the signature
from C with `lifeline-mesh sync`. B's line watcher saw no change, since no entry row came,
so A got the signature only at the next periodic check of its link with B (60 s, or 300 s
for the second end of a link watched both ways), one hop at a time. The fault lab on a
loaded machine once ended its 90 s drain with a node still lacking one.
"""

from __future__ import annotations

import asyncio
import time
from contextlib import ExitStack
from pathlib import Path

import pytest

from lifeline.store.sqlite import SqliteStore
from lifeline_mesh.peering.schedule import PERIODIC_SYNC_S
from tests.support.mesh_procs import (
    author_signed,
    cli,
    free_port,
    join_mesh,
    log_note,
    serve,
    shared_node,
    wait_for_entry,
)

pytestmark = pytest.mark.slow

WITHIN_S = 15.0  # well under the periodic check (PERIODIC_SYNC_S)


async def _copy_unsigned(source: Path, target: Path, entry_id: str) -> None:
    """The entry as a session cut short before its signature leaves it: stored, unsigned."""
    async with await SqliteStore.open(source, create=False) as store:
        (entry,) = await store.get_many([entry_id])
    async with await SqliteStore.open(target, create=False) as store:
        await store.append_many([entry])


def test_a_late_signature_follows_its_entry_to_the_next_node(tmp_path: Path) -> None:
    assert WITHIN_S < PERIODIC_SYNC_S / 2
    a, b, c = roots = [tmp_path / n for n in "abc"]
    files = {root: shared_node(root) for root in roots}
    join_mesh(a, [b, c])
    entry_id = log_note(c, "written on C, signed there")
    asyncio.run(_copy_unsigned(files[c], files[b], entry_id))
    assert not author_signed(files[b], entry_id)
    address = {root: f"127.0.0.1:{free_port()}" for root in roots}
    peers = {a: [b], b: [a], c: []}
    with ExitStack() as stack:
        for root in roots:
            extra = [x for o in peers[root] for x in ("--peer", address[o])]
            stack.enter_context(serve(root, "--listen", address[root], "--no-discovery", *extra))
        wait_for_entry(files[a], entry_id)  # relayed by B, unsigned
        time.sleep(2)  # the first sessions of the A-B link are over
        assert not author_signed(files[a], entry_id)

        cli("lifeline_mesh", b, "sync", address[c])  # B takes the signature from C
        assert author_signed(files[b], entry_id)
        took = time.monotonic()
        while not author_signed(files[a], entry_id):
            assert time.monotonic() - took < WITHIN_S, "the signature stayed on B"
            time.sleep(0.25)
