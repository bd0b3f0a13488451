"""`lifeline-mesh verify` on a hub's line streams as on a line file (decision 0110): the
same findings in the same order as the laptop's streaming audit over the same rows, and as
the rules over the whole line held at once (what a hub's verify did before), for every
kind of finding; and memory that does not grow with the line, measured on a real
`lifeline-mesh verify` subprocess on a real hub root. A real PostgreSQL server."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from lifeline.audit.line import verify_store
from lifeline.entry import Entry
from lifeline.store import postgres
from lifeline.store.pg_lines import PgLines
from lifeline.store.postgres import PgDatabase, PgStore
from lifeline.store.sqlite import SqliteStore
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.notary import audit_reads, findings_log, pg_audit_reads
from lifeline_mesh.notary.audit import LineReport, audit_line
from lifeline_mesh.notary.pg_schema import PG_NOTARY
from lifeline_mesh.notary.pg_storage import PgNotaryStore
from lifeline_mesh.notary.provenance import Outcome, SourceRow, record
from lifeline_mesh.notary.rules import Finding, Policy, check_attestations
from lifeline_mesh.notary.signers import FileSigners
from tests.support.entries import reasons_chain
from tests.support.hub_corpus import copy_to_hub
from tests.support.hub_roots import life, mesh
from tests.support.notary_corpus import CASES, NOTE_CASES, Corpus, at, build
from tests.support.pg_server import fresh_database, line_name

SOURCE_CHECKS = {"refused-copy", "replaced-copy", "unsigned-source"}


async def _sources(c: Corpus, store: SqliteStore) -> set[str]:
    """Who sent what, as a receiving node records it: a refused copy, a replaced one, and
    a sender of an entry that still has no author signature."""
    rows = [
        SourceRow(c.entries[1].id, at(1), "peer-x", Outcome.REFUSED, at(900), "its ts unsigned"),
        SourceRow(c.entries[2].id, at(2), "peer-y", Outcome.REPLACED, at(901), "signed later"),
        SourceRow("f" * 64, at(3), "peer-x", Outcome.UNSIGNED, at(902), ""),
    ]
    await store.run_write(lambda conn: record(conn, rows))
    return SOURCE_CHECKS


ALL_CASES = {**CASES, **NOTE_CASES, "sources": _sources}


@pytest.fixture
async def database(pg_server: str) -> AsyncIterator[PgDatabase]:
    db = await PgDatabase.connect(pg_server, migrations=PG_NOTARY)
    try:
        yield db
    finally:
        await db.close()


async def _whole_line(hub: PgStore, signers: FileSigners, policy: Policy) -> list[Finding]:
    """What a hub's verify found before it streamed: the ledger's findings, then the rules
    over every entry and item of the hub's line held at once."""
    base = await verify_store(hub, "ledger")
    entries = [e async for e in hub.stream()]
    notary = PgNotaryStore(hub)
    items = [*await notary.items(), *await notary.statements().items()]
    verdict = check_attestations(entries, items, signers, policy)
    return [Finding(f.check, f.entry_id, f.detail) for f in base.findings] + verdict.findings


@pytest.mark.parametrize("name", ["clean", *sorted(ALL_CASES)])
async def test_a_hub_line_is_audited_as_the_same_line_file(
    database: PgDatabase, tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Pages of two or three rows: every keyset page and lookup is crossed, on both backends.
    monkeypatch.setattr(findings_log, "IN_MEMORY", 2)
    for module in (audit_reads, pg_audit_reads):
        monkeypatch.setattr(module, "ITEM_PAGE", 2)
        monkeypatch.setattr(module, "REVERSE_PAGE", 3)
    monkeypatch.setattr(postgres, "PAGE", 3)
    corpus = await build(tmp_path)
    policy = Policy(local_node_id=corpus.a.node_id)
    hub = await database.line(line_name())
    async with await SqliteStore.open(corpus.path) as store:
        expected_checks = await ALL_CASES[name](corpus, store) if name != "clean" else set()
        signers = FileSigners.load(NodeHome(corpus.root), corpus.a.node_id)
        laptop = await audit_line(store, "ledger", signers, policy)
        await copy_to_hub(store, hub)
    hub_report: LineReport = await audit_line(hub, "ledger", signers, policy)
    whole = await _whole_line(hub, signers, policy)
    assert expected_checks <= {f.check for f in hub_report.findings}
    assert hub_report.findings == laptop.findings
    assert [f for f in hub_report.findings if f.check not in SOURCE_CHECKS] == whole
    assert hub_report.verdict.to_dict() == laptop.verdict.to_dict()
    assert (hub_report.ok, hub_report.log.fails) == (laptop.ok, laptop.log.fails)


async def test_a_hub_verify_tells_its_progress_as_a_laptop_does(
    database: PgDatabase, tmp_path: Path
) -> None:
    """``advance`` hears of every page of entries as it is judged, 2,000 at a time, as on
    the line file the same entries are in (the progress bar of `verify`)."""
    entries: list[Entry] = []
    for i in range(5_000):
        parents = (entries[-1].id,) if entries else ()
        ts = f"2026-01-01T00:{i // 3600 % 60:02d}:{i // 60 % 60:02d}.{i % 60:06d}Z"
        entries.append(Entry.create(ts=ts, kind="note", summary=f"n{i}", parents=parents))
    hub = await database.line(line_name())
    heard: dict[str, list[int]] = {"laptop": [], "hub": []}
    async with await SqliteStore.open(tmp_path / "line.db") as store:
        await store.append_many(entries)
        laptop = await audit_line(store, "ledger", FileSigners([]), Policy(),
                                  advance=heard["laptop"].append)  # fmt: skip
        await copy_to_hub(store, hub)
    report = await audit_line(hub, "ledger", FileSigners([]), Policy(), advance=heard["hub"].append)
    assert heard["hub"] == heard["laptop"] == [2_000, 2_000, 1_000]
    assert report.verdict.to_dict() == laptop.verdict.to_dict()
    assert report.verdict.unsigned == 5_000


# -- memory: a real `lifeline-mesh verify` on a real hub root ----------------------------

# The verify process's own high-water mark (VmHWM: since its exec, not the pages of the
# process that started it), written to stderr at exit.
_PEAK = (
    "import atexit, runpy, sys\n"
    "def peak():\n"
    "    for line in open('/proc/self/status'):\n"
    "        if line.startswith('VmHWM:'):\n"
    "            sys.stderr.write('PEAK ' + line.split()[1] + '\\n')\n"
    "atexit.register(peak)\n"
    "sys.argv = ['lifeline-mesh', *sys.argv[1:]]\n"
    "runpy.run_module('lifeline_mesh', run_name='__main__')\n"
)


def _verify_peak_kb(root: Path) -> tuple[int, dict[str, object]]:
    done = subprocess.run(
        [sys.executable, "-c", _PEAK, "--root", str(root), "verify", "--json"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    peak = [ln for ln in done.stderr.splitlines() if ln.startswith("PEAK ")]
    return int(peak[-1].split()[1]), json.loads(done.stdout)


async def _fill(url: str, n: int) -> None:
    """``n`` unsigned entries of ~4 KB in a chain, through the hub's own writes (its
    truth tables folded by each append, as `serve` and the CLI keep them)."""
    lines = PgLines(url)
    async with lines.open("ledger") as store:
        for batch in reasons_chain(n):
            await store.append_many(batch)
    db = lines.connected
    assert db is not None
    await db.close()


def _hub_root_of(pg_server: str, root: Path, n: int) -> None:
    url = asyncio.run(fresh_database(pg_server))
    root.mkdir()
    mesh(root, "hub", "init", "--store", url, "--json")
    life(root, "init")
    asyncio.run(_fill(url, n))


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_hub_verify_memory_does_not_grow_with_the_line(pg_server: str, tmp_path: Path) -> None:
    """Four times the entries (~100 MB more text) cost a few MB: the hub's verify held
    every entry of the line (and its items) at once before it streamed."""
    small, large = tmp_path / "small", tmp_path / "large"
    _hub_root_of(pg_server, small, 6_000)
    _hub_root_of(pg_server, large, 24_000)
    small_kb, _ = _verify_peak_kb(small)
    large_kb, report = _verify_peak_kb(large)
    (line,) = report["lines"]  # type: ignore[misc]
    assert (line["entries"], line["unsigned"], line["ok"]) == (24_000, 24_000, True)
    assert large_kb - small_kb < 25_000, (small_kb, large_kb)
