"""A `ci run` job on a large line, through the CLI, shallow against a full pull (§10 target:
a fresh runner to its entry admitted, < 3 s wall and < 2 MB on the wire at 1M entries).

    python bench/ci_shallow.py --entries 100000 [--jobs 3] [--baseline TREE] [--laptop]

The line is built once and kept under ``$LIFELINE_BENCH_CACHE`` (default
``~/.cache/lifeline-mesh/bench``): a CA holder's root whose line ``ledger`` holds
``--entries`` entries, each signed by the node (author attestations), in the mix of a
long-lived project line: a chain of notes and session-sized entries, with 0.1% decisions
(some corrected), 0.05% open questions, 2% checkpoints over 50 threads and a few pins —
the truth a runner needs is ~0.2% of the line. Building 1M takes several minutes.

Each run copies that root, starts `lifeline-mesh serve` on it (its own process, mutual TLS,
notary on), mints a CI credential, and runs ``--jobs`` jobs, each in a fresh workspace:
``lifeline-mesh ci run -- python -m lifeline log …`` (enroll, pull, write the context file,
one signed entry written by the job's command, sync back). Wall time is the whole `ci run`
process, until the entry is stored on the serving node; bytes on the wire are counted by a
TCP relay in front of the sync and join ports (TLS and HTTP/2 included). With
``--baseline TREE`` (a checkout of the tree before, e.g. a `git worktree` of main) the same
jobs run with that tree's code (``PYTHONPATH``) against its own copy, interleaved with ours.
``--laptop`` times a new laptop instead, from a fresh invite to its first `lifeline context`,
each tree its quickest way: `join --shallow` (one process: join, share, the shallow pull)
where the tree has it, else `join`, `lifeline init`, `share ledger` and the first sync
(``sync --shallow`` where the tree has it, else ``sync``). Prints medians and each step's
time; not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
TREE = HERE.parent
CACHE = Path(os.environ.get("LIFELINE_BENCH_CACHE", Path.home() / ".cache/lifeline-mesh/bench"))
BATCH = 5000


def _cli(tree: Path, root: Path, *args: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run(
        [sys.executable, "-m", *args[:1], "--root", str(root), *args[1:]],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        cwd=tree,  # `-m` looks in the working folder first: it must be the tree's own
    )
    if done.returncode != 0:
        raise SystemExit(f"{args} failed: {done.stderr}")
    return done.stdout


def _entries(n: int) -> list[object]:
    from lifeline.entry import Entry

    rng = random.Random(7)
    out: list[Entry] = []
    decisions: list[str] = []
    base = 1_767_225_600  # 2026-01-01
    for k in range(n):
        ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(base + k)) + f".{k % 1000:03d}Z"
        roll = rng.random()
        parents = (out[-1].id,) if out else ()
        if k == 0:
            kind, summary, body = "bootstrap", "Bench project", "A long-lived line."
        elif roll < 0.001:
            kind, summary, body = "decision", f"decision {k}: use tool {k % 97}", "why " * 30
        elif roll < 0.0012 and decisions:
            kind, summary = "correction", f"correction {k}"
            body, parents = "replaced by a later choice", (rng.choice(decisions),)
        elif roll < 0.0017:
            kind, summary, body = "open", f"open {k}: which cache?", "to decide " * 10
        elif roll < 0.0372:
            thread = f"thread-{rng.randrange(50)}"
            kind, summary = "checkpoint", f"checkpoint {thread} at {k}"
            body = f"thread: {thread}\ndone:\n  - step {k}\nnext:\n  - step {k + 1}"
        elif roll < 0.0373 and decisions:
            kind, summary, body = "note", f"pin {k}", f"pin: {rng.choice(decisions)}"
        else:
            kind, summary, body = "note", f"session note {k}", "worked on it " * 20
        entry = Entry.create(
            ts=ts, kind=kind, summary=summary, body=body, author="bench", parents=parents
        )
        out.append(entry)
        if kind == "decision":
            decisions.append(entry.id)
    return out


async def _fill(root: Path, n: int) -> None:
    from lifeline.home import Home
    from lifeline.store.sqlite import SqliteStore
    from lifeline_mesh.home.identity import NodeIdentity
    from lifeline_mesh.home.node_home import NodeHome
    from lifeline_mesh.notary.sign import sign_entries

    identity = NodeIdentity.of(NodeHome(root))
    entries = _entries(n)
    async with await SqliteStore.open(Home(root).line_path("ledger")) as store:
        for k in range(0, n, BATCH):
            part = entries[k : k + BATCH]
            await store.append_many(part)  # type: ignore[arg-type]
            await sign_entries(store, identity, part)  # type: ignore[arg-type]


def cached_line(n: int) -> Path:
    """A CA holder's root with the signed line of ``n`` entries (built once)."""
    root = CACHE / f"ci-line-{n}"
    if (root / "READY").exists():
        return root
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    _cli(TREE, root, "lifeline_mesh", "init", "--new-mesh", "bench")
    _cli(TREE, root, "lifeline", "init")
    _cli(TREE, root, "lifeline_mesh", "share", "ledger")
    started = time.perf_counter()
    asyncio.run(_fill(root, n))
    _cli(TREE, root, "lifeline", "context")  # the truth tables, folded once
    (root / "READY").write_text(f"{n}\n")
    print(f"built the {n:,}-entry line in {time.perf_counter() - started:.0f} s: {root}")
    return root


class Relay:
    """A TCP relay to ``target`` counting the bytes both ways."""

    def __init__(self, target: str) -> None:
        self.host, port = target.rsplit(":", 1)
        self.port = int(port)
        self.bytes = 0
        self.loop = asyncio.new_event_loop()
        self.address = ""
        ready = threading.Event()
        threading.Thread(target=self._run, args=(ready,), daemon=True).start()
        ready.wait()

    def _run(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)

        async def start() -> None:
            server = await asyncio.start_server(self._conn, "127.0.0.1", 0)
            self.address = f"127.0.0.1:{server.sockets[0].getsockname()[1]}"
            ready.set()

        self.loop.run_until_complete(start())
        self.loop.run_forever()

    async def _conn(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_r, up_w = await asyncio.open_connection(self.host, self.port)

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    self.bytes += len(data)
                    dst.write(data)
                    await dst.drain()
            except ConnectionError:
                pass
            finally:
                dst.close()

        await asyncio.gather(pump(reader, up_w), pump(up_r, writer))


class Side:
    """One tree's serving node (its own copy of the line) and its CI credential."""

    def __init__(self, name: str, tree: Path, line: Path, work: Path) -> None:
        self.name, self.tree = name, tree
        self.root = work / f"node-{name}"
        shutil.copytree(line, self.root)
        env = {**os.environ, "PYTHONPATH": str(tree)}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "lifeline_mesh", "--root", str(self.root), "serve",
             "--listen", "127.0.0.1:0", "--join-listen", "127.0.0.1:0", "--no-discovery"],
            stdout=subprocess.PIPE, stderr=(work / f"serve-{name}.log").open("w"), text=True,
            env=env, cwd=tree,
        )  # fmt: skip
        self.log = work / f"serve-{name}.log"
        assert self.proc.stdout is not None
        self.sync = self.proc.stdout.readline().split()[-1]
        self.join = self.proc.stdout.readline().split()[-1]
        self.sync_relay, self.join_relay = Relay(self.sync), Relay(self.join)
        out = _cli(tree, self.root, "lifeline_mesh", "invite", "--ci", "bench", "--address",
                   self.join, "--sync-address", self.sync, "--json")  # fmt: skip
        self.token = json.loads(out)["token"]
        self.runs: list[tuple[float, int]] = []

    def job(self, work: Path, k: int) -> None:
        ws = work / f"job-{self.name}-{k}"
        ws.mkdir()
        summary = f"job {self.name} {k} found it"
        env = {**os.environ, "PYTHONPATH": str(self.tree), "LIFELINE_MESH_TOKEN": self.token}
        before = self.sync_relay.bytes + self.join_relay.bytes
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "lifeline_mesh", "ci", "run", "--peer",
             self.sync_relay.address, "--join-peer", self.join_relay.address, "--",
             sys.executable, "-m", "lifeline", "log", "--kind", "note", "--summary", summary],
            cwd=ws, env=env, capture_output=True, text=True, check=False,
        )  # fmt: skip
        took = time.perf_counter() - started
        wire = self.sync_relay.bytes + self.join_relay.bytes - before
        if done.returncode != 0 or not self._admitted(summary):
            serve_log = self.log.read_text()[-2000:]
            raise SystemExit(f"{self.name} job {k} failed: {done.stderr}\nserve: {serve_log}")
        self.runs.append((took, wire))
        print(f"  {self.name} job {k}: {took:.2f} s, {wire / 1024:,.0f} KiB", flush=True)

    def laptop(self, work: Path, k: int) -> None:
        """A new laptop: `join`, `lifeline init`, `share`, the first sync, `context`."""
        ws = work / f"laptop-{self.name}-{k}"
        ws.mkdir()
        out = _cli(self.tree, self.root, "lifeline_mesh", "invite", "--address", self.join,
                   "--json")  # fmt: skip
        token = json.loads(out)["token"]
        flow = self._laptop_steps(token)  # asks the tree's --help: not part of the time
        before = self.sync_relay.bytes + self.join_relay.bytes
        started = time.perf_counter()
        steps = []
        for args in flow:
            step = time.perf_counter()
            context = _cli(self.tree, ws, *args)
            steps.append(f"{args[1]} {time.perf_counter() - step:.2f}")
        took = time.perf_counter() - started
        print(f"    steps (s): {', '.join(steps)}", flush=True)
        wire = self.sync_relay.bytes + self.join_relay.bytes - before
        if "Decisions in force" not in context:
            raise SystemExit(f"{self.name} laptop {k}: no context")
        self.runs.append((took, wire))
        print(f"  {self.name} laptop {k}: {took:.2f} s, {wire / 1024:,.0f} KiB", flush=True)

    def _laptop_steps(self, token: str) -> list[tuple[str, ...]]:
        """This tree's quickest way to a new laptop's first context: `join --shallow` in
        one process where the tree has it; else join, init, share, the first sync
        (``--shallow`` where the tree has it) and context."""
        join = ("lifeline_mesh", "join", token, "--peer", self.join_relay.address)
        sync = self.sync_relay.address
        if "--shallow" in self._help("join"):
            return [(*join, "--shallow", sync), ("lifeline", "context")]
        first = ("sync", "--shallow", sync) if "--shallow" in self._help("sync") else ("sync", sync)
        return [join, ("lifeline", "init"), ("lifeline_mesh", "share", "ledger"),
                ("lifeline_mesh", *first), ("lifeline", "context")]  # fmt: skip

    def _help(self, command: str) -> str:
        env = {**os.environ, "PYTHONPATH": str(self.tree)}
        argv = [sys.executable, "-m", "lifeline_mesh", command, "--help"]
        done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=self.tree)
        return done.stdout

    def _admitted(self, summary: str) -> bool:
        conn = sqlite3.connect(self.root / ".lifeline" / "ledger.db")
        try:
            sql = "SELECT 1 FROM entries WHERE summary = ?"
            return conn.execute(sql, (summary,)).fetchone() is not None
        finally:
            conn.close()

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--jobs", type=int, default=3)
    parser.add_argument("--baseline", type=Path, default=None, help="the tree before")
    parser.add_argument(
        "--laptop",
        action="store_true",
        help="time a new laptop instead: a fresh invite to its first context",
    )
    args = parser.parse_args()
    line = cached_line(args.entries)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        sides = [Side("ours", TREE, line, work)]
        if args.baseline is not None:
            sides.insert(0, Side("before", args.baseline.resolve(), line, work))
        try:
            for k in range(args.jobs):
                for side in sides:
                    (side.laptop if args.laptop else side.job)(work, k)
        finally:
            for side in sides:
                side.stop()
    what = "join + first context" if args.laptop else "ci run, fresh runner to its entry admitted"
    print(f"{what}, {args.entries:,}-entry line:")
    for side in sides:
        wall = statistics.median(t for t, _ in side.runs)
        wire = statistics.median(b for _, b in side.runs)
        print(f"  {side.name:>6}: median {wall:.2f} s, {wire / 1e6:.2f} MB on the wire")
    if len(sides) == 2:
        a, b = (statistics.median(t for t, _ in s.runs) for s in sides)
        x, y = (statistics.median(w for _, w in s.runs) for s in sides)
        print(f"  ratio before/ours: {a / b:.1f}x time, {x / y:.0f}x bytes")


if __name__ == "__main__":
    main()
