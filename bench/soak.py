"""Soak: three nodes under `serve` on loopback, writers on every node, one node killed a minute.

Three real `lifeline-mesh serve` processes (mutual TLS, one mesh, each with the other two as
static peers, no discovery) run for ``--minutes``. With ``--prefill N`` the line starts with
N signed entries: built once on the first node (batched appends through the ledger with the
notary's hook, as bench/steady_state.py does) and copied to the other two before any node
serves, so the run starts from three equal 100k lines rather than a sync storm. A writer
per node appends a signed entry to that node's line every ``--write-every`` seconds from
this process (its own SQLite connection, as `lifeline log` would), whether the node is up
or not. Every ``--kill-every`` seconds one node in turn is SIGKILLed — its whole process
group, helpers included, as a crash would — and started again at once on the same port.

Every ``--sample-every`` seconds, per node: CPU used by its process group (serve and
helpers) over the interval, in cores (and of that, in the kernel), and its minor page
faults; RSS of the group; the size of the line's WAL file; entries, attestations and
statements on the line. Every 0.25 s each line is polled for new
rows, which gives each write's arrival on every other node (propagation). At the end the
writers stop, and the script waits until every node holds every entry written anywhere,
then stops the nodes (SIGTERM) and runs `lifeline-mesh verify` and `lifeline verify` on
each. Prints figures, not pass/fail (``--json FILE`` also writes the samples)::

    .venv/bin/python bench/soak.py --minutes 10
    .venv/bin/python bench/soak.py --minutes 30 --prefill 100000 --write-every 2
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from soak_probe import Arrivals, GroupCpu, counts, group_rss_mb, wal_mb

from lifeline.errors import StoreError
from lifeline.home import Home
from lifeline.ledger import Draft, Ledger
from lifeline.plugins import load_append_hooks
from lifeline.store.sqlite import SqliteStore
from lifeline_mesh.home.inbound import load_inbound
from lifeline_mesh.home.node_home import NodeHome

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
    written: list[tuple[str, float]] = field(default_factory=list)  # (id, t)
    locked: int = 0  # writes that found the line locked past the busy timeout (retried)
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

    @property
    def pgid(self) -> int | None:
        """The node's process group (serve leads it), None while it is down."""
        if self.proc is None or self.proc.poll() is not None:
            return None
        return self.proc.pid


def _ids(line: Path) -> set[str]:
    conn = sqlite3.connect(f"file:{line}?mode=ro", uri=True, timeout=30)
    try:
        return {row[0] for row in conn.execute("SELECT id FROM entries")}
    finally:
        conn.close()


async def _prefill(root: Path, line: Path, n: int) -> None:
    """``n`` signed entries on ``line``, written in batches through the notary's hook."""
    async with await SqliteStore.open(line) as store:
        ledger = Ledger(store, hooks=load_append_hooks(Home(root)))
        for start in range(0, n, 1000):
            await ledger.append_many([
                Draft(kind="note", summary=f"prefill {k}", body=f"{k} " + "lorem ipsum " * 30)
                for k in range(start, min(n, start + 1000))
            ])  # fmt: skip


def _copy_line(src: Path, dst: Path) -> None:
    """A consistent copy of a line (SQLite's backup), replacing ``dst`` and its sidecars."""
    for leftover in (dst, dst.with_name(dst.name + "-wal"), dst.with_name(dst.name + "-shm")):
        leftover.unlink(missing_ok=True)
    with (
        contextlib.closing(sqlite3.connect(src)) as a,
        contextlib.closing(sqlite3.connect(dst)) as b,
    ):
        a.backup(b)
        b.execute("PRAGMA journal_mode = WAL")


def _setup(base: Path, prefill: int) -> list[SoakNode]:
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
    template = base / "prefill.db"
    if prefill:
        started = time.monotonic()
        asyncio.run(_prefill(first.root, first.line, prefill))
        _copy_line(first.line, template)
        print(f"prefilled {prefill:,} signed entries in {time.monotonic() - started:.0f}s")
    try:
        first.start()
        for node in nodes[1:]:
            token = json.loads(_cli("lifeline_mesh", first.root, "invite", "--json"))["token"]
            _cli("lifeline_mesh", node.root, "join", "-", "--peer", first.join, stdin=token + "\n")
            _cli("lifeline", node.root, "init")
            _cli("lifeline_mesh", node.root, "share", "ledger")
            if prefill:
                _copy_line(template, node.line)
            node.start()
    except BaseException:
        _kill_all(nodes)  # a node that failed to start leaves none behind
        raise
    template.unlink(missing_ok=True)
    return nodes


def _kill_all(nodes: list[SoakNode]) -> None:
    for node in nodes:
        if node.proc is not None and node.proc.poll() is None:
            os.killpg(node.proc.pid, signal.SIGKILL)


async def _writer(node: SoakNode, every: float, stop: asyncio.Event) -> None:
    hooks = load_append_hooks(Home(node.root))
    n = 0
    async with await SqliteStore.open(node.line) as store:
        ledger = Ledger(store, hooks=hooks)
        while not stop.is_set():
            n += 1
            draft = Draft(kind="note", summary=f"{node.name} {n}", body=f"soak write {n}")
            try:
                entry, _ = await ledger.append(draft)
            except StoreError as exc:  # the line stayed locked past the busy timeout
                if "locked" not in str(exc):  # (a machine at many times its capacity)
                    raise
                node.locked += 1
                continue  # the write was not made: try again at once
            node.written.append((entry.id, time.monotonic()))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), every)


@dataclass
class Sample:
    t: float
    cpu: list[float]  # cores over the interval before t
    kernel: list[float]  # of which in the kernel, cores
    faults: list[float]  # minor page faults a second over the interval
    rss: list[float]  # MB
    wal: list[float]  # MB
    rows: list[tuple[int, int, int, float]]  # entries, attestations, statements, db MB


@dataclass
class SoakResult:
    written: dict[str, int]
    missing: dict[str, int]
    converged_s: float
    kills: list[tuple[float, str, float]]  # (t killed, node, t listening again)
    samples: list[Sample]
    delays: list[float]  # seconds from a write to its arrival on each other node
    late: list[tuple[float, str, str, float]]  # (t written, from, to, delay) over 2 s


class _Probe:
    def __init__(self, nodes: list[SoakNode], started: float) -> None:
        self.nodes = nodes
        self.started = started
        self.cpus = [GroupCpu() for _ in nodes]
        self.last = started
        self.arrivals = [Arrivals(n.line) for n in nodes]
        for arrivals in self.arrivals:
            arrivals.start_after_existing()

    def sample(self) -> Sample:
        now = time.monotonic()
        span = max(now - self.last, 1e-6)
        self.last = now
        cpu = [c.sample(n.pgid) / span for c, n in zip(self.cpus, self.nodes, strict=True)]
        return Sample(
            t=now - self.started,
            cpu=cpu,
            kernel=[c.system / span for c in self.cpus],
            faults=[c.faults / span for c in self.cpus],
            rss=[group_rss_mb(n.pgid) for n in self.nodes],
            wal=[wal_mb(n.line) for n in self.nodes],
            rows=[counts(n.line) for n in self.nodes],
        )

    def poll(self) -> None:
        now = time.monotonic()
        for arrivals in self.arrivals:
            arrivals.poll(now)

    def delays(self) -> tuple[list[float], list[tuple[float, str, str, float]]]:
        delays: list[float] = []
        late: list[tuple[float, str, str, float]] = []
        for i, src in enumerate(self.nodes):
            for entry_id, t in src.written:
                for j, dst in enumerate(self.nodes):
                    if i == j:
                        continue
                    seen = self.arrivals[j].seen.get(entry_id)
                    delay = (seen - t) if seen is not None else float("inf")
                    delays.append(max(delay, 0.0))
                    if delay > 2.0:
                        late.append((t - self.started, src.name, dst.name, delay))
        return delays, late


async def _poller(probe: _Probe, stop: asyncio.Event) -> None:
    while not stop.is_set():
        await asyncio.to_thread(probe.poll)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 0.25)


async def _run(args: argparse.Namespace, nodes: list[SoakNode]) -> SoakResult:
    stop = asyncio.Event()
    started = time.monotonic()
    probe = _Probe(nodes, started)
    polling = asyncio.Event()
    poller = asyncio.create_task(_poller(probe, polling))
    writers = [asyncio.create_task(_writer(n, args.write_every, stop)) for n in nodes]
    end = started + args.minutes * 60
    next_kill = started + args.kill_every
    next_sample = started + args.sample_every
    samples: list[Sample] = []
    kills: list[tuple[float, str, float]] = []
    while (now := time.monotonic()) < end:
        if now >= next_sample:
            samples.append(await asyncio.to_thread(probe.sample))
            _print_sample(samples[-1])
            next_sample += args.sample_every
        if now >= next_kill and args.kill_every > 0:
            victim = nodes[len(kills) % len(nodes)]
            victim.kill()
            await asyncio.to_thread(victim.start)
            kills.append((now - started, victim.name, time.monotonic() - started))
            next_kill += args.kill_every
        wake = min(next_sample, next_kill if args.kill_every > 0 else end, end)
        await asyncio.sleep(max(0.0, wake - time.monotonic()))
    stop.set()
    await asyncio.gather(*writers)
    written = {i for n in nodes for i, _t in n.written}
    converge_start = time.monotonic()
    missing = {n.name: len(written) for n in nodes}
    while time.monotonic() - converge_start < CONVERGE_TIMEOUT_S:
        missing = {n.name: len(written - _ids(n.line)) for n in nodes}
        if not any(missing.values()):
            break
        await asyncio.sleep(0.5)
    converged_s = time.monotonic() - converge_start
    await asyncio.sleep(0.5)
    polling.set()
    await poller
    probe.poll()
    samples.append(probe.sample())
    delays, late = probe.delays()
    return SoakResult(
        {n.name: len(n.written) for n in nodes},
        missing,
        converged_s,
        kills,
        samples,
        delays,
        late,
    )


def _print_sample(s: Sample) -> None:
    cells = [
        f"{c:5.3f}c {r:5.0f}MB wal {w:5.1f}MB att/e {(a + st) / max(e, 1):4.2f}"
        for c, r, w, (e, a, st, _db) in zip(s.cpu, s.rss, s.wal, s.rows, strict=True)
    ]
    print(f"t={s.t:6.0f}s  " + " | ".join(cells), flush=True)


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def _report(args: argparse.Namespace, nodes: list[SoakNode], result: SoakResult) -> dict:
    samples = result.samples
    victims = " ".join(name for _, name, _ in result.kills)
    print(
        f"soak: {args.minutes:g} min, 3 nodes, mutual TLS, loopback; prefill {args.prefill:,}; "
        f"one SIGKILL every {args.kill_every:g}s ({len(result.kills)} kills: {victims})"
    )
    print(f"writes: {result.written} (one every {args.write_every:g}s per node)")
    locked = {n.name: n.locked for n in nodes if n.locked}
    if locked:
        print(f"writes retried after the line stayed locked past the busy timeout: {locked}")
    print(
        f"missing after the writers stopped: {result.missing}; "
        f"converged in {result.converged_s:.1f}s"
    )
    d = result.delays
    print(
        f"propagation (write -> present on another node, {len(d)} arrivals, polled every "
        f"0.25 s): median {statistics.median(d):.2f}s, p95 {_pct(d, 0.95):.2f}s, "
        f"p99 {_pct(d, 0.99):.2f}s, max {max(d):.2f}s; {len(result.late)} over 2 s"
    )
    kill_times = [t for t, _, _ in result.kills]
    near_kill = [x for x in result.late if any(0 <= x[0] - k < 15 for k in kill_times)]
    print(f"  of those over 2 s, written within 15 s after a kill: {len(near_kill)}")
    if result.kills:
        down = [back - t for t, _, back in result.kills]
        # A late arrival to or from the node restarted, landing within 3 s after it listened
        # again: it waited for the restart, not for a peer's back-off.
        waited = [
            x
            for x in result.late
            for t, name, back in result.kills
            if name in x[1:3] and t <= x[0] + x[3] and x[0] + x[3] - back < 3.0
        ]
        print(
            f"  restart (SIGKILL to listening again): median {statistics.median(down):.1f}s, "
            f"max {max(down):.1f}s; late arrivals to or from the restarted node landing within "
            f"3 s after it listened: {len(waited)}"
        )
    verifies = []
    served = []
    for node in nodes:
        node.stop()
        served.append(sum(int(r.get("sessions") or 0) for r in load_inbound(NodeHome(node.root))))
        verify = json.loads(_cli("lifeline_mesh", node.root, "verify", "--json"))
        plain = _cli("lifeline", node.root, "verify")
        lines = verify["lines"][0]
        verifies.append({"ok": verify["ok"], "failures": lines["failures"]})
        print(
            f"node {node.name}: {len(_ids(node.line))} entries, started {node.starts}x; "
            f"lifeline-mesh verify ok={verify['ok']} ({lines.get('signed')} signed, "
            f"{lines['failures']} failures); lifeline verify: {plain.splitlines()[0]}; "
            f"{' '.join(node.closing)}"
        )
    print(
        f"sessions served: {' '.join(f'{n.name} {c}' for n, c in zip(nodes, served, strict=True))}"
        f" ({sum(served) / max(sum(result.written.values()), 1):.2f} per write)"
    )
    print("per sample: CPU (cores), RSS (MB), WAL (MB), (attestations+statements)/entries")
    print("   t(s) | " + " | ".join(f"{n.name}: cpu    rss   wal  att/e" for n in nodes))
    for s in samples:
        row = " | ".join(
            f"{c:8.3f} {r:6.1f} {w:5.1f} {(a + st) / max(e, 1):5.3f}"
            for c, r, w, (e, a, st, _db) in zip(s.cpu, s.rss, s.wal, s.rows, strict=True)
        )
        print(f"{s.t:7.0f} | {row}")
    for i, node in enumerate(nodes):
        cpu = [s.cpu[i] for s in samples]
        rss = [s.rss[i] for s in samples if s.rss[i] > 0]
        half = len(cpu) // 2
        e, a, st, db = samples[-1].rows[i]
        faults = statistics.median(s.faults[i] for s in samples)
        kernel = statistics.median(s.kernel[i] for s in samples)
        print(
            f"node {node.name}: CPU median {statistics.median(cpu):.3f} cores "
            f"(first half {statistics.median(cpu[:half] or cpu):.3f}, second half "
            f"{statistics.median(cpu[half:]):.3f}, max {max(cpu):.3f}; in the kernel "
            f"{kernel:.3f}), minor page faults median {faults:,.0f}/s; RSS median "
            f"{statistics.median(rss):.1f} MB, min {min(rss):.1f}, max {max(rss):.1f}; WAL max "
            f"{max(s.wal[i] for s in samples):.1f} MB; at the end {e} entries, {a} "
            f"attestations, {st} statements ({(a + st) / max(e, 1):.3f} per entry), "
            f"database {db:.1f} MB"
        )
    return {
        "args": vars(args),
        "written": result.written,
        "missing": result.missing,
        "converged_s": result.converged_s,
        "kills": result.kills,
        "propagation": {
            "n": len(d),
            "median": statistics.median(d),
            "p95": _pct(d, 0.95),
            "p99": _pct(d, 0.99),
            "max": max(d),
            "late": result.late,
        },
        "verify": verifies,
        "sessions_served": served,
        "samples": [vars(s) for s in samples],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--kill-every", type=float, default=60.0, help="seconds (0: never)")
    parser.add_argument("--write-every", type=float, default=0.5, help="seconds, per node")
    parser.add_argument("--sample-every", type=float, default=30.0, help="seconds")
    parser.add_argument("--prefill", type=int, default=0, help="signed entries to start with")
    parser.add_argument("--json", type=Path, help="also write the figures and samples here")
    args = parser.parse_args()
    load = os.getloadavg()
    print(
        f"load average at start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} "
        f"({os.cpu_count()} cores)",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="soak-") as tmp:
        nodes = _setup(Path(tmp), args.prefill)
        try:
            result = asyncio.run(_run(args, nodes))
            figures = _report(args, nodes, result)
        finally:
            _kill_all(nodes)
    load = os.getloadavg()
    print(f"load average at end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    if args.json:
        figures["load"] = list(load)
        args.json.write_text(json.dumps(figures, default=str, indent=1))


if __name__ == "__main__":
    main()
