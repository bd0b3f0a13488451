"""A hub serves a shallow join (decision 0081): two real `serve` processes of one hub node
on a real PostgreSQL database, over mutual TLS. A laptop fills the hub's line with history
through process B; a CI runner's `ci run` against process A takes the line shallow (the
truth in force, read through the line's truth API, signed by the hub's key), writes, and
pushes; its entry is admitted in the database, in the next job's context through A, and
served by process B: a new laptop's `join --shallow` through B holds it, with its author
signature, and `verify` is clean."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
from pathlib import Path

import pytest

from tests.support.ci_helpers import job
from tests.support.history_lines import fill_history_line
from tests.support.mesh_procs import cli, free_port, shared_node, start_ca_serve, terminate
from tests.support.pg_server import fresh_database
from tests.support.scrape import get, value

pytestmark = pytest.mark.slow

OLD_NOTES = 80  # more than the Recent section keeps: the oldest are history, not truth


def _mesh(root: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return cli("lifeline_mesh", root, *args, check=check)


def _hub_init(root: Path, url: str, *extra: str) -> None:
    root.mkdir(parents=True)
    _mesh(root, "hub", "init", "--store", url, *extra)
    shared_node(root)


def _join(root: Path, hub: Path, join_address: str) -> None:
    token = json.loads(_mesh(hub, "invite", "--json").stdout)["token"]
    shared_node(root)
    _mesh(root, "join", token, "--peer", join_address)


async def _fill(root: Path) -> None:
    """The laptop's line: a decision, old notes, a checkpoint, an open question."""
    await fill_history_line(root, OLD_NOTES)


def _count(line_file: Path, sql: str) -> int:
    conn = sqlite3.connect(f"file:{line_file}?mode=ro", uri=True)
    try:
        return int(conn.execute(sql).fetchone()[0])
    finally:
        conn.close()


def _ids(root: Path) -> set[str]:
    return {e["id"] for e in json.loads(cli("lifeline", root, "history", "--json").stdout)}


@pytest.mark.timeout(900)
def test_a_ci_job_joins_a_hub_shallow_and_the_other_process_serves_its_entry(
    pg_server: str, tmp_path: Path
) -> None:
    url = asyncio.run(fresh_database(pg_server))
    hub_a, hub_b = tmp_path / "hub-a", tmp_path / "hub-b"
    _hub_init(hub_a, url, "--new-mesh", "team")
    _hub_init(hub_b, url)
    hub_id = _mesh(hub_a, "id").stdout.strip()
    metrics_a = f"127.0.0.1:{free_port()}"
    proc_a, sync_a, join_a = start_ca_serve(hub_a, extra=["--metrics-listen", metrics_a])
    try:
        proc_b, sync_b, join_b = start_ca_serve(hub_b)
        try:
            laptop = tmp_path / "laptop"
            _join(laptop, hub_a, join_b)
            asyncio.run(_fill(laptop))
            _mesh(laptop, "sync", sync_b)  # the history reaches the database through B
            total = len(_ids(hub_a))
            assert total == OLD_NOTES + 3

            # a CI job against process A: shallow, its entry pushed
            token = json.loads(
                _mesh(hub_b, "invite", "--ci", "gha", "--address", join_a,
                      "--sync-address", sync_a, "--json").stdout
            )["token"]  # fmt: skip
            write = "lifeline log --kind test --summary 'CI: shallow on a hub' --json > id.txt"
            done = job(tmp_path / "job", token, "ci", "run", "--", "sh", "-c", write)
            assert done.returncode == 0, done.stderr
            assert "in force (shallow: no history)" in done.stderr, done.stderr
            assert "pushed line 'ledger' back" in done.stderr, done.stderr
            runner_line = tmp_path / "job" / ".lifeline" / "ledger.db"
            assert _count(runner_line, "SELECT count(*) FROM entries") < total
            assert _count(runner_line, "SELECT count(*) FROM shallow_boundary") >= 1
            context = (tmp_path / "job" / ".lifeline" / "ci" / "lifeline-context.md").read_text()
            assert "Database: PostgreSQL" in context and "Which queue for refunds?" in context
            written = json.loads((tmp_path / "job" / "id.txt").read_text())["id"]
            assert written in _ids(hub_b)  # admitted in the database

            # a second job against A: A's kept snapshot gave way to the line after the push
            again = job(tmp_path / "job2", token, "ci", "run", "--", "true")
            assert again.returncode == 0 and "shallow" in again.stderr, again.stderr
            context = (tmp_path / "job2" / ".lifeline" / "ci" / "lifeline-context.md").read_text()
            assert "CI: shallow on a hub" in context
            # process A counted each job's pull and push as sessions in (decision 0102)
            _, text = get(metrics_a, "/metrics")
            assert value(text, "lifeline_sessions_total", direction="in", outcome="ok") == 4
            assert value(text, "lifeline_entries_total", direction="in") == 1
            assert value(text, "lifeline_protocol_bytes_total", direction="out") > 1000

            # a new laptop joins and takes the line shallow through process B, in one
            # command: the job's entry is a tip there
            newcomer = tmp_path / "newcomer"
            token = json.loads(_mesh(hub_a, "invite", "--json").stdout)["token"]
            newcomer.mkdir()
            joined = _mesh(newcomer, "join", token, "--peer", join_b, "--shallow", sync_b, "--json")
            shallow = json.loads(joined.stdout)["lines"]
            assert [r["role"] for r in shallow] == ["shallow"], shallow
            held = _ids(newcomer)
            assert written in held and len(held) < total
            line_file = newcomer / ".lifeline" / "ledger.db"
            signed = _count(
                line_file,
                f"SELECT count(*) FROM attestations WHERE role = 'author'"
                f" AND subject = '{written}'",
            )
            assert signed == 1  # the runner's author signature came with it
            source = _count(line_file, "SELECT count(*) FROM meta WHERE key = 'shallow_source'")
            assert source == 1
            head = (
                sqlite3.connect(line_file)
                .execute("SELECT value FROM meta WHERE key = 'shallow_source'")
                .fetchone()[0]
            )
            assert f"node: {hub_id}" in json.loads(head)["head"]  # signed by the hub's key
            verify = _mesh(newcomer, "verify")
            assert verify.returncode == 0 and "shallow" in verify.stdout + verify.stderr
            context = cli("lifeline", newcomer, "context").stdout
            assert "Database: PostgreSQL" in context and "checkpoint billing" in context

            # the full laptop receives the job's entry through A, and verifies clean
            _mesh(laptop, "sync", sync_a)
            assert written in _ids(laptop)
            assert _mesh(laptop, "verify", "--require-signed").returncode == 0
        except BaseException:
            for name, proc in (("A", proc_a), ("B", proc_b)):  # say why a process is gone
                if proc.poll() is not None:
                    print(f"hub process {name} exited {proc.returncode}: {proc.communicate()[1]}")
            raise
        finally:
            terminate(proc_b)
    finally:
        terminate(proc_a)
