"""The ledger service: validated local writes on top of a store.

Local writes get default parents (the line's tips, at most :data:`JOIN_TIPS` of them, so
forks made by concurrent writers are joined by the next writes and no write ever fails
because of how many tips a line has — see :func:`choose_parents` and
docs/decisions/0018-bounded-fork-joining.md), validation, and dedup-key idempotency. Reads
go to the store directly.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import Protocol, runtime_checkable

from lifeline.entry import Entry, format_ts
from lifeline.errors import InvalidEntry
from lifeline.plugins import AppendHook, InTransaction, TransactionalHook
from lifeline.store.port import AppendResult, Store
from lifeline.truth.parse import thread_of
from lifeline.validate import DEFAULT_LIMITS, Limits, check_local

__all__ = [
    "CHUNK",
    "JOIN_TIPS",
    "ChunkAppender",
    "Draft",
    "HookedAppender",
    "Ledger",
    "Tip",
    "TipsAppender",
    "choose_parents",
    "not_before",
    "utc_now",
]

# Drafts per chunk of a pipelined batch: small enough that building the next chunk overlaps
# the write of this one, large enough that each chunk's lookups stay one statement.
CHUNK = 250

# Tips a local write joins at most. Each write over a line with t > 1 tips leaves
# t - min(t, JOIN_TIPS) + 1 of them, so forks still converge; a line imported with
# thousands of unjoined thread leaves stays writable (decision 0018).
JOIN_TIPS = 8

# (id, body, ts) of a tip, as the store reads it for choose_parents; a store may leave out
# tips and bodies that could not change the choice (lifeline/store/sqlite_reads.py)
Tip = tuple[str, str, str]


def choose_parents(
    tips: Sequence[tuple[str, ...]], body: str, cap: int = JOIN_TIPS
) -> tuple[str, ...]:
    """The default parents of a local write whose body is ``body``.

    ``tips`` are the line's tips, newest first in stream order (height, ts, id descending).
    A write in a thread chains to its thread's newest tip, if one is a tip; the other places
    go to the newest tips. Deterministic: the same tips and body give the same parents.
    """
    cap = max(cap, 1)
    if len(tips) <= cap:
        return tuple(sorted(t[0] for t in tips))
    chosen: list[str] = []
    thread = thread_of(body)
    if thread is not None:
        head = next((t[0] for t in tips if thread_of(t[1]) == thread), None)
        if head is not None:
            chosen.append(head)
    for tip in tips:
        if len(chosen) == cap:
            break
        if tip[0] not in chosen:
            chosen.append(tip[0])
    return tuple(sorted(chosen))


def _times(tips: Sequence[Tip], parents: Sequence[str]) -> list[str]:
    """The ts of each tip among ``parents``."""
    return [t[2] for t in tips if t[0] in parents]


def _stored_form(ts: str) -> bool:
    """``2026-01-02T03:04:05.123456Z``: the form in which string order is time order."""
    return len(ts) == 27 and ts[26] == "Z" and ts[10] == "T"


def not_before(now: str, parents_ts: Iterable[str]) -> str:
    """``now``, or the latest of ``parents_ts`` when that is later (both in the stored
    form): a local write is never dated before what it names. A clock that went back
    (a VM restored, a dead battery) would date it so, and every peer refuses an entry
    dated before its parent, with what descends from it (decision 0112)."""
    latest = now
    for ts in parents_ts:
        if ts > latest and _stored_form(ts):  # the order test first: it nearly always fails
            latest = ts
    return latest if latest is now or _stored_form(now) else now


_last_second: tuple[int, str] = (-1, "")  # a second and its rendering, swapped whole


def utc_now() -> str:
    """Now, in the stored form of :func:`lifeline.entry.format_ts`.

    A batch stamps thousands of entries a second: the rendering of the current second is
    kept and only the microseconds are added (a quarter of the cost of a full format).
    """
    global _last_second
    second, fraction = divmod(time.time_ns() // 1_000, 1_000_000)
    cached, text = _last_second
    if cached != second:
        text = format_ts(datetime.fromtimestamp(second, UTC))[:-8]  # without ".ffffffZ"
        _last_second = (second, text)
    return f"{text}.{fraction:06d}Z"


@dataclass(frozen=True, slots=True)
class Draft:
    """What a writer says; the ledger fills in ts, parents and the id."""

    kind: str
    summary: str
    body: str = ""
    author: str = ""
    agent: str = "human"
    provider: str = "none"
    model: str = "human"
    parents: tuple[str, ...] | None = None  # None: the line's tips
    dedup_key: str | None = None


def _create(draft: Draft, ts: str, parents: tuple[str, ...], *, ts_normal: bool = False) -> Entry:
    try:
        return Entry.create(
            ts=ts,
            kind=draft.kind,
            summary=draft.summary,
            body=draft.body,
            author=draft.author,
            agent=draft.agent,
            provider=draft.provider,
            model=draft.model,
            parents=parents,
            dedup_key=draft.dedup_key,
            ts_normal=ts_normal,
        )
    except UnicodeEncodeError as exc:
        # e.g. undecodable bytes in a command-line argument arrive as lone surrogates
        raise InvalidEntry(
            f"the text {exc.object[max(0, exc.start - 20) : exc.end + 20]!r} is not valid "
            "UTF-8; send UTF-8 text"
        ) from exc


@runtime_checkable
class TipsAppender(Protocol):
    """A store that can read the tips and append onto them in one transaction (optional)."""

    async def append_onto_tips(
        self,
        build: Callable[[Sequence[Tip]], Entry],
        *,
        thread: str | None = None,
        cap: int,
        dedup_key: str | None = None,
        within: InTransaction | None = None,
    ) -> tuple[Entry, bool]: ...


@runtime_checkable
class TipsReader(Protocol):
    """A store that reads only the tips a write could join (optional): the newest
    ``cap + 1``, and those whose body may name ``thread``, newest first."""

    async def tips_for_write(self, thread: str | None, cap: int) -> list[Tip]: ...


@runtime_checkable
class ChunkAppender(Protocol):
    """A store that writes a stream of chunks in one transaction, pipelined (optional)."""

    async def append_chunks(
        self, chunks: Iterator[Sequence[Entry]], *, within: InTransaction | None = None
    ) -> AppendResult: ...


@runtime_checkable
class HookedAppender(Protocol):
    """A store that runs ``within(conn, new entries)`` inside each write's transaction, so
    a transactional hook's rows (the author's signature) commit with the entries."""

    async def append_hooked(
        self, entries: Sequence[Entry], within: InTransaction
    ) -> AppendResult: ...


async def _in_order(waits: Sequence[Awaitable[None]]) -> None:
    """The work of a write's transactional hooks on an asynchronous store, one by one."""
    for wait in waits:
        await wait


class Ledger:
    """Local writes to one line, with the checks of :func:`lifeline.validate.check_local`.

    ``hooks`` run after each write with the entries newly stored; a
    :class:`~lifeline.plugins.TransactionalHook` runs inside the write's own transaction
    instead, on a store that can (a :class:`HookedAppender`; see lifeline.plugins).
    """

    def __init__(
        self,
        store: Store,
        *,
        limits: Limits = DEFAULT_LIMITS,
        clock: Callable[[], str] = utc_now,
        hooks: Sequence[AppendHook] = (),
    ) -> None:
        self.store = store
        self.limits = limits
        self._clock = clock
        self._ts_normal = clock is utc_now  # its stamps need no parsing (Entry.create)
        # Transactional hooks commit with the entries on a store that can run them inside
        # the write; on any other store every hook runs after the write.
        self._hooked = store.append_hooked if isinstance(store, HookedAppender) else None
        atomic = [h for h in hooks if isinstance(h, TransactionalHook)]
        self._atomic = tuple(atomic) if self._hooked is not None else ()
        self._hooks = tuple(h for h in hooks if not any(h is a for a in self._atomic))
        self._prepared = not self._atomic
        self._within: InTransaction | None = self._run_within if self._atomic else None
        # checked once: isinstance on a runtime protocol is a tenth of a write's cost
        # (bench/history/figures-behind-the-code.md)
        self._onto_tips = store.append_onto_tips if isinstance(store, TipsAppender) else None
        self._chunked = store.append_chunks if isinstance(store, ChunkAppender) else None
        self._tips_reader = store.tips_for_write if isinstance(store, TipsReader) else None

    async def _after_append(self, entries: Sequence[Entry]) -> None:
        for hook in self._hooks:
            await hook(self.store, entries)

    def _run_within(self, conn: object, entries: Sequence[Entry]) -> Awaitable[None] | None:
        if not entries:
            return None
        pending = [hook.in_transaction(conn, entries) for hook in self._atomic]
        waits = [p for p in pending if p is not None]
        return _in_order(waits) if waits else None

    async def _prepare_hooks(self) -> None:
        if not self._prepared:
            for hook in self._atomic:
                await hook.prepare(self.store)
            self._prepared = True

    def _join_cap(self) -> int:
        return min(JOIN_TIPS, self.limits.max_parents)

    def _checked(self, draft: Draft, tips: Sequence[Tip]) -> Entry:
        parents = choose_parents(tips, draft.body, self._join_cap())
        ts = not_before(self._clock(), _times(tips, parents))
        entry = _create(draft, ts, parents, ts_normal=self._ts_normal)
        check_local(entry, self.limits, id_computed=True)
        return entry

    async def _default_parents(self, body: str) -> tuple[tuple[str, ...], list[str]]:
        """:func:`choose_parents` over a store without :class:`TipsAppender`: from the tips
        it reads (a :class:`TipsReader`), else from every tip with its height; with the ts
        of each parent chosen."""
        if self._tips_reader is not None:
            read = await self._tips_reader(thread_of(body), self._join_cap())
            parents = choose_parents(read, body, self._join_cap())
            return parents, _times(read, parents)
        tips = await self.store.tips()
        found = await self.store.get_many(tips)
        if len(tips) <= self._join_cap():
            return tuple(tips), [e.ts for e in found]
        wanted = set(tips)
        height = {i: h for h, i in await self.store.keys() if i in wanted}
        found.sort(key=lambda e: (height[e.id], e.ts, e.id), reverse=True)
        read = [(e.id, e.body, e.ts) for e in found]
        parents = choose_parents(read, body, self._join_cap())
        return parents, _times(read, parents)

    async def build(self, draft: Draft) -> Entry:
        """Turn a draft into a validated entry (not yet stored), dated no earlier than its
        parents (:func:`not_before`)."""
        if draft.parents is None:
            parents, times = await self._default_parents(draft.body)
        else:
            parents = draft.parents
            times = [e.ts for e in await self.store.get_many(list(parents))] if parents else []
        entry = _create(draft, not_before(self._clock(), times), parents, ts_normal=self._ts_normal)
        check_local(entry, self.limits, id_computed=True)
        if draft.parents is not None:  # tips are stored by definition: no need to look
            await self._check_parents(entry)
        return entry

    async def append(self, draft: Draft) -> tuple[Entry, bool]:
        """Record a draft. Returns the stored entry and whether it is new.

        A draft whose ``dedup_key`` is already recorded returns the earlier entry unchanged,
        so a retried write never records twice.
        """
        await self._prepare_hooks()
        if draft.parents is None and self._onto_tips is not None:
            # one thread hop: dedup lookup, tips, build, write, sign and re-read in one
            # transaction
            entry, created = await self._onto_tips(
                partial(self._checked, draft),
                thread=thread_of(draft.body),
                cap=self._join_cap(),
                dedup_key=draft.dedup_key,
                within=self._within,
            )
            if created:
                await self._after_append([entry])
            return entry, created
        if draft.dedup_key is not None:
            earlier = await self.store.by_dedup_key(draft.dedup_key)
            if earlier is not None:
                return earlier, False
        entry = await self.build(draft)
        if self._hooked is not None and self._within is not None:
            created = bool((await self._hooked([entry], self._within)).added)
        else:
            created = await self.store.append(entry)
        if created:
            await self._after_append([entry])
        return (entry if created else await self.store.get(entry.id)), created

    async def append_many(self, drafts: Sequence[Draft]) -> AppendResult:
        """Record a batch in one transaction; drafts without parents chain onto each other.

        Batches of more than :data:`CHUNK` drafts are built chunk by chunk while the store
        writes the previous chunk, still in one transaction (all or nothing).
        """
        await self._prepare_hooks()
        # the line's tips only when a draft joins them: reading them costs the whole line's
        # keys once there are more than the join cap (a sessions line has a tip a session)
        joins = any(draft.parents is None for draft in drafts)
        tips, times = await self._default_parents(drafts[0].body) if joins else ((), [])
        # the times of the parents drafts name, held before the batch
        named = sorted({p for draft in drafts if draft.parents for p in draft.parents})
        dated = {e.id: e.ts for e in await self.store.get_many(named)} if named else {}
        entries: list[Entry] = []
        chunks = self._build_chunks(drafts, (tips, times), dated, entries)
        if self._chunked is not None and len(drafts) > CHUNK:
            result = await self._chunked(chunks, within=self._within)
        elif self._hooked is not None and self._within is not None:
            result = await self._hooked([e for chunk in chunks for e in chunk], self._within)
        else:
            result = await self.store.append_many([e for chunk in chunks for e in chunk])
        added = set(result.added)
        await self._after_append([e for e in entries if e.id in added])
        return result

    def _build_chunks(
        self,
        drafts: Sequence[Draft],
        joined: tuple[tuple[str, ...], list[str]],
        dated: dict[str, str],
        into: list[Entry],
    ) -> Iterator[list[Entry]]:
        """Validated entries, :data:`CHUNK` at a time; each is also appended to ``into``.
        Each is dated no earlier than its parents: the tips it joins and their times
        (``joined``), or the times ``dated`` holds of the parents drafts name (a draft
        cannot name an entry of its own batch: its id is not known before it is built)."""
        tips, times = joined
        for start in range(0, len(drafts), CHUNK):
            chunk: list[Entry] = []
            for draft in drafts[start : start + CHUNK]:
                if draft.parents is None:
                    parents, floor = tips, times
                else:
                    parents = draft.parents
                    floor = [dated[p] for p in parents if p in dated]
                ts = not_before(self._clock(), floor)
                entry = _create(draft, ts, parents, ts_normal=self._ts_normal)
                check_local(entry, self.limits, id_computed=True)
                chunk.append(entry)
                if draft.parents is None:
                    tips, times = (entry.id,), [entry.ts]
            into.extend(chunk)
            yield chunk

    async def _check_parents(self, entry: Entry) -> None:
        wanted = set(entry.parents)
        if not wanted:
            return
        missing = wanted - await self.store.contains(wanted) - set(await self.store.externals())
        if missing:
            first = sorted(missing)[0]
            raise InvalidEntry(
                f"parent {first[:12]} is not in this line; give an id from `lifeline history`, "
                "or declare a cross-line parent with LINE:ID"
            )
