"""Shared by the sync benchmarks: a receiving node in its own `serve` process."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import lifeline_mesh
from lifeline_mesh.node.root import Node
from lifeline_mesh.sync.driver import SyncReport

__all__ = ["serving", "timed_sync"]

# `python -m` puts its working folder first on sys.path: run the node from the folder of the
# tree this script imported, so that both ends run the same code when comparing trees.
TREE = Path(lifeline_mesh.__file__).resolve().parent.parent


@contextmanager
def serving(root: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """`lifeline-mesh serve --insecure --no-discovery` on ``root``; yields (process, address)."""
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "lifeline_mesh",
            "--root",
            str(root),
            "serve",
            "--insecure",
            "--no-discovery",
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=TREE,
    )
    try:
        assert server.stdout is not None
        yield server, server.stdout.readline().split()[-1]
    finally:
        server.terminate()
        server.wait(timeout=60)


async def timed_sync(sender: Node, address: str) -> tuple[SyncReport, float]:
    """One session of the `ledger` line from ``sender``; returns the report and seconds."""
    started = time.perf_counter()
    [report] = await sender.sync(address, ["ledger"])
    return report, time.perf_counter() - started
