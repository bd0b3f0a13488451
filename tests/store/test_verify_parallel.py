"""`lifeline verify` and `lifeline-mesh verify` in worker processes (issue 21): damage in
every worker's range is found and named, and the output is the serial audit's, byte for
byte (real CLI subprocesses on real SQLite files; the workers forced by environment)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import pty
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from lifeline.entry import Entry
from lifeline.store.sqlite import SqliteStore
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.notary.audit import audit_line
from lifeline_mesh.notary.rules import Policy
from lifeline_mesh.notary.signers import FileSigners
from tests.support.notary_corpus import CASES, NOTE_CASES, build

N = 300  # three workers: rows 1-100, 101-200, 201-300
SERIAL = {"LIFELINE_VERIFY_PARALLEL_MIN": str(10**9)}
PARALLEL = {"LIFELINE_VERIFY_PARALLEL_MIN": "0", "LIFELINE_VERIFY_WORKERS": "3"}


def run(
    root: Path, module: str, *args: str, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", module, "--root", str(root), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, **env},
    )


async def _fill(path: Path) -> list[Entry]:
    """A chain of N entries (each the parent of the next, so links cross every range)."""
    entries: list[Entry] = []
    for k in range(N):
        parents = (entries[-1].id,) if entries else ()
        ts = f"2026-03-01T{k // 3600:02d}:{k // 60 % 60:02d}:{k % 60:02d}.000000Z"
        entries.append(
            Entry.create(ts=ts, kind="note", summary=f"entry {k}", body="x", parents=parents)
        )
    async with await SqliteStore.open(path) as store:
        await store.append_many(entries)
    return entries


def _forged_id(conn: sqlite3.Connection, seq: int, parents: str) -> None:
    """Point the row at ``parents`` and give it the id its new content hashes to: only its
    parent link is wrong."""
    row = conn.execute(
        "SELECT kind, author, agent, provider, model, summary, body FROM entries WHERE seq = ?",
        (seq,),
    ).fetchone()
    kind, author, agent, provider, model, summary, body = row
    plist = json.loads(parents)
    fields = [kind, author, agent, provider, model, summary, body.strip(), *sorted(plist)]
    form = "v2\n" + "".join(f"{len(v.encode())}:{v}\n" for v in fields)
    new_id = hashlib.sha256(form.encode()).hexdigest()
    conn.execute("UPDATE entries SET parents = ?, id = ? WHERE seq = ?", (parents, new_id, seq))


@pytest.fixture
def damaged(tmp_path: Path) -> tuple[Path, list[Entry]]:
    """Damage of every kind in each of the three ranges, some of it out of stream order."""
    assert run(tmp_path, "lifeline", "init", env={}).returncode == 0
    db = tmp_path / ".lifeline" / "ledger.db"
    entries = asyncio.run(_fill(db))
    conn = sqlite3.connect(db)
    for base in (0, 100, 200):
        seq = base + 10
        conn.execute("UPDATE entries SET summary = 'edited' WHERE seq = ?", (seq,))  # tampered
        conn.execute("UPDATE entries SET parents = 'not json' WHERE seq = ?", (seq + 5,))
        conn.execute("UPDATE entries SET body = x'00ff10' WHERE seq = ?", (seq + 9,))  # blob
        _forged_id(conn, seq + 20, json.dumps(["f" * 64]))  # a parent stored nowhere
        _forged_id(conn, seq + 30, json.dumps(sorted(["e" * 64, entries[base].id])))
    # a tampered row whose height is text (it sorts after every number) and a corrupt row
    # with a blob ts, past the others' heights: the stream lists them last, in the middle
    # range they are not
    conn.execute("UPDATE entries SET height = 'zzz', summary = 'moved' WHERE seq = 150")
    conn.execute("UPDATE entries SET ts = x'01', height = 1000000 WHERE seq = 160")
    conn.commit()
    conn.close()
    return tmp_path, entries


def test_each_range_damage_is_found_and_the_output_is_the_serial_one(
    damaged: tuple[Path, list[Entry]],
) -> None:
    root, _entries = damaged
    for module, args in [
        ("lifeline", ()),
        ("lifeline", ("--json",)),
        ("lifeline_mesh", ()),
        ("lifeline_mesh", ("--json",)),
    ]:
        serial = run(root, module, "verify", *args, env=SERIAL)
        parallel = run(root, module, "verify", *args, env=PARALLEL)
        assert serial.returncode == parallel.returncode == 1, (serial.stderr, parallel.stderr)
        assert parallel.stdout == serial.stdout, (module, args)
    report = json.loads(run(root, "lifeline", "verify", "--json", env=PARALLEL).stdout)
    found = [(f["check"], f["entry_id"]) for f in report["findings"]]
    conn = sqlite3.connect(root / ".lifeline" / "ledger.db")
    id_of = dict(conn.execute("SELECT seq, id FROM entries"))
    conn.close()
    for base in (0, 100, 200):
        assert ("id-mismatch", id_of[base + 10]) in found
        assert ("corrupt-row", id_of[base + 15]) in found
        assert ("corrupt-row", id_of[base + 19]) in found
        assert ("missing-parent", id_of[base + 30]) in found
        assert ("missing-parent", id_of[base + 40]) in found
    checks = [c for c, _e in found]
    assert checks.index("corrupt-row") > max(i for i, c in enumerate(checks) if c == "id-mismatch")
    # stream order: the row moved past every height is the last id finding
    assert [e for c, e in found if c == "id-mismatch"][-1] == id_of[150]
    # the undecodable rows, the blob ts last; then the rows whose height is not a number
    assert [e for c, e in found if c == "corrupt-row"][-2:] == [id_of[160], id_of[150]]
    assert report["entries"] == N - 7  # six corrupt rows and the blob ts


def test_workers_are_started_only_from_the_threshold(damaged: tuple[Path, list[Entry]]) -> None:
    root, _entries = damaged
    started = run(root, "lifeline", "-v", "verify", env=PARALLEL)
    assert "worker processes" in started.stderr
    serial = run(root, "lifeline", "-v", "verify", env={"LIFELINE_VERIFY_WORKERS": "3"})
    assert "worker processes" not in serial.stderr  # 300 entries: under the default


def test_a_clean_line_verifies_in_workers(tmp_path: Path) -> None:
    assert run(tmp_path, "lifeline", "init", env={}).returncode == 0
    entries = asyncio.run(_fill(tmp_path / ".lifeline" / "ledger.db"))
    serial = run(tmp_path, "lifeline", "verify", env=SERIAL)
    parallel = run(tmp_path, "lifeline", "verify", env=PARALLEL)
    assert parallel.returncode == 0, parallel.stderr
    assert parallel.stdout == serial.stdout
    assert f"{len(entries)} entries, all ids and parents verify" in parallel.stdout
    mesh = run(tmp_path, "lifeline_mesh", "verify", "--json", env=PARALLEL)
    assert mesh.returncode == 0 and json.loads(mesh.stdout)["lines"][0]["unsigned"] == N


def test_text_that_is_not_utf8_fails_as_the_serial_audit_does(tmp_path: Path) -> None:
    assert run(tmp_path, "lifeline", "init", env={}).returncode == 0
    asyncio.run(_fill(tmp_path / ".lifeline" / "ledger.db"))
    conn = sqlite3.connect(tmp_path / ".lifeline" / "ledger.db")
    conn.execute("UPDATE entries SET body = CAST(x'c328ff' AS TEXT) WHERE seq = 250")
    conn.commit()
    conn.close()
    serial = run(tmp_path, "lifeline", "verify", env=SERIAL)
    parallel = run(tmp_path, "lifeline", "verify", env=PARALLEL)
    assert serial.returncode == parallel.returncode == 2
    assert parallel.stderr == serial.stderr
    assert "Could not decode to UTF-8" in parallel.stderr


@pytest.mark.parametrize("name", ["clean", *sorted(CASES), *sorted(NOTE_CASES)])
async def test_the_notary_audit_in_workers_finds_what_the_serial_one_finds(
    tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    corpus = await build(tmp_path)
    policy = Policy(local_node_id=corpus.a.node_id)
    async with await SqliteStore.open(corpus.path) as store:
        if name != "clean":
            await {**CASES, **NOTE_CASES}[name](corpus, store)
        signers = FileSigners.load(NodeHome(corpus.root), corpus.a.node_id)
        monkeypatch.setenv("LIFELINE_VERIFY_PARALLEL_MIN", str(10**9))
        serial = await audit_line(store, "ledger", signers, policy)
        monkeypatch.setenv("LIFELINE_VERIFY_PARALLEL_MIN", "0")
        monkeypatch.setenv("LIFELINE_VERIFY_WORKERS", "2")
        parallel = await audit_line(store, "ledger", signers, policy)
    assert parallel.findings == serial.findings
    assert parallel.counts() == serial.counts()


@pytest.mark.parametrize("module", ["lifeline", "lifeline_mesh"])
def test_progress_is_shown_on_a_terminal_and_not_with_json(tmp_path: Path, module: str) -> None:
    assert run(tmp_path, "lifeline", "init", env={}).returncode == 0
    asyncio.run(_fill(tmp_path / ".lifeline" / "ledger.db"))
    for args, shown in [((), True), (("--json",), False)]:
        main, child = pty.openpty()
        done = subprocess.run(
            [sys.executable, "-m", module, "--root", str(tmp_path), "verify", *args],
            stdout=subprocess.PIPE,
            stderr=child,
            timeout=120,
            check=False,
            env={**os.environ, **PARALLEL},
        )
        os.close(child)
        drawn = b""
        while True:
            try:
                chunk = os.read(main, 4096)
            except OSError:  # the terminal's other end is closed: all read
                break
            if not chunk:
                break
            drawn += chunk
        os.close(main)
        assert done.returncode == 0
        assert (b"\r\x1b[Kverifying line ledger [" in drawn) is shown  # redraws are throttled
        assert (f"/{N} (".encode() in drawn) is shown
        assert b"\x1b[K" not in done.stdout
