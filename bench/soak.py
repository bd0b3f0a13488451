"""Soak: three nodes under `serve` on loopback, writers on every node, one node killed a minute.

Three real `lifeline-mesh serve` processes (mutual TLS, one mesh, each with the other two as
static peers, no discovery) run for ``--minutes``. A writer per node appends a signed entry
to that node's line every ``--write-every`` seconds from this process (its own SQLite
connection, as `lifeline log` would), whether the node is up or not. Every ``--kill-every``
seconds one node in turn is SIGKILLed — its whole process group, helpers included, as a
crash would — and started again at once on the same port. RSS of each node's process group
is sampled every ``--sample-every`` seconds.

At the end the writers stop, and the script waits until every node holds every entry
written anywhere, then stops the nodes (SIGTERM) and runs `lifeline-mesh verify` and
`lifeline verify` on each. Prints figures, not pass/fail::

    .venv/bin/python bench/soak.py --minutes 10
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from lifeline.ledger import Draft, Ledger
from lifeline.plugins import load_append_hooks
from lifeline.store.sqlite import SqliteStore

NAMES = ("a", "b", "c")
CONVERGE_TIMEOUT_S = 600.0


def _cli(module: str, root: Path, *args: str, stdin: str | None = None) -> str:
    out = subprocess.run(
        [sys.executable, "-m", module, "--root", str(root), *args],
        capture_output=True,
        text=True,
        input=stdin,
        timeout=300,
        check=False,
    )
    if out.returncode not in (0, 1):
        raise SystemExit(f"{module} {' '.join(args)} failed: {out.stderr}")
    return out.stdout


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class SoakNode:
    name: str
    root: Path
    port: int
    peers: list[int]
    proc: subprocess.Popen[str] | None = None
    join: str = ""
    written: list[str] = field(default_factory=list)
    starts: int = 0
    closing: list[str] = field(default_factory=list)

    @property
    def line(self) -> Path:
        return self.root / ".lifeline" / "ledger.db"

    def start(self) -> None:
        argv = [sys.executable, "-m", "lifeline_mesh", "--root", str(self.root), "serve"]
        argv += ["--listen", f"127.0.0.1:{self.port}", "--no-discovery"]
        for port in self.peers:
            argv += ["--peer", f"127.0.0.1:{port}"]
        log = (self.root.parent / f"{self.name}.log").open("a")
        self.proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=log, text=True, start_new_session=True
        )
        assert self.proc.stdout is not None
        first = self.proc.stdout.readline()
        if not first.startswith("listening on"):
            self.proc.wait(timeout=60)
            said = Path(log.name).read_text()[-2000:]
            raise SystemExit(f"node {self.name} did not start: {first!r}; it said: {said}")
        if (self.root / ".lifeline" / "mesh" / "ca.key").exists():
            self.join = self.proc.stdout.readline().split()[-1]
        self.starts += 1

    def kill(self) -> None:
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        assert self.proc is not None
        self.proc.terminate()
        out, _ = self.proc.communicate(timeout=120)
        self.closing = [line for line in out.splitlines() if line.startswith("stopped")]

    def rss_mb(self) -> float:
        """Resident memory of the node's process group (serve and its helpers), MB."""
        if self.proc is None or self.proc.poll() is not None:
            return 0.0
        total = 0
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                stat = Path(entry.path, "stat").read_text()
                pgrp = int(stat.rsplit(")", 1)[1].split()[2])
                if pgrp != self.proc.pid:
                    continue
                for line in Path(entry.path, "status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
            except (OSError, ValueError, IndexError):
                continue
        return total / 1024


def _ids(line: Path) -> set[str]:
    conn = sqlite3.connect(f"file:{line}?mode=ro", uri=True, timeout=30)
    try:
        return {row[0] for row in conn.execute("SELECT id FROM entries")}
    finally:
        conn.close()


def _setup(base: Path) -> list[SoakNode]:
    ports = [_free_port() for _ in NAMES]
    nodes = [
        SoakNode(n, base / n, p, [q for q in ports if q != p])
        for n, p in zip(NAMES, ports, strict=True)
    ]
    for node in nodes:
        node.root.mkdir()
    first = nodes[0]
    _cli("lifeline_mesh", first.root, "init", "--new-mesh", "soak")
    _cli("lifeline", first.root, "init")
    _cli("lifeline_mesh", first.root, "share", "ledger")
    try:
        first.start()
        for node in nodes[1:]:
            token = json.loads(_cli("lifeline_mesh", first.root, "invite", "--json"))["token"]
            _cli("lifeline_mesh", node.root, "join", "-", "--peer", first.join, stdin=token + "\n")
            _cli("lifeline", node.root, "init")
            _cli("lifeline_mesh", node.root, "share", "ledger")
            node.start()
    except BaseException:
        _kill_all(nodes)  # a node that failed to start leaves none behind
        raise
    return nodes


def _kill_all(nodes: list[SoakNode]) -> None:
    for node in nodes:
        if node.proc is not None and node.proc.poll() is None:
            os.killpg(node.proc.pid, signal.SIGKILL)


async def _writer(node: SoakNode, every: float, stop: asyncio.Event) -> None:
    hooks = load_append_hooks(node.root)
    n = 0
    async with await SqliteStore.open(node.line) as store:
        ledger = Ledger(store, hooks=hooks)
        while not stop.is_set():
            n += 1
            draft = Draft(kind="note", summary=f"{node.name} {n}", body=f"soak write {n}")
            entry, _ = await ledger.append(draft)
            node.written.append(entry.id)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), every)


@dataclass
class SoakResult:
    written: dict[str, int]
    missing: dict[str, int]
    converged_s: float
    kills: list[tuple[float, str]]
    samples: list[tuple[float, list[float]]]


async def _run(args: argparse.Namespace, nodes: list[SoakNode]) -> SoakResult:
    stop = asyncio.Event()
    writers = [asyncio.create_task(_writer(n, args.write_every, stop)) for n in nodes]
    started = time.monotonic()
    end = started + args.minutes * 60
    next_kill = started + args.kill_every
    next_sample = started
    samples: list[tuple[float, list[float]]] = []
    kills: list[tuple[float, str]] = []
    while (now := time.monotonic()) < end:
        if now >= next_sample:
            samples.append((now - started, [n.rss_mb() for n in nodes]))
            next_sample += args.sample_every
        if now >= next_kill:
            victim = nodes[len(kills) % len(nodes)]
            victim.kill()
            kills.append((now - started, victim.name))
            await asyncio.to_thread(victim.start)
            next_kill += args.kill_every
        await asyncio.sleep(min(next_sample, next_kill, end) - time.monotonic())
    stop.set()
    await asyncio.gather(*writers)
    written = {i for n in nodes for i in n.written}
    converge_start = time.monotonic()
    missing = {n.name: len(written) for n in nodes}
    while time.monotonic() - converge_start < CONVERGE_TIMEOUT_S:
        missing = {n.name: len(written - _ids(n.line)) for n in nodes}
        if not any(missing.values()):
            break
        await asyncio.sleep(0.5)
    converged_s = time.monotonic() - converge_start
    samples.append((time.monotonic() - started, [n.rss_mb() for n in nodes]))
    return SoakResult({n.name: len(n.written) for n in nodes}, missing, converged_s, kills, samples)


def _report(args: argparse.Namespace, nodes: list[SoakNode], result: SoakResult) -> None:
    samples = result.samples
    victims = " ".join(name for _, name in result.kills)
    print(
        f"soak: {args.minutes:g} min, 3 nodes, mutual TLS, loopback; one SIGKILL every "
        f"{args.kill_every:g}s ({len(result.kills)} kills: {victims})"
    )
    print(f"writes: {result.written} (one every {args.write_every:g}s per node)")
    print(
        f"missing after the writers stopped: {result.missing}; "
        f"converged in {result.converged_s:.1f}s"
    )
    for node in nodes:
        node.stop()
        verify = json.loads(_cli("lifeline_mesh", node.root, "verify", "--json"))
        plain = _cli("lifeline", node.root, "verify")
        lines = verify["lines"][0]
        print(
            f"node {node.name}: {len(_ids(node.line))} entries, started {node.starts}x; "
            f"lifeline-mesh verify ok={verify['ok']} ({lines.get('signed')} signed, "
            f"{lines['failures']} failures); lifeline verify: {plain.splitlines()[0]}; "
            f"{' '.join(node.closing)}"
        )
    print("RSS of each node's process group (serve + helpers), MB:")
    print("   t(s)      a      b      c")
    for t, row in samples:
        print(f"{t:7.0f} " + " ".join(f"{v:6.1f}" for v in row))
    for i, node in enumerate(nodes):
        values = [row[i] for _, row in samples if row[i] > 0]
        if values:
            print(
                f"node {node.name}: RSS median {statistics.median(values):.1f} MB, "
                f"min {min(values):.1f}, max {max(values):.1f}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--kill-every", type=float, default=60.0, help="seconds")
    parser.add_argument("--write-every", type=float, default=0.5, help="seconds, per node")
    parser.add_argument("--sample-every", type=float, default=15.0, help="seconds")
    args = parser.parse_args()
    load = os.getloadavg()
    print(
        f"load average at start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} ({os.cpu_count()} cores)"
    )
    with tempfile.TemporaryDirectory(prefix="soak-") as tmp:
        nodes = _setup(Path(tmp))
        try:
            result = asyncio.run(_run(args, nodes))
            _report(args, nodes, result)
        finally:
            _kill_all(nodes)
    load = os.getloadavg()
    print(f"load average at end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    main()
