"""A signed initial sync's receiving steps, one at a time: prints µs per item, not a test.

    python bench/sync_receive.py [--n 100000] [--gc-threshold N]

The calls a receiving node makes for each received batch (6,400 items, as
``lifeline_mesh/node/root.py`` ``NODE_LIMITS`` fetches), each timed alone on one thread
(CPU time): decoding the author statements (the node's event loop), verifying their
signatures (the helper processes), storing them (the store thread); parsing the entries
with their ids recomputed (helpers), building the parsed items (event loop), checking and
storing them (store thread). The sender's side, the wire and the overlap of the steps are
left out: ``bench/sync_signed.py`` times the whole session. ``--gc-threshold`` sets the
collector's first generation (0: Python's default), as sessions and helpers run it.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import tempfile
import time
from collections import defaultdict
from dataclasses import astuple
from pathlib import Path

from sync_signed import build

from lifeline.ledger import utc_now
from lifeline.store.sqlite import SqliteStore
from lifeline_mesh.helpers.worker import first_bad_in, parse_entries
from lifeline_mesh.home.identity import NodeIdentity
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.notary.admission import check_items
from lifeline_mesh.notary.attestation_set import AttestationCodec
from lifeline_mesh.notary.notarized_set import NotarizedEntrySet
from lifeline_mesh.notary.sign import sign_entries
from lifeline_mesh.notary.statement import Attestation
from lifeline_mesh.notary.storage import NotaryStore
from lifeline_mesh.recon.entry_codec import EntryCodec
from lifeline_mesh.sync.entry_offload import parsed_items
from lifeline_mesh.sync.entry_set import EntrySet

BATCH = 6400


async def run(n: int) -> None:
    spent: dict[str, float] = defaultdict(float)

    def timed(step: str, started: float, clock: float) -> None:
        spent[step] += clock - started

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        identity, _ = NodeIdentity.load_or_create(NodeHome(root / "a"))
        entries = build(n)
        async with await SqliteStore.open(root / "a.db") as sender:
            for k in range(0, n, 5000):
                await sender.append_many(entries[k : k + 5000])
                await sign_entries(sender, identity, entries[k : k + 5000])
            items = await (await NotaryStore.attach(sender)).items()
        raws = [e.to_json() for e in entries]
        async with await SqliteStore.open(root / "b.db") as store:
            notary = await NotaryStore.attach(store)
            codec, now = AttestationCodec(), utc_now()
            for k in range(0, len(items), BATCH):
                part = items[k : k + BATCH]
                t = time.thread_time()
                parsed = [codec.parse(raw) for raw in part]
                timed("decode author statements (event loop)", t, time.thread_time())
                t = time.thread_time()
                assert first_bad_in(part) == -1
                timed("verify their signatures (helpers)", t, time.thread_time())
                t = time.thread_time()
                values = [p.value for p in parsed if isinstance(p.value, Attestation)]
                atts = check_items(values, now, None, signatures=False)
                timed("signers and times (event loop)", t, time.thread_time())
                t = time.process_time()
                await notary.commit(atts)
                timed("store the signatures (store thread)", t, time.process_time())
            limits = astuple(EntryCodec().limits)
            guarded = NotarizedEntrySet(EntrySet(store), notary)
            for k in range(0, n, BATCH):
                chunk = raws[k : k + BATCH]
                t = time.thread_time()
                bad, answer = parse_entries(limits, chunk)
                assert bad == -1
                timed("parse entries, ids recomputed (helpers)", t, time.thread_time())
                t = time.thread_time()
                ready = parsed_items(chunk, answer)
                timed("build the parsed entries (event loop)", t, time.thread_time())
                t = time.process_time()
                await guarded.admit(ready, [])
                timed("check and store the entries (store thread)", t, time.process_time())
    print(f"n = {n:,} entries and their author signatures, batches of {BATCH:,}")
    for step, seconds in spent.items():
        print(f"  {step:44s} {seconds / n * 1e6:6.1f} µs per item  ({seconds:.2f} s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--gc-threshold", type=int, default=0)
    args = parser.parse_args()
    if args.gc_threshold:
        gc.set_threshold(args.gc_threshold, *gc.get_threshold()[1:])
    asyncio.run(run(args.n))


if __name__ == "__main__":
    main()
