"""`serve` that cannot listen says so in one line — which address, why, what to do — and
exits 2, with nothing left running: a port another node serves (gRPC's SO_REUSEPORT would let
two nodes share it, and syncs meant for one would land on the other), a port another
program holds, an address this machine does not have, and --insecure off loopback."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

from tests.support.ci_helpers import MESH
from tests.support.mesh_procs import cli, join_mesh, serve


def _node(path: Path, mesh: str) -> Path:
    path.mkdir()
    cli("lifeline_mesh", path, "init", "--new-mesh", mesh)
    cli("lifeline", path, "init")
    return path


def _serve_fails(root: Path, *args: str) -> str:
    done = subprocess.run(
        [*MESH, "--root", str(root), "serve", "--no-discovery", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    return done.stderr


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_port_another_node_serves_is_refused(tmp_path: Path) -> None:
    first = _node(tmp_path / "a", "a")
    second = _node(tmp_path / "b", "b")
    port = _free_port()
    with serve(first, "--listen", f"127.0.0.1:{port}", "--no-discovery"):
        said = _serve_fails(second, "--listen", f"127.0.0.1:{port}")
        assert f"cannot listen on 127.0.0.1:{port} (sync port): the port is taken" in said
        said = _serve_fails(second, "--listen", "127.0.0.1:0", "--join-listen", f"127.0.0.1:{port}")
        assert f"cannot listen on 127.0.0.1:{port} (join port): the port is taken" in said


def test_a_port_another_program_holds_is_refused(tmp_path: Path) -> None:
    node = _node(tmp_path / "a", "a")
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        said = _serve_fails(node, "--listen", f"127.0.0.1:{port}")
    assert "the port is taken" in said and "ss -ltnp" in said


def test_an_address_this_machine_lacks_is_named(tmp_path: Path) -> None:
    node = _node(tmp_path / "a", "a")
    # 192.0.2.0/24 is reserved for documentation: no machine has it (nothing is sent there).
    said = _serve_fails(node, "--listen", "192.0.2.20:7420")
    assert "cannot listen on 192.0.2.20:7420 (sync port): this machine has no such address" in said


def test_insecure_off_loopback_says_what_insecure_means(tmp_path: Path) -> None:
    node = _node(tmp_path / "a", "a")
    said = _serve_fails(node, "--insecure", "--listen", "0.0.0.0:0")
    assert "without TLS (--insecure" in said and "this node has no TLS credentials" not in said


def test_insecure_off_loopback_is_said_before_discovery_asks_for_an_interface(
    tmp_path: Path,
) -> None:
    node = _node(tmp_path / "a", "a")
    done = subprocess.run(
        [*MESH, "--root", str(node), "serve", "--insecure", "--listen", "0.0.0.0:0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, done.stderr
    assert "is not a loopback address, and without TLS (--insecure" in done.stderr
    assert "--interface" not in done.stderr


def test_join_listen_on_a_node_without_the_ca_key_is_warned_and_ignored(tmp_path: Path) -> None:
    ca, member = tmp_path / "ca", tmp_path / "member"
    for root in (ca, member):
        root.mkdir()
        cli("lifeline", root, "init")
    join_mesh(ca, [member])
    with socket.socket() as holder:  # a taken port: never bound, since no join is served
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        with serve(
            member,
            "--listen",
            "127.0.0.1:0",
            "--no-discovery",
            "--join-listen",
            f"127.0.0.1:{port}",
        ) as proc:
            pass
    assert proc.stderr is not None and proc.stdout is not None
    out, err = proc.stdout.read(), proc.stderr.read()
    assert "join port on" not in out
    warned = [line for line in err.splitlines() if "--join-listen" in line]
    assert warned == [
        f"warning: --join-listen 127.0.0.1:{port} ignored: this node does not hold the mesh CA "
        "key, so it serves no joins (the node that created the mesh does; `lifeline-mesh "
        "members` names it)"
    ], err
