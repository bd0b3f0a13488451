"""What a running node tells Prometheus: ``serve --metrics-listen HOST:PORT`` (decision 0055).

:class:`NodeMetrics` counts as things happen (sessions by peer, direction and outcome, entries
and bytes each way, refusals by reason, session and in-sync latency) and reads the rest only
when scraped, cheaply: rows over watches and peers up from what the node holds in memory, the
store and WAL sizes from ``stat``, RSS from ``/proc/self/statm``, a hub's database pool from
asyncpg's counters. No scrape reads a store.

:class:`MetricsServer` serves ``/metrics``, ``/healthz`` (the process answers) and ``/readyz``
(store open, listening, certificates loaded: 503 with what is missing until then) with
asyncio, on the node's event loop: a request is a few lines read with a deadline, never a
thread of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import resource
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector

from lifeline.errors import ConfigError, LifelineError
from lifeline.wording import count
from lifeline_mesh.node.observer import OnSession, SyncPeer
from lifeline_mesh.node.security import peer_node_id
from lifeline_mesh.peering.table import PeerState
from lifeline_mesh.sync.driver import SyncReport
from lifeline_mesh.transport.addresses import is_loopback, split_address
from lifeline_mesh.transport.authz import PeerIdentity
from lifeline_mesh.transport.http_guard import host_allowed

if TYPE_CHECKING:
    from lifeline_mesh.node.root import Node

__all__ = ["MetricsServer", "NodeMetrics", "Readiness", "metrics_beside", "readiness_of"]

log = logging.getLogger(__name__)

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)
REQUEST_DEADLINE_S = 5.0  # a scraper that sends no request in this long is dropped
MAX_REQUEST_BYTES = 8192
# Connections open at once. Past it, the one that has waited longest for its request is
# closed, so the newest scraper always gets its turn and a flood of idle sockets cannot
# take the descriptors the node's sessions and lines need.
MAX_CONNECTIONS = 64
# Distinct `peer` labels; later peers are counted as "other". A CI runner is a new node
# every job, and each label is a series kept (and scraped) for the process's life.
MAX_PEER_LABELS = 256
OTHER_PEERS = "other"


class NodeMetrics:
    """The node's counters, and the gauges read when scraped."""

    def __init__(self, node: Node) -> None:
        self.node = node
        self._labelled: set[str] = set()  # the peers with a label of their own
        self.registry = CollectorRegistry()
        r = self.registry
        self.sessions = Counter(
            "lifeline_sessions",
            "Sync sessions, by peer (node id, else address), direction and outcome",
            ["peer", "direction", "outcome"],
            registry=r,
        )
        self.entries = Counter(
            "lifeline_entries", "Entries sent (out) and received (in)", ["direction"], registry=r
        )
        self.bytes = Counter(
            "lifeline_protocol_bytes", "Protocol bytes out and in", ["direction"], registry=r
        )
        self.refusals = Counter(
            "lifeline_refusals",
            "Streams refused or sessions failed on the server, by reason (error class)",
            ["reason"],
            registry=r,
        )
        self.items_refused = Counter(
            "lifeline_items_refused",
            "Inadmissible items a peer sent, refused one by one (decision 0111), by direction",
            ["direction"],
            registry=r,
        )
        self.items_refused_there = Counter(
            "lifeline_items_refused_by_peer",
            "Items this node sent that the peer said it refused alone (decision 0112), by "
            "direction",
            ["direction"],
            registry=r,
        )
        self.session_seconds = Histogram(
            "lifeline_session_seconds",
            "Duration of one session (one line), by direction",
            ["direction"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.in_sync_seconds = Histogram(
            "lifeline_in_sync_seconds",
            "Time a scheduled sync took to bring every shared line in sync with one peer",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        r.register(_Gauges(node))

    def _peer_label(self, peer: str) -> str:
        if peer in self._labelled:
            return peer
        if len(self._labelled) >= MAX_PEER_LABELS:
            return OTHER_PEERS
        self._labelled.add(peer)
        return peer

    def inbound(self, record: OnSession) -> OnSession:
        """``record`` (the inbound log), and this session counted and logged."""

        def on_session(
            identity: PeerIdentity, line: str, report: SyncReport | None, error: str | None
        ) -> None:
            record(identity, line, report, error)
            self.session(peer_node_id(identity) or _host(identity.address), line, "in", report)

        return on_session

    def session(self, peer: str, line: str, direction: str, report: SyncReport | None) -> None:
        outcome = "ok" if report is not None else "failed"
        self.sessions.labels(self._peer_label(peer), direction, outcome).inc()
        extra = {"peer": peer, "line": line}
        if report is None:
            log.info("session %s with %s on line %s failed", direction, peer, line, extra=extra)
            return
        self.entries.labels("out").inc(report.entries_sent)
        self.entries.labels("in").inc(report.entries_received)
        self.bytes.labels("out").inc(report.bytes_sent)
        self.bytes.labels("in").inc(report.bytes_received)
        if report.refused:
            self.items_refused.labels(direction).inc(report.refused)
        if report.refused_there:
            self.items_refused_there.labels(direction).inc(report.refused_there)
        self.session_seconds.labels(direction).observe(report.seconds)
        log.info(
            "session %s with %s on line %s: sent %d, received %s in %.2f s",
            direction,
            peer,
            line,
            report.entries_sent,
            count(report.entries_received, "entry", "entries"),
            report.seconds,
            extra=extra,
        )

    def timed(self, sync_peer: SyncPeer) -> SyncPeer:
        """``sync_peer`` (one scheduled sync of every shared line with a peer), timed; a
        failed one counted (its sessions that ended are counted by :meth:`session`)."""

        async def timed_sync(peer: PeerState) -> str:
            start = time.monotonic()
            try:
                summary = await sync_peer(peer)
            except Exception:
                self.session(str(peer.address), "*", "out", None)
                raise
            self.in_sync_seconds.observe(time.monotonic() - start)
            return summary

        return timed_sync

    def refused(self, what: str, exc: LifelineError) -> None:
        self.refusals.labels(type(exc).__name__).inc()


def _host(address: str) -> str:
    """A caller without a node id, by host (its port changes with every connection)."""
    host = address.rsplit(":", 1)[0] if address.count(":") else address
    return host.removeprefix("ipv4:").removeprefix("ipv6:").strip("[]") or "unknown"


class _Gauges(Collector):
    """What is read at each scrape: in memory, file sizes and /proc only."""

    def __init__(self, node: Node) -> None:
        self.node = node

    def collect(self) -> Iterator[Metric]:
        node = self.node
        taken = CounterMetricFamily(
            "lifeline_watch_rows", "Rows taken over watches, by what", labels=["what"]
        )
        for what, n in node.rows.taken.items():
            taken.add_metric([what], n)
        yield taken
        peers = GaugeMetricFamily("lifeline_peers", "Peers known, by state", labels=["state"])
        table = _peer_table(node)
        up = sum(1 for p in table if p.last_sync_at is not None and p.failures == 0)
        peers.add_metric(["up"], up)
        peers.add_metric(["down"], len(table) - up)
        yield peers
        yield from _store_sizes(node)
        rss = GaugeMetricFamily("lifeline_process_resident_bytes", "Resident set size")
        rss.add_metric([], _rss_bytes())
        yield rss
        pool = _pool_sizes(node)
        if pool is not None:
            g = GaugeMetricFamily(
                "lifeline_db_pool_connections", "The hub's database pool", labels=["state"]
            )
            for state, n in pool.items():
                g.add_metric([state], n)
            yield g


def _store_sizes(node: Node) -> Iterator[Metric]:
    if node.hub:  # a hub's lines are in its database
        return
    store = GaugeMetricFamily("lifeline_store_bytes", "Line file size", labels=["line"])
    wal = GaugeMetricFamily("lifeline_wal_bytes", "Line WAL file size", labels=["line"])
    for name in node.config().shared_lines:
        path = node.home.line_path(name)
        store.add_metric([name], _size(path))
        wal.add_metric([name], _size(Path(f"{path}-wal")))
    yield store
    yield wal


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _rss_bytes() -> int:
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):  # no /proc: the peak instead (KiB on Linux)
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class Readiness:
    """What ``/readyz`` waits for; each false names what is missing. ``listening`` is set
    once the node's sync port is bound."""

    def __init__(self, checks: dict[str, Callable[[], bool]]) -> None:
        self.listening = False
        self.checks = {**checks, "listening": self._listening}

    def _listening(self) -> bool:
        return self.listening

    def missing(self) -> list[str]:
        return [name for name, check in self.checks.items() if not check()]


class MetricsServer:
    """``/metrics``, ``/healthz`` and ``/readyz`` on one address, served by asyncio."""

    def __init__(self, registry: CollectorRegistry, readiness: Readiness) -> None:
        self.registry = registry
        self.readiness = readiness
        self._server: asyncio.Server | None = None
        self.address = ""
        self._names: tuple[str, ...] | None = None  # on loopback: the Host names answered
        self._open = 0
        # Connections still waiting for their request head, oldest first (dicts keep order).
        self._waiting: dict[asyncio.StreamWriter, None] = {}

    async def start(self, listen: str) -> str:
        host, port = split_address(listen, listen=True)
        # On loopback only a page on this machine can reach the port, and only by renaming
        # itself to it (DNS rebinding): such a request carries the page's name in Host, and
        # is refused as the viewer refuses it. On a LAN address any host there reads it.
        self._names = (host,) if is_loopback(host) else None
        try:
            self._server = await asyncio.start_server(self._handle, host, port)
        except OSError as exc:
            raise ConfigError(
                f"cannot serve metrics on {listen}: {exc.strerror or exc}; choose a free "
                "port with --metrics-listen HOST:PORT (port 0: any free port)"
            ) from exc
        bound = self._server.sockets[0].getsockname()
        self.address = f"{host}:{bound[1]}"
        return self.address

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._open += 1
        self._waiting[writer] = None
        try:
            if self._open > MAX_CONNECTIONS:
                self._make_room(writer)
            await self._serve(reader, writer)
        finally:
            self._open -= 1
            self._waiting.pop(writer, None)

    def _make_room(self, newcomer: asyncio.StreamWriter) -> None:
        """Close the connection waiting longest for its request; when every other one is
        being answered, the newcomer."""
        oldest = next((w for w in self._waiting if w is not newcomer), newcomer)
        self._waiting.pop(oldest, None)
        oldest.transport.abort()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(REQUEST_DEADLINE_S):
                head = await reader.readuntil(b"\r\n\r\n")
            self._waiting.pop(writer, None)
            status, ctype, body = self._answer(head[:MAX_REQUEST_BYTES])
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
            status, ctype, body = "400 Bad Request", "text/plain", b"bad request\n"
        except ConnectionError:
            return
        except Exception:  # a collector failed: the node keeps serving
            log.exception("metrics scrape failed")
            status, ctype, body = "500 Internal Server Error", "text/plain", b"error\n"
        if writer.is_closing():  # closed to make room, or the client left
            return
        writer.write(
            f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n".encode("ascii")
            + body
        )
        with contextlib.suppress(ConnectionError, TimeoutError):
            async with asyncio.timeout(REQUEST_DEADLINE_S):
                await writer.drain()
        writer.close()
        with contextlib.suppress(ConnectionError, TimeoutError):
            async with asyncio.timeout(REQUEST_DEADLINE_S):  # a client that never reads
                await writer.wait_closed()

    def _answer(self, head: bytes) -> tuple[str, str, bytes]:
        parts = head.split(b"\r\n", 1)[0].split()
        if len(parts) != 3 or parts[0] not in (b"GET", b"HEAD"):
            return "405 Method Not Allowed", "text/plain", b"GET /metrics, /healthz or /readyz\n"
        if self._names is not None and not host_allowed(_host_header(head), self._names):
            return "421 Misdirected Request", "text/plain", b"reach it by 127.0.0.1 or localhost\n"
        path = parts[1].split(b"?", 1)[0]
        if path == b"/metrics":
            return "200 OK", CONTENT_TYPE_LATEST, generate_latest(self.registry)
        if path == b"/healthz":
            return "200 OK", "text/plain", b"ok\n"
        if path == b"/readyz":
            missing = self.readiness.missing()
            if missing:
                text = "not ready: " + ", ".join(missing) + "\n"
                return "503 Service Unavailable", "text/plain", text.encode()
            return "200 OK", "text/plain", b"ready\n"
        return "404 Not Found", "text/plain", b"not found: try /metrics, /healthz or /readyz\n"


def _host_header(head: bytes) -> str:
    """A request head's ``Host`` ("" when it has none, which HTTP/1.1 clients always send)."""
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"host":
            return value.strip().decode("latin-1")
    return ""


def readiness_of(node: Node) -> Readiness:
    """The node's: its store open (a hub: its database connected), listening, and its
    certificates loaded (or a lab node without TLS)."""
    sec = node.security

    def store_open() -> bool:
        if node.hub:
            return _pool_sizes(node) is not None
        return node.home.dir.is_dir()

    return Readiness(
        {
            "store open": store_open,
            "certificates loaded": lambda: sec.insecure or sec.server_credentials is not None,
        }
    )


def _peer_table(node: Node) -> list[PeerState]:
    peering = node._peering  # the composition root's, read-only here
    return [] if peering is None else list(peering.scheduler.table)


def _pool_sizes(node: Node) -> dict[str, int] | None:
    """A hub's database pool: connections open, idle and the most it opens (None: none)."""
    return node.lines.pool()


@asynccontextmanager
async def metrics_beside(node: Node, listen: str | None) -> AsyncIterator[MetricsServer | None]:
    """``serve --metrics-listen``: the node counted and its endpoint served until the block
    ends (None, and nothing counted, without an address)."""
    if listen is None:
        yield None
        return
    node.metrics = NodeMetrics(node)
    server = MetricsServer(node.metrics.registry, readiness_of(node))
    await server.start(listen)
    try:
        yield server
    finally:
        await server.stop()
