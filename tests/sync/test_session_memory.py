"""`serve`'s collection after a session walks only what is new (decision 0040)."""

from __future__ import annotations

import gc
import weakref

from lifeline_mesh.sync.memory import FULL_EVERY_S, SessionMemory


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
