"""Watching a node run: `serve --metrics-listen` over real processes and real HTTP.

Two `lifeline-mesh serve` processes in one mesh (mutual TLS), a write and the session it
starts, then /metrics, /healthz and /readyz scraped over HTTP; `--log-format json` lines
parsed; a taken metrics port refused with one line.
"""

from __future__ import annotations

import asyncio
import json
import re
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from lifeline_mesh.home.config import NodeConfig
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.node.metrics import MAX_CONNECTIONS, MetricsServer, NodeMetrics, readiness_of
from lifeline_mesh.node.root import Node
from tests.support.http_flood import at_most_fds, idle_flood, wait_until_open_at_most
from tests.support.mesh_procs import (
    cli,
    free_ports,
    join_mesh,
    log_note,
    serve,
    shared_node,
    wait_for_entry,
)
from tests.support.scrape import get, labels, metrics_line, probe, scrape_until, value

pytestmark = pytest.mark.slow


def test_two_nodes_count_their_sessions_and_answer_health_checks(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    line_a, _ = shared_node(a), shared_node(b)
    join_mesh(a, [b])
    note = log_note(b, "written on b before it serves")  # b's first session carries it
    pa, pb, ma = free_ports(3)
    common = ["--no-discovery", "--log-format", "json"]
    with (
        serve(
            a, "--listen", f"127.0.0.1:{pa}", "--metrics-listen", f"127.0.0.1:{ma}", *common
        ) as node_a,
        serve(
            b,
            "--listen",
            f"127.0.0.1:{pb}",
            "--peer",
            f"127.0.0.1:{pa}",
            "--metrics-listen",
            "127.0.0.1:0",
            *common,
        ) as node_b,
    ):
        assert metrics_line(node_a) == f"metrics on 127.0.0.1:{ma}"
        said = metrics_line(node_b)
        assert re.fullmatch(r"metrics on 127\.0\.0\.1:\d+", said), said
        mb_address = said.split()[-1]  # port 0: the kernel chose
        wait_for_entry(line_a, note)
        ma_address = f"127.0.0.1:{ma}"

        for address in (ma_address, mb_address):
            assert get(address, "/healthz") == (200, "ok\n")
            assert get(address, "/readyz") == (200, "ready\n")
            assert get(address, "/nope")[0] == 404
            # a page renamed to 127.0.0.1 (DNS rebinding) carries its own name: refused
            renamed = urllib.request.Request(
                f"http://{address}/metrics", headers={"Host": f"attacker.example:{ma}"}
            )
            with pytest.raises(urllib.error.HTTPError) as refused_host:
                urllib.request.urlopen(renamed, timeout=10)
            assert refused_host.value.code == 421

        # a served b's session: counted in, by b's node id, with the entry received.
        text_a = scrape_until(ma_address, r'^lifeline_sessions_total\{.*direction="in"')
        assert value(text_a, "lifeline_sessions_total", direction="in", outcome="ok") >= 1
        peers_in = labels(text_a, "lifeline_sessions_total", "peer", direction="in")
        node_b_id = json.loads(cli("lifeline_mesh", b, "id", "--json").stdout)["node_id"]
        assert peers_in == {node_b_id}, text_a
        assert value(text_a, "lifeline_entries_total", direction="in") >= 1
        assert value(text_a, "lifeline_protocol_bytes_total", direction="in") > 0
        assert value(text_a, "lifeline_session_seconds_count", direction="in") >= 1
        assert value(text_a, "lifeline_store_bytes", line="ledger") > 0
        assert value(text_a, "lifeline_process_resident_bytes") > 10 << 20

        # b dialed a: counted out, by a's address, with the entry sent; a is up.
        text_b = scrape_until(mb_address, r"^lifeline_in_sync_seconds_count [1-9]")
        out = {"peer": f"127.0.0.1:{pa}", "direction": "out", "outcome": "ok"}
        assert value(text_b, "lifeline_sessions_total", **out) >= 1
        assert value(text_b, "lifeline_entries_total", direction="out") >= 1
        assert value(text_b, "lifeline_protocol_bytes_total", direction="out") > 0
        assert value(text_b, "lifeline_in_sync_seconds_count") >= 1
        assert value(text_b, "lifeline_peers", state="up") == 1
        assert "lifeline_refusals_total" in text_b and "lifeline_watch_rows_total" in text_b

        # a line b shares and a does not: a refuses the session, counted by reason
        cli("lifeline", b, "--line", "private-to-b", "init")
        cli("lifeline_mesh", b, "share", "private-to-b")
        refused = cli(
            "lifeline_mesh", b, "sync", f"127.0.0.1:{pa}", "--line", "private-to-b", check=False
        )
        assert refused.returncode != 0 and "not shared" in refused.stderr, refused.stderr
        text_a = scrape_until(ma_address, r'^lifeline_refusals_total\{reason="Refused"\} 1')
        assert value(text_a, "lifeline_refusals_total", reason="Refused") == 1, text_a

        for proc in (node_a, node_b):
            proc.send_signal(signal.SIGTERM)
        err_a = node_a.communicate(timeout=30)[1]
        err_b = node_b.communicate(timeout=30)[1]
    assert node_a.returncode == 0 and node_b.returncode == 0, (err_a, err_b)
    # --log-format json: every stderr line is one JSON object; the sessions name peer and line
    events = [json.loads(line) for line in (err_a + err_b).splitlines() if line.strip()]
    assert all({"ts", "level", "logger", "message"} <= set(e) for e in events), events
    sessions = [e for e in events if e["message"].startswith("session ")]
    assert any(e.get("peer") == f"127.0.0.1:{pa}" and e.get("line") == "ledger" for e in sessions)
    assert any(e.get("peer") in peers_in and e.get("line") == "ledger" for e in sessions)


def test_a_taken_metrics_port_is_refused_with_one_line(tmp_path: Path) -> None:
    a = tmp_path / "a"
    shared_node(a)
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        proc = subprocess.run(
            [
                *(sys.executable, "-m", "lifeline_mesh", "--root", str(a), "serve"),
                *("--insecure", "--no-discovery", "--metrics-listen", f"127.0.0.1:{port}"),
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and f"cannot serve metrics on 127.0.0.1:{port}" in lines[0], lines
    assert "--metrics-listen" in lines[0] and "listening on" not in proc.stdout


def test_the_config_file_names_the_metrics_address(tmp_path: Path) -> None:
    a = tmp_path / "a"
    shared_node(a)
    config = NodeConfig.load(NodeHome(a))
    config.metrics_listen = "127.0.0.1:0"
    config.save(NodeHome(a))
    with serve(a, "--insecure", "--no-discovery") as proc:
        assert proc.stdout is not None
        said = proc.stdout.readline().strip()
        assert said.startswith("metrics on 127.0.0.1:"), said
        assert get(said.split()[-1], "/healthz")[0] == 200


def test_readyz_is_503_until_the_node_listens(tmp_path: Path) -> None:
    """In process: the endpoint answers 503 naming what is missing, then 200."""
    a = tmp_path / "a"
    shared_node(a)

    async def run() -> None:
        node = Node(NodeHome(a), insecure=True)
        metrics = NodeMetrics(node)
        server = MetricsServer(metrics.registry, readiness_of(node))
        address = await server.start("127.0.0.1:0")
        try:
            status, body = await asyncio.to_thread(get, address, "/readyz")
            assert (status, body) == (503, "not ready: listening\n")
            # the probe of the systemd unit and the image's health check says so, and fails
            said = await asyncio.to_thread(probe, f"http://{address}/readyz")
            assert said.returncode == 1 and "HTTP 503: not ready: listening" in said.stderr
            server.readiness.listening = True
            assert await asyncio.to_thread(get, address, "/readyz") == (200, "ready\n")
            assert (await asyncio.to_thread(probe, f"http://{address}/readyz")).returncode == 0
            # A scraper that never sends its request is dropped, and others are served.
            _, writer = await asyncio.open_connection(*address.split(":"))
            assert (await asyncio.to_thread(get, address, "/healthz"))[0] == 200
            writer.close()
        finally:
            await server.stop()

    assert NodeConfig().metrics_listen is None
    asyncio.run(run())


def test_idle_scrapers_cannot_take_the_node_s_descriptors(tmp_path: Path) -> None:
    """600 connections to the metrics port that never send a request, the node limited to
    256 open files: at most MAX_CONNECTIONS stay open, a scrape is answered, and a member
    still syncs. Was: every one held a descriptor until its 5 s deadline, the node ran out,
    and accepted neither scrapers nor sessions meanwhile."""
    a, b = tmp_path / "a", tmp_path / "b"
    line_a, _ = shared_node(a), shared_node(b)
    join_mesh(a, [b])
    note = log_note(b, "synced while the metrics port is flooded")
    pa, ma = free_ports(2)
    args = ["--listen", f"127.0.0.1:{pa}", "--metrics-listen", f"127.0.0.1:{ma}"]
    with serve(a, *args, "--no-discovery", wrap=at_most_fds([], 256)) as node_a:
        assert metrics_line(node_a) == f"metrics on 127.0.0.1:{ma}"
        with idle_flood(ma, 600) as socks:
            assert len(socks) > 3 * MAX_CONNECTIONS, len(socks)
            still = wait_until_open_at_most(socks, MAX_CONNECTIONS, within=3)
            assert still <= MAX_CONNECTIONS, still
            assert get(f"127.0.0.1:{ma}", "/healthz") == (200, "ok\n")
            synced = cli("lifeline_mesh", b, "sync", f"127.0.0.1:{pa}", check=False)
            assert synced.returncode == 0, synced.stderr
        wait_for_entry(line_a, note)
