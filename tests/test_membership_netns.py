"""A CI runner joins from another host: two network namespaces joined by a veth pair.

Needs root and ``ip netns``; skipped with a reason otherwise. Both ends of the veth live in
namespaces this test creates (nothing touches the host's interfaces), and the namespaces
are deleted in a ``finally``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = [pytest.mark.netns, pytest.mark.slow]

SERVER_IP, RUNNER_IP = "10.231.77.1", "10.231.77.2"


def _why_not() -> str | None:
    if os.geteuid() != 0:
        return "needs root to create network namespaces"
    if shutil.which("ip") is None:
        return "needs the `ip` tool (iproute2)"
    return None


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)


@pytest.fixture
def namespaces() -> Iterator[tuple[str, str]]:
    reason = _why_not()
    if reason:
        pytest.skip(reason)
    server, runner = f"lm-srv-{os.getpid()}", f"lm-run-{os.getpid()}"
    try:
        _ip("netns", "add", server)
        _ip("netns", "add", runner)
        _ip(
            "-n",
            server,
            "link",
            "add",
            "lm0",
            "type",
            "veth",
            "peer",
            "name",
            "lm1",
            "netns",
            runner,
        )
        for ns, dev, addr in ((server, "lm0", SERVER_IP), (runner, "lm1", RUNNER_IP)):
            _ip("-n", ns, "addr", "add", f"{addr}/24", "dev", dev)
            _ip("-n", ns, "link", "set", dev, "up")
            _ip("-n", ns, "link", "set", "lo", "up")
        yield server, runner
    finally:
        for ns in (server, runner):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)


def _cli(ns: str, root: Path, *args: str, env: dict[str, str] | None = None) -> list[str]:
    return [
        "ip",
        "netns",
        "exec",
        ns,
        sys.executable,
        "-m",
        "lifeline_mesh",
        "--root",
        str(root),
        *args,
    ]


def test_ci_runner_joins_from_another_namespace(
    tmp_path: Path, namespaces: tuple[str, str]
) -> None:
    server_ns, runner_ns = namespaces
    ca, runner = tmp_path / "ca", tmp_path / "runner"
    ca.mkdir()
    runner.mkdir()
    subprocess.run(_cli(server_ns, ca, "init", "--new-mesh", "lab"), check=True, timeout=60)
    serve = subprocess.Popen(
        _cli(
            server_ns,
            ca,
            "membership-serve",
            "--listen",
            f"{SERVER_IP}:0",
            "--mtls-listen",
            f"{SERVER_IP}:0",
        ),
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert serve.stdout is not None
        ports = json.loads(serve.stdout.readline())
        invite = subprocess.run(
            _cli(
                server_ns,
                ca,
                "invite",
                "--role",
                "reader",
                "--address",
                f"{SERVER_IP}:{ports['join_port']}",
                "--json",
            ),
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )
        token = json.loads(invite.stdout)["token"]
        # No --peer: the runner dials the address carried by the token.
        joined = subprocess.run(
            _cli(runner_ns, runner, "join", "--json"),
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "LIFELINE_MESH_TOKEN": token},
        )
        assert joined.returncode == 0, joined.stderr
        assert json.loads(joined.stdout)["address"] == f"{SERVER_IP}:{ports['join_port']}"
        check = (
            "import asyncio, sys; from pathlib import Path; "
            "from lifeline_mesh.home.node_home import NodeHome; "
            "from lifeline_mesh.membership.client import whoami; "
            "r = asyncio.run(whoami(NodeHome(Path(sys.argv[1])), sys.argv[2])); "
            "print(r.role, r.node_id)"
        )
        seen = subprocess.run(
            [
                "ip",
                "netns",
                "exec",
                runner_ns,
                sys.executable,
                "-c",
                check,
                str(runner),
                f"{SERVER_IP}:{ports['mtls_port']}",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert seen.returncode == 0, seen.stderr
        assert seen.stdout.split() == ["reader", json.loads(joined.stdout)["node_id"]]
    finally:
        serve.send_signal(signal.SIGTERM)
        serve.wait(timeout=30)
