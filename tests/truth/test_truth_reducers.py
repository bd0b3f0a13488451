"""Reducers and views: table tests, the supersession fixpoint, the integrity gate, and the
truth of the ledger lifeline-context 0.6.1 wrote."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from lifeline.entry import Entry
from lifeline.store.memory import MemoryStore
from lifeline.store.sqlite import SqliteStore
from lifeline.truth.parse import checkpoint_body, parse_checkpoint, pin_target, thread_of
from lifeline.truth.reducers import fold_all, why_excerpt
from lifeline.truth.service import read_truth, resume_of
from lifeline.truth.views import derive
from tests.support.entries import make_entry

PG = "173e8ad0f91dea8256f0000094635217055cbb9aa12e7075ad0677d690bb5a50"
REDIS = "584d0d181f11617bd98eecb258d86f595a5912250b7c0534964ff6fc47e86a03"
MEMCACHED = "fd659860a54973471a2bbe95308bd21fa44cd08974b65328c2dd934412cf7d83"
QUEUE = "b5ef0c96591cd9008727582402db6057ceee875dd4da37c33d54142838b8c35d"


@pytest.mark.parametrize(
    ("body", "thread"),
    [
        ("thread: main\nnext:\n  - x", "main"),
        ("intro\nthread:   spaced name  \n", "spaced name"),
        ("no thread here", None),
        ("thread:\nnext:", None),
    ],
)
def test_thread_of(body: str, thread: str | None) -> None:
    assert thread_of(body) == thread


@pytest.mark.parametrize(
    ("kind", "body", "target"),
    [
        ("note", "pin: " + PG + "\n\nfoundational", PG),
        ("decision", "pin: " + PG, None),
        ("note", "pin: nothex", None),
        ("note", "text\npin: " + PG, None),
    ],
)
def test_pin_target(kind: str, body: str, target: str | None) -> None:
    assert pin_target(kind, body) == target


def test_checkpoint_round_trip_and_inline_values() -> None:
    body = checkpoint_body("t", {"next": ["a  b", ""], "blocked": ["c"], "goal": ["g"]})
    assert body == "thread: t\ngoal:\n  - g\nnext:\n  - a b\nblocked:\n  - c"
    cp = parse_checkpoint(body)
    assert cp.thread == "t"
    assert cp.blocks == {"goal": ("g",), "next": ("a b",), "blocked": ("c",)}
    assert parse_checkpoint("thread: x\nnext: inline one\nnotes:\n  - not a block").blocks == {
        "next": ("inline one",)
    }


def test_why_excerpt_drops_origin_and_caps() -> None:
    assert why_excerpt("why\n\norigin:\n  line: r\n  id: x") == "why"
    assert len(why_excerpt("w " * 500, 50)) == 50


def _chain(*specs: tuple[str, str, tuple[int, ...]]) -> list[Entry]:
    out: list[Entry] = []
    for n, (kind, summary, parents) in enumerate(specs):
        ts = f"2026-01-01T00:00:{n:02d}Z"
        out.append(make_entry(summary, tuple(out[p].id for p in parents), kind=kind, ts=ts))
    return out


def test_reverting_a_reversal_restores_the_original() -> None:
    d, c1, c2 = _chain(
        ("decision", "use A", ()), ("correction", "use B", (0,)), ("correction", "undo", (1,))
    )
    truth = derive(fold_all([d, c1]))
    assert truth.decisions == [c1.id] and truth.superseded == {d.id: c1.id}
    truth = derive(fold_all([d, c1, c2]))
    assert d.id in truth.decisions and c1.id not in truth.decisions
    assert truth.superseded == {c1.id: c2.id}
    c3 = make_entry("redo", (c2.id,), kind="correction", ts="2026-01-01T00:01:00Z")
    truth = derive(fold_all([d, c1, c2, c3]))
    assert truth.decisions == [c1.id] and set(truth.superseded) == {d.id, c2.id}


def test_open_items_checkpoints_and_pins() -> None:
    o, cp1, cp2, pin, cp2fix = _chain(
        ("open", "queue?", ()),
        ("checkpoint", "cp1", (0,)),
        ("checkpoint", "cp2", (1,)),
        ("note", "pin", (0,)),
        ("correction", "cp2 was wrong", (2,)),
    )
    cp1 = replace(cp1, body=f"thread: {o.id}\nnext:\n  - a")
    cp2 = replace(cp2, body=f"thread: {o.id}\nnext:\n  - b")
    cp1, cp2 = (Entry.create(**_fields(e)) for e in (cp1, cp2))
    pin = Entry.create(**(_fields(pin) | {"body": f"pin: {o.id}", "parents": (o.id,)}))
    fix = Entry.create(**(_fields(cp2fix) | {"parents": (cp2.id,)}))
    truth = derive(fold_all([o, cp1, cp2, pin]))
    assert truth.open == [o.id] and truth.resume == {o.id: cp2.id}
    assert truth.pinned == [o.id] and truth.pin_notes == {o.id: [pin.id]}
    truth = derive(fold_all([o, cp1, cp2, pin, fix]))
    assert truth.resume == {o.id: cp1.id}  # the live checkpoint falls back
    unpin = make_entry("unpin", (pin.id,), kind="correction", ts="2026-01-02T00:00:00Z")
    assert derive(fold_all([o, cp1, cp2, pin, unpin])).pinned == []


def _fields(e: Entry) -> dict[str, Any]:
    d = e.to_dict()
    d.pop("id")
    return d


def test_counters_and_integrity_gate() -> None:
    a, b = _chain(("decision", "A", ()), ("note", "B", (0,)))
    tampered = replace(b, summary="B, altered")
    state = fold_all([a, tampered])
    assert state.count == 2
    assert state.integrity == {b.id: tampered.expected_id()}
    assert state.kinds == {"decision": 1}
    assert state.contributors == {"none/human": 1}
    assert [i for _t, i in state.recent] == [a.id]


async def _fixture_store(lc_expected: dict[str, list[dict[str, Any]]], store: Any) -> Any:
    await store.declare_external(lc_expected["research"][0]["id"], "research")
    await store.append_many([Entry.from_dict(e) for e in lc_expected["ledger"]])
    return store


@pytest.mark.parametrize("adapter", ["memory", "sqlite"])
async def test_truth_of_the_lifeline_context_fixture(
    lc_expected: dict[str, list[dict[str, Any]]], adapter: str, tmp_path: Any
) -> None:
    store = MemoryStore() if adapter == "memory" else await SqliteStore.open(tmp_path / "l.db")
    await _fixture_store(lc_expected, store)
    lt = await read_truth(store)
    t = lt.truth
    assert PG in t.decisions and REDIS not in t.decisions
    assert t.superseded[REDIS] == MEMCACHED and MEMCACHED in t.decisions
    assert t.open == [QUEUE]
    assert t.pinned == [PG]
    assert set(t.resume) == {"main", QUEUE}
    assert lt.state.integrity == {}
    rows = {r["thread"]: r for r in await resume_of(store)}
    assert rows["main"]["blocks"] == {
        "done": ["wrote the harness"],
        "next": ["run the load test on the PIX path"],
        "tried": ["SQS FIFO — the 300 msg/s cap is too low"],
    }
    assert rows[QUEUE]["label"] == "Queue: SQS vs RabbitMQ"
    assert rows[QUEUE]["blocks"] == {"next": ["compare costs"], "blocked": ["waiting on AWS quota"]}
    await store.close()


def test_two_corrections_of_one_decision_both_stand_in_for_it() -> None:
    d, c1, c2 = _chain(
        ("decision", "use A", ()), ("correction", "use B", (0,)), ("correction", "use C", (0,))
    )
    truth = derive(fold_all([d, c1, c2]))
    assert truth.decisions == [c1.id, c2.id] and d.id in truth.superseded
    fix_open = _chain(("open", "which queue?", ()), ("correction", "broker: Rabbit", (0,)))
    assert derive(fold_all(fix_open)).open == []  # a correction of an open closes it
