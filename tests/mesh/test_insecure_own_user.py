"""`serve --insecure` answers only its own user (and root): a loopback port is open to every
user of the machine, and without TLS nothing else told the callers apart, so another local
user could pull every shared line and write into it (docs/security.md).

Another user's connection is made for real: a forwarder run as `nobody` (util-linux's
setpriv, the system Python, nothing else) relays a real `lifeline-mesh sync --insecure`, so
the connection the node accepts is owned by `nobody` in the kernel's table of sockets."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

from lifeline.errors import PermissionDenied
from lifeline_mesh.transport.authz import OwnUserOnly, PeerIdentity, peer_address
from tests.support.mesh_procs import SYNC_JSON, cli, log_note, serve_insecure, shared_node

NOBODY = 65534
SYSTEM_PYTHON = "/usr/bin/python3"

# Relays one connection at a time from 127.0.0.1:LISTEN to 127.0.0.1:TARGET; stdlib only.
FORWARDER = """
import socket, sys, threading
listen, target = int(sys.argv[1]), int(sys.argv[2])
server = socket.create_server(("127.0.0.1", listen))
print("ready", flush=True)
def pump(a, b):
    try:
        while data := a.recv(65536):
            b.sendall(data)
    except OSError:
        pass
    finally:
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
while True:
    client, _ = server.accept()
    upstream = socket.create_connection(("127.0.0.1", target))
    threading.Thread(target=pump, args=(client, upstream), daemon=True).start()
    threading.Thread(target=pump, args=(upstream, client), daemon=True).start()
"""

needs_another_user = pytest.mark.skipif(
    not hasattr(os, "geteuid")
    or os.geteuid() != 0
    or shutil.which("setpriv") is None
    or not Path(SYSTEM_PYTHON).exists()
    or not Path("/proc/net/tcp").exists(),
    reason="becoming another user needs root, util-linux's setpriv and /usr/bin/python3 (Linux)",
)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _forwarder(target: int, uid: int | None) -> tuple[subprocess.Popen[str], int]:
    """A relay to ``target`` run as ``uid`` (None: this user); returns it and its port."""
    port = _free_port()
    drop = [] if uid is None else ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]
    proc = subprocess.Popen(
        [*drop, SYSTEM_PYTHON, "-c", FORWARDER, str(port), str(target)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd="/",
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready", proc
    return proc, port


def _sync_through(root: Path, target: int, uid: int | None) -> subprocess.CompletedProcess[str]:
    """A real `sync --insecure` from ``root`` to port ``target``, relayed as ``uid``."""
    relay, port = _forwarder(target, uid)
    try:
        return cli("lifeline_mesh", root, *SYNC_JSON, f"127.0.0.1:{port}", check=False)
    finally:
        relay.kill()
        relay.wait()


@needs_another_user
def test_another_user_is_refused_and_the_nodes_own_user_syncs(tmp_path: Path) -> None:
    served = shared_node(tmp_path / "served")
    entry = log_note(tmp_path / "served", "only for the user who serves it")
    puller = tmp_path / "puller"
    shared_node(puller)
    with serve_insecure(tmp_path / "served") as (proc, address):
        target = int(address.rsplit(":", 1)[1])
        refused = _sync_through(puller, target, NOBODY)
        assert refused.returncode != 0, refused.stdout
        said = refused.stderr
        assert "another user of the machine (uid 65534)" in said, said
        assert "Traceback" not in said
        assert entry not in cli("lifeline", puller, "history", "--json").stdout
        # The same relay run as this user: the node's own user is let in, as before.
        done = _sync_through(puller, target, None)
        assert done.returncode == 0, done.stderr
        assert entry in cli("lifeline", puller, "history", "--json").stdout
        assert proc.poll() is None  # the refusal cost the node nothing
    assert served.exists()


@needs_another_user
def test_the_owner_is_read_for_each_call_not_remembered() -> None:
    """The check on a real socket pair: the caller's end owned by this user, then a
    connection made by `nobody` to the same port; an address gRPC does not name by IP
    (a Unix socket) is not read as one."""
    authorizer = OwnUserOnly()
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        authorizer.serving("127.0.0.1", port)
        with socket.create_connection(("127.0.0.1", port)) as mine:
            host, mine_port = mine.getsockname()[:2]
            assert authorizer.owner(f"ipv4:{host}:{mine_port}") == os.geteuid()
        theirs = subprocess.Popen(
            ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--",
             SYSTEM_PYTHON, "-c",
             f"import socket,sys,time; s=socket.create_connection(('127.0.0.1',{port}));"
             "print(s.getsockname()[1], flush=True); time.sleep(30)"],
            stdout=subprocess.PIPE,
            text=True,
            cwd="/",
        )  # fmt: skip
        try:
            assert theirs.stdout is not None
            their_port = int(theirs.stdout.readline())
            conn, _ = server.accept()
            with conn:
                assert authorizer.owner(f"ipv4:127.0.0.1:{their_port}") == NOBODY
        finally:
            theirs.kill()
            theirs.wait()
        # Gone (closing, then TIME_WAIT, listed with uid 0): unknown, not root's.
        assert authorizer.owner(f"ipv4:127.0.0.1:{their_port}") is None
    assert peer_address("unix:/run/node.sock") is None


def test_grpc_peer_strings_are_read() -> None:
    assert peer_address("ipv4:127.0.0.1:5432") == ("127.0.0.1", 5432)
    assert peer_address("ipv6:[::1]:5432") == ("::1", 5432)
    assert peer_address("ipv6:%5B::1%5D:5432") == ("::1", 5432)
    assert peer_address("ipv4:127.0.0.1") is None


async def test_a_caller_whose_owner_cannot_be_read_is_refused_where_it_could_be(
    tmp_path: Path,
) -> None:
    """A connection that is gone (a request sent, then the socket closed: the kernel lists
    it with uid 0, as if root's) is refused; a system without the table lets every caller
    in, as before this check (docs/security.md)."""
    gone = PeerIdentity(address="ipv4:127.0.0.1:1")
    if Path("/proc/net/tcp").exists():
        with pytest.raises(PermissionDenied, match="could not tell who is calling"):
            await OwnUserOnly(uid=1234).authenticate(gone)
    elsewhere = OwnUserOnly(uid=1234, proc=tmp_path)  # no tcp table there
    await elsewhere.authenticate(gone)
