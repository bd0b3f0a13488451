"""`lifeline sessions usage` and `search` on a hub root holding an ingested corpus, through
the real CLI, this tree beside another.

    python bench/hub_sessions.py [--mb 200] [--runs 5] [--baseline TREE]

Builds a corpus of the fixture transcripts (bench/sessions.py's, ``--mb`` of them), makes a
hub root on a fresh database (bench/hub_reads.py's), ingests the corpus there with
`lifeline sessions ingest --all`, then for each tree in turn: `sessions usage --json` once
(the first read: a tree that keeps the index builds it), then ``--runs`` times each of
`usage --json` and `search lmstudio`: wall time and the process's own peak RSS. Prints
medians; not a test. PostgreSQL: ``LIFELINE_TEST_PG=postgresql://…``, else a throwaway
cluster (tests/support/pg_server.py).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from hub_reads import hub_holding
from hub_root import on_a_server
from many_tips import run_cli
from serving import TREE
from sessions import build_corpus

READS = [("usage", "--json"), ("search", "lmstudio")]


def bench(args: argparse.Namespace, server: str) -> None:
    trees = [TREE] + ([args.baseline.resolve()] if args.baseline else [])
    with tempfile.TemporaryDirectory(prefix="hub-sessions-") as tmp:
        work = Path(tmp)
        files, size = build_corpus(work / "home", args.mb * 1024 * 1024)
        hub = hub_holding(None, server, work)
        started = time.perf_counter()
        run_cli(TREE, hub, "sessions", "ingest", "--all", str(work / "home"))
        took = time.perf_counter() - started
        print(f"{files} transcripts, {size / 1e6:.0f} MB, ingested into the hub in {took:.0f} s")
        for tree in trees:
            label = "this" if tree == TREE else f"baseline {tree}"
            first, peak = run_cli(tree, hub, "sessions", *READS[0])
            print(f"{label}: first usage {first:.2f} s, {peak:.0f} MiB")
            for read in READS:
                runs = [run_cli(tree, hub, "sessions", *read) for _ in range(args.runs)]
                wall = statistics.median(w for w, _ in runs)
                rss = statistics.median(m for _, m in runs)
                print(f"{label}: {' '.join(read)}, median {wall:.2f} s, {rss:.0f} MiB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=200, help="corpus size (default 200)")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--baseline", type=Path, help="another tree to run side by side")
    args = parser.parse_args()
    on_a_server(lambda url: bench(args, url))


if __name__ == "__main__":
    main()
