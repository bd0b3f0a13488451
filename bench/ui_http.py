"""bench/ui.py's HTTP mode: the real `lifeline-mesh ui` server as a subprocess, timed over
loopback, optionally side by side with a server run from an earlier source tree."""

from __future__ import annotations

import http.client
import os
import re
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

Case = tuple[str, Callable[[], tuple[str, str]]]


class Served:
    """One `lifeline-mesh --root ROOT ui --listen 127.0.0.1:0` process and a kept-alive
    connection to it. ``src``: run that source tree instead of this one."""

    def __init__(self, label: str, root: Path, src: Path | None = None) -> None:
        self.label = label
        env = dict(os.environ)
        if src is not None:
            env["PYTHONPATH"] = str(src)
        cmd = [sys.executable, "-m", "lifeline_mesh", "--root", str(root), "ui"]
        self.proc = subprocess.Popen(
            [*cmd, "--listen", "127.0.0.1:0"],
            cwd=src or REPO,
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        first = self.proc.stdout.readline()
        found = re.search(r"http://([\d.]+):(\d+)/", first)
        if found is None:
            self.proc.kill()
            raise SystemExit(f"{label}: the viewer printed {first!r}, not its address")
        self.conn = http.client.HTTPConnection(found[1], int(found[2]), timeout=300)

    def timed(self, path: str, query: str = "") -> tuple[float, float]:
        """(server time, round trip) in seconds: the server's own figure (its
        ``Server-Timing`` header: from the request's arrival to the response's start) and
        the time from sending the request to reading the whole body."""
        took, _body, server = self._get(path, query)
        return server, took

    def get(self, path: str, query: str = "") -> tuple[float, str]:
        """Seconds from sending the request to reading the whole body, and the body."""
        took, body, _server = self._get(path, query)
        return took, body

    def _get(self, path: str, query: str) -> tuple[float, str, float]:
        for attempt in (1, 2):
            start = time.perf_counter()
            try:
                self.conn.request("GET", path + (f"?{query}" if query else ""))
                response = self.conn.getresponse()
                body = response.read()
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                self.conn.close()  # uvicorn closes a connection idle for 5 s: open another
                if attempt == 2:
                    raise
                continue
            took = time.perf_counter() - start
            break
        if response.status not in (200, 307):  # 307: the home page sends to a line
            raise SystemExit(f"{self.label}: {path}?{query} answered {response.status}")
        found = re.search(r"app;dur=([\d.]+)", response.getheader("server-timing") or "")
        if found is None:
            raise SystemExit(f"{self.label}: no Server-Timing header (an older viewer?)")
        return took, body.decode(), float(found[1]) / 1000

    def wait_until(self, path: str, busy: str, limit: float = 600.0) -> float:
        """Poll ``path`` until its page no longer holds ``busy``; seconds waited."""
        start = time.perf_counter()
        while busy in self.get(path)[1]:
            if time.perf_counter() - start > limit:
                raise SystemExit(f"{self.label}: {path} still says {busy!r} after {limit:.0f} s")
            time.sleep(0.5)
        return time.perf_counter() - start

    def memory(self) -> str:
        """The server's resident memory now and at its peak (VmRSS, VmHWM), in MB."""
        try:
            status = Path(f"/proc/{self.proc.pid}/status").read_text()
        except OSError:
            return "memory unknown"
        kb = dict(re.findall(r"^(VmRSS|VmHWM):\s+(\d+) kB", status, re.M))
        return f"RSS {int(kb['VmRSS']) / 1024:.0f} MB, peak {int(kb['VmHWM']) / 1024:.0f} MB"

    def close(self) -> None:
        print(f"{self.label}: {self.memory()}", flush=True)
        self.conn.close()
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def table(servers: list[Served], cases: list[Case], repeat: int) -> None:
    """Median and worst server time of each case on each server, and the median round trip;
    requests alternate between the servers."""
    head = f"{'page':<34}"
    for s in servers:
        head += f" {s.label + ' median':>15} {'worst':>8} {'http':>7}"
    if len(servers) == 2:
        head += f" {'ratio':>6}"
    print(head + f"   (ms; server time, {repeat} requests; http: median round trip)")
    for name, make in cases:
        server: list[list[float]] = [[] for _ in servers]
        trip: list[list[float]] = [[] for _ in servers]
        for k in range(repeat):
            path, query = make()
            order = list(range(len(servers)))
            if k % 2:
                order.reverse()
            for i in order:
                took, whole = servers[i].timed(path, query)
                server[i].append(took * 1000)
                trip[i].append(whole * 1000)
        medians = [statistics.median(t) for t in server]
        row = f"{name:<34}"
        for m, t, r in zip(medians, server, trip, strict=True):
            row += f" {m:>15.1f} {max(t):>8.1f} {statistics.median(r):>7.1f}"
        if len(servers) == 2:
            row += f" {medians[1] / medians[0]:>6.2f}"
        print(row, flush=True)


def start(root: Path, before: Path | None) -> list[Served]:
    servers = [Served("before", root, before)] if before is not None else []
    return [*servers, Served("after" if before is not None else "server", root)]


def read_through(root: Path) -> None:
    """Read the project's SQLite files once, so the timed pages find them in the page cache
    (``--warm``: the figures of a machine whose cache holds the line)."""
    start, size = time.perf_counter(), 0
    for path in sorted((root / ".lifeline").glob("*.db*")):
        with path.open("rb") as f:
            while chunk := f.read(1 << 20):
                size += len(chunk)
    took = time.perf_counter() - start
    print(f"read {size / 1e6:.0f} MB of SQLite files into the page cache in {took:.1f} s")


def ledger(
    root: Path,
    line: str,
    entry: str,
    cases: list[Case],
    repeat: int,
    before: Path | None,
    *,
    warm: bool = False,
) -> None:
    servers = start(root, before)
    try:
        for s in servers:
            took, _ = s.get(line + "/")
            waited = s.wait_until(f"{line}/entries/{entry}", "not computed yet")
            waited += s.wait_until(f"{line}/entries/{entry}", "being read again")
            waited += s.wait_until("/mesh", "An audit is running")
            print(
                f"{s.label}: truth, first request {took * 1000:.0f} ms; witnessed times and "
                f"the audit ready after {waited:.1f} s more"
            )
        for s in servers:  # one server's caches may have set another's passes going again
            s.wait_until(f"{line}/entries/{entry}", "being read again")
            s.wait_until("/mesh", "An audit is running")
        if warm:
            read_through(root)
        table(servers, cases, repeat)
    finally:
        for s in servers:
            s.close()


def sessions(root: Path, cases: list[Case], repeat: int, before: Path | None) -> None:
    servers = start(root, before)
    try:
        for s in servers:
            took, _ = s.get("/sessions")
            waited = s.wait_until("/lines/sessions/unfinished", 'id="not-yet"')
            print(
                f"{s.label}: list, first request {took * 1000:.0f} ms; "
                f"unfinished found after {waited:.1f} s more"
            )
        table(servers, cases, repeat)
    finally:
        for s in servers:
            s.close()
