"""The viewer on a hub root holding a large line: its first page, a page after each write,
a page after none, and its memory, through the real `lifeline-mesh ui`, this tree beside
another.

    python bench/hub_viewer.py --line LINE_FILE [--writes 7] [--baseline TREE]

Copies the line file's entries into a fresh hub (as bench/hub_reads.py does), then for each
tree in turn starts `lifeline-mesh ui` on the hub root and times over HTTP: the line's
first page (the viewer copies the line: the first answer, a page saying how far the copy
is, and the time until the line's own page, asked for every 0.5 s), then ``--writes``
times a `lifeline log` on the hub root (not timed) followed by the page (the copy brought
up to date), and the page again with no write. Prints medians and the viewer's peak RSS;
not a test. PostgreSQL: ``LIFELINE_TEST_PG=postgresql://…``, else a throwaway cluster
(tests/support/pg_server.py).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from hub_reads import hub_holding
from hub_root import on_a_server
from many_tips import run_cli
from serving import TREE


def _peak_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _timed(url: str) -> float:
    """Seconds to GET ``url`` (the first page of a large line takes minutes)."""
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=1800) as response:
        response.read()
        if response.status != 200:
            raise SystemExit(f"{url}: {response.status}")
    return time.perf_counter() - started


def _first(url: str) -> tuple[float, float]:
    """Seconds to the first answer to ``url`` (the line's page, or one saying how far its
    copy is) and to the line's own page."""
    started = time.perf_counter()
    answered = None
    while True:
        try:
            took = _timed(url)
        except urllib.error.HTTPError as exc:
            if exc.code != 503:
                raise
            answered = answered or time.perf_counter() - started
            time.sleep(0.5)
            continue
        ready = time.perf_counter() - started
        return answered or took, ready


def viewer_run(tree: Path, hub: Path, writes: int) -> dict[str, object]:
    env = dict(os.environ) | ({"PYTHONPATH": str(tree)} if tree != TREE else {})
    proc = subprocess.Popen(
        [sys.executable, "-m", "lifeline_mesh", "--root", str(hub), "ui", "--listen",
         "127.0.0.1:0"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line.startswith("viewer on "):
            raise SystemExit(f"the viewer did not start: {line!r}")
        page = line.removeprefix("viewer on ").strip().split("?")[0].rstrip("/")
        page += "/lines/ledger/"
        first, ready = _first(page)
        after_write, quiet = [], []
        for k in range(writes):
            run_cli(tree, hub, "log", "--kind", "note", "--summary", f"bench note {k}")
            after_write.append(_timed(page))
            quiet.append(_timed(page))
        return {"first": first, "ready": ready, "after a write": after_write, "no write": quiet,
                "peak": _peak_mib(proc.pid)}  # fmt: skip
    finally:
        proc.terminate()
        proc.communicate(timeout=120)


def bench(args: argparse.Namespace, server: str) -> None:
    trees = [TREE] + ([args.baseline.resolve()] if args.baseline else [])
    with tempfile.TemporaryDirectory(prefix="hub-viewer-") as tmp:
        hub = hub_holding(args.line, server, Path(tmp))
        run_cli(TREE, hub, "context")  # the hub's truth tables folded, as a hub keeps them
        for tree in trees:
            got = viewer_run(tree, hub, args.writes)
            label = "this" if tree == TREE else f"baseline {tree}"
            after = statistics.median(got["after a write"])  # type: ignore[arg-type]
            quiet = statistics.median(got["no write"])  # type: ignore[arg-type]
            print(
                f"{label}: first answer {got['first']:.2f} s, the line's page at"
                f" {got['ready']:.2f} s; after a write, median "
                f"{after * 1000:.0f} ms; with no write {quiet * 1000:.0f} ms; viewer peak "
                f"{got['peak']:.0f} MiB"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--line", type=Path, required=True, help="a line file to copy")
    parser.add_argument("--writes", type=int, default=7)
    parser.add_argument("--baseline", type=Path, help="another tree to run side by side")
    args = parser.parse_args()
    on_a_server(lambda url: bench(args, url))


if __name__ == "__main__":
    main()
