"""The fault lab's nodes: homes joined to one mesh, `serve` per topology, writers, verify.

Homes are made with the real commands (``init --new-mesh`` on node 0, then ``invite`` and
``join`` through node 0's ``membership-serve`` on loopback, ``lifeline init``, ``share``).
Each node's ``serve`` runs in its own namespace, its process group its own (a kill takes
its helpers too), started again on the same address after a kill. A node with a skewed
clock runs under libfaketime (``FAKETIME``), its writer too; the lab times writes when it
reads them from the writers, not by the writers' clocks.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # bench/ is on the path when the lab runs; tests read FAKETIME_LIB alone
    from mesh_net import NodeHost

__all__ = ["FAKETIME_LIB", "LabNode", "Topology", "make_homes", "start_writers", "verify_node"]

FAKETIME_LIB = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1")
WRITER = Path(__file__).resolve().parent / "mesh_writer.py"


def _cli(module: str, root: Path, *args: str, stdin: str | None = None) -> str:
    out = subprocess.run(
        [sys.executable, "-m", module, "--root", str(root), *args],
        capture_output=True,
        text=True,
        input=stdin,
        timeout=300,
        check=False,
    )
    if out.returncode != 0:
        raise SystemExit(f"{module} {' '.join(args)} failed: {out.stderr.strip()}")
    return out.stdout


def make_homes(base: Path, n: int) -> list[Path]:
    """``n`` project roots in one mesh, each sharing ``ledger``."""
    roots = [base / f"n{i:02d}" for i in range(n)]
    for root in roots:
        root.mkdir()
    ca = roots[0]
    _cli("lifeline_mesh", ca, "init", "--new-mesh", "lab")
    argv = [sys.executable, "-m", "lifeline_mesh", "--root", str(ca), "membership-serve"]
    proc = subprocess.Popen(
        [*argv, "--listen", "127.0.0.1:0", "--mtls-listen", "127.0.0.1:0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        port = json.loads(proc.stdout.readline())["join_port"]
        tokens = [json.loads(_cli("lifeline_mesh", ca, "invite", "--json"))["token"] for _ in roots]

        def join(k: int) -> None:
            if k:
                _cli("lifeline_mesh", roots[k], "join", "-", "--peer", f"127.0.0.1:{port}",
                     stdin=tokens[k] + "\n")  # fmt: skip
            _cli("lifeline", roots[k], "init")
            _cli("lifeline_mesh", roots[k], "share", "ledger")

        with ThreadPoolExecutor(3) as pool:
            list(pool.map(join, range(n)))
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
    return roots


class Topology:
    KINDS = ("lan", "chain", "tree", "hub", "ci")

    def __init__(self, kind: str, hosts: list[NodeHost]) -> None:
        self.kind = kind
        self.hosts = hosts

    def runner(self, i: int) -> bool:
        """A CI runner: it can only dial out (the last third of a ``ci`` mesh)."""
        return self.kind == "ci" and i >= len(self.hosts) - len(self.hosts) // 3

    def parent(self, i: int) -> int | None:
        if i == 0 or self.kind == "lan":
            return None
        return {"chain": i - 1, "tree": (i - 1) // 2}.get(self.kind, 0)

    def serve_args(self, i: int) -> list[str]:
        host = self.hosts[i]
        if self.kind == "lan":
            return ["--listen", host.sync_address, "--interface", host.address]
        listen = "127.0.0.1:7420" if self.runner(i) else host.sync_address
        args = ["--listen", listen, "--no-discovery"]
        parent = self.parent(i)
        if parent is not None:
            args += ["--peer", self.hosts[parent].sync_address]
        return args

    def _path(self, i: int) -> list[int]:
        path = [i]
        while (p := self.parent(path[-1])) is not None:
            path.append(p)
        return path

    def hops(self, a: int, b: int) -> int | None:
        """Links between ``a`` and ``b`` in a static topology (None on a LAN)."""
        if self.kind == "lan":
            return None
        pa, pb = self._path(a), self._path(b)
        common = next(x for x in pa if x in pb)
        return pa.index(common) + pb.index(common)


def skew_env(env: dict[str, str], skew: float) -> dict[str, str]:
    if not skew or not FAKETIME_LIB.exists():
        return env
    # Every clock is skewed, the monotonic one too: with FAKETIME_DONT_FAKE_MONOTONIC,
    # libfaketime 0.9.10 makes clock_nanosleep fail (time.sleep raises EINVAL).
    return env | {"LD_PRELOAD": str(FAKETIME_LIB), "FAKETIME": f"{skew:+.0f}s"}


@dataclass
class LabNode:
    host: NodeHost
    root: Path
    topo: Topology
    env: dict[str, str] = field(default_factory=dict)
    skew: float = 0.0
    log_format: str = "text"  # json: sessions logged too
    proc: subprocess.Popen[str] | None = None
    closing: str = ""  # its closing line (sessions, rows taken, held, refused), once stopped

    @property
    def line(self) -> Path:
        return self.root / ".lifeline" / "ledger.db"

    @property
    def pgid(self) -> int | None:
        if self.proc is None or self.proc.poll() is not None:
            return None
        return self.proc.pid

    def start(self) -> None:
        argv = [sys.executable, "-m", "lifeline_mesh", "--root", str(self.root), "serve"]
        argv += self.topo.serve_args(self.host.index)
        if self.log_format != "text":  # sessions are logged with metrics on
            argv += ["--log-format", self.log_format, "--metrics-listen", "127.0.0.1:0"]
        log = (self.root.parent / f"n{self.host.index:02d}.log").open("a")
        self.proc = subprocess.Popen(
            self.host.wrap(argv),
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            start_new_session=True,
            env=skew_env(self.env, self.skew),
            cwd=self.root,  # not the source tree: `python -m` puts the cwd first on the path
        )
        assert self.proc.stdout is not None
        first = self.proc.stdout.readline()
        if not first.startswith("listening on"):
            self.proc.wait(timeout=60)
            said = Path(log.name).read_text()[-2000:]
            raise SystemExit(f"node {self.host.index} did not start: {first!r}; it said: {said}")

    def kill(self) -> None:
        if self.pgid is not None:
            os.killpg(self.pgid, signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait(timeout=60)

    def stop(self) -> None:
        if self.pgid is None:
            return
        assert self.proc is not None
        self.proc.terminate()
        try:
            out, _ = self.proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            self.kill()
            return
        self.closing = next((x for x in out.splitlines() if x.startswith("stopped after")), "")
        with (self.root.parent / f"n{self.host.index:02d}.log").open("a") as log:
            log.write(self.closing + "\n")

    def peer_count(self) -> int:
        try:
            data = json.loads((self.root / ".lifeline" / "mesh" / "peers.json").read_text())
        except (OSError, ValueError):
            return 0
        return len(data.get("peers", []))

    def unsigned(self) -> int:
        """Entries held here without their author's signature (yet)."""
        return len(self.unsigned_ids())

    def unsigned_ids(self) -> list[str]:
        """The ids of the entries held here without their author's signature (yet)."""
        conn = sqlite3.connect(f"file:{self.line}?mode=ro", uri=True, timeout=30)
        try:
            sql = (
                "SELECT id FROM entries e WHERE NOT EXISTS (SELECT 1 FROM attestations a"
                " WHERE a.subject = e.id AND a.role = 'author')"
            )
            return [i for (i,) in conn.execute(sql)]
        finally:
            conn.close()

    def ids(self) -> set[str]:
        conn = sqlite3.connect(f"file:{self.line}?mode=ro", uri=True, timeout=30)
        try:
            return {row[0] for row in conn.execute("SELECT id FROM entries")}
        finally:
            conn.close()


def start_writers(
    nodes: list[LabNode], every: float, *, env: dict[str, str]
) -> list[subprocess.Popen[str]]:
    """One writer process per clock (the skewed nodes' writers share their skew)."""
    groups: dict[float, list[LabNode]] = {}
    for node in nodes:
        groups.setdefault(node.skew, []).append(node)
    procs = []
    for skew, members in groups.items():
        argv = [sys.executable, str(WRITER), "--every", str(every)]
        procs.append(
            subprocess.Popen(
                argv + [str(n.root) for n in members],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                env=skew_env(env, skew),
                cwd=members[0].root,
            )
        )
    return procs


def verify_node(node: LabNode) -> str | None:
    """None when ``lifeline-mesh verify`` is clean on the node, else what it reported."""
    out = subprocess.run(
        [sys.executable, "-m", "lifeline_mesh", "--root", str(node.root), "verify", "--json"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if out.returncode == 0:
        return None
    try:
        data = json.loads(out.stdout)
    except ValueError:
        return f"node {node.host.index}: {out.stderr.strip()[-300:]}"
    # the failing findings first (the notes around them can fill any excerpt), then the rest
    findings = [f for line in data.get("lines", []) for f in line.get("findings", [])]
    failing = [f for f in findings if f.get("severity") != "note"]
    shown = {"failing": failing[:5], "notes": [f for f in findings if f not in failing][:3]}
    return f"node {node.host.index}: {json.dumps(shown)[:2400]}"
