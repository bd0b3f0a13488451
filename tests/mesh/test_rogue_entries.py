"""A rogue member cannot rewrite someone else's entry (issue 32; decision 0048).

Three real nodes over mutual TLS: A (the CA holder) writes a signed entry, B is an honest
member, M is a member whose store was edited by hand — the author signature of A's entry
deleted and its ts moved a minute earlier — so that its `sync` relays that copy as any
node's code would send what its store holds. Everything runs as a user runs it: `serve`,
`sync`, `verify`.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.support.mesh_procs import cli, free_port, join_mesh, log_note, serve, shared_node
from tests.support.rogue import entry_ts, strip_and_backdate

pytestmark = pytest.mark.slow


def _mesh(tmp_path: Path) -> tuple[dict[str, Path], dict[str, str]]:
    roots = {n: tmp_path / n for n in "abm"}
    for root in roots.values():
        shared_node(root)
    join_mesh(roots["a"], [roots["b"], roots["m"]])
    ids = {n: cli("lifeline_mesh", r, "id").stdout.strip() for n, r in roots.items()}
    return roots, ids


def _line(root: Path) -> Path:
    return root / ".lifeline" / "ledger.db"


def _ts(root: Path, entry_id: str) -> str:
    return entry_ts(_line(root), entry_id)


def _strip_and_backdate(root: Path, entry_id: str) -> str:
    """M's hostile edit: the author signature gone, the ts a minute earlier. Returns it."""
    return strip_and_backdate(_line(root), entry_id)


def _verify(root: Path, *args: str) -> tuple[int, dict[str, Any]]:
    done = cli("lifeline_mesh", root, "verify", "--json", *args, check=False)
    return done.returncode, json.loads(done.stdout)


def _findings(report: dict[str, Any], check: str) -> list[dict[str, str]]:
    return [f for f in report["lines"][0]["findings"] if f["check"] == check]


def test_an_unsigned_relay_with_an_earlier_ts_yields_to_the_authors_signature(
    tmp_path: Path,
) -> None:
    """M relays A's entry unsigned and backdated to B before B ever saw it. B stores it
    provisionally, named with M; its next session with A succeeds, the entry takes the ts
    A signed, and `verify` on B passes and names M — not A."""
    roots, ids = _mesh(tmp_path)
    entry = log_note(roots["a"], "decided by A")
    signed_ts = _ts(roots["a"], entry)
    a_address, b_address = (f"127.0.0.1:{free_port()}" for _ in "ab")
    with serve(roots["a"], "--listen", a_address, "--no-discovery"):
        cli("lifeline_mesh", roots["m"], "sync", a_address)
        early = _strip_and_backdate(roots["m"], entry)
        with serve(roots["b"], "--listen", b_address, "--no-discovery"):
            cli("lifeline_mesh", roots["m"], "sync", b_address)
        assert _ts(roots["b"], entry) == early  # stored, provisionally
        # B meets the author: the session goes through (it aborted for good before)
        first = cli("lifeline_mesh", roots["b"], "sync", a_address, check=False)
        assert first.returncode == 0, first.stderr
        assert _ts(roots["b"], entry) == signed_ts
        again = cli("lifeline_mesh", roots["b"], "sync", a_address, "--json", check=False)
        assert again.returncode == 0, again.stderr
        [report] = json.loads(again.stdout)
        assert report["entries_sent"] == report["entries_received"] == 0
    code, verdict = _verify(roots["b"])
    assert code == 0, verdict
    assert not _findings(verdict, "ts-mismatch")
    [replaced] = _findings(verdict, "replaced-copy")
    assert replaced["subject"] == entry and ids["m"] in replaced["detail"]
    assert early in replaced["detail"] and signed_ts in replaced["detail"]
    assert ids["a"] not in replaced["detail"]
    assert not _findings(verdict, "unsigned-source")  # A's signature names its source now


def test_a_signature_that_comes_after_its_entry_makes_the_author_its_source(
    tmp_path: Path,
) -> None:
    """M relays A's entry without its signature, the ts untouched (what a store read between
    an entry and its signature sends): B names M as the source of an unsigned entry until
    A's signature arrives, then names nobody — and keeps the record of what M sent."""
    roots, ids = _mesh(tmp_path)
    entry = log_note(roots["a"], "decided by A")
    a_address, b_address = (f"127.0.0.1:{free_port()}" for _ in "ab")
    with serve(roots["a"], "--listen", a_address, "--no-discovery"):
        cli("lifeline_mesh", roots["m"], "sync", a_address)
        strip_and_backdate(_line(roots["m"]), entry, seconds=0)
        with serve(roots["b"], "--listen", b_address, "--no-discovery"):
            cli("lifeline_mesh", roots["m"], "sync", b_address)
        cli("lifeline_mesh", roots["b"], "members", "--pull", a_address)  # B learns of M
        code, verdict = _verify(roots["b"], "--allow-unsigned")
        assert code == 0, verdict
        [source] = _findings(verdict, "unsigned-source")
        assert source["subject"] == ids["m"] and "1 entry arrived" in source["detail"]
        cli("lifeline_mesh", roots["b"], "sync", a_address)
    code, verdict = _verify(roots["b"], "--require-signed")
    assert not _findings(verdict, "unsigned-source") and not _findings(verdict, "unsigned")
    assert {f["severity"] for f in verdict["lines"][0]["findings"]} <= {"note"}, verdict
    assert code == 0, verdict
    with sqlite3.connect(_line(roots["b"])) as conn:
        rows = conn.execute("SELECT entry_id, source, outcome FROM entry_sources").fetchall()
    assert rows == [(entry, ids["m"], "unsigned")]


def test_a_conflicting_copy_is_refused_named_and_the_session_goes_on(tmp_path: Path) -> None:
    """B already holds A's signed entry. M pushes the stripped, backdated copy together with
    an entry of its own written on top of it: the copy is refused and named with M, M's own
    entry is stored, the session succeeds, and `verify` on B passes and names M."""
    roots, ids = _mesh(tmp_path)
    entry = log_note(roots["a"], "decided by A")
    signed_ts = _ts(roots["a"], entry)
    a_address, b_address = (f"127.0.0.1:{free_port()}" for _ in "ab")
    with serve(roots["a"], "--listen", a_address, "--no-discovery"):
        cli("lifeline_mesh", roots["b"], "sync", a_address)
        cli("lifeline_mesh", roots["m"], "sync", a_address)
    early = _strip_and_backdate(roots["m"], entry)
    own = log_note(roots["m"], "M's own note, on top of the copy")
    with serve(roots["b"], "--listen", b_address, "--no-discovery"):
        pushed = cli("lifeline_mesh", roots["m"], "sync", b_address, check=False)
        assert pushed.returncode == 0, pushed.stderr
    assert _ts(roots["b"], entry) == signed_ts  # the signed copy stands
    assert _ts(roots["b"], own)  # the rest of the session was stored
    code, verdict = _verify(roots["b"])
    assert code == 0, verdict
    [refused] = _findings(verdict, "refused-copy")
    assert refused["subject"] == entry and ids["m"] in refused["detail"]
    assert early in refused["detail"] and "did not sign" in refused["detail"]


def test_an_unsigned_entry_pushed_by_a_member_names_it_as_its_source(tmp_path: Path) -> None:
    """An entry M stores without a node key (any `author` text) reaches B named with M."""
    roots, ids = _mesh(tmp_path)
    log_note(roots["b"], "B signs what it writes")
    b_address = f"127.0.0.1:{free_port()}"
    key = roots["m"] / ".lifeline" / "mesh" / "node.key"
    hidden = key.with_name("node.key.away")
    key.rename(hidden)  # M writes with no identity: nothing signs it
    try:
        entry = cli(
            "lifeline", roots["m"], "log", "--kind", "decision", "--summary", "as alice",
            "--author", "alice", "--json",
        ).stdout  # fmt: skip
    finally:
        hidden.rename(key)
    entry_id = json.loads(entry)["id"]
    with serve(roots["b"], "--listen", b_address, "--no-discovery"):
        cli("lifeline_mesh", roots["m"], "sync", b_address)
    assert _ts(roots["b"], entry_id)
    # B learns of M, who joined after it, from the CA holder: the session's closing round
    # brought M's signed state statement, which B can only check once it knows M's key
    a_address = f"127.0.0.1:{free_port()}"
    with serve(roots["a"], "--listen", a_address, "--no-discovery"):
        cli("lifeline_mesh", roots["b"], "members", "--pull", a_address)
    code, verdict = _verify(roots["b"])  # B's line is signed: an unsigned entry fails
    assert code == 1 and [f["subject"] for f in _findings(verdict, "unsigned")] == [entry_id]
    code, verdict = _verify(roots["b"], "--allow-unsigned")
    assert code == 0, verdict
    [source] = _findings(verdict, "unsigned-source")
    assert source["subject"] == ids["m"] and "1 entry arrived" in source["detail"]
    with sqlite3.connect(_line(roots["b"])) as conn:
        rows = conn.execute("SELECT entry_id, source, outcome FROM entry_sources").fetchall()
    assert rows == [(entry_id, ids["m"], "unsigned")]
