"""`serve`'s collection after a session walks only what is new (decision 0040)."""

from __future__ import annotations

import gc
import weakref

from lifeline_mesh.sync.memory import FULL_EVERY_S, SESSION_GC_THRESHOLD, SessionMemory


class _Cyclic:
    def __init__(self) -> None:
        self.me = self


def test_serve_freezes_survivors_and_still_frees_new_cycles() -> None:
    now = [0.0]
    trims: list[int] = []

    def trim(pad: int) -> int:
        trims.append(pad)
        return 1

    memory = SessionMemory(trim=trim, clock=lambda: now[0])
    memory.freezing = True
    try:
        memory.enter()
        memory.leave(built_snapshots=True)
        assert gc.get_freeze_count() > 0 and memory.full_collections == 1 and trims == [0]
        garbage = _Cyclic()  # made after the freeze: the next collection finds it
        gone = weakref.ref(garbage)
        del garbage
        now[0] += 1.0
        memory.enter()
        memory.leave(built_snapshots=True)
        assert gone() is None and memory.full_collections == 1  # no full one yet
        now[0] += FULL_EVERY_S
        memory.enter()
        memory.leave(built_snapshots=True)
        assert memory.full_collections == 2 and trims == [0, 0, 0]
    finally:
        gc.unfreeze()


def test_a_process_that_does_not_serve_freezes_nothing() -> None:
    memory = SessionMemory(trim=lambda pad: 1)
    before = gc.get_freeze_count()
    memory.enter()
    memory.leave(built_snapshots=True)
    assert gc.get_freeze_count() == before and memory.full_collections == 0


def test_young_collections_are_rarer_while_sessions_run() -> None:
    """A received batch lives until it is stored: while any session runs, the first
    generation waits for SESSION_GC_THRESHOLD objects; the last session out restores it.
    Cycles made meanwhile are still collected."""
    memory = SessionMemory(trim=lambda pad: 1)
    before = gc.get_threshold()
    try:
        gc.set_threshold(700, before[1], before[2])
        memory.enter()
        memory.enter()  # a second session at once
        assert gc.get_threshold() == (SESSION_GC_THRESHOLD, before[1], before[2])
        memory.leave(built_snapshots=False)
        assert gc.get_threshold()[0] == SESSION_GC_THRESHOLD  # one still runs
        garbage = _Cyclic()
        gone = weakref.ref(garbage)
        del garbage
        # objects enough (alive: the count is of objects made less those freed) for one
        keep = [_Cyclic.__new__(_Cyclic) for _ in range(2 * SESSION_GC_THRESHOLD)]
        assert gone() is None and keep
        memory.leave(built_snapshots=False)
        assert gc.get_threshold() == (700, before[1], before[2])
        gc.disable()  # collection turned off by the process: sessions leave it so
        try:
            memory.enter()
            memory.leave(built_snapshots=False)
            assert not gc.isenabled() and gc.get_threshold()[0] == 700
        finally:
            gc.enable()
    finally:
        gc.set_threshold(*before)
