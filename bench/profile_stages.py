"""Shares of a pulling `sync`'s profile by stage (decisions 0065, 0102).

    python bench/profile_stages.py DIR/sync.txt

Reads the collapsed stacks `bench/full_sync.py --profile DIR` writes (py-spy, one line a
stack: its frames, then its sample count) and sorts each sample into the stage its frames
name: rows written by the store thread (signatures, entries, the COMMIT), the notary's rules
read from the store, and the event loop's decoding, session and frames. Prints the share
of each. Prints figures; not a test.
"""

from __future__ import annotations

import sys
from collections import Counter


def stage(stack: str) -> str:
    thread = stack.split(";", 1)[0]
    if "sqlite:" in thread:
        if "sqlite_writes.py:213" in stack:  # in_transaction's COMMIT
            return "store: COMMIT (the WAL written, the checkpoint)"
        if "insert_attestations" in stack:
            return "store: signature rows written"
        if "append_in" in stack:
            return "store: entry rows written"
        rules = ("check_timing", "take_entries", "signed_times_replace", "intake_rows")
        if any(r in stack for r in rules):
            return "store: notary rules against the store"
        return "store: rest"
    if "MainThread" in thread:
        if "AttestationCodec.parse" in stack:
            return "event loop: signatures decoded"
        if "verify_batch" in stack or "NotaryStore.prepare" in stack:
            return "event loop: signatures' rules, hand-off to the helpers"
        if "entry_offload" in stack:
            return "event loop: entries built from the helpers' answers"
        if "Session." in stack or "OrphanPool" in stack:
            return "event loop: session (reconciliation, closure)"
        if "_pump" in stack:
            return "event loop: frames read"
        if "run_forever" not in stack:
            return "main: start-up, imports"
        return "event loop: scheduling, waiting, the rest"
    return "other threads (gRPC, executors)"


def main() -> None:
    counts: Counter[str] = Counter()
    with open(sys.argv[1], encoding="utf-8", errors="replace") as collapsed:
        for line in collapsed:
            line = line.rstrip()
            if not line or line.startswith("py-spy"):
                continue
            stack, n = line.rsplit(" ", 1)
            counts[stage(stack)] += int(n)
    total = sum(counts.values())
    print(f"{total} samples")
    for name, n in counts.most_common():
        print(f"{100 * n / total:5.1f}%  {n:6d}  {name}")


if __name__ == "__main__":
    main()
