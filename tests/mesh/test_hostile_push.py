"""A member's ``Push`` writes only what a session would: the cross-line parents of the
entries it carries, never a declaration of its own choosing, never over one held.

Real processes over mutual TLS: A (the CA holder) serves, holding an entry of ``ledger``
whose parent lives in its line ``design``; B is a member that synced it and then pushes by
hand (``tests/support/hostile_push.py``), as the security review did: thousands of stray
declarations on an entry A already holds, the ``design`` parent re-declared in another
line, a 2 MB id, more declarations than a push may carry. A's declarations stay as they
were, `verify` passes, and the malformed pushes are refused in one line.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest

from lifeline.entry import Entry
from lifeline.errors import LifelineError
from lifeline.ledger import utc_now
from lifeline.lines import EXTERNAL_ANCHOR
from lifeline_mesh.home.identity import NodeIdentity
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.node.shallow_serve import MAX_PUSH_ITEMS
from lifeline_mesh.notary.statement import Role, sign
from tests.support.hostile_push import held_entry, push
from tests.support.mesh_procs import cli, free_port, join_mesh, serve, shared_node

pytestmark = pytest.mark.slow


def _externals(root: Path) -> dict[str, str]:
    with sqlite3.connect(root / ".lifeline" / "ledger.db") as conn:
        return dict(conn.execute("SELECT id, line FROM externals").fetchall())


def _count(root: Path) -> int:
    with sqlite3.connect(root / ".lifeline" / "ledger.db") as conn:
        return int(conn.execute("SELECT count(*) FROM entries").fetchone()[0])


def _log(root: Path, *args: str) -> str:
    out = cli("lifeline", root, "log", "--kind", "decision", "--json", *args).stdout
    return str(json.loads(out)["id"])


def _stray(n: int, size: int = 32) -> list[tuple[bytes, str]]:
    return [(os.urandom(size), "zz") for _ in range(n)]


@pytest.mark.timeout(600)
def test_a_push_declares_only_its_entries_parents_and_never_moves_one(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    for root in (a, b):
        shared_node(root)
    join_mesh(a, [b])
    cli("lifeline", a, "--line", "design", "init")
    design = _log(a, "--line", "design", "--summary", "Design: one queue per tenant")
    uses = _log(a, "--summary", "Queues: per tenant", "--parents", f"design:{design}")
    assert _externals(a) == {design: "design"}
    address = f"127.0.0.1:{free_port()}"
    with serve(a, "--listen", address, "--no-discovery"):
        cli("lifeline_mesh", b, "sync", address)
        carrier = held_entry(b / ".lifeline" / "ledger.db", uses)  # A holds it already
        before = _count(a)
        moved = [(bytes.fromhex(design), "bogus"), (bytes.fromhex(uses), "bogus")]
        assert push(b, address, [carrier], [*moved, *_stray(5000)]) == (0, 0)
        assert _externals(a) == {design: "design"} and _count(a) == before
        # a new entry on the design parent: stored, its parent left in its line
        child = Entry.create(ts=utc_now(), kind="note", summary="B's", parents=(design, uses))
        assert push(b, address, [child], [*moved, *_stray(100)])[0] == 1
        assert _externals(a) == {design: "design"} and _count(a) == before + 1
        other = Entry.create(ts=utc_now(), kind="note", summary="not stored")
        with pytest.raises(LifelineError, match="2000000 bytes, not 32"):
            push(b, address, [other], _stray(1, size=2_000_000))
        with pytest.raises(LifelineError, match="cross-line parents included"):
            push(b, address, [other], _stray(MAX_PUSH_ITEMS))
        assert _externals(a) == {design: "design"} and _count(a) == before + 1
        # the node kept serving: an honest sync still goes through
        assert cli("lifeline_mesh", b, "sync", address, check=False).returncode == 0
    verified = cli("lifeline", a, "verify", check=False)
    assert verified.returncode == 0, verified.stdout + verified.stderr


def test_an_anchor_declared_under_a_signed_entry_fails_verify(tmp_path: Path) -> None:
    """An external anchor is a parent a markdown import could not reproduce; taken from
    peers since the line must sync (commit 16f3482), it let a member pass off a parent it
    withholds: B pushes an entry it signed whose parent exists nowhere, declared an anchor,
    and `verify` on A passed (a parent declared in a line that does not hold it fails it,
    `external-missing`). Now `anchor-signed` names the entry and its signer; an unsigned
    child of an anchor (an import's) still passes (decision 0123)."""
    a, b = tmp_path / "a", tmp_path / "b"
    for root in (a, b):
        shared_node(root)
    join_mesh(a, [b])
    _log(a, "--summary", "A signs what it writes")
    b_key, _ = NodeIdentity.load_or_create(NodeHome(b))
    withheld, lost = os.urandom(32), os.urandom(32)
    signed = Entry.create(ts=utc_now(), kind="decision", summary="B's", parents=(withheld.hex(),))
    imported = Entry.create(ts=utc_now(), kind="note", summary="an import's", parents=(lost.hex(),))
    address = f"127.0.0.1:{free_port()}"
    with serve(a, "--listen", address, "--no-discovery"):
        cli("lifeline_mesh", b, "sync", address)
        author = sign(b_key, Role.AUTHOR, signed.id, signed.ts).item
        assert push(b, address, [signed], [(withheld, EXTERNAL_ANCHOR)], attestations=[author])
        assert push(b, address, [imported], [(lost, EXTERNAL_ANCHOR)])[0] == 1
    assert _externals(a)[withheld.hex()] == EXTERNAL_ANCHOR
    done = cli("lifeline_mesh", a, "verify", "--allow-unsigned", "--json", check=False)
    report = json.loads(done.stdout)
    assert done.returncode == 1, report
    failures = [f for f in report["lines"][0]["findings"] if f["severity"] == "fail"]
    assert [(f["check"], f["subject"]) for f in failures] == [("anchor-signed", signed.id)]
    assert b_key.node_id in failures[0]["detail"]
