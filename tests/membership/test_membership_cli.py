"""The membership commands run as a user runs them: real subprocesses on loopback."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

COMMANDS = ["init", "invite", "join", "revoke", "members", "membership-serve"]


def mesh(
    root: Path, *args: str, env: dict[str, str] | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lifeline_mesh", "--root", str(root), *args],
        capture_output=True,
        text=True,
        input=stdin,
        timeout=60,
        env={**os.environ, **(env or {})},
    )


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Path, dict[str, int]]]:
    ca = tmp_path / "ca"
    ca.mkdir()
    assert mesh(ca, "init", "--new-mesh", "team").returncode == 0
    proc = subprocess.Popen(
        [sys.executable, "-m", "lifeline_mesh", "--root", str(ca), "membership-serve"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        ports = json.loads(proc.stdout.readline())  # printed once the server listens
        yield ca, ports
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help(tmp_path: Path, command: str) -> None:
    result = mesh(tmp_path, command, "--help")
    assert result.returncode == 0 and "usage:" in result.stdout


@pytest.mark.slow
def test_join_end_to_end_with_cli(tmp_path: Path, served: tuple[Path, dict[str, int]]) -> None:
    ca, ports = served
    peer = f"127.0.0.1:{ports['join_port']}"
    invite = mesh(ca, "invite", "--role", "reader", "--ttl", "10m", "--json")
    assert invite.returncode == 0, invite.stderr
    token = json.loads(invite.stdout)["token"]
    runner = tmp_path / "runner"
    runner.mkdir()
    # A CI runner takes the token from the environment.
    joined = mesh(runner, "join", "--peer", peer, "--json", env={"LIFELINE_MESH_TOKEN": token})
    assert joined.returncode == 0, joined.stderr
    info = json.loads(joined.stdout)
    assert info["role"] == "reader" and info["created_identity"] is True
    listing = json.loads(mesh(ca, "members", "--json").stdout)
    rows = {m["node_id"]: m for m in listing["members"]}
    assert rows[info["node_id"]]["role"] == "reader" and rows[info["node_id"]]["status"] == "active"
    assert len(rows[info["node_id"]]["public_key"]) == 64
    # The token works once.
    other = tmp_path / "other"
    other.mkdir()
    replay = mesh(other, "join", token, "--peer", peer)
    assert replay.returncode == 2
    assert "already used" in replay.stderr and info["node_id"] in replay.stderr
    # Revocation shows in the listing with its time, and reaches the member that pulls it.
    member = tmp_path / "member"
    member.mkdir()
    token2 = mesh(ca, "invite").stdout.strip()
    assert mesh(member, "join", token2, "--peer", peer).returncode == 0
    assert mesh(ca, "revoke", info["node_id"], "--reason", "job done").returncode == 0
    text = mesh(ca, "members").stdout
    assert f"{info['node_id']}  reader  revoked since" in text
    pulled = mesh(member, "members", "--pull", f"127.0.0.1:{ports['mtls_port']}")
    assert pulled.returncode == 0, pulled.stderr
    assert f"learned: {info['node_id']} revoked at" in pulled.stderr
    assert f"{info['node_id']}  reader  revoked since" in pulled.stdout


def test_cli_errors_are_one_clear_line(tmp_path: Path) -> None:
    result = mesh(tmp_path, "join")
    assert result.returncode == 2 and "LIFELINE_MESH_TOKEN" in result.stderr
    result = mesh(tmp_path, "join", "lm1_AAAA")
    assert result.returncode == 2 and "damaged or truncated" in result.stderr
    result = mesh(tmp_path, "invite")
    assert result.returncode == 2 and "does not hold the mesh CA key" in result.stderr
    result = mesh(tmp_path, "members")
    assert result.returncode == 2 and "has not created or joined a mesh" in result.stderr
    assert mesh(tmp_path, "init", "--new-mesh", "x").returncode == 0
    result = mesh(tmp_path, "invite", "--ttl", "soon")
    assert result.returncode == 2 and "'soon'" in result.stderr
    result = mesh(tmp_path, "revoke", "nope")
    assert result.returncode == 2 and "not a node id" in result.stderr


# `join -` reads the token from standard input, so it never shows in `ps`.


def test_join_dash_reads_the_token_from_stdin(
    served: tuple[Path, dict[str, int]], tmp_path: Path
) -> None:
    ca, ports = served
    token = json.loads(mesh(ca, "invite", "--json").stdout)["token"]
    newcomer = tmp_path / "b"
    newcomer.mkdir()
    peer = f"127.0.0.1:{ports['join_port']}"
    done = mesh(newcomer, "join", "-", "--peer", peer, stdin=f"{token}\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("joined mesh ")
    # nothing shared here yet: it says what a new member runs next
    assert "next: `lifeline-mesh share LINE`" in done.stderr, done.stderr


@pytest.mark.parametrize(
    ("stdin", "said"), [("", "no token"), ("x" * 100_000, "more than 4096 characters")]
)
def test_join_dash_refuses_nothing_or_a_flood_in_one_line(
    tmp_path: Path, stdin: str, said: str
) -> None:
    done = mesh(tmp_path, "join", "-", stdin=stdin)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and said in done.stderr
