"""Helper processes beside the node's own, for the CPU-heavy checks of large received batches.

An initial sync receives signatures and entries by the hundred thousand: each signature
must be verified and each entry parsed and its id recomputed (bench/history/
figures-behind-the-code.md). Threads do not help: the node's process
has one interpreter lock, and the thread that stores a batch needs it for the Python half
of each write, so a parse in the event loop's thread and a write in the store's thread ran
one after the other (bench/cpu_timeline.py shows the cores each side uses). A helper
process works at full speed on another core while this process stores; the node keeps
only what it must do itself.

The helpers are ``python -m lifeline_mesh.helpers.worker`` (one per core, at most four), plain child
processes (not ``multiprocessing``, which re-imports the parent's main script). Each
answers one request at a time and exits when its stdin closes, so it never outlives the
node. :func:`run_split` cuts a batch into one part per helper and runs the parts at once.
A helper that cannot start or keeps dying is given up after ``MAX_FAILURES`` failures in a
row; its parts are then done in this process, which gives the same answers.
"""

from __future__ import annotations

import asyncio
import atexit
import contextvars
import marshal
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from lifeline_mesh.helpers.worker import U32, read_exact

__all__ = ["MAX_FAILURES", "allowed", "run_split", "warm_up", "worker_count"]

MAX_FAILURES = 3  # failures in a row after which a helper is not started again
T = TypeVar("T")
R = TypeVar("R")


# Off for a session run without fast paths (lifeline_mesh.sync.fast): then every part is
# done in this process, which gives the same answers.
_ALLOWED: contextvars.ContextVar[bool] = contextvars.ContextVar("helpers_allowed", default=True)


@contextmanager
def allowed(on: bool) -> Iterator[None]:
    """Within this block (and the tasks and threads it starts), use the helpers iff ``on``."""
    token = _ALLOWED.set(on)
    try:
        yield
    finally:
        _ALLOWED.reset(token)


def worker_count() -> int:
    """One per core: they only compete with the node while it has batches to check."""
    return max(1, min(4, os.cpu_count() or 1))


class _Worker:
    """One child process; one request at a time (callers queue on its lock)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._failures = 0

    def _started(self) -> subprocess.Popen[bytes]:
        proc = self._proc
        if proc is None or proc.poll() is not None:
            # The child must import this package even when the node found it through a
            # path set at run time (a checkout, a test run): hand it our sys.path.
            env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
            proc = self._proc = subprocess.Popen(
                [sys.executable, "-m", "lifeline_mesh.helpers.worker"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env=env,
            )
        return proc

    def start(self) -> None:
        with self._lock:
            if self._failures < MAX_FAILURES:
                try:
                    self._started()
                except OSError:
                    self._failures += 1

    def call(self, op: bytes, payload: object, local: Callable[[], T]) -> T:
        """The helper's answer to ``op`` on ``payload``; ``local()`` if it cannot give one."""
        with self._lock:
            if self._failures >= MAX_FAILURES:
                return local()
            proc: subprocess.Popen[bytes] | None = None
            try:
                proc = self._started()
                assert proc.stdin is not None and proc.stdout is not None
                request = op + marshal.dumps(payload)  # type: ignore[arg-type]
                proc.stdin.write(U32.pack(len(request)))
                proc.stdin.write(request)
                proc.stdin.flush()
                (size,) = U32.unpack(read_exact(proc.stdout, 4))
                result: T = marshal.loads(read_exact(proc.stdout, size))
            except (OSError, EOFError, ValueError):
                # Could not start, or died (killed, out of memory): do it here; the next
                # call starts a new helper.
                self._failures += 1
                if proc is not None:
                    self._stop(proc)
                return local()
            self._failures = 0
            return result

    def _stop(self, proc: subprocess.Popen[bytes]) -> None:
        self._proc = None
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                pipe.close()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def close(self) -> None:
        with self._lock:
            if self._proc is not None:
                self._stop(self._proc)


_WORKERS: list[_Worker] = []
_WORKERS_LOCK = threading.Lock()


def _workers() -> list[_Worker]:
    with _WORKERS_LOCK:
        if not _WORKERS:
            _WORKERS.extend(_Worker() for _ in range(worker_count()))
        return _WORKERS


@atexit.register
def _close_workers() -> None:
    for worker in _WORKERS:
        worker.close()


def warm_up() -> None:
    """Start the helpers now (a serving node does, before its first session)."""
    for worker in _workers():
        worker.start()


async def run_split(
    op: bytes,
    items: Sequence[Any],
    payload: Callable[[Sequence[Any]], object],
    local: Callable[[Sequence[Any]], R],
) -> list[tuple[int, R]]:
    """``(offset, answer)`` for consecutive parts of ``items``, one part per helper.

    Each part is sent as ``payload(part)`` with ``op``; ``local(part)`` must give the same
    answer, and is used when a helper cannot. The parts run at once, each on a thread of
    the event loop's executor that waits on its helper's pipes. Where helpers are not
    :func:`allowed`, the whole of ``items`` is one part, done by ``local`` on such a thread.
    """
    if not _ALLOWED.get():
        return [(0, await asyncio.to_thread(local, items))]
    workers = _workers()
    size = -(-len(items) // len(workers)) or 1
    parts = [(k, items[k : k + size]) for k in range(0, len(items), size)]
    found = await asyncio.gather(
        *(
            asyncio.to_thread(worker.call, op, payload(part), lambda p=part: local(p))
            for worker, (_, part) in zip(workers, parts, strict=False)
        )
    )
    return [(k, answer) for (k, _), answer in zip(parts, found, strict=True)]
