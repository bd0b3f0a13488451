"""A hub node whose identity and membership live in PostgreSQL (decision 0032): two real
`serve` processes on one real database, over mutual TLS, are ONE node. A laptop joins with
an invite issued through process A, redeemed through process B's join port, and syncs
through B; a member revoked through A is refused by both; an MCP token issued through A is
in B's book. Each process root holds only hub.json and its TLS credentials."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

import asyncpg
import pytest

from tests.support.mesh_procs import cli, log_note, shared_node, start_ca_serve, terminate
from tests.support.pg_server import fresh_database

pytestmark = pytest.mark.slow

STATE_FILES = ("node.key", "members.json", "revocations.json", "invites.json", "ca.key")


def _mesh(root: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return cli("lifeline_mesh", root, *args, check=check)


def _hub_init(root: Path, url: str, *extra: str) -> dict[str, object]:
    root.mkdir(parents=True, exist_ok=True)
    report = json.loads(_mesh(root, "hub", "init", "--store", url, "--json", *extra).stdout)
    assert isinstance(report, dict)
    shared_node(root)  # the ledger line is shared (config), nothing else
    return report


def _join(root: Path, token: str, join_address: str) -> str:
    shared_node(root)
    done = _mesh(root, "join", token, "--peer", join_address, "--json")
    return str(json.loads(done.stdout)["node_id"])


def _invite(hub_root: Path) -> str:
    return str(json.loads(_mesh(hub_root, "invite", "--json").stdout)["token"])


def _sync(root: Path, address: str, *, check: bool = True) -> subprocess.CompletedProcess[str]:
    return _mesh(root, "sync", address, "--json", check=check)


def _refused(root: Path, address: str) -> str:
    """Sync until the hub process refuses ``root`` (a revocation through the other process
    applies here within the state's 2 s cache); the refusal's text."""
    deadline = time.monotonic() + 30
    while True:
        done = _sync(root, address, check=False)
        text = done.stdout + done.stderr
        if "revoked" in text:
            return text
        assert time.monotonic() < deadline, f"{root.name} was not refused by {address}: {text}"
        time.sleep(0.5)


def _ids(root: Path) -> set[str]:
    out = cli("lifeline", root, "history", "--json").stdout
    return {e["id"] for e in json.loads(out)}


@pytest.mark.timeout(900)
def test_two_hub_processes_are_one_node_over_mtls(pg_server: str, tmp_path: Path) -> None:
    url = asyncio.run(fresh_database(pg_server))
    hub_a, hub_b = tmp_path / "hub-a", tmp_path / "hub-b"
    first = _hub_init(hub_a, url, "--new-mesh", "team")
    second = _hub_init(hub_b, url)
    assert first["created"] is True and second["created"] is False
    assert first["node_id"] == second["node_id"] and first["tls"] == second["tls"] == "issued"
    assert first["mesh_id"] == second["mesh_id"] is not None
    for root in (hub_a, hub_b):  # stateless apart from the TLS credentials (and hub.json)
        mesh_dir = root / ".lifeline" / "mesh"
        assert not [n for n in STATE_FILES if (mesh_dir / n).exists()], root.name
        assert (mesh_dir / "tls.key").exists()
        assert (mesh_dir / "hub.json").stat().st_mode & 0o077 == 0  # the URL may hold a password
        assert _mesh(root, "id").stdout.strip() == first["node_id"]

    proc_a, sync_a, join_a = start_ca_serve(hub_a)
    try:
        proc_b, sync_b, join_b = start_ca_serve(hub_b)
        try:
            # an invite issued through A, redeemed through B's join port (and the reverse)
            laptop = tmp_path / "laptop"
            laptop_id = _join(laptop, _invite(hub_a), join_b)
            other = tmp_path / "other"
            other_id = _join(other, _invite(hub_b), join_a)
            members = json.loads(_mesh(hub_b, "members", "--json").stdout)
            listed = {m["node_id"] for m in members["members"]}
            assert {laptop_id, other_id, first["node_id"]} <= listed

            # the laptop writes and syncs through B over mTLS; the other reads it through A
            note = log_note(laptop, "written on the laptop, synced through hub process B")
            _sync(laptop, sync_b)  # a refused or failed sync exits non-zero (check=True)
            _sync(other, sync_a)
            assert note in _ids(other)

            # revoked through A: refused by A and by B; the laptop still syncs through both
            _mesh(hub_a, "revoke", other_id, "--reason", "left the team")
            assert "revoked" in _refused(other, sync_b)
            assert "revoked" in _refused(other, sync_a)
            for address in (sync_a, sync_b):
                _sync(laptop, address)

            # an MCP token issued through A is in B's book (one token book, in the database)
            issued = json.loads(_mesh(hub_a, "mcp", "token", "issue", "ci-docs", "--json").stdout)
            rows = json.loads(_mesh(hub_b, "mcp", "token", "list", "--json").stdout)
            assert [r["name"] for r in rows["tokens"]] == ["ci-docs"]
            assert issued["token"].startswith("lmt1_")
        except BaseException:
            for name, proc in (("A", proc_a), ("B", proc_b)):  # say why a process is gone
                if proc.poll() is not None:
                    print(f"hub process {name} exited {proc.returncode}: {proc.communicate()[1]}")
            raise
        finally:
            terminate(proc_b)
    finally:
        terminate(proc_a)


def test_hub_init_refusals(pg_server: str, tmp_path: Path) -> None:
    """One clear line and a non-zero exit: an unreachable database, a root with a node of
    its own, serve --store on a database that holds a hub node this root is not part of."""
    dead = "postgresql://nobody@127.0.0.1:1/none"
    root = tmp_path / "hub"
    root.mkdir()
    done = _mesh(root, "hub", "init", "--store", dead, check=False)
    assert done.returncode != 0 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "cannot use the PostgreSQL database 127.0.0.1:1/none" in done.stderr
    assert not (root / ".lifeline" / "mesh" / "hub.json").exists()

    url = asyncio.run(fresh_database(pg_server))
    laptop = tmp_path / "laptop"
    laptop.mkdir()
    _mesh(laptop, "init")
    done = _mesh(laptop, "hub", "init", "--store", url, check=False)
    assert done.returncode != 0 and "has a node identity of its own" in done.stderr

    hub = tmp_path / "hub2"
    _hub_init(hub, url)
    serve = subprocess.run(
        [sys.executable, "-m", "lifeline_mesh", "--root", str(laptop), "serve", "--insecure",
         "--listen", "127.0.0.1:0", "--store", url],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert serve.returncode != 0 and "holds a hub node" in serve.stderr, serve.stderr


def test_hub_init_from_a_laptop_moves_its_node_in(pg_server: str, tmp_path: Path) -> None:
    """`hub init --from ROOT`: the laptop's node (the mesh's CA holder) becomes the hub node:
    its key, CA key, members, invites and MCP tokens in the database; TLS issued here."""
    laptop = tmp_path / "laptop"
    laptop.mkdir()
    made = json.loads(_mesh(laptop, "init", "--new-mesh", "team", "--json").stdout)
    _invite(laptop)
    _mesh(laptop, "mcp", "token", "issue", "agent-a")
    url = asyncio.run(fresh_database(pg_server))
    hub = tmp_path / "hub"
    report = _hub_init(hub, url, "--from", str(laptop))
    assert report["node_id"] == made["node_id"] and report["mesh_id"] == made["mesh_id"]
    assert {"node-key", "ca-key", "members", "invites", "mcp-tokens"} <= set(
        report["imported"]  # type: ignore[arg-type]
    )
    assert report["tls"] == "issued"
    assert _mesh(hub, "id").stdout.strip() == made["node_id"]
    rows = json.loads(_mesh(hub, "mcp", "token", "list", "--json").stdout)["tokens"]
    assert [r["name"] for r in rows] == ["agent-a"]
    again = json.loads(
        _mesh(
            tmp_path / "hub", "hub", "init", "--store", url, "--from", str(laptop), "--json"
        ).stdout
    )
    assert again["imported"] == [] and "node-key" in again["kept"]  # resumable, nothing lost


@pytest.mark.timeout(900)
def test_a_hub_that_joined_a_laptop_mesh_shares_its_tls_key(pg_server: str, tmp_path: Path) -> None:
    """The mesh's CA key stays on a laptop: the hub node joins it once (through its first
    process); a second process cannot be issued a certificate, says to copy the first's TLS
    credentials, and then serves the laptop over mTLS as the same node."""
    leader = tmp_path / "leader"
    leader.mkdir()
    _mesh(leader, "init", "--new-mesh", "team")
    shared_node(leader)
    url = asyncio.run(fresh_database(pg_server))
    hub_a, hub_b = tmp_path / "hub-a", tmp_path / "hub-b"
    made = _hub_init(hub_a, url)
    assert made["tls"] == "none" and made["mesh_id"] is None
    proc, _, join_port = start_ca_serve(leader)
    try:
        _mesh(hub_a, "join", _invite(leader), "--peer", join_port)
    finally:
        terminate(proc)
    hub_b.mkdir()
    refused = _mesh(hub_b, "hub", "init", "--store", url, check=False)
    assert refused.returncode != 0 and "copy tls.pem and tls.key" in refused.stderr
    for name in ("tls.pem", "tls.key"):
        source = hub_a / ".lifeline" / "mesh" / name
        target = hub_b / ".lifeline" / "mesh" / name
        target.parent.mkdir(parents=True, exist_ok=True)  # the refused init left nothing
        target.write_bytes(source.read_bytes())
        target.chmod(0o600)
    again = _hub_init(hub_b, url)
    assert again["tls"] == "kept" and again["node_id"] == made["node_id"]
    members = json.loads(_mesh(hub_b, "members", "--json").stdout)["members"]
    assert made["node_id"] in {m["node_id"] for m in members}
    server = subprocess.Popen(
        [sys.executable, "-m", "lifeline_mesh", "--root", str(hub_b), "serve", "--listen",
         "127.0.0.1:0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert server.stdout is not None
        first = server.stdout.readline()
        assert first.startswith("listening on "), first
        note = log_note(leader, "from the mesh's leader to the hub's second process")
        _sync(leader, first.removeprefix("listening on ").strip())
    finally:
        terminate(server)
    assert note in _ids(leader)
    assert asyncio.run(_hub_count(url)) == len(_ids(leader))  # all of it reached the hub


async def _hub_count(url: str) -> int:
    conn = await asyncpg.connect(url)
    try:
        return int(await conn.fetchval("SELECT n FROM lines WHERE name = 'ledger'"))
    finally:
        await conn.close()


def test_a_refused_hub_init_leaves_nothing_and_serve_gives_hub_advice(
    pg_server: str, tmp_path: Path
) -> None:
    """`hub init --new-mesh` on a hub already in a mesh is refused and leaves the root as it
    was (no hub.json); a hub root with no mesh certificate is told how to give a hub one."""
    url = asyncio.run(fresh_database(pg_server))
    _hub_init(tmp_path / "first", url, "--new-mesh", "team")
    second = tmp_path / "second"
    second.mkdir()
    done = _mesh(second, "hub", "init", "--store", url, "--new-mesh", "other", check=False)
    assert done.returncode == 2 and "already belongs to a mesh" in done.stderr, done.stderr
    assert list(second.iterdir()) == [], list(second.rglob("*"))

    bare = tmp_path / "bare"  # a hub whose node is in no mesh: its roots hold no certificate
    _hub_init(bare, asyncio.run(fresh_database(pg_server)))
    serve = _mesh(bare, "serve", "--listen", "127.0.0.1:0", check=False)
    assert serve.returncode == 2 and len(serve.stderr.strip().splitlines()) == 1, serve.stderr
    assert "is a hub process root" in serve.stderr and "hub init --store URL" in serve.stderr
    assert "lifeline-mesh join" not in serve.stderr
