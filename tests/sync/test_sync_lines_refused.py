"""A line the peer refuses does not hide the lines that synced: `sync` (and `sync --shallow`,
`sync --push`) reports each line that synced and names each refused one (exit 2; with
``--json`` an entry per line, the refused ones with their ``error``), and `serve`'s
scheduled syncs go on with the next lines, real processes on loopback."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from lifeline.truth.state import RECENT_KEEP
from tests.support.history_lines import fill_history_line
from tests.support.mesh_procs import (
    cli,
    free_port,
    has_entry,
    join_mesh,
    log_note,
    serve,
    shared_node,
    wait_for_entry,
)

pytestmark = pytest.mark.slow

NOT_SHARED = "is not shared by the node serving there"


def _share_more(root: Path, *lines: str) -> None:
    for line in lines:
        cli("lifeline", root, "--line", line, "init")
        cli("lifeline_mesh", root, "share", line)


def test_sync_reports_the_lines_that_synced_and_names_the_refused_ones(tmp_path: Path) -> None:
    peer, laptop = tmp_path / "peer", tmp_path / "laptop"
    shared_node(peer)  # shares `ledger` only
    ledger = shared_node(laptop)
    _share_more(laptop, "aaa", "other")  # sorted: `aaa` is refused before `ledger` syncs
    join_mesh(peer, [laptop])
    address = f"127.0.0.1:{free_port()}"
    with serve(peer, "--listen", address, "--no-discovery"):
        first = log_note(peer, "written on the peer")
        done = cli("lifeline_mesh", laptop, "sync", address, check=False)
        assert done.returncode == 2, done.stderr
        assert has_entry(ledger, first)
        assert done.stdout.startswith(f"line 'ledger' with {address}: sent 0 entries, received 1")
        err = done.stderr
        assert err.count("\n") == 1 and err.startswith("lifeline-mesh: error: 2 lines of 3 ")
        assert "('aaa', 'other')" in err and err.count(NOT_SHARED) == 2, err
        assert "`lifeline-mesh share aaa`" in err and "`lifeline-mesh share other`" in err
        assert "on this node" not in err and "share LINE" not in err

        second = log_note(peer, "written on the peer, again")
        done = cli("lifeline_mesh", laptop, "sync", address, "--json", check=False)
        assert done.returncode == 2 and "2 lines of 3 did not sync" in done.stderr
        reports = {r["line"]: r for r in json.loads(done.stdout)}
        assert list(reports) == ["aaa", "ledger", "other"]
        assert reports["ledger"]["entries_received"] == 1 and reports["ledger"]["error"] is None
        for line in ("aaa", "other"):
            assert f"line '{line}' {NOT_SHARED}" in reports[line]["error"]
            assert reports[line]["entries_received"] == 0
        assert has_entry(ledger, second)

        # one line asked for, and refused: its refusal alone, as before
        done = cli("lifeline_mesh", laptop, "sync", address, "--line", "aaa", check=False)
        assert done.returncode == 2 and done.stdout == ""
        assert done.stderr.startswith(f"lifeline-mesh: error: peer {address} refused us: line")


def test_shallow_and_push_go_on_past_the_lines_the_peer_refuses(tmp_path: Path) -> None:
    peer, laptop = tmp_path / "peer", tmp_path / "laptop"
    shared_node(peer)  # shares `ledger` only
    ledger = shared_node(laptop)  # empty: `--shallow` takes the snapshot
    _share_more(laptop, "aaa", "other")  # `aaa` is asked for before `ledger`
    join_mesh(peer, [laptop])
    asyncio.run(fill_history_line(peer, RECENT_KEEP + 6))  # older notes: not in the snapshot
    address = f"127.0.0.1:{free_port()}"
    with serve(peer, "--listen", address, "--no-discovery"):
        first = log_note(peer, "written on the peer")
        done = cli("lifeline_mesh", laptop, "sync", "--shallow", address, check=False)
        assert done.returncode == 2, done.stderr
        assert has_entry(ledger, first)
        assert done.stdout.startswith(f"line 'ledger' from {address}: shallow, "), done.stdout
        err = done.stderr
        assert err.count("\n") == 1 and err.startswith("lifeline-mesh: error: 2 lines of 3 ")
        assert "('aaa', 'other')" in err and err.count(NOT_SHARED) == 2, err

        written = log_note(laptop, "written on the shallow laptop")
        done = cli("lifeline_mesh", laptop, "sync", "--push", address, "--json", check=False)
        assert done.returncode == 2 and "2 lines of 3 did not sync" in done.stderr
        reports = {r["line"]: r for r in json.loads(done.stdout)}
        assert list(reports) == ["aaa", "ledger", "other"]
        assert reports["ledger"]["role"] == "push" and reports["ledger"]["error"] is None
        assert reports["ledger"]["entries_sent"] == 1
        for line in ("aaa", "other"):
            assert f"line '{line}' {NOT_SHARED}" in reports[line]["error"]
            assert reports[line]["entries_sent"] == 0
        assert has_entry(peer / ".lifeline" / "ledger.db", written)

        # one line asked for, and refused: its refusal alone, as plain `sync` does
        done = cli(
            "lifeline_mesh", laptop, "sync", "--shallow", address, "--line", "aaa", check=False
        )
        assert done.returncode == 2 and done.stdout == ""
        assert done.stderr.startswith(f"lifeline-mesh: error: peer {address} refused us: line")


def test_scheduled_syncs_go_on_past_a_line_the_peer_refuses(tmp_path: Path) -> None:
    peer, laptop = tmp_path / "peer", tmp_path / "laptop"
    shared_node(peer)
    ledger = shared_node(laptop)
    _share_more(laptop, "aaa")  # synced before `ledger`, refused by the peer
    written = log_note(peer, "written before either serves")  # only a session brings it
    pp, pl = free_port(), free_port()
    flags = ("--no-discovery", "--insecure")
    with (
        serve(peer, "--listen", f"127.0.0.1:{pp}", *flags),
        serve(laptop, "--listen", f"127.0.0.1:{pl}", "--peer", f"127.0.0.1:{pp}", *flags),
    ):
        wait_for_entry(ledger, written)
        deadline = time.monotonic() + 30
        while True:
            rows = json.loads(cli("lifeline_mesh", laptop, "peers", "--json").stdout)["peers"]
            row = rows[0] if rows else {}
            if row.get("last_result") or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert row["failures"] == 0 and row["last_error"] is None, row
        result = row["last_result"]
        assert result.startswith(f"aaa: not synced (peer 127.0.0.1:{pp} refused us: line 'aaa' ")
        assert NOT_SHARED in result and "; ledger: sent 0, received " in result, result
