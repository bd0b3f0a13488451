"""A write the machine refuses half-way — the disk fills during the transaction, another
process keeps the write lock past our wait, the line file itself is read-only — is one line
saying what to do; the line still opens and verifies, and `serve` keeps serving.

The disk and the read-only file are real: the CLIs run in a private mount namespace
(`unshare -m`, root) on a small tmpfs or under a read-only bind mount; without it the test
skips on a laptop and fails under CI.
"""

from __future__ import annotations

import shlex
import sqlite3
import sys
from pathlib import Path

from lifeline.store.sqlite_open import store_failure
from tests.support.mesh_procs import cli, serve_insecure, shared_node
from tests.support.mount_ns import in_namespace, in_read_only, namespaces_work
from tests.support.needs import missing


def _needs_namespaces() -> None:
    if not namespaces_work():
        missing("needs unshare -m and mount (run as root) to give the line a small disk")


def _one_line(code: int, err: str) -> None:
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, (code, err)


def test_a_disk_that_fills_mid_write_says_free_space_and_keeps_the_line(tmp_path: Path) -> None:
    _needs_namespaces()
    source, project, outputs = tmp_path / "source", tmp_path / "project", tmp_path / "out"
    outputs.mkdir()
    body = tmp_path / "body.txt"
    body.write_text("x" * 60_000)
    shared_node(source)
    cli("lifeline", source, "log", "--kind", "note", "--summary", "big", "--body-file", str(body))
    project.mkdir()
    ll = [sys.executable, "-m", "lifeline", "--root", str(project)]
    lm = [sys.executable, "-m", "lifeline_mesh", "--root", str(project)]
    spare, filler = project / "spare", project / "filler"
    # the file opens (its -wal and -shm fit) but the 60 kB entry's pages do not
    setup = [
        f"mount -t tmpfs -o size=1m tmpfs {project}",
        " ".join(shlex.quote(a) for a in [*ll, "init"]) + " >/dev/null",
        " ".join(shlex.quote(a) for a in [*lm, "share", "ledger"]) + " >/dev/null",
        f"dd if=/dev/zero of={spare} bs=1k count=96 2>/dev/null",
        f"dd if=/dev/zero of={filler} bs=1k count=100000 2>/dev/null || true",
        f"rm {spare}",
    ]
    log = [*ll, "log", "--kind", "note", "--summary", "big", "--body-file", str(body)]
    with serve_insecure(source) as (_proc, address):
        logged, synced, _freed, verified, again = in_namespace(
            setup,
            outputs,
            log,
            [*lm, "sync", "--insecure", address],
            ["rm", str(filler)],
            [*ll, "verify"],
            log,
        )
    for code, _, err in (logged, synced):
        _one_line(code, err)
        assert "disk is full; free space and run it again" in err, err
    assert verified[0] == 0 and "all ids and parents verify" in verified[1], verified
    assert again[0] == 0, again  # once space is freed, the same write works


def test_a_read_only_line_file_says_so_and_reads_work(tmp_path: Path) -> None:
    _needs_namespaces()
    line = shared_node(tmp_path)
    cli("lifeline", tmp_path, "log", "--kind", "decision", "--summary", "Use SQLite")
    ll = [sys.executable, "-m", "lifeline", "--root", str(tmp_path)]
    file = shlex.quote(str(line))
    history, logged = in_namespace(
        [f"mount --bind {file} {file}", f"mount -o remount,bind,ro {file}"],
        tmp_path,
        [*ll, "history"],
        [*ll, "log", "--kind", "note", "--summary", "refused"],
    )
    assert history[0] == 0 and "Use SQLite" in history[1], history
    _one_line(logged[0], logged[2])
    assert "is read-only; reads work, make it writable" in logged[2], logged


def test_a_new_line_in_a_read_only_folder_says_read_only(tmp_path: Path) -> None:
    _needs_namespaces()
    shared_node(tmp_path)
    transcripts = Path(__file__).parents[1] / "fixtures" / "transcripts" / "claude-code"
    ll = [sys.executable, "-m", "lifeline", "--root", str(tmp_path)]
    ((code, _, err),) = in_read_only(
        tmp_path, [*ll, "sessions", "ingest", "--tool", "claude", str(transcripts)]
    )
    _one_line(code, err)
    assert "sessions.db" in err and "is read-only" in err, err
    assert "is it a lifeline line file" not in err, err


def test_a_lock_held_past_the_wait_names_the_holder_and_what_to_do(tmp_path: Path) -> None:
    """The 30 s wait itself is SQLite's busy timeout; what the error then says is ours."""
    path = tmp_path / "ledger.db"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("PRAGMA journal_mode = WAL")
    holder.execute("CREATE TABLE t (x)")
    holder.execute("BEGIN EXCLUSIVE")
    waiter = sqlite3.connect(path, isolation_level=None, timeout=0)
    try:
        waiter.execute("BEGIN IMMEDIATE")
        raise AssertionError("the write lock was not held")
    except sqlite3.OperationalError as exc:
        said = store_failure(path, exc, read_only=False)
    finally:
        waiter.close()
        holder.close()
    assert "another process held its write lock for over 30 s" in said, said
    assert f"`fuser {path}`" in said and "run it again" in said, said


def test_a_new_line_on_a_nearly_full_disk_says_disk_full(tmp_path: Path) -> None:
    """Room to open the file but not for its tables: the migration's failure is told, not
    the ROLLBACK of a transaction SQLite had already ended."""
    _needs_namespaces()
    project, outputs = tmp_path / "project", tmp_path / "out"
    project.mkdir()
    outputs.mkdir()
    ll = [sys.executable, "-m", "lifeline", "--root", str(project)]
    setup = [
        f"mount -t tmpfs -o size=1m tmpfs {project}",
        " ".join(shlex.quote(a) for a in [*ll, "init"]) + " >/dev/null",
        f"dd if=/dev/zero of={project}/spare bs=1k count=100 2>/dev/null",
        f"dd if=/dev/zero of={project}/filler bs=1k count=100000 2>/dev/null || true",
        f"rm {project}/spare",
    ]
    (code, _, err), (_, listed, _) = in_namespace(
        setup, outputs, [*ll, "--line", "second", "init"], ["ls", "-A", str(project / ".lifeline")]
    )
    _one_line(code, err)
    assert "is the disk full? Free space and run it again" in err, err
    assert "cannot rollback" not in err and "is it a lifeline line file" not in err, err
    assert "second.db" not in listed.split(), listed


def test_a_line_that_needs_an_upgrade_in_a_read_only_folder_says_how(tmp_path: Path) -> None:
    """A line made by an older version, read where it cannot be upgraded."""
    _needs_namespaces()
    line = shared_node(tmp_path)
    with sqlite3.connect(line) as conn:  # as before the newest ledger migration
        conn.execute(
            "DELETE FROM schema_migrations WHERE component = 'ledger' AND version = "
            "(SELECT max(version) FROM schema_migrations WHERE component = 'ledger')"
        )
    conn.close()
    ll = [sys.executable, "-m", "lifeline", "--root", str(tmp_path)]
    ((code, _, err),) = in_read_only(tmp_path, [*ll, "history"])
    _one_line(code, err)
    assert "needs a schema upgrade" in err and "where its folder is writable" in err, err
