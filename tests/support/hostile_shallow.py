"""A hostile node serving altered shallow snapshots (tests of decision 0063's refusals).

    python -m tests.support.hostile_shallow ROOT MODE

Builds the real snapshot of ROOT's line ``ledger`` (signed with ROOT's node key, as
`serve` would), alters it as MODE says, and serves it over gRPC (plain text, loopback,
port 0) until killed; prints ``listening on HOST:PORT`` once bound. Modes:

* ``forged``: the head's time changed after signing (the signature no longer verifies);
* ``other-key``: the head re-signed with another key, still naming ROOT's node;
* ``entry-ts``: an entry's ts changed (its id does not cover the ts), the head re-signed:
  the author's signature names another ts;
* ``author-signature``: a byte of an author signature flipped, the head re-signed;
* ``missing-tip``: the tip's entry left out, the head re-signed over what is sent;
* ``rollback``: two more state statements of ROOT about the line, the later one claiming
  fewer entries (a rolled-back store), the head re-signed: each verifies, and the later is
  refused alone by the joiner's notary while the rest is stored (decision 0111).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys
from pathlib import Path

import grpc

from lifeline.entry import Entry
from lifeline.home import Home
from lifeline.ledger import utc_now
from lifeline.store.schema import line_schema
from lifeline.store.sqlite import SqliteStore
from lifeline_mesh.home.identity import NodeIdentity
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.node.shallow_serve import build_snapshot
from lifeline_mesh.notary.shallow_head import (
    ShallowHead,
    attestations_digest,
    entries_digest,
    sign_head,
)
from lifeline_mesh.notary.sign import state_statements
from lifeline_mesh.notary.states import StateOf
from lifeline_mesh.recon.entry_codec import EntryCodec
from lifeline_mesh.transport.authz import AllowAll
from lifeline_mesh.transport.shallow_rpc import ShallowService, ShallowSnapshot


def _resign(snap: ShallowSnapshot, identity: NodeIdentity, **changes: object) -> ShallowSnapshot:
    snap = dataclasses.replace(snap, **changes)  # type: ignore[arg-type]
    head = ShallowHead.decode(snap.head)
    ids = [Entry.from_json(raw, check=False).id for raw in snap.entries]
    head = dataclasses.replace(
        head,
        entries=entries_digest(ids),
        attestations=attestations_digest([*snap.attestations, *snap.statements]),
    )
    data, signature, key = sign_head(identity, head)
    return dataclasses.replace(snap, head=data, signature=signature, public_key=key)


def alter(snap: ShallowSnapshot, mode: str, identity: NodeIdentity) -> ShallowSnapshot:
    if mode == "forged":
        text = snap.head.decode().replace("\nts: 2", "\nts: 1", 1)
        return dataclasses.replace(snap, head=text.encode())
    if mode == "other-key":
        data, signature, key = sign_head(NodeIdentity.generate(), ShallowHead.decode(snap.head))
        return dataclasses.replace(snap, head=data, signature=signature, public_key=key)
    if mode == "entry-ts":
        first = json.loads(snap.entries[0])
        first["ts"] = "2020-01-01T00:00:00Z"
        raw = json.dumps(first, separators=(",", ":")).encode()
        return _resign(snap, identity, entries=(raw, *snap.entries[1:]))
    if mode == "author-signature":
        bad = bytearray(snap.attestations[-1])
        bad[-1] ^= 1
        return _resign(snap, identity, attestations=(*snap.attestations[:-1], bytes(bad)))
    if mode == "missing-tip":
        tips = ShallowHead.decode(snap.head).tips
        kept = tuple(r for r in snap.entries if Entry.from_json(r, check=False).id not in tips)
        return _resign(snap, identity, entries=kept)
    if mode == "rollback":
        tips = ShallowHead.decode(snap.head).tips
        claims = [
            *state_statements(
                identity, "ledger", StateOf(9, "f" * 32, tips), "2026-01-01T00:00:00.000000Z"
            ),
            *state_statements(
                identity, "ledger", StateOf(3, "e" * 32, tips), "2026-01-02T00:00:00.000000Z"
            ),
        ]
        statements = (*snap.statements, *(c.item for c in claims))
        return _resign(snap, identity, statements=statements)
    raise SystemExit(f"unknown mode {mode!r}")


async def main(root: Path, mode: str) -> None:
    identity = NodeIdentity.of(NodeHome(root))
    async with await SqliteStore.open(Home(root).line_path("ledger"), schema=line_schema()) as s:
        snap = await build_snapshot(s, "ledger", identity, EntryCodec(), utc_now)
    snap = alter(snap, mode, identity)

    async def snapshot(_line: str, _peer: object) -> ShallowSnapshot:
        return snap

    async def admit(_peer: object, _items: object) -> tuple[int, int]:
        return 0, 0

    server = grpc.aio.server()
    ShallowService(AllowAll(), lambda _line: True, snapshot, admit).add_to(server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    print(f"listening on 127.0.0.1:{port}", flush=True)
    await server.wait_for_termination()


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), sys.argv[2]))
