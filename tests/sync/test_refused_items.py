"""An altered row on one laptop does not stop syncs with it (decision 0111), through the real
CLIs on line files: the receiver refuses that entry alone, warns with what to do, keeps
everything else, and still sends its own work back; a later intact copy is taken. On the
node that holds the altered row, `lifeline recover` rebuilds the line without it, and a
sync brings the intact copy back."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from tests.support.mesh_procs import (
    cli,
    free_ports,
    has_entry,
    log_note,
    serve,
    serve_insecure,
    shared_node,
)
from tests.support.scrape import scrape_until, value


def test_an_altered_entry_is_refused_alone_and_everything_else_syncs(tmp_path: Path) -> None:
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    line = {root: shared_node(root) for root in (a, b, c)}
    kept = log_note(a, "kept okapi")
    altered = log_note(a, "altered ibex")
    child = log_note(a, "child of the ibex")
    with serve_insecure(a) as (_proc, address):
        cli("lifeline_mesh", c, "sync", "--insecure", address)  # c keeps an intact copy
    with sqlite3.connect(line[a]) as db:  # edited by hand: the id stays, the hash does not
        db.execute("UPDATE entries SET summary = 'rewritten' WHERE id = ?", (altered,))
    mine = log_note(b, "b's own work")

    with serve_insecure(a) as (_proc, address):
        synced = cli("lifeline_mesh", b, "sync", "--insecure", address)
        as_json = cli("lifeline_mesh", b, "sync", "--insecure", address, "--json")
    assert synced.returncode == 0
    assert f"refused 1 item from {address}" in synced.stderr, synced.stderr
    assert "its id does not match its content" in synced.stderr
    assert "`lifeline-mesh verify` there names it" in synced.stderr
    [report] = json.loads(as_json.stdout)
    assert report["refused"] == 1 and "does not match its content" in report["refusals"][0]
    assert has_entry(line[b], kept)
    assert not has_entry(line[b], altered) and not has_entry(line[b], child)
    assert has_entry(line[a], mine)  # b's work still reached a
    assert cli("lifeline", b, "verify").returncode == 0  # nothing altered got in

    # an intact copy from another node is taken, and its child with it
    with serve_insecure(c) as (_proc, address):
        clean = cli("lifeline_mesh", b, "sync", "--insecure", address, "--json")
    assert json.loads(clean.stdout)[0]["refused"] == 0
    assert has_entry(line[b], altered) and has_entry(line[b], child)

    # on a: `recover` drops the altered row (its file passes SQLite's check), the damaged
    # file is kept, and a sync with c brings the intact copy back; b's syncs are clean again
    recovered = cli("lifeline", a, "recover")
    assert "1 entry no longer matches its id," in recovered.stderr, recovered.stderr
    assert list((a / ".lifeline").glob("ledger.db.damaged-*"))
    assert not has_entry(line[a], altered) and has_entry(line[a], kept)
    assert cli("lifeline", a, "verify").returncode == 0
    with serve_insecure(c) as (_proc, address):
        cli("lifeline_mesh", a, "sync", "--insecure", address)
    assert has_entry(line[a], altered) and has_entry(line[a], child)
    with serve_insecure(a) as (_proc, address):
        again = cli("lifeline_mesh", b, "sync", "--insecure", address, "--json")
    assert json.loads(again.stdout)[0]["refused"] == 0 and not again.stderr
    assert "nothing to recover" in cli("lifeline", a, "recover").stdout


def test_serve_refuses_an_altered_entry_pushed_to_it_and_counts_it(tmp_path: Path) -> None:
    """The serving side of the same: the entry a peer pushes altered is refused alone, the
    rest stored, the refusal logged with the peer and counted in the metrics; the peer
    that pushed it is told."""
    a, b = tmp_path / "a", tmp_path / "b"
    line = {root: shared_node(root) for root in (a, b)}
    altered, kept = log_note(b, "altered on b"), log_note(b, "kept on b")
    with sqlite3.connect(line[b]) as db:
        db.execute("UPDATE entries SET summary = 'rewritten' WHERE id = ?", (altered,))
    port, metrics = free_ports(2)
    listen = ("--insecure", "--no-discovery", "--listen", f"127.0.0.1:{port}")
    with serve(a, *listen, "--metrics-listen", f"127.0.0.1:{metrics}") as proc:
        pushed = cli("lifeline_mesh", b, "sync", "--insecure", f"127.0.0.1:{port}")
        # the pusher is told in the closing round (decision 0112), and what to do
        assert f"127.0.0.1:{port} refused 1 item this node sent" in pushed.stderr, pushed.stderr
        assert "does not match its content" in pushed.stderr
        assert "`lifeline recover`" in pushed.stderr
        text = scrape_until(f"127.0.0.1:{metrics}", r"^lifeline_items_refused_total")
        assert value(text, "lifeline_items_refused_total", direction="in") == 1
    assert proc.stderr is not None
    log = proc.stderr.read()
    assert "refused 1 item from" in log and "does not match its content" in log, log
    assert not has_entry(line[a], altered) and not has_entry(line[a], kept)
    # `peers` keeps it with the caller's last session, for whoever looks later
    peers = cli("lifeline_mesh", a, "peers", "--json").stdout
    assert "refused 1 of its items, it refused 0 of ours" in peers, peers

    # the other way: a's serve pushes nothing damaged, but is told when b refuses (b pulls
    # from a's serve a row altered on a, and says so in its closing turn)
    with sqlite3.connect(line[a]) as db:
        own = log_note(a, "a's own, altered")
        db.execute("UPDATE entries SET summary = 'rewritten' WHERE id = ?", (own,))
    with serve(a, *listen, "--metrics-listen", f"127.0.0.1:{metrics}") as proc:
        cli("lifeline_mesh", b, "sync", "--insecure", f"127.0.0.1:{port}")
        text = scrape_until(f"127.0.0.1:{metrics}", r"^lifeline_items_refused_by_peer_total")
        assert value(text, "lifeline_items_refused_by_peer_total", direction="in") == 1
    assert proc.stderr is not None
    assert "refused 1 item this node sent" in proc.stderr.read()
