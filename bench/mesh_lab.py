"""The fault lab: a mesh of N real `lifeline-mesh serve` nodes under real network faults.

Each node runs in a network namespace of its own on a switch (``bench/mesh_net.py``), with
mutual TLS (one mesh, every node joined with ``invite`` / ``join``), a switch adding delay,
jitter and loss on every node's link, and a writer on every node (``bench/mesh_writer.py``).
Topologies (``--topology``):

* ``lan``   — discovery only: every node finds the others over multicast DNS;
* ``chain`` — static peers, node i knows only node i-1 (``serve --peer``);
* ``tree``  — static peers, node i knows only its parent (i-1)//2;
* ``hub``   — node 0 is a hub, every laptop knows only the hub;
* ``ci``    — a hub, laptops that know it, and CI runners (the last third) that can only
  dial out: they listen on their own loopback, so nobody can reach them.

A run: the nodes start and settle; a steady phase (``--steady`` s) measures propagation,
CPU, sockets and bytes; then one fault of each kind: a node killed (SIGKILL of its process
group) and started again on the same address ``--down`` s later; half the mesh cut off from
the other half for ``--partition`` s (the switch's trunk down), then healed; nodes whose
clocks are skewed by ±``--skew`` s (libfaketime) run throughout. Then the writers stop and
the lab waits until every node holds every write, and checks: identical sets everywhere,
nothing lost, ``lifeline-mesh verify`` clean on every node. Prints figures, and with
``--json FILE`` writes them; exit status 1 when a check failed.

    .venv/bin/python bench/mesh_lab.py --nodes 6 --topology chain
    .venv/bin/python bench/mesh_lab.py --nodes 30 --topology lan --steady 120 --partition 300
    .venv/bin/python bench/mesh_lab.py ... --baseline /path/to/other/tree  # its code, same lab

Needs root, iproute2, TUN devices and (for the skew) libfaketime; without libfaketime the
skewed nodes are left out and the report says so.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mesh_net import Net, unavailable
from mesh_nodes import LabNode, Topology, make_homes, start_writers, verify_node
from soak_probe import Arrivals, GroupCpu

POLL_S = 0.1  # how often each line is read for arrivals (per node)
SETTLE_TIMEOUT_S = 120.0


class Lab:
    def __init__(self, args: argparse.Namespace, base: Path) -> None:
        self.args = args
        self.base = base
        self.net = Net(args.nodes, args.delay_ms, args.jitter_ms, args.loss)
        self.nodes: list[LabNode] = []
        self.writers: list[subprocess.Popen[str]] = []
        self.written: dict[str, tuple[int, float]] = {}  # id -> (node index, time written)
        self.arrivals: list[Arrivals] = []
        self.events: dict[str, float] = {}
        self.heal_cpu: dict[str, float] = {}
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []

    # -- set-up -------------------------------------------------------------------------

    def start(self) -> None:
        hosts = self.net.build()
        topo = Topology(self.args.topology, hosts)
        roots = make_homes(self.base, len(hosts))
        env = dict(os.environ)
        if self.args.baseline:
            env["PYTHONPATH"] = str(self.args.baseline)
        skews = _skews(len(hosts), self.args.skew)
        self.nodes = [
            LabNode(h, roots[h.index], topo, env, skews.get(h.index, 0.0), self.args.node_log)
            for h in hosts
        ]
        with ThreadPoolExecutor(4) as pool:
            list(pool.map(LabNode.start, self.nodes))
        self.arrivals = [Arrivals(n.line) for n in self.nodes]
        self._spawn(self._poll, "poller")

    def _spawn(self, target: object, name: str) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)  # type: ignore[arg-type]
        thread.start()
        self._threads.append(thread)

    def _poll(self) -> None:
        while not self._stop.is_set():
            for probe in self.arrivals:
                try:
                    probe.poll(time.monotonic())
                except Exception:  # a line being created or locked: next round
                    continue
            self._stop.wait(POLL_S)

    def _read_writer(self, proc: subprocess.Popen[str], by_root: dict[str, int]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            item = json.loads(line)
            if "id" in item:  # timed here: a skewed writer's clocks are all skewed
                with self._lock:
                    self.written[item["id"]] = (by_root[item["root"]], time.monotonic())

    def start_writers(self) -> None:
        by_root = {str(n.root): n.host.index for n in self.nodes}
        self.writers = start_writers(self.nodes, self.args.write_every, env=self.nodes[0].env)
        for proc in self.writers:
            self._spawn(lambda p=proc: self._read_writer(p, by_root), "writer reader")

    def stop_writers(self) -> None:
        for proc in self.writers:
            if proc.stdin is not None:
                proc.stdin.close()
        for proc in self.writers:
            proc.wait(timeout=60)

    # -- measuring ----------------------------------------------------------------------

    def missing(self, upto: float | None = None) -> int:
        """(write, node) pairs not arrived yet, among writes made before ``upto``."""
        with self._lock:
            ids = [i for i, (_, t) in self.written.items() if upto is None or t <= upto]
        return sum(1 for a in self.arrivals for i in ids if i not in a.seen)

    def wait_everywhere(self, timeout: float, upto: float | None = None) -> float | None:
        """Monotonic time at which every write (made before ``upto``) was everywhere."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.missing(upto) == 0:
                return time.monotonic()
            time.sleep(0.1)
        return None

    def wait_signed(self, timeout: float) -> float | None:
        """Monotonic time at which every node held every entry's author signature."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if all(node.unsigned() == 0 for node in self.nodes):
                return time.monotonic()
            time.sleep(0.5)
        return None

    def sample(self, seconds: float) -> dict[str, list[float]]:
        """CPU (cores), sockets and bytes of every node over ``seconds`` of the run."""
        cpus = [GroupCpu() for _ in self.nodes]
        for cpu, node in zip(cpus, self.nodes, strict=True):
            cpu.sample(node.pgid)
        before = [self.net.counters(n.host) for n in self.nodes]
        mcast0 = [self.net.multicast_received(n.host) for n in self.nodes]
        opens0 = [self.net.tcp_opens(n.host) for n in self.nodes]
        with self._lock:
            writes0 = len(self.written)
        sockets: list[list[int]] = [[] for _ in self.nodes]
        started = time.monotonic()
        while time.monotonic() - started < seconds:
            time.sleep(min(10.0, max(0.0, seconds - (time.monotonic() - started))))
            for k, node in enumerate(self.nodes):
                sockets[k].append(self.net.established(node.host))
        elapsed = time.monotonic() - started
        used = [cpu.sample(n.pgid) / elapsed for cpu, n in zip(cpus, self.nodes, strict=True)]
        after = [self.net.counters(n.host) for n in self.nodes]
        mcast = [
            self.net.multicast_received(n.host) - m for n, m in zip(self.nodes, mcast0, strict=True)
        ]
        opens = [self.net.tcp_opens(n.host) - o for n, o in zip(self.nodes, opens0, strict=True)]
        with self._lock:
            writes = max(1, len(self.written) - writes0)
        return {
            "cpu": used,
            "sockets": [statistics.median(s) if s else 0 for s in sockets],
            "rx_per_write": [(a[0] - b[0]) / writes for a, b in zip(after, before, strict=True)],
            "tx_per_write": [(a[1] - b[1]) / writes for a, b in zip(after, before, strict=True)],
            "mcast_rx_per_write": [m / writes for m in mcast],
            "tcp_opens_per_write": [o / writes for o in opens],
            "writes": [float(writes)],
            "seconds": [elapsed],
        }

    def delays(self, start: float, end: float) -> tuple[list[float], list[float]]:
        """Propagation (each write to each other node) and per-hop times (static
        topologies: that delay over the hops between writer and node, 2 hops or more)."""
        topo = self.nodes[0].topo
        with self._lock:
            made = [(i, k, t) for i, (k, t) in self.written.items() if start <= t < end]
        out, hops = [], []
        for entry_id, writer, t in made:
            for k, probe in enumerate(self.arrivals):
                if k == writer or entry_id not in probe.seen:
                    continue
                delay = max(0.0, probe.seen[entry_id] - t)
                out.append(delay)
                distance = topo.hops(writer, k)
                if distance is not None and distance >= 2:
                    hops.append(delay / distance)
        return out, hops

    # -- faults -------------------------------------------------------------------------

    def kill_and_restart(self, down: float) -> float:
        """SIGKILL a middle node and start it again ``down`` s later; returns the time it
        took to listen again."""
        victim = self.nodes[len(self.nodes) // 2]
        victim.kill()
        self.events["killed"] = time.monotonic()
        time.sleep(down)
        started = time.monotonic()
        victim.start()
        self.events["restarted"] = time.monotonic()
        return time.monotonic() - started

    def partition(self, seconds: float) -> float | None:
        """Cut the mesh in two for ``seconds``; returns how long after the links came back
        every write made until then was on every node (None: not within the timeout)."""
        self.net.partition(True)
        self.events["cut"] = time.monotonic()
        print(f"partition: links cut for {seconds:g} s", file=sys.stderr, flush=True)
        time.sleep(seconds)
        cpus = [GroupCpu() for _ in self.nodes]
        for cpu, node in zip(cpus, self.nodes, strict=True):
            cpu.sample(node.pgid)
        idle0 = _machine_idle()
        switch = GroupCpu()
        switch.sample(self.net.switch_pid)
        self.net.partition(False)
        healed = time.monotonic()
        print("partition: links back", file=sys.stderr, flush=True)
        self.events["healed"] = healed
        done = self.wait_everywhere(self.args.drain, upto=healed)
        spent = time.monotonic() - healed
        used = sum(cpu.sample(n.pgid) for cpu, n in zip(cpus, self.nodes, strict=True))
        self.heal_cpu = {
            "nodes_cores": round(used / spent, 2),
            "machine_idle_cores": round((_machine_idle() - idle0) / spent, 2),
            "switch_cores": round(switch.sample(self.net.switch_pid) / spent, 2),
        }
        return None if done is None else done - healed

    def heal_profile(self) -> dict[str, object]:
        """How the heal went, from the arrival times: (write, node) pairs missing when the
        links came back, how many were still missing 1, 2, 5 and 10 s later, and when each
        node held the last of them (sorted, s after the heal)."""
        healed = self.events["healed"]
        with self._lock:
            ids = [i for i, (_, t) in self.written.items() if t <= healed]
        late: list[list[float]] = []
        for probe in self.arrivals:
            late.append([probe.seen.get(i, 1e18) - healed for i in ids])
        pairs = [d for node in late for d in node if d > 0]
        return {
            **self.heal_cpu,
            "missing_at_heal": len(pairs),
            "missing_after_s": {s: sum(1 for d in pairs if d > s) for s in (1, 2, 5, 10)},
            "node_done_s": sorted(round(max([0.0, *node]), 2) for node in late),
        }

    def close(self) -> None:
        self._stop.set()
        for proc in self.writers:
            if proc.poll() is None:
                proc.kill()
        for node in self.nodes:
            node.kill()
        self.net.close()


def _machine_idle() -> float:
    """Seconds the machine's CPUs have been idle (all of them, /proc/stat)."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()
    return (int(fields[4]) + int(fields[5])) / os.sysconf("SC_CLK_TCK")


def _skews(n: int, skew: float) -> dict[int, float]:
    """Which nodes run with a skewed clock: one ahead, one behind (not the first)."""
    if not skew or n < 4:
        return {}
    return {1: skew, n - 1: -skew}


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _run(args: argparse.Namespace, lab: Lab) -> dict[str, object]:
    report: dict[str, object] = {"nodes": args.nodes, "topology": args.topology}
    t0 = time.monotonic()
    lab.start()
    report["start_s"] = round(time.monotonic() - t0, 1)
    lab.start_writers()
    settle = time.monotonic()
    time.sleep(args.settle)
    steady = time.monotonic()
    figures = lab.sample(args.steady)
    delays, per_hop = lab.delays(steady, time.monotonic() - 5.0)
    report["steady"] = {
        "propagation_p50_s": round(_pct(delays, 0.5), 3),
        "propagation_p95_s": round(_pct(delays, 0.95), 3),
        "per_hop_median_s": round(statistics.median(per_hop), 3) if per_hop else None,
        "arrivals": len(delays),
        "cpu_cores": [round(c, 3) for c in figures["cpu"]],
        "sockets": figures["sockets"],
        "rx_bytes_per_write": [round(b) for b in figures["rx_per_write"]],
        "tx_bytes_per_write": [round(b) for b in figures["tx_per_write"]],
        "multicast_rx_bytes_per_write": [round(b) for b in figures["mcast_rx_per_write"]],
        "tcp_opens_per_write": [round(b, 3) for b in figures["tcp_opens_per_write"]],
        "writes": figures["writes"][0],
        "seconds": round(figures["seconds"][0], 1),
        "peers": [n.peer_count() for n in lab.nodes],
    }
    if args.down:
        report["restart_listen_s"] = round(lab.kill_and_restart(args.down), 2)
        back = lab.wait_everywhere(lab.args.drain, upto=lab.events["restarted"])
        report["after_restart_everywhere_s"] = (
            None if back is None else round(back - lab.events["restarted"], 2)
        )
    if args.partition:
        heal = lab.partition(args.partition)
        report["partition_s"] = args.partition
        report["heal_s"] = None if heal is None else round(heal, 2)
        report["heal_profile"] = lab.heal_profile()
    lab.stop_writers()
    done = lab.wait_everywhere(lab.args.drain)
    report["drained"] = done is not None
    # An entry can arrive before its author's signature (which then travels with a later
    # session): how long until every node held every signature too.
    signed = lab.wait_signed(lab.args.drain) if done is not None else None
    report["signed_everywhere_after_s"] = (
        None if signed is None or done is None else round(signed - done, 2)
    )
    if signed is None:  # which entries still lack their signature, where, and who wrote them
        report["unsigned_left"] = {
            str(node.host.index): [
                (i[:12], lab.written.get(i, (None, 0.0))[0]) for i in node.unsigned_ids()[:5]
            ]
            for node in lab.nodes
            if node.unsigned_ids()
        }
    report["propagation_all"] = {
        "p50_s": round(_pct(lab.delays(settle, 1e18)[0], 0.5), 3),
        "p95_s": round(_pct(lab.delays(settle, 1e18)[0], 0.95), 3),
    }
    report["checks"] = _checks(lab)
    report["skewed"] = {str(n.host.index): n.skew for n in lab.nodes if n.skew}
    report["load_average"] = round(os.getloadavg()[1], 1)  # the machine's, over 5 minutes
    return report


def _checks(lab: Lab) -> dict[str, object]:
    lab._stop.set()
    for node in lab.nodes:
        node.stop()
    written = set(lab.written)
    sets = [n.ids() for n in lab.nodes]
    held_everywhere = sets[0].intersection(*sets[1:]) if sets else set()
    lost = sorted(written - held_everywhere)
    with ThreadPoolExecutor(2) as pool:
        verified = list(pool.map(verify_node, lab.nodes))
    return {
        "writes": len(written),
        "closing": _closing(lab.nodes, len(written)),
        "identical": all(s == sets[0] for s in sets),
        "lost": len(lost),
        "verify_clean": [v for v in verified if v is not None] == [],
        "verify_failures": [v for v in verified if v is not None][:5],
    }


CLOSING = re.compile(
    r"stopped after (?P<sessions_in>\d+) sessions in .* and (?P<syncs_out>\d+) syncs out .*"
    r"took the rows of (?P<taken>\d+) changes over watches \((?P<held>\d+) more were here "
    r"already(?:, (?P<refused>\d+) refused)?"
)


def _closing(nodes: list[LabNode], writes: int) -> dict[str, float]:
    """What the nodes' closing lines say over the whole run, per node per write: sessions
    served and started, rows taken over Watch calls, copies held already, rows refused (a
    session instead). A node killed during the run said nothing of its first life."""
    total: dict[str, int] = {}
    for node in nodes:
        found = CLOSING.search(node.closing)
        for key, value in (found.groupdict() if found else {}).items():
            total[key] = total.get(key, 0) + int(value or 0)
    per = max(1, writes) * max(1, len(nodes))
    return {key: round(value / per, 3) for key, value in sorted(total.items())}


def _print(report: dict[str, object]) -> None:
    steady = report["steady"]
    assert isinstance(steady, dict)
    cpu, socks = steady["cpu_cores"], steady["sockets"]
    rx, tx = steady["rx_bytes_per_write"], steady["tx_bytes_per_write"]
    print(f"{report['topology']}, {report['nodes']} nodes (started in {report['start_s']} s)")
    print(
        f"  steady {steady['seconds']} s, {steady['writes']:.0f} writes: propagation "
        f"p50 {steady['propagation_p50_s']} s, p95 {steady['propagation_p95_s']} s, "
        f"per hop {steady['per_hop_median_s']} s"
    )
    print(
        f"  per node: CPU median {statistics.median(cpu):.3f} max {max(cpu):.3f} cores; "
        f"sockets median {statistics.median(socks):g} max {max(socks):g}; peers "
        f"max {max(steady['peers'])}; bytes per write rx median {statistics.median(rx):.0f} "
        f"max {max(rx)}, tx median {statistics.median(tx):.0f} max {max(tx)}; of rx, multicast "
        f"(mDNS) median {statistics.median(steady['multicast_rx_bytes_per_write']):.0f}; "
        f"TCP connections opened per write median "
        f"{statistics.median(steady['tcp_opens_per_write']):.3f}"
    )
    for key in (
        "restart_listen_s",
        "after_restart_everywhere_s",
        "heal_s",
        "heal_profile",
        "signed_everywhere_after_s",
    ):
        if key in report:
            print(f"  {key}: {report[key]}")
    print(f"  whole run: {report['propagation_all']}; skewed clocks: {report['skewed']}")
    print(f"  load average (5 min): {report['load_average']}")
    print(f"  checks: {report['checks']}")


def _ok(report: dict[str, object]) -> bool:
    checks = report["checks"]
    assert isinstance(checks, dict)
    return bool(
        report["drained"] and checks["identical"] and not checks["lost"] and checks["verify_clean"]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=6)
    parser.add_argument("--topology", choices=Topology.KINDS, default="chain")
    parser.add_argument("--delay-ms", type=float, default=50.0, help="one way, per packet")
    parser.add_argument("--jitter-ms", type=float, default=20.0)
    parser.add_argument("--loss", type=float, default=1.0, help="percent of packets")
    parser.add_argument("--write-every", type=float, default=None, help="s per node (N/2)")
    parser.add_argument("--settle", type=float, default=10.0)
    parser.add_argument("--steady", type=float, default=40.0)
    parser.add_argument("--down", type=float, default=5.0, help="0: no kill")
    parser.add_argument("--partition", type=float, default=20.0, help="0: no partition")
    parser.add_argument("--skew", type=float, default=120.0, help="s; 0: no skewed clocks")
    parser.add_argument("--baseline", type=Path, help="run the nodes from this source tree")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--keep", type=Path, help="make the homes and logs here, keep them")
    parser.add_argument(
        "--node-log", choices=("text", "json"), default="text", help="json: sessions logged too"
    )
    parser.add_argument("--drain", type=float, default=90.0, help="s to wait for convergence")
    args = parser.parse_args()
    if args.write_every is None:
        args.write_every = max(2.0, args.nodes / 2)
    reason = unavailable()
    if reason:
        raise SystemExit(f"the fault lab cannot run here: {reason}")
    with tempfile.TemporaryDirectory(prefix="mesh-lab-") as tmp:
        base = Path(tmp)
        if args.keep:
            args.keep.mkdir(parents=True, exist_ok=True)
            base = args.keep
        lab = Lab(args, base)
        previous = signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
        try:
            report = _run(args, lab)
        finally:
            lab.close()
            signal.signal(signal.SIGTERM, previous)
    _print(report)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    sys.exit(0 if _ok(report) else 1)


if __name__ == "__main__":
    main()
