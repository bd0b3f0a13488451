"""Append hooks contributed by installed packages (e.g. lifeline_mesh's signer).

The ledger never imports the layers above it. A package that wants to act on every local
write (sign it, index it) declares a factory under the ``lifeline.append_hooks`` entry-point
group; ``factory(root)`` returns a hook, or None when it has nothing to do for that project
(for instance no node identity there).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from importlib.metadata import entry_points
from pathlib import Path

from lifeline.entry import Entry
from lifeline.store.port import Store

__all__ = ["AppendHook", "load_append_hooks"]

log = logging.getLogger(__name__)

AppendHook = Callable[[Store, Sequence[Entry]], Awaitable[None]]


def load_append_hooks(root: Path) -> list[AppendHook]:
    hooks: list[AppendHook] = []
    for point in sorted(entry_points(group="lifeline.append_hooks"), key=lambda p: p.name):
        factory = point.load()
        hook = factory(root)
        if hook is not None:
            log.debug("append hook %s active for %s", point.name, root)
            hooks.append(hook)
    return hooks
