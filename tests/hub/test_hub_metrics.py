"""A hub process's metrics: `serve --store postgresql://…` with `metrics_listen` set counts
the sessions it serves and shows its database pool; a real PostgreSQL server
(tests/support/pg_server.py)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from lifeline_mesh.home.config import NodeConfig
from lifeline_mesh.home.node_home import NodeHome
from tests.support.mesh_procs import cli, log_note, shared_node
from tests.support.pg_server import fresh_database, hub
from tests.support.scrape import get, metrics_line, scrape_until, value

pytestmark = pytest.mark.slow


def test_a_hub_process_shows_its_sessions_and_its_pool(pg_server: str, tmp_path: Path) -> None:
    url = asyncio.run(fresh_database(pg_server))
    hub_root, laptop = tmp_path / "hub", tmp_path / "laptop"
    shared_node(hub_root)
    shared_node(laptop)
    log_note(laptop, "for the hub")
    config = NodeConfig.load(NodeHome(hub_root))
    config.metrics_listen = "127.0.0.1:0"
    config.save(NodeHome(hub_root))
    with hub(hub_root, url) as (proc, address):
        said = metrics_line(proc)
        assert said.startswith("metrics on 127.0.0.1:"), said
        metrics = said.split()[-1]
        assert get(metrics, "/readyz") == (200, "ready\n")
        done = cli("lifeline_mesh", laptop, "sync", address, "--insecure", "--json")
        assert json.loads(done.stdout)[0]["entries_sent"] == 1
        text = scrape_until(metrics, r'^lifeline_entries_total\{direction="in"\} [1-9]')
        assert value(text, "lifeline_sessions_total", direction="in", outcome="ok") >= 1
        assert value(text, "lifeline_entries_total", direction="in") == 1
        assert value(text, "lifeline_db_pool_connections", state="open") >= 1
        assert value(text, "lifeline_db_pool_connections", state="max") >= 1
        assert "lifeline_store_bytes" not in text  # its lines are in the database
