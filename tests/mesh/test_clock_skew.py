"""A node whose clock is ahead is bounded by the notary, not trusted, and halts nothing
(decision 0084). Real processes: S runs every command under libfaketime 10 minutes ahead,
past the 300 s skew tolerance, so what it signs is dated in the other nodes' future.

Before, the receiver refused the first future-dated signature with the whole session: S's
sync with A failed, and the honest entries A held for S (and everything S relayed) never
crossed. Now A holds S's entry back — not stored, recorded with S as its sender — and
the rest of the session succeeds both ways.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from lifeline_mesh.notary.provenance import FUTURE_DETAIL
from tests.support.mesh_procs import (
    cli,
    free_port,
    has_entry,
    join_mesh,
    log_note,
    serve,
    shared_node,
)
from tests.support.rogue import backdated_child, entry_ts

pytestmark = pytest.mark.slow

FAKETIME_LIB = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1")
AHEAD = "+600s"  # twice the notary's skew tolerance (DEFAULT_SKEW_S = 300 s)


def _skewed(root: Path, *args: str, ahead: str = AHEAD) -> subprocess.CompletedProcess[str]:
    """``lifeline`` / ``lifeline-mesh`` on S, its clock 10 minutes ahead."""
    env = os.environ | {"LD_PRELOAD": str(FAKETIME_LIB), "FAKETIME": ahead}
    return subprocess.run(
        [sys.executable, "-m", *args[:1], "--root", str(root), *args[1:]],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def _line(root: Path) -> Path:
    return root / ".lifeline" / "ledger.db"


@pytest.mark.skipif(not FAKETIME_LIB.exists(), reason="libfaketime is not installed")
def test_a_node_ten_minutes_ahead_is_held_back_and_the_session_succeeds(
    tmp_path: Path,
) -> None:
    roots = {n: tmp_path / n for n in "acs"}
    for root in roots.values():
        shared_node(root)
    join_mesh(roots["a"], [roots["c"], roots["s"]])
    ids = {n: cli("lifeline_mesh", r, "id").stdout.strip() for n, r in roots.items()}
    written = _skewed(roots["s"], "lifeline", "log", "--kind", "note", "--summary", "s", "--json")
    from_s = json.loads(written.stdout)["id"]
    ts = datetime.fromisoformat(entry_ts(_line(roots["s"]), from_s).replace("Z", "+00:00"))
    assert ts > datetime.now(UTC) + timedelta(seconds=500)  # dated in everyone's future
    address = f"127.0.0.1:{free_port()}"
    with serve(roots["a"], "--listen", address, "--no-discovery"):
        from_c = log_note(roots["c"], "honest, from c")
        cli("lifeline_mesh", roots["c"], "sync", address)
        assert has_entry(_line(roots["a"]), from_c)
        # S syncs with A: A holds back what S signed in A's future; the session succeeds
        done = _skewed(roots["s"], "lifeline_mesh", "sync", address)
        assert done.returncode == 0, done.stderr
        assert has_entry(_line(roots["s"]), from_c)  # the rest crossed, in the same session
        assert not has_entry(_line(roots["a"]), from_s)
        # and the next session is no worse: A keeps syncing with S and with C
        later = log_note(roots["a"], "honest, from a")
        assert _skewed(roots["s"], "lifeline_mesh", "sync", address).returncode == 0
        assert has_entry(_line(roots["s"]), later)
        cli("lifeline_mesh", roots["c"], "sync", address)
        assert has_entry(_line(roots["c"]), later) and not has_entry(_line(roots["c"]), from_s)
    with sqlite3.connect(_line(roots["a"])) as conn:
        held = conn.execute(
            "SELECT entry_id, source, outcome, detail FROM entry_sources WHERE entry_id = ?",
            (from_s,),
        ).fetchall()
    assert held == [(from_s, ids["s"], "refused", FUTURE_DETAIL)]
    verdict = cli("lifeline_mesh", roots["a"], "verify", "--json", check=False)
    assert verdict.returncode == 0, verdict.stdout
    # Held back, not lost: once A's clock is within the tolerance of its date (here A's
    # clock moved 6 minutes on), A's next session with S takes it, signature and all.
    skewed_serve = ("env", f"LD_PRELOAD={FAKETIME_LIB}", f"FAKETIME={AHEAD}")
    with serve(roots["s"], "--listen", address, "--no-discovery", wrap=skewed_serve):
        done = _skewed(roots["a"], "lifeline_mesh", "sync", address, ahead="+360s")
        assert done.returncode == 0, done.stderr
    assert has_entry(_line(roots["a"]), from_s)


@pytest.mark.skipif(not FAKETIME_LIB.exists(), reason="libfaketime is not installed")
def test_a_node_whose_clock_went_back_writes_after_its_parents_and_is_told_of_refusals(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """S synced with its clock right, then its clock went back two hours (decision 0112).

    The note it writes then is dated no earlier than its parents, so A takes it. An entry
    dated before its parent, as S wrote before this change, is one every peer refuses:
    before, A refused S's whole session for it, at every sync, both ways, and nothing
    crossed again. Now A refuses that entry alone (and what descends from it), takes the
    rest, and tells S in the closing round; S's `sync` says what was refused and what to
    do, and S's `verify` names the entry."""
    roots = {n: tmp_path / n for n in "as"}
    for root in roots.values():
        shared_node(root)
    # the mesh made three hours ago: S's certificates still valid on its clock
    monkeypatch.setenv("LD_PRELOAD", str(FAKETIME_LIB))
    monkeypatch.setenv("FAKETIME", "-10800s")
    join_mesh(roots["a"], [roots["s"]])
    monkeypatch.delenv("LD_PRELOAD")
    monkeypatch.delenv("FAKETIME")
    address = f"127.0.0.1:{free_port()}"
    with serve(roots["a"], "--listen", address, "--no-discovery") as proc:
        parent = log_note(roots["a"], "written on a")
        cli("lifeline_mesh", roots["s"], "sync", address)
        honest = log_note(roots["s"], "written on s, clock right")
        behind = _skewed(roots["s"], "lifeline", "log", "--kind", "note", "--summary", "late",
                         "--json", ahead="-7200s")  # fmt: skip
        assert behind.returncode == 0, behind.stderr
        late = json.loads(behind.stdout)["id"]
        assert entry_ts(_line(roots["s"]), late) >= entry_ts(_line(roots["s"]), honest)
        done = cli("lifeline_mesh", roots["s"], "sync", address, "--json")
        assert json.loads(done.stdout)[0]["refused_there"] == 0, done.stderr
        assert has_entry(_line(roots["a"]), late)

        backdated = backdated_child(roots["s"])  # as S's ledger wrote before this change
        child = log_note(roots["s"], "its child, clock right again")  # descends from it
        apart = cli("lifeline", roots["s"], "log", "--kind", "note", "--summary", "apart",
                    "--parent", late, "--json").stdout  # fmt: skip
        done = cli("lifeline_mesh", roots["s"], "sync", address, "--json")
        [report] = json.loads(done.stdout)
        assert report["refused_there"] == 1, done.stderr
        assert "before its parent" in report["refusals_there"][0]
        assert f"{address} refused 1 item this node sent" in done.stderr
        assert "`lifeline verify` here names it" in done.stderr
        assert has_entry(_line(roots["a"]), json.loads(apart)["id"])  # the rest crossed
        assert not has_entry(_line(roots["a"]), backdated)
        assert not has_entry(_line(roots["a"]), child)
        # the next sync is no worse: A's new work reaches S, S is told again
        later = log_note(roots["a"], "later on a")
        again = cli("lifeline_mesh", roots["s"], "sync", address)
        assert has_entry(_line(roots["s"]), later) and "refused 1 item" in again.stderr
    assert proc.stderr is not None
    log = proc.stderr.read()
    assert "refused 1 item from" in log and "before its parent" in log, log
    assert has_entry(_line(roots["a"]), parent)
    verdict = cli("lifeline_mesh", roots["s"], "verify", "--json", check=False)
    assert "ts-before-parent" in verdict.stdout  # S's own audit names the entry
