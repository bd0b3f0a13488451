"""Hub process roots for tests: two real hub processes on one PostgreSQL database over
mutual TLS, and a laptop that joined through one of them (tests/hub/)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.mesh_procs import cli, shared_node, start_ca_serve, terminate
from tests.support.ui_server import fetch

__all__ = [
    "MESH_NAME",
    "TRANSCRIPT",
    "first_words",
    "hub_mesh",
    "hub_root",
    "life",
    "line_ids",
    "mcp_http",
    "mesh",
    "page",
    "viewer",
]

MESH_NAME = "lifeline-mesh"  # the DNS name every mesh certificate carries
TRANSCRIPT = (
    Path(__file__).resolve().parent.parent
    / "fixtures"
    / "transcripts"
    / "claude-code"
    / "daaain__claude-code-log__deep-manifest__a7da6a22-facc-4fcd-8bab-f83c87862004.jsonl"
)


def mesh(root: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return cli("lifeline_mesh", root, *args, check=check)


def life(root: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return cli("lifeline", root, *args, check=check)


def hub_root(root: Path, url: str, *extra: str) -> None:
    root.mkdir(parents=True)
    mesh(root, "hub", "init", "--store", url, "--json", *extra)
    life(root, "init")  # the line, made in the database (the second process finds it)
    mesh(root, "share", "ledger")


def line_ids(root: Path) -> set[str]:
    """The ids of the line `ledger` as `lifeline history` lists them."""
    return {e["id"] for e in json.loads(life(root, "history", "--json").stdout)}


@contextmanager
def hub_mesh(tmp_path: Path, url: str) -> Iterator[tuple[Path, Path, Path, str, str]]:
    """Hub processes A and B serving one database over mTLS, and a laptop that joined
    through B: (hub_a, hub_b, laptop, A's sync address, B's sync address)."""
    hub_a, hub_b = tmp_path / "hub-a", tmp_path / "hub-b"
    hub_root(hub_a, url, "--new-mesh", "team")
    hub_root(hub_b, url)
    proc_a, sync_a, _join_a = start_ca_serve(hub_a)
    try:
        proc_b, sync_b, join_b = start_ca_serve(hub_b)
        try:
            laptop = tmp_path / "laptop"
            shared_node(laptop)
            token = json.loads(mesh(hub_a, "invite", "--json").stdout)["token"]
            mesh(laptop, "join", token, "--peer", join_b, "--json")
            yield hub_a, hub_b, laptop, sync_a, sync_b
        finally:
            terminate(proc_b)
    finally:
        terminate(proc_a)


@contextmanager
def first_words(root: Path, *args: str, says: str, timeout: float = 60) -> Iterator[str]:
    """`lifeline-mesh --root ROOT ARGS…` running until the block ends: the first line it
    prints, after ``says`` (which it must start with), e.g. the address it serves on."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "lifeline_mesh", "--root", str(root), *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith(says), (line, proc.stderr and proc.stderr.read())
        yield line.removeprefix(says).strip()
    finally:
        proc.terminate()
        proc.communicate(timeout=timeout)


@contextmanager
def viewer(root: Path) -> Iterator[str]:
    """`lifeline-mesh ui` on ``root`` (loopback, port 0): its base URL, until the block ends."""
    with first_words(root, "ui", "--listen", "127.0.0.1:0", says="viewer on ") as url:
        yield url.split("?")[0]


@contextmanager
def mcp_http(root: Path, *extra: str) -> Iterator[str]:
    """`lifeline-mesh mcp --http` on ``root`` (loopback, port 0): its URL, until the block
    ends."""
    with first_words(root, "mcp", "--http", "127.0.0.1:0", *extra, says="serving MCP on ") as rest:
        yield rest.split()[0]


def page(url: str) -> str:
    """The body of a viewer page that must answer 200."""
    status, body, _headers = fetch(url)
    assert status == 200, (url, status, body[:300])
    return body
