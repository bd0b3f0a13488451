"""A node reads its membership documents once and again when they change (decision 0076).

Every session of a node in a mesh checks signatures against who may sign: the members,
revocations and CA certificate among its documents. They are loaded once per home and kept
(``NodeHome.kept``) while their stamps stay the same: a node serving three sessions reads
them once, and when another process changes them — here `lifeline-mesh members --pull`, a
real CLI process on the serving node's root — its next session sees the change without a
restart: a member it did not know signs, and what that member signed is admitted."""

from __future__ import annotations

import asyncio
import json
import sys
from collections import Counter
from pathlib import Path

import pytest

from lifeline.errors import LifelineError
from lifeline_mesh.home.config import NodeConfig
from lifeline_mesh.home.identity import NodeIdentity
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.membership.ca import create_mesh
from lifeline_mesh.membership.invite import issue_invite, parse_duration
from lifeline_mesh.membership.join import join
from lifeline_mesh.node.root import Node
from lifeline_mesh.notary.sign import sign_entries
from lifeline_mesh.notary.signers import FileSigners
from tests.support.mesh_procs import cli, has_entry, serve_insecure, shared_node
from tests.support.recon_helpers import chain
from tests.support.sync_helpers import history

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")


async def _signed(node: Node, identity: NodeIdentity, n: int, tag: str) -> list[str]:
    """``n`` new entries on ``node``'s line, each signed by ``identity``."""
    held = await history(node)
    entries = chain(n, tag, held[-1]["id"] if held else None)
    async with node.open_line("ledger") as store:
        await store.append_many(entries)
        await sign_entries(store, identity, entries)
    return [e.id for e in entries]


async def _cli(root: Path, *args: str) -> None:
    """A real `lifeline-mesh` process (the event loop keeps serving meanwhile)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "lifeline_mesh", "--root", str(root), *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await proc.communicate()
    assert proc.returncode == 0, (args, out, err)


async def test_documents_are_read_once_and_again_after_another_process_changes_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    roots = {n: tmp_path / n for n in "abc"}
    for root in roots.values():
        root.mkdir()
        NodeConfig(shared_lines=["ledger"]).save(NodeHome(root))
    create_mesh(NodeHome(roots["a"]), "team")
    a = Node(NodeHome(roots["a"]))
    a_server = a.server(join_listen="127.0.0.1:0")
    a_address = await a_server.start("127.0.0.1:0")
    assert a.join_address is not None
    for name in "bc":  # b joins before c: b's members list does not name c
        token = issue_invite(NodeHome(roots["a"]), "member", parse_duration("1h"), [a.join_address])
        await join(NodeHome(roots[name]), token.encode())
    b = Node(NodeHome(roots["b"]))
    b_server = b.server()
    b_address = await b_server.start("127.0.0.1:0")
    a_id, c_id = (NodeIdentity.of(NodeHome(roots[n])) for n in "ac")

    loads: Counter[str] = Counter()
    load = FileSigners.load.__func__  # type: ignore[attr-defined]

    def counted(cls: type[FileSigners], home: NodeHome, local: str | None) -> FileSigners:
        loads[home.root.name] += 1
        return load(cls, home, local)  # type: ignore[no-any-return]

    monkeypatch.setattr(FileSigners, "load", classmethod(counted))
    configs: Counter[str] = Counter()
    read_config = NodeConfig.load.__func__  # type: ignore[attr-defined]

    def config_read(cls: type[NodeConfig], home: NodeHome) -> NodeConfig:
        configs[home.root.name] += 1
        return read_config(cls, home)  # type: ignore[no-any-return]

    monkeypatch.setattr(NodeConfig, "load", classmethod(config_read))
    try:
        for k in range(3):  # a writes and syncs with b: three sessions, one read each side
            await _signed(a, a_id, 2, f"a{k}")
            [report] = await a.sync(b_address, ["ledger"])
            assert report.entries_sent == 2
        assert loads["b"] == 1, loads  # one read for the three sessions b served
        assert configs["b"] <= 1, configs  # nor is the config read per session

        by_c = await _signed(a, c_id, 1, "c")  # signed by a member b does not know yet
        with pytest.raises(LifelineError, match="not a member of this mesh"):
            await a.sync(b_address, ["ledger"])
        assert by_c[0] not in {e["id"] for e in await history(b)}
        assert loads["b"] == 1, loads  # unchanged documents: not read again

        # Another process on b's root learns c from the CA holder, while b serves.
        await _cli(roots["b"], "members", "--pull", a_address)
        [report] = await a.sync(b_address, ["ledger"])
        assert report.entries_sent == 1
        assert by_c[0] in {e["id"] for e in await history(b)}
        assert loads["b"] == 2, loads  # read again once, for the change
    finally:
        await b_server.stop(0)
        await a_server.stop(0)


def test_a_running_serve_takes_a_line_shared_by_another_process(tmp_path: Path) -> None:
    """The node's config is read once and again when its file changes: `lifeline-mesh
    share` run beside a `serve` makes the line synced with it, without a restart."""
    a, b = tmp_path / "a", tmp_path / "b"
    for root in (a, b):
        shared_node(root)
        cli("lifeline", root, "--line", "notes", "init")
    cli("lifeline_mesh", b, "share", "notes")
    note = cli("lifeline", b, "--line", "notes", "log", "--kind", "note", "--summary", "n",
               "--json").stdout  # fmt: skip
    note_id = json.loads(note)["id"]
    with serve_insecure(a) as (_proc, address):
        refused = cli(
            "lifeline_mesh", b, "sync", "--insecure", address, "--line", "notes", check=False
        )
        assert refused.returncode != 0 and "not shared" in refused.stderr, refused.stderr
        cli("lifeline_mesh", a, "share", "notes")  # another process, while `serve` runs
        cli("lifeline_mesh", b, "sync", "--insecure", address, "--line", "notes")
    assert has_entry(a / ".lifeline" / "notes.db", note_id)
