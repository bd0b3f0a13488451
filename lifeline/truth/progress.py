"""Where a long fold of the truth tables reports how far it is (the CLI draws it).

Its own module, so that installing the hook costs a command nothing: the tables' module is
imported only by the commands that read the truth.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["FoldProgress", "fold_progress", "set_fold_progress"]

FoldProgress = Callable[[int, int], None]  # (rows folded, rows to fold)
_hooks: list[FoldProgress] = []


def set_fold_progress(hook: FoldProgress | None) -> None:
    """Tell ``hook`` how a large fold advances; None stops telling."""
    _hooks[:] = [] if hook is None else [hook]


def fold_progress() -> FoldProgress | None:
    return _hooks[0] if _hooks else None
