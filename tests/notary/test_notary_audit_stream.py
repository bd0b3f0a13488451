"""The streaming audit (issue 21): the same findings, in the same order, as the rules over
the whole line held in memory; its report written as one JSON document byte for byte; and
`lifeline-mesh verify` in memory that does not grow with the line (a real subprocess)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lifeline.audit.line import verify_store
from lifeline.store.sqlite import SqliteStore
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.notary import findings_log
from lifeline_mesh.notary.audit import LineReport, audit_line, write_json
from lifeline_mesh.notary.findings_log import FindingLog
from lifeline_mesh.notary.rules import Finding, Policy, Verdict, check_attestations
from lifeline_mesh.notary.signers import FileSigners
from lifeline_mesh.notary.storage import NotaryStore
from tests.support.entries import reasons_chain
from tests.support.notary_corpus import CASES, NOTE_CASES, build


async def _whole_line(store: SqliteStore, policy: Policy, signers: FileSigners) -> list[Finding]:
    """What the audit found before it streamed: the ledger's findings, then the rules over
    every entry and item held at once."""
    base = await verify_store(store, "ledger")
    entries = [e async for e in store.stream()]
    notary = await NotaryStore.attach(store)
    items = await notary.items() + await notary.statements().items()
    verdict = check_attestations(entries, items, signers, policy)
    return [Finding(f.check, f.entry_id, f.detail) for f in base.findings] + verdict.findings


@pytest.mark.parametrize("name", ["clean", *sorted(CASES), *sorted(NOTE_CASES)])
async def test_the_streaming_audit_finds_what_the_whole_line_rules_find(
    tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(findings_log, "IN_MEMORY", 2)  # spill to the file as well
    corpus = await build(tmp_path)
    policy = Policy(local_node_id=corpus.a.node_id)
    async with await SqliteStore.open(corpus.path) as store:
        if name != "clean":
            await {**CASES, **NOTE_CASES}[name](corpus, store)
        signers = FileSigners.load(NodeHome(corpus.root), corpus.a.node_id)
        report = await audit_line(store, "ledger", signers, policy)
        expected = await _whole_line(store, policy, signers)
    assert report.findings == expected
    assert report.ok == (not [f for f in expected if f.severity == "fail"])


def test_the_findings_log_reads_back_in_section_order_past_its_memory(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(findings_log, "IN_MEMORY", 3)
    log = FindingLog(("first", "second"))
    later = [Finding("unsigned", f"{i:064x}", "d", "note") for i in range(7)]
    log.extend(later, "second")
    log.add(Finding("bad-signature", "ab" * 32, "forged"), "first")
    log.extend_same("unsigned", "d", "note", [f"{i:064x}" for i in range(7, 12)], "second")
    found = list(log)
    assert found[0].check == "bad-signature" and [f.subject for f in found[1:]] == [
        f"{i:064x}" for i in range(12)
    ]
    assert (log.count, log.fails, log.notes["unsigned"]) == (13, 1, 12)
    assert log.examples("unsigned") == [f"{i:064x}" for i in range(3)]
    assert [f.check for f in log.failures()] == ["bad-signature"]
    log.close()


def test_the_json_report_is_the_document_json_dumps_would_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(findings_log, "IN_MEMORY", 2)
    reports = []
    for name, count in (("a", 5), ("b", 0), ("c", 1)):
        log = FindingLog(("x",))
        for i in range(count):
            log.add(Finding("unsigned", f"{i:064x}", 'quote " and ünïcode\nline', "note"), "x")
        reports.append(LineReport(name, Verdict(entries=count, unsigned=count), log))
    out = tmp_path / "report.json"
    with out.open("w") as stream:
        write_json(stream, {"ok": True, "node_id": None}, reports)
    doc = {"ok": True, "node_id": None, "lines": [r.to_dict() for r in reports]}
    assert out.read_text() == json.dumps(doc, ensure_ascii=False, indent=2, sort_keys=True) + "\n"


async def _line_of(root: Path, n: int) -> None:
    """``n`` unsigned entries of ~4 KB in a chain (no node identity: each is a note)."""
    (root / ".lifeline").mkdir(parents=True)
    async with await SqliteStore.open(root / ".lifeline" / "ledger.db") as store:
        for batch in reasons_chain(n):
            await store.append_many(batch)


def _peak_kb(root: Path, *args: str) -> tuple[int, str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "lifeline_mesh", "--root", str(root), "verify", *args],
        stdout=subprocess.PIPE,
        text=True,
    )
    out = proc.stdout.read() if proc.stdout else ""
    _pid, status, usage = os.wait4(proc.pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, out
    return usage.ru_maxrss, out


async def test_verify_memory_does_not_grow_with_the_line(tmp_path: Path) -> None:
    """Four times the entries (~120 MB more text than the small line) cost a few MB: the
    audit held every entry (and a finding for each) before it streamed."""
    small, large = tmp_path / "small", tmp_path / "large"
    await _line_of(small, 8_000)
    await _line_of(large, 32_000)
    small_kb, _ = _peak_kb(small)
    large_kb, text = _peak_kb(large)
    assert "32000 entries (0 signed, 0 imported, 32000 unsigned)" in text
    assert "note: unsigned x32000" in text
    assert large_kb - small_kb < 25_000, (small_kb, large_kb)
    json_kb, _ = _peak_kb(large, "--json")
    assert json_kb - small_kb < 25_000, (small_kb, json_kb)
