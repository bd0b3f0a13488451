"""The head of a shallow snapshot: what the serving node signs (decision 0063). Pure.

A shallow snapshot carries a line's entries in force without their history. Its head says
which line, which node served it and when, how many entries the node held, digests of the
entries and signatures sent, the tips (the entries a runner writes on) and the boundary
(the absent parents of the entries sent, with their heights). The serving node signs the
head's canonical bytes with its ed25519 key, so the runner can prove later where its
truth came from, and nothing sent can be swapped without breaking the signature::

    lifeline-mesh/shallow/v1
    line: ledger
    node: abcd-efgh-ijkl-mnop-qr
    ts: 2026-12-03T21:00:00.000000Z
    count: 1000000
    entries: <sha256 hex over the sorted entry ids, one per line>
    attestations: <sha256 hex over the sorted sha256 hex of each signature and statement>
    tip: <id>                 (sorted; one line each)
    boundary: <id> <height>   (sorted by id; one line each)
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from lifeline.errors import BadSignature, LifelineError, RemoteProtocolError
from lifeline.store.backend import FileOrEntries, on_backend
from lifeline.store.port import Store
from lifeline.store.shallow import read_source
from lifeline.store.shallow_status import shallow_note
from lifeline_mesh.home.identity import NodeIdentity, node_id_for, verify_signature

__all__ = [
    "MAGIC",
    "ShallowHead",
    "attestations_digest",
    "audit_shallow",
    "entries_digest",
    "sign_head",
]

MAGIC = "lifeline-mesh/shallow/v1"
_ID = re.compile(r"[0-9a-f]{64}")
MAX_HEAD_LINES = 1_000_000


def entries_digest(ids: Iterable[str]) -> str:
    return hashlib.sha256("\n".join(sorted(ids)).encode("ascii")).hexdigest()


def attestations_digest(raws: Iterable[bytes]) -> str:
    hashes = sorted(hashlib.sha256(raw).hexdigest() for raw in raws)
    return hashlib.sha256("\n".join(hashes).encode("ascii")).hexdigest()


@dataclass(frozen=True, slots=True)
class ShallowHead:
    line: str
    node_id: str
    ts: str
    count: int
    entries: str
    attestations: str
    tips: tuple[str, ...]
    boundary: Mapping[str, int]

    def encode(self) -> bytes:
        rows = [
            MAGIC,
            f"line: {self.line}",
            f"node: {self.node_id}",
            f"ts: {self.ts}",
            f"count: {self.count}",
            f"entries: {self.entries}",
            f"attestations: {self.attestations}",
            *(f"tip: {t}" for t in sorted(self.tips)),
            *(f"boundary: {i} {self.boundary[i]}" for i in sorted(self.boundary)),
        ]
        return ("\n".join(rows) + "\n").encode("utf-8")

    @classmethod
    def decode(cls, data: bytes) -> ShallowHead:
        """Parse a head; RemoteProtocolError naming what is wrong with it."""
        try:
            rows = data.decode("utf-8").splitlines()
        except UnicodeDecodeError:
            raise RemoteProtocolError("the shallow snapshot's head is not UTF-8") from None
        if len(rows) < 7 or rows[0] != MAGIC or len(rows) > MAX_HEAD_LINES:
            raise RemoteProtocolError(
                f"the shallow snapshot's head is not a {MAGIC} head; is the peer a "
                "lifeline-mesh node of this version?"
            )
        fields = dict(r.split(": ", 1) for r in rows[1:7] if ": " in r)
        tips: list[str] = []
        boundary: dict[str, int] = {}
        for row in rows[7:]:
            key, _, value = row.partition(": ")
            if key == "tip" and _ID.fullmatch(value):
                tips.append(value)
            elif key == "boundary" and _ID.fullmatch(value[:64]) and value[65:].isdigit():
                boundary[value[:64]] = int(value[65:])
            else:
                raise RemoteProtocolError(f"the shallow snapshot's head has a bad row {row[:80]!r}")
        try:
            head = cls(
                fields["line"], fields["node"], fields["ts"], int(fields["count"]),
                fields["entries"], fields["attestations"], tuple(tips), boundary,
            )  # fmt: skip
        except (KeyError, ValueError):
            raise RemoteProtocolError(
                "the shallow snapshot's head lacks line, node, ts, count or a digest"
            ) from None
        if head.encode() != data:
            raise RemoteProtocolError("the shallow snapshot's head is not in canonical form")
        return head

    def verify(self, signature: bytes, public_key: bytes, data: bytes) -> None:
        """The head is ``data``, signed by the node it names with ``public_key``."""
        if len(public_key) != 32 or node_id_for(public_key) != self.node_id:
            raise BadSignature(
                f"the shallow snapshot names node {self.node_id} but carries another node's "
                "key; refusing it (a forged snapshot)"
            )
        try:
            verify_signature(public_key, signature, data)
        except BadSignature:
            raise BadSignature(
                f"the shallow snapshot's signature by {self.node_id} does not verify: the "
                "head or what it lists was altered; refusing it (a forged snapshot)"
            ) from None


def sign_head(identity: NodeIdentity, head: ShallowHead) -> tuple[bytes, bytes, bytes]:
    """(head bytes, signature, public key)."""
    data = head.encode()
    return data, identity.sign(data), identity.public_key


async def _no_source(_store: Store) -> dict[str, Any] | None:
    return None


async def audit_shallow(store: Store, line: str) -> tuple[str | None, str | None]:
    """For ``verify``: (a note that the line is shallow and what was checked, a failure).

    A shallow line's recorded head must still verify: signed by the node it names, over
    the tips it lists. (None, None) for a complete line."""
    note = await shallow_note(store, line)  # None on a line of any other backend than a file
    if note is None:
        return None, None
    source = await on_backend(
        store, FileOrEntries(file=lambda sql: sql.run_read(read_source), entries=_no_source)
    )
    if source is None:
        return note, None
    try:
        data = str(source["head"]).encode("utf-8")
        head = ShallowHead.decode(data)
        head.verify(bytes.fromhex(source["signature"]), bytes.fromhex(source["public_key"]), data)
    except (LifelineError, KeyError, ValueError) as exc:
        return note, f"the recorded shallow snapshot head does not verify: {exc}"
    return (
        f"{note}; verified here: what it holds (its snapshot head, signed by {head.node_id} "
        f"at {head.ts}, verifies)",
        None,
    )
