"""Memory and build time of a reconciliation snapshot of many items (docs/benchmarks.md).

python bench/snapshot_memory.py [--n 1000000]
"""

from __future__ import annotations

import argparse
import hashlib
import resource
import time
from collections.abc import Iterator

from lifeline_mesh.recon.sets import Snapshot, token_of


def rows(n: int) -> Iterator[tuple[int, bytes, bytes]]:
    for k in range(n):
        item_id = hashlib.sha256(str(k).encode()).digest()
        yield k // 2, item_id, token_of(item_id, b"2026-01-01T00:00:00.000000Z")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    n = parser.parse_args().n
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    started = time.perf_counter()
    snap = Snapshot.build(rows(n))
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    with open("/proc/self/statm") as fh:
        resident = int(fh.read().split()[1]) * resource.getpagesize() / 2**20
    print(
        f"{len(snap):,}-item snapshot: built in {seconds:.1f}s; resident {resident:.0f} MB, "
        f"peak {peak:.0f} MB (process before: {before:.0f} MB)"
    )


if __name__ == "__main__":
    main()
