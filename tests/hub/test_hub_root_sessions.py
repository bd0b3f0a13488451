"""The `lifeline sessions` commands past ingest and list, and `lifeline-mesh members`, run on
a hub process root (issue 33): two real hub processes on one real PostgreSQL over mutual TLS,
a transcript ingested through process A's root, and every read on process B's root giving
what the same commands give on a laptop root (line files) that ingested the same transcript:
`sessions show`, `resume` (the continuation bundle), `unfinished`, `usage`, `search`;
`members` lists the hub node and the laptop that joined, on either process, as text and JSON."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.hub_roots import TRANSCRIPT
from tests.support.hub_roots import hub_mesh as _hub_mesh
from tests.support.hub_roots import life as _life
from tests.support.hub_roots import mesh as _mesh
from tests.support.pg_server import fresh_database

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def _json(root: Path, *args: str) -> Any:
    return json.loads(_life(root, "sessions", *args).stdout)


def test_sessions_and_members_on_a_hub_root(pg_server: str, tmp_path: Path) -> None:
    url = asyncio.run(fresh_database(pg_server))
    with _hub_mesh(tmp_path, url) as (hub_a, hub_b, laptop, _sync_a, _sync_b):
        for root in (hub_a, laptop):
            _life(root, "sessions", "ingest", "--tool", "claude", str(TRANSCRIPT))
        assert not (hub_b / ".lifeline" / "sessions.db").exists()
        (session,) = _json(laptop, "list", "--json")
        assert _json(hub_b, "list", "--json") == [session]
        sid, scope = session["id"], session["scope"]

        reads = [
            ("show", sid, "--json", "--limit", "40"),
            ("show", sid[:12], "--json", "--offset", "77", "--limit", "3"),
            ("resume", sid, "--format", "json"),
            ("resume", "--scope", scope, "--format", "json"),
            ("unfinished", "--json", "--scope", scope),
            ("usage", "--json"),
            ("usage", "--json", "--by", "model"),
            ("search", "manifest", "--json", "--limit", "5"),
            ("search", "commit", "--json", "--role", "user"),
        ]
        for args in reads:
            on_hub, on_laptop = _json(hub_b, *args), _json(laptop, *args)
            assert on_hub == on_laptop, args
            assert on_hub or args[0] == "unfinished", args  # something to compare
        hits = _json(hub_b, "search", "manifest", "--json", "--limit", "5")
        assert hits[0]["session"] == sid and hits[0]["score"] == 1.0
        shown = _life(hub_b, "sessions", "show", sid[:12]).stdout
        assert shown == _life(laptop, "sessions", "show", sid[:12]).stdout
        assert "pending changes" in shown

        # members: the hub node and the laptop that joined through it, on either process
        node = json.loads(_mesh(laptop, "status", "--json").stdout)["node_id"]
        hub_node = json.loads(_mesh(hub_a, "status", "--json").stdout)["node_id"]
        for root in (hub_a, hub_b):
            listed = json.loads(_mesh(root, "members", "--json").stdout)
            ids = {m["node_id"] for m in listed["members"]}
            assert {node, hub_node} <= ids, listed
            text = _mesh(root, "members").stdout
            assert node in text and hub_node in text, text
