"""Session ingest through the real CLI: throughput, no-op re-ingest, live appends, memory.

    python bench/sessions.py                 # a 1 GB corpus under a temporary folder
    python bench/sessions.py --mb 200        # smaller
    python bench/sessions.py --keep DIR      # build (or reuse) the corpus in DIR
    python bench/sessions.py --runs 3 --baseline ../main   # side by side with another tree

The corpus replicates the real transcripts of tests/fixtures/transcripts/ in the tools'
own layouts (~/.claude/projects, ~/.codex/sessions, ~/.gemini/tmp), each copy its own
session (a new file name, hence a new native id). Then, as a user would run them:

1. ``lifeline sessions ingest --all`` on the corpus: MB/s and turns/s of the whole process,
   its peak RSS and MB per CPU second, counting every process of its tree (it reads in
   worker processes: the tree is sampled from /proc, each process's peak is its VmHWM);
   with ``--baseline DIR`` the same command from that tree (``PYTHONPATH``) too, the
   runs alternating so that load hits both alike, medians of ``--runs``;
2. the same command again (nothing changed): seconds; then ``lifeline sessions list``;
3. appending 100 lines to a 2.7 MB live session and ingesting it, in process (what one
   watcher pass costs) and as a CLI process: milliseconds, median of 7;
4. ``lifeline sessions usage`` and ``lifeline sessions search`` on the corpus: the first
   run (it builds the index), then warm — in process (opening the index, checking it is
   up to date, answering: what a command does past interpreter start-up) median of 7, and
   as CLI processes median of 5 — for a rare word, a common word, two words, and each
   usage grouping; then the same on one synthetic 5,000-turn session
   (``bench/bundles.py``'s). ``--find-only`` skips 1–3 on a corpus already ingested.

``--reader`` measures instead the CPU part of ingest alone — what each worker process does:
every file read, redacted, parsed and packed in process, nothing stored — as MB per CPU
second (best of ``--runs``), with a digest of the parts' bodies; with ``--baseline`` the same
in that tree too, side by side (its bodies must give the same digest).

Prints figures; no pass/fail.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from lifeline.home import Home  # noqa: E402
from lifeline.sessions.config import SessionSettings  # noqa: E402
from lifeline.sessions.finder import opened_index, search  # noqa: E402
from lifeline.sessions.ingest.service import open_ingester, sources_in  # noqa: E402
from lifeline.sessions.prices import load_prices  # noqa: E402
from lifeline.sessions.usage import GROUPS, usage_report  # noqa: E402
from lifeline.store.sqlite import SqliteStore  # noqa: E402
from tests.support.sessions_support import FIXTURES, _claude_target, write_jsonl  # noqa: E402

SPOTTER = "marot__spotter__258c7280-ae70-4798-800f-63464d01a85d.jsonl"


def build_corpus(home: Path, target_bytes: int) -> tuple[int, int]:
    """Copies of every fixture until ``target_bytes``; returns (files, bytes)."""
    sources = sorted(p for p in FIXTURES.rglob("*.jsonl") if p.stat().st_size > 0)
    files = size = copy = 0
    while size < target_bytes:
        for index, path in enumerate(sources):
            tool = path.parent.name
            tag = f"{copy:05d}"
            if tool == "claude-code":
                target = _claude_target(home / ".claude" / "projects", path.name)
                target = target.with_name(f"{tag}{target.name[5:]}")
            elif tool == "codex":
                target = (
                    home
                    / ".codex"
                    / "sessions"
                    / "2026"
                    / "01"
                    / "01"
                    / (
                        f"rollout-2026-01-01T00-00-00-{tag}{index:03d}b-c3d4-7e5f-8a9b-0c1d2e3f4a5b.jsonl"
                    )
                )
            else:
                target = home / ".gemini" / "tmp" / "p" / "chats" / f"session-{tag}.jsonl"
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
            files += 1
            size += path.stat().st_size
        copy += 1
    return files, size


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        tree.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    return tree


def _sample(pid: int, seen: dict[int, tuple[float, int]]) -> None:
    """CPU seconds and VmHWM (kB) of ``pid`` and its descendants, into ``seen``."""
    tree, todo, tick = _children(), [pid], os.sysconf("SC_CLK_TCK")
    while todo:
        at = todo.pop()
        todo += tree.get(at, [])
        try:
            head, rest = (Path("/proc") / str(at) / "stat").read_text().rsplit(")", 1)
            status = (Path("/proc") / str(at) / "status").read_text()
        except OSError:
            continue
        if "python" not in head:  # ours; not the short-lived git calls of the scope lookup
            continue
        fields = rest.split()
        hwm = next((int(x.split()[1]) for x in status.splitlines() if x.startswith("VmHWM")), 0)
        seen[at] = ((int(fields[11]) + int(fields[12])) / tick, hwm)


def tree_run(cmd: list[str], env: dict[str, str]) -> tuple[float, float, float, float, str]:
    """Runs ``cmd``; returns wall s, CPU s of its whole process tree, the largest peak RSS
    of one process and the sum of the peaks (MB), and its stdout."""
    start = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.DEVNULL, env=env)
        seen: dict[int, tuple[float, int]] = {}
        while True:
            _sample(proc.pid, seen)
            try:
                _, status, usage = os.wait4(proc.pid, os.WNOHANG)
            except ChildProcessError:
                break
            if _ or status:
                break
            time.sleep(0.05)
        wall = time.perf_counter() - start
        proc.returncode = 0
        seen.pop(proc.pid, None)  # its own figures come from wait4, exact
        cpu = usage.ru_utime + usage.ru_stime + sum(c for c, _ in seen.values())
        peaks = [usage.ru_maxrss / 1024, *(h / 1024 for _, h in seen.values())]
        out.seek(0)
        return wall, cpu, max(peaks), sum(peaks), out.read().decode()


def side_by_side(home: Path, work: Path, size: int, runs: int, baseline: Path) -> None:
    """``ingest --all`` of the corpus by this tree and by ``baseline``, alternating."""
    figures: dict[str, list[tuple[float, float, float, float]]] = {"this": [], "baseline": []}
    for run in range(runs):
        for label, tree in (("baseline", baseline), ("this", REPO)):
            root = work / f"node-{label}"
            shutil.rmtree(root, ignore_errors=True)
            root.mkdir()
            env = dict(os.environ, PYTHONPATH=str(tree))
            cmd = [sys.executable, "-m", "lifeline", "--root", str(root), "sessions", "ingest"]
            wall, cpu, peak, total, out = tree_run([*cmd, "--all", "--json", str(home)], env)
            figures[label].append((wall, cpu, peak, total))
            print(
                f"  run {run + 1} {label}: {wall:.1f} s = {size / 1e6 / wall:.1f} MB/s wall, "
                f"{size / 1e6 / cpu:.1f} MB per CPU s, peak RSS {peak:.0f} MB (sum over its "
                f"processes {total:.0f} MB), {json.loads(out)['turns']} turns; load "
                f"{os.getloadavg()[0]:.1f}",
                flush=True,
            )
    for label in ("baseline", "this"):
        walls = [f[0] for f in figures[label]]
        cpus = [f[1] for f in figures[label]]
        print(
            f"{label}: median {size / 1e6 / statistics.median(walls):.1f} MB/s wall, "
            f"{size / 1e6 / statistics.median(cpus):.1f} MB per CPU s, peak RSS "
            f"{max(f[2] for f in figures[label]):.0f} MB (sum "
            f"{max(f[3] for f in figures[label]):.0f})"
        )
    ratio = statistics.median(f[0] for f in figures["baseline"]) / statistics.median(
        f[0] for f in figures["this"]
    )
    print(f"wall speed-up, median against median: {ratio:.2f}x")


_READER = """
import hashlib, sys, time
from pathlib import Path
try:
    from lifeline.sessions.ingest.reading import ReadJob, read_slice
    from lifeline.sessions.ingest.service import sources_in
except ImportError:  # a tree from before decision 0079
    from lifeline.sessions.reading import ReadJob, read_slice
    from lifeline.sessions.service import sources_in
from lifeline.sessions.pack import Caps, Packer
paths = sorted(Path(sys.argv[1]).rglob("*.jsonl"))
found, caps, digest = sources_in(paths), Caps(), hashlib.sha256()
start = time.process_time()
for adapter, source in found:
    job = ReadJob(adapter, source, None, Packer(caps.part_bytes), 0, 0, "", caps, (), 1 << 40)
    out = read_slice(job)
    for part in [*out.closed, *([out.tail] if out.tail else [])]:
        digest.update(part.body("s").encode("utf-8", "surrogatepass"))
print(time.process_time() - start, digest.hexdigest()[:16])
"""


def reader_cpu(home: Path, size: int, runs: int, baseline: Path | None) -> None:
    """The reading alone, in process (one process per run), each tree in turn."""
    trees = [("baseline", baseline)] if baseline is not None else []
    trees.append(("this", REPO))
    spent: dict[str, list[float]] = {label: [] for label, _ in trees}
    digests: dict[str, str] = {}
    for _ in range(runs):
        for label, tree in trees:
            env = dict(os.environ, PYTHONPATH=str(tree))
            out = subprocess.run(
                [sys.executable, "-c", _READER, str(home)],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            ).stdout.split()
            spent[label].append(float(out[0]))
            digests[label] = out[1]
    for label, _ in trees:
        best = min(spent[label])
        print(
            f"reader {label}: {size / 1e6 / best:.1f} MB per CPU s (best of {runs}; "
            f"{', '.join(f'{s:.1f}' for s in spent[label])} s), parts digest {digests[label]}; "
            f"load {os.getloadavg()[0]:.1f}"
        )


def cli(root: Path, *args: str) -> tuple[float, subprocess.CompletedProcess[str]]:
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "lifeline", "--root", str(root), "sessions", *args],
        capture_output=True,
        text=True,
        check=True,
    )
    return time.perf_counter() - start, proc


async def append_cost(work: Path) -> tuple[float, float]:
    """Median ms to ingest 100 appended lines: in process, and as a CLI process."""
    lines = (FIXTURES / "claude-code" / SPOTTER).read_bytes().splitlines(keepends=True)
    live = work / "live" / "258c7280-ae70-4798-800f-63464d01a85d.jsonl"
    live.parent.mkdir(parents=True)
    live.write_bytes(b"".join(lines[:1000]))
    root = work / "append-node"
    inproc, cli_ms = [], []
    async with open_ingester(Home(root), "sessions", SessionSettings()) as ingester:
        ((adapter, source),) = sources_in([live])
        await ingester.ingest(adapter, source)
        for n in range(7):
            with live.open("ab") as out:
                out.write(b"".join(lines[1000 + n * 100 : 1100 + n * 100]))
            start = time.perf_counter()
            await ingester.ingest(adapter, source)
            inproc.append((time.perf_counter() - start) * 1000)
    for n in range(7, 8):
        with live.open("ab") as out:
            out.write(b"".join(lines[1000 + n * 100 : 1100 + n * 100]))
        seconds, _ = cli(root, "ingest", str(live))
        cli_ms.append(seconds * 1000)
    return statistics.median(inproc), statistics.median(cli_ms)


def _median_ms(run: Any, times: int = 7) -> float:
    spent = []
    for _ in range(times):
        start = time.perf_counter()
        asyncio.run(run())
        spent.append((time.perf_counter() - start) * 1000)
    return statistics.median(spent)


def _warm(root: Path, label: str, queries: list[str], session: str | None = None) -> None:
    """In process: open the line and its index (up to date), answer; median ms."""
    line = root / ".lifeline" / "sessions.db"

    def searching(query: str) -> Any:
        async def run() -> None:
            store = await SqliteStore.open(line, create=False)
            try:
                async with opened_index(store) as index:
                    await search(store, index, query, session=session, limit=20)
            finally:
                await store.close()

        return run

    def usage(by: str) -> Any:
        async def run() -> None:
            store = await SqliteStore.open(line, create=False)
            try:
                async with opened_index(store) as index:
                    usage_report(index, load_prices(), by=by)
            finally:
                await store.close()

        return run

    figures = [f"search {q!r} {_median_ms(searching(q)):.0f}" for q in queries]
    figures += [f"usage --by {by} {_median_ms(usage(by)):.0f}" for by in GROUPS]
    print(f"{label}, warm in process, ms (median of 7): " + "; ".join(figures))


def find_costs(root: Path, work: Path) -> None:
    """Step 4: usage and search on the ingested corpus, then on a 5,000-turn session."""
    index = root / ".lifeline" / "sessions.sessions-index.sqlite"
    what = "the index there already" if index.exists() else "builds the index"
    first, _ = cli(root, "usage", "--json")
    print(
        f"first usage ({what}): {first:.1f} s; index {index.stat().st_size / 1e6:.0f}"
        f" MB beside a {(root / '.lifeline' / 'sessions.db').stat().st_size / 1e6:.0f} MB line"
    )
    queries = ["lmstudio", "the", "rate limit"]
    _warm(root, "corpus", queries)
    whole = []
    for args in (("search", "lmstudio"), ("search", "the"), ("usage", "--by", "model")):
        spent = [cli(root, *args)[0] * 1000 for _ in range(5)]
        whole.append(f"{' '.join(args)} {statistics.median(spent):.0f}")
    print("corpus, CLI process, ms (median of 5): " + "; ".join(whole))

    from bench.bundles import turn

    big = work / "turns5k" / "11111111-2222-3333-4444-555555555555.jsonl"
    if not big.exists():
        write_jsonl(big, [line for i in range(1, 5001) for line in turn(i, "/srv/bench/p")])
    node = work / "turns5k-node"
    shutil.rmtree(node, ignore_errors=True)
    node.mkdir()
    cli(node, "ingest", str(big))
    built, _ = cli(node, "search", "module_7")
    print(f"5,000-turn session: first search (builds the index) {built:.2f} s")
    _warm(node, "5,000-turn session", ["module_7", "step", "parse raises"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=1024, help="corpus size (default 1024)")
    parser.add_argument("--keep", type=Path, help="build or reuse the corpus here")
    parser.add_argument("--baseline", type=Path, help="another tree: ingest side by side")
    parser.add_argument("--runs", type=int, default=3, help="runs each with --baseline")
    parser.add_argument(
        "--find-only", action="store_true", help="only step 4, on a corpus --keep ingested"
    )
    parser.add_argument(
        "--reader", action="store_true", help="only the reading, in process (see above)"
    )
    args = parser.parse_args()
    if args.find_only:
        if args.keep is None:
            parser.error("--find-only needs --keep DIR (a corpus ingested before)")
        find_costs(args.keep / "node", args.keep)
        return
    work = args.keep or Path(tempfile.mkdtemp(prefix="sessions-bench-"))
    home = work / "home"
    try:
        if not (home / ".claude").exists():
            files, size = build_corpus(home, args.mb * 1024 * 1024)
        else:
            found = [p for p in home.rglob("*.jsonl")]
            files, size = len(found), sum(p.stat().st_size for p in found)
        root = work / "node"
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir()
        print(f"corpus: {files} files, {size / 1e6:.0f} MB; load {os.getloadavg()[0]:.1f}")
        if args.reader:
            reader_cpu(home, size, args.runs, args.baseline.resolve() if args.baseline else None)
            return
        if args.baseline is not None:
            side_by_side(home, work, size, args.runs, args.baseline.resolve())
            return
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        seconds, proc = cli(root, "ingest", "--all", "--json", str(home))
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
        report = json.loads(proc.stdout)
        rss = after.ru_maxrss / 1024
        line = root / ".lifeline" / "sessions.db"
        print(
            f"ingest: {seconds:.1f} s = {size / 1e6 / seconds:.1f} MB/s, "
            f"{report['turns'] / seconds:.0f} turns/s, {report['items'] / seconds:.0f} items/s "
            f"({report['sessions']} sessions, {report['turns']} turns, {report['entries']} "
            f"entries; line file {line.stat().st_size / 1e6:.0f} MB); peak RSS {rss:.0f} MB; "
            f"CPU {cpu:.1f} s = {size / 1e6 / cpu:.1f} MB per CPU second (load "
            f"{os.getloadavg()[0]:.1f}: on a busy machine the CPU figure is the steadier one)"
        )
        again, proc = cli(root, "ingest", "--all", "--json", str(home))
        print(f"no-op re-ingest: {again:.2f} s ({json.loads(proc.stdout)['unchanged']} unchanged)")
        listed, proc = cli(root, "list", "--json")
        print(f"list: {listed:.2f} s for {len(json.loads(proc.stdout))} sessions")
        inproc, cli_ms = asyncio.run(append_cost(work))
        print(
            f"append 100 lines to a live session: {inproc:.1f} ms in process (median of 7), "
            f"{cli_ms:.0f} ms as a CLI process"
        )
        find_costs(root, work)
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
