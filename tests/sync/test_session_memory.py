"""`serve`'s collection after a session walks only what is new (decision 0040); the heap is
given back after idle or above a level, not after every session (decision 0044)."""

from __future__ import annotations

import asyncio
import gc
import platform
import subprocess
import sys
import weakref
from pathlib import Path

import pytest

from lifeline_mesh.sync import driver
from lifeline_mesh.sync.memory import FULL_EVERY_S, SESSION_GC_THRESHOLD, SessionMemory
from tests.support.mesh_procs import SYNC_JSON, serve_insecure, shared_node, signed_node
from tests.support.recon_helpers import chain
from tests.support.sync_helpers import make_node, serving, write


class _Cyclic:
    def __init__(self) -> None:
        self.me = self


def test_serve_freezes_survivors_and_still_frees_new_cycles() -> None:
    now = [0.0]
    trims: list[int] = []

    def trim(pad: int) -> int:
        trims.append(pad)
        return 1

    memory = SessionMemory(trim=trim, clock=lambda: now[0])
    memory.freezing = True
    try:
        memory.enter()
        memory.leave(built_snapshots=True)
        assert gc.get_freeze_count() > 0 and memory.full_collections == 1 and trims == [0]
        garbage = _Cyclic()  # made after the freeze: the next collection finds it
        gone = weakref.ref(garbage)
        del garbage
        now[0] += 1.0
        memory.enter()
        memory.leave(built_snapshots=True)
        assert gone() is None and memory.full_collections == 1  # no full one yet
        now[0] += FULL_EVERY_S
        memory.enter()
        memory.leave(built_snapshots=True)
        assert memory.full_collections == 2 and trims == [0, 0, 0]
    finally:
        gc.unfreeze()


def test_a_process_that_does_not_serve_freezes_nothing() -> None:
    memory = SessionMemory(trim=lambda pad: 1)
    before = gc.get_freeze_count()
    memory.enter()
    memory.leave(built_snapshots=True)
    assert gc.get_freeze_count() == before and memory.full_collections == 0


def test_young_collections_are_rarer_while_sessions_run() -> None:
    """A received batch lives until it is stored: while any session runs, the first
    generation waits for SESSION_GC_THRESHOLD objects; the last session out restores it.
    Cycles made meanwhile are still collected."""
    memory = SessionMemory(trim=lambda pad: 1)
    before = gc.get_threshold()
    try:
        gc.set_threshold(700, before[1], before[2])
        memory.enter()
        memory.enter()  # a second session at once
        assert gc.get_threshold() == (SESSION_GC_THRESHOLD, before[1], before[2])
        memory.leave(built_snapshots=False)
        assert gc.get_threshold()[0] == SESSION_GC_THRESHOLD  # one still runs
        garbage = _Cyclic()
        gone = weakref.ref(garbage)
        del garbage
        # objects enough (alive: the count is of objects made less those freed) for one
        keep = [_Cyclic.__new__(_Cyclic) for _ in range(2 * SESSION_GC_THRESHOLD)]
        assert gone() is None and keep
        memory.leave(built_snapshots=False)
        assert gc.get_threshold() == (700, before[1], before[2])
        gc.disable()  # collection turned off by the process: sessions leave it so
        try:
            memory.enter()
            memory.leave(built_snapshots=False)
            assert not gc.isenabled() and gc.get_threshold()[0] == 700
        finally:
            gc.enable()
    finally:
        gc.set_threshold(*before)


class _Trims:
    """A stand-in for ``malloc_trim`` that counts calls and lets a test await the next."""

    def __init__(self) -> None:
        self.calls = 0
        self.called = asyncio.Event()

    def __call__(self, pad: int) -> int:
        self.calls += 1
        self.called.set()
        return 1

    async def next(self, timeout: float) -> None:
        self.called.clear()
        await asyncio.wait_for(self.called.wait(), timeout)


async def test_sessions_that_follow_closely_keep_the_freed_heap_until_idle() -> None:
    """Decision 0044: a trim after every session handed the pages back only for the next
    session to fault them in again. The first give-back measures the level; after that
    the heap is trimmed once no session ran for ``idle_s``, or at once when resident
    memory is ``above`` over the level."""
    trims = _Trims()
    resident = [100 << 20]
    memory = SessionMemory(trim=trims, resident=lambda: resident[0], idle_s=0.05, above=64 << 20)
    memory.enter()
    memory.leave(built_snapshots=True)
    assert trims.calls == 1  # no level yet: given back at once, the level measured
    for _ in range(5):  # sessions one after the other, nothing awaited between them
        memory.enter()
        resident[0] += 4 << 20  # each holds a little more: still under the level + above
        memory.leave(built_snapshots=True)
    assert trims.calls == 1
    await trims.next(timeout=10)  # then idle: given back
    assert trims.calls == 2 and memory.running == 0
    memory.enter()
    resident[0] += 65 << 20  # a large transfer: over the new level + above
    memory.leave(built_snapshots=True)
    assert trims.calls == 3  # at once, not after idle_s
    memory.enter()
    memory.leave(built_snapshots=False)  # an in-sync check: nothing to give back
    await asyncio.sleep(0)
    assert trims.calls == 3


async def test_a_session_that_starts_before_idle_postpones_the_give_back() -> None:
    trims = _Trims()
    memory = SessionMemory(trim=trims, resident=lambda: 100 << 20, idle_s=0.05)
    memory.enter()
    memory.leave(built_snapshots=True)  # the first: measures the level
    memory.enter()
    memory.leave(built_snapshots=True)  # waits for idle
    memory.enter()  # a session before idle_s: no trim under it
    with pytest.raises(TimeoutError):
        await trims.next(timeout=0.2)
    assert trims.calls == 1
    memory.leave(built_snapshots=False)  # its end waits for idle again
    await trims.next(timeout=10)
    assert trims.calls == 2


async def test_a_serving_node_trims_after_idle_not_after_each_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Real sessions over gRPC (both ends in this process, both counted): three syncs one
    after the other that each build snapshots trim the heap once (the first, which
    measures the level), and once more when the node goes idle. The first sync, into an
    empty node, builds none on the sending side (its entries go as a run, decision 0144)."""
    trims = _Trims()
    memory = SessionMemory(trim=trims, resident=lambda: 100 << 20, idle_s=1.5)
    monkeypatch.setattr(driver, "SESSIONS", memory)
    a, b = make_node(tmp_path / "a"), make_node(tmp_path / "b")
    line = chain(40, "idle", body="z" * 40)
    await write(a, line[:10])
    async with serving(b) as (server, address):
        [first] = await a.sync(address, ["ledger"])
        assert first.snapshots == 0 and first.entries_sent == 10
        for end in (20, 30, 40):
            await write(a, line[end - 10 : end])
            [report] = await a.sync(address, ["ledger"])
            assert report.snapshots == 1 and report.entries_sent == 10
        assert trims.calls == 1 and memory.running == 0
        await trims.next(timeout=30)
    assert trims.calls == 2 and [r.snapshots for r in server.reports] == [1, 1, 1, 1]


_HEAPS = """
import threading
from lifeline_mesh.heap import one_arena
assert one_arena()
held, ready, done = [], threading.Barrier(5), threading.Event()
def work():
    held.append([bytearray(300_000) for _ in range(8)])  # each thread's own allocations
    ready.wait()
    done.wait()
threads = [threading.Thread(target=work) for _ in range(4)]
for t in threads:
    t.start()
ready.wait()  # all four alive and holding memory at once
print(heaps())
done.set()
"""

# glibc's heaps ("arenas") of this process, from malloc_info
_COUNT_HEAPS = """
import ctypes, ctypes.util, tempfile
def heaps():
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    libc.fopen.restype = ctypes.c_void_p
    libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
    libc.fclose.argtypes = [ctypes.c_void_p]
    with tempfile.NamedTemporaryFile(suffix=".xml") as out:
        f = libc.fopen(out.name.encode(), b"w")
        libc.malloc_info(0, f)
        libc.fclose(f)
        return open(out.name).read().count("<heap nr=")
"""

# `lifeline-mesh ARGS` in this process, which prints its heaps to stderr as it exits
_CLI_HEAPS = """
import atexit, runpy, sys
atexit.register(lambda: print("heaps:", heaps(), file=sys.stderr))
sys.argv = ["lifeline-mesh", *sys.argv[1:]]
runpy.run_module("lifeline_mesh", run_name="__main__")
"""

_GLIBC = pytest.mark.skipif(
    not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc",
    reason="arenas are glibc's",
)


@_GLIBC
def test_serve_threads_share_one_heap() -> None:
    """Decision 0044: each session's worker thread took a heap of its own, which glibc
    shrank as the session's SQLite pages were freed, so the next session faulted them in
    again. After ``one_arena`` (called by `serve`), four threads holding memory at once
    allocate from one heap (glibc gives them up to 8 per core otherwise)."""
    out = subprocess.run(
        [sys.executable, "-c", _COUNT_HEAPS + _HEAPS],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert out.stdout.strip() == "1", out.stderr


@_GLIBC
def test_a_pulling_sync_keeps_its_threads_in_one_heap(tmp_path: Path) -> None:
    """Decision 0102: the `sync` command's threads (the store's worker, gRPC's) each took a
    heap of their own, ~75 MB more at the peak of a million-entry pull. A real `sync` of a
    real `serve` ends with one heap."""
    signed_node(tmp_path / "a", "first", "second")
    shared_node(tmp_path / "b")
    with serve_insecure(tmp_path / "a") as (_, address):
        code = _COUNT_HEAPS + _CLI_HEAPS
        out = subprocess.run(
            [sys.executable, "-c", code, "--root", str(tmp_path / "b"), *SYNC_JSON, address],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert out.returncode == 0, out.stderr
    assert out.stderr.strip().endswith("heaps: 1"), out.stderr
