"""Checking many ed25519 signatures in worker processes, beside the node's own process.

Admission has to verify every received attestation (about 60 µs each on our benchmark
machine), and an initial sync receives them by the hundred thousand. Threads do not help
here: each libsodium call is short, and a verifying thread has to take the GIL back between
calls while the event loop's thread decodes and stores, so the two ran one after the other
(measured: verification in a thread beside a Python loop took the sum of both; two
processes verifying at once each kept their full speed). A worker process verifies at
full speed on another core while this process decodes and stores.

A worker only answers "which is the first item whose signature does not verify over its
statement"; every other admission rule stays in this process
(:func:`lifeline_mesh.notary.admission.check_items`, which also words the refusal). Small
batches (tests, the live sync of a few entries) are verified here: handing them over would
cost more than it saves. A worker is ``python -m lifeline_mesh.sigworker``, a plain
child process (not ``multiprocessing``, which re-imports the parent's main script); it
reads requests on stdin and exits when stdin closes, so it never outlives the node.

The worker's side and the wire format are in :mod:`lifeline_mesh.sigworker`, which imports
nothing of the node (a worker stays small).
"""

from __future__ import annotations

import asyncio
import atexit
import os
import subprocess
import sys
import threading
from collections.abc import Sequence

from lifeline_mesh.sigworker import I32, first_bad_in, read_exact, request_bytes

__all__ = ["MIN_OFFLOAD", "first_bad_in", "first_bad_signature", "warm_up", "worker_count"]

MIN_OFFLOAD = 64  # items; smaller batches are verified in this process
MAX_FAILURES = 3  # failures in a row after which a worker is not started again


def worker_count() -> int:
    """One per core: they only compete with the node while it has signatures to check."""
    return max(1, min(4, os.cpu_count() or 1))


class _Worker:
    """One child process; one request at a time (callers queue on its lock).

    A worker that cannot start or keeps dying is given up after ``MAX_FAILURES`` failures
    in a row: its batches are then checked in-process, as small ones are.
    """

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
                [sys.executable, "-m", "lifeline_mesh.sigworker"],
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

    def first_bad(self, items: Sequence[bytes]) -> int:
        with self._lock:
            if self._failures >= MAX_FAILURES:
                return first_bad_in(items)
            proc: subprocess.Popen[bytes] | None = None
            try:
                proc = self._started()
                assert proc.stdin is not None and proc.stdout is not None
                proc.stdin.write(request_bytes(items))
                proc.stdin.flush()
                (bad,) = I32.unpack(read_exact(proc.stdout, 4))
            except (OSError, EOFError, ValueError):
                # Could not start, or died (killed, out of memory): check here; the next
                # call starts a new worker.
                self._failures += 1
                if proc is not None:
                    self._stop(proc)
                return first_bad_in(items)
            self._failures = 0
            return int(bad)

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
    """Start the workers now (a serving node does, before its first session)."""
    for worker in _workers():
        worker.start()


async def first_bad_signature(items: Sequence[bytes]) -> int:
    """``first_bad_in(items)``; a large batch is checked in the worker processes."""
    if len(items) < MIN_OFFLOAD:
        return await asyncio.to_thread(first_bad_in, items)
    workers = _workers()
    size = -(-len(items) // len(workers))
    found = await asyncio.gather(
        *(
            asyncio.to_thread(worker.first_bad, items[k : k + size])
            for worker, k in zip(workers, range(0, len(items), size), strict=False)
        )
    )
    for part, bad in enumerate(found):
        if bad >= 0:
            return part * size + bad
    return -1
