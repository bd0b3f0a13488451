"""A sync with a hub leaves both sides identical (decision 0059): `serve --store
postgresql://…` and two laptops, real processes and a real PostgreSQL server. Whoever took
entries signs its state in the session's closing round, so the sync after a real sync is a
one-round no-op of under 200 bytes each way, whichever side learned something."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.mesh_procs import cli, shared_node
from tests.support.pg_server import fresh_database, hub

pytestmark = pytest.mark.slow


def _laptop(root: Path) -> None:
    shared_node(root)
    cli("lifeline_mesh", root, "init")  # a node key: every local write is signed


def _sync(root: Path, address: str) -> dict[str, Any]:
    done = cli("lifeline_mesh", root, "sync", address, "--insecure", "--json")
    [report] = json.loads(done.stdout)
    assert isinstance(report, dict)
    return report


def _log(root: Path, summary: str) -> None:
    cli("lifeline", root, "log", "--kind", "note", "--summary", summary)


def _assert_no_op(report: dict[str, Any]) -> None:
    assert report["round_trips"] == 1, report
    assert report["bytes_sent"] < 200 and report["bytes_received"] < 200, report
    assert report["entries_added"] == 0 and report["attestations_added"] == 0, report


@pytest.mark.timeout(600)
def test_the_sync_after_a_sync_with_a_hub_is_a_no_op(pg_server: str, tmp_path: Path) -> None:
    url = asyncio.run(fresh_database(pg_server))
    the_hub, a, b = tmp_path / "hub", tmp_path / "a", tmp_path / "b"
    for root in (the_hub, a, b):
        _laptop(root)  # a hub has a node key too: it signs the state it admitted
    with hub(the_hub, url) as (_proc, address):
        _log(a, "written on a")
        assert _sync(a, address)["entries_sent"] == 1  # the hub takes it and signs
        _assert_no_op(_sync(a, address))
        _log(b, "written on b")
        _log(b, "again on b")
        first = _sync(b, address)  # both ways: each side signs, each stores the other's
        assert first["entries_added"] == 1 and first["entries_sent"] == 2, first
        _assert_no_op(_sync(b, address))
        assert _sync(a, address)["entries_added"] == 2  # a takes b's entries from the hub
        _assert_no_op(_sync(a, address))
        # a's new statement is news to b (a third party's): it travels once, then quiet
        relayed = _sync(b, address)
        assert relayed["attestations_added"] == 1 and relayed["entries_added"] == 0, relayed
        _assert_no_op(_sync(b, address))
