"""`serve --insecure` answers only its own user (and root): a loopback port is open to every
user of the machine, and without TLS nothing else told the callers apart, so another local
user could pull every shared line and write into it (docs/security.md). And a node without
TLS dials no port another user serves: it would have sent that user its lines.

Another user's connection is made for real: a forwarder run as `nobody` (util-linux's
setpriv, the system Python, nothing else) relays a real `lifeline-mesh sync --insecure`, so
the connection the node accepts is owned by `nobody` in the kernel's table of sockets. The
port the forwarder listens on is opened by this user and handed to it, so the `sync` dials
a port of its own user's, as it must."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

from lifeline.errors import PermissionDenied
from lifeline_mesh.transport.authz import OwnUserOnly, PeerIdentity, peer_address
from lifeline_mesh.transport.pool import ChannelPool
from tests.support.ci_helpers import MESH
from tests.support.mesh_procs import (
    SYNC_JSON,
    cli,
    first_line,
    free_port,
    log_note,
    serve,
    serve_insecure,
    shared_node,
    terminate,
    wait_for_stderr,
)

NOBODY = 65534
SYSTEM_PYTHON = "/usr/bin/python3"

# Relays each connection to the listening socket it is handed (file descriptor LISTEN) to
# 127.0.0.1:TARGET; stdlib only.
FORWARDER = """
import socket, sys, threading
server, target = socket.socket(fileno=int(sys.argv[1])), int(sys.argv[2])
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


def _forwarder(target: int, uid: int | None) -> tuple[subprocess.Popen[str], int]:
    """A relay to ``target`` run as ``uid`` (None: this user), on a port this user opened;
    returns it and its port."""
    drop = [] if uid is None else ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]
    with socket.create_server(("127.0.0.1", 0)) as listening:
        proc = subprocess.Popen(
            [*drop, SYSTEM_PYTHON, "-c", FORWARDER, str(listening.fileno()), str(target)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd="/",
            pass_fds=[listening.fileno()],
        )
        port = int(listening.getsockname()[1])
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


# Listens on 127.0.0.1:PORT (or every address) and answers nothing; stdlib only.
LISTENER = """
import socket, sys, time
host, port = sys.argv[1], int(sys.argv[2])
if ":" in host:  # every IPv6 address, and IPv4 through it
    server = socket.create_server((host, port), family=socket.AF_INET6, dualstack_ipv6=True)
else:
    server = socket.create_server((host, port))
print("ready", flush=True)
time.sleep(120)
"""


def _listen_as(uid: int, host: str, port: int) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--",
         SYSTEM_PYTHON, "-c", LISTENER, host, str(port)],
        stdout=subprocess.PIPE,
        text=True,
        cwd="/",
    )  # fmt: skip
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


@needs_another_user
@pytest.mark.parametrize("bound", ["127.0.0.1", "0.0.0.0", "::"])
def test_a_port_another_user_serves_is_not_dialled(tmp_path: Path, bound: str) -> None:
    """A real `sync --insecure` to a port `nobody` listens on (that address, every IPv4
    address, or every address of both families): refused before anything is sent;
    `serve --insecure --peer` to it stays up."""
    node = tmp_path / "node"
    shared_node(node)
    log_note(node, "not for another user")
    port = free_port()
    theirs = _listen_as(NOBODY, bound, port)
    try:
        done = cli("lifeline_mesh", node, *SYNC_JSON, f"127.0.0.1:{port}", check=False)
        assert done.returncode != 0
        assert "served by another user of this machine (uid 65534)" in done.stderr, done.stderr
        assert "Traceback" not in done.stderr
        peer = f"127.0.0.1:{port}"
        with serve(
            node, "--insecure", "--listen", "127.0.0.1:0", "--no-discovery", "--peer", peer
        ) as proc:
            said = wait_for_stderr(proc, "another user of this machine", 60)
            assert "uid 65534" in said
            assert proc.poll() is None
    finally:
        theirs.kill()
        theirs.wait()


def test_a_node_serving_on_localhost_answers_its_user_on_both_families(tmp_path: Path) -> None:
    """`localhost` is both 127.0.0.1 and ::1 to gRPC, as it binds and as it dials: the
    node's own user syncs through either, and by name (a check that knew one family would
    refuse the other as a caller it cannot find)."""
    served = tmp_path / "served"
    shared_node(served)
    entry = log_note(served, "reached by name")
    puller = tmp_path / "puller"
    shared_node(puller)
    proc = subprocess.Popen(
        [*MESH, "--root", str(served), "serve", "--insecure", "--listen", "localhost:0",
         "--no-discovery"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        first = first_line(proc, 60, "serve --insecure")
        assert first.startswith("listening on localhost:"), first
        port = first.rsplit(":", 1)[1]
        for target in (f"localhost:{port}", f"127.0.0.1:{port}", f"[::1]:{port}"):
            done = cli("lifeline_mesh", puller, *SYNC_JSON, target, check=False)
            assert done.returncode == 0, (target, done.stderr)
    finally:
        terminate(proc)
    assert entry in cli("lifeline", puller, "history", "--json").stdout


@needs_another_user
async def test_a_shared_channel_is_checked_again_at_each_lease() -> None:
    """A lab peer's process restarts under a channel the node keeps open (its Watch
    call's), and another user takes the port meanwhile: the next lease of that channel
    (a session, a membership pull) is refused naming the uid, and the channel is cut."""
    port = free_port()
    target = f"127.0.0.1:{port}"
    pool = ChannelPool()
    ours = socket.create_server(("127.0.0.1", port))
    async with pool.lease(target, None):
        async with pool.lease(target, None):  # the same user still listens: shared
            assert len(pool) == 1
        ours.close()
        theirs = _listen_as(NOBODY, "127.0.0.1", port)
        try:
            with pytest.raises(
                PermissionDenied, match=r"another user of this machine \(uid 65534\)"
            ):
                async with pool.lease(target, None):
                    raise AssertionError("leased a channel to another user's port")
            assert len(pool) == 0
        finally:
            theirs.kill()
            theirs.wait()
