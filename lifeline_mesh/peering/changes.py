"""LineWatcher: notice that entries were appended to a line, cheaply, from any process;
ChangeFeed: hand those changes to every peer that watches this node.

``lifeline log``, the MCP server and the sync writer each commit through their own SQLite
connection. A separate connection per line asks ``PRAGMA data_version`` — a counter that
moves only when *another* connection committed, answered from the WAL index without reading
the database — and, only then, ``max(seq)`` of the entries (a primary-key lookup). So an idle
line costs one tiny query per poll, whatever its size. Polling at a short interval is used
instead of inotify because it sees commits made over network file systems and in other
mount namespaces (containers) alike.

The :class:`ChangeFeed` fans the watcher's changes out to the server's Watch calls (a peer
that dialed us, maybe from behind NAT, hears of our changes over the call it opened; see
docs/protocol.md, "Watch"). Each subscriber keeps the set of lines changed since it last
looked, so a slow or stalled caller costs one small set, never a growing queue. A
subscriber that takes items (decision 0046) also keeps the new rows of each changed line,
read once per change for all of them, up to ``PENDING_ITEMS_MAX`` rows: past that, or after
a change whose rows were not read, the line is announced without rows. A change of up to
``ANNOUNCED_ROWS_MAX`` rows (a session's catch-up after a partition) is read and announced in
slices that each fit one announcement (decision 0099), so that the peers of the node that
caught up take the rows it brought instead of each syncing for them. A subscriber that
asked to be left out of a tree of relays (decision 0083) hears nothing of that tree's rows;
the feed also carries this node's own prune and graft requests to the peers watching it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import threading
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from pathlib import Path
from urllib.parse import quote

from lifeline_mesh.transport.announce import MAX_CHANGE_ITEMS, ChangeItems

__all__ = [
    "ANNOUNCED_ROWS_MAX",
    "CHANGE_POLL_S",
    "LATE_SIGNATURES_CHECKED",
    "MAX_PRUNED_TREES",
    "PENDING_ITEMS_MAX",
    "ChangeFeed",
    "LineWatcher",
    "Subscription",
]

log = logging.getLogger(__name__)

CHANGE_POLL_S = 0.2  # how soon an append made by another process is noticed
MAX_PRUNED_TREES = 4096  # trees one watcher may ask to be left out of (one per origin)
PENDING_ITEMS_MAX = 4 * MAX_CHANGE_ITEMS  # rows one subscriber keeps; beyond, plain changes
# The largest change whose rows are read to announce, in slices of at most MAX_CHANGE_ITEMS
# (decision 0099); a larger one (a bulk sync) is announced without rows: its watchers sync.
ANNOUNCED_ROWS_MAX = PENDING_ITEMS_MAX
# New attestations a poll reads for signatures of entries held before them; a larger load
# is a sync's signatures sent ahead of their entries (decision 0106), not late ones
LATE_SIGNATURES_CHECKED = 512
# (line, after row, up to row) -> that line's new rows in order, in runs that each travel on
# one tree of relays; empty when they cannot be read
RowReader = Callable[[str, int, int], Awaitable[Sequence[ChangeItems]]]


class _Probe:
    """One line file: its watcher connection and what it last saw."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.conn: sqlite3.Connection | None = None
        self.data_version: int | None = None
        self.mark: int | None = None
        self.signatures: int | None = None  # the attestations' highest row at the last read
        self.late = 0  # reads that found author signatures of entries held before them

    def poll(self) -> int | None:
        """``max(seq)`` of the line (None when absent), re-read only after a commit."""
        if self.conn is None and not self.path.exists():
            return None
        try:
            if self.conn is None:
                # mode=rw: never create a line file that is not there; quoted: a `#` or `?`
                # of a folder's name would end the URI's path
                self.conn = sqlite3.connect(
                    f"file:{quote(str(self.path))}?mode=rw",
                    uri=True,
                    check_same_thread=False,
                    timeout=5,
                )
            version = int(self.conn.execute("PRAGMA data_version").fetchone()[0])
            if version != self.data_version:
                self.data_version = version
                row = self.conn.execute("SELECT max(seq) FROM entries").fetchone()
                before, self.mark = self.mark, None if row[0] is None else int(row[0])
                self._look_for_late_signatures(self.conn, before)
        except sqlite3.Error as exc:
            # Not migrated yet, or locked for longer than the timeout: try again next poll.
            log.debug("watch: cannot read %s yet: %s", self.path, exc)
            self.data_version = None
        return self.mark

    def _look_for_late_signatures(self, conn: sqlite3.Connection, held: int | None) -> None:
        """Count a commit that brought author signatures of entries this line held already
        (rows ``<= held``): a session cut short, or rows relayed before their signatures,
        left those entries unsigned here, and the peers this node relayed them to lack the
        signatures too. Entries' rows do not move, so only this says that something did.
        Signatures sent ahead of their entries (decision 0106) name entries not held yet;
        a larger load than :data:`LATE_SIGNATURES_CHECKED` is one of those and not read."""
        try:
            row = conn.execute("SELECT max(seq) FROM attestations").fetchone()
        except sqlite3.OperationalError:  # a line without the notary's tables
            return
        top = int(row[0] or 0)  # an empty table: none yet
        last, self.signatures = self.signatures, top
        if last is None or held is None:  # the first read; no entry held before
            return
        if not 0 < top - last <= LATE_SIGNATURES_CHECKED:
            return
        found = conn.execute(
            "SELECT 1 FROM attestations a JOIN entries e ON e.id = a.subject"
            " WHERE a.seq > ? AND a.seq <= ? AND a.role = 'author' AND e.seq <= ? LIMIT 1",
            (last, top, held),
        ).fetchone()
        if found is not None:
            self.late += 1

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


class LineWatcher:
    """Calls ``on_change()`` whenever new entries appear in one of the watched line files.

    ``paths`` is a list, or a callable asked at every poll (lines shared while the node runs
    are then watched from the next poll on; a line that appears counts as a change).
    """

    def __init__(
        self,
        paths: Sequence[Path] | Callable[[], Sequence[Path]],
        *,
        interval: float = CHANGE_POLL_S,
    ) -> None:
        self._paths = paths if callable(paths) else (lambda fixed=list(paths): fixed)
        self._probes: dict[Path, _Probe] = {}
        self._interval = interval
        # A cancelled poll keeps running in its thread: closing must wait for it.
        self._lock = threading.Lock()
        self._closed = False
        self.polls = 0  # polls done so far, the first being the baseline (for status and tests)
        self.marks: dict[Path, int | None] = {}  # each line's highest row at the last poll
        self.previous: dict[Path, int | None] = {}  # and at the poll before it
        self._poked: asyncio.Event | None = None

    def poke(self) -> None:
        """This process just committed to a watched line (rows taken from a peer's Watch
        call): poll now instead of at the end of the interval, so a relay costs no poll
        wait (decision 0066)."""
        if self._poked is not None:
            self._poked.set()

    def _poll(self) -> dict[Path, int | None]:
        with self._lock:
            if self._closed:
                return {}
            return self._poll_locked()

    def _poll_locked(self) -> dict[Path, int | None]:
        wanted = list(dict.fromkeys(self._paths()))
        for path in set(self._probes) - set(wanted):
            self._probes.pop(path).close()
        for path in wanted:
            if path not in self._probes:
                self._probes[path] = _Probe(path)
        return {path: self._probes[path].poll() for path in wanted}

    def _late(self) -> dict[Path, int]:
        with self._lock:
            return {path: probe.late for path, probe in self._probes.items()}

    async def run(
        self,
        on_change: Callable[[], None],
        on_lines: Callable[[list[Path]], None] | None = None,
        on_signed: Callable[[list[Path]], None] | None = None,
    ) -> None:
        """Poll until cancelled; the first poll is the baseline and reports nothing.
        ``on_lines`` (optional) is also told which files changed; ``on_signed`` which
        files took author signatures of entries they held already."""
        self._poked = asyncio.Event()
        try:
            last = await asyncio.to_thread(self._poll)
            late = self._late()
            self.polls += 1
            while True:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self._interval):
                        await self._poked.wait()
                self._poked.clear()
                current = await asyncio.to_thread(self._poll)
                self.polls += 1
                self.previous, self.marks = last, current
                changed = [p for p in current if current[p] != last.get(p)]
                if changed:
                    on_change()
                    if on_lines is not None:
                        on_lines(changed)
                # (with new entries too: their rows carry only their own signatures)
                now_late = self._late()
                signed = [p for p, n in now_late.items() if n != late.get(p, n)]
                late = now_late
                if signed and on_signed is not None:
                    on_signed(signed)
                last = current
        finally:
            with self._lock:
                self._closed = True
                for probe in self._probes.values():
                    probe.close()


class Subscription:
    """One watcher of the feed: the lines changed since it last asked (and, when it takes
    items, the new rows of those whose every change came with them)."""

    def __init__(self, *, items: bool = False, node: str | None = None) -> None:
        self.node = node  # the watcher's node id, when known
        self._pending: set[str] = set()
        self._event = asyncio.Event()
        self.closed = False
        self.items = items
        # lines in _pending with all their rows, in order, a run per tree of relays
        self._rows: dict[str, list[ChangeItems]] = {}
        self._taken: dict[str, list[ChangeItems]] = {}
        # Trees of relays this watcher takes from another peer (it asked: decision 0083)
        self.pruned: set[bytes] = set()
        self._prune: set[bytes] = set()  # asked of this watcher: leave us out of these
        self._graft = False  # asked of this watcher: send us every tree again

    def _skips(self, rows: ChangeItems | None) -> bool:
        """Rows this watcher has or gets from another peer: those it sent us (no echo,
        decision 0066) and those of a tree it left (decision 0083)."""
        if rows is None:
            return False
        if rows.source is not None and rows.source == self.node:
            return True
        return bool(rows.tree) and rows.tree in self.pruned

    def _add(self, lines: Iterable[str], rows: ChangeItems | None = None) -> None:
        if rows is not None and self._skips(rows):
            lines = [line for line in lines if line != rows.line]
            if not lines:
                return
        for line in lines:
            kept = self._rows.pop(line, None)
            if self.items and rows is not None and rows.line == line:
                if line not in self._pending:
                    self._rows[line] = [rows]
                elif kept is not None:  # every earlier change came with its rows
                    self._rows[line] = _followed(kept, rows)
            self._pending.add(line)
        if sum(len(r.entries) for runs in self._rows.values() for r in runs) > PENDING_ITEMS_MAX:
            self._rows.clear()  # a stalled caller: it syncs for these lines instead
        self._event.set()

    def _close(self) -> None:
        self.closed = True
        self._event.set()

    def _ask(self, prune: bytes | None = None) -> None:
        """Ask this watcher to leave us out of tree ``prune`` (None: to send us every
        tree again); the request goes with its next message."""
        if prune is None:
            self._prune.clear()
            self._graft = True
        else:
            self._prune.add(prune)
        self._event.set()

    def take_control(self) -> tuple[tuple[bytes, ...], bool]:
        out = tuple(sorted(self._prune)), self._graft
        self._prune, self._graft = set(), False
        return out

    async def next(self, timeout: float | None = None) -> set[str] | None:
        """The lines changed since the last call (empty after ``timeout`` seconds with no
        change); None once the feed is closed."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self._event.wait()
        if self.closed:
            return None
        self._event.clear()
        out, self._pending = self._pending, set()
        self._taken, self._rows = self._rows, {}
        return out

    def take_items(self) -> dict[str, list[ChangeItems]]:
        """The rows of the lines :meth:`next` returned last, for those whose every change
        since the call before came with its rows (a line missing here: sync for it), in
        order: one run per tree of relays, each sent as one announcement."""
        out = {line: runs for line, runs in self._taken.items() if all(r.fits() for r in runs)}
        self._taken = {}
        return out


def _followed(runs: list[ChangeItems], rows: ChangeItems) -> list[ChangeItems]:
    """``runs`` followed by ``rows``: merged into the last run when on the same tree (one
    announcement) and the two still fit one, else a run of their own, so that each keeps its
    tree (decision 0094) and fits an announcement (decision 0099)."""
    if runs[-1].tree == rows.tree and (merged := runs[-1].then(rows)).fits():
        return [*runs[:-1], merged]
    return [*runs, rows]


class ChangeFeed:
    """Lines whose entries changed here, for every current subscriber (the Watch calls).

    ``shared_lines`` names the lines this node shares now; the server announces only those
    (and only to callers allowed to read them).
    """

    def __init__(
        self, shared_lines: Callable[[], Sequence[str]], rows: RowReader | None = None
    ) -> None:
        self._shared_lines = shared_lines
        self._subscribers: set[Subscription] = set()
        self._closed = False
        self._read_rows = rows  # reads a change's rows for the subscribers that take items
        self._reads: asyncio.Queue[tuple[str, int, int]] = asyncio.Queue()
        self._reader: asyncio.Task[None] | None = None
        # Trees of relays (decision 0083): leaves asked of peers, and peers left out
        self.relays = {"prunes asked": 0, "grafts asked": 0, "pruned": 0}

    def shared_lines(self) -> Sequence[str]:
        return self._shared_lines()

    def _of(self, node: str) -> list[Subscription]:
        return [sub for sub in self._subscribers if sub.node is not None and sub.node == node]

    def pruned(self, node: str, trees: Sequence[bytes], graft: bool = False) -> None:
        """Peer ``node`` asked (over our Watch call to it) to be sent every tree's rows again
        (``graft``), then to be left out of ``trees``: it takes their rows from another."""
        for sub in self._of(node):
            if graft:
                sub.pruned.clear()
            # a tree per origin: far fewer than this; a peer asking more is not heard
            sub.pruned.update(trees[: max(0, MAX_PRUNED_TREES - len(sub.pruned))])
        self.relays["pruned"] += len(trees)

    def prune(self, node: str, tree: bytes) -> bool:
        """Ask peer ``node`` (over its Watch call to us) to leave us out of ``tree``: its
        rows reached us from another peer first. False when it does not watch us."""
        subs = self._of(node)
        for sub in subs:
            sub._ask(tree)
        self.relays["prunes asked"] += bool(subs)
        return bool(subs)

    def graft(self) -> None:
        """Ask every peer watching us to send us every tree's rows again (a call of ours
        ended: a tree may reach us through it no more)."""
        for sub in self._subscribers:
            if sub.node is not None:
                sub._ask(None)
        self.relays["grafts asked"] += 1

    def publish(self, lines: Iterable[str], rows: ChangeItems | None = None) -> None:
        """``lines`` changed; ``rows``: the new rows of one of them, for the subscribers
        that take items (every row since that line's previous change)."""
        names = set(lines)
        for sub in self._subscribers:
            sub._add(names, rows)

    def publish_paths(
        self, paths: Iterable[Path], marks: dict[Path, tuple[int | None, int | None]] | None = None
    ) -> None:
        """From :meth:`LineWatcher.run`: a line's file is ``<name>.db``. With ``marks``
        (each line's highest row before and after), subscribers that take items get the
        new rows, read once in the order of the changes; other changes are plain."""
        plain = []
        for path in paths:
            before, after = (marks or {}).get(path, (None, None))
            if (
                self._read_rows is None
                or before is None
                or after is None
                or not 0 < after - before <= ANNOUNCED_ROWS_MAX
                or not any(s.items for s in self._subscribers)
            ):
                plain.append(path.stem)
                continue
            self._reads.put_nowait((path.stem, before, after))
            if self._reader is None or self._reader.done():
                self._reader = asyncio.get_running_loop().create_task(self._read_changes())
        if plain:
            self.publish(plain)

    async def _read_changes(self) -> None:
        """One change at a time, in order: a subscriber gets a line's rows parents first."""
        assert self._read_rows is not None
        while not self._reads.empty():
            line, before, after = self._reads.get_nowait()
            try:
                runs = list(await self._read_rows(line, before, after))
            except Exception as exc:  # announced without its rows: watchers sync instead
                log.warning("line %s: rows after %d not read to announce: %s", line, before, exc)
                runs = []
            if not runs:
                self.publish([line])
            for rows in runs:
                self.publish([line], rows)

    @contextlib.contextmanager
    def subscribe(self, *, items: bool = False, node: str | None = None) -> Iterator[Subscription]:
        sub = Subscription(items=items, node=node)
        if self._closed:
            sub._close()
        self._subscribers.add(sub)
        try:
            yield sub
        finally:
            self._subscribers.discard(sub)

    def close(self) -> None:
        """The node is stopping: every subscriber's ``next`` returns None from now on."""
        self._closed = True
        if self._reader is not None:
            self._reader.cancel()
        for sub in self._subscribers:
            sub._close()

    def __len__(self) -> int:
        return len(self._subscribers)
