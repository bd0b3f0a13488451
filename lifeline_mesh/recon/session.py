"""The reconciliation session: a sans-I/O state machine over named sets (DESIGN §5).

Frames and ``now`` go in, effects come out (send a frame, load a snapshot, fetch items,
deliver items, done, failed). The exchange runs in turns: the initiator speaks (ending with
``EndOfTurn``), the responder answers (ending with ``EndOfTurn``), and so on; the initiator
ends the session with ``Fin`` once a turn of its own asks nothing of the peer. Items the
other side lacks travel inside the turns, parents first. See docs/protocol.md.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Sequence

from lifeline.errors import InvalidEntry, LocalProtocolError, PeerError, RemoteProtocolError
from lifeline_mesh.recon.dialect import PLAIN, Dialect, SessionForm
from lifeline_mesh.recon.frames import (
    Abort,
    Done,
    Effect,
    EndOfTurn,
    Failed,
    Fin,
    Frame,
    Hello,
    Items,
    KeepAlive,
    LoadSnapshot,
    LoadSummary,
    Range,
    Recon,
    SendFrame,
    Want,
    abort_error,
)
from lifeline_mesh.recon.incoming import take_items
from lifeline_mesh.recon.outbox import FetchPlan, SetOutbox, frame_budget
from lifeline_mesh.recon.ranges import Responder, initial_ranges
from lifeline_mesh.recon.session_state import (
    PROTOCOL_VERSION,
    Role,
    SessionLimits,
    SessionStats,
    SetState,
    check_hello,
    hello_for,
    inactive,
)
from lifeline_mesh.recon.sets import ItemCodec, ParsedItem, ParsedItems, SetSummary, Snapshot
from lifeline_mesh.recon.summaries import (
    OPEN_CAPABILITY,
    opening_frames,
    opening_range,
    opening_record,
    peer_summaries,
    set_of,
    whole_set_equal,
)

__all__ = ["PROTOCOL_VERSION", "Role", "Session", "SessionLimits", "SessionStats"]


class _Phase(enum.Enum):
    LOADING = "loading"  # waiting for snapshots
    LISTENING = "listening"  # the peer's turn
    SPEAKING = "speaking"  # our turn: fetching and sending items
    DONE = "done"
    FAILED = "failed"


class Session:
    """One reconciliation session of one line with one peer."""

    def __init__(
        self,
        role: Role,
        line: str,
        sets: Sequence[tuple[str, ItemCodec]],
        now: float,
        limits: SessionLimits | None = None,
        salt: bytes | None = None,
        *,
        runs: Collection[str] = (),
    ) -> None:
        """``runs``: the sets this side can read in key order, a chunk at a time, with no
        snapshot (``FetchRun``): each is sent that way whole to a peer that holds none of
        it (decision 0144)."""
        self.role = role
        self.line = line
        self.limits = limits or SessionLimits()
        self.stats = SessionStats()
        self.peer_hello: Hello | None = None
        self._sets = [
            SetState(name, codec, self.limits, runnable=name in runs) for name, codec in sets
        ]
        self._phase = _Phase.LOADING if role is Role.INITIATOR else _Phase.LISTENING
        self._started = now
        self._loading: set[int] = set()
        self._summarizing: set[int] = set()
        # The frame that needed a set's snapshot, answered once it is loaded.
        self._deferred: Frame | ParsedItems | None = None
        self._openings: list[Recon] = []  # an opening from the hello, answered once loaded
        self._opened_in_hello = False
        self._reopen = False  # the responder did not read our hello's opening: send ranges
        self._plan = FetchPlan()  # the turn's reads of items owed, one at a time
        self._finish_with_fin = False
        self.peer_frame_cap = self.limits.max_frame_bytes  # both sides' cap once hello is read
        widths = (self.limits.fingerprint_bytes, self.limits.short_id_bytes)
        initiator = role is Role.INITIATOR
        self._form = SessionForm(self.limits.compact_ranges, widths, initiator, salt)

    @property
    def set_names(self) -> list[str]:
        return [s.name for s in self._sets]

    @property
    def finished(self) -> bool:
        return self._phase in (_Phase.DONE, _Phase.FAILED)

    @property
    def deadline(self) -> float:
        """When the session times out (cap session_timeout), on the driver's clock: the
        driver waits for a frame no longer than this and then calls :meth:`tick`."""
        return self._started + self.limits.session_timeout

    # -- driver inputs ---------------------------------------------------------------

    def start(self, now: float) -> list[Effect]:
        # The session's age counts from here, on the clock the driver passes: a caller that
        # built the session with another clock's reading (the server passed 0.0 against
        # time.monotonic) would otherwise trip session_timeout once the host is up an hour.
        self._started = now
        if self.role is Role.RESPONDER:
            return []
        # The hello needs no snapshot: sent first, it lets the responder build its own
        # snapshots while this side builds its (on a large line, half the in-sync time).
        if self.limits.set_summaries and self.limits.open_sums:
            return self._summarize_all()  # the hello carries them
        if self.limits.set_summaries:
            return [SendFrame(self._hello()), *self._summarize_all()]
        return [SendFrame(self._hello()), *self._load_all()]

    def summary_loaded(
        self, set_index: int, summary: SetSummary | None, now: float
    ) -> list[Effect]:
        """The whole-set summary of a set (None: the set keeps none, so load it)."""
        self._sets[set_index].summary = summary
        self._summarizing.discard(set_index)
        if self._summarizing:
            return []
        if self.role is Role.RESPONDER:
            return [SendFrame(self._hello()), *self._read_opening()]
        out: list[Effect] = []
        if self.limits.open_sums:
            if opening_record([s.summary for s in self._sets]) is not None:
                self._opened_in_hello = True
                self._phase = _Phase.LISTENING
                self.stats.rounds = 1
                return [SendFrame(self._hello()), SendFrame(EndOfTurn())]
            out.append(SendFrame(self._hello()))  # a set keeps no summary: ranges follow
        unknown = [i for i, s in enumerate(self._sets) if s.summary is None and not s.loaded]
        if unknown:
            self._loading = set(unknown)
            return [*out, *(LoadSnapshot(i) for i in unknown)]
        return out + self._opening()

    def snapshot_loaded(self, set_index: int, snap: Snapshot, now: float) -> list[Effect]:
        self._sets[set_index].load(snap, self.limits, self._form.dialect)
        self.stats.snapshots_loaded += 1
        self._loading.discard(set_index)
        if self._loading:
            return []
        if self._phase is _Phase.LOADING and not self._summarizing:
            return self._opening()
        out: list[Effect] = []
        openings, self._openings = self._openings, []
        for frame in openings:
            out += self.receive(frame, now)
        deferred, self._deferred = self._deferred, None
        return out if deferred is None else out + self.receive(deferred, now)

    def _opening(self) -> list[Effect]:
        """The initiator's first ranges: one fingerprint per set, from its summary when it
        has one (no snapshot), else from its snapshot. Plain: every node reads them."""
        self._phase = _Phase.LISTENING
        out: list[Effect] = []
        for index, state in enumerate(self._sets):
            if not state.active:
                continue
            if state.loaded or state.summary is None:
                ranges = initial_ranges(state.snap)
            else:
                ranges = [opening_range(state.summary)]
            out += self._recon_frames(index, ranges, PLAIN)  # plain: anyone reads it
        self.stats.rounds += 1
        out.append(SendFrame(EndOfTurn()))
        return out

    def release_snapshots(self) -> None:
        """Drop the sets' snapshots (the session is over): their memory can go back."""
        self._plan.clear()  # fetches not made yet refer to a snapshot
        for state in self._sets:
            state.snap = Snapshot.empty()
            state.responder = Responder(state.snap)

    def codec_of(self, set_index: int) -> ItemCodec | None:
        """The codec that parses the items of set ``set_index``; None if there is no such set."""
        if 0 <= set_index < len(self._sets) and self._sets[set_index].active:
            return self._sets[set_index].codec
        return None

    def receive(self, frame: Frame | ParsedItems, now: float) -> list[Effect]:
        if self.finished or isinstance(frame, KeepAlive):  # a busy peer: the driver waits on
            return []
        try:
            self.limits.check_elapsed(now - self._started)
            return self._dispatch(frame)
        except (RemoteProtocolError, InvalidEntry) as exc:
            return self._fail(exc, "protocol" if isinstance(exc, RemoteProtocolError) else "item")
        except PeerError as exc:
            self._phase = _Phase.FAILED
            return [Failed(exc)]
        except (ValueError, TypeError, KeyError, IndexError, OverflowError) as exc:
            # Input from a peer never escapes its session, even through a case we missed.
            error = RemoteProtocolError(f"could not process a {type(frame).__name__}: {exc!r}")
            return self._fail(error, "protocol")

    def fetched(
        self,
        set_index: int,
        raws: Sequence[bytes],
        externals: Sequence[tuple[bytes, str]],
        now: float,
    ) -> list[Effect]:
        sent = self._send_items(set_index, raws, externals)
        return sent if self.finished else sent + self._next_fetch()

    def fetched_run(
        self,
        set_index: int,
        raws: Sequence[bytes],
        externals: Sequence[tuple[bytes, str]],
        after: tuple[object, ...] | None,
        now: float,
    ) -> list[Effect]:
        """A ``FetchRun`` answered: the items read, and the last key read (None: the set is
        over, its run done)."""
        run = self._sets[set_index].run if 0 <= set_index < len(self._sets) else None
        if run is None:
            return self.fail(LocalProtocolError(f"set #{set_index} has no run"), "internal")
        run.read(after)
        return self.fetched(set_index, raws, externals, now)

    def send_ahead(self, name: str, raws: Sequence[bytes]) -> list[Effect]:
        """Items of set ``name`` ahead of a fetch's (signatures of entries stored after this
        side read its signatures, decision 0106); none when the session lacks the set."""
        found = [i for i, s in enumerate(self._sets) if s.name == name and s.active]
        return self._send_items(found[0], raws, ()) if found and raws else []

    def _send_items(
        self, index: int, raws: Sequence[bytes], externals: Sequence[tuple[bytes, str]]
    ) -> list[Effect]:
        budget = frame_budget(self.peer_frame_cap)
        try:
            frames = self._sets[index].outbox.pack(index, raws, externals, budget)
        except LocalProtocolError as exc:
            return self._fail(exc, "limit")
        self.stats.sent(self._sets[index].name, len(raws))
        return [SendFrame(f) for f in frames]

    def tick(self, now: float) -> list[Effect]:
        """Time passing without a frame: past the deadline, the session fails (timeout)."""
        if self.finished:
            return []
        try:
            self.limits.check_elapsed(now - self._started)
        except RemoteProtocolError as exc:
            return self._fail(exc, "timeout")
        return []

    def fail(self, exc: Exception, code: str) -> list[Effect]:
        """End the session from this side (bad input, store failure): tell the peer why."""
        if self.finished:
            return [Failed(exc)]
        return self._fail(exc, code)

    # -- frame handling --------------------------------------------------------------

    def _dispatch(self, frame: Frame | ParsedItems) -> list[Effect]:
        if isinstance(frame, Abort):
            raise abort_error(frame)
        if self._phase is not _Phase.LISTENING:
            raise RemoteProtocolError(
                f"got {type(frame).__name__} while {self._phase.value}; frames out of turn"
            )
        if isinstance(frame, Hello):
            return self._on_hello(frame)
        if self.peer_hello is None:
            raise RemoteProtocolError(f"got {type(frame).__name__} before hello")
        if isinstance(frame, Recon):
            if self._skippable(frame.set_index):
                return []
            state = self._state(frame.set_index)
            if not state.loaded:
                if whole_set_equal(state.summary, frame) or self._runs_whole(state, frame):
                    return []  # in sync, or all of it sent as a run: nothing to load
                return self._defer(frame, frame.set_index)
            state.responder.answer(frame.ranges, self._form.incoming(frame))
            return []
        index = set_of(frame)
        if index is not None and not self._state(index).loaded:
            return self._defer(frame, index)
        if isinstance(frame, Want):
            return self._on_want(frame)
        if isinstance(frame, Items):
            return self._on_items(frame)
        if isinstance(frame, ParsedItems):
            return self._on_items(frame.frame, frame.parsed)
        if isinstance(frame, EndOfTurn):
            return self._on_end_of_turn()
        if isinstance(frame, Fin):
            return self._on_fin()
        raise RemoteProtocolError(f"unexpected frame {frame!r}")

    def _on_hello(self, hello: Hello) -> list[Effect]:
        if self.peer_hello is not None:
            raise RemoteProtocolError("got a second hello; the peer restarted mid-session")
        check_hello(hello, self.line)
        self.peer_hello = hello
        self.peer_frame_cap = min(self.limits.max_frame_bytes, hello.max_frame_bytes)
        if self._form.agree(hello):
            for state in self._sets:
                state.responder.dialect = self._form.dialect
        if self.role is Role.INITIATOR:
            for state in self._sets:
                state.active = state.name in hello.sets
            self._reopen = self._opened_in_hello and OPEN_CAPABILITY not in hello.capabilities
            return self._load_differing(hello)
        mine = {s.name: s for s in self._sets}
        self._sets = [mine.get(name) or inactive(name, self.limits) for name in hello.sets]
        if self.limits.set_summaries:
            # The hello waits for the summaries it carries; snapshots wait for the ranges.
            return self._summarize_all() or [SendFrame(self._hello())]
        out: list[Effect] = [SendFrame(self._hello())]
        return out + self._load_all()

    def _load_differing(self, hello: Hello) -> list[Effect]:
        """The initiator, on the responder's hello: load the snapshots of the sets whose
        whole-set fingerprints differ (all of them, for a peer without summaries) now, in
        parallel with the responder, which loads its own on reading our ranges."""
        theirs = peer_summaries(hello)
        need = [i for i, s in enumerate(self._sets) if s.needs_snapshot(theirs)]
        self._loading.update(need)
        return [LoadSnapshot(i) for i in need]

    def _read_opening(self) -> list[Effect]:
        """The responder, after its hello: the initiator's opening from its hello, answered
        like the ranges it replaces. Sets found equal are done; the others are loaded and
        their openings answered once they are (the peer's end-of-turn comes after)."""
        peer = self.peer_hello
        if peer is None or not peer.opening or not self.limits.open_sums:
            return []
        out: list[Effect] = []
        for frame in opening_frames(peer.opening, [s.active for s in self._sets]):
            state = self._sets[frame.set_index]
            if not whole_set_equal(state.summary, frame) and not self._runs_whole(state, frame):
                self._openings.append(frame)
                self._loading.add(frame.set_index)
                out.append(LoadSnapshot(frame.set_index))
        return out

    def _defer(self, frame: Frame | ParsedItems, index: int) -> list[Effect]:
        """A frame that needs set ``index``'s snapshot: load it, then answer the frame (the
        driver performs the load before it reads the next frame)."""
        self._deferred = frame
        self._loading.add(index)
        return [LoadSnapshot(index)]

    def _on_want(self, want: Want) -> list[Effect]:
        state = self._state(want.set_index)
        state.outbox.want(state.responder, want, state.received)
        return []

    def _on_items(self, items: Items, parsed: Sequence[ParsedItem] | None = None) -> list[Effect]:
        state = self._state(items.set_index)
        return take_items(state, items, parsed, self.stats, self.limits)

    def _on_end_of_turn(self) -> list[Effect]:
        self._phase = _Phase.SPEAKING
        if self.role is Role.RESPONDER:
            return self._speak(may_finish=False)
        if self._reopen:  # the responder did not read our hello's opening: ranges now
            self._reopen = False
            return self._opening()
        return self._speak(may_finish=True)

    def _on_fin(self) -> list[Effect]:
        if self.role is Role.INITIATOR:
            raise RemoteProtocolError("the responder sent fin; only the initiator ends a session")
        return self._done()

    # -- speaking --------------------------------------------------------------------

    def _speak(self, *, may_finish: bool) -> list[Effect]:
        """Our turn. The initiator ends the session when the turn asks nothing and carries
        no items: after items, the responder gets a turn to ask for missing parents."""
        asks = any(s.active and s.outbox.asks(s.responder, s.pool) for s in self._sets)
        out: list[Effect] = []
        self._plan.clear()
        for index, state in enumerate(self._sets):
            if not state.active:
                continue
            out += self._recon_frames(index, state.responder.reply.trimmed())
            want = state.outbox.wants(index, state.responder, state.pool)
            if want is not None:
                out.append(SendFrame(want))
            state.outbox.collect(state.responder)
            if state.outbox.settled(state.responder):
                owed = state.outbox.plan(index, state.responder, self.limits.fetch_chunk)
                if owed is not None:
                    self._plan.add(owed)
            if state.run is not None and not state.run.done:
                self._plan.add(state.run.fetches())
        self._finish_with_fin = may_finish and not asks and not self._plan
        if may_finish and not self._finish_with_fin:
            self.stats.rounds += 1
            self.limits.check_rounds(self.stats.rounds)
        return out + self._next_fetch()

    def _next_fetch(self) -> list[Effect]:
        fetch = self._plan.next()
        if fetch is not None:
            return [fetch]
        for state in self._sets:
            state.responder.start_turn()
        if self._finish_with_fin:
            return [SendFrame(Fin()), *self._done()]
        self._phase = _Phase.LISTENING
        return [SendFrame(EndOfTurn())]

    def _recon_frames(
        self, index: int, ranges: list[Range], dialect: Dialect | None = None
    ) -> list[Effect]:
        form = self._form.dialect if dialect is None else dialect
        frames = SetOutbox.recon_frames(index, ranges, frame_budget(self.peer_frame_cap), form)
        return [SendFrame(f) for f in frames]

    # -- helpers ---------------------------------------------------------------------

    def _hello(self) -> Hello:
        salt, opened = self._form.hello_salt, self._opened_in_hello
        return hello_for(
            self.line, self._sets, self.limits, self.role, salt, self.peer_hello, opened
        )

    def _summarize_all(self) -> list[Effect]:
        self._summarizing = self._active_sets()
        return [LoadSummary(i) for i in sorted(self._summarizing)]

    def _load_all(self) -> list[Effect]:
        self._loading = self._active_sets()
        return [LoadSnapshot(i) for i in sorted(self._loading)]

    def _active_sets(self) -> set[int]:
        active = {i for i, s in enumerate(self._sets) if s.active}
        if not active and self.role is Role.INITIATOR:
            raise LocalProtocolError("a session needs at least one set")
        return active

    def _skippable(self, index: int) -> bool:
        """A set the peer opened with but we declined: its ranges are ignored, not an error."""
        return 0 <= index < len(self._sets) and not self._sets[index].active

    def _state(self, index: int) -> SetState:
        if not 0 <= index < len(self._sets) or not self._sets[index].active:
            raise RemoteProtocolError(
                f"frame names set #{index}, which this session does not reconcile "
                f"(sets: {self.set_names})"
            )
        return self._sets[index]

    def _runs_whole(self, state: SetState, frame: Recon) -> bool:
        return state.runs_whole(frame, self.limits.fetch_chunk)  # starts its run (0144)

    def _done(self) -> list[Effect]:
        self._phase = _Phase.DONE
        dropped = sum(len(s.pool) for s in self._sets)
        self.stats.orphans_dropped = dropped
        return [Done(orphans_dropped=dropped)]

    def _fail(self, exc: Exception, code: str) -> list[Effect]:
        self._phase = _Phase.FAILED
        return [SendFrame(Abort(code=code, reason=str(exc))), Failed(exc)]
