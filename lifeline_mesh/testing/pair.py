"""Two sessions wired together in memory, with in-memory sets: exact, fast protocol runs.

Like h11's ``ConnectionPair``: frames pass through the real protobuf codec, so byte counts
are the bytes a transport would carry (payload, without HTTP/2 framing). Used by the
protocol tests, the property tests and ``bench/sync.py``; it lives outside ``recon/`` because
it uses the codec of ``wire/``, which the pure core must not import.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from lifeline_mesh.recon.frames import (
    Deliver,
    Done,
    Effect,
    Failed,
    Fetch,
    FetchRun,
    Frame,
    LoadSnapshot,
    LoadSummary,
    SendFrame,
)
from lifeline_mesh.recon.session import Role, Session, SessionLimits
from lifeline_mesh.recon.sets import ItemCodec, ParsedItem, SetSummary, Snapshot, token_of
from lifeline_mesh.wire.codec import decode_bytes, encode

__all__ = ["MemorySet", "PairResult", "SessionPair"]


class MemorySet:
    """A set held in a dict: id -> (height, version, raw, deps). Earliest version wins."""

    def __init__(self, codec: ItemCodec) -> None:
        self.codec = codec
        self.items: dict[bytes, tuple[int, bytes, bytes, tuple[bytes, ...]]] = {}
        self.snapshots_taken = 0  # sessions that needed the whole sorted set
        self.runs_read = 0  # chunks read in key order, with no snapshot

    def add_raw(self, raw: bytes) -> None:
        self.admit([self.codec.parse(raw)])

    def admit(self, items: Sequence[ParsedItem]) -> int:
        added = 0
        for item in items:
            old = self.items.get(item.id)
            if old is not None:
                if item.version < old[1]:
                    self.items[item.id] = (old[0], item.version, item.raw, old[3])
                continue
            height = 1 + max((self.items[d][0] for d in item.deps if d in self.items), default=-1)
            self.items[item.id] = (height, item.version, item.raw, item.deps)
            added += 1
        return added

    def snapshot(self) -> Snapshot:
        self.snapshots_taken += 1
        keys = sorted((h, i) for i, (h, *_rest) in self.items.items())
        tokens = [token_of(i, self.items[i][1]) for _, i in keys]
        return Snapshot([h for h, _ in keys], [i for _, i in keys], tokens)

    def summary(self) -> SetSummary:
        """What a store keeps on every write (here computed on demand)."""
        total = sum(int.from_bytes(token_of(i, v[1]), "little") for i, v in self.items.items())
        return SetSummary(len(self.items), total % (1 << 256))

    def fetch(self, ids: Sequence[bytes]) -> list[bytes]:
        return [self.items[i][2] for i in ids if i in self.items]

    def run(
        self, after: tuple[object, ...] | None, limit: int
    ) -> tuple[list[bytes], tuple[object, ...] | None]:
        """Up to ``limit`` raw items in key order after ``after``, and the last key read
        (None: the set is over): a ``FetchRun`` answered (decision 0144)."""
        self.runs_read += 1
        keys = sorted((h, i) for i, (h, *_rest) in self.items.items())
        if after is not None:
            keys = [k for k in keys if k > after]
        keys = keys[:limit]
        last = keys[-1] if len(keys) == limit else None
        return [self.items[i][2] for _h, i in keys], last

    def state(self) -> dict[bytes, bytes]:
        """id -> version: what two converged sets must agree on."""
        return {i: v[1] for i, v in self.items.items()}

    def closed(self) -> bool:
        return all(d in self.items for v in self.items.values() for d in v[3])


@dataclass(slots=True)
class PairResult:
    bytes_a_to_b: int = 0
    bytes_b_to_a: int = 0
    frames_a_to_b: int = 0
    frames_b_to_a: int = 0
    rounds: int = 0
    errors: list[Exception] = field(default_factory=list)
    done: int = 0


# A fault hook sees (direction, the in-flight queue) before each delivery and may drop,
# duplicate or reorder the queued encoded frames in place.
FaultHook = Callable[[str, deque[bytes]], None]


class SessionPair:
    """Runs one session: ``a`` initiates against ``b`` over in-memory queues."""

    def __init__(
        self,
        a: Sequence[MemorySet],
        b: Sequence[MemorySet],
        *,
        line: str = "ledger",
        names: Sequence[str] = ("entries",),
        limits: SessionLimits | None = None,
        faults: FaultHook | None = None,
        limits_b: SessionLimits | None = None,
        runs: bool = False,
    ) -> None:
        """``limits_b``, when given, are the responder's (e.g. a node without compact
        ranges); otherwise both sides use ``limits``. With ``runs``, each side sends a set
        its peer lacks whole as a run (decision 0144)."""
        self.sides = {"a": list(a), "b": list(b)}
        self.sessions = {
            "a": Session(
                Role.INITIATOR,
                line,
                [(n, s.codec) for n, s in zip(names, a, strict=True)],
                0.0,
                limits,
                runs=names if runs else (),
            ),
            "b": Session(
                Role.RESPONDER,
                line,
                [(n, s.codec) for n, s in zip(names[: len(b)], b, strict=True)],
                0.0,
                limits if limits_b is None else limits_b,
                runs=names if runs else (),
            ),
        }
        self.queues: dict[str, deque[bytes]] = {"a": deque(), "b": deque()}  # inbox of side
        self.faults = faults
        self.result = PairResult()

    def run(self, max_steps: int = 100_000) -> PairResult:
        self._apply("a", self.sessions["a"].start(0.0))
        for _ in range(max_steps):
            target = "b" if self.queues["b"] else "a" if self.queues["a"] else None
            if target is None:
                break
            if self.faults is not None:
                self.faults(target, self.queues[target])
                if not self.queues[target]:
                    continue
            frame = decode_bytes(self.queues[target].popleft())
            self._apply(target, self.sessions[target].receive(frame, 0.0))
        self.result.rounds = self.sessions["a"].stats.rounds
        return self.result

    def _apply(self, side: str, effects: list[Effect]) -> None:
        todo = deque(effects)
        session = self.sessions[side]
        while todo:
            eff = todo.popleft()
            if isinstance(eff, SendFrame):
                self._send(side, eff.frame)
            elif isinstance(eff, LoadSummary):
                summary = self.sides[side][eff.set_index].summary()
                todo.extend(session.summary_loaded(eff.set_index, summary, 0.0))
            elif isinstance(eff, LoadSnapshot):
                snap = self.sides[side][eff.set_index].snapshot()
                todo.extend(session.snapshot_loaded(eff.set_index, snap, 0.0))
            elif isinstance(eff, Fetch):
                raws = self.sides[side][eff.set_index].fetch(eff.ids)
                todo.extend(session.fetched(eff.set_index, raws, (), 0.0))
            elif isinstance(eff, FetchRun):
                raws, last = self.sides[side][eff.set_index].run(eff.after, eff.limit)
                todo.extend(session.fetched_run(eff.set_index, raws, (), last, 0.0))
            elif isinstance(eff, Deliver):
                items = [i for i in eff.items if isinstance(i, ParsedItem)]
                self.sides[side][eff.set_index].admit(items)
            elif isinstance(eff, Done):
                self.result.done += 1
            elif isinstance(eff, Failed):
                self.result.errors.append(eff.error)

    def _send(self, side: str, frame: Frame) -> None:
        data = encode(frame).SerializeToString()
        other = "b" if side == "a" else "a"
        if side == "a":
            self.result.bytes_a_to_b += len(data)
            self.result.frames_a_to_b += 1
        else:
            self.result.bytes_b_to_a += len(data)
            self.result.frames_b_to_a += 1
        self.queues[other].append(data)
