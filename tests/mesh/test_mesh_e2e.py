"""A mesh end to end over mutual TLS: real `serve`, `join`, `sync`, `verify` subprocesses.

A creates the mesh and serves (sync port + join port); B joins as a member, C as a reader;
S is a stranger with a mesh of its own. Entries and their signatures travel both ways
between members, a reader receives but cannot push, a stranger and a revoked node are
refused with messages that say so, and `verify` is clean on every member.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.support.hub_roots import first_words
from tests.support.mesh_procs import cli, serve_with_join_port

pytestmark = pytest.mark.slow


def mesh(root: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return cli("lifeline_mesh", root, *args, check=check)


def ledger(root: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return cli("lifeline", root, *args, check=check)


def history_ids(root: Path) -> list[str]:
    return [e["id"] for e in json.loads(ledger(root, "history", "--json").stdout)]


def test_a_mesh_syncs_signs_verifies_and_refuses_outsiders(tmp_path: Path) -> None:
    a, b, c, s = (tmp_path / n for n in "abcs")
    for root in (a, b, c, s):
        root.mkdir()
        ledger(root, "init")
        mesh(root, "share", "ledger")
    mesh(a, "init", "--new-mesh", "team")
    mesh(s, "init", "--new-mesh", "elsewhere")
    ledger(a, "log", "--kind", "decision", "--summary", "Database: PostgreSQL", "--body", "ACID")

    with serve_with_join_port(a) as (address, join_address):
        member = mesh(a, "invite", "--address", join_address).stdout.strip()
        reader = mesh(a, "invite", "--role", "reader", "--address", join_address).stdout.strip()
        mesh(b, "join", member)
        mesh(c, "join", reader)
        replay = mesh(s, "join", member, check=False)
        assert replay.returncode == 2 and "mesh" in replay.stderr

        ledger(b, "log", "--kind", "note", "--summary", "written on B")
        mesh(b, "sync", address)
        assert len(history_ids(a)) == 2 and history_ids(a) == history_ids(b)
        # Same set, same truth: the context and LIFELINE.md are byte-identical.
        for args in (("context",), ("render", "--stdout")):
            assert ledger(a, *args).stdout == ledger(b, *args).stdout

        # The reader receives everything ...
        mesh(c, "sync", address)
        assert history_ids(c) == history_ids(a)
        # ... and what it writes stays local: it is never offered, so syncs keep working.
        ledger(c, "log", "--kind", "note", "--summary", "a reader's note")
        said = mesh(c, "sync", address).stdout
        assert "sent 0 entries" in said and "this node is a reader" in said, said
        assert "its own entries never leave it" in said
        assert "reader" not in mesh(b, "sync", address).stdout
        ledger(a, "log", "--kind", "note", "--summary", "later on A")
        mesh(c, "sync", address)
        assert set(history_ids(a)) < set(history_ids(c)) and len(history_ids(a)) == 3
        # ... whoever dials: A syncing with the reader's own `serve` takes nothing from it
        serving = ("serve", "--listen", "127.0.0.1:0", "--no-discovery")
        with first_words(c, *serving, says="listening on ") as c_address:
            dialed = json.loads(mesh(a, "sync", c_address, "--json").stdout)
            assert sum(r["entries_received"] for r in dialed) == 0, dialed
            assert len(history_ids(a)) == 3
        # A lists the nodes that synced in by the node id their certificate proved.
        inbound = json.loads(mesh(a, "peers", "--json").stdout)["inbound"]
        assert mesh(c, "id").stdout.strip() in {r["node_id"] for r in inbound}, inbound

        stranger = mesh(s, "sync", address, check=False)
        assert stranger.returncode == 2
        assert "handshake" in stranger.stderr or "refused" in stranger.stderr, stranger.stderr

        b_id = mesh(b, "id").stdout.strip()
        mesh(a, "revoke", b_id)
        revoked = mesh(b, "sync", address, check=False)
        assert revoked.returncode == 2 and "revoked" in revoked.stderr, revoked.stderr

    for root in (a, b):
        report = json.loads(mesh(root, "verify", "--json").stdout)
        assert report["ok"], report
    # Both members' signatures reached A: its author and B's, plus witness receipts.
    signed = json.loads(mesh(a, "verify", "--json").stdout)
    text = json.dumps(signed)
    assert b_id in text and mesh(a, "id").stdout.strip() in text
