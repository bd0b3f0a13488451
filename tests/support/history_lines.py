"""A signed line with a history and a truth (shared by the shallow-join tests): what a
shallow joiner takes is the truth, not the old notes."""

from __future__ import annotations

from pathlib import Path

from lifeline.home import Home
from lifeline.ledger import Draft, Ledger
from lifeline.store.sqlite import SqliteStore
from lifeline_mesh.notary.sign import append_hook_factory

__all__ = ["fill_history_line"]


async def fill_history_line(
    root: Path, old_notes: int, *, checkpoint: bool = True, newer_decision: bool = False
) -> None:
    """``root``'s line `ledger`, signed by its node: a decision, ``old_notes`` notes, a
    checkpoint of thread billing (with ``checkpoint``), an open question, and a newer
    decision (with ``newer_decision``)."""
    hook = append_hook_factory(Home(root))
    assert hook is not None, "the root has no node identity to sign with"
    async with await SqliteStore.open(Home(root).line_path("ledger")) as store:
        ledger = Ledger(store, hooks=[hook])
        await ledger.append(Draft(kind="decision", summary="Database: PostgreSQL", agent="t"))
        for n in range(old_notes):
            await ledger.append(Draft(kind="note", summary=f"old note {n}", agent="t"))
        if checkpoint:
            body = "thread: billing\ndone:\n  - invoices\nnext:\n  - refunds"
            await ledger.append(
                Draft(kind="checkpoint", summary="checkpoint billing", body=body, agent="t")
            )
        await ledger.append(Draft(kind="open", summary="Which queue for refunds?", agent="t"))
        if newer_decision:
            await ledger.append(Draft(kind="decision", summary="Queue: Redis streams", agent="t"))
