"""A rogue member edits its own members.json; honest nodes that sync with it believe none of it.

Real processes throughout: the mesh is made with the real commands, the rogue runs `serve`
over mutual TLS, and the honest nodes (the CA holder among them) dial it with `sync`, which
pulls its membership first (the Revocations RPC) — the path the poison used to travel. A
members row counts only when the mesh CA's certificate proves it (decision 0047).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from lifeline_mesh.home.identity import NodeIdentity
from lifeline_mesh.home.node_home import NodeHome
from tests.support.mesh_procs import (
    cli,
    free_port,
    has_entry,
    join_mesh,
    log_note,
    serve,
    serve_insecure,
    shared_node,
    signed_node,
    start_ca_serve,
    terminate,
)

pytestmark = pytest.mark.slow
# The rogue's `serve` hands out its hand-edited file as written (tests/support/rogue_node.py).
ROGUE = (sys.executable, "-m", "tests.support.rogue_node")


def _members(root: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(NodeHome(root).members_path.read_text())
    return data


def _edit_members(root: Path, rows: list[dict[str, Any]], retired: list[list[str]]) -> None:
    """What the rogue does by hand: rows with no certificate of the mesh CA."""
    data = _members(root)
    data["members"].extend(rows)
    data.setdefault("retired", []).extend(retired)
    NodeHome(root).members_path.write_text(json.dumps(data, indent=2))


def _outsider_row(root: Path, role: str = "member", **extra: Any) -> dict[str, Any]:
    identity = NodeIdentity.of(NodeHome(root))
    row = {
        "node_id": identity.node_id,
        "public_key": identity.public_key.hex(),
        "role": role,
        "status": "active",
        "joined_at": "2026-01-01T00:00:00Z",
    }
    return {**row, **extra}


def test_a_rogue_members_file_adds_no_signer_and_erases_no_member(tmp_path: Path) -> None:
    ca, honest, rogue, outsider = (tmp_path / n for n in ("ca", "honest", "rogue", "outsider"))
    lines = {root: shared_node(root) for root in (ca, honest, rogue)}
    join_mesh(ca, [honest, rogue])
    ca_id = cli("lifeline_mesh", ca, "id").stdout.strip()
    honest_note = log_note(ca, "written by the CA holder")

    # An outsider key, never certified, signs a decision; the rogue takes it into its line.
    signed_node(outsider, "uncertified decision")
    forged = log_note(outsider, "signed by an uncertified key")
    with serve_insecure(outsider) as (_, outsider_address):
        cli("lifeline_mesh", rogue, "sync", "--insecure", outsider_address)
    assert has_entry(lines[rogue], forged)

    # The rogue lists the outsider as a member and retires the CA holder, by hand.
    outsider_id = cli("lifeline_mesh", outsider, "id").stdout.strip()
    _edit_members(
        rogue,
        [_outsider_row(outsider)],
        [[ca_id, "2026-01-01T00:00:00Z", "ci"]],
    )

    rogue_address, ca_address = (f"127.0.0.1:{free_port()}" for _ in "rc")
    with serve(ca, "--listen", ca_address):
        cli("lifeline_mesh", honest, "sync", ca_address)  # the honest node holds A's note
    assert has_entry(lines[honest], honest_note)
    with serve(rogue, "--listen", rogue_address, wrap=ROGUE):
        from_ca = cli("lifeline_mesh", ca, "sync", rogue_address, check=False)
        from_honest = cli("lifeline_mesh", honest, "sync", rogue_address, check=False)

    for root, run in ((ca, from_ca), (honest, from_honest)):
        members = _members(root)
        known = {m["node_id"] for m in members["members"]}
        assert outsider_id not in known, f"{root.name} took the uncertified signer"
        assert ca_id in known, f"{root.name} let a retired row erase the CA holder"
        assert not members.get("retired"), members.get("retired")
        assert not has_entry(lines[root], forged), f"{root.name} admitted the forged entry"
        # The refusal is logged, naming the peer that sent it.
        assert f"members row for {outsider_id} sent by peer {rogue_address} refused" in (
            run.stderr
        ), run.stderr
        assert f"members row for {ca_id} sent by peer {rogue_address} refused" in run.stderr

    # What the honest node holds still verifies: the CA holder's signatures stand.
    verified = cli("lifeline_mesh", honest, "verify", "--json", check=False)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert json.loads(verified.stdout)["unproven_members"] == []

    # On the rogue itself the hand-edited rows prove nothing: verify reports them, and the
    # entry the uncertified key signed fails.
    own = cli("lifeline_mesh", rogue, "verify", check=False)
    assert own.returncode != 0, own.stdout
    assert "unknown-signer" in own.stdout, own.stdout
    assert f"{outsider_id}: it carries no certificate from the mesh CA" in own.stdout


def test_a_new_member_cannot_be_pre_listed_as_a_revoked_reader(tmp_path: Path) -> None:
    ca, rogue, newcomer = (tmp_path / n for n in ("ca", "rogue", "newcomer"))
    for root in (ca, rogue):
        shared_node(root)
    join_mesh(ca, [rogue])
    # The newcomer's node id is known before it joins (it made its key and told people).
    newcomer.mkdir()
    cli("lifeline_mesh", newcomer, "init")
    newcomer_id = cli("lifeline_mesh", newcomer, "id").stdout.strip()
    _edit_members(
        rogue,
        [
            _outsider_row(
                newcomer, role="reader", status="revoked", revoked_at="2026-01-01T00:00:00Z"
            )
        ],
        [],
    )
    rogue_address = f"127.0.0.1:{free_port()}"
    proc, _, join_address = start_ca_serve(ca)
    try:
        with serve(rogue, "--listen", rogue_address, wrap=ROGUE):
            pulled = cli("lifeline_mesh", ca, "members", "--pull", rogue_address, check=False)
        token = json.loads(cli("lifeline_mesh", ca, "invite", "--json").stdout)["token"]
        cli("lifeline_mesh", newcomer, "join", token, "--peer", join_address)
    finally:
        terminate(proc)
    rows = json.loads(cli("lifeline_mesh", ca, "members", "--json").stdout)["members"]
    mine = next(r for r in rows if r["node_id"] == newcomer_id)
    assert (mine["role"], mine["status"]) == ("member", "active"), mine
    assert f"members row for {newcomer_id} sent by peer {rogue_address} refused" in (pulled.stderr)
