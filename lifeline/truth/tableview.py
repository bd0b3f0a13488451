"""Reading the truth tables (:mod:`lifeline.truth.table`): the whole state, or only what a
context shows.

:func:`truth_of` computes the same :class:`~lifeline.truth.views.Truth` as
:func:`~lifeline.truth.views.derive` on the full fold, from the stored roles and
supersession: the lists of ids in force are read from an index, in order. :func:`shown_state`
then loads the items a context can quote (the ends of the decisions, the newest open items,
pins, the identity, thread labels), so the assembly reads the same values it would read
from the whole state, and memory stays bounded by the budget, not by the line.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable, Iterable, Sequence

from lifeline.truth.order_memo import OrderMemo
from lifeline.truth.state import Item, State
from lifeline.truth.table import read_core
from lifeline.truth.views import Truth

__all__ = [
    "ItemMemo",
    "ends",
    "full_state",
    "pinned_order",
    "pins_in_force",
    "shown_state",
    "thread_names",
    "truth_of",
]

_VARS = 500
ITEMS_KEPT = 100_000  # items an ItemMemo holds before it starts again


def _chunks(ids: Sequence[str]) -> Iterable[tuple[str, list[str]]]:
    for start in range(0, len(ids), _VARS):
        part = list(ids[start : start + _VARS])
        yield ",".join("?" * len(part)), part


class ItemMemo:
    """Tracked items read from ``truth_items``, kept between reads of one line (a line's
    memo, :mod:`lifeline.truth.memo`, holds one). An item is a function of its entry's
    content, which its id hashes, but for its ts: a lowered ts is an UPDATE of the entry,
    which bumps ``truth_generation``, as does a rebuild of the tables (after `verify` found
    a row that lies), so the kept items belong to one generation. Reads
    of the line may run at once on several connections (threads): a lock keeps a read of
    an older generation from filing its items under a newer one."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._generation: int | None = None
        self._items: dict[str, Item] = {}
        # what is in force, in order, on a hub's line (lifeline/truth/pg_view.py)
        self.order = OrderMemo()

    def read(self, conn: sqlite3.Connection, ids: Iterable[str]) -> dict[str, Item]:
        """The items of ``ids`` (those that exist) as ``conn``'s transaction sees them."""
        row = conn.execute("SELECT n FROM truth_generation").fetchone()
        generation = None if row is None else int(row[0])
        out, missing = self.kept(generation, ids)
        fresh = _items(conn, missing)
        self.keep(generation, fresh)
        out.update(fresh)
        return out

    def kept(self, generation: int | None, ids: Iterable[str]) -> tuple[dict[str, Item], set[str]]:
        """The items of ``ids`` kept for ``generation`` (of the tables, whatever their
        database), and the ids to read."""
        wanted = set(ids)
        with self._lock:
            if generation != self._generation or len(self._items) >= ITEMS_KEPT:
                self._items = {}
                self._generation = generation
            out = {i: self._items[i] for i in wanted if i in self._items}
        return out, wanted.difference(out)

    def keep(self, generation: int | None, fresh: dict[str, Item]) -> None:
        """Items read in a transaction that saw ``generation``."""
        with self._lock:
            if generation == self._generation:
                self._items.update(fresh)


def _items(conn: sqlite3.Connection, ids: Iterable[str]) -> dict[str, Item]:
    out: dict[str, Item] = {}
    for marks, part in _chunks(sorted(set(ids))):
        for i, kind, ts, summary, why, thread in conn.execute(
            f"SELECT id, kind, ts, summary, why, thread FROM truth_items WHERE id IN ({marks})",
            part,
        ):
            out[i] = [kind, ts, summary, why, thread]
    return out


def _read_items(
    conn: sqlite3.Connection, ids: Iterable[str], known: ItemMemo | None
) -> dict[str, Item]:
    return known.read(conn, ids) if known is not None else _items(conn, ids)


def _ids(conn: sqlite3.Connection, sql: str, args: Sequence[object] = ()) -> list[str]:
    return [r[0] for r in conn.execute(sql, args)]


def thread_names(conn: sqlite3.Connection, checkpoints: bool = False) -> list[str]:
    """Every thread with a mark (or a checkpoint), sorted: one index seek per thread."""
    index = "truth_marks INDEXED BY truth_marks_cp" if checkpoints else "truth_marks"
    where = " AND cp = 1" if checkpoints else ""
    out: list[str] = []
    row = conn.execute(f"SELECT min(thread) FROM {index} WHERE 1{where}").fetchone()
    while row is not None and row[0] is not None:
        out.append(row[0])
        row = conn.execute(
            f"SELECT min(thread) FROM {index} WHERE thread > ?{where}", (row[0],)
        ).fetchone()
    return out


def _resume(
    conn: sqlite3.Connection, superseded: dict[str, str], ended: set[str]
) -> dict[str, str]:
    resume: dict[str, str] = {}
    for thread in thread_names(conn, checkpoints=True):
        if thread in ended:
            continue
        rows = conn.execute(
            "SELECT id FROM truth_marks INDEXED BY truth_marks_cp WHERE thread = ? AND cp = 1"
            " ORDER BY ts DESC, id DESC",
            (thread,),
        )
        for (cid,) in rows:
            if cid not in superseded:
                resume[thread] = cid
                break
    return resume


def truth_of(
    conn: sqlite3.Connection, state: State, ended: list[str], known: ItemMemo | None = None
) -> Truth:
    """What is in force, from the tables (``state`` holds the small accumulators)."""
    superseded = dict(conn.execute("SELECT id, by FROM truth_superseded").fetchall())
    in_order = "SELECT id FROM truth_items WHERE role = '{}' ORDER BY ts, id"
    boot = conn.execute(
        "SELECT id FROM truth_items WHERE role = 'b' ORDER BY ts DESC, id DESC LIMIT 1"
    ).fetchone()
    pin_notes = pins_in_force(state, superseded)
    times = {i: item[1] for i, item in _read_items(conn, pin_notes, known).items()}
    pinned = pinned_order(pin_notes, times)
    return Truth(
        superseded=superseded,
        decisions=_ids(conn, in_order.format("d")),
        open=_ids(conn, in_order.format("o")),
        identity=boot[0] if boot else None,
        pinned=pinned,
        pin_notes=pin_notes,
        resume=_resume(conn, superseded, set(ended)),
    )


def pins_in_force(state: State, superseded: dict[str, str]) -> dict[str, list[str]]:
    """Pinned id -> its pin notes, neither superseded (``Truth.pin_notes``)."""
    pin_notes: dict[str, list[str]] = {}
    for note, target in sorted(state.pins.items()):
        if note not in superseded and target not in superseded:
            pin_notes.setdefault(target, []).append(note)
    return pin_notes


def pinned_order(pin_notes: dict[str, list[str]], times: dict[str, str]) -> list[str]:
    """The pinned ids by the ts of their items (``times``), those without one last."""
    pinned = sorted((p for p in pin_notes if p in times), key=lambda p: (times[p], p))
    return pinned + sorted(p for p in pin_notes if p not in times)


def ends(ids: Sequence[str], keep: int, newest: bool) -> list[str]:
    """The ids a section keeps after pruning to ``keep`` (as ``sections._prune`` does)."""
    if len(ids) <= keep:
        return list(ids)
    if newest:
        return list(ids[len(ids) - keep :])
    head, tail = keep // 2, keep - keep // 2
    return [*ids[:head], *ids[len(ids) - tail :]]


def shown_state(
    conn: sqlite3.Connection,
    thread: str | None,
    recent: int,
    max_items: int,
    resolve: Callable[[Iterable[str], str], str],
    items: ItemMemo | None = None,
) -> tuple[State, Truth, str | None]:
    """The state and truth a context reads: every field it touches holds its full value.

    ``state.items`` holds the items the sections can show, ``state.corrections`` those of
    the decisions kept, ``state.threads`` every thread's name and, for ``thread``, its newest
    ``recent`` marks. With ``thread``, ``truth.decisions`` and ``truth.open`` are already the
    thread's (the assembly filters them by the same test). ``thread`` is first resolved by
    ``resolve(known thread names, thread)``, returned third. Call on a current line.
    """
    found = read_core(conn)
    if found is None:
        raise LookupError("the truth tables are not up to date")
    _last, state, ended = found
    names = thread_names(conn)
    if thread is not None:
        thread = resolve(names, thread)
    truth = truth_of(conn, state, ended, items)
    wanted: set[str] = set(truth.pinned) | set(truth.resume)
    if truth.identity is not None:
        wanted.add(truth.identity)
    if thread is None:
        pinned = set(truth.pinned)
        decisions = ends([d for d in truth.decisions if d not in pinned], max_items, False)
        opens = ends(truth.open, max_items, True)
    else:
        mine = "SELECT id FROM truth_items WHERE role = '{}' AND {} ORDER BY ts, id"
        decisions = _ids(conn, mine.format("d", "thread = ?"), (thread,))
        opens = _ids(conn, mine.format("o", "(thread = ? OR id = ?)"), (thread, thread))
        truth = Truth(
            truth.superseded,
            decisions,
            opens,
            truth.identity,
            truth.pinned,
            truth.pin_notes,
            truth.resume,
        )
    wanted.update(decisions)
    wanted.update(opens)
    state.items = _read_items(conn, wanted, items)
    fixes = [d for d in decisions if state.items[d][0] == "correction"]  # only they replace
    for marks, part in _chunks(sorted(set(fixes))):
        for cid, targets in conn.execute(
            f"SELECT id, targets FROM truth_corrections WHERE id IN ({marks})", part
        ):
            state.corrections[cid] = json.loads(targets)
    state.threads = {t: [] for t in names}
    if thread is not None and thread in state.threads:
        rows = conn.execute(  # the assembly takes marks[-recent:]: all of them for 0
            "SELECT ts, id FROM truth_marks WHERE thread = ? ORDER BY ts DESC, id DESC LIMIT ?",
            (thread, recent if recent > 0 else -1),
        ).fetchall()
        state.threads[thread] = [[ts, i] for ts, i in reversed(rows)]
    return state, truth, thread


def full_state(conn: sqlite3.Connection) -> State:
    """The whole folded state, read back from the tables (what a full fold gives)."""
    found = read_core(conn)
    if found is None:
        raise LookupError("the truth tables are not up to date")
    state = found[1]
    for i, kind, ts, summary, why, thread in conn.execute(
        "SELECT id, kind, ts, summary, why, thread FROM truth_items ORDER BY id"
    ):
        state.items[i] = [kind, ts, summary, why, thread]
    for cid, targets in conn.execute("SELECT id, targets FROM truth_corrections ORDER BY id"):
        state.corrections[cid] = json.loads(targets)
    for thread, ts, i, cp in conn.execute(
        "SELECT thread, ts, id, cp FROM truth_marks ORDER BY thread, ts, id"
    ):
        state.threads.setdefault(thread, []).append([ts, i])
        if cp:
            state.checkpoints.setdefault(thread, []).append([ts, i])
    return state
