"""A one-time invite is spent once, even when processes on the CA holder's root race for it."""

from __future__ import annotations

import datetime as dt
import json
import multiprocessing
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from lifeline.errors import PermissionDenied
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.membership.ca import create_mesh
from lifeline_mesh.membership.invite import InviteBook, issue_invite
from lifeline_mesh.membership.registry import Registry
from tests.support.mesh_procs import cli

WORKERS = 4
ROUNDS = 60
NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
LIFELINE_MESH = (sys.executable, "-m", "lifeline_mesh")


def _spend(root: str, token_ids: list[str], barrier: Any, results: Any, worker: int) -> None:
    """One racing process: each round, every worker tries the same token at once."""
    book = InviteBook(NodeHome(Path(root)))
    for n, token_id in enumerate(token_ids):
        barrier.wait()
        try:
            book.consume(bytes.fromhex(token_id), lambda _key: True, f"node-{worker}", NOW)
            results.put((n, True))
        except PermissionDenied:
            results.put((n, False))


def test_racing_processes_spend_each_token_once(tmp_path: Path) -> None:
    create_mesh(NodeHome(tmp_path), "team")
    ttl = dt.timedelta(hours=1)
    tokens = [issue_invite(NodeHome(tmp_path), "member", ttl, [], now=NOW) for _ in range(ROUNDS)]
    ids = [t.token_id.hex() for t in tokens]
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(WORKERS)
    results = ctx.Queue()
    procs = [
        ctx.Process(target=_spend, args=(str(tmp_path), ids, barrier, results, w))
        for w in range(WORKERS)
    ]
    for proc in procs:
        proc.start()
    outcomes = [results.get(timeout=120) for _ in range(WORKERS * ROUNDS)]
    for proc in procs:
        proc.join(timeout=60)
        assert proc.exitcode == 0
    spent = Counter(n for n, ok in outcomes if ok)
    assert [spent[n] for n in range(ROUNDS)] == [1] * ROUNDS
    book = json.loads((tmp_path / ".lifeline" / "mesh" / "invites.json").read_text())
    assert all(entry["used_at"] is not None for entry in book.values())


def _join(root: Path, token: str, port: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*LIFELINE_MESH, "--root", str(root), "join", "-", "--peer", f"127.0.0.1:{port}"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.slow
def test_two_join_servers_on_one_root_let_one_of_two_racing_joins_in(tmp_path: Path) -> None:
    ca = tmp_path / "ca"
    ca.mkdir()
    cli("lifeline_mesh", ca, "init", "--new-mesh", "team")
    servers = [
        subprocess.Popen(
            [sys.executable, "-m", "lifeline_mesh", "--root", str(ca), "membership-serve"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    try:
        ports = [json.loads(s.stdout.readline())["join_port"] for s in servers if s.stdout]
        for n in range(4):
            token = json.loads(cli("lifeline_mesh", ca, "invite", "--json").stdout)["token"]
            roots = [tmp_path / f"r{n}-{k}" for k in range(2)]
            joins = []
            for root, port in zip(roots, ports, strict=True):
                root.mkdir()
                joins.append(_join(root, token, port))
            for proc in joins:  # both were started before either gets its token
                assert proc.stdin is not None
                proc.stdin.write(token + "\n")
                proc.stdin.close()
            done = [(p.wait(timeout=120), p.stderr.read() if p.stderr else "") for p in joins]
            assert sorted(code for code, _ in done) == [0, 2], done
            assert any("already used" in err for _, err in done), done
    finally:
        for server in servers:
            server.terminate()
            server.communicate(timeout=30)
    assert len(Registry.load(NodeHome(ca)).members) == 1 + 4
