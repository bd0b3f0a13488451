"""A node killed and started again is back in the mesh at once (issue 14's soak, decision 0039).

Two real `serve` nodes of one mesh hold the same 20,000 signed entries. One is SIGKILLed
(its whole process group, as a crash), both sides write while it is down, and it is
started again: it listens after little CPU, with none of what a node of line files never
uses loaded (the hub's PostgreSQL driver, the viewer, the sessions' models, zeroconf with
--no-discovery), starts from the snapshots it kept on disk, and what each side wrote while
it was down reaches the other within seconds of it listening.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from lifeline.home import Home
from lifeline.ledger import Draft, Ledger
from lifeline.plugins import load_append_hooks
from lifeline.store.sqlite import SqliteStore
from lifeline_mesh.home.node_home import NodeHome
from tests.support.mesh_procs import (
    first_line,
    free_port,
    join_mesh,
    log_note,
    shared_node,
    wait_for_entry,
)

pytestmark = [pytest.mark.slow, pytest.mark.serial]  # bounds on CPU and wall-clock time

ENTRIES = 20_000
# CPU of `serve` from exec to listening on this line: ~0.35-0.5 s here (2 cores, shared),
# ~1.0 s before decision 0039 (the viewer, the hub's driver... imported to build the parser).
LISTEN_CPU_S = 0.9
PROPAGATE_S = 10.0  # from listening again to each side holding what the other wrote
# Extension modules `serve` of line files never needs, seen in its memory map.
NEVER_LOADED = ("asyncpg", "pydantic_core", "markupsafe", "zeroconf")


async def _fill(root: Path, line: Path, n: int) -> None:
    """``n`` signed entries in batches through the notary's hook (as `lifeline log`)."""
    async with await SqliteStore.open(line) as store:
        ledger = Ledger(store, hooks=load_append_hooks(Home(root)))
        for start in range(0, n, 2000):
            drafts = [Draft(kind="note", summary=f"fill {k}") for k in range(start, start + 2000)]
            await ledger.append_many(drafts)


def _copy(src: Path, dst: Path) -> None:
    with (
        contextlib.closing(sqlite3.connect(src)) as a,
        contextlib.closing(sqlite3.connect(dst)) as b,
    ):
        a.backup(b)


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def _serving(root: Path, port: int, peer: int) -> Iterator[subprocess.Popen[str]]:
    argv = [sys.executable, "-m", "lifeline_mesh", "--root", str(root), "serve"]
    argv += ["--listen", f"127.0.0.1:{port}", "--no-discovery", "--peer", f"127.0.0.1:{peer}"]
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,  # its own group: SIGKILL takes its helpers too
    )
    try:
        assert proc.stdout is not None
        assert first_line(proc, 60, "serve").startswith("listening on ")
        yield proc
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)


def _kept(root: Path) -> set[str]:
    kept = NodeHome(root).snapshots_dir
    return {p.name for p in kept.iterdir()} if kept.exists() else set()


def test_a_killed_node_listens_at_once_and_catches_up_within_seconds(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    lines = [shared_node(a), shared_node(b)]
    join_mesh(a, [b])
    asyncio.run(_fill(a, lines[0], ENTRIES))
    _copy(lines[0], lines[1])
    pa, pb = free_port(), free_port()
    # Written before either serves: their first session finds the lines apart and both
    # sides build (and keep) their snapshots. A write while both serve would travel as
    # rows over the Watch calls, with no session (decision 0046).
    first = log_note(a, "before the crash")
    with _serving(b, pb, pa):
        with _serving(a, pa, pb):
            wait_for_entry(lines[1], first)
            end = time.monotonic() + 30
            while {"ledger.entries.snap", "ledger.attestations.snap"} - _kept(a):
                assert time.monotonic() < end, f"no snapshot kept on disk: {_kept(a)}"
                time.sleep(0.1)
        # a was SIGKILLed; both sides write while it is down
        down_a, down_b = log_note(a, "written on a while down"), log_note(b, "written on b")
        started = time.monotonic()
        with _serving(a, pa, pb) as proc:
            listening = time.monotonic()
            cpu = _cpu_s(proc.pid)
            maps = Path(f"/proc/{proc.pid}/maps").read_text()
            wait_for_entry(lines[1], down_a, deadline_s=PROPAGATE_S)
            wait_for_entry(lines[0], down_b, deadline_s=PROPAGATE_S)
            caught_up = time.monotonic()
    loaded = [name for name in NEVER_LOADED if f"/{name}/" in maps]
    assert loaded == [], f"serve loaded {loaded} before listening"
    assert cpu < LISTEN_CPU_S, f"serve used {cpu:.2f}s of CPU to listen"
    print(
        f"listening {listening - started:.2f}s after exec ({cpu:.2f}s CPU); both sides' "
        f"writes across {caught_up - listening:.2f}s later"
    )
