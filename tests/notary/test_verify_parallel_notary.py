"""`lifeline-mesh verify` in worker processes (decision 0041): the notary's forward pass
reads the stream's index after the workers, and judges an entry against its parents only
when a worker lists it as late. The report must be the serial audit's, finding for
finding, on a line whose entries are signed, imported and unsigned, dated before their
parents (beyond and within the skew), with times not in the stored form, parents far back,
in other ranges, later in the table or missing, and damage in every range."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

import pytest

from lifeline.audit import parallel as audit_parallel
from lifeline.audit import worker as audit_worker
from lifeline.audit.worker import LateCheck, check_range, connect
from lifeline.entry import Entry
from lifeline.store.sqlite import SqliteStore
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.notary.audit import audit_line
from lifeline_mesh.notary.rules import Policy
from lifeline_mesh.notary.signers import FileSigners
from lifeline_mesh.notary.statement import Role, sign
from lifeline_mesh.notary.storage import NotaryStore
from tests.support.notary_corpus import Corpus, at, build

N = 300
SERIAL = {"LIFELINE_VERIFY_PARALLEL_MIN": str(10**9)}
PARALLEL = {"LIFELINE_VERIFY_PARALLEL_MIN": "0", "LIFELINE_VERIFY_WORKERS": "3"}


def _ts(k: int) -> str:
    return at(3_600 + 10 * k)


async def _grow(corpus: Corpus, store: SqliteStore, *, signed: bool) -> list[Entry]:
    """N entries after the corpus: a chain, every 7th also linked far back, some dated
    before their parent (by hours, or by less than the skew), some signed or imported."""
    entries: list[Entry] = []
    tip = corpus.entries[-1].id
    for k in range(N):
        parents = [entries[-1].id if entries else tip]
        if k % 7 == 3 and k > 20:
            parents.append(entries[k - 20].id)
        ts = _ts(k)
        if k % 23 == 5:
            ts = at(3_600 + 10 * k - 7_200)  # two hours before its parent: a backdate
        elif k % 23 == 9:
            ts = at(3_600 + 10 * k - 15)  # before its parent, within the skew
        entries.append(
            Entry.create(ts=ts, kind="note", summary=f"entry {k}", body="x", parents=parents)
        )
    await store.append_many(entries)
    if not signed:
        return entries
    notary = await NotaryStore.attach(store)
    atts = []
    for k, entry in enumerate(entries):
        if k % 5 == 0:
            atts.append(sign(corpus.a, Role.AUTHOR, entry.id, entry.ts))
        elif k % 11 == 1:
            atts.append(sign(corpus.a, Role.IMPORTED, entry.id, at(90_000), entry.ts))
    await notary.add(atts)
    return entries


def _forged_id(conn: sqlite3.Connection, seq: int, parents: list[str]) -> None:
    """Point the row at ``parents`` with the id its content then hashes to."""
    row = conn.execute(
        "SELECT kind, author, agent, provider, model, summary, body FROM entries WHERE seq = ?",
        (seq,),
    ).fetchone()
    kind, author, agent, provider, model, summary, body = row
    fields = [kind, author, agent, provider, model, summary, body.strip(), *sorted(parents)]
    form = "v2\n" + "".join(f"{len(v.encode())}:{v}\n" for v in fields)
    new_id = hashlib.sha256(form.encode()).hexdigest()
    conn.execute(
        "UPDATE entries SET parents = ?, id = ? WHERE seq = ?",
        (json.dumps(sorted(parents)), new_id, seq),
    )


def _damage(path: Path) -> None:
    conn = sqlite3.connect(path)
    first = conn.execute("SELECT min(seq) FROM entries WHERE summary = 'entry 0'").fetchone()[0]
    id_of = dict(conn.execute("SELECT seq, id FROM entries"))
    for base in (first + 20, first + 120, first + 220):
        conn.execute("UPDATE entries SET summary = 'edited' WHERE seq = ?", (base,))
        conn.execute("UPDATE entries SET parents = 'not json' WHERE seq = ?", (base + 1,))
        conn.execute("UPDATE entries SET body = x'00ff10' WHERE seq = ?", (base + 2,))
        # times not in the stored form: longer, and as long but with a space
        conn.execute(
            "UPDATE entries SET ts = '2026-01-10T11:00:00.000000+00:00' WHERE seq = ?", (base + 3,)
        )
        conn.execute(
            "UPDATE entries SET ts = '2026-01-10 12:00:00.000000Z' WHERE seq = ?", (base + 4,)
        )
        conn.execute("UPDATE entries SET ts = ? WHERE seq = ?", (at(-60), base + 6))  # signed?
        # shorter than the stored form (read as a time), and not a time at all
        conn.execute("UPDATE entries SET ts = '2026-01-10T11:00:00Z' WHERE seq = ?", (base + 5,))
        conn.execute("UPDATE entries SET ts = 'soon' WHERE seq = ?", (base + 12,))
        _forged_id(conn, base + 8, [id_of[base + 40], "f" * 64])  # later in the table; missing
        _forged_id(conn, base + 9, [id_of[first + 2], id_of[base + 7]])  # far back
    conn.commit()
    conn.close()


async def _line(root: Path, *, signed: bool) -> Corpus:
    corpus = await build(root)
    async with await SqliteStore.open(corpus.path) as store:
        await _grow(corpus, store, signed=signed)
    _damage(corpus.path)
    return corpus


@pytest.fixture
async def line(tmp_path: Path) -> Corpus:
    return await _line(tmp_path, signed=True)


@pytest.mark.parametrize(
    ("signed", "require_signed", "late_max"),
    [(True, False, None), (True, True, None), (False, False, None), (False, True, None),
     (True, False, 10), (False, False, 10)],
)  # fmt: skip
async def test_the_notary_audit_in_workers_is_the_serial_one(
    tmp_path: Path,
    signed: bool,
    require_signed: bool,
    late_max: int | None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Signed: most pages judged entry by entry; unsigned (but for the corpus's first
    entries, on the first page): pages of runs of unsigned notes. With ``late_max``, more
    late entries than the parent keeps: every entry's parents read."""
    monkeypatch.setattr(audit_parallel, "PAGE", 100)
    if late_max is not None:
        monkeypatch.setattr(audit_parallel, "LATE_MAX", late_max)
    line = await _line(tmp_path, signed=signed)
    policy = Policy(local_node_id=line.a.node_id, require_signed=require_signed)
    signers = FileSigners.load(NodeHome(line.root), line.a.node_id)
    async with await SqliteStore.open(line.path) as store:
        for key, value in SERIAL.items():
            monkeypatch.setenv(key, value)
        serial = await audit_line(store, "ledger", signers, policy)
        for key, value in PARALLEL.items():
            monkeypatch.setenv(key, value)
        parallel = await audit_line(store, "ledger", signers, policy)
    assert parallel.findings == serial.findings
    assert parallel.counts() == serial.counts()
    checks = {f.check for f in serial.findings}
    assert {
        "ts-before-parent",
        "unsigned",
        "corrupt-row",
        "id-mismatch",
        "missing-parent",
        "ts-unreadable",
    } <= checks
    before = {f.severity for f in serial.findings if f.check == "ts-before-parent"}
    if signed:
        assert {"ts-mismatch", "imported"} <= checks
        assert before == {"fail", "note"} or require_signed
        assert parallel.verdict.signed > 50 and parallel.verdict.imported > 10
    else:
        assert before == {"fail" if require_signed else "note"}
        assert parallel.verdict.unsigned > 250


def test_a_worker_lists_every_entry_that_may_be_after_a_parent(
    line: Corpus, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The late list is a superset of the entries with a parent rule to judge: a parent
    dated after the entry, a time not in the stored form, or a parent not at hand (here
    past a window of 8 entries, or in another range)."""
    monkeypatch.setattr(audit_worker, "RECENT", 8)
    conn = connect(line.path)
    lo, hi = conn.execute("SELECT min(seq) - 1, max(seq) FROM entries").fetchone()
    listed: list[str] = []
    for start, end in ((lo, lo + 150), (lo + 150, hi)):
        late = LateCheck()
        records: list[tuple[object, ...]] = []
        check_range(conn, start, end, records.extend, late)
        listed += [i for r in records if r[0] == "late" for i in r[1]]  # type: ignore[attr-defined]
    ts_of = {i: t for i, t in conn.execute("SELECT id, ts FROM entries") if type(t) is str}
    must = set()
    for eid, ts, parents in conn.execute("SELECT id, ts, parents FROM entries"):
        try:
            plist = json.loads(parents)
        except ValueError:
            continue  # a corrupt row: not in the stream
        for parent in plist:
            other = ts_of.get(parent)
            if other is not None and (other > ts or len(other) != 27 or len(ts) != 27):
                must.add(eid)
    conn.close()
    assert len(must) > 20
    assert must <= set(listed)
    assert len(set(listed)) < N  # not every entry: most are judged without their parents
