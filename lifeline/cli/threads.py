"""Threads named on the command line (`checkpoint --thread`, `log --thread`).

A thread is a name, or an open question: the id of an ``open`` entry, or a prefix of it of
8 hex digits or more, names its thread by the full id. ``log --thread`` records an entry on
a thread as lifeline-context 0.6.1 did: the body gets the thread's line (:func:`on_thread`)
and, without ``--parents``, the entry chains to the thread's newest entry, else to the
open question that names the thread, else the line's tips as for any write (decision 0135).
"""

from __future__ import annotations

from lifeline.entry import Entry
from lifeline.errors import ConfigError, NotFound
from lifeline.store.port import Store
from lifeline.truth.parse import on_thread
from lifeline.truth.service import thread_head

__all__ = ["log_on_thread", "open_thread"]

_HEX = frozenset("0123456789abcdef")


async def _open_entry(store: Store, ref: str) -> Entry | None:
    """The ``open`` entry ``ref`` names (its id or a prefix of 8 hex digits or more)."""
    if len(ref) < 8 or not set(ref) <= _HEX:
        return None
    try:
        found = await store.resolve(ref)
    except NotFound:
        return None
    return found if found.kind == "open" else None


def _thread_name(given: str) -> str:
    thread = " ".join(given.split())
    if not thread:
        raise ConfigError("--thread is empty; name the thread (or give an open entry's id)")
    return thread


async def open_thread(store: Store, given: str) -> tuple[str, str]:
    """(thread, title): an open question's id prefix names its thread by the full id, and
    its summary titles it; any other name is the thread and its title."""
    thread = _thread_name(given)
    found = await _open_entry(store, thread)
    if found is None:
        return thread, thread
    return found.id, " ".join(found.summary.split())[:60]


async def log_on_thread(
    store: Store, given: str, body: str, parents: tuple[str, ...] | None
) -> tuple[str, tuple[str, ...] | None]:
    """The body and parents of an entry logged on thread ``given``: ``parents`` when given
    (None: the line's default parents)."""
    thread = _thread_name(given)
    opened = await _open_entry(store, thread)
    if opened is not None:
        thread = opened.id
    body = on_thread(thread, body)
    if parents is not None:
        return body, parents
    head, truth = await thread_head(store, thread)
    if head is not None:
        return body, (head,)
    if opened is not None and not truth.is_superseded(opened.id):
        return body, (opened.id,)
    return body, None
